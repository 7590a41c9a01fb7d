package agent

// Live tests: the real Claude Code, Codex and Gemini CLI (GOALRUN_CLAUDE_BIN,
// GOALRUN_CODEX_BIN, GOALRUN_GEMINI_BIN, else PATH; skipped with the reason named unless
// GOALRUN_REQUIRE_AGENTS=1), driven by package scripted's model servers on
// loopback, run as agent steps of a real sandbox.Local.

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goalrun/goalrun/goal/agent/scripted"
	"github.com/goalrun/goalrun/sandbox"
)

// liveStepTimeout bounds one live agent turn: generous, because a loaded
// 2-core CI machine slows the CLIs down a lot (a Claude Code turn that takes
// 3 s on an idle machine was seen taking 70 s with the load average at 25).
// The 401 tests do not rely on it: they assert that the parser's Stop ended
// the turn, which the clock cannot fake.
const liveStepTimeout = 4 * time.Minute

// liveTurn is what one turn of a real CLI produced.
type liveTurn struct {
	res      TurnResult
	step     sandbox.Result
	events   []Event
	receipts []Tool
	stopped  bool // the parser asked for the process to be killed
	elapsed  time.Duration
	stderr   string
}

// runLiveTurn runs one agent turn the way the loop does (goal/loop.go):
// stdout and stderr through Streams, an event with Stop kills the step at
// once, the terminal event starts TerminalGrace before a kill, then End.
func runLiveTurn(t *testing.T, sb sandbox.Sandbox, a Adapter, turn Turn) liveTurn {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inv := a.Command(turn)
	p := a.NewParser()
	if m, ok := a.(interface{ NewTurnParser(Turn) Parser }); ok { // as the loop does
		p = m.NewTurnParser(turn)
	}
	var lt liveTurn
	var grace *time.Timer
	start0 := time.Now()
	emit := func(ev Event) { // called under Streams' mutex
		if testing.Verbose() {
			t.Logf("+%v %s", time.Since(start0).Round(time.Millisecond), ev.Kind)
		}
		lt.events = append(lt.events, ev)
		switch {
		case ev.Stop:
			lt.stopped = true
			cancel()
		case ev.Kind == KindResult && grace == nil:
			grace = time.AfterFunc(TerminalGrace, cancel)
		case ev.Kind == KindToolResult:
			lt.receipts = append(lt.receipts, *ev.Tool)
		}
	}
	st := NewStreams(p, emit)
	stderr := sandbox.NewTailWriter(st.Stderr, 16<<10)
	cmd := sandbox.Cmd{Role: sandbox.RoleAgent, Args: inv.Args, Env: inv.Env, Stdout: st.Stdout, Stderr: stderr, Timeout: liveStepTimeout}
	if inv.Stdin != "" {
		cmd.Stdin = strings.NewReader(inv.Stdin)
	}
	start := time.Now()
	step, err := sb.Exec(ctx, cmd)
	lt.elapsed = time.Since(start)
	if grace != nil {
		grace.Stop()
	}
	if err != nil {
		t.Fatalf("Exec %q: %v", inv.Args[0], err)
	}
	st.Close()
	lt.res = p.End(step.ExitCode, emit)
	lt.step = step
	lt.stderr = string(stderr.Output().Tail)
	t.Logf("turn %d: %s/%s in %v, exit %d, session %s, %d receipts; stderr: %.300s",
		turn.Iteration, lt.res.Status, lt.res.Cause, lt.elapsed.Round(time.Millisecond), step.ExitCode, lt.res.SessionID, len(lt.receipts), lt.stderr)
	return lt
}

// startLiveSandbox starts a Local sandbox on workspace ws with a temp HOME
// and the model API upstream up (Local hands the agent the URL and the key
// directly: there is no proxy locally).
func startLiveSandbox(t *testing.T, ws string, up sandbox.Upstream, files ...sandbox.AgentFile) *sandbox.Local {
	t.Helper()
	return startLiveSandboxEnv(t, ws, up, nil, files...)
}

// startLiveSandboxEnv is startLiveSandbox with more variables for agent
// steps.
func startLiveSandboxEnv(t *testing.T, ws string, up sandbox.Upstream, env map[string]string, files ...sandbox.AgentFile) *sandbox.Local {
	t.Helper()
	e := map[string]string{"HOME": t.TempDir(), "TMPDIR": t.TempDir()}
	for k, v := range env {
		e[k] = v
	}
	sb, err := sandbox.StartLocal(context.Background(), sandbox.Config{
		RunID:      "goalrun-test-agents",
		Workspace:  ws,
		Network:    sandbox.NetworkHost,
		Upstreams:  []sandbox.Upstream{up},
		Env:        e,
		AgentFiles: files,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close(context.Background()) })
	return sb
}

