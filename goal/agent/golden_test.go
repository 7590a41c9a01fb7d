package agent

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/internal/goldentest"
)

// goldenCase is one recorded stream: a real transcript or a written fixture.
type goldenCase struct {
	name   string // golden file name (without .json)
	agent  string
	stdout string // path under testdata
	stderr string // path under testdata ("" = none)
	exit   int    // the exit code the process ended with (testdata README)
}

// goldenCases lists every transcript in testdata/transcripts (real CLI
// output; TestEveryTranscriptHasAGolden keeps this list complete) and every
// written fixture in testdata/fixtures.
var goldenCases = []goldenCase{
	{"claude-bash-tool-ok", "claude", "transcripts/claude-code-2.1.332/bash-tool-ok.jsonl", "", 0},
	{"claude-resume-same-session", "claude", "transcripts/claude-code-2.1.332/resume-same-session.jsonl", "", 0},
	{"claude-auth-401-retries-killed", "claude", "transcripts/claude-code-2.1.332/auth-401-retries-killed.jsonl", "", 124},
	{"claude-overloaded-529-retries-killed", "claude", "transcripts/claude-code-2.1.332/overloaded-529-retries-killed.jsonl", "", 124},
	{"codex-exec-command-ok", "codex", "transcripts/codex-0.171.0/exec-command-ok.jsonl", "", 0},
	{"codex-resume-same-thread", "codex", "transcripts/codex-0.171.0/resume-same-thread.jsonl", "", 0},
	{"codex-auth-401-turn-failed", "codex", "transcripts/codex-0.171.0/auth-401-turn-failed.jsonl", "", 1},
	{"gemini-write-file-then-claim", "gemini", "transcripts/gemini-cli-0.61.0/write-file-then-claim.jsonl", "", 0},
	{"gemini-resume-shell-ok", "gemini", "transcripts/gemini-cli-0.61.0/resume-shell-ok.jsonl", "", 0},
	{"gemini-shell-exit-1-status-success", "gemini", "transcripts/gemini-cli-0.61.0/shell-exit-1-status-success.jsonl", "", 0},
	{"gemini-replace-missing-file-error", "gemini", "transcripts/gemini-cli-0.61.0/replace-missing-file-error.jsonl", "", 0},
	{"gemini-auth-401", "gemini", "transcripts/gemini-cli-0.61.0/auth-401.jsonl", "", 144},
	{"gemini-http-400-key-not-valid", "gemini", "transcripts/gemini-cli-0.61.0/http-400-key-not-valid.jsonl", "", 144},
	{"gemini-http-429-retries", "gemini", "transcripts/gemini-cli-0.61.0/http-429-retries.jsonl", "transcripts/gemini-cli-0.61.0/http-429-retries.stderr.txt", 173},
	{"gemini-killed-mid-turn", "gemini", "transcripts/gemini-cli-0.61.0/killed-mid-turn.jsonl", "", 137},
	{"gemini-tool-ok", "gemini", "fixtures/gemini/tool-ok.jsonl", "", 0},
	{"gemini-error-before-success", "gemini", "fixtures/gemini/error-before-success.jsonl", "", 0},
	{"gemini-auth-invalid-key", "gemini", "fixtures/gemini/auth-invalid-key.jsonl", "", 1},
	{"gemini-killed-mid-tool", "gemini", "fixtures/gemini/killed-mid-tool.jsonl", "", 137},
	{"car-success", "car", "fixtures/car/success.stdout.json", "fixtures/car/success.stderr.jsonl", 0},
	{"car-error", "car", "fixtures/car/error.stdout.json", "fixtures/car/error.stderr.jsonl", 1},
	{"car-killed", "car", "fixtures/car/killed.stdout.json", "fixtures/car/killed.stderr.jsonl", 137},
	{"deepcode-tool-ok", "deepcode", "fixtures/deepcode/tool-ok.jsonl", "", 0},
	{"deepcode-max-turns", "deepcode", "fixtures/deepcode/max-turns.jsonl", "", 1},
}

// golden is what a golden file records about one stream.
type golden struct {
	Source   string `json:"source"`
	Agent    string `json:"agent"`
	ExitCode int    `json:"exit_code"`
	// StopAtLine is the stdout line (1-based) after which the parser asked
	// the runner to kill the process (Event.Stop); 0 = never.
	StopAtLine int `json:"stop_at_line"`
	// TerminalAtLine is the stdout line of the terminal event (KindResult);
	// 0 = none.
	TerminalAtLine int             `json:"terminal_at_line"`
	Receipts       []goldenReceipt `json:"receipts"`
	Events         []goldenEvent   `json:"events"`
	Result         TurnResult      `json:"result"`
}

