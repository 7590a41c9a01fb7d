package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/errdefs"

	"github.com/goalrun/goalrun/sandbox/egress"
)

// ErrSetupOver is wrapped by Exec's error for a setup step that comes after
// a check or agent step: what setup prepares is sealed by then.
var ErrSetupOver = errors.New("sandbox: setup steps must come before the first check or agent step")

// dockerSetup is the setup container of a run (Config.Setup): created at
// the first setup step, removed before the first check or agent step
// (sealSetup), with an egress proxy of its own.
type dockerSetup struct {
	mu     sync.Mutex
	id     string        // the container; "" until the first setup step
	egress *dockerEgress // its proxy: Config.Setup.AllowHosts only
	env    []string      // base environment of setup steps
	view   *checkView    // its view of the untouched tree (kept: its upper becomes a layer)
	sealed bool
	err    error // why the setup container could not be made (later steps get it too)
	// reused: the kept deps volume was prepared by an earlier run; no
	// setup step runs. ran and failed count this run's steps, for marking
	// a kept volume prepared.
	reused bool
	ran    int
	failed bool
	// stats of the proxy when it was closed (the posture keeps them).
	allowlist []string
	stats     egress.Stats
	denials   []string
}

// depsVolumeName is the per-run deps volume.
func (d *Docker) depsVolumeName() string { return "goalrun-" + d.cfg.RunID + "-deps" }

// depsMount is the deps volume at DepsDir; read-only but in the setup
// container. nil without setup.
func (d *Docker) depsMount(readOnly bool) []mount.Mount {
	if d.deps.volume == "" {
		return nil
	}
	return []mount.Mount{{Type: mount.TypeVolume, Source: d.deps.volume, Target: DepsDir, ReadOnly: readOnly,
		VolumeOptions: &mount.VolumeOptions{NoCopy: true}}}
}

// startSetup checks Config.Setup and creates the deps volume (StartDocker).
func (d *Docker) startSetup(ctx context.Context) error {
	if !d.cfg.Setup.Enabled || d.cfg.Setup.Unavailable != "" {
		return nil
	}
	if err := checkSetupEnv(d.cfg); err != nil {
		return err
	}
	if d.cfg.RelayBinary == "" {
		return errors.New("sandbox: docker: setup steps reach their registries through the egress relay: set Config.RelayBinary to a static goalrun binary (goalrun's own executable)")
	}
	for _, m := range d.cfg.Mounts {
		if m.Target == DepsDir || isUnder(m.Target, DepsDir) || isUnder(DepsDir, m.Target) {
			return fmt.Errorf("sandbox: docker: mount %s would cover or hide %s, where the setup step's dependencies go; mount it elsewhere", m.Target, DepsDir)
		}
	}
	if d.cfg.Setup.Key != "" {
		key := d.keptDepsKey()
		reused, kept, err := d.openKeptDeps(ctx, key)
		if err != nil {
			return err
		}
		if kept {
			d.deps.volume, d.deps.key = keptDepsName(key), key
			d.deps.setup = &dockerSetup{reused: reused}
			return nil
		}
	}
	name := d.depsVolumeName()
	if err := d.createVolume(ctx, name, "deps"); err != nil {
		return fmt.Errorf("sandbox: docker: creating the deps volume %s: %w", name, err)
	}
	d.deps.volume = name
	d.deps.setup = &dockerSetup{}
	return nil
}

// depsReused reports whether the run mounts a kept deps volume an earlier
// run prepared (nothing writes it in this run).
func (d *Docker) depsReused() bool { return d.deps.setup != nil && d.deps.setup.reused }

// setupEnvList is the setup steps' base environment: HOME, Config.ToolEnv,
// Config.Setup.Env and the proxy variables of the setup container's relay.
// No secret, no model API.
func (d *Docker) setupEnvList() []string {
	e := map[string]string{"HOME": d.home}
	for k, v := range d.cfg.ToolEnv {
		e[k] = v
	}
	for k, v := range d.cfg.Setup.Env {
		e[k] = v
	}
	proxy := fmt.Sprintf("http://127.0.0.1:%d", relayProxyPort)
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		e[k] = proxy
	}
	for _, k := range []string{"NO_PROXY", "no_proxy"} {
		e[k] = "localhost,127.0.0.1,::1"
	}
	return envList(e)
}

