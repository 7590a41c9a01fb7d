package sandbox_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"

	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/dockertest"
)

// refuseOverlay is the Engine with overlay volumes refused, as a rootless
// Engine or one without overlayfs refuses them: the overlay views goalrun
// asks for get a mount option the kernel does not know, so the real Engine
// fails to mount them ("invalid argument") and goalrun must fall back to
// the snapshot copy.
type refuseOverlay struct{ sandbox.DockerAPI }

func (r refuseOverlay) VolumeCreate(ctx context.Context, o volume.CreateOptions) (volume.Volume, error) {
	if o.DriverOpts["type"] == "overlay" {
		opts := map[string]string{}
		for k, v := range o.DriverOpts {
			opts[k] = v
		}
		opts["o"] += ",goalrun_refused_option"
		o.DriverOpts = opts
	}
	return r.DockerAPI.VolumeCreate(ctx, o)
}

// startDockerOn is startDocker on a given Engine client.
func startDockerOn(t *testing.T, cli sandbox.DockerAPI, cfg sandbox.Config) *sandbox.Docker {
	t.Helper()
	if cfg.RunID == "" {
		cfg.RunID = dockertest.RunID(t)
	}
	if cfg.Image == "" {
		cfg.Image = dockertest.Image(t, cli)
	}
	if cfg.Workspace == "" {
		cfg.Workspace = dockertest.Workspace(t, testUID, testGID)
	}
	if cfg.Lifetime == 0 {
		cfg.Lifetime = testLifetime
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := sandbox.StartDocker(ctx, cli, cfg)
	if err != nil {
		t.Fatalf("StartDocker: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := sb.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return sb
}

// runContainers lists the names of the containers labelled with run id.
func runContainers(t *testing.T, cli sandbox.DockerAPI, runID string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", sandbox.LabelRun+"="+runID))})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range cs {
		out = append(out, strings.Join(c.Names, ","))
	}
	return out
}

// runVolumes lists the names of the volumes labelled with run id.
func runVolumes(t *testing.T, cli sandbox.DockerAPI, runID string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	vs, err := cli.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", sandbox.LabelRun+"="+runID))})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, v := range vs.Volumes {
		out = append(out, v.Name)
	}
	return out
}

// writeTree writes files (slash paths → content) under dir, owned by the
// sandbox user.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dockertest.Chown(t, dir, testUID, testGID)
}

