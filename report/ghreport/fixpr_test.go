package ghreport

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/report/ghreport/githubtest"
)

var baseFiles = map[string]githubtest.File{
	"go.mod":                   {Content: []byte("module example.com/demo\n\ngo 1.22\n")},
	"calc/sum.go":              {Content: []byte("package calc\n\nfunc Sum(a, b int) int { return a + b - 1 }\n")},
	"calc/sum_test.go":         {Content: []byte("package calc\n")},
	"scripts/check.sh":         {Content: []byte("#!/bin/sh\ngo test ./...\n"), Mode: githubtest.ModeExecutable},
	"docs/old.md":              {Content: []byte("obsolete\n")},
	".github/workflows/ci.yml": {Content: []byte("on: push\n")},
	".gitignore":               {Content: []byte("# build output\n/bin/\n*.log\ncoverage/\n")},
}

// checkout writes files into a new directory, as actions/checkout would.
func checkout(t *testing.T, files map[string]githubtest.File) string {
	t.Helper()
	dir := t.TempDir()
	for p, f := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if f.Mode == githubtest.ModeExecutable {
			mode = 0o755
		}
		if err := os.WriteFile(full, f.Content, mode); err != nil {
			t.Fatal(err)
		}
	}
	// A .git directory with a hostile config: never read, never committed.
	if err := os.MkdirAll(filepath.Join(dir, ".git", "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(dir, ".git", "config"), []byte("[core]\n\tfsmonitor = touch /tmp/pwned\n"), 0o644)
	return dir
}

func write(t *testing.T, dir, p, content string) {
	t.Helper()
	full := filepath.Join(dir, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func newFixPR(s *githubtest.Server, ws, base string) *FixPR {
	return &FixPR{Client: s.Client("t"), Owner: "octo-org", Repo: "demo", Workspace: ws, BaseSHA: base,
		BaseBranch: "main", Branch: "goalrun/" + Slug("goalrun (calc)"), Title: "goalrun: make go test pass",
		Retry: noWait, Render: func(d report.Document) string { return "REPORT " + d.Conclusion }}
}

func TestFixPRTwiceOpensOneAndUpdatesIt(t *testing.T) {
	ctx := context.Background()
	s := githubtest.NewServer(t, "octo-org/demo")
	base := s.Seed("main", baseFiles, "base")
	ws := checkout(t, baseFiles)

	// The agent's work: a fix, a new file, a deletion, a workflow edit, an
	// ignored build artifact, a symlink to a host file, an executable bit.
	write(t, ws, "calc/sum.go", "package calc\n\nfunc Sum(a, b int) int { return a + b }\n")
	write(t, ws, "calc/neg.go", "package calc\n")
	if err := os.Remove(filepath.Join(ws, "docs", "old.md")); err != nil {
		t.Fatal(err)
	}
	write(t, ws, ".github/workflows/ci.yml", "on: [push, pull_request]\n")
	write(t, ws, "bin/demo", "ELF")
	write(t, ws, "test.log", "log")
	if err := os.Symlink("/etc/passwd", filepath.Join(ws, "passwd")); err != nil {
		t.Fatal(err)
	}

	p := newFixPR(s, ws, base)
	if err := p.Publish(ctx, passedDoc()); err != nil {
		t.Fatal(err)
	}
	if !p.Created || p.Number == 0 || p.URL == "" || p.Skipped != "" {
		t.Fatalf("first run: %+v", p)
	}
	if p.Branch != "goalrun/"+Slug("goalrun (calc)") {
		t.Errorf("branch = %q", p.Branch)
	}
	head := s.Ref("heads/" + p.Branch)
	files := s.Files(head)
	if got := string(files["calc/sum.go"].Content); !strings.Contains(got, "return a + b }") {
		t.Errorf("calc/sum.go = %q", got)
	}
	if _, ok := files["calc/neg.go"]; !ok {
		t.Error("new file calc/neg.go not committed")
	}
	if _, ok := files["docs/old.md"]; ok {
		t.Error("deleted docs/old.md still in the commit")
	}
	if got := string(files[".github/workflows/ci.yml"].Content); got != "on: push\n" {
		t.Errorf("workflow file was pushed: %q", got)
	}
	for _, p := range []string{"bin/demo", "test.log", "passwd", ".git/config"} {
		if _, ok := files[p]; ok {
			t.Errorf("%s was committed", p)
		}
	}
	if files["scripts/check.sh"].Mode != githubtest.ModeExecutable {
		t.Errorf("executable bit lost: %q", files["scripts/check.sh"].Mode)
	}
	if parents := s.CommitParents(head); len(parents) != 1 || parents[0] != base {
		t.Errorf("parents = %v, want [%s]", parents, base)
	}
	if strings.Join(p.WorkflowChanges, ",") != ".github/workflows/ci.yml" {
		t.Errorf("WorkflowChanges = %v", p.WorkflowChanges)
	}
	if len(p.Unreadable) != 1 || !strings.HasPrefix(p.Unreadable[0], "passwd") {
		t.Errorf("Unreadable = %v", p.Unreadable)
	}
	pulls := s.Pulls()
	if len(pulls) != 1 || pulls[0].Head != "goalrun/"+Slug("goalrun (calc)") || pulls[0].Base != "main" {
		t.Fatalf("pulls = %+v", pulls)
	}
	if b := pulls[0].Body; !strings.Contains(b, "REPORT success") || !strings.Contains(b, "pushes (a `GITHUB_TOKEN` cannot, and should not): .github/workflows/ci.yml.") {
		t.Errorf("body = %q", b)
	}

	// The next night: the same failure, a slightly different fix.
	write(t, ws, "calc/sum.go", "package calc\n\n// Sum adds.\nfunc Sum(a, b int) int { return a + b }\n")
	p2 := newFixPR(s, ws, base)
	if err := p2.Publish(ctx, passedDoc()); err != nil {
		t.Fatal(err)
	}
	if p2.Created || p2.Number != p.Number {
		t.Errorf("second run: created %v number %d, want an update of #%d", p2.Created, p2.Number, p.Number)
	}
	if pulls := s.Pulls(); len(pulls) != 1 || pulls[0].Edits != 1 {
		t.Errorf("pulls after the second run = %+v", pulls)
	}
	head2 := s.Ref("heads/goalrun/" + Slug("goalrun (calc)"))
	if head2 == head || !strings.Contains(string(s.Files(head2)["calc/sum.go"].Content), "// Sum adds.") {
		t.Errorf("branch not moved to the new fix")
	}
	for _, r := range s.Requests() {
		if r.Status >= 400 && r.Operation != "git/get-ref" {
			t.Errorf("%s answered %d: %s", r.Operation, r.Status, r.Body)
		}
	}
}

func TestFixPRSkips(t *testing.T) {
	ctx := context.Background()
	s := githubtest.NewServer(t, "octo-org/demo")
	base := s.Seed("main", baseFiles, "base")
	ungrounded := passedDoc()
	ungrounded.Goal.Grounded = false
	tampered := passedDoc()
	tampered.Changes.CheckModified = true
	unchanged := passedDoc()
	unchanged.Changes.FilesChanged = 0
	hostCode := passedDoc() // even a document that still says success
	hostCode.Changes.GitExecutable = []string{".git/config"}
	neutral := passedDoc()
	neutral.Conclusion = report.ConclusionNeutral
	for _, tc := range []struct {
		name   string
		doc    report.Document
		edit   func(ws string)
		reason string
	}{
		{"not met", failedDoc(), nil, "not met"},
		{"ungrounded", ungrounded, nil, "not grounded"},
		{"check modified", tampered, nil, "check's own files"},
		{"document says unchanged", unchanged, nil, "did not change"},
		{"git's executable configuration changed", hostCode, func(ws string) { write(t, ws, "calc.go", "package calc\n") },
			"git's executable configuration (.git/config)"},
		{"not a verified pass", neutral, func(ws string) { write(t, ws, "calc.go", "package calc\n") }, "did not conclude success (neutral)"},
		{"workspace identical", passedDoc(), func(string) {}, "did not change"},
		{"only workflows changed", passedDoc(), func(ws string) { write(t, ws, ".github/workflows/new.yml", "on: push\n") }, "only files under .github/workflows/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := checkout(t, baseFiles)
			if tc.edit != nil {
				tc.edit(ws)
			}
			p := newFixPR(s, ws, base)
			if err := p.Publish(ctx, tc.doc); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(p.Skipped, tc.reason) || p.URL != "" {
				t.Errorf("Skipped = %q, URL %q; want a skip saying %q", p.Skipped, p.URL, tc.reason)
			}
		})
	}
	if n := len(s.Pulls()); n != 0 {
		t.Errorf("%d pull requests opened", n)
	}
	if s.Ref("heads/goalrun/"+Slug("goalrun (calc)")) != "" {
		t.Error("a branch was pushed")
	}
}

func TestFixPRForbidden(t *testing.T) {
	s := githubtest.NewServer(t, "octo-org/demo")
	base := s.Seed("main", baseFiles, "base")
	ws := checkout(t, baseFiles)
	write(t, ws, "calc/sum.go", "fixed\n")
	s.Fail("git/create-blob", githubtest.Forbidden())
	err := newFixPR(s, ws, base).Publish(context.Background(), passedDoc())
	if !IsPermission(err) || !strings.Contains(err.Error(), "contents: write") {
		t.Errorf("err = %v", err)
	}
}

// TestFixPRCreateForbidden: a 403 on opening the pull request after the
// branch was pushed. GitHub's "not permitted to create or approve pull
// requests" (the repository's Actions setting) is a PullsNotAllowedError
// naming that setting, never a missing permission; any other 403 is a
// PermissionError naming pull-requests: write. Either way Pushed says the
// branch holds the fix.
func TestFixPRCreateForbidden(t *testing.T) {
	for _, tc := range []struct {
		name, message string
		notAllowed    bool
	}{
		{name: "the repository's Actions setting", message: "GitHub Actions is not permitted to create or approve pull requests.", notAllowed: true},
		{name: "a token without the permission", message: "Resource not accessible by integration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := githubtest.NewServer(t, "octo-org/demo")
			base := s.Seed("main", baseFiles, "base")
			ws := checkout(t, baseFiles)
			write(t, ws, "calc/sum.go", "fixed\n")
			s.Fail("pulls/create", githubtest.Fault{Status: http.StatusForbidden, Message: tc.message})
			p := newFixPR(s, ws, base)
			err := p.Publish(context.Background(), passedDoc())
			var na *PullsNotAllowedError
			switch {
			case tc.notAllowed && (!errors.As(err, &na) || IsPermission(err) ||
				!strings.Contains(err.Error(), `"Allow GitHub Actions to create and approve pull requests"`) ||
				!strings.Contains(err.Error(), "The fix is on the branch "+p.Branch)):
				t.Errorf("err = %v", err)
			case !tc.notAllowed && (!IsPermission(err) || !strings.Contains(err.Error(), "pull-requests: write")):
				t.Errorf("err = %v", err)
			}
			if !p.Pushed || s.Ref("heads/"+p.Branch) == "" || p.URL != "" {
				t.Errorf("pushed %v, branch %q, url %q", p.Pushed, s.Ref("heads/"+p.Branch), p.URL)
			}
		})
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"calc":                   "calc",
		"goalrun-calc":           "goalrun-calc",
		"goalrun (calc)":         "goalrun-calc-" + hash8("goalrun (calc)"),
		"Nightly: web/API ✓":     "nightly-web-api-" + hash8("Nightly: web/API ✓"),
		"---":                    "fix-" + hash8("---"),
		"":                       "fix-" + hash8(""),
		strings.Repeat("a", 100): strings.Repeat("a", 60) + "-" + hash8(strings.Repeat("a", 100)),
	} {
		if got := Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
	// Names that lose different things never share a slug.
	seen := map[string]string{}
	for _, in := range []string{"Tests", "tests", "テスト", "检查", "fix", strings.Repeat("x", 60) + " node 18", strings.Repeat("x", 60) + " node 20"} {
		s := Slug(in)
		if prev, dup := seen[s]; dup {
			t.Errorf("Slug(%q) = Slug(%q) = %q", in, prev, s)
		}
		seen[s] = in
		if len(s) > 69 {
			t.Errorf("Slug(%q) is %d bytes", in, len(s))
		}
	}
}

func hash8(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:4])
}

