package goal_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goalrun/goalrun/goal"
	"github.com/goalrun/goalrun/goal/agent"
	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/sandbox"
)

// guard bounds every run in these tests; it is a hang guard, not a timing
// assertion.
const guard = 60 * time.Second

// recorder is an Events that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []report.Event
}

func (r *recorder) Emit(typ, phase, message string, data map[string]any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, report.Event{Type: typ, Phase: phase, Message: message, Data: data})
}

func (r *recorder) types() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		out = append(out, e.Type)
	}
	return out
}

func (r *recorder) ofType(typ string) []report.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []report.Event
	for _, e := range r.events {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// fakeClock advances one second per reading, so durations are exact.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

// workspace makes a workspace with the given files.
func workspace(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func local(t *testing.T, dir string) sandbox.Sandbox {
	t.Helper()
	sb, err := sandbox.StartLocal(t.Context(), sandbox.Config{Workspace: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close(context.Background()) })
	return sb
}

func run(t *testing.T, ctx context.Context, cfg goal.Config) goal.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, guard)
	defer cancel()
	out, err := goal.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return out
}

func exists(dir, name string) bool {
	_, err := os.Stat(filepath.Join(dir, name))
	return err == nil
}

// A check that passes when "fixed" holds two lines; the agent adds one a turn.
const (
	twoStepCheck = `test "$(wc -l < fixed 2>/dev/null | tr -d ' ')" = 2 || { echo "FAIL: fixed has $(cat fixed 2>/dev/null | wc -l) of 2 lines"; exit 1; }`
	oneStepAgent = `echo line >> fixed; echo "$GOALRUN_PROMPT" > prompt-$GOALRUN_ITERATION; echo "added a line"`
)

func TestLoopOutcomes(t *testing.T) {
	cases := []struct {
		name     string
		files    map[string]string
		check    string
		agentCmd string
		maxIter  int
		// want
		passed, grounded bool
		turns            int
		halt             string
		failure          string
		iterations       int // entries in the iteration log
		receipts         int
		agentRan         bool
	}{
		{
			name: "already passing: agent never started", check: "true", agentCmd: "touch agent-ran",
			passed: true, grounded: true, turns: 0, iterations: 1,
		},
		{
			name: "fixed in two turns", check: twoStepCheck, agentCmd: oneStepAgent,
			passed: true, grounded: true, turns: 2, iterations: 3, receipts: 2, agentRan: true,
		},
		{
			name: "never fixed: max iterations, every iteration recorded", check: "echo still broken; exit 1",
			agentCmd: "touch agent-ran; echo trying", maxIter: 3,
			turns: 3, halt: report.HaltMaxIterations, iterations: 4, receipts: 3, agentRan: true,
		},
		{
			name: "check command not found: not runnable, no agent turn", check: "goalrun-no-such-cmd --flag",
			agentCmd: "touch agent-ran", failure: report.ErrCheckNotRunnable, iterations: 1,
		},
		{
			name: "check not executable: not runnable", files: map[string]string{"check": "#!/bin/sh\nexit 0\n"},
			check: "./check", agentCmd: "touch agent-ran", failure: report.ErrCheckNotRunnable, iterations: 1,
		},
		{
			name: "agent fails and the goal is not met: agent_error", check: "false",
			agentCmd: "touch agent-ran; echo cannot >&2; exit 4",
			turns:    1, halt: report.HaltAgentError, failure: report.ErrAgentFailed, iterations: 2, receipts: 1, agentRan: true,
		},
		{
			name: "agent fails but the check passes: the grounded verdict stands", check: "test -e fixed",
			agentCmd: "touch agent-ran fixed; exit 4",
			passed:   true, grounded: true, turns: 1, iterations: 2, receipts: 1, agentRan: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := workspace(t, tc.files)
			ev := &recorder{}
			out := run(t, context.Background(), goal.Config{
				Sandbox: local(t, dir), Adapter: agent.Command{}, AgentBin: tc.agentCmd,
				Task: "make it pass", Check: tc.check, MaxIterations: tc.maxIter,
				Events: ev, Now: (&fakeClock{}).Now,
			})
			if out.Passed != tc.passed || out.Grounded != tc.grounded || out.AgentTurns != tc.turns || out.Halt != tc.halt {
				t.Errorf("passed=%v grounded=%v turns=%d halt=%q, want %v %v %d %q (reason %q)",
					out.Passed, out.Grounded, out.AgentTurns, out.Halt, tc.passed, tc.grounded, tc.turns, tc.halt, out.HaltReason)
			}
			gotFailure := ""
			if out.Failure != nil {
				gotFailure = out.Failure.Code
			}
			if gotFailure != tc.failure {
				t.Errorf("failure %q (%+v), want %q", gotFailure, out.Failure, tc.failure)
			}
			if n := out.Iterations.Len(); n != tc.iterations {
				t.Errorf("iterations recorded %d, want %d", n, tc.iterations)
			}
			if n := out.Receipts.Total(); n != tc.receipts {
				t.Errorf("receipts %d, want %d", n, tc.receipts)
			}
			ran := exists(dir, "agent-ran") || exists(dir, "fixed") && tc.agentRan
			if ran != tc.agentRan {
				t.Errorf("agent ran = %v, want %v", ran, tc.agentRan)
			}
			if started := len(ev.ofType(report.EventAgentStarted)); started != tc.turns {
				t.Errorf("%d agent_started events, want %d", started, tc.turns)
			}
			for _, it := range out.Iterations.Iterations() {
				if it.N > 0 && it.Agent == nil {
					t.Errorf("iteration %d has no agent step", it.N)
				}
				if it.Check == nil {
					t.Errorf("iteration %d has no check", it.N)
				}
			}
			if tc.passed && tc.turns == 0 && out.Summary == "" {
				t.Errorf("no summary for an already-passing check")
			}
			evals := ev.ofType(report.EventGoalEvaluated)
			if tc.failure != report.ErrCheckNotRunnable && len(evals) != tc.iterations {
				t.Errorf("%d goal_evaluated events, want one per check (%d)", len(evals), tc.iterations)
			}
			// The last verdict event carries the halt decided with it.
			if tc.halt != "" && len(evals) > 0 {
				last := evals[len(evals)-1]
				if last.Data["halt"] != tc.halt || last.Data["halt_reason"] != out.HaltReason || !strings.Contains(last.Message, tc.halt) {
					t.Errorf("last goal_evaluated %+v, want halt %q with its reason", last, tc.halt)
				}
			}
			for _, e := range evals[:max(len(evals)-1, 0)] {
				if _, ok := e.Data["halt"]; ok {
					t.Errorf("goal_evaluated for iteration %v has a halt", e.Data["iteration"])
				}
			}
		})
	}
}

