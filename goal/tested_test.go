package goal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTestTallyOnRealOutput: the tally reads outputs of the real go test
// and pytest (testdata/tested, made by running them here: see each name)
// and says "tested nothing" exactly when every runner in the output ran no
// test, whatever the chunking of the stream.
func TestTestTallyOnRealOutput(t *testing.T) {
	cases := []struct {
		files   []string // concatenated, as a check "a && b" prints them
		pytest  bool     // the check runs pytest itself
		nothing bool
		reason  string
	}{
		{files: []string{"go-exit-mid-test-v.txt"}, nothing: true,
			reason: "did not run to their end: go test: in example.com/calc, TestSum started and never reported its end (1 package whose test binary ended"},
		{files: []string{"go-exit-mid-test-json.txt"}, nothing: true, reason: "in example.com/calc, TestSum started and never reported its end"},
		{files: []string{"go-exit-mid-test.txt"}}, // without -v nothing shows it
		{files: []string{"go-pass-v-subtests.txt"}},
		{files: []string{"go-pass-v-glued.txt"}}, // framing lines glued onto the tests' output
		{files: []string{"go-pass-v-glued.txt", "go-exit-mid-test-v.txt"}, nothing: true, reason: "TestSum started and never"},
		{files: []string{"go-pass-v-subtests-json.txt"}},
		{files: []string{"go-pass-v.txt", "go-exit-mid-test-v.txt"}, nothing: true, reason: "TestSum started and never"},
		{files: []string{"pytest-exit-at-collection.txt"}, nothing: true,
			reason: "pytest started a test session and printed no closing summary line"},
		{files: []string{"pytest-exit-at-collection-q.txt"}, pytest: true, nothing: true,
			reason: "the check runs pytest, and pytest printed no closing summary line"},
		{files: []string{"pytest-exit-at-collection-q.txt"}}, // no runner recognised: undecided
		{files: []string{"pytest-pass-qq.txt"}, pytest: true, nothing: true, reason: "-qq hides it"},
		{files: []string{"pytest-pass.txt"}, pytest: true},
		{files: []string{"pytest-pass-q.txt"}, pytest: true},
		{files: []string{"go-pass.txt"}},
		{files: []string{"go-pass-v.txt"}},
		{files: []string{"go-pass-cached.txt"}},
		{files: []string{"go-pass-cover.txt"}},
		{files: []string{"go-pass-json.txt"}},
		{files: []string{"go-run-none.txt"}, nothing: true, reason: "go test ran no test in any of its 2 packages"},
		{files: []string{"go-run-none-v.txt"}, nothing: true},
		{files: []string{"go-run-none-cached.txt"}, nothing: true},
		{files: []string{"go-run-none-cover.txt"}, nothing: true},
		{files: []string{"go-run-none-json.txt"}, nothing: true},
		{files: []string{"go-no-test-files.txt"}, nothing: true, reason: "its 1 package"},
		{files: []string{"go-no-test-files-json.txt"}, nothing: true},
		{files: []string{"go-args-rewritten.txt"}, nothing: true},
		{files: []string{"go-vet.txt"}}, // no runner: undecided
		{files: []string{"pytest-pass.txt"}},
		{files: []string{"pytest-pass-q.txt"}},
		{files: []string{"pytest-pass-and-skip-q.txt"}},
		{files: []string{"pytest-deselected.txt"}, nothing: true, reason: "pytest said: 2 deselected in"},
		{files: []string{"pytest-deselected-q.txt"}, nothing: true},
		{files: []string{"pytest-no-tests.txt"}, nothing: true, reason: "pytest said: no tests ran in"},
		{files: []string{"pytest-no-tests-q.txt"}, nothing: true},
		{files: []string{"pytest-all-skipped.txt"}, nothing: true, reason: "2 skipped"},
		{files: []string{"pytest-all-skipped-q.txt"}, nothing: true},
		{files: []string{"unittest-no-tests.txt"}, nothing: true, reason: "Ran 0 tests"},
		{files: []string{"unittest-pass.txt"}},
		{files: []string{"go-run-none.txt", "pytest-pass.txt"}},   // one runner tested something
		{files: []string{"go-pass.txt", "pytest-no-tests-q.txt"}}, // likewise
		{files: []string{"go-run-none.txt", "pytest-no-tests.txt"}, nothing: true, reason: "; pytest said"},
	}
	for _, c := range cases {
		name := strings.Join(c.files, "+")
		t.Run(name, func(t *testing.T) {
			var out []byte
			for _, f := range c.files {
				b, err := os.ReadFile(filepath.Join("testdata", "tested", f))
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, b...)
			}
			for _, chunk := range []int{len(out) + 1, 7, 1} {
				tt := testTally{pytest: c.pytest}
				for i := 0; i < len(out); i += chunk {
					tt.Write(out[i:min(i+chunk, len(out))])
				}
				nothing, reason := tt.nothing()
				if nothing != c.nothing || !strings.Contains(reason, c.reason) {
					t.Errorf("chunks of %d: nothing = %v (%q), want %v containing %q", chunk, nothing, reason, c.nothing, c.reason)
				}
			}
		})
	}
}

// TestTestTallyBoundedLines: an endless line costs at most testLineMax
// bytes, and the lines after it are still read.
func TestTestTallyBoundedLines(t *testing.T) {
	var tt testTally
	tt.Write([]byte(strings.Repeat("x", 10*testLineMax)))
	if cap(tt.line) > 2*testLineMax {
		t.Errorf("kept %d bytes of one line", cap(tt.line))
	}
	tt.Write([]byte("\nok  \texample.com/calc\t0.003s [no tests to run]\n"))
	if nothing, _ := tt.nothing(); !nothing {
		t.Errorf("the line after an over-long one was not read")
	}
}

// BenchmarkTestTally: the cost of reading a check's output for "tested
// nothing", per byte of real go test -v output (MB/s).
func BenchmarkTestTally(b *testing.B) {
	one, err := os.ReadFile(filepath.Join("testdata", "tested", "go-pass-v.txt"))
	if err != nil {
		b.Fatal(err)
	}
	out := []byte(strings.Repeat(string(one), 1<<20/len(one)+1)) // ~1 MiB
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		var tt testTally
		for i := 0; i < len(out); i += 32 << 10 { // the sandbox copies in 32 KiB chunks
			tt.Write(out[i:min(i+32<<10, len(out))])
		}
		tt.nothing()
	}
}
