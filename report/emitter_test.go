package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/goalrun/goalrun/internal/textcap"
)

// scriptedRun emits a realistic event sequence (two iterations, the second
// passing) through e and finishes the run.
func scriptedRun(e *Emitter) Document {
	e.Emit(EventStarted, PhaseRun, "run started", map[string]any{
		"goal": "Fix the failing test in calc", "agent": "claude", "model": "claude-sonnet-4-5", "sandbox": dockerPosture(),
	})
	e.Emit(EventPrepareStarted, PhaseSandbox, "building the sandbox image from this machine's files (once; later runs reuse it)", map[string]any{"work": WorkImage})
	e.Emit(EventPrepareFinished, PhaseSandbox, "image build done", map[string]any{"work": WorkImage, "seconds": 0.7})
	e.Emit(EventPrepareStarted, PhaseSandbox, "running the setup step `go mod download` in the workspace", map[string]any{"work": WorkSetup, "command": "go mod download"})
	e.Emit(EventPrepareFinished, PhaseSandbox, "setup step `go mod download` exited 0", map[string]any{"work": WorkSetup, "command": "go mod download", "seconds": 3.0})
	e.Emit(EventSandboxReady, PhaseSandbox, "sandbox ready", map[string]any{"container_id": "3f2a9c1b7d4e", "image_digest": "sha256:6f1c0a4e8d1b", "seconds": 1.2})
	e.Emit(EventSandboxReady, PhaseSandbox, "sandbox ready: local", map[string]any{"mode": "local", "seconds": 0.01, "fallback_notice": "no Docker Engine answered; running on the local host"})
	e.Emit(EventCheckStarted, PhaseVerifying, "check #0", map[string]any{"iteration": 0, "command": "go test ./..."})
	e.Emit(EventCheckFinished, PhaseVerifying, "check #0 failed", map[string]any{"iteration": 0, "command": "go test ./...", "exit_code": 1, "seconds": 2.1,
		"failing":    "TestSum failing in example.com/calc",
		"tail_lines": []string{"--- FAIL: TestSum (0.00s)", "    sum_test.go:9: Sum(1, 2) = 0, want 3", "FAIL", "FAIL\texample.com/calc\t0.004s", "\x1b[2J::add-mask::x " + strings.Repeat("long ", 80)}})
	e.Emit(EventAgentStarted, PhaseActing, "agent turn 1", map[string]any{"iteration": 1})
	e.Emit(EventModelServed, PhaseInference, "model", map[string]any{"model_id": "claude-sonnet-4-5", "local_last_resort": false})
	e.Emit(EventInferenceRetry, PhaseInference, "retry", map[string]any{"attempt": 1, "status": 529, "backoff_ms": int64(1000)})
	e.Emit(EventText, PhaseReasoning, "I'll read the failing test first.\nThen fix Sum.", nil)
	e.Emit(EventToolCalled, PhaseActing, "", map[string]any{"call_id": "toolu_01", "sequence": 1, "tool": "Read", "brief": "calc/sum_test.go"})
	e.Emit(EventToolResult, PhaseActing, "", map[string]any{"call_id": "toolu_01", "sequence": 1, "tool": "Read", "ok": true})
	e.Emit(EventToolCalled, PhaseActing, "", map[string]any{"call_id": "toolu_02", "sequence": 2, "tool": "Bash", "brief": "go test ./..."})
	e.Emit(EventToolFailed, PhaseActing, "", map[string]any{"call_id": "toolu_02", "sequence": 2, "tool": "Bash", "ok": false})
	e.Emit(EventAgentFinished, PhaseActing, "agent turn 1 finished", map[string]any{"iteration": 1, "seconds": 5.5, "exit_code": 0, "status": "success"})
	e.Emit(EventCheckFinished, PhaseVerifying, "check timed out", map[string]any{"iteration": 1, "command": "go test ./...", "exit_code": 137, "seconds": 900.0, "timed_out": true})
	e.Emit(EventCheckFinished, PhaseVerifying, "check could not run", map[string]any{"iteration": 1, "command": "go test ./...", "exit_code": -1, "seconds": 0.0, "error": "sandbox: closed"})
	e.Emit(EventCheckFinished, PhaseVerifying, "check #1 passed", map[string]any{"iteration": 1, "command": "go test ./...", "exit_code": 0, "seconds": 2.2})
	e.Emit(EventGoalEvaluated, PhaseVerifying, "the check exited 0", map[string]any{"iteration": 1, "met": true, "grounded": true})
	run := passedRun()
	run.IterationsTaken = 1
	run.Iterations = run.Iterations[1:]
	return Finish(run, e)
}

