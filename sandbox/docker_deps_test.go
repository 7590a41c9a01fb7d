package sandbox_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"

	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/dockertest"
)

// TestDockerSetupKeptDeps: with SetupConfig.Key the deps volume outlives
// the run (Close and Reap spare it) once every setup step exited 0, and the
// next run with the same key runs no setup step — not even one the agent
// rewrote in the tree — and mounts it read-only for checks and the agent,
// who can neither write nor link into it. A run whose step failed, a
// different key, or a deps volume removed behind goalrun's back means the
// steps run again.
func TestDockerSetupKeptDeps(t *testing.T) {
	cli := dockertest.Client(t)
	ws := dockertest.Workspace(t, testUID, testGID)
	key := "test-" + dockertest.RunID(t)
	var made []string
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, v := range made {
			_ = cli.VolumeRemove(ctx, v, true)
			_ = cli.VolumeRemove(ctx, v+"-ready", true)
		}
	})
	// A run: start, the given setup steps, a check, the agent's attempts
	// on the deps volume; it returns the setup results and the volume.
	type runOut struct {
		setup  []sandbox.Result
		check  string
		agent  string
		volume string
	}
	runOnce := func(t *testing.T, key string, steps ...string) runOut {
		t.Helper()
		cfg := setupConfig(t)
		cfg.Workspace = ws
		cfg.Setup.Key, cfg.Setup.Steps = key, len(steps)
		sb, _ := startDocker(t, cfg)
		var o runOut
		o.volume = sb.DepsVolume()
		if !slices.Contains(made, o.volume) {
			made = append(made, o.volume)
		}
		for _, s := range steps {
			o.setup = append(o.setup, run(t, sb, sandbox.Cmd{Role: sandbox.RoleSetup, Args: sandbox.Shell(s), Stdout: &strings.Builder{}}))
		}
		o.check = string(run(t, sb, sh(sandbox.RoleCheck, `cat "$X_DEPS/pkg/file" 2>/dev/null || echo absent; cat "$X_DEPS/ran" 2>/dev/null`)).Stdout.Tail)
		o.agent = string(run(t, sb, sh(sandbox.RoleAgent,
			`echo poisoned > "$X_DEPS/pkg/file" 2>/dev/null && echo WROTE; `+
				`ln -s /workspace "$X_DEPS/link" 2>/dev/null && echo LINKED; `+
				`mkdir "$X_DEPS/new" 2>/dev/null && echo MKDIR; `+
				// code the next run's setup step would run, if it ran
				`printf 'echo PLANTED-RAN > "$X_DEPS/ran"\n' > plant.sh; true`)).Stdout.Tail)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if p := sb.Posture(); !slices.Contains(p.ExtraMounts, sandbox.DepsDir+":ro") {
			t.Errorf("posture extra_mounts %q lacks %s:ro", p.ExtraMounts, sandbox.DepsDir)
		}
		if err := sb.Close(ctx); err != nil {
			t.Fatal(err)
		}
		return o
	}
	exists := func(name string) bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := cli.VolumeInspect(ctx, name)
		return err == nil
	}
	fill := `set -e; mkdir -p "$X_DEPS/pkg"; echo prepared > "$X_DEPS/pkg/file"`
	plant := `if [ -f plant.sh ]; then sh plant.sh; fi`

	first := runOnce(t, key, fill, plant)
	if first.setup[0].Reused || first.setup[0].ExitCode != 0 || first.check != "prepared\n" {
		t.Fatalf("first run: setup %+v, check %q", first.setup, first.check)
	}
	for _, breach := range []string{"WROTE", "LINKED", "MKDIR"} {
		if strings.Contains(first.agent, breach) {
			t.Errorf("the agent changed the kept deps volume (%s)", breach)
		}
	}
	if !strings.HasPrefix(first.volume, "goalrun-deps-") || !exists(first.volume) || !exists(first.volume+"-ready") {
		t.Fatalf("the kept deps volume %q or its ready mark did not outlive the run", first.volume)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := sandbox.Reap(ctx, cli, 0); err != nil {
		t.Logf("Reap: %v", err)
	}
	if !exists(first.volume) || !exists(first.volume+"-ready") {
		t.Fatalf("Reap removed the kept deps volume")
	}

	second := runOnce(t, key, fill, plant)
	if second.volume != first.volume {
		t.Errorf("the same key mounts %q, then %q", first.volume, second.volume)
	}
	for i, r := range second.setup {
		if !r.Reused || r.ExitCode != 0 {
			t.Errorf("second run, setup step %d: %+v, want reused", i+1, r)
		}
	}
	if second.check != "prepared\n" {
		t.Errorf("second run's check sees %q: the planted setup code ran or the volume changed", second.check)
	}
	for _, breach := range []string{"WROTE", "LINKED", "MKDIR"} {
		if strings.Contains(second.agent, breach) {
			t.Errorf("the agent changed the reused deps volume (%s)", breach)
		}
	}

	// Another key: another volume, prepared afresh; its failed step
	// leaves it unmarked, so the next run prepares it again, on an empty
	// volume: nothing the failed steps left there is trusted.
	other := key + "-other"
	failed := runOnce(t, other, fill, `echo leftover > "$X_DEPS/pkg/file"; exit 3`)
	if failed.volume == first.volume || failed.setup[0].Reused || failed.setup[1].ExitCode != 3 {
		t.Fatalf("another key: volume %q, setup %+v", failed.volume, failed.setup)
	}
	if exists(failed.volume + "-ready") {
		t.Errorf("a run whose setup step failed marked %s prepared", failed.volume)
	}
	again := runOnce(t, other, "true")
	if again.setup[0].Reused {
		t.Errorf("a volume whose preparation failed was reused")
	}
	if again.check != "absent\n" {
		t.Errorf("the run after a failed setup sees %q: what the failed steps left was kept", again.check)
	}
	// One step of two that never ran (the run stopped): not marked.
	cfg := setupConfig(t)
	cfg.Workspace = ws
	cfg.Setup.Key, cfg.Setup.Steps = key+"-cut", 2
	sb, _ := startDocker(t, cfg)
	made = append(made, sb.DepsVolume())
	run(t, sb, sandbox.Cmd{Role: sandbox.RoleSetup, Args: sandbox.Shell(fill)})
	run(t, sb, sh(sandbox.RoleCheck, "true"))
	if err := sb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if exists(sb.DepsVolume() + "-ready") {
		t.Errorf("a run that ran 1 of its 2 setup steps marked the volume prepared")
	}

	// Another workspace (another repository) with the same key never
	// mounts this one's volume: its build cache holds the tree's code.
	cfg = setupConfig(t)
	cfg.Workspace = dockertest.Workspace(t, testUID, testGID)
	cfg.Setup.Key, cfg.Setup.Steps = key, 1
	sb, _ = startDocker(t, cfg)
	made = append(made, sb.DepsVolume())
	if sb.DepsVolume() == first.volume {
		t.Errorf("another workspace with the same key mounts %s", first.volume)
	}
	if err := sb.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// The deps volume removed behind goalrun's back (its mark stays):
	// the next run makes a new one and prepares it.
	if err := cli.VolumeRemove(ctx, first.volume, true); err != nil {
		t.Fatal(err)
	}
	fresh := runOnce(t, key, fill)
	if fresh.setup[0].Reused || fresh.check != "prepared\n" {
		t.Errorf("after the volume was removed: setup %+v, check %q", fresh.setup, fresh.check)
	}
}

