package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// GoCacheTarget is where a warmed Go build cache is mounted (read-only) in
// the sandbox; GoCacheMount returns the mount and its environment.
const GoCacheTarget = MountRoot + "/gocache"

// goWarmMarker marks a warmed cache folder as complete.
const goWarmMarker = ".goalrun-warm"

// goWarmSource is the package WarmGoCache tests to fill the cache: its
// imports are the standard library a typical project's tests pull in.
const goWarmSource = `package warm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestWarm(t *testing.T) {
	_ = []any{bufio.NewReader, bytes.NewReader, context.Background, json.Marshal, errors.New, fmt.Sprint, io.Copy,
		http.NewRequest, httptest.NewServer, os.Getenv, exec.Command, filepath.Join, regexp.MustCompile, sort.Strings,
		strconv.Itoa, strings.Cut, new(sync.Mutex), time.Now}
}
`

// goToolEnv is the environment the cache is warmed with, besides
// CGO_ENABLED (cgoSetting); checks must build with the same settings to
// hit it (GoCacheMount returns them).
// GODEBUG=goindex=0 turns off the go command's package index, which it
// would otherwise write into GOCACHE while loading packages and, on a
// read-only cache, fail with "[setup failed]" (seen with Go 1.26); compiled
// packages are read from the cache either way, and writes of new results
// are dropped quietly.
var goToolEnv = map[string]string{"GOFLAGS": "", "GOTOOLCHAIN": "local", "GODEBUG": "goindex=0"}

// goToolchainID identifies the Go toolchain at goroot for the warm cache's
// name: the first line of its VERSION file (what `go env GOVERSION`
// prints for a release), the go command's size and modification time and
// the platform goalrun runs on — read, not run, since running the go
// command cost 40–90 ms of every run's start (docs/benchmarks.md). A
// toolchain without a VERSION file (built from source) is asked: `go env
// GOVERSION GOOS GOARCH`.
func goToolchainID(ctx context.Context, goroot string, env []string) (string, error) {
	gobin := filepath.Join(goroot, "bin", "go")
	if b, err := os.ReadFile(filepath.Join(goroot, "VERSION")); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		if st, err := os.Stat(gobin); err == nil && strings.HasPrefix(line, "go") {
			return fmt.Sprintf("%s\n%s\n%s\n%d %d", strings.TrimSpace(line), runtime.GOOS, runtime.GOARCH, st.Size(), st.ModTime().UnixNano()), nil
		}
	}
	out, err := command(ctx, gobin, "", env, "env", "GOVERSION", "GOOS", "GOARCH")
	if err != nil {
		return "", fmt.Errorf("sandbox: go cache: %s env: %w", gobin, err)
	}
	return out, nil
}

// staleWarmingAge is how old a warming folder is when no goalrun can still
// be filling it: a warming takes minutes; one a killed goalrun left is
// never finished or removed by it.
const staleWarmingAge = 24 * time.Hour

// removeStaleWarmings removes the go-build-warming-* folders under
// cacheRoot made more than staleWarmingAge before now (errors ignored: the
// next warming tries again).
func removeStaleWarmings(cacheRoot string, now time.Time) {
	dirs, _ := filepath.Glob(filepath.Join(cacheRoot, "go-build-warming-*"))
	for _, d := range dirs {
		if st, err := os.Lstat(d); err == nil && st.IsDir() && now.Sub(st.ModTime()) > staleWarmingAge {
			os.RemoveAll(d)
		}
	}
}

// cgoSetting is CGO_ENABLED's value for cgo.
func cgoSetting(cgo bool) string {
	if cgo {
		return "1"
	}
	return "0"
}

