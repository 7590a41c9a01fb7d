package goal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/goalrun/goalrun/internal/lazyre"
)

// testLineMax bounds the part of one output line the tally keeps to read
// it: 4096 bytes (runner summary lines are far shorter; the rest of a
// longer line is skipped).
const testLineMax = 4096

// testTally reads a check's combined output as it streams (it is an
// io.Writer; memory stays O(1) whatever the output's size) and records what
// the test runners it recognises said they ran: go test (plain, -v, -json,
// cached, with coverage), pytest and unittest. Output it does not
// recognise leaves it undecided.
type testTally struct {
	line    []byte
	skipped bool // the rest of an over-long line is being skipped

	goPkgs, goEmpty int  // go test package results; those that tested nothing
	goTests         bool // a go test -v/-json test result line: tests ran
	pySummaries     int  // pytest or unittest summaries
	pyRan           bool // one of them ran a test (passed, failed, errors, xfail…)
	pyEmpty         string

	// pytest, set by the caller, says the check runs pytest itself: its
	// output must then hold pytest's closing summary line.
	pytest    bool
	pyHeaders int // pytest's "test session starts" lines

	// go test -v, per package (its lines come as one block ending with the
	// package's result): tests started ("=== RUN") minus tests ended ("---
	// PASS/FAIL/SKIP"), the last test started, and whether the test
	// binary's closing "PASS" or "FAIL" was seen.
	goOpen    int
	goRan     bool
	goLastRun []byte
	goClosed  bool
	// go test -json: the packages whose tests ran, and whether each ended
	// with a package-level result (at most goJSONPackagesMax).
	goJSON map[string]bool
	// goCut counts the packages whose tests did not run to their end and
	// goCutWhat describes the first one.
	goCut     int
	goCutWhat string
}

// goJSONPackagesMax bounds the packages the tally follows in go test -json
// output: 4096 (beyond, new packages are not followed).
const goJSONPackagesMax = 4096

func (t *testTally) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i >= 0 && len(t.line) == 0 && !t.skipped { // a whole line: read it in place
			t.readLine(p[:min(i, testLineMax)])
			p = p[i+1:]
			continue
		}
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !t.skipped {
			room := testLineMax - len(t.line)
			if len(chunk) > room {
				chunk, t.skipped = chunk[:room], true
			}
			t.line = append(t.line, chunk...)
		}
		if i < 0 {
			break
		}
		t.readLine(t.line)
		t.line, t.skipped = t.line[:0], false
		p = p[i+1:]
	}
	return n, nil
}

// flush reads a last line without a newline.
func (t *testTally) flush() {
	if len(t.line) > 0 {
		t.readLine(t.line)
		t.line = t.line[:0]
	}
}

var (
	// go test's package result lines (cmd/go: "ok  \t%s\t%s%s%s", "?   \t%s\t[no test files]").
	reGoOK        = lazyre.New(`^ok\s+\S+\s`)
	reGoNoFiles   = lazyre.New(`^\?\s+\S+\s+\[no test files\]`)
	reTallyGoFail = lazyre.New(`^FAIL\s+\S+\s`)
	// pytest's closing line ("==== 2 passed, 1 skipped in 0.02s ====", or
	// without the rules in -q) and its "collected 0 items".
	rePySummary = lazyre.New(`^=*\s*((?:\d+ \w+(?:, )?)+|no tests ran) in [\d.]+s`)
	rePyCount   = lazyre.New(`(\d+) (\w+)`)
	// unittest's "Ran N tests in 0.000s".
	reTallyUnittest = lazyre.New(`^Ran (\d+) tests? in `)
	// pytest's opening line.
	rePyHeader = lazyre.New(`^=+ test session starts =+$`)
)

var (
	noTestsToRun = []byte("[no tests to run]")
	jsonAction   = []byte(`"Action"`)
	jsonEnds     = [][]byte{[]byte(`"Action":"pass"`), []byte(`"Action":"fail"`), []byte(`"Action":"skip"`)}
	spaceIn      = []byte(" in ")
	goPass       = []byte("--- PASS: ")
	goFail       = []byte("--- FAIL: ")
	goSkip       = []byte("--- SKIP: ")
	goRunPrefix  = []byte("=== RUN") // testing: "=== RUN   %s"
	jsonRun      = []byte(`"Action":"run"`)
	jsonOKOutput = []byte(`"Output":"ok  \t`)
)

// reGoGlued is a go test -v framing line (testing's "--- PASS: %s (%.2fs)"
// and "=== RUN   %s" forms) or a test's log line ("    file.go:12: msg")
// after other text on the same line: a test that printed without a final
// newline (fmt.Print, a progress indicator on stderr, a colour reset) has
// testing's own line glued onto its output.
var reGoGlued = lazyre.New(`(?:--- (?:PASS|FAIL|SKIP): \S+ \([0-9.]+s\)|=== (?:RUN|PAUSE|CONT|NAME) +\S+)$|(?: {4})+[^\s:]+\.go:\d+: `)

