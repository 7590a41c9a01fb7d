// Package setup decides how a workspace's dependencies are prepared before
// goalrun's first check: which package ecosystems the untouched tree uses
// (Detect), the setup commands goalrun runs by default for them (Steps),
// the registries the setup step may reach (AllowHosts, egress presets) and
// the environment that points the tools at the prepared dependencies
// (Env). It reads the tree only, through os.Root, never running anything;
// the sandbox runs the steps (sandbox.RoleSetup).
//
// What is detected, and why only that, is in the README ("Dependencies and
// the setup step").
package setup

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"golang.org/x/mod/modfile"

	"github.com/goalrun/goalrun/internal/safefile"
)

// Ecosystems goalrun recognises; each name is also an egress preset
// (egress.Presets).
const (
	Go     = "go"
	Npm    = "npm"
	PyPI   = "pypi"
	Crates = "crates"
	Maven  = "maven"
	Gradle = "gradle"
)

// Bounds of Detect's walk over a tree that may be huge or hostile.
const (
	// walkEntriesMax bounds the entries Detect looks at: 50000.
	walkEntriesMax = 50000
	// walkDepthMax bounds how deep Detect looks for manifests: 6 folders.
	walkDepthMax = 6
	// manifestBytesMax bounds a manifest Detect reads: 1 MiB.
	manifestBytesMax = 1 << 20
	// goModulesMax bounds the Go modules that get default steps: 32.
	goModulesMax = 32
	// manifestsParsedMax bounds the manifest bytes Detect parses across
	// the whole walk (go.mod files and Python manifests together): 2 MiB.
	// Parsing is what costs: a 1 MiB go.mod of `require a a a …` (which
	// git compresses to nothing) takes 0.26 s on an idle core and more on
	// a busy one, so 150 of them kept Detect busy for 39 s before any step
	// or event; the budget keeps that near half a second. A real tree's
	// manifests are KiB each (Kubernetes' go.mod is about 15 KiB). Beyond
	// the budget a go.mod is not parsed and counts as requiring modules
	// (`go mod download` runs: slower, never wrong), and a Python
	// manifest's names are not read.
	manifestsParsedMax = 2 << 20
)

// walkEntriesLimit is walkEntriesMax; a variable only so that a test can
// cut the walk short without creating 50000 files.
var walkEntriesLimit = walkEntriesMax

// Project is what Detect found in a workspace.
type Project struct {
	// Ecosystems are the package ecosystems in use, sorted.
	Ecosystems []string
	// GoModules are the folders holding a go.mod (slash paths relative to
	// the workspace, "." for its root), shallowest first; GoWork is true
	// when the root holds a go.work. GoVendored are the folders among them
	// whose vendor/modules.txt makes downloads unnecessary.
	GoModules  []string
	GoWork     bool
	GoVendored map[string]bool
	// GoRequireless are the folders among GoModules whose go.mod requires
	// no module: `go mod download` would fetch nothing (setup steps run
	// with GOTOOLCHAIN=local, so not even a toolchain).
	GoRequireless map[string]bool
	// GoSourceless are the folders among GoModules that hold no .go file
	// of their own (outside nested modules and the folders the go command
	// ignores), as far as the walk saw: GoWarmCommand would compile
	// nothing and fail ("no packages to test"). A module with a folder the
	// walk did not enter (too deep, build/, dist/…) is never counted.
	GoSourceless map[string]bool
	// NpmLocked are the folders holding a package-lock.json (or
	// npm-shrinkwrap.json) and no node_modules.
	NpmLocked []string
	// PythonDeps are the distribution names the Python manifests declare
	// (requirements*.txt, pyproject.toml, setup.cfg, setup.py, Pipfile), as
	// written, without versions.
	PythonDeps []string
	// Truncated is true when the walk stopped at its bound.
	Truncated bool
}

// skipDirs are folders Detect never enters: dependencies, version control,
// build output, test data.
var skipDirs = map[string]bool{
	".git": true, ".hg": true, ".svn": true, "node_modules": true, "vendor": true, "testdata": true,
	"target": true, "build": true, "dist": true, "__pycache__": true, ".venv": true, "venv": true, ".tox": true,
}

