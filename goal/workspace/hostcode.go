package workspace

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/goalrun/goalrun/grounding"
)

// HostCodeMax bounds the entries naming changes to git's executable
// configuration (Diff.HostCode, changes.git_executable): 8. They
// are collapsed per folder first (a git directory's hooks, a new
// repository); beyond the bound the last entry counts the rest.
const HostCodeMax = 8

// gitIncludeDepth bounds how deep include.path chains are followed: 10,
// git's own limit (config.c, MAX_INCLUDE_DEPTH).
const gitIncludeDepth = 10

// hostIndex is what the baseline says about the programs git would run on
// the host: the git directories present, and the workspace files its
// configuration names — included configuration files, hooks folders
// (core.hooksPath), attributes files (core.attributesFile) and the scripts
// its commands run (core.fsmonitor = tools/watch.sh, filter drivers, …).
// Built by Baseline from the trusted, untouched tree.
type hostIndex struct {
	gitDirs map[string]bool   // ".git", "sub/.git", a bare repository's folder
	named   map[string]string // workspace file → the variable that names it
	hooks   []string          // hooks folders, slash paths ending in "/"
	attrs   map[string]bool   // attributes files
}

// indexHost builds the hostIndex of snapshot s, reading the configuration
// files through root. topAbs is the scanned folder's absolute host path
// (absolute paths in the configuration are resolved against it).
func (t *Tracker) indexHost(root *os.Root, s *snapshot, topAbs string) *hostIndex {
	h := &hostIndex{gitDirs: map[string]bool{}, named: map[string]string{}, attrs: map[string]bool{}}
	for _, p := range s.paths {
		if rel, in := insideGit(p); in {
			h.gitDirs[p[:len(p)-len(rel)-1]] = true
		} else if path.Base(p) == "HEAD" && looksLikeGitDir(root, s, path.Dir(p)) {
			h.gitDirs[path.Dir(p)] = true // a bare repository, or a worktree's or a split one's git directory
		}
	}
	seen := map[string]bool{}
	var read func(file, worktree string, depth int)
	read = func(file, worktree string, depth int) {
		e := s.entries[file]
		if seen[file] || depth > gitIncludeDepth || e == nil || !e.mode.IsRegular() {
			return
		}
		seen[file] = true
		data, err := t.readRegular(root, file, e)
		if err != nil {
			return
		}
		for _, v := range parseGitConfig(data) {
			kind := gitExecKey(v)
			if kind == "" {
				continue
			}
			name := v.section + "." + v.key
			switch kind {
			case "include":
				if p := resolveConfigPath(v.value, path.Dir(file), topAbs); p != "" {
					h.named[p] = name
					read(p, worktree, depth+1)
				}
			case "hooks":
				if p := resolveConfigPath(v.value, worktree, topAbs); p != "" {
					h.hooks = append(h.hooks, p+"/")
				}
			case "attributes":
				if p := resolveConfigPath(v.value, worktree, topAbs); p != "" {
					h.attrs[p] = true
				}
			case "command":
				for _, w := range grounding.ShellWords(strings.TrimPrefix(strings.TrimSpace(v.value), "!")) {
					if !strings.Contains(w, "/") {
						continue // found on PATH, not in the workspace
					}
					if p := resolveConfigPath(w, worktree, topAbs); p != "" && s.entries[p] != nil {
						h.named[p] = name
					}
				}
			}
		}
	}
	dirs := make([]string, 0, len(h.gitDirs))
	for g := range h.gitDirs {
		dirs = append(dirs, g)
	}
	sort.Strings(dirs)
	for _, g := range dirs {
		worktree := g // a bare repository runs its hooks in itself
		if path.Base(g) == ".git" {
			worktree = path.Dir(g)
		}
		read(joinRel(g, "config"), worktree, 0)
		read(joinRel(g, "config.worktree"), worktree, 0)
	}
	return h
}

// joinRel joins slash paths of the scanned folder ("." or "" is its top).
func joinRel(dir, name string) string {
	if dir == "" || dir == "." {
		return name
	}
	return dir + "/" + name
}

