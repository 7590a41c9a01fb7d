package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/goal/agent"
	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/report/ghreport/githubtest"
	"github.com/goalrun/goalrun/report/reporttest"
)

// TestActionImageProblem: which configurations get the "pass image" startup
// error before any Engine is contacted, with a fake file system.
func TestActionImageProblem(t *testing.T) {
	onHost := func(files ...string) func(string) bool {
		return func(p string) bool {
			for _, f := range files {
				if p == f {
					return true
				}
			}
			return false
		}
	}
	claude := runConfig{settings: settings{agent: "claude", sandbox: "docker"}, spec: agent.ClaudeSpec}
	with := func(c runConfig, f func(*runConfig)) runConfig { f(&c); return c }
	cases := []struct {
		name     string
		cfg      runConfig
		path     string
		exists   func(string) bool
		wantCode string // "" = no problem
		wantIn   []string
	}{
		{name: "runner without the agent CLI (busybox is not needed)", cfg: claude, path: "/usr/local/bin", exists: onHost(),
			wantCode: report.ErrAgentNotFound,
			wantIn:   []string{`claude agent's executable "claude" on the runner's PATH`, "runner's own files"}},
		{name: "the minimal image without the agent CLI or busybox", cfg: with(claude, func(c *runConfig) { c.minimalImage = true }), path: "/usr/local/bin", exists: onHost(),
			wantCode: report.ErrAgentNotFound,
			wantIn:   []string{`claude agent's executable "claude" on the runner's PATH`, "or the static busybox /usr/bin/busybox"}},
		{name: "agent missing, busybox present", cfg: claude, path: "/usr/bin:/bin", exists: onHost("/usr/bin/busybox"),
			wantCode: report.ErrAgentNotFound, wantIn: []string{`"claude" on the runner's PATH`}},
		{name: "auto tries Docker first", cfg: with(claude, func(c *runConfig) { c.sandbox = "auto" }), path: "/bin", exists: onHost("/usr/bin/busybox"),
			wantCode: report.ErrAgentNotFound, wantIn: []string{`"claude"`}},
		{name: "agent found on a later PATH entry", cfg: claude, path: "/nope:/opt/claude/bin", exists: onHost("/opt/claude/bin/claude", "/usr/bin/busybox")},
		{name: "empty PATH entry is the current directory", cfg: claude, path: "/nope::", exists: onHost("claude", "/usr/bin/busybox")},
		{name: "agent-bin absolute and missing", cfg: with(claude, func(c *runConfig) { c.agent, c.spec, c.agentBin = "codex", agent.CodexSpec, "/opt/codex/codex" }),
			path: "/opt/codex", exists: onHost("/usr/bin/busybox", "/opt/codex/codex.js"),
			wantCode: report.ErrAgentNotFound, wantIn: []string{`codex agent's executable "/opt/codex/codex"`}},
		{name: "agent-bin absolute and present", cfg: with(claude, func(c *runConfig) { c.agentBin = "/opt/claude" }),
			path: "", exists: onHost("/opt/claude", "/usr/bin/busybox")},
		{name: "command agent without busybox", cfg: with(claude, func(c *runConfig) { c.agent, c.spec, c.agentBin = agent.CommandName, agent.Spec{}, "sh fix.sh" }),
			path: "/bin", exists: onHost()},
		{name: "command agent, minimal image, without busybox", cfg: with(claude, func(c *runConfig) {
			c.agent, c.spec, c.agentBin, c.minimalImage = agent.CommandName, agent.Spec{}, "sh fix.sh", true
		}),
			path: "/bin", exists: onHost(),
			wantCode: report.ErrBadInput, wantIn: []string{"cannot find the static busybox /usr/bin/busybox", "image"}},
		{name: "command agent with busybox", cfg: with(claude, func(c *runConfig) { c.agent, c.spec, c.agentBin = agent.CommandName, agent.Spec{}, "sh fix.sh" }),
			path: "/bin", exists: onHost("/usr/bin/busybox")},
		{name: "image given", cfg: with(claude, func(c *runConfig) { c.image = "goalrun-sandbox:ci" }), path: "", exists: onHost()},
		{name: "local sandbox", cfg: with(claude, func(c *runConfig) { c.sandbox = "local" }), path: "", exists: onHost()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			se := actionImageProblem(tc.cfg, tc.path, tc.exists)
			if tc.wantCode == "" {
				if se != nil {
					t.Fatalf("unexpected problem: %s: %s", se.code, se.message)
				}
				return
			}
			if se == nil {
				t.Fatalf("no problem reported, want %s", tc.wantCode)
			}
			if se.code != tc.wantCode {
				t.Errorf("code %s, want %s", se.code, tc.wantCode)
			}
			for _, w := range tc.wantIn {
				if !strings.Contains(se.message, w) {
					t.Errorf("message lacks %q:\n%s", w, se.message)
				}
			}
			want := "apt-get install busybox-static"
			if tc.wantCode == report.ErrAgentNotFound {
				want = cmp.Or(agentInstall[tc.cfg.agent], "install the")
			}
			if len(se.suggestions) == 0 || !strings.Contains(se.suggestions[0], want) {
				t.Errorf("suggestions %q: want the step that installs what is missing (%q)", se.suggestions, want)
			}
		})
	}
}

