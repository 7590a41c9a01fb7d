package goal

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	"github.com/goalrun/goalrun/internal/lazyre"
	"github.com/goalrun/goalrun/report"
)

// DefaultNoProgressTurns is how many turns in a row may end with the same
// check failure and an unchanged workspace before the run halts with
// no_progress: 2.
const DefaultNoProgressTurns = 2

// HaltOptions configures Halts.
type HaltOptions struct {
	// NoProgressTurns is the no_progress window (0 = DefaultNoProgressTurns;
	// negative switches the halt off).
	NoProgressTurns int
	// MaxCostUSD halts the run when the reported cost exceeds it, in US
	// dollars (0 = no limit; --max-cost-usd).
	MaxCostUSD float64
	// MaxTokens halts the run when input plus output tokens exceed it (0 =
	// no limit; --max-tokens).
	MaxTokens int64
}

// Halts decides goalrun's smart halts: no_progress (the same failure
// fingerprint of the check — its exit code and the normalized names of the
// failing tests — and no change to the workspace for NoProgressTurns turns
// in a row) and budget (cost or tokens over the limit). It implements the
// loop's Halter seam; it keeps two fingerprints and a counter.
//
// A turn is compared with the one before it; the first turn is compared
// with the first check and the baseline when the loop reports them as
// iteration 0, else it only sets the reference.
type Halts struct {
	opt      HaltOptions
	have     bool
	prevFP   string
	prevSt   string
	prevName string
	streak   int
}

var _ Halter = (*Halts)(nil)

// NewHalts returns the halts for opt.
func NewHalts(opt HaltOptions) *Halts {
	if opt.NoProgressTurns == 0 {
		opt.NoProgressTurns = DefaultNoProgressTurns
	}
	return &Halts{opt: opt}
}

// AfterTurn returns report.HaltNoProgress and why when the check failed the
// same way and the workspace did not change for NoProgressTurns turns in a
// row, else "". Iteration 0 (the first check, before any turn) only sets
// the reference. Without a workspace fingerprint (f.State == "") the halt
// cannot tell whether the agent changed anything and stays off.
func (h *Halts) AfterTurn(f TurnFacts) (halt, reason string) {
	if h.opt.NoProgressTurns < 0 || f.State == "" {
		return "", ""
	}
	fp, name := "judge-only", "the judge did not accept the goal"
	if f.CheckRan {
		fp, name = FailureFingerprint(f.CheckExit, f.CheckTimedOut, f.CheckTail)
	}
	if !h.have || f.Iteration == 0 {
		h.have, h.prevFP, h.prevSt, h.prevName, h.streak = true, fp, f.State, name, 0
		return "", ""
	}
	if fp == h.prevFP && f.State == h.prevSt {
		h.streak++
	} else {
		h.streak = 0
	}
	h.prevFP, h.prevSt, h.prevName = fp, f.State, name
	if h.streak < h.opt.NoProgressTurns {
		return "", ""
	}
	return report.HaltNoProgress, fmt.Sprintf(
		"No progress for %d turns in a row: %s each time and the workspace did not change (--no-progress-turns %d).",
		h.streak, name, h.opt.NoProgressTurns)
}

// Budget returns report.HaltBudget and why when total exceeds MaxCostUSD or
// MaxTokens, else "".
func (h *Halts) Budget(total report.Usage) (halt, reason string) {
	if h.opt.MaxCostUSD > 0 && total.CostUSD > h.opt.MaxCostUSD {
		return report.HaltBudget, fmt.Sprintf("The reported cost of $%.4f exceeded the budget of $%.4f (--max-cost-usd).",
			total.CostUSD, h.opt.MaxCostUSD)
	}
	if tokens := total.InputTokens + total.OutputTokens; h.opt.MaxTokens > 0 && tokens > h.opt.MaxTokens {
		return report.HaltBudget, fmt.Sprintf("The run used %d tokens (%d in, %d out), over the budget of %d (--max-tokens).",
			tokens, total.InputTokens, total.OutputTokens, h.opt.MaxTokens)
	}
	return "", ""
}

// failingNamesMax bounds the failing test names a fingerprint keeps.
const failingNamesMax = 256

