package sandbox

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
)

// The host folders of the default sandbox, split around what is private.
// A bind mount cannot leave out a file, so a host folder that holds the
// workspace, a runner's folders, goalrun's own state or a credential file
// is mounted child by child instead, down to what must stay out (README,
// "What the default sandbox contains").

// LeftOut is a host path the default sandbox keeps out of its mounts.
type LeftOut struct {
	// Path is the path on the Engine's host.
	Path string `json:"path"`
	// Reason says why, in a few words.
	Reason string `json:"reason"`
	// Sealed means nothing inside Path may be mounted either (a runner's
	// folder, the workspace, a credential file); otherwise only Path and
	// the folders holding it are refused (goalrun's cache folder, whose
	// warm Go build cache goalrun itself mounts).
	Sealed bool `json:"sealed,omitempty"`
}

// String is the posture's form, "PATH: reason".
func (l LeftOut) String() string { return l.Path + ": " + l.Reason }

// runnerMarkers are the files a GitHub Actions runner keeps in its own
// folder: its registration, its credentials and their RSA key
// (actions/runner, ConfigurationStore). A folder holding one is a
// runner's, and is left out whole: it also holds _work (every checkout,
// with the job tokens actions/checkout persists), _diag's logs and .env.
var runnerMarkers = []string{".runner", ".credentials", ".credentials_rsaparams"}

// credentialConfigs are files that may hold a credential (a registry
// token, a password in a URL): npm's global and per-user npmrc, pip's
// pip.conf, conda's condarc, git's system, global and repository config,
// Yarn's yarnrc, NuGet's config, Maven's global settings.xml, an
// application's .env, the JVM's JMX password file
// (/etc/java-N-openjdk/management; packages ship commented templates).
// configHoldsCredential reads them; a folder of the same name is not one
// (a folder named .env is usually a Python virtual environment).
var credentialConfigs = []string{
	"npmrc", "pip.conf", "pip.ini", ".condarc", "condarc", "gitconfig", ".gitconfig",
	".yarnrc", ".yarnrc.yml", "NuGet.Config", "NuGet.config", "nuget.config", "settings.xml",
	".env", "jmxremote.password",
}

// configReadMax bounds what is read of one configuration file; a larger
// one is left out unread.
const configReadMax = 1 << 20

// credentialHint finds what names a credential in a configuration file:
// npm's _auth and _authToken, keys named token, password, secret,
// credential or API key, NuGet's packageSourceCredentials and
// ClearTextPassword, Maven's <password> and <privateKey>, conda's /t/TOKEN/
// channel URLs.
var credentialHint = regexp.MustCompile(`(?i)auth|token|passw|secret|credential|api[_-]?key|passphrase|private[_-]?key|/t/[A-Za-z0-9-]{8,}/`)

// xmlComment and lineComment find what a configuration file's readers
// ignore (Maven's default settings.xml shows <password> in comments).
var (
	xmlComment  = regexp.MustCompile(`(?s)<!--.*?-->`)
	lineComment = regexp.MustCompile(`(?m)^[ \t]*[#;].*$`)
)

// configHoldsCredential reports whether the configuration file name (a
// credentialConfigs name, or "config" in a .git folder) with content b
// holds a credential: git's files by sanitizeGitConfig's rules, the
// others when a URL carries user information or credentialHint matches
// outside comments.
func configHoldsCredential(name string, b []byte) bool {
	switch name {
	case "gitconfig", ".gitconfig", "config":
		_, changed := sanitizeGitConfig(b)
		return changed
	case "jmxremote.password":
		// Every line that is not a comment is "role password".
		return strings.TrimSpace(lineComment.ReplaceAllString(string(b), "")) != ""
	}
	s := string(b)
	if strings.HasSuffix(name, ".xml") || strings.HasSuffix(strings.ToLower(name), ".config") {
		s = xmlComment.ReplaceAllString(s, "")
	} else {
		s = lineComment.ReplaceAllString(s, "")
	}
	return stripUserinfo(s) != s || credentialHint.MatchString(s)
}

