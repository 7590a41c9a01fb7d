package goal

import (
	"strings"
	"testing"
)

// TestDescribeScannedFailing: the sentence naming the failing go tests is
// built from the whole output as it streams, so a long output whose kept
// failing lines (CheckFailuresKeep) and tail hold only some tests still
// counts all of them, each package named once with its own tests
// (testdata/checkoutput/go-many-failing-v.txt: 11 failing in p1, 2 in p2).
func TestDescribeScannedFailing(t *testing.T) {
	out := fixture(t, "go-many-failing-v.txt")
	const want = "TestA01, TestA02, TestA03 and 8 more failing in example.com/big/p1; TestB1 and TestB3 failing in example.com/big/p2"
	for _, tc := range []struct {
		name   string
		writes func(s *OutputScanner)
		want   string
	}{
		{"whole output in one write", func(s *OutputScanner) { s.Write([]byte(out)) }, want},
		{"written in 7-byte pieces", func(s *OutputScanner) {
			for b := []byte(out); len(b) > 0; {
				n := min(7, len(b))
				s.Write(b[:n])
				b = b[n:]
			}
		}, want},
		{"the first package only, its status line not yet read", func(s *OutputScanner) {
			s.Write([]byte(out[:strings.Index(out, "FAIL\texample.com/big/p1")]))
		}, "TestA01, TestA02, TestA03 and 8 more failing"},
		{"a package run twice (-count=2) names each test once", func(s *OutputScanner) {
			one := "--- FAIL: TestX (0.00s)\nFAIL\nFAIL\texample.com/x\t0.01s\n"
			s.Write([]byte("--- FAIL: TestX (0.00s)\n--- FAIL: TestX (0.00s)\nFAIL\nFAIL\texample.com/x\t0.01s\n" + one))
		}, "TestX failing in example.com/x"},
		{"more tests than the scanner names are counted", func(s *OutputScanner) {
			var b strings.Builder
			for i := range goFailNamesKeep + 5 {
				b.WriteString("--- FAIL: TestN" + strings.Repeat("x", i) + " (0.00s)\n")
			}
			b.WriteString("FAIL\texample.com/n\t0.01s\n")
			s.Write([]byte(b.String()))
		}, "TestN, TestNx, TestNxx and 66 more failing in example.com/n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewOutputScanner()
			tc.writes(s)
			failures := s.Failures()
			if got := DescribeScannedFailing(s, failures, ""); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
	// The kept parts alone name fewer tests: that is why the scan counts.
	s := NewOutputScanner()
	s.Write([]byte(out))
	tail := out[len(out)-CheckTailKeep:]
	if got := DescribeFailingOutput(s.Failures(), tail); got == want {
		t.Errorf("the kept parts alone already give %q; the fixture no longer shows a long output", got)
	}
}
