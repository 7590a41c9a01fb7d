package grounding

import (
	"crypto/rand"
	"path"
	"reflect"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/goalrun/goalrun/internal/lazyre"
)

// pythonRuns reports whether the check runs Python code (runs, from
// NewCheck): pytest, unittest, tox or nox, or a python interpreter.
func pythonRuns(runs map[string]bool) bool {
	return runs["pytest"] || runs["unittest"] || runs["python"] || runs["tox"]
}

// pytestDeps are top-level module names pytest itself imports besides the
// standard library (its own packages and its dependencies, as Debian's
// python3-pytest and pytest 8 on PyPI declare them), and the names of
// modules Python imports at start-up when they exist (sitecustomize,
// usercustomize, setuptools' .pth hook). A workspace module with one of
// these names, on a folder on sys.path, replaces pytest's own code.
var pytestDeps = map[string]bool{
	"pytest": true, "_pytest": true, "py": true, "pluggy": true, "iniconfig": true, "packaging": true,
	"attr": true, "attrs": true, "more_itertools": true, "pkg_resources": true, "setuptools": true,
	"_distutils_hack": true, "exceptiongroup": true, "tomli": true, "importlib_metadata": true, "zipp": true,
	"colorama": true, "pygments": true, "typing_extensions": true, "six": true, "wcwidth": true,
	"atomicwrites": true, "sitecustomize": true, "usercustomize": true,
}

// pythonModuleName returns the module a file named base defines when
// Python imports it from its folder — "calc" for calc.py, calc.pyc,
// calc.cpython-311-x86_64-linux-gnu.so or calc.pyd — or "".
func pythonModuleName(base string) string {
	for _, ext := range []string{".py", ".pyc", ".pyo", ".pyw", ".pyd", ".so"} {
		if name, ok := strings.CutSuffix(base, ext); ok {
			if ext == ".so" || ext == ".pyd" {
				name, _, _ = strings.Cut(name, ".") // calc.cpython-311-x86_64-linux-gnu
			}
			return name
		}
	}
	return ""
}

// pythonShadows reports whether a module named name replaces one the check
// needs when imported from a folder on sys.path: the standard library's,
// pytest's own or its dependencies', or a pytest plugin's (pytest_*).
func pythonShadows(name string) bool {
	return name != "" && (pythonStdlib[name] || pytestDeps[name] || strings.HasPrefix(name, "pytest_"))
}