// splitGoGlued returns the test's output and the framing line of b when a
// framing line is glued onto output (reGoGlued), and ok false otherwise
// (also for a framing line on its own, indented or not).
func splitGoGlued(b []byte) (out, framing []byte, ok bool) {
	if !bytes.Contains(b, goGluedDash) && !bytes.Contains(b, goGluedEq) && !bytes.Contains(b, goGluedLog) {
		return nil, nil, false
	}
	loc := reGoGlued.FindIndex(b)
	if loc == nil || len(bytes.TrimLeft(b[:loc[0]], " \t")) == 0 {
		return nil, nil, false
	}
	return b[:loc[0]], b[loc[0]:], true
}

var (
	goGluedDash = []byte("--- ")
	goGluedEq   = []byte("=== ")
	goGluedLog  = []byte(".go:")
)

// readLine reads one line. Most lines of a test run are none of the
// summaries it looks for: a byte test on the first character and a
// substring test turn them away before any regular expression or decoding,
// and nothing is allocated for them.
func (t *testTally) readLine(b []byte) {
	b = bytes.TrimRight(b, "\r")
	trimmed := bytes.TrimLeft(b, " \t")
	if len(trimmed) == 0 {
		return
	}
	if out, framing, ok := splitGoGlued(b); ok {
		t.readLine(out)
		t.readLine(framing)
		return
	}
	switch c := trimmed[0]; {
	case c == '{':
		if !bytes.Contains(b, jsonAction) {
			return
		}
		if bytes.Contains(b, jsonRun) || bytes.Contains(b, jsonOKOutput) {
			t.readJSON(b)
			return
		}
		for _, e := range jsonEnds {
			if bytes.Contains(b, e) {
				t.readJSON(b)
				return
			}
		}
	case c == '?' && reGoNoFiles.Match(b):
		t.goPkgs++
		t.goEmpty++
		t.goPackageEnd(nil, false)
	case c == 'o' && reGoOK.Match(b):
		t.goPkgs++
		if bytes.Contains(b, noTestsToRun) {
			t.goEmpty++
		}
		t.goPackageEnd(b, true)
	case c == 'F' && reTallyGoFail.Match(b):
		t.goPkgs++
		t.goPackageEnd(nil, false)
	case c == '=' && len(trimmed) == len(b) && bytes.HasPrefix(b, goRunPrefix):
		name := bytes.TrimLeft(b[len(goRunPrefix):], " \t")
		if i := bytes.IndexAny(name, " \t"); i >= 0 {
			name = name[:i]
		}
		if len(name) > 0 && len(name) < len(b)-len(goRunPrefix) { // "=== RUN   TestX"
			t.goOpen++
			t.goRan = true
			t.goLastRun = append(t.goLastRun[:0], name[:min(len(name), 200)]...)
		}
	case c == '-' && (bytes.HasPrefix(trimmed, goPass) || bytes.HasPrefix(trimmed, goFail) || bytes.HasPrefix(trimmed, goSkip)):
		if !bytes.HasPrefix(trimmed, goSkip) {
			t.goTests = true
		}
		t.goOpen--
	case c == 'P' && string(b) == "PASS", c == 'F' && string(b) == "FAIL":
		t.goClosed = true
	case c == 'R' && bytes.HasPrefix(b, []byte("Ran ")):
		t.readPy(string(b))
	case (c == '=' || c == 'n' || c >= '0' && c <= '9') && bytes.Contains(b, spaceIn):
		t.readPy(string(b))
	}
	if len(trimmed) > 0 && trimmed[0] == '=' && rePyHeader.Match(b) {
		t.pyHeaders++
	}
}

// goPackageEnd closes the go test -v block of a package whose result line
// was just read: when tests started in it (=== RUN) and the package passed
// (ok), every one of them must have ended and the test binary must have
// printed its closing PASS — else the binary exited in the middle of a
// test with status 0, and go test still said ok.
func (t *testTally) goPackageEnd(result []byte, ok bool) {
	if ok && t.goRan && (t.goOpen > 0 || !t.goClosed) {
		pkg := string(bytes.Fields(result)[1])
		t.goCut++
		if t.goCutWhat == "" {
			t.goCutWhat = fmt.Sprintf("in %s, %s started and never reported its end", pkg, t.goLastRun)
		}
	}
	t.goOpen, t.goRan, t.goLastRun, t.goClosed = 0, false, t.goLastRun[:0], false
}

// readPy reads a candidate pytest or unittest closing line.
func (t *testTally) readPy(l string) {
	switch {
	case rePySummary.MatchString(l):
		t.pySummaries++
		m := rePySummary.FindStringSubmatch(l)
		ran := false
		for _, c := range rePyCount.FindAllStringSubmatch(m[1], -1) {
			switch c[2] {
			case "skipped", "deselected", "warning", "warnings":
			default: // passed, failed, error(s), xfailed, xpassed, rerun
				ran = ran || c[1] != "0"
			}
		}
		if ran {
			t.pyRan = true
		} else if t.pyEmpty == "" {
			t.pyEmpty = "pytest said: " + strings.Trim(strings.TrimSpace(m[0]), "= ")
		}
	case reTallyUnittest.MatchString(l):
		t.pySummaries++
		if reTallyUnittest.FindStringSubmatch(l)[1] != "0" {
			t.pyRan = true
		} else if t.pyEmpty == "" {
			t.pyEmpty = "unittest said: Ran 0 tests"
		}
	}
}

