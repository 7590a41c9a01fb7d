package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
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
// type's fields (docs/goalrun-1.md, "Events"); nil data is sent as {}. Events
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

// Terminal emits the one terminal event for a document made by Build or
// BuildStartup (see terminal); Finish and FailStartup call it themselves.
func (e *Emitter) Terminal(d Document) { e.terminal(d) }

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
