package main

import (
	"cmp"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/docker/docker/api/types/system"

	"github.com/goalrun/goalrun/goal/agent"
	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/sandbox"
)

// sandboxFactory starts the sandbox a --sandbox mode asks for.
type sandboxFactory struct {
	// docker starts the Docker sandbox; an error wrapping
	// errEngineUnavailable means no Engine answered (auto falls back).
	docker func(ctx context.Context, rc runConfig, cfg sandbox.Config) (sandbox.Sandbox, error)
	// local starts the local sandbox.
	local func(ctx context.Context, cfg sandbox.Config) (sandbox.Sandbox, error)
}

// errEngineUnavailable is wrapped by the Docker factory's error when no
// Docker Engine answers.
var errEngineUnavailable = errors.New("no Docker Engine answered")

func defaultSandboxes() sandboxFactory {
	return sandboxFactory{
		docker: func(ctx context.Context, rc runConfig, cfg sandbox.Config) (sandbox.Sandbox, error) {
			return startDocker(ctx, rc, cfg)
		},
		local: func(ctx context.Context, cfg sandbox.Config) (sandbox.Sandbox, error) {
			return sandbox.StartLocal(ctx, cfg)
		},
	}
}

// sandboxError is a sandbox that could not start: unavailable (no Engine)
// or failed while starting; badMount marks a refused mount (bad input).
type sandboxError struct {
	unavailable bool
	err         error
}

func (e *sandboxError) Error() string { return e.err.Error() }
func (e *sandboxError) Unwrap() error { return e.err }

// start starts the sandbox for rc.sandbox (docker, auto, local). auto tries
// Docker and, when no Engine answers, falls back to the local host,
// recording why in the posture's fallback_notice; a Docker sandbox that
// fails to start for another reason is an error, not a fallback.
func (f sandboxFactory) start(ctx context.Context, rc runConfig, cfg sandbox.Config) (sandbox.Sandbox, error) {
	startDocker := func() (sandbox.Sandbox, error) {
		if f.docker == nil {
			return nil, &sandboxError{unavailable: true, err: errors.New("this build of goalrun has no Docker sandbox")}
		}
		sb, err := f.docker(ctx, rc, cfg)
		if err != nil {
			return nil, &sandboxError{unavailable: errors.Is(err, errEngineUnavailable), err: err}
		}
		return sb, nil
	}
	startLocal := func(cfg sandbox.Config) (sandbox.Sandbox, error) {
		sb, err := f.local(ctx, cfg)
		if err != nil {
			return nil, &sandboxError{err: err}
		}
		return sb, nil
	}
	switch rc.sandbox {
	case "local":
		return startLocal(cfg)
	case "auto":
		sb, err := startDocker()
		var se *sandboxError
		if err == nil || !errors.As(err, &se) || !se.unavailable {
			return sb, err
		}
		cfg.FallbackNotice = fmt.Sprintf("--sandbox auto: the Docker sandbox is unavailable (%v); the run used the local host instead, without a container and with the host's network (%s was asked for)", se.err, networkOrNone(cfg.Network))
		cfg.Network = sandbox.NetworkHost
		// The local host prepares dependencies in its own caches, with
		// its own network: no deps volume, no offline settings.
		cfg.Setup = sandbox.SetupConfig{}
		return startLocal(cfg)
	default:
		return startDocker()
	}
}

func networkOrNone(n sandbox.Network) sandbox.Network {
	if n == "" {
		return sandbox.NetworkNone
	}
	return n
}

// asSandboxError turns a start failure into the startup error it is. A
// factory that already decided what went wrong (a *startupError anywhere in
// the chain: the agent CLI not on PATH, a relay binary that cannot run in a
// container, an image that cannot be built) keeps its own code, message and
// suggestions; only an unclassified failure becomes SandboxFailed.
func asSandboxError(err error) *startupError {
	var se *sandboxError
	var own *startupError
	switch {
	case errors.As(err, &own):
		return own
	case errors.As(err, &se) && se.unavailable:
		return &startupError{code: report.ErrSandboxUnavailable, message: fmt.Sprintf("the Docker sandbox is unavailable: %v", se.err)}
	case errors.Is(err, sandbox.ErrDangerousMount):
		return &startupError{code: report.ErrBadInput, message: fmt.Sprintf("the sandbox refused a mount: %v", err),
			suggestions: []string{"Choose a workspace, and --mount folders, that are not a home folder, the root, a credential folder, a socket, a container engine's data or a folder holding the host's secrets, and that hold none of them; a --mount must also not show the workspace, its repository, goalrun's cache folder, TMPDIR or a CI runner's folders; mount a narrower folder."}}
	case errors.Is(err, sandbox.ErrMountTarget):
		return &startupError{code: report.ErrBadInput, message: fmt.Sprintf("the sandbox refused a mount: %v", err),
			suggestions: []string{"Give --mount a TARGET outside the host folders the default sandbox mounts (/usr, /bin, /lib*, /opt) and outside /workspace, /tmp, /run and HOME, for example /mnt/NAME."}}
	case errors.Is(err, sandbox.ErrRootWorkspace):
		ws := "the workspace"
		if re := (*sandbox.RootWorkspaceError)(nil); errors.As(err, &re) {
			ws = fmt.Sprintf("the workspace %q", re.Workspace)
		}
		return &startupError{code: report.ErrBadInput,
			message: fmt.Sprintf("--workspace bind (the workspace setting) cannot mount %s: it belongs to root, and goalrun never runs a sandbox as root", ws),
			suggestions: []string{
				"Run with --workspace copy, or drop --workspace bind (the default, auto, copies a root-owned workspace in and out); in a config file, workspace: copy.",
				"Or give the workspace to a normal user (chown -R 1000:1000 on it) and keep --workspace bind.",
			}}
	}
	return &startupError{code: report.ErrSandboxFailed, message: fmt.Sprintf("the sandbox could not start: %v", err),
		suggestions: []string{"The sandbox could not start; check the Docker Engine's health and the sandbox image, then run again."}}
}

