package grounding

import (
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/goalrun/goalrun/internal/lazyre"
	"github.com/goalrun/goalrun/internal/redact"
	"github.com/goalrun/goalrun/internal/textcap"
)

// Claim kinds ("ungrounded_claims[].kind"; docs/grounding.md).
const (
	ClaimRanTests    = "ran_tests"    // "I ran the tests"
	ClaimTestsPass   = "tests_pass"   // "all tests pass"
	ClaimCommitted   = "committed"    // "I committed the fix"
	ClaimPushed      = "pushed"       // "pushed to origin"
	ClaimOpenedPR    = "opened_pr"    // "opened a pull request"
	ClaimEditedFile  = "edited_file"  // "I edited calc.go", "fixed the bug"
	ClaimCreatedFile = "created_file" // "created docs/ARCH.md"
	ClaimDeletedFile = "deleted_file" // "deleted old.go"
	ClaimInstalled   = "installed"    // "installed requests"
	ClaimDeployed    = "deployed"     // "deployed to staging"
)

// Workspace change kinds for Evidence.SetChanged.
const (
	ChangeAdded    = "added"
	ChangeModified = "modified"
	ChangeDeleted  = "deleted"
)

// Caps of what Claims returns. They equal the goalrun/1 document's caps on
// "ungrounded_claims" (report.BriefCap, report.ClaimsMax; README.md,
// "Limits"), so a claim goes into the document uncut; package goal, which
// puts claims into the document, tests that they stay equal.
const (
	// ClaimTextCap bounds a Claim's Claim and Reason, and the commands a
	// reason quotes: 160 bytes of UTF-8 (plus the truncation marker of
	// internal/textcap when an excerpt is cut).
	ClaimTextCap = 160
	// ClaimsMax bounds the claims Claims returns: 8.
	ClaimsMax = 8
)

// Receipt is one finished tool call of the agent, as Evidence reads it.
type Receipt struct {
	// Tool is the tool's name as the agent CLI gives it ("Bash",
	// "run_shell_command", "Edit", …); case does not matter.
	Tool string
	// OK is true when the call succeeded.
	OK bool
	// Unknown is true (with OK false) when the call finished but the
	// agent's output cannot show whether it succeeded: such a receipt
	// backs no claim.
	Unknown bool
	// Brief is the call's one-line summary, uncapped: a shell tool's
	// command line, a file tool's file path.
	Brief string
	// Paths are the workspace paths the call wrote when the agent CLI says
	// so (absolute or relative); nil when it does not.
	Paths []string
}

// Claim is an operational claim in the agent's final message that nothing
// backs.
type Claim struct {
	// Claim is the claim's sentence: redacted, folded onto one line and
	// capped at ClaimTextCap.
	Claim string
	// Kind is one of the Claim* kinds.
	Kind string
	// Reason says why nothing backs it (redacted, at most ClaimTextCap).
	Reason string
}

// EvidencePathsMax bounds each path set an Evidence keeps (paths written by
// tool calls, paths a successful shell command wrote or removed, paths the
// workspace diff reports): 4096 paths. Beyond it the set is marked
// overflowed and a claim about a file that is not in it counts as backed
// (goalrun cannot prove it ungrounded), so a huge run never costs unbounded
// memory and never produces a false accusation.
const EvidencePathsMax = 4096

// Evidence collects, in memory that does not grow with the number of tool
// calls, what a run did that can back the claims in the agent's final
// prose: whether a test command ran (and whether the last one succeeded),
// whether a commit, push, pull request, install or deploy succeeded, which
// paths successful tool calls wrote or removed (bounded by
// EvidencePathsMax), the latest check run and the workspace changes.
//
// The loop feeds it every finished tool call (AddReceipt), every check
// (SetCheck) and the workspace diff (SetChanged); Claims then finds the
// ungrounded claims in the final message. It is deterministic and makes no
// model call: every claim it lists says why no receipt backs it.
//
// An Evidence is safe for concurrent use. The zero value is not ready; use
// NewEvidence.
type Evidence struct {
	mu  sync.Mutex
	red *redact.Redactor

	testRuns     int    // receipts whose command runs tests, any outcome
	lastTestOK   bool   // the last such receipt succeeded
	lastTestUnk  bool   // the last such receipt's outcome is unknown
	lastTestCmd  string // its brief (capped)
	failedOps    map[string]bool
	unknownOps   map[string]bool // operations only receipts of unknown outcome did
	succeededOps map[string]bool // committed, pushed, opened_pr, installed, deployed
	anyWrite     bool            // a successful call that writes files
	unknownWrite bool            // a call of unknown outcome that writes files

	written pathSet // paths successful calls wrote (tool paths, shell write targets)
	removed pathSet // paths successful shell commands removed
	// unknownPaths are paths calls of unknown outcome wrote or removed:
	// they back no claim, but a claim about one of them gets a reason
	// saying the outcome could not be checked.
	unknownPaths pathSet

	checkCmd    string
	checkRan    bool
	checkPassed bool
	checkExit   int
	checkEmpty  bool // the latest check passed but ran no test

	changed         map[string]string // workspace path → ChangeAdded/Modified/Deleted
	changedOverflow bool
}

