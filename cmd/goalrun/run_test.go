package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/sandbox"
)

// eventLog is a Sink that keeps events.
type eventLog struct {
	mu  sync.Mutex
	evs []report.Event
}

func (l *eventLog) Emit(e report.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs = append(l.evs, e)
}

func TestInterruptedWhileTheSandboxStarts(t *testing.T) {
	dir := t.TempDir()
	cfg, err := parseRunArgs([]string{"--until", "true", "--agent", "command", "--agent-bin", "true", "--sandbox", "local"},
		noEnv, func() (string, error) { return dir, nil })
	if err != nil {
		t.Fatal(err)
	}
	eng := defaultEngine()
	started := make(chan struct{})
	eng.sandboxes.local = func(ctx context.Context, _ sandbox.Config) (sandbox.Sandbox, error) {
		close(started) // a slow start (an image build) that the signal interrupts
		<-ctx.Done()
		return nil, ctx.Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	log := &eventLog{}
	done := make(chan struct{})
	var doc report.Document
	var code int
	go func() { doc, code = execute(ctx, cfg, eng, log); close(done) }()
	select {
	case <-done:
	case <-time.After(guard):
		t.Fatal("execute did not return after the interruption")
	}
	if code != exitInterrupted || doc.Error != report.ErrCancelled || doc.Goal != nil {
		t.Errorf("exit %d error %q goal %+v, want 130, Cancelled, the startup-error shape", code, doc.Error, doc.Goal)
	}
	if len(log.evs) != 1 || log.evs[0].Type != report.EventFailed {
		t.Errorf("events %+v, want exactly one failed event", log.evs)
	}
	b := report.Encode(doc)
	if err := report.ValidateJSON(b); err != nil {
		t.Errorf("document invalid: %v\n%s", err, b)
	}
}

func TestUnwritableOutputIsRefusedBeforeTheRun(t *testing.T) {
	dir := t.TempDir()
	cfg, err := parseRunArgs([]string{"--until", "true", "--agent", "command", "--agent-bin", "true", "--sandbox", "local"},
		noEnv, func() (string, error) { return dir, nil })
	if err != nil {
		t.Fatal(err)
	}
	// The output path is a directory: the early check refuses it before
	// the agent or the check runs.
	cfg.output = t.TempDir()
	doc, code := execute(context.Background(), cfg, defaultEngine())
	if code != exitBadInput || doc.Error != report.ErrBadInput {
		t.Errorf("exit %d error %q, want a bad-input startup error for an unwritable --output", code, doc.Error)
	}
}
