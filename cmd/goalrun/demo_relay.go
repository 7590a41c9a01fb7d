package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/goalrun/goalrun/report"
)

// goalrunModule is the module path of goalrun's own source tree.
const goalrunModule = "github.com/goalrun/goalrun"

// relayCacheKeep is how many static relay builds (one per source version)
// stay in the cache folder; older ones are removed when a new one is made.
const relayCacheKeep = 3

// staticRelay is a static goalrun for the egress relay and how it was got.
type staticRelay struct {
	path  string
	built bool          // built now (else reused from the cache)
	took  time.Duration // the build's duration
}

// isStatic reports whether the ELF file at path has no interpreter.
func isStatic(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}

// findGoalrunModule walks up from dir to the root of goalrun's own module
// (a go.mod declaring goalrunModule, with cmd/goalrun in it).
func findGoalrunModule(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if modulePath(filepath.Join(d, "go.mod")) == goalrunModule {
			if _, err := os.Stat(filepath.Join(d, "cmd", "goalrun", "main.go")); err == nil {
				return d, nil
			}
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no %s module (go.mod with cmd/goalrun) in %s or any folder above it", goalrunModule, dir)
		}
	}
}

// modulePath reads the module line of a go.mod ("" when there is none).
func modulePath(gomod string) string {
	f, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// sourceHash is a SHA-256 over what a build of the module at root reads:
// go.mod, go.sum and every non-test .go file (vendor/ included), by path
// and content, plus the toolchain's version; testdata, .git and
// node_modules are skipped.
func sourceHash(root, goVersion string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00CGO_ENABLED=0 -trimpath\x00", goVersion)
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := e.Name()
		if e.IsDir() {
			if p != root && (name == "testdata" || name == ".git" || name == "node_modules" || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !e.Type().IsRegular() {
			return nil
		}
		if name != "go.mod" && name != "go.sum" && (!strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go")) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fmt.Fprintf(h, "%s\x00%d\x00", filepath.ToSlash(rel), len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)[:8]), nil
}

// buildStaticRelay returns a static build of goalrun's module at root
// (CGO_ENABLED=0 go build -trimpath ./cmd/goalrun) from cacheDir, building
// it when this source version (sourceHash) has none yet. The build runs in
// a temporary file and is renamed into place, so concurrent demos never see
// half a binary. Errors name the go command and its output.
func buildStaticRelay(ctx context.Context, root, cacheDir string) (staticRelay, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return staticRelay{}, fmt.Errorf("no go command on PATH to build a static goalrun: %v", err)
	}
	ver, err := exec.CommandContext(ctx, goBin, "env", "GOVERSION").Output()
	if err != nil {
		return staticRelay{}, fmt.Errorf("%s env GOVERSION: %v", goBin, err)
	}
	sum, err := sourceHash(root, strings.TrimSpace(string(ver)))
	if err != nil {
		return staticRelay{}, fmt.Errorf("reading goalrun's source in %s: %v", root, err)
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return staticRelay{}, err
	}
	out := filepath.Join(cacheDir, "goalrun-relay-"+sum)
	if isStatic(out) {
		return staticRelay{path: out}, nil
	}
	tmp, err := os.CreateTemp(cacheDir, "goalrun-relay-building-")
	if err != nil {
		return staticRelay{}, err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	start := time.Now()
	cmd := exec.CommandContext(ctx, goBin, "build", "-trimpath", "-o", tmp.Name(), "./cmd/goalrun")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return staticRelay{}, fmt.Errorf("CGO_ENABLED=0 go build ./cmd/goalrun in %s: %v\n%s", root, err, bytes.TrimSpace(b))
	}
	if !isStatic(tmp.Name()) {
		return staticRelay{}, fmt.Errorf("CGO_ENABLED=0 go build ./cmd/goalrun in %s made a dynamically linked binary", root)
	}
	if err := os.Chmod(tmp.Name(), 0o755); err != nil {
		return staticRelay{}, err
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return staticRelay{}, err
	}
	pruneRelays(cacheDir, out)
	return staticRelay{path: out, built: true, took: time.Since(start)}, nil
}

// pruneRelays keeps the relayCacheKeep newest relay builds in dir (keep
// among them) and removes the rest. A removed file still in use by a
// running sandbox stays readable through its mount until that ends.
func pruneRelays(dir, keep string) {
	paths, _ := filepath.Glob(filepath.Join(dir, "goalrun-relay-*"))
	type built struct {
		path string
		mod  time.Time
	}
	var all []built
	for _, p := range paths {
		if strings.Contains(filepath.Base(p), "-building-") || p == keep {
			continue
		}
		if st, err := os.Stat(p); err == nil {
			all = append(all, built{p, st.ModTime()})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].mod.After(all[j].mod) })
	for i, b := range all {
		if i >= relayCacheKeep-1 {
			os.Remove(b.path)
		}
	}
}

// planRelay decides whether the egress relay needs a static build: not
// when the demo runs on the local host (or falls back to it because no
// Engine answers), nor when this goalrun is static; otherwise (a plain
// `go run`, which builds with cgo) it finds goalrun's source tree — the
// module the demo project belongs to — and the cache folder, and
// buildRelay makes the build. Errors are startup errors saying what to do.
func (d *demo) planRelay(ctx context.Context, src string) error {
	if d.opts.sandbox == "local" {
		return nil
	}
	_, ownErr := relayBinary()
	if ownErr == nil || (d.opts.sandbox == "auto" && !engineAnswers(ctx)) {
		return nil
	}
	d.relayWhy = ownErr
	root, err := findGoalrunModule(src)
	if err == nil {
		var base string
		if base, err = os.UserCacheDir(); err == nil {
			d.relaySrc, d.relayCache = root, filepath.Join(base, "goalrun")
			return nil
		}
	}
	return d.relayError(err)
}

// relayError is the startup error for a relay that cannot be had.
func (d *demo) relayError(err error) error {
	return &startupError{code: report.ErrBadInput,
		message: fmt.Sprintf("the demo's Docker sandbox needs a static goalrun for its egress relay: this one is not (%v), and no static one could be built: %v", d.relayWhy, err),
		suggestions: []string{
			"Build goalrun static: from the repository, CGO_ENABLED=0 go run ./cmd/goalrun demo",
			"Or run the demo on the host only: goalrun demo --sandbox local",
		}}
}

// buildRelay makes (or reuses) the static build planRelay asked for, once
// per demo, as announced one-time work of the run (ctx carries the run's
// announcer): a reused build is a look-up and stays silent.
func (d *demo) buildRelay(ctx context.Context) error {
	if d.relaySrc == "" || d.relay != "" {
		return nil
	}
	done := announceIfSlow(ctx, report.WorkRelay,
		"building a static goalrun for the egress relay from "+d.relaySrc+" (this goalrun was built with cgo; once per source version)")
	r, err := buildStaticRelay(ctx, d.relaySrc, d.relayCache)
	done(err)
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return fmt.Errorf("goalrun demo was interrupted while it built the static relay: %w", ctx.Err())
		}
		return d.relayError(err)
	}
	d.relay, d.relayBuilt = r.path, r
	return nil
}