// ensureSetup creates and starts the setup container on first use: a fresh
// container from the sandbox image with the same hardening and host mounts
// as a check, a view of the untouched tree whose writes are kept (on an
// overlay view they become the setup layer that later views show below
// the tree; the workspace itself is never written), the deps volume
// writable at DepsDir, and no network but its relay to a proxy of its own
// that allows only Config.Setup.AllowHosts. The caller holds s.mu.
func (d *Docker) ensureSetup(ctx context.Context) error {
	s := d.deps.setup
	if s.id != "" {
		return nil
	}
	eg, err := d.startEgressFor(ctx, d.cfg.Setup.AllowHosts, nil)
	if err != nil {
		return fmt.Errorf("sandbox: docker: the setup step's egress proxy: %w", err)
	}
	s.egress = eg
	s.env = d.setupEnvList()
	// A view that will not mount (a wrong remembered fact) is probed
	// again and the container made once more on the view chosen then.
	for attempt := 0; ; attempt++ {
		err := d.createSetupContainer(ctx, eg)
		if err == nil || attempt > 0 || !errors.Is(err, errViewRemount) {
			return err
		}
	}
}

// createSetupContainer makes and starts the setup container (ensureSetup)
// with egress proxy eg. When the Engine cannot mount its overlay view and
// a new probe chose the copy, it removes what it made and returns
// errViewRemount.
func (d *Docker) createSetupContainer(ctx context.Context, eg *dockerEgress) error {
	s := d.deps.setup
	cv, err := d.openView(ctx, true)
	if err != nil {
		return err
	}
	s.view = cv
	mounts := []mount.Mount{cv.mount()}
	if !cv.copy {
		gitPath, err := d.gitConfigPath(ctx)
		if err != nil {
			return err
		}
		mounts = append(mounts, d.gitMounts(true, gitPath)...)
	}
	mounts = append(mounts, d.extraMnts...)
	mounts = append(mounts, d.depsMount(false)...)
	mounts = append(mounts, d.relayMount,
		mount.Mount{Type: mount.TypeBind, Source: eg.hostDir, Target: egressDir, ReadOnly: true})
	relayCmd := append([]string{relayPath, "__relay", "--lifetime", d.containerLifetime().String()}, eg.relayArgs()...)
	cfg := &container.Config{
		Image:        d.imageID,
		Cmd:          relayCmd,
		Entrypoint:   []string{},
		User:         d.relayUser(),
		WorkingDir:   d.root,
		Env:          []string{"HOME=" + d.home},
		Labels:       d.labels("setup"),
		AttachStdout: true,
		AttachStderr: true,
	}
	name := "goalrun-" + d.cfg.RunID + "-setup"
	id, err := d.createContainer(ctx, cfg, d.hostConfig(network.NetworkNone, mounts), name, func(ref string) {
		d.track(func(c *createdSet) { c.containers = append(c.containers, ref) })
	})
	if err != nil {
		return fmt.Errorf("sandbox: docker: creating the setup container from %s: %w", d.image, err)
	}
	s.id = id
	if cv.copy {
		if err := d.fillCopyView(ctx, id, cv); err != nil {
			return err
		}
	}
	ready, err := d.watchRelayOf(ctx, id, relayCmd)
	if err != nil {
		return err
	}
	if err := d.cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		if !cv.copy && isViewMountErr(err) && d.reprobeOverlay(ctx) {
			// Removed now: the next container takes its name.
			cctx, cancel := bg(ctx)
			if err := d.cli.ContainerRemove(cctx, id, container.RemoveOptions{Force: true}); err == nil || errdefs.IsNotFound(err) {
				d.track(func(c *createdSet) { c.containers = without(c.containers, []string{id}) })
			}
			cancel()
			d.closeView(ctx, cv)
			s.id, s.view = "", nil
			return fmt.Errorf("sandbox: docker: starting the setup container: %w: %v", errViewRemount, err)
		}
		return fmt.Errorf("sandbox: docker: starting the setup container: %w", err)
	}
	// The proxy takes connections from the relay's uid alone, as the
	// host's user namespace sees it.
	if c, err := d.cli.ContainerInspect(ctx, id); err == nil && c.State != nil {
		eg.learnPeer(c.State.Pid, d.relayUID)
	}
	select {
	case err := <-ready:
		if err != nil {
			return err
		}
	case <-time.After(relayReadyWait):
		return fmt.Errorf("sandbox: docker: the setup container's relay did not report ready within %s", relayReadyWait)
	case <-ctx.Done():
		return ctx.Err()
	}
	d.seedGoCache(ctx, id)
	return nil
}