// Detect walks the workspace at dir (not following symbolic links, within
// walkEntriesMax entries and walkDepthMax folders, parsing at most
// manifestsParsedMax bytes of manifests) and reports what it uses. The
// root folder's own files are looked at before any folder is entered, so
// the root's manifests are seen however large a folder that sorts before
// them is. Errors: dir cannot be opened; unreadable entries are skipped.
func Detect(dir string) (Project, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Project{}, fmt.Errorf("setup: reading the workspace %s: %w", dir, err)
	}
	defer root.Close()
	var p Project
	p.GoVendored = map[string]bool{}
	p.GoRequireless = map[string]bool{}
	p.GoSourceless = map[string]bool{}
	goDirs := map[string]bool{}     // folders holding a .go file
	unseenDirs := map[string]bool{} // folders not entered that Go would read
	ecos := map[string]bool{}
	npmDirs := map[string]bool{}
	lockDirs := map[string]bool{}
	modulesDirs := map[string]bool{}
	pyDeps := map[string]bool{}
	n := 0
	parsed := int64(0) // manifest bytes parsed so far
	// budget reports whether a manifest of e's size still fits
	// manifestsParsedMax, and counts it when it does.
	budget := func(e fs.DirEntry) bool {
		info, err := e.Info()
		if err != nil {
			return false
		}
		size := min(info.Size(), manifestBytesMax) // no more is read
		if parsed+size > manifestsParsedMax {
			return false
		}
		parsed += size
		return true
	}
	fsys := root.FS()
	visit := func(p0 string, e fs.DirEntry) {
		name := e.Name()
		folder := path.Dir(p0)
		if !e.Type().IsRegular() {
			return
		}
		if strings.HasSuffix(name, ".go") && !slices.ContainsFunc(strings.Split(folder, "/"), func(d string) bool { return d != "." && goIgnoresDir(d) }) {
			goDirs[folder] = true
		}
		switch {
		case name == "go.mod":
			ecos[Go] = true
			p.GoModules = append(p.GoModules, folder)
			if st, err := fs.Stat(fsys, path.Join(folder, "vendor", "modules.txt")); err == nil && st.Mode().IsRegular() {
				p.GoVendored[folder] = true
			}
			if !budget(e) {
				break // not parsed: counts as requiring modules
			}
			if b, err := safefile.Read(root, p0, manifestBytesMax); err == nil {
				if f, err := modfile.ParseLax(p0, b, nil); err == nil && len(f.Require) == 0 {
					p.GoRequireless[folder] = true
				}
			}
		case name == "go.work" && folder == ".":
			ecos[Go] = true
			p.GoWork = true
		case name == "package.json":
			ecos[Npm] = true
			npmDirs[folder] = true
		case name == "package-lock.json" || name == "npm-shrinkwrap.json":
			lockDirs[folder] = true
		case name == "Cargo.toml":
			ecos[Crates] = true
		case name == "pom.xml":
			ecos[Maven] = true
		case name == "build.gradle" || name == "build.gradle.kts" || name == "settings.gradle" || name == "settings.gradle.kts":
			ecos[Gradle] = true
		case pythonManifest(name):
			ecos[PyPI] = true
			if !budget(e) {
				break
			}
			for _, d := range readPythonDeps(fsys, p0, name) {
				pyDeps[d] = true
			}
		}
	}
	// The root's own files first: the walk below may stop at its bound
	// inside a large folder that sorts before them.
	top, _ := fs.ReadDir(fsys, ".")
	for _, e := range top {
		if !e.IsDir() {
			n++
			visit(e.Name(), e)
		}
	}
	err = fs.WalkDir(fsys, ".", func(p0 string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable: skip
		}
		if !e.IsDir() && path.Dir(p0) == "." {
			return nil // seen and counted above
		}
		n++
		if n > walkEntriesLimit {
			p.Truncated = true
			return fs.SkipAll
		}
		name := e.Name()
		if e.IsDir() {
			if p0 == "." {
				return nil
			}
			if name == "node_modules" {
				modulesDirs[path.Dir(p0)] = true
			}
			if skipDirs[name] || strings.HasPrefix(name, ".") || strings.Count(p0, "/") >= walkDepthMax {
				if !goIgnoresDir(name) {
					unseenDirs[p0] = true
				}
				return fs.SkipDir
			}
			return nil
		}
		visit(p0, e)
		return nil
	})
	if err != nil {
		return p, fmt.Errorf("setup: reading the workspace %s: %w", dir, err)
	}
	for d := range lockDirs {
		if npmDirs[d] && !modulesDirs[d] {
			p.NpmLocked = append(p.NpmLocked, d)
		}
	}
	sortShallow(p.GoModules)
	sortShallow(p.NpmLocked)
	if !p.Truncated {
		for _, m := range p.GoModules {
			if !goModuleHasAny(m, p.GoModules, goDirs) && !goModuleHasAny(m, p.GoModules, unseenDirs) {
				p.GoSourceless[m] = true
			}
		}
	}
	for e := range ecos {
		p.Ecosystems = append(p.Ecosystems, e)
	}
	sort.Strings(p.Ecosystems)
	for d := range pyDeps {
		p.PythonDeps = append(p.PythonDeps, d)
	}
	sort.Strings(p.PythonDeps)
	return p, nil
}