// goTestEvent is the part of a go test -json event (test2json) the tally
// reads.
type goTestEvent struct {
	Action, Package, Test, Output string
}

func (t *testTally) readJSON(l []byte) {
	var ev goTestEvent
	if json.Unmarshal(l, &ev) != nil || ev.Package == "" {
		return
	}
	if t.goJSON == nil {
		t.goJSON = map[string]bool{}
	}
	switch {
	case ev.Test != "" && ev.Action == "run":
		if _, seen := t.goJSON[ev.Package]; !seen && len(t.goJSON) < goJSONPackagesMax {
			t.goJSON[ev.Package] = false
		}
		return
	case ev.Test != "" && ev.Action == "output" && strings.HasPrefix(ev.Output, "ok  \t"):
		// go test's own result line handed to a test: the test binary
		// exited while that test ran (test2json then passes the test).
		t.goJSONCut(ev.Package, ev.Test)
		return
	case ev.Action == "output":
		return
	case ev.Test == "" && ev.Action != "run":
		if _, seen := t.goJSON[ev.Package]; seen {
			t.goJSON[ev.Package] = true
		}
	}
	switch {
	case ev.Test != "" && (ev.Action == "pass" || ev.Action == "fail"):
		t.goTests = true
	case ev.Test == "" && ev.Action == "skip": // a package with no test files
		t.goPkgs++
		t.goEmpty++
	case ev.Test == "" && (ev.Action == "pass" || ev.Action == "fail"):
		t.goPkgs++
		t.goEmpty++ // until a test of it is seen; goTests decides
	}
}

// goJSONCut records a go test -json package whose test binary exited while
// test ran.
func (t *testTally) goJSONCut(pkg, test string) {
	if done, seen := t.goJSON[pkg]; seen && done {
		return
	}
	t.goJSON[pkg] = true // counted once
	t.goCut++
	if t.goCutWhat == "" {
		t.goCutWhat = fmt.Sprintf("in %s, %s started and never reported its end", pkg, test)
	}
}

// nothing says whether the output shows that the check did not verify
// anything although it may have exited 0: tests that did not run to their
// end — a go test package whose tests started (=== RUN, or -json's run
// events) but whose test binary ended without every one of them reporting
// its end and without its closing PASS; pytest's opening line without its
// closing summary, or no closing summary at all when the check runs pytest
// itself (pytest ended, or was made to end, before it said what ran) —, or
// every test runner recognised in it saying it ran no test (every go test
// package "[no tests to run]" or "[no test files]", pytest "no tests ran",
// only skipped or deselected tests, unittest "Ran 0 tests"). The reason
// says what the runners printed. Output with no recognised runner says
// nothing, unless the check runs pytest.
func (t *testTally) nothing() (bool, string) {
	t.flush()
	for pkg, done := range t.goJSON {
		if !done {
			t.goJSON[pkg] = true
			t.goCut++
			if t.goCutWhat == "" {
				t.goCutWhat = fmt.Sprintf("in %s, tests started and the package never reported its result", pkg)
			}
		}
	}
	var cut []string
	if t.goCut > 0 {
		cut = append(cut, fmt.Sprintf("go test: %s (%d %s whose test binary ended in the middle of a test)",
			t.goCutWhat, t.goCut, plural(t.goCut, "package", "packages")))
	}
	switch {
	case t.pyHeaders > t.pySummaries:
		cut = append(cut, "pytest started a test session and printed no closing summary line")
	case t.pytest && t.pySummaries == 0:
		cut = append(cut, "the check runs pytest, and pytest printed no closing summary line (-qq hides it: use -q)")
	}
	if len(cut) > 0 {
		return true, "The check exited 0 but its tests did not run to their end: " + strings.Join(cut, "; ") + "."
	}
	goSeen := t.goPkgs > 0 || t.goTests
	goNothing := goSeen && !t.goTests && t.goEmpty == t.goPkgs
	pySeen := t.pySummaries > 0
	pyNothing := pySeen && !t.pyRan
	switch {
	case !goSeen && !pySeen, goSeen && !goNothing, pySeen && !pyNothing:
		return false, ""
	}
	var why []string
	if goNothing {
		why = append(why, fmt.Sprintf("go test ran no test in any of its %d %s (each said [no tests to run] or [no test files])",
			t.goPkgs, plural(t.goPkgs, "package", "packages")))
	}
	if pyNothing {
		why = append(why, t.pyEmpty)
	}
	return true, "The check exited 0 but tested nothing: " + strings.Join(why, "; ") + "."
}

// plural is one when n is 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
