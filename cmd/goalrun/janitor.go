package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/docker/docker/client"

	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/sandbox"
)

// janitorCommand is the hidden subcommand that removes what a goalrun
// process could not (goalrun starts it for every run):
//
//	goalrun __janitor --for PID --within DURATION [--engine]
//
// It waits for its standard input (a pipe the run holds) to end — when the
// run exits, however it exits — and returns at once when the run wrote
// "clean" first. Otherwise, once process PID is gone, it reaps: everything
// dead goalrun runs left (sandbox.Reap: containers, also paused ones,
// volumes, networks with --engine; goalrun's folders in TMPDIR always),
// again and again with a growing pause until the Engine answered every call,
// for at most DURATION. So a run killed outright (SIGKILL, the OOM killer)
// or stopped while the Engine hung leaves nothing behind for long, and a
// container frozen for a check — whose own self-ending timer cannot fire —
// is removed too. A janitor killed with its run (a process group or cgroup
// killed as a whole) leaves the work to the next goalrun's start-up.
const janitorCommand = "__janitor"

// janitorEnabled is set by main: execute starts a janitor only in the real
// program, never in tests that call it in-process (os.Executable is then the
// test binary).
var janitorEnabled bool

// Bounds of the janitor's work.
const (
	// janitorParentWait bounds the wait for the run's process to be gone
	// after its pipe closed.
	janitorParentWait = 10 * time.Second
	// janitorReapTimeout bounds one reap.
	janitorReapTimeout = 30 * time.Second
	// janitorMaxPause is the longest pause between two reaps.
	janitorMaxPause = 30 * time.Second
	// janitorGrace is added to the run's --timeout for the janitor's
	// DURATION: what the agent container's own lifetime adds too.
	janitorGrace = 10 * time.Minute
	// janitorUnreachable is how many reaps in a row may find no Engine at
	// all before the janitor leaves the rest to the next run.
	janitorUnreachable = 3
)

// janitor is a started janitor: release ends the run's side of the pipe.
type janitor struct {
	w *os.File
}

// startJanitor starts a detached janitor for this process (its own session:
// a terminal's hangup or a process-group kill of the run does not reach it;
// stdout and stderr /dev/null, so it never holds the run's pipes open).
// engine says whether the run may create Engine objects. It returns nil when
// janitors are off or it cannot start one (the next run's start-up reaps
// then).
func startJanitor(within time.Duration, engine bool) *janitor {
	if !janitorEnabled {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	r, w, err := os.Pipe() // close-on-exec: no step inherits the run's end
	if err != nil {
		return nil
	}
	args := []string{janitorCommand, "--for", strconv.Itoa(os.Getpid()), "--within", within.String()}
	if engine {
		args = append(args, "--engine")
	}
	cmd := exec.Command(exe, args...)
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// The local sandbox ends every process its steps leave behind, among
	// goalrun's children: this one is goalrun's own.
	if err := sandbox.StartKeptProcess(cmd); err != nil {
		r.Close()
		w.Close()
		return nil
	}
	r.Close()
	go cmd.Wait() // reaped while the run lives; reparented after
	return &janitor{w: w}
}

// janitorDelay is how long a run goes before it starts its janitor. A
// second goalrun process costs a run that ends within a second (an
// already-green check) a twentieth of its time on a small machine
// (docs/benchmarks.md); a run killed before the janitor starts leaves
// what it made to the next goalrun's start-up, which removes what any dead
// run left (sandbox.Reap: every object carries its owner and expiry). The
// first agent turn starts it at once (janitorAtAgent): from then on an
// agent container runs, or is frozen for a check, which must not outlive
// a killed run until some later goalrun starts.
const janitorDelay = time.Second

// lateJanitor is a run's janitor, started once the run has lasted a delay
// or its first agent turn begins (now), or at release when the run ends
// sooner without having removed everything it made.
type lateJanitor struct {
	mu    sync.Mutex
	timer *time.Timer
	start func() *janitor
	jan   *janitor
	done  bool
}

// startJanitorAfter starts a janitor with start once delay has passed,
// unless the run was released before.
func startJanitorAfter(delay time.Duration, start func() *janitor) *lateJanitor {
	l := &lateJanitor{start: start}
	// The timer may fire before AfterFunc returns: now waits for the lock
	// until l.timer is set.
	l.mu.Lock()
	defer l.mu.Unlock()
	l.timer = time.AfterFunc(delay, l.now)
	return l
}

// now starts the janitor at once, unless it runs already or the run was
// released.
func (l *lateJanitor) now() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done && l.jan == nil {
		l.timer.Stop()
		l.jan = l.start()
	}
}

