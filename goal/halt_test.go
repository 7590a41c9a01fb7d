package goal

import (
	"strings"
	"testing"

	"github.com/goalrun/goalrun/report"
)

func TestFailingTests(t *testing.T) {
	cases := []struct {
		name string
		out  string
		want []string
	}{
		{"go test", "=== RUN   TestSum\n--- FAIL: TestSum (0.00s)\n    calc_test.go:9: got 1, want 3\n--- FAIL: TestSub/neg (0.01s)\nFAIL\nFAIL\texample.com/calc\t0.012s\nFAIL\n",
			[]string{"go:TestSub/neg", "go:TestSum", "gopkg:example.com/calc"}},
		{"go build failure", "# example.com/calc\n./calc.go:4:2: undefined: x\nFAIL\texample.com/calc [build failed]\n",
			[]string{"gopkg:example.com/calc"}},
		{"go panic", "panic: runtime error: index out of range [3] with length 3\n\ngoroutine 7 [running]:\n", []string{"panic:runtime error: index out of range [3] with length 3"}},
		{"pytest", "FAILED tests/test_a.py::test_one - AssertionError: assert 1 == 2\nERROR tests/test_b.py::test_two - ValueError\n=== 1 failed, 1 error in 0.12s ===\n",
			[]string{"pytest:tests/test_a.py::test_one", "pytest:tests/test_b.py::test_two"}},
		{"unittest", "FAIL: test_add (test_calc.TestCalc)\n----\nRan 3 tests in 0.001s\n", []string{"unittest:test_add (test_calc.TestCalc)"}},
		{"jest", " FAIL  src/sum.test.js\n  ● sum › adds negatives\n\n    expect(received).toBe(expected)\n  ✕ adds negatives (3 ms)\nTests: 1 failed, 3 passed\n",
			[]string{"jest:adds negatives", "jest:sum › adds negatives", "jestfile:src/sum.test.js"}},
		{"cargo", "test tests::it_works ... FAILED\ntest tests::other ... ok\n", []string{"cargo:tests::it_works"}},
		{"rspec", "rspec ./spec/calc_spec.rb:12 # Calc adds\n", []string{"rspec:./spec/calc_spec.rb:12"}},
		{"nothing recognisable", "make: *** [all] Error 1\n", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := FailingTests(c.out)
			if strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Errorf("FailingTests = %q, want %q", got, c.want)
			}
		})
	}
}

func TestDescribeFailing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		names []string
		want  string
	}{
		{"nothing", nil, ""},
		{"one go test in its package", []string{"go:TestWords", "gopkg:example.com/p1"}, "TestWords failing in example.com/p1"},
		{"two tests", []string{"go:TestMean", "go:TestSum", "gopkg:example.com/calc"}, "TestMean and TestSum failing in example.com/calc"},
		{"many tests are counted", []string{"go:TestA", "go:TestB", "go:TestC", "go:TestD", "go:TestE"}, "TestA, TestB, TestC and 2 more failing"},
		{"subtests fold into their parent", []string{"go:TestMean", "go:TestMean/one", "go:TestMean/one/deep", "go:TestSum/negative", "gopkg:example.com/calc"},
			"TestMean and TestSum/negative failing in example.com/calc"},
		{"a build failure names only the package", []string{"gopkg:example.com/calc"}, "failures in example.com/calc"},
		{"pytest", []string{"pytest:tests/test_a.py::test_one"}, "tests/test_a.py::test_one failing"},
		{"a panic", []string{"panic:runtime error: index out of range [3] with length 3"}, "a panic (runtime error: index out of range [3] with length 3)"},
		{"a compile error", []string{"compile:./calc.go:4:2: undefined: x"}, "a build error (./calc.go:4:2: undefined: x)"},
		{"jest file and test", []string{"jest:adds negatives", "jestfile:src/sum.test.js"}, "adds negatives failing in src/sum.test.js"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := DescribeFailing(tc.names)
			if got != tc.want {
				t.Errorf("DescribeFailing(%q) = %q, want %q", tc.names, got, tc.want)
			}
			if strings.Contains(got, " go:") || strings.Contains(got, "gopkg:") || strings.Contains(got, "compile:") {
				t.Errorf("internal prefix shown: %q", got)
			}
		})
	}
}

