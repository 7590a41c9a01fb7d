package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sethvargo/go-githubactions"
	"gopkg.in/yaml.v3"

	"github.com/goalrun/goalrun/report"
	ghsink "github.com/goalrun/goalrun/report/github"
	"github.com/goalrun/goalrun/report/github/githubtest"
	"github.com/goalrun/goalrun/report/reporttest"
)

// runner is the environment a GitHub runner gives a container action:
// GITHUB_* variables, INPUT_* for every declared input (the default when
// the workflow gives none), the event payload file and the file-command
// files.
type runner struct {
	t         *testing.T
	srv       *githubtest.Server
	workspace string
	env       map[string]string
	output    string // GITHUB_OUTPUT
	summary   string // GITHUB_STEP_SUMMARY
}

// actionYAML is action.yml's inputs and outputs.
type actionYAML struct {
	Inputs map[string]struct {
		Description string `yaml:"description"`
		Required    bool   `yaml:"required"`
		Default     string `yaml:"default"`
	} `yaml:"inputs"`
	Outputs map[string]struct {
		Description string `yaml:"description"`
	} `yaml:"outputs"`
	Runs struct {
		Using string `yaml:"using"`
		Image string `yaml:"image"`
	} `yaml:"runs"`
}

func loadActionYAML(t *testing.T) actionYAML {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var a actionYAML
	if err := yaml.Unmarshal(b, &a); err != nil {
		t.Fatalf("action.yml: %v", err)
	}
	return a
}

const testToken = "ghs_testtoken0123456789"