// engineTimeout bounds the first contact with the Docker Engine;
// reapTimeout the removal of dead runs' leftovers at start-up.
const (
	engineTimeout = 10 * time.Second
	reapTimeout   = 30 * time.Second
)

// inContainerBinDir is where agent executables from the host are mounted in
// the minimal image (on its PATH).
const inContainerBinDir = "/usr/local/bin"

// inContainerAgentDir holds, in the default image, the npm package of an
// agent that is a Node.js program (in a folder named after the agent).
const inContainerAgentDir = "/opt/goalrun/agents"

// inContainerGoroot is where the host's Go toolchain is mounted in the
// minimal image (first on its PATH, sandbox.ImagePath).
const inContainerGoroot = "/usr/local/go"

// hostAgentBinDir is where the default sandbox mounts an agent executable
// (or node, for an agent that is a Node.js program) that lies outside the
// host folders it mounts (first on PATH).
const hostAgentBinDir = sandbox.MountRoot + "/bin"

// hostAgentDir holds, in the default sandbox, the npm package of an agent
// that is a Node.js program and lies outside the host folders it mounts
// (in a folder named after the agent).
const hostAgentDir = sandbox.MountRoot + "/agents"

// startDocker starts the Docker sandbox for a run: it reaches the Engine
// (DOCKER_HOST or the default socket), removes leftovers of dead runs, and
// fills in what the image choice needs (hostToolsSandbox by default,
// minimalSandbox for --image minimal, nothing but --mount for an image
// reference), then the --mount folders (withUserMounts). goalrun's own
// executable is the egress relay unless cfg.RelayBinary names another
// static goalrun. opts are passed to sandbox.StartDocker.
func startDocker(ctx context.Context, rc runConfig, cfg sandbox.Config, opts ...sandbox.DockerOption) (sandbox.Sandbox, error) {
	// The default sandbox's look through the host folders checks its
	// remembered answer while the Engine answers the calls below.
	var ahead *sandbox.HostScanAhead
	if cfg.Image == "" && !rc.minimalImage {
		ahead = sandbox.CheckHostScanAhead(hostScanCacheDir())
	}
	cli, err := sandbox.NewDockerClient()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errEngineUnavailable, err)
	}
	pctx, cancel := context.WithTimeout(ctx, engineTimeout)
	_, err = cli.Ping(pctx)
	cancel()
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("%w at %s: %v", errEngineUnavailable, cli.DaemonHost(), err)
	}
	// Answers about the Engine that do not change from run to run are
	// remembered (sandbox.EngineFacts).
	facts, err := engineFacts(os.Getenv(engineFactsEnv))
	if err != nil {
		cli.Close()
		return nil, err
	}
	// The Engine's info is read once and handed to what needs it (the
	// host-folder look-up, StartDocker). Reading it takes the Engine tens
	// of milliseconds, so the start goes on from the info the last run
	// read from this Engine while the live one is read beside it;
	// StartDocker confirms the two agree before it starts any container
	// (else what it created is removed and the start is done again on the
	// live info).
	var live system.Info
	var liveErr error
	infoDone := make(chan struct{})
	go func() {
		defer close(infoDone)
		ictx, cancel := context.WithTimeout(ctx, engineTimeout)
		defer cancel()
		live, liveErr = cli.Info(ictx)
		if liveErr == nil {
			_ = facts.RememberInfo(cli.DaemonHost(), live)
		}
	}()
	liveInfo := func(ctx context.Context) (system.Info, error) {
		select {
		case <-infoDone:
			return live, liveErr
		case <-ctx.Done():
			return system.Info{}, ctx.Err()
		}
	}
	var engineInfo *system.Info
	// confirmInfo confirms a remembered engineInfo against the live one
	// (nil: engineInfo is the live one).
	var confirmInfo func(context.Context) error
	if info, ok := facts.RememberedInfo(cli.DaemonHost()); ok {
		engineInfo = &info
		opts = append(opts, sandbox.WithEngineInfoCheck(liveInfo))
		confirmInfo = func(ctx context.Context) error {
			l, err := liveInfo(ctx)
			if err != nil {
				return err
			}
			if !sandbox.SameEngine(l, info) {
				return sandbox.ErrEngineChanged
			}
			return nil
		}
	} else if info, err := liveInfo(ctx); err == nil {
		engineInfo = &info
	}
	useInfo := func(info *system.Info) error {
		if info == nil {
			return nil
		}
		// A workspace in the Engine's own data is refused before any
		// image or cache is built for it (StartDocker's mount policy
		// refuses it too).
		home, _ := os.UserHomeDir()
		if err := sandbox.CheckEngineData(cfg.Workspace, home, info.DockerRootDir); err != nil {
			return err
		}
		opts = append(opts, sandbox.WithEngineInfo(*info))
		return nil
	}
	if err := useInfo(engineInfo); err != nil {
		<-infoDone
		cli.Close()
		return nil, err
	}
	// Leftovers of dead runs; a failure here must not stop this run.
	// Bounded: an Engine that answers the ping and then hangs must not
	// hold the run before it starts (the janitor reaps later anyway).
	// It runs beside the rest of the start (its objects are other runs'),
	// and the client is closed only once it is done.
	reaped := make(chan struct{})
	go func() {
		defer close(reaped)
		rctx, rcancel := context.WithTimeout(ctx, reapTimeout)
		defer rcancel()
		_, _ = sandbox.Reap(rctx, cli, rc.timeout)
		sandbox.RemoveStaleImports(rctx, cli)
	}()
	closeClient := func() error {
		<-reaped
		<-infoDone
		return cli.Close()
	}

	fail := func(err error) (sandbox.Sandbox, error) {
		closeClient()
		return nil, err
	}
	// The agent's CLI first (here for the minimal image, in
	// hostToolsSandbox by default): a missing CLI is the newcomer's first
	// problem and has its own code and advice (AgentNotFound).
	var native *agent.Native
	if cfg.Image == "" && rc.minimalImage && rc.agent != agent.CommandName {
		n, err := nativeAgent(rc)
		if err != nil {
			return fail(err)
		}
		native = &n
	}
	opts = append(opts, sandbox.WithEngineFacts(facts))
	base := cfg
	attempt := func(reprobe bool) (sb *sandbox.Docker, agentBin string, notices []string, remembered bool, err error) {
		cfg := base
		covers := func(string) bool { return false }
		var confirm func(context.Context) error
		switch {
		case cfg.Image != "":
			// The user's image holds the agent and the toolchains.
		case rc.minimalImage:
			cfg, agentBin, err = minimalSandbox(ctx, cli, rc, cfg, native)
		default:
			var h sandbox.HostToolchain
			cfg, agentBin, h, err = hostToolsSandbox(ctx, cli, rc, cfg, hostToolsLookup{info: engineInfo, confirm: confirmInfo, facts: facts, reprobe: reprobe, ahead: ahead})
			covers, remembered, confirm = h.Covers, h.Remembered, h.Confirm
			for _, l := range h.LeftOut {
				notices = append(notices, "the default sandbox leaves out the host's "+l.Path+": "+l.Reason)
			}
		}
		if err != nil {
			return nil, "", nil, false, err
		}
		if cfg.Network != sandbox.NetworkEgress && cfg.Setup.Enabled && cfg.RelayBinary == "" {
			// The setup container reaches its registries through the relay;
			// without a static goalrun the setup steps cannot run (detected
			// ones are skipped, --setup ones fail and say why).
			if _, err := relayBinary(); err != nil {
				cfg.Setup = sandbox.SetupConfig{Unavailable: err.Error()}
			}
		}
		if (cfg.Network == sandbox.NetworkEgress || cfg.Setup.Enabled && cfg.Setup.Unavailable == "") && cfg.RelayBinary == "" {
			exe, err := relayBinary()
			if err != nil {
				return nil, "", nil, false, &startupError{code: report.ErrSandboxFailed, message: err.Error(),
					suggestions: []string{"Use a statically linked goalrun for the egress network: build it with cgo disabled (CGO_ENABLED=0) and run that build."}}
			}
			cfg.RelayBinary = exe
		}
		if cfg, err = withUserMounts(ctx, cli, rc, cfg, covers); err != nil {
			return nil, "", nil, false, err
		}
		// What the run creates is labelled to expire after the run's own
		// timeout, so another goalrun's Reap never removes it early.
		cfg.Lifetime = rc.timeout
		sb, err = sandbox.StartDocker(ctx, cli, cfg, opts...)
		// The host folders' look was taken from its cache while the
		// cache was still being checked: StartDocker only created (no
		// step has run); the check decides before anything runs.
		if confirm != nil {
			if cerr := confirm(ctx); cerr != nil {
				if sb != nil {
					cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), engineTimeout)
					_ = sb.Close(cctx)
					cancel()
				}
				return nil, "", nil, false, cerr
			}
		}
		return sb, agentBin, notices, remembered, err
	}
	sb, agentBin, notices, remembered, err := attempt(false)
	// Twice at most: each cause is settled by one more start.
	for range 2 {
		if ctx.Err() != nil {
			break
		}
		if errors.Is(err, sandbox.ErrHostScanStale) {
			// A host folder changed since the look was remembered: look
			// again, this time before anything is created.
			ahead = nil
		} else if errors.Is(err, sandbox.ErrEngineChanged) {
			// The remembered info is stale: start again on the live one.
			info, lerr := liveInfo(ctx)
			if lerr != nil {
				return fail(fmt.Errorf("%w at %s: reading its info: %v", errEngineUnavailable, cli.DaemonHost(), lerr))
			}
			engineInfo, confirmInfo = &info, nil
			if err := useInfo(engineInfo); err != nil {
				return fail(err)
			}
		} else {
			break
		}
		sb, agentBin, notices, remembered, err = attempt(false)
	}
	if err != nil && remembered && sandbox.IsBindSourceMissing(err) && ctx.Err() == nil {
		// A host folder remembered as present is gone: ask the Engine
		// again and start once more.
		sb, agentBin, notices, _, err = attempt(true)
	}
	if err != nil {
		return fail(err)
	}
	return &dockerSandbox{Docker: sb, close: closeClient, bin: agentBin, notices: notices}, nil
}