// TestActionNoImage runs the real `goalrun action` with a runner's
// environment whose PATH holds no agent CLI (no step installed it) and no
// image input: the run ends at once with the "no sandbox image" startup
// error as an ::error:: annotation, a completed check run, the
// document and the outputs; an image input skips the pre-check (what
// happens next is the Docker sandbox's business, not this error).
func TestActionNoImage(t *testing.T) {
	emptyPath := t.TempDir()
	cases := []struct {
		name     string
		inputs   map[string]string
		wantCode int
		wantErr  string // the document's error; "" = the pre-check must not fire
	}{
		{name: "claude, no image", inputs: map[string]string{"agent": "claude", "sandbox": "docker"},
			wantCode: exitBadInput, wantErr: report.ErrAgentNotFound},
		{name: "codex with a missing agent-bin, sandbox from the default", inputs: map[string]string{"agent": "codex", "agent-bin": filepath.Join(emptyPath, "codex")},
			wantCode: exitBadInput, wantErr: report.ErrAgentNotFound},
		{name: "image given", inputs: map[string]string{"agent": "claude", "sandbox": "docker", "image": "goalrun-test-actionreal-absent:none"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := githubtest.NewServer(t, "octo-org/demo")
			head := seedDemo(t, srv)
			srv.AddIssue(17)
			inputs := map[string]string{"until": "go test ./...", "prompt": "make go test pass", "timeout-minutes": "2"}
			for k, v := range tc.inputs {
				inputs[k] = v
			}
			r := newRunner(t, srv, "pull_request", "pull_request.opened.json", setHead(head), inputs)
			r.env["PATH"] = emptyPath
			r.env["ANTHROPIC_API_KEY"] = "sk-ant-test-not-a-key"
			r.env["OPENAI_API_KEY"] = "sk-test-not-a-key"
			res := r.run()
			doc := readActionDocument(t, r)
			if tc.wantErr == "" {
				if strings.Contains(string(res.stdout), "no sandbox image") {
					t.Fatalf("the pre-check fired although image is set:\n%s", res.stdout)
				}
				return
			}
			if res.code != tc.wantCode {
				t.Fatalf("exit %d, want %d\n%s", res.code, tc.wantCode, res.stdout)
			}
			if !regexp.MustCompile(`(?m)^::error::goalrun: no sandbox image: .*on the runner's PATH`).Match(res.stdout) {
				t.Errorf("no error annotation saying what the runner lacks:\n%s", res.stdout)
			}
			if doc["error"] != tc.wantErr {
				t.Errorf("document error %v, want %s: %v", doc["error"], tc.wantErr, doc)
			}
			if sug, _ := doc["suggestions"].([]any); len(sug) == 0 || !strings.Contains(sug[0].(string), "npm install --global") {
				t.Errorf("document suggestions %v: want the agent's install step", doc["suggestions"])
			}
			runs := srv.CheckRuns()
			if len(runs) != 1 || runs[0].Status != "completed" || runs[0].Conclusion != "failure" || runs[0].HeadSHA != head ||
				!strings.Contains(runs[0].Summary, "no sandbox image") {
				t.Errorf("check runs = %+v", runs)
			}
			if out := r.outputs(); out["status"] != "error" || out["passed"] != "" {
				t.Errorf("outputs = %v", out)
			}
		})
	}
}

// readActionDocument reads the document goalrun action wrote under
// RUNNER_TEMP (documentPath outside a container).
func readActionDocument(t *testing.T, r *runner) map[string]any {
	t.Helper()
	p, _ := documentPath(func(k string) string { return r.env[k] }, r.env["INPUT_CHECK-NAME"])
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("the document: %v", err)
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	reporttest.Validate(t, b)
	var d map[string]any
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("the document %s is not JSON: %v", p, err)
	}
	return d
}
