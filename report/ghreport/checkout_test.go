package ghreport

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	shaA = "1111111111111111111111111111111111111111"
	shaB = "2222222222222222222222222222222222222222"
)

// TestReadCheckout: the commit a work tree holds is read from its metadata
// as actions/checkout and git leave it — detached, on a branch with a loose
// ref or a packed one, a worktree's gitdir file with its commondir — and
// everything else is an error saying what, without git, without following
// a link out of the git folder and without blocking on a FIFO.
func TestReadCheckout(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "HEAD"), []byte(shaB+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	type files map[string]string // path under the work tree → content ("->X": a symlink to X, "fifo": a FIFO)
	cases := []struct {
		name  string
		files files
		want  Checkout
		err   string
		noGit bool
	}{
		{name: "detached, as for a pull request's merge commit", files: files{".git/HEAD": shaA + "\n"}, want: Checkout{SHA: shaA}},
		{name: "upper-case hex", files: files{".git/HEAD": strings.ToUpper(shaA)}, want: Checkout{SHA: shaA}},
		{name: "SHA-256 repository", files: files{".git/HEAD": strings.Repeat("ab", 32) + "\n"}, want: Checkout{SHA: strings.Repeat("ab", 32)}},
		{name: "a branch with a loose ref", files: files{".git/HEAD": "ref: refs/heads/dev\n", ".git/refs/heads/dev": shaA + "\n"},
			want: Checkout{SHA: shaA, Branch: "dev"}},
		{name: "a branch with a slash", files: files{".git/HEAD": "ref: refs/heads/feature/x\n", ".git/refs/heads/feature/x": shaB + "\n"},
			want: Checkout{SHA: shaB, Branch: "feature/x"}},
		{name: "a packed ref", files: files{".git/HEAD": "ref: refs/heads/main\n",
			".git/packed-refs": "# pack-refs with: peeled fully-peeled sorted \n" + shaB + " refs/heads/dev\n" + shaA + " refs/heads/main\n^" + shaB + "\n"},
			want: Checkout{SHA: shaA, Branch: "main"}},
		{name: "a worktree: gitdir file and commondir", files: files{".git": "gitdir: ../repo/.git/worktrees/wt\n",
			"../repo/.git/worktrees/wt/HEAD": "ref: refs/heads/wt\n", "../repo/.git/worktrees/wt/commondir": "../..\n",
			"../repo/.git/refs/heads/wt": shaB + "\n"}, want: Checkout{SHA: shaB, Branch: "wt"}},
		{name: "no .git", files: files{"README": "x"}, noGit: true},
		{name: "an unborn branch", files: files{".git/HEAD": "ref: refs/heads/main\n"}, err: "unborn branch"},
		{name: "garbage in HEAD", files: files{".git/HEAD": "hello\n"}, err: "neither a commit nor a ref"},
		{name: "a ref leading out of the git folder", files: files{".git/HEAD": "ref: refs/../../../x\n"}, err: "neither a commit nor a ref"},
		{name: "a ref that is not a commit", files: files{".git/HEAD": "ref: refs/heads/x\n", ".git/refs/heads/x": "nope\n"}, err: "not a commit"},
		{name: "HEAD a link out of the git folder", files: files{".git/HEAD": "->" + filepath.Join(outside, "HEAD")}, err: "reading"},
		{name: "a ref a link out of the git folder", files: files{".git/HEAD": "ref: refs/heads/x\n", ".git/refs/heads/x": "->" + filepath.Join(outside, "HEAD")}, err: "reading the ref"},
		{name: "HEAD a FIFO", files: files{".git/HEAD": "fifo"}, err: "not a regular file"},
		{name: "HEAD too large", files: files{".git/HEAD": strings.Repeat("x", gitLineBytes+1)}, err: "over 4096 bytes"},
		{name: ".git a file without gitdir", files: files{".git": "hello\n"}, err: "not \"gitdir: PATH\""},
		{name: ".git a symbolic link", files: files{".git": "->" + outside}, err: "neither a folder nor a gitdir file"},
		{name: "a ref in neither its file nor packed-refs", files: files{".git/HEAD": "ref: refs/heads/main\n",
			".git/packed-refs": shaB + " refs/heads/dev\n"}, err: "in neither its own file nor packed-refs"},
		{name: "a packed-refs line too long", files: files{".git/HEAD": "ref: refs/heads/main\n",
			".git/packed-refs": strings.Repeat("y", gitLineBytes+1) + "\n"}, err: "reading packed-refs"},
		{name: "packed-refs a FIFO", files: files{".git/HEAD": "ref: refs/heads/main\n", ".git/packed-refs": "fifo"}, err: "not a regular file"},
		{name: "commondir a link out of the git folder", files: files{".git/HEAD": "ref: refs/heads/main\n", ".git/commondir": "->" + filepath.Join(outside, "HEAD")},
			err: "commondir"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			ws := filepath.Join(base, "ws")
			if err := os.MkdirAll(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			for p, content := range tc.files {
				full := filepath.Join(ws, filepath.FromSlash(p))
				if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
					t.Fatal(err)
				}
				var err error
				switch {
				case strings.HasPrefix(content, "->"):
					err = os.Symlink(content[2:], full)
				case content == "fifo":
					err = syscall.Mkfifo(full, 0o644)
				default:
					err = os.WriteFile(full, []byte(content), 0o644)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			type result struct {
				co  Checkout
				err error
			}
			done := make(chan result, 1)
			go func() { co, err := ReadCheckout(ws); done <- result{co, err} }()
			var r result
			select {
			case r = <-done:
			case <-time.After(30 * time.Second): // a correctness bound: a FIFO must never block the read
				t.Fatal("ReadCheckout blocked")
			}
			switch {
			case tc.noGit:
				if !errors.Is(r.err, ErrNoGit) {
					t.Errorf("err = %v, want ErrNoGit", r.err)
				}
			case tc.err != "":
				if r.err == nil || !strings.Contains(r.err.Error(), tc.err) {
					t.Errorf("ReadCheckout = %+v, %v; want an error about %q", r.co, r.err, tc.err)
				}
			case r.err != nil || r.co != tc.want:
				t.Errorf("ReadCheckout = %+v, %v; want %+v", r.co, r.err, tc.want)
			}
		})
	}
}
