package ghreport

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sethvargo/go-githubactions"

	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/report/ghreport/githubtest"
)

// noWait retries without sleeping (except go-github's own secondary-limit
// block, which the fake's Retry-After keeps at a second).
var noWait = Retry{Sleep: func(context.Context, time.Duration) error { return nil }}

func ptr[T any](v T) *T { return &v }

func passedDoc() report.Document {
	s := "Fixed Sum."
	return report.Document{
		Schema: report.Schema, Status: report.StatusSuccess, Conclusion: report.ConclusionSuccess, Summary: &s,
		Goal: &report.Goal{Check: "go test ./...", Passed: true, Grounded: true, Iterations: 2},
		Iterations: []report.Iteration{
			{N: 0, Check: &report.CheckResult{ExitCode: 1, Seconds: 2.1}},
			{N: 1, Agent: &report.AgentStep{Status: "success", Turns: 3, Seconds: 40}, Check: &report.CheckResult{ExitCode: 1, Seconds: 2}},
			{N: 2, Agent: &report.AgentStep{Status: "success", Turns: 2, Seconds: 19.5}, Check: &report.CheckResult{Passed: true, Seconds: 2.2}},
		},
		IterationsOmitted: ptr(0),
		Agent:             &report.AgentInfo{Name: "command", SessionID: "sess-1"},
		Usage:             &report.Usage{CostUSD: 0.41},
		Changes:           &report.Changes{FilesChanged: 1, Insertions: 1, Deletions: 1},
	}
}

func failedDoc() report.Document {
	d := passedDoc()
	d.Conclusion = report.ConclusionFailure
	d.Goal = &report.Goal{Check: "go test ./...", Passed: false, Grounded: false, Iterations: 5, Halt: ptr(report.HaltMaxIterations)}
	return d
}

func newFake(t *testing.T) (*githubtest.Server, string) {
	t.Helper()
	s := githubtest.NewServer(t, "octo-org/demo")
	sha := s.Seed("main", map[string]githubtest.File{"go.mod": {Content: []byte("module demo\n")}}, "init")
	return s, sha
}