// workspace returns a temp workspace with symlinks resolved (the paths the
// agent sees).
func workspace(t *testing.T) string {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

// withURL returns up pointed at a scripted server.
func withURL(up sandbox.Upstream, url string) sandbox.Upstream {
	up.URL = url
	return up
}

func TestLiveClaudeEditsAndResumes(t *testing.T) {
	bin := findAgentBin(t, "claude", "GOALRUN_CLAUDE_BIN")
	ws := workspace(t)
	srv := scripted.NewAnthropic(scripted.Script{
		Pick: scripted.ByAssistantTurns,
		Replies: []scripted.Reply{
			// turn 1: write a file, then say so
			{Tools: []scripted.ToolCall{{Name: "Write", Input: map[string]any{"file_path": filepath.Join(ws, "hello.txt"), "content": "hello from claude\n"}}}},
			{Text: "Wrote hello.txt."},
			// turn 2 (resumed): run a command, then answer
			{Tools: []scripted.ToolCall{{Name: "Bash", Input: map[string]any{"command": "cat hello.txt >> log.txt", "description": "append"}}}},
			{Text: "Appended hello.txt to log.txt."},
		},
	})
	defer srv.Close()
	sb := startLiveSandbox(t, ws, withURL(AnthropicAPI.Upstream("live-key-claude"), srv.URL))

	a := Claude{}
	t1 := runLiveTurn(t, sb, a, Turn{Iteration: 1, Prompt: "Create hello.txt saying hello (first turn)", Bin: bin})
	if t1.res.Status != StatusSuccess || t1.res.SessionID == "" || t1.res.Summary != "Wrote hello.txt." {
		t.Fatalf("turn 1: %+v", t1.res)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "hello.txt")); err != nil || string(b) != "hello from claude\n" {
		t.Fatalf("hello.txt: %q, %v", b, err)
	}
	want := Tool{ID: t1.receipts[0].ID, Name: "Write", Brief: filepath.Join(ws, "hello.txt"), Paths: []string{"hello.txt"}, OK: true}
	if len(t1.receipts) != 1 || !toolEqual(t1.receipts[0], want) {
		t.Errorf("turn 1 receipts %+v, want [%+v]", t1.receipts, want)
	}
	if t1.res.Version == "" || t1.res.Turns < 2 || t1.res.Usage.InputTokens == 0 {
		t.Errorf("turn 1 result %+v", t1.res)
	}
	for _, r := range srv.ModelRequests() {
		if r.Key() != "live-key-claude" {
			t.Errorf("request %d carried key %q", r.N, r.Key())
		}
	}
	n1 := len(srv.ModelRequests())

	t2 := runLiveTurn(t, sb, a, Turn{Iteration: 2, Prompt: "Now append it to log.txt (second turn)", Bin: bin, SessionID: t1.res.SessionID})
	if t2.res.Status != StatusSuccess || t2.res.SessionID != t1.res.SessionID {
		t.Fatalf("turn 2: %+v (turn 1 session %s)", t2.res, t1.res.SessionID)
	}
	if len(t2.receipts) != 1 || t2.receipts[0].Name != "Bash" || !t2.receipts[0].OK || t2.receipts[0].Brief != "cat hello.txt >> log.txt" {
		t.Errorf("turn 2 receipts %+v", t2.receipts)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "log.txt")); err != nil || string(b) != "hello from claude\n" {
		t.Errorf("log.txt: %q, %v", b, err)
	}
	// The resumed session's first request carries turn 1's conversation.
	reqs := srv.ModelRequests()[n1:]
	if len(reqs) == 0 {
		t.Fatal("turn 2 made no model request")
	}
	first := reqs[0]
	if !first.Contains("first turn") || !first.Contains("second turn") || first.ToolResults < 1 || first.AssistantTurns < 2 {
		t.Errorf("turn 2's first request does not carry the earlier conversation: %d tool results, %d assistant turns, body %.400s",
			first.ToolResults, first.AssistantTurns, first.Body)
	}
}