// nameIndex finds credential names by the last part of a path.
type nameIndex map[string][][]string

func newNameIndex() nameIndex {
	ix := nameIndex{}
	for _, d := range credentialDirs {
		parts := strings.Split(d, "/")
		last := parts[len(parts)-1]
		ix[last] = append(ix[last], parts)
	}
	return ix
}

// match returns the credentialDirs entry that p (absolute, clean) ends
// with, or "".
func (ix nameIndex) match(p string) string {
	names := ix[path.Base(p)]
	if len(names) == 0 {
		return ""
	}
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for _, n := range names {
		if len(n) <= len(parts) && slices.Equal(parts[len(parts)-len(n):], n) {
			return strings.Join(n, "/")
		}
	}
	return ""
}

// hostScan walks host folders for what must stay out of the sandbox:
// credential files and folders by name (credentialDirs, credentialFiles),
// configuration files holding a credential (credentialConfigs), runners'
// folders (runnerMarkers), and folders goalrun cannot list that the
// sandbox could still pass through. It never follows a symbolic link and
// does not go into what the policy already refuses whole (skip).
type hostScan struct {
	names nameIndex
	skip  map[string]bool
	// allow are paths inside what is left out that are mounted all the
	// same (a runner's tool cache), so looked through.
	allow []string
	sem   chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	hits  []LeftOut
	// record: keep a statMark of every folder read and file opened
	// (scanCache); unmarked is set when one could not be had.
	record   bool
	marks    []statMark
	unmarked bool
}

// hostScanConcurrency bounds the folders read at once (measured in
// docs/benchmarks.md: reading is mostly waiting for the disk when the
// cache is cold).
const hostScanConcurrency = 8

// scanHost walks roots (absolute folders or files; symbolic links among
// them are resolved first) and returns what must stay out, sorted by
// path. skip are folders not to go into; allow are folders gone into even
// inside a runner's folder.
func scanHost(roots []string, skip map[string]bool, allow []string) []LeftOut {
	hits, _, _ := scanHostMarked(roots, skip, allow, false)
	return hits
}

// scanHostMarked is scanHost that, with record, also returns a statMark of
// every root, folder read and configuration file opened (scanCache);
// complete is false when one could not be had.
func scanHostMarked(roots []string, skip map[string]bool, allow []string, record bool) (hits []LeftOut, marks []statMark, complete bool) {
	s := &hostScan{names: newNameIndex(), skip: skip, allow: allow, sem: make(chan struct{}, hostScanConcurrency), record: record}
	for _, r := range walkRoots(roots) {
		st, err := os.Lstat(r)
		if err != nil {
			continue
		}
		s.mark(r, st)
		if st.IsDir() {
			s.wg.Add(1)
			go s.walk(r)
			continue
		}
		s.entry(path.Dir(r), path.Base(r), st.Mode().Type())
	}
	s.wg.Wait()
	sort.Slice(s.hits, func(i, j int) bool { return s.hits[i].Path < s.hits[j].Path })
	return slices.CompactFunc(s.hits, func(a, b LeftOut) bool { return a.Path == b.Path }), s.marks, !s.unmarked
}

// mark records fi (of path p) when the scan records.
func (s *hostScan) mark(p string, fi fs.FileInfo) {
	if !s.record {
		return
	}
	m, ok := statMarkOf(p, fi)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ok {
		s.unmarked = true
		return
	}
	s.marks = append(s.marks, m)
}

// walkRoots resolves the roots' symbolic links and drops those inside
// another root (on a merged-/usr host /bin is /usr/bin).
func walkRoots(roots []string) []string {
	var out []string
	for _, r := range roots {
		if real, err := filepath.EvalSymlinks(r); err == nil {
			out = append(out, real)
		}
	}
	sort.Strings(out)
	out = slices.Compact(out)
	var kept []string
	for _, r := range out {
		if !slices.ContainsFunc(kept, func(k string) bool { return isUnder(r, k) }) {
			kept = append(kept, r)
		}
	}
	return kept
}

