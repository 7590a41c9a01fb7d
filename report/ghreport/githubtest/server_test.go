package githubtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gh "github.com/google/go-github/v75/github"
)

func newRepo(t *testing.T) (*Server, *gh.Client, string) {
	t.Helper()
	s := NewServer(t, "octo-org/demo")
	sha := s.Seed("main", map[string]File{
		"go.mod":                   {Content: []byte("module example.com/demo\n")},
		"calc/sum.go":              {Content: []byte("package calc\n")},
		"scripts/fix.sh":           {Content: []byte("#!/bin/sh\n"), Mode: ModeExecutable},
		".github/workflows/ci.yml": {Content: []byte("on: push\n")},
	}, "initial")
	return s, s.Client("ghs_test"), sha
}

func statusOf(err error) int {
	var er *gh.ErrorResponse
	if errors.As(err, &er) {
		return er.Response.StatusCode
	}
	var ab *gh.AbuseRateLimitError
	if errors.As(err, &ab) {
		return ab.Response.StatusCode
	}
	return 0
}

func TestCheckRunRequests(t *testing.T) {
	ctx := context.Background()
	big := strings.Repeat("é", 40000) // 40000 characters, 80000 bytes: schema-valid, over the byte limit
	for _, tc := range []struct {
		name    string
		opts    gh.CreateCheckRunOptions
		status  int
		message string // substring of the error
	}{
		{"in progress", gh.CreateCheckRunOptions{Name: "goalrun", Status: gh.Ptr("in_progress")}, 201, ""},
		{"no status", gh.CreateCheckRunOptions{Name: "goalrun"}, 201, ""},
		{"completed needs conclusion", gh.CreateCheckRunOptions{Name: "goalrun", Status: gh.Ptr("completed")}, 422, "Invalid request"},
		{"completed with conclusion", gh.CreateCheckRunOptions{Name: "goalrun", Status: gh.Ptr("completed"), Conclusion: gh.Ptr("success")}, 201, ""},
		{"unknown status", gh.CreateCheckRunOptions{Name: "goalrun", Status: gh.Ptr("running")}, 422, "Invalid request"},
		{"stale", gh.CreateCheckRunOptions{Name: "goalrun", Status: gh.Ptr("completed"), Conclusion: gh.Ptr("stale")}, 422, "stale"},
		{"summary over 65535 bytes", gh.CreateCheckRunOptions{Name: "goalrun", Output: &gh.CheckRunOutput{Title: gh.Ptr("t"), Summary: gh.Ptr(big)}}, 422, "summary exceeds a maximum bytesize of 65535"},
		{"summary at 65535 bytes", gh.CreateCheckRunOptions{Name: "goalrun", Output: &gh.CheckRunOutput{Title: gh.Ptr("t"), Summary: gh.Ptr(strings.Repeat("a", 65535))}}, 201, ""},
		{"output without title", gh.CreateCheckRunOptions{Name: "goalrun", Output: &gh.CheckRunOutput{Summary: gh.Ptr("s")}}, 422, "Invalid request"},
		{"unknown head sha", gh.CreateCheckRunOptions{Name: "goalrun", HeadSHA: strings.Repeat("0", 40)}, 422, "No commit found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, c, sha := newRepo(t)
			if tc.status == 422 {
				s.AllowInvalidRequests() // sent on purpose
			}
			if tc.opts.HeadSHA == "" {
				tc.opts.HeadSHA = sha
			}
			run, _, err := c.Checks.CreateCheckRun(ctx, "octo-org", "demo", tc.opts)
			if got := statusOf(err); tc.status != 201 && got != tc.status {
				t.Fatalf("status = %d (err %v), want %d", got, err, tc.status)
			}
			if tc.status == 201 {
				if err != nil {
					t.Fatalf("create: %v", err)
				}
				if run.GetID() == 0 || run.GetHeadSHA() != sha {
					t.Fatalf("run = %+v", run)
				}
				if n := len(s.CheckRuns()); n != 1 {
					t.Fatalf("stored %d check runs, want 1", n)
				}
				return
			}
			if !strings.Contains(err.Error(), tc.message) {
				t.Errorf("error %q does not contain %q", err, tc.message)
			}
			if n := len(s.CheckRuns()); n != 0 {
				t.Errorf("an invalid request stored %d check runs", n)
			}
			if reqs := s.RequestsFor("checks/create"); len(reqs) != 1 || reqs[0].Status != tc.status {
				t.Errorf("recorded %+v", reqs)
			}
		})
	}
}