// pythonCheckReason says why a change to path p (removed: it no longer
// exists) changes what a Python check runs, or "" when it does not:
//
//   - new or changed bytecode (.pyc, .pyo: Python imports a sourceless
//     module.pyc) outside __pycache__ — inside it too when the check may
//     run Python without CheckPythonEnv (runPythonEnvLost: pytest loads its
//     own rewritten-test cache when the header matches the source's size
//     and time) — or a compiled extension module (.so, .pyd: imported
//     before a .py of that name);
//   - package metadata and path files: anything in a *.dist-info or
//     *.egg-info folder (pytest loads the plugins their entry_points.txt
//     name, from any folder on sys.path), a .pth or .egg-link file, and
//     anything under site-packages/;
//   - a module or package named like one of the standard library, pytest
//     and its dependencies, or a pytest plugin (pythonShadows) in a folder
//     that is not a package (no __init__.py: python -m, pytest's rootdir and
//     test folders put such folders first on sys.path), or the removal of
//     the __init__.py that kept such a module inside a package;
//   - pytest's configuration wherever pytest reads it: .pytest.ini, the
//     tool.pytest table of a pyproject.toml (parsed as TOML, dotted keys
//     and all), the [pytest] section of tox.ini and [tool:pytest] of
//     setup.cfg (parsed as pytest's ini reader does), and .pytest_cache/
//     (--lf, --ff, --sw and --nf read it) when the check may read it
//     (runPytestCacheRead); with tox or nox, their files.
//
// has reports whether the current tree holds a path; children lists the
// current entries directly in a folder.
func pythonCheckReason(p string, runs map[string]bool, removed bool, has func(string) bool, children func(string) []string,
	oldText, newText []byte, oldOK, newOK bool) string {
	if !pythonRuns(runs) {
		return ""
	}
	base, dir := path.Base(p), path.Dir(p)
	lb := strings.ToLower(base)
	pytest := runs["pytest"] || runs["tox"]
	if removed {
		if base == "__init__.py" {
			for _, c := range children(dir) {
				if pythonShadows(pythonModuleName(path.Base(c))) {
					return "__init__.py removed: " + c + " now shadows a module the check imports (" + pythonModuleName(path.Base(c)) + ")"
				}
			}
		}
		return ""
	}
	inPycache := strings.Contains("/"+dir+"/", "/__pycache__/")
	switch ext := path.Ext(lb); {
	case (ext == ".pyc" || ext == ".pyo") && (!inPycache || runs[runPythonEnvLost]):
		return "Python bytecode (Python imports it instead of the source, and pytest loads its rewritten tests from it)"
	case ext == ".so" || ext == ".pyd":
		if !strings.Contains(p, ".dist-info/") {
			return "a compiled extension module (Python imports it before a .py of the same name)"
		}
	case ext == ".pth" || ext == ".egg-link":
		return "a Python path file (.pth, .egg-link: it puts folders on sys.path and runs its import lines)"
	}
	for _, part := range strings.Split(p, "/") {
		switch {
		case strings.HasSuffix(part, ".dist-info"), strings.HasSuffix(part, ".egg-info"):
			return "Python package metadata (pytest loads the plugins its entry points name, from any folder on sys.path)"
		case part == "site-packages":
			return "an installed Python package the check imports (site-packages)"
		case part == ".pytest_cache" && pytest && runs[runPytestCacheRead]:
			return "pytest's cache (--lf, --ff, --sw and --nf decide from it which tests run)"
		}
	}
	if name := pythonModuleName(base); pythonShadows(name) && !has(joinRel(dir, "__init__.py")) {
		return "a module named " + name + ", like one of Python's standard library, pytest or its plugins: imported instead of it from this folder"
	}
	if base == "__init__.py" || base == "__init__.pyc" {
		if pkg := path.Base(dir); dir != "." && pythonShadows(pkg) && !has(joinRel(path.Dir(dir), "__init__.py")) {
			return "a package named " + pkg + ", like one of Python's standard library, pytest or its plugins: imported instead of it"
		}
	}
	if !pytest {
		return ""
	}
	switch {
	case base == ".pytest.ini":
		return "pytest's configuration (.pytest.ini)"
	case base == "pyproject.toml":
		if tomlTableChanged(oldText, newText, oldOK, newOK, "tool", "pytest") {
			return "pytest's configuration changed (pyproject.toml, tool.pytest)"
		}
		if runs["tox"] && tomlTableChanged(oldText, newText, oldOK, newOK, "tool", "tox") {
			return "tox's configuration changed (pyproject.toml, tool.tox)"
		}
	case base == "tox.ini":
		if runs["tox"] && (!oldOK || !newOK || string(oldText) != string(newText)) {
			return "tox's configuration (tox.ini)"
		}
		if iniSectionsChanged(oldText, newText, oldOK, newOK, "pytest") {
			return "pytest's configuration changed (tox.ini, [pytest])"
		}
	case base == "setup.cfg":
		if iniSectionsChanged(oldText, newText, oldOK, newOK, "tool:pytest") {
			return "pytest's configuration changed (setup.cfg, [tool:pytest])"
		}
		if runs["tox"] && iniSectionsChanged(oldText, newText, oldOK, newOK, "tox:tox", "testenv") {
			return "tox's configuration changed (setup.cfg)"
		}
	case runs["tox"] && (base == "noxfile.py" || base == "tox.toml"):
		return "tox's or nox's configuration"
	}
	return ""
}

// tomlTableChanged reports whether the table at keys (tool.pytest) of two
// TOML documents differs, decoded as TOML (so a root-level dotted key
// "tool.pytest.ini_options.addopts = …" counts as much as a [tool.pytest…]
// header). A side that cannot be read or parsed counts as changed when the
// texts differ.
func tomlTableChanged(a, b []byte, aOK, bOK bool, keys ...string) bool {
	if !aOK || !bOK {
		return true
	}
	if string(a) == string(b) {
		return false
	}
	at := func(doc []byte) (any, bool) {
		var m map[string]any
		if err := toml.Unmarshal(doc, &m); err != nil {
			return nil, false
		}
		var v any = m
		for _, k := range keys {
			t, ok := v.(map[string]any)
			if !ok {
				return nil, true
			}
			v = t[k]
		}
		return v, true
	}
	x, okA := at(a)
	y, okB := at(b)
	return !okA || !okB || !reflect.DeepEqual(x, y)
}

// iniSectionsChanged reports whether the sections named names (or starting
// with one of them followed by ":" or nothing else, and any section whose
// name mentions pytest when names does) of two ini files differ, read as
// pytest's own ini reader (iniconfig) reads them: a section header starts
// at the line's first column, comments start with # or ;, a line starting
// with a blank continues the previous value. A side that cannot be read
// counts as changed.
func iniSectionsChanged(a, b []byte, aOK, bOK bool, names ...string) bool {
	if !aOK || !bOK {
		return true
	}
	return iniSections(a, names) != iniSections(b, names)
}

