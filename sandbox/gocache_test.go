package sandbox_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/dockertest"
)

// TestWarmGoCacheInSandbox: a Go check in a fresh check container finds the
// standard library in the warmed, read-only cache (nothing of it is stale,
// so nothing is compiled), passes, and cannot write the cache.
func TestWarmGoCacheInSandbox(t *testing.T) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Skipf("no go toolchain on PATH: %v", err)
	}
	goroot := strings.TrimSpace(string(out))
	dockertest.Client(t) // skips or fails when no Engine answers
	// CI keeps the warmed cache between runs; elsewhere it is the test's.
	root := t.TempDir()
	if c := os.Getenv("GOALRUN_CACHE"); c != "" {
		root = filepath.Join(c, "gocache")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	dir, err := sandbox.WarmGoCache(ctx, goroot, root, false)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := sandbox.WarmGoCache(ctx, goroot, root, false); err != nil || again != dir {
		t.Fatalf("a second warm-up gave %q, %v; want the same folder reused", again, err)
	}
	mnt, env := sandbox.GoCacheMount(dir, false)
	env["PATH"] = filepath.Join(goroot, "bin") + ":" + sandbox.ImagePath

	ws := dockertest.Workspace(t, testUID, testGID)
	os.WriteFile(filepath.Join(ws, "go.mod"), []byte("module example.test/calc\n\ngo 1.21\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "calc_test.go"), []byte("package calc\n\nimport (\n\t\"fmt\"\n\t\"testing\"\n)\n\nfunc TestSum(t *testing.T) { fmt.Sprint(1 + 1) }\n"), 0o644)
	dockertest.Chown(t, ws, testUID, testGID)
	sb, _ := startDocker(t, sandbox.Config{
		Workspace: ws,
		ToolEnv:   env,
		Mounts:    []sandbox.Mount{{Source: goroot, Target: goroot, ReadOnly: true}, mnt},
	})
	for _, role := range bothRoles {
		res := run(t, sb, sandbox.Cmd{Role: role, Args: sandbox.Shell(`go list -f '{{.ImportPath}} stale={{.Stale}}' fmt testing encoding/json && go test -count=1 ./... && touch "$GOCACHE/x" 2>/dev/null && echo cache-writable; true`), Timeout: 10 * time.Minute})
		got := string(res.Stdout.Tail)
		if res.ExitCode != 0 || strings.Contains(got, "stale=true") || !strings.Contains(got, "ok  \texample.test/calc") || strings.Contains(got, "cache-writable") {
			t.Errorf("%s: exit %d stdout %q stderr %q", role, res.ExitCode, got, res.Stderr.Tail)
		}
	}
}