// engineFactsEnv says where the remembered Engine facts are kept: unset
// means sandbox.DefaultEngineFactsDir, "off" remembers nothing (every run
// probes the Engine, as on its first run), an absolute folder is used as
// it is.
const engineFactsEnv = "GOALRUN_ENGINE_FACTS"

// engineFacts returns the EngineFacts the value of engineFactsEnv names.
func engineFacts(v string) (sandbox.EngineFacts, error) {
	switch {
	case v == "off":
		return sandbox.EngineFacts{}, nil
	case v == "":
		dir, err := sandbox.DefaultEngineFactsDir()
		if err != nil {
			// No cache folder: every run probes.
			return sandbox.EngineFacts{}, nil
		}
		return sandbox.EngineFacts{Dir: dir}, nil
	case filepath.IsAbs(v):
		return sandbox.EngineFacts{Dir: filepath.Clean(v)}, nil
	}
	return sandbox.EngineFacts{}, badInput("%s=%q: want off or an absolute folder", engineFactsEnv, v)
}

// hostToolsLookup is how hostToolsSandbox finds the host's folders: the
// Engine's info read at start, the remembered facts, and whether to ask
// the Engine even when a fact is remembered.
type hostToolsLookup struct {
	info    *system.Info
	confirm func(context.Context) error // confirms a remembered info (nil: info is live)
	facts   sandbox.EngineFacts
	reprobe bool
	ahead   *sandbox.HostScanAhead // the scan's cache checked ahead (nil: none)
}

