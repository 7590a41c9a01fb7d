package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/errdefs"
	"github.com/docker/docker/pkg/stdcopy"
)

// EngineExec runs a process in a running container (the agent's steps):
// create the exec, start it attached, read its exit code.
type EngineExec interface {
	ContainerExecCreate(ctx context.Context, container string, options container.ExecOptions) (container.ExecCreateResponse, error)
	ContainerExecAttach(ctx context.Context, execID string, options container.ExecAttachOptions) (types.HijackedResponse, error)
	ContainerExecInspect(ctx context.Context, execID string) (container.ExecInspect, error)
}

// stepWrapper starts every agent step. The Engine has no call that signals
// an exec's processes, so the step records its pid (runc makes every exec a
// session and process-group leader, and exec keeps the pid) in a file on the
// /run tmpfs, where a later exec can read it to kill the whole group. It
// also tells a missing program apart from a program that exits 127 (the
// sentinel line on stderr, see notStartedLine). Arguments: $1 the pid file,
// then the step's argv.
const stepWrapper = `echo $$ > "$1" 2>/dev/null; shift; command -v "$1" >/dev/null 2>&1 || { printf '%s%s\n' "` + notStartedPrefix + `" "$1" >&2; exit 127; }; exec "$@"`

// notStartedPrefix starts the line stepWrapper prints when the program is
// missing; Exec turns it into ErrNotStarted.
const notStartedPrefix = "goalrun-sandbox: cannot start the step, program not found: "

// stepKiller stops the process group whose leader's pid is in the file $1
// as Local does: SIGTERM, then SIGKILL once KillGrace (2 s: $2 tenths of a
// second) has passed with the group still alive. It ends as soon as the
// group is gone. It is the sandbox's only way to signal an exec's
// processes (see stepWrapper). busybox's kill takes no "--", so the
// negative pid comes right after the signal.
const stepKiller = `read p < "$1" && [ "$p" -gt 1 ] || exit 1
kill -TERM "-$p" 2>/dev/null
i=0; while kill -0 "-$p" 2>/dev/null && [ $i -lt "$2" ]; do sleep 0.1; i=$((i+1)); done
kill -KILL "-$p" 2>/dev/null; exit 0`

// Exec runs cmd in the sandbox (see Sandbox).
//
// Agent steps are execs in the agent container, run as the sandbox user
// through a tiny sh wrapper (the image needs sh, as every check does) with
// the agent environment: Config.Env, the proxy and upstream variables,
// Config.Secrets, then Cmd.Env. When the step's timeout expires, ctx ends or
// the sandbox closes, the step's process group is killed with SIGKILL; if its
// streams are still open stepKillWait later, the agent container itself is
// killed (and restarted before the next agent step). In copy mode the tree
// is copied back to the host workspace after every agent step.
//
// Check steps run in a fresh container from the same image with the same
// workspace, NetworkMode none, no secrets, no proxy variables and only HOME
// plus Cmd.Env on top of the image's own environment; the agent container
// is paused (frozen) meanwhile, so nothing the agent left running can touch
// the workspace during the check. The container is removed afterwards.
//
// OOM kills are read from the Engine's "oom" events (agent steps) or
// State.OOMKilled (checks). Errors: ErrClosed after Close; ErrNotStarted
// (wrapped) for an empty argv, a missing program, or a Dir outside the
// workspace; otherwise Engine failures, naming the call.
func (d *Docker) Exec(ctx context.Context, cmd Cmd) (Result, error) {
	if len(cmd.Args) == 0 {
		return Result{}, fmt.Errorf("sandbox: docker: empty command: %w", ErrNotStarted)
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	dir, err := stepWorkDir(d.root, cmd.Dir)
	if err != nil {
		return Result{}, err
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return Result{}, ErrClosed
	}
	d.steps.Add(1)
	d.stepSeq++
	seq := d.stepSeq
	if cmd.Role == RoleAgent {
		d.agentBusy++
	}
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		if cmd.Role == RoleAgent {
			d.agentBusy--
		}
		d.mu.Unlock()
		d.steps.Done()
	}()
	if cmd.Role == RoleSetup {
		return d.execSetup(ctx, cmd, dir, seq)
	}
	// What the setup steps prepared is sealed before anything else runs.
	d.sealSetup(ctx)
	if cmd.Role == RoleCheck {
		return d.runCheck(ctx, cmd, dir, seq)
	}
	res, err := d.execAgent(ctx, cmd, dir, seq)
	// Checks follow agent steps: their views are prepared from here on,
	// once the agent container is frozen (no Engine work of ours beside
	// the freeze that ends the step).
	d.viewsAhead()
	return res, err
}

