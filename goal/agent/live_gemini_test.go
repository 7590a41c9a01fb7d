package agent

// Live tests of the real Gemini CLI (GOALRUN_GEMINI_BIN, else gemini on
// PATH; pinned by .ci/run) against package scripted's Gemini API, in the
// local sandbox, given its settings the way goalrun gives them
// (GeminiSettings through sandbox.Config.AgentFiles).

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goalrun/goalrun/goal/agent/scripted"
)

// geminiMainModel is the model of the scripted server's scripted (not
// utility) requests: the model the CLI's router chose.
func geminiMainModel(srv *scripted.Server) string {
	reqs := srv.ModelRequests()
	if len(reqs) == 0 {
		return ""
	}
	return reqs[len(reqs)-1].Model
}

func TestLiveGeminiEditsAndResumes(t *testing.T) {
	bin := findAgentBin(t, "gemini", "GOALRUN_GEMINI_BIN")
	ws := workspace(t)
	srv := scripted.NewGemini(scripted.Script{
		Pick: scripted.ByAssistantTurns,
		Replies: []scripted.Reply{
			// turn 1: write a file, then say so
			{Tools: []scripted.ToolCall{{Name: "write_file", Input: map[string]any{"file_path": filepath.Join(ws, "a.txt"), "content": "ok\n"}}}, InputTokens: 200, OutputTokens: 20},
			{Text: "Wrote a.txt.", InputTokens: 300, OutputTokens: 10},
			// turn 2 (resumed): a command that succeeds silently, one that
			// fails silently, one that fails after printing (the CLI then
			// shows only the output: unknown)
			{Tools: []scripted.ToolCall{
				{Name: "run_shell_command", Input: map[string]any{"command": "echo ok > b.txt", "description": "write b"}},
				{Name: "run_shell_command", Input: map[string]any{"command": "exit 3", "description": "fail"}},
				{Name: "run_shell_command", Input: map[string]any{"command": "echo partial; exit 4", "description": "print and fail"}},
			}},
			{Text: "Created b.txt; all tests pass now."},
		},
	})
	defer srv.Close()
	sb := startLiveSandbox(t, ws, withURL(GeminiAPI.Upstream("live-key-gemini"), srv.URL), GeminiSpec.Files...)

	a := Gemini{}
	t1 := runLiveTurn(t, sb, a, Turn{Iteration: 1, Prompt: "Create a.txt saying ok (first turn)", Bin: bin})
	if t1.res.Status != StatusSuccess || t1.res.SessionID == "" || t1.res.Summary != "Wrote a.txt." {
		t.Fatalf("turn 1: %+v; stderr %s", t1.res, t1.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "a.txt")); err != nil || string(b) != "ok\n" {
		t.Fatalf("a.txt: %q, %v", b, err)
	}
	if len(t1.receipts) != 1 || t1.receipts[0].Name != "write_file" || !t1.receipts[0].OK || strings.Join(t1.receipts[0].Paths, ",") != filepath.Join(ws, "a.txt") {
		t.Errorf("turn 1 receipts %+v", t1.receipts)
	}
	// The model that answered, from stats.models: never "auto" (what init
	// says); the scripted server saw the same model's requests.
	if main := geminiMainModel(srv); t1.res.Model == "" || t1.res.Model == "auto" || t1.res.Model != main {
		t.Errorf("turn 1 model %q, the scripted requests went to %q", t1.res.Model, main)
	}
	if !t1.res.Usage.NoCost || t1.res.Usage.InputTokens < 500 || t1.res.Usage.OutputTokens < 30 {
		t.Errorf("turn 1 usage %+v", t1.res.Usage)
	}
	for _, r := range srv.Requests() {
		if r.Header.Get("x-goog-api-key") != "live-key-gemini" {
			t.Errorf("request %d (%s) carried key %q", r.N, r.Path, r.Header.Get("x-goog-api-key"))
		}
	}
	n1 := len(srv.ModelRequests())

	t2 := runLiveTurn(t, sb, a, Turn{Iteration: 2, Prompt: "Now create b.txt (second turn)", Bin: bin, SessionID: t1.res.SessionID})
	if t2.res.Status != StatusSuccess || t2.res.SessionID != t1.res.SessionID {
		t.Fatalf("turn 2: %+v (turn 1 session %s); stderr %s", t2.res, t1.res.SessionID, t2.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "b.txt")); err != nil || string(b) != "ok\n" {
		t.Errorf("b.txt: %q, %v", b, err)
	}
	want := map[string]string{"echo ok > b.txt": "ok", "exit 3": "failed", "echo partial; exit 4": "unknown"}
	if len(t2.receipts) != len(want) {
		t.Errorf("turn 2 receipts %+v", t2.receipts)
	}
	for _, r := range t2.receipts {
		got := "failed"
		switch {
		case r.Unknown && !r.OK:
			got = "unknown"
		case r.OK && !r.Unknown:
			got = "ok"
		}
		if r.Name != "run_shell_command" || want[r.Brief] != got {
			t.Errorf("turn 2 receipt %q: %s, want %s (%+v)", r.Brief, got, want[r.Brief], r)
		}
	}
	reqs := srv.ModelRequests()[n1:]
	if len(reqs) == 0 {
		t.Fatal("turn 2 made no model request")
	}
	if first := reqs[0]; !first.Contains("first turn") || !first.Contains("second turn") || first.ToolResults < 1 || first.AssistantTurns < 2 {
		t.Errorf("turn 2's first request does not carry the earlier conversation: %d tool results, %d model turns", first.ToolResults, first.AssistantTurns)
	}
}

