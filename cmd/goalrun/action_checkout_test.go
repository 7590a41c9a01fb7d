package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/goalrun/goalrun/report/ghreport/githubtest"
)

// TestActionFixPRLeavesIgnoredOut: the agent ran the tests and built things
// (Python bytecode, a test binary, bin/tool) that the repository's
// .gitignore ignores; the fix pull request holds only its change to
// calc.go.
func TestActionFixPRLeavesIgnoredOut(t *testing.T) {
	srv := githubtest.NewServer(t, "octo-org/demo")
	seedDemo(t, srv)
	ignore := []byte("__pycache__/\n*.test\n/bin/\n")
	base := srv.Seed("main", map[string]githubtest.File{".gitignore": {Content: ignore}}, "ignore build outputs")
	r := newRunner(t, srv, "workflow_dispatch", "workflow_dispatch.json", nil,
		map[string]string{"agent": "command", "until": "go test ./...", "sandbox": "local", "open-pr": "true", "comment": "off",
			"agent-bin": "sh fix.sh; mkdir -p __pycache__ bin; echo junk > __pycache__/calc.cpython-312.pyc; echo bin > calc.test; echo b > bin/tool"})
	if err := os.WriteFile(filepath.Join(r.workspace, ".gitignore"), ignore, 0o644); err != nil {
		t.Fatal(err)
	}
	r.env["GITHUB_SHA"] = base
	res := r.run()
	if res.code != exitMet {
		t.Fatalf("exit %d\n%s", res.code, res.stdout)
	}
	pulls := srv.Pulls()
	if len(pulls) != 1 {
		t.Fatalf("pulls %+v\n%s", pulls, res.stdout)
	}
	tip := srv.Ref("heads/" + pulls[0].Head)
	if changed := changedFiles(srv, base, tip); strings.Join(changed, ",") != "calc.go" {
		t.Errorf("the fix pull request changes %v, want only calc.go", changed)
	}
	if !strings.Contains(pulls[0].Body, "3 new path(s) the repository's .gitignore ignores") {
		t.Errorf("the body does not name what was left out:\n%s", pulls[0].Body)
	}
}

// demoFiles returns examples/demo's files as the fake GitHub stores them,
// with changes laid over (a nil File removes the path).
func demoFiles(t *testing.T, changes map[string]*githubtest.File) map[string]githubtest.File {
	t.Helper()
	files := map[string]githubtest.File{}
	dir := filepath.Join("..", "..", "examples", "demo")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Type().IsRegular() {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			files[e.Name()] = githubtest.File{Content: b}
		}
	}
	for p, f := range changes {
		if f == nil {
			delete(files, p)
		} else {
			files[p] = *f
		}
	}
	return files
}

