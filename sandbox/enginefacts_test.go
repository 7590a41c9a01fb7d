package sandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/api/types/volume"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/dockertest"
)

// countProbes counts the overlay probes a start makes (the probe's volume
// is the only one named …-view-probe-N).
type countProbes struct {
	sandbox.DockerAPI
	n *atomic.Int32
}

func (c countProbes) VolumeCreate(ctx context.Context, o volume.CreateOptions) (volume.Volume, error) {
	if strings.Contains(o.Name, "-view-probe-") {
		c.n.Add(1)
	}
	return c.DockerAPI.VolumeCreate(ctx, o)
}

// startWithFacts is startDockerOn with the Engine facts kept in facts.
func startWithFacts(t *testing.T, cli sandbox.DockerAPI, cfg sandbox.Config, facts sandbox.EngineFacts) *sandbox.Docker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg.RunID, cfg.Image, cfg.Lifetime = dockertest.RunID(t), dockertest.Image(t, cli), testLifetime
	sb, err := sandbox.StartDocker(ctx, cli, cfg, sandbox.WithEngineFacts(facts))
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

// factFiles lists the facts stored in dir.
func factFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "overlay-view-*.json"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestCheckViewRemembersOverlay: the first start on an Engine probes
// whether it mounts overlay views and remembers the answer; the next start
// skips the probe and its checks still run on a view whose writes are
// thrown away. A remembered answer that is wrong (the Engine now refuses
// overlay volumes, or the fact was planted) costs no check: the check
// whose view will not mount has the fact forgotten, the Engine probed
// again, and runs on the snapshot copy, which the posture then names.
func TestCheckViewRemembersOverlay(t *testing.T) {
	cli := dockertest.Client(t)
	facts := sandbox.EngineFacts{Dir: filepath.Join(t.TempDir(), "engines")}
	discards := `set -e
test ! -e by-product
echo x > by-product
test "$(cat a.txt)" = orig`

	var probes atomic.Int32
	ws := dockertest.Workspace(t, testUID, testGID)
	writeTree(t, ws, map[string]string{"a.txt": "orig\n"})

	sb := startWithFacts(t, countProbes{cli, &probes}, sandbox.Config{Workspace: ws}, facts)
	if got := sb.Posture().CheckView; got != sandbox.CheckViewOverlay {
		t.Fatalf("first start: check_view %q, want overlay", got)
	}
	if n := probes.Load(); n != 1 {
		t.Errorf("first start made %d overlay probes, want 1", n)
	}
	if got := factFiles(t, facts.Dir); len(got) != 1 {
		t.Fatalf("first start stored facts %q, want one overlay fact", got)
	}

	for _, tc := range []struct {
		name       string
		cli        sandbox.DockerAPI
		wantProbes int32
		wantView   string
		wantFact   bool
	}{
		{"remembered overlay", countProbes{cli, &probes}, 0, sandbox.CheckViewOverlay, true},
		{"wrong fact re-probed", refuseOverlay{countProbes{cli, &probes}}, 1, sandbox.CheckViewCopy, false},
		// Without a fact, a refused overlay is probed on the folders goalrun
		// made, then on the Engine's volumes (a cache folder on a file
		// system an overlay cannot take as its upper would fail only the
		// first).
		{"no fact after the copy", refuseOverlay{countProbes{cli, &probes}}, 2, sandbox.CheckViewCopy, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			probes.Store(0)
			sb := startWithFacts(t, tc.cli, sandbox.Config{Workspace: ws}, facts)
			for i := range 2 {
				if res := run(t, sb, sh(sandbox.RoleCheck, discards)); res.ExitCode != 0 {
					t.Fatalf("check %d: exit %d: %s%s", i, res.ExitCode, res.Stdout.Tail, res.Stderr.Tail)
				}
			}
			if _, err := os.Lstat(filepath.Join(ws, "by-product")); err == nil {
				t.Fatal("a check's write reached the host workspace")
			}
			if n := probes.Load(); n != tc.wantProbes {
				t.Errorf("%d overlay probes, want %d", n, tc.wantProbes)
			}
			if got := sb.Posture().CheckView; got != tc.wantView {
				t.Errorf("posture check_view %q after the checks, want %q", got, tc.wantView)
			}
			if got := len(factFiles(t, facts.Dir)) == 1; got != tc.wantFact {
				t.Errorf("overlay fact stored: %v, want %v", got, tc.wantFact)
			}
		})
	}

	// The setup step is the first container on a view when it runs: a
	// wrong fact is re-probed there too, and the step runs on the copy.
	t.Run("fact stored again", func(t *testing.T) {
		startWithFacts(t, cli, sandbox.Config{Workspace: ws}, facts)
		if len(factFiles(t, facts.Dir)) != 1 {
			t.Fatal("the overlay fact was not stored again")
		}
	})
	t.Run("wrong fact re-probed by the setup step", func(t *testing.T) {
		cfg := setupConfig(t)
		cfg.Workspace = ws
		sb := startWithFacts(t, refuseOverlay{cli}, cfg, facts)
		if r := run(t, sb, sh(sandbox.RoleSetup, `mkdir -p "$X_DEPS" && echo dep > "$X_DEPS/d" && echo x > by-product`)); r.ExitCode != 0 {
			t.Fatalf("setup: exit %d %s", r.ExitCode, r.Stderr.Tail)
		}
		r := run(t, sb, sh(sandbox.RoleCheck, `cat "$X_DEPS/d"; cat a.txt`))
		if got := string(r.Stdout.Tail); r.ExitCode != 0 || got != "dep\norig\n" {
			t.Errorf("the check: exit %d, sees %q %s", r.ExitCode, got, r.Stderr.Tail)
		}
		if _, err := os.Lstat(filepath.Join(ws, "by-product")); err == nil {
			t.Error("the setup step's write reached the host workspace")
		}
		if got := sb.Posture().CheckView; got != sandbox.CheckViewCopy {
			t.Errorf("posture check_view %q, want copy", got)
		}
		if len(factFiles(t, facts.Dir)) != 0 {
			t.Error("the wrong overlay fact is still stored")
		}
	})
}