// goIgnoresDir reports whether the go command ignores a folder of this
// name when it matches packages (./...): vendor, testdata and names
// starting with "." or "_" (go help packages); node_modules holds no Go.
func goIgnoresDir(name string) bool {
	return name == "vendor" || name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

// goModuleHasAny reports whether one of dirs (slash folders) belongs to
// the Go module at mod: at or below it, and not in a module nested deeper.
func goModuleHasAny(mod string, mods []string, dirs map[string]bool) bool {
	for d := range dirs {
		if goModuleOf(d, mods) == mod {
			return true
		}
	}
	return false
}

// goModuleOf is the deepest module folder among mods holding dir, "" when
// none does.
func goModuleOf(dir string, mods []string) string {
	best := ""
	for _, m := range mods {
		if (m == "." || dir == m || strings.HasPrefix(dir, m+"/")) && (best == "" || len(m) > len(best) || best == ".") {
			best = m
		}
	}
	return best
}

// sortShallow sorts slash paths by depth, then by name ("." first).
func sortShallow(ps []string) {
	depth := func(s string) int {
		if s == "." {
			return 0
		}
		return strings.Count(s, "/") + 1
	}
	sort.Slice(ps, func(i, j int) bool {
		if di, dj := depth(ps[i]), depth(ps[j]); di != dj {
			return di < dj
		}
		return ps[i] < ps[j]
	})
}

// Step is one setup command: run with sh -c in Dir (a slash path relative
// to the workspace, "" or "." its root).
type Step struct {
	Command string
	Dir     string
	// Detected marks a default goalrun chose from the tree (not --setup);
	// its failure does not end the run by itself (the first check then
	// says whether the environment is missing something).
	Detected bool
	// Why says what the step is for, e.g. "go.mod in ./api".
	Why string
}

// GoWarmCommand compiles a Go module's packages and tests into the build
// cache without running any of their code: -exec true "runs" each test
// binary with true(1), -count=1 keeps the build cache free of test results
// (a later go test must run its tests, not replay these).
const GoWarmCommand = "go test -count=1 -exec true ./..."

// Steps returns the default setup steps for p: for each Go module (the
// workspace's go.work root instead, when there is one) `go mod download`
// unless it is vendored or requires nothing, then GoWarmCommand unless it
// has no Go source; for each folder with an npm
// lock file and no node_modules, `npm ci`. At most goModulesMax Go modules.
func (p Project) Steps() []Step {
	var out []Step
	mods := p.GoModules
	if p.GoWork {
		mods = []string{"."}
	}
	if len(mods) > goModulesMax {
		mods = mods[:goModulesMax]
	}
	for _, m := range mods {
		where := "./" + m
		if m == "." {
			where = "the workspace"
		}
		what := "go.mod in " + where
		if p.GoWork && m == "." {
			what = "go.work in the workspace"
		}
		alone := !p.GoWork // a go.work's modules count together
		if !p.GoVendored[m] && !(alone && p.GoRequireless[m]) {
			out = append(out, Step{Command: "go mod download", Dir: m, Detected: true, Why: what + ": download the modules it requires"})
		}
		if !(alone && p.GoSourceless[m]) {
			out = append(out, Step{Command: GoWarmCommand, Dir: m, Detected: true, Why: what + ": compile its packages and tests into the build cache (nothing runs)"})
		}
	}
	for _, d := range p.NpmLocked {
		where := "./" + d
		if d == "." {
			where = "the workspace"
		}
		out = append(out, Step{Command: "npm ci", Dir: d, Detected: true, Why: "package-lock.json in " + where + " without node_modules: install the locked packages"})
	}
	return out
}

// AllowHosts returns the egress preset names of p's ecosystems (Gradle
// also reaches Maven Central, which its preset includes).
func (p Project) AllowHosts() []string {
	return slices.Clone(p.Ecosystems)
}

// Env returns the environment that points p's ecosystems' tools at the
// dependencies prepared in deps (sandbox.DepsDir in Docker): Go's module and build
// caches (GOMODCACHE, GOCACHE; GOTOOLCHAIN=local, so no step downloads
// another toolchain), npm's cache, pip's cache, Cargo's home, Maven's
// local repository and Gradle's home. offline (checks and agent steps,
// where the folder is read-only and there is no network) adds what makes a
// missing dependency fail at once and name itself instead of trying the
// network: GOPROXY=off, npm's offline mode, CARGO_NET_OFFLINE. Only the
// ecosystems p uses get variables.
func (p Project) Env(deps string, offline bool) map[string]string {
	env := map[string]string{}
	for _, e := range p.Ecosystems {
		switch e {
		case Go:
			env["GOMODCACHE"] = deps + "/gomod"
			env["GOCACHE"] = deps + "/gocache"
			env["GOTOOLCHAIN"] = "local"
			if offline {
				env["GOPROXY"] = "off"
			}
		case Npm:
			env["npm_config_cache"] = deps + "/npm"
			if offline {
				env["npm_config_offline"] = "true"
			}
		case PyPI:
			env["PIP_CACHE_DIR"] = deps + "/pip"
		case Crates:
			env["CARGO_HOME"] = deps + "/cargo"
			if offline {
				env["CARGO_NET_OFFLINE"] = "true"
			}
		case Maven:
			env["MAVEN_OPTS"] = "-Dmaven.repo.local=" + deps + "/m2"
		case Gradle:
			env["GRADLE_USER_HOME"] = deps + "/gradle"
			env["MAVEN_OPTS"] = "-Dmaven.repo.local=" + deps + "/m2"
		}
	}
	return env
}

// pythonManifest reports the Python manifests Detect reads.
func pythonManifest(name string) bool {
	switch name {
	case "pyproject.toml", "setup.cfg", "setup.py", "Pipfile":
		return true
	}
	return strings.HasPrefix(name, "requirements") && strings.HasSuffix(name, ".txt")
}

var (
	reReqName    = regexp.MustCompile(`^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*([<>=!~;@ ]|$)`)
	reQuotedName = regexp.MustCompile(`["']\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*([<>=!~;@ ][^"']*)?["']`)
	reTomlKey    = regexp.MustCompile(`^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*=`)
	reSection    = regexp.MustCompile(`^\s*\[([^\]]+)\]\s*$`)
	reDepsKey    = regexp.MustCompile(`\b(dependencies|install_requires|tests_require|requires)\b\s*[=:]?\s*`)
)

// readPythonDeps returns the distribution names one Python manifest
// declares. It reads what is commonly written, not every syntax: a
// requirements file's lines (options and includes skipped), the quoted
// requirements of pyproject.toml's, setup.cfg's and setup.py's dependency
// lists, the keys of Poetry's and Pipfile's dependency tables.
func readPythonDeps(fsys fs.FS, p, name string) []string {
	f, err := fsys.Open(p)
	if err != nil {
		return nil
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, manifestBytesMax))
	if err != nil {
		return nil
	}
	var out []string
	add := func(s string) {
		if s != "" && !strings.EqualFold(s, "python") {
			out = append(out, s)
		}
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(make([]byte, 64<<10), manifestBytesMax)
	section, inList := "", false
	for sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, "#"); i >= 0 && name != "setup.py" {
			line = line[:i]
		}
		switch {
		case strings.HasPrefix(name, "requirements"):
			if strings.HasPrefix(strings.TrimSpace(line), "-") {
				continue
			}
			if m := reReqName.FindStringSubmatch(line); m != nil {
				add(m[1])
			}
			continue
		}
		if m := reSection.FindStringSubmatch(line); m != nil {
			section, inList = strings.TrimSpace(m[1]), false
			continue
		}
		switch name {
		case "Pipfile":
			if section == "packages" || section == "dev-packages" {
				if m := reTomlKey.FindStringSubmatch(line); m != nil {
					add(m[1])
				}
			}
			continue
		case "pyproject.toml":
			if strings.HasPrefix(section, "tool.poetry") && strings.HasSuffix(section, "dependencies") {
				if m := reTomlKey.FindStringSubmatch(line); m != nil {
					add(m[1])
				}
				continue
			}
		}
		// setup.cfg: install_requires = then one requirement per
		// indented line.
		if name == "setup.cfg" {
			if section == "options" || strings.HasPrefix(section, "options.extras_require") {
				if strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") {
					if inList {
						if m := reReqName.FindStringSubmatch(line); m != nil {
							add(m[1])
						}
					}
				} else if k, v, ok := strings.Cut(line, "="); ok {
					inList = strings.TrimSpace(k) == "install_requires" || strings.HasPrefix(section, "options.extras_require")
					if inList {
						if m := reReqName.FindStringSubmatch(v); m != nil {
							add(m[1])
						}
					}
				}
			}
			continue
		}
		// Lists of quoted requirements: dependencies = [...],
		// install_requires=[...], optional dependencies, dependency
		// groups; from the key on.
		rest := line
		if i := reDepsKey.FindStringIndex(line); i != nil {
			inList, rest = true, line[i[1]:]
		} else if strings.HasPrefix(section, "project.optional-dependencies") || section == "dependency-groups" {
			inList = true
		}
		if inList {
			for _, m := range reQuotedName.FindAllStringSubmatch(rest, -1) {
				add(m[1])
			}
			if strings.Contains(rest, "]") {
				inList = false
			}
		}
	}
	return out
}