// seedGoCache copies the warm standard-library build cache (GoCacheTarget,
// when mounted) into the deps volume's GOCACHE, so the setup step compiles
// only the project and its dependencies. Best effort: a failure leaves the
// setup step to compile the standard library itself.
func (d *Docker) seedGoCache(ctx context.Context, id string) {
	dst := d.cfg.Setup.Env["GOCACHE"]
	if dst == "" || !strings.HasPrefix(dst, DepsDir+"/") {
		return
	}
	has := false
	for _, m := range d.extraMnts {
		if m.Target == GoCacheTarget {
			has = true
		}
	}
	if !has {
		return
	}
	script := `mkdir -p "$1" && cp -R "$2"/. "$1"/ && rm -f "$1"/` + goWarmMarker + ` && chmod -R u+w "$1"`
	_, _ = d.execIn(ctx, id, d.setupEnvList(), d.root, []string{"sh", "-c", script, "goalrun-seed", dst, GoCacheTarget}, apiTimeout)
}

// execSetup runs a setup step as an exec in the setup container, like an
// agent step (process group killed on timeout or cancellation).
func (d *Docker) execSetup(ctx context.Context, cmd Cmd, dir string, seq int) (Result, error) {
	s := d.deps.setup
	if s == nil {
		why := d.cfg.Setup.Unavailable
		if why == "" {
			why = "the sandbox was started without Config.Setup.Enabled"
		}
		return Result{}, fmt.Errorf("sandbox: docker: setup step %q: %w: %s", cmd.Args[0], ErrNotStarted, why)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sealed {
		return Result{}, ErrSetupOver
	}
	if s.err != nil {
		return Result{}, s.err
	}
	if s.reused {
		if cmd.Stdout != nil {
			fmt.Fprintf(cmd.Stdout, "goalrun: not run: the Docker volume %s holds what it prepares (an earlier run with the same module graph, sandbox and setup steps)\n", d.deps.volume)
		}
		return Result{Reused: true}, nil
	}
	// A step that errs or does not exit 0 keeps a kept deps volume from
	// being marked prepared.
	s.ran++
	ok := false
	defer func() {
		if !ok {
			s.failed = true
		}
	}()
	if err := d.ensureSetup(ctx); err != nil {
		s.err = err
		return Result{}, err
	}
	pidFile := stepPidFile(seq)
	ec, err := d.cli.ContainerExecCreate(ctx, s.id, d.stepExecOptions(s.env, dir, "goalrun-setup", pidFile, cmd))
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: docker: creating the setup step %q: %w", cmd.Args[0], err)
	}
	res, err := d.runStep(ctx, stepRun{
		what: "setup", container: s.id, exec: ec.ID, pidFile: pidFile,
		stop: func(ctx context.Context, pidFile string, done <-chan struct{}, hj *types.HijackedResponse) {
			d.killStepIn(ctx, s.id, pidFile, done, hj)
		},
	}, cmd)
	if err != nil {
		return Result{}, err
	}
	ok = res.ExitCode == 0 && !res.TimedOut && !res.Cancelled
	return res, nil
}

