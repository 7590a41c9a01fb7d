package goal

import (
	"bytes"
	"io"
	"strings"
	"sync"

	"github.com/goalrun/goalrun/grounding"
)

// goVerbosePrefix is put before a check that runs go test: it appends -v
// to GOFLAGS (keeping what the check's environment sets), so that every
// test binary says when each test starts and ends and prints its closing
// PASS, and a binary that exits in the middle of a test with status 0 —
// which go test reports as ok — is told apart (testTally). A GOFLAGS the
// check's own command line sets wins, as it would without goalrun.
const goVerbosePrefix = `GOFLAGS="${GOFLAGS:+$GOFLAGS }-v"; export GOFLAGS` + "\n"

// goVerboseAsked reports whether the check's own words already ask go test
// for its verbose or JSON output (-v, -json, -test.v …): its output is then
// shown as it is.
func goVerboseAsked(check string) bool {
	for _, w := range grounding.ShellWords(check) {
		switch {
		case w == "-v", w == "--v", w == "-json", w == "--json", strings.HasPrefix(w, "-v="), strings.HasPrefix(w, "-test.v"),
			strings.HasPrefix(w, "-json="):
			return true
		}
	}
	return false
}

// goQuietMax bounds the lines goQuiet holds back while it waits to learn
// whether their test passed: 64 KiB (beyond, they are shown).
const goQuietMax = 64 << 10

// goQuiet is what people see of a check's output when goalrun made go test
// verbose (goVerbosePrefix) and the check did not ask for it: it drops the
// lines -v alone adds — "=== RUN/PAUSE/CONT/NAME", "--- PASS/SKIP" and the
// indented log lines of tests that passed or were skipped, the test
// binary's closing PASS and "testing: warning: no tests to run" — so the
// output reads as go test's usual one (failing tests, their messages and
// the package lines are kept). It forwards to w, line by line; Close
// forwards what is held. Safe for concurrent use.
type goQuiet struct {
	mu      sync.Mutex
	w       io.Writer
	partial []byte   // an unfinished line
	held    [][]byte // indented lines since the last framing line
	size    int
}

func newGoQuiet(w io.Writer) *goQuiet { return &goQuiet{w: w} }

func (q *goQuiet) Write(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			q.partial = append(q.partial, p...)
			if len(q.partial) > goQuietMax { // an endless line: show it as it comes
				q.release()
				q.w.Write(q.partial)
				q.partial = q.partial[:0]
			}
			break
		}
		line := p[:i+1]
		if len(q.partial) > 0 {
			line = append(q.partial, line...)
		}
		q.line(line) // line is not kept: it may be the caller's
		q.partial = q.partial[:0]
		p = p[i+1:]
	}
	return n, nil
}

// Close forwards what is held back and an unfinished last line.
func (q *goQuiet) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.release()
	if len(q.partial) > 0 {
		q.w.Write(q.partial)
		q.partial = q.partial[:0]
	}
}

func (q *goQuiet) line(l []byte) {
	if out, framing, ok := splitGoGlued(bytes.TrimRight(l, "\r\n")); ok {
		// The test's output is shown as it is, on a line of its own.
		q.line(append(bytes.Clone(out), '\n'))
		q.line(append(bytes.Clone(framing), '\n'))
		return
	}
	text := bytes.TrimRight(l, "\r\n")
	trimmed := bytes.TrimLeft(text, " \t")
	switch {
	case bytes.HasPrefix(text, []byte("=== ")) && reGoRun.Match(text):
		// A test starts, pauses or resumes: the held lines are an earlier
		// test's, whose end is not known yet; keep holding them.
	case bytes.HasPrefix(trimmed, goPass), bytes.HasPrefix(trimmed, goSkip):
		q.drop()
	case string(text) == "PASS", string(text) == "testing: warning: no tests to run":
	case len(trimmed) < len(text) && !bytes.HasPrefix(trimmed, goFail):
		q.held = append(q.held, bytes.Clone(l))
		if q.size += len(l); q.size > goQuietMax {
			q.release()
		}
	default:
		q.release()
		q.w.Write(l)
	}
}

func (q *goQuiet) drop() { q.held, q.size = q.held[:0], 0 }

func (q *goQuiet) release() {
	for _, l := range q.held {
		q.w.Write(l)
	}
	q.drop()
}
