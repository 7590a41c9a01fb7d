package main

import (
	"io"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goalrun/goalrun/report"
)

// TestLateJanitor: a run's janitor starts once the run outlasts the delay
// or its first agent turn begins (an agent container then runs, which a
// run killed outright must not leave running or frozen); a shorter run
// starts none when it removed everything it made, and starts one at its
// end when it did not; the janitor is told which (a "clean" line, or the
// pipe closed without it) once.
func TestLateJanitor(t *testing.T) {
	cases := []struct {
		name       string
		long       bool // the run outlasts the delay before its release
		agentTurn  bool // an agent turn begins before the release
		clean      bool
		wantStarts int32
		wantSaid   string // what the janitor read before its pipe closed
	}{
		{name: "a short clean run starts none", clean: true, wantStarts: 0},
		{name: "a short run that left something starts one at its end", clean: false, wantStarts: 1, wantSaid: ""},
		{name: "a long clean run starts one and tells it", long: true, clean: true, wantStarts: 1, wantSaid: "clean\n"},
		{name: "a long run that left something", long: true, clean: false, wantStarts: 1, wantSaid: ""},
		{name: "a short run's agent turn starts one at once", agentTurn: true, clean: true, wantStarts: 1, wantSaid: "clean\n"},
		{name: "a long run's agent turn starts no second one", long: true, agentTurn: true, clean: false, wantStarts: 1, wantSaid: ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var starts atomic.Int32
			said := make(chan string, 1)
			start := func() *janitor {
				starts.Add(1)
				r, w, err := os.Pipe()
				if err != nil {
					t.Error(err)
					return nil
				}
				go func() {
					b, _ := io.ReadAll(r)
					r.Close()
					said <- string(b)
				}()
				return &janitor{w: w}
			}
			delay := time.Hour
			if tc.long {
				delay = time.Millisecond
			}
			l := startJanitorAfter(delay, start)
			for deadline := time.Now().Add(5 * time.Second); tc.long && starts.Load() == 0 && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			var at janitorAtAgent
			at.Emit(report.Event{Type: report.EventAgentStarted}) // before the run's janitor is known: nothing
			at.set(l)
			at.Emit(report.Event{Type: report.EventCheckStarted})
			if n := starts.Load(); !tc.long && n != 0 {
				t.Fatalf("%d janitors started before an agent turn, want none", n)
			}
			if tc.agentTurn {
				at.Emit(report.Event{Type: report.EventAgentStarted})
				at.Emit(report.Event{Type: report.EventAgentStarted})
				if n := starts.Load(); n != 1 {
					t.Fatalf("%d janitors started once an agent turn began, want 1", n)
				}
			}
			l.release(tc.clean)
			l.release(!tc.clean) // only the first call counts
			if n := starts.Load(); n != tc.wantStarts {
				t.Fatalf("%d janitors started, want %d", n, tc.wantStarts)
			}
			if tc.wantStarts == 0 {
				return
			}
			select {
			case got := <-said:
				if got != tc.wantSaid {
					t.Errorf("the janitor read %q, want %q", got, tc.wantSaid)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the janitor's pipe was never closed")
			}
		})
	}
}
