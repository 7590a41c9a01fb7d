package report

import (
	"strings"
	"testing"
	"time"
)

func TestTimeBook(t *testing.T) {
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	ev := func(typ string, when float64, data map[string]any) Event {
		return Event{Type: typ, Time: at(when), Data: data}
	}
	for _, tc := range []struct {
		name   string
		events []Event
		total  time.Duration
		want   Timings
		checks int
		turns  int
	}{
		{"already green: sandbox, one check", []Event{
			ev(EventSandboxReady, 0.6, map[string]any{"seconds": 0.5}),
			ev(EventCheckFinished, 1.6, map[string]any{"seconds": 0.9}),
		}, 1700 * time.Millisecond, Timings{SandboxStart: 0.5, Checks: 0.9, Other: 0.3}, 1, 0},
		{"one-time work inside the sandbox's start is its own bucket", []Event{
			ev(EventPrepareFinished, 12.1, map[string]any{"work": WorkImage, "seconds": 12.0}),
			ev(EventPrepareFinished, 14.1, map[string]any{"work": WorkGoCache, "seconds": 2.0}),
			ev(EventSandboxReady, 14.6, map[string]any{"seconds": 14.6}),
			ev(EventCheckFinished, 16, map[string]any{"seconds": 1.0}),
		}, 16 * time.Second, Timings{SandboxStart: 0.6, Prepare: map[string]float64{WorkImage: 12, WorkGoCache: 2}, Checks: 1, Other: 0.4}, 1, 0},
		{"one-time work before the sandbox (the demo's relay) and after it (setup)", []Event{
			ev(EventPrepareFinished, 3, map[string]any{"work": WorkRelay, "seconds": 3.0}),
			ev(EventSandboxReady, 4, map[string]any{"seconds": 1.0}),
			ev(EventPrepareFinished, 9, map[string]any{"work": WorkSetup, "seconds": 5.0}),
			ev(EventCheckFinished, 10, map[string]any{"seconds": 1.0}),
			ev(EventAgentFinished, 20, map[string]any{"seconds": 9.5}),
			ev(EventCheckFinished, 21, map[string]any{"seconds": 1.0}),
		}, 21 * time.Second, Timings{SandboxStart: 1, Prepare: map[string]float64{WorkRelay: 3, WorkSetup: 5}, Checks: 2, AgentTurns: 9.5, Other: 0.5}, 2, 1},
		{"other is never negative", []Event{
			ev(EventCheckFinished, 1, map[string]any{"seconds": 5.0}),
		}, time.Second, Timings{Checks: 5}, 1, 0},
		{"events without seconds are ignored", []Event{
			ev(EventCheckStarted, 0.1, map[string]any{"iteration": 0}),
			ev(EventCheckFinished, 0.2, map[string]any{"seconds": "soon"}),
		}, time.Second, Timings{Other: 1}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewTimeBook()
			for _, e := range tc.events {
				b.Emit(e)
			}
			got := b.Timings(tc.total)
			if !closeTimings(got, tc.want) {
				t.Errorf("timings %+v, want %+v", got, tc.want)
			}
			if c, n := b.Counts(); c != tc.checks || n != tc.turns {
				t.Errorf("counts %d checks %d turns, want %d %d", c, n, tc.checks, tc.turns)
			}
		})
	}
}

func closeTimings(a, b Timings) bool {
	near := func(x, y float64) bool { return x-y < 1e-9 && y-x < 1e-9 }
	if !near(a.SandboxStart, b.SandboxStart) || !near(a.Checks, b.Checks) || !near(a.AgentTurns, b.AgentTurns) || !near(a.Other, b.Other) || len(a.Prepare) != len(b.Prepare) {
		return false
	}
	for k, v := range b.Prepare {
		if !near(a.Prepare[k], v) {
			return false
		}
	}
	return true
}

func TestTimeLine(t *testing.T) {
	for _, tc := range []struct {
		name            string
		t               Timings
		checks, turns   int
		total, teardown time.Duration
		want            string
	}{
		{"already green", Timings{SandboxStart: 0.42, Checks: 0.9, Other: 0.05}, 1, 0, 1370 * time.Millisecond, 80 * time.Millisecond,
			"sandbox start 0.4 s · checks (1) 0.9 s · agent turns (0) 0 ms · other 50 ms · total 1.4 s · then teardown 80 ms"},
		{"one-time work in the order a run does it", Timings{SandboxStart: 1, Prepare: map[string]float64{WorkSetup: 4, WorkImage: 12, WorkRelay: 30}, Checks: 2, AgentTurns: 20, Other: 1},
			2, 1, 70 * time.Second, 0,
			"sandbox start 1.0 s · relay build 30.0 s · image build 12.0 s · setup 4.0 s · checks (2) 2.0 s · agent turns (1) 20.0 s · other 1.0 s · total 70.0 s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := TimeLine(tc.t, tc.checks, tc.turns, tc.total, tc.teardown); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestTimingsInTheDocument: Finish carries the buckets into the
// document's timings (rounded to milliseconds), the schema accepts them,
// and the encoder's last resort keeps them (one-time work summed).
func TestTimingsInTheDocument(t *testing.T) {
	run := passedRun()
	run.Elapsed = 21 * time.Second
	run.Timings = &Timings{SandboxStart: 1.00049, Prepare: map[string]float64{WorkImage: 12, WorkSetup: 3}, Checks: 2, AgentTurns: 2.5, Other: 0.5}
	d := Finish(run, nil)
	b := Encode(d)
	validate(t, b)
	if !strings.Contains(string(b), `"timings":{"sandbox_start":1,"prepare":{"image":12,"setup":3},"checks":2,"agent_turns":2.5,"other":0.5}`) {
		t.Errorf("timings not in the document as expected:\n%s", b)
	}
	run.Timings.Prepare = map[string]float64{}
	for i := 0; i < 12; i++ {
		run.Timings.Prepare[strings.Repeat("k", i+1)] = 1
	}
	d = Finish(run, nil)
	if len(d.Timings.Prepare) != TimingsPrepareMax {
		t.Errorf("%d kinds of one-time work kept, want the cap %d", len(d.Timings.Prepare), TimingsPrepareMax)
	}
	validate(t, Encode(d))
	last := requiredOnly(d)
	if last.Timings == nil || last.Timings.Prepare["all"] != 8 {
		t.Errorf("the last resort dropped or mangled the timings: %+v", last.Timings)
	}
}
