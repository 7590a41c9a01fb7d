package agent

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/sandbox"
)

func TestCommands(t *testing.T) {
	long := strings.Repeat("x", MaxArgPrompt+1)
	cases := []struct {
		name  string
		agent string
		turn  Turn
		args  []string
		env   map[string]string
		stdin string
	}{
		{
			name: "claude first turn", agent: "claude",
			turn: Turn{Iteration: 1, Prompt: "-fix the tests"},
			args: []string{"claude", "-p", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions", "--", "-fix the tests"},
			env:  map[string]string{"IS_SANDBOX": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"},
		},
		{
			name: "claude resumes with model, max turns, base URL and extra args", agent: "claude",
			turn: Turn{Iteration: 2, Prompt: "go on", SessionID: "s-1", Bin: "/opt/claude", Model: "claude-opus-4-5", MaxTurns: 7,
				ExtraArgs: []string{"--append-system-prompt", "be brief"}, BaseURL: "http://127.0.0.1:3129"},
			args: []string{"/opt/claude", "-p", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions",
				"--model", "claude-opus-4-5", "--max-turns", "7", "--resume", "s-1", "--append-system-prompt", "be brief", "--", "go on"},
			env: map[string]string{"IS_SANDBOX": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
				"ANTHROPIC_BASE_URL": "http://127.0.0.1:3129"},
		},
		{
			name: "claude takes a huge prompt on stdin", agent: "claude",
			turn:  Turn{Prompt: long},
			args:  []string{"claude", "-p", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions"},
			env:   map[string]string{"IS_SANDBOX": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"},
			stdin: long,
		},
		{
			name: "codex first turn without a base URL uses its own provider", agent: "codex",
			turn: Turn{Prompt: "fix it", Model: "gpt-5-codex"},
			args: []string{"codex", "exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "-c", "analytics.enabled=false", "-c", "features.plugins=false", "-m", "gpt-5-codex", "--", "fix it"},
			env:  map[string]string{},
		},
		{
			name: "codex resumes through the goalrun provider", agent: "codex",
			turn: Turn{Prompt: "again", SessionID: "th-1", BaseURL: `http://127.0.0.1:3129/v1`, ExtraArgs: []string{"-c", "model_reasoning_effort=\"low\""}},
			args: []string{"codex", "exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "-c", "analytics.enabled=false", "-c", "features.plugins=false",
				"-c", `model_provider="goalrun"`, "-c", `model_providers.goalrun.name="goalrun"`,
				"-c", `model_providers.goalrun.base_url="http://127.0.0.1:3129/v1"`, "-c", `model_providers.goalrun.env_key="OPENAI_API_KEY"`,
				"-c", `model_providers.goalrun.wire_api="responses"`, "-c", "model_reasoning_effort=\"low\"",
				"resume", "th-1", "--", "again"},
			env: map[string]string{},
		},
		{
			name: "codex takes a huge prompt on stdin", agent: "codex",
			turn:  Turn{Prompt: long, SessionID: "th-1"},
			args:  []string{"codex", "exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "-c", "analytics.enabled=false", "-c", "features.plugins=false", "resume", "th-1", "-"},
			env:   map[string]string{},
			stdin: long,
		},
		{
			name: "gemini", agent: "gemini",
			turn: Turn{Prompt: "-x", SessionID: "g-1", Model: "gemini-2.5-pro", BaseURL: "http://127.0.0.1:3129"},
			args: []string{"gemini", "--output-format", "stream-json", "--yolo", "-m", "gemini-2.5-pro", "--resume", "g-1", "--prompt=-x"},
			env:  map[string]string{"GEMINI_CLI_TRUST_WORKSPACE": "true", "GEMINI_SANDBOX": "false", "GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:3129"},
		},
		{
			name: "car ignores the session", agent: "car",
			turn: Turn{Prompt: "make tests pass", SessionID: "ignored", Model: "anthropic/claude-haiku-4-5", MaxTurns: 20},
			args: []string{"car", "do", "--json", "--local", "--full-access", "--model", "anthropic/claude-haiku-4-5", "--max-turns", "20", "--", "make tests pass"},
			env:  map[string]string{},
		},
		{
			name: "deepcode", agent: "deepcode",
			turn: Turn{Prompt: "-fix", SessionID: "dc-1", Model: "deepseek-v4"},
			args: []string{"deepcode", "--exec", "--output-format", "json", "--model", "deepseek-v4", "--resume", "dc-1", "--prompt", "-fix"},
			env:  map[string]string{},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := New(c.agent)
			if err != nil {
				t.Fatal(err)
			}
			inv := a.Command(c.turn)
			if !reflect.DeepEqual(inv.Args, c.args) {
				t.Errorf("args\n got %q\nwant %q", inv.Args, c.args)
			}
			if !reflect.DeepEqual(inv.Env, c.env) {
				t.Errorf("env %v, want %v", inv.Env, c.env)
			}
			if inv.Stdin != c.stdin {
				t.Errorf("stdin has %d bytes, want %d", len(inv.Stdin), len(c.stdin))
			}
		})
	}
}

// TestReadOnlyArgs: which adapters can be made read-only for one call (the
// judge's), and that Claude Code's arguments deny every editing tool and
// Bash.
func TestReadOnlyArgs(t *testing.T) {
	type readOnly interface{ ReadOnlyArgs() []string }
	for _, tc := range []struct {
		agent string
		want  []string // nil: the adapter has no read-only arguments
	}{
		{"claude", []string{"--disallowedTools", "Edit,Write,MultiEdit,NotebookEdit,Bash"}},
		{"codex", nil},
		{"gemini", nil},
		{CommandName, nil},
	} {
		t.Run(tc.agent, func(t *testing.T) {
			a, err := New(tc.agent)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			if ro, ok := a.(readOnly); ok {
				got = ro.ReadOnlyArgs()
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ReadOnlyArgs = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCommandDoesNotShareSpecEnv(t *testing.T) {
	inv := Claude{}.Command(Turn{Prompt: "x", BaseURL: "http://a"})
	inv.Env["IS_SANDBOX"] = "0"
	if ClaudeSpec.Env["IS_SANDBOX"] != "1" || ClaudeSpec.Env["ANTHROPIC_BASE_URL"] != "" {
		t.Fatalf("Command handed out the spec's own map: %v", ClaudeSpec.Env)
	}
}

func TestRegistry(t *testing.T) {
	if got, want := Names(), []string{"claude", "codex", "gemini", "car", "deepcode", "command"}; !slices.Equal(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
	for _, n := range Names() {
		a, err := New(n)
		if err != nil {
			t.Fatalf("New(%q): %v", n, err)
		}
		if a.Name() != n {
			t.Errorf("New(%q).Name() = %q", n, a.Name())
		}
		s, err := SpecOf(n)
		if err != nil || s.Name != n {
			t.Errorf("SpecOf(%q) = %+v, %v", n, s, err)
		}
		if p := a.NewParser(); p == nil {
			t.Errorf("New(%q).NewParser() = nil", n)
		}
	}
	_, err := New("aider")
	if err == nil || !strings.Contains(err.Error(), `"aider"`) || !strings.Contains(err.Error(), "claude, codex, gemini, car, deepcode, command") {
		t.Errorf("New(aider) error = %v", err)
	}
	if _, err := SpecOf("aider"); err == nil {
		t.Errorf("SpecOf(aider) did not fail")
	}
	s, _ := SpecOf("claude")
	s.Env["X"] = "y"
	if _, ok := ClaudeSpec.Env["X"]; ok {
		t.Errorf("SpecOf handed out the spec's own Env map")
	}
}

func TestSpecs(t *testing.T) {
	cases := []struct {
		spec  Spec
		allow []string
		up    sandbox.Upstream
	}{
		{ClaudeSpec, []string{"api.anthropic.com:443"},
			sandbox.Upstream{URL: "https://api.anthropic.com", BaseURLEnv: "ANTHROPIC_BASE_URL", KeyEnv: "ANTHROPIC_API_KEY", Header: "x-api-key", Key: "k"}},
		{CodexSpec, []string{"api.openai.com:443"},
			sandbox.Upstream{URL: "https://api.openai.com/v1", KeyEnv: "OPENAI_API_KEY", Header: "Authorization", Prefix: "Bearer ", Key: "k"}},
		{GeminiSpec, []string{"generativelanguage.googleapis.com:443"},
			sandbox.Upstream{URL: "https://generativelanguage.googleapis.com", BaseURLEnv: "GOOGLE_GEMINI_BASE_URL", KeyEnv: "GEMINI_API_KEY", Header: "x-goog-api-key", Key: "k"}},
		{DeepCodeSpec, []string{"api.deepseek.com:443"},
			sandbox.Upstream{URL: "https://api.deepseek.com", BaseURLEnv: "DEEPSEEK_BASE_URL", KeyEnv: "DEEPSEEK_API_KEY", Header: "Authorization", Prefix: "Bearer ", Key: "k"}},
	}
	for _, c := range cases {
		t.Run(c.spec.Name, func(t *testing.T) {
			if got := c.spec.AllowHosts(); !slices.Equal(got, c.allow) {
				t.Errorf("AllowHosts() = %v, want %v", got, c.allow)
			}
			if got := c.spec.API.Upstream("k"); got != c.up {
				t.Errorf("Upstream = %+v, want %+v", got, c.up)
			}
		})
	}
	if h := (API{URL: "http://127.0.0.1:8080/v1"}).AllowHost(); h != "127.0.0.1:8080" {
		t.Errorf("AllowHost with a port = %q", h)
	}
	if h := (API{URL: "http://example.test"}).AllowHost(); h != "example.test:80" {
		t.Errorf("AllowHost for http = %q", h)
	}
	if h := (API{URL: "::bad"}).AllowHost(); h != "" {
		t.Errorf("AllowHost for a bad URL = %q", h)
	}
	if s, _ := SpecOf("command"); s.AllowHosts() != nil {
		t.Errorf("the command agent has an allowlist: %v", s.AllowHosts())
	}
}

func TestBrief(t *testing.T) {
	cases := []struct{ name, input, want string }{
		{"command first", `{"description":"run","command":"go test ./..."}`, "go test ./..."},
		{"order, not position", `{"content":"body","path":"a.go","name":"n"}`, "a.go"},
		{"empty strings are skipped", `{"command":"","cmd":"ls -la"}`, "ls -la"},
		{"non-strings are skipped", `{"command":["sh","-c"],"path":"p"}`, "p"},
		{"newlines fold to spaces", `{"command":"set -e\n  go vet ./...\n\tgo test ./...\n"}`, "set -e go vet ./... go test ./..."},
		{"never the whole object", `{"edits":[{"old":"a"}],"replace_all":true}`, ""},
		{"not an object", `"just a string"`, ""},
		{"escapes decoded", `{"pattern":"func \u0041\\(\"x\"\\)"}`, `func A\("x"\)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := briefFrom([]byte(c.input)); got != c.want {
				t.Errorf("briefFrom(%s) = %q, want %q", c.input, got, c.want)
			}
		})
	}
	huge := `{"content":"` + strings.Repeat("é", 3*BriefMax) + `"}`
	got := briefFrom([]byte(huge))
	if len(got) > BriefMax || len(got) < BriefMax-2 || !strings.HasPrefix(got, "éé") {
		t.Errorf("a huge brief is %d bytes", len(got))
	}
	hugeEsc := `{"content":"` + strings.Repeat(`\n`, 5*BriefMax) + `x"}`
	if got := briefFrom([]byte(hugeEsc)); got != "" {
		t.Errorf("a huge run of escaped newlines folds to %q", got)
	}
}

func TestUnwrapShell(t *testing.T) {
	cases := []struct{ in, want string }{
		{`/bin/bash -lc 'echo hi > out.txt && cat out.txt'`, `echo hi > out.txt && cat out.txt`},
		{`/bin/bash -lc "go test ./... | tail -n \"5\""`, `go test ./... | tail -n "5"`},
		{`bash -lc 'it'\''s'`, `it's`},
		{`/bin/bash -lc ls`, `ls`},
		{`/bin/bash -lc 'a' && rm -rf /`, `/bin/bash -lc 'a' && rm -rf /`},
		{`/bin/bash -lc 'unterminated`, `/bin/bash -lc 'unterminated`},
		{`go test ./...`, `go test ./...`},
		{`/bin/bash -lc $(whoami)`, `/bin/bash -lc $(whoami)`},
	}
	for _, c := range cases {
		if got := unwrapShell(c.in); got != c.want {
			t.Errorf("unwrapShell(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestAuthFailure(t *testing.T) {
	cases := []struct {
		msg    string
		auth   bool
		reason string
	}{
		{"unexpected status 401 Unauthorized: Incorrect API key provided", true, AuthInvalidKey},
		{"API Error: 403 forbidden", true, AuthInvalidKey},
		{"[API Error: API key not valid. Please pass a valid API key.]", true, AuthInvalidKey},
		{"Missing environment variable: `OPENAI_API_KEY`.", true, AuthMissingKey},
		{"OAuth token has expired", true, AuthExpired},
		{"HTTP status 401", true, AuthInvalidKey},
		{"processed 401 files", false, ""},
		{"overloaded", false, ""},
		{"", false, ""},
	}
	for _, c := range cases {
		reason, ok := authFailure(c.msg)
		if ok != c.auth || reason != c.reason {
			t.Errorf("authFailure(%q) = %q, %v; want %q, %v", c.msg, reason, ok, c.reason, c.auth)
		}
	}
}

func TestTomlString(t *testing.T) {
	if got := tomlString("a\"b\\c\nd"); got != `"a\"b\\c\u000ad"` {
		t.Errorf("tomlString = %s", got)
	}
}