// resolveConfigPath turns a path written in a git configuration value into
// a slash path of the scanned folder: relative to base (itself such a
// path), or absolute and inside topAbs. "" when it lies outside (a home
// folder, "~/…", another tree) or is empty.
func resolveConfigPath(v, base, topAbs string) string {
	v = strings.TrimSpace(v)
	switch {
	case v == "", strings.HasPrefix(v, "~"):
		return ""
	case filepath.IsAbs(v):
		if topAbs == "" {
			return ""
		}
		rel, err := filepath.Rel(topAbs, filepath.Clean(v))
		if err != nil || !filepath.IsLocal(rel) {
			return ""
		}
		return filepath.ToSlash(rel)
	}
	if base == "" {
		base = "."
	}
	return cleanRel(path.Join(base, v))
}

// gitExecRel reports whether rel, a path inside a git directory, is one
// of the files that make git run programs: config (and config.worktree),
// commondir (which moves the config elsewhere), hooks, info/attributes —
// also inside a submodule's or a linked worktree's directory (modules/NAME/,
// worktrees/NAME/; NAME may hold slashes).
func gitExecRel(rel string) bool {
	switch {
	case rel == "config", rel == "config.worktree", rel == "commondir", rel == "info/attributes",
		strings.HasPrefix(rel, "hooks/"):
		return true
	}
	for _, nest := range []string{"modules/", "worktrees/"} {
		rest, ok := strings.CutPrefix(rel, nest)
		if !ok {
			continue
		}
		for i := 0; i < len(rest); i++ {
			if rest[i] == '/' && gitExecRel(rest[i+1:]) {
				return true
			}
		}
	}
	return false
}

// hostChange is one path whose change makes git run the agent's program.
type hostChange struct {
	path, group, reason string
}

// Reasons of changes to git's executable configuration.
const (
	hostNewRepo    = "a new git repository (its configuration and hooks run when git is used there)"
	hostGitFile    = "a .git file or link (it points git at another repository)"
	hostConfig     = "git configuration (it can name programs git runs: core.fsmonitor, core.hooksPath, filters …)"
	hostHook       = "a git hook (git runs it)"
	hostCommondir  = "git's commondir (it moves the configuration git reads)"
	hostInfoAttrs  = "git attributes in .git/info (filter, diff and merge drivers)"
	hostAttrDriver = "git attributes that set a filter, diff or merge driver"
	hostSubmodule  = "a .gitmodules entry with a command, or a URL or path git could take for an option or a transport helper"
	hostUnread     = "git attributes or submodules that could not be read"
	hostGoalrunCfg = "goalrun's configuration file (the next goalrun run here reads it: it can name the agent command, the sandbox and where the model key goes)"
)

// hostCode lists the changes between base and cur that make git run a
// program the agent wrote (git's executable configuration): every change to
// a git directory's config, hooks, info/attributes or commondir, a new git
// directory anywhere (a .git folder, a .git file or link, any folder git
// would take for a git directory: looksLikeGitDir), the files the baseline configuration names (hostIndex),
// and a new or changed .gitattributes or .gitmodules that adds a filter,
// diff or merge driver or a submodule command. It returns them collapsed
// per folder (RiskyPath, at most HostCodeMax, sorted by path) and the set of
// the changed paths they cover.
func (t *Tracker) hostCode(root *os.Root, base, cur *snapshot) ([]RiskyPath, map[string]bool) {
	if t.host == nil {
		return nil, nil
	}
	var changes []hostChange
	for _, p := range mergeSorted(base.paths, cur.paths) {
		o, n := base.entries[p], cur.entries[p]
		if o != nil && n != nil && sameContent(o, n) {
			continue
		}
		if (o != nil && o.mode.IsDir()) || (n != nil && n.mode.IsDir()) {
			continue
		}
		if group, reason := t.hostReason(root, p, o, n, cur); reason != "" {
			changes = append(changes, hostChange{path: p, group: group, reason: reason})
		}
	}
	if len(changes) == 0 {
		return nil, nil
	}
	covered := make(map[string]bool, len(changes))
	type groupInfo struct {
		first, reason string
		n             int
	}
	groups := map[string]*groupInfo{}
	var order []string
	for _, c := range changes {
		covered[c.path] = true
		g := groups[c.group]
		if g == nil {
			g = &groupInfo{first: c.path, reason: c.reason}
			groups[c.group] = g
			order = append(order, c.group)
		}
		g.n++
	}
	sort.Strings(order)
	out := make([]RiskyPath, 0, len(order))
	for _, k := range order {
		g := groups[k]
		switch {
		case g.reason == hostNewRepo:
			out = append(out, RiskyPath{Path: k + " (a new git repository)", Reason: g.reason})
		case g.n == 1:
			out = append(out, RiskyPath{Path: g.first, Reason: g.reason})
		default:
			out = append(out, RiskyPath{Path: fmt.Sprintf("%s (%d files changed)", k, g.n), Reason: g.reason})
		}
	}
	if len(out) > HostCodeMax {
		rest := len(out) - (HostCodeMax - 1)
		out = append(out[:HostCodeMax-1], RiskyPath{
			Path:   fmt.Sprintf("(%d more changes to git's executable configuration)", rest),
			Reason: hostConfig,
		})
	}
	return out, covered
}