func (s *hostScan) hit(p, reason string) {
	s.mu.Lock()
	s.hits = append(s.hits, LeftOut{Path: p, Reason: reason, Sealed: true})
	s.mu.Unlock()
}

// walk reads dir and goes on into its folders, each in its own goroutine
// (at most hostScanConcurrency reading at once).
func (s *hostScan) walk(dir string) {
	defer s.wg.Done()
	if s.skip[dir] {
		return
	}
	s.sem <- struct{}{}
	ents, err := s.readDir(dir)
	<-s.sem
	if err != nil {
		s.unlisted(dir, err)
		return
	}
	for _, e := range ents {
		if slices.Contains(runnerMarkers, e.Name()) {
			s.hit(dir, "a GitHub Actions runner's folder (it holds "+e.Name()+")")
			s.walkAllowed(dir)
			return
		}
	}
	for _, e := range ents {
		if s.entry(dir, e.Name(), e.Type()) && e.IsDir() {
			s.wg.Add(1)
			go s.walk(path.Join(dir, e.Name()))
		}
	}
}

// walkAllowed goes into the allowed folders inside dir, which is left out.
func (s *hostScan) walkAllowed(dir string) {
	for _, a := range s.allow {
		if st, err := os.Lstat(a); err == nil && st.IsDir() && isUnder(a, dir) && !s.skip[a] {
			s.wg.Add(1)
			go s.walk(a)
		}
	}
}

// entry checks one entry of dir; it reports whether the walk goes on into
// it (a folder that is not itself left out). Most names are none of those
// looked for: a map look-up decides before any path is made.
func (s *hostScan) entry(dir, name string, typ fs.FileMode) bool {
	if _, ok := s.names[name]; ok {
		p := path.Join(dir, name)
		if m := s.names.match(p); m != "" {
			s.hit(p, "a credential file or folder (…/"+m+")")
			return false
		}
	}
	switch watchedNames[name] {
	case watchConfig:
		if why := s.config(path.Join(dir, name), typ); why != "" {
			s.hit(path.Join(dir, name), why)
			return false
		}
	case watchGitConfig:
		if path.Base(dir) == ".git" {
			if why := s.config(path.Join(dir, name), typ); why != "" {
				s.hit(path.Join(dir, name), why)
				return false
			}
		}
	}
	return true
}

// What the walk looks for by a name alone (besides credentialDirs).
const (
	watchNone = iota
	watchConfig
	watchGitConfig
)

var watchedNames = func() map[string]int {
	m := map[string]int{"config": watchGitConfig}
	for _, n := range credentialConfigs {
		m[n] = watchConfig
	}
	return m
}()

// config says why the configuration file p is left out ("" when it holds
// no credential): it holds one, or it cannot be read, or it is a symbolic
// link (what it names is not known here).
func (s *hostScan) config(p string, typ fs.FileMode) string {
	base := path.Base(p)
	if base == "config" {
		base = ".git/config"
	}
	switch {
	case typ&fs.ModeSymlink != 0:
		return "a configuration file that may hold a credential (" + base + "), a symbolic link"
	case typ.IsDir() || typ&fs.ModeType != 0:
		return ""
	}
	s.sem <- struct{}{}
	defer func() { <-s.sem }()
	if s.record {
		if fi, err := os.Lstat(p); err == nil {
			s.mark(p, fi)
		}
	}
	f, err := os.Open(p)
	if err != nil {
		return "a configuration file that may hold a credential (" + base + ") goalrun cannot read"
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, configReadMax+1))
	switch {
	case err != nil:
		return "a configuration file that may hold a credential (" + base + ") goalrun cannot read"
	case len(b) > configReadMax:
		return "a configuration file that may hold a credential (" + base + "), too large to read"
	case configHoldsCredential(path.Base(p), b):
		return "a configuration file holding a credential (" + base + ")"
	}
	return ""
}