// stepWorkDir maps Cmd.Dir to the working directory inside the sandbox,
// whose workspace is root.
func stepWorkDir(root, rel string) (string, error) {
	if rel == "" || rel == "." {
		return root, nil
	}
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("sandbox: docker: step directory %q is not inside the workspace: %w", rel, ErrNotStarted)
	}
	return path.Join(root, filepath.ToSlash(rel)), nil
}

// stopReason is why a step is being stopped early.
type stopReason int

const (
	stopNone stopReason = iota
	stopTimeout
	stopCancel
)

// waitStep waits for done or for the step's timeout, ctx or Close.
func (d *Docker) waitStep(ctx context.Context, timeout time.Duration, done <-chan struct{}) stopReason {
	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-done:
		return stopNone
	case <-timer:
		return stopTimeout
	case <-ctx.Done():
		return stopCancel
	case <-d.closing:
		return stopCancel
	}
}

// streams starts demultiplexing hj into the step's writers and feeding its
// stdin; done is closed when the output stream ends.
func streams(hj types.HijackedResponse, cmd Cmd) (out, errw *TailWriter, done chan struct{}) {
	fwdOut, fwdErr := StepWriters(cmd.Stdout, cmd.Stderr)
	out = NewTailWriter(fwdOut, TailBytes)
	errw = NewTailWriter(fwdErr, TailBytes)
	done = make(chan struct{})
	go func() {
		defer close(done)
		_, _ = stdcopy.StdCopy(out, errw, hj.Reader)
	}()
	if cmd.Stdin != nil {
		go func() {
			_, _ = io.Copy(hj.Conn, cmd.Stdin) // fails once the step stops reading and the stream closes
			_ = hj.CloseWrite()
		}()
	}
	return out, errw, done
}

// bg returns a context for Engine calls that must run even when ctx is
// done (stopping a step, cleaning up): apiTimeout at most, and no later than
// the deadline of ctx's phase once the run was interrupted (Detached).
func bg(ctx context.Context) (context.Context, context.CancelFunc) {
	return Detached(ctx, apiTimeout)
}

// waitAtMost returns a channel that is closed after d, or at the deadline
// of ctx's phase once the run is interrupted (before or during the wait),
// and its release function.
func waitAtMost(ctx context.Context, d time.Duration) (<-chan struct{}, context.CancelFunc) {
	w, cancel := Detached(ctx, d)
	return w.Done(), cancel
}

// execAgent runs an agent step as an exec in the agent container.
func (d *Docker) execAgent(ctx context.Context, cmd Cmd, dir string, seq int) (Result, error) {
	d.thaw(ctx)
	if err := d.ensureAgent(ctx); err != nil {
		return Result{}, err
	}
	pidFile := stepPidFile(seq)
	opts := d.stepExecOptions(d.agentEnv, dir, "goalrun-step", pidFile, cmd)
	ec, err := d.cli.ContainerExecCreate(ctx, d.agentID, opts)
	if err != nil && strings.Contains(err.Error(), "is not running") {
		// The container's main process ended (the relay died): start it
		// again and retry once.
		d.mu.Lock()
		d.agentDead = true
		d.mu.Unlock()
		if err := d.ensureAgent(ctx); err != nil {
			return Result{}, err
		}
		ec, err = d.cli.ContainerExecCreate(ctx, d.agentID, opts)
	}
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: docker: creating the agent step %q: %w", cmd.Args[0], err)
	}
	res, err := d.runStep(ctx, stepRun{
		what: "agent", container: d.agentID, exec: ec.ID, pidFile: pidFile,
		stop: func(ctx context.Context, pidFile string, done <-chan struct{}, hj *types.HijackedResponse) {
			d.stopAgentStep(ctx, pidFile, done, *hj)
		},
		explain: d.explainStart,
	}, cmd)
	if err != nil {
		return Result{}, err
	}
	// Nothing the agent left running may change the tree after its step:
	// the caller's change snapshot, the copy-out and the check must all
	// see the tree the step left. Freeze the container (it stays frozen
	// until the next agent step); if the Engine cannot, stop it.
	if err := d.freeze(ctx); err != nil {
		sctx, scancel := bg(ctx)
		serr := d.StopAgent(sctx)
		scancel()
		if serr != nil {
			return res, fmt.Errorf("sandbox: docker: neither freezing (%v) nor stopping the agent container after its step worked: %w", err, serr)
		}
	}
	if err := d.sweepSpecialBits(); err != nil {
		return res, err
	}
	if d.wsMode == WorkspaceCopy && res.Cancelled && InterruptOf(ctx) != nil {
		// A signal cut the turn short: its half-done changes stay in the
		// sandbox (removed with it) and the host keeps the tree of the last
		// finished turn, whole. Copying now could not be bounded by the
		// stop's deadline without leaving the host half-updated.
		return res, nil
	}
	if d.wsMode == WorkspaceCopy {
		octx, ocancel := copyOutContext(ctx, cmd.Timeout)
		defer ocancel()
		if err := d.copyOut(octx); err != nil {
			return res, err
		}
	}
	return res, nil
}

