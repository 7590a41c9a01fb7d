package goal

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/sandbox"
)

// BenchmarkCheckOutputVerbose measures what reading a check's output costs
// goalrun when go test runs verbose (goalrun adds -v to GOFLAGS): the
// output of 3 packages of 1000 passing tests with one subtest each, as go
// test -v prints it (~300 KB), through the scanner, the tally and the
// filter people see, against the same run's usual output (3 lines)
// through the scanner, the tally and the tail.
func BenchmarkCheckOutputVerbose(b *testing.B) {
	var v strings.Builder
	for _, p := range []string{"a", "b", "c"} {
		for i := 1; i <= 1000; i++ {
			fmt.Fprintf(&v, "=== RUN   Test%d\n=== RUN   Test%d/sub\n--- PASS: Test%d (0.00s)\n    --- PASS: Test%d/sub (0.00s)\n", i, i, i, i)
		}
		fmt.Fprintf(&v, "PASS\nok  \texample.com/vb/%s\t0.012s\n", p)
	}
	verbose := []byte(v.String())
	plain := []byte("ok  \texample.com/vb/a\t0.010s\nok  \texample.com/vb/b\t0.011s\nok  \texample.com/vb/c\t0.011s\n")
	const chunk = 4096 // a pipe delivers the output in pieces
	feed := func(b *testing.B, out []byte, quiet bool) {
		b.SetBytes(int64(len(out)))
		for range b.N {
			scan, tally := NewOutputScanner(), &testTally{}
			tail := sandbox.NewTailWriter(nil, CheckTailKeep)
			var shown io.Writer = tail
			var q *goQuiet
			if quiet {
				q = newGoQuiet(tail)
				shown = q
			}
			w := sandbox.NewTailWriter(io.MultiWriter(scan, tally, shown), 0)
			for i := 0; i < len(out); i += chunk {
				w.Write(out[i:min(i+chunk, len(out))])
			}
			if q != nil {
				q.Close()
			}
			if nothing, why := tally.nothing(); nothing {
				b.Fatalf("a passing run read as %q", why)
			}
		}
	}
	b.Run("plain", func(b *testing.B) { feed(b, plain, false) })
	b.Run("verbose", func(b *testing.B) { feed(b, verbose, true) })
}
