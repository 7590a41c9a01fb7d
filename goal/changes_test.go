package goal

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/goal/workspace"
	"github.com/goalrun/goalrun/grounding"
	"github.com/goalrun/goalrun/report"
)

// chWrite writes files (relative path → content) under dir.
func chWrite(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// gitRun runs the real git in dir with no user or system configuration
// (the test's repository is the only configuration git reads).
func gitRun(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+dir,
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// gitWorkspace is a real repository made by git: files committed on main.
func gitWorkspace(t *testing.T, files map[string]string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("these tests need git on PATH: %v", err)
	}
	dir := t.TempDir()
	gitRun(t, dir, "init", "-q", "-b", "main")
	chWrite(t, dir, files)
	gitRun(t, dir, "add", "-A")
	gitRun(t, dir, "commit", "-q", "-m", "base")
	return dir
}

// TestChangesReport: the document's changes block of a diff — its counts,
// git's executable configuration heading the risky paths, a truncated
// snapshot said first and taken as a changed check, the paths relative to
// the mount.
func TestChangesReport(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		opt   workspace.Options
		edit  func(t *testing.T, dir string)
		check func(t *testing.T, c *report.Changes)
	}{
		{name: "counts and statuses",
			files: map[string]string{"a.txt": "1\n2\n3\n", "b.txt": "x\n"},
			edit: func(t *testing.T, dir string) {
				chWrite(t, dir, map[string]string{"a.txt": "1\nTWO\n3\n", "c.txt": "new\n"})
				os.Remove(filepath.Join(dir, "b.txt"))
			},
			check: func(t *testing.T, c *report.Changes) {
				if c.FilesChanged != 3 || c.Insertions != 2 || c.Deletions != 2 || len(c.PatchSHA256) != 64 ||
					c.RiskyPaths == nil || c.CheckModified || c.RelativeTo != "" {
					t.Errorf("report = %+v", c)
				}
				if !slices.Equal(c.Paths, []string{"a.txt", "b.txt", "c.txt"}) {
					t.Errorf("paths = %q", c.Paths)
				}
			}},
		{name: "a truncated snapshot is said first and makes check_modified neutral",
			files: map[string]string{"d/a.txt": "x\n", "d/b.txt": "x\n", "d/c.txt": "x\n", "d/e.txt": "x\n",
				"d/f.txt": "x\n", "d/g.txt": "x\n", "d/h.txt": "x\n"},
			opt: workspace.Options{MaxFiles: 5},
			check: func(t *testing.T, c *report.Changes) {
				if len(c.RiskyPaths) == 0 || c.RiskyPaths[0] != IncompleteChanges || !c.CheckModified ||
					c.CheckModifiedReason != IncompleteChanges {
					t.Errorf("report of a truncated diff: risky %q check_modified %v (%s)", c.RiskyPaths, c.CheckModified, c.CheckModifiedReason)
				}
			}},
		{name: "a symlink planted out of the workspace is a risky path",
			files: map[string]string{"a.txt": "x\n"},
			edit: func(t *testing.T, dir string) {
				if err := os.Symlink("/etc/passwd", filepath.Join(dir, "passwd")); err != nil {
					t.Fatal(err)
				}
			},
			check: func(t *testing.T, c *report.Changes) {
				if !slices.Contains(c.RiskyPaths, "passwd") {
					t.Errorf("risky_paths %q lack the planted symlink", c.RiskyPaths)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			chWrite(t, dir, tc.files)
			opt := tc.opt
			opt.TempDir = t.TempDir()
			tr := NewWorkspaceTracker(dir, opt)
			t.Cleanup(func() { tr.Close() })
			ctx := context.Background()
			if err := tr.Baseline(ctx); err != nil {
				t.Fatal(err)
			}
			if tc.edit != nil {
				tc.edit(t, dir)
			}
			c := tr.Changes(ctx)
			if c == nil {
				t.Fatal("no changes")
			}
			tc.check(t, c)
		})
	}
}

// TestChangesWithoutBaseline: a tracker that could not take its baseline
// reports no changes (nil), never an empty change set.
func TestChangesWithoutBaseline(t *testing.T) {
	tr := NewWorkspaceTracker(filepath.Join(t.TempDir(), "missing"), workspace.Options{TempDir: t.TempDir()})
	defer tr.Close()
	ctx := context.Background()
	if err := tr.Baseline(ctx); err == nil {
		t.Fatal("Baseline of a missing workspace succeeded")
	}
	if c := tr.Changes(ctx); c != nil {
		t.Errorf("Changes without a baseline = %+v", c)
	}
}

// TestChangesFeedsEvidence: the changes the loop reports are the ones the
// claims analysis judges file claims against.
func TestChangesFeedsEvidence(t *testing.T) {
	dir := t.TempDir()
	chWrite(t, dir, map[string]string{"calc.go": "package calc\n"})
	ev := grounding.NewEvidence()
	tr := NewWorkspaceTracker(dir, workspace.Options{Evidence: ev, TempDir: t.TempDir()})
	defer tr.Close()
	ctx := context.Background()
	if err := tr.Baseline(ctx); err != nil {
		t.Fatal(err)
	}
	chWrite(t, dir, map[string]string{"calc.go": "package calc\n\nvar X = 1\n"})
	// a shell edit leaves no receipt with paths; the diff backs the claim
	ev.AddReceipt(grounding.Receipt{Tool: "Bash", OK: true, Brief: "python3 fix.py"})
	if c := tr.Changes(ctx); c == nil || c.FilesChanged != 1 {
		t.Fatalf("changes = %+v", c)
	}
	if claims := ev.Claims("I edited `calc.go` and `other.go`."); len(claims) != 1 || !strings.Contains(claims[0].Reason, "other.go") {
		t.Errorf("claims = %+v, want only other.go unbacked", claims)
	}
}

// TestHostCodeNeverCut: twenty symlinks pointing out of the workspace (more
// serious than most) and more hooks than one entry per path could list do
// not push git's executable configuration out of the risky paths, neither
// in the tracker's report nor in the finished document (16-path cap), nor
// when the encoder must empty the list to fit the document's bound.
func TestHostCodeNeverCut(t *testing.T) {
	dir := gitWorkspace(t, map[string]string{"main.go": "package main\n"})
	tr := NewWorkspaceTracker(dir, workspace.Options{Check: "go test ./...", TempDir: t.TempDir()})
	t.Cleanup(func() { tr.Close() })
	ctx := context.Background()
	if err := tr.Baseline(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := os.Symlink("/etc/passwd", filepath.Join(dir, fmt.Sprintf("link%02d", i))); err != nil {
			t.Fatal(err)
		}
	}
	gitRun(t, dir, "config", "core.fsmonitor", "touch /tmp/pwned")
	for i := range 10 { // ten new repositories: more than workspace.HostCodeMax entries
		d := filepath.Join(dir, fmt.Sprintf("r%d", i))
		os.Mkdir(d, 0o755)
		gitRun(t, d, "init", "-q")
	}
	d, err := tr.Diff(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rep := ChangesReport(d)
	if len(rep.GitExecutable) != workspace.HostCodeMax || rep.GitExecutable[0] != ".git/config" ||
		rep.GitExecutable[workspace.HostCodeMax-1] != "(4 more changes to git's executable configuration)" {
		t.Fatalf("git_executable = %q, want .git/config first, %d entries, the rest counted", rep.GitExecutable, workspace.HostCodeMax)
	}
	doc := report.Finish(report.Run{Check: "go test ./...", Passed: true, Grounded: true, IterationsTaken: 1, Changes: rep}, nil)
	if !slices.Equal(doc.Changes.RiskyPaths[:workspace.HostCodeMax], rep.GitExecutable) || len(doc.Changes.RiskyPaths) != report.RiskyPathsMax {
		t.Errorf("document risky_paths = %q, want git_executable first within the cap", doc.Changes.RiskyPaths)
	}
	if doc.Changes.RiskyPathsOmitted != 20+len(rep.GitExecutable)-report.RiskyPathsMax {
		t.Errorf("risky_paths_omitted = %d", doc.Changes.RiskyPathsOmitted)
	}
	if doc.Goal.Passed || doc.Goal.Grounded || doc.Goal.Halt == nil || *doc.Goal.Halt != report.HaltUnsafeChange ||
		doc.Conclusion != report.ConclusionFailure || !strings.Contains(doc.Goal.HaltReason, ".git/config") {
		t.Errorf("a passing check over a changed .git/config: goal %+v, conclusion %s; want not passed, unsafe_change, failure", *doc.Goal, doc.Conclusion)
	}
}

// TestWorkspaceTrackerOwnsItsBaselineCopies: the loop's tracker keeps its
// baseline copies in a folder sandbox.MkdirOwned made (it holds the owner
// file sandbox.Reap reads), so a goalrun killed outright leaves them to the
// reaper; Close removes it.
func TestWorkspaceTrackerOwnsItsBaselineCopies(t *testing.T) {
	dir, tmp := t.TempDir(), t.TempDir()
	chWrite(t, dir, map[string]string{"a.txt": "x\n"})
	tr := NewWorkspaceTracker(dir, workspace.Options{TempDir: tmp})
	if err := tr.Baseline(context.Background()); err != nil {
		t.Fatal(err)
	}
	store, err := filepath.Glob(filepath.Join(tmp, "goalrun-baseline-*", "owner"))
	if err != nil || len(store) != 1 {
		t.Fatalf("baseline store owner files = %q, %v; want one", store, err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "goalrun-baseline-*")); len(left) != 0 {
		t.Errorf("after Close: %q left", left)
	}
}

// TestStatusWordsAreTheClaimsWords: the statuses the tracker hands the
// claims analysis (workspace.Options.Evidence) are the words it reads.
func TestStatusWordsAreTheClaimsWords(t *testing.T) {
	cases := []struct{ name, status, claims string }{
		{"added", workspace.StatusAdded, grounding.ChangeAdded},
		{"modified", workspace.StatusModified, grounding.ChangeModified},
		{"deleted", workspace.StatusDeleted, grounding.ChangeDeleted},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.status != c.claims {
				t.Errorf("workspace status %q, the claims analysis reads %q", c.status, c.claims)
			}
		})
	}
}