// NewEvidence returns an empty Evidence that does not redact; see
// SetRedactor.
func NewEvidence() *Evidence {
	return &Evidence{
		failedOps:    map[string]bool{},
		unknownOps:   map[string]bool{},
		succeededOps: map[string]bool{},
		changed:      map[string]string{},
	}
}

// SetRedactor makes Claims redact its excerpts and reasons with r before
// capping them. It returns e for chaining.
func (e *Evidence) SetRedactor(r *redact.Redactor) *Evidence {
	e.mu.Lock()
	e.red = r
	e.mu.Unlock()
	return e
}

// AddReceipt records one finished tool call r. A shell tool's brief is read as its command line: test runners, git
// commit/push, pull-request creation, package installs, deploys, and the
// files it writes or removes are recognised from it.
func (e *Evidence) AddReceipt(r Receipt) {
	e.mu.Lock()
	defer e.mu.Unlock()
	tool := strings.ToLower(r.Tool)
	ops := toolOps(tool)
	shell := isShellTool(tool)
	var cmd string
	if shell {
		cmd = r.Brief
		for op := range commandOps(cmd) {
			ops[op] = true
		}
	}
	ok := r.OK && !r.Unknown
	paths := r.Paths
	if ops[opTest] {
		e.testRuns++
		e.lastTestOK, e.lastTestUnk = ok, r.Unknown
		e.lastTestCmd = clip(textcap.Fold(r.Brief), ClaimTextCap)
	}
	for op := range ops {
		if op == opTest || op == opWrite {
			continue
		}
		switch {
		case ok:
			e.succeededOps[op] = true
		case r.Unknown:
			e.unknownOps[op] = true
		default:
			e.failedOps[op] = true
		}
	}
	if r.Unknown {
		// Nothing shows the call succeeded: it backs no claim, but what it
		// meant to do is remembered for the reason.
		if ops[opWrite] || len(paths) > 0 {
			e.unknownWrite = true
		}
		for _, p := range paths {
			e.unknownPaths.add(p)
		}
		if shell {
			w, rm := shellTargets(cmd)
			if len(w) > 0 || len(rm) > 0 {
				e.unknownWrite = true
			}
			for _, p := range append(w, rm...) {
				e.unknownPaths.add(p)
			}
		}
		return
	}
	if !ok {
		return
	}
	if ops[opWrite] || len(paths) > 0 {
		e.anyWrite = true
	}
	for _, p := range paths {
		e.written.add(p)
	}
	if ops[opWrite] && len(paths) == 0 && looksLikePath(r.Brief) {
		e.written.add(r.Brief) // an Edit/Write tool whose brief is its file_path
	}
	if shell {
		w, rm := shellTargets(cmd)
		if len(w) > 0 || len(rm) > 0 {
			e.anyWrite = true
		}
		for _, p := range w {
			e.written.add(p)
		}
		for _, p := range rm {
			e.removed.add(p)
		}
	}
}

// SetCheck records the latest run of the deterministic check: its command,
// whether it ran at all (false in judge-only mode), whether it passed and
// its exit code. Only the latest call counts: a claim that tests pass is
// judged against the check that ran after the agent's last turn.
func (e *Evidence) SetCheck(cmd string, ran, passed bool, exitCode int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.checkCmd = clip(textcap.Fold(cmd), ClaimTextCap)
	e.checkRan, e.checkPassed, e.checkExit, e.checkEmpty = ran, passed, exitCode, false
}

// SetTestedNothing records that the latest check (SetCheck) passed without
// running a test (goal.tested_nothing): a claim that tests pass is then
// not backed by it. Call it after SetCheck.
func (e *Evidence) SetTestedNothing() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.checkEmpty = true
}