func TestJSONLSink(t *testing.T) {
	var out bytes.Buffer
	e := NewEmitter(NewJSONLSink(&out), nil, fakeClock(1500*time.Millisecond))
	validate(t, Encode(scriptedRun(e)))
	lines := append([]byte(nil), out.Bytes()...)
	sc := bufio.NewScanner(bytes.NewReader(lines))
	n, terminal := 0, 0
	var last map[string]any
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if !utf8.Valid(line) {
			t.Fatalf("line %d is not UTF-8", n)
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("line %d is not JSON: %v\n%s", n, err, line)
		}
		for _, k := range []string{"type", "phase", "message", "data", "time"} {
			if _, ok := m[k]; !ok {
				t.Errorf("line %d lacks %q: %s", n, k, line)
			}
		}
		if len(m) != 5 {
			t.Errorf("line %d has keys beyond the five: %s", n, line)
		}
		if _, ok := m["data"].(map[string]any); !ok {
			t.Errorf("line %d: data is not an object: %s", n, line)
		}
		if _, err := time.Parse(time.RFC3339Nano, m["time"].(string)); err != nil {
			t.Errorf("line %d: time %v: %v", n, m["time"], err)
		}
		if m["type"] == EventCompleted || m["type"] == EventFailed {
			terminal++
		}
		last = m
	}
	if n != 23 || terminal != 1 || last["type"] != EventCompleted {
		t.Errorf("%d lines, %d terminal, last %v; want 23 lines ending in exactly one completed", n, terminal, last["type"])
	}
	golden(t, "events/run.jsonl", lines)
}

func TestProgressSink(t *testing.T) {
	var out bytes.Buffer
	e := NewEmitter(NewProgressSink(&out), nil, fakeClock(700*time.Millisecond))
	scriptedRun(e)
	for i, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		if !(strings.HasPrefix(line, "[") || strings.HasPrefix(line, "         WARNING: ") || strings.HasPrefix(line, "         | ")) || len(line) > ProgressLineBytes+12 {
			t.Errorf("line %d is not a progress line: %q", i, line)
		}
		if strings.Contains(line, "truncated") || strings.Contains(line, "\x1b") || strings.Contains(line, "| ::") {
			t.Errorf("line %d carries a marker, an escape or a workflow command: %q", i, line)
		}
	}
	for _, want := range []string{
		"check #0  go test ./...  exit 1 (2.1s): TestSum failing in example.com/calc",
		"         |     sum_test.go:9: Sum(1, 2) = 0, want 3\n",
		"prepare   building the sandbox image",
		"prepare   image build done (0.7s)",
		"prepare   setup `go mod download` done (3.0s)",
		"agent #1  finished  exit 0 (5.5s)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "3f2a9c1b7d4e") || strings.Contains(out.String(), "sha256:") {
		t.Errorf("container id or digest shown without --verbose:\n%s", out.String())
	}
	var verbose bytes.Buffer
	scriptedRun(NewEmitter(NewProgressSinkWith(&verbose, ProgressOptions{Verbose: true}), nil, fakeClock(700*time.Millisecond)))
	if !strings.Contains(verbose.String(), "container 3f2a9c1b7d4e  image sha256:6f1c0a4e8d1b") {
		t.Errorf("--verbose does not show the container and image:\n%s", verbose.String())
	}
	golden(t, "events/progress.txt", out.Bytes())
}