func TestFailureFingerprintIgnoresNoise(t *testing.T) {
	same := []struct{ a, b string }{
		{"--- FAIL: TestSum (0.00s)\nFAIL\texample.com/calc\t0.012s\n", "--- FAIL: TestSum (1.37s)\nFAIL\texample.com/calc\t2.5s\n"},
		{"some tool failed at 0xc000123456 in /tmp/go-build1234/b001/x.test\n", "some tool failed at 0xc000999999 in /tmp/go-build9876/b001/x.test\n"},
		{"2026-11-29T18:03:16.451Z error: connect 127.0.0.1:41235 refused (pid 4242)\n", "2026-11-30T01:00:00Z error: connect 127.0.0.1:55555 refused (pid 17)\n"},
		{"goroutine 17 [running]:\nrandom seed 12345\n", "goroutine 99 [running]:\nrandom seed 777\n"},
	}
	for i, c := range same {
		fa, _ := FailureFingerprint(1, false, c.a)
		fb, _ := FailureFingerprint(1, false, c.b)
		if fa != fb {
			t.Errorf("case %d: fingerprints differ for the same failure:\n%q\n%q", i, NormalizeCheckOutput(c.a), NormalizeCheckOutput(c.b))
		}
	}
	base := "--- FAIL: TestSum (0.00s)\n"
	f0, desc := FailureFingerprint(1, false, base)
	if desc != "the check exited 1 with TestSum failing" {
		t.Errorf("description = %q", desc)
	}
	for name, other := range map[string]func() string{
		"another test":  func() string { f, _ := FailureFingerprint(1, false, "--- FAIL: TestSub (0.00s)\n"); return f },
		"another exit":  func() string { f, _ := FailureFingerprint(2, false, base); return f },
		"timed out":     func() string { f, _ := FailureFingerprint(1, true, base); return f },
		"another error": func() string { f, _ := FailureFingerprint(1, false, "make: *** [x] Error 2\n"); return f },
	} {
		if other() == f0 {
			t.Errorf("%s: same fingerprint", name)
		}
	}
}

func TestHaltsNoProgress(t *testing.T) {
	failing := "--- FAIL: TestSum (0.00s)\nFAIL\texample.com/calc\t0.01s\n"
	type step struct {
		iter  int
		tail  string
		state string
		want  string
	}
	cases := []struct {
		name  string
		turns int
		steps []step
	}{
		{"idle agent halts after two idle turns", 0, []step{
			{0, failing, "S0", ""}, {1, failing, "S0", ""}, {2, "--- FAIL: TestSum (0.31s)\nFAIL\texample.com/calc\t2.5s\n", "S0", report.HaltNoProgress}}},
		{"changing workspace is progress", 0, []step{
			{0, failing, "S0", ""}, {1, failing, "S1", ""}, {2, failing, "S2", ""}, {3, failing, "S3", ""}}},
		{"different failure is progress", 0, []step{
			{0, failing, "S0", ""}, {1, "--- FAIL: TestSub (0.00s)\n", "S0", ""}, {2, failing, "S0", ""}, {3, failing, "S0", ""}, {4, failing, "S0", report.HaltNoProgress}}},
		{"window of three", 3, []step{
			{0, failing, "S0", ""}, {1, failing, "S0", ""}, {2, failing, "S0", ""}, {3, failing, "S0", report.HaltNoProgress}}},
		{"no iteration 0: the first turn sets the reference", 0, []step{
			{1, failing, "S0", ""}, {2, failing, "S0", ""}, {3, failing, "S0", report.HaltNoProgress}}},
		{"switched off", -1, []step{
			{0, failing, "S0", ""}, {1, failing, "S0", ""}, {2, failing, "S0", ""}, {3, failing, "S0", ""}}},
		{"no workspace fingerprint: off", 0, []step{
			{0, failing, "", ""}, {1, failing, "", ""}, {2, failing, "", ""}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := NewHalts(HaltOptions{NoProgressTurns: c.turns})
			for _, s := range c.steps {
				halt, reason := h.AfterTurn(TurnFacts{Iteration: s.iter, CheckRan: true, CheckExit: 1, CheckTail: s.tail, State: s.state})
				if halt != s.want {
					t.Fatalf("iteration %d: halt %q (%s), want %q", s.iter, halt, reason, s.want)
				}
				if halt != "" && (!strings.Contains(reason, "the check exited 1 with TestSum failing in example.com/calc each time") || !strings.Contains(reason, "did not change")) {
					t.Errorf("reason = %q", reason)
				}
			}
		})
	}
}

func TestHaltsNoProgressJudgeOnly(t *testing.T) {
	h := NewHalts(HaltOptions{})
	for i, want := range []string{"", "", report.HaltNoProgress} {
		if halt, _ := h.AfterTurn(TurnFacts{Iteration: i + 1, State: "S"}); halt != want {
			t.Fatalf("turn %d: %q, want %q", i+1, halt, want)
		}
	}
}

func TestHaltsBudget(t *testing.T) {
	cases := []struct {
		name  string
		opt   HaltOptions
		usage report.Usage
		want  string
		words string
	}{
		{"no limits", HaltOptions{}, report.Usage{InputTokens: 1e9, CostUSD: 1e6}, "", ""},
		{"under the cost", HaltOptions{MaxCostUSD: 1}, report.Usage{CostUSD: 0.99}, "", ""},
		{"at the cost is not over", HaltOptions{MaxCostUSD: 1}, report.Usage{CostUSD: 1}, "", ""},
		{"over the cost", HaltOptions{MaxCostUSD: 0.5}, report.Usage{CostUSD: 0.5001}, report.HaltBudget, "--max-cost-usd"},
		{"over the tokens", HaltOptions{MaxTokens: 1000}, report.Usage{InputTokens: 900, OutputTokens: 101}, report.HaltBudget, "1001 tokens"},
		{"tokens under", HaltOptions{MaxTokens: 1000}, report.Usage{InputTokens: 900, OutputTokens: 100}, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			halt, reason := NewHalts(c.opt).Budget(c.usage)
			if halt != c.want || !strings.Contains(reason, c.words) {
				t.Errorf("Budget = %q, %q; want %q containing %q", halt, reason, c.want, c.words)
			}
		})
	}
}