// janitorAtAgent is a report.Sink that starts the run's janitor (set)
// when the first agent turn begins (report.EventAgentStarted), before the
// agent container starts.
type janitorAtAgent struct {
	l atomic.Pointer[lateJanitor]
}

// set names the run's janitor; events before it start nothing.
func (j *janitorAtAgent) set(l *lateJanitor) { j.l.Store(l) }

func (j *janitorAtAgent) Emit(e report.Event) {
	if e.Type != report.EventAgentStarted {
		return
	}
	if l := j.l.Load(); l != nil {
		l.now()
	}
}

// release is janitor.release for the run's janitor; a run that did not
// remove everything it made starts its janitor now if it had none yet.
// Only the first call counts.
func (l *lateJanitor) release(clean bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return
	}
	l.done = true
	l.timer.Stop()
	if l.jan == nil && !clean {
		l.jan = l.start()
	}
	l.jan.release(clean)
}

// release tells the janitor the run is over: with clean, that it removed
// everything it made (the janitor returns at once); otherwise the janitor
// reaps once this process is gone. Nil-safe; only the first call counts.
func (j *janitor) release(clean bool) {
	if j == nil || j.w == nil {
		return
	}
	if clean {
		j.w.Write([]byte("clean\n"))
	}
	j.w.Close()
	j.w = nil
}

// janitorCmd is `goalrun __janitor`.
func janitorCmd(ctx context.Context, args []string, stdin io.Reader) int {
	var pid int
	var within time.Duration
	var engine bool
	for i := 0; i < len(args); i++ {
		switch a := args[i]; a {
		case "--engine":
			engine = true
		case "--for", "--within":
			if i+1 == len(args) {
				return exitBadInput
			}
			i++
			var err error
			if a == "--for" {
				pid, err = strconv.Atoi(args[i])
			} else {
				within, err = time.ParseDuration(args[i])
			}
			if err != nil {
				return exitBadInput
			}
		default:
			return exitBadInput
		}
	}
	if pid <= 0 || within <= 0 {
		return exitBadInput
	}
	b, _ := io.ReadAll(io.LimitReader(stdin, 64))
	if strings.TrimSpace(string(b)) == "clean" {
		return exitMet
	}
	// The pipe ends a moment before the process does: Reap spares the
	// objects of a live owner.
	for deadline := time.Now().Add(janitorParentWait); processAlive(pid) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	deadline := time.Now().Add(within)
	unreachable := 0
	for pause := time.Second; ; pause = min(2*pause, janitorMaxPause) {
		err := reapOnce(ctx, within, engine)
		if err == nil {
			return exitMet
		}
		// An Engine that hangs may answer again; one that is gone (its
		// socket refuses) is the next run's to reap, not this process's
		// to wait for.
		if client.IsErrConnectionFailed(err) {
			if unreachable++; unreachable >= janitorUnreachable {
				return exitRunFailed
			}
		} else {
			unreachable = 0
		}
		if time.Now().Add(pause).After(deadline) {
			return exitRunFailed
		}
		select {
		case <-ctx.Done():
			return exitInterrupted
		case <-time.After(pause):
		}
	}
}

// reapOnce runs one sandbox.Reap (folders only without engine).
func reapOnce(ctx context.Context, olderThan time.Duration, engine bool) error {
	rctx, cancel := context.WithTimeout(ctx, janitorReapTimeout)
	defer cancel()
	if !engine {
		_, err := sandbox.Reap(rctx, nil, olderThan)
		return err
	}
	cli, err := sandbox.NewDockerClient()
	if err != nil {
		return err
	}
	defer cli.Close()
	_, err = sandbox.Reap(rctx, cli, olderThan)
	return err
}

// processAlive reports whether pid runs (a zombie does not).
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && !strings.HasPrefix(strings.TrimSpace(s[i+1:]), "Z")
}