// hostScanCacheDir is where the look through the host folders is
// remembered ("" when the user has no cache folder).
func hostScanCacheDir() string {
	base, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(base, "goalrun", "hostscan")
}

// imageError is the error of a default image that could not be built.
func imageError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		// Interrupted, not failed: the error wraps ctx's, and the caller
		// reports the run as cancelled.
		return fmt.Errorf("building the default sandbox image: %w", err)
	}
	return &startupError{code: report.ErrSandboxFailed, message: fmt.Sprintf("building the default sandbox image (or pass --image): %v", err),
		suggestions: []string{"Pass an image that contains the agent CLI and the check's toolchain with the image setting, or check the Docker Engine's health."}}
}

// hostToolsError is the error of host folders that could not be found
// through the Engine.
func hostToolsError(ctx context.Context, cli sandbox.DockerAPI, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("finding the host's system folders: %w", ctx.Err())
	}
	return &startupError{code: report.ErrSandboxFailed, message: fmt.Sprintf("finding the host's system folders through the Docker Engine at %s: %v", cli.DaemonHost(), err),
		suggestions: []string{"Pass an image that contains the agent CLI and the check's toolchain with the image setting, or image minimal for a small busybox image built from this machine's files."}}
}

// hostToolsSandbox fills cfg for the default sandbox: a generated image
// with no programs (sandbox.ImageSpec's Bare) and the host's system
// folders mounted over it read-only with their PATH and toolchain
// variables (sandbox.HostTools, which asks the Engine what exists on its
// host, so the same holds when goalrun runs in a container); the agent's
// executable and the Go toolchain are mounted only when they lie outside
// those folders (placeHostAgent), and the warm Go build cache is added
// (withWarmGoCache). It returns the agent's path inside ("" for the
// command agent) and the host folders found.
func hostToolsSandbox(ctx context.Context, cli sandbox.DockerAPI, rc runConfig, cfg sandbox.Config, look hostToolsLookup) (sandbox.Config, string, sandbox.HostToolchain, error) {
	var h sandbox.HostToolchain
	// Only the image is one-time work; finding the host's folders is done
	// every run and stays in the sandbox's start.
	built := announceIfSlow(ctx, report.WorkImage, "making the default sandbox image (once; later runs reuse it)")
	ref, err := sandbox.BuildImage(ctx, cli, sandbox.ImageSpec{Bare: true})
	built(err)
	if err == nil {
		// A static goalrun looks through the host folders from a
		// container when this one cannot see them (it runs in a container).
		scan, _ := relayBinary()
		if cfg.RelayBinary != "" {
			scan = cfg.RelayBinary
		}
		// The look through the host folders is remembered in the user's
		// cache folder while none of what it read changes.
		h, err = sandbox.HostTools(ctx, cli, sandbox.HostToolsOptions{Image: ref, Info: look.info, ConfirmInfo: look.confirm, Facts: look.facts, Reprobe: look.reprobe, Workspace: cfg.Workspace, ScanBinary: scan, CacheDir: hostScanCacheDir(), Ahead: look.ahead})
		if err != nil {
			err = hostToolsError(ctx, cli, err)
		}
	} else {
		err = imageError(ctx, err)
	}
	if err != nil {
		return cfg, "", h, err
	}
	if rc.agent == agent.CommandName {
		// Bad input is said before any one-time work (the Go cache's
		// warming takes minutes the first time).
		if serr := agentProgramUnseen(rc.agentBin, rc.extraMounts, h.Covers, os.Lstat); serr != nil {
			return cfg, "", h, serr
		}
	}
	cfg.Image = ref
	cfg.Mounts = append(slices.Clone(h.Mounts), cfg.Mounts...)
	cfg.HostLeftOut = h.LeftOut
	tool := maps.Clone(h.Env)
	maps.Copy(tool, cfg.ToolEnv)
	var front []string // PATH entries before the host's
	agentBin := ""
	if rc.agent != agent.CommandName {
		bin, mnts, err := placeHostAgent(ctx, cli, rc, h, ref)
		if err != nil {
			return cfg, "", h, err
		}
		agentBin = bin
		cfg.Mounts = append(cfg.Mounts, mnts...)
		for _, m := range mnts {
			if path.Dir(m.Target) == hostAgentBinDir {
				front = append(front, hostAgentBinDir)
				break
			}
		}
	}
	if goroot := hostGoroot(); goroot != "" {
		if !h.Covers(goroot) {
			// At its own path: the warm cache's entries name it.
			cfg.Mounts = append(cfg.Mounts, sandbox.Mount{Source: goroot, Target: goroot, ReadOnly: true, Name: "the Go toolchain " + goroot})
			front = append(front, path.Join(goroot, "bin"))
		}
		cfg.ToolEnv = tool
		cfg, _ = withWarmGoCache(ctx, cfg, goroot, hostCgo(os.LookupEnv, exec.LookPath, h.Covers))
		tool = cfg.ToolEnv
	}
	if len(front) > 0 {
		tool["PATH"] = strings.Join(front, ":") + ":" + tool["PATH"]
	}
	cfg.ToolEnv = tool
	return cfg, agentBin, h, nil
}