func TestLoopPromptCarriesTheFailingCheck(t *testing.T) {
	dir := workspace(t, nil)
	out := run(t, context.Background(), goal.Config{
		Sandbox: local(t, dir), Adapter: agent.Command{}, AgentBin: oneStepAgent + `; cat > stdin-$GOALRUN_ITERATION`,
		Task: "Fix the counter.", Check: twoStepCheck,
	})
	if !out.Passed {
		t.Fatalf("not passed: %+v", out)
	}
	for _, n := range []string{"1", "2"} {
		env, _ := os.ReadFile(filepath.Join(dir, "prompt-"+n))
		stdin, _ := os.ReadFile(filepath.Join(dir, "stdin-"+n))
		if strings.TrimSpace(string(env)) != strings.TrimSpace(string(stdin)) {
			t.Errorf("turn %s: GOALRUN_PROMPT and stdin differ:\n%s\n---\n%s", n, env, stdin)
		}
		for _, want := range []string{"Fix the counter.", "The check `" + twoStepCheck + "` failed with exit code 1.", "FAIL: fixed has"} {
			if !strings.Contains(string(env), want) {
				t.Errorf("turn %s prompt lacks %q:\n%s", n, want, env)
			}
		}
	}
	if p, _ := os.ReadFile(filepath.Join(dir, "prompt-2")); !strings.Contains(string(p), "fixed has 1 of 2 lines") {
		t.Errorf("turn 2's prompt does not quote the latest check:\n%s", p)
	}
	if !strings.HasPrefix(out.Summary, "added a line") {
		t.Errorf("summary %q, want the agent's last stdout", out.Summary)
	}
}

func TestLoopInterruptedStopsTheStepPromptly(t *testing.T) {
	dir := workspace(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	ev := &recorder{}
	go func() {
		for !exists(dir, "agent-started") {
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
	}()
	done := make(chan goal.Outcome, 1)
	go func() {
		out, _ := goal.Run(ctx, goal.Config{
			Sandbox: local(t, dir), Adapter: agent.Command{},
			AgentBin: `trap '' TERM; touch agent-started; sleep 60; touch agent-finished`,
			Check:    "false", Events: ev,
		})
		done <- out
	}()
	var out goal.Outcome
	select {
	case out = <-done:
	case <-time.After(guard):
		t.Fatal("Run did not return after its context was cancelled")
	}
	if out.Failure == nil || out.Failure.Code != report.ErrCancelled || out.Halt != report.HaltInterrupted {
		t.Fatalf("failure %+v halt %q, want Cancelled/interrupted", out.Failure, out.Halt)
	}
	if out.Status() != report.StatusCancelled {
		t.Errorf("status %q", out.Status())
	}
	if exists(dir, "agent-finished") {
		t.Errorf("the agent step ran to its end")
	}
	if out.AgentTurns != 1 || out.Iterations.Len() != 2 {
		t.Errorf("turns %d iterations %d, want 1 and 2 (the interrupted turn is recorded)", out.AgentTurns, out.Iterations.Len())
	}
}

func TestLoopRunTimeout(t *testing.T) {
	dir := workspace(t, nil)
	out := run(t, context.Background(), goal.Config{
		Sandbox: local(t, dir), Adapter: agent.Command{}, AgentBin: "sleep 60",
		Check: "false", Timeout: 500 * time.Millisecond,
	})
	if out.Halt != report.HaltTimeout || out.Failure != nil || out.Passed {
		t.Errorf("halt %q failure %+v passed %v, want timeout, no failure, not passed", out.Halt, out.Failure, out.Passed)
	}
	if out.Status() != report.StatusSuccess {
		t.Errorf("status %q, want success (every step ran as far as the budget allowed)", out.Status())
	}
}

// TestLoopRunTimeoutDuringTheCheck: a check the run's --timeout stopped
// (here before it could start) is recorded as timed out with no exit
// status, never as "exit 0, not passed".
func TestLoopRunTimeoutDuringTheCheck(t *testing.T) {
	dir := workspace(t, nil)
	ev := &recorder{}
	out := run(t, context.Background(), goal.Config{
		Sandbox: local(t, dir), Adapter: agent.Command{}, AgentBin: "true",
		Check: "sleep 5", Timeout: time.Nanosecond, Events: ev,
	})
	if out.Halt != report.HaltTimeout || out.Passed {
		t.Fatalf("halt %q passed %v, want timeout, not passed", out.Halt, out.Passed)
	}
	finished := ev.ofType(report.EventCheckFinished)
	if len(finished) != 1 || finished[0].Data["exit_code"] != goal.NoExitCode || finished[0].Data["timed_out"] != true {
		t.Errorf("check_finished events %+v, want one with exit_code %d and timed_out", finished, goal.NoExitCode)
	}
}

func TestLoopStepTimeoutFailsTheTurn(t *testing.T) {
	dir := workspace(t, nil)
	out := run(t, context.Background(), goal.Config{
		Sandbox: local(t, dir), Adapter: agent.Command{}, AgentBin: "sleep 60",
		Check: "false", StepTimeout: 300 * time.Millisecond,
	})
	its := out.Iterations.Iterations()
	if len(its) != 2 || its[1].Agent == nil || its[1].Agent.Status != agent.StatusFailed {
		t.Fatalf("iterations %+v", its)
	}
	if out.Halt != report.HaltAgentError {
		t.Errorf("halt %q, want agent_error", out.Halt)
	}
	// The sandbox's kill explains the turn, not the exit status it caused.
	f := out.Failure
	if f == nil || f.Cause != goal.CauseStepTimeout || f.Detail["timed_out"] != true || !strings.Contains(f.Message, "--step-timeout") {
		t.Errorf("failure %+v, want cause %s, timed_out and the flag named", f, goal.CauseStepTimeout)
	}
}

func TestBadConfig(t *testing.T) {
	sb := local(t, t.TempDir())
	cases := map[string]goal.Config{
		"no sandbox":            {Adapter: agent.Command{}, Check: "true"},
		"no adapter":            {Sandbox: sb, Check: "true"},
		"no check and no judge": {Sandbox: sb, Adapter: agent.Command{}},
		"negative iterations":   {Sandbox: sb, Adapter: agent.Command{}, Check: "true", MaxIterations: -1},
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := goal.Run(context.Background(), cfg); !errors.Is(err, goal.ErrBadConfig) {
				t.Errorf("err = %v, want ErrBadConfig", err)
			}
		})
	}
}

// scripted is an adapter whose "agent" prints a line protocol the parser
// understands, so the loop's event handling can be driven exactly:
//
//	SESSION id | MODEL m | TEXT words | CALL id tool brief | OK id | FAIL id
//	RETRY attempt status backoff | USAGE in out cost [cum] | RESULT | AUTH
type scripted struct{ script string }

func (s scripted) Name() string { return "scripted" }
func (s scripted) Command(t agent.Turn) agent.Invocation {
	return agent.Invocation{Args: sandbox.Shell(s.script), Env: map[string]string{"TURN": strconv.Itoa(t.Iteration), "SESSION_IN": t.SessionID}}
}
func (s scripted) NewParser() agent.Parser { return &scriptedParser{} }

type scriptedParser struct {
	res    agent.TurnResult
	result bool
}