// TestActionCheckRunOnTestedCommit: the check run goes on the commit the
// workspace holds, read from its .git before the agent runs — on a pull
// request only when that is the head (or, on pull_request, GitHub's merge
// of it, as GitHub's own checks do): pull_request_target's default base
// checkout and a stale head get no check run and a warning saying what to
// check out; on other events the check run is on the checked-out commit,
// also when it is not GITHUB_SHA. A .git that cannot be read (a FIFO, a
// link out) gets no check run, never a blocked run.
func TestActionCheckRunOnTestedCommit(t *testing.T) {
	cases := []struct {
		name     string
		event    string
		payload  string
		checkout string // "base", "head", "other", "merge", "" (no .git), "fifo", "link"
		branch   string
		wantOn   string // "head", "base", "other", "" (no check run)
		warn     string
	}{
		{name: "pull_request, merge checkout", event: "pull_request", payload: "pull_request.opened.json", checkout: "merge", wantOn: "head"},
		{name: "pull_request, head checkout", event: "pull_request", payload: "pull_request.opened.json", checkout: "head", wantOn: "head"},
		{name: "pull_request, no .git: GITHUB_SHA, the merge", event: "pull_request", payload: "pull_request.opened.json", wantOn: "head"},
		{name: "pull_request, another commit", event: "pull_request", payload: "pull_request.opened.json", checkout: "other",
			warn: "not pull request #17's head"},
		{name: "pull_request_target, default base checkout", event: "pull_request_target", payload: "pull_request.opened.json", checkout: "base", branch: "main",
			warn: "pull_request_target checks out the base branch by default: give actions/checkout ref: ${{ github.event.pull_request.head.sha }}"},
		{name: "pull_request_target, no .git: GITHUB_SHA, the base", event: "pull_request_target", payload: "pull_request.opened.json",
			warn: "not pull request #17's head"},
		{name: "pull_request_target, head checked out", event: "pull_request_target", payload: "pull_request.opened.json", checkout: "head", wantOn: "head"},
		{name: "workflow_dispatch on another branch", event: "workflow_dispatch", payload: "workflow_dispatch.json", checkout: "other", branch: "dev", wantOn: "other"},
		{name: "workflow_dispatch, no .git", event: "workflow_dispatch", payload: "workflow_dispatch.json", wantOn: "base"},
		{name: "HEAD a FIFO", event: "workflow_dispatch", payload: "workflow_dispatch.json", checkout: "fifo",
			warn: "goalrun could not read which commit the workspace holds"},
		{name: "HEAD a link out of .git", event: "workflow_dispatch", payload: "workflow_dispatch.json", checkout: "link",
			warn: "goalrun could not read which commit the workspace holds"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := githubtest.NewServer(t, "octo-org/demo")
			base := seedDemo(t, srv)
			head := srv.Seed("contrib", demoFiles(t, map[string]*githubtest.File{"NOTES.md": {Content: []byte("x\n")}}), "head")
			other := srv.Seed("dev", demoFiles(t, map[string]*githubtest.File{"OTHER.md": {Content: []byte("y\n")}}), "other")
			srv.AddIssue(17)
			var patch func(map[string]any)
			if strings.HasPrefix(tc.event, "pull_request") {
				patch = setHead(head)
			}
			r := newRunner(t, srv, tc.event, tc.payload, patch,
				map[string]string{"agent": "command", "agent-bin": "sh fix.sh", "until": "go test ./...", "sandbox": "local", "comment": "off"})
			r.env["GITHUB_SHA"] = base
			if tc.event == "pull_request" {
				r.env["GITHUB_SHA"], r.env["GITHUB_REF"] = fakeMergeSHA, "refs/pull/17/merge"
			}
			sha := map[string]string{"base": base, "head": head, "other": other, "merge": fakeMergeSHA}
			switch tc.checkout {
			case "":
			case "fifo":
				_ = os.MkdirAll(filepath.Join(r.workspace, ".git"), 0o755)
				if err := syscall.Mkfifo(filepath.Join(r.workspace, ".git", "HEAD"), 0o644); err != nil {
					t.Fatal(err)
				}
			case "link":
				target := filepath.Join(t.TempDir(), "HEAD")
				_ = os.WriteFile(target, []byte(head+"\n"), 0o644)
				_ = os.MkdirAll(filepath.Join(r.workspace, ".git"), 0o755)
				if err := os.Symlink(target, filepath.Join(r.workspace, ".git", "HEAD")); err != nil {
					t.Fatal(err)
				}
			default:
				r.checkout(sha[tc.checkout], tc.branch)
			}
			res := r.run()
			if res.code != exitMet {
				t.Fatalf("exit %d\n%s", res.code, res.stdout)
			}
			runs := srv.CheckRuns()
			switch {
			case tc.wantOn == "" && len(runs) != 0:
				t.Errorf("check runs %+v, want none", runs)
			case tc.wantOn != "" && (len(runs) != 1 || runs[0].HeadSHA != sha[tc.wantOn] || runs[0].Status != "completed"):
				t.Errorf("check runs %+v, want one completed on the %s commit %s", runs, tc.wantOn, sha[tc.wantOn])
			}
			if tc.warn != "" && !strings.Contains(string(res.stdout), tc.warn) {
				t.Errorf("no warning with %q:\n%s", tc.warn, res.stdout)
			}
			if tc.wantOn == "" {
				summary, _ := os.ReadFile(r.summary)
				if !strings.Contains(string(summary), "goalrun/1 document") {
					t.Errorf("the job summary lacks the report:\n%s", summary)
				}
			}
		})
	}
}