// placeHostAgent finds the agent's executable for the default sandbox and
// where it is inside, with the mounts it needs. On goalrun's PATH (or
// --agent-bin): where it is, when it and the file it links to lie inside
// the mounted host folders (a Node.js program such as the Gemini CLI then
// runs with the host's node, on the sandbox's PATH); else its native
// executable mounted at hostAgentBinDir, or a Node.js program's package at
// hostAgentDir (and node at hostAgentBinDir unless the host's node lies in
// the mounted folders). Not on goalrun's PATH (goalrun runs in a container
// and cannot see the host): on the sandbox's PATH, asking the Engine
// (sandbox.EngineHasPaths). Not found: AgentNotFound.
func placeHostAgent(ctx context.Context, cli sandbox.DockerAPI, rc runConfig, h sandbox.HostToolchain, image string) (string, []sandbox.Mount, error) {
	name := cmp.Or(rc.agentBin, rc.spec.Bin)
	if onPath, err := exec.LookPath(name); err == nil {
		abs, aerr := filepath.Abs(onPath)
		real, rerr := filepath.EvalSymlinks(onPath)
		if aerr == nil && rerr == nil && h.Covers(abs) && h.Covers(real) {
			return abs, nil, nil
		}
		var n agent.Native
		node := ""
		if rc.spec.Node {
			node, _ = exec.LookPath("node")
			n, err = agent.NodeProgram(rc.spec, agent.OSFS{}, onPath, node)
		} else {
			n, err = agent.NativeExecutable(rc.spec, agent.OSFS{}, onPath)
		}
		if err != nil {
			return "", nil, &startupError{code: report.ErrAgentNotFound,
				message:     fmt.Sprintf("the %s agent at %s cannot run in the sandbox: %v", rc.agent, onPath, err),
				suggestions: []string{"Install the agent's CLI in the host's system folders (for example with npm install -g as root, under /usr/local), name a native executable with agent-bin, or pass an image that contains it."}}
		}
		if n.Package != "" {
			pkg := path.Join(hostAgentDir, rc.spec.Name)
			mounts := []sandbox.Mount{{Source: n.Package, Target: pkg, ReadOnly: true, Name: fmt.Sprintf("the %s agent's package %s", rc.agent, n.Package)}}
			if absNode, err := filepath.Abs(node); err != nil || !h.Covers(absNode) || !h.Covers(n.Path) {
				mounts = append(mounts, sandbox.Mount{Source: n.Path, Target: path.Join(hostAgentBinDir, "node"), ReadOnly: true, Name: "node " + n.Path})
			}
			return path.Join(pkg, n.Entry), mounts, nil
		}
		target := path.Join(hostAgentBinDir, rc.spec.Bin)
		return target, []sandbox.Mount{{Source: n.Path, Target: target, ReadOnly: true, Name: fmt.Sprintf("the %s agent's executable %s", rc.agent, n.Path)}}, nil
	}
	var cands []string
	switch {
	case path.IsAbs(name):
		if h.Covers(name) {
			cands = []string{path.Clean(name)}
		}
	case !strings.Contains(name, "/"):
		for _, dir := range strings.Split(h.Env["PATH"], ":") {
			cands = append(cands, path.Join(dir, name))
		}
	}
	if len(cands) > 0 {
		found, err := sandbox.EngineHasPaths(ctx, cli, image, cands)
		if err != nil {
			return "", nil, &startupError{code: report.ErrSandboxFailed, message: fmt.Sprintf("looking for the %s agent's executable %q in the host folders the sandbox mounts: %v", rc.agent, name, err)}
		}
		for _, c := range cands {
			if found[c] {
				return c, nil, nil
			}
		}
	}
	return "", nil, &startupError{code: report.ErrAgentNotFound,
		message:     fmt.Sprintf("the %s agent's executable %q is not on this machine's PATH, nor on the PATH of the host folders the sandbox mounts (%s)", rc.agent, name, h.Env["PATH"]),
		suggestions: []string{"Install the agent's CLI, name it with agent-bin, or pass an image that contains it."}}
}