// sealSetup ends the setup: the setup container is removed and its proxy
// closed (its counters kept for the posture). Later setup steps fail with
// ErrSetupOver. Called before the first check or agent step, and by Close.
func (d *Docker) sealSetup(ctx context.Context) {
	s := d.deps.setup
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sealed {
		return
	}
	s.sealed = true
	removed := true
	if s.id != "" {
		cctx, cancel := bg(ctx)
		err := d.cli.ContainerRemove(cctx, s.id, container.RemoveOptions{Force: true})
		cancel()
		removed = err == nil || errdefs.IsNotFound(err)
	}
	if cv := s.view; cv != nil {
		d.closeView(ctx, cv)
		// On an overlay view the setup's upper folder holds only what it
		// wrote: later views show it below the tree (the agent's tree wins
		// where both have a file). A copy view holds the whole tree, which
		// would bring back what the agent deletes: its outputs are dropped.
		// A container that is not gone may still write: never a layer.
		if !cv.copy && removed {
			d.setViewLayer(cv.layer())
		}
	}
	if d.deps.key != "" && !s.reused && removed && !s.failed && s.ran > 0 && s.ran == d.cfg.Setup.Steps {
		d.markKeptDeps(ctx)
	}
	if s.egress != nil {
		s.allowlist = s.egress.proxy.Allowlist()
		s.stats = s.egress.proxy.Stats()
		s.denials = s.stats.DenialStrings()
		s.egress.close()
	}
}

// setupPosture adds the setup container's egress to p.
func (d *Docker) setupPosture(p *Posture) {
	s := d.deps.setup
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if d.deps.key != "" {
		p.SetupDepsVolume = d.deps.volume
	}
	switch {
	case s.egress != nil && !s.sealed:
		st := s.egress.proxy.Stats()
		p.SetupEgressAllowlist = s.egress.proxy.Allowlist()
		p.SetupEgressAllowed, p.SetupEgressDenied, p.SetupEgressDenials = st.Allowed, st.Denied, st.DenialStrings()
	case s.sealed && s.allowlist != nil:
		p.SetupEgressAllowlist = slices.Clone(s.allowlist)
		p.SetupEgressAllowed, p.SetupEgressDenied, p.SetupEgressDenials = s.stats.Allowed, s.stats.Denied, slices.Clone(s.denials)
	}
}

// killStepIn stops the process group of an exec in container id whose pid
// file is pidFile (as killGroup does for agent steps, retrying while the
// step has not written it yet), then waits for its streams within
// stepKillWait.
func (d *Docker) killStepIn(ctx context.Context, id, pidFile string, done <-chan struct{}, hj interface{ Close() }) {
	cctx, cancel := bg(ctx)
	defer cancel()
	ticks := strconv.Itoa(int(KillGrace / (100 * time.Millisecond)))
	for attempt := 0; attempt < 5; attempt++ {
		code, err := d.execIn(cctx, id, nil, "/", []string{"sh", "-c", stepKiller, "goalrun-kill", pidFile, ticks}, KillGrace+stepKillWait)
		if err == nil && code == 0 {
			break
		}
		select {
		case <-done:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	select {
	case <-done:
	case <-time.After(stepKillWait):
		hj.Close()
		<-done
	}
}

// execIn runs argv in container id as the sandbox user and waits for it
// (bounded by timeout), discarding its output; it returns the exit code.
func (d *Docker) execIn(ctx context.Context, id string, env []string, dir string, argv []string, timeout time.Duration) (int, error) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ec, err := d.cli.ContainerExecCreate(cctx, id, container.ExecOptions{User: d.user, Env: env, WorkingDir: dir, Cmd: argv, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return -1, err
	}
	hj, err := d.cli.ContainerExecAttach(cctx, ec.ID, container.ExecAttachOptions{})
	if err != nil {
		return -1, err
	}
	_, _ = io.Copy(io.Discard, hj.Reader)
	hj.Close()
	ins, err := d.execExit(cctx, ec.ID)
	if err != nil {
		return -1, err
	}
	return ins.ExitCode, nil
}