// unlisted handles a folder goalrun cannot list: when it can still pass
// through it, so could a sandbox user, by name; the names this walk looks
// for are tried one by one.
func (s *hostScan) unlisted(dir string, err error) {
	if !errors.Is(err, fs.ErrPermission) {
		return // gone meanwhile, or not a folder any more
	}
	if s.record {
		if fi, err := os.Lstat(dir); err == nil {
			s.mark(dir, fi)
		}
	}
	for _, n := range runnerMarkers {
		if _, err := os.Lstat(path.Join(dir, n)); err == nil {
			s.hit(dir, "a GitHub Actions runner's folder (it holds "+n+")")
			s.walkAllowed(dir)
			return
		}
	}
	for last := range s.names {
		if st, err := os.Lstat(path.Join(dir, last)); err == nil {
			s.entry(dir, last, st.Mode().Type())
		}
	}
	for _, n := range credentialConfigs {
		if st, err := os.Lstat(path.Join(dir, n)); err == nil {
			s.entry(dir, n, st.Mode().Type())
		}
	}
}

// readDir reads a folder's entries in the order the file system gives them
// (os.ReadDir sorts, which the walk does not need), marking the folder
// first when the scan records: a change after the mark changes its ctime.
func (s *hostScan) readDir(dir string) ([]fs.DirEntry, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if s.record {
		fi, err := f.Stat()
		if err != nil {
			return nil, err
		}
		s.mark(dir, fi)
	}
	return f.ReadDir(-1)
}

// Limits of a split: a folder with more entries than maxSplitEntries is
// left out whole rather than mounted entry by entry, and no plan makes
// more than maxHostMounts mounts. Every bind mount costs each container's
// start a few milliseconds (docs/benchmarks.md, "Host folders split");
// the Linux default limit of mounts per namespace (fs.mount-max) is
// 100000.
const (
	maxSplitEntries = 512
	maxHostMounts   = 1024
)

// hostPlan is how the default sandbox mounts the host's folders.
type hostPlan struct {
	// Mounts are sources and targets, read-only.
	Mounts []planMount `json:"mounts"`
	// LeftOut are what is not mounted, by path.
	LeftOut []LeftOut `json:"left_out"`
	// confirm, when not nil, reports whether the remembered look this
	// plan is made from still holds (scanCache.scan).
	confirm func(context.Context) bool
}

type planMount struct {
	Source string `json:"source"`
	Target string `json:"target"`
}

// planHostMounts plans the mounts of candidates (host paths that exist,
// each mounted at its own path) under policy p: a candidate the policy
// accepts is mounted whole; one it refuses is left out; one that only
// holds a refused path is mounted child by child, recursively. scanned
// are the folders scanHost looked through: a child that is a symbolic
// link is mounted (the Engine follows it) only when it leads into them.
func planHostMounts(p mountPolicy, candidates, scanned []string) hostPlan {
	var pl hostPlan
	roots := walkRoots(scanned)
	for _, c := range candidates {
		pl.place(p, c, c, roots)
	}
	sort.Slice(pl.LeftOut, func(i, j int) bool { return pl.LeftOut[i].Path < pl.LeftOut[j].Path })
	return pl
}

func (pl *hostPlan) place(p mountPolicy, src, target string, roots []string) {
	v := p.judge(src)
	switch v.rel {
	case relNone:
		if len(pl.Mounts) >= maxHostMounts {
			pl.LeftOut = append(pl.LeftOut, LeftOut{Path: src, Reason: "beyond the limit of host mounts", Sealed: true})
			return
		}
		pl.Mounts = append(pl.Mounts, planMount{Source: src, Target: target})
		return
	case relIs, relInside:
		pl.LeftOut = append(pl.LeftOut, LeftOut{Path: src, Reason: leftOutReason(v), Sealed: v.rel == relInside || p.sealed(v)})
		return
	}
	holds := "it holds " + v.hit
	if v.hit == "" {
		holds = "it is " + v.reason
	}
	ents, err := os.ReadDir(src)
	switch {
	case err != nil:
		pl.LeftOut = append(pl.LeftOut, LeftOut{Path: src, Reason: holds + ", and goalrun cannot list it", Sealed: true})
		return
	case len(ents) > maxSplitEntries:
		pl.LeftOut = append(pl.LeftOut, LeftOut{Path: src, Reason: holds + ", and has too many entries to mount one by one", Sealed: true})
		return
	}
	for _, e := range ents {
		child := path.Join(src, e.Name())
		if e.Type()&fs.ModeSymlink != 0 {
			real, err := filepath.EvalSymlinks(child)
			if err != nil {
				continue // leads nowhere: nothing to mount
			}
			if !slices.ContainsFunc(roots, func(r string) bool { return real == r || isUnder(real, r) }) {
				pl.LeftOut = append(pl.LeftOut, LeftOut{Path: child, Reason: "a symbolic link to " + real + ", outside the folders goalrun looked through", Sealed: true})
				continue
			}
		}
		pl.place(p, child, path.Join(target, e.Name()), roots)
	}
}