// TestActionMergeCheckoutFix: on pull_request's default merge checkout the
// workspace is the pull request merged into its base. The fix goes on the
// pull request's head, so a file the agent changed must be the same in the
// merge and on the head: when the base changed calc.go too, nothing is
// pushed (the base's lines would land in the head branch) and the report
// says to check out the head; when the base changed only another file, the
// fix holds the agent's calc.go alone, without the base's file.
func TestActionMergeCheckoutFix(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mainFile string // what the base branch changed since the head forked
		wantFix  bool
	}{
		{name: "the base changed the same file", mainFile: "calc.go"},
		{name: "the base changed another file", mainFile: "MAIN.md", wantFix: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := githubtest.NewServer(t, "octo-org/demo")
			seedDemo(t, srv)
			srv.Branch("contrib", "main")
			head := srv.Seed("contrib", demoFiles(t, map[string]*githubtest.File{"NOTES.md": {Content: []byte("x\n")}}), "the author's commit")
			srv.AddIssue(16)
			if n := srv.AddPull("contrib", "main", "Notes"); n != 17 {
				t.Fatalf("pull request #%d", n)
			}
			// GitHub's merge commit: the head's files plus the base's later change.
			mainLine := "\n// a later commit on main, present only in the merge checkout\n"
			merged := demoFiles(t, map[string]*githubtest.File{"NOTES.md": {Content: []byte("x\n")}})
			if tc.mainFile == "calc.go" {
				merged["calc.go"] = githubtest.File{Content: append(merged["calc.go"].Content, mainLine...)}
			} else {
				merged[tc.mainFile] = githubtest.File{Content: []byte(mainLine)}
			}
			merge := srv.Seed("pull-17-merge", merged, "Merge contrib into main")

			r := newRunner(t, srv, "pull_request", "pull_request.opened.json", func(p map[string]any) {
				setHead(head)(p)
				p["pull_request"].(map[string]any)["head"].(map[string]any)["ref"] = "contrib"
			}, map[string]string{"agent": "command", "agent-bin": "sh fix.sh", "until": "go test ./...", "sandbox": "local", "open-pr": "true"})
			r.env["GITHUB_SHA"], r.env["GITHUB_REF"] = merge, "refs/pull/17/merge"
			for p, f := range merged {
				if err := os.WriteFile(filepath.Join(r.workspace, p), f.Content, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			r.checkout(merge, "")
			res := r.run()
			if res.code != exitMet {
				t.Fatalf("exit %d\n%s", res.code, res.stdout)
			}
			if runs := srv.CheckRuns(); len(runs) != 1 || runs[0].HeadSHA != head {
				t.Errorf("check runs %+v, want one on the head %s", runs, head)
			}
			var fix *githubtest.Pull
			for _, p := range srv.Pulls() {
				if p.Number != 17 {
					fix = &p
				}
			}
			if !tc.wantFix {
				if fix != nil {
					t.Fatalf("a fix pull request was opened: %+v", fix)
				}
				if !strings.Contains(string(res.stdout), "goalrun opened no pull request: the agent changed calc.go, which differs between the commit the run tested") ||
					!strings.Contains(string(res.stdout), "ref: ${{ github.event.pull_request.head.sha }}") {
					t.Errorf("the log does not say why no pull request was opened:\n%s", res.stdout)
				}
				return
			}
			if fix == nil {
				t.Fatalf("no fix pull request:\n%s", res.stdout)
			}
			tip := srv.Ref("heads/" + fix.Head)
			if parents := srv.CommitParents(tip); len(parents) != 1 || parents[0] != head || fix.Base != "contrib" {
				t.Errorf("fix %s → %s with parents %v, want on the head %s into contrib", fix.Head, fix.Base, parents, head)
			}
			if changed := changedFiles(srv, head, tip); strings.Join(changed, ",") != "calc.go" {
				t.Errorf("the fix changes %v, want only calc.go (never the base's %s)", changed, tc.mainFile)
			}
		})
	}
}