var (
	reGoFail      = lazyre.New(`(?m)^\s*--- FAIL: (\S+)`)
	reGoPkgFail   = lazyre.New(`(?m)^FAIL[ \t]+(\S+)`)
	reGoPanic     = lazyre.New(`(?m)^panic: (.*)$`)
	rePytest      = lazyre.New(`(?m)^(FAILED|ERROR)[ \t]+(\S+::\S+|\S+\.py)`)
	reJestBullet  = lazyre.New(`(?m)^\s*● (.+?)\s*$`)
	reJestCross   = lazyre.New(`(?m)^\s*[✕×✗] (.+?)(\s+\(\d+(\.\d+)?\s*m?s\))?\s*$`)
	reJestFile    = lazyre.New(`(?m)^\s*FAIL\s+(\S+\.[cm]?[jt]sx?)\b`)
	reCargo       = lazyre.New(`(?m)^test (\S+) \.\.\. FAILED`)
	reRspec       = lazyre.New(`(?m)^rspec (\S+)`)
	reMochaFail   = lazyre.New(`(?m)^\s+\d+\) (.+)$`)
	reUnittest    = lazyre.New(`(?m)^(FAIL|ERROR): (\S+ \(\S+\))`)
	reCompileErr  = lazyre.New(`(?m)^\S+\.(go|rs|c|cc|cpp|ts|tsx|py|java):\d+(:\d+)?:\s*(error:)?.*$`)
	reDuration    = lazyre.New(`\b\d+(\.\d+)?\s?(ns|µs|us|ms|s|sec|secs|seconds|m|min|h)\b`)
	reHexAddr     = lazyre.New(`\b0x[0-9a-fA-F]+\b`)
	reTmpPath     = lazyre.New(`(/private)?(/tmp|/var/folders|/var/tmp|/dev/shm)/[^\s:'"()\]]*|[A-Za-z]:\\Users\\[^\\\s]+\\AppData\\Local\\Temp\\[^\s:'"]*`)
	reTimestamp   = lazyre.New(`\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?|\b\d{2}:\d{2}:\d{2}(\.\d+)?\b`)
	reGoroutine   = lazyre.New(`goroutine \d+`)
	rePort        = lazyre.New(`(localhost|127\.0\.0\.1|\[::1\]|0\.0\.0\.0):\d+`)
	rePID         = lazyre.New(`\b(pid|PID|process)[ =:]\d+`)
	reSeed        = lazyre.New(`(?i)(seed[ =:]*)\d+`)
	reGoCached    = lazyre.New(`\s\(cached\)`)
	reSpaces      = lazyre.New(`[ \t]+`)
	reJestSummary = lazyre.New(`(?m)^(Tests|Test Suites|Snapshots|Time|Ran all).*$`)
)

// NormalizeCheckOutput strips what changes between two runs of the same
// failure: durations, hex addresses, temporary paths, timestamps,
// goroutine numbers, loopback ports, process ids, random seeds, and runs of
// blanks.
func NormalizeCheckOutput(s string) string {
	s = reTmpPath.ReplaceAllString(s, "<tmp>")
	s = reTimestamp.ReplaceAllString(s, "<time>")
	s = reDuration.ReplaceAllString(s, "<dur>")
	s = reHexAddr.ReplaceAllString(s, "0x?")
	s = reGoroutine.ReplaceAllString(s, "goroutine <n>")
	s = rePort.ReplaceAllString(s, "$1:<port>")
	s = rePID.ReplaceAllString(s, "$1 <pid>")
	s = reSeed.ReplaceAllString(s, "${1}<seed>")
	s = reGoCached.ReplaceAllString(s, "")
	s = reJestSummary.ReplaceAllString(s, "")
	s = reSpaces.ReplaceAllString(s, " ")
	return s
}

// FailingTests returns the normalized names of the failing tests and
// packages that the output of go test, pytest, unittest, jest/vitest,
// mocha, cargo test or rspec names, sorted and unique (at most 256).
func FailingTests(out string) []string {
	set := map[string]bool{}
	addAll := func(prefix string, re *lazyre.Regexp, group int) {
		for _, m := range re.FindAllStringSubmatch(out, -1) {
			if len(set) < failingNamesMax {
				set[prefix+NormalizeCheckOutput(strings.TrimSpace(m[group]))] = true
			}
		}
	}
	addAll("go:", reGoFail, 1)
	addAll("gopkg:", reGoPkgFail, 1)
	addAll("panic:", reGoPanic, 1)
	addAll("pytest:", rePytest, 2)
	addAll("unittest:", reUnittest, 2)
	addAll("jest:", reJestBullet, 1)
	addAll("jest:", reJestCross, 1)
	addAll("jestfile:", reJestFile, 1)
	addAll("cargo:", reCargo, 1)
	addAll("rspec:", reRspec, 1)
	if len(set) == 0 {
		addAll("mocha:", reMochaFail, 1)
	}
	if len(set) == 0 {
		addAll("compile:", reCompileErr, 0)
	}
	out2 := make([]string, 0, len(set))
	for k := range set {
		out2 = append(out2, k)
	}
	sort.Strings(out2)
	return out2
}

