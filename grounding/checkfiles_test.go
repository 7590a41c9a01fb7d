package grounding_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/goal/workspace"
	"github.com/goalrun/goalrun/grounding"
)

// The check-file rules are tested through the workspace tracker that
// applies them: a tree on disk, its baseline, an edit, the diff.

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

// chTracker returns a tracker over a new workspace with files, baselined.
func chTracker(t *testing.T, check string, files map[string]string) (*workspace.Tracker, string) {
	t.Helper()
	dir := t.TempDir()
	chWrite(t, dir, files)
	tr := workspace.New(dir, workspace.Options{Check: check, TempDir: t.TempDir()})
	t.Cleanup(func() { tr.Close() })
	if err := tr.Baseline(context.Background()); err != nil {
		t.Fatal(err)
	}
	return tr, dir
}

// chDiff is the tracker's diff now.
func chDiff(t *testing.T, tr *workspace.Tracker) *workspace.Diff {
	t.Helper()
	d, err := tr.Diff(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestShellWordsAndCheckFiles: the check's words are read with a shell
// parser (through sh -c, quotes, pipes and assignments), and the files
// they name, the runners' configuration and the runners a script may use
// are the check's.
func TestShellWordsAndCheckFiles(t *testing.T) {
	got := grounding.ShellWords(`FOO=1 sh -c './check.sh && "tests/run me.py"' ; make -f ci.mk test|tee log`)
	want := []string{"sh", "-c", "./check.sh", "tests/run me.py", "make", "-f", "ci.mk", "test", "tee", "log"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("ShellWords = %q, want %q", got, want)
	}
	paths := []string{"Makefile", "check.sh", "ci.mk", "conftest.py", "sub/Makefile", "x.go"}
	c := grounding.NewCheck(`./check.sh && make -f ci.mk test`, "", paths, func(p string) bool { return slices.Contains(paths, p) })
	files := c.Files()
	for _, p := range []string{"check.sh", "ci.mk", "Makefile"} {
		if !slices.Contains(files, p) {
			t.Errorf("%s not a check file: %v", p, files)
		}
	}
	if slices.Contains(files, "sub/Makefile") || slices.Contains(files, "x.go") || !c.Runs("make") {
		t.Errorf("check files %v, make not among the runners", files)
	}
	// A Python project's (conftest.py) script or Makefile may run pytest.
	if !slices.Contains(files, "conftest.py") || !c.Runs("pytest") {
		t.Errorf("check files %v, want pytest assumed", files)
	}
}
