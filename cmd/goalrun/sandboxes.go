package main

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"time"

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
			suggestions: []string{"Choose a workspace that is not the home folder, the root or a credential folder."}}
	case errors.Is(err, sandbox.ErrRootWorkspace):
		return &startupError{code: report.ErrBadInput, message: fmt.Sprintf("the sandbox refused the workspace: %v", err),
			suggestions: []string{"Give the workspace to a normal user or drop --workspace bind (auto copies a root-owned workspace in and out)."}}
	}
	return &startupError{code: report.ErrSandboxFailed, message: fmt.Sprintf("the sandbox could not start: %v", err),
		suggestions: []string{"The sandbox could not start; check the Docker Engine's health and the sandbox image, then run again."}}
}

// engineTimeout bounds the first contact with the Docker Engine.
const engineTimeout = 10 * time.Second

// inContainerBinDir is where agent executables from the host are mounted in
// the default image (on its PATH).
const inContainerBinDir = "/usr/local/bin"

// inContainerGoroot is where the host's Go toolchain is mounted in the
// default image (first on its PATH, sandbox.ImagePath).
const inContainerGoroot = "/usr/local/go"

// startDocker starts the Docker sandbox for a run: it reaches the Engine
// (DOCKER_HOST or the default socket), removes leftovers of dead runs, and
// without --image builds (or reuses) the default image from files on this
// machine, mounting the agent's native executable and the host's Go
// toolchain read-only with a warm, read-only Go build cache
// (withWarmGoCache). goalrun's own executable is the egress relay unless
// cfg.RelayBinary names another static goalrun. opts are passed to
// sandbox.StartDocker.
func startDocker(ctx context.Context, rc runConfig, cfg sandbox.Config, opts ...sandbox.DockerOption) (sandbox.Sandbox, error) {
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
	// Leftovers of dead runs; a failure here must not stop this run.
	_, _ = sandbox.Reap(ctx, cli, rc.timeout)

	// The agent's CLI first: a missing CLI is the newcomer's first problem
	// and has its own code and advice (AgentNotFound).
	var native *agent.Native
	if cfg.Image == "" && rc.agent != agent.CommandName {
		n, err := nativeAgent(rc)
		if err != nil {
			cli.Close()
			return nil, err
		}
		native = &n
	}
	if cfg.Network == sandbox.NetworkEgress && cfg.RelayBinary == "" {
		exe, err := relayBinary()
		if err != nil {
			cli.Close()
			return nil, &startupError{code: report.ErrSandboxFailed, message: err.Error(),
				suggestions: []string{"Use a statically linked goalrun for the egress network: build it with cgo disabled (CGO_ENABLED=0) and run that build."}}
		}
		cfg.RelayBinary = exe
	}
	var agentBin string
	if cfg.Image == "" {
		var libsFor []string
		if native != nil {
			agentBin = path.Join(inContainerBinDir, rc.spec.Bin)
			cfg.Mounts = append(cfg.Mounts, sandbox.Mount{Source: native.Path, Target: agentBin, ReadOnly: true})
			if !native.Static() {
				libsFor = append(libsFor, native.Path)
			}
		}
		if goroot := hostGoroot(); goroot != "" {
			cfg.Mounts = append(cfg.Mounts, sandbox.Mount{Source: goroot, Target: inContainerGoroot, ReadOnly: true})
			cfg = withWarmGoCache(ctx, cfg, goroot)
		}
		ref, err := sandbox.BuildImage(ctx, cli, sandbox.DefaultImageSpec(libsFor...))
		if err != nil {
			cli.Close()
			if ctx.Err() != nil {
				// Interrupted, not failed: the error wraps ctx's, and the
				// caller reports the run as cancelled.
				return nil, fmt.Errorf("building the default sandbox image: %w", err)
			}
			return nil, &startupError{code: report.ErrSandboxFailed, message: fmt.Sprintf("building the default sandbox image (or pass --image): %v", err),
				suggestions: []string{"Pass an image that contains the agent CLI and the check's toolchain with the image setting, or check the Docker Engine's health."}}
		}
		cfg.Image = ref
	}
	// What the run creates is labelled to expire after the run's own
	// timeout, so another goalrun's Reap never removes it early.
	cfg.Lifetime = rc.timeout
	sb, err := sandbox.StartDocker(ctx, cli, cfg, opts...)
	if err != nil {
		cli.Close()
		return nil, err
	}
	return &dockerSandbox{Docker: sb, close: cli.Close, bin: agentBin}, nil
}

// withWarmGoCache adds a read-only Go build cache that already holds the
// standard library compiled by the host's toolchain at goroot (built once
// per toolchain in the user's cache folder, goalrun/ below
// os.UserCacheDir(), by sandbox.WarmGoCache), so a fresh check container
// does not compile it again, and the agent cannot write it. The cache's
// entries are keyed by GOROOT's path: when the host's GOROOT is not
// inContainerGoroot it is also mounted at its host path and named by
// GOROOT. Without a user cache folder, or when warming fails, the run goes
// on without the cache (every check then compiles the standard library:
// slower, not wrong).
func withWarmGoCache(ctx context.Context, cfg sandbox.Config, goroot string) sandbox.Config {
	base, err := os.UserCacheDir()
	if err != nil {
		return cfg
	}
	dir, err := sandbox.WarmGoCache(ctx, goroot, filepath.Join(base, "goalrun"))
	if err != nil {
		return cfg
	}
	mnt, env := sandbox.GoCacheMount(dir)
	cfg.Mounts = append(cfg.Mounts, mnt)
	if goroot != inContainerGoroot {
		cfg.Mounts = append(cfg.Mounts, sandbox.Mount{Source: goroot, Target: goroot, ReadOnly: true})
		env["GOROOT"] = goroot
	}
	tool := make(map[string]string, len(cfg.ToolEnv)+len(env))
	for k, v := range cfg.ToolEnv {
		tool[k] = v
	}
	for k, v := range env {
		tool[k] = v
	}
	cfg.ToolEnv = tool
	return cfg
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
			return "", fmt.Errorf("goalrun's own executable %s is dynamically linked, so it cannot run the egress relay inside the container; build goalrun with CGO_ENABLED=0", exe)
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
	n, err := agent.NativeExecutable(rc.spec, agent.OSFS{}, onPath)
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
	close func() error
	bin   string // the agent's executable inside the container ("" = as given)
}

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
