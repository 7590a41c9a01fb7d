package main

import (
	"cmp"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sethvargo/go-githubactions"

	"github.com/goalrun/goalrun/report/ghreport"
	"github.com/goalrun/goalrun/report/ghreport/githubtest"
)

// linkedWorkspace makes a workspace whose checkout holds symbolic links, as
// a pull request can: out → a folder outside, in → a folder inside,
// dangling → nowhere, cfg.yml → a file outside, deep/x → out's parent. It
// returns the workspace, a link to the workspace, and the outside folder.
func linkedWorkspace(t *testing.T) (ws, wsLink, outside string) {
	t.Helper()
	tmp := t.TempDir()
	ws, outside = filepath.Join(tmp, "ws"), filepath.Join(tmp, "outside")
	for _, d := range []string{filepath.Join(ws, "sub", "real"), filepath.Join(ws, "deep"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "goalrun.yml"), []byte("until: \"true\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "sub", "goalrun.yml"), []byte("until: \"true\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"out":      outside,
		"rel-out":  "../outside",
		"in":       "sub",
		"dangling": filepath.Join(tmp, "nothing-here"),
		"cfg.yml":  filepath.Join(outside, "goalrun.yml"),
		"deep/x":   "../..",
		"loop":     "loop",
	} {
		if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	wsLink = filepath.Join(tmp, "ws-link")
	if err := os.Symlink(ws, wsLink); err != nil {
		t.Fatal(err)
	}
	return ws, wsLink, outside
}

// TestActionWorkspaceLinks: working-directory and config may not lead out
// of the workspace through a symbolic link (attack round: `app` → /outside
// let the sandbox read and write outside); the error names the input, the
// link and where it points. Links that stay inside resolve.
func TestActionWorkspaceLinks(t *testing.T) {
	ws, wsLink, outside := linkedWorkspace(t)
	for _, tc := range []struct {
		name      string
		workspace string // GITHUB_WORKSPACE ("" = ws)
		input     string
		value     string
		want      string   // the flag's value
		err       []string // substrings of the error
	}{
		{name: "plain folder", input: "working-directory", value: "sub/real", want: filepath.Join(ws, "sub", "real")},
		{name: "absolute link out", input: "working-directory", value: "out", err: []string{"working-directory", filepath.Join(ws, "out"), outside, "outside the workspace"}},
		{name: "relative link out", input: "working-directory", value: "rel-out", err: []string{"working-directory", filepath.Join(ws, "rel-out"), "../outside", "outside the workspace"}},
		{name: "through a link out", input: "working-directory", value: "out/deeper", err: []string{"working-directory", filepath.Join(ws, "out"), outside}},
		{name: "link to the workspace's parent", input: "working-directory", value: "deep/x", err: []string{"working-directory", filepath.Join(ws, "deep", "x"), "../.."}},
		{name: "dangling link", input: "working-directory", value: "dangling", err: []string{"working-directory", "cannot be resolved"}},
		{name: "link loop", input: "working-directory", value: "loop", err: []string{"working-directory", "cannot be resolved"}},
		{name: "link inside resolves", input: "working-directory", value: "in/real", want: filepath.Join(ws, "sub", "real")},
		{name: "workspace is a link", workspace: wsLink, input: "working-directory", value: "in/real", want: filepath.Join(ws, "sub", "real")},
		{name: "workspace is a link, folder plain", workspace: wsLink, input: "working-directory", value: "sub", want: filepath.Join(wsLink, "sub")},
		{name: "workspace is a link, link out", workspace: wsLink, input: "working-directory", value: "out", err: []string{"working-directory", outside}},
		{name: "dot-dot textually", input: "working-directory", value: "../outside", err: []string{"working-directory", "leaves the workspace"}},
		{name: "config inside", input: "config", value: "sub/goalrun.yml", want: filepath.Join(ws, "sub", "goalrun.yml")},
		{name: "config link out", input: "config", value: "cfg.yml", err: []string{"input config", filepath.Join(ws, "cfg.yml"), filepath.Join(outside, "goalrun.yml")}},
		{name: "config through a link out", input: "config", value: "out/goalrun.yml", err: []string{"input config", outside}},
		{name: "config dot-dot", input: "config", value: "../outside/goalrun.yml", err: []string{"input config", "leaves the workspace"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"GITHUB_WORKSPACE": cmp.Or(tc.workspace, ws), "INPUT_" + strings.ToUpper(tc.input): tc.value}
			getenv := func(k string) string { return env[k] }
			a := &action{getenv: getenv, gha: githubactions.New(githubactions.WithGetenv(getenv)), docPath: "/tmp/doc.json"}
			args, err := a.runArgs("")
			if tc.err != nil {
				if err == nil {
					t.Fatalf("args %q, want an error", args)
				}
				for _, s := range tc.err {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not name %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			flag := map[string]string{"working-directory": "--workdir=", "config": "--config="}[tc.input]
			n := map[string]int{"working-directory": 3, "config": 2}[tc.input] // --no-config without a config input
			if len(args) != n || args[0] != flag+tc.want {
				t.Errorf("args = %q, want %s%s first, %d in all", args, flag, tc.want, n)
			}
		})
	}
}

// TestActionWorkdirLinkEndToEnd: the attack itself — a checked-out link
// as working-directory — is bad input (exit 2) before anything runs.
func TestActionWorkdirLinkEndToEnd(t *testing.T) {
	srv := githubtest.NewServer(t, "octo-org/demo")
	head := seedDemo(t, srv)
	srv.AddIssue(17)
	outside := t.TempDir()
	r := newRunner(t, srv, "pull_request", "pull_request.opened.json", setHead(head),
		map[string]string{"agent": "command", "agent-bin": "touch pwned-by-agent", "until": "test -f pwned-by-agent", "sandbox": "local",
			"prompt": "x", "working-directory": "app"})
	if err := os.Symlink(outside, filepath.Join(r.workspace, "app")); err != nil {
		t.Fatal(err)
	}
	res := r.run()
	if res.code != exitBadInput {
		t.Fatalf("exit %d, want %d\n%s", res.code, exitBadInput, res.stdout)
	}
	if !regexp.MustCompile(`(?m)^::error::.*input working-directory.*symbolic link .*app.*` + regexp.QuoteMeta(outside)).Match(res.stdout) {
		t.Errorf("no error naming the input, the link and its target:\n%s", res.stdout)
	}
	if _, err := os.Stat(filepath.Join(outside, "pwned-by-agent")); err == nil {
		t.Error("the agent wrote outside the workspace")
	}
	if runs := srv.CheckRuns(); len(runs) != 1 || runs[0].Conclusion != "failure" {
		t.Errorf("check runs = %+v, want one completed as failure", runs)
	}
}

// TestActionBranchPrefix: pr-branch-prefix must make a valid branch name
// (git check-ref-format); a bad one is bad input naming the input.
func TestActionBranchPrefix(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		why    string // "" = valid
	}{
		{"goalrun", ""},
		{"bots/goalrun", ""},
		{"release-1.2_x", ""},
		{"a..b", `".."`},
		{"with space", "space"},
		{"tab\there", "control character"},
		{"refs/heads/x", `"refs/"`},
		{"-leading", `starts with "-"`},
		{"/lead", `starts with "/"`},
		{"x/", `ends with "/"`},
		{"a//b", `"//"`},
		{"x.lock", `".lock"`},
		{"a/b.lock/c", `".lock"`},
		{".hidden", `starts with "."`},
		{"a/.b", `starts with "."`},
		{"@{u}", `"@{"`},
		{"@", `"@"`},
		{"~x", `'~'`},
		{"a^b", `'^'`},
		{"a:b", `':'`},
		{"a?b", `'?'`},
		{"a*b", `'*'`},
		{"a[b", `'['`},
		{`a\b`, `'\\'`},
		{"del\x7f", "control character"},
	} {
		t.Run(tc.prefix, func(t *testing.T) {
			env := map[string]string{"INPUT_PR-BRANCH-PREFIX": tc.prefix}
			a := &action{env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }, getenv: func(k string) string { return env[k] }}
			a.gha = githubactions.New(githubactions.WithGetenv(a.getenv))
			err := a.checkInputs()
			if tc.why == "" {
				if err != nil {
					t.Fatalf("checkInputs = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "input pr-branch-prefix") || !strings.Contains(err.Error(), tc.why) {
				t.Errorf("checkInputs = %v, want an error naming pr-branch-prefix and %s", err, tc.why)
			}
		})
	}
}

// TestActionRefusal: a /goalrun comment from someone without write access
// gets a new reply that never replaces the report's sticky comment; with
// comment: off no comment at all, a notice in the log and job summary.
func TestActionRefusal(t *testing.T) {
	for _, tc := range []struct {
		name    string
		comment string
		reply   bool
	}{
		{"sticky", "sticky", true},
		{"new", "new", true},
		{"off", "off", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := githubtest.NewServer(t, "octo-org/demo")
			sha := seedDemo(t, srv)
			reportID := srv.AddBotComment(21, ghreport.DefaultAuthor, ghreport.Marker("goalrun")+"\n### ✅ goal met — the last report")
			r := newRunner(t, srv, "issue_comment", "issue_comment.issue.created.json", nil,
				map[string]string{"agent": "command", "agent-bin": "touch AGENT_RAN", "until": "true", "sandbox": "local", "comment": tc.comment})
			r.env["GITHUB_SHA"] = sha
			res := r.run()
			if res.code != exitMet {
				t.Fatalf("exit %d\n%s", res.code, res.stdout)
			}
			if _, err := os.Stat(filepath.Join(r.workspace, "AGENT_RAN")); err == nil {
				t.Error("the agent ran for a non-collaborator")
			}
			cs := srv.Comments(21)
			if cs[0].ID != reportID || cs[0].Edits != 0 || !strings.Contains(cs[0].Body, "the last report") {
				t.Errorf("the report's comment was changed: %+v", cs[0])
			}
			if n := len(srv.RequestsFor("issues/update-comment")); n != 0 {
				t.Errorf("%d comment edits", n)
			}
			if !tc.reply {
				if len(cs) != 1 || len(srv.RequestsFor("issues/create-comment")) != 0 {
					t.Errorf("comment: off, yet comments = %+v", cs)
				}
				summary, _ := os.ReadFile(r.summary)
				if !strings.Contains(string(summary), "goalrun did not start") || !strings.Contains(string(summary), "drive") {
					t.Errorf("job summary lacks the notice:\n%s", summary)
				}
			} else if len(cs) != 2 || strings.Contains(cs[1].Body, "goalrun:sticky") || !strings.Contains(cs[1].Body, "@drive-by") {
				t.Errorf("comments = %+v, want the report and a marker-free reply", cs)
			}
			if !regexp.MustCompile(`(?m)^::notice::goalrun did not start: @drive-by`).Match(res.stdout) {
				t.Errorf("no notice in the log:\n%s", res.stdout)
			}
			if out := r.outputs(); out["status"] != "skipped" {
				t.Errorf("outputs = %v", out)
			}
		})
	}
}

// TestActionCompletionFailure: a completion GitHub refuses is a warning;
// the run is never then marked cancelled (no signal was received).
func TestActionCompletionFailure(t *testing.T) {
	srv := githubtest.NewServer(t, "octo-org/demo")
	head := seedDemo(t, srv)
	srv.AddIssue(17)
	// The agent's new file is not on the head: the completion says
	// action_required.
	srv.Fail("checks/update", githubtest.Fault{Status: 422, Message: "Validation Failed", When: `"conclusion":"action_required"`})
	r := newRunner(t, srv, "pull_request", "pull_request.opened.json", setHead(head),
		map[string]string{"agent": "command", "agent-bin": "touch fixed", "until": "test -f fixed", "sandbox": "local", "prompt": "x"})
	res := r.run()
	if res.code != exitMet {
		t.Fatalf("exit %d\n%s", res.code, res.stdout)
	}
	run := srv.CheckRuns()[0]
	if run.Conclusion == "cancelled" || run.Status != "in_progress" {
		t.Errorf("check run %s/%s, want it left as GitHub has it (in_progress), never cancelled", run.Status, run.Conclusion)
	}
	for _, req := range srv.RequestsFor("checks/update") {
		if strings.Contains(string(req.Body), `"cancelled"`) {
			t.Errorf("sent a cancellation: %s", req.Body)
		}
	}
	if !regexp.MustCompile(`(?m)^::warning::could not complete the check run`).Match(res.stdout) {
		t.Errorf("no warning:\n%s", res.stdout)
	}
}

// TestActionStickyIdentity: the report never edits a marker comment
// another bot wrote; it edits its own.
func TestActionStickyIdentity(t *testing.T) {
	srv := githubtest.NewServer(t, "octo-org/demo")
	head := seedDemo(t, srv)
	other := srv.AddBotComment(17, "other-app[bot]", ghreport.Marker("goalrun")+"\nnot goalrun's")
	r := newRunner(t, srv, "pull_request", "pull_request.opened.json", setHead(head),
		map[string]string{"agent": "command", "agent-bin": "touch fixed", "until": "test -f fixed", "sandbox": "local", "prompt": "x"})
	for i := 0; i < 2; i++ {
		_ = os.Remove(filepath.Join(r.workspace, "fixed"))
		if res := r.run(); res.code != exitMet {
			t.Fatalf("run %d: exit %d\n%s", i, res.code, res.stdout)
		}
	}
	cs := srv.Comments(17)
	if len(cs) != 2 || cs[0].ID != other || cs[0].Edits != 0 {
		t.Fatalf("comments = %+v, want other-app's untouched and one of goalrun's", cs)
	}
	if cs[1].Login != ghreport.DefaultAuthor || cs[1].Edits != 1 {
		t.Errorf("goalrun's comment = %+v, want github-actions[bot]'s, edited by the second run", cs[1])
	}
	if n := len(srv.RequestsFor("users/get-authenticated")); n != 0 {
		t.Errorf("%d GET /user with a check run's app known", n)
	}
}

// TestActionConfigWorkdirOutside: a config file in the checkout cannot move
// the workdir out of the workspace. A .goalrun.yml the workflow does not name
// is not read at all (a pull request's head carries its own); one named by
// the config input cannot name a path outside its folder.
func TestActionConfigWorkdirOutside(t *testing.T) {
	for _, tc := range []struct {
		name     string
		config   string // the config input
		wantCode int
		wantErr  string // in an ::error:: line
	}{
		{"a checkout's .goalrun.yml is not read", "", exitMet, ""},
		{"a named config file cannot leave its folder", ".goalrun.yml", exitBadInput, `config file .*\.goalrun\.yml line 1: workdir: ".*" is an absolute path`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := githubtest.NewServer(t, "octo-org/demo")
			head := seedDemo(t, srv)
			srv.AddIssue(17)
			outside := t.TempDir()
			r := newRunner(t, srv, "pull_request", "pull_request.opened.json", setHead(head),
				map[string]string{"agent": "command", "agent-bin": "touch pwned-by-agent", "until": "test -f pwned-by-agent", "sandbox": "local",
					"prompt": "x", "working-directory": "", "config": tc.config})
			if err := os.WriteFile(filepath.Join(r.workspace, ".goalrun.yml"), []byte("workdir: "+outside+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			res := r.run()
			if res.code != tc.wantCode {
				t.Fatalf("exit %d, want %d\n%s", res.code, tc.wantCode, res.stdout)
			}
			if tc.wantErr != "" && !regexp.MustCompile(`(?m)^::error::.*`+tc.wantErr).Match(res.stdout) {
				t.Errorf("no error naming the config file's path:\n%s", res.stdout)
			}
			if _, err := os.Stat(filepath.Join(outside, "pwned-by-agent")); err == nil {
				t.Error("the agent ran outside the workspace")
			}
		})
	}
}

// TestActionPRConfigKeys: on a pull request event the checkout — and a
// config file the workflow names in it — is the pull request author's: the
// file may say what to do (prompt, prompt-file, workdir), never how the run
// is isolated, checked or paid for. On a schedule (the default branch) the
// same file applies. A prompt-file input that is a link out of the
// workspace is refused like working-directory and config.
func TestActionPRConfigKeys(t *testing.T) {
	for _, tc := range []struct {
		name, event, payload, yaml string
		inputs                     map[string]string
		wantCode                   int
		wantErr                    string
	}{
		{"pull request: isolation from the file", "pull_request", "pull_request.opened.json", "sandbox: local\nagent-bin: touch pwned\n", nil, exitBadInput,
			`sets agent-bin, sandbox on a pull request event`},
		{"pull request: budget from the file", "pull_request", "pull_request.opened.json", "max-iterations: 1000\ntimeout: 24h\n", nil, exitBadInput,
			`sets max-iterations, timeout on a pull request event`},
		{"pull request: the task from the file", "pull_request", "pull_request.opened.json", "prompt: make the test pass\n", nil, exitMet, ""},
		{"pull request review: isolation from the file", "pull_request_review", "pull_request_review.submitted.fork.json", "sandbox: local\nagent-bin: touch pwned\n", nil, exitBadInput,
			`sets agent-bin, sandbox on a pull request event (pull_request_review)`},
		{"workflow_run after a pull request: isolation from the file", "workflow_run", "workflow_run.completed.pr.json", "sandbox: local\nagent-bin: touch pwned\n", nil, exitBadInput,
			`sets agent-bin, sandbox on a pull request event (workflow_run)`},
		{"workflow_run after a fork's pull request: isolation from the file", "workflow_run", "workflow_run.completed.fork.json", "sandbox: local\nagent-bin: touch pwned\n", nil, exitBadInput,
			`sets agent-bin, sandbox on a pull request event (workflow_run)`},
		{"merge queue: isolation from the file", "merge_group", "merge_group.checks_requested.json", "sandbox: local\nagent-bin: touch pwned\n", nil, exitBadInput,
			`sets agent-bin, sandbox on a pull request event (merge_group)`},
		{"check suite of a pull request: isolation from the file", "check_suite", "check_suite.rerequested.pr.json", "sandbox: local\nagent-bin: touch pwned\n", nil, exitBadInput,
			`sets agent-bin, sandbox on a pull request event (check_suite)`},
		{"comment on a pull request: isolation from the file", "issue_comment", "issue_comment.pr.created.json", "sandbox: local\nagent-bin: touch pwned\n", nil, exitBadInput,
			`sets agent-bin, sandbox on a pull request event (issue_comment)`},
		{"deployment status of a preview branch: isolation from the file", "deployment_status", "deployment_status.preview.json", "sandbox: local\nagent-bin: touch pwned\n", nil, exitBadInput,
			`sets agent-bin, sandbox on a pull request event (deployment_status)`},
		{"workflow_run after a push: the file applies", "workflow_run", "workflow_run.completed.push.json", "max-iterations: 2\n", nil, exitMet, ""},
		{"push: the file applies", "push", "push.main.json", "max-iterations: 2\n", nil, exitMet, ""},
		{"schedule: the file applies", "schedule", "schedule.json", "max-iterations: 2\n", nil, exitMet, ""},
		{"prompt-file input through a link out", "schedule", "schedule.json", "", map[string]string{"config": "", "prompt": "", "prompt-file": "out/task.md"}, exitBadInput,
			`input prompt-file: "out/task.md" passes through the symbolic link`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := githubtest.NewServer(t, "octo-org/demo")
			head := seedDemo(t, srv)
			srv.AddIssue(17)
			srv.SetPermission("maintainer-max", "write")
			inputs := map[string]string{"agent": "command", "agent-bin": "touch fixed", "until": "test -f fixed", "sandbox": "local",
				"prompt": "x", "config": "goalrun.yml", "comment": "off"}
			if tc.yaml != "" {
				delete(inputs, "agent-bin")
				delete(inputs, "sandbox")
				if strings.Contains(tc.yaml, "prompt:") {
					delete(inputs, "prompt")
				}
				if !strings.Contains(tc.yaml, "agent-bin") {
					inputs["agent-bin"], inputs["sandbox"] = "touch fixed", "local"
				}
			}
			for k, v := range tc.inputs {
				inputs[k] = v
			}
			var patch func(map[string]any)
			if tc.event == "pull_request" {
				patch = setHead(head)
			}
			r := newRunner(t, srv, tc.event, tc.payload, patch, inputs)
			r.env["GITHUB_SHA"] = head
			if tc.yaml != "" {
				if err := os.WriteFile(filepath.Join(r.workspace, "goalrun.yml"), []byte(tc.yaml), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			outside := t.TempDir()
			os.WriteFile(filepath.Join(outside, "task.md"), []byte("a host secret\n"), 0o644)
			if err := os.Symlink(outside, filepath.Join(r.workspace, "out")); err != nil {
				t.Fatal(err)
			}
			res := r.run()
			if res.code != tc.wantCode {
				t.Fatalf("exit %d, want %d\n%s", res.code, tc.wantCode, res.stdout)
			}
			if tc.wantErr != "" && !strings.Contains(string(res.stdout), tc.wantErr) {
				t.Errorf("no error saying %q:\n%s", tc.wantErr, res.stdout)
			}
			if _, err := os.Stat(filepath.Join(r.workspace, "pwned")); err == nil {
				t.Error("the pull request's config file chose the agent")
			}
		})
	}
}
