package report

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/goalrun/goalrun/internal/textcap"
)

// ProgressSink is the human progress view: one readable line per step with
// the time since the run started and the step's own duration, e.g.
//
//	[  2.1s] check #0  go test ./...  exit 1 (2.1s)
//	         | --- FAIL: TestWords (0.00s)
//	         |     words_test.go:9: got 3, want 2
//
// A failing check is followed by the failing tests' own lines (the event's
// failure_lines, found anywhere in its output) and the last lines of its
// output (tail_lines). Lines carry no truncation markers and no control characters
// (TerminalText); a line longer than ProgressLineBytes is shortened with a
// plain "…", agent prose ("text") to ProgressTextBytes. Container ids and
// image digests are shown only with ProgressOptions.Verbose. It is safe for
// concurrent use.
type ProgressSink struct {
	mu      sync.Mutex
	w       io.Writer
	start   time.Time
	verbose bool
	err     error
}

var _ Sink = (*ProgressSink)(nil)

// ProgressLineBytes bounds one line of the progress view; ProgressTextBytes
// the agent prose shown on a "text" line; ProgressTailLines the lines of a
// failing check's output shown under it.
const (
	ProgressLineBytes = 240
	ProgressTextBytes = 160
	ProgressTailLines = 10
)

// ProgressOptions configure NewProgressSinkWith.
type ProgressOptions struct {
	// Start is the run's start: every line's time counts from it, so the
	// time spent before the first event is counted too (zero: the first
	// event's time).
	Start time.Time
	// Verbose adds container ids and image digests (--verbose).
	Verbose bool
}

// NewProgressSink returns a ProgressSink writing to w (stderr without
// --json).
func NewProgressSink(w io.Writer) Sink { return &ProgressSink{w: w} }

// NewProgressSinkSince returns a ProgressSink whose clock starts at start,
// the run's start, so the time spent before the first event (building an
// image, starting the sandbox) is counted in every line.
func NewProgressSinkSince(w io.Writer, start time.Time) Sink {
	return &ProgressSink{w: w, start: start}
}

// NewProgressSinkWith returns a ProgressSink with options.
func NewProgressSinkWith(w io.Writer, o ProgressOptions) Sink {
	return &ProgressSink{w: w, start: o.Start, verbose: o.Verbose}
}

// Err returns the first write error, if any.
func (p *ProgressSink) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Emit writes the event's lines, if it has any.
func (p *ProgressSink) Emit(ev Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return
	}
	if p.start.IsZero() {
		p.start = ev.Time
	}
	lines := progressLines(ev, p.verbose)
	if len(lines) == 0 {
		return
	}
	at := ev.Time.Sub(p.start).Seconds()
	var b strings.Builder
	for i, t := range lines {
		t = Shorten(TerminalText(flat(t)), ProgressLineBytes)
		if i == 0 {
			fmt.Fprintf(&b, "[%5.1fs] %s\n", at, t)
		} else {
			fmt.Fprintf(&b, "         %s\n", t)
		}
	}
	if _, err := io.WriteString(p.w, b.String()); err != nil {
		p.err = fmt.Errorf("report: writing progress: %w", err)
	}
}

