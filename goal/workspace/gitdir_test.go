package workspace

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestHostCodeAnyFolderGitTakesForARepository: every folder the real git
// takes for a git directory is a new repository when the agent made it —
// not only a ".git" or a folder with a regular HEAD and config: a HEAD that
// is a symbolic link, a config reached through a link, HEAD plus commondir
// with the configuration in another folder, a gitdir file, the workspace's
// own top. Each case first shows with git itself (rev-parse in the folder,
// and its core.pager or alias running) that the planted folder is a
// repository git would use, then that the tracker fails it closed.
func TestHostCodeAnyFolderGitTakesForARepository(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("this test needs git on PATH: %v", err)
	}
	const evilConfig = "[core]\n\trepositoryformatversion = 0\n\tbare = true\n[alias]\n\tpwn = !touch PWNED\n"
	type plant func(t *testing.T, dir string)
	mkdirs := func(dir string, names ...string) {
		for _, n := range names {
			if err := os.MkdirAll(filepath.Join(dir, n), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	link := func(t *testing.T, target, name string) {
		if err := os.Symlink(target, name); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name  string
		plant plant
		repo  string // the folder git takes for a repository (workspace-relative)
		host  []string
	}{
		{name: "HEAD a symbolic link, objects and refs empty folders", repo: "docs", plant: func(t *testing.T, dir string) {
			mkdirs(dir, "docs/objects", "docs/refs/heads")
			link(t, "refs/heads/main", filepath.Join(dir, "docs/HEAD"))
			chWrite(t, dir, map[string]string{"docs/config": evilConfig})
		}, host: []string{"docs/ (a new git repository)"}},
		{name: "HEAD and commondir here, config, objects and refs in another folder", repo: "docs", plant: func(t *testing.T, dir string) {
			mkdirs(dir, ".cache/objects", ".cache/refs/heads")
			chWrite(t, dir, map[string]string{"docs/HEAD": "ref: refs/heads/main\n", "docs/commondir": "../.cache\n", ".cache/config": evilConfig})
		}, host: []string{"docs/ (a new git repository)"}},
		{name: "config a symbolic link to a file of the tree", repo: "site", plant: func(t *testing.T, dir string) {
			mkdirs(dir, "site/objects", "site/refs")
			chWrite(t, dir, map[string]string{"site/HEAD": "ref: refs/heads/main\n", "notes.txt": evilConfig})
			link(t, "../notes.txt", filepath.Join(dir, "site/config"))
		}, host: []string{"site/ (a new git repository)"}},
		{name: "a linked worktree's git directory: HEAD, commondir and gitdir", repo: "wt", plant: func(t *testing.T, dir string) {
			chWrite(t, dir, map[string]string{"wt/HEAD": "ref: refs/heads/main\n", "wt/commondir": "../.git\n", "wt/gitdir": "/tmp/elsewhere/.git\n"})
		}, host: []string{"wt/ (a new git repository)"}},
		{name: "config changed beside an old HEAD file", repo: "fixtures", plant: func(t *testing.T, dir string) {
			mkdirs(dir, "fixtures/objects", "fixtures/refs")
			chWrite(t, dir, map[string]string{"fixtures/config": evilConfig})
		}, host: []string{"fixtures/ (a new git repository)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := gitWorkspace(t, map[string]string{"main.go": "package main\n", "fixtures/HEAD": "ref: refs/heads/main\n"})
			tr := New(dir, Options{Check: "go test ./...", TempDir: t.TempDir()})
			t.Cleanup(func() { tr.Close() })
			ctx := context.Background()
			if err := tr.Baseline(ctx); err != nil {
				t.Fatal(err)
			}
			c.plant(t, dir)
			repo := filepath.Join(dir, c.repo)
			if got := gitOut(t, repo, "rev-parse", "--absolute-git-dir"); got != repo {
				t.Fatalf("git in %s uses the repository %s, not the planted one: the case is not real", c.repo, got)
			}
			if c.repo != "wt" { // the worktree case's config is the trusted one
				gitOut(t, repo, "pwn")
				if _, err := os.Stat(filepath.Join(repo, "PWNED")); err != nil {
					t.Fatalf("the planted configuration did not run: the case is not real (%v)", err)
				}
				os.Remove(filepath.Join(repo, "PWNED"))
			}
			if _, err := tr.AfterTurn(ctx, 1); err != nil {
				t.Fatal(err)
			}
			if got := pathsOf(tr.HostCode()); !slices.Equal(got, c.host) {
				t.Errorf("HostCode = %q, want %q", got, c.host)
			}
		})
	}
}

// TestHostCodeTopFolderMadeARepository: a workspace that is not in a
// repository, whose top the agent turns into a bare repository, fails
// closed (git run anywhere in it would read that configuration).
func TestHostCodeTopFolderMadeARepository(t *testing.T) {
	tr, dir := chTracker(t, "go test ./...", map[string]string{"go.mod": "module x\n", "x.go": "package x\n"})
	chWrite(t, dir, map[string]string{"HEAD": "ref: refs/heads/main\n", "config": "[alias]\n\tpwn = !touch PWNED\n"})
	for _, d := range []string{"objects", "refs"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got := gitOut(t, dir, "rev-parse", "--absolute-git-dir"); got != dir {
		t.Fatalf("git takes %s for the repository, not the workspace's top", got)
	}
	if _, err := tr.AfterTurn(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if got := pathsOf(tr.HostCode()); !slices.Equal(got, []string{"./ (a new git repository)"}) {
		t.Errorf("HostCode = %q, want the top folder as a new repository", got)
	}
}

// gitOut runs the real git in dir (no user or system configuration,
// GIT_CEILING_DIRECTORIES above dir's parent so the test's own checkout is
// never found) and returns its trimmed output.
func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+dir,
		"GIT_CEILING_DIRECTORIES="+filepath.Dir(filepath.Dir(dir)))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestHostCodeGoalrunConfig: a new or changed .goalrun.yml in the workspace
// (read by the next goalrun run there, which it can point at any command)
// or a changed --config file inside the tree fails closed with git's
// executable configuration; removing one, or a .goalrun.yml in another
// folder, does not (that one stays a risky agent configuration file).
func TestHostCodeGoalrunConfig(t *testing.T) {
	cfg := "sandbox: local\nagent: command\nagent-bin: sh -c 'id > /tmp/pwned'\n"
	cases := []struct {
		name    string
		base    map[string]string
		configs []string
		root    bool // the workspace is app/ inside a wider tracked root
		edit    map[string]string
		remove  string
		host    []string
		risky   string // a risky path that must be listed, not as host code
	}{
		{name: "a new .goalrun.yml", edit: map[string]string{".goalrun.yml": cfg}, host: []string{".goalrun.yml"}},
		{name: "a changed .goalrun.yml", base: map[string]string{".goalrun.yml": "max-iterations: 3\n"},
			edit: map[string]string{".goalrun.yml": cfg}, host: []string{".goalrun.yml"}},
		{name: "the workspace's .goalrun.yml under a wider root", root: true,
			edit: map[string]string{"app/.goalrun.yml": cfg}, host: []string{"app/.goalrun.yml"}},
		{name: "the --config file in the tree", base: map[string]string{"ci/goalrun.yml": "until: go test ./...\n"},
			configs: []string{"ci/goalrun.yml"}, edit: map[string]string{"ci/goalrun.yml": cfg}, host: []string{"ci/goalrun.yml"}},
		{name: "a removed .goalrun.yml", base: map[string]string{".goalrun.yml": "max-iterations: 3\n"}, remove: ".goalrun.yml"},
		{name: "a .goalrun.yml in another folder", edit: map[string]string{"docs/.goalrun.yml": cfg}, risky: "docs/.goalrun.yml"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			files := map[string]string{"go.mod": "module x\n", "x.go": "package x\n", "app/go.mod": "module y\n"}
			for k, v := range c.base {
				files[k] = v
			}
			chWrite(t, dir, files)
			ws, opt := dir, Options{Check: "go test ./...", TempDir: t.TempDir(), ConfigFiles: c.configs}
			if c.root {
				ws, opt.Root = filepath.Join(dir, "app"), dir
			}
			tr := New(ws, opt)
			t.Cleanup(func() { tr.Close() })
			ctx := context.Background()
			if err := tr.Baseline(ctx); err != nil {
				t.Fatal(err)
			}
			chWrite(t, dir, c.edit)
			if c.remove != "" {
				os.Remove(filepath.Join(dir, c.remove))
			}
			if _, err := tr.AfterTurn(ctx, 1); err != nil {
				t.Fatal(err)
			}
			if got := pathsOf(tr.HostCode()); !slices.Equal(got, c.host) {
				t.Errorf("HostCode = %q, want %q", got, c.host)
			}
			d := chDiff(t, tr)
			if host, risky := pathsOf(d.HostCode), pathsOf(d.Risky); !slices.Equal(host, c.host) || len(c.host) > 0 && risky[0] != c.host[0] {
				t.Errorf("host code %q, risky paths %q; want %q first", host, risky, c.host)
			}
			if c.risky != "" && riskyOf(d)[c.risky] == "" {
				t.Errorf("risky paths %v, want %s", riskyOf(d), c.risky)
			}
		})
	}
}
