package sandbox

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
)

// Stopping a run on a signal within a fixed time, whatever the Docker Engine
// does.
//
// goalrun promises one document and an exit within InterruptBound of
// SIGINT, SIGTERM, SIGHUP or SIGQUIT (README, "Stopping"). The run's context carries a
// StopClock; Interrupt cancels the context with an *Interrupted cause and
// fixes the deadline of every phase of the stop, counted from the signal:
// the running step is stopped, the loop takes its last snapshot, the
// document and the terminal event are written, GitHub is told, and then the
// sandbox is removed as far as the time allows (the rest is left to Reap).
// Every Engine call made while stopping runs on a Detached context, which
// outlives the run context's cancellation but never its phase's deadline.

// InterruptBound is the time from the signal to goalrun's exit (README:
// "exit 130 within 5 seconds").
const InterruptBound = 5 * time.Second

// Phase is a part of the stop after a signal, each with its own deadline
// counted from the signal (Interrupted.By).
type Phase int

// The phases of a stop, in order.
const (
	// PhaseSteps stops the running step (agent or check) and its
	// container: everything a sandbox does while Exec returns.
	PhaseSteps Phase = iota
	// PhaseFinish is the loop's last work: stopping the agent container,
	// the final change snapshot, the claims.
	PhaseFinish
	// PhasePublish delivers the document beyond the local host (the
	// action's check run, comment and job summary).
	PhasePublish
	// PhaseCleanup removes the sandbox: containers, volumes, networks,
	// folders. What does not fit is left to Reap.
	PhaseCleanup
	// PhaseExit is when the process must be gone.
	PhaseExit
)

// phaseEnds are the deadlines of the phases after the signal. Writing the
// document (local files and pipes) sits between PhaseFinish and
// PhasePublish; the last 500 ms of InterruptBound are slack for the
// process's own exit and a loaded machine.
var phaseEnds = [...]time.Duration{
	PhaseSteps:   1500 * time.Millisecond,
	PhaseFinish:  2500 * time.Millisecond,
	PhasePublish: 3500 * time.Millisecond,
	PhaseCleanup: 4 * time.Second,
	PhaseExit:    4500 * time.Millisecond,
}

// InterruptGrace is how long a step's processes get between SIGTERM and
// SIGKILL once the run was interrupted (KillGrace otherwise): the whole stop
// has InterruptBound.
const InterruptGrace = 500 * time.Millisecond

// Interrupted is the cause (context.Cause) of a run context a signal
// stopped.
type Interrupted struct {
	// Signal is the signal received (nil when Interrupt was called without
	// one, in tests).
	Signal os.Signal
	// At is when it was received.
	At time.Time
}

// Error names the signal: "interrupted by SIGTERM".
func (e *Interrupted) Error() string { return "interrupted by " + SignalName(e.Signal) }

// By is the deadline of phase p (see the Phase constants).
func (e *Interrupted) By(p Phase) time.Time { return e.At.Add(phaseEnds[p]) }

// Offset is how long after the signal phase p must be done.
func (p Phase) Offset() time.Duration { return phaseEnds[p] }

// SignalName is a signal's conventional name ("SIGINT"), "a signal" for nil.
func SignalName(s os.Signal) string {
	switch s {
	case nil:
		return "a signal"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	}
	return fmt.Sprint(s)
}

// StopClock is shared by everything a run starts; it says whether and when
// the run was interrupted. Put it in the run's context with WithStopClock;
// its value survives context.WithoutCancel, so detached cleanup contexts
// still see it.
type StopClock struct {
	mu     sync.Mutex
	in     *Interrupted
	done   context.Context // cancelled by Interrupt (for context.AfterFunc)
	signal context.CancelFunc
	cancel context.CancelCauseFunc
}

type stopClockKey struct{}

// WithStopClock returns a context that Interrupt cancels (cause
// *Interrupted) and the clock.
func WithStopClock(parent context.Context) (context.Context, *StopClock) {
	ctx, cancel := context.WithCancelCause(parent)
	done, signal := context.WithCancel(context.Background())
	c := &StopClock{done: done, signal: signal, cancel: cancel}
	return context.WithValue(ctx, stopClockKey{}, c), c
}

// Interrupt records the signal (the first call wins; later ones return
// false and change nothing) and cancels the run context.
func (c *StopClock) Interrupt(sig os.Signal) bool {
	c.mu.Lock()
	if c.in != nil {
		c.mu.Unlock()
		return false
	}
	in := &Interrupted{Signal: sig, At: time.Now()}
	c.in = in
	c.signal()
	c.mu.Unlock()
	c.cancel(in)
	return true
}

// Interrupted returns the recorded interruption, nil before one.
func (c *StopClock) Interrupted() *Interrupted {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.in
}

// StopClockOf returns the clock in ctx, nil when there is none.
func StopClockOf(ctx context.Context) *StopClock {
	c, _ := ctx.Value(stopClockKey{}).(*StopClock)
	return c
}

// InterruptOf returns how ctx's run was interrupted, nil when it was not
// (or ctx carries no StopClock).
func InterruptOf(ctx context.Context) *Interrupted {
	return StopClockOf(ctx).Interrupted()
}

type phaseKey struct{}

// WithPhase marks ctx as doing the work of phase p (PhaseSteps when
// unmarked): Detached contexts made from it end at that phase's deadline
// once the run is interrupted.
func WithPhase(ctx context.Context, p Phase) context.Context {
	return context.WithValue(ctx, phaseKey{}, p)
}

// PhaseOf is ctx's phase (WithPhase; PhaseSteps when unmarked).
func PhaseOf(ctx context.Context) Phase {
	p, _ := ctx.Value(phaseKey{}).(Phase)
	return p
}

// Detached returns a context for work that must go on when ctx is
// cancelled (stopping a step, cleaning up, writing what was done): it keeps
// ctx's values, ends after limit, and — once ctx's run is interrupted,
// before or during the work — at the deadline of ctx's phase (PhaseOf).
// The cancel function must be called.
func Detached(ctx context.Context, limit time.Duration) (context.Context, context.CancelFunc) {
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), limit)
	clk := StopClockOf(ctx)
	if clk == nil {
		return c, cancel
	}
	p := PhaseOf(ctx)
	var mu sync.Mutex
	var timer *time.Timer
	stop := context.AfterFunc(clk.done, func() {
		mu.Lock()
		defer mu.Unlock()
		timer = time.AfterFunc(time.Until(clk.Interrupted().By(p)), cancel)
	})
	return c, func() {
		stop()
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
	}
}

// killGrace is the time a step's processes get between SIGTERM and SIGKILL:
// KillGrace, or InterruptGrace once the run was interrupted.
func killGrace(ctx context.Context) time.Duration {
	if InterruptOf(ctx) != nil {
		return InterruptGrace
	}
	return KillGrace
}