// onlyLabelled shows pruneKeptDeps the kept deps volumes of one test only.
type onlyLabelled struct {
	sandbox.DockerAPI
	prefix string
}

func (o onlyLabelled) VolumeList(ctx context.Context, opts volume.ListOptions) (volume.ListResponse, error) {
	r, err := o.DockerAPI.VolumeList(ctx, opts)
	var keep []*volume.Volume
	for _, v := range r.Volumes {
		if strings.HasPrefix(v.Labels[sandbox.LabelDeps], o.prefix) {
			keep = append(keep, v)
		}
	}
	r.Volumes = keep
	return r, err
}

// TestDockerPruneKeptDeps: the Engine keeps at most the given number of
// prepared deps volumes; older prepared ones go with their marks, an
// unprepared one goes once stale, and one a container uses stays.
func TestDockerPruneKeptDeps(t *testing.T) {
	cli := dockertest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prefix := "prune-" + dockertest.RunID(t)
	mk := func(key string, ready bool) string {
		name := "goalrun-deps-" + key
		labels := map[string]string{sandbox.LabelDeps: key, sandbox.LabelDepsID: "x"}
		if _, err := cli.VolumeCreate(ctx, volume.CreateOptions{Name: name, Labels: labels}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cli.VolumeRemove(context.Background(), name, true) })
		if ready {
			if _, err := cli.VolumeCreate(ctx, volume.CreateOptions{Name: name + "-ready", Labels: labels}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cli.VolumeRemove(context.Background(), name+"-ready", true) })
		}
		return name
	}
	for i := 0; i < 3; i++ {
		mk(prefix+"-"+string(rune('a'+i)), true)
	}
	unready := mk(prefix+"-u", false)
	inUse := mk(prefix+"-z", true)
	c, err := cli.ContainerCreate(ctx, &container.Config{Image: dockertest.Image(t, cli), Cmd: []string{"true"},
		Labels: map[string]string{sandbox.LabelRun: dockertest.RunID(t)}},
		&container.HostConfig{Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: inUse, Target: "/deps"}}}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true}) })

	// The volume in use cannot go: an error when it is not the newest.
	_ = sandbox.PruneKeptDeps(ctx, onlyLabelled{cli, prefix}, 1, time.Now().Add(48*time.Hour))
	vs, lerr := cli.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", sandbox.LabelDeps))})
	if lerr != nil {
		t.Fatal(lerr)
	}
	var left, marks []string
	for _, v := range vs.Volumes {
		if !strings.HasPrefix(v.Labels[sandbox.LabelDeps], prefix) {
			continue
		}
		if strings.HasSuffix(v.Name, "-ready") {
			marks = append(marks, v.Name)
		} else {
			left = append(left, v.Name)
		}
	}
	if slices.Contains(left, unready) {
		t.Errorf("a stale unprepared volume stayed: %q", left)
	}
	if !slices.Contains(left, inUse) || !slices.Contains(marks, inUse+"-ready") {
		t.Errorf("a volume in use (or its mark) was removed: volumes %q, marks %q", left, marks)
	}
	// 1 kept + the one in use (if it is not the newest).
	if len(left) > 2 || len(left) != len(marks) {
		t.Errorf("after pruning to 1: volumes %q, marks %q", left, marks)
	}
}