func TestLiveClaude401EndsAsAuthRequired(t *testing.T) {
	bin := findAgentBin(t, "claude", "GOALRUN_CLAUDE_BIN")
	srv := scripted.NewAnthropic(scripted.Script{Replies: []scripted.Reply{{Status: 401}}})
	defer srv.Close()
	sb := startLiveSandbox(t, workspace(t), withURL(AnthropicAPI.Upstream("revoked-key"), srv.URL))
	lt := runLiveTurn(t, sb, Claude{}, Turn{Iteration: 1, Prompt: "fix the tests", Bin: bin})
	if lt.res.Status != StatusAuthRequired || lt.res.Cause != CauseAuthRequired || lt.res.AuthReason != AuthInvalidKey {
		t.Fatalf("result %+v", lt.res)
	}
	// Ended by the parser's Stop after AuthRetryLimit answers (Claude Code
	// alone retries a 401 for about two minutes, then exits without a
	// result): Stop is only ever emitted by the parser, and the server saw
	// no more requests than the limit allows.
	if !lt.stopped || lt.step.TimedOut {
		t.Errorf("stopped by the parser %v, timed out %v", lt.stopped, lt.step.TimedOut)
	}
	if n := len(srv.ModelRequests()); n < AuthRetryLimit || n > AuthRetryLimit+2 {
		t.Errorf("%d model requests before the stop, want about %d", n, AuthRetryLimit)
	}
	t.Logf("401 turn ended as %s after %v and %d requests", lt.res.Status, lt.elapsed.Round(time.Millisecond), len(srv.ModelRequests()))
}

func TestLiveCodexEditsAndResumes(t *testing.T) {
	bin := findAgentBin(t, "codex", "GOALRUN_CODEX_BIN")
	srv := scripted.NewOpenAI(scripted.Script{
		Pick: scripted.ByAssistantTurns,
		Replies: []scripted.Reply{
			{Tools: []scripted.ToolCall{{Name: "exec_command", Input: map[string]any{"cmd": "printf 'hello from codex\\n' > hello.txt"}}}, InputTokens: 20, OutputTokens: 10},
			{Text: "Wrote hello.txt."},
			{Tools: []scripted.ToolCall{{Name: "exec_command", Input: map[string]any{"cmd": "cat hello.txt >> log.txt"}}}},
			{Text: "Appended hello.txt to log.txt."},
		},
	})
	defer srv.Close()
	sb := startLiveSandbox(t, workspace(t), OpenAIAPI.Upstream("live-key-codex"))
	a := Codex{}
	t1 := runLiveTurn(t, sb, a, Turn{Iteration: 1, Prompt: "Create hello.txt (first turn)", Bin: bin, Model: "gpt-agenttest", BaseURL: srv.URL})
	if t1.res.Status != StatusSuccess || t1.res.SessionID == "" || t1.res.Summary != "Wrote hello.txt." {
		t.Fatalf("turn 1: %+v", t1.res)
	}
	if b, err := os.ReadFile(filepath.Join(sb.Root(), "hello.txt")); err != nil || string(b) != "hello from codex\n" {
		t.Fatalf("hello.txt: %q, %v", b, err)
	}
	if len(t1.receipts) != 1 || t1.receipts[0].Name != "command_execution" || !t1.receipts[0].OK || !strings.Contains(t1.receipts[0].Brief, "hello.txt") {
		t.Errorf("turn 1 receipts %+v", t1.receipts)
	}
	if !t1.res.Usage.Cumulative || t1.res.Usage.InputTokens == 0 || !t1.res.Usage.NoCost {
		t.Errorf("turn 1 usage %+v", t1.res.Usage)
	}
	if t1.res.Model != "gpt-agenttest" { // the stream names none: the model asked for
		t.Errorf("turn 1 model %q", t1.res.Model)
	}
	for _, r := range srv.ModelRequests() {
		if r.Key() != "live-key-codex" {
			t.Errorf("request %d carried key %q", r.N, r.Key())
		}
	}
	n1 := len(srv.ModelRequests())

	t2 := runLiveTurn(t, sb, a, Turn{Iteration: 2, Prompt: "Now append it to log.txt (second turn)", Bin: bin, Model: "gpt-agenttest", BaseURL: srv.URL, SessionID: t1.res.SessionID})
	if t2.res.Status != StatusSuccess || t2.res.SessionID != t1.res.SessionID {
		t.Fatalf("turn 2: %+v (turn 1 thread %s)", t2.res, t1.res.SessionID)
	}
	if len(t2.receipts) != 1 || t2.receipts[0].Name != "command_execution" || !t2.receipts[0].OK {
		t.Errorf("turn 2 receipts %+v", t2.receipts)
	}
	if b, err := os.ReadFile(filepath.Join(sb.Root(), "log.txt")); err != nil || string(b) != "hello from codex\n" {
		t.Errorf("log.txt: %q, %v", b, err)
	}
	if t2.res.Usage.InputTokens <= t1.res.Usage.InputTokens {
		t.Errorf("thread usage is not cumulative: turn 1 %+v, turn 2 %+v", t1.res.Usage, t2.res.Usage)
	}
	reqs := srv.ModelRequests()[n1:]
	if len(reqs) == 0 {
		t.Fatal("turn 2 made no model request")
	}
	if first := reqs[0]; !first.Contains("first turn") || !first.Contains("second turn") || first.ToolResults < 1 {
		t.Errorf("turn 2's first request does not carry the earlier conversation: %d tool results, body %.400s", first.ToolResults, first.Body)
	}
}

