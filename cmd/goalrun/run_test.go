package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/goalrun/goalrun/goal/agent"
	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/report/reporttest"
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

// TestInterruptedWhileTheSandboxStarts: a signal while the sandbox starts
// ends the run cancelled (status and conclusion), with one terminal event.
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
	go func() { doc, code = execute(ctx, cfg, eng, nil, log); close(done) }()
	select {
	case <-done:
	case <-time.After(guard):
		t.Fatal("execute did not return after the interruption")
	}
	// Cancelled, as after the start (the README's promise), not an error.
	if code != exitInterrupted || doc.Status != report.StatusCancelled || doc.Conclusion != report.ConclusionCancelled ||
		doc.Goal == nil || doc.Goal.Halt == nil || *doc.Goal.Halt != report.HaltInterrupted {
		t.Errorf("exit %d status %q conclusion %q goal %+v, want 130, cancelled, cancelled, halt interrupted", code, doc.Status, doc.Conclusion, doc.Goal)
	}
	terminal := 0
	for _, e := range log.evs {
		if e.Type == report.EventFailed || e.Type == report.EventCompleted {
			terminal++
		}
	}
	if terminal != 1 || log.evs[len(log.evs)-1].Type != report.EventFailed {
		t.Errorf("events %+v, want exactly one terminal event (failed), last", log.evs)
	}
	b := report.Encode(doc)
	if err := reporttest.ValidateJSON(b); err != nil {
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
	doc, code := execute(context.Background(), cfg, defaultEngine(), nil)
	if code != exitBadInput || doc.Error != report.ErrBadInput {
		t.Errorf("exit %d error %q, want a bad-input startup error for an unwritable --output", code, doc.Error)
	}
}

// TestStartupErrorsFromTheSandboxFactoryKeepTheirCode: a factory that knows
// what went wrong (a *startupError, however wrapped) keeps its code, message
// and suggestions and the exit code that goes with the code; only an
// unclassified failure becomes SandboxFailed.
func TestStartupErrorsFromTheSandboxFactoryKeepTheirCode(t *testing.T) {
	notOnPath := &startupError{code: report.ErrAgentNotFound,
		message:     `the claude agent's executable "claude" is not on this machine's PATH`,
		suggestions: []string{"Install the agent's CLI, name it with agent-bin, or pass an image that contains it."}}
	badMount := &startupError{code: report.ErrBadInput, message: "the workspace is the home folder", suggestions: []string{"Choose another workspace."}}
	relay := &startupError{code: report.ErrSandboxFailed, message: "goalrun's own executable is dynamically linked", suggestions: []string{"Use a statically linked goalrun."}}
	cases := []struct {
		name     string
		err      error
		wantCode string
		wantExit int
		wantMsg  string
		wantSugg []string
	}{
		{"agent CLI not on PATH", notOnPath, report.ErrAgentNotFound, exitBadInput, notOnPath.message, notOnPath.suggestions},
		{"wrapped startup error", fmt.Errorf("starting: %w", notOnPath), report.ErrAgentNotFound, exitBadInput, notOnPath.message, notOnPath.suggestions},
		{"bad input from the factory", badMount, report.ErrBadInput, exitBadInput, badMount.message, badMount.suggestions},
		{"relay that cannot run", relay, report.ErrSandboxFailed, exitRunFailed, relay.message, relay.suggestions},
		{"unclassified failure", errors.New("creating the container: no space left on device"), report.ErrSandboxFailed, exitRunFailed,
			"the sandbox could not start: creating the container: no space left on device",
			[]string{"The sandbox could not start; check the Docker Engine's health and the sandbox image, then run again."}},
		{"no engine", fmt.Errorf("%w: dial unix: no such file", errEngineUnavailable), report.ErrSandboxUnavailable, exitRunFailed,
			"the Docker sandbox is unavailable: no Docker Engine answered: dial unix: no such file", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg, err := parseRunArgs([]string{"--until", "true", "--agent", "command", "--agent-bin", "true"},
				noEnv, func() (string, error) { return dir, nil })
			if err != nil {
				t.Fatal(err)
			}
			eng := defaultEngine()
			eng.sandboxes.docker = func(context.Context, runConfig, sandbox.Config) (sandbox.Sandbox, error) { return nil, tc.err }
			log := &eventLog{}
			doc, code := execute(context.Background(), cfg, eng, nil, log)
			if doc.Error != tc.wantCode || code != tc.wantExit || doc.Goal != nil {
				t.Errorf("error %q exit %d goal %+v, want %s, exit %d, the startup-error shape", doc.Error, code, doc.Goal, tc.wantCode, tc.wantExit)
			}
			if doc.Message != tc.wantMsg {
				t.Errorf("message %q, want %q", doc.Message, tc.wantMsg)
			}
			if tc.wantSugg != nil && !reflect.DeepEqual(doc.Suggestions, tc.wantSugg) {
				t.Errorf("suggestions %q, want %q", doc.Suggestions, tc.wantSugg)
			}
			if len(log.evs) != 1 || log.evs[0].Type != report.EventFailed {
				t.Errorf("events %+v, want exactly one failed event", log.evs)
			}
			if err := reporttest.ValidateJSON(report.Encode(doc)); err != nil {
				t.Errorf("document invalid: %v", err)
			}
		})
	}
}

