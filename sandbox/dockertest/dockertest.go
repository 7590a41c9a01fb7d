// Package dockertest holds what tests of the Docker sandbox need from a real
// Engine: a client (or a skip naming the condition), the test image built
// locally with sandbox.BuildImage, the static goalrun binary for the relay,
// and workspaces owned by the sandbox user.
//
// Tests skip when no Engine answers, unless GOALRUN_REQUIRE_DOCKER=1 (CI
// sets it in .ci/run): then a missing Engine fails them.
package dockertest

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/goalrun/goalrun/sandbox"
)

// RequireEnv is the variable that turns a missing Engine from a skip into a
// failure.
const RequireEnv = "GOALRUN_REQUIRE_DOCKER"

// Client returns an Engine client configured from the environment
// (DOCKER_HOST…) with the API version negotiated, closed when the test ends.
// When no Engine answers it skips the test ("docker engine unavailable: …"),
// or fails it when GOALRUN_REQUIRE_DOCKER=1.
func Client(t testing.TB) *client.Client {
	t.Helper()
	cli, err := sandbox.NewDockerClient()
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = cli.Ping(ctx)
		cancel()
		if err != nil {
			cli.Close()
		}
	}
	if err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("docker engine unavailable and %s=1: %v", RequireEnv, err)
		}
		t.Skipf("docker engine unavailable: %v (set %s=1 to fail instead)", err, RequireEnv)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

var (
	imageOnce sync.Once
	imageRef  string
	imageErr  error
)

// Image returns the test sandbox image (sandbox.DefaultImageSpec with the
// libraries of the Claude Code binary when one is found through
// GOALRUN_CLAUDE_BIN), building it once per test process; a later process
// reuses it by its content hash.
func Image(t testing.TB, cli sandbox.DockerAPI) string {
	t.Helper()
	imageOnce.Do(func() {
		var agents []string
		if p := ClaudeBinary(); p != "" {
			agents = append(agents, p)
		}
		spec := sandbox.DefaultImageSpec(agents...)
		spec.Labels = map[string]string{"goalrun.test": "1"}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		imageRef, imageErr = sandbox.BuildImage(ctx, cli, spec)
	})
	if imageErr != nil {
		t.Fatalf("building the test image: %v", imageErr)
	}
	return imageRef
}

var (
	hostOnce  sync.Once
	hostImage string
	hostTools sandbox.HostToolchain
	hostErr   error
)

// HostTools returns the default sandbox's image (sandbox.ImageSpec's Bare
// image) and what sandbox.HostTools finds on the Engine's host with this
// process's environment, once per test process.
func HostTools(t testing.TB, cli sandbox.DockerAPI) (string, sandbox.HostToolchain) {
	t.Helper()
	hostOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		hostImage, hostErr = sandbox.BuildImage(ctx, cli, sandbox.ImageSpec{Bare: true, Labels: map[string]string{"goalrun.test": "1"}})
		if hostErr != nil {
			return
		}
		hostTools, hostErr = sandbox.HostTools(ctx, cli, sandbox.HostToolsOptions{Image: hostImage})
	})
	if hostErr != nil {
		t.Fatalf("the host tools image: %v", hostErr)
	}
	return hostImage, hostTools
}

// ClaudeBinary returns the real Claude Code binary (symlinks resolved) named
// by GOALRUN_CLAUDE_BIN, or "" when it is not set or does not exist.
func ClaudeBinary() string {
	p := os.Getenv("GOALRUN_CLAUDE_BIN")
	if p == "" {
		return ""
	}
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return ""
	}
	return r
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

// GoalrunBinary builds the static goalrun binary (CGO_ENABLED=0) once per
// test process and returns its path; it is the relay inside the sandbox.
// The build uses the module the tests run in (found from this file's path).
func GoalrunBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		module := filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
		binDir, binErr = os.MkdirTemp("", "goalrun-test-bin-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "goalrun")
		cmd := exec.Command("go", "build", "-trimpath", "-o", binPath, "./cmd/goalrun")
		cmd.Dir = module
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build ./cmd/goalrun: %v\n%s", err, out)
		}
		_ = os.Chmod(binDir, 0o755)
	})
	if binErr != nil {
		t.Fatalf("building the goalrun binary for the relay: %v", binErr)
	}
	return binPath
}

// Cleanup removes what GoalrunBinary built; call it from TestMain after
// m.Run.
func Cleanup() {
	if binDir != "" {
		os.RemoveAll(binDir)
	}
}

// Workspace returns a fresh directory owned by uid:gid (the sandbox user),
// removed when the test ends. Tests run as root on CI, and goalrun never runs
// a bind-mounted sandbox as root, so the workspace is handed to the user.
func Workspace(t testing.TB, uid, gid int) string {
	t.Helper()
	dir := t.TempDir()
	Chown(t, dir, uid, gid)
	return dir
}

// Chown gives dir and everything in it to uid:gid when the test runs as
// root; otherwise it leaves it (the files are already the caller's).
func Chown(t testing.TB, dir string, uid, gid int) {
	t.Helper()
	if os.Getuid() != 0 {
		return
	}
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
	if err != nil {
		t.Fatalf("chown %s: %v", dir, err)
	}
	// The parents of a t.TempDir are private to root; the Engine mounts the
	// path itself, which needs no traversal by the sandbox user.
}

// RunID returns a run id for a test: "goalrun-test-" and the test's name,
// lower case, made label-safe, then the test process's pid, so the same test
// run by two processes at once on one Engine never shares container names.
func RunID(t testing.TB) string {
	name := strings.ToLower(t.Name())
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	id := "goalrun-test-" + b.String()
	if len(id) > 100 {
		id = id[:100]
	}
	return id + "-" + strconv.Itoa(os.Getpid())
}

// RegistryNets returns, as single-address blocks, where hosts resolve on
// this machine, for Config.EgressAllowNets (the GOALRUN_EGRESS_ALLOW_NETS
// of a test): on a CI machine whose package registries answer at a private
// or documentation address (a mirror), the egress proxy refuses them
// unless named. Loopback, link-local, multicast and unspecified answers
// are left out (no setting can open them). A name that does not resolve
// skips the test: the registry is not reachable from here.
func RegistryNets(t testing.TB, hosts ...string) []netip.Prefix {
	t.Helper()
	var out []netip.Prefix
	for _, h := range hosts {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", h)
		cancel()
		if err != nil || len(addrs) == 0 {
			t.Skipf("the registry %s does not resolve on this machine (%v): nothing to download from", h, err)
		}
		for _, a := range addrs {
			a = a.Unmap()
			if a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsMulticast() || a.IsUnspecified() || a.IsInterfaceLocalMulticast() {
				continue
			}
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return out
}
