package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/goalrun/goalrun/report"
)

// announcer emits the progress events of one-time work (image and relay
// builds, cache warming, the setup step) through the run's Emitter, timed
// with the run's clock.
type announcer struct {
	em  *report.Emitter
	now func() time.Time
}

type announcerKey struct{}

// withAnnouncer returns ctx carrying the run's announcer: code that does
// one-time work deep inside the sandbox's start (startDocker and what it
// calls) announces it with announce, without every factory taking the
// Emitter as an argument.
func withAnnouncer(ctx context.Context, em *report.Emitter, now func() time.Time) context.Context {
	return context.WithValue(ctx, announcerKey{}, &announcer{em: em, now: now})
}

// announce says, before it starts, that one-time work of kind work (a
// report.Work* value) begins — message is the progress line, e.g.
// "building the sandbox image from this machine's files (once; later runs
// reuse it)" — and returns done, to be called once when the work ends
// (nil: it succeeded). The time between the two is the work's bucket in the
// run's timings, never "sandbox start". Without an announcer in ctx (tests,
// the action's own preparation) it does nothing.
func announce(ctx context.Context, work, message string) (done func(err error)) {
	a, _ := ctx.Value(announcerKey{}).(*announcer)
	if a == nil {
		return func(error) {}
	}
	start := a.now()
	a.em.Emit(report.EventPrepareStarted, report.PhaseSandbox, message, map[string]any{"work": work})
	return func(err error) {
		secs := a.now().Sub(start).Seconds()
		data := map[string]any{"work": work, "seconds": secs}
		msg := fmt.Sprintf("%s done in %.1fs", work, secs)
		if err != nil {
			data["error"] = err.Error()
			msg = fmt.Sprintf("%s failed after %.1fs", work, secs)
		}
		a.em.Emit(report.EventPrepareFinished, report.PhaseSandbox, msg, data)
	}
}

// slowWork is how long work announced with announceIfSlow may take before
// it counts as one-time work and gets its progress line: finding that an
// image or a cache is already there takes milliseconds; building one takes
// seconds to minutes.
const slowWork = 500 * time.Millisecond

// announceIfSlow is announce for work that is often only a look-up (an
// image or a cache that already exists): the progress line appears once the
// work has run for slowWork, and work that ends sooner (or never got its
// line) is not one-time work — its milliseconds stay in the step that
// called it. A failure is always reported.
func announceIfSlow(ctx context.Context, work, message string) (done func(err error)) {
	a, _ := ctx.Value(announcerKey{}).(*announcer)
	if a == nil {
		return func(error) {}
	}
	start := a.now()
	var mu sync.Mutex
	announced, finished := false, false
	timer := time.AfterFunc(slowWork, func() {
		mu.Lock()
		defer mu.Unlock()
		if !finished {
			announced = true
			a.em.Emit(report.EventPrepareStarted, report.PhaseSandbox, message, map[string]any{"work": work})
		}
	})
	return func(err error) {
		timer.Stop()
		mu.Lock()
		finished = true
		was := announced
		mu.Unlock()
		if !was && err == nil {
			return
		}
		secs := a.now().Sub(start).Seconds()
		data := map[string]any{"work": work, "seconds": secs}
		msg := fmt.Sprintf("%s done in %.1fs", work, secs)
		if err != nil {
			data["error"] = err.Error()
			msg = fmt.Sprintf("%s failed after %.1fs", work, secs)
		}
		a.em.Emit(report.EventPrepareFinished, report.PhaseSandbox, msg, data)
	}
}