// progressLines is the view of one event: its line, then continuation
// lines (nil for none).
func progressLines(ev Event, verbose bool) []string {
	// Text the Emitter capped carries Cap's marker; the terminal gets a
	// plain "…" instead.
	ev.Message = Unmarked(ev.Message)
	d := make(map[string]any, len(ev.Data))
	for k, v := range ev.Data {
		switch x := v.(type) {
		case string:
			d[k] = Unmarked(x)
		case []string:
			l := make([]string, len(x))
			for i, s := range x {
				l[i] = Unmarked(s)
			}
			d[k] = l
		default:
			d[k] = v
		}
	}
	var b strings.Builder
	var more []string
	switch ev.Type {
	case EventStarted:
		b.WriteString("run       ")
		if g := str(d, "goal"); g != "" {
			b.WriteString(g)
		} else {
			b.WriteString(ev.Message)
		}
		var parts []string
		if a := str(d, "agent"); a != "" {
			parts = append(parts, "agent "+a)
		}
		if m := str(d, "model"); m != "" {
			parts = append(parts, "model "+m)
		}
		if s := sandboxLine(d["sandbox"]); s != "" {
			parts = append(parts, "sandbox "+s)
		}
		if len(parts) > 0 {
			b.WriteString("  (" + strings.Join(parts, ", ") + ")")
		}
	case EventPrepareStarted:
		b.WriteString("prepare   " + ev.Message)
	case EventPrepareFinished:
		b.WriteString("prepare   ")
		if w := workNames[str(d, "work")]; w != "" {
			b.WriteString(w)
		} else {
			b.WriteString(firstNonBlank(str(d, "work"), "one-time work"))
		}
		if c := str(d, "command"); c != "" { // a setup step names its command
			b.WriteString(" `" + c + "`")
		}
		switch e := str(d, "error"); {
		case e != "":
			b.WriteString(" failed: " + e)
			writeSeconds(&b, d)
		case d["reused"] == true: // the kept deps volume: nothing ran
			b.WriteString(" reused: an earlier run prepared the same dependencies")
		default:
			b.WriteString(" done")
			writeSeconds(&b, d)
		}
		more = append(more, strList(d["notes"])...) // why it failed, on lines of their own
	case EventSandboxReady:
		b.WriteString("sandbox   ready")
		if m := str(d, "mode"); m != "" {
			b.WriteString("  " + m)
		}
		if verbose {
			if id := str(d, "container_id"); id != "" {
				b.WriteString("  container " + id)
			}
			if dg := str(d, "image_digest"); dg != "" {
				b.WriteString("  image " + dg)
			}
		}
		writeSeconds(&b, d)
		if n := str(d, "fallback_notice"); n != "" { // on a line of its own, never cut short by the line cap
			more = append(more, "WARNING: "+n)
		}
	case EventCheckStarted:
		return nil
	case EventCheckFinished:
		fmt.Fprintf(&b, "check #%d  %s  ", num(d, "iteration"), str(d, "command"))
		if e := str(d, "error"); e != "" {
			b.WriteString("could not run: " + e)
		} else {
			fmt.Fprintf(&b, "exit %d", num(d, "exit_code"))
		}
		if v, _ := d["timed_out"].(bool); v {
			b.WriteString(" (timed out)")
		}
		writeSeconds(&b, d)
		if f := str(d, "failing"); f != "" {
			b.WriteString(": " + f)
		}
		fail := strList(d["failure_lines"])
		for _, l := range fail {
			more = append(more, "| "+l)
		}
		if len(fail) > 0 && len(strList(d["tail_lines"])) > 0 {
			more = append(more, "| "+Ellipsis)
		}
		for _, l := range lastN(strList(d["tail_lines"]), ProgressTailLines) {
			more = append(more, "| "+l)
		}
	case EventAgentStarted:
		fmt.Fprintf(&b, "agent #%d  started", num(d, "iteration"))
		if s := str(d, "session_id"); s != "" && verbose {
			b.WriteString("  resuming " + s)
		} else if s != "" {
			b.WriteString("  resuming its conversation")
		}
	case EventAgentFinished:
		fmt.Fprintf(&b, "agent #%d  finished", num(d, "iteration"))
		if s := str(d, "status"); s != "" && s != "success" {
			b.WriteString(" (" + s + ")")
		}
		if _, ok := d["exit_code"]; ok {
			fmt.Fprintf(&b, "  exit %d", num(d, "exit_code"))
		}
		writeSeconds(&b, d)
	case EventModelServed:
		b.WriteString("model     " + str(d, "model_id"))
		if v, _ := d["local_last_resort"].(bool); v {
			b.WriteString("  (local last resort)")
		}
	case EventInferenceRetry:
		fmt.Fprintf(&b, "retry     attempt %d, status %d, backoff %dms", num(d, "attempt"), num(d, "status"), num(d, "backoff_ms"))
	case EventText:
		b.WriteString("  says    " + Shorten(Fold(ev.Message), ProgressTextBytes))
	case EventToolCalled:
		b.WriteString("  tool    " + str(d, "tool"))
		if br := str(d, "brief"); br != "" {
			b.WriteString("  " + br)
		}
	case EventToolResult:
		return nil
	case EventToolFailed:
		b.WriteString("  tool    " + str(d, "tool") + "  failed")
	case EventGoalEvaluated:
		fmt.Fprintf(&b, "goal #%d   ", num(d, "iteration"))
		met, _ := d["met"].(bool)
		grounded, _ := d["grounded"].(bool)
		switch {
		case met && grounded:
			b.WriteString("met (grounded)")
		case met:
			b.WriteString("met (ungrounded)")
		default:
			b.WriteString("not met")
		}
		if ev.Message != "" {
			b.WriteString(": " + ev.Message)
		}
	case EventCompleted, EventFailed:
		fmt.Fprintf(&b, "%-9s %s", ev.Type, ev.Message)
		writeSeconds(&b, map[string]any{"seconds": d["elapsed_seconds"]})
	default:
		b.WriteString(ev.Type)
		if ev.Message != "" {
			b.WriteString("  " + ev.Message)
		}
	}
	return append([]string{b.String()}, more...)
}

// flat puts s on one line without moving its columns: every character Fold
// would fold becomes one space (a tab too), runs are not collapsed.
func flat(s string) string {
	return strings.Map(func(r rune) rune {
		if textcap.Foldable(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(strings.TrimRight(s, " \n\t\r"), "\uFFFD"))
}

// writeSeconds appends " (2.1s)" from data's "seconds", if any.
func writeSeconds(b *strings.Builder, d map[string]any) {
	if s, ok := toFloat(d["seconds"]); ok {
		fmt.Fprintf(b, " (%.1fs)", s)
	}
}

// sandboxLine summarizes a posture value in event data: "docker/egress".
func sandboxLine(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	mode, _ := m["mode"].(string)
	net, _ := m["network"].(string)
	if mode == "" {
		return ""
	}
	if net == "" {
		return mode
	}
	return mode + "/" + net
}

// strList reads a list of strings from event data ([]string, or []any
// after a JSON round trip).
func strList(v any) []string {
	switch x := v.(type) {
	case []string:
		return x
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// lastN returns the last n items of xs.
func lastN(xs []string, n int) []string {
	if len(xs) > n {
		return xs[len(xs)-n:]
	}
	return xs
}

func firstNonBlank(s ...string) string {
	for _, v := range s {
		if strings.TrimSpace(v) != "" {
			return v
		}
	}
	return ""
}