// SetChanged replaces the workspace changes the claims are judged against:
// changed maps a workspace-relative path to ChangeAdded, ChangeModified or
// ChangeDeleted (the whole run's diff against the snapshot taken before the
// first turn). More than EvidencePathsMax paths mark the set overflowed.
func (e *Evidence) SetChanged(changed map[string]string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.changed = make(map[string]string, min(len(changed), EvidencePathsMax))
	e.changedOverflow = false
	keys := make([]string, 0, len(changed))
	for k := range changed {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if len(e.changed) == EvidencePathsMax {
			e.changedOverflow = true
			break
		}
		e.changed[normPath(k)] = changed[k]
	}
}

// Claims returns the ungrounded claims in finalText, the agent's final
// message: each operational claim (see the Claim* kinds) that the
// receipts, the check and the workspace changes recorded so far do not
// back, with an excerpt of the sentence (redacted, folded, capped at
// ClaimTextCap) and the reason. A claim that tests pass while the last
// check failed is always listed and comes first; the rest follow in the
// order of the text, one per kind and file, at most ClaimsMax in
// all. An empty result means nothing was detected, not that the prose is
// verified.
func (e *Evidence) Claims(finalText string) []Claim {
	found := e.findings(finalText)
	out := make([]Claim, 0, min(len(found), ClaimsMax))
	for _, f := range found {
		if len(out) == ClaimsMax {
			break
		}
		out = append(out, Claim{
			Claim:  textcap.Cap(textcap.Fold(e.red.Redact(f.excerpt)), ClaimTextCap),
			Kind:   f.kind,
			Reason: textcap.Cap(textcap.Fold(e.red.Redact(f.reason)), ClaimTextCap),
		})
	}
	return out
}

// finding is one ungrounded claim before capping; file is the named file
// ("" when the claim names none).
type finding struct {
	kind, file, excerpt, reason string
	contradiction               bool
	pos                         int
}

// findings extracts the claims of text and keeps the unbacked ones, ordered
// contradictions first, then by position, unique per (kind, file).
func (e *Evidence) findings(text string) []finding {
	claims := extractClaims(text)
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []finding
	seen := map[string]bool{}
	for _, c := range claims {
		key := c.kind + "\x00" + strings.ToLower(c.file)
		if seen[key] {
			continue
		}
		reason, contradiction, backed := e.judge(c)
		if backed {
			continue
		}
		seen[key] = true
		out = append(out, finding{kind: c.kind, file: c.file, excerpt: c.excerpt, reason: reason, contradiction: contradiction, pos: c.pos})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].contradiction != out[j].contradiction {
			return out[i].contradiction
		}
		return out[i].pos < out[j].pos
	})
	return out
}

// judge decides whether c is backed; when it is not, it says why and
// whether the claim contradicts the check.
func (e *Evidence) judge(c rawClaim) (reason string, contradiction, backed bool) {
	switch c.kind {
	case ClaimRanTests:
		if e.testRuns > 0 {
			return "", false, true
		}
		return "no receipt shows a test command (go test, pytest, npm test, cargo test, …)", false, false
	case ClaimTestsPass:
		if e.checkRan {
			if e.checkPassed && e.checkEmpty {
				return fitReason("the check \"%s\" exited 0 but ran no test", e.checkCmd, keepStart), false, false
			}
			if e.checkPassed {
				return "", false, true
			}
			return fitReason("the check \"%s\" failed after the last turn (exit "+strconv.Itoa(e.checkExit)+")", e.checkCmd, keepStart), true, false
		}
		switch {
		case e.testRuns == 0:
			return "no check ran and no receipt shows a test command", false, false
		case e.lastTestUnk:
			return fitReason("no check ran and the outcome of the last test command could not be checked from the agent's output: %s", e.lastTestCmd, keepStart), false, false
		case !e.lastTestOK:
			return fitReason("no check ran and the last test command failed: %s", e.lastTestCmd, keepStart), false, false
		}
		return "", false, true
	case ClaimCommitted:
		return e.op(opCommit, "git commit (or a commit tool)")
	case ClaimPushed:
		return e.op(opPush, "git push (or a push tool)")
	case ClaimOpenedPR:
		return e.op(opPR, "gh pr create (or a create-pull-request tool)")
	case ClaimInstalled:
		return e.op(opInstall, "package install (npm install, pip install, go get, apt-get install, …)")
	case ClaimDeployed:
		return e.op(opDeploy, "deploy command (kubectl apply, helm upgrade, terraform apply, … deploy)")
	case ClaimEditedFile, ClaimCreatedFile, ClaimDeletedFile:
		return e.file(c)
	}
	return "", false, true
}