// iniSections returns the normalised content of the matching sections.
func iniSections(data []byte, names []string) string {
	match := func(sec string) bool {
		low := strings.ToLower(sec)
		for _, n := range names {
			if low == n || strings.HasPrefix(low, n+":") || strings.HasPrefix(low, n) && n == "testenv" ||
				strings.Contains(n, "pytest") && strings.Contains(low, "pytest") {
				return true
			}
		}
		return false
	}
	var out strings.Builder
	in := false
	for _, raw := range strings.Split(string(data), "\n") {
		line := strings.TrimRight(raw, " \t\r")
		if t := strings.TrimLeft(line, " \t"); t == "" || t[0] == '#' || t[0] == ';' {
			continue
		}
		switch {
		case line[0] == '[':
			real := line
			for _, c := range "#;" {
				real, _, _ = strings.Cut(real, string(c))
			}
			real = strings.TrimRight(real, " \t")
			if strings.HasSuffix(real, "]") {
				sec := real[1 : len(real)-1]
				in = match(sec)
				if in {
					out.WriteString("[" + sec + "]\n")
				}
				continue
			}
			if in { // not a header: iniconfig reads it as a value line
				out.WriteString(strings.TrimSpace(line) + "\n")
			}
		case in:
			out.WriteString(line + "\n")
		}
	}
	return out.String()
}

// CheckPythonEnv is the environment every check step gets so that Python
// never trusts bytecode found in the tree: PYTHONDONTWRITEBYTECODE=1 (no
// .pyc is written, by Python or by pytest's assertion rewriting) and
// PYTHONPYCACHEPREFIX set to a fresh folder nobody can have filled — a
// random name under /tmp that does not exist — so that neither Python nor
// pytest (which honours sys.pycache_prefix, _pytest/assertion/rewrite.py
// get_cache_dir) reads a __pycache__ the agent planted beside a source.
// Sourceless bytecode (module.pyc with no module.py) is still imported:
// pythonCheckReason counts it as a change to the check. PYTEST_ADDOPTS
// points pytest's cache (what --lf, --ff, --sw and --nf read) at such a
// fresh folder too (-o cache_dir,
// https://docs.pytest.org/en/stable/reference/reference.html#confval-cache_dir),
// so a .pytest_cache the agent's own pytest runs left in the tree decides
// nothing.
func CheckPythonEnv() map[string]string {
	return map[string]string{
		"PYTHONDONTWRITEBYTECODE": "1",
		"PYTHONPYCACHEPREFIX":     "/tmp/goalrun-pycache-" + rand.Text(),
		"PYTEST_ADDOPTS":          "-o cache_dir=/tmp/goalrun-pytest-cache-" + rand.Text(),
	}
}

// Runner flags NewCheck adds for the Python rules.
const (
	// runPythonEnvLost: the check may run Python without CheckPythonEnv's
	// variables (tox and nox make their own environments; env -i or -u,
	// sudo, python -E or -I drop or ignore them; the check sets them
	// itself), so a __pycache__ in the tree may be read.
	runPythonEnvLost = "python-env-lost"
	// runPytestCacheRead: pytest may read the tree's .pytest_cache (the
	// check sets PYTEST_ADDOPTS or cache_dir itself, or runs tox or nox).
	runPytestCacheRead = "pytest-cache-read"
)

// pythonEnvFlags returns the runPythonEnvLost and runPytestCacheRead
// flags of a check command line: tox or nox, sudo or doas, env with -i,
// -u or --unset, a Python interpreter with -E or -I, or the variables
// named on the line itself.
func pythonEnvFlags(command string, runs map[string]bool) map[string]bool {
	lost, read := runs["tox"], runs["tox"]
	cmds, _ := shellCommands(command)
	for _, c := range cmds {
		for k, w := range c {
			base := path.Base(w)
			switch {
			case base == "sudo" || base == "doas":
				lost = true
			case base == "env":
				for _, o := range c[k+1:] {
					if !strings.HasPrefix(o, "-") {
						break
					}
					if o == "--ignore-environment" || strings.HasPrefix(o, "--unset") || reShortFlags.MatchString(o) && strings.ContainsAny(o, "iu") {
						lost = true
					}
				}
			case rePythonCmd.MatchString(strings.ToLower(base)):
				for _, o := range c[k+1:] {
					if !strings.HasPrefix(o, "-") || o == "-m" || o == "-c" {
						break
					}
					if reShortFlags.MatchString(o) && strings.ContainsAny(o, "EI") {
						lost = true
					}
				}
			}
		}
	}
	// Assignments (PYTEST_ADDOPTS=… pytest) are not among the words: the
	// line itself is looked at.
	if strings.Contains(command, "PYTHONPYCACHEPREFIX") || strings.Contains(command, "PYTHONDONTWRITEBYTECODE") {
		lost = true
	}
	if strings.Contains(command, "PYTEST_ADDOPTS") || strings.Contains(command, "cache_dir") {
		read = true
	}
	return map[string]bool{runPythonEnvLost: lost, runPytestCacheRead: read}
}

// reShortFlags matches a word of short options (-i, -Iu, -E).
var reShortFlags = lazyre.New(`^-[A-Za-z]+$`)
