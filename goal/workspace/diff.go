package workspace

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
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
			fc.Binary, fc.Risky = true, []string{riskGitDB}
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
			if r := checkReasonRank(fc.CheckReason); d.CheckModifiedReason == "" || r < bestCheck {
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
				goPackageDecls(b, m)
			}
		}
		memo[dir] = m
		return m
	}
}

// classifyEnv is what classify knows of the current tree besides the file
// it classifies.
type classifyEnv struct {
	decls func(dir string) map[string]bool // a folder's Go package-level names
	cur   *snapshot
}

// has reports whether the current tree holds p (not a folder).
func (c *classifyEnv) has(p string) bool { return c.cur.entries[p] != nil }

// children lists the current entries directly in the folder dir.
func (c *classifyEnv) children(dir string) []string {
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

// testRunnerConfigChanged reports whether a change to a file named base
// changes pytest's (py) or tox's configuration in it (a side that cannot
// be read counts).
func testRunnerConfigChanged(base string, a, b []byte, aOK, bOK bool) (py, tox bool) {
	switch base {
	case "pyproject.toml":
		return tomlTableChanged(a, b, aOK, bOK, "tool", "pytest"), tomlTableChanged(a, b, aOK, bOK, "tool", "tox")
	case "tox.ini":
		return iniSectionsChanged(a, b, aOK, bOK, "pytest"), iniSectionsChanged(a, b, aOK, bOK, "tox", "testenv")
	case "setup.cfg":
		return iniSectionsChanged(a, b, aOK, bOK, "tool:pytest"), iniSectionsChanged(a, b, aOK, bOK, "tox:tox", "testenv")
	}
	return true, false // pytest.ini, .pytest.ini: all of it is pytest's
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

// Risk reasons.
const (
	riskCheck     = "the check's own file"
	riskTest      = "a test file"
	riskOwnFile   = "replaced goalrun's own --output or --events file"
	riskLinkOut   = "symlink pointing outside the workspace"
	riskLinkAbs   = "symlink with an absolute target"
	riskHardlink  = "hard link (never read)"
	riskSpecial   = "special file (FIFO, socket or device; never read)"
	riskWorkflow  = "GitHub Actions workflow or action"
	riskOwners    = "code owners (who must review)"
	riskGit       = "git configuration or hooks"
	riskGitDB     = "git history, refs or index (a commit, a moved branch)"
	riskAgent     = "agent or goalrun configuration"
	riskBuild     = "build script"
	riskScripts   = "package.json scripts changed"
	riskGenerate  = "go:generate directive added or changed"
	riskPytestCfg = "test runner configuration changed"
)

// riskOrder ranks reasons, most serious first.
var riskOrder = []string{riskCheck, riskTest, riskOwnFile, riskLinkOut, riskLinkAbs, riskHardlink, riskSpecial, riskWorkflow,
	riskOwners, riskGit, riskGitDB, riskAgent, riskPytestCfg, riskScripts, riskGenerate, riskBuild}

// classify fills fc.Risky and fc.CheckFile.
func (t *Tracker) classify(fc *FileChange, o, n *entry, oldText, newText []byte, oldOK, newOK bool, env *classifyEnv) {
	p := fc.Path
	add := func(r string) { fc.Risky = append(fc.Risky, r) }
	if t.checkFiles[p] || runnerConfig(p, t.sub, t.checkRun) {
		fc.CheckFile, fc.CheckReason = true, riskCheck
		add(riskCheck)
	} else if isTestFile(p) {
		fc.CheckFile, fc.CheckReason = true, riskTest
		add(riskTest)
	} else if r := goCheckReason(p, t.checkRun, o == nil, oldText, newText, oldOK, newOK, env.decls); r != "" {
		fc.CheckFile, fc.CheckReason = true, r
		add(riskCheck)
	} else if r := pythonCheckReason(p, t.checkRun, n, env.has, env.children, oldText, newText, oldOK, newOK); r != "" {
		fc.CheckFile, fc.CheckReason = true, r
		add(riskCheck)
	}
	if _, own := t.own[p]; own && n != nil {
		// Never goalrun's file here: the tracker leaves that one out.
		add(riskOwnFile)
	}
	if n != nil {
		switch {
		case n.mode&fs.ModeSymlink != 0:
			if path.IsAbs(n.target) {
				add(riskLinkAbs)
			} else if cleanRel(path.Join(path.Dir(p), n.target)) == "" {
				add(riskLinkOut)
			}
		case n.unread == "hard link":
			add(riskHardlink)
		case !n.mode.IsRegular():
			add(riskSpecial)
		}
	}
	base := path.Base(p)
	lower := strings.ToLower(p)
	switch {
	case strings.HasPrefix(p, ".github/workflows/"), strings.HasPrefix(p, ".github/actions/"):
		add(riskWorkflow)
	case base == "CODEOWNERS" && (p == base || p == ".github/"+base || p == "docs/"+base || p == ".gitlab/"+base):
		add(riskOwners)
	case strings.HasPrefix(base, ".git") || strings.Contains("/"+p, "/.git/"):
		add(riskGit)
	}
	if isAgentConfig(p) {
		add(riskAgent)
	}
	if isBuildScript(p) {
		add(riskBuild)
	}
	switch {
	case base == "package.json":
		if !oldOK || !newOK || jsonKeyChanged(oldText, newText, "scripts") {
			add(riskScripts)
			if t.checkRun["npm"] {
				fc.CheckFile = true
			}
		}
		if t.checkRun["npm"] && (!oldOK || !newOK || jsonKeyChanged(oldText, newText, "jest")) {
			fc.CheckFile = true
		}
	case base == "pyproject.toml" || base == "setup.cfg" || base == "tox.ini" || base == ".pytest.ini" || base == "pytest.ini":
		py, tox := testRunnerConfigChanged(base, oldText, newText, oldOK, newOK)
		if py || tox {
			add(riskPytestCfg)
		}
		if py && (t.checkRun["pytest"] || t.checkRun["tox"]) || tox && t.checkRun["tox"] {
			fc.CheckFile = true
		}
	case strings.HasSuffix(lower, ".go"):
		if newOK && goGenerateChanged(oldText, newText) {
			add(riskGenerate)
		}
	}
	if fc.CheckFile && !contains(fc.Risky, riskCheck) && !contains(fc.Risky, riskTest) {
		add(riskCheck)
	}
	if fc.CheckFile && fc.CheckReason == "" {
		fc.CheckReason = riskCheck
	}
}

// checkReasonRank orders the reasons a file is the check's: its own files
// first, then the Go rules, then test files.
func checkReasonRank(r string) int {
	switch r {
	case riskCheck:
		return 0
	case riskTest:
		return 2
	}
	return 1
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// rankRisky lists risky files, the most serious reason first, then by path,
// at most riskyKeep of them, and returns how many there were before that
// bound. Paths in skip (git's executable configuration, listed apart by
// hostCode) are left out. A change in git's database (git) is listed path by path, except
// objects: those of one git directory are one entry, "DIR/objects/ (N
// files changed)", since their names say nothing and a single commit
// writes several.
func rankRisky(files, git []FileChange, skip map[string]bool) ([]RiskyPath, int) {
	rank := map[string]int{}
	for i, r := range riskOrder {
		rank[r] = i
	}
	var out []RiskyPath
	for _, f := range files {
		if len(f.Risky) == 0 || skip[f.Path] {
			continue
		}
		best := f.Risky[0]
		for _, r := range f.Risky[1:] {
			if rank[r] < rank[best] {
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
		out = append(out, RiskyPath{Path: f.Path, Reason: riskGitDB})
	}
	for dir, n := range objects {
		out = append(out, RiskyPath{Path: fmt.Sprintf("%s (%d %s changed)", dir, n, plural(n, "file", "files")), Reason: riskGitDB})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if rank[out[i].Reason] != rank[out[j].Reason] {
			return rank[out[i].Reason] < rank[out[j].Reason]
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

var (
	reTestBase = regexp.MustCompile(`(?i)(_test\.go|^test_.*\.py|_test\.py|\.(test|spec)\.[cm]?[jt]sx?|\.spec\.\w+|_spec\.rb|_test\.rb|Tests?\.(java|kt|cs|php|swift|scala)|_test\.(rs|exs|dart|cc|cpp|c)|^conftest\.py|\.snap)$`)
	testDirs   = map[string]bool{"test": true, "tests": true, "__tests__": true, "spec": true, "specs": true,
		"testdata": true, "__snapshots__": true, "e2e": true, "test_data": true, "fixtures": true}
)

// isTestFile reports whether p is a test file or lies in a test directory.
func isTestFile(p string) bool {
	if reTestBase.MatchString(path.Base(p)) {
		return true
	}
	dirs := strings.Split(path.Dir(p), "/")
	for _, d := range dirs {
		if testDirs[strings.ToLower(d)] {
			return true
		}
	}
	return false
}

// isAgentConfig reports agent and goalrun configuration: what a later run
// of an agent (or of goalrun) obeys.
func isAgentConfig(p string) bool {
	first := strings.SplitN(p, "/", 2)[0]
	switch first {
	case ".claude", ".codex", ".gemini", ".cursor", ".aider", ".continue", ".windsurf":
		return true
	}
	switch path.Base(p) {
	case ".mcp.json", "CLAUDE.md", "CLAUDE.local.md", "AGENTS.md", "GEMINI.md", ".cursorrules", ".goalrun.yml",
		".goalrun.yaml", ".aider.conf.yml", ".windsurfrules":
		return true
	}
	return false
}

// isBuildScript reports files that a build or a developer's shell runs.
func isBuildScript(p string) bool {
	base := path.Base(p)
	lb := strings.ToLower(base)
	switch lb {
	case "makefile", "gnumakefile", "build.sh", "build.rs", "justfile", "taskfile.yml", "taskfile.yaml",
		"cmakelists.txt", "setup.py", "noxfile.py", ".envrc", ".pre-commit-config.yaml", ".npmrc", ".yarnrc",
		".yarnrc.yml", "build.gradle", "build.gradle.kts", "settings.gradle", "settings.gradle.kts", "pom.xml",
		"dockerfile", "containerfile", "rakefile", "build.ninja", "meson.build", "workspace", "module.bazel":
		return true
	}
	if strings.HasSuffix(lb, ".mk") || strings.HasPrefix(lb, "dockerfile.") || strings.HasSuffix(lb, ".dockerfile") {
		return true
	}
	return strings.HasPrefix(p, ".husky/") || strings.HasPrefix(p, ".devcontainer/")
}

// jsonKeyChanged reports whether a top-level key of two JSON documents
// differs (an unparsable side counts as changed).
func jsonKeyChanged(a, b []byte, key string) bool {
	var x, y map[string]json.RawMessage
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return len(a) > 0 || len(b) > 0
	}
	return !bytes.Equal(compactJSON(x[key]), compactJSON(y[key]))
}

func compactJSON(m json.RawMessage) []byte {
	var b bytes.Buffer
	if len(m) == 0 || json.Compact(&b, m) != nil {
		return m
	}
	return b.Bytes()
}

// goGenerateChanged reports whether the set of //go:generate lines differs.
func goGenerateChanged(a, b []byte) bool {
	return goGenerate(a) != goGenerate(b)
}

func goGenerate(data []byte) string {
	var lines []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "//go:generate") {
			lines = append(lines, strings.TrimSpace(line))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// Runners returns the test runners and build tools a check command line
// uses, by the names its words give ("go" and "gotest" for go test,
// "pytest", "unittest", "make", "npm", …), read with a real shell parser.
func Runners(check string) map[string]bool {
	runs := map[string]bool{}
	cmds, _ := shellCommands(check)
	for _, c := range cmds {
		checkRunners(c, runs)
	}
	words := ShellWords(check)
	for i, w := range words {
		lw := strings.ToLower(path.Base(w))
		switch lw {
		case "make", "gmake":
			runs["make"] = true
		case "npm", "yarn", "pnpm", "bun", "npx", "jest", "vitest", "mocha":
			runs["npm"] = true
		case "pytest", "py.test":
			runs["pytest"] = true
		case "tox", "nox":
			runs["tox"] = true
		case "cargo":
			runs["cargo"] = true
		case "just":
			runs["just"] = true
		case "task":
			runs["task"] = true
		case "mvn", "gradle", "gradlew":
			runs["jvm"] = true
		case "rspec", "rake", "bundle":
			runs["ruby"] = true
		case "phpunit":
			runs["php"] = true
		case "ctest", "cmake":
			runs["cmake"] = true
		case "bazel", "bazelisk":
			runs["bazel"] = true
		case "-m":
			if i+1 < len(words) && (words[i+1] == "pytest" || words[i+1] == "unittest") {
				runs[words[i+1]] = true
			}
		default:
			if rePythonCmd.MatchString(lw) {
				runs["python"] = true
			}
		}
	}
	return runs
}

// rePythonCmd matches a Python interpreter's name: python, python3,
// python3.12, pypy3, uv, poetry, pipenv, hatch, pdm (which run it).
var rePythonCmd = regexp.MustCompile(`^(python|pypy)\d*(\.\d+)?$|^(uv|poetry|pipenv|hatch|pdm|rye)$`)

// pythonMarkers are files that make a tree a Python project.
var pythonMarkers = map[string]bool{"pyproject.toml": true, "setup.py": true, "setup.cfg": true, "tox.ini": true,
	"pytest.ini": true, ".pytest.ini": true, "conftest.py": true, "noxfile.py": true}

// checkFilesOf returns the baseline files the check reads: the workspace
// files its words name (a script, a Makefile given with -f) and the
// configuration of the runners it uses; and which runners it uses. sub is
// the workspace's slash path inside the scanned folder ("" when it is the
// workspace): the check runs in the workspace, so its words are resolved
// from there ("../test.sh" with sub "app" is "test.sh").
func checkFilesOf(check, sub string, base *snapshot) (map[string]bool, map[string]bool) {
	files, runs := map[string]bool{}, Runners(check)
	for _, w := range ShellWords(check) {
		if sub != "" && !path.IsAbs(w) {
			w = path.Join(sub, w)
		}
		if p := cleanRel(w); p != "" {
			if e := base.entries[p]; e != nil && !e.mode.IsDir() {
				files[p] = true
			}
		}
	}
	if !runs["gotest"] && (len(files) > 0 || runs["make"] || runs["just"] || runs["task"]) {
		// A script, Makefile or task file of the check may run go test:
		// in a Go module, assume it does.
		for _, p := range base.paths {
			if path.Base(p) == "go.mod" && !strings.Contains("/"+p, "/vendor/") {
				runs["gotest"], runs["go"] = true, true
				break
			}
		}
	}
	if !pythonRuns(runs) && (len(files) > 0 || runs["make"] || runs["just"] || runs["task"]) {
		// Likewise a Python project's script or Makefile may run pytest.
		for _, p := range base.paths {
			if pythonMarkers[path.Base(p)] && !strings.Contains("/"+p, "/node_modules/") && !strings.Contains("/"+p, "/site-packages/") {
				runs["python"], runs["pytest"] = true, true
				break
			}
		}
	}
	for _, p := range base.paths {
		// (node_modules/ is matched by classify alone: it can be huge.)
		if runnerConfig(p, sub, runs) && !strings.Contains("/"+p, "/node_modules/") {
			files[p] = true
		}
	}
	return files, runs
}

// runnerConfig reports whether the slash path p (in the scanned folder;
// sub as for checkFilesOf) configures a test runner the check uses (runs,
// from checkFilesOf): a Makefile for make, jest/vitest/mocha configuration
// and anything under node_modules/ for npm-style runners, conftest.py and
// pytest.ini for pytest, and so on. It applies to files the agent added as
// much as to files that were there: a new GNUmakefile overrides Makefile, a
// new pytest.ini can make pytest collect nothing.
func runnerConfig(p, sub string, runs map[string]bool) bool {
	b := path.Base(p)
	lb := strings.ToLower(b)
	top := path.Dir(p) == path.Clean("./"+sub) // directly in the workspace
	switch {
	case runs["make"] && (top && (lb == "makefile" || lb == "gnumakefile") || strings.HasSuffix(lb, ".mk")):
	case runs["npm"] && (strings.HasPrefix(lb, "jest.config.") || strings.HasPrefix(lb, "vitest.config.") ||
		strings.HasPrefix(lb, ".mocharc") || lb == "jest.setup.js" || lb == "jest.setup.ts" || strings.HasPrefix(lb, "babel.config.") ||
		strings.HasPrefix(lb, ".babelrc") || lb == ".npmrc" || lb == ".yarnrc" || lb == ".yarnrc.yml" || lb == ".pnpmfile.cjs" ||
		strings.HasPrefix(p, "node_modules/") || strings.Contains(p, "/node_modules/")):
	case runs["pytest"] && (lb == "conftest.py" || lb == "pytest.ini" || lb == ".pytest.ini"):
	case (runs["pytest"] || runs["unittest"]) && shadowsPythonRunner(p, sub, runs):
	case runs["cargo"] && (lb == "build.rs"):
	case runs["just"] && top && lb == "justfile":
	case runs["task"] && top && strings.HasPrefix(lb, "taskfile."):
	case runs["jvm"] && (lb == "pom.xml" || strings.HasPrefix(lb, "build.gradle") || strings.HasPrefix(lb, "settings.gradle")):
	case runs["ruby"] && (lb == ".rspec" || lb == "rakefile" || lb == "spec_helper.rb"):
	case runs["php"] && strings.HasPrefix(lb, "phpunit.xml"):
	case runs["cmake"] && lb == "cmakelists.txt":
	case runs["bazel"] && (lb == "build" || lb == "build.bazel" || strings.HasSuffix(lb, ".bzl")):
	default:
		return false
	}
	return true
}

// shadowsPythonRunner reports a Python module at the top of the workspace
// (sub: its slash path in the scanned folder) that "python -m pytest" or
// "python -m unittest" would import instead of the real runner, since
// python -m puts the current folder first on sys.path: pytest.py, py.py,
// pluggy.py, _pytest.py, unittest.py or a package of those names, and
// sitecustomize.py or usercustomize.py.
func shadowsPythonRunner(p, sub string, runs map[string]bool) bool {
	rel := p
	if sub != "" {
		var ok bool
		if rel, ok = strings.CutPrefix(p, sub+"/"); !ok {
			return false
		}
	}
	first, _, _ := strings.Cut(rel, "/")
	name := strings.TrimSuffix(first, ".py")
	if first != rel && first == name+".py" {
		return false // a folder named like a module file
	}
	switch name {
	case "pytest", "_pytest", "py", "pluggy":
		return runs["pytest"]
	case "unittest", "sitecustomize", "usercustomize":
		return true
	}
	return false
}
