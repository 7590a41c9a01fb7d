// Package sandbox is goalrun's execution boundary: it starts once per run,
// executes steps (agent turns and checks) and reports its posture — what it
// really applied, read back from the system, never what was asked for.
//
// Two implementations satisfy Sandbox: Local (the host, an allowlisted
// environment, its own process group) and Docker (a hardened container per
// run, a fresh network-less container per check). Both pass the conformance
// suite in sandbox/sandboxtest.
//
// The package knows nothing of agents, documents or GitHub.
package sandbox

import (
	"context"
	"errors"
	"io"
	"time"
)

// Sandbox runs the steps of one run.
//
// Exec runs cmd to completion (or until its timeout or ctx ends) and returns
// its Result. A non-zero exit status, a timeout or an OOM kill is a Result,
// never an error; error means the machinery failed (the Engine vanished, a
// pipe broke). An error that wraps ErrNotStarted means the command could not
// be started at all (no shell, no such executable).
//
// Posture returns what the sandbox really applied; its counters (egress
// denials) grow while the run goes on, so call it again before reporting.
//
// Close stops every step still running and removes everything the run
// created (containers, networks, volumes, proxy sockets). It is idempotent and
// safe to call from any exit path.
type Sandbox interface {
	Exec(ctx context.Context, cmd Cmd) (Result, error)
	Posture() Posture
	Close(ctx context.Context) error
}

// AgentStopper is implemented by sandboxes that can stop everything the
// agent left running (background processes a turn started that outlive
// it), so nothing writes to the workspace after the run's last check.
// StopAgent kills them and returns once they are gone, or with ctx's error;
// later agent steps may restart the agent's environment. Docker implements
// it (the agent container is killed); on the local host there is nothing
// that could find a process that left its group.
type AgentStopper interface {
	StopAgent(ctx context.Context) error
}

// ErrNotStarted is wrapped by Exec's error when the step's program could not
// be started at all (for example the shell is missing). Callers use
// errors.Is(err, ErrNotStarted).
var ErrNotStarted = errors.New("sandbox: the step could not be started")

// ErrClosed is returned by Exec after Close.
var ErrClosed = errors.New("sandbox: closed")

// Role says which kind of step a Cmd is; it decides the environment the step
// runs in.
type Role int

const (
	// RoleAgent is an agent turn: it runs in the run's long-lived agent
	// environment, with the configured network, proxy settings and secrets.
	RoleAgent Role = iota
	// RoleCheck is the deterministic check (or any verification step): it runs
	// in a fresh environment (a new container for Docker) with no network, no
	// secrets and no proxy settings, so nothing the agent left running can
	// tamper with the verdict.
	RoleCheck
	// RoleSetup is a setup step (--setup and the detected defaults): it
	// runs before the first check, on the untouched workspace, to prepare
	// dependencies. It gets no secrets and no model API; its network is
	// what preparing needs: in Docker a fresh container of its own whose
	// egress proxy allows only Config.Setup.AllowHosts, writing the deps
	// volume (Config.Setup.Env points the tools at it) and, where the
	// sandbox supports it, a kept layer under the checks' view of the
	// tree; on the local host the host's network, in the workspace.
	// Setup steps must come before any check or agent step.
	RoleSetup
)

// String returns "agent", "check" or "setup".
func (r Role) String() string {
	switch r {
	case RoleCheck:
		return "check"
	case RoleSetup:
		return "setup"
	}
	return "agent"
}

// Cmd is one step.
type Cmd struct {
	// Role selects the agent or the check environment.
	Role Role
	// Args is the argv; Args[0] is looked up on the sandbox's PATH. Use Shell
	// to run a script with sh -c.
	Args []string
	// Env is added to the role's base environment for this step only. It must
	// not carry secrets for RoleCheck (Exec does not inspect it).
	Env map[string]string
	// Dir is the working directory relative to the workspace root; "" is the
	// root itself. It must stay inside the workspace.
	Dir string
	// Stdin feeds the step's standard input; nil means empty input (/dev/null).
	Stdin io.Reader
	// Stdout and Stderr receive the step's output live, as it is produced
	// (nil discards it). The Result keeps only a bounded tail of each.
	Stdout, Stderr io.Writer
	// Timeout bounds the step's wall clock; 0 means only ctx bounds it. On
	// expiry the step's process group (and for Docker, if needed, its
	// container) is killed and the Result says TimedOut.
	Timeout time.Duration
}

// Shell returns the argv that runs script with sh -c.
func Shell(script string) []string { return []string{"sh", "-c", script} }

// TailBytes is how much of each output stream a Result keeps: the last 65536
// bytes (docs/security.md, "Steps").
const TailBytes = 64 << 10

// Result is how a step ended.
type Result struct {
	// ExitCode is the step's exit status; a step killed by a signal reports
	// 128+signal, as a shell would.
	ExitCode int
	// Stdout and Stderr are the bounded tails of the step's output streams.
	Stdout, Stderr Output
	// Duration is the step's wall-clock time.
	Duration time.Duration
	// TimedOut is true when the step was killed because Cmd.Timeout expired.
	TimedOut bool
	// Cancelled is true when the step was killed because ctx ended.
	Cancelled bool
	// OOMKilled is true when the kernel killed the step for exceeding the
	// sandbox's memory limit.
	OOMKilled bool
	// Reused is true for a setup step that did not run: an earlier run
	// prepared its outputs under the same key (SetupConfig.Key).
	Reused bool
}

// Output is the bounded tail of one output stream.
type Output struct {
	// Tail holds the last bytes of the stream, at most TailBytes.
	Tail []byte
	// Bytes is the stream's total length in bytes.
	Bytes int64
	// Truncated is true when Bytes > len(Tail): the start was dropped.
	Truncated bool
}