func (e *Evidence) op(op, what string) (string, bool, bool) {
	if e.succeededOps[op] {
		return "", false, true
	}
	if e.unknownOps[op] {
		return "no " + what + " receipt is known to have succeeded (its outcome could not be checked)", false, false
	}
	if e.failedOps[op] {
		return "the " + what + " receipt failed and none succeeded", false, false
	}
	return "no successful " + what + " receipt", false, false
}

func (e *Evidence) file(c rawClaim) (string, bool, bool) {
	if c.file == "" {
		if e.anyWrite || len(e.changed) > 0 || e.changedOverflow {
			return "", false, true
		}
		if e.unknownWrite {
			return "no tool call is known to have written a file (their outcomes could not be checked from the agent's output) and the workspace diff shows no change", false, false
		}
		return "no successful tool call wrote a file and the workspace diff shows no change", false, false
	}
	if e.changedOverflow || e.written.overflow || e.removed.overflow {
		return "", false, true
	}
	unchecked := ""
	if e.unknownPaths.has(c.file) {
		unchecked = "; the call that wrote it has an outcome that could not be checked"
	}
	switch c.kind {
	case ClaimDeletedFile:
		if e.removed.has(c.file) || e.written.has(c.file) || changedAs(e.changed, c.file, ChangeDeleted) {
			return "", false, true
		}
		return fitReason("no successful receipt removed %s and the workspace diff does not show it deleted"+unchecked, c.file, keepEnd), false, false
	case ClaimCreatedFile:
		if e.written.has(c.file) || changedAs(e.changed, c.file, ChangeAdded, ChangeModified) {
			return "", false, true
		}
		return fitReason("no successful receipt wrote %s and the workspace diff does not show it"+unchecked, c.file, keepEnd), false, false
	default:
		if e.written.has(c.file) || e.removed.has(c.file) || changedAs(e.changed, c.file, ChangeAdded, ChangeModified, ChangeDeleted) {
			return "", false, true
		}
		return fitReason("no successful receipt wrote %s and the workspace diff shows no change to it"+unchecked, c.file, keepEnd), false, false
	}
}

// Which end of a quoted text fitReason keeps.
const (
	keepStart = false // a command: its program and first arguments
	keepEnd   = true  // a path: its file name
)

// fitReason fills the one %s of format with arg, shortened with "…" (its
// start or its end kept, as keep says) when the sentence would not fit
// ClaimTextCap, the cap on a claim's reason: the sentence's own words are
// never cut. format's fixed text must fit ClaimTextCap
// (TestClaimReasonsFit).
func fitReason(format, arg string, keep bool) string {
	arg = textcap.Fold(arg)
	const ell = "…"
	if room := ClaimTextCap - (len(format) - len("%s")); len(arg) > room {
		n := max(room-len(ell), 0)
		if keep == keepEnd {
			cut := len(arg) - n
			for cut < len(arg) && !utf8.RuneStart(arg[cut]) {
				cut++
			}
			arg = ell + arg[cut:]
		} else {
			arg = clip(arg, n) + ell
		}
	}
	return strings.Replace(format, "%s", arg, 1)
}

// clip returns the first n bytes of s at most, cut at a rune boundary, with
// no marker.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// changedAs reports whether a changed path matches name with one of kinds.
func changedAs(changed map[string]string, name string, kinds ...string) bool {
	for p, k := range changed {
		if !pathMatches(p, name) {
			continue
		}
		for _, want := range kinds {
			if k == want {
				return true
			}
		}
	}
	return false
}

// pathSet is a bounded set of normalized paths.
type pathSet struct {
	m        map[string]bool
	overflow bool
}

func (s *pathSet) add(p string) {
	p = normPath(p)
	if p == "" || p == "." {
		return
	}
	if s.m == nil {
		s.m = map[string]bool{}
	}
	if s.m[p] {
		return
	}
	if len(s.m) >= EvidencePathsMax {
		s.overflow = true
		return
	}
	s.m[strings.Clone(p)] = true
}

func (s *pathSet) has(name string) bool {
	for p := range s.m {
		if pathMatches(p, name) {
			return true
		}
	}
	return false
}

// normPath cleans p, lower-cases nothing, and drops a leading "./".
func normPath(p string) string {
	p = strings.Trim(strings.TrimSpace(p), "\"'`")
	if p == "" {
		return ""
	}
	return path.Clean(p)
}