// TestMissingKey: the key is judged missing only where the agent cannot
// have one: a model-backed agent, its variable unset, in a Docker sandbox.
func TestMissingKey(t *testing.T) {
	docker, local := sandbox.Posture{Mode: "docker"}, sandbox.Posture{Mode: "local"}
	withKey := []sandbox.Upstream{agent.ClaudeSpec.API.Upstream("sk-ant-x")}
	cases := []struct {
		name    string
		agent   string
		spec    agent.Spec
		ups     []sandbox.Upstream
		posture sandbox.Posture
		want    string
	}{
		{"claude, docker, no key", "claude", agent.ClaudeSpec, nil, docker, "ANTHROPIC_API_KEY"},
		{"codex, docker, no key", "codex", agent.CodexSpec, nil, docker, "OPENAI_API_KEY"},
		{"claude, docker, key set", "claude", agent.ClaudeSpec, withKey, docker, ""},
		{"claude, local host may be logged in", "claude", agent.ClaudeSpec, nil, local, ""},
		{"command agent needs no key", agent.CommandName, agent.Spec{Name: agent.CommandName}, nil, docker, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := runConfig{settings: settings{agent: tc.agent}, spec: tc.spec, upstreams: tc.ups}
			if got := missingKey(cfg, tc.posture); got != tc.want {
				t.Errorf("missingKey = %q, want %q", got, tc.want)
			}
		})
	}
}

// hungSandbox is a local sandbox whose checks never return, whatever their
// context says (a step stuck in a call that ignores it).
type hungSandbox struct {
	sandbox.Sandbox
	entered chan struct{}
	once    sync.Once
}

func (h *hungSandbox) Exec(ctx context.Context, cmd sandbox.Cmd) (sandbox.Result, error) {
	if cmd.Role == sandbox.RoleCheck {
		h.once.Do(func() { close(h.entered) })
		select {} // never
	}
	return h.Sandbox.Exec(ctx, cmd)
}

// TestOverrunStopStillWritesOneDocument: when the stop after a signal does
// not end (a step that ignores its context), the exit watchdog still has a
// cancelled document written — --output, the terminal event, the exit
// code — before the process exits at sandbox.PhaseExit's deadline.
func TestOverrunStopStillWritesOneDocument(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(t.TempDir(), "doc.json")
	cfg, err := parseRunArgs([]string{"--until", "true", "--agent", "command", "--agent-bin", "true", "--sandbox", "local", "--output", out},
		noEnv, func() (string, error) { return dir, nil })
	if err != nil {
		t.Fatal(err)
	}
	eng := defaultEngine()
	local := eng.sandboxes.local
	hung := &hungSandbox{entered: make(chan struct{})}
	eng.sandboxes.local = func(ctx context.Context, c sandbox.Config) (sandbox.Sandbox, error) {
		sb, err := local(ctx, c)
		hung.Sandbox = sb
		return hung, err
	}
	var delivered []report.Document
	var mu sync.Mutex
	eng.deliver = func(d report.Document) { mu.Lock(); delivered = append(delivered, d); mu.Unlock() }
	ctx, clock := sandbox.WithStopClock(context.Background())
	fin := newFinale()
	ctx = withFinale(ctx, fin)
	log := &eventLog{}
	go execute(ctx, cfg, eng, nil, log) // never returns: its check hangs
	select {
	case <-hung.entered:
	case <-time.After(guard):
		t.Fatal("the check did not start")
	}
	clock.Interrupt(syscall.SIGTERM)
	in := clock.Interrupted()
	exited := make(chan int, 1)
	armWatchdog(in, fin, nil, func(code int) { exited <- code })
	var code int
	select {
	case code = <-exited:
	case <-time.After(guard):
		t.Fatal("the watchdog never exited")
	}
	if took := time.Since(in.At); took > sandbox.InterruptBound {
		t.Errorf("exit after %s, more than %s", took, sandbox.InterruptBound)
	}
	if code != exitInterrupted {
		t.Errorf("exit code %d, want %d", code, exitInterrupted)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(delivered) != 1 || delivered[0].Status != report.StatusCancelled || !strings.Contains(delivered[0].Message, "SIGTERM") {
		t.Fatalf("delivered %+v, want one cancelled document naming SIGTERM", delivered)
	}
	b, err := os.ReadFile(out)
	if err != nil || !bytes.Equal(bytes.TrimSpace(b), report.Encode(delivered[0])) {
		t.Errorf("--output holds %s (%v), want the delivered document", b, err)
	}
	if err := reporttest.ValidateJSON(bytes.TrimSpace(b)); err != nil {
		t.Errorf("document invalid: %v", err)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	terminal := 0
	for _, e := range log.evs {
		if e.Type == report.EventFailed || e.Type == report.EventCompleted {
			terminal++
		}
	}
	if terminal != 1 || log.evs[len(log.evs)-1].Type != report.EventFailed {
		t.Errorf("events %+v, want exactly one terminal event, last", log.evs)
	}
}