// TestCheckViewDiscardsWrites: a check sees the agent's tree as the agent
// left it and may write anywhere in it (the top folder included, as the
// sandbox user), but what it writes, deletes or leaves behind
// (__pycache__, .pytest_cache) never reaches the host, the agent or the
// next check — with the overlay view and with the snapshot copy the
// sandbox falls back to when the Engine refuses overlay volumes, in bind
// and copy mode. The posture says which view ran, and Close leaves no
// volume behind.
func TestCheckViewDiscardsWrites(t *testing.T) {
	cli := dockertest.Client(t)
	for _, tc := range []struct {
		name string
		cli  sandbox.DockerAPI
		mode sandbox.WorkspaceMode
		want string
	}{
		{"bind overlay", cli, sandbox.WorkspaceBind, sandbox.CheckViewOverlay},
		{"copy overlay", cli, sandbox.WorkspaceCopy, sandbox.CheckViewOverlay},
		{"bind copy fallback", refuseOverlay{cli}, sandbox.WorkspaceBind, sandbox.CheckViewCopy},
		{"copy copy fallback", refuseOverlay{cli}, sandbox.WorkspaceCopy, sandbox.CheckViewCopy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := dockertest.Workspace(t, testUID, testGID)
			writeTree(t, ws, map[string]string{"a.txt": "orig\n", "sub/b.txt": "b\n", "tests/test_a.py": "def test(): pass\n"})
			runID := dockertest.RunID(t)
			sb := startDockerOn(t, tc.cli, sandbox.Config{RunID: runID, Workspace: ws, WorkspaceMode: tc.mode})
			if got := sb.Posture().CheckView; got != tc.want {
				mode, why := sb.CheckView()
				t.Fatalf("posture check_view = %q, want %q (view %q: %s)", got, tc.want, mode, why)
			}

			if res := run(t, sb, sh(sandbox.RoleAgent, "echo agent > a.txt && mkdir new && echo n > new/n.txt")); res.ExitCode != 0 {
				t.Fatalf("agent step: %d %s", res.ExitCode, res.Stderr.Tail)
			}
			check := `set -e
test "$(cat a.txt)" = agent
test "$(cat new/n.txt)" = n
test "$(stat -c %u:%g .)" = 1000:1000
echo check > a.txt
rm sub/b.txt
mkdir -p __pycache__ tests/__pycache__ .pytest_cache/v
echo x > __pycache__/a.cpython-311.pyc
echo x > tests/__pycache__/test_a.cpython-311.pyc
echo x > .pytest_cache/v/lastfailed
echo x > top-level-by-product`
			if res := run(t, sb, sh(sandbox.RoleCheck, check)); res.ExitCode != 0 {
				t.Fatalf("check: exit %d: %s%s", res.ExitCode, res.Stdout.Tail, res.Stderr.Tail)
			}
			clean := `set -e
test "$(cat a.txt)" = agent
test -f sub/b.txt
test ! -e __pycache__ && test ! -e tests/__pycache__ && test ! -e .pytest_cache && test ! -e top-level-by-product`
			for _, role := range bothRoles {
				if res := run(t, sb, sh(role, clean)); res.ExitCode != 0 {
					t.Errorf("the %s step after the check sees the check's writes: exit %d %s", role, res.ExitCode, res.Stderr.Tail)
				}
			}
			if b, err := os.ReadFile(filepath.Join(ws, "a.txt")); err != nil || string(b) != "agent\n" {
				t.Errorf("host a.txt = %q, %v; want the agent's", b, err)
			}
			for _, p := range []string{"__pycache__", "tests/__pycache__", ".pytest_cache", "top-level-by-product"} {
				if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
					t.Errorf("the check's %s reached the host workspace", p)
				}
			}
			if _, err := os.Stat(filepath.Join(ws, "sub", "b.txt")); err != nil {
				t.Errorf("the check's deletion reached the host: %v", err)
			}

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := sb.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if left := runVolumes(t, cli, runID); len(left) > 0 {
				t.Errorf("Close left volumes: %q", left)
			}
			if left := runContainers(t, cli, runID); len(left) > 0 {
				t.Errorf("Close left containers: %q", left)
			}
		})
	}
}

// TestCheckViewManyChecks: more checks than one batch of prepared views
// holds each get a fresh view (the next batches are prepared on demand),
// and a finished check's volumes are gone before the run ends.
func TestCheckViewManyChecks(t *testing.T) {
	cli := dockertest.Client(t)
	runID := dockertest.RunID(t)
	sb := startDockerOn(t, cli, sandbox.Config{RunID: runID})
	for i := range 11 {
		res := run(t, sb, sh(sandbox.RoleCheck, `test ! -e mark && echo x > mark`))
		if res.ExitCode != 0 {
			t.Fatalf("check %d saw an earlier check's write: exit %d %s", i, res.ExitCode, res.Stderr.Tail)
		}
	}
	// Removals run in the background; give them a moment before counting.
	deadline := time.Now().Add(time.Minute)
	for {
		left := runVolumes(t, cli, runID)
		// At most the prepared, unused plain volumes remain (a batch and
		// the one being prepared).
		fs := 0
		for _, v := range left {
			if strings.HasSuffix(v, "-fs") {
				fs++
			}
		}
		if fs == 0 && len(left) <= 8 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("finished checks' views are not removed: %q", left)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// startUntilEvent starts `goalrun run --json` with args and returns once
// its event stream (stderr) carried an event of type typ.
func startUntilEvent(t *testing.T, bin, typ string, args ...string) *exec.Cmd {
	t.Helper()
	return startUntilNthEvent(t, bin, nil, typ, 1, args...)
}

// startUntilNthEvent is startUntilEvent waiting for the n-th event of type
// typ.
func startUntilNthEvent(t *testing.T, bin string, env []string, typ string, n int, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"run", "--json"}, args...)...)
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	seen := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var lines []string
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if strings.Contains(sc.Text(), `"type":"`+typ+`"`) {
				if n--; n > 0 {
					continue
				}
				seen <- ""
				io.Copy(io.Discard, stderr)
				return
			}
		}
		seen <- strings.Join(lines, "\n")
	}()
	select {
	case out := <-seen:
		if out != "" {
			t.Fatalf("goalrun ended before a %s event:\n%s", typ, out)
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("goalrun sent no %s event within 3 minutes", typ)
	}
	return cmd
}