// pathMatches reports whether the recorded path p and the claimed name n
// denote the same file: equal, or one ends with "/" + the other (a claim of
// "calc.go" matches "/workspace/calc.go"; "pkg/api/h.go" matches
// "/workspace/pkg/api/h.go"). The comparison ignores case, so a claim never
// counts as ungrounded because of it.
func pathMatches(p, n string) bool {
	p, n = strings.ToLower(normPath(p)), strings.ToLower(normPath(n))
	if p == "" || n == "" {
		return false
	}
	return p == n || strings.HasSuffix(p, "/"+n) || strings.HasSuffix(n, "/"+p)
}

// Operations a receipt can back.
const (
	opTest    = "test"
	opWrite   = "write"
	opCommit  = "commit"
	opPush    = "push"
	opPR      = "pr"
	opInstall = "install"
	opDeploy  = "deploy"
)

// isShellTool reports whether a (lower-cased) tool name runs a command line
// given as its brief: Claude Code's Bash, Codex's command_execution /
// exec_command / local_shell, Gemini's run_shell_command, and similar.
func isShellTool(tool string) bool {
	for _, s := range []string{"bash", "shell", "command", "exec", "terminal", "run_cmd", "cmd"} {
		if strings.Contains(tool, s) {
			return true
		}
	}
	return false
}

// toolOps returns what a (lower-cased) tool name does by itself: file
// writing tools (Edit, Write, MultiEdit, NotebookEdit, apply_patch,
// file_change, write_file, str_replace…), and MCP tools for git hosting
// (create_pull_request, push_files, create_commit…).
func toolOps(tool string) map[string]bool {
	ops := map[string]bool{}
	base := tool
	if i := strings.LastIndex(tool, "__"); i >= 0 { // mcp__server__name
		base = tool[i+2:]
	}
	switch {
	case strings.Contains(base, "pull_request") && (strings.Contains(base, "create") || strings.Contains(base, "open")),
		base == "create_pr", base == "open_pr":
		ops[opPR] = true
	case strings.Contains(base, "push"):
		ops[opPush] = true
	case strings.Contains(base, "commit") && !strings.HasPrefix(base, "get") && !strings.HasPrefix(base, "list"):
		ops[opCommit] = true
	}
	for _, w := range []string{"edit", "write", "patch", "file_change", "str_replace", "create_file", "replace", "insert", "delete_file", "move_file"} {
		if strings.Contains(base, w) && !strings.Contains(base, "todo") {
			ops[opWrite] = true
		}
	}
	return ops
}

var (
	reTestCmd = lazyre.New(`(?i)(^|[\s;&|('"` + "`" + `])(go\s+test|gotestsum|py\.?test|python\d?(\.\d+)?\s+-m\s+(pytest|unittest)|tox|nox|(npm|yarn|pnpm|bun)\s+(run\s+)?test[\w:.-]*|npm\s+t|npx\s+(jest|vitest|mocha|playwright\s+test)|jest|vitest|mocha|cargo\s+(test|nextest)|make\s+(\S+\s+)*(test|tests|check|unittest|test-\S+)|ctest|mvn\s+(\S+\s+)*(test|verify)|(\./)?gradlew?\s+(\S+\s+)*test|dotnet\s+test|rspec|rake\s+test|phpunit|mix\s+test|deno\s+test|swift\s+test|zig\s+build\s+test|bazel\s+test|meson\s+test|stack\s+test|cabal\s+test|dune\s+test|\S*run[_-]tests?(\.\w+)?|\S*/test\.sh)($|[\s;&|)'"` + "`" + `])`)
	reCommit  = lazyre.New(`(?i)\bgit\b[^;&|]*\bcommit\b`)
	rePush    = lazyre.New(`(?i)\bgit\b[^;&|]*\bpush\b`)
	rePR      = lazyre.New(`(?i)\bgh\s+pr\s+create\b|\bhub\s+pull-request\b|\bglab\s+mr\s+create\b`)
	reInstall = lazyre.New(`(?i)\b((npm|pnpm)\s+(i|install|add|ci)\b|yarn(\s+(add|install)\b|\s*($|[;&|]))|pip\d?(\.\d+)?\s+install\b|python\d?(\.\d+)?\s+-m\s+pip\s+install\b|uv\s+(pip\s+install|add|sync)\b|poetry\s+(add|install)\b|pipenv\s+install\b|conda\s+install\b|go\s+(get|install)\b|cargo\s+(add|install)\b|gem\s+install\b|bundle(\s+(install|add))?\s*($|[;&|])|apt(-get)?\s+(-\S+\s+)*install\b|apk\s+add\b|brew\s+install\b|(dnf|yum)\s+install\b|composer\s+(require|install)\b|dotnet\s+add\s+package\b|mix\s+deps\.get\b)`)
	reDeploy  = lazyre.New(`(?i)\b(kubectl\s+(apply|rollout|set\s+image|create)\b|helm\s+(install|upgrade)\b|terraform\s+apply\b|pulumi\s+up\b|(fly|flyctl)\s+deploy\b|vercel\b.*--prod|vercel\s+deploy\b|netlify\s+deploy\b|firebase\s+deploy\b|gcloud\b.*\bdeploy\b|aws\b.*\bdeploy\b|(serverless|sls)\s+deploy\b|(npm|yarn|pnpm)\s+run\s+deploy\b|make\s+deploy\b|git\s+push\s+heroku\b|(cdk|sam|eb)\s+deploy\b|wrangler\s+(deploy|publish)\b|ansible-playbook\b|docker\s+push\b)`)
)