// TestActionCommentRaceFix: the comment bot checked out the pull request's
// head, and the author pushed again before goalrun read the pull request.
// The check run is not put on the new head, which nobody tested; the fix
// goes on the new head only where the agent's files are the same there —
// so the author's new commit is never reverted.
func TestActionCommentRaceFix(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pushed  string // the file the author's later push changed
		wantFix bool
	}{
		{name: "the push changed another file", pushed: "NOTES.md", wantFix: true},
		{name: "the push changed the agent's file", pushed: "calc.go"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := githubtest.NewServer(t, "octo-org/demo")
			seedDemo(t, srv)
			srv.Branch("contrib", "main")
			tested := srv.Seed("contrib", demoFiles(t, map[string]*githubtest.File{"NOTES.md": {Content: []byte("first\n")}}), "first push")
			later := demoFiles(t, map[string]*githubtest.File{"NOTES.md": {Content: []byte("first\n")}})
			if tc.pushed == "calc.go" {
				later["calc.go"] = githubtest.File{Content: append(later["calc.go"].Content, "\n// the author's second push\n"...)}
			} else {
				later["NOTES.md"] = githubtest.File{Content: []byte("second push\n")}
			}
			srv.AddIssue(16)
			if n := srv.AddPull("contrib", "main", "Notes"); n != 17 {
				t.Fatalf("pull request #%d", n)
			}
			srv.SetPermission("maintainer-max", "write")
			r := newRunner(t, srv, "issue_comment", "issue_comment.pr.created.json", nil,
				map[string]string{"agent": "command", "agent-bin": "sh fix.sh", "until": "go test ./...", "sandbox": "local", "open-pr": "true"})
			r.env["GITHUB_SHA"] = srv.Ref("heads/main")
			_ = os.WriteFile(filepath.Join(r.workspace, "NOTES.md"), []byte("first\n"), 0o644)
			r.checkout(tested, "")
			newHead := srv.Seed("contrib", later, "second push") // after the checkout
			res := r.run()
			if res.code != exitMet {
				t.Fatalf("exit %d\n%s", res.code, res.stdout)
			}
			if runs := srv.CheckRuns(); len(runs) != 0 {
				t.Errorf("check runs %+v: none may claim the new head %s was tested", runs, newHead)
			}
			if !strings.Contains(string(res.stdout), "if it was, the head moved on after the checkout") {
				t.Errorf("no warning about the moved head:\n%s", res.stdout)
			}
			var fix *githubtest.Pull
			for _, p := range srv.Pulls() {
				if p.Number != 17 {
					fix = &p
				}
			}
			if !tc.wantFix {
				if fix != nil {
					t.Errorf("a fix pull request was opened over the author's new calc.go: %+v", fix)
				}
				return
			}
			if fix == nil {
				t.Fatalf("no fix pull request:\n%s", res.stdout)
			}
			tip := srv.Ref("heads/" + fix.Head)
			if parents := srv.CommitParents(tip); len(parents) != 1 || parents[0] != newHead {
				t.Errorf("fix parents %v, want the new head %s", parents, newHead)
			}
			if changed := changedFiles(srv, newHead, tip); strings.Join(changed, ",") != "calc.go" {
				t.Errorf("the fix changes %v against the new head, want only calc.go (the author's NOTES.md kept)", changed)
			}
		})
	}
}

