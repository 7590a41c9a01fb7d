package grounding

import (
	"bytes"
	"encoding/json"
	"path"
	"sort"
	"strings"
)

// Risk reasons: why a changed path is risky (FileChange.Risky in
// goal/workspace, changes.risky_paths in the document), ranked by
// RiskRank.
const (
	RiskCheck     = "the check's own file"
	RiskTest      = "a test file"
	RiskOwnFile   = "replaced goalrun's own --output or --events file"
	RiskLinkOut   = "symlink pointing outside the workspace"
	RiskLinkAbs   = "symlink with an absolute target"
	RiskHardlink  = "hard link (never read)"
	RiskSpecial   = "special file (FIFO, socket or device; never read)"
	RiskWorkflow  = "GitHub Actions workflow or action"
	RiskOwners    = "code owners (who must review)"
	RiskGit       = "git configuration or hooks"
	RiskGitDB     = "git history, refs or index (a commit, a moved branch)"
	RiskAgent     = "agent or goalrun configuration"
	RiskBuild     = "build script"
	RiskScripts   = "package.json scripts changed"
	RiskGenerate  = "go:generate directive added or changed"
	RiskPytestCfg = "test runner configuration changed"
)

// riskOrder ranks reasons, most serious first.
var riskOrder = []string{RiskCheck, RiskTest, RiskOwnFile, RiskLinkOut, RiskLinkAbs, RiskHardlink, RiskSpecial, RiskWorkflow,
	RiskOwners, RiskGit, RiskGitDB, RiskAgent, RiskPytestCfg, RiskScripts, RiskGenerate, RiskBuild}

// Change is one changed path as the check-file and risk rules see it.
type Change struct {
	// Path is the slash path in the scanned folder.
	Path string
	// Added: the path did not exist at the baseline; Removed: it no longer
	// exists (the fields below then describe nothing).
	Added, Removed bool
	// Symlink: the path is now a symbolic link, to Target.
	Symlink bool
	Target  string
	// HardLink: the path is now a hard link the tracker never read (it did
	// not exist at the baseline).
	HardLink bool
	// Special: the path is now a FIFO, socket or device.
	Special bool
	// ReplacesOwnFile: the path is one of goalrun's own files (--output,
	// --events) and something else is there now.
	ReplacesOwnFile bool
	// Old and New are the texts before and after; OldOK and NewOK say
	// whether each side was read (an absent side is read and empty). A side
	// that was not read counts as changed wherever a rule compares them.
	Old, New     []byte
	OldOK, NewOK bool
}

// Tree is what the rules know of the current tree around a change.
type Tree interface {
	// Has reports whether the tree holds the slash path p (not a folder).
	Has(p string) bool
	// Children lists the paths directly in the folder dir ("." the top).
	Children(dir string) []string
	// GoDecls returns the names the Go files of the folder dir declare at
	// package level (test files and build-constrained ones included).
	GoDecls(dir string) map[string]bool
}

// Class is what the rules say of a change.
type Class struct {
	// Risky lists why the change is risky (Risk*; empty when it is not).
	Risky []string
	// CheckFile is true when the path is one of the check's files or a
	// test file; CheckReason says which rule made it one.
	CheckFile   bool
	CheckReason string
}

// RiskRank is the rank of a risk reason, 0 the most serious; a reason
// that is not one of the Risk* constants ranks 0 (the zero value).
func RiskRank(reason string) int { return riskRank[reason] }

var riskRank = func() map[string]int {
	m := make(map[string]int, len(riskOrder))
	for i, r := range riskOrder {
		m[r] = i
	}
	return m
}()

// Classify says why the change ch is risky and whether it is one of the
// check's files (or a test file): changing it makes a pass suspect. tree
// is the current tree around it.
func (c *Check) Classify(ch Change, tree Tree) Class {
	var fc Class
	p := ch.Path
	oldText, newText, oldOK, newOK := ch.Old, ch.New, ch.OldOK, ch.NewOK
	add := func(r string) { fc.Risky = append(fc.Risky, r) }
	if c.files[p] || runnerConfig(p, c.sub, c.runs) {
		fc.CheckFile, fc.CheckReason = true, RiskCheck
		add(RiskCheck)
	} else if isTestFile(p) {
		fc.CheckFile, fc.CheckReason = true, RiskTest
		add(RiskTest)
	} else if r := goCheckReason(p, c.runs, ch.Added, oldText, newText, oldOK, newOK, tree.GoDecls); r != "" {
		fc.CheckFile, fc.CheckReason = true, r
		add(RiskCheck)
	} else if r := pythonCheckReason(p, c.runs, ch.Removed, tree.Has, tree.Children, oldText, newText, oldOK, newOK); r != "" {
		fc.CheckFile, fc.CheckReason = true, r
		add(RiskCheck)
	}
	if ch.ReplacesOwnFile && !ch.Removed {
		// Never goalrun's file here: the tracker leaves that one out.
		add(RiskOwnFile)
	}
	if !ch.Removed {
		switch {
		case ch.Symlink:
			if path.IsAbs(ch.Target) {
				add(RiskLinkAbs)
			} else if cleanRel(path.Join(path.Dir(p), ch.Target)) == "" {
				add(RiskLinkOut)
			}
		case ch.HardLink:
			add(RiskHardlink)
		case ch.Special:
			add(RiskSpecial)
		}
	}
	base := path.Base(p)
	lower := strings.ToLower(p)
	switch {
	case strings.HasPrefix(p, ".github/workflows/"), strings.HasPrefix(p, ".github/actions/"):
		add(RiskWorkflow)
	case base == "CODEOWNERS" && (p == base || p == ".github/"+base || p == "docs/"+base || p == ".gitlab/"+base):
		add(RiskOwners)
	case strings.HasPrefix(base, ".git") || strings.Contains("/"+p, "/.git/"):
		add(RiskGit)
	}
	if isAgentConfig(p) {
		add(RiskAgent)
	}
	if isBuildScript(p) {
		add(RiskBuild)
	}
	switch {
	case base == "package.json":
		if !oldOK || !newOK || jsonKeyChanged(oldText, newText, "scripts") {
			add(RiskScripts)
			if c.runs["npm"] {
				fc.CheckFile = true
			}
		}
		if c.runs["npm"] && (!oldOK || !newOK || jsonKeyChanged(oldText, newText, "jest")) {
			fc.CheckFile = true
		}
	case base == "pyproject.toml" || base == "setup.cfg" || base == "tox.ini" || base == ".pytest.ini" || base == "pytest.ini":
		py, tox := testRunnerConfigChanged(base, oldText, newText, oldOK, newOK)
		if py || tox {
			add(RiskPytestCfg)
		}
		if py && (c.runs["pytest"] || c.runs["tox"]) || tox && c.runs["tox"] {
			fc.CheckFile = true
		}
	case strings.HasSuffix(lower, ".go"):
		if newOK && goGenerateChanged(oldText, newText) {
			add(RiskGenerate)
		}
	}
	if fc.CheckFile && !contains(fc.Risky, RiskCheck) && !contains(fc.Risky, RiskTest) {
		add(RiskCheck)
	}
	if fc.CheckFile && fc.CheckReason == "" {
		fc.CheckReason = RiskCheck
	}
	return fc
}

// CheckReasonRank orders the reasons a file is the check's: its own files
// first, then the Go rules, then test files.
func CheckReasonRank(r string) int {
	switch r {
	case RiskCheck:
		return 0
	case RiskTest:
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
