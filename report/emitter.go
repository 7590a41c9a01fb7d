package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Emitter is the one way events reach the sinks. It redacts every string
// (message and data, keys included) before capping, caps the message
// (TextEventCap for "text" events, BriefCap and folded onto one line for the
// others) and every string in data (ReasonCap), stamps the time from the
// injected clock (in UTC), and forwards the event to its Sink, one at a time.
//
// It refuses the terminal types ("completed", "failed"): only Finish (and
// FailStartup) emit them, exactly once per Emitter, so the stream ends with
// the same verdict the document carries. A refused event is dropped and
// counted (Refused).
//
// An Emitter is safe for concurrent use, and so must its Sink be: events
// from several goroutines (the agent's stream, the loop) reach it without a
// lock held, so a sink may call Emit itself. A nil *Emitter discards
// everything.
type Emitter struct {
	sink Sink
	red  *Redactor
	now  func() time.Time

	mu       sync.Mutex
	finished bool
	refused  int
	inflight sync.WaitGroup // events handed to the sink and not yet returned
}

// NewEmitter returns an Emitter that forwards to s (nil: nowhere), redacts
// with r (nil: nothing) and stamps times with now (nil: time.Now).
func NewEmitter(s Sink, r *Redactor, now func() time.Time) *Emitter {
	if now == nil {
		now = time.Now
	}
	return &Emitter{sink: s, red: r, now: now}
}

// Redactor returns the Emitter's Redactor (nil for a nil Emitter).
func (e *Emitter) Redactor() *Redactor {
	if e == nil {
		return nil
	}
	return e.red
}

// Emit sends one event: typ is an Event* type, phase a Phase* value,
// message a human sentence (for "text": the agent's prose), data the
// type's fields (run-document.md, "Events"); nil data is sent as {}. Events
// after the terminal event are dropped, and so are terminal types (Refused).
func (e *Emitter) Emit(typ, phase, message string, data map[string]any) {
	if e == nil {
		return
	}
	if typ == EventCompleted || typ == EventFailed {
		e.mu.Lock()
		e.refused++
		e.mu.Unlock()
		return
	}
	e.send(typ, phase, message, data, false)
}