type goldenReceipt struct {
	ID      string   `json:"id"`
	Tool    string   `json:"tool"`
	OK      bool     `json:"ok"`
	Unknown bool     `json:"unknown,omitempty"`
	Brief   string   `json:"brief"`
	Paths   []string `json:"paths,omitempty"`
	Via     string   `json:"via,omitempty"`
}

type goldenEvent struct {
	Kind      Kind   `json:"kind"`
	SessionID string `json:"session_id,omitempty"`
	Model     string `json:"model,omitempty"`
	Text      string `json:"text,omitempty"`
	Tool      *Tool  `json:"tool,omitempty"`
	Usage     *Usage `json:"usage,omitempty"`
	Retry     *Retry `json:"retry,omitempty"`
	Error     *Error `json:"error,omitempty"`
	Stop      bool   `json:"stop,omitempty"`
}

func readTestdata(t *testing.T, rel string) []byte {
	t.Helper()
	if rel == "" {
		return nil
	}
	b, err := os.ReadFile(filepath.Join("testdata", filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// replay feeds a recorded stream to a fresh parser the way a step does:
// stderr lines first (car writes its events while it works and its stdout
// document at the end), then stdout one line per Write, then End.
func replay(t *testing.T, c goldenCase) golden {
	t.Helper()
	a, err := New(c.agent)
	if err != nil {
		t.Fatal(err)
	}
	p := a.NewParser()
	g := golden{Source: c.stdout, Agent: c.agent, ExitCode: c.exit}
	line := 0
	emit := func(ev Event) {
		g.Events = append(g.Events, goldenEvent{Kind: ev.Kind, SessionID: ev.SessionID, Model: ev.Model, Text: ev.Text,
			Tool: ev.Tool, Usage: ev.Usage, Retry: ev.Retry, Error: ev.Error, Stop: ev.Stop})
		if ev.Stop && g.StopAtLine == 0 {
			g.StopAtLine = line
		}
		if ev.Kind == KindResult && g.TerminalAtLine == 0 {
			g.TerminalAtLine = line
		}
		if ev.Kind == KindToolResult {
			g.Receipts = append(g.Receipts, goldenReceipt{ID: ev.Tool.ID, Tool: ev.Tool.Name, OK: ev.Tool.OK, Unknown: ev.Tool.Unknown, Brief: ev.Tool.Brief, Paths: ev.Tool.Paths, Via: ev.Tool.Via})
		}
	}
	s := NewStreams(p, emit)
	if c.stderr != "" {
		s.Stderr.Write(readTestdata(t, c.stderr))
		s.Stderr.Close()
	}
	for _, l := range bytes.SplitAfter(readTestdata(t, c.stdout), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		line++
		s.Stdout.Write(l)
	}
	s.Close()
	g.Result = p.End(c.exit, emit)
	return g
}

// TestTranscriptGoldens replays every real transcript and written fixture
// and compares what the parser makes of it — receipts, session id,
// usage/cost, events, how the turn ended and where the runner would have
// been told to stop — with testdata/golden/<name>.json.
func TestTranscriptGoldens(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			got := replay(t, c)
			b, err := json.MarshalIndent(got, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, '\n')
			goldentest.Check(t, filepath.Join("testdata", "golden", c.name+".json"), b)
		})
	}
}