func TestCheckRunLifecycle(t *testing.T) {
	ctx := context.Background()
	s, sha := newFake(t)
	big := strings.Repeat("é", 50000) // 100000 bytes: must be capped to 65535 bytes
	c := &CheckRun{Client: s.Client("t"), Owner: "octo-org", Repo: "demo", Name: "goalrun", HeadSHA: sha,
		MaxIterations: 5, Retry: noWait, Render: func(report.Document) string { return big }}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c.Emit(report.Event{Type: report.EventGoalEvaluated, Data: map[string]any{"iteration": 1, "met": false}})
	waitFor(t, func() bool {
		runs := s.CheckRuns()
		return len(runs) == 1 && runs[0].Title == "iteration 1/5: check failing"
	})
	c.Emit(report.Event{Type: report.EventText, Message: "ignored"})
	c.Emit(report.Event{Type: report.EventGoalEvaluated, Data: map[string]any{"iteration": float64(2), "met": true}})
	waitFor(t, func() bool { return s.CheckRuns()[0].Title == "iteration 2/5: check passing" })
	if err := c.Publish(ctx, passedDoc()); err != nil {
		t.Fatal(err)
	}
	run := s.CheckRuns()[0]
	if run.HeadSHA != sha || run.Status != "completed" || run.Conclusion != "success" {
		t.Fatalf("run = %+v", run)
	}
	if strings.Join(run.Statuses, ",") != "in_progress,completed" {
		t.Errorf("statuses = %v", run.Statuses)
	}
	if len(run.Summary) > CheckSummaryBytes || len(run.Summary) < CheckSummaryBytes-200 {
		t.Errorf("summary is %d bytes, want close to and at most %d", len(run.Summary), CheckSummaryBytes)
	}
	if run.Title != report.Headline(passedDoc()) {
		t.Errorf("title = %q", run.Title)
	}
	for _, r := range s.Requests() {
		if r.Status >= 400 {
			t.Errorf("%s %s answered %d: %s", r.Method, r.Path, r.Status, r.Body)
		}
	}
	// After Publish, Cancel and further events do nothing.
	c.Emit(report.Event{Type: report.EventGoalEvaluated, Data: map[string]any{"iteration": 3}})
	if err := c.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(s.RequestsFor("checks/update")); n != 3 {
		t.Errorf("%d updates, want 3 (two titles, one completion)", n)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCheckRunCancel(t *testing.T) {
	ctx := context.Background()
	s, sha := newFake(t)
	c := &CheckRun{Client: s.Client("t"), Owner: "octo-org", Repo: "demo", Name: "goalrun", HeadSHA: sha, Retry: noWait}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel() // the run's context is gone: Cancel must use its own
	if err := c.Cancel(context.WithoutCancel(cctx)); err != nil {
		t.Fatal(err)
	}
	if run := s.CheckRuns()[0]; run.Status != "completed" || run.Conclusion != "cancelled" {
		t.Errorf("run = %+v", run)
	}
}

func TestCheckRunForbidden(t *testing.T) {
	ctx := context.Background()
	s, sha := newFake(t)
	s.Fail("checks/create", githubtest.Forbidden())
	c := &CheckRun{Client: s.Client("t"), Owner: "octo-org", Repo: "demo", Name: "goalrun", HeadSHA: sha, Retry: noWait}
	err := c.Start(ctx)
	if !IsPermission(err) || !strings.Contains(err.Error(), `"checks: write"`) || !strings.Contains(err.Error(), "Resource not accessible by integration") {
		t.Fatalf("Start = %v, want a permission error naming checks: write", err)
	}
	c.Emit(report.Event{Type: report.EventGoalEvaluated, Data: map[string]any{"iteration": 1}})
	if err := c.Publish(ctx, passedDoc()); !IsPermission(err) {
		t.Errorf("first Publish = %v, want the start error", err)
	}
	if err := c.Publish(ctx, passedDoc()); err != nil {
		t.Errorf("second Publish = %v, want nil (already reported)", err)
	}
	if n := len(s.RequestsFor("checks/create")); n != 1 {
		t.Errorf("403 was retried: %d creates", n)
	}
	if n := len(s.RequestsFor("checks/update")); n != 0 {
		t.Errorf("%d updates after a failed create", n)
	}
}

func TestRetry(t *testing.T) {
	ctx := context.Background()
	t.Run("5xx then success", func(t *testing.T) {
		s, sha := newFake(t)
		s.Fail("checks/create", githubtest.ServerError(2))
		var waits []time.Duration
		r := Retry{Base: 100 * time.Millisecond, Sleep: func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }}
		c := &CheckRun{Client: s.Client("t"), Owner: "octo-org", Repo: "demo", Name: "g", HeadSHA: sha, Retry: r}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if len(waits) != 2 || waits[0] != 100*time.Millisecond || waits[1] != 200*time.Millisecond {
			t.Errorf("waits = %v, want [100ms 200ms]", waits)
		}
		_ = c.Cancel(ctx)
	})
	t.Run("5xx forever is bounded", func(t *testing.T) {
		s, sha := newFake(t)
		s.Fail("checks/create", githubtest.ServerError(0))
		c := &CheckRun{Client: s.Client("t"), Owner: "octo-org", Repo: "demo", Name: "g", HeadSHA: sha, Retry: Retry{Attempts: 4, Sleep: noWait.Sleep}}
		if err := c.Start(ctx); err == nil {
			t.Fatal("no error")
		}
		if n := len(s.RequestsFor("checks/create")); n != 4 {
			t.Errorf("%d attempts, want 4", n)
		}
	})
	t.Run("secondary rate limit honours Retry-After", func(t *testing.T) {
		s, sha := newFake(t)
		s.Fail("checks/create", githubtest.SecondaryRateLimit(time.Second, 1))
		var waits []time.Duration
		r := Retry{Sleep: func(ctx context.Context, d time.Duration) error { waits = append(waits, d); time.Sleep(d); return nil }}
		c := &CheckRun{Client: s.Client("t"), Owner: "octo-org", Repo: "demo", Name: "g", HeadSHA: sha, Retry: r}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if len(waits) != 1 || waits[0] != time.Second {
			t.Errorf("waits = %v, want [1s]", waits)
		}
		_ = c.Cancel(ctx)
	})
	t.Run("Retry-After beyond the budget gives up", func(t *testing.T) {
		s, sha := newFake(t)
		s.Fail("checks/create", githubtest.SecondaryRateLimit(time.Hour, 0))
		c := &CheckRun{Client: s.Client("t"), Owner: "octo-org", Repo: "demo", Name: "g", HeadSHA: sha, Retry: Retry{MaxWait: time.Minute, Sleep: noWait.Sleep}}
		err := c.Start(ctx)
		if err == nil || !strings.Contains(err.Error(), "retry budget") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestComment(t *testing.T) {
	ctx := context.Background()
	render := func(d report.Document) string { return "report: " + d.Conclusion }
	t.Run("sticky finds its marker on a later page and edits it", func(t *testing.T) {
		s, _ := newFake(t)
		for i := 0; i < 130; i++ {
			s.AddComment(17, "someone", "NONE", "chatter")
		}
		// A person quoting the marker is never edited.
		s.AddComment(17, "troll", "NONE", Marker("goalrun")+"\nfake")
		c := &Comment{Client: s.Client("t"), Owner: "octo-org", Repo: "demo", Number: 17, Mode: CommentSticky, Key: "goalrun", Retry: noWait, Render: render}
		if err := c.Publish(ctx, failedDoc()); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 40; i++ {
			s.AddComment(17, "someone", "NONE", "more chatter")
		}
		if err := c.Publish(ctx, passedDoc()); err != nil {
			t.Fatal(err)
		}
		var ours []githubtest.Comment
		for _, cm := range s.Comments(17) {
			if cm.Login == githubtest.TokenLogin {
				ours = append(ours, cm)
			}
		}
		if len(ours) != 1 || ours[0].Edits != 1 || !strings.HasSuffix(ours[0].Body, "report: success") || !strings.HasPrefix(ours[0].Body, Marker("goalrun")) {
			t.Fatalf("goalrun's comments = %+v", ours)
		}
		if c.URL == "" {
			t.Error("URL not set")
		}
		if n := len(s.RequestsFor("issues/list-comments")); n != 2+2 {
			t.Errorf("%d list requests, want 4 (2 pages each time)", n)
		}
	})
	t.Run("sticky keys keep a matrix apart", func(t *testing.T) {
		s, _ := newFake(t)
		s.AddIssue(17)
		for _, key := range []string{"goalrun (calc)", "goalrun (web)", "goalrun (calc)"} {
			c := &Comment{Client: s.Client("t"), Owner: "octo-org", Repo: "demo", Number: 17, Mode: CommentSticky, Key: key, Retry: noWait, Render: render}
			if err := c.Publish(ctx, passedDoc()); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(s.Comments(17)); n != 2 {
			t.Errorf("%d comments, want 2", n)
		}
	})
	t.Run("new mode adds a comment each time", func(t *testing.T) {
		s, _ := newFake(t)
		s.AddIssue(17)
		c := &Comment{Client: s.Client("t"), Owner: "octo-org", Repo: "demo", Number: 17, Mode: CommentNew, Key: "goalrun", Retry: noWait, Render: render}
		for i := 0; i < 2; i++ {
			if err := c.Publish(ctx, passedDoc()); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(s.Comments(17)); n != 2 {
			t.Errorf("%d comments, want 2", n)
		}
	})
	t.Run("body capped at 65536 bytes", func(t *testing.T) {
		s, _ := newFake(t)
		s.AddIssue(17)
		huge := func(report.Document) string { return strings.Repeat("ü", 40000) } // 40000 chars: GitHub would accept it, 80000 bytes: we cap
		c := &Comment{Client: s.Client("t"), Owner: "octo-org", Repo: "demo", Number: 17, Mode: CommentSticky, Key: "k", Retry: noWait, Render: huge}
		if err := c.Publish(ctx, passedDoc()); err != nil {
			t.Fatal(err)
		}
		if b := s.Comments(17)[0].Body; len(b) > CommentBodyBytes || !strings.Contains(b, "truncated") {
			t.Errorf("body is %d bytes", len(b))
		}
	})
	t.Run("403 is a permission error", func(t *testing.T) {
		s, _ := newFake(t)
		s.AddIssue(17)
		s.Fail("issues/create-comment", githubtest.Forbidden())
		c := &Comment{Client: s.Client("t"), Owner: "octo-org", Repo: "demo", Number: 17, Mode: CommentNew, Retry: noWait, Render: render}
		if err := c.Publish(ctx, passedDoc()); !IsPermission(err) || !strings.Contains(err.Error(), "pull-requests: write") {
			t.Errorf("err = %v", err)
		}
	})
}

func TestStepSummary(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "summary.md")
	// The real rendering: report's markdown with its mermaid timings chart.
	s := &StepSummary{Path: path, Notes: []string{"the check run could not be created: 403"}}
	if err := s.Publish(ctx, passedDoc()); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	// The warning note first, then report's own rendering with its mermaid
	// chart, byte for byte (report's tests own how that rendering looks).
	want := "> [!WARNING]\n> the check run could not be created: 403\n\n" +
		report.MarkdownWith(passedDoc(), report.MarkdownOptions{Mermaid: true}) + "\n"
	if string(got) != want {
		t.Errorf("job summary =\n%s\nwant\n%s", got, want)
	}
	if !strings.Contains(string(got), "```mermaid") {
		t.Error("no mermaid chart in the job summary")
	}

	// A summary file already near 1 MiB: what we add keeps it within.
	full := filepath.Join(dir, "full.md")
	if err := os.WriteFile(full, bytes.Repeat([]byte("x"), StepSummaryBytes-100), 0o644); err != nil {
		t.Fatal(err)
	}
	s2 := &StepSummary{Path: full, Render: func(report.Document) string { return strings.Repeat("y", 5000) }}
	if err := s2.Publish(ctx, passedDoc()); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(full); fi.Size() > StepSummaryBytes {
		t.Errorf("summary file is %d bytes, over %d", fi.Size(), StepSummaryBytes)
	}
	if err := (&StepSummary{}).Publish(ctx, passedDoc()); err == nil {
		t.Error("no error without GITHUB_STEP_SUMMARY")
	}
}

// TestOutputsCannotBeInjected writes outputs whose values try every trick
// against the GITHUB_OUTPUT heredoc format and parses the file as the
// runner does: exactly the declared outputs, with exactly their values.
func TestOutputsCannotBeInjected(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "output")
	env := map[string]string{"GITHUB_OUTPUT": out}
	a := githubactions.New(githubactions.WithGetenv(func(k string) string { return env[k] }), githubactions.WithWriter(&bytes.Buffer{}))
	evil := "EOF\npassed=true\n::set-output name=grounded::true\n_GitHubActionsFileCommandDelimeter_\nghadelimiter_\ngrounded<<EOF\ntrue\nEOF"
	values := OutputValues(failedDoc(), "/tmp/doc.json", "")
	values["session-id"] = evil
	values["halt"] = "max_iterations\nconclusion=success"
	if err := (OutputsFile{Action: a}).SetAll(values); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(out)
	entries, err := githubtest.ParseFileCommand(string(data))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range entries {
		if _, dup := got[e[0]]; dup {
			t.Errorf("output %s set twice", e[0])
		}
		got[e[0]] = e[1]
	}
	if len(got) != len(Outputs) {
		t.Errorf("parsed %d outputs, want %d: %v", len(got), len(Outputs), got)
	}
	for _, name := range Outputs {
		if got[name] != values[name] {
			t.Errorf("output %s = %q, want %q", name, got[name], values[name])
		}
	}
	if got["passed"] != "false" || got["grounded"] != "false" {
		t.Errorf("injected: passed=%q grounded=%q", got["passed"], got["grounded"])
	}
	// Unset GITHUB_OUTPUT: an error, not a panic.
	a2 := githubactions.New(githubactions.WithGetenv(func(string) string { return "" }))
	if err := (OutputsFile{Action: a2}).Set("status", "x"); err == nil {
		t.Error("no error without GITHUB_OUTPUT")
	}
	// An unwritable GITHUB_OUTPUT: an error, not a panic.
	env["GITHUB_OUTPUT"] = filepath.Join(dir, "missing-dir", "output")
	if err := (OutputsFile{Action: a}).Set("status", "x"); err == nil {
		t.Error("no error for an unwritable GITHUB_OUTPUT")
	}
	probs := CheckFileCommands(func(k string) string { return env[k] })
	if probs["GITHUB_OUTPUT"] == nil || probs["GITHUB_STEP_SUMMARY"] == nil {
		t.Errorf("CheckFileCommands = %v", probs)
	}
}

// TestOutputValues: each output's meaning as action.yml states it, for a
// verified pass, a pass on a modified check, a goal not met, a startup
// error (no run started: every verdict output empty) and a check that could
// not run (a run started: iterations "0").
func TestOutputValues(t *testing.T) {
	modified := passedDoc()
	modified.Conclusion = report.ConclusionNeutral
	modified.Changes = &report.Changes{FilesChanged: 2, CheckModified: true, RiskyPaths: []string{"calc_test.go"}}
	notMet := failedDoc()
	notMet.Changes = &report.Changes{FilesChanged: 1}
	notRunnable := report.Document{Schema: report.Schema, Status: report.StatusError, Conclusion: report.ConclusionFailure,
		Error: report.ErrCheckNotRunnable, Goal: &report.Goal{Check: "make test"}}
	startup := report.Document{Schema: report.Schema, Status: report.StatusError, Conclusion: report.ConclusionFailure, Error: report.ErrBadInput}
	for _, tc := range []struct {
		name string
		doc  report.Document
		want map[string]string
	}{
		{"verified pass", passedDoc(), map[string]string{"verified": "true", "status": "success", "conclusion": "success", "passed": "true",
			"grounded": "true", "check-modified": "false", "files-changed": "1", "iterations": "2", "halt": "", "session-id": "sess-1",
			"cost-usd": "0.41", "document": "/d.json", "pr-url": "https://pr"}},
		{"pass on a modified check", modified, map[string]string{"verified": "false", "conclusion": "neutral", "passed": "true",
			"grounded": "true", "check-modified": "true", "files-changed": "2"}},
		{"goal not met", notMet, map[string]string{"verified": "false", "status": "success", "conclusion": "failure", "passed": "false",
			"check-modified": "false", "files-changed": "1", "halt": "max_iterations"}},
		{"check not runnable", notRunnable, map[string]string{"verified": "false", "status": "error", "passed": "false", "iterations": "0"}},
		{"no run started", startup, map[string]string{"verified": "", "status": "error", "conclusion": "failure", "passed": "",
			"grounded": "", "check-modified": "", "files-changed": "", "iterations": "", "halt": ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := OutputValues(tc.doc, "/d.json", "https://pr")
			if len(v) != len(Outputs) {
				t.Errorf("%d outputs, want %d", len(v), len(Outputs))
			}
			for k, w := range tc.want {
				if v[k] != w {
					t.Errorf("%s = %q, want %q", k, v[k], w)
				}
			}
		})
	}
}

// TestLogStopCommands: untrusted output is wrapped in a stop-commands
// region with a random token; goalrun's own commands resume first.
func TestLogStopCommands(t *testing.T) {
	var buf bytes.Buffer
	l := NewLog(&buf)
	a := githubactions.New(githubactions.WithWriter(l.Commands()))
	a.AddMask("s3cret-value")
	_, _ = l.Untrusted().Write([]byte("agent says ::warning::pwned\n::add-mask::x"))
	a.Warningf("check run: 403")
	_, _ = l.Untrusted().Write([]byte("more agent output\n"))
	_ = l.Close()
	tok := l.Token()
	if len(tok) != 32 {
		t.Fatalf("token %q", tok)
	}
	want := "::add-mask::s3cret-value\n" +
		"::stop-commands::" + tok + "\nagent says ::warning::pwned\n::add-mask::x\n::" + tok + "::\n" +
		"::warning::check run: 403\n" +
		"::stop-commands::" + tok + "\nmore agent output\n::" + tok + "::\n"
	if buf.String() != want {
		t.Errorf("log =\n%s\nwant\n%s", buf.String(), want)
	}
	if NewLog(&buf).Token() == tok {
		t.Error("tokens repeat")
	}
}

func TestMask(t *testing.T) {
	var buf bytes.Buffer
	a := githubactions.New(githubactions.WithWriter(&buf))
	Mask(a, "ghs_abcdef", "", "ab", "line-one\nline-two\r\nx")
	want := "::add-mask::ghs_abcdef\n::add-mask::line-one\n::add-mask::line-two\n"
	if buf.String() != want {
		t.Errorf("got %q, want %q", buf.String(), want)
	}
}

type failingPub struct{ err error }

func (f failingPub) Publish(context.Context, report.Document) error { return f.err }

type panickingPub struct{}

func (panickingPub) Publish(context.Context, report.Document) error { panic("boom") }

type recordingPub struct {
	mu   sync.Mutex
	docs []report.Document
}

func (r *recordingPub) Publish(_ context.Context, d report.Document) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.docs = append(r.docs, d)
	return nil
}

func TestPublishIsolatesFailures(t *testing.T) {
	rec := &recordingPub{}
	errs := Publish(context.Background(), passedDoc(), failingPub{errors.New("403")}, panickingPub{}, nil, rec)
	if len(errs) != 2 || !strings.Contains(errs[1].Error(), "panicked") {
		t.Errorf("errs = %v", errs)
	}
	if len(rec.docs) != 1 || rec.docs[0].Conclusion != report.ConclusionSuccess {
		t.Errorf("the last publisher got %v", rec.docs)
	}
}
