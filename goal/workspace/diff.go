package workspace

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/goalrun/goalrun/grounding"
)

// File change statuses (FileChange.Status), the words of the goalrun/1
// document's changes (docs/goalrun-1.md).
const (
	StatusAdded    = "added"
	StatusModified = "modified"
	StatusDeleted  = "deleted"
)

// FileChange is one changed path.
type FileChange struct {
	// Path is workspace-relative, with slashes.
	Path string
	// Status is StatusAdded, StatusModified or StatusDeleted.
	Status string
	// OldMode and NewMode are git-style modes ("100644", "100755",
	// "120000" for a symlink, "special" for a FIFO, socket or device); ""
	// when the path did not exist on that side.
	OldMode, NewMode string
	// Insertions and Deletions count changed lines of a text diff.
	Insertions, Deletions int
	// Binary is true when the content was not line-diffed: binary, larger
	// than the diff bound, unread (see Unread), a symlink or a special file.
	Binary bool
	// Unread says why the new content was never read ("hard link", "too
	// large", "special file", …); "" when it was read or is absent.
	Unread string
	// Target is the new symlink target ("" for other files).
	Target string
	// Risky lists why the change is risky (empty when it is not).
	Risky []string
	// CheckFile is true when the path is one of the check's files or a test
	// file: changing it makes a pass suspect.
	CheckFile bool
	// CheckReason says which rule made it a check file ("" when it is not).
	CheckReason string
}

// RiskyPath is a risky changed path and why.
type RiskyPath struct {
	Path   string
	Reason string
}

// Diff is the run's changes, in detail.
type Diff struct {
	// Files are the changed paths in byte order of their path, git's
	// database (GitInternal) excepted. Paths are relative to Root when it
	// is set, else to the workspace.
	Files []FileChange
	// GitInternal are the changed paths inside git's database (a .git
	// directory's objects, refs, logs, index, HEAD, …; its config, hooks and
	// info are in Files), in byte order: a commit, a moved branch, a
	// rewritten history. They are not counted in files_changed, nor in the
	// patch (git's own files are not the work the check verifies); every
	// one is risky, objects summarised per git directory (see Risky).
	GitInternal []FileChange
	// Insertions and Deletions are the totals over Files.
	Insertions, Deletions int
	// HostCode are the changes to git's executable configuration (see
	// Tracker.HostCode), collapsed per folder, at most HostCodeMax:
	// a run with any fails closed. They head Risky too.
	HostCode []RiskyPath
	// Risky are the risky paths, the most serious first (at most 256).
	Risky []RiskyPath
	// RiskyTotal counts the risky paths before Risky's bound of 256.
	RiskyTotal int
	// CheckModified is true when a check file or a test file changed.
	CheckModified bool
	// CheckModifiedReason names the most serious such change and the rule
	// that made it one: "calc/boot.go: adds or changes init() (…)".
	CheckModifiedReason string
	// PatchSHA256 is the hex SHA-256 of the canonical unified diff (see
	// writePatch); it identifies the change set.
	PatchSHA256 string
	// Patch is the start of that diff, at most Options.PatchBytes
	// bytes ("" when PatchBytes is 0); PatchCut says it was cut there.
	Patch    string
	PatchCut bool
	// Truncated is true when a snapshot hit Options.MaxFiles.
	Truncated bool
	// Root is the host folder the paths are relative to when the tracker
	// covered a mount wider than the workspace (Options.Root), and
	// Workdir the workspace's slash path inside it; both "" otherwise.
	Root, Workdir string
}

// cappedBuffer keeps the first limit bytes written to it and drops the rest
// (never failing the writer it is teed from).
type cappedBuffer struct {
	b     bytes.Buffer
	limit int
	cut   bool
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if room := c.limit - c.b.Len(); room < len(p) {
		c.cut = true
		c.b.Write(p[:max(room, 0)])
		return len(p), nil
	}
	c.b.Write(p)
	return len(p), nil
}

// gitMode is the git-style mode of an entry.
func gitMode(e *entry) string {
	switch {
	case e == nil:
		return ""
	case e.mode&fs.ModeSymlink != 0:
		return "120000"
	case e.mode.IsRegular():
		if e.mode&0o100 != 0 {
			return "100755"
		}
		return "100644"
	}
	return "special"
}

