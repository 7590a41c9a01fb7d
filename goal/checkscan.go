package goal

import (
	"bytes"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/goalrun/goalrun/internal/lazyre"
)

// Bounds of what OutputScanner keeps of a check's output, whatever its size.
const (
	// CheckFailuresKeep bounds the failing tests' own lines kept per check:
	// 4096 bytes, the first ones (a prompt quotes them whole, the document
	// the first report.FailuresCap bytes).
	CheckFailuresKeep = 4096
	// failureBlockMax bounds one failing test's block (its header and the
	// lines that belong to it): 1024 bytes, so one test with a huge message
	// leaves room for the others.
	failureBlockMax = 1024
	// scanLineMax bounds one output line as the scanner keeps it: 512
	// bytes, the rest replaced by "…".
	scanLineMax = 512
	// scanPendingMax bounds an unfinished line held between writes: 64 KiB,
	// beyond which the line is scanned as it is and the rest skipped.
	scanPendingMax = 64 << 10
	// envLinesKeep bounds the lines OutputScanner keeps as evidence of an
	// environment failure: 32.
	envLinesKeep = 32
	// goRunBufMax bounds how many tests' `go test -v` lines the scanner
	// holds until it learns whether they failed: 64 tests.
	goRunBufMax = 64
	// goFailNamesKeep bounds the failing top-level go tests the scanner
	// names (the rest are counted): 64 names.
	goFailNamesKeep = 64
)

var (
	reANSI         = lazyre.New("\x1b\\[[0-9;?]*[ -/]*[@-~]")
	reGoRun        = lazyre.New(`^=== (RUN|CONT|NAME|PAUSE)\s+(\S+)`)
	reGoFailLine   = lazyre.New(`^\s*--- FAIL: (\S+)`)
	reGoPassLine   = lazyre.New(`^\s*--- (PASS|SKIP): (\S+)`)
	reGoPkgHeader  = lazyre.New(`^# [^\s#]+$`)
	reGoPkgStatus  = lazyre.New(`^FAIL\s+\S+.*\[(setup|build) failed\]`)
	reGoBuildErr   = lazyre.New(`^\S+\.go:\d+(:\d+)?: `)
	reGoPanicLine  = lazyre.New(`^panic: `)
	rePytestHead   = lazyre.New(`^_{3,} (.+?) _{3,}$`)
	rePytestSect   = lazyre.New(`^={3,} (.+?) ={3,}$`)
	rePytestE      = lazyre.New(`^E\s`)
	rePytestWhere  = lazyre.New(`^\S+\.py:\d+: [A-Z]\w*$`)
	rePytestSum    = lazyre.New(`^(FAILED|ERROR) \S`)
	reUnittestHead = lazyre.New(`^(FAIL|ERROR): \S+ \(\S+\)`)
	reDashes       = lazyre.New(`^-{10,}$`)
	reCargoHead    = lazyre.New(`^---- \S+ stdout ----$`)
	reCargoFailed  = lazyre.New(`^test \S+ \.\.\. FAILED$`)
	reJestHead     = lazyre.New(`^\s*● \S`)
	reTapNotOK     = lazyre.New(`^\s*not ok \d+ - `)
	reJestFrame    = lazyre.New(`^\s*>?\s*\d*\s*\|`)
	reTapKey       = lazyre.New(`^\s{2}(\w+):`)
)

// tapKeys are the keys of a node --test failure's YAML block worth
// showing.
var tapKeys = map[string]bool{"error": true, "expected": true, "actual": true, "operator": true}

// OutputScanner reads a check's whole output as it streams (it is an
// io.Writer) and keeps what a bounded tail loses on a long output: the
// failing tests' own lines — go test's `--- FAIL` blocks with their
// messages (also under -v, where the messages come first), panics, build
// and setup failures; pytest's failures (the test headers, the `E` lines,
// the short summary); unittest's FAIL/ERROR blocks; cargo test's failed
// tests and their panics; jest's `●` blocks; node --test's `not ok` blocks
// — at most CheckFailuresKeep bytes, the first ones; and up to 32 lines
// that show an environment failure (EnvironmentFailure reads them). It
// holds at most a few kilobytes whatever the output's size; ANSI colour
// codes are removed. It is safe for concurrent use.
type OutputScanner struct {
	mu      sync.Mutex
	pending []byte
	skip    bool // the pending line overflowed: drop until its end

	failures strings.Builder
	full     bool // CheckFailuresKeep reached

	block      strings.Builder // the failure block being collected
	blockKind  string          // "" when none
	blockLimit int             // lines still allowed for kinds that stop by count

	goRun   map[string]*strings.Builder // `go test -v` lines per running test
	goOrder []string
	goCur   string
	pySect  string // the pytest section being read ("FAILURES", "short test summary info"…)

	env     []string
	envHead string // the last `# pkg` header, kept before an environment line

	// go test's failing top-level tests, counted over the whole output:
	// those whose package status line was read, by package, and those
	// still waiting for it.
	goFailed   []goPackageTests
	goPending  goPackageTests
	goNamed    int             // names kept in goFailed and goPending
	goFailSeen map[string]bool // package and test of each name kept
}