// FailureFingerprint identifies a check failure: its exit code, whether it
// timed out, and the failing test names (FailingTests) — or, when no name
// can be found, the last 40 lines of the normalized output. It returns the
// fingerprint (hex SHA-256) and a short description for halt reasons.
func FailureFingerprint(exitCode int, timedOut bool, tail string) (fp, description string) {
	names := FailingTests(tail)
	h := sha256.New()
	fmt.Fprintf(h, "exit=%d timeout=%v\n", exitCode, timedOut)
	if len(names) > 0 {
		for _, n := range names {
			fmt.Fprintln(h, n)
		}
	} else {
		lines := strings.Split(strings.TrimSpace(NormalizeCheckOutput(tail)), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		for _, l := range lines {
			fmt.Fprintln(h, strings.TrimSpace(l))
		}
	}
	description = fmt.Sprintf("the check exited %d", exitCode)
	if timedOut {
		description = "the check timed out"
	}
	if d := DescribeFailingOutput(tail); d != "" {
		description += " with " + d
	} else {
		description += " with the same output"
	}
	return hex.EncodeToString(h.Sum(nil)), description
}

// nextSlash returns the index of the next "/" in s after i, or -1.
func nextSlash(s string, i int) int {
	j := strings.Index(s[i+1:], "/")
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

// describeShown is how many names of one kind DescribeFailing lists
// before it counts the rest.
const describeShown = 3

// DescribeFailing says in plain words what FailingTests found, for halt
// reasons and the human output: "TestWords and TestMean failing in
// example.com/p1", "a panic (runtime error: …)", "a build error
// (calc.go:4:2: undefined: x)", "" for no names. A subtest whose parent
// test is listed is left out (the parent fails with it). It lists at most
// three names of each kind and counts the rest.
func DescribeFailing(names []string) string {
	var tests, pkgs, panics, builds []string
	for _, n := range names {
		kind, name, ok := strings.Cut(n, ":")
		if !ok {
			tests = append(tests, n)
			continue
		}
		switch kind {
		case "gopkg", "jestfile":
			pkgs = append(pkgs, name)
		case "panic":
			panics = append(panics, name)
		case "compile":
			builds = append(builds, name)
		default:
			tests = append(tests, name)
		}
	}
	// A failing subtest's parent fails too: name the parent only.
	parents := map[string]bool{}
	for _, t := range tests {
		parents[t] = true
	}
	top := tests[:0:0]
	for _, t := range tests {
		sub := false
		for i := strings.Index(t, "/"); i > 0; i = nextSlash(t, i) {
			if parents[t[:i]] {
				sub = true
				break
			}
		}
		if !sub {
			top = append(top, t)
		}
	}
	tests = top
	list := listNames
	var parts []string
	switch {
	case len(tests) > 0:
		p := list(tests) + " failing"
		if len(pkgs) > 0 {
			p += " in " + list(pkgs)
		}
		parts = append(parts, p)
	case len(pkgs) > 0:
		parts = append(parts, "failures in "+list(pkgs))
	}
	if len(panics) > 0 {
		parts = append(parts, "a panic ("+list(panics)+")")
	}
	if len(builds) > 0 {
		word := "a build error"
		if len(builds) > 1 {
			word = "build errors"
		}
		parts = append(parts, word+" ("+list(builds)+")")
	}
	return strings.Join(parts, " and ")
}

// listNames lists at most describeShown names and counts the rest:
// "A, B, C and 2 more", "A and B".
func listNames(xs []string) string { return listNamesMore(xs, 0) }

// listNamesMore is listNames for xs and more names not known.
func listNamesMore(xs []string, more int) string {
	if len(xs) == 0 {
		return fmt.Sprintf("%d tests", more)
	}
	shown := xs
	if len(shown) > describeShown {
		shown = shown[:describeShown]
	}
	out := strings.Join(shown, ", ")
	switch {
	case len(xs)+more > len(shown):
		out += fmt.Sprintf(" and %d more", len(xs)+more-len(shown))
	case len(xs) > 1:
		out = strings.Join(shown[:len(shown)-1], ", ") + " and " + shown[len(shown)-1]
	}
	return out
}

// goPackageTests are the failing top-level tests of one go test package:
// those named and how many more failed.
type goPackageTests struct {
	pkg   string
	tests []string
	more  int
}

// goFailingByPackage groups go test's failing top-level tests by the
// package whose "FAIL\tpkg" line closes their "--- FAIL" blocks (go test
// ./... prints each package's output whole, then its status line), in the
// order the packages appear. Each part is read on its own: a test whose
// package line is not in the same part stays unattributed, never given to
// the next part's package.
func goFailingByPackage(parts ...string) []goPackageTests {
	var groups []goPackageTests
	at := map[string]int{}
	seen := map[string]bool{}
	for _, part := range parts {
		var pending []string
		for _, l := range strings.Split(part, "\n") {
			if m := reGoFail.FindStringSubmatch(l); m != nil {
				if name := strings.TrimSpace(m[1]); !strings.Contains(name, "/") {
					pending = append(pending, name)
				}
				continue
			}
			m := reGoPkgFail.FindStringSubmatch(l)
			if m == nil || len(pending) == 0 {
				continue
			}
			i, ok := at[m[1]]
			if !ok {
				i = len(groups)
				at[m[1]] = i
				groups = append(groups, goPackageTests{pkg: m[1]})
			}
			for _, t := range pending {
				if !seen[m[1]+"\x00"+t] {
					seen[m[1]+"\x00"+t] = true
					groups[i].tests = append(groups[i].tests, t)
				}
			}
			pending = nil
		}
	}
	return groups
}

// DescribeFailingOutput is DescribeFailing for check output read in parts
// (the failing-test lines, the tail): go tests are named with the package
// each failed in ("TestA failing in example.com/p1; TestB failing in
// example.com/p2"), at most three packages, the rest counted.
func DescribeFailingOutput(parts ...string) string {
	names := FailingTests(strings.Join(parts, "\n"))
	groups := goFailingByPackage(parts...)
	if len(groups) == 0 {
		return DescribeFailing(names)
	}
	// Tests whose package line was not kept (a cut output) are named
	// without one.
	attributed := map[string]bool{}
	for _, g := range groups {
		for _, t := range g.tests {
			attributed[t] = true
		}
	}
	var loose goPackageTests
	for _, part := range parts {
		for _, m := range reGoFail.FindAllStringSubmatch(part, -1) {
			if t := strings.TrimSpace(m[1]); !strings.Contains(t, "/") && !attributed[t] {
				attributed[t] = true
				loose.tests = append(loose.tests, t)
			}
		}
	}
	return describeGoFailing(groups, loose, names)
}

// DescribeScannedFailing is DescribeFailingOutput for a check whose whole
// output scan read: go tests are named and counted from everything the
// check printed (OutputScanner.GoFailing), not from the kept parts, so a
// long output's count is whole; other runners' tests, panics and build
// errors are read from parts.
func DescribeScannedFailing(scan *OutputScanner, parts ...string) string {
	groups, loose := scan.GoFailing()
	if len(groups) == 0 && len(loose.tests)+loose.more == 0 {
		return DescribeFailingOutput(parts...)
	}
	return describeGoFailing(groups, loose, FailingTests(strings.Join(parts, "\n")))
}

// describeGoFailing says which go tests fail by package (at most three
// packages, the rest counted), then the unattributed ones, then what
// names holds besides go tests.
func describeGoFailing(groups []goPackageTests, loose goPackageTests, names []string) string {
	var segs []string
	for i, g := range groups {
		if i == describeShown {
			segs = append(segs, fmt.Sprintf("failures in %d more packages", len(groups)-describeShown))
			break
		}
		segs = append(segs, listNamesMore(g.tests, g.more)+" failing in "+g.pkg)
	}
	if len(loose.tests)+loose.more > 0 {
		segs = append(segs, listNamesMore(loose.tests, loose.more)+" failing")
	}
	var rest []string
	for _, n := range names {
		if !strings.HasPrefix(n, "go:") && !strings.HasPrefix(n, "gopkg:") {
			rest = append(rest, n)
		}
	}
	out := strings.Join(segs, "; ")
	if r := DescribeFailing(rest); r != "" {
		out += " and " + r
	}
	return out
}
