package grounding

import (
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/goalrun/goalrun/internal/lazyre"
)

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
var rePythonCmd = lazyre.New(`^(python|pypy)\d*(\.\d+)?$|^(uv|poetry|pipenv|hatch|pdm|rye)$`)

// pythonMarkers are files that make a tree a Python project.
var pythonMarkers = map[string]bool{"pyproject.toml": true, "setup.py": true, "setup.cfg": true, "tox.ini": true,
	"pytest.ini": true, ".pytest.ini": true, "conftest.py": true, "noxfile.py": true}

// Check is what a check command reads in a tree: the files of the tree
// its words name (a script, a Makefile given with -f) and the
// configuration of the test runners it uses, and which runners those are.
// The check's files are found at the baseline, in the untouched tree; the
// runners' configuration is matched on any changed path (Classify).
type Check struct {
	files map[string]bool // slash paths of the scanned folder
	runs  map[string]bool // runners the check uses: make, npm, pytest, … (Runners)
	sub   string
}

// NewCheck returns the check command's files in a tree and the runners it
// uses. paths are the tree's entries (slash paths of the scanned folder,
// sorted), and isFile reports whether one of them is there and not a
// folder. sub is the workspace's slash path inside the scanned folder (""
// when it is the workspace): the check runs in the workspace, so its words
// are resolved from there ("../test.sh" with sub "app" is "test.sh").
func NewCheck(command, sub string, paths []string, isFile func(p string) bool) *Check {
	files, runs := map[string]bool{}, Runners(command)
	for _, w := range ShellWords(command) {
		if sub != "" && !path.IsAbs(w) {
			w = path.Join(sub, w)
		}
		if p := cleanRel(w); p != "" && isFile(p) {
			files[p] = true
		}
	}
	if !runs["gotest"] && (len(files) > 0 || runs["make"] || runs["just"] || runs["task"] || goRunsCode(command) || programUnknown(command)) {
		// A script, Makefile or task file of the check may run go test; a
		// program named only when the shell runs ($(which go), $GO) may be
		// go; go run, go build or go generate run code of the tree: in a Go
		// module, assume the check runs the tests (fail safe).
		for _, p := range paths {
			if path.Base(p) == "go.mod" && !strings.Contains("/"+p, "/vendor/") {
				runs["gotest"], runs["go"] = true, true
				break
			}
		}
	}
	if !pythonRuns(runs) && (len(files) > 0 || runs["make"] || runs["just"] || runs["task"]) {
		// Likewise a Python project's script or Makefile may run pytest.
		for _, p := range paths {
			if pythonMarkers[path.Base(p)] && !strings.Contains("/"+p, "/node_modules/") && !strings.Contains("/"+p, "/site-packages/") {
				runs["python"], runs["pytest"] = true, true
				break
			}
		}
	}
	maps.Copy(runs, pythonEnvFlags(command, runs))
	for _, p := range paths {
		// (node_modules/ is matched by Classify alone: it can be huge.)
		if runnerConfig(p, sub, runs) && !strings.Contains("/"+p, "/node_modules/") {
			files[p] = true
		}
	}
	return &Check{files: files, runs: runs, sub: sub}
}

// Files returns the check's own files found in the tree, sorted.
func (c *Check) Files() []string {
	return slices.Sorted(maps.Keys(c.files))
}

// Runs reports whether the check uses runner (a name Runners gives:
// "gotest", "pytest", "make", "npm", …).
func (c *Check) Runs(runner string) bool { return c.runs[runner] }

// runnerConfig reports whether the slash path p (in the scanned folder;
// sub as for NewCheck) configures a test runner the check uses (runs,
// from NewCheck): a Makefile for make, jest/vitest/mocha configuration
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

// Test files: their names and the folders they lie in.
var (
	reTestBase = lazyre.New(`(?i)(_test\.go|^test_.*\.py|_test\.py|\.(test|spec)\.[cm]?[jt]sx?|\.spec\.\w+|_spec\.rb|_test\.rb|Tests?\.(java|kt|cs|php|swift|scala)|_test\.(rs|exs|dart|cc|cpp|c)|^conftest\.py|\.snap)$`)
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

// cleanRel is p cleaned as a slash path relative to the scanned folder (""
// outside it).
func cleanRel(p string) string {
	p = path.Clean(strings.TrimPrefix(p, "./"))
	if p == "." || p == ".." || strings.HasPrefix(p, "../") || strings.HasPrefix(p, "/") {
		return ""
	}
	return p
}

// joinRel joins slash paths of the scanned folder ("." or "" is its top).
func joinRel(dir, name string) string {
	if dir == "" || dir == "." {
		return name
	}
	return dir + "/" + name
}