// sameContent reports whether a path's entry is unchanged between snapshots.
func sameContent(a, b *entry) bool {
	if gitMode(a) != gitMode(b) {
		return false
	}
	switch {
	case a.mode&fs.ModeSymlink != 0:
		return a.target == b.target
	case a.mode.IsRegular():
		if a.hashed && b.hashed {
			return a.hash == b.hash
		}
		return sameFile(a, b) // content unknown: the inode and times must hold
	}
	return a.mode == b.mode && a.dev == b.dev && a.ino == b.ino
}

// compare builds the diff of base → cur; contents are read from the
// baseline store (old) and through root (new), safely.
func (t *Tracker) compare(ctx context.Context, root *os.Root, base, cur *snapshot) *Diff {
	d := &Diff{Truncated: base.truncated || cur.truncated}
	paths := mergeSorted(base.paths, cur.paths)
	sum := sha256.New()
	var patch io.Writer = sum
	if t.patchTee != nil {
		patch = io.MultiWriter(sum, t.patchTee)
	}
	var kept *cappedBuffer
	if t.opt.PatchBytes > 0 {
		kept = &cappedBuffer{limit: t.opt.PatchBytes}
		patch = io.MultiWriter(patch, kept)
	}
	env := &classifyEnv{decls: t.goDeclsOf(root, cur), cur: cur}
	bestCheck := 0
	for _, p := range paths {
		if ctx.Err() != nil {
			break
		}
		o, n := base.entries[p], cur.entries[p]
		if o != nil && n != nil && sameContent(o, n) {
			continue
		}
		if (o != nil && o.mode.IsDir()) || (n != nil && n.mode.IsDir()) {
			continue // an unreadable directory marker
		}
		fc := FileChange{Path: p, OldMode: gitMode(o), NewMode: gitMode(n)}
		switch {
		case o == nil:
			fc.Status = StatusAdded
		case n == nil:
			fc.Status = StatusDeleted
		default:
			fc.Status = StatusModified
		}
		if (o != nil && o.internal) || (n != nil && n.internal) {
			fc.Binary, fc.Risky = true, []string{grounding.RiskGitDB}
			d.GitInternal = append(d.GitInternal, fc)
			continue
		}
		if n != nil && n.mode&fs.ModeSymlink != 0 {
			fc.Target = n.target
		}
		oldText, oldOK := t.oldContent(o)
		newText, newOK := t.newContent(root, p, n, &fc)
		writeHeader(patch, &fc, o, n)
		if oldOK && newOK {
			fc.Insertions, fc.Deletions = writeTextDiff(patch, fc.Path, oldText, newText)
		} else {
			fc.Binary = true
			writeBinary(patch, &fc, o, n)
		}
		t.classify(&fc, o, n, oldText, newText, oldOK, newOK, env)
		d.Insertions += fc.Insertions
		d.Deletions += fc.Deletions
		if fc.CheckFile {
			d.CheckModified = true
			if r := grounding.CheckReasonRank(fc.CheckReason); d.CheckModifiedReason == "" || r < bestCheck {
				d.CheckModifiedReason, bestCheck = fc.Path+": "+fc.CheckReason, r
			}
		}
		d.Files = append(d.Files, fc)
	}
	d.PatchSHA256 = hex.EncodeToString(sum.Sum(nil))
	if kept != nil {
		d.Patch, d.PatchCut = kept.b.String(), kept.cut
	}
	var covered map[string]bool
	d.HostCode, covered = t.hostCode(root, base, cur)
	d.Risky, d.RiskyTotal = rankRisky(d.Files, d.GitInternal, covered)
	d.Risky = append(append([]RiskyPath(nil), d.HostCode...), d.Risky...)
	d.RiskyTotal += len(d.HostCode)
	if len(d.Risky) > riskyKeep {
		d.Risky = d.Risky[:riskyKeep]
	}
	return d
}

