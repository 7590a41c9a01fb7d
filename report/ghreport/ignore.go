package ghreport

import (
	"bufio"
	"bytes"
	"path"
	"strings"

	"os"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"

	"github.com/goalrun/goalrun/internal/safefile"
)

// ignoreFileBytes bounds one .gitignore or .git/info/exclude read (git
// itself reads any size; a larger one is treated as absent, so more is
// committed, never less silently: the fix's report lists every path).
const ignoreFileBytes = 1 << 20

// ignorer decides, as git does for untracked files, whether a path of the
// workspace is ignored: the patterns of .git/info/exclude, of the
// workspace's .gitignore and of each .gitignore in the folders down to the
// path (a deeper file's patterns, and a later line, win; "!" re-includes),
// parsed and matched by go-git's gitignore package. As in git, a path
// inside an ignored folder stays ignored whatever a pattern re-includes.
// Files are read through the workspace's os.Root (no link leads out of
// it), regular files only. core.excludesFile (the user's own, not the
// repository's) is not read.
type ignorer struct {
	root  *os.Root
	base  []gitignore.Pattern            // .git/info/exclude
	dirs  map[string][]gitignore.Pattern // folder ("" is the root) → its .gitignore's patterns
	cache map[string]bool                // folder → ignored
}

func newIgnorer(root *os.Root) *ignorer {
	ig := &ignorer{root: root, dirs: map[string][]gitignore.Pattern{}, cache: map[string]bool{}}
	ig.base = ig.read(".git/info/exclude", nil)
	return ig
}

// read parses one ignore file; domain is the folder its patterns apply to.
func (ig *ignorer) read(name string, domain []string) []gitignore.Pattern {
	b, err := safefile.Read(ig.root, name, ignoreFileBytes)
	if err != nil {
		return nil
	}
	var ps []gitignore.Pattern
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), ignoreFileBytes)
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		ps = append(ps, gitignore.ParsePattern(line, domain))
	}
	return ps
}

// patterns returns the patterns that apply inside folder parts (every
// .gitignore from the root down to it), in increasing priority.
func (ig *ignorer) patterns(parts []string) []gitignore.Pattern {
	ps := append([]gitignore.Pattern(nil), ig.base...)
	for i := 0; i <= len(parts); i++ {
		dir := strings.Join(parts[:i], "/")
		own, ok := ig.dirs[dir]
		if !ok {
			own = ig.read(path.Join(dir, ".gitignore"), parts[:i])
			ig.dirs[dir] = own
		}
		ps = append(ps, own...)
	}
	return ps
}

// ignored says whether the file name (slash-separated, relative to the
// workspace root) is ignored.
func (ig *ignorer) ignored(name string) bool {
	parts := strings.Split(name, "/")
	for i := 1; i < len(parts); i++ {
		if ig.dirIgnored(parts[:i]) {
			return true
		}
	}
	return gitignore.NewMatcher(ig.patterns(parts[:len(parts)-1])).Match(parts, false)
}

// dirIgnored says whether the folder parts is itself ignored (by the
// patterns of the folders above it).
func (ig *ignorer) dirIgnored(parts []string) bool {
	key := strings.Join(parts, "/")
	if v, ok := ig.cache[key]; ok {
		return v
	}
	v := gitignore.NewMatcher(ig.patterns(parts[:len(parts)-1])).Match(parts, true)
	ig.cache[key] = v
	return v
}

// IgnoredPaths returns which of names (slash-separated, relative to the
// workspace) the workspace's ignore files ignore, as git decides for a
// path it does not track (see ignorer). Errors: the workspace cannot be
// opened.
func IgnoredPaths(workspace string, names []string) (map[string]bool, error) {
	root, err := os.OpenRoot(workspace)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	ig := newIgnorer(root)
	out := map[string]bool{}
	for _, n := range names {
		if ig.ignored(n) {
			out[n] = true
		}
	}
	return out, nil
}
