package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sethvargo/go-githubactions"
	"gopkg.in/yaml.v3"

	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/report/ghreport"
	"github.com/goalrun/goalrun/report/ghreport/githubtest"
	"github.com/goalrun/goalrun/report/reporttest"
	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/dockertest"
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

// fakeMergeSHA stands for GITHUB_SHA on pull_request events: GitHub's merge
// commit, which the fake GitHub does not hold.
const fakeMergeSHA = "ffffffffffffffffffffffffffffffffffffffff"

func newRunner(t *testing.T, srv *githubtest.Server, event, payloadFile string, patch func(map[string]any), inputs map[string]string) *runner {
	t.Helper()
	tmp := t.TempDir()
	r := &runner{t: t, srv: srv, workspace: filepath.Join(tmp, "workspace"), env: map[string]string{}}
	copyDir(t, filepath.Join("..", "..", "examples", "demo"), r.workspace)
	var payload map[string]any
	b, err := os.ReadFile(filepath.Join("..", "..", "report", "ghreport", "testdata", "events", payloadFile))
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
	if strings.HasPrefix(event, "pull_request") && event != "pull_request_target" {
		// GitHub's merge commit of the pull request into its base, which a
		// workspace without .git is taken to hold (readTested).
		r.env["GITHUB_SHA"] = fakeMergeSHA
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

// checkout makes the workspace a git work tree holding commit sha as
// actions/checkout leaves it: detached (a pull request's ref, a commit)
// when branch is "", else on branch. Only what goalrun reads is written:
// .git/HEAD and the branch's ref.
func (r *runner) checkout(sha, branch string) {
	r.t.Helper()
	git := filepath.Join(r.workspace, ".git")
	head := sha + "\n"
	if branch != "" {
		head = "ref: refs/heads/" + branch + "\n"
		ref := filepath.Join(git, "refs", "heads", filepath.FromSlash(branch))
		if err := os.MkdirAll(filepath.Dir(ref), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(ref, []byte(sha+"\n"), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	if err := os.MkdirAll(git, 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(git, "HEAD"), []byte(head), 0o644); err != nil {
		r.t.Fatal(err)
	}
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
	if run.Name != "goalrun verdict" {
		t.Errorf("check run named %q: the default must differ from the job's own check (minimal.yml's job is goalrun)", run.Name)
	}
	if run.HeadSHA != head || run.HeadSHA == base {
		t.Errorf("check run on %s, want the pull request head %s", run.HeadSHA, head)
	}
	// The agent fixed calc.go: the head's own code failed the check, so
	// its check run asks for the fix (action_required), never success.
	if strings.Join(run.Statuses, ",") != "in_progress,completed" || run.Conclusion != "action_required" {
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
	if nlive == 0 || run.Titles[len(run.Titles)-1] != "goal met only with the agent's change to 1 file, which this commit does not hold" {
		t.Errorf("titles %q: want live iteration titles, then what the commit lacks", run.Titles)
	}
	if run.DetailsURL != "https://github.example/octo-org/demo/actions/runs/4242" {
		t.Errorf("details_url = %q", run.DetailsURL)
	}
	if !strings.Contains(run.Summary, "goalrun/1 document") || len(run.Summary) > ghreport.CheckSummaryBytes {
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
		"verified": "true", "check-modified": "false", "files-changed": "1", "iterations": "2", "halt": "", "pr-url": ""} {
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
	// The chart depends on the steps' durations (report's own tests cover
	// when it is drawn); the report around it does not.
	summary, _ := os.ReadFile(r.summary)
	for _, w := range []string{"goal met", "**Next step:** The change is not kept", "| calc.go | modified |", "<summary>Diff ("} {
		if !bytes.Contains(summary, []byte(w)) {
			t.Errorf("job summary lacks %q:\n%s", w, summary)
		}
	}
	comments := srv.Comments(17)
	if len(comments) != 1 || !strings.HasPrefix(comments[0].Body, ghreport.Marker(defaultCheckName)) {
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

// TestActionCheckRunForbidden: a 403 on check-run creation (a workflow
// without checks: write): the goal alone decides the exit code, the job
// summary holds the report, a warning names the missing permission in plain
// words (no API address, no trailing "[]").
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
			r := newRunner(t, srv, "pull_request", "pull_request.opened.json", setHead(head), inputs)
			res := r.run()
			if res.code != tc.code {
				t.Fatalf("exit %d, want %d\n%s", res.code, tc.code, res.stdout)
			}
			warn := regexp.MustCompile(`(?m)^::warning::could not create the check run: the token lacks the "checks: write" permission .*GitHub answered 403 Forbidden: Resource not accessible by integration;`)
			if !warn.Match(res.stdout) {
				t.Errorf("no warning naming the checks: write permission:\n%s", res.stdout)
			}
			for _, line := range strings.Split(string(res.stdout), "\n") {
				if strings.HasPrefix(line, "::warning::") && (strings.Contains(line, "/api/v3/") || strings.Contains(line, " []")) {
					t.Errorf("a warning quotes an API address or an empty error list: %s", line)
				}
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

// TestActionForkPullRequest: a pull request from a fork is detected from
// the payload; goalrun makes none of the writes its read-only token cannot
// make (no check run, comment or pull request request at all), says so in
// one notice, and puts the report in the job summary.
func TestActionForkPullRequest(t *testing.T) {
	srv := githubtest.NewServer(t, "octo-org/demo")
	head := seedDemo(t, srv)
	srv.AddIssue(17)
	srv.Fail("checks/create", githubtest.Forbidden())
	srv.Fail("issues/create-comment", githubtest.Forbidden())
	inputs := map[string]string{"agent": "command", "agent-bin": "sh fix.sh", "until": "go test ./...", "sandbox": "local",
		"max-iterations": "2", "prompt": "fix it", "open-pr": "true"}
	r := newRunner(t, srv, "pull_request", "pull_request.fork.json", setHead(head), inputs)
	res := r.run()
	if res.code != exitMet {
		t.Fatalf("exit %d\n%s", res.code, res.stdout)
	}
	notice := regexp.MustCompile(`(?m)^::notice::pull request #\d+ comes from the fork \S+: GitHub gives this workflow a read-only token`)
	if n := len(notice.FindAll(res.stdout, -1)); n != 1 {
		t.Errorf("%d fork notices, want 1:\n%s", n, res.stdout)
	}
	if regexp.MustCompile(`(?m)^::warning::`).Match(res.stdout) {
		t.Errorf("warnings for writes that were never tried:\n%s", res.stdout)
	}
	for _, req := range srv.Requests() {
		if req.Method != http.MethodGet {
			t.Errorf("a write was tried: %s %s", req.Method, req.Path)
		}
	}
	summary, _ := os.ReadFile(r.summary)
	if !bytes.Contains(summary, []byte("goalrun/1 document")) || !bytes.Contains(summary, []byte("[!NOTE]")) || !bytes.Contains(summary, []byte("read-only token")) {
		t.Errorf("job summary lacks the report or the notice:\n%s", summary)
	}
	if out := r.outputs(); out["verified"] != "true" {
		t.Errorf("outputs %v", out)
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
			strings.Contains(c[0].Body, ghreport.Marker("goalrun")) {
			t.Errorf("reply = %+v", c)
		}
		if out := r.outputs(); out["status"] != "skipped" || out["passed"] != "" || out["verified"] != "" || out["conclusion"] != "" {
			t.Errorf("outputs = %v", out)
		}
	})
	t.Run("member", func(t *testing.T) {
		srv := githubtest.NewServer(t, "octo-org/demo")
		base := seedDemo(t, srv)
		head := srv.Seed("contrib", map[string]githubtest.File{"calc.go": {Content: []byte("package calc\n")}}, "head")
		srv.AddIssue(16)
		srv.SetPermission("maintainer-max", "write")
		if n := srv.AddPull("contrib", "main", "Fix Sum"); n != 17 {
			t.Fatalf("pull request #%d, want 17", n)
		}
		inputs := map[string]string{"agent": "command", "agent-bin": `printf '%s' "$GOALRUN_PROMPT" > ../prompt-seen; sh fix.sh`,
			"until": "go test ./...", "sandbox": "local", "prompt": "the default prompt"}
		r := newRunner(t, srv, "issue_comment", "issue_comment.pr.created.json", nil, inputs)
		r.env["GITHUB_SHA"] = base // issue_comment: the default branch, not the pull request
		r.checkout(head, "")       // the comment bot checks out refs/pull/17/head
		res := r.run()
		if res.code != exitMet {
			t.Fatalf("exit %d\n%s", res.code, res.stdout)
		}
		runs := srv.CheckRuns()
		if len(runs) != 1 || runs[0].HeadSHA != head || runs[0].Conclusion != "action_required" {
			t.Errorf("check runs = %+v, want one on the pull request head %s, action_required (the fix is not on it)", runs, head)
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
	if p.Head != "goalrun/"+ghreport.Slug("goalrun (calc)") || p.Base != "main" || p.Edits != 1 || !strings.Contains(p.Body, "goal met") {
		t.Errorf("pull = %+v", p)
	}
	files := srv.Files(srv.Ref("heads/goalrun/" + ghreport.Slug("goalrun (calc)")))
	if got := string(files["calc.go"].Content); !strings.Contains(got, "for i := 0; i < len(xs); i++") || strings.Contains(got, "len(xs)-1") {
		t.Errorf("committed calc.go is not the fix:\n%s", got)
	}
	if parents := srv.CommitParents(srv.Ref("heads/goalrun/" + ghreport.Slug("goalrun (calc)"))); len(parents) != 1 || parents[0] != base {
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
	// No run started: the verdict outputs are empty, never "false".
	if out := r.outputs(); out["status"] != "error" || out["conclusion"] != "failure" || out["verified"] != "" ||
		out["passed"] != "" || out["iterations"] != "" || out["files-changed"] != "" {
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

// TestActionSignals: a run interrupted by SIGTERM (a cancelled workflow),
// SIGINT, SIGHUP or SIGQUIT never leaves its check run in_progress: it
// completes as cancelled, and goalrun exits 130 within 5 seconds — also
// when the Docker Engine never answers the check's attach.
func TestActionSignals(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		hung bool // the Docker sandbox, its check's attach never answered
	}{{syscall.SIGTERM, false}, {syscall.SIGINT, false}, {syscall.SIGHUP, false}, {syscall.SIGQUIT, false}, {syscall.SIGTERM, true}} {
		sig := tc.sig
		name := sandbox.SignalName(sig)
		if tc.hung {
			name += " while the check's attach hangs"
		}
		t.Run(name, func(t *testing.T) {
			srv := githubtest.NewServer(t, "octo-org/demo")
			head := seedDemo(t, srv)
			srv.AddIssue(17)
			inputs := map[string]string{"agent": "command", "agent-bin": "sleep 60", "until": "exit 1", "sandbox": "local", "prompt": "wait"}
			var fw *dockertest.Forwarder
			if tc.hung {
				cli := engineClient(t)
				fw = dockertest.NewForwarder(t)
				fw.Stall(attachTo(cli, "-check-", true))
				inputs["sandbox"] = "docker"
			}
			r := newRunner(t, srv, "pull_request", "pull_request.opened.json", setHead(head), inputs)
			if tc.hung {
				r.env["DOCKER_HOST"] = fw.Host()
				r.env["TMPDIR"] = shortTempDir(t)
				if os.Getuid() == 0 {
					os.Chown(r.workspace, 1000, 1000)
				}
			}
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
				if !tc.hung && len(runs) == 1 && containsTitle(runs[0].Titles, "iteration 0/5: check failing") {
					break
				}
				if tc.hung && len(runs) == 1 && len(fw.Stalled()) > 0 {
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
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			err := cmd.Wait()
			took := time.Since(sent)
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
				t.Fatalf("exit: %v, want %d\n%s", err, exitInterrupted, out.String())
			}
			t.Logf("goalrun action ended %.1fs after %v", took.Seconds(), sig)
			if took > sandbox.InterruptBound {
				t.Errorf("goalrun action took %s after %v, more than %s", took, sig, sandbox.InterruptBound)
			}
			run := srv.CheckRuns()[0]
			if run.Status != "completed" || run.Conclusion != "cancelled" {
				t.Errorf("check run %s/%s after %v, want completed/cancelled", run.Status, run.Conclusion, sig)
			}
			if o := r.outputs(); o["status"] != "cancelled" || o["conclusion"] != "cancelled" {
				t.Errorf("outputs = %v", o)
			}
		})
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
			"mounts": "/opt/jdk-21\n/srv/tools, with a comma:/mnt/tools\n",
		}, prompt: "do it", want: []string{
			"--agent=codex", "--prompt=do it", "--until=go test ./...", "--max-iterations=3", "--timeout=45m",
			"--allow-host=a.example:443", "--allow-host=b.example", "--allow-host=c.example",
			"--mount=/opt/jdk-21", "--mount=/srv/tools, with a comma:/mnt/tools",
			"--agent-arg=--verbose", "--agent-arg=--foo=bar baz", "--workdir=/ws/sub/dir", "--no-config", "--output=/tmp/doc.json"}},
		{name: "a named config file", inputs: map[string]string{"config": "ci/goalrun.yml"}, want: []string{"--config=/ws/ci/goalrun.yml", "--output=/tmp/doc.json"}},
		{name: "budgets and the step timeout", inputs: map[string]string{"max-tokens": "200000", "max-cost-usd": "2.5", "step-timeout-minutes": "7"},
			want: []string{"--step-timeout=7m", "--max-cost-usd=2.5", "--max-tokens=200000", "--no-config", "--output=/tmp/doc.json"}},
		{name: "step minutes must be whole", inputs: map[string]string{"step-timeout-minutes": "0"}, err: "input step-timeout-minutes: \"0\" is not a positive whole number"},
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

// TestActionCheckRunCompletionRefused: when GitHub refuses to complete the
// check run, the action completes it with a minimal body or a replacement
// run (a warning); when nothing is accepted it says so as an error and a
// passing run's step fails (exit 3), since a required check left
// in_progress blocks the merge.
func TestActionCheckRunCompletionRefused(t *testing.T) {
	refuse := githubtest.Fault{Status: http.StatusUnprocessableEntity, Message: "Invalid request.", When: `"status":"completed"`}
	for _, tc := range []struct {
		name        string
		createFails bool
		code        int
		annotation  string
		runs        int
	}{
		{name: "replacement", code: exitMet, annotation: `(?m)^::warning::.*created completed \(action_required\) in its place`, runs: 2},
		{name: "left in_progress", createFails: true, code: exitRunFailed, annotation: `(?m)^::error::the check run is left in_progress`, runs: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := githubtest.NewServer(t, "octo-org/demo")
			head := seedDemo(t, srv)
			srv.AddIssue(17)
			r := newRunner(t, srv, "pull_request", "pull_request.opened.json", setHead(head),
				map[string]string{"agent": "command", "agent-bin": "sh fix.sh", "until": "go test ./...", "sandbox": "local", "prompt": "fix", "comment": "off"})
			srv.Fail("checks/update", refuse)
			if tc.createFails {
				srv.Fail("checks/create", refuse)
			}
			res := r.run()
			if res.code != tc.code {
				t.Fatalf("exit %d, want %d\n%s", res.code, tc.code, res.stdout)
			}
			if !regexp.MustCompile(tc.annotation).Match(res.stdout) {
				t.Errorf("no annotation matching %s:\n%s", tc.annotation, res.stdout)
			}
			runs := srv.CheckRuns()
			if len(runs) != tc.runs {
				t.Fatalf("%d check runs, want %d: %+v", len(runs), tc.runs, runs)
			}
			if tc.runs == 2 && (runs[1].Status != "completed" || runs[1].Conclusion != "action_required" || runs[1].HeadSHA != head) {
				t.Errorf("replacement run %+v", runs[1])
			}
			summary, _ := os.ReadFile(r.summary)
			if !bytes.Contains(summary, []byte("goalrun/1 document")) {
				t.Errorf("the job summary lacks the report:\n%s", summary)
			}
			if out := r.outputs(); out["conclusion"] != "success" {
				t.Errorf("conclusion output %q: the run's own verdict is unchanged", out["conclusion"])
			}
		})
	}
}

// TestCompositeInputs: the composite action passes its inputs as one JSON
// object in GOALRUN_INPUTS; they are read as INPUT_<NAME>, take precedence
// over the environment, hide any stray INPUT_* of the job, and an input
// action.yml does not declare is still refused by name.
func TestCompositeInputs(t *testing.T) {
	base := map[string]string{"INPUT_AGENT": "stray", "INPUT_NOT-DECLARED": "x", "PATH": "/bin"}
	for _, tc := range []struct {
		name, inputs string
		want         map[string]string
		wantNames    []string
		err          string
	}{
		{name: "unset: INPUT_* as they are", want: map[string]string{"INPUT_AGENT": "stray", "PATH": "/bin"}},
		{name: "inputs win, strays hidden", inputs: `{"agent":"codex","agent-bin":"","check-name":"goalrun (calc)"}`,
			want:      map[string]string{"INPUT_AGENT": "codex", "INPUT_AGENT-BIN": "", "INPUT_CHECK-NAME": "goalrun (calc)", "INPUT_NOT-DECLARED": "", "PATH": "/bin"},
			wantNames: []string{"INPUT_AGENT", "INPUT_AGENT-BIN", "INPUT_CHECK-NAME"}},
		{name: "not JSON", inputs: `{"agent":`, err: "not a JSON object"},
		{name: "not a string", inputs: `{"agent":["a"]}`, err: "input agent is not a string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			if tc.inputs != "" {
				env[compositeInputsEnv] = tc.inputs
			}
			got, names, err := compositeInputs(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for k, want := range tc.want {
				if v, _ := got(k); v != want {
					t.Errorf("%s = %q, want %q", k, v, want)
				}
			}
			if strings.Join(names, ",") != strings.Join(tc.wantNames, ",") {
				t.Errorf("names %v, want %v", names, tc.wantNames)
			}
		})
	}
	// End to end: an undeclared input in GOALRUN_INPUTS is bad input.
	srv := githubtest.NewServer(t, "octo-org/demo")
	head := seedDemo(t, srv)
	srv.AddIssue(17)
	r := newRunner(t, srv, "pull_request", "pull_request.opened.json", setHead(head), nil)
	for k := range r.env {
		if strings.HasPrefix(k, "INPUT_") {
			delete(r.env, k)
		}
	}
	r.env[compositeInputsEnv] = `{"until":"go test ./...","sandbox":"local","agent":"command","agent-bin":"sh fix.sh","github-token":"` + testToken + `","not-an-input":"x"}`
	res := r.run()
	if res.code != exitBadInput || !strings.Contains(string(res.stdout), "unknown input(s): not-an-input") {
		t.Errorf("exit %d, want %d naming the input:\n%s", res.code, exitBadInput, res.stdout)
	}
}

// TestActionPermissionGate: a /goalrun comment starts a run when the
// collaborator permission API gives its author write, maintain or admin —
// a private organisation's member arriving as CONTRIBUTOR included — and
// never for read or triage, whatever author_association says; when the API
// refuses, author_association decides and a warning says so.
func TestActionPermissionGate(t *testing.T) {
	for _, tc := range []struct {
		name, role string
		refuse     bool
		runs       bool
		warn       string
	}{
		{name: "CONTRIBUTOR with the write role", role: "write", runs: true},
		{name: "CONTRIBUTOR with the maintain role", role: "maintain", runs: true},
		{name: "CONTRIBUTOR with the triage role", role: "triage"},
		{name: "the API refuses: CONTRIBUTOR is refused", refuse: true, warn: "decided by the comment's author association (CONTRIBUTOR)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := githubtest.NewServer(t, "octo-org/demo")
			seedDemo(t, srv)
			srv.Seed("contrib", map[string]githubtest.File{"calc.go": {Content: []byte("package calc\n")}}, "head")
			srv.AddIssue(16)
			srv.AddPull("contrib", "main", "Fix Sum")
			if tc.role != "" {
				srv.SetPermission("contributor-jane", tc.role)
			}
			if tc.refuse {
				srv.Fail("repos/get-collaborator-permission-level", githubtest.Forbidden())
			}
			// The comment of issue_comment.pr.created.json, by its
			// CONTRIBUTOR author.
			patch := func(p map[string]any) {
				c := p["comment"].(map[string]any)
				c["user"].(map[string]any)["login"] = "contributor-jane"
				c["author_association"] = "CONTRIBUTOR"
			}
			r := newRunner(t, srv, "issue_comment", "issue_comment.pr.created.json", patch,
				map[string]string{"agent": "command", "agent-bin": "sh fix.sh; touch AGENT_RAN", "until": "go test ./...", "sandbox": "local"})
			res := r.run()
			if res.code != exitMet {
				t.Fatalf("exit %d\n%s", res.code, res.stdout)
			}
			_, err := os.Stat(filepath.Join(r.workspace, "AGENT_RAN"))
			if ran := err == nil; ran != tc.runs {
				t.Errorf("the agent ran: %v, want %v\n%s", ran, tc.runs, res.stdout)
			}
			if tc.warn != "" && !strings.Contains(string(res.stdout), tc.warn) {
				t.Errorf("no warning saying %q:\n%s", tc.warn, res.stdout)
			}
			if !tc.runs {
				c := srv.Comments(17)
				if len(c) == 0 || !strings.Contains(c[len(c)-1].Body, "did not start") {
					t.Errorf("no polite reply: %+v", c)
				}
			}
		})
	}
}

// TestActionPullUnreadable: when the pull request behind an issue_comment
// cannot be read, the warnings say that (403 as a permission, 404 as not
// found), never "GITHUB_SHA is unset".
func TestActionPullUnreadable(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault githubtest.Fault
		want  string
	}{
		{"403", githubtest.Forbidden(), "GitHub answered 403 Forbidden: Resource not accessible by integration"},
		{"404", githubtest.Fault{Status: http.StatusNotFound}, "GitHub answered 404 Not Found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := githubtest.NewServer(t, "octo-org/demo")
			seedDemo(t, srv)
			srv.AddIssue(17)
			srv.SetPermission("maintainer-max", "write")
			srv.Fail("pulls/get", tc.fault)
			r := newRunner(t, srv, "issue_comment", "issue_comment.pr.created.json", nil,
				map[string]string{"agent": "command", "agent-bin": "sh fix.sh", "until": "go test ./...", "sandbox": "local"})
			res := r.run()
			out := string(res.stdout)
			if !strings.Contains(out, "::warning::could not read pull request #17, whose head commit the check run belongs to: "+tc.want) {
				t.Errorf("no warning quoting GitHub's answer %q:\n%s", tc.want, out)
			}
			if !strings.Contains(out, "no commit to attach the check run to (pull request #17 could not be read)") || strings.Contains(out, "GITHUB_SHA is unset") {
				t.Errorf("the check-run warning does not give the real cause:\n%s", out)
			}
			if strings.Contains(out, "lacks the") && tc.name == "404" {
				t.Errorf("a 404 called a missing permission:\n%s", out)
			}
		})
	}
}

// TestActionFixPRBase: the fix pull request is based on the ref the run
// started from. A /goalrun comment with open-pr on a pull request opens a
// pull request into that pull request's head branch whose commit's parent
// is the head commit and which holds only the agent's change (never the
// pull request author's own files again); a workflow_dispatch from a branch
// uses that branch as the base and its commit as the parent.
func TestActionFixPRBase(t *testing.T) {
	demo := filepath.Join("..", "..", "examples", "demo")
	t.Run("comment on a pull request", func(t *testing.T) {
		srv := githubtest.NewServer(t, "octo-org/demo")
		seedDemo(t, srv)
		srv.Branch("contrib", "main")
		files := map[string]githubtest.File{"NOTES.md": {Content: []byte("the pull request author's own change\n")}}
		for _, f := range []string{"calc.go", "calc_test.go", "fix.sh", "go.mod"} {
			b, err := os.ReadFile(filepath.Join(demo, f))
			if err != nil {
				t.Fatal(err)
			}
			files[f] = githubtest.File{Content: b}
		}
		head := srv.Seed("contrib", files, "the author's commit")
		srv.AddIssue(16)
		if n := srv.AddPull("contrib", "main", "Notes"); n != 17 {
			t.Fatalf("pull request #%d, want 17", n)
		}
		srv.SetPermission("maintainer-max", "write")
		r := newRunner(t, srv, "issue_comment", "issue_comment.pr.created.json", nil,
			map[string]string{"agent": "command", "agent-bin": "sh fix.sh", "until": "go test ./...", "sandbox": "local", "open-pr": "true"})
		r.env["GITHUB_SHA"] = srv.Ref("heads/main") // issue_comment runs on the default branch
		r.checkout(head, "")                        // the comment bot checks out the pull request's head
		if err := os.WriteFile(filepath.Join(r.workspace, "NOTES.md"), files["NOTES.md"].Content, 0o644); err != nil {
			t.Fatal(err)
		}
		res := r.run()
		if res.code != exitMet {
			t.Fatalf("exit %d\n%s", res.code, res.stdout)
		}
		var fix *githubtest.Pull
		for _, p := range srv.Pulls() {
			if p.Number != 17 {
				fix = &p
			}
		}
		if fix == nil {
			t.Fatalf("no fix pull request: %+v\n%s", srv.Pulls(), res.stdout)
		}
		if !strings.Contains(fix.Body, "**Next step:** Review this pull request") || !strings.Contains(fix.Body, "| calc.go | modified |") {
			t.Errorf("the fix pull request's body:\n%s", fix.Body)
		}
		if fix.Base != "contrib" || !strings.Contains(fix.Head, "pr-17") {
			t.Errorf("fix pull request %s → %s, want into the pull request's head branch contrib", fix.Head, fix.Base)
		}
		tip := srv.Ref("heads/" + fix.Head)
		if parents := srv.CommitParents(tip); len(parents) != 1 || parents[0] != head {
			t.Errorf("fix commit parents %v, want the pull request's head %s", parents, head)
		}
		changed := changedFiles(srv, head, tip)
		if strings.Join(changed, ",") != "calc.go" {
			t.Errorf("the fix commit changes %v, want only the agent's calc.go", changed)
		}
	})
	t.Run("workflow_dispatch from a branch", func(t *testing.T) {
		srv := githubtest.NewServer(t, "octo-org/demo")
		seedDemo(t, srv)
		srv.Branch("dev", "main")
		dev, err := srv.SeedDir("dev", demo, "dev's own commit")
		if err != nil {
			t.Fatal(err)
		}
		r := newRunner(t, srv, "workflow_dispatch", "workflow_dispatch.json", nil,
			map[string]string{"agent": "command", "agent-bin": "sh fix.sh", "until": "go test ./...", "sandbox": "local", "open-pr": "true", "comment": "off"})
		r.env["GITHUB_SHA"], r.env["GITHUB_REF"], r.env["GITHUB_REF_NAME"] = dev, "refs/heads/dev", "dev"
		res := r.run()
		if res.code != exitMet {
			t.Fatalf("exit %d\n%s", res.code, res.stdout)
		}
		pulls := srv.Pulls()
		if len(pulls) != 1 || pulls[0].Base != "dev" {
			t.Fatalf("pulls %+v, want one into dev", pulls)
		}
		tip := srv.Ref("heads/" + pulls[0].Head)
		if parents := srv.CommitParents(tip); len(parents) != 1 || parents[0] != dev {
			t.Errorf("fix commit parents %v, want dev's commit %s", parents, dev)
		}
		if changed := changedFiles(srv, dev, tip); strings.Join(changed, ",") != "calc.go" {
			t.Errorf("the fix commit changes %v, want calc.go", changed)
		}
	})
}

// changedFiles lists the paths whose content differs between two commits.
func changedFiles(srv *githubtest.Server, a, b string) []string {
	fa, fb := srv.Files(a), srv.Files(b)
	var out []string
	for p, f := range fb {
		if g, ok := fa[p]; !ok || !bytes.Equal(g.Content, f.Content) || g.Mode != f.Mode {
			out = append(out, p)
		}
	}
	for p := range fa {
		if _, ok := fb[p]; !ok {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// TestActionCommentAcknowledged: an allowed /goalrun comment gets a
// reaction and a "working on it" reply naming who asked and what before
// the agent starts; that reply becomes the run's report (changed files,
// diff, links, next step); a second /goalrun gets its own reply and
// report, never overwriting the first's.
func TestActionCommentAcknowledged(t *testing.T) {
	srv := githubtest.NewServer(t, "octo-org/demo")
	seedDemo(t, srv)
	head := srv.Seed("contrib", map[string]githubtest.File{"calc.go": {Content: []byte("package calc\n")}}, "head")
	srv.AddIssue(16)
	srv.AddPull("contrib", "main", "Fix Sum")
	srv.SetPermission("maintainer-max", "write")
	var reports []githubtest.Comment
	for i, prompt := range []string{"make the tests in ./calc pass", "now make them pass again"} {
		patch := func(p map[string]any) {
			c := p["comment"].(map[string]any)
			c["body"] = "/goalrun " + prompt
			c["id"] = 9000 + i
		}
		// The agent records which comments existed when it started.
		r := newRunner(t, srv, "issue_comment", "issue_comment.pr.created.json", patch,
			map[string]string{"agent": "command", "agent-bin": "sh fix.sh", "until": "go test ./...", "sandbox": "local"})
		r.checkout(head, "") // refs/pull/17/head, as the comment bot checks out
		res := r.run()
		if res.code != exitMet {
			t.Fatalf("run %d: exit %d\n%s", i+1, res.code, res.stdout)
		}
		var ackAt, checkAt, ackID = -1, -1, int64(0)
		for j, req := range srv.Requests() {
			switch {
			case req.Operation == "issues/create-comment" && bytes.Contains(req.Body, []byte("is working on @maintainer-max")) && bytes.Contains(req.Body, []byte(prompt)):
				ackAt = j
			case req.Operation == "checks/create" && checkAt < 0 && j > ackAt && ackAt >= 0:
				checkAt = j
			}
		}
		if ackAt < 0 || checkAt < 0 {
			t.Fatalf("run %d: no \"working on it\" reply before the check run started (reply at %d, check run at %d)", i+1, ackAt, checkAt)
		}
		reactions := srv.Reactions()
		if len(reactions) != i+1 || reactions[i].CommentID != int64(9000+i) || reactions[i].Content != "eyes" {
			t.Errorf("reactions %+v", reactions)
		}
		comments := srv.Comments(17)
		if len(comments) != i+1 {
			t.Fatalf("run %d: %d comments, want one per trigger: %+v", i+1, len(comments), comments)
		}
		last := comments[i]
		ackID = last.ID
		for _, w := range []string{"Requested by [@maintainer-max]", prompt, "**Next step:**", "[job run](https://github.example/octo-org/demo/actions/runs/4242)",
			"| calc.go | modified |", "<summary>Diff (", "goalrun/1 document"} {
			if !strings.Contains(last.Body, w) {
				t.Errorf("run %d: the report (comment %d) lacks %q:\n%s", i+1, ackID, w, last.Body)
			}
		}
		if last.Edits != 1 {
			t.Errorf("run %d: the reply was edited %d times, want once (into the report)", i+1, last.Edits)
		}
		reports = comments
		copyDir(t, filepath.Join("..", "..", "examples", "demo"), r.workspace)
	}
	if !strings.Contains(reports[0].Body, "make the tests in ./calc pass") || strings.Contains(reports[0].Body, "now make them pass again") {
		t.Errorf("the second trigger overwrote the first's report:\n%s", reports[0].Body)
	}
}