// stepPidFile is where the wrapper of step seq records its process group
// (stepWrapper), for the kill on a timeout or cancellation.
func stepPidFile(seq int) string {
	return fmt.Sprintf("%s/goalrun-step-%d.pid", stepPidDir, seq)
}

// stepExecOptions are the exec options of a step run in a running
// container (the agent's or the setup container): cmd through stepWrapper
// (label is its $0, pidFile where it records the process group), as the
// sandbox user in dir, with env and cmd.Env over it, attached.
func (d *Docker) stepExecOptions(env []string, dir, label, pidFile string, cmd Cmd) container.ExecOptions {
	return container.ExecOptions{
		User:         d.user,
		Env:          mergeEnv(env, cmd.Env),
		WorkingDir:   dir,
		Cmd:          append([]string{"sh", "-c", stepWrapper, label, pidFile}, cmd.Args...),
		AttachStdin:  cmd.Stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
	}
}

// stepRun is one created step exec for runStep.
type stepRun struct {
	what      string // "agent", "setup": names the step in errors
	container string // the container the exec runs in (its OOM kills are the step's)
	exec      string // the exec's id
	pidFile   string // where the step's wrapper records its process group
	// stop ends the step's processes on a timeout or cancellation and
	// returns once its output stream ended (closing hj as a last resort).
	stop func(ctx context.Context, pidFile string, done <-chan struct{}, hj *types.HijackedResponse)
	// explain adds what the container says to a step the runtime could
	// not start (notStarted); nil adds nothing.
	explain func(ctx context.Context, err error) error
}

// runStep starts the created exec s and runs it to its end: its output
// streamed into cmd's writers and tails, stopped (s.stop) at cmd.Timeout,
// when ctx ends or when the sandbox closes, then its exit code, whether it
// started at all (notStarted) and, when it failed, whether the kernel
// killed it for memory. The exit is read with ctx's cancellation
// detached (bg). Errors are the Engine's, or ErrNotStarted.
func (d *Docker) runStep(ctx context.Context, s stepRun, cmd Cmd) (Result, error) {
	start := time.Now()
	hj, err := d.cli.ContainerExecAttach(ctx, s.exec, container.ExecAttachOptions{})
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: docker: starting the %s step %q: %w", s.what, cmd.Args[0], err)
	}
	defer hj.Close()
	out, errw, done := streams(hj, cmd)
	var res Result
	switch d.waitStep(ctx, cmd.Timeout, done) {
	case stopTimeout:
		res.TimedOut = true
	case stopCancel:
		res.Cancelled = true
	}
	if res.TimedOut || res.Cancelled {
		s.stop(ctx, s.pidFile, done, &hj)
	}
	res.Duration = time.Since(start)
	cctx, cancel := bg(ctx)
	defer cancel()
	ins, err := d.execExit(cctx, s.exec)
	if err != nil {
		return Result{}, err
	}
	res.ExitCode = ins.ExitCode
	res.Stdout, res.Stderr = out.Output(), errw.Output()
	if err := notStarted(res, cmd.Args[0]); err != nil {
		if s.explain != nil {
			err = s.explain(cctx, err)
		}
		return Result{}, err
	}
	if res.ExitCode != 0 {
		res.OOMKilled = d.oomDuring(cctx, s.container, start, res.ExitCode == 137)
	}
	return res, nil
}