// TestTranscriptFacts states, independently of the goldens, the facts issue
// 4 asks the transcripts to prove: exact receipts, session id, usage/cost
// and how each turn ended.
func TestTranscriptFacts(t *testing.T) {
	byName := map[string]golden{}
	for _, c := range goldenCases {
		byName[c.name] = replay(t, c)
	}
	type want struct {
		status, cause, reason, session, summary string
		receipts                                []goldenReceipt
		usage                                   Usage
		turns, stopAt                           int
	}
	cases := map[string]want{
		"claude-bash-tool-ok": {status: StatusSuccess, session: "91675b0c-ac00-42fd-9a67-0e10380d24be",
			summary:  "Done: wrote out.txt and verified it.",
			receipts: []goldenReceipt{{ID: "toolu_a1", Tool: "Bash", OK: true, Brief: "echo hi > out.txt && cat out.txt"}},
			usage:    Usage{InputTokens: 20, OutputTokens: 10, CostUSD: 0.00028000000000000003}, turns: 2},
		"claude-resume-same-session": {status: StatusSuccess, session: "9be58827-761e-4e4c-93f8-56921e870cbb",
			summary: "I fixed the bug in fix.txt. All tests pass now and I committed the change.",
			// this invocation's cost, not total_cost_usd (0.00056, the session's total)
			usage: Usage{InputTokens: 10, OutputTokens: 5, CostUSD: 0.00014000000000000001}, turns: 1},
		"claude-auth-401-retries-killed": {status: StatusAuthRequired, cause: CauseAuthRequired, reason: AuthInvalidKey,
			session: "0f213d57-9e57-4e1c-bbe2-8a01445e042c", stopAt: 3},
		// Claude Code retried a 529 nine times before it was killed; the
		// parser ends the turn at the ClaudeRetryStormLimit-th retry.
		"claude-overloaded-529-retries-killed": {status: StatusFailed, cause: CauseRetryStorm,
			session: "ce379b37-d002-4ec4-8957-a5141ac38bd4", stopAt: 9},
		"codex-exec-command-ok": {status: StatusSuccess, session: "01a2287f-9855-72d3-a37d-e5ea77f7025a", summary: "Done: wrote out.txt",
			receipts: []goldenReceipt{{ID: "item_1", Tool: "command_execution", OK: true, Brief: "echo hi > out.txt && cat out.txt"}},
			usage:    Usage{InputTokens: 20, OutputTokens: 10, Cumulative: true, NoCost: true}, turns: 1},
		"codex-resume-same-thread": {status: StatusSuccess, session: "01a2287f-9855-72d3-a37d-e5ea77f7025a", summary: "Done: wrote out.txt",
			usage: Usage{InputTokens: 30, OutputTokens: 15, Cumulative: true, NoCost: true}, turns: 1},
		"codex-auth-401-turn-failed": {status: StatusAuthRequired, cause: CauseAuthRequired, reason: AuthInvalidKey,
			session: "01a2287f-a46f-7701-9af9-0c0185a30163", turns: 1, stopAt: 5},
		"gemini-write-file-then-claim": {status: StatusSuccess, session: "6a2fc242-0ec6-4711-b94f-18f82da6cc18", summary: "Done. All tests pass now.",
			receipts: []goldenReceipt{{ID: "write_file__write_file_1796132303929_0", Tool: "write_file", OK: true, Brief: "/workspace/a.txt", Paths: []string{"/workspace/a.txt"}}},
			usage:    Usage{InputTokens: 3000, OutputTokens: 150, NoCost: true}, turns: 2},
		// The shell tool's "success" for a command that exited 1: the
		// output the CLI shows ("Command exited with code: 1") proves the
		// failure.
		"gemini-shell-exit-1-status-success": {status: StatusSuccess, session: "4783d360-5b98-481a-bd4c-3c16f014ee37", summary: "Created b.txt.",
			receipts: []goldenReceipt{{ID: "run_shell_command__run_shell_command_1796138221242_0", Tool: "run_shell_command", OK: false, Brief: "echo ok > b.txt; false"}},
			usage:    Usage{InputTokens: 20, OutputTokens: 10, NoCost: true}, turns: 2},
		"gemini-replace-missing-file-error": {status: StatusSuccess, session: "fb5e2332-bcbd-4bc4-a3d0-b8c5fb271e73", summary: "I edited missing.go; all tests pass now.",
			receipts: []goldenReceipt{{ID: "replace__replace_1796132695632_0", Tool: "replace", OK: false, Brief: "/workspace/missing.go", Paths: []string{"/workspace/missing.go"}}},
			usage:    Usage{InputTokens: 3000, OutputTokens: 150, NoCost: true}, turns: 2},
		"gemini-auth-401": {status: StatusAuthRequired, cause: CauseAuthRequired, reason: AuthInvalidKey,
			session: "9b376cd0-8141-488b-8c42-2209f2ca1bed", usage: Usage{NoCost: true}},
		"gemini-http-400-key-not-valid": {status: StatusAuthRequired, cause: CauseAuthRequired, reason: AuthInvalidKey,
			session: "f3e226af-d5ff-4770-95c7-2a1cc3f83209", usage: Usage{NoCost: true}},
		// Retries are on stderr only; the fifth in a row ends the turn
		// (replayed before stdout, so the stop comes before stdout line 1).
		"gemini-http-429-retries": {status: StatusFailed, cause: CauseRetryStorm,
			session: "5837b613-f6f6-41e0-a44a-0e24af7ec09d", usage: Usage{NoCost: true}},
		"gemini-killed-mid-turn": {status: StatusFailed, cause: CauseNoResultEvent, session: "0318ed43-10be-4a70-bb10-a974088e93e4"},
	}
	for name, w := range cases {
		t.Run(name, func(t *testing.T) {
			g, ok := byName[name]
			if !ok {
				t.Fatalf("no golden case %s", name)
			}
			r := g.Result
			if r.Status != w.status || r.Cause != w.cause || r.AuthReason != w.reason {
				t.Errorf("ended %s/%s/%s, want %s/%s/%s (%s)", r.Status, r.Cause, r.AuthReason, w.status, w.cause, w.reason, r.Message)
			}
			if r.SessionID != w.session {
				t.Errorf("session %q, want %q", r.SessionID, w.session)
			}
			if r.Summary != w.summary {
				t.Errorf("summary %q, want %q", r.Summary, w.summary)
			}
			if !reflect.DeepEqual(g.Receipts, w.receipts) {
				t.Errorf("receipts %+v, want %+v", g.Receipts, w.receipts)
			}
			if r.Usage != w.usage {
				t.Errorf("usage %+v, want %+v", r.Usage, w.usage)
			}
			if r.Turns != w.turns {
				t.Errorf("turns %d, want %d", r.Turns, w.turns)
			}
			if g.StopAtLine != w.stopAt {
				t.Errorf("stop asked after line %d, want %d", g.StopAtLine, w.stopAt)
			}
		})
	}
}

