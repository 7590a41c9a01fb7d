package goal

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGoQuiet: what people see of a go test run goalrun made verbose reads
// like go test's usual output — the real -v output of a passing run
// becomes its package lines alone, and of a failing run keeps the failing
// tests' lines and messages but no "=== RUN" or passing test — whatever
// the chunking of the stream.
func TestGoQuiet(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", "tested", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := []struct {
		file       string
		want       []string // lines that must be shown, in order
		notWant    []string // substrings no shown line may hold
		sameAsLine int      // >0: exactly this many lines shown
	}{
		{file: "go-pass-v-subtests.txt", want: []string{"ok  \texample.com/calc", "?   \texample.com/calc/other"},
			notWant: []string{"=== ", "--- PASS", "--- SKIP", "calc_test.go", "PASS\n"}, sameAsLine: 2},
		{file: "go-pass-v.txt", want: []string{"ok  \texample.com/calc"}, sameAsLine: 2},
		{file: "go-run-none-v.txt", want: []string{"ok  \texample.com/calc\t0.003s [no tests to run]"},
			notWant: []string{"testing: warning"}, sameAsLine: 2},
		{file: "go-fail-v.txt", want: []string{"calc_test.go:15: Sum(-1, -1) = -2, want -3", "--- FAIL: TestSumWrong",
			"--- FAIL: TestSumWrong/negative", "FAIL\texample.com/calc"},
			notWant: []string{"=== ", "--- PASS", "checking Sum"}},
		{file: "go-pass-v-glued.txt", want: []string{"no newline\n", "progress: 50%\n", "ok  \texample.com/glued/calc"},
			notWant: []string{"=== ", "--- PASS"}, sameAsLine: 5},
		{file: "go-fail.txt", want: []string{"--- FAIL: TestSumWrong", "calc_test.go:15", "FAIL\texample.com/calc"}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			in := read(c.file)
			for _, chunk := range []int{len(in) + 1, 5, 1} {
				var got bytes.Buffer
				q := newGoQuiet(&got)
				for i := 0; i < len(in); i += chunk {
					q.Write(in[i:min(i+chunk, len(in))])
				}
				q.Close()
				out := got.String()
				at := 0
				for _, w := range c.want {
					i := strings.Index(out[at:], w)
					if i < 0 {
						t.Fatalf("chunks of %d: %q not shown (in order):\n%s", chunk, w, out)
					}
					at += i
				}
				for _, n := range c.notWant {
					if strings.Contains(out, n) {
						t.Errorf("chunks of %d: %q shown:\n%s", chunk, n, out)
					}
				}
				if c.sameAsLine > 0 && strings.Count(out, "\n") != c.sameAsLine {
					t.Errorf("chunks of %d: %d lines shown, want %d:\n%s", chunk, strings.Count(out, "\n"), c.sameAsLine, out)
				}
			}
		})
	}
}

// TestGoVerboseAsked: a check that asks for go test's verbose or JSON output
// itself is shown as it is.
func TestGoVerboseAsked(t *testing.T) {
	for check, want := range map[string]bool{
		"go test ./...":                   false,
		"go test -v ./...":                true,
		"go test -json ./... | tee log":   true,
		"sh -c 'go test -race ./...'":     false,
		"go test -run TestX -v=true ./x/": true,
	} {
		if got := goVerboseAsked(check); got != want {
			t.Errorf("goVerboseAsked(%q) = %v, want %v", check, got, want)
		}
	}
}