// goDeclsOf returns, for a folder of the snapshot cur, the names its Go
// files declare at package level (any .go file there, test files and
// build-constrained ones included: any of them may be compiled into the
// test binary), read through root; memoised per folder.
func (t *Tracker) goDeclsOf(root *os.Root, cur *snapshot) func(dir string) map[string]bool {
	memo := map[string]map[string]bool{}
	return func(dir string) map[string]bool {
		if m, ok := memo[dir]; ok {
			return m
		}
		m := map[string]bool{}
		prefix := ""
		if dir != "." {
			prefix = dir + "/"
		}
		for i := sort.SearchStrings(cur.paths, prefix); i < len(cur.paths) && strings.HasPrefix(cur.paths[i], prefix); i++ {
			p := cur.paths[i]
			e := cur.entries[p]
			if strings.Contains(p[len(prefix):], "/") || !strings.HasSuffix(p, ".go") || !e.mode.IsRegular() || e.unread != "" {
				continue
			}
			if b, err := t.readRegular(root, p, e); err == nil {
				grounding.GoPackageDecls(b, m)
			}
		}
		memo[dir] = m
		return m
	}
}

// classifyEnv is what the check-file and risk rules know of the current
// tree besides the file they classify (a grounding.Tree).
type classifyEnv struct {
	decls func(dir string) map[string]bool // a folder's Go package-level names
	cur   *snapshot
}

var _ grounding.Tree = (*classifyEnv)(nil)

// Has reports whether the current tree holds p (not a folder).
func (c *classifyEnv) Has(p string) bool { return c.cur.entries[p] != nil }

// GoDecls returns the names the Go files of the folder dir declare at
// package level.
func (c *classifyEnv) GoDecls(dir string) map[string]bool { return c.decls(dir) }

// Children lists the current entries directly in the folder dir.
func (c *classifyEnv) Children(dir string) []string {
	prefix := ""
	if dir != "." {
		prefix = dir + "/"
	}
	var out []string
	for i := sort.SearchStrings(c.cur.paths, prefix); i < len(c.cur.paths) && strings.HasPrefix(c.cur.paths[i], prefix); i++ {
		if !strings.Contains(c.cur.paths[i][len(prefix):], "/") {
			out = append(out, c.cur.paths[i])
		}
	}
	return out
}

// oldContent returns the baseline text of e when it was kept (or an empty
// text when the path did not exist).
func (t *Tracker) oldContent(e *entry) ([]byte, bool) {
	switch {
	case e == nil:
		return nil, true
	case e.mode&fs.ModeSymlink != 0 || !e.mode.IsRegular():
		return nil, false
	case e.hashed && e.size == 0:
		return nil, true
	case e.stored:
		return t.store.get(e.hash)
	}
	return nil, false
}

// newContent returns the current text of the file e describes, read safely
// again (and checked against the snapshot's hash), when it is a text file
// within the diff bound; a file the snapshot did not read stays unread.
func (t *Tracker) newContent(root *os.Root, p string, e *entry, fc *FileChange) ([]byte, bool) {
	switch {
	case e == nil:
		return nil, true
	case e.mode&fs.ModeSymlink != 0:
		return nil, false
	case !e.mode.IsRegular():
		fc.Unread = "special file"
		return nil, false
	case e.unread != "":
		fc.Unread = e.unread
		return nil, false
	case e.size > t.opt.DiffFileBytes:
		return nil, false
	}
	b, err := t.readRegular(root, p, e)
	if err != nil || sha256.Sum256(b) != e.hash || !isText(b) {
		return nil, false
	}
	return b, true
}

// writeHeader writes a file's git-style header to the patch.
func writeHeader(w io.Writer, fc *FileChange, o, n *entry) {
	fmt.Fprintf(w, "diff --git a/%s b/%s\n", fc.Path, fc.Path)
	switch fc.Status {
	case StatusAdded:
		fmt.Fprintf(w, "new file mode %s\n", fc.NewMode)
	case StatusDeleted:
		fmt.Fprintf(w, "deleted file mode %s\n", fc.OldMode)
	default:
		if fc.OldMode != fc.NewMode {
			fmt.Fprintf(w, "old mode %s\nnew mode %s\n", fc.OldMode, fc.NewMode)
		}
	}
}

// writeBinary writes the patch lines of content that is not line-diffed:
// the identities of both sides (content hash, symlink target, or what is
// known of an unread file) so the patch hash still changes with them.
func writeBinary(w io.Writer, fc *FileChange, o, n *entry) {
	fmt.Fprintf(w, "index %s..%s\nBinary files a/%s and b/%s differ\n", identity(o), identity(n), fc.Path, fc.Path)
}