func (p *scriptedParser) Line(line []byte, _ bool, emit func(agent.Event)) {
	f := strings.Fields(string(line))
	if len(f) == 0 {
		return
	}
	arg := func(i int) string {
		if i < len(f) {
			return f[i]
		}
		return ""
	}
	num := func(i int) int64 { n, _ := strconv.ParseInt(arg(i), 10, 64); return n }
	switch f[0] {
	case "SESSION":
		p.res.SessionID = arg(1)
		emit(agent.Event{Kind: agent.KindSession, SessionID: arg(1)})
	case "MODEL":
		emit(agent.Event{Kind: agent.KindModel, Model: arg(1)})
	case "TEXT":
		p.res.Summary = strings.Join(f[1:], " ")
		emit(agent.Event{Kind: agent.KindText, Text: p.res.Summary})
	case "CALL":
		emit(agent.Event{Kind: agent.KindToolCall, Tool: &agent.Tool{ID: arg(1), Name: arg(2), Brief: strings.Join(f[3:], " ")}})
	case "OK", "FAIL":
		emit(agent.Event{Kind: agent.KindToolResult, Tool: &agent.Tool{ID: arg(1), OK: f[0] == "OK"}})
	case "RETRY":
		emit(agent.Event{Kind: agent.KindRetry, Retry: &agent.Retry{Attempt: int(num(1)), Status: int(num(2)), BackoffMS: num(3)}})
	case "USAGE":
		cost, _ := strconv.ParseFloat(arg(3), 64)
		emit(agent.Event{Kind: agent.KindUsage, Usage: &agent.Usage{InputTokens: num(1), OutputTokens: num(2), CostUSD: cost, Cumulative: arg(4) == "cum"}})
	case "RESULT":
		p.result = true
		p.res.Turns++
		emit(agent.Event{Kind: agent.KindResult})
	case "AUTH":
		p.res.Status, p.res.Cause, p.res.Message = agent.StatusAuthRequired, "auth_required", "401 invalid x-api-key"
	case "STOP": // an auth storm: the parser asks for the process to die now
		p.res.Status, p.res.Cause, p.res.AuthReason = agent.StatusAuthRequired, "auth_required", agent.AuthExpired
		emit(agent.Event{Kind: agent.KindError, Error: &agent.Error{Message: "401 twice", Fatal: true, Auth: true}, Stop: true})
	}
}

// StderrLine reads stderr lines under the same protocol (like car's JSONL
// progress on stderr).
func (p *scriptedParser) StderrLine(line []byte, oversize bool, emit func(agent.Event)) {
	p.Line(line, oversize, emit)
}

func (p *scriptedParser) End(exit int, emit func(agent.Event)) agent.TurnResult {
	if p.res.Status == "" {
		p.res.Status = agent.StatusSuccess
		if !p.result {
			p.res.Status, p.res.Cause = agent.StatusFailed, "no_result_event"
		}
	}
	return p.res
}

func TestLoopTurnsAgentEventsIntoReportEvents(t *testing.T) {
	dir := workspace(t, nil)
	script := `
echo SESSION sess-1
echo MODEL claude-x
echo TEXT reading the test
echo CALL t1 Read calc_test.go
echo OK t1
echo CALL t2 Bash go test ./...
echo RETRY 1 529 1000
echo FAIL t2
echo CALL t3 Edit calc.go
echo USAGE 100 20 0.5
echo RESULT
[ "$TURN" = 2 ] && touch fixed
echo CALL t4 Bash never-answered
`
	ev := &recorder{}
	out := run(t, context.Background(), goal.Config{
		Sandbox: local(t, dir), Adapter: scripted{script: script}, Check: "test -e fixed", Events: ev,
	})
	if !out.Passed || out.AgentTurns != 2 {
		t.Fatalf("passed %v turns %d (halt %q failure %+v)", out.Passed, out.AgentTurns, out.Halt, out.Failure)
	}
	// Per turn: t1 ok, t2 failed, t3 and t4 never answered (failed).
	r := out.Receipts.Receipts()
	if r.Total != 8 || r.Failed != 6 {
		t.Errorf("receipts total %d failed %d, want 8 and 6", r.Total, r.Failed)
	}
	called := ev.ofType(report.EventToolCalled)
	if len(called) != 8 {
		t.Fatalf("%d tool_called events, want 8", len(called))
	}
	for i, e := range called {
		if e.Data["sequence"] != i+1 {
			t.Errorf("tool_called %d has sequence %v", i, e.Data["sequence"])
		}
	}
	first := called[0].Data
	if first["call_id"] != "t1" || first["tool"] != "Read" || first["brief"] != "calc_test.go" {
		t.Errorf("first tool_called data %v", first)
	}
	results := ev.ofType(report.EventToolResult)
	failed := ev.ofType(report.EventToolFailed)
	if len(results) != 2 || len(failed) != 6 {
		t.Errorf("%d tool_result and %d tool_failed, want 2 and 6", len(results), len(failed))
	}
	if results[0].Data["call_id"] != "t1" || results[0].Data["sequence"] != 1 || results[0].Data["tool"] != "Read" {
		t.Errorf("tool_result data %v", results[0].Data)
	}
	if n := len(ev.ofType(report.EventModelServed)); n != 1 {
		t.Errorf("%d model_served events, want 1 (one model)", n)
	}
	if rt := ev.ofType(report.EventInferenceRetry); len(rt) != 2 || rt[0].Data["status"] != 529 || rt[0].Data["backoff_ms"] != int64(1000) {
		t.Errorf("inference_retry events %v", rt)
	}
	if tx := ev.ofType(report.EventText); len(tx) != 2 || tx[0].Message != "reading the test" {
		t.Errorf("text events %v", tx)
	}
	if out.SessionID != "sess-1" || out.Model != "claude-x" || len(out.ModelsServed) != 1 {
		t.Errorf("session %q model %q served %v", out.SessionID, out.Model, out.ModelsServed)
	}
	if out.Usage.InputTokens != 200 || out.Usage.OutputTokens != 40 || out.Usage.CostUSD != 1.0 {
		t.Errorf("usage %+v, want two turns of 100/20/0.5", out.Usage)
	}
	if out.Summary != "reading the test" {
		t.Errorf("summary %q", out.Summary)
	}
	starts := ev.ofType(report.EventAgentStarted)
	if len(starts) != 2 || starts[1].Data["session_id"] != "sess-1" {
		t.Errorf("agent_started events %v: the second must resume the session", starts)
	}
	// Each turn ends with agent_finished (its seconds feed the time split),
	// after its last agent event and before the check that follows it.
	ends := ev.ofType(report.EventAgentFinished)
	if len(ends) != 2 || ends[0].Data["iteration"] != 1 || ends[1].Data["status"] != agent.StatusSuccess {
		t.Fatalf("agent_finished events %v", ends)
	}
	if _, ok := ends[0].Data["seconds"].(float64); !ok {
		t.Errorf("agent_finished without seconds: %v", ends[0].Data)
	}
	types := ev.types()
	for i, typ := range types {
		if typ == report.EventAgentFinished && (i+1 >= len(types) || types[i+1] != report.EventCheckStarted) {
			t.Errorf("agent_finished is not followed by the check: %v", types)
		}
	}
	// The failing first check's event says what failed and ends with its
	// output's last lines.
	checks := ev.ofType(report.EventCheckFinished)
	if tl, _ := checks[0].Data["tail_lines"].([]string); checks[0].Data["passed"] != false || tl != nil {
		t.Errorf("a check that printed nothing has no tail_lines: %v", checks[0].Data)
	}
	if _, ok := checks[len(checks)-1].Data["tail_lines"]; ok {
		t.Errorf("a passing check's event carries tail_lines: %v", checks[len(checks)-1].Data)
	}
}