// hostReason says whether the change of p (o → n) is a change to git's
// executable configuration: the folder it is listed under and why, or
// "" when it is not.
func (t *Tracker) hostReason(root *os.Root, p string, o, n *entry, cur *snapshot) (group, reason string) {
	h := t.host
	if t.configs[p] {
		if n == nil {
			return "", "" // a config file removed: the next run reads none
		}
		return p, hostGoalrunCfg
	}
	if path.Base(p) == ".git" {
		if n == nil {
			return "", "" // a .git file removed: git no longer finds that repository
		}
		return p, hostGitFile
	}
	if g, rel, isNew := h.gitDirOf(root, p, cur); g != "" {
		switch {
		case isNew:
			return g + "/", hostNewRepo
		case strings.HasPrefix(rel, "hooks/"):
			return joinRel(g, "hooks/"), hostHook
		case rel == "commondir":
			return p, hostCommondir
		case rel == "info/attributes":
			return p, hostInfoAttrs
		case gitExecRel(rel):
			if strings.Contains(rel, "/hooks/") {
				return p[:strings.LastIndex(p, "/hooks/")+len("/hooks/")], hostHook
			}
			return p, hostConfig
		}
		return "", "" // git's database: a commit, a moved branch
	}
	if name := h.named[p]; name != "" {
		return p, fmt.Sprintf("a file git's configuration runs or reads (%s)", name)
	}
	for _, d := range h.hooks {
		if strings.HasPrefix(p, d) {
			return d, hostHook + " (core.hooksPath)"
		}
	}
	if n == nil {
		return "", "" // removing attributes or submodules runs nothing new
	}
	base := path.Base(p)
	isAttrs, isModules := base == ".gitattributes" || h.attrs[p], base == ".gitmodules"
	if !isAttrs && !isModules {
		return "", ""
	}
	oldText, oldOK := t.oldContent(o)
	newText, newOK := t.readText(root, p, n)
	switch {
	case !newOK:
		return p, hostUnread
	case isAttrs && attrDriversAdded(oldText, newText, oldOK):
		return p, hostAttrDriver
	case isModules && submoduleCommandsAdded(oldText, newText, oldOK):
		return p, hostSubmodule
	}
	return "", ""
}

// readText reads the current content of the regular file e at p (any
// size up to MaxFileBytes), checked against the snapshot's hash.
func (t *Tracker) readText(root *os.Root, p string, e *entry) ([]byte, bool) {
	if e.mode&fs.ModeSymlink != 0 || !e.mode.IsRegular() || e.unread != "" {
		return nil, false
	}
	b, err := t.readRegular(root, p, e)
	if err != nil || !e.hashed || sha256.Sum256(b) != e.hash {
		return nil, false
	}
	return b, true
}

// gitDirOf returns the git directory p lies in (g, the path of p inside
// it, and whether g is new since the baseline): the innermost ".git"
// folder on p's path, else the nearest ancestor folder of p (the scanned
// folder included) that was a git directory at the baseline or that git
// would now take for one (looksLikeGitDir) when p is one of a git
// directory's own files (gitDirFile). g is "" when p is in none.
func (h *hostIndex) gitDirOf(root *os.Root, p string, cur *snapshot) (g, rel string, isNew bool) {
	if rel, in := insideGit(p); in {
		g = p[:len(p)-len(rel)-1]
		return g, rel, !h.gitDirs[g]
	}
	for d := path.Dir(p); ; d = path.Dir(d) {
		rel := p
		if d != "." {
			rel = p[len(d)+1:]
		}
		if h.gitDirs[d] && (d != "." || gitDirFile(rel)) {
			return d, rel, false
		}
		if gitDirFile(rel) && looksLikeGitDir(root, cur, d) {
			return d, rel, true
		}
		if d == "." {
			return "", "", false
		}
	}
}