// TestEveryTranscriptHasAGolden keeps goldenCases complete: every file under
// testdata/transcripts and testdata/fixtures is replayed.
func TestEveryTranscriptHasAGolden(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range goldenCases {
		covered[c.stdout] = true
		covered[c.stderr] = true
	}
	for _, dir := range []string{"transcripts", "fixtures"} {
		err := filepath.WalkDir(filepath.Join("testdata", dir), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.HasSuffix(p, ".md") {
				return err
			}
			rel := filepath.ToSlash(strings.TrimPrefix(p, "testdata"+string(filepath.Separator)))
			if !covered[rel] {
				t.Errorf("%s has no golden case", rel)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestReplayChunkingInvariant feeds every stream to the LineWriter in random
// chunk sizes (lines split anywhere, several lines per write, \r\n endings)
// and checks the parser sees exactly what it sees line by line.
func TestReplayChunkingInvariant(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			want := replay(t, c)
			for round := 0; round < 20; round++ {
				a, _ := New(c.agent)
				p := a.NewParser()
				var got golden
				emit := func(ev Event) {
					if ev.Kind == KindToolResult {
						got.Receipts = append(got.Receipts, goldenReceipt{ID: ev.Tool.ID, Tool: ev.Tool.Name, OK: ev.Tool.OK, Brief: ev.Tool.Brief, Paths: ev.Tool.Paths, Via: ev.Tool.Via})
					}
				}
				s := NewStreams(p, emit)
				if c.stderr != "" {
					writeChunked(s.Stderr, readTestdata(t, c.stderr), rng, round%2 == 1)
				}
				writeChunked(s.Stdout, readTestdata(t, c.stdout), rng, round%2 == 1)
				s.Close()
				got.Result = p.End(c.exit, emit)
				if !reflect.DeepEqual(got.Receipts, want.Receipts) || !reflect.DeepEqual(got.Result, want.Result) {
					t.Fatalf("round %d: chunked replay differs:\n got %+v %+v\nwant %+v %+v", round, got.Receipts, got.Result, want.Receipts, want.Result)
				}
			}
		})
	}
}

func writeChunked(w *LineWriter, data []byte, rng *rand.Rand, crlf bool) {
	if crlf {
		data = bytes.ReplaceAll(data, []byte("\n"), []byte("\r\n"))
	}
	for len(data) > 0 {
		n := 1 + rng.IntN(min(len(data), 700))
		w.Write(data[:n])
		data = data[n:]
	}
}