// TestProgressSinkSince: the clock counts from the run's start, so the
// sandbox's start-up before the first event is in every line's time.
func TestProgressSinkSince(t *testing.T) {
	var out bytes.Buffer
	e := NewEmitter(NewProgressSinkSince(&out, t0.Add(-4*time.Second)), nil, fakeClock(700*time.Millisecond))
	e.Emit(EventSandboxReady, PhaseSandbox, "sandbox ready: docker", map[string]any{"mode": "docker", "seconds": 4.0})
	e.Emit(EventCheckFinished, PhaseVerifying, "", map[string]any{"iteration": 0, "command": "true", "exit_code": 0, "seconds": 0.7})
	want := "[  4.0s] sandbox   ready  docker (4.0s)\n[  4.7s] check #0  true  exit 0 (0.7s)\n"
	if out.String() != want {
		t.Errorf("progress:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestEmitterCaps(t *testing.T) {
	rec := &recorder{}
	e := NewEmitter(rec, NewRedactor(secret), fakeClock(time.Second))
	long := huge("é", 5000)
	e.Emit(EventText, PhaseReasoning, long+"\nmore", nil)
	e.Emit(EventToolCalled, PhaseActing, "line1\nline2 "+long, map[string]any{"brief": long, "nested": []any{long}, "key " + secret: secret})
	e.Emit(EventCheckFinished, PhaseVerifying, "bad \xff utf8", nil)
	evs := rec.all()
	if len(evs) != 3 {
		t.Fatalf("%d events", len(evs))
	}
	if c, _, ok := textcap.SplitMarker(evs[0].Message, false); !ok || len(c) > TextEventCap {
		t.Errorf("text message not capped at %d: %d bytes", TextEventCap, len(evs[0].Message))
	}
	if c, _, ok := textcap.SplitMarker(evs[1].Message, false); !ok || len(c) > BriefCap || strings.Contains(c, "\n") {
		t.Errorf("event message not folded and capped at %d: %q", BriefCap, evs[1].Message)
	}
	if c, _, ok := textcap.SplitMarker(evs[1].Data["brief"].(string), false); !ok || len(c) > ReasonCap {
		t.Errorf("data string not capped: %d bytes", len(evs[1].Data["brief"].(string)))
	}
	if _, ok := evs[1].Data["key ***"]; !ok || evs[1].Data["key ***"] != Redacted {
		t.Errorf("data key/value not redacted: %v", evs[1].Data)
	}
	if !utf8.ValidString(evs[2].Message) {
		t.Errorf("message not repaired: %q", evs[2].Message)
	}
	if evs[0].Data == nil {
		t.Error("nil data not replaced by {}")
	}
	if !evs[1].Time.After(evs[0].Time) || !evs[0].Time.Equal(t0) {
		t.Errorf("times %v, %v: not from the injected clock", evs[0].Time, evs[1].Time)
	}
}

func TestEmitterTerminal(t *testing.T) {
	rec := &recorder{}
	e := NewEmitter(rec, nil, fakeClock(time.Second))
	e.Emit(EventCompleted, PhaseRun, "sneaky", nil)
	e.Emit(EventFailed, PhaseRun, "sneaky", nil)
	if len(rec.all()) != 0 || e.Refused() != 2 {
		t.Fatalf("terminal types went through Emit: %d events, %d refused", len(rec.all()), e.Refused())
	}
	if e.Finished() {
		t.Fatal("finished before Finish")
	}
	validate(t, Encode(Finish(notMetRun(), e)))
	e.Emit(EventText, PhaseReasoning, "late", nil)
	validate(t, Encode(Finish(passedRun(), e)))
	evs := rec.all()
	if len(evs) != 1 || evs[0].Type != EventCompleted || !e.Finished() {
		t.Fatalf("events after Finish: %+v", evs)
	}
	if !strings.Contains(evs[0].Message, "goal not met") {
		t.Errorf("terminal message %q does not say how the run ended", evs[0].Message)
	}
	var nilE *Emitter
	nilE.Emit(EventText, PhaseReasoning, "x", nil) // no panic
	if nilE.Finished() || nilE.Refused() != 0 || nilE.Redactor() != nil {
		t.Error("nil Emitter state")
	}
}

type panicSink struct{}

func (panicSink) Emit(Event) { panic("sink broke") }

type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	w.n++
	return 0, errors.New("disk full")
}

func TestTeeIsolatesSinks(t *testing.T) {
	rec := &recorder{}
	fw := &failWriter{}
	jl := NewJSONLSink(fw)
	e := NewEmitter(Tee(panicSink{}, nil, jl, rec), nil, fakeClock(time.Second))
	e.Emit(EventText, PhaseReasoning, "a", nil)
	e.Emit(EventText, PhaseReasoning, "b", nil)
	if len(rec.all()) != 2 {
		t.Errorf("the recorder behind a panicking sink got %d events", len(rec.all()))
	}
	if err := jl.(*JSONLSink).Err(); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("JSONL sink error = %v", err)
	}
	if fw.n != 1 {
		t.Errorf("a failed sink kept writing: %d writes", fw.n)
	}
}

func TestJSONLSinkUncleanData(t *testing.T) {
	var out bytes.Buffer
	NewJSONLSink(&out).Emit(Event{Type: "x", Data: map[string]any{"c": make(chan int)}, Time: t0})
	var m map[string]any
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatalf("line not JSON: %v: %s", err, out.Bytes())
	}
	if d := m["data"].(map[string]any); d["data_error"] == nil {
		t.Errorf("lost data not reported: %s", out.Bytes())
	}
}

// reentrantSink emits through its own Emitter while handling an event, as a
// sink reporting its own trouble might.
type reentrantSink struct {
	e   *Emitter
	rec *recorder
}

func (s *reentrantSink) Emit(ev Event) {
	s.rec.Emit(ev)
	if ev.Type == EventToolFailed || ev.Type == EventCompleted {
		s.e.Emit(EventText, PhaseReasoning, "sink note about "+ev.Type, nil)
	}
}

func TestEmitterReentrantSink(t *testing.T) {
	rec := &recorder{}
	s := &reentrantSink{rec: rec}
	e := NewEmitter(s, nil, fakeClock(time.Second))
	s.e = e
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Emit(EventToolFailed, PhaseActing, "", map[string]any{"tool": "Bash"})
		validate(t, Encode(Finish(passedRun(), e)))
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a sink that emits deadlocked the Emitter")
	}
	evs := rec.all()
	if len(evs) != 3 || evs[1].Type != EventText || evs[2].Type != EventCompleted {
		t.Errorf("events = %v", evs)
	}
}

// TestEmitterTerminalIsLast: with events racing from several goroutines,
// the terminal event is always the last one a sink sees.
func TestEmitterTerminalIsLast(t *testing.T) {
	for round := 0; round < 20; round++ {
		rec := &recorder{}
		e := NewEmitter(rec, nil, nil)
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 50; i++ {
					e.Emit(EventText, PhaseReasoning, "x", nil)
				}
			}()
		}
		Finish(passedRun(), e)
		wg.Wait()
		evs := rec.all()
		if last := evs[len(evs)-1]; last.Type != EventCompleted {
			t.Fatalf("round %d: the last event is %s, not the terminal one", round, last.Type)
		}
		if n := len(rec.terminals()); n != 1 {
			t.Fatalf("%d terminal events", n)
		}
	}
}