// opMatchers pair each operation's regular expression with words one of
// which every match contains: a cheap filter that spares most command lines
// the regular expressions.
var opMatchers = []struct {
	op    string
	words []string
	re    *lazyre.Regexp
}{
	{opTest, []string{"test", "tox", "nox", "jest", "mocha", "check", "verify", "rspec", "npm t"}, reTestCmd},
	{opCommit, []string{"commit"}, reCommit},
	{opPush, []string{"push"}, rePush},
	{opPR, []string{"pr create", "pull-request", "mr create"}, rePR},
	{opInstall, []string{"install", "add", "yarn", "get", "bundle", "sync", "require", "npm ci", "npm i"}, reInstall},
	{opDeploy, []string{"deploy", "apply", "rollout", "set image", "create", "helm", "up", "vercel", "publish", "ansible", "docker push"}, reDeploy},
}

// commandOps returns what a shell command line does, by its words.
func commandOps(cmd string) map[string]bool {
	ops := map[string]bool{}
	lower := strings.ToLower(cmd)
	for _, m := range opMatchers {
		for _, w := range m.words {
			if strings.Contains(lower, w) {
				if m.re.MatchString(cmd) {
					ops[m.op] = true
				}
				break
			}
		}
	}
	return ops
}

// isTestCommand reports whether s (a command line or an inline code span)
// runs a test suite.
func isTestCommand(s string) bool { return reTestCmd.MatchString(" " + s + " ") }

var (
	reShellWriter  = lazyre.New(`(^|[\s;&|(])(sed\s+(-\S+\s+)*-i|perl\s+(-\S+\s+)*-\S*i|tee|mv|cp|touch|install|ln|truncate|patch|dd|ed|ex|gofmt\s+(-\S+\s+)*-w|goimports\s+(-\S+\s+)*-w|prettier\s+(-\S+\s+)*--write|black|ruff\s+format|rustfmt|git\s+(apply|mv|checkout|restore|am))($|\s)|>`)
	reShellRemover = lazyre.New(`(^|[\s;&|(])(rm|git\s+rm|unlink|rmdir)($|\s)`)
	rePathToken    = lazyre.New(`[\w@+~-][\w.@+~/-]*`)
)

// shellTargets returns the path-like words of a command line that writes
// (redirects, sed -i, tee, mv, cp, touch, gofmt -w, git apply…) or removes
// (rm, git rm, unlink) files. It is a heuristic: every path-like word of
// such a command counts, which can only make a file claim look backed.
func shellTargets(cmd string) (written, removed []string) {
	w, r := reShellWriter.MatchString(cmd), reShellRemover.MatchString(cmd)
	if !w && !r {
		return nil, nil
	}
	for _, tok := range rePathToken.FindAllString(cmd, -1) {
		if !looksLikePath(tok) || strings.Contains(tok, "://") {
			continue
		}
		if w {
			written = append(written, tok)
		}
		if r {
			removed = append(removed, tok)
		}
	}
	return written, removed
}

// looksLikePath reports whether s could be a file path: one word with a dot
// or a slash in it that is not only punctuation.
func looksLikePath(s string) bool {
	if s == "" || strings.ContainsAny(s, " \t\n") || strings.HasPrefix(s, "-") {
		return false
	}
	return strings.ContainsAny(s, "./") && strings.Trim(s, "./") != ""
}