func TestTailLines(t *testing.T) {
	long := strings.Repeat("x", 300)
	for _, tc := range []struct {
		name string
		tail string
		n    int
		want []string
	}{
		{"go test", "--- FAIL: TestSum (0.00s)\n    calc_test.go:9: got 1, want 3\nFAIL\nFAIL\texample.com/calc\t0.012s\nFAIL\n",
			3, []string{"FAIL", "FAIL\texample.com/calc\t0.012s", "FAIL"}},
		{"blank lines skipped", "a\n\n  \nb\n\n", 5, []string{"a", "b"}},
		{"a cut first line is dropped", report.Ellipsis + "rtial line\nwhole line\n", 5, []string{"whole line"}},
		{"a capped tail too", report.CapTail("first\nsecond\nthird\n", 0, 10), 5, []string{"third"}},
		{"long lines are shortened plainly", long, 5, []string{strings.Repeat("x", goal.CheckEventLineBytes-len(report.Ellipsis)) + report.Ellipsis}},
		{"nothing", "\n\n", 5, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := goal.TailLines(tc.tail, tc.n)
			if strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
				t.Errorf("TailLines = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCheckExcerpt(t *testing.T) {
	far := "--- FAIL: TestParse (0.00s)\n    parse_test.go:12: got \"a\", want \"b\"\n"
	usage := "Usage: tool [flags]\n  -h  help\n  -v  verbose\nFAIL\nFAIL\texample.com/cli\t0.010s\nFAIL\n"
	for _, tc := range []struct {
		name               string
		failures, tail     string
		wantFail, wantTail []string
	}{
		{"the failing test far before the tail leads", far, usage,
			[]string{"--- FAIL: TestParse (0.00s)", `    parse_test.go:12: got "a", want "b"`},
			[]string{"  -v  verbose", "FAIL", "FAIL\texample.com/cli\t0.010s", "FAIL"}},
		{"the tail is cut short after the failing tests' lines", far, strings.Repeat("usage\n", 20) + "FAIL\n",
			[]string{"--- FAIL: TestParse (0.00s)", `    parse_test.go:12: got "a", want "b"`},
			[]string{"usage", "usage", "usage", "FAIL"}},
		{"failures the tail already shows are not repeated", far, far + "FAIL\n", nil,
			[]string{"--- FAIL: TestParse (0.00s)", `    parse_test.go:12: got "a", want "b"`, "FAIL"}},
		{"no failures found", "", "boom\n", nil, []string{"boom"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nt := 4
			if tc.name != "the failing test far before the tail leads" {
				nt = 10
			}
			f, tl := goal.CheckExcerpt(tc.failures, tc.tail, 10, nt)
			if strings.Join(f, "|") != strings.Join(tc.wantFail, "|") || strings.Join(tl, "|") != strings.Join(tc.wantTail, "|") {
				t.Errorf("CheckExcerpt = %q, %q; want %q, %q", f, tl, tc.wantFail, tc.wantTail)
			}
		})
	}
}

// TestLoopFailingCheckEventCarriesItsOutput: check_finished of a failing
// check names the failing tests in plain words and carries the last lines
// of its output, for the progress view.
func TestLoopFailingCheckEventCarriesItsOutput(t *testing.T) {
	dir := workspace(t, nil)
	ev := &recorder{}
	check := `printf -- '--- FAIL: TestWords (0.00s)\n    words_test.go:9: got 3, want 2\nFAIL\nFAIL\texample.com/p1\t0.004s\n'; exit 1`
	run(t, context.Background(), goal.Config{Sandbox: local(t, dir), Adapter: agent.Command{Bin: "true"}, Check: check, MaxIterations: 1, Events: ev})
	c := ev.ofType(report.EventCheckFinished)[0].Data
	if c["failing"] != "TestWords failing in example.com/p1" {
		t.Errorf("failing = %v", c["failing"])
	}
	tl, _ := c["tail_lines"].([]string)
	if len(tl) != 4 || tl[1] != "    words_test.go:9: got 3, want 2" {
		t.Errorf("tail_lines = %q", tl)
	}
}

func TestLoopKillsAnAgentThatLingersAfterItsResult(t *testing.T) {
	dir := workspace(t, nil)
	out := run(t, context.Background(), goal.Config{
		Sandbox: local(t, dir), Adapter: scripted{script: `touch fixed; echo RESULT; sleep 60; touch lingered`},
		Check: "test -e fixed", ResultGrace: 200 * time.Millisecond,
	})
	if !out.Passed || out.Failure != nil {
		t.Fatalf("passed %v failure %+v", out.Passed, out.Failure)
	}
	if exists(dir, "lingered") {
		t.Errorf("the lingering agent was not killed")
	}
	if its := out.Iterations.Iterations(); its[1].Agent.Status != agent.StatusSuccess {
		t.Errorf("turn status %q, want success: the result event came before the kill", its[1].Agent.Status)
	}
}

// refusingProxy is a sandbox whose egress proxy records one more refusal
// each time its posture is read (grow), or never (a model API's own 502s).
type refusingProxy struct {
	sandbox.Sandbox
	grow   bool
	mu     sync.Mutex
	denied int
}

func (r *refusingProxy) Posture() sandbox.Posture {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.Sandbox.Posture()
	if r.grow {
		r.denied++
	}
	p.EgressDenied = r.denied
	return p
}

// TestLoopEgressRetryStorm: 502 retries that goalrun's own egress proxy
// caused (it recorded new refusals meanwhile) stop the turn after two, as
// egress_refused; an upstream's own 502s (no refusals) do not.
func TestLoopEgressRetryStorm(t *testing.T) {
	script := `printf 'RETRY 1 502 10\nRETRY 2 502 10\n'; sleep 2; touch finished; echo RESULT`
	for _, tc := range []struct {
		name     string
		grow     bool
		wantStop bool
	}{
		{"the proxy could not reach the model API", true, true},
		{"the model API's own 502", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := workspace(t, nil)
			sb := &refusingProxy{Sandbox: local(t, dir), grow: tc.grow}
			out := run(t, context.Background(), goal.Config{
				Sandbox: sb, Adapter: scripted{script: script}, Check: "false", MaxIterations: 1,
			})
			stopped := out.Failure != nil && out.Failure.Cause == agent.CauseEgressRefused
			if stopped != tc.wantStop || exists(dir, "finished") == tc.wantStop {
				t.Errorf("failure %+v, turn finished %v; want stopped as egress_refused: %v", out.Failure, exists(dir, "finished"), tc.wantStop)
			}
		})
	}
}

func TestLoopAuthRequired(t *testing.T) {
	dir := workspace(t, nil)
	out := run(t, context.Background(), goal.Config{
		Sandbox: local(t, dir), Adapter: scripted{script: `echo AUTH; touch agent-ran`}, Check: "false",
	})
	if out.Failure == nil || out.Failure.Code != report.ErrAuthRequired || out.Failure.Reason == "" || out.Halt != report.HaltAuthRequired {
		t.Fatalf("failure %+v halt %q", out.Failure, out.Halt)
	}
	if out.Status() != report.StatusAuthRequired {
		t.Errorf("status %q", out.Status())
	}
	if out.Iterations.Len() != 2 {
		t.Errorf("%d iterations recorded, want 2 (no check after a refused turn)", out.Iterations.Len())
	}
}

func TestLoopMissingResultFailsTheTurn(t *testing.T) {
	dir := workspace(t, nil)
	out := run(t, context.Background(), goal.Config{
		Sandbox: local(t, dir), Adapter: scripted{script: `echo TEXT working`}, Check: "false",
	})
	if out.Halt != report.HaltAgentError || out.Failure == nil || out.Failure.Cause != "no_result_event" {
		t.Errorf("halt %q failure %+v, want agent_error with cause no_result_event", out.Halt, out.Failure)
	}
}

// notStarting is a sandbox whose agent steps cannot start.
type notStarting struct{ sandbox.Sandbox }

func (n notStarting) Exec(ctx context.Context, cmd sandbox.Cmd) (sandbox.Result, error) {
	if cmd.Role == sandbox.RoleAgent {
		return sandbox.Result{}, fmt.Errorf("exec: %w", sandbox.ErrNotStarted)
	}
	return n.Sandbox.Exec(ctx, cmd)
}

// broken is a sandbox whose agent steps fail in the machinery.
type broken struct{ sandbox.Sandbox }

func (b broken) Exec(ctx context.Context, cmd sandbox.Cmd) (sandbox.Result, error) {
	if cmd.Role == sandbox.RoleAgent {
		return sandbox.Result{}, errors.New("engine connection reset")
	}
	return b.Sandbox.Exec(ctx, cmd)
}

// oomKilling is a sandbox that reports every agent step as killed for its
// memory limit, as the Docker sandbox does from the Engine's oom event.
type oomKilling struct{ sandbox.Sandbox }

func (o oomKilling) Exec(ctx context.Context, cmd sandbox.Cmd) (sandbox.Result, error) {
	res, err := o.Sandbox.Exec(ctx, cmd)
	if cmd.Role == sandbox.RoleAgent && err == nil {
		res.ExitCode, res.OOMKilled = 137, true
	}
	return res, err
}

func TestLoopAgentOOMKilled(t *testing.T) {
	dir := workspace(t, nil)
	out := run(t, context.Background(), goal.Config{
		Sandbox: oomKilling{local(t, dir)}, Adapter: agent.Command{}, AgentBin: "true", Check: "false",
	})
	f := out.Failure
	if out.Halt != report.HaltAgentError || f == nil || f.Cause != goal.CauseOOM || f.Detail["oom_killed"] != true || !strings.Contains(f.Message, "memory limit") {
		t.Errorf("halt %q failure %+v, want agent_error with cause %s and oom_killed", out.Halt, f, goal.CauseOOM)
	}
}

func TestLoopSandboxFailures(t *testing.T) {
	cases := []struct {
		name string
		wrap func(sandbox.Sandbox) sandbox.Sandbox
		code string
	}{
		{"agent cannot start", func(s sandbox.Sandbox) sandbox.Sandbox { return notStarting{s} }, report.ErrAgentNotFound},
		{"sandbox machinery fails", func(s sandbox.Sandbox) sandbox.Sandbox { return broken{s} }, report.ErrSandboxFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := run(t, context.Background(), goal.Config{
				Sandbox: tc.wrap(local(t, t.TempDir())), Adapter: agent.Command{}, AgentBin: "true", Check: "false",
			})
			if out.Failure == nil || out.Failure.Code != tc.code || out.Passed {
				t.Errorf("failure %+v passed %v, want %s", out.Failure, out.Passed, tc.code)
			}
			if want := map[string]int{report.ErrAgentNotFound: 0, report.ErrSandboxFailed: 1}[tc.code]; out.AgentTurns != want {
				t.Errorf("agent turns %d, want %d", out.AgentTurns, want)
			}
		})
	}
}

// fakeJudge says met from turn metAt on.
type fakeJudge struct {
	metAt int
	calls []goal.JudgeInput
}

func (j *fakeJudge) Judge(_ context.Context, _ sandbox.Sandbox, in goal.JudgeInput) (goal.JudgeVerdict, error) {
	j.calls = append(j.calls, in)
	met := in.Iteration >= j.metAt
	return goal.JudgeVerdict{Met: met, Reason: fmt.Sprintf("turn %d", in.Iteration), By: "command", Usage: agent.Usage{InputTokens: 1}}, nil
}

func TestLoopJudgeOnly(t *testing.T) {
	j := &fakeJudge{metAt: 2}
	out := run(t, context.Background(), goal.Config{
		Sandbox: local(t, t.TempDir()), Adapter: agent.Command{}, AgentBin: "echo working",
		InferUntil: "the README explains the flags", Judge: j,
	})
	if !out.Passed || out.Grounded || out.AgentTurns != 2 {
		t.Errorf("passed %v grounded %v turns %d, want true false 2", out.Passed, out.Grounded, out.AgentTurns)
	}
	if out.Judge == nil || !out.Judge.Met || out.Judge.Reason != "turn 2" {
		t.Errorf("judge %+v", out.Judge)
	}
	if out.Usage.InputTokens != 2 {
		t.Errorf("judge usage not counted: %+v", out.Usage)
	}
	if len(j.calls) != 2 || j.calls[0].Check != nil || j.calls[1].AgentSummary != "working" {
		t.Errorf("judge inputs %+v", j.calls)
	}
	if out.Iterations.Len() != 2 { // no check: no iteration 0
		t.Errorf("%d iterations, want 2", out.Iterations.Len())
	}
}

func TestLoopCheckDecidesOverTheJudge(t *testing.T) {
	j := &fakeJudge{metAt: 1} // the judge says met at once; the check disagrees
	out := run(t, context.Background(), goal.Config{
		Sandbox: local(t, t.TempDir()), Adapter: agent.Command{}, AgentBin: "echo done", MaxIterations: 1,
		Check: "false", InferUntil: "the README explains the flags", Judge: j,
	})
	if out.Passed || out.Halt != report.HaltMaxIterations || out.Judge == nil || !out.Judge.Met {
		t.Errorf("passed %v halt %q judge %+v", out.Passed, out.Halt, out.Judge)
	}
	if j.calls[0].Check == nil || j.calls[0].Check.ExitCode != 1 {
		t.Errorf("the judge did not see the check: %+v", j.calls[0])
	}
	if j.calls[0].Goal != "the README explains the flags" {
		t.Errorf("the judge was asked about %q, want the --infer-until text", j.calls[0].Goal)
	}
}

// fakeTracker fingerprints the workspace by a state file; it fails when
// the file is missing.
type fakeTracker struct {
	dir       string
	baselines int
	after     []int
}

func (f *fakeTracker) Baseline(context.Context) error { f.baselines++; return nil }
func (f *fakeTracker) AfterTurn(_ context.Context, i int) (string, error) {
	f.after = append(f.after, i)
	b, err := os.ReadFile(filepath.Join(f.dir, "state"))
	return string(b), err
}
func (f *fakeTracker) Changes(context.Context) *report.Changes {
	return &report.Changes{FilesChanged: 1, RiskyPaths: []string{}}
}

// fakeHalter halts no_progress when the state repeats, budget above a cost.
type fakeHalter struct {
	maxCost float64
	last    string
	facts   []goal.TurnFacts
}

func (h *fakeHalter) AfterTurn(f goal.TurnFacts) (string, string) {
	h.facts = append(h.facts, f)
	defer func() { h.last = f.State }()
	if len(h.facts) > 1 && f.State == h.last {
		return report.HaltNoProgress, "same failure, same workspace"
	}
	return "", ""
}
func (h *fakeHalter) Budget(u report.Usage) (string, string) {
	if h.maxCost > 0 && u.CostUSD > h.maxCost {
		return report.HaltBudget, fmt.Sprintf("cost %.2f > %.2f", u.CostUSD, h.maxCost)
	}
	return "", ""
}

func TestLoopSeams(t *testing.T) {
	t.Run("tracker and no-progress halt", func(t *testing.T) {
		dir := workspace(t, map[string]string{"state": "same"})
		tr := &fakeTracker{dir: dir}
		h := &fakeHalter{}
		ev := &recorder{}
		out := run(t, context.Background(), goal.Config{
			Sandbox: local(t, dir), Adapter: agent.Command{}, AgentBin: "echo no change", Check: "exit 1",
			Tracker: tr, Halter: h, Events: ev,
		})
		if evals := ev.ofType(report.EventGoalEvaluated); evals[len(evals)-1].Data["halt_reason"] != "same failure, same workspace" {
			t.Errorf("the no_progress reason is not in the events: %+v", evals[len(evals)-1])
		}
		// The Halter first sees the first check and the untouched workspace
		// (iteration 0), so the fake's "same as before" fires after turn 1.
		if out.Halt != report.HaltNoProgress || out.AgentTurns != 1 {
			t.Errorf("halt %q turns %d, want no_progress after 1", out.Halt, out.AgentTurns)
		}
		if tr.baselines != 1 || !reflect.DeepEqual(tr.after, []int{0, 1}) || out.Changes == nil {
			t.Errorf("tracker baselines %d after %v changes %+v", tr.baselines, tr.after, out.Changes)
		}
		if len(h.facts) != 2 || h.facts[0].Iteration != 0 || h.facts[0].CheckExit != 1 || !h.facts[0].CheckRan || h.facts[0].State != "same" || h.facts[1].Iteration != 1 {
			t.Errorf("halter facts %+v", h.facts)
		}
	})
	t.Run("a tracker error is an unknown state, never unchanged", func(t *testing.T) {
		dir := workspace(t, nil) // no state file: every AfterTurn fails
		h := &fakeHalter{}
		run(t, context.Background(), goal.Config{
			Sandbox: local(t, dir), Adapter: agent.Command{}, AgentBin: "true", Check: "exit 1", MaxIterations: 2,
			Tracker: &fakeTracker{dir: dir}, Halter: h,
		})
		for _, f := range h.facts {
			if f.State != "" {
				t.Errorf("iteration %d state %q, want unknown", f.Iteration, f.State)
			}
		}
	})
	t.Run("budget halt stops the turn mid-way", func(t *testing.T) {
		dir := workspace(t, nil)
		h := &fakeHalter{maxCost: 1}
		out := run(t, context.Background(), goal.Config{
			Sandbox: local(t, dir), Adapter: scripted{script: `echo USAGE 10 10 2.5; sleep 60; touch finished; echo RESULT`},
			Check: "false", Halter: h,
		})
		if out.Halt != report.HaltBudget || exists(dir, "finished") {
			t.Errorf("halt %q (reason %q), finished=%v; want budget and a stopped turn", out.Halt, out.HaltReason, exists(dir, "finished"))
		}
		if out.Usage.CostUSD != 2.5 {
			t.Errorf("usage %+v", out.Usage)
		}
	})
	t.Run("tracker not consulted when the check already passes", func(t *testing.T) {
		tr := &fakeTracker{dir: t.TempDir()}
		out := run(t, context.Background(), goal.Config{
			Sandbox: local(t, tr.dir), Adapter: agent.Command{}, AgentBin: "true", Check: "true", Tracker: tr,
		})
		if !out.Passed || tr.baselines != 0 || out.Changes != nil {
			t.Errorf("passed %v baselines %d changes %+v", out.Passed, tr.baselines, out.Changes)
		}
	})
}

func TestLoopCumulativeUsage(t *testing.T) {
	// A Codex-like agent reports the thread's running total each turn.
	script := `echo SESSION thread-1; if [ "$TURN" = 1 ]; then echo USAGE 100 10 0 cum; else echo USAGE 250 30 0 cum; touch fixed; fi; echo RESULT`
	out := run(t, context.Background(), goal.Config{
		Sandbox: local(t, t.TempDir()), Adapter: scripted{script: script}, Check: "test -e fixed",
	})
	if out.Usage.InputTokens != 250 || out.Usage.OutputTokens != 30 {
		t.Errorf("usage %+v, want the thread's latest total 250/30, not a sum", out.Usage)
	}
}

func TestPrompt(t *testing.T) {
	long := strings.Repeat("x", 10000) + "LAST LINE"
	cases := []struct {
		name    string
		task    string
		last    *goal.CheckRun
		want    []string
		wantNot []string
	}{
		{"first turn without a check", "", nil, []string{"Meet this goal: docs are clear"}, []string{"check `"}},
		{"failing check", "Fix it.", &goal.CheckRun{Command: "go test ./...", ExitCode: 1, Tail: "--- FAIL: TestSum\n", TailBytes: 18},
			[]string{"Fix it.", "The check `go test ./...` failed with exit code 1.", "--- FAIL: TestSum"}, nil},
		{"no task", "", &goal.CheckRun{Command: "make", ExitCode: 2, Tail: "boom", TailBytes: 4},
			[]string{"Make the check pass.", "exit code 2", "boom\n"}, nil},
		{"timed out", "t", &goal.CheckRun{Command: "make", TimedOut: true, ExitCode: 143}, []string{"`make` timed out."}, []string{"exit code"}},
		{"long output keeps its end with a marker", "t", &goal.CheckRun{Command: "c", ExitCode: 1, Tail: long, TailBytes: 50000},
			[]string{"LAST LINE", "of 50000 bytes shown"}, nil},
		{"long output: the failing tests' lines first", "t", &goal.CheckRun{Command: "go test ./...", ExitCode: 1, Tail: long, TailBytes: 50000,
			Failures: "--- FAIL: TestEarly (0.00s)\n    early_test.go:3: got 1, want 2"},
			[]string{"The failing tests' own lines, from anywhere in its output:\n\n--- FAIL: TestEarly (0.00s)\n    early_test.go:3: got 1, want 2\n\nThe end of its output:"}, nil},
		{"whole output: no second copy of the failing lines", "t", &goal.CheckRun{Command: "go test ./...", ExitCode: 1, Tail: "--- FAIL: TestA (0.00s)\nFAIL\n", TailBytes: 29,
			Failures: "--- FAIL: TestA (0.00s)"},
			[]string{"--- FAIL: TestA"}, []string{"failing tests' own lines"}},
		{"environment failure", "t", &goal.CheckRun{Command: "go test ./...", ExitCode: 1, Tail: "x", TailBytes: 1,
			Environment: &goal.EnvFailure{Ecosystem: "go", Cause: goal.EnvMissingDependency, Missing: "github.com/x/y"}},
			[]string{"This failure is the environment's, not a test's: the Go dependency github.com/x/y is not among the dependencies prepared for the check."}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := goal.Prompt(tc.task, "docs are clear", tc.last)
			for _, w := range tc.want {
				if !strings.Contains(p, w) {
					t.Errorf("prompt lacks %q:\n%s", w, p)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(p, w) {
					t.Errorf("prompt has %q:\n%s", w, p)
				}
			}
			if len(p) > 4096+goal.PromptFailuresBytes+2*report.MarkerMaxBytes+600 {
				t.Errorf("prompt is %d bytes", len(p))
			}
		})
	}
}

func TestLoopStopEventKillsTheTurnAtOnce(t *testing.T) {
	dir := workspace(t, nil)
	out := run(t, context.Background(), goal.Config{
		Sandbox: local(t, dir), Adapter: scripted{script: `echo STOP; sleep 60; touch finished`}, Check: "false",
		ResultGrace: time.Hour, // Stop must not wait for any grace
	})
	if out.Failure == nil || out.Failure.Code != report.ErrAuthRequired || out.Failure.Reason != agent.AuthExpired {
		t.Fatalf("failure %+v, want AuthRequired with the parser's reason", out.Failure)
	}
	if exists(dir, "finished") {
		t.Errorf("the agent ran on after Stop")
	}
}

func TestLoopReadsStderrThroughParsersThatWantIt(t *testing.T) {
	dir := workspace(t, nil)
	ev := &recorder{}
	out := run(t, context.Background(), goal.Config{
		Sandbox: local(t, dir), Adapter: scripted{script: `echo "TEXT on stderr" >&2; echo "CALL e1 Bash ls" >&2; echo "OK e1" >&2; echo RESULT; touch fixed`},
		Check: "test -e fixed", Events: ev,
	})
	if !out.Passed {
		t.Fatalf("not passed: %+v", out.Failure)
	}
	if tx := ev.ofType(report.EventText); len(tx) != 1 || tx[0].Message != "on stderr" {
		t.Errorf("text events %+v", tx)
	}
	if out.Receipts.Total() != 1 {
		t.Errorf("receipts %d, want the one call made on stderr", out.Receipts.Total())
	}
}

// BenchmarkLoopIteration measures one loop iteration on the local sandbox —
// an agent turn (the command agent, `true`) and a check (`false`) — i.e.
// the loop's own overhead on top of two process starts.
func BenchmarkLoopIteration(b *testing.B) {
	sb, err := sandbox.StartLocal(context.Background(), sandbox.Config{Workspace: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close(context.Background())
	const perRun = 20
	b.ResetTimer()
	for b.Loop() {
		out, err := goal.Run(context.Background(), goal.Config{
			Sandbox: sb, Adapter: agent.Command{}, AgentBin: "true", Check: "false", MaxIterations: perRun,
		})
		if err != nil || out.AgentTurns != perRun {
			b.Fatalf("run: %v, %d turns", err, out.AgentTurns)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perRun), "ns/iteration")
}

// TestFailedCommandTurnKeepsTheEndOfItsOutput: a command agent that exits
// non-zero has the end of its stderr and stdout in the failure's message and
// fields (capped at report.TailCap, the end kept), so the advice to read
// them is true; a silent one keeps the advice about the events.
func TestFailedCommandTurnKeepsTheEndOfItsOutput(t *testing.T) {
	long := strings.Repeat("x", 3*report.TailCap)
	cases := []struct {
		name       string
		agentCmd   string
		wantMsg    []string
		wantFields map[string]string // field → substring
		noFields   []string
		wantAdvice string
	}{
		{"stderr and stdout", "echo oops-stderr >&2; echo oops-stdout; exit 2",
			[]string{"exited with status 2", "its stderr ends with: oops-stderr", "its stdout ends with: oops-stdout"},
			map[string]string{"stderr_tail": "oops-stderr", "stdout_tail": "oops-stdout"}, nil, "stderr_tail and stdout_tail"},
		{"stderr only", "echo only-err >&2; exit 1",
			[]string{"its stderr ends with: only-err"}, map[string]string{"stderr_tail": "only-err"}, []string{"stdout_tail"}, "stderr_tail"},
		{"stdout only", "echo only-out; exit 1",
			[]string{"its stdout ends with: only-out"}, map[string]string{"stdout_tail": "only-out"}, []string{"stderr_tail"}, "stdout_tail"},
		{"huge stderr keeps its end", "printf '" + long + "' >&2; echo THE-END >&2; exit 1",
			[]string{"THE-END", "truncated"}, map[string]string{"stderr_tail": "THE-END"}, nil, "stderr_tail"},
		{"silent", "exit 4", []string{"exited with status 4"}, nil, []string{"stderr_tail", "stdout_tail"}, "in the events"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := workspace(t, nil)
			out := run(t, context.Background(), goal.Config{
				Adapter: agent.Command{Bin: tc.agentCmd}, Sandbox: local(t, dir), Check: "exit 1",
				MaxIterations: 3, Events: &recorder{},
			})
			f := out.Failure
			if f == nil || f.Code != report.ErrAgentFailed {
				t.Fatalf("failure %+v, want AgentFailed", f)
			}
			for _, w := range tc.wantMsg {
				if !strings.Contains(f.Message, w) {
					t.Errorf("message %q does not contain %q", f.Message, w)
				}
			}
			for k, w := range tc.wantFields {
				v, _ := f.Detail[k].(string)
				if !strings.Contains(v, w) {
					t.Errorf("failure field %s = %q, want it to contain %q", k, v, w)
				}
				if len(v) > report.TailCap+report.MarkerMaxBytes {
					t.Errorf("failure field %s is %d bytes, above the cap %d plus the marker", k, len(v), report.TailCap)
				}
			}
			for _, k := range tc.noFields {
				if _, ok := f.Detail[k]; ok {
					t.Errorf("failure has %s = %q for an empty stream", k, f.Detail[k])
				}
			}
			if len(f.Suggestions) != 1 || !strings.Contains(f.Suggestions[0], tc.wantAdvice) {
				t.Errorf("suggestions %q, want one naming %q", f.Suggestions, tc.wantAdvice)
			}
		})
	}
}

// claudeLines is an adapter named claude (so the loop finds Claude's key
// variable) whose turn prints fixed Claude stream-json lines.
type claudeLines struct{ lines string }

func (c claudeLines) Name() string { return "claude" }
func (c claudeLines) Command(agent.Turn) agent.Invocation {
	return agent.Invocation{Args: []string{"sh", "-c", "cat <<'EOF'\n" + c.lines + "\nEOF\nexit 1"}}
}
func (c claudeLines) NewParser() agent.Parser { return agent.Claude{}.NewParser() }

// withPosture reports a fixed posture (egress denials) over a real sandbox.
type withPosture struct {
	sandbox.Sandbox
	p sandbox.Posture
}

func (w withPosture) Posture() sandbox.Posture { return w.p }

// TestModelAPIFailureClassification: a refusal from goalrun's own egress
// proxy ends the run as a network failure whose advice names --allow-host
// and the egress denials, never auth_required; real auth failures name the
// agent's key variable, and a missing key says the variable is not set.
func TestModelAPIFailureClassification(t *testing.T) {
	const initLine = `{"type":"system","subtype":"init","cwd":"/workspace","session_id":"s-1","model":"claude-x"}`
	result := func(status int, text string) string {
		return initLine + "\n" + fmt.Sprintf(`{"type":"result","subtype":"success","is_error":true,"api_error_status":%d,"session_id":"s-1","result":%q,"usage":{}}`, status, text)
	}
	posture := sandbox.Posture{Mode: "docker", Network: "egress", EgressAllowlist: []string{"api.anthropic.com:443"}, EgressDenied: 3,
		EgressDenials: []string{"api.anthropic.com:443 (DNS lookup failed: no such host)"}}
	cases := []struct {
		name       string
		lines      string
		wantCode   string
		wantCause  string
		wantReason string
		wantMsg    []string
		wantAdvice []string
		wantHalt   string
		gateway    string // --model-gateway
		wantHaltRe string // in the halt reason ("" = not checked)
	}{
		{"egress DNS refusal is a network failure", result(403, "API Error: 403 goalrun egress: refused api.anthropic.com:443: DNS lookup failed"),
			report.ErrAgentFailed, agent.CauseEgressRefused, "",
			[]string{"egress proxy refused or could not reach", "api.anthropic.com:443 (DNS lookup failed: no such host)"},
			[]string{"--allow-host", "sandbox.egress_denials", "DNS"}, report.HaltAgentError, "", ""},
		{"egress unreachable (502) is a network failure", result(502, "API Error: 502 goalrun egress: cannot reach api.anthropic.com:443: DNS lookup failed"),
			report.ErrAgentFailed, agent.CauseEgressRefused, "", []string{"cannot reach api.anthropic.com:443"},
			[]string{"--allow-host", "sandbox.egress_denials"}, report.HaltAgentError, "", ""},
		{"a real bad key names the variable", result(401, "Invalid API key · Please run /login"),
			report.ErrAuthRequired, "auth_required", agent.AuthInvalidKey, []string{"Invalid API key"},
			[]string{"valid API key in ANTHROPIC_API_KEY"}, report.HaltAuthRequired, "", "model API refused"},
		{"no key names the variable", result(0, "Not logged in · Please run /login"),
			report.ErrAuthRequired, "auth_required", agent.AuthMissingKey, []string{"Not logged in"},
			[]string{"Set ANTHROPIC_API_KEY"}, report.HaltAuthRequired, "", ""},
		{"a key refused through a model gateway names the gateway", result(401, "Invalid API key · Please run /login"),
			report.ErrAuthRequired, "auth_required", agent.AuthInvalidKey, []string{"Invalid API key"},
			[]string{"ANTHROPIC_API_KEY", "model gateway http://10.0.0.7:4000 (--model-gateway)", "credentials the gateway holds"}, report.HaltAuthRequired,
			"http://10.0.0.7:4000", "model gateway refused"},
		{"no key for a model gateway names the gateway", result(0, "Not logged in · Please run /login"),
			report.ErrAuthRequired, "auth_required", agent.AuthMissingKey, []string{"Not logged in"},
			[]string{"Set ANTHROPIC_API_KEY", "model gateway https://llm.corp.example/v1 (--model-gateway)"}, report.HaltAuthRequired,
			"https://llm.corp.example/v1", "model gateway (ANTHROPIC_API_KEY is not set)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := workspace(t, nil)
			out := run(t, context.Background(), goal.Config{
				Adapter: claudeLines{lines: tc.lines}, Sandbox: withPosture{local(t, dir), posture}, Check: "exit 1",
				MaxIterations: 3, Events: &recorder{}, ModelGateway: tc.gateway,
			})
			f := out.Failure
			if f == nil {
				t.Fatalf("no failure; halt %q", out.Halt)
			}
			if !strings.Contains(out.HaltReason, tc.wantHaltRe) {
				t.Errorf("halt reason %q does not say %q", out.HaltReason, tc.wantHaltRe)
			}
			if f.Code != tc.wantCode || f.Cause != tc.wantCause || f.Reason != tc.wantReason || out.Halt != tc.wantHalt {
				t.Errorf("code %q cause %q reason %q halt %q, want %q %q %q %q", f.Code, f.Cause, f.Reason, out.Halt, tc.wantCode, tc.wantCause, tc.wantReason, tc.wantHalt)
			}
			for _, w := range tc.wantMsg {
				if !strings.Contains(f.Message, w) {
					t.Errorf("message %q does not contain %q", f.Message, w)
				}
			}
			advice := strings.Join(f.Suggestions, " ")
			for _, w := range tc.wantAdvice {
				if !strings.Contains(advice, w) {
					t.Errorf("advice %q does not name %q", advice, w)
				}
			}
		})
	}
}

// TestMissingKeyEndsBeforeAnyTurn: with Config.MissingKey set, a failing
// first check ends the run auth_required (missing_key) naming the variable,
// and the agent never starts; a passing first check needs no key.
func TestMissingKeyEndsBeforeAnyTurn(t *testing.T) {
	cases := []struct {
		name       string
		check      string
		missingKey string
		wantPassed bool
		wantReason string
		wantTurns  int
	}{
		{"failing check, no key", "exit 1", "OPENAI_API_KEY", false, agent.AuthMissingKey, 0},
		{"passing check needs no key", "true", "OPENAI_API_KEY", true, "", 0},
		{"key present runs the agent", "test -e agent-ran", "", true, "", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := workspace(t, nil)
			ev := &recorder{}
			out := run(t, context.Background(), goal.Config{
				Adapter: agent.Command{Bin: "touch agent-ran"}, Sandbox: local(t, dir), Check: tc.check,
				MaxIterations: 2, Events: ev, MissingKey: tc.missingKey,
			})
			if out.Passed != tc.wantPassed || out.AgentTurns != tc.wantTurns || exists(dir, "agent-ran") != (tc.wantTurns > 0) {
				t.Errorf("passed %v turns %d agent ran %v, want %v %d", out.Passed, out.AgentTurns, exists(dir, "agent-ran"), tc.wantPassed, tc.wantTurns)
			}
			if n := len(ev.ofType(report.EventAgentStarted)); n != tc.wantTurns {
				t.Errorf("%d agent_started events, want %d", n, tc.wantTurns)
			}
			if tc.wantReason == "" {
				if out.Failure != nil {
					t.Errorf("failure %+v", out.Failure)
				}
				return
			}
			f := out.Failure
			if f == nil || f.Code != report.ErrAuthRequired || f.Reason != tc.wantReason || out.Halt != report.HaltAuthRequired {
				t.Fatalf("failure %+v halt %q, want AuthRequired %s", f, out.Halt, tc.wantReason)
			}
			if !strings.Contains(f.Message, tc.missingKey) || len(f.Suggestions) != 1 || !strings.Contains(f.Suggestions[0], "Set "+tc.missingKey) {
				t.Errorf("message %q suggestions %q do not name %s", f.Message, f.Suggestions, tc.missingKey)
			}
			if f.Detail["key_env"] != tc.missingKey {
				t.Errorf("failure fields %v, want key_env %s", f.Detail, tc.missingKey)
			}
		})
	}
}

// TestLoopAgentErrorReasonInPlainWords: a failed turn's halt reason says
// what happened in words, not the failure's cause code.
func TestLoopAgentErrorReasonInPlainWords(t *testing.T) {
	dir := workspace(t, nil)
	out := run(t, context.Background(), goal.Config{Sandbox: local(t, dir), Adapter: agent.Command{Bin: "echo giving up; exit 3"}, Check: "false", MaxIterations: 2})
	if out.Halt != report.HaltAgentError || out.HaltReason != "Agent turn 1 failed: the command exited 3." {
		t.Errorf("halt %q reason %q", out.Halt, out.HaltReason)
	}
}