// Bounds of what DepsKey reads and hashes from a tree that may be hostile.
const (
	// goSumBytesMax bounds a go.sum (or go.work.sum, vendor/modules.txt)
	// DepsKey hashes: 64 MiB; a larger one keeps the deps per run.
	goSumBytesMax = 64 << 20
	// depsKeyBytesMax bounds the bytes DepsKey hashes in all: 256 MiB
	// (about a second of SHA-256), far above a real module graph's
	// manifests (Kubernetes' go.sum is about 100 KiB) and far below the
	// (32 modules × 3 + 64 local targets × 2) files × 64 MiB the per-file
	// bound alone allows. A larger graph keeps the deps per run.
	depsKeyBytesMax = 256 << 20
	// depsKeyTargetsMax bounds the local folders DepsKey follows beyond
	// the detected modules (replace targets and go.work use folders,
	// transitively): 64, far above a real tree's handful. More keep the
	// deps per run.
	depsKeyTargetsMax = 64
)

// depsKeyBytesLimit is depsKeyBytesMax; a variable only so that a test
// can exceed it without writing 256 MiB.
var depsKeyBytesLimit = depsKeyBytesMax

// DepsKey names what the default Go steps prepare, for keeping their
// outputs across runs (sandbox.SetupConfig.Key): a SHA-256 of the steps
// (command and folder) and of the module graph they read — every Go
// module's go.mod and go.sum, vendor/modules.txt of a vendored one, and
// the go.work and go.work.sum of every folder that holds a module or lies
// between one and the root (the go command looks for go.work from a
// step's folder upward, so a nested one governs that module's steps as
// the root's does; an absent one counts as absent) — plus extra (e.g. the
// toolchain's version). The local folders those files point at are in it
// too, because their go.mod requirements change what `go mod download`
// fetches and Detect may not have walked them (hidden or skipped folders,
// or deeper than walkDepthMax): every go.mod and go.work it hashes is
// parsed strictly, and the go.mod and go.sum of each target of a
// `replace … => ./path` (or ../path; a replacement without a version) and
// of each go.work `use` folder, resolved from that file's folder, are
// hashed and parsed in turn, transitively, each folder once, at most
// depsKeyTargetsMax of them. Following them all is the simple safe rule:
// hashing more than the go command reads only makes reuse rarer.
// It is "" when a step is not one of goalrun's Go
// defaults (a --setup command or npm ci may write into the tree, which is
// per run), when the walk was cut short, when a file cannot be read whole
// (a go.work that is not a regular file included), when the files add up
// to more than depsKeyBytesMax, when a go.mod or go.work does not parse
// (or is larger than manifestBytesMax, or they add up to more than
// manifestsParsedMax: parsing is what costs), when a local target is
// absolute or leaves the workspace, when a go.mod (a target's included)
// is missing or not a regular file, or when there are more than
// depsKeyTargetsMax targets; a target's missing go.sum counts as absent.
// The tree's
// sources are not in it: the Go build cache is keyed by content, so a
// source the agent or the user changes is compiled again, never mistaken.
func DepsKey(dir string, p Project, steps []Step, extra ...string) string {
	if len(steps) == 0 || p.Truncated || len(p.GoModules) > goModulesMax {
		return ""
	}
	for _, s := range steps {
		if !s.Detected || s.Command != "go mod download" && s.Command != GoWarmCommand {
			return ""
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return ""
	}
	defer root.Close()
	h := sha256.New()
	field := func(parts ...string) {
		for _, s := range parts {
			fmt.Fprintf(h, "%d:%s;", len(s), s)
		}
		h.Write([]byte{'\n'})
	}
	field("goalrun-setup-deps/1")
	field(extra...)
	for _, s := range steps {
		field("step", s.Command, s.Dir)
	}
	var files []string
	for _, w := range goWorkFolders(p.GoModules) {
		files = append(files, path.Join(w, "go.work"), path.Join(w, "go.work.sum"))
	}
	for _, m := range p.GoModules {
		files = append(files, path.Join(m, "go.mod"), path.Join(m, "go.sum"))
		if p.GoVendored[m] {
			files = append(files, path.Join(m, "vendor", "modules.txt"))
		}
	}
	visited := map[string]bool{} // module folders hashed or queued
	for _, m := range p.GoModules {
		visited[m] = true
	}
	total, parsed, targets := 0, 0, 0
	for i := 0; i < len(files); i++ { // files grows with the targets found
		name := files[i]
		base := path.Base(name)
		b, err := readBounded(root, name, goSumBytesMax)
		switch {
		case errors.Is(err, fs.ErrNotExist) && base != "go.mod":
			field("absent", name)
			continue
		case err != nil:
			return ""
		default:
			if total += len(b); total > depsKeyBytesLimit {
				return ""
			}
			field("file", name, string(b))
		}
		if base != "go.mod" && base != "go.work" {
			continue
		}
		if parsed += len(b); len(b) > manifestBytesMax || parsed > manifestsParsedMax {
			return ""
		}
		dirs, ok := localTargets(name, b)
		if !ok {
			return ""
		}
		for _, d := range dirs {
			if visited[d] {
				continue
			}
			visited[d] = true
			if targets++; targets > depsKeyTargetsMax {
				return ""
			}
			files = append(files, path.Join(d, "go.mod"), path.Join(d, "go.sum"))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// localTargets parses name (a go.mod or go.work of body b, strictly) and
// returns the local folders it points at, as slash paths from the
// workspace's root: the targets of its replacements without a version
// (https://go.dev/ref/mod#go-mod-file-replace) and, of a go.work, its use
// folders (https://go.dev/ref/mod#go-work-file-use), each resolved from
// name's folder as the go command does. ok is false when b does not
// parse or a target is absolute or leaves the workspace.
func localTargets(name string, b []byte) (dirs []string, ok bool) {
	var rels []string
	local := func(rs []*modfile.Replace) {
		for _, r := range rs {
			if r.New.Version == "" {
				rels = append(rels, r.New.Path)
			}
		}
	}
	if path.Base(name) == "go.work" {
		f, err := modfile.ParseWork(name, b, nil)
		if err != nil {
			return nil, false
		}
		for _, u := range f.Use {
			rels = append(rels, u.Path)
		}
		local(f.Replace)
	} else {
		f, err := modfile.Parse(name, b, nil)
		if err != nil {
			return nil, false
		}
		local(f.Replace)
	}
	for _, r := range rels {
		d := path.Join(path.Dir(name), r)
		if path.IsAbs(r) || d == ".." || strings.HasPrefix(d, "../") {
			return nil, false
		}
		dirs = append(dirs, d)
	}
	return dirs, true
}

// goWorkFolders are the folders where a go.work may govern one of the
// modules at mods (slash folders): each module's folder and every folder
// between it and the workspace's root, root included, shallowest first.
// The go command looks for go.work from the folder it runs in upward
// (https://go.dev/ref/mod#workspaces), and each module's setup steps run
// in its folder; folders above the workspace are not the tree's.
func goWorkFolders(mods []string) []string {
	seen := map[string]bool{".": true}
	for _, m := range mods {
		for d := m; d != "." && d != "/" && d != ""; d = path.Dir(d) {
			seen[d] = true
		}
	}
	out := make([]string, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	sortShallow(out)
	return out
}

// readBounded reads the regular file name under root (never through a
// link: os.Root refuses one that leaves the tree, Lstat one inside), at most
// limit bytes; a longer file is an error.
func readBounded(root *os.Root, name string, limit int64) ([]byte, error) {
	st, err := root.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("setup: %s is not a regular file", name)
	}
	b, err := safefile.Read(root, name, limit)
	if err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	return b, nil
}