// NewOutputScanner returns an empty scanner.
func NewOutputScanner() *OutputScanner {
	return &OutputScanner{goRun: map[string]*strings.Builder{}, goFailSeen: map[string]bool{}}
}

// Write scans p; it never fails.
func (s *OutputScanner) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if !s.skip {
				s.pending = append(s.pending, p...)
				if len(s.pending) > scanPendingMax {
					s.line(string(s.pending))
					s.pending, s.skip = s.pending[:0], true
				}
			}
			break
		}
		if !s.skip {
			s.pending = append(s.pending, p[:i]...)
			s.line(string(s.pending))
		}
		s.pending, s.skip = s.pending[:0], false
		p = p[i+1:]
	}
	return n, nil
}

// Close scans an unfinished last line and ends the block being collected.
// Failures and EnvLines call it; more writes after it start afresh.
func (s *OutputScanner) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLocked()
}

func (s *OutputScanner) closeLocked() {
	if len(s.pending) > 0 && !s.skip {
		s.line(string(s.pending))
	}
	s.pending, s.skip = s.pending[:0], false
	s.endBlock()
}

// Failures returns the failing tests' own lines found so far, in output
// order ("" when none), at most CheckFailuresKeep bytes.
func (s *OutputScanner) Failures() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLocked()
	return strings.TrimRight(s.failures.String(), "\n")
}

// EnvLines returns the lines kept as evidence of an environment failure,
// one per line ("" when none).
func (s *OutputScanner) EnvLines() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLocked()
	return strings.Join(s.env, "\n")
}

// FailureLines returns the failing tests' own lines in out (see
// OutputScanner), at most CheckFailuresKeep bytes.
func FailureLines(out string) string {
	s := NewOutputScanner()
	s.Write([]byte(out))
	return s.Failures()
}

// line scans one line (without its newline).
func (s *OutputScanner) line(raw string) {
	l := strings.TrimRight(raw, "\r")
	if strings.IndexByte(l, 0x1b) >= 0 {
		l = reANSI.ReplaceAllString(l, "")
	}
	if out, framing, ok := splitGoGlued([]byte(l)); ok {
		s.line(string(out))
		s.line(string(framing))
		return
	}
	l = cutLine(l, scanLineMax)
	s.goTally(l)
	if !goFramingLine(l) { // go test -v's lines about a test's course are never an environment's
		s.envLine(l)
	}
	s.failureLine(l)
}

// goTally counts go test's failing top-level tests: a `--- FAIL: Name`
// line (a subtest's name holds a "/") waits for the `FAIL\tpkg` status
// line that closes its package's output (go test ./... prints each
// package's output whole, then that line).
func (s *OutputScanner) goTally(l string) {
	if m := reGoFailLine.FindStringSubmatch(l); m != nil {
		if !strings.Contains(m[1], "/") {
			s.goPending.add(m[1], s)
		}
		return
	}
	m := reGoPkgFail.FindStringSubmatch(l)
	if m == nil || len(s.goPending.tests)+s.goPending.more == 0 {
		return
	}
	pkg := m[1]
	i := 0
	for i < len(s.goFailed) && s.goFailed[i].pkg != pkg {
		i++
	}
	if i == len(s.goFailed) {
		s.goFailed = append(s.goFailed, goPackageTests{pkg: pkg})
	}
	g := &s.goFailed[i]
	for _, t := range s.goPending.tests {
		s.goNamed--
		g.add(t, s)
	}
	g.more += s.goPending.more
	s.goPending = goPackageTests{}
}

// add names test t in g while the scanner keeps fewer than
// goFailNamesKeep names, else counts it. A package's test is named once
// (-count=N runs it again); a test waiting for its package is not yet
// checked.
func (g *goPackageTests) add(t string, s *OutputScanner) {
	key := g.pkg + "\x00" + t
	switch {
	case g.pkg != "" && s.goFailSeen[key]:
	case s.goNamed < goFailNamesKeep:
		if g.pkg != "" {
			s.goFailSeen[key] = true
		}
		s.goNamed++
		g.tests = append(g.tests, t)
	default:
		g.more++
	}
}