// minimalSandbox fills cfg for --image minimal: a small image built from
// this machine's files (busybox, bash, CA certificates, the libraries of
// the agent's native executable), the agent's executable mounted at
// inContainerBinDir and the host's Go toolchain at inContainerGoroot with
// the warm Go build cache (withWarmGoCache). It returns the agent's path
// inside ("" for the command agent).
func minimalSandbox(ctx context.Context, cli sandbox.DockerAPI, rc runConfig, cfg sandbox.Config, native *agent.Native) (sandbox.Config, string, error) {
	var agentBin string
	var libsFor []string
	if native != nil {
		agentBin = path.Join(inContainerBinDir, rc.spec.Bin)
		if native.Package != "" {
			// A Node.js program: its package read-only where nothing
			// else is, the host's node on PATH to run its script.
			agentBin = path.Join(inContainerAgentDir, rc.spec.Name, native.Entry)
			cfg.Mounts = append(cfg.Mounts,
				sandbox.Mount{Source: native.Package, Target: path.Join(inContainerAgentDir, rc.spec.Name), ReadOnly: true},
				sandbox.Mount{Source: native.Path, Target: path.Join(inContainerBinDir, "node"), ReadOnly: true})
		} else {
			cfg.Mounts = append(cfg.Mounts, sandbox.Mount{Source: native.Path, Target: agentBin, ReadOnly: true})
		}
		if !native.Static() {
			libsFor = append(libsFor, native.Path)
		}
	}
	if goroot := hostGoroot(); goroot != "" {
		cfg.Mounts = append(cfg.Mounts, sandbox.Mount{Source: goroot, Target: inContainerGoroot, ReadOnly: true})
		var warm bool
		// No C compiler in the minimal image: cgo off, as the cache is warmed.
		if cfg, warm = withWarmGoCache(ctx, cfg, goroot, false); warm && goroot != inContainerGoroot {
			// The cache's entries are keyed by GOROOT's path: the
			// toolchain is also mounted at its host path, and named.
			cfg.Mounts = append(cfg.Mounts, sandbox.Mount{Source: goroot, Target: goroot, ReadOnly: true})
			cfg.ToolEnv["GOROOT"] = goroot
		}
	}
	built := announceIfSlow(ctx, report.WorkImage, "building the minimal sandbox image from this machine's files (once; later runs reuse it)")
	ref, err := sandbox.BuildImage(ctx, cli, sandbox.DefaultImageSpec(libsFor...))
	built(err)
	if err != nil {
		return cfg, "", imageError(ctx, err)
	}
	cfg.Image = ref
	return cfg, agentBin, nil
}

// withUserMounts adds the --mount folders, read-only. One at its own path
// inside a host folder the default sandbox mounts already (covers) is
// there and is skipped. A source the mount policy refuses is refused
// first, whether it exists or not. A folder goalrun cannot see is looked for on the
// Engine's host (goalrun may run in a container): there, it is mounted
// from there; nowhere, it is bad input naming the flag. The mount policy
// is applied by sandbox.StartDocker, whose refusal names the flag too.
func withUserMounts(ctx context.Context, cli sandbox.DockerAPI, rc runConfig, cfg sandbox.Config, covers func(string) bool) (sandbox.Config, error) {
	var unseen []sandbox.Mount
	for _, m := range rc.extraMounts {
		if err := sandbox.CheckMountSource(m.Name, m.Source, os.LookupEnv, cli.DaemonHost()); err != nil {
			return cfg, err
		}
		if m.Source == m.Target && covers(m.Source) {
			continue
		}
		if _, err := os.Stat(m.Source); err == nil {
			cfg.Mounts = append(cfg.Mounts, m)
			continue
		}
		unseen = append(unseen, m)
	}
	if len(unseen) == 0 {
		return cfg, nil
	}
	paths := make([]string, len(unseen))
	for i, m := range unseen {
		paths[i] = m.Source
	}
	found, err := sandbox.EngineHasPaths(ctx, cli, cfg.Image, paths)
	if err != nil {
		return cfg, &startupError{code: report.ErrSandboxFailed, message: fmt.Sprintf("looking for %s on the Docker Engine's host: %v", unseen[0].Name, err)}
	}
	for _, m := range unseen {
		if !found[m.Source] {
			return cfg, badInput("%s: %s exists neither on this machine nor on the Docker Engine's host (%s)", m.Name, m.Source, cli.DaemonHost())
		}
		m.EngineHost = true
		cfg.Mounts = append(cfg.Mounts, m)
	}
	return cfg, nil
}