// TestReapCheckViews: a goalrun killed with SIGKILL while its check #1
// runs leaves the check container, the check's overlay volume (mounted by
// that container) and its views folder on the host (check #1's folders
// and those prepared for later checks during the agent's turn); the next
// goalrun start removes all of them.
func TestReapCheckViews(t *testing.T) {
	cli := dockertest.Client(t)
	bin := dockertest.GoalrunBinary(t)
	image := dockertest.Image(t, cli)
	host, env := privateOwner()
	// The check views' folders of both runs, where this test can see them.
	views := filepath.Join(t.TempDir(), "cache")
	env = append(env, "XDG_CACHE_HOME="+views)
	views = filepath.Join(views, "goalrun", "views")
	killed := startUntilNthEvent(t, bin, env, "check_started", 2, "--sandbox", "docker", "--image", image, "--agent", "command", "--agent-bin", "touch agent-ran",
		"--until", "test -e agent-ran && sleep 600", "--max-iterations", "1", "--workdir", dockertest.Workspace(t, testUID, testGID))
	time.Sleep(2 * time.Second) // the check container runs, its view mounted
	if err := killed.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed.Wait()
	pid := killed.Process.Pid
	left := leftovers(t, cli, host, pid)
	for _, want := range []string{"container check", "-view-1-fs"} {
		if !slices.ContainsFunc(left, func(l string) bool { return strings.HasSuffix(l, want) || l == want }) {
			t.Errorf("the killed run left no %q (left: %q): the test does not prove the reap", want, left)
		}
	}
	if dirs, _ := filepath.Glob(filepath.Join(views, "goalrun-views-*", "v1", "upper")); len(dirs) != 1 {
		t.Errorf("the killed run left no views folder with check #1's: %q", dirs)
	}
	next := exec.Command(bin, "run", "--json", "--sandbox", "docker", "--image", image, "--agent", "command", "--agent-bin", "true", "--until", "true", "--workdir", dockertest.Workspace(t, testUID, testGID))
	next.Env = env
	if out, err := next.CombinedOutput(); err != nil {
		t.Fatalf("the next goalrun run failed: %v\n%s", err, out)
	}
	if left := leftovers(t, cli, host, pid); len(left) > 0 {
		t.Errorf("after the next start these leftovers remain: %q", left)
	}
	if dirs, _ := filepath.Glob(filepath.Join(views, "goalrun-views-*")); len(dirs) > 0 {
		t.Errorf("after the next run these views folders remain: %q", dirs)
	}
}