// TestActionFixPRNeedsThePullRequestsCode: on pull_request_target (whose
// default checkout is the base branch) and on a /goalrun comment whose
// workflow never checked out the pull request, the agent fixed the base
// branch's code; that is no fix for the pull request, so nothing is pushed
// to its head branch and the log says what to check out.
func TestActionFixPRNeedsThePullRequestsCode(t *testing.T) {
	for _, tc := range []struct {
		name, event, payload string
	}{
		{name: "pull_request_target, base checkout", event: "pull_request_target", payload: "pull_request.opened.json"},
		{name: "comment bot, default branch checkout", event: "issue_comment", payload: "issue_comment.pr.created.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := githubtest.NewServer(t, "octo-org/demo")
			base := seedDemo(t, srv)
			srv.Branch("contrib", "main")
			head := srv.Seed("contrib", demoFiles(t, map[string]*githubtest.File{"NOTES.md": {Content: []byte("x\n")}}), "the author's commit")
			srv.AddIssue(16)
			if n := srv.AddPull("contrib", "main", "Notes"); n != 17 {
				t.Fatalf("pull request #%d", n)
			}
			srv.SetPermission("maintainer-max", "write")
			var patch func(map[string]any)
			if tc.event == "pull_request_target" {
				patch = func(p map[string]any) {
					setHead(head)(p)
					p["pull_request"].(map[string]any)["head"].(map[string]any)["ref"] = "contrib"
				}
			}
			r := newRunner(t, srv, tc.event, tc.payload, patch,
				map[string]string{"agent": "command", "agent-bin": "sh fix.sh", "until": "go test ./...", "sandbox": "local", "open-pr": "true"})
			r.env["GITHUB_SHA"], r.env["GITHUB_REF"] = base, "refs/heads/main"
			r.checkout(base, "main")
			res := r.run()
			if res.code != exitMet {
				t.Fatalf("exit %d\n%s", res.code, res.stdout)
			}
			for _, p := range srv.Pulls() {
				if p.Number != 17 {
					t.Errorf("a fix pull request was opened from the base branch's code: %+v", p)
				}
			}
			if srv.Ref("heads/contrib") != head {
				t.Errorf("the head branch moved")
			}
			if runs := srv.CheckRuns(); len(runs) != 0 {
				t.Errorf("check runs %+v on the head, which was not tested", runs)
			}
			if !strings.Contains(string(res.stdout), "goalrun opened no pull request: the workspace holds the workflow's own commit "+base[:12]) ||
				!strings.Contains(string(res.stdout), "not pull request #17's code") {
				t.Errorf("the log does not say why no pull request was opened:\n%s", res.stdout)
			}
		})
	}
}