// TestEngineFacts: a fact is read back only by the same Engine (ID,
// version, kernel, storage driver, data root…) about the same thing, and
// not after MaxAge; a file that is not a fact reads as none; the folder is
// the user's alone.
func TestEngineFacts(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	engine := sandbox.FactsEngine{ID: "ABCD", ServerVersion: "20.10.24", KernelVersion: "6.1.0", Driver: "overlay2", DockerRootDir: "/var/lib/docker"}
	for _, tc := range []struct {
		name  string
		read  sandbox.FactsEngine
		key   string
		later time.Duration
		spoil bool
		want  bool
	}{
		{"same engine and key", engine, "k", 0, false, true},
		{"another key", engine, "other", 0, false, false},
		{"another engine", func() sandbox.FactsEngine { e := engine; e.ID = "EFGH"; return e }(), "k", 0, false, false},
		{"upgraded engine", func() sandbox.FactsEngine { e := engine; e.ServerVersion = "24.0.7"; return e }(), "k", 0, false, false},
		{"another kernel", func() sandbox.FactsEngine { e := engine; e.KernelVersion = "6.8.0"; return e }(), "k", 0, false, false},
		{"another storage driver", func() sandbox.FactsEngine { e := engine; e.Driver = "vfs"; return e }(), "k", 0, false, false},
		{"another data root", func() sandbox.FactsEngine { e := engine; e.DockerRootDir = "/srv/docker"; return e }(), "k", 0, false, false},
		{"not yet stale", engine, "k", sandbox.DefaultFactAge - time.Minute, false, true},
		{"stale", engine, "k", sandbox.DefaultFactAge + time.Minute, false, false},
		{"spoiled file", engine, "k", 0, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "engines")
			f := sandbox.EngineFacts{Dir: dir, Now: clock}
			if err := sandbox.StoreFact(f, engine, "k", []string{"/usr"}); err != nil {
				t.Fatal(err)
			}
			if tc.spoil {
				files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
				for _, p := range files {
					if err := os.WriteFile(p, []byte("{not json"), 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			later := f
			later.Now = func() time.Time { return now.Add(tc.later) }
			var got []string
			ok := sandbox.LoadFact(later, tc.read, tc.key, &got)
			if ok != tc.want || ok && (len(got) != 1 || got[0] != "/usr") {
				t.Errorf("load = %v %q, want %v", ok, got, tc.want)
			}
			st, err := os.Stat(dir)
			if err != nil || st.Mode().Perm() != 0o700 {
				t.Errorf("facts folder mode %v, %v; want 0700", st.Mode().Perm(), err)
			}
			sandbox.ForgetFact(f, engine, "k")
			if sandbox.LoadFact(f, engine, "k", &got) {
				t.Error("a forgotten fact is still read")
			}
		})
	}
	if sandbox.LoadFact(sandbox.EngineFacts{}, engine, "k", new([]string)) {
		t.Error("the zero EngineFacts read a fact")
	}
}

// TestStartDockerConfirmsInfo: StartDocker started from a given info (a
// remembered one) reads the live one before it creates anything; an
// Engine that is not the one given ends the start with ErrEngineChanged
// and nothing of the run on the Engine, and the same Engine starts as
// usual.
func TestStartDockerConfirmsInfo(t *testing.T) {
	cli := dockertest.Client(t)
	live, err := cli.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	liveCheck := sandbox.WithEngineInfoCheck(func(ctx context.Context) (system.Info, error) { return cli.Info(ctx) })
	stale := live
	stale.DockerRootDir = "/srv/elsewhere"
	runID := dockertest.RunID(t)
	cfg := sandbox.Config{RunID: runID, Workspace: dockertest.Workspace(t, testUID, testGID), Image: dockertest.Image(t, cli), Lifetime: testLifetime}
	if _, err := sandbox.StartDocker(t.Context(), cli, cfg, sandbox.WithEngineInfo(stale), liveCheck); !errors.Is(err, sandbox.ErrEngineChanged) {
		t.Fatalf("StartDocker on a stale info: %v, want ErrEngineChanged", err)
	}
	if left := append(runContainers(t, cli, runID), runVolumes(t, cli, runID)...); len(left) > 0 {
		t.Errorf("the refused start created %q", left)
	}
	sb, err := sandbox.StartDocker(t.Context(), cli, cfg, sandbox.WithEngineInfo(live), liveCheck)
	if err != nil {
		t.Fatalf("StartDocker on the live info: %v", err)
	}
	if err := sb.Close(t.Context()); err != nil {
		t.Fatal(err)
	}

	// The live info is awaited beside the start, not before it: here it
	// answers only once the agent container exists, and StartDocker
	// still returns only after it answered.
	created := make(chan struct{})
	answered := false
	slowCheck := sandbox.WithEngineInfoCheck(func(ctx context.Context) (system.Info, error) {
		select {
		case <-created:
		case <-time.After(30 * time.Second):
			return system.Info{}, errors.New("the start waited for the live info before creating its containers")
		}
		answered = true
		return cli.Info(ctx)
	})
	watch := onCreate{DockerAPI: cli, created: func(name string) {
		if strings.HasSuffix(name, "-agent") {
			close(created)
		}
	}}
	cfg.RunID = dockertest.RunID(t)
	sb, err = sandbox.StartDocker(t.Context(), watch, cfg, sandbox.WithEngineInfo(live), slowCheck)
	if err != nil {
		t.Fatalf("StartDocker with the live info answering late: %v", err)
	}
	if !answered {
		t.Error("StartDocker returned before the live info answered")
	}
	if err := sb.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// onCreate calls created with the name of every container created.
type onCreate struct {
	sandbox.DockerAPI
	created func(name string)
}

func (o onCreate) ContainerCreate(ctx context.Context, cfg *container.Config, hc *container.HostConfig, nc *network.NetworkingConfig, p *ocispec.Platform, name string) (container.CreateResponse, error) {
	r, err := o.DockerAPI.ContainerCreate(ctx, cfg, hc, nc, p, name)
	if err == nil {
		o.created(name)
	}
	return r, err
}

// TestChangedEngineStoresNoFact: a start from a remembered info stores
// what it probed (the overlay view) under that info's identity only once
// the live info confirmed it: an Engine that is not the remembered one
// (another Engine now behind the same address) never has its answers
// kept as the remembered Engine's.
func TestChangedEngineStoresNoFact(t *testing.T) {
	cli := dockertest.Client(t)
	live, err := cli.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	other := live
	other.ID = "another-engine-" + live.ID
	liveCheck := sandbox.WithEngineInfoCheck(func(ctx context.Context) (system.Info, error) { return cli.Info(ctx) })
	for _, tc := range []struct {
		name      string
		given     system.Info
		wantErr   error
		wantFacts int
	}{
		{name: "the remembered Engine", given: live, wantFacts: 1},
		{name: "another Engine at the same address", given: other, wantErr: sandbox.ErrEngineChanged, wantFacts: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			facts := sandbox.EngineFacts{Dir: filepath.Join(t.TempDir(), "engines")}
			cfg := sandbox.Config{RunID: dockertest.RunID(t), Workspace: dockertest.Workspace(t, testUID, testGID), Image: dockertest.Image(t, cli), Lifetime: testLifetime}
			sb, err := sandbox.StartDocker(t.Context(), cli, cfg, sandbox.WithEngineInfo(tc.given), liveCheck, sandbox.WithEngineFacts(facts))
			if sb != nil {
				if cerr := sb.Close(t.Context()); cerr != nil {
					t.Error(cerr)
				}
			}
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("StartDocker: %v, want %v", err, tc.wantErr)
			}
			if got := factFiles(t, facts.Dir); len(got) != tc.wantFacts {
				t.Errorf("stored facts %q, want %d", got, tc.wantFacts)
			}
		})
	}
}