// TestCheckViewLayers: what a step on a kept view wrote (the setup step's
// node_modules, a virtualenv) shows below the agent's tree in every later
// check — the tree wins where both have a path, and a path of the tree the
// agent deleted (and the step did not write) stays deleted — on the overlay
// view and on the copy fallback, in bind and copy mode; none of it reaches
// the host or the agent, and what a check writes into it is thrown away.
func TestCheckViewLayers(t *testing.T) {
	cli := dockertest.Client(t)
	for _, tc := range []struct {
		name string
		cli  sandbox.DockerAPI
		mode sandbox.WorkspaceMode
	}{
		{"bind overlay", cli, sandbox.WorkspaceBind},
		{"copy overlay", cli, sandbox.WorkspaceCopy},
		{"bind copy fallback", refuseOverlay{cli}, sandbox.WorkspaceBind},
		{"copy copy fallback", refuseOverlay{cli}, sandbox.WorkspaceCopy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := dockertest.Workspace(t, testUID, testGID)
			writeTree(t, ws, map[string]string{"a.txt": "tree\n", "gone.txt": "tree\n", "lib/keep.txt": "tree\n"})
			runID := dockertest.RunID(t)
			sb := startDockerOn(t, tc.cli, sandbox.Config{RunID: runID, Workspace: ws, WorkspaceMode: tc.mode})
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			setup := `set -e
mkdir -p node_modules/dep lib
echo setup > node_modules/dep/index.js
echo setup > a.txt
echo setup > lib/new.txt`
			if res, err := sb.RunOnKeptView(ctx, sh(sandbox.RoleCheck, setup)); err != nil || res.ExitCode != 0 {
				t.Fatalf("setup step: %v %+v", err, res)
			}
			if res := run(t, sb, sh(sandbox.RoleAgent, `set -e; test ! -e node_modules; rm gone.txt; echo agent > a.txt`)); res.ExitCode != 0 {
				t.Fatalf("agent step (it must not see the setup's outputs): exit %d %s", res.ExitCode, res.Stderr.Tail)
			}
			check := `set -e
test "$(cat node_modules/dep/index.js)" = setup
test "$(cat lib/new.txt)" = setup
test "$(cat lib/keep.txt)" = tree
test "$(cat a.txt)" = agent
test ! -e gone.txt
echo by-product > node_modules/dep/cache`
			for i := range 2 {
				if res := run(t, sb, sh(sandbox.RoleCheck, check)); res.ExitCode != 0 {
					t.Fatalf("check %d: exit %d %s", i, res.ExitCode, res.Stderr.Tail)
				}
			}
			if res := run(t, sb, sh(sandbox.RoleCheck, `test ! -e node_modules/dep/cache`)); res.ExitCode != 0 {
				t.Errorf("a check's write into the layer's folder outlived the check")
			}
			for _, p := range []string{"node_modules", "lib/new.txt"} {
				if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
					t.Errorf("the setup step's %s reached the host", p)
				}
			}
			if err := sb.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if left := append(runVolumes(t, cli, runID), runContainers(t, cli, runID)...); len(left) > 0 {
				t.Errorf("Close left the kept layer behind: %q", left)
			}
		})
	}
}

// countViewVolumes counts the plain view volumes a sandbox creates
// (goalrun-<run>-view-<n>).
type countViewVolumes struct {
	sandbox.DockerAPI
	n *atomic.Int32
}

func (c countViewVolumes) VolumeCreate(ctx context.Context, o volume.CreateOptions) (volume.Volume, error) {
	if i := strings.LastIndex(o.Name, "-view-"); i >= 0 && !strings.ContainsAny(o.Name[i+len("-view-"):], "-abcdefghijklmnopqrstuvwxyz") {
		c.n.Add(1)
	}
	return c.DockerAPI.VolumeCreate(ctx, o)
}

// TestCheckViewOnlyWhatIsNeeded: a run whose check #0 passes prepares one
// view (the setup step's too when setup is on), not a batch, and asks the
// Engine for no plain volume (bind mode: goalrun makes the folders); the
// first agent step has the next batch prepared for the checks that follow.
func TestCheckViewOnlyWhatIsNeeded(t *testing.T) {
	cli := dockertest.Client(t)
	for _, tc := range []struct {
		name       string
		setup      bool
		wantAtZero int32
	}{
		{"no setup", false, 1},
		{"setup on", true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			cfg := sandbox.Config{}
			if tc.setup {
				cfg = setupConfig(t)
			}
			sb := startDockerOn(t, countViewVolumes{cli, &n}, cfg)
			if res := run(t, sb, sh(sandbox.RoleCheck, "echo x > by-product")); res.ExitCode != 0 {
				t.Fatalf("check #0: exit %d %s", res.ExitCode, res.Stderr.Tail)
			}
			if got := int32(sb.ViewsPrepared()); got != tc.wantAtZero {
				t.Errorf("%d views prepared for check #0, want %d", got, tc.wantAtZero)
			}
			// In bind mode goalrun makes the views' folders itself: no
			// plain volume is asked of the Engine.
			if got := n.Load(); got != 0 {
				t.Errorf("%d plain view volumes created, want none", got)
			}
			if res := run(t, sb, sh(sandbox.RoleAgent, "true")); res.ExitCode != 0 {
				t.Fatalf("agent step: exit %d %s", res.ExitCode, res.Stderr.Tail)
			}
			if res := run(t, sb, sh(sandbox.RoleCheck, "test ! -e by-product")); res.ExitCode != 0 {
				t.Fatalf("check #1 saw check #0's write: exit %d %s", res.ExitCode, res.Stderr.Tail)
			}
			if got, want := int32(sb.ViewsPrepared()), tc.wantAtZero+4; got != want {
				t.Errorf("%d views prepared after an agent step and check #1, want %d (one batch ahead)", got, want)
			}
		})
	}
}
