package report

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// One-time work (the "work" of prepare_started / prepare_finished events and
// the keys of Timings.Prepare): what a run may do once before its first
// check, announced with a progress line and timed in its own bucket.
const (
	WorkImage   = "image"    // building the default sandbox image
	WorkRelay   = "relay"    // building a static goalrun for the egress relay
	WorkGoCache = "go_cache" // warming the read-only Go build cache
	WorkSetup   = "setup"    // the setup step (--setup, detected defaults)
)

// workNames are the plain words for the one-time work buckets; unknown
// kinds are shown as they are.
var workNames = map[string]string{
	WorkImage:   "image build",
	WorkRelay:   "relay build",
	WorkGoCache: "Go cache warming",
	WorkSetup:   "setup",
}

// Timings is where a run's wall-clock time went, in seconds (the
// document's "timings", additive). The buckets do not overlap; their sum is
// the document's elapsed_seconds (Other takes the rest).
type Timings struct {
	// SandboxStart is starting the sandbox (contacting the Engine,
	// containers, proxy), one-time work excluded.
	SandboxStart float64 `json:"sandbox_start"`
	// Prepare is one-time work by kind (Work* keys); absent when there was
	// none.
	Prepare map[string]float64 `json:"prepare,omitempty"`
	// Checks is every check run; AgentTurns every agent turn.
	Checks     float64 `json:"checks"`
	AgentTurns float64 `json:"agent_turns"`
	// Other is the rest: workspace snapshots, evaluation, the report.
	Other float64 `json:"other"`
}

// TimeBook is a Sink that keeps a run's time buckets from its events: the
// "seconds" of sandbox_ready, prepare_finished, check_finished and
// agent_finished. Install it among the Emitter's sinks, then read Timings
// after the loop. Safe for concurrent use.
type TimeBook struct {
	mu          sync.Mutex
	ready       bool
	readyAt     time.Time
	readySecs   float64
	prepare     map[string]float64
	prepareSpan []span // when each piece of one-time work ran
	checks      float64
	nchecks     int
	agent       float64
	nturns      int
}

type span struct{ from, to time.Time }

var _ Sink = (*TimeBook)(nil)

// NewTimeBook returns an empty TimeBook.
func NewTimeBook() *TimeBook { return &TimeBook{prepare: map[string]float64{}} }

// Emit records the event's duration in its bucket.
func (b *TimeBook) Emit(ev Event) {
	secs, ok := toFloat(ev.Data["seconds"])
	if !ok || secs < 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch ev.Type {
	case EventSandboxReady:
		b.ready, b.readyAt, b.readySecs = true, ev.Time, secs
	case EventPrepareFinished:
		w := str(ev.Data, "work")
		if w == "" {
			w = "other"
		}
		b.prepare[w] += secs
		d := time.Duration(secs * float64(time.Second))
		b.prepareSpan = append(b.prepareSpan, span{ev.Time.Add(-d), ev.Time})
	case EventCheckFinished:
		b.checks += secs
		b.nchecks++
	case EventAgentFinished:
		b.agent += secs
		b.nturns++
	}
}

// Counts returns how many checks and agent turns were timed.
func (b *TimeBook) Counts() (checks, turns int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.nchecks, b.nturns
}

// Timings returns the buckets of a run that took total: the sandbox's
// start without the one-time work done while it started, each kind of
// one-time work, checks, agent turns, and the rest in Other (never
// negative).
func (b *TimeBook) Timings(total time.Duration) Timings {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := Timings{Checks: b.checks, AgentTurns: b.agent}
	var prep float64
	if len(b.prepare) > 0 {
		t.Prepare = make(map[string]float64, len(b.prepare))
		for k, v := range b.prepare {
			t.Prepare[k] = v
			prep += v
		}
	}
	if b.ready {
		start := b.readyAt.Add(-time.Duration(b.readySecs * float64(time.Second)))
		inside := 0.0 // one-time work done while the sandbox started
		for _, s := range b.prepareSpan {
			from, to := s.from, s.to
			if from.Before(start) {
				from = start
			}
			if to.After(b.readyAt) {
				to = b.readyAt
			}
			if to.After(from) {
				inside += to.Sub(from).Seconds()
			}
		}
		t.SandboxStart = max(b.readySecs-inside, 0)
	}
	t.Other = max(total.Seconds()-t.SandboxStart-prep-t.Checks-t.AgentTurns, 0)
	return t
}

// TimeLine is the human "time:" line of a run: its buckets, the total
// (the document's elapsed_seconds) and, when teardown > 0, the teardown
// done after the document was written, e.g.
//
//	sandbox start 0.3 s · image build 12.0 s · checks (2) 3.4 s · agent turns (1) 5.2 s · other 0.1 s · total 21.0 s · then teardown 0.2 s
//
// Empty one-time work buckets are left out; checks and agent turns are
// always shown, with their counts.
func TimeLine(t Timings, checks, turns int, total, teardown time.Duration) string {
	parts := []string{"sandbox start " + humanSeconds(t.SandboxStart)}
	kinds := make([]string, 0, len(t.Prepare))
	for k := range t.Prepare {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool { return workOrder(kinds[i]) < workOrder(kinds[j]) })
	for _, k := range kinds {
		name := workNames[k]
		if name == "" {
			name = strings.ReplaceAll(k, "_", " ")
		}
		parts = append(parts, name+" "+humanSeconds(t.Prepare[k]))
	}
	parts = append(parts,
		fmt.Sprintf("checks (%d) %s", checks, humanSeconds(t.Checks)),
		fmt.Sprintf("agent turns (%d) %s", turns, humanSeconds(t.AgentTurns)),
		"other "+humanSeconds(t.Other),
		"total "+humanSeconds(total.Seconds()))
	if teardown > 0 {
		parts = append(parts, "then teardown "+humanSeconds(teardown.Seconds()))
	}
	return strings.Join(parts, " · ")
}

// workOrder sorts one-time work in the order a run does it.
func workOrder(k string) string {
	for i, w := range []string{WorkRelay, WorkImage, WorkGoCache, WorkSetup} {
		if k == w {
			return fmt.Sprint(i)
		}
	}
	return "9" + k
}

// humanSeconds is "0.3 s" from a tenth of a second up, "40 ms" below.
func humanSeconds(s float64) string {
	if s < 0.1 {
		return fmt.Sprintf("%d ms", int64(s*1000+0.5))
	}
	return fmt.Sprintf("%.1f s", s)
}