// GoFailing returns go test's failing top-level tests found so far: by
// package, in the order the packages ended, and (unattributed) those
// whose package status line has not been read.
func (s *OutputScanner) GoFailing() (byPackage []goPackageTests, unattributed goPackageTests) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLocked()
	byPackage = append(byPackage, s.goFailed...)
	unattributed = s.goPending
	unattributed.tests = append([]string(nil), unattributed.tests...)
	return byPackage, unattributed
}

// goFramingLine reports go test -v's lines that say a test started,
// paused, resumed, passed or was skipped (goalrun makes go test verbose:
// most of a large run's lines are these).
func goFramingLine(l string) bool {
	t := strings.TrimLeft(l, " ")
	return strings.HasPrefix(l, "=== ") || strings.HasPrefix(t, "--- PASS: ") || strings.HasPrefix(t, "--- SKIP: ")
}

// cutLine keeps at most n bytes of l on a rune boundary, marking a cut.
func cutLine(l string, n int) string {
	if len(l) <= n {
		return l
	}
	i := n
	for i > 0 && !utf8.RuneStart(l[i]) {
		i--
	}
	return l[:i] + "…"
}

// envLine keeps l when it shows an environment failure.
func (s *OutputScanner) envLine(l string) {
	if reGoPkgHeader.MatchString(l) {
		s.envHead = l
		return
	}
	if len(s.env) >= envLinesKeep || !envEvidence(l) {
		return
	}
	if s.envHead != "" {
		s.env = append(s.env, s.envHead)
		s.envHead = ""
	}
	s.env = append(s.env, strings.TrimSpace(l))
}

// indented reports a line that continues a block: it starts with a blank.
func indented(l string) bool {
	return l != "" && (l[0] == ' ' || l[0] == '\t')
}

