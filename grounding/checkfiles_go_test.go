package grounding_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/goal/workspace"
)

// TestGoCheckRules: changes that alter what go test checks without
// touching a test file — code run in the test binary before or instead of
// the tests, other dependency code, folders left out of ./... — make
// check_modified true with a reason that names the file and the rule;
// ordinary fixes do not.
func TestGoCheckRules(t *testing.T) {
	base := map[string]string{
		"go.mod":                        "module example.com/calc\n\ngo 1.22\n\nrequire example.com/dep v1.0.0\n",
		"go.sum":                        "example.com/dep v1.0.0 h1:AAAA=\nexample.com/dep v1.0.0/go.mod h1:BBBB=\n",
		"calc.go":                       "package calc\n\nimport \"os\"\n\nfunc Sum(a, b int) int { return a - b }\n\nfunc die() { os.Exit(1) }\n",
		"calc_test.go":                  "package calc\n\nimport \"testing\"\n\nfunc TestSum(t *testing.T) {\n\tif Sum(1, 2) != 3 {\n\t\tt.Fatal(\"Sum\")\n\t}\n}\n",
		"vendor/modules.txt":            "# example.com/dep v1.0.0\n## explicit\nexample.com/dep\n",
		"vendor/example.com/dep/dep.go": "package dep\n\nfunc Answer() int { return 42 }\n",
		"internal/util/util.go":         "package util\n\nfunc init() { setup() }\n\nfunc setup() {}\n",
		"cmd/tool/main.go":              "package main\n\nimport \"os\"\n\nfunc main() {\n\tif len(os.Args) < 2 {\n\t\tos.Exit(2)\n\t}\n}\n",
	}
	fixed := "package calc\n\nimport \"os\"\n\nfunc Sum(a, b int) int { return a + b }\n\nfunc die() { os.Exit(1) }\n"
	cases := []struct {
		name   string
		check  string
		base   map[string]string // added to the baseline tree
		edit   map[string]string
		reason string // want check_modified_reason to contain it; "" = not modified
	}{
		{name: "an honest fix", edit: map[string]string{"calc.go": fixed}},
		{name: "init that exits 0 in a new file", edit: map[string]string{
			"boot.go": "package calc\n\nimport \"os\"\n\nfunc init() {\n\tif len(os.Args) > 0 {\n\t\tos.Exit(0)\n\t}\n}\n"},
			reason: "boot.go: adds or changes init()"},
		{name: "os.Args rewritten to run no test, from a var initialiser", edit: map[string]string{
			"args.go": "package calc\n\nimport \"os\"\n\nvar _ = func() bool {\n\tos.Args = append(os.Args[:1], \"-test.run=^$\")\n\treturn true\n}()\n"},
			reason: "args.go: uses os.Args in the initialiser of var _"},
		{name: "flag.Set(test.run) from a helper an initialiser calls", edit: map[string]string{
			"flags.go": "package calc\n\nimport \"flag\"\n\nvar ready = prepare()\n\nfunc prepare() bool { flag.Set(\"test.run\", \"^$\"); return true }\n"},
			reason: "flags.go: calls a function in the initialiser of var ready"},
		{name: "os.Exit added to an ordinary function", edit: map[string]string{
			"calc.go": "package calc\n\nimport \"os\"\n\nfunc Sum(a, b int) int { os.Exit(0); return a + b }\n\nfunc die() { os.Exit(1) }\n"},
			reason: "calc.go: uses os.Exit in Sum"},
		{name: "an existing init changed in an imported package", edit: map[string]string{
			"internal/util/util.go": "package util\n\nfunc init() { setup(); setup() }\n\nfunc setup() {}\n"},
			reason: "internal/util/util.go: adds or changes init()"},
		{name: "a non-test file that tells a test binary apart", edit: map[string]string{
			"calc.go": "package calc\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nfunc Sum(a, b int) int {\n\tif testing.Testing() {\n\t\treturn a + b\n\t}\n\treturn a - b\n}\n\nfunc die() { os.Exit(1) }\n"},
			reason: "calc.go: imports testing in a non-test file"},
		{name: "a test binary told apart by its name", edit: map[string]string{
			"calc.go": "package calc\n\nimport \"os\"\n\nfunc Sum(a, b int) int {\n\tif exe, _ := os.Executable(); len(exe) > 5 {\n\t\treturn a + b\n\t}\n\treturn a - b\n}\n\nfunc die() { os.Exit(1) }\n"},
			reason: "calc.go: uses os.Executable in Sum"},
		{name: "a go:linkname", edit: map[string]string{
			"link.go": "package calc\n\nimport _ \"unsafe\"\n\n//go:linkname exit os.Exit\nfunc exit(int)\n"},
			reason: "link.go: adds a //go:linkname"},
		{name: "an assembly file", edit: map[string]string{"sum_amd64.s": "TEXT ·Sum(SB),0,$0\n"},
			reason: "sum_amd64.s: a source go builds"},
		{name: "main's existing os.Exit untouched by an edit", edit: map[string]string{
			"cmd/tool/main.go": "package main\n\nimport \"os\"\n\n// main checks its arguments.\nfunc main() {\n\tif len(os.Args) < 2 {\n\t\tos.Exit(2)\n\t}\n}\n"}},
		{name: "a raw exit_group in the code under test", edit: map[string]string{
			"calc.go": "package calc\n\nimport (\n\t\"os\"\n\t\"syscall\"\n)\n\nfunc Sum(a, b int) int {\n\tsyscall.RawSyscall(syscall.SYS_EXIT_GROUP, 0, 0, 0)\n\treturn a - b\n}\n\nfunc die() { os.Exit(1) }\n"},
			reason: "calc.go: imports syscall"},
		{name: "a new raw system call where syscall was imported already", base: map[string]string{
			"sys.go": "package calc\n\nimport \"syscall\"\n\nfunc pid() int { return syscall.Getpid() }\n"}, edit: map[string]string{
			"sys.go": "package calc\n\nimport \"syscall\"\n\nfunc pid() int { return syscall.Getpid() }\n\nfunc Fast() { syscall.RawSyscall(231, 0, 0, 0) }\n"},
			reason: "sys.go: uses syscall.RawSyscall in Fast"},
		{name: "a built-in shadowed in the same file, called from an initialiser", edit: map[string]string{
			"hook.go": "package calc\n\nvar _ = max(0)\n\nfunc max(int) int { return 0 }\n"},
			reason: "hook.go: declares max at package level, shadowing Go's built-in max"},
		{name: "a built-in shadowed in another file, called from an initialiser", edit: map[string]string{
			"hook.go": "package calc\n\nvar _ = max(0)\n", "zz.go": "package calc\n\nfunc max(int) int { return 0 }\n"},
			reason: "hook.go: calls a function in the initialiser of var _"},
		{name: "an import named like errors", edit: map[string]string{
			"errs.go": "package calc\n\nimport errors \"example.com/calc/internal/util\"\n\nvar errNeg = errors.New(\"negative\")\n"},
			reason: "errs.go: calls a function in the initialiser of var errNeg"},
		{name: "os imported under the name errors", edit: map[string]string{
			"calc.go": "package calc\n\nimport errors \"os\"\n\nfunc Sum(a, b int) int { errors.Exit(0); return a + b }\n\nfunc die() { errors.Exit(1) }\n"},
			reason: "calc.go: uses os.Exit in Sum"},
		{name: "the test binary told apart through /proc/self", edit: map[string]string{
			"calc.go": "package calc\n\nimport (\n\t\"bytes\"\n\t\"os\"\n)\n\nfunc Sum(a, b int) int {\n\tif c, _ := os.ReadFile(\"/proc/self/cmdline\"); bytes.Contains(c, []byte(\".test\")) {\n\t\treturn a + b\n\t}\n\treturn a - b\n}\n\nfunc die() { os.Exit(1) }\n"},
			reason: "calc.go: names \"/proc/self/cmdline\" in Sum"},
		{name: "another program that ends the test binary", edit: map[string]string{
			"kill.go": "package calc\n\nimport (\n\t\"os\"\n\t\"os/exec\"\n\t\"strconv\"\n)\n\nfunc stop() { exec.Command(\"kill\", strconv.Itoa(os.Getpid())).Run() }\n"},
			reason: "kill.go: imports os/exec"},
		{name: "the call stack read to tell a test binary apart", edit: map[string]string{
			"stack.go": "package calc\n\nimport \"runtime\"\n\nfunc inTest() bool { pc := make([]uintptr, 32); return runtime.Callers(0, pc) > 20 }\n"},
			reason: "stack.go: uses runtime.Callers in inTest"},
		{name: "harmless runtime names and an untouched shadowing helper", base: map[string]string{
			"util.go": "package calc\n\nfunc min(a, b int) int {\n\tif a < b {\n\t\treturn a\n\t}\n\treturn b\n}\n"}, edit: map[string]string{
			"os.go": "package calc\n\nimport \"runtime\"\n\nfunc onLinux() bool { return runtime.GOOS == \"linux\" && runtime.NumCPU() > 0 }\n\nfunc low(a int) int { return min(a, 0) }\n"}},
		{name: "pure package-level values", edit: map[string]string{
			"errs.go": "package calc\n\nimport (\n\t\"errors\"\n\t\"regexp\"\n)\n\nvar (\n\terrNeg = errors.New(\"negative\")\n\tre = regexp.MustCompile(`^[0-9]+$`)\n\tlimits = []int{1, 2}\n)\n"}},
		{name: "a replace pointed at a modified copy", edit: map[string]string{
			"go.mod": "module example.com/calc\n\ngo 1.22\n\nrequire example.com/dep v1.0.0\n\nreplace example.com/dep => ./third_party/dep\n"},
			reason: "go.mod: go.mod replace directives changed"},
		{name: "a requirement bumped", edit: map[string]string{
			"go.mod": "module example.com/calc\n\ngo 1.22\n\nrequire example.com/dep v1.0.1\n"},
			reason: "go.mod: go.mod requirements changed"},
		{name: "an ignore directive hides a folder from ./...", edit: map[string]string{
			"go.mod": "module example.com/calc\n\ngo 1.22\n\nrequire example.com/dep v1.0.0\n\nignore ./internal\n"},
			reason: "go.mod: go.mod ignore directives changed"},
		{name: "a comment in go.mod", edit: map[string]string{
			"go.mod": "// Module calc adds.\nmodule example.com/calc\n\ngo 1.22\n\nrequire example.com/dep v1.0.0\n"}},
		{name: "a go.sum hash changed", edit: map[string]string{
			"go.sum": "example.com/dep v1.0.0 h1:ZZZZ=\nexample.com/dep v1.0.0/go.mod h1:BBBB=\n"},
			reason: "go.sum: go.sum hash changed for example.com/dep v1.0.0"},
		{name: "go.sum lines added", edit: map[string]string{
			"go.sum": "example.com/dep v1.0.0 h1:AAAA=\nexample.com/dep v1.0.0/go.mod h1:BBBB=\nexample.com/x v1.0.0/go.mod h1:CCCC=\n"}},
		{name: "a nested go.mod hides its folder from ./...", edit: map[string]string{"internal/util/go.mod": "module example.com/util\n"},
			reason: "internal/util/go.mod: a new go.mod"},
		{name: "a go.work added", edit: map[string]string{"go.work": "go 1.22\n\nuse .\nuse ./dep\n"},
			reason: "go.work: go.work changed"},
		{name: "vendored code changed", edit: map[string]string{"vendor/example.com/dep/dep.go": "package dep\n\nfunc Answer() int { return 41 }\n"},
			reason: "vendor/example.com/dep/dep.go: vendored dependency code"},
		{name: "vendor/modules.txt changed", edit: map[string]string{"vendor/modules.txt": "# example.com/dep v1.0.1\n## explicit\nexample.com/dep\n"},
			reason: "vendor/modules.txt: vendored dependency code or vendor/modules.txt"},
		{name: "a check through make in a Go module", check: "make test", edit: map[string]string{
			"boot.go": "package calc\n\nfunc init() {}\n"},
			reason: "boot.go: adds or changes init()"},
		{name: "go vet runs no test binary: init does not matter", check: "go vet ./...", edit: map[string]string{
			"boot.go": "package calc\n\nfunc init() {}\n"}},
		{name: "go vet still builds with go.mod", check: "go vet ./...", edit: map[string]string{
			"go.mod": "module example.com/calc\n\ngo 1.22\n\nrequire example.com/dep v1.0.0\n\nreplace example.com/dep => ../dep\n"},
			reason: "go.mod: go.mod replace"},
		{name: "a check that runs no go", check: "npm test", edit: map[string]string{
			"boot.go": "package calc\n\nfunc init() {}\n", "go.mod": "module example.com/other\n"}},
		{name: "go test behind env and sh -c", check: `env CGO_ENABLED=0 sh -c 'cd . && go test -count=1 ./...'`, edit: map[string]string{
			"boot.go": "package calc\n\nfunc init() {}\n"},
			reason: "boot.go: adds or changes init()"},
		{name: "an assembly file go builds with the C preprocessor (.sx)", edit: map[string]string{"bye_amd64.sx": "\t.section .init_array,\"aw\"\n"},
			reason: "bye_amd64.sx: a source go builds"},
		{name: "go test behind a program that runs the rest of the line", check: "xvfb-run -a go test ./...", edit: map[string]string{"boot.go": "package calc\n\nfunc init() {}\n"},
			reason: "boot.go: adds or changes init()"},
		{name: "go named only when the shell runs", check: "$(command -v go) test ./...", edit: map[string]string{"boot.go": "package calc\n\nfunc init() {}\n"},
			reason: "boot.go: adds or changes init()"},
		{name: "go through a variable", check: "GO=go; $GO test ./...", edit: map[string]string{"boot.go": "package calc\n\nfunc init() {}\n"},
			reason: "boot.go: adds or changes init()"},
		{name: "go run runs the tree's init code", check: "go run ./cmd/tool verify", edit: map[string]string{"boot.go": "package calc\n\nfunc init() {}\n"},
			reason: "boot.go: adds or changes init()"},
		{name: "a program go build made, then run", check: "go build -o /tmp/v ./cmd/tool && /tmp/v", edit: map[string]string{"boot.go": "package calc\n\nfunc init() {}\n"},
			reason: "boot.go: adds or changes init()"},
		{name: "go list runs no code of the tree", check: "go list ./... && go vet ./...", edit: map[string]string{"boot.go": "package calc\n\nfunc init() {}\n"}},
		{name: "a test file stays a test file", edit: map[string]string{
			"calc_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestSum(t *testing.T) {}\n"},
			reason: "calc_test.go: a test file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			check := c.check
			if check == "" {
				check = "go test ./..."
			}
			files := maps.Clone(base)
			maps.Copy(files, c.base)
			tr, dir := chTracker(t, check, files)
			chWrite(t, dir, c.edit)
			rep := chDiff(t, tr)
			switch {
			case c.reason == "" && rep.CheckModified:
				t.Errorf("check_modified (%s), want not", rep.CheckModifiedReason)
			case c.reason != "" && (!rep.CheckModified || !strings.Contains(rep.CheckModifiedReason, c.reason)):
				t.Errorf("check_modified %v reason %q, want a reason containing %q", rep.CheckModified, rep.CheckModifiedReason, c.reason)
			}
		})
	}
}