func TestMarkerIsInjective(t *testing.T) {
	seen := map[string]string{}
	for _, k := range []string{"goalrun", "goalrun-->", "goalrun%3E", "goalrun>", "a\nb", "a b", "a%0Ab", "goalrun (calc)"} {
		m := Marker(k)
		if prev, dup := seen[m]; dup {
			t.Errorf("Marker(%q) = Marker(%q) = %q", k, prev, m)
		}
		seen[m] = k
		if strings.Count(m, "-->") != 1 || !strings.HasSuffix(m, " -->") || strings.ContainsAny(m, "\r\n") {
			t.Errorf("Marker(%q) = %q: the key must not end the comment or break the line", k, m)
		}
	}
	if Marker("goalrun (calc)") != "<!-- goalrun:sticky:goalrun (calc) -->" {
		t.Errorf("a plain key is kept as it is: %q", Marker("goalrun (calc)"))
	}
}

// TestIgnorer: untracked paths are ignored as git ignores them, by
// go-git's gitignore patterns: the root's and every deeper .gitignore
// (deeper and later win, "!" re-includes), .git/info/exclude, anchored and
// folder-only patterns, "**", and a file inside an ignored folder stays
// ignored whatever re-includes it. A .gitignore that is a link leading out
// of the workspace is not read.
func TestIgnorer(t *testing.T) {
	ws := t.TempDir()
	outside := t.TempDir()
	write(t, outside, "evil", "*.go\n")
	for p, content := range map[string]string{
		".gitignore":        "# build output\n/bin/\n*.log\n!keep.log\ncoverage/\nnode_modules\ndocs/*.tmp\n**/gen/**/*.pb.go\n__pycache__/\n*.test\nbuild/\n!build/keep.txt\n",
		"web/.gitignore":    "dist/\n!important.log\n",
		".git/info/exclude": "local-notes.md\n",
	} {
		write(t, ws, p, content)
	}
	if err := os.MkdirAll(filepath.Join(ws, "linked"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "evil"), filepath.Join(ws, "linked", ".gitignore")); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	ig := newIgnorer(root)
	for name, want := range map[string]bool{
		"bin/demo":                         true,
		"cmd/bin/x":                        false, // anchored at the root
		"a/b/test.log":                     true,
		"keep.log":                         false, // re-included
		"coverage/index.html":              true,
		"coverage":                         false, // folder-only rule, and this is a file
		"web/node_modules/x.js":            true,
		"docs/a.tmp":                       true,
		"docs/sub/a.tmp":                   false,
		"api/gen/v1/x.pb.go":               true,
		"__pycache__/calc.cpython-312.pyc": true,
		"pkg/__pycache__/x.pyc":            true,
		"calc.test":                        true,
		"build/keep.txt":                   true, // its folder is ignored: git cannot re-include it
		"web/dist/app.js":                  true,
		"web/important.log":                false, // re-included by the deeper file
		"local-notes.md":                   true,  // .git/info/exclude
		"linked/x.go":                      false, // the linked .gitignore outside is not read
		"calc/sum.go":                      false,
	} {
		if got := ig.ignored(name); got != want {
			t.Errorf("ignored(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestFixPRLeavesIgnoredOut: of the agent's changed paths, new ones the
// repository's .gitignore ignores — the Python bytecode of a test run, a
// test binary, a build output, installed packages by the thousand — are
// not committed and are named in the body; a tracked file is committed
// whatever .gitignore says (git does too); a change made only of ignored
// files opens nothing.
func TestFixPRLeavesIgnoredOut(t *testing.T) {
	ctx := context.Background()
	s := githubtest.NewServer(t, "octo-org/demo")
	files := map[string]githubtest.File{}
	for p, f := range baseFiles {
		files[p] = f
	}
	files[".gitignore"] = githubtest.File{Content: []byte("__pycache__/\n*.test\n/bin/\nnode_modules/\n*.log\n")}
	files["fixtures/tracked.log"] = githubtest.File{Content: []byte("old\n")}
	base := s.Seed("main", files, "base")
	ws := checkout(t, files)

	paths := []ChangedPath{{Path: "calc/sum.go"}, {Path: "fixtures/tracked.log"}}
	write(t, ws, "calc/sum.go", "package calc\n\nfunc Sum(a, b int) int { return a + b }\n")
	write(t, ws, "fixtures/tracked.log", "new\n")
	for _, junk := range []string{"__pycache__/calc.cpython-312.pyc", "calc.test", "bin/tool"} {
		write(t, ws, junk, "junk")
		paths = append(paths, ChangedPath{Path: junk})
	}
	for i := range FixMaxFiles + 10 { // npm install: more files than a fix may hold
		p := fmt.Sprintf("node_modules/pkg%d/index.js", i)
		write(t, ws, p, "module.exports = 1\n")
		paths = append(paths, ChangedPath{Path: p})
	}
	p := newFixPR(s, ws, base)
	p.Paths = paths
	doc := passedDoc()
	doc.Changes = &report.Changes{FilesChanged: len(paths)}
	if err := p.Publish(ctx, doc); err != nil {
		t.Fatal(err)
	}
	tip := s.Ref("heads/" + p.Branch)
	var changed []string
	got := s.Files(tip)
	for path, f := range got {
		if b, ok := files[path]; !ok || string(b.Content) != string(f.Content) {
			changed = append(changed, path)
		}
	}
	sort.Strings(changed)
	if strings.Join(changed, ",") != "calc/sum.go,fixtures/tracked.log" {
		t.Errorf("the fix commit changes %v, want only calc/sum.go and the tracked fixtures/tracked.log", changed)
	}
	if len(p.Ignored) != 3+FixMaxFiles+10 {
		t.Errorf("%d ignored paths recorded", len(p.Ignored))
	}
	body := s.Pulls()[0].Body
	if !strings.Contains(body, fmt.Sprintf("%d new path(s) the repository's .gitignore ignores", len(p.Ignored))) ||
		!strings.Contains(body, "calc.test") || !strings.Contains(body, "and 993 more") {
		t.Errorf("the body does not say what was left out:\n%s", body[:min(len(body), 2000)])
	}

	// Only ignored files changed: nothing to push.
	only := newFixPR(s, ws, base)
	only.Branch = "goalrun/only-junk"
	only.Paths = []ChangedPath{{Path: "calc.test"}, {Path: "__pycache__/calc.cpython-312.pyc"}}
	if err := only.Publish(ctx, doc); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(only.Skipped, "only files .gitignore ignores (2, such as __pycache__/calc.cpython-312.pyc)") || s.Ref("heads/goalrun/only-junk") != "" {
		t.Errorf("skipped %q", only.Skipped)
	}
}