// Refused returns how many terminal-typed events Emit dropped.
func (e *Emitter) Refused() int {
	if e == nil {
		return 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.refused
}

// Finished reports whether the terminal event was emitted.
func (e *Emitter) Finished() bool {
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.finished
}

// send builds and forwards one event under the lock.
func (e *Emitter) send(typ, phase, message string, data map[string]any, terminal bool) {
	if typ == EventText {
		message = Cap(e.red.Redact(message), TextEventCap)
	} else {
		message = Cap(Fold(e.red.Redact(message)), BriefCap)
	}
	clean := make(map[string]any, len(data))
	for k, v := range data {
		clean[Cap(Fold(e.red.Redact(k)), NameCap)] = capStrings(e.red.RedactValue(v), 0)
	}
	ev := Event{Type: typ, Phase: phase, Message: message, Data: clean}
	e.mu.Lock()
	if e.finished {
		e.mu.Unlock()
		return
	}
	if terminal {
		e.finished = true
	}
	ev.Time = e.now().UTC()
	e.inflight.Add(1)
	e.mu.Unlock()
	defer e.inflight.Done()
	if terminal {
		// Every event accepted before the terminal one reaches the sink
		// first, so the stream ends with it. The lock is not held while a
		// sink runs, so a sink may itself call Emit (it is dropped once
		// finished) without deadlocking.
		e.inflight.Done()
		e.inflight.Wait()
		e.inflight.Add(1)
	}
	if e.sink != nil {
		e.sink.Emit(ev)
	}
}

// capStrings caps every string in a redacted value at ReasonCap.
func capStrings(v any, depth int) any {
	switch x := v.(type) {
	case string:
		return Cap(x, ReasonCap)
	case []string:
		out := make([]string, len(x))
		for i, s := range x {
			out[i] = Cap(s, ReasonCap)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = capStrings(s, depth+1)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, s := range x {
			out[Cap(k, NameCap)] = capStrings(s, depth+1)
		}
		return out
	}
	return v
}

// terminal emits the one terminal event for d: "completed" for the result
// shape, "failed" otherwise, with data status, conclusion, turns,
// elapsed_seconds and, for "failed", error and failure. Its message is d's
// Headline. Only the first call per Emitter emits.
func (e *Emitter) terminal(d Document) {
	if e == nil {
		return
	}
	typ := EventCompleted
	if d.Status != StatusSuccess {
		typ = EventFailed
	}
	data := map[string]any{
		"status":          d.Status,
		"conclusion":      d.Conclusion,
		"turns":           derefInt(d.Turns),
		"elapsed_seconds": derefFloat(d.ElapsedSeconds),
	}
	if typ == EventFailed {
		data["error"] = d.Error
		if d.Failure != nil {
			f := map[string]any{"cause": d.Failure.Cause}
			for k, v := range d.Failure.Detail {
				if k != "cause" {
					f[k] = v
				}
			}
			data["failure"] = f
		}
	}
	e.send(typ, PhaseRun, Headline(d), data, true)
}

func derefInt(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

func derefFloat(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// JSONLSink writes each event as one line of compact JSON:
// {"type","phase","message","data","time"} (time in RFC 3339 with
// nanoseconds). It is safe for concurrent use. A write error stops the sink:
// later events are dropped and Err returns the first error.
type JSONLSink struct {
	mu  sync.Mutex
	w   io.Writer
	err error
}

var _ Sink = (*JSONLSink)(nil)

// NewJSONLSink returns a JSONLSink writing to w (stderr in JSON mode, an
// --events file).
func NewJSONLSink(w io.Writer) Sink { return &JSONLSink{w: w} }

// Emit writes ev as one line.
func (s *JSONLSink) Emit(ev Event) {
	if ev.Data == nil {
		ev.Data = map[string]any{}
	}
	var b bytes.Buffer
	if err := writeJSON(&b, ev); err != nil {
		// Data the Emitter did not clean (a sink fed directly): keep the
		// line and say what was lost.
		ev.Data = map[string]any{"data_error": err.Error()}
		b.Reset()
		if err := writeJSON(&b, ev); err != nil {
			return
		}
	}
	b.WriteByte('\n')
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	if _, err := s.w.Write(b.Bytes()); err != nil {
		s.err = fmt.Errorf("report: writing event %q: %w", ev.Type, err)
	}
}

// Err returns the first write error, if any.
func (s *JSONLSink) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// tee is the Sink Tee returns.
type tee []Sink

var _ Sink = tee(nil)

// Tee returns a Sink that forwards every event to each of sinks in order
// (nil sinks are skipped). A sink that panics is isolated: the panic is
// recovered and the others still get the event.
func Tee(sinks ...Sink) Sink {
	out := make(tee, 0, len(sinks))
	for _, s := range sinks {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// Emit forwards ev to every sink.
func (t tee) Emit(ev Event) {
	for _, s := range t {
		func() {
			defer func() { _ = recover() }()
			s.Emit(ev)
		}()
	}
}

// ProgressSink is the human progress view: one readable line per step with
// the time since the run started (NewProgressSinkSince; else since the
// first event) and the step's own duration, e.g.
//
//	[  2.1s] check #0  go test ./...  exit 1 (2.1s)
//
// Lines are folded and capped at ProgressLineBytes; agent prose ("text") is
// shown as its first ProgressTextBytes. It is safe for concurrent use.
type ProgressSink struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
	err   error
}

var _ Sink = (*ProgressSink)(nil)

// ProgressLineBytes bounds one line of the progress view; ProgressTextBytes
// the agent prose shown on a "text" line.
const (
	ProgressLineBytes = 240
	ProgressTextBytes = 100
)

// NewProgressSink returns a ProgressSink writing to w (stderr without
// --json).
func NewProgressSink(w io.Writer) Sink { return &ProgressSink{w: w} }

// NewProgressSinkSince returns a ProgressSink whose clock starts at start,
// the run's start, so the time spent before the first event (building an
// image, starting the sandbox) is counted in every line.
func NewProgressSinkSince(w io.Writer, start time.Time) Sink {
	return &ProgressSink{w: w, start: start}
}

// Err returns the first write error, if any.
func (p *ProgressSink) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Emit writes the event's line, if it has one.
func (p *ProgressSink) Emit(ev Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return
	}
	if p.start.IsZero() {
		p.start = ev.Time
	}
	text := progressText(ev)
	if text == "" {
		return
	}
	at := ev.Time.Sub(p.start).Seconds()
	var b strings.Builder
	for i, t := range strings.Split(text, progressBreak) { // each line capped on its own
		if i == 0 {
			fmt.Fprintf(&b, "[%5.1fs] %s\n", at, Cap(flat(t), ProgressLineBytes))
		} else {
			fmt.Fprintf(&b, "         %s\n", Cap(flat(t), ProgressLineBytes))
		}
	}
	if _, err := io.WriteString(p.w, b.String()); err != nil {
		p.err = fmt.Errorf("report: writing progress: %w", err)
	}
}

// progressBreak separates an event's lines in progressText; what the
// agent wrote is folded onto one line first, so it never makes one.
const progressBreak = "\x00"

// progressText is the line for one event ("" for none).
func progressText(ev Event) string {
	d := ev.Data
	var b strings.Builder
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
	case EventSandboxReady:
		b.WriteString("sandbox   ready")
		if m := str(d, "mode"); m != "" {
			b.WriteString("  " + m)
		}
		if id := str(d, "container_id"); id != "" {
			b.WriteString("  " + id)
		}
		if dg := str(d, "image_digest"); dg != "" {
			b.WriteString("  " + dg)
		}
		writeSeconds(&b, d)
		if n := str(d, "fallback_notice"); n != "" { // on a line of its own, never cut short by the line cap
			b.WriteString(progressBreak + "WARNING: " + n)
		}
	case EventCheckStarted:
		return ""
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
	case EventAgentStarted:
		fmt.Fprintf(&b, "agent #%d  started", num(d, "iteration"))
		if s := str(d, "session_id"); s != "" {
			b.WriteString("  resuming " + s)
		}
	case EventModelServed:
		b.WriteString("model     " + str(d, "model_id"))
		if v, _ := d["local_last_resort"].(bool); v {
			b.WriteString("  (local last resort)")
		}
	case EventInferenceRetry:
		fmt.Fprintf(&b, "retry     attempt %d, status %d, backoff %dms", num(d, "attempt"), num(d, "status"), num(d, "backoff_ms"))
	case EventText:
		b.WriteString("  says    " + Cap(Fold(ev.Message), ProgressTextBytes))
	case EventToolCalled:
		b.WriteString("  tool    " + str(d, "tool"))
		if br := str(d, "brief"); br != "" {
			b.WriteString("  " + br)
		}
	case EventToolResult:
		return ""
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
	return b.String()
}

// flat puts s on one line without moving its columns: every character Fold
// would fold becomes one space, runs are not collapsed.
func flat(s string) string {
	return strings.Map(func(r rune) rune {
		if foldable(r) {
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

func str(d map[string]any, k string) string {
	switch v := d[k].(type) {
	case string:
		return v
	case fmt.Stringer:
		return v.String()
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

func num(d map[string]any, k string) int64 {
	f, _ := toFloat(d[k])
	return int64(f)
}

// toFloat reads a JSON-ish number of any Go numeric type.
func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int8:
		return float64(x), true
	case int16:
		return float64(x), true
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint:
		return float64(x), true
	case uint8:
		return float64(x), true
	case uint16:
		return float64(x), true
	case uint32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float32:
		return float64(x), true
	case float64:
		return x, true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}
