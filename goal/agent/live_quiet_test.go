package agent

import (
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/goalrun/goalrun/goal/agent/scripted"
	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/egress/egresstest"
)

// TestLiveAgentsCallOnlyTheModelAPI: each real CLI, run as goalrun runs it
// (its Spec's environment and settings, Codex with CodexQuiet), with a
// proxy that records every request as its HTTPS_PROXY and HTTP_PROXY, calls
// nothing but its model API during a turn with a shell command: no update
// check, telemetry, metrics or plugin sync, each of which is an egress
// denial in goalrun's Docker sandbox.
func TestLiveAgentsCallOnlyTheModelAPI(t *testing.T) {
	cases := []struct {
		name, env string
		server    func(scripted.Script) *scripted.Server
		up        sandbox.Upstream
		shell     scripted.ToolCall
		files     []sandbox.AgentFile
		adapter   Adapter
		viaTurn   bool // the base URL goes in Turn.BaseURL (Codex's provider)
	}{
		{name: "claude", env: "GOALRUN_CLAUDE_BIN", server: scripted.NewAnthropic, up: AnthropicAPI.Upstream("quiet-key"), adapter: Claude{},
			shell: scripted.ToolCall{Name: "Bash", Input: map[string]any{"command": "echo ok > done.txt", "description": "write"}}},
		{name: "codex", env: "GOALRUN_CODEX_BIN", server: scripted.NewOpenAI, up: OpenAIAPI.Upstream("quiet-key"), adapter: Codex{}, viaTurn: true,
			shell: scripted.ToolCall{Name: "exec_command", Input: map[string]any{"cmd": "echo ok > done.txt"}}},
		{name: "gemini", env: "GOALRUN_GEMINI_BIN", server: scripted.NewGemini, up: GeminiAPI.Upstream("quiet-key"), adapter: Gemini{}, files: GeminiSpec.Files,
			shell: scripted.ToolCall{Name: "run_shell_command", Input: map[string]any{"command": "echo ok > done.txt", "description": "write"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			bin := findAgentBin(t, c.name, c.env)
			srv := c.server(scripted.Script{Pick: scripted.ByToolResults, Replies: []scripted.Reply{{Tools: []scripted.ToolCall{c.shell}}, {Text: "Wrote done.txt."}}})
			defer srv.Close()
			rec, err := egresstest.NewCorporateProxy("", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer rec.Close()
			// A CLI that sends its model API requests through the proxy
			// (NO_PROXY aside) still reaches the scripted server.
			u, _ := url.Parse(srv.URL)
			rec.Route(u.Host, u.Host)
			env := map[string]string{"HTTPS_PROXY": rec.URL, "HTTP_PROXY": rec.URL, "https_proxy": rec.URL, "http_proxy": rec.URL}
			ws := workspace(t)
			up, turn := c.up, Turn{Iteration: 1, Prompt: "write done.txt", Bin: bin}
			if c.viaTurn {
				turn.BaseURL, turn.Model = srv.URL, "gpt-agenttest"
			} else {
				up = withURL(up, srv.URL)
			}
			sb := startLiveSandboxEnv(t, ws, up, env, c.files...)
			lt := runLiveTurn(t, sb, c.adapter, turn)
			if lt.res.Status != StatusSuccess {
				t.Fatalf("turn %+v; stderr %s", lt.res, lt.stderr)
			}
			if _, err := os.Stat(filepath.Join(ws, "done.txt")); err != nil {
				t.Errorf("the shell command did not run: %v", err)
			}
			for _, target := range rec.Targets() {
				if target != u.Host {
					t.Errorf("%s called %s besides its model API (%s)", c.name, target, u.Host)
				}
			}
		})
	}
}