// hostCgo says whether the default sandbox's steps build Go with cgo
// (CGO_ENABLED=1), as the go command would on the host: not when goalrun's
// environment sets CGO_ENABLED=0, else when gcc — the C compiler the go
// command uses on Linux when CC is not set (`go help environment`; CC is
// not carried into the sandbox) — is on the host's PATH and inside the
// mounted host folders (covers), so a cgo package or `go test -race`
// builds inside as it does outside. The warm Go build cache is made with
// the same setting.
func hostCgo(getenv func(string) (string, bool), lookPath func(string) (string, error), covers func(string) bool) bool {
	if v, ok := getenv("CGO_ENABLED"); ok && v == "0" {
		return false
	}
	gcc, err := lookPath("gcc")
	if err != nil {
		return false
	}
	if real, err := filepath.EvalSymlinks(gcc); err == nil {
		gcc = real
	}
	return covers(gcc)
}

// withWarmGoCache adds a read-only Go build cache that already holds the
// standard library compiled by the host's toolchain at goroot (built once
// per toolchain in the user's cache folder, goalrun/ below
// os.UserCacheDir(), by sandbox.WarmGoCache), so a fresh check container
// does not compile it again, and the agent cannot write it; cgo is the
// steps' CGO_ENABLED, which the cache is warmed with and which ToolEnv gets. The cache's
// entries are keyed by GOROOT's path: the caller makes the toolchain
// visible at goroot inside. Without a user cache folder, or when warming
// fails, the run goes on without the cache (every check then compiles the
// standard library: slower, not wrong); warm says whether it was added.
func withWarmGoCache(ctx context.Context, cfg sandbox.Config, goroot string, cgo bool) (_ sandbox.Config, warm bool) {
	base, err := os.UserCacheDir()
	if err != nil {
		return cfg, false
	}
	warmed := announceIfSlow(ctx, report.WorkGoCache, "warming a read-only Go build cache of the standard library for the checks (once per toolchain)")
	dir, err := sandbox.WarmGoCache(ctx, goroot, filepath.Join(base, "goalrun"), cgo)
	warmed(err)
	if err != nil {
		return cfg, false
	}
	mnt, env := sandbox.GoCacheMount(dir, cgo)
	mnt.Name = "the warm Go build cache " + dir
	cfg.Mounts = append(cfg.Mounts, mnt)
	tool := make(map[string]string, len(cfg.ToolEnv)+len(env))
	maps.Copy(tool, cfg.ToolEnv)
	maps.Copy(tool, env)
	cfg.ToolEnv = tool
	return cfg, true
}

// relayBinary is goalrun's own executable, which runs the egress relay
// inside the container: it must be statically linked (the container has no
// C library).
func relayBinary() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding goalrun's own executable for the egress relay: %w", err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		return "", fmt.Errorf("reading goalrun's own executable %s for the egress relay: %w", exe, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", fmt.Errorf("goalrun must be rebuilt with CGO_ENABLED=0: its executable %s is dynamically linked (built with cgo), and the setup step and --network egress reach the network through an egress relay that runs it inside the container", exe)
		}
	}
	return exe, nil
}

// nativeAgent finds the agent's native executable on the host, to mount it
// into the default image.
func nativeAgent(rc runConfig) (agent.Native, error) {
	name := rc.agentBin
	if name == "" {
		name = rc.spec.Bin
	}
	onPath, err := exec.LookPath(name)
	if err != nil {
		return agent.Native{}, &startupError{code: report.ErrAgentNotFound,
			message:     fmt.Sprintf("the %s agent's executable %q is not on this machine's PATH, so it cannot be mounted into the default sandbox image: %v", rc.agent, name, err),
			suggestions: []string{"Install the agent's CLI, name it with agent-bin, or pass an image that contains it."}}
	}
	var n agent.Native
	if rc.spec.Node {
		node, _ := exec.LookPath("node")
		n, err = agent.NodeProgram(rc.spec, agent.OSFS{}, onPath, node)
	} else {
		n, err = agent.NativeExecutable(rc.spec, agent.OSFS{}, onPath)
	}
	if err != nil {
		return agent.Native{}, &startupError{code: report.ErrAgentNotFound,
			message: fmt.Sprintf("the %s agent at %s cannot run in the sandbox: %v", rc.agent, onPath, err)}
	}
	return n, nil
}

// hostGoroot is the GOROOT of the `go` on PATH ("" when there is none).
func hostGoroot() string {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return ""
	}
	real, err := filepath.EvalSymlinks(goBin)
	if err != nil {
		return ""
	}
	root := filepath.Dir(filepath.Dir(real))
	if _, err := os.Stat(filepath.Join(root, "src", "runtime")); err != nil {
		return ""
	}
	return root
}

// dockerSandbox is the Docker sandbox of a run, with the Engine client it
// closes and where the agent is inside the container.
type dockerSandbox struct {
	*sandbox.Docker
	close   func() error
	bin     string   // the agent's executable inside the container ("" = as given)
	notices []string // what the user should know about the sandbox (Notices)
}