// sealed reports whether the refused path of v is refused with what lies
// inside it (a tree entry or a rule by name), not only with what holds it.
func (p mountPolicy) sealed(v verdict) bool {
	return v.hit == "" || slices.Contains(p.tree, v.hit)
}

// leftOutReason words a refusal for the list of what is left out.
func leftOutReason(v verdict) string {
	switch {
	case v.socket:
		return "a socket"
	case v.rel == relInside && v.hit != "":
		return "inside " + v.hit + ", " + v.reason
	}
	return v.reason
}

// Covers reports whether the host path p is mounted: one of the mounts'
// sources or inside one.
func (pl hostPlan) covers(p string) bool {
	for _, m := range pl.Mounts {
		if p == m.Source || isUnder(p, m.Source) {
			return true
		}
	}
	return false
}

// scanAndPlan scans the candidates (scanHost through cache, which may be
// nil; the folders policy p refuses whole are not gone into) and plans their mounts with what the scan found
// added to p.
func scanAndPlan(p mountPolicy, candidates []string, cache *scanCache) hostPlan {
	skip := map[string]bool{}
	for _, t := range p.tree {
		if !slices.ContainsFunc(p.allow, func(a string) bool { return isUnder(a, t) }) {
			skip[t] = true
		}
	}
	for _, a := range p.above {
		skip[a] = true
	}
	hits, _, confirm := cache.scan(candidates, skip, p.allow)
	p = p.clone()
	for _, h := range hits {
		p.addTree(h.Path, h.Reason)
	}
	plan := planHostMounts(p, candidates, candidates)
	plan.confirm = confirm
	return plan
}

// keepKind says how a private path is kept out.
type keepKind int

const (
	// keepSealed: the path, what lies inside it and what holds it.
	keepSealed keepKind = iota
	// keepAbove: the path and what holds it; goalrun mounts parts of it
	// itself (its warm Go build cache, a workspace in TMPDIR).
	keepAbove
	// keepAllowed: a path inside a sealed one that may be mounted (a
	// runner's tool cache).
	keepAllowed
)

// keepOut is a private path of this run, on the Engine's host.
type keepOut struct {
	path, reason string
	kind         keepKind
}