func TestValidateCheckRunRequestRaw(t *testing.T) {
	for _, tc := range []struct {
		name, op, body string
		ok             bool
	}{
		{"minimal create", "checks/create", `{"name":"g","head_sha":"abc"}`, true},
		{"create without head_sha", "checks/create", `{"name":"g"}`, false},
		{"started_at not a date-time", "checks/create", `{"name":"g","head_sha":"abc","started_at":"yesterday"}`, false},
		{"51 annotations", "checks/update", `{"output":{"summary":"s","annotations":[` + strings.TrimSuffix(strings.Repeat(`{"path":"a","start_line":1,"end_line":1,"annotation_level":"notice","message":"m"},`, 51), ",") + `]}}`, false},
		{"update completed without conclusion", "checks/update", `{"status":"completed"}`, false},
		{"update conclusion only", "checks/update", `{"conclusion":"neutral"}`, true},
		{"update text over 65535 bytes", "checks/update", `{"output":{"summary":"s","text":"` + strings.Repeat("ü", 32768) + `"}}`, false},
		{"not JSON", "checks/update", `{`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateCheckRunRequest(tc.op, []byte(tc.body))
			if (err == nil) != tc.ok {
				t.Errorf("ValidateCheckRunRequest = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestCheckRunLifecycle(t *testing.T) {
	ctx := context.Background()
	s, c, sha := newRepo(t)
	run, _, err := c.Checks.CreateCheckRun(ctx, "octo-org", "demo", gh.CreateCheckRunOptions{
		Name: "goalrun", HeadSHA: sha, Status: gh.Ptr("in_progress"),
		Output: &gh.CheckRunOutput{Title: gh.Ptr("starting"), Summary: gh.Ptr("…")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Checks.UpdateCheckRun(ctx, "octo-org", "demo", run.GetID(), gh.UpdateCheckRunOptions{
		Name: "goalrun", Output: &gh.CheckRunOutput{Title: gh.Ptr("iteration 1/5: check failing"), Summary: gh.Ptr("x")},
	}); err != nil {
		t.Fatal(err)
	}
	// A conclusion alone completes the run, as on GitHub.
	if _, _, err := c.Checks.UpdateCheckRun(ctx, "octo-org", "demo", run.GetID(), gh.UpdateCheckRunOptions{
		Name: "goalrun", Conclusion: gh.Ptr("success"),
		Output: &gh.CheckRunOutput{Title: gh.Ptr("goal met"), Summary: gh.Ptr("done")},
	}); err != nil {
		t.Fatal(err)
	}
	got := s.CheckRuns()[0]
	if want := []string{"in_progress", "completed"}; strings.Join(got.Statuses, ",") != strings.Join(want, ",") {
		t.Errorf("statuses = %v, want %v", got.Statuses, want)
	}
	if got.Conclusion != "success" || got.CompletedAt == "" || got.Updates != 2 {
		t.Errorf("run = %+v", got)
	}
	if want := "starting|iteration 1/5: check failing|goal met"; strings.Join(got.Titles, "|") != want {
		t.Errorf("titles = %q", got.Titles)
	}
	if _, _, err := c.Checks.UpdateCheckRun(ctx, "octo-org", "demo", 99, gh.UpdateCheckRunOptions{Name: "x"}); statusOf(err) != 404 {
		t.Errorf("update of an unknown run: %v, want 404", err)
	}
}

func TestFaults(t *testing.T) {
	ctx := context.Background()
	t.Run("forbidden", func(t *testing.T) {
		s, c, sha := newRepo(t)
		s.Fail("checks/create", Forbidden())
		_, _, err := c.Checks.CreateCheckRun(ctx, "octo-org", "demo", gh.CreateCheckRunOptions{Name: "g", HeadSHA: sha})
		if statusOf(err) != 403 || !strings.Contains(err.Error(), "Resource not accessible by integration") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("server error twice", func(t *testing.T) {
		s, c, sha := newRepo(t)
		s.Fail("checks/create", ServerError(2))
		for i, want := range []int{502, 502, 0} {
			_, _, err := c.Checks.CreateCheckRun(ctx, "octo-org", "demo", gh.CreateCheckRunOptions{Name: "g", HeadSHA: sha})
			if got := statusOf(err); got != want {
				t.Fatalf("attempt %d: status %d (%v), want %d", i, got, err, want)
			}
		}
	})
	t.Run("secondary rate limit", func(t *testing.T) {
		s, c, _ := newRepo(t)
		s.AddIssue(7)
		s.Fail("issues/create-comment", SecondaryRateLimit(3*time.Second, 1))
		_, _, err := c.Issues.CreateComment(ctx, "octo-org", "demo", 7, &gh.IssueComment{Body: gh.Ptr("hi")})
		var ab *gh.AbuseRateLimitError
		if !errors.As(err, &ab) || ab.RetryAfter == nil || *ab.RetryAfter != 3*time.Second {
			t.Fatalf("err = %#v, want an AbuseRateLimitError with RetryAfter 3s", err)
		}
	})
	t.Run("no token", func(t *testing.T) {
		s, _, sha := newRepo(t)
		c := gh.NewClient(nil)
		c.BaseURL, _ = url.Parse(s.URL + "/")
		_, _, err := c.Checks.CreateCheckRun(ctx, "octo-org", "demo", gh.CreateCheckRunOptions{Name: "g", HeadSHA: sha})
		if statusOf(err) != 401 {
			t.Fatalf("err = %v, want 401", err)
		}
	})
	t.Run("other repository", func(t *testing.T) {
		_, c, sha := newRepo(t)
		_, _, err := c.Checks.CreateCheckRun(ctx, "octo-org", "other", gh.CreateCheckRunOptions{Name: "g", HeadSHA: sha})
		if statusOf(err) != 404 {
			t.Fatalf("err = %v, want 404", err)
		}
	})
	t.Run("path prefix ignored", func(t *testing.T) {
		s, _, sha := newRepo(t)
		c := gh.NewClient(nil).WithAuthToken("x")
		c.BaseURL, _ = url.Parse(strings.TrimSuffix(s.URL, PathPrefix) + "/")
		_, _, err := c.Checks.CreateCheckRun(ctx, "octo-org", "demo", gh.CreateCheckRunOptions{Name: "g", HeadSHA: sha})
		if statusOf(err) != 404 {
			t.Fatalf("err = %v, want 404 for a client that drops GITHUB_API_URL's path", err)
		}
	})
}

func TestCommentsPaging(t *testing.T) {
	ctx := context.Background()
	s, c, _ := newRepo(t)
	for i := 0; i < 75; i++ {
		s.AddComment(12, "someone", "NONE", "comment")
	}
	opts := &gh.IssueListCommentsOptions{ListOptions: gh.ListOptions{PerPage: 30}}
	var seen, pages int
	for {
		cs, resp, err := c.Issues.ListComments(ctx, "octo-org", "demo", 12, opts)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		seen += len(cs)
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	if seen != 75 || pages != 3 {
		t.Errorf("saw %d comments on %d pages, want 75 on 3", seen, pages)
	}
	// Body limit: 65536 characters.
	if _, _, err := c.Issues.CreateComment(ctx, "octo-org", "demo", 12, &gh.IssueComment{Body: gh.Ptr(strings.Repeat("x", 65537))}); statusOf(err) != 422 || !strings.Contains(err.Error(), "Body is too long") {
		t.Errorf("long body: %v", err)
	}
	cm, _, err := c.Issues.CreateComment(ctx, "octo-org", "demo", 12, &gh.IssueComment{Body: gh.Ptr(strings.Repeat("x", 65536))})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Issues.EditComment(ctx, "octo-org", "demo", cm.GetID(), &gh.IssueComment{Body: gh.Ptr("edited")}); err != nil {
		t.Fatal(err)
	}
	got := s.Comments(12)
	if last := got[len(got)-1]; last.Body != "edited" || last.Edits != 1 || last.Login != TokenLogin {
		t.Errorf("last comment = %+v", last)
	}
	if _, _, err := c.Issues.ListComments(ctx, "octo-org", "demo", 999, nil); statusOf(err) != 404 {
		t.Errorf("comments of an unknown issue: %v, want 404", err)
	}
}

func TestGitDataAndPulls(t *testing.T) {
	ctx := context.Background()
	s, c, base := newRepo(t)
	content := []byte("package calc\n\nfunc Sum(a, b int) int { return a + b }\n")
	blob, _, err := c.Git.CreateBlob(ctx, "octo-org", "demo", gh.Blob{Content: gh.Ptr(string(content)), Encoding: gh.Ptr("utf-8")})
	if err != nil {
		t.Fatal(err)
	}
	if blob.GetSHA() != BlobSHA(content) {
		t.Fatalf("blob sha %s, want %s", blob.GetSHA(), BlobSHA(content))
	}
	baseCommit, _, err := c.Git.GetCommit(ctx, "octo-org", "demo", base)
	if err != nil {
		t.Fatal(err)
	}
	tree, _, err := c.Git.CreateTree(ctx, "octo-org", "demo", baseCommit.GetTree().GetSHA(), []*gh.TreeEntry{
		{Path: gh.Ptr("calc/sum.go"), Mode: gh.Ptr(ModeFile), Type: gh.Ptr("blob"), SHA: blob.SHA},
		{Path: gh.Ptr("go.mod"), Mode: gh.Ptr(ModeFile), Type: gh.Ptr("blob")}, // delete
	})
	if err != nil {
		t.Fatal(err)
	}
	commit, _, err := c.Git.CreateCommit(ctx, "octo-org", "demo", gh.Commit{
		Message: gh.Ptr("fix"), Tree: &gh.Tree{SHA: tree.SHA}, Parents: []*gh.Commit{{SHA: gh.Ptr(base)}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Git.GetRef(ctx, "octo-org", "demo", "refs/heads/goalrun/fix"); statusOf(err) != 404 {
		t.Fatalf("missing ref: %v, want 404", err)
	}
	if _, _, err := c.Git.CreateRef(ctx, "octo-org", "demo", gh.CreateRef{Ref: "refs/heads/goalrun/fix", SHA: commit.GetSHA()}); err != nil {
		t.Fatal(err)
	}
	ref, _, err := c.Git.GetRef(ctx, "octo-org", "demo", "refs/heads/goalrun/fix")
	if err != nil || ref.GetObject().GetSHA() != commit.GetSHA() {
		t.Fatalf("ref = %v, %v", ref, err)
	}
	files := s.Files(commit.GetSHA())
	if string(files["calc/sum.go"].Content) != string(content) {
		t.Errorf("calc/sum.go = %q", files["calc/sum.go"].Content)
	}
	if _, ok := files["go.mod"]; ok {
		t.Error("go.mod was not deleted")
	}
	if files["scripts/fix.sh"].Mode != ModeExecutable {
		t.Errorf("mode of scripts/fix.sh = %q", files["scripts/fix.sh"].Mode)
	}
	// A non-fast-forward update needs force.
	other := s.Seed("scratch", map[string]File{"x": {Content: []byte("x")}}, "unrelated")
	if _, _, err := c.Git.UpdateRef(ctx, "octo-org", "demo", "refs/heads/goalrun/fix", gh.UpdateRef{SHA: other}); statusOf(err) != 422 {
		t.Errorf("non-fast-forward update: %v, want 422", err)
	}
	if _, _, err := c.Git.UpdateRef(ctx, "octo-org", "demo", "refs/heads/goalrun/fix", gh.UpdateRef{SHA: other, Force: gh.Ptr(true)}); err != nil {
		t.Errorf("forced update: %v", err)
	}

	// Pull requests.
	pr, _, err := c.PullRequests.Create(ctx, "octo-org", "demo", &gh.NewPullRequest{
		Title: gh.Ptr("fix"), Head: gh.Ptr("goalrun/fix"), Base: gh.Ptr("main"), Body: gh.Ptr("report")})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.PullRequests.Create(ctx, "octo-org", "demo", &gh.NewPullRequest{
		Title: gh.Ptr("fix"), Head: gh.Ptr("goalrun/fix"), Base: gh.Ptr("main")}); statusOf(err) != 422 || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("duplicate pull request: %v", err)
	}
	list, _, err := c.PullRequests.List(ctx, "octo-org", "demo", &gh.PullRequestListOptions{Head: "octo-org:goalrun/fix", State: "open"})
	if err != nil || len(list) != 1 || list[0].GetNumber() != pr.GetNumber() {
		t.Fatalf("list = %v, %v", list, err)
	}
	if _, _, err := c.PullRequests.Edit(ctx, "octo-org", "demo", pr.GetNumber(), &gh.PullRequest{Body: gh.Ptr("report 2")}); err != nil {
		t.Fatal(err)
	}
	if p := s.Pulls()[0]; p.Body != "report 2" || p.Edits != 1 {
		t.Errorf("pull = %+v", p)
	}
}

func TestWorkflowChangesRefused(t *testing.T) {
	ctx := context.Background()
	s, c, base := newRepo(t)
	bc, _, _ := c.Git.GetCommit(ctx, "octo-org", "demo", base)
	tree, _, err := c.Git.CreateTree(ctx, "octo-org", "demo", bc.GetTree().GetSHA(), []*gh.TreeEntry{
		{Path: gh.Ptr(".github/workflows/ci.yml"), Mode: gh.Ptr(ModeFile), Type: gh.Ptr("blob"), Content: gh.Ptr("on: [push, pull_request]\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	commit, _, err := c.Git.CreateCommit(ctx, "octo-org", "demo", gh.Commit{Message: gh.Ptr("x"), Tree: &gh.Tree{SHA: tree.SHA}, Parents: []*gh.Commit{{SHA: gh.Ptr(base)}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = c.Git.CreateRef(ctx, "octo-org", "demo", gh.CreateRef{Ref: "refs/heads/evil", SHA: commit.GetSHA()})
	if statusOf(err) != 422 || !strings.Contains(err.Error(), "workflows") {
		t.Fatalf("err = %v, want 422 about the workflows permission", err)
	}
	if s.Ref("heads/evil") != "" {
		t.Error("the ref was created")
	}
}

// TestObjectHashesMatchGit builds the same tree with the real git binary (in
// a directory this test made, so running git there is safe) and compares.
func TestObjectHashesMatchGit(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git not installed: cannot cross-check object hashes")
	}
	files := map[string]File{
		"a.txt":      {Content: []byte("hello\n")},
		"dir/b.go":   {Content: []byte("package dir\n")},
		"dir.txt":    {Content: []byte("sorts before dir/ in git\n")},
		"run.sh":     {Content: []byte("#!/bin/sh\n"), Mode: ModeExecutable},
		"z/y/x/w.md": {Content: []byte("deep\n")},
	}
	dir := t.TempDir()
	for p, f := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if f.Mode == ModeExecutable {
			mode = 0o755
		}
		if err := os.WriteFile(full, f.Content, mode); err != nil {
			t.Fatal(err)
		}
	}
	git := func(args ...string) string {
		cmd := exec.Command(gitBin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		var out bytes.Buffer
		cmd.Stdout = &out
		cmd.Stderr = &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out.String())
		}
		return strings.TrimSpace(out.String())
	}
	git("init", "-q")
	git("add", "-A")
	want := git("write-tree")

	s := NewServer(t, "o/r")
	sha := s.Seed("main", files, "m")
	s.mu.Lock()
	got := s.git.commits[sha].Tree
	s.mu.Unlock()
	if got != want {
		t.Errorf("tree sha %s, git says %s", got, want)
	}
}

// TestContractsMatchProvenance: the request schemas are the files
// testdata/PROVENANCE.md describes, byte for byte (it lists their SHA-256),
// so an edit to a schema is deliberate and its provenance stays true.
func TestContractsMatchProvenance(t *testing.T) {
	prov, err := os.ReadFile(filepath.Join("testdata", "PROVENANCE.md"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{}
	for _, line := range strings.Split(string(prov), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && len(f[0]) == 64 && strings.HasSuffix(f[1], ".json") {
			listed[f[1]] = f[0]
		}
	}
	for _, name := range []string{"github-checks-create.request.json", "github-checks-update.request.json"} {
		want, ok := listed[name]
		if !ok {
			t.Errorf("testdata/PROVENANCE.md lists no SHA-256 for %s", name)
			continue
		}
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("%x", sha256.Sum256(b)); got != want {
			t.Errorf("testdata/%s has SHA-256 %s, PROVENANCE.md lists %s: update both together", name, got, want)
		}
	}
}
