package main

import (
	"context"
	"sync"
	"time"

	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/sandbox"
)

// finale is the one document of a run, whoever writes it. execute
// concludes through it; when a signal's stop overruns (something goalrun
// waits for does not end in time), the exit watchdog has it write a
// cancelled document instead — --output, the terminal event, stdout, the
// action's check run — so the process never exits without one. Whichever
// claims it first writes; the other gets the same document and code.
type finale struct {
	mu      sync.Mutex
	claimed bool
	done    bool
	doc     report.Document
	code    int
	rescue  func() // writes the cancelled document (armed by execute)
	written chan struct{}
}

func newFinale() *finale { return &finale{code: -1, written: make(chan struct{})} }

type finaleKey struct{}

// withFinale returns ctx carrying f (main puts the process's finale there
// for its watchdog).
func withFinale(ctx context.Context, f *finale) context.Context {
	return context.WithValue(ctx, finaleKey{}, f)
}

// finaleOf returns ctx's finale, or a new one when it carries none.
func finaleOf(ctx context.Context) *finale {
	if f, ok := ctx.Value(finaleKey{}).(*finale); ok {
		return f
	}
	return newFinale()
}

// claim makes the caller the writer of the document; false when another
// already is.
func (f *finale) claim() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.claimed {
		return false
	}
	f.claimed = true
	return true
}

// delivered records the document written and its exit code.
func (f *finale) delivered(doc report.Document, code int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return
	}
	f.doc, f.code, f.done = doc, code, true
	close(f.written)
}

// result waits for the claimant's document (until ctx ends) and returns it
// with its code; ok is false when it is not out yet.
func (f *finale) result(ctx context.Context) (report.Document, int, bool) {
	select {
	case <-f.written:
	case <-ctx.Done():
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.doc, f.code, f.done
}

// exitCode is the code of the delivered document, -1 before one.
func (f *finale) exitCode() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.done {
		return -1
	}
	return f.code
}

// arm sets how a cancelled document is written should the stop overrun.
func (f *finale) arm(rescue func()) {
	f.mu.Lock()
	f.rescue = rescue
	f.mu.Unlock()
}

// rescueNow writes the cancelled document unless the run claimed its own
// (or nothing is armed yet: nothing of a run exists to report).
func (f *finale) rescueNow() {
	f.mu.Lock()
	r, claimed := f.rescue, f.claimed
	f.mu.Unlock()
	if r != nil && !claimed {
		r()
	}
}

// rescueAfter is when, after a signal, the watchdog writes the cancelled
// document if the run has not begun writing its own: the loop's last work
// must end by sandbox.PhaseFinish's deadline, and the document is built
// right after it; the rescue's own publishing is then bounded by
// sandbox.PhasePublish's deadline like the run's.
const rescueAfter = 250 * time.Millisecond

// rescueAt is the rescue's moment for an interruption (see rescueAfter).
func rescueAt(in *sandbox.Interrupted) time.Time {
	return in.By(sandbox.PhaseFinish).Add(rescueAfter)
}
