package sandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/dockertest"
)

// recordCreates is the Engine with the names of the volumes and containers
// goalrun creates recorded.
type recordCreates struct {
	sandbox.DockerAPI
	mu    sync.Mutex
	names []string
}

func (r *recordCreates) VolumeCreate(ctx context.Context, o volume.CreateOptions) (volume.Volume, error) {
	r.mu.Lock()
	r.names = append(r.names, "volume "+o.Name)
	r.mu.Unlock()
	return r.DockerAPI.VolumeCreate(ctx, o)
}

func (r *recordCreates) ContainerCreate(ctx context.Context, c *container.Config, hc *container.HostConfig, nc *network.NetworkingConfig, p *ocispec.Platform, name string) (container.CreateResponse, error) {
	r.mu.Lock()
	r.names = append(r.names, "container "+name)
	r.mu.Unlock()
	return r.DockerAPI.ContainerCreate(ctx, c, hc, nc, p, name)
}

func (r *recordCreates) created() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.names...)
}

// TestCheckViewHostFolders: in bind mode goalrun makes the check views'
// folders and the sanitized git configs itself, in a per-run folder of its
// cache folder — no plain volume, no preparing container — and a hostile
// check cannot make that folder outlive the run: what it leaves in its
// view (folders without permissions, links out of the tree, a fifo, a
// setuid file) is gone after the check, and the run's folder after Close.
// The agent never sees the folder, no mount may show it, and the git
// configs there stay read-only for agent and check.
func TestCheckViewHostFolders(t *testing.T) {
	cache := t.TempDir()
	lookup := func(k string) (string, bool) {
		if k == "XDG_CACHE_HOME" {
			return cache, true
		}
		return os.LookupEnv(k)
	}
	viewsBase := filepath.Join(cache, "goalrun", "views")
	cli := &recordCreates{DockerAPI: dockertest.Client(t)}
	ws := dockertest.Workspace(t, testUID, testGID)
	writeTree(t, ws, map[string]string{
		"a.txt":       "orig\n",
		".git/HEAD":   "ref: refs/heads/main\n",
		".git/config": "[core]\n\tbare = false\n[http \"https://github.com/\"]\n\textraheader = AUTHORIZATION: basic c2VjcmV0\n",
	})
	runID := dockertest.RunID(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := sandbox.StartDocker(ctx, cli, sandbox.Config{RunID: runID, Workspace: ws, WorkspaceMode: sandbox.WorkspaceBind,
		Image: dockertest.Image(t, cli), Lifetime: testLifetime}, sandbox.WithDockerHostEnv(lookup))
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = sb.Close(context.Background())
		}
	})
	if got := sb.Posture().CheckView; got != sandbox.CheckViewOverlay {
		t.Fatalf("check_view %q, want overlay", got)
	}
	runDirs, _ := filepath.Glob(filepath.Join(viewsBase, "goalrun-views-*"))
	if len(runDirs) != 1 {
		t.Fatalf("run folders in %s: %q, want one", viewsBase, runDirs)
	}
	if st, err := os.Stat(runDirs[0]); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("the run's views folder: %v %v, want mode 0700", st.Mode(), err)
	}

	hostile := `set -e
test "$(cat a.txt)" = orig
! grep -q extraheader .git/config
! echo x >> .git/config 2>/dev/null
mkdir -p locked/inner && echo x > locked/inner/f && chmod 000 locked/inner locked
ln -s / rootlink && ln -s /etc/passwd passwdlink
mkfifo fifo
echo x > suid && chmod 4755 suid
echo by-product > top-level`
	if res := run(t, sb, sh(sandbox.RoleCheck, hostile)); res.ExitCode != 0 {
		t.Fatalf("check: exit %d: %s%s", res.ExitCode, res.Stdout.Tail, res.Stderr.Tail)
	}
	agent := `set -e
! grep -q extraheader .git/config
! echo x >> .git/config 2>/dev/null
test ! -e top-level && test ! -e locked && test ! -e rootlink
test ! -e ` + shellQuote(viewsBase) + `
test ! -e ` + shellQuote(cache)
	if res := run(t, sb, sh(sandbox.RoleAgent, agent)); res.ExitCode != 0 {
		t.Fatalf("agent step: exit %d: %s%s", res.ExitCode, res.Stdout.Tail, res.Stderr.Tail)
	}
	// A second check gets a fresh view: nothing of the first one's.
	if res := run(t, sb, sh(sandbox.RoleCheck, "test ! -e top-level && test ! -e locked && test ! -e fifo")); res.ExitCode != 0 {
		t.Fatalf("the next check sees the last one's writes: %s", res.Stderr.Tail)
	}
	for _, name := range cli.created() {
		if strings.Contains(name, "view-prep") || strings.HasPrefix(name, "volume ") && !strings.HasSuffix(name, "-fs") && strings.Contains(name, "-view-") && !strings.Contains(name, "-view-probe-") || strings.HasSuffix(name, "-git") {
			t.Errorf("created %s: the views' folders should be goalrun's own", name)
		}
	}

	cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
	defer ccancel()
	closed = true
	if err := sb.Close(cctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Lstat(runDirs[0]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Close left the run's views folder: %v", err)
	}
	if left := runVolumes(t, cli, runID); len(left) > 0 {
		t.Errorf("Close left volumes: %q", left)
	}
	if b, err := os.ReadFile(filepath.Join(ws, ".git", "config")); err != nil || !strings.Contains(string(b), "extraheader") {
		t.Errorf("the host's git config changed: %q %v", b, err)
	}

	// No mount may show the views' folder (or what holds it).
	for _, src := range []string{viewsBase, runDirs[0]} {
		if err := os.MkdirAll(src, 0o700); err != nil {
			t.Fatal(err)
		}
		_, err := sandbox.StartDocker(ctx, cli, sandbox.Config{RunID: dockertest.RunID(t), Workspace: ws, Image: dockertest.Image(t, cli), Lifetime: testLifetime,
			Mounts: []sandbox.Mount{{Source: src, Target: "/mnt/v", ReadOnly: true}}}, sandbox.WithDockerHostEnv(lookup))
		if err == nil || !strings.Contains(err.Error(), "check views") {
			t.Errorf("a mount of %s: %v, want a refusal naming the check views", src, err)
		}
	}
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
