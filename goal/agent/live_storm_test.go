package agent

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goalrun/goalrun/goal/agent/scripted"
)

// TestLiveRetryStormsEndEarly: Claude Code and Codex against a model API
// that answers every request with 429, 500 or 529. Claude Code alone
// retries ten times over about three minutes; goalrun sees each retry
// (KindRetry, the loop's inference_retry events) and stops the turn at the
// ClaudeRetryStormLimit-th in a row. Codex reconnects on a 5xx and is
// stopped at the CodexRetryStormLimit-th; a 429 it does not retry at all
// and fails the turn at once, naming the status. The Gemini CLI's storms:
// TestLiveGeminiRetryStorm.
func TestLiveRetryStormsEndEarly(t *testing.T) {
	cases := []struct {
		agent  string
		status int
		limit  int // the retries that end the turn; 0: the CLI ends it alone
	}{
		{"claude", 429, ClaudeRetryStormLimit},
		{"claude", 500, ClaudeRetryStormLimit},
		{"claude", 529, ClaudeRetryStormLimit},
		{"codex", 500, CodexRetryStormLimit},
		{"codex", 503, CodexRetryStormLimit},
		{"codex", 429, 0},
	}
	for _, c := range cases {
		t.Run(c.agent+"/"+strconv.Itoa(c.status), func(t *testing.T) {
			t.Parallel()
			var lt liveTurn
			var srv *scripted.Server
			script := scripted.Script{Replies: []scripted.Reply{{Status: c.status}}}
			switch c.agent {
			case "claude":
				bin := findAgentBin(t, "claude", "GOALRUN_CLAUDE_BIN")
				srv = scripted.NewAnthropic(script)
				defer srv.Close()
				sb := startLiveSandbox(t, workspace(t), withURL(AnthropicAPI.Upstream("live-key"), srv.URL))
				lt = runLiveTurn(t, sb, Claude{}, Turn{Iteration: 1, Prompt: "fix the tests", Bin: bin})
			default:
				bin := findAgentBin(t, "codex", "GOALRUN_CODEX_BIN")
				srv = scripted.NewOpenAI(script)
				defer srv.Close()
				sb := startLiveSandbox(t, workspace(t), OpenAIAPI.Upstream("live-key"))
				lt = runLiveTurn(t, sb, Codex{}, Turn{Iteration: 1, Prompt: "fix the tests", Bin: bin, Model: "gpt-agenttest", BaseURL: srv.URL})
			}
			var retries []Retry
			for _, ev := range lt.events {
				if ev.Kind == KindRetry {
					retries = append(retries, *ev.Retry)
				}
			}
			t.Logf("HTTP %d: %s/%s after %v, %d retries, %d requests", c.status, lt.res.Status, lt.res.Cause, lt.elapsed.Round(time.Second), len(retries), len(srv.ModelRequests()))
			if lt.step.TimedOut {
				t.Fatalf("the turn ran into its timeout: %+v", lt.res)
			}
			if c.limit == 0 {
				if lt.res.Status != StatusFailed || lt.stopped || len(retries) != 0 || !strings.Contains(lt.res.Message, strconv.Itoa(c.status)) {
					t.Fatalf("result %+v, stopped %v, %d retries: want the CLI's own failure naming HTTP %d", lt.res, lt.stopped, len(retries), c.status)
				}
				return
			}
			if lt.res.Status != StatusFailed || lt.res.Cause != CauseRetryStorm || !lt.stopped {
				t.Fatalf("result %+v, stopped by the parser %v; stderr %s", lt.res, lt.stopped, lt.stderr)
			}
			if len(retries) != c.limit {
				t.Errorf("%d retry events, want the turn stopped at the %d-th", len(retries), c.limit)
			}
			if c.agent == "claude" { // Codex's reconnect notices name no status
				for _, r := range retries {
					if r.Status != c.status || r.Attempt < 1 {
						t.Errorf("retry %+v, want HTTP %d", r, c.status)
					}
				}
				if !strings.Contains(lt.res.Message, strconv.Itoa(c.status)) {
					t.Errorf("message %q does not name HTTP %d", lt.res.Message, c.status)
				}
			}
		})
	}
}