// runKeepOuts are the private paths no mount may show whole, as the
// Engine's host names them (hostPath translates goalrun's paths; a path
// the Engine cannot see needs no keeping out): the workspace and the
// repository root above it that the sandbox widens to (the sandbox sees
// their .git configs only sanitized), goalrun's cache folder and TMPDIR
// (other runs' folders), and a GitHub Actions runner's folders:
// RUNNER_WORKSPACE and the work folder above it (every repository's
// checkout), RUNNER_TEMP (the job's files and commands), GITHUB_WORKSPACE,
// and the folder holding RUNNER_TOOL_CACHE — except the tool cache itself
// (toolchains that actions/setup-* installed), and unless that folder is a
// system folder (/opt on GitHub's hosted runners, whose other children are
// wanted). lookup reads goalrun's environment; workspace is the run's
// workspace as goalrun sees it ("" for none).
func runKeepOuts(lookup func(string) (string, bool), hostPath func(string) (string, bool), workspace string) []keepOut {
	var out []keepOut
	// host is p (goalrun's path) as the Engine's host names it. Links
	// are resolved in the part of p that exists: a folder goalrun makes
	// later (the check views') is kept out where it will be.
	host := func(p string) (string, bool) {
		if p == "" || !path.IsAbs(p) {
			return "", false
		}
		p = path.Clean(p)
		for dir, rest := p, ""; ; dir, rest = path.Dir(dir), path.Join(path.Base(dir), rest) {
			if real, err := filepath.EvalSymlinks(dir); err == nil {
				p = path.Join(real, rest)
				break
			}
			if dir == "/" {
				break
			}
		}
		h, ok := hostPath(p)
		return h, ok && h != "/"
	}
	addHost := func(h, reason string, kind keepKind) {
		if h != "/" {
			out = append(out, keepOut{path: h, reason: reason, kind: kind})
		}
	}
	add := func(p, reason string, kind keepKind) {
		if h, ok := host(p); ok {
			addHost(h, reason, kind)
		}
	}
	env := func(k string) string { v, _ := lookup(k); return v }
	if workspace != "" {
		add(workspace, "the workspace (the sandbox sees it at "+DockerRoot+", with its git credentials removed)", keepSealed)
		if repo := repoRootAbove(workspace); repo != "" {
			add(repo, "the repository that holds the workspace", keepSealed)
		}
	}
	cache := env("XDG_CACHE_HOME")
	if !path.IsAbs(cache) {
		if home := env("HOME"); path.IsAbs(home) {
			cache = path.Join(home, ".cache")
		}
	}
	if path.IsAbs(cache) {
		add(path.Join(cache, "goalrun"), "goalrun's cache folder", keepAbove)
		add(path.Join(cache, "goalrun", viewsDirName), "goalrun's folder of the check views (what the checks see and write)", keepSealed)
	}
	tmp := env("TMPDIR")
	if !path.IsAbs(tmp) {
		tmp = "/tmp"
	}
	add(tmp, "the temporary folder (TMPDIR), where goalrun keeps each run's folders", keepAbove)
	if ws, ok := host(env("RUNNER_WORKSPACE")); ok {
		addHost(ws, "the runner's workspace (RUNNER_WORKSPACE)", keepSealed)
		addHost(path.Dir(ws), "the runner's work folder, with every repository's checkout (above RUNNER_WORKSPACE)", keepSealed)
	}
	add(env("RUNNER_TEMP"), "the runner's temporary folder (RUNNER_TEMP)", keepSealed)
	add(env("GITHUB_WORKSPACE"), "the job's workspace (GITHUB_WORKSPACE)", keepSealed)
	if tc, ok := host(env("RUNNER_TOOL_CACHE")); ok {
		if parent := path.Dir(tc); !systemFolder(parent) {
			addHost(parent, "the runner's work folder (it holds RUNNER_TOOL_CACHE)", keepSealed)
		}
		// Allowed even when its folder is sealed for another reason (a
		// runner's own folder, which holds it by default).
		addHost(tc, "", keepAllowed)
	}
	return out
}

// systemFolder reports whether p is "/", one of HostSystemFolders, or a
// folder directly in /usr (/usr/local, /usr/share): a folder of the system
// that holds many things, never a runner's own.
func systemFolder(p string) bool {
	return p == "/" || slices.Contains(HostSystemFolders, p) || path.Dir(p) == "/usr"
}

// withKeepOuts returns p with the keep-outs added.
func (p mountPolicy) withKeepOuts(ks []keepOut) mountPolicy {
	p = p.clone()
	for _, k := range ks {
		switch k.kind {
		case keepSealed:
			p.addTree(k.path, k.reason)
		case keepAbove:
			p.addAbove(k.path, k.reason)
		case keepAllowed:
			p.addAllow(k.path)
		}
	}
	return p
}

// withLeftOut returns p with what a plan left out added (sealed ones with
// what lies inside them).
func (p mountPolicy) withLeftOut(ls []LeftOut) mountPolicy {
	p = p.clone()
	for _, l := range ls {
		if l.Sealed {
			p.addTree(l.Path, l.Reason)
		} else {
			p.addAbove(l.Path, l.Reason)
		}
	}
	return p
}