func newRunner(t *testing.T, srv *githubtest.Server, event, payloadFile string, patch func(map[string]any), inputs map[string]string) *runner {
	t.Helper()
	tmp := t.TempDir()
	r := &runner{t: t, srv: srv, workspace: filepath.Join(tmp, "workspace"), env: map[string]string{}}
	copyDir(t, filepath.Join("..", "..", "examples", "demo"), r.workspace)
	var payload map[string]any
	b, err := os.ReadFile(filepath.Join("..", "..", "report", "github", "testdata", "events", payloadFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &payload); err != nil {
		t.Fatal(err)
	}
	if patch != nil {
		patch(payload)
	}
	b, _ = json.Marshal(payload)
	eventPath := filepath.Join(tmp, "event.json")
	if err := os.WriteFile(eventPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r.output = filepath.Join(tmp, "file_commands", "set_output")
	r.summary = filepath.Join(tmp, "file_commands", "step_summary")
	_ = os.MkdirAll(filepath.Dir(r.output), 0o755)
	for _, f := range []string{r.output, r.summary} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range map[string]string{
		"CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": event, "GITHUB_EVENT_PATH": eventPath,
		"GITHUB_REPOSITORY": "octo-org/demo", "GITHUB_REPOSITORY_OWNER": "octo-org",
		"GITHUB_API_URL": srv.URL, "GITHUB_SERVER_URL": "https://github.example", "GITHUB_RUN_ID": "4242",
		"GITHUB_WORKSPACE": r.workspace, "GITHUB_OUTPUT": r.output, "GITHUB_STEP_SUMMARY": r.summary,
		"GITHUB_ENV": filepath.Join(tmp, "file_commands", "set_env"), "GITHUB_PATH": filepath.Join(tmp, "file_commands", "add_path"),
		"GITHUB_STATE": filepath.Join(tmp, "file_commands", "save_state"), "RUNNER_TEMP": tmp,
		"GITHUB_REF": "refs/heads/main", "GITHUB_REF_NAME": "main", "GITHUB_JOB": "goalrun", "GITHUB_ACTION": "__self",
	} {
		r.env[k] = v
	}
	for name, in := range loadActionYAML(t).Inputs {
		v := in.Default
		if strings.Contains(v, "${{ github.token }}") {
			v = testToken
		}
		r.env["INPUT_"+strings.ToUpper(name)] = v
	}
	for k, v := range inputs {
		r.env["INPUT_"+strings.ToUpper(k)] = v
	}
	return r
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, fi.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// run executes the real goalrun binary as `goalrun action`.
func (r *runner) run() result {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	cmd := exec.CommandContext(ctx, goalrunBin, "action")
	cmd.Dir = r.workspace
	cmd.Env = baseEnv()
	for k, v := range r.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		r.t.Fatalf("running goalrun action: %v", err)
	}
	if ctx.Err() != nil {
		r.t.Fatalf("goalrun action did not end within %s\n%s", guard, out.String())
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: out.Bytes(), stderr: errb.Bytes()}
}

// outputs parses GITHUB_OUTPUT as the runner does and checks it holds
// exactly the outputs action.yml declares, each once.
func (r *runner) outputs() map[string]string {
	r.t.Helper()
	b, err := os.ReadFile(r.output)
	if err != nil {
		r.t.Fatal(err)
	}
	entries, err := githubtest.ParseFileCommand(string(b))
	if err != nil {
		r.t.Fatalf("GITHUB_OUTPUT does not parse: %v\n%s", err, b)
	}
	got := map[string]string{}
	for _, e := range entries {
		if _, dup := got[e[0]]; dup {
			r.t.Errorf("output %s set twice", e[0])
		}
		got[e[0]] = e[1]
	}
	declared := loadActionYAML(r.t).Outputs
	if len(got) != len(declared) {
		r.t.Errorf("GITHUB_OUTPUT has %d outputs, action.yml declares %d: %v", len(got), len(declared), got)
	}
	for name := range got {
		if _, ok := declared[name]; !ok {
			r.t.Errorf("undeclared output %q", name)
		}
	}
	return got
}

// agentWithHostileSummary runs the demo's fix script, then prints lines
// that try to end a heredoc and set outputs, as an agent's summary might.
const agentWithHostileSummary = `sh fix.sh; printf '%s\n' 'EOF' '::set-output name=passed::false' 'ghadelimiter_0' 'passed<<EOF' 'false' 'EOF' '::warning::from the agent'`

// commandsOutsideStops returns the workflow-command lines of stdout that
// the runner would execute: those outside ::stop-commands::TOKEN regions.
func commandsOutsideStops(stdout string) []string {
	var cmds []string
	stopped := ""
	for _, line := range strings.Split(stdout, "\n") {
		switch {
		case stopped != "":
			if line == "::"+stopped+"::" {
				stopped = ""
			}
		case strings.HasPrefix(line, "::stop-commands::"):
			stopped = strings.TrimPrefix(line, "::stop-commands::")
		case strings.HasPrefix(line, "::"):
			cmds = append(cmds, line)
		}
	}
	return cmds
}

func seedDemo(t *testing.T, srv *githubtest.Server) string {
	t.Helper()
	sha, err := srv.SeedDir("main", filepath.Join("..", "..", "examples", "demo"), "demo")
	if err != nil {
		t.Fatal(err)
	}
	return sha
}

func setHead(sha string) func(map[string]any) {
	return func(p map[string]any) {
		p["pull_request"].(map[string]any)["head"].(map[string]any)["sha"] = sha
	}
}

var demoInputs = map[string]string{
	"agent": "command", "agent-bin": agentWithHostileSummary, "until": "go test ./...",
	"sandbox": "local", "prompt": "make go test pass",
}

// TestActionPullRequestEndToEnd is issue 6's first "Must show".
func TestActionPullRequestEndToEnd(t *testing.T) {
	srv := githubtest.NewServer(t, "octo-org/demo")
	base := seedDemo(t, srv)
	head := srv.Seed("contrib", map[string]githubtest.File{"calc.go": {Content: []byte("package calc\n")}}, "a pull request's head")
	srv.AddIssue(16)
	r := newRunner(t, srv, "pull_request", "pull_request.opened.json", setHead(head), demoInputs)
	r.env["GITHUB_SHA"] = "ffffffffffffffffffffffffffffffffffffffff" // the synthetic merge commit: never the check run's commit
	srv.AddIssue(17)
	res := r.run()
	if res.code != exitMet {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	runs := srv.CheckRuns()
	if len(runs) != 1 {
		t.Fatalf("%d check runs, want 1", len(runs))
	}
	run := runs[0]
	if run.HeadSHA != head || run.HeadSHA == base {
		t.Errorf("check run on %s, want the pull request head %s", run.HeadSHA, head)
	}
	if strings.Join(run.Statuses, ",") != "in_progress,completed" || run.Conclusion != "success" {
		t.Errorf("statuses %v conclusion %q", run.Statuses, run.Conclusion)
	}
	// Live titles as iterations finish (a newer title may replace one not
	// yet sent, so not every iteration is guaranteed its own update).
	live := regexp.MustCompile(`^iteration [0-2]/5: check (failing|passing)$`)
	nlive := 0
	for _, title := range run.Titles {
		if live.MatchString(title) {
			nlive++
		}
	}
	if nlive == 0 || run.Titles[len(run.Titles)-1] != report.Headline(d0(t, r)) {
		t.Errorf("titles %q: want live iteration titles, then the headline", run.Titles)
	}
	if run.DetailsURL != "https://github.example/octo-org/demo/actions/runs/4242" {
		t.Errorf("details_url = %q", run.DetailsURL)
	}
	if !strings.Contains(run.Summary, "goalrun/1 document") || len(run.Summary) > ghsink.CheckSummaryBytes {
		t.Errorf("summary (%d bytes) lacks the document", len(run.Summary))
	}
	for _, req := range srv.Requests() {
		if strings.HasPrefix(req.Operation, "checks/") && req.Status >= 400 {
			t.Errorf("%s answered %d: %s", req.Operation, req.Status, req.Body)
		}
		if req.Authorization != "Bearer "+testToken {
			t.Errorf("%s sent Authorization %q", req.Operation, req.Authorization)
		}
	}
	out := r.outputs()
	for k, want := range map[string]string{"status": "success", "conclusion": "success", "passed": "true", "grounded": "true",
		"iterations": "2", "halt": "", "pr-url": ""} {
		if out[k] != want {
			t.Errorf("output %s = %q, want %q", k, out[k], want)
		}
	}
	doc, err := os.ReadFile(out["document"])
	if err != nil {
		t.Fatalf("the document output %q: %v", out["document"], err)
	}
	reporttest.Validate(t, bytes.TrimSpace(doc))
	var d report.Document
	if err := json.Unmarshal(doc, &d); err != nil || d.Summary == nil || !strings.Contains(*d.Summary, "::set-output") {
		t.Errorf("document summary does not carry the agent's words: %v", err)
	}
	if cmds := commandsOutsideStops(string(res.stdout)); len(cmds) > 0 {
		for _, c := range cmds {
			if strings.Contains(c, "from the agent") || strings.Contains(c, "set-output") {
				t.Errorf("the agent's output escaped stop-commands: %q", c)
			}
		}
	}
	if !bytes.Contains(res.stdout, []byte("::add-mask::"+testToken)) {
		t.Error("the token was not masked")
	}
	summary, _ := os.ReadFile(r.summary)
	if !bytes.Contains(summary, []byte("```mermaid")) || !bytes.Contains(summary, []byte("goal met")) {
		t.Errorf("job summary:\n%s", summary)
	}
	comments := srv.Comments(17)
	if len(comments) != 1 || !strings.HasPrefix(comments[0].Body, ghsink.Marker("goalrun")) {
		t.Errorf("comments on #17: %+v", comments)
	}
	// A second run on the same pull request edits the sticky comment.
	copyDir(t, filepath.Join("..", "..", "examples", "demo"), r.workspace)
	if res := r.run(); res.code != exitMet {
		t.Fatalf("second run: exit %d\n%s", res.code, res.stdout)
	}
	if c := srv.Comments(17); len(c) != 1 || c[0].Edits != 1 {
		t.Errorf("after a second run: %+v", c)
	}
}

// d0 reads the document the run wrote.
func d0(t *testing.T, r *runner) report.Document {
	t.Helper()
	b, err := os.ReadFile(r.outputs()["document"])
	if err != nil {
		t.Fatal(err)
	}
	var d report.Document
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestActionCheckRunForbidden: 403 on check-run creation (a fork's
// read-only token): the goal alone decides the exit code, the job summary
// holds the report, a warning names the missing permission.
func TestActionCheckRunForbidden(t *testing.T) {
	for _, tc := range []struct {
		name  string
		until string
		code  int
	}{
		{"goal met", "go test ./...", exitMet},
		{"goal not met", "exit 1", exitNotMet},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := githubtest.NewServer(t, "octo-org/demo")
			head := seedDemo(t, srv)
			srv.AddIssue(17)
			srv.Fail("checks/create", githubtest.Forbidden())
			inputs := map[string]string{"agent": "command", "agent-bin": "sh fix.sh", "until": tc.until, "sandbox": "local",
				"max-iterations": "2", "prompt": "fix it"}
			r := newRunner(t, srv, "pull_request", "pull_request.fork.json", setHead(head), inputs)
			res := r.run()
			if res.code != tc.code {
				t.Fatalf("exit %d, want %d\n%s", res.code, tc.code, res.stdout)
			}
			warn := regexp.MustCompile(`(?m)^::warning::.*checks: write.*Resource not accessible by integration`)
			if !warn.Match(res.stdout) {
				t.Errorf("no warning naming the checks: write permission:\n%s", res.stdout)
			}
			summary, _ := os.ReadFile(r.summary)
			if !bytes.Contains(summary, []byte("goalrun/1 document")) || !bytes.Contains(summary, []byte("checks: write")) {
				t.Errorf("job summary lacks the report or the warning:\n%s", summary)
			}
			if n := len(srv.RequestsFor("checks/update")); n != 0 {
				t.Errorf("%d check-run updates after a refused create", n)
			}
			if out := r.outputs(); out["status"] != "success" {
				t.Errorf("status output %q", out["status"])
			}
		})
	}
}

// TestActionCommentTrigger: a /goalrun comment from a non-collaborator
// starts nothing and gets a polite reply (a new comment, without the sticky
// marker; see TestActionRefusal); from a member it runs with
// the comment's text as the prompt.
func TestActionCommentTrigger(t *testing.T) {
	t.Run("non-collaborator", func(t *testing.T) {
		srv := githubtest.NewServer(t, "octo-org/demo")
		sha := seedDemo(t, srv)
		srv.AddIssue(21)
		inputs := map[string]string{"agent": "command", "agent-bin": "sh fix.sh; touch AGENT_RAN", "until": "go test ./...", "sandbox": "local"}
		r := newRunner(t, srv, "issue_comment", "issue_comment.issue.created.json", nil, inputs)
		r.env["GITHUB_SHA"] = sha
		res := r.run()
		if res.code != exitMet {
			t.Fatalf("exit %d\n%s", res.code, res.stdout)
		}
		if _, err := os.Stat(filepath.Join(r.workspace, "AGENT_RAN")); err == nil {
			t.Error("the agent ran for a non-collaborator")
		}
		if n := len(srv.CheckRuns()); n != 0 {
			t.Errorf("%d check runs created", n)
		}
		c := srv.Comments(21)
		if len(c) != 1 || !strings.Contains(c[0].Body, "@drive-by") || !strings.Contains(c[0].Body, "did not start") ||
			strings.Contains(c[0].Body, ghsink.Marker("goalrun")) {
			t.Errorf("reply = %+v", c)
		}
		if out := r.outputs(); out["status"] != "skipped" || out["passed"] != "false" {
			t.Errorf("outputs = %v", out)
		}
	})
	t.Run("member", func(t *testing.T) {
		srv := githubtest.NewServer(t, "octo-org/demo")
		base := seedDemo(t, srv)
		head := srv.Seed("contrib", map[string]githubtest.File{"calc.go": {Content: []byte("package calc\n")}}, "head")
		srv.AddIssue(16)
		if n := srv.AddPull("contrib", "main", "Fix Sum"); n != 17 {
			t.Fatalf("pull request #%d, want 17", n)
		}
		inputs := map[string]string{"agent": "command", "agent-bin": `printf '%s' "$GOALRUN_PROMPT" > ../prompt-seen; sh fix.sh`,
			"until": "go test ./...", "sandbox": "local", "prompt": "the default prompt"}
		r := newRunner(t, srv, "issue_comment", "issue_comment.pr.created.json", nil, inputs)
		r.env["GITHUB_SHA"] = base // issue_comment: the default branch, not the pull request
		res := r.run()
		if res.code != exitMet {
			t.Fatalf("exit %d\n%s", res.code, res.stdout)
		}
		runs := srv.CheckRuns()
		if len(runs) != 1 || runs[0].HeadSHA != head || runs[0].Conclusion != "success" {
			t.Errorf("check runs = %+v, want one on the pull request head %s", runs, head)
		}
		prompt, err := os.ReadFile(filepath.Join(r.workspace, "..", "prompt-seen"))
		if err != nil || !strings.Contains(string(prompt), "make the tests in ./calc pass") || strings.Contains(string(prompt), "the default prompt") {
			t.Errorf("the agent's prompt = %q (%v), want the comment's text", prompt, err)
		}
		c := srv.Comments(17)
		if len(c) != 1 || !strings.Contains(c[0].Body, "goal met") {
			t.Errorf("comments = %+v", c)
		}
	})
}

// TestActionNightlyFixPR: the same failure fixed on two nights opens one
// pull request, then updates it.
func TestActionNightlyFixPR(t *testing.T) {
	srv := githubtest.NewServer(t, "octo-org/demo")
	base := seedDemo(t, srv)
	inputs := map[string]string{"agent": "command", "agent-bin": "sh fix.sh", "until": "go test ./...", "sandbox": "local",
		"prompt": "make go test pass", "open-pr": "true", "check-name": "goalrun (calc)", "comment": "off"}
	var urls []string
	for night := 1; night <= 2; night++ {
		r := newRunner(t, srv, "schedule", "schedule.json", nil, inputs)
		r.env["GITHUB_SHA"] = base
		res := r.run()
		if res.code != exitMet {
			t.Fatalf("night %d: exit %d\n%s", night, res.code, res.stdout)
		}
		out := r.outputs()
		if out["pr-url"] == "" {
			t.Fatalf("night %d: no pr-url output\n%s", night, res.stdout)
		}
		urls = append(urls, out["pr-url"])
	}
	pulls := srv.Pulls()
	if len(pulls) != 1 || urls[0] != urls[1] {
		t.Fatalf("pulls = %+v, urls %v: want one pull request, opened then updated", pulls, urls)
	}
	p := pulls[0]
	if p.Head != "goalrun/"+ghsink.Slug("goalrun (calc)") || p.Base != "main" || p.Edits != 1 || !strings.Contains(p.Body, "goal met") {
		t.Errorf("pull = %+v", p)
	}
	files := srv.Files(srv.Ref("heads/goalrun/" + ghsink.Slug("goalrun (calc)")))
	if got := string(files["calc.go"].Content); !strings.Contains(got, "for i := 0; i < len(xs); i++") || strings.Contains(got, "len(xs)-1") {
		t.Errorf("committed calc.go is not the fix:\n%s", got)
	}
	if parents := srv.CommitParents(srv.Ref("heads/goalrun/" + ghsink.Slug("goalrun (calc)"))); len(parents) != 1 || parents[0] != base {
		t.Errorf("fix commit parents %v, want [%s]", parents, base)
	}
}

// TestActionBadInput: an unknown input is a startup error (exit 2) that
// still completes a check run and writes the outputs.
func TestActionBadInput(t *testing.T) {
	srv := githubtest.NewServer(t, "octo-org/demo")
	head := seedDemo(t, srv)
	srv.AddIssue(17)
	r := newRunner(t, srv, "pull_request", "pull_request.opened.json", setHead(head),
		map[string]string{"timeout-minutes": "soon", "agent": "command", "agent-bin": "true", "until": "true"})
	res := r.run()
	if res.code != exitBadInput {
		t.Fatalf("exit %d, want %d\n%s", res.code, exitBadInput, res.stdout)
	}
	if !regexp.MustCompile(`(?m)^::error::.*timeout-minutes`).Match(res.stdout) {
		t.Errorf("no error annotation naming the input:\n%s", res.stdout)
	}
	runs := srv.CheckRuns()
	if len(runs) != 1 || runs[0].Conclusion != "failure" || runs[0].Status != "completed" {
		t.Errorf("check runs = %+v", runs)
	}
	if out := r.outputs(); out["status"] != "error" || out["conclusion"] != "failure" {
		t.Errorf("outputs = %v", out)
	}
}

// TestActionNoFileCommands: outside a runner (no GITHUB_OUTPUT, no event)
// goalrun action fails cleanly with a startup error instead of panicking.
func TestActionNoFileCommands(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"action"}, func(string) (string, bool) { return "", false }, &out, &errb)
	if code != exitBadInput {
		t.Errorf("exit %d, want %d\n%s%s", code, exitBadInput, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "GITHUB_EVENT_NAME is not set") || !strings.Contains(out.String(), "::warning::GITHUB_OUTPUT is not set") {
		t.Errorf("stdout:\n%s", out.String())
	}
}

// TestActionSIGTERM: a run interrupted by SIGTERM (a cancelled workflow)
// never leaves its check run in_progress: it completes as cancelled, and
// goalrun exits 130.
func TestActionSIGTERM(t *testing.T) {
	srv := githubtest.NewServer(t, "octo-org/demo")
	head := seedDemo(t, srv)
	srv.AddIssue(17)
	r := newRunner(t, srv, "pull_request", "pull_request.opened.json", setHead(head),
		map[string]string{"agent": "command", "agent-bin": "sleep 60", "until": "exit 1", "sandbox": "local", "prompt": "wait"})
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	cmd := exec.CommandContext(ctx, goalrunBin, "action")
	cmd.Dir = r.workspace
	cmd.Env = baseEnv()
	for k, v := range r.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until the agent turn is running (the check run says so), then
	// cancel the way the runner does.
	deadline := time.Now().Add(time.Minute)
	for {
		runs := srv.CheckRuns()
		if len(runs) == 1 && containsTitle(runs[0].Titles, "iteration 0/5: check failing") {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("the run never reached its first agent turn:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
		t.Fatalf("exit: %v, want %d\n%s", err, exitInterrupted, out.String())
	}
	t.Logf("goalrun action ended %.1fs after SIGTERM", time.Since(sent).Seconds())
	run := srv.CheckRuns()[0]
	if run.Status != "completed" || run.Conclusion != "cancelled" {
		t.Errorf("check run %s/%s after SIGTERM, want completed/cancelled", run.Status, run.Conclusion)
	}
	if o := r.outputs(); o["status"] != "cancelled" || o["conclusion"] != "cancelled" {
		t.Errorf("outputs = %v", o)
	}
}

func containsTitle(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestActionRunArgs: inputs become run's flags; empty inputs are not passed
// (so .goalrun.yml and run's defaults apply); bad values are errors.
func TestActionRunArgs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		inputs map[string]string
		prompt string
		want   []string
		err    string
	}{
		{name: "empty inputs pass nothing", want: []string{"--no-config", "--output=/tmp/doc.json"}},
		{name: "every kind", inputs: map[string]string{
			"agent": "codex", "until": "go test ./...", "timeout-minutes": "45", "allow-hosts": "a.example:443, b.example\nc.example",
			"agent-args": "--verbose\n\n--foo=bar baz\n", "working-directory": "sub/dir", "max-iterations": "3", "github-token": "t", "comment": "new",
		}, prompt: "do it", want: []string{
			"--agent=codex", "--prompt=do it", "--until=go test ./...", "--max-iterations=3", "--timeout=45m",
			"--allow-host=a.example:443", "--allow-host=b.example", "--allow-host=c.example",
			"--agent-arg=--verbose", "--agent-arg=--foo=bar baz", "--workdir=/ws/sub/dir", "--no-config", "--output=/tmp/doc.json"}},
		{name: "a named config file", inputs: map[string]string{"config": "ci/goalrun.yml"}, want: []string{"--config=/ws/ci/goalrun.yml", "--output=/tmp/doc.json"}},
		{name: "minutes must be whole", inputs: map[string]string{"timeout-minutes": "1.5"}, err: "timeout-minutes"},
		{name: "working directory stays inside", inputs: map[string]string{"working-directory": "../../etc"}, err: "leaves the workspace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"GITHUB_WORKSPACE": "/ws"}
			for k, v := range tc.inputs {
				env["INPUT_"+strings.ToUpper(k)] = v
			}
			getenv := func(k string) string { return env[k] }
			a := &action{getenv: getenv, gha: githubactions.New(githubactions.WithGetenv(getenv)), docPath: "/tmp/doc.json"}
			got, err := a.runArgs(tc.prompt)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one about %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("args =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