func TestLiveCodex401EndsAsAuthRequired(t *testing.T) {
	bin := findAgentBin(t, "codex", "GOALRUN_CODEX_BIN")
	srv := scripted.NewOpenAI(scripted.Script{Replies: []scripted.Reply{{Status: 401}}})
	defer srv.Close()
	sb := startLiveSandbox(t, workspace(t), OpenAIAPI.Upstream("revoked-key"))
	lt := runLiveTurn(t, sb, Codex{}, Turn{Iteration: 1, Prompt: "fix the tests", Bin: bin, Model: "gpt-agenttest", BaseURL: srv.URL})
	if lt.res.Status != StatusAuthRequired || lt.res.AuthReason != AuthInvalidKey {
		t.Fatalf("result %+v", lt.res)
	}
	// Codex gives up by itself after 5 reconnects; the parser stops it at
	// the second.
	if !lt.stopped || lt.step.TimedOut {
		t.Errorf("stopped by the parser %v, timed out %v", lt.stopped, lt.step.TimedOut)
	}
	if n := len(srv.ModelRequests()); n > AuthRetryLimit+2 {
		t.Errorf("%d model requests before the stop, want about %d", n, AuthRetryLimit)
	}
}

// toolEqual compares receipts ignoring nil-vs-empty Paths.
func toolEqual(a, b Tool) bool {
	return a.ID == b.ID && a.Name == b.Name && a.Brief == b.Brief && a.OK == b.OK && a.Via == b.Via && slices.Equal(a.Paths, b.Paths)
}

// TestLiveHugePromptOnStdin checks that a prompt too long for one argv
// entry (over MaxArgPrompt) reaches the model whole through the CLI's stdin.
func TestLiveHugePromptOnStdin(t *testing.T) {
	prompt := "Start of a long prompt. " + strings.Repeat("The check failed with this output line. ", (MaxArgPrompt+4096)/40) + "END-OF-PROMPT-MARKER"
	cases := []struct {
		name string
		env  string
		a    Adapter
		api  API
		srv  func(scripted.Script) *scripted.Server
	}{
		{"claude", "GOALRUN_CLAUDE_BIN", Claude{}, AnthropicAPI, scripted.NewAnthropic},
		{"codex", "GOALRUN_CODEX_BIN", Codex{}, OpenAIAPI, scripted.NewOpenAI},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bin := findAgentBin(t, c.name, c.env)
			srv := c.srv(scripted.Script{Replies: []scripted.Reply{{Text: "Read it all."}}})
			defer srv.Close()
			up := c.api.Upstream("live-key")
			turn := Turn{Iteration: 1, Prompt: prompt, Bin: bin, Model: "agenttest-model"}
			if c.api.BaseURLEnv != "" {
				up.URL = srv.URL
			} else {
				turn.BaseURL = srv.URL
			}
			if inv := c.a.Command(turn); inv.Stdin != prompt {
				t.Fatalf("the adapter did not move the %d-byte prompt to stdin", len(prompt))
			}
			sb := startLiveSandbox(t, workspace(t), up)
			lt := runLiveTurn(t, sb, c.a, turn)
			if lt.res.Status != StatusSuccess || lt.res.Summary != "Read it all." {
				t.Fatalf("result %+v", lt.res)
			}
			reqs := srv.ModelRequests()
			if len(reqs) == 0 || !reqs[0].Contains("Start of a long prompt.") || !reqs[0].Contains("END-OF-PROMPT-MARKER") {
				t.Errorf("the model did not get the whole prompt")
			}
		})
	}
}
