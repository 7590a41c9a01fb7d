package goal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/internal/goldentest"
)

// TestFailureLinesGolden: the failing tests' own lines of every real check
// output under testdata/checkoutput, compared with
// testdata/failures/<name>.failures (go test ./goal -run
// TestFailureLinesGolden -update rewrites them).
func TestFailureLinesGolden(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join("testdata", "checkoutput"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".txt")
		if !ok {
			continue
		}
		t.Run(name, func(t *testing.T) {
			got := FailureLines(fixture(t, e.Name()))
			goldentest.Check(t, filepath.Join("testdata", "failures", name+".failures"), []byte(got))
		})
	}
}

// TestOutputScannerChunks: the same output written at once, byte by byte
// or in odd chunks gives the same lines.
func TestOutputScannerChunks(t *testing.T) {
	for _, name := range []string{"go-cli-usage-v.txt", "pytest-long.txt", "go-dns.txt", "jest-fail.txt"} {
		out := fixture(t, name)
		whole := NewOutputScanner()
		whole.Write([]byte(out))
		for _, size := range []int{1, 7, 4096} {
			s := NewOutputScanner()
			for i := 0; i < len(out); i += size {
				s.Write([]byte(out[i:min(i+size, len(out))]))
			}
			if s.Failures() != whole.Failures() || s.EnvLines() != whole.EnvLines() {
				t.Errorf("%s in chunks of %d: %q / %q, want %q / %q", name, size, s.Failures(), s.EnvLines(), whole.Failures(), whole.EnvLines())
			}
		}
	}
}

// TestOutputScannerBounds: whatever the output, the scanner keeps at most
// CheckFailuresKeep bytes of failures and envLinesKeep lines, the first
// ones, and cuts long lines.
func TestOutputScannerBounds(t *testing.T) {
	s := NewOutputScanner()
	for i := 0; i < 5000; i++ {
		block := "--- FAIL: TestN%d (0.00s)\n    x_test.go:1: " + strings.Repeat("m", i%700) + "\n"
		s.Write([]byte(strings.Replace(block, "%d", strings.Repeat("1", i%5+1), 1)))
		s.Write([]byte("app.go:3:8: github.com/x/y@v1.0.0: Get \"https://proxy.golang.org/x\": dial tcp: lookup proxy.golang.org: no such host\n"))
	}
	s.Write([]byte(strings.Repeat("z", 200<<10))) // an endless line
	s.Write([]byte("\n--- FAIL: TestLast (0.00s)\n"))
	f := s.Failures()
	if len(f) > CheckFailuresKeep || !strings.HasPrefix(f, "--- FAIL: TestN1 (0.00s)") || strings.Contains(f, "TestLast") {
		t.Errorf("failures: %d bytes, start %q", len(f), f[:min(len(f), 40)])
	}
	if n := strings.Count(s.EnvLines(), "\n") + 1; n != envLinesKeep {
		t.Errorf("%d environment lines kept, want %d", n, envLinesKeep)
	}
	for _, l := range strings.Split(f, "\n") {
		if len(l) > scanLineMax+len("…") {
			t.Errorf("a line of %d bytes kept", len(l))
		}
	}
	// One test's huge message leaves room for the next test.
	s = NewOutputScanner()
	s.Write([]byte("--- FAIL: TestBig (0.00s)\n"))
	for i := 0; i < 100; i++ {
		s.Write([]byte("    big_test.go:9: " + strings.Repeat("b", 100) + "\n"))
	}
	s.Write([]byte("--- FAIL: TestSmall (0.00s)\n    small_test.go:3: got 1, want 2\n"))
	f = s.Failures()
	if !strings.Contains(f, "small_test.go:3: got 1, want 2") || !strings.Contains(f, "    …") {
		t.Errorf("failures = %q", f)
	}
}

// TestOutputScannerANSI: colour codes are removed before matching.
func TestOutputScannerANSI(t *testing.T) {
	s := NewOutputScanner()
	s.Write([]byte("\x1b[31m--- FAIL: TestColour (0.00s)\x1b[0m\n    c_test.go:4: \x1b[1mred\x1b[0m\n"))
	if f := s.Failures(); f != "--- FAIL: TestColour (0.00s)\n    c_test.go:4: red" {
		t.Errorf("failures = %q", f)
	}
}