// TestLiveGeminiAuthFailures: the Gemini API says a key is bad with 401
// and with 400 "API key not valid"; both end the turn as auth_required at
// once (the CLI does not retry them).
func TestLiveGeminiAuthFailures(t *testing.T) {
	bin := findAgentBin(t, "gemini", "GOALRUN_GEMINI_BIN")
	for _, status := range []int{401, 400} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			t.Parallel()
			srv := scripted.NewGemini(scripted.Script{Replies: []scripted.Reply{{Status: status}}})
			defer srv.Close()
			sb := startLiveSandbox(t, workspace(t), withURL(GeminiAPI.Upstream("revoked-key"), srv.URL), GeminiSpec.Files...)
			lt := runLiveTurn(t, sb, Gemini{}, Turn{Iteration: 1, Prompt: "fix the tests", Bin: bin})
			if lt.res.Status != StatusAuthRequired || lt.res.Cause != CauseAuthRequired || lt.res.AuthReason != AuthInvalidKey {
				t.Fatalf("result %+v", lt.res)
			}
			if lt.step.TimedOut {
				t.Errorf("the turn ran into its timeout")
			}
		})
	}
}

// TestLiveGeminiRetryStorm: a model API answering 429 or 500 makes the CLI
// retry on stderr only, for about five minutes; goalrun sees each retry
// (KindRetry, the loop's inference_retry events) and stops the turn at the
// GeminiRetryStormLimit-th in a row.
func TestLiveGeminiRetryStorm(t *testing.T) {
	bin := findAgentBin(t, "gemini", "GOALRUN_GEMINI_BIN")
	for _, status := range []int{429, 500} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			t.Parallel()
			srv := scripted.NewGemini(scripted.Script{Replies: []scripted.Reply{{Status: status}}})
			defer srv.Close()
			sb := startLiveSandbox(t, workspace(t), withURL(GeminiAPI.Upstream("live-key"), srv.URL), GeminiSpec.Files...)
			lt := runLiveTurn(t, sb, Gemini{}, Turn{Iteration: 1, Prompt: "fix the tests", Bin: bin})
			if lt.res.Status != StatusFailed || lt.res.Cause != CauseRetryStorm {
				t.Fatalf("result %+v; stderr %s", lt.res, lt.stderr)
			}
			if !lt.stopped || lt.step.TimedOut {
				t.Errorf("stopped by the parser %v, timed out %v", lt.stopped, lt.step.TimedOut)
			}
			var retries []Retry
			for _, ev := range lt.events {
				if ev.Kind == KindRetry {
					retries = append(retries, *ev.Retry)
				}
			}
			if len(retries) < GeminiRetryStormLimit {
				t.Fatalf("%d retry events, want at least %d", len(retries), GeminiRetryStormLimit)
			}
			for _, r := range retries {
				if r.Status != status || r.Attempt < 1 || r.Message == "" {
					t.Errorf("retry %+v, want HTTP %d with the API's message", r, status)
				}
			}
			if !strings.Contains(lt.res.Message, strconv.Itoa(status)) {
				t.Errorf("message %q does not name HTTP %d", lt.res.Message, status)
			}
			t.Logf("HTTP %d storm stopped after %v and %d requests", status, lt.elapsed.Round(time.Second), len(srv.Requests()))
		})
	}
}