// copyOutContext returns the context a step's copy-out runs under. It is
// detached from ctx's cancellation, so the run's --timeout does not cut the
// copy of what the agent already did in the middle of a file, but bounded:
// by the step's own timeout (at least apiTimeout) while the run goes on, by
// apiTimeout from the moment ctx is done, and by the steps' deadline once
// the run was interrupted (a signal ends the run within InterruptBound).
func copyOutContext(ctx context.Context, stepTimeout time.Duration) (context.Context, context.CancelFunc) {
	octx, cancel := Detached(ctx, max(stepTimeout, apiTimeout))
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(apiTimeout, cancel)
		context.AfterFunc(octx, func() { t.Stop() })
	})
	return octx, func() { stop(); cancel() }
}

// notStarted tells a step that never started from one that ran: the
// wrapper's sentinel (the program is missing) and the runtime refusing to
// start sh itself (no shell in the image, a working directory that is not
// there) wrap ErrNotStarted; any other runtime failure to start the
// process (runc's "read init-p: connection reset by peer" when the
// container is out of memory or processes) is a plain error, since the
// program exists and a later step may well run. nil means the step ran.
func notStarted(res Result, prog string) error {
	if res.ExitCode != 126 && res.ExitCode != 127 {
		return nil
	}
	tail := res.Stderr.Tail
	if res.Stdout.Bytes == 0 && res.Stderr.Bytes == int64(len(tail)) && bytes.HasPrefix(tail, []byte(notStartedPrefix)) && bytes.Count(tail, []byte("\n")) == 1 {
		return fmt.Errorf("sandbox: docker: step %q: %w: not found on the sandbox's PATH", prog, ErrNotStarted)
	}
	all := append(append([]byte(nil), res.Stdout.Tail...), tail...)
	if !bytes.Contains(all, []byte("OCI runtime exec failed")) && !bytes.Contains(all, []byte("OCI runtime create failed")) {
		return nil
	}
	msg := strings.TrimSpace(string(all))
	if isNotStartedErr(errors.New(msg)) {
		return fmt.Errorf("sandbox: docker: step %q: %w: %s", prog, ErrNotStarted, msg)
	}
	return &startError{msg: msg}
}

// startError is the runtime failing to start a step's process for another
// reason than a missing program.
type startError struct{ msg string }

func (e *startError) Error() string {
	return "sandbox: docker: the container runtime could not start the step: " + e.msg
}

// explainStart adds what the agent container's state says to a startError:
// paused, out of memory, or stopped.
func (d *Docker) explainStart(ctx context.Context, err error) error {
	var se *startError
	if !errors.As(err, &se) {
		return err
	}
	c, ierr := d.cli.ContainerInspect(ctx, d.agentID)
	if ierr != nil || c.State == nil {
		return err
	}
	var hints []string
	if c.State.Paused {
		hints = append(hints, "the agent container is paused")
	}
	if c.State.OOMKilled {
		hints = append(hints, "the agent container hit its memory limit (files in /tmp and HOME count against it)")
	}
	if !c.State.Running {
		hints = append(hints, "the agent container is not running")
	}
	if len(hints) == 0 {
		hints = append(hints, "the container may be out of memory or processes (pids limit)")
	}
	return fmt.Errorf("%w (%s)", err, strings.Join(hints, "; "))
}

// stopAgentStep kills the step's process group; when the streams stay open,
// it kills the agent container (restarted before the next agent step) and,
// as a last resort, stops reading.
func (d *Docker) stopAgentStep(ctx context.Context, pidFile string, done <-chan struct{}, hj types.HijackedResponse) {
	cctx, cancel := bg(ctx)
	defer cancel()
	d.killGroup(cctx, pidFile, done)
	wait, release := waitAtMost(ctx, stepKillWait)
	defer release()
	select {
	case <-done:
		return
	case <-wait:
	}
	d.mu.Lock()
	d.agentDead = true
	d.mu.Unlock()
	_ = d.cli.ContainerKill(cctx, d.agentID, "KILL")
	wait2, release2 := waitAtMost(ctx, stepKillWait)
	defer release2()
	select {
	case <-done:
	case <-wait2:
		hj.Close()
		<-done
	}
}