// Notices are sentences about the sandbox the user should read, for
// example a host folder the default sandbox left out.
func (d *dockerSandbox) Notices() []string { return d.notices }

// agentPlacer is implemented by sandboxes that decide where the agent runs
// from and how it reaches its model API from inside.
type agentPlacer interface {
	agentBin(asGiven string) string
	baseURL() string
}

var _ agentPlacer = (*dockerSandbox)(nil)

func (d *dockerSandbox) agentBin(asGiven string) string {
	if d.bin != "" {
		return d.bin
	}
	return asGiven
}

// baseURL is the model API's base URL inside the container, for agents that
// take it on their command line (Codex), when the sandbox serves one.
func (d *dockerSandbox) baseURL() string {
	if u, ok := any(d.Docker).(interface{ UpstreamURL(int) string }); ok {
		return u.UpstreamURL(0)
	}
	return ""
}

// Close closes the sandbox, then the Engine client.
func (d *dockerSandbox) Close(ctx context.Context) error {
	err := d.Docker.Close(ctx)
	if d.close != nil {
		d.close()
		d.close = nil
	}
	return err
}

// defaultSandboxHolds says in plain words what the default Docker sandbox
// (no --image) holds, for advice.
const defaultSandboxHolds = "this machine's system folders, read-only (/usr with /usr/local, /bin, /lib*, /opt, and the CA certificates and linker cache from /etc), with the agent's CLI — not your home folder, so a tool installed there (pyenv, nvm, rustup, ~/.local/bin, a Go in ~/sdk) is not found"

// minimalSandboxHolds says the same of --image minimal.
const minimalSandboxHolds = "busybox (sh and the usual small tools), CA certificates, the agent's CLI and this machine's Go toolchain (at /usr/local/go) — not this machine's other programs"

// notRunnableAdvice is the advice of a check that cannot run (exit 126 or
// 127, or no shell) in the sandbox a run got: where the check runs, what
// that sandbox holds, and the flag that gives it the command.
func notRunnableAdvice(cfg runConfig, p sandbox.Posture) []string {
	switch {
	case p.Mode != "docker":
		return []string{
			"The check runs on this machine, in the workspace (" + cfg.dir + "): install the command it names or correct its path, and make it executable.",
			"Run the check by hand in the workspace; it should exit 0 only when the goal is met.",
		}
	case cfg.image != "":
		return []string{
			"The check runs in a fresh container from the image " + cfg.image + ", with no network: that image lacks the command the check names, or it is not executable there. Add it to the image (next to the agent's CLI), or pass another image with --image.",
		}
	}
	if cfg.minimalImage {
		return []string{
			"The check runs in a fresh container, not on this machine, so a command found here is not found there. The minimal sandbox (--image minimal) holds " + minimalSandboxHolds + ".",
			"Drop --image minimal to use this machine's system folders, pass --image with an image that has the check's command and toolchain (and the agent's CLI), or run without a container with --sandbox local (no isolation).",
		}
	}
	return []string{
		"The check runs in a fresh container, not on this machine, so a command found here is not found there. The default sandbox holds " + defaultSandboxHolds + ".",
		"Install the command in a system folder, bring the folder that holds it in with --mount HOST[:TARGET] (read-only), pass --image with an image that has the check's command and toolchain (and the agent's CLI), or run without a container with --sandbox local (no isolation).",
	}
}

// agentProgramUnseen refuses the command agent's program when it is an
// absolute path of this machine that the default Docker sandbox cannot
// see: it exists here (lstat), yet lies neither in the workspace's place
// in the container (sandbox.DockerRoot) nor under a --mount target nor in
// a host folder the default sandbox mounts (covers). Without this the
// first agent turn fails with "not found" after the setup step and the
// first check have run. It is nil when the program may be there (a
// relative path, a path the image may hold, a shell command line).
func agentProgramUnseen(agentBin string, mounts []sandbox.Mount, covers func(string) bool, lstat func(string) (os.FileInfo, error)) *startupError {
	fields := strings.Fields(agentBin)
	if len(fields) == 0 || !path.IsAbs(fields[0]) || !plainProgram.MatchString(fields[0]) {
		return nil
	}
	prog := path.Clean(fields[0])
	inside := func(dir string) bool {
		dir = path.Clean(dir)
		return prog == dir || strings.HasPrefix(prog, strings.TrimSuffix(dir, "/")+"/")
	}
	if inside(sandbox.DockerRoot) || covers(prog) {
		return nil
	}
	for _, m := range mounts {
		if inside(m.Target) {
			return nil
		}
	}
	if _, err := lstat(filepath.FromSlash(prog)); err != nil {
		return nil
	}
	dir, base := path.Split(prog)
	return &startupError{code: report.ErrBadInput,
		message:     fmt.Sprintf("--agent-bin %q: the program %s is on this machine, but the Docker sandbox cannot see it: it is outside the workspace, every --mount and the host folders the sandbox mounts; nothing was started", agentBin, prog),
		suggestions: []string{fmt.Sprintf("Put the program in the workspace and name it by a relative path (./%s), or mount its folder and name it there: --mount %s:/mnt/agent --agent-bin /mnt/agent/%s.", base, path.Clean(dir), base)}}
}
