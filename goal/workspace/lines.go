package workspace

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sergi/go-diff/diffmatchpatch"
)

// Bounds of the line diff. The diff itself is github.com/sergi/go-diff's
// Myers bisection (linear memory, time about the product of the lines
// compared and the edit distance); these bound the work a hostile file can
// cause. Past a bound the differing middle (what lies between the common
// prefix and suffix) counts as replaced: exact counts are then an upper
// bound.
const (
	// diffMaxEdits: when the lines of the middle differ in count by more
	// than this many (a lower bound on the edit distance: every line that
	// one side has more often than the other is inserted or deleted), the
	// middle counts as replaced without running the diff.
	diffMaxEdits = 1000
	// diffExactLines: a middle of at most this many lines (both sides
	// together) is always diffed exactly, with no deadline; its worst case,
	// every line moved, took 19–37 ms on a loaded 2-core machine
	// (docs/benchmarks.md, "The line diff").
	diffExactLines = 2000
	// diffMaxLines: a middle of more lines than this counts as replaced.
	// go-diff encodes each distinct line as one Unicode code point and
	// panics past 1,112,060 of them.
	diffMaxLines = 1_000_000
	// diffContext is the number of unchanged lines around each hunk.
	diffContext = 3
)

// diffDeadline bounds the time of the search of a middle larger than
// diffExactLines: past it the middle counts as replaced (so the outcome
// depends on the machine's speed only for a file that takes about this
// long). Hundreds of scattered edits in a 1 MiB file take 5–20 ms; a
// reordering of most of a large file takes seconds. A variable so that
// tests can shorten it.
var diffDeadline = 250 * time.Millisecond

// line is one line of a text, its bytes without the newline.
type line struct {
	text []byte
	eol  bool // ended with "\n"
}

// equal reports whether two lines are the same, newline included.
func (l line) equal(o line) bool {
	return l.eol == o.eol && bytes.Equal(l.text, o.text)
}

// splitLines splits b into lines; the last one may lack its newline.
func splitLines(b []byte) []line {
	var out []line
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			out = append(out, line{text: b})
			break
		}
		out = append(out, line{text: b[:i], eol: true})
		b = b[i+1:]
	}
	return out
}

