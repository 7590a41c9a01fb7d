package main

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/goalrun/goalrun/goal/agent"
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
			doc, code := execute(context.Background(), cfg, eng, log)
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
			if err := report.ValidateJSON(report.Encode(doc)); err != nil {
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