// gitDirFile reports whether rel, a path inside a folder, is one of the
// files a git directory is made of: HEAD, config, commondir, gitdir,
// packed-refs, and what lies in objects/, refs/, hooks/, info/, logs/,
// modules/ or worktrees/.
func gitDirFile(rel string) bool {
	switch rel {
	case "HEAD", "config", "config.worktree", "commondir", "gitdir", "packed-refs", "index":
		return true
	}
	first, _, nested := strings.Cut(rel, "/")
	switch first {
	case "objects", "refs", "hooks", "info", "logs", "modules", "worktrees":
		return nested
	}
	return false
}

// looksLikeGitDir reports whether git could take the folder d (a slash path
// of the scanned folder, "." its top) for a git directory, mirrored
// conservatively from git's own test (setup.c, is_git_directory: a valid
// HEAD, then objects/ and refs/ in the directory or in the common directory
// its commondir file names): d holds a HEAD that is a file or a symbolic
// link (whatever it says), and a config, commondir or gitdir entry of any
// kind (a symbolic link included), or both objects and refs (a folder, a
// link, anything). Seen through the snapshot cur, and root for the folders
// (which snapshots do not list).
func looksLikeGitDir(root *os.Root, cur *snapshot, d string) bool {
	hd := cur.entries[joinRel(d, "HEAD")]
	if hd == nil || hd.mode.IsDir() {
		return false
	}
	for _, name := range []string{"config", "commondir", "gitdir"} {
		if cur.entries[joinRel(d, name)] != nil {
			return true
		}
	}
	has := func(name string) bool {
		p := joinRel(d, name)
		if strings.HasPrefix(p, "..") || root == nil {
			return false
		}
		if _, err := root.Lstat(p); err == nil {
			return true
		}
		prefix := p + "/"
		i := sort.SearchStrings(cur.paths, prefix)
		return i < len(cur.paths) && strings.HasPrefix(cur.paths[i], prefix)
	}
	return has("objects") && has("refs")
}

// attrDriversAdded reports whether the attributes text b has a line that
// sets a filter, diff or merge driver (filter=NAME, diff=NAME,
// merge=NAME, also in an [attr] macro) which a did not have. With a
// unknown (!aOK: the old content was not kept), every such line is new.
func attrDriversAdded(a, b []byte, aOK bool) bool {
	old := map[string]bool{}
	if aOK {
		for _, l := range driverLines(a) {
			old[l] = true
		}
	}
	for _, l := range driverLines(b) {
		if !old[l] {
			return true
		}
	}
	return false
}

// driverLines returns the lines of an attributes file that set a driver,
// blanks normalised.
func driverLines(b []byte) []string {
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		for _, f := range fields {
			f = strings.TrimLeft(f, "\"")
			if strings.HasPrefix(f, "filter=") || strings.HasPrefix(f, "diff=") || strings.HasPrefix(f, "merge=") ||
				strings.Contains(f, "]filter=") || strings.Contains(f, "]diff=") || strings.Contains(f, "]merge=") {
				out = append(out, strings.Join(fields, " "))
				break
			}
		}
	}
	return out
}

// submoduleCommandsAdded reports whether the .gitmodules text b sets, where
// a did not, a submodule value that makes git run a program: an update
// command ("!…"), a value starting with "-" (taken for an option; CVE-2018-17456),
// or a URL through a transport helper ("ext::…", "fd::…"). A line b adds
// with "!" or "::" after its "=" counts too, parsed or not.
func submoduleCommandsAdded(a, b []byte, aOK bool) bool {
	old := map[gitConfigEntry]bool{}
	oldLines := map[string]bool{}
	if aOK {
		for _, e := range parseGitConfig(a) {
			old[e] = true
		}
		for _, l := range strings.Split(string(a), "\n") {
			oldLines[strings.Join(strings.Fields(l), " ")] = true
		}
	}
	for _, e := range parseGitConfig(b) {
		if old[e] {
			continue
		}
		v := strings.TrimSpace(e.value)
		if (e.key == "update" && strings.HasPrefix(v, "!")) || strings.HasPrefix(v, "-") || strings.Contains(v, "::") {
			return true
		}
	}
	for _, l := range strings.Split(string(b), "\n") {
		norm := strings.Join(strings.Fields(l), " ")
		if oldLines[norm] {
			continue
		}
		if i := strings.IndexByte(norm, '='); i >= 0 && (strings.Contains(norm[i:], "!") || strings.Contains(norm[i:], "::")) {
			return true
		}
	}
	return false
}