// killGroup runs stepKiller in the agent container, retrying while the
// step has not written its pid file yet.
func (d *Docker) killGroup(ctx context.Context, pidFile string, done <-chan struct{}) {
	for attempt := 0; attempt < 5; attempt++ {
		code, err := d.runQuiet(ctx, []string{"sh", "-c", stepKiller, "goalrun-kill", pidFile, strconv.Itoa(int(killGrace(ctx) / (100 * time.Millisecond)))})
		if err == nil && code == 0 {
			return
		}
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// runQuiet runs argv as an exec in the agent container, discarding its
// output, and returns its exit code.
func (d *Docker) runQuiet(ctx context.Context, argv []string) (int, error) {
	ec, err := d.cli.ContainerExecCreate(ctx, d.agentID, container.ExecOptions{User: d.user, Cmd: argv, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return -1, err
	}
	hj, err := d.cli.ContainerExecAttach(ctx, ec.ID, container.ExecAttachOptions{})
	if err != nil {
		return -1, err
	}
	// A hijacked stream outlives its request's context: close it when ctx
	// ends, or an Engine that stops answering holds the copy forever.
	stop := context.AfterFunc(ctx, func() { hj.Close() })
	_, _ = io.Copy(io.Discard, hj.Reader)
	stop()
	hj.Close()
	ins, err := d.execExit(ctx, ec.ID)
	return ins.ExitCode, err
}

// execExit waits until the Engine reports the exec finished; its output
// stream can end a moment before the exit is recorded.
func (d *Docker) execExit(ctx context.Context, id string) (container.ExecInspect, error) {
	delay := 2 * time.Millisecond
	for {
		ins, err := d.cli.ContainerExecInspect(ctx, id)
		if err != nil {
			return ins, fmt.Errorf("sandbox: docker: inspecting step %.12s: %w", id, err)
		}
		if !ins.Running {
			return ins, nil
		}
		select {
		case <-ctx.Done():
			return ins, fmt.Errorf("sandbox: docker: step %.12s still running after its output ended: %w", id, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

// oomDuring reports whether the Engine recorded an OOM kill in container id
// since start. An OOM kill shows as SIGKILL (exit 137) of the step or of a
// child; the kernel's notification can trail the exit slightly, so when
// wait is set the query waits a short moment for it.
func (d *Docker) oomDuring(ctx context.Context, id string, start time.Time, wait bool) bool {
	until := time.Now()
	if wait {
		until = until.Add(300 * time.Millisecond)
	}
	f := filters.NewArgs(filters.Arg("type", string(events.ContainerEventType)), filters.Arg("container", id), filters.Arg("event", string(events.ActionOOM)))
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	msgs, errs := d.cli.Events(ctx, events.ListOptions{Since: unixNano(start), Until: unixNano(until), Filters: f})
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				return false
			}
			if m.Action == events.ActionOOM && !time.Unix(0, m.TimeNano).Before(start) {
				return true
			}
		case <-errs:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

func unixNano(t time.Time) string {
	return fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond())
}

var _ AgentStopper = (*Docker)(nil)

// StopAgent kills the agent container — every process the agent left
// running — and waits until it is no longer running (at most until ctx
// ends). A container frozen after a check is killed while still frozen and
// only then thawed, so none of its processes runs another instruction. In
// bind mode the setuid and setgid bits the agent set in the workspace are
// then removed (sweepSpecialBits). A later agent step starts it again.
// Errors come from the Docker Engine or the sweep.
func (d *Docker) StopAgent(ctx context.Context) error {
	d.mu.Lock()
	ran := d.agentRan
	d.mu.Unlock()
	if !ran {
		// Never started (deferAgentStart): no process of the agent's ever
		// ran, so there is nothing to kill and nothing to sweep.
		d.mu.Lock()
		d.agentDead = true
		d.mu.Unlock()
		return nil
	}
	err := d.stopAgent(ctx)
	// Whatever the container's state (already dead: the agent can kill its
	// own main process), the workspace is swept; once nothing of the
	// agent's runs any more, what the sweep leaves stays.
	if serr := d.sweepSpecialBits(); serr != nil && err == nil {
		err = serr
	}
	return err
}

// stopAgent is StopAgent without the sweep.
func (d *Docker) stopAgent(ctx context.Context) error {
	d.mu.Lock()
	d.agentDead = true
	id := d.agentID
	d.mu.Unlock()
	if id == "" {
		return nil
	}
	wait, errs := d.cli.ContainerWait(ctx, id, container.WaitConditionNotRunning)
	d.mu.Lock()
	frozen := d.frozen
	d.mu.Unlock()
	if frozen {
		d.killFrozen(ctx, id)
	}
	err := d.cli.ContainerKill(ctx, id, "KILL")
	d.thaw(ctx) // a frozen process dies as it thaws: SIGKILL is pending
	if err != nil {
		if errdefs.IsNotFound(err) || strings.Contains(err.Error(), "is not running") {
			return nil
		}
		return fmt.Errorf("sandbox: docker: stopping the agent container: %w", err)
	}
	select {
	case <-wait:
	case err := <-errs:
		if !errdefs.IsNotFound(err) {
			return fmt.Errorf("sandbox: docker: waiting for the agent container to stop: %w", err)
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// ensureAgent starts the agent container when it is not running: before
// the first agent step (deferAgentStart), or after a step had to kill it.
func (d *Docker) ensureAgent(ctx context.Context) error {
	d.mu.Lock()
	dead := d.agentDead
	d.agentDead = false
	d.mu.Unlock()
	if !dead {
		return nil
	}
	c, err := d.cli.ContainerInspect(ctx, d.agentID)
	if err != nil {
		return fmt.Errorf("sandbox: docker: inspecting the agent container: %w", err)
	}
	if c.State != nil && c.State.Running {
		return nil
	}
	return d.startAgent(ctx)
}

// runCheck runs a check step in a fresh container.
func (d *Docker) runCheck(ctx context.Context, cmd Cmd, dir string, seq int) (Result, error) {
	if d.wsMode == WorkspaceBind && dir != d.root {
		// The Engine creates a missing working directory; refuse instead,
		// as an exec would.
		if err := dirExists(d.cfg.Workspace, cmd.Dir); err != nil {
			return Result{}, fmt.Errorf("sandbox: docker: check step directory %q: %w: %w", cmd.Dir, ErrNotStarted, err)
		}
	}
	view, err := d.openView(ctx, false)
	if err != nil {
		return Result{}, err
	}
	res, err := d.runOnView(ctx, cmd, dir, seq, view)
	if errors.Is(err, errViewRemount) && cmd.Stdin == nil {
		// The overlay view would not mount (a remembered fact was wrong,
		// or the Engine changed): the step never started; run it once
		// more on the copy view the new probe chose. A step with stdin
		// is not run again (its input may be consumed).
		// The failed container is removed in the background: the new one
		// takes a number of its own.
		if view, err = d.openView(ctx, false); err != nil {
			return Result{}, err
		}
		d.mu.Lock()
		d.stepSeq++
		seq = d.stepSeq
		d.mu.Unlock()
		return d.runOnView(ctx, cmd, dir, seq, view)
	}
	return res, err
}

// runOnView runs a check-like step (fresh container, no network, no
// secrets, the check's environment) on view, with the agent container
// frozen; the container and then the view are removed when it ends (a
// kept view's plain volume stays: checkView.layer). It closes view on
// every path.
func (d *Docker) runOnView(ctx context.Context, cmd Cmd, dir string, seq int, view *checkView) (Result, error) {
	frozen, resume := d.pauseAgent(ctx)
	defer resume()

	mounts := []mount.Mount{view.mount()}
	if !view.copy {
		gitPath, err := d.gitConfigPath(ctx)
		if err != nil {
			d.closeView(ctx, view)
			return Result{}, err
		}
		mounts = append(mounts, d.gitMounts(true, gitPath)...)
	}
	mounts = append(mounts, d.extraMnts...)
	mounts = append(mounts, d.depsMount(true)...)
	cfg := &container.Config{
		Image: d.imageID,
		// The same wrapper as agent steps (no pid file needed: the whole
		// container is killed on timeout), so a missing program is told
		// apart from one exiting 127.
		Cmd:          append([]string{"sh", "-c", stepWrapper, "goalrun-check", "/dev/null"}, cmd.Args...),
		Entrypoint:   []string{},
		User:         d.user,
		Env:          mergeEnv(d.checkEnv, cmd.Env),
		WorkingDir:   dir,
		Labels:       d.labels("check"),
		AttachStdout: true,
		AttachStderr: true,
		AttachStdin:  cmd.Stdin != nil,
		OpenStdin:    cmd.Stdin != nil,
		StdinOnce:    cmd.Stdin != nil,
	}
	// Every reference createContainer records is removed when the step
	// ends, on every path (a cancellation during the create included),
	// then the view; Close removes what that removal could not.
	var refs []string
	defer func() { d.removeCheck(ctx, refs, view) }()
	name := fmt.Sprintf("goalrun-%s-check-%d", d.cfg.RunID, seq)
	id, err := d.createContainer(ctx, cfg, d.hostConfig(network.NetworkNone, mounts), name, func(ref string) {
		refs = append(refs, ref)
		d.mu.Lock()
		d.checks[ref] = struct{}{}
		d.mu.Unlock()
	})
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: docker: creating the check container from %s: %w", d.image, err)
	}

	hj, err := d.cli.ContainerAttach(ctx, id, container.AttachOptions{Stream: true, Stdin: cmd.Stdin != nil, Stdout: true, Stderr: true})
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: docker: attaching to the check container: %w", err)
	}
	defer hj.Close()
	// The wait outlives ctx (the exit is read after a stop) but not the
	// step's timeout, nor the steps' deadline of an interrupted run.
	wctx, wcancel := Detached(ctx, cmd.Timeout+apiTimeout)
	defer wcancel()
	if cmd.Timeout <= 0 {
		wcancel()
		wctx, wcancel = Detached(ctx, unknownLifetime)
		defer wcancel()
	}
	waitC, waitErr := d.cli.ContainerWait(wctx, id, container.WaitConditionNextExit)
	out, errw, done := streams(hj, cmd)
	start := time.Now()
	frozen()
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	if view.copy {
		// The agent is frozen now: copy the tree it left.
		if err := d.fillCopyView(ctx, id, view); err != nil {
			return Result{}, err
		}
	}
	// The step may print (and the caller cancel ctx on what it read)
	// before the start call returns: the start itself must not be
	// cancelled half-way; waitStep below handles ctx.
	sctx, scancel := bg(ctx)
	err = d.cli.ContainerStart(sctx, id, container.StartOptions{})
	scancel()
	if err != nil {
		if !view.copy && isViewMountErr(err) && d.reprobeOverlay(ctx) {
			return Result{}, fmt.Errorf("sandbox: docker: starting the check container: %w: %v", errViewRemount, err)
		}
		if isNotStartedErr(err) {
			return Result{}, fmt.Errorf("sandbox: docker: check step %q: %w: %v", cmd.Args[0], ErrNotStarted, err)
		}
		return Result{}, fmt.Errorf("sandbox: docker: starting the check container: %w", err)
	}

	exited := make(chan struct{})
	var status container.WaitResponse
	var werr error
	go func() {
		defer close(exited)
		select {
		case status = <-waitC:
		case werr = <-waitErr:
		}
	}()
	var res Result
	switch d.waitStep(ctx, cmd.Timeout, exited) {
	case stopTimeout:
		res.TimedOut = true
	case stopCancel:
		res.Cancelled = true
	}
	cctx, cancel := bg(ctx)
	defer cancel()
	if res.TimedOut || res.Cancelled {
		// SIGTERM (the init forwards it to the step), SIGKILL after
		// KillGrace (whole seconds: the Engine's unit; at once after an
		// interrupt); the container is thrown away either way.
		grace := int(killGrace(ctx) / time.Second)
		if err := d.cli.ContainerStop(cctx, id, container.StopOptions{Signal: "TERM", Timeout: &grace}); err != nil {
			_ = d.cli.ContainerKill(cctx, id, "KILL")
		}
		<-exited
	}
	res.Duration = time.Since(start)
	drain, release := waitAtMost(ctx, stepKillWait)
	defer release()
	select {
	case <-done:
	case <-drain:
		hj.Close()
		<-done
	}
	if werr != nil {
		return Result{}, fmt.Errorf("sandbox: docker: waiting for the check container: %w", werr)
	}
	if status.Error != nil && status.Error.Message != "" {
		return Result{}, fmt.Errorf("sandbox: docker: waiting for the check container: %s", status.Error.Message)
	}
	res.ExitCode = int(status.StatusCode)
	res.Stdout, res.Stderr = out.Output(), errw.Output()
	if err := notStarted(res, cmd.Args[0]); err != nil {
		return Result{}, err
	}
	if res.ExitCode != 0 && !res.Cancelled {
		if c, err := d.cli.ContainerInspect(cctx, id); err == nil && c.State != nil {
			res.OOMKilled = c.State.OOMKilled
		}
	}
	return res, nil
}

// isNotStartedErr recognizes the runtime's refusal to start a program that
// does not exist (or a working directory that cannot be entered).
func isNotStartedErr(err error) bool {
	msg := err.Error()
	for _, s := range []string{"executable file not found", "no such file or directory", "permission denied", "not a directory"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// removeCheck removes a finished check's containers (ids) and then its
// view in the background; Close waits for the removals.
func (d *Docker) removeCheck(ctx context.Context, ids []string, view *checkView) {
	d.removals.Add(1)
	go func() {
		defer d.removals.Done()
		cctx, cancel := bg(ctx)
		defer cancel()
		for _, id := range ids {
			err := d.cli.ContainerRemove(cctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
			if err == nil || errdefs.IsNotFound(err) {
				d.mu.Lock()
				delete(d.checks, id)
				d.mu.Unlock()
			}
		}
		d.closeView(cctx, view)
	}()
}

// pauseAgent starts freezing the agent container for a check, unless an
// agent step is running. The freeze runs while the check container is being
// created: call wait before the check starts. resume does not thaw: the
// container stays frozen until the next agent step needs it (thaw), so
// nothing the agent left running can write to the workspace between a check
// and the end of the run (StopAgent kills it frozen). A container still
// frozen from the previous check stays so.
func (d *Docker) pauseAgent(ctx context.Context) (wait, resume func()) {
	noop := func() {}
	d.mu.Lock()
	if d.agentBusy > 0 || d.paused || d.agentDead {
		d.mu.Unlock()
		return noop, noop
	}
	d.paused = true
	d.mu.Unlock()
	frozen := make(chan bool, 1)
	go func() {
		// Not ctx: a pause the Engine carries out after the caller gave
		// up would leave the agent frozen for good.
		cctx, cancel := bg(ctx)
		defer cancel()
		frozen <- d.cli.ContainerPause(cctx, d.agentID) == nil
	}()
	var ok, got bool
	wait = func() {
		if !got {
			ok, got = <-frozen, true
		}
	}
	resume = func() {
		wait()
		d.mu.Lock()
		d.frozen = true
		d.mu.Unlock()
		if !ok {
			// The pause failed (no freezer, say): the check ran with the
			// agent container thawed. Unpause now anyway in case it half
			// happened.
			d.thaw(ctx)
		}
	}
	return wait, resume
}

// freeze pauses the agent container now and leaves it frozen until the next
// agent step thaws it (a check's pauseAgent then has nothing to do). It does
// nothing when the container is already paused or dead. Errors come from
// the Engine (no freezer in its cgroup setup, say).
func (d *Docker) freeze(ctx context.Context) error {
	d.mu.Lock()
	if d.paused || d.agentDead {
		d.mu.Unlock()
		return nil
	}
	d.paused = true
	d.mu.Unlock()
	cctx, cancel := bg(ctx)
	defer cancel()
	if err := d.cli.ContainerPause(cctx, d.agentID); err != nil {
		d.mu.Lock()
		d.paused = false
		d.mu.Unlock()
		return err
	}
	d.mu.Lock()
	d.frozen = true
	d.mu.Unlock()
	return nil
}

// thaw unfreezes the agent container if it was left frozen (at the next
// agent step, or after StopAgent's kill) and waits, at most thawWait, until
// the Engine's state says so: the Engine records the unpause from the
// runtime's event, after its call returned, and refuses an exec ("is
// paused") until then. An Engine error only means it was not paused.
func (d *Docker) thaw(ctx context.Context) {
	d.mu.Lock()
	frozen := d.frozen
	d.frozen = false
	d.mu.Unlock()
	if !frozen {
		return
	}
	cctx, cancel := bg(ctx)
	defer cancel()
	if err := d.cli.ContainerUnpause(cctx, d.agentID); err == nil {
		deadline := time.Now().Add(thawWait)
		for delay := time.Millisecond; time.Now().Before(deadline); delay = min(2*delay, 100*time.Millisecond) {
			c, err := d.cli.ContainerInspect(cctx, d.agentID)
			if err != nil || c.State == nil || !c.State.Paused {
				break
			}
			time.Sleep(delay)
		}
	}
	d.mu.Lock()
	d.paused = false
	d.mu.Unlock()
}

// thawWait bounds how long thaw waits for the Engine to record an unpause.
const thawWait = 10 * time.Second

var errNotDir = errors.New("not a directory")