// WarmGoCache returns a Go build cache folder under cacheRoot that holds the
// standard library compiled by the toolchain at goroot (with CGO_ENABLED=1
// when cgo, else 0: the steps must build with the same, see GoCacheMount;
// the packages a typical test imports, testing included), building it the
// first time for each toolchain version, place and cgo setting. Mounted read-only into the
// sandbox at the same GOROOT path (GoCacheMount), it saves every fresh check
// container from compiling the standard library again — Go uses an
// unwritable cache for reading and builds what it lacks — while the agent
// cannot poison it for the check. goalrun runs the toolchain here, on the
// host, in a temporary module of its own (never in the agent's tree),
// offline (GOPROXY=off).
//
// The folder's name is a hash of the toolchain's identity (goToolchainID),
// goroot and the cgo setting. Errors name the go command that failed, with
// its output.
func WarmGoCache(ctx context.Context, goroot, cacheRoot string, cgo bool) (string, error) {
	gobin := filepath.Join(goroot, "bin", "go")
	env := goEnv(goroot, "", cgo)
	id, err := goToolchainID(ctx, goroot, env)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(id + "\x00" + goroot + "\x00CGO_ENABLED=" + cgoSetting(cgo)))
	dir := filepath.Join(cacheRoot, "go-build-"+hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(filepath.Join(dir, goWarmMarker)); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(cacheRoot, 0o755); err != nil {
		return "", fmt.Errorf("sandbox: go cache: %w", err)
	}
	unlock, err := lockWarming(ctx, dir+".lock")
	if err != nil {
		return "", fmt.Errorf("sandbox: go cache: waiting for another goalrun warming %s: %w", dir, err)
	}
	defer unlock()
	if _, err := os.Stat(filepath.Join(dir, goWarmMarker)); err == nil {
		return dir, nil // warmed by another goalrun while this one waited
	}
	removeStaleWarmings(cacheRoot, time.Now())
	tmp, err := os.MkdirTemp(cacheRoot, "go-build-warming-")
	if err != nil {
		return "", fmt.Errorf("sandbox: go cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	mod := filepath.Join(tmp, "module")
	cache := filepath.Join(tmp, "cache")
	if err := os.MkdirAll(mod, 0o755); err != nil {
		return "", fmt.Errorf("sandbox: go cache: %w", err)
	}
	files := map[string]string{
		"go.mod":       "module goalrun.invalid/warm\n\ngo 1.21\n",
		"warm_test.go": goWarmSource,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(mod, name), []byte(body), 0o644); err != nil {
			return "", fmt.Errorf("sandbox: go cache: %w", err)
		}
	}
	if out, err := command(ctx, gobin, mod, goEnv(goroot, cache, cgo), "test", "-count=1", "./..."); err != nil {
		return "", fmt.Errorf("sandbox: go cache: warming with %s test: %w\n%s", gobin, err, out)
	}
	// Readable by the sandbox user, whoever built it.
	err = filepath.WalkDir(cache, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := fs.FileMode(0o644)
		if e.IsDir() {
			mode = 0o755
		}
		return os.Chmod(p, mode)
	})
	if err != nil {
		return "", fmt.Errorf("sandbox: go cache: %w", err)
	}
	if err := os.WriteFile(filepath.Join(cache, goWarmMarker), []byte(id), 0o644); err != nil {
		return "", fmt.Errorf("sandbox: go cache: %w", err)
	}
	if err := os.Rename(cache, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, goWarmMarker)); serr == nil {
			return dir, nil // another goalrun warmed it meanwhile
		}
		if errors.Is(err, fs.ErrExist) || strings.Contains(err.Error(), "not empty") {
			// A half-made folder of a process that died: replace it.
			if rerr := os.RemoveAll(dir); rerr == nil {
				err = os.Rename(cache, dir)
			}
		}
		if err != nil {
			return "", fmt.Errorf("sandbox: go cache: %w", err)
		}
	}
	return dir, nil
}

// commandWaitDelay bounds the wait for a cancelled command's output pipes
// (a process it started that still holds them).
const commandWaitDelay = 5 * time.Second

// warmPoll is how often a goalrun waiting for another's warming tries the
// lock again.
const warmPoll = 100 * time.Millisecond

// lockWarming takes an exclusive flock(2) on path (made if missing), waiting
// while another goalrun holds it, so that concurrent runs warm one cache
// once instead of each compiling the standard library side by side. The
// lock ends with the returned func, or with the process. It fails when ctx
// ends first.
func lockWarming(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("flock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(warmPoll):
		}
	}
}

// GoCacheMount returns the read-only mount of a cache WarmGoCache made
// (with cgo as given there) and the variables both step roles need to use
// it (Config.ToolEnv): GOCACHE, and the settings it was built with.
func GoCacheMount(dir string, cgo bool) (Mount, map[string]string) {
	env := map[string]string{"GOCACHE": GoCacheTarget, "CGO_ENABLED": cgoSetting(cgo)}
	for k, v := range goToolEnv {
		env[k] = v
	}
	return Mount{Source: dir, Target: GoCacheTarget, ReadOnly: true}, env
}

// goEnv is a minimal environment for running the toolchain at goroot
// offline, with cache as GOCACHE ("" leaves it unset) and cgo's setting.
func goEnv(goroot, cache string, cgo bool) []string {
	home, _ := os.UserHomeDir()
	if home == "" {
		home = os.TempDir()
	}
	env := []string{
		"PATH=" + filepath.Join(goroot, "bin") + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + home,
		"GOPROXY=off", "GO111MODULE=on", "CGO_ENABLED=" + cgoSetting(cgo),
	}
	for k, v := range goToolEnv {
		env = append(env, k+"="+v)
	}
	if cache != "" {
		env = append(env, "GOCACHE="+cache, "GOPATH="+filepath.Join(filepath.Dir(cache), "gopath"))
	}
	return env
}

func command(ctx context.Context, bin, dir string, env []string, args ...string) (string, error) {
	c := exec.CommandContext(ctx, bin, args...)
	c.Dir, c.Env = dir, env
	// The go command and the compilers it starts end with the context, and
	// the go command with goalrun (Pdeathsig): a warming left behind by a
	// killed goalrun would hold the machine's cores for minutes.
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	c.WaitDelay = commandWaitDelay
	out, err := c.CombinedOutput()
	return string(out), err
}