// TestActionPlainIssue: /goalrun on an issue (not a pull request) runs on
// the default branch; no check run is put on its tip (a failure would turn
// the default branch red for a run about an issue), and each issue gets a
// fix branch of its own whose pull request says "Fixes #N" — a second
// issue never moves the first one's branch.
func TestActionPlainIssue(t *testing.T) {
	srv := githubtest.NewServer(t, "octo-org/demo")
	base := seedDemo(t, srv)
	srv.AddIssue(21)
	srv.AddIssue(22)
	srv.SetPermission("drive-by", "admin")
	tips := map[int]string{}
	for _, issue := range []int{21, 22} {
		r := newRunner(t, srv, "issue_comment", "issue_comment.issue.created.json", func(p map[string]any) {
			p["comment"].(map[string]any)["body"] = "/goalrun fix the failing tests"
			p["issue"].(map[string]any)["number"] = issue
		}, map[string]string{"agent": "command", "agent-bin": "sh fix.sh", "until": "go test ./...", "sandbox": "local", "open-pr": "true"})
		r.env["GITHUB_SHA"] = base
		r.checkout(base, "main") // actions/checkout on the default branch
		res := r.run()
		if res.code != exitMet {
			t.Fatalf("issue #%d: exit %d\n%s", issue, res.code, res.stdout)
		}
		if runs := srv.CheckRuns(); len(runs) != 0 {
			t.Errorf("issue #%d: check runs %+v on the default branch", issue, runs)
		}
		if !strings.Contains(string(res.stdout), fmt.Sprintf("::notice::a /goalrun comment on issue #%d has no commit of its own to check", issue)) {
			t.Errorf("issue #%d: no notice about the check run:\n%s", issue, res.stdout)
		}
		branch := fmt.Sprintf("goalrun/issue-%d-goalrun-verdict", issue)
		var fix *githubtest.Pull
		for _, p := range srv.Pulls() {
			if p.Head == branch {
				fix = &p
			}
		}
		if fix == nil {
			t.Fatalf("issue #%d: no pull request from %s: %+v\n%s", issue, branch, srv.Pulls(), res.stdout)
		}
		if fix.Base != "main" || !strings.HasPrefix(fix.Body, fmt.Sprintf("Fixes #%d.\n", issue)) || fix.Title != fmt.Sprintf("goalrun: fix for #%d", issue) {
			t.Errorf("issue #%d: %s → %s %q, body starts %q", issue, fix.Head, fix.Base, fix.Title, fix.Body[:min(len(fix.Body), 80)])
		}
		tips[issue] = srv.Ref("heads/" + branch)
		if changed := changedFiles(srv, base, tips[issue]); strings.Join(changed, ",") != "calc.go" {
			t.Errorf("issue #%d: the fix changes %v", issue, changed)
		}
		if c := srv.Comments(issue); len(c) != 1 || !strings.Contains(c[0].Body, "goal met") {
			t.Errorf("issue #%d: comments %+v, want the reply become the report", issue, c)
		}
	}
	if srv.Ref("heads/goalrun/issue-21-goalrun-verdict") != tips[21] || len(srv.Pulls()) != 2 {
		t.Errorf("the second issue moved the first one's branch, or pulls %+v", srv.Pulls())
	}
}

// TestActionCheckRunNeedsTheFixOnTheCommit: a check run says what its
// commit's own code does. When the goal was met only with the agent's
// change — kept nowhere, or sent as a fix pull request — that commit
// failed the check: its check run concludes action_required (a required
// check then blocks the merge; success and neutral would let it through),
// with a notice, while the document and the outputs keep the run's own
// verdict. A check that passed before any agent turn, or after the agent
// left only files .gitignore ignores, is success.
func TestActionCheckRunNeedsTheFixOnTheCommit(t *testing.T) {
	for _, tc := range []struct {
		name, agent, until string
		openPR             bool
		want               string
	}{
		{name: "already green", agent: "true", until: "true", want: "success"},
		{name: "the agent fixed calc.go", agent: "sh fix.sh", until: "go test ./...", want: "action_required"},
		{name: "the agent fixed calc.go, fix pull request", agent: "sh fix.sh", until: "go test ./...", openPR: true, want: "action_required"},
		{name: "only ignored build output", agent: "mkdir -p out && touch out/done", until: "test -f out/done", want: "success"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := githubtest.NewServer(t, "octo-org/demo")
			seedDemo(t, srv)
			ignore := []byte("/out/\n")
			base := srv.Seed("main", map[string]githubtest.File{".gitignore": {Content: ignore}}, "ignore build outputs")
			r := newRunner(t, srv, "workflow_dispatch", "workflow_dispatch.json", nil,
				map[string]string{"agent": "command", "agent-bin": tc.agent, "until": tc.until, "sandbox": "local",
					"open-pr": strconv.FormatBool(tc.openPR), "comment": "off"})
			if err := os.WriteFile(filepath.Join(r.workspace, ".gitignore"), ignore, 0o644); err != nil {
				t.Fatal(err)
			}
			r.env["GITHUB_SHA"] = base
			r.checkout(base, "main")
			res := r.run()
			if res.code != exitMet {
				t.Fatalf("exit %d\n%s", res.code, res.stdout)
			}
			runs := srv.CheckRuns()
			if len(runs) != 1 || runs[0].HeadSHA != base || runs[0].Status != "completed" || runs[0].Conclusion != tc.want {
				t.Fatalf("check runs %+v, want one %s on %s", runs, tc.want, base)
			}
			notice := `::notice::the check run "goalrun verdict" on ` + base[:12] + ` concludes action_required: goal met only with the agent's change to 1 file, which this commit does not hold`
			if got := strings.Contains(string(res.stdout), notice); got != (tc.want == "action_required") {
				t.Errorf("notice %q shown %v:\n%s", notice, got, res.stdout)
			}
			if tc.want == "action_required" && runs[0].Title != "goal met only with the agent's change to 1 file, which this commit does not hold" {
				t.Errorf("title %q", runs[0].Title)
			}
			if out := r.outputs(); out["conclusion"] != "success" || out["verified"] != "true" {
				t.Errorf("outputs %v: the run's own verdict is unchanged", out)
			}
			if tc.openPR {
				pulls := srv.Pulls()
				if len(pulls) != 1 || !strings.Contains(runs[0].Summary, "Review and merge the fix pull request #"+strconv.Itoa(pulls[0].Number)) {
					t.Errorf("pulls %+v; the check run's summary does not point to the fix:\n%s", pulls, runs[0].Summary)
				}
			}
		})
	}
}

