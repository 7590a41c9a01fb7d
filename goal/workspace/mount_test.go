package workspace

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestChangesMountRoot: when the sandbox mounted a folder wider than the
// workspace (a subfolder of a repository gets the repository root), the
// tracker covers all of it, reports paths relative to it (and says so), and
// still resolves the check's words from the workspace.
func TestChangesMountRoot(t *testing.T) {
	repo := map[string]string{
		"test.sh":                  "exit 1\n",
		"Makefile":                 "test:\n\tfalse\n",
		"app/a.txt":                "a\n",
		"app/run.sh":               "exit 1\n",
		"app/Makefile":             "test:\n\tfalse\n",
		".git/HEAD":                "ref: refs/heads/main\n",
		".git/refs/heads/main":     "1111111111111111111111111111111111111111\n",
		".github/workflows/ci.yml": "on: push\n",
	}
	cases := []struct {
		name      string
		check     string
		workdir   string // below the repository ("" = the root itself)
		root      func(repo string) string
		edit      map[string]string
		files     []string // want d.Files paths
		risky     []string // want d.Risky paths
		checkMod  bool
		mount     bool // paths relative to the mount (Diff.Root set)
		baseError string
	}{
		{name: "the attack: the check's script, a workflow and a hook above the workspace",
			check: "sh ../test.sh", workdir: "app", root: func(r string) string { return r },
			edit: map[string]string{"test.sh": "exit 0\n", ".github/workflows/evil.yml": "on: push\n",
				".git/hooks/pre-commit": "#!/bin/sh\n", "app/a.txt": "b\n"},
			files:    []string{".git/hooks/pre-commit", ".github/workflows/evil.yml", "app/a.txt", "test.sh"},
			risky:    []string{".git/hooks/pre-commit", "test.sh", ".github/workflows/evil.yml"},
			checkMod: true, mount: true},
		{name: "a branch moved above the workspace",
			check: "false", workdir: "app", root: func(r string) string { return r },
			edit:  map[string]string{".git/refs/heads/main": "2222222222222222222222222222222222222222\n"},
			risky: []string{".git/refs/heads/main"}, mount: true},
		{name: "./run.sh is resolved from the workspace",
			check: "./run.sh", workdir: "app", root: func(r string) string { return r },
			edit:  map[string]string{"app/run.sh": "exit 0\n"},
			files: []string{"app/run.sh"}, risky: []string{"app/run.sh"}, checkMod: true, mount: true},
		{name: "make reads the workspace's Makefile, not the root's",
			check: "make test", workdir: "app", root: func(r string) string { return r },
			edit:  map[string]string{"Makefile": "test:\n\ttrue\n"},
			files: []string{"Makefile"}, risky: []string{"Makefile"}, mount: true},
		{name: "make test with the workspace's Makefile edited",
			check: "make test", workdir: "app", root: func(r string) string { return r },
			edit:  map[string]string{"app/Makefile": "test:\n\ttrue\n"},
			files: []string{"app/Makefile"}, risky: []string{"app/Makefile"}, checkMod: true, mount: true},
		{name: "root reached through a symlink",
			check: "sh ../test.sh", workdir: "app", root: func(r string) string {
				l := filepath.Join(t.TempDir(), "link")
				if err := os.Symlink(r, l); err != nil {
					t.Fatal(err)
				}
				return l
			},
			edit:  map[string]string{"test.sh": "exit 0\n"},
			files: []string{"test.sh"}, risky: []string{"test.sh"}, checkMod: true, mount: true},
		{name: "no mount given: the workspace alone",
			check: "sh ../test.sh", workdir: "app", root: func(string) string { return "" },
			edit:  map[string]string{"test.sh": "exit 0\n", "app/a.txt": "b\n"},
			files: []string{"a.txt"}},
		{name: "the mount is the workspace",
			check: "./test.sh", root: func(r string) string { return r },
			edit:  map[string]string{"test.sh": "exit 0\n"},
			files: []string{"test.sh"}, risky: []string{"test.sh"}, checkMod: true},
		{name: "a mount that does not hold the workspace",
			check: "true", workdir: "app", root: func(string) string { return t.TempDir() },
			baseError: "is not inside the mount root"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := t.TempDir()
			chWrite(t, r, repo)
			ws := filepath.Join(r, c.workdir)
			tr := New(ws, Options{Check: c.check, Root: c.root(r), TempDir: t.TempDir()})
			defer tr.Close()
			err := tr.Baseline(context.Background())
			if c.baseError != "" {
				if err == nil || !strings.Contains(err.Error(), c.baseError) {
					t.Fatalf("Baseline = %v, want an error containing %q", err, c.baseError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			chWrite(t, r, c.edit)
			d := chDiff(t, tr)
			var files, risky []string
			for _, f := range d.Files {
				files = append(files, f.Path)
			}
			for _, x := range d.Risky {
				risky = append(risky, x.Path)
			}
			if !slices.Equal(files, c.files) {
				t.Errorf("files = %q, want %q", files, c.files)
			}
			if !slices.Equal(risky, c.risky) {
				t.Errorf("risky = %q, want %q", risky, c.risky)
			}
			if d.CheckModified != c.checkMod || (d.Root != "") != c.mount {
				t.Errorf("check modified = %v, root = %q; want %v, relative to the mount %v", d.CheckModified, d.Root, c.checkMod, c.mount)
			}
			if c.mount && (d.Workdir != c.workdir || d.Root == "") {
				t.Errorf("root %q, workdir %q; want the mount and %q", d.Root, d.Workdir, c.workdir)
			}
		})
	}
}