// joinLines is the text of ls.
func joinLines(ls []line) string {
	var b strings.Builder
	n := len(ls)
	for _, l := range ls {
		n += len(l.text)
	}
	b.Grow(n)
	for _, l := range ls {
		b.Write(l.text)
		if l.eol {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// edit is one step of an edit script: ' ' keep, '-' delete, '+' insert, with
// the line's index in the old (a) or new (b) text.
type edit struct {
	op   byte
	a, b int
}

// writeTextDiff writes the unified diff (3 lines of context, git's "\ No
// newline at end of file" marker) of old → new to w and returns the
// inserted and deleted line counts.
func writeTextDiff(w io.Writer, name string, old, new []byte) (ins, del int) {
	a, b := splitLines(old), splitLines(new)
	script := diffScript(a, b)
	for _, e := range script {
		switch e.op {
		case '+':
			ins++
		case '-':
			del++
		}
	}
	if ins == 0 && del == 0 {
		return 0, 0
	}
	if len(a) == 0 {
		fmt.Fprintf(w, "--- /dev/null\n")
	} else {
		fmt.Fprintf(w, "--- a/%s\n", name)
	}
	if len(b) == 0 {
		fmt.Fprintf(w, "+++ /dev/null\n")
	} else {
		fmt.Fprintf(w, "+++ b/%s\n", name)
	}
	writeHunks(w, script, a, b)
	return ins, del
}

// diffScript returns the edit script from a to b: the common prefix and
// suffix kept, the middle between them diffed by diffMiddle.
func diffScript(a, b []line) []edit {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre].equal(b[pre]) {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf].equal(b[len(b)-1-suf]) {
		suf++
	}
	script := make([]edit, 0, len(a)+len(b)-pre-suf)
	for i := 0; i < pre; i++ {
		script = append(script, edit{' ', i, i})
	}
	for _, e := range diffMiddle(a[pre:len(a)-suf], b[pre:len(b)-suf]) {
		script = append(script, edit{e.op, e.a + pre, e.b + pre})
	}
	for i := 0; i < suf; i++ {
		script = append(script, edit{' ', len(a) - suf + i, len(b) - suf + i})
	}
	return script
}

// diffMiddle returns a shortest edit script from a to b (go-diff on the
// lines, each line one code point), or, past the bounds above, one that
// deletes all of a and inserts all of b.
func diffMiddle(a, b []line) []edit {
	if len(a) > 0 && len(b) > 0 && len(a)+len(b) <= diffMaxLines {
		if mid, ok := goDiff(a, b); ok {
			return mid
		}
	}
	mid := make([]edit, 0, len(a)+len(b))
	for i := range a {
		mid = append(mid, edit{'-', i, 0})
	}
	for j := range b {
		mid = append(mid, edit{'+', len(a), j})
	}
	return mid
}

// goDiff diffs a → b with go-diff, or returns ok=false when the lines'
// counts differ by more than diffMaxEdits or the diff of a middle over
// diffExactLines outlasts diffDeadline.
func goDiff(a, b []line) (script []edit, ok bool) {
	dmp := diffmatchpatch.New()
	// No time limit inside DiffMain's steps: with one, go-diff also splits
	// at a long common run first, which can miss a shorter script.
	dmp.DiffTimeout = 0
	ca, cb, distinct := dmp.DiffLinesToChars(joinLines(a), joinLines(b))
	count := make(map[rune]int, len(distinct))
	for _, r := range ca {
		count[r]++
	}
	for _, r := range cb {
		count[r]--
	}
	lower := 0
	for _, c := range count {
		lower += max(c, -c)
	}
	if lower > diffMaxEdits {
		return nil, false
	}
	var diffs []diffmatchpatch.Diff
	if len(a)+len(b) <= diffExactLines {
		diffs = dmp.DiffMain(ca, cb, false)
	} else {
		// DiffBisect is DiffMain's search with a deadline of its own
		// (for a middle of this size; it cannot take one or two lines).
		deadline := time.Now().Add(diffDeadline)
		diffs = dmp.DiffBisect(ca, cb, deadline)
		if time.Now().After(deadline) {
			return nil, false
		}
		diffs = dmp.DiffCleanupMerge(diffs)
	}
	script = make([]edit, 0, len(a)+len(b))
	i, j := 0, 0
	for _, d := range diffs {
		for range utf8.RuneCountInString(d.Text) {
			switch d.Type {
			case diffmatchpatch.DiffEqual:
				script = append(script, edit{' ', i, j})
				i++
				j++
			case diffmatchpatch.DiffDelete:
				script = append(script, edit{'-', i, j})
				i++
			case diffmatchpatch.DiffInsert:
				script = append(script, edit{'+', i, j})
				j++
			}
		}
	}
	return script, true
}

// writeHunks writes the script as unified-diff hunks.
func writeHunks(w io.Writer, script []edit, a, b []line) {
	i := 0
	for i < len(script) {
		// find the next change
		for i < len(script) && script[i].op == ' ' {
			i++
		}
		if i == len(script) {
			return
		}
		start := max(i-diffContext, 0)
		end := i
		// extend while changes are within 2*context of each other
		for end < len(script) {
			if script[end].op != ' ' {
				end++
				continue
			}
			run := end
			for run < len(script) && script[run].op == ' ' {
				run++
			}
			if run == len(script) || run-end > 2*diffContext {
				end = min(end+diffContext, len(script))
				break
			}
			end = run
		}
		hunk := script[start:end]
		aStart, bStart, aLen, bLen := hunkRange(hunk)
		fmt.Fprintf(w, "@@ -%s +%s @@\n", rangeStr(aStart, aLen), rangeStr(bStart, bLen))
		for _, e := range hunk {
			var l line
			switch e.op {
			case '+':
				l = b[e.b]
			default:
				l = a[e.a]
			}
			w.Write([]byte{e.op})
			w.Write(l.text)
			w.Write([]byte{'\n'})
			if !l.eol {
				io.WriteString(w, "\\ No newline at end of file\n")
			}
		}
		i = end
	}
}

// hunkRange returns the 1-based first lines and the lengths of a hunk on
// both sides.
func hunkRange(h []edit) (aStart, bStart, aLen, bLen int) {
	aStart, bStart = -1, -1
	for _, e := range h {
		if e.op != '+' {
			if aStart < 0 {
				aStart = e.a
			}
			aLen++
		}
		if e.op != '-' {
			if bStart < 0 {
				bStart = e.b
			}
			bLen++
		}
	}
	// an empty side starts after the line before it (unified-diff rule)
	if aStart < 0 {
		aStart = h[0].a
	} else {
		aStart++
	}
	if bStart < 0 {
		bStart = h[0].b
	} else {
		bStart++
	}
	return aStart, bStart, aLen, bLen
}

func rangeStr(start, n int) string {
	if n == 1 {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d,%d", start, n)
}