// TestActionFixPRNotAllowed: with the repository setting "Allow GitHub
// Actions to create and approve pull requests" off, GitHub answers 403
// "GitHub Actions is not permitted to create or approve pull requests"
// after the branch was pushed. The warning names that setting and the
// other tokens (not a missing pull-requests permission), and the report
// links the pushed branch's page that opens the pull request by hand.
func TestActionFixPRNotAllowed(t *testing.T) {
	srv := githubtest.NewServer(t, "octo-org/demo")
	base := seedDemo(t, srv)
	srv.Fail("pulls/create", githubtest.Fault{Status: 403, Message: "GitHub Actions is not permitted to create or approve pull requests."})
	r := newRunner(t, srv, "workflow_dispatch", "workflow_dispatch.json", nil,
		map[string]string{"agent": "command", "agent-bin": "sh fix.sh", "until": "go test ./...", "sandbox": "local", "open-pr": "true", "comment": "off"})
	r.env["GITHUB_SHA"] = base
	r.checkout(base, "main")
	res := r.run()
	if res.code != exitMet {
		t.Fatalf("exit %d\n%s", res.code, res.stdout)
	}
	out := string(res.stdout)
	if !strings.Contains(out, "::warning::could not open the fix pull request from goalrun/goalrun-verdict into main: this repository does not let GitHub Actions create pull requests") ||
		!strings.Contains(out, `Allow GitHub Actions to create and approve pull requests`) || strings.Contains(out, "lacks the") {
		t.Errorf("the warning does not name the repository setting:\n%s", out)
	}
	tip := srv.Ref("heads/goalrun/goalrun-verdict")
	if tip == "" || strings.Join(changedFiles(srv, base, tip), ",") != "calc.go" {
		t.Fatalf("the branch holds %q", tip)
	}
	summary, _ := os.ReadFile(r.summary)
	for _, want := range []string{
		"[branch goalrun/goalrun-verdict](https://github.example/octo-org/demo/compare/main...goalrun/goalrun-verdict?expand=1)",
		"**Next step:** The fix is on the branch goalrun/goalrun-verdict, but no pull request could be opened",
	} {
		if !strings.Contains(string(summary), want) {
			t.Errorf("the job summary lacks %q:\n%s", want, summary)
		}
	}
	if r.outputs()["pr-url"] != "" {
		t.Errorf("pr-url %q", r.outputs()["pr-url"])
	}
}
