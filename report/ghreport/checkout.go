package ghreport

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/goalrun/goalrun/internal/safefile"
)

// Checkout is the commit a git work tree holds, as its metadata says.
type Checkout struct {
	// SHA is the commit HEAD names (40 hex digits, or 64 in a SHA-256
	// repository).
	SHA string
	// Branch is the branch HEAD is on ("main" for "ref: refs/heads/main"),
	// "" for a detached HEAD (actions/checkout detaches for a pull
	// request's merge commit, a tag or a commit SHA).
	Branch string
}

// ErrNoGit says the folder has no .git: it is not a git work tree (an
// actions/checkout without git on the runner downloads the files only).
var ErrNoGit = errors.New("no .git")

// gitLineBytes bounds a one-line metadata file (HEAD, a loose ref, a
// gitdir or commondir file) and each line of packed-refs; packedRefBytes
// bounds packed-refs as a whole (one line per ref: a large monorepo's
// fits).
const (
	gitLineBytes   = 4096
	packedRefBytes = 64 << 20
)

// ReadCheckout returns the commit the git work tree at dir holds, from its
// metadata alone — git never runs (the tree's configuration, hooks and
// filters could run programs): .git/HEAD, then the branch's loose ref or
// packed-refs. .git may be a folder, or a file "gitdir: PATH" (a worktree,
// a submodule), whose own HEAD is read and whose refs may live in the
// folder its commondir file names. Every file is opened without following
// a symbolic link out of its git folder (os.Root), without blocking (a FIFO
// is refused) and read only up to a bound; anything that is not what git
// writes there is an error saying what. A folder without .git is ErrNoGit.
func ReadCheckout(dir string) (Checkout, error) {
	fi, err := os.Lstat(filepath.Join(dir, ".git"))
	if errors.Is(err, fs.ErrNotExist) {
		return Checkout{}, ErrNoGit
	}
	if err != nil {
		return Checkout{}, err
	}
	gitDir := filepath.Join(dir, ".git")
	switch {
	case fi.Mode().IsRegular():
		root, err := os.OpenRoot(dir)
		if err != nil {
			return Checkout{}, err
		}
		line, err := readLine(root, ".git")
		root.Close()
		if err != nil {
			return Checkout{}, fmt.Errorf("reading %s: %w", gitDir, err)
		}
		target, ok := strings.CutPrefix(line, "gitdir: ")
		if !ok || target == "" {
			return Checkout{}, fmt.Errorf("%s is a file but not \"gitdir: PATH\"", gitDir)
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(dir, target)
		}
		gitDir = target
	case !fi.IsDir():
		return Checkout{}, fmt.Errorf("%s is neither a folder nor a gitdir file", gitDir)
	}
	g, err := os.OpenRoot(gitDir)
	if err != nil {
		return Checkout{}, fmt.Errorf("opening the git folder: %w", err)
	}
	defer g.Close()
	head, err := readLine(g, "HEAD")
	if err != nil {
		return Checkout{}, fmt.Errorf("reading %s: %w", filepath.Join(gitDir, "HEAD"), err)
	}
	if isObjectName(head) {
		return Checkout{SHA: strings.ToLower(head)}, nil
	}
	ref, ok := strings.CutPrefix(head, "ref: ")
	if !ok || !validRef(ref) {
		return Checkout{}, fmt.Errorf("%s holds %q, neither a commit nor a ref", filepath.Join(gitDir, "HEAD"), cut(head, 80))
	}
	branch, _ := strings.CutPrefix(ref, "refs/heads/")
	// A worktree's refs/heads live in the common git folder.
	refsRoot := g
	if common, err := readLine(g, "commondir"); err == nil {
		if !filepath.IsAbs(common) {
			common = filepath.Join(gitDir, common)
		}
		c, err := os.OpenRoot(common)
		if err != nil {
			return Checkout{}, fmt.Errorf("opening the common git folder %s: %w", common, err)
		}
		defer c.Close()
		refsRoot = c
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Checkout{}, fmt.Errorf("reading %s: %w", filepath.Join(gitDir, "commondir"), err)
	}
	sha, err := resolveRef(refsRoot, ref)
	if err != nil {
		return Checkout{}, err
	}
	return Checkout{SHA: sha, Branch: branch}, nil
}

// resolveRef finds ref's commit: its loose file, else packed-refs.
func resolveRef(root *os.Root, ref string) (string, error) {
	line, err := readLine(root, filepath.FromSlash(ref))
	switch {
	case err == nil && isObjectName(line):
		return strings.ToLower(line), nil
	case err == nil:
		return "", fmt.Errorf("the ref %s holds %q, not a commit", ref, cut(line, 80))
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("reading the ref %s: %w", ref, err)
	}
	b, err := safefile.Read(root, "packed-refs", packedRefBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("the ref %s HEAD names does not exist (an unborn branch: nothing is checked out)", ref)
	}
	if err != nil {
		return "", fmt.Errorf("reading packed-refs: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), gitLineBytes)
	for sc.Scan() {
		sha, name, ok := strings.Cut(sc.Text(), " ")
		if ok && name == ref && isObjectName(sha) {
			return strings.ToLower(sha), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("reading packed-refs: %w", err)
	}
	return "", fmt.Errorf("the ref %s HEAD names is in neither its own file nor packed-refs", ref)
}

// readLine reads the first line of a small metadata file, without its line
// end.
func readLine(root *os.Root, name string) (string, error) {
	b, err := safefile.Read(root, name, gitLineBytes)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(line), nil
}

// isObjectName says s is a full object name: 40 (SHA-1) or 64 (SHA-256)
// hex digits.
func isObjectName(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// validRef says ref is a ref name HEAD may hold: under refs/, no empty, "."
// or ".." part (so it stays inside the git folder).
func validRef(ref string) bool {
	if !strings.HasPrefix(ref, "refs/") || path.Clean(ref) != ref {
		return false
	}
	for _, part := range strings.Split(ref, "/") {
		if part == "" || part == "." || part == ".." {
			return false
		}
	}
	return true
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