// TestRunnerShadowing: a module that "python -m pytest" or "python -m
// unittest" would import instead of the runner, a module of the standard
// library or a pytest plugin (python -m puts the current folder first on
// sys.path, pytest its test folders) changes the check in any folder that is
// not a package, not inside one; and an .npmrc changes an npm check
// (node-options can preload any script).
func TestRunnerShadowing(t *testing.T) {
	base := map[string]string{"calc.py": "def add(a, b):\n    return a - b\n", "pkg/__init__.py": "",
		"tests/test_calc.py": "from calc import add\n\ndef test_add():\n    assert add(1, 2) == 3\n"}
	cases := []struct {
		check, file string
		want        bool
	}{
		{"python3 -m pytest -q", "pytest.py", true},
		{"python3 -m pytest -q", "_pytest/__init__.py", true},
		{"python3 -m pytest -q", "pluggy.py", true},
		{"python3 -m pytest -q", "lib/pytest.py", true},  // lib/ is no package: pytest may put it on sys.path
		{"python3 -m pytest -q", "pkg/pytest.py", false}, // inside a package: pkg.pytest
		{"python3 -m pytest -q", "lib/argparse.py", true},
		{"python3 -m pytest -q", "pytest_speedups.py", true},
		{"python3 -m unittest discover", "unittest/__init__.py", true},
		{"python3 -m unittest discover", "sitecustomize.py", true},
		{"make test", "pytest.py", false},
		{"npm test", ".npmrc", true}, // node-options=--require ./x.js runs code in npm test
	}
	for _, c := range cases {
		t.Run(c.check+" "+c.file, func(t *testing.T) {
			tr, dir := chTracker(t, c.check, base)
			chWrite(t, dir, map[string]string{c.file: "import sys\nprint('1 passed in 0.01s')\nsys.exit(0)\n"})
			if rep := chDiff(t, tr); rep.CheckModified != c.want {
				t.Errorf("check_modified = %v (%s), want %v", rep.CheckModified, rep.CheckModifiedReason, c.want)
			}
		})
	}
}

// TestJudgeCommandFilesAreTheCheck: the script --judge-cmd runs is the
// check's own file: rewriting it forges the judge's opinion.
func TestJudgeCommandFilesAreTheCheck(t *testing.T) {
	dir := t.TempDir()
	chWrite(t, dir, map[string]string{"judge.sh": "grep -q fixed notes.txt\n", "notes.txt": "todo\n"})
	tr := workspace.New(dir, workspace.Options{Check: "go test ./...", JudgeCmd: "sh ./judge.sh", TempDir: t.TempDir()})
	t.Cleanup(func() { tr.Close() })
	if err := tr.Baseline(t.Context()); err != nil {
		t.Fatal(err)
	}
	chWrite(t, dir, map[string]string{"judge.sh": "exit 0\n"})
	if rep := chDiff(t, tr); !rep.CheckModified || !strings.Contains(rep.CheckModifiedReason, "judge.sh: the check's own file") {
		t.Errorf("check_modified %v (%s), want the judge's script", rep.CheckModified, rep.CheckModifiedReason)
	}
}
