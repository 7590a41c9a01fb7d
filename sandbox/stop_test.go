package sandbox

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"
)

// TestDetached: a Detached context outlives its parent's cancellation, ends
// after its limit, and — once the run is interrupted, before or while it is
// in use — at the deadline of its phase, counted from the signal.
func TestDetached(t *testing.T) {
	t.Run("without a clock it ends after its limit only", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		c, release := Detached(parent, 50*time.Millisecond)
		defer release()
		cancel()
		if c.Err() != nil {
			t.Fatal("ended with its parent")
		}
		<-c.Done()
	})
	t.Run("interrupted before: the phase's deadline", func(t *testing.T) {
		ctx, clk := WithStopClock(context.Background())
		clk.Interrupt(syscall.SIGTERM)
		in := clk.Interrupted()
		for _, p := range []Phase{PhaseSteps, PhaseFinish, PhasePublish, PhaseCleanup} {
			c, release := Detached(WithPhase(ctx, p), time.Hour)
			<-c.Done()
			if late := time.Since(in.By(p)); late < -10*time.Millisecond {
				t.Errorf("phase %d ended %s before its deadline", p, -late)
			}
			release()
		}
		if !errors.Is(context.Cause(ctx), in) || in.Signal != syscall.SIGTERM || in.Error() != "interrupted by SIGTERM" {
			t.Errorf("cause %v", context.Cause(ctx))
		}
	})
	t.Run("interrupted while in use", func(t *testing.T) {
		ctx, clk := WithStopClock(context.Background())
		c, release := Detached(WithPhase(ctx, PhaseSteps), time.Hour)
		defer release()
		time.Sleep(20 * time.Millisecond)
		if c.Err() != nil {
			t.Fatal("ended before any signal")
		}
		clk.Interrupt(syscall.SIGHUP)
		select {
		case <-c.Done():
		case <-time.After(phaseEnds[PhaseSteps] + 2*time.Second):
			t.Fatal("did not end at the steps' deadline")
		}
		if got := InterruptOf(c); got == nil || got.Signal != syscall.SIGHUP {
			t.Errorf("the clock is not visible through the detached context: %v", got)
		}
	})
	t.Run("the first signal wins", func(t *testing.T) {
		_, clk := WithStopClock(context.Background())
		if !clk.Interrupt(syscall.SIGINT) || clk.Interrupt(syscall.SIGTERM) {
			t.Error("a second signal counted")
		}
		if clk.Interrupted().Signal != syscall.SIGINT {
			t.Errorf("signal %v", clk.Interrupted().Signal)
		}
	})
	t.Run("kill grace", func(t *testing.T) {
		ctx, clk := WithStopClock(context.Background())
		if killGrace(ctx) != KillGrace {
			t.Error("shortened before any signal")
		}
		clk.Interrupt(syscall.SIGINT)
		if killGrace(ctx) != InterruptGrace {
			t.Errorf("after a signal: grace %s", killGrace(ctx))
		}
	})
	if phaseEnds[PhaseExit] >= InterruptBound {
		t.Errorf("the last phase ends at %s, not within %s", phaseEnds[PhaseExit], InterruptBound)
	}
	for p := PhaseSteps; p < PhaseExit; p++ {
		if phaseEnds[p] >= phaseEnds[p+1] {
			t.Errorf("phase %d ends at %s, not before phase %d (%s)", p, phaseEnds[p], p+1, phaseEnds[p+1])
		}
	}
}