// failureLine feeds l to the failure blocks' state machine.
func (s *OutputScanner) failureLine(l string) {
	// A block in progress takes the line, or ends before it.
	if s.blockKind != "" {
		if s.continues(l) {
			s.add(l)
			if s.blockKind == "go" {
				if m := reGoFailLine.FindStringSubmatch(l); m != nil { // a subtest's failure
					s.addGoRun(m[1])
				}
			}
			return
		}
		s.endBlock()
	}
	if s.full {
		return
	}
	switch {
	case reGoRun.MatchString(l):
		m := reGoRun.FindStringSubmatch(l)
		s.goCur = m[2]
		if m[1] == "RUN" {
			s.goRunStart(m[2])
		}
		return
	case reGoFailLine.MatchString(l):
		name := reGoFailLine.FindStringSubmatch(l)[1]
		s.startBlock("go", l)
		s.addGoRun(name)
		return
	case reGoPassLine.MatchString(l):
		s.goRunEnd(reGoPassLine.FindStringSubmatch(l)[2])
		return
	case reGoPkgHeader.MatchString(l):
		s.startBlock("gobuild", l)
		return
	case reGoPkgStatus.MatchString(l):
		s.emit(l)
		return
	case reGoPanicLine.MatchString(l):
		s.startBlock("panic", l)
		s.blockLimit = 8
		return
	case rePytestSect.MatchString(l):
		s.pySect = rePytestSect.FindStringSubmatch(l)[1]
		return
	case rePytestSum.MatchString(l) && strings.Contains(s.pySect, "short test summary"):
		s.emit(l)
		return
	case rePytestHead.MatchString(l) && (s.pySect == "FAILURES" || s.pySect == "ERRORS"):
		s.startBlock("pytest", l)
		return
	case reUnittestHead.MatchString(l):
		s.startBlock("unittest", l)
		return
	case reCargoHead.MatchString(l):
		s.startBlock("cargo", l)
		return
	case reCargoFailed.MatchString(l):
		s.emit(l)
		return
	case reJestHead.MatchString(l):
		s.startBlock("jest", l)
		return
	case reTapNotOK.MatchString(l):
		s.startBlock("tap", l)
		return
	}
	// `go test -v`: a running test's own lines, kept until it ends.
	if s.goCur != "" && indented(l) {
		if b := s.goRun[s.goCur]; b != nil && b.Len() < failureBlockMax {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
}

// continues reports whether l belongs to the block in progress.
func (s *OutputScanner) continues(l string) bool {
	switch s.blockKind {
	case "go":
		return indented(l) && !reGoRun.MatchString(strings.TrimSpace(l))
	case "gobuild":
		return reGoBuildErr.MatchString(l) || indented(l) && !reGoFailLine.MatchString(l)
	case "panic":
		if s.blockLimit <= 0 {
			return false
		}
		s.blockLimit--
		return true
	case "pytest":
		if rePytestHead.MatchString(l) || rePytestSect.MatchString(l) {
			return false
		}
		return true
	case "unittest": // header, dashes, traceback, then "=====" or dashes
		if reDashes.MatchString(l) {
			s.blockLimit++
			return s.blockLimit == 1
		}
		return !strings.HasPrefix(l, "=====")
	case "cargo": // the test's output and panic, up to its backtrace
		return !strings.HasPrefix(l, "stack backtrace:") && !strings.HasPrefix(l, "note: ") && !reCargoHead.MatchString(l) &&
			l != "failures:" && !strings.HasPrefix(l, "test result: ")
	case "jest":
		return (indented(l) || l == "") && !reJestHead.MatchString(l)
	case "tap":
		return indented(l) && !reTapNotOK.MatchString(l)
	}
	return false
}

// add appends l to the block in progress, within failureBlockMax. pytest
// blocks keep only the lines that say what failed: the header, `>` and
// `E` lines and the "file:line: Error" line.
func (s *OutputScanner) add(l string) {
	if s.blockKind == "pytest" {
		t := strings.TrimSpace(l)
		if !rePytestE.MatchString(l) && !rePytestWhere.MatchString(l) && !strings.HasPrefix(t, "> ") && t != ">" {
			return
		}
	}
	switch s.blockKind {
	case "unittest", "cargo":
		if reDashes.MatchString(l) || strings.TrimSpace(l) == "" {
			return
		}
	case "go":
		if reGoPassLine.MatchString(l) {
			return
		}
	case "jest": // the message, not the code frame
		if strings.TrimSpace(l) == "" || reJestFrame.MatchString(l) {
			return
		}
	case "tap":
		// node --test: the YAML block's error and values, not its
		// location, timing or stack.
		if m := reTapKey.FindStringSubmatch(l); m != nil {
			s.blockLimit = 0
			if tapKeys[m[1]] {
				s.blockLimit = 1
			}
		}
		if s.blockLimit != 1 {
			return
		}
	}
	if s.block.Len()+len(l)+1 > failureBlockMax {
		if !strings.HasSuffix(s.block.String(), "…\n") {
			s.block.WriteString("    …\n")
		}
		return
	}
	s.block.WriteString(l)
	s.block.WriteByte('\n')
}

func (s *OutputScanner) startBlock(kind, l string) {
	s.endBlock()
	s.blockKind = kind
	s.block.Reset()
	s.block.WriteString(l)
	s.block.WriteByte('\n')
}

// endBlock moves the block in progress into the failures.
func (s *OutputScanner) endBlock() {
	if s.blockKind == "" {
		return
	}
	b := strings.TrimRight(s.block.String(), "\n")
	kind := s.blockKind
	s.blockKind, s.blockLimit = "", 0
	s.block.Reset()
	if kind == "gobuild" && !strings.Contains(b, "\n") {
		return // a `# pkg` header with no error under it
	}
	if kind == "jest" || kind == "unittest" || kind == "cargo" {
		b = strings.TrimRight(b, "\n ")
	}
	s.emit(b)
}

// emit appends one block or line to the failures, within
// CheckFailuresKeep; the first block that does not fit ends the scan.
func (s *OutputScanner) emit(b string) {
	if s.full || strings.TrimSpace(b) == "" {
		return
	}
	if s.failures.Len()+len(b)+1 > CheckFailuresKeep {
		room := CheckFailuresKeep - s.failures.Len() - len("…\n")
		if room > 0 {
			s.failures.WriteString(cutLine(b, room))
			s.failures.WriteByte('\n')
		}
		s.full = true
		return
	}
	s.failures.WriteString(b)
	s.failures.WriteByte('\n')
}

// addGoRun adds test name's held `go test -v` lines to the block in
// progress and forgets them.
func (s *OutputScanner) addGoRun(name string) {
	if b := s.goRun[name]; b != nil {
		for _, l := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
			if l != "" {
				s.add(l)
			}
		}
	}
	s.goRunEnd(name)
}

// goRunStart starts holding test name's `go test -v` lines.
func (s *OutputScanner) goRunStart(name string) {
	if _, ok := s.goRun[name]; ok {
		s.goRun[name].Reset()
		return
	}
	if len(s.goOrder) >= goRunBufMax { // forget the oldest test still running
		delete(s.goRun, s.goOrder[0])
		s.goOrder = s.goOrder[1:]
	}
	s.goRun[name] = &strings.Builder{}
	s.goOrder = append(s.goOrder, name)
}

// goRunEnd forgets test name's lines.
func (s *OutputScanner) goRunEnd(name string) {
	if _, ok := s.goRun[name]; !ok {
		return
	}
	delete(s.goRun, name)
	for i, n := range s.goOrder {
		if n == name {
			s.goOrder = append(s.goOrder[:i], s.goOrder[i+1:]...)
			break
		}
	}
	if s.goCur == name {
		s.goCur = ""
	}
}
