package grounding

import (
	"slices"
	"testing"
)

// emptyTree is a tree that holds nothing besides the change classified.
type emptyTree struct{}

func (emptyTree) Has(string) bool                { return false }
func (emptyTree) Children(string) []string       { return nil }
func (emptyTree) GoDecls(string) map[string]bool { return map[string]bool{} }

// TestClassify: each risk rule on its own, and how a check's runners turn
// a risky change into a change to the check.
func TestClassify(t *testing.T) {
	text := func(p, old, new string) Change {
		return Change{Path: p, Old: []byte(old), New: []byte(new), OldOK: true, NewOK: true}
	}
	cases := []struct {
		name      string
		check     string   // the check command
		tree      []string // the baseline's files
		change    Change
		risky     []string
		checkFile bool
		reason    string
	}{
		{name: "an ordinary source file", check: "go test ./...", tree: []string{"go.mod", "calc.go"},
			change: text("calc.go", "package calc\n", "package calc\n\nfunc Sum(a, b int) int { return a + b }\n")},
		{name: "a workflow", change: text(".github/workflows/ci.yml", "on: push\n", "on: pull_request\n"),
			risky: []string{RiskWorkflow}},
		{name: "a composite action", change: Change{Path: ".github/actions/setup/action.yml", Added: true, OldOK: true, NewOK: true},
			risky: []string{RiskWorkflow}},
		{name: "code owners", change: text(".github/CODEOWNERS", "* @a\n", "* @b\n"), risky: []string{RiskOwners}},
		{name: "code owners elsewhere are a file like any other", change: text("src/CODEOWNERS", "a\n", "b\n")},
		{name: "git's ignore rules", change: text(".gitignore", "", "*.go\n"), risky: []string{RiskGit}},
		{name: "a file in a .git folder", change: text("sub/.git/hooks/pre-commit", "", "#!/bin/sh\n"), risky: []string{RiskGit}},
		{name: "a symlink with an absolute target", change: Change{Path: "passwd", Added: true, Symlink: true, Target: "/etc/passwd"},
			risky: []string{RiskLinkAbs}},
		{name: "a symlink climbing out", change: Change{Path: "a/up", Added: true, Symlink: true, Target: "../../secret"},
			risky: []string{RiskLinkOut}},
		{name: "a symlink inside the tree", change: Change{Path: "a/link", Added: true, Symlink: true, Target: "../b.txt"}},
		{name: "a new hard link", change: Change{Path: "hard", Added: true, HardLink: true}, risky: []string{RiskHardlink}},
		{name: "a FIFO", change: Change{Path: "fifo", Added: true, Special: true}, risky: []string{RiskSpecial}},
		{name: "goalrun's own file replaced", change: Change{Path: "out.json", Added: true, ReplacesOwnFile: true, OldOK: true, NewOK: true},
			risky: []string{RiskOwnFile}},
		{name: "goalrun's own file removed", change: Change{Path: "out.json", Removed: true, ReplacesOwnFile: true, OldOK: true, NewOK: true}},
		{name: "agent configuration", change: text("CLAUDE.md", "a\n", "b\n"), risky: []string{RiskAgent}},
		{name: "a build script", change: text("Makefile", "a:\n", "b:\n"), risky: []string{RiskBuild}},
		{name: "the Makefile of a make check", check: "make test", tree: []string{"Makefile"},
			change: text("Makefile", "test:\n\tfalse\n", "test:\n\ttrue\n"),
			risky:  []string{RiskCheck, RiskBuild}, checkFile: true, reason: RiskCheck},
		{name: "the check's script", check: "sh ./check.sh", tree: []string{"check.sh"},
			change: text("check.sh", "exit 1\n", "exit 0\n"),
			risky:  []string{RiskCheck}, checkFile: true, reason: RiskCheck},
		{name: "a test file", change: text("calc_test.go", "package calc\n", "package calc\n\n// x\n"),
			risky: []string{RiskTest}, checkFile: true, reason: RiskTest},
		{name: "package.json scripts", change: text("package.json", `{"scripts":{"test":"jest"}}`, `{"scripts":{"test":"true"}}`),
			risky: []string{RiskScripts}},
		{name: "package.json scripts of an npm check", check: "npm test", tree: []string{"package.json"},
			change: text("package.json", `{"scripts":{"test":"jest"}}`, `{"scripts":{"test":"true"}}`),
			risky:  []string{RiskScripts, RiskCheck}, checkFile: true, reason: RiskCheck},
		{name: "package.json dependencies", change: text("package.json", `{"dependencies":{}}`, `{"dependencies":{"a":"1"}}`)},
		{name: "pytest's configuration", change: text("pyproject.toml", "[tool.pytest.ini_options]\naddopts = \"-q\"\n", "[tool.pytest.ini_options]\naddopts = \"-k nothing\"\n"),
			risky: []string{RiskPytestCfg}},
		{name: "pytest's configuration of a pytest check", check: "pytest", tree: []string{"pyproject.toml"},
			change: text("pyproject.toml", "[tool.pytest.ini_options]\naddopts = \"-q\"\n", "[tool.pytest.ini_options]\naddopts = \"-k nothing\"\n"),
			risky:  []string{RiskCheck, RiskPytestCfg}, checkFile: true, reason: "pytest's configuration changed (pyproject.toml, tool.pytest)"},
		{name: "a go:generate directive", change: text("gen.go", "package gen\n", "package gen\n\n//go:generate sh -c 'curl x | sh'\n"),
			risky: []string{RiskGenerate}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			chk := NewCheck(c.check, "", c.tree, func(p string) bool { return slices.Contains(c.tree, p) })
			got := chk.Classify(c.change, emptyTree{})
			if !slices.Equal(got.Risky, c.risky) || got.CheckFile != c.checkFile || got.CheckReason != c.reason {
				t.Errorf("Classify = %+v, want risky %q, check file %v (%q)", got, c.risky, c.checkFile, c.reason)
			}
		})
	}
}

// TestRiskRank: the reasons from the most serious (the check's own files)
// to the least (build scripts); an unknown reason ranks first.
func TestRiskRank(t *testing.T) {
	for i := 1; i < len(riskOrder); i++ {
		if RiskRank(riskOrder[i-1]) >= RiskRank(riskOrder[i]) {
			t.Errorf("%q ranks %d, not before %q (%d)", riskOrder[i-1], RiskRank(riskOrder[i-1]), riskOrder[i], RiskRank(riskOrder[i]))
		}
	}
	cases := []struct {
		name   string
		reason string
		want   int
	}{
		{"the check's own file", RiskCheck, 0},
		{"a test file", RiskTest, 1},
		{"a build script", RiskBuild, len(riskOrder) - 1},
		{"unknown", "something else", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := RiskRank(c.reason); got != c.want {
				t.Errorf("RiskRank(%q) = %d, want %d", c.reason, got, c.want)
			}
		})
	}
}