func identity(e *entry) string {
	switch {
	case e == nil:
		return "0"
	case e.mode&fs.ModeSymlink != 0:
		return "link:" + strconv.Quote(e.target)
	case e.hashed:
		return hex.EncodeToString(e.hash[:])
	}
	return fmt.Sprintf("unread:%s:%d:%d:%d", e.unread, e.size, e.ino, e.mtime)
}

// mergeSorted returns the sorted union of two sorted lists.
func mergeSorted(a, b []string) []string {
	out := make([]string, 0, max(len(a), len(b)))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i] < b[j]):
			out = append(out, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

// classify fills fc.Risky, fc.CheckFile and fc.CheckReason by the
// check-file and risk rules (grounding.Check.Classify).
func (t *Tracker) classify(fc *FileChange, o, n *entry, oldText, newText []byte, oldOK, newOK bool, env *classifyEnv) {
	_, own := t.own[fc.Path]
	ch := grounding.Change{
		Path: fc.Path, Added: o == nil, Removed: n == nil, ReplacesOwnFile: own,
		Old: oldText, New: newText, OldOK: oldOK, NewOK: newOK,
	}
	if n != nil {
		ch.Symlink, ch.Target = n.mode&fs.ModeSymlink != 0, n.target
		ch.HardLink = n.unread == "hard link"
		ch.Special = !n.mode.IsRegular() && n.mode&fs.ModeSymlink == 0
	}
	c := t.check.Classify(ch, env)
	fc.Risky, fc.CheckFile, fc.CheckReason = c.Risky, c.CheckFile, c.CheckReason
}

// rankRisky lists risky files, the most serious reason first, then by path,
// at most riskyKeep of them, and returns how many there were before that
// bound. Paths in skip (git's executable configuration, listed apart by
// hostCode) are left out. A change in git's database (git) is listed path by path, except
// objects: those of one git directory are one entry, "DIR/objects/ (N
// files changed)", since their names say nothing and a single commit
// writes several.
func rankRisky(files, git []FileChange, skip map[string]bool) ([]RiskyPath, int) {
	rank := grounding.RiskRank
	var out []RiskyPath
	for _, f := range files {
		if len(f.Risky) == 0 || skip[f.Path] {
			continue
		}
		best := f.Risky[0]
		for _, r := range f.Risky[1:] {
			if rank(r) < rank(best) {
				best = r
			}
		}
		out = append(out, RiskyPath{Path: f.Path, Reason: best})
	}
	objects := map[string]int{}
	for _, f := range git {
		if skip[f.Path] {
			continue // inside a new repository, listed as one entry
		}
		if dir := gitObjectsDir(f.Path); dir != "" {
			objects[dir]++
			continue
		}
		out = append(out, RiskyPath{Path: f.Path, Reason: grounding.RiskGitDB})
	}
	for dir, n := range objects {
		out = append(out, RiskyPath{Path: fmt.Sprintf("%s (%d %s changed)", dir, n, plural(n, "file", "files")), Reason: grounding.RiskGitDB})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if rank(out[i].Reason) != rank(out[j].Reason) {
			return rank(out[i].Reason) < rank(out[j].Reason)
		}
		return out[i].Path < out[j].Path
	})
	total := len(out)
	if len(out) > riskyKeep {
		out = out[:riskyKeep]
	}
	return out, total
}

// gitObjectsDir returns the objects folder ("…/.git/objects/", or a
// submodule's "…/.git/modules/NAME/objects/") that p lies in, or "".
func gitObjectsDir(p string) string {
	rel, in := insideGit(p)
	if !in {
		return ""
	}
	off := len(p) - len(rel)
	for {
		if strings.HasPrefix(rel, "objects/") {
			return p[:off+len("objects/")]
		}
		rest, ok := strings.CutPrefix(rel, "modules/")
		if !ok {
			return ""
		}
		i := strings.IndexByte(rest, '/')
		if i < 0 {
			return ""
		}
		off += len("modules/") + i + 1
		rel = rest[i+1:]
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
