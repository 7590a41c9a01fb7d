package goal

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"io"
)

// Bounds of the line diff.
const (
	// diffMaxEdits bounds the edit distance the Myers search explores (the
	// search's memory grows with its square: about 8 MB at 1000). A file
	// whose remaining difference is larger is diffed as "replace the
	// differing middle": exact counts are then an upper bound.
	diffMaxEdits = 1000
	// diffContext is the number of unchanged lines around each hunk.
	diffContext = 3
)

// line is one line of a text, its bytes without the newline.
type line struct {
	text []byte
	eol  bool // ended with "\n"
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

// edit is one step of an edit script: ' ' keep, '-' delete, '+' insert, with
// the line's index in the old (a) or new (b) text.
type edit struct {
	op   byte
	a, b int
}

// writeTextDiff writes the unified diff (3 lines of context, git's "\ No
// newline at end of file" marker) of old → new to w and returns the
// inserted and deleted line counts. Lines are compared by a 64-bit hash
// (seeded per diff).
func writeTextDiff(w io.Writer, name string, old, new []byte, seed maphash.Seed) (ins, del int) {
	a, b := splitLines(old), splitLines(new)
	ha, hb := hashLines(a, seed), hashLines(b, seed)
	script := diffScript(ha, hb)
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

// hashLines hashes each line with its newline flag.
func hashLines(ls []line, seed maphash.Seed) []uint64 {
	out := make([]uint64, len(ls))
	for i, l := range ls {
		var h maphash.Hash
		h.SetSeed(seed)
		h.Write(l.text)
		if l.eol {
			h.WriteByte('\n')
		}
		out[i] = h.Sum64()
	}
	return out
}

// diffScript returns a shortest edit script from a to b (Myers' O(ND)
// algorithm on the part between the common prefix and suffix), or, when
// that part differs by more than diffMaxEdits, one that deletes all of it
// and inserts the new middle.
func diffScript(a, b []uint64) []edit {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	script := make([]edit, 0, len(a)+len(b)-pre-suf)
	for i := 0; i < pre; i++ {
		script = append(script, edit{' ', i, i})
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	mid, ok := myers(ma, mb, diffMaxEdits)
	if !ok {
		mid = mid[:0]
		for i := range ma {
			mid = append(mid, edit{'-', i, 0})
		}
		for j := range mb {
			mid = append(mid, edit{'+', len(ma), j})
		}
	}
	for _, e := range mid {
		script = append(script, edit{e.op, e.a + pre, e.b + pre})
	}
	for i := 0; i < suf; i++ {
		script = append(script, edit{' ', len(a) - suf + i, len(b) - suf + i})
	}
	return script
}

// myers returns the edit script of a → b, or ok=false when more than maxD
// edits are needed.
func myers(a, b []uint64, maxD int) ([]edit, bool) {
	n, m := len(a), len(b)
	if n == 0 && m == 0 {
		return nil, true
	}
	limit := min(n+m, maxD)
	off := limit + 1
	v := make([]int32, 2*limit+3)
	var trace [][]int32
	found := -1
	for d := 0; d <= limit && found < 0; d++ {
		trace = append(trace, append([]int32(nil), v[off-d-1:off+d+2]...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = int(v[off+k+1])
			} else {
				x = int(v[off+k-1]) + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[off+k] = int32(x)
			if x >= n && y >= m {
				found = d
				break
			}
		}
	}
	if found < 0 {
		return nil, false
	}
	// Backtrack from (n, m); trace[d] holds v before step d, for k in
	// [-d-1, d+1] at index k+d+1.
	var rev []edit
	x, y := n, m
	for d := found; d >= 0; d-- {
		tv := trace[d]
		at := func(k int) int { return int(tv[k+d+1]) }
		k := x - y
		var prevK int
		if k == -d || (k != d && at(k-1) < at(k+1)) {
			prevK = k + 1
		} else {
			prevK = k - 1
		}
		prevX := at(prevK)
		prevY := prevX - prevK
		for x > prevX && y > prevY {
			rev = append(rev, edit{' ', x - 1, y - 1})
			x--
			y--
		}
		if d > 0 {
			if x == prevX {
				rev = append(rev, edit{'+', x, y - 1})
			} else {
				rev = append(rev, edit{'-', x - 1, y})
			}
		}
		x, y = prevX, prevY
	}
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	return rev, true
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
