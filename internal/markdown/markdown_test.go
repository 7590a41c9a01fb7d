package markdown

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestCodeOrQuoteLines: which lines are code or quoted, with the cases
// where a rule that toggles on any ``` or ~~~ line (the claims analyser's
// old one) and CommonMark disagree.
func TestCodeOrQuoteLines(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lines  []string
		hidden []int // indexes of the lines that are code or quoted
	}{
		{"plain prose", []string{"# Done", "", "All tests pass."}, nil},
		{"a closed backtick fence, fences included", []string{"Ran:", "```sh", "go test ./...", "```", "Tests pass."}, []int{1, 2, 3}},
		{"a closed tilde fence", []string{"~~~", "x", "~~~", "after"}, []int{0, 1, 2}},
		// the old rule closed the block at ``` and took "inside" for prose
		{"a four-backtick fence is closed only by four or more", []string{"````", "```", "inside", "````", "after"}, []int{0, 1, 2, 3}},
		// the old rule closed the block at ~~~ and took "inside" for prose
		{"a tilde line inside a backtick block", []string{"```", "~~~", "inside", "```", "after"}, []int{0, 1, 2, 3}},
		// the old rule opened a block at the indented ``` and hid "after"
		{"a fence indented four spaces is indented code, not a fence", []string{"text", "", "    ```", "", "after"}, []int{2}},
		{"an unclosed fence runs to the end", []string{"before", "```", "a", "", "b"}, []int{1, 2, 3, 4}},
		{"a closing fence with text after it does not close", []string{"```", "``` not a close", "inside", "```", "after"}, []int{0, 1, 2, 3}},
		{"backticks in a backtick info string are not a fence", []string{"``` a ` b", "prose"}, nil},
		{"indented code after a blank line", []string{"para", "", "    code", "    more", "", "after"}, []int{2, 3}},
		{"an indented line continuing a paragraph is prose", []string{"para", "    continued"}, nil},
		{"a nested list item is prose", []string{"- item", "    - nested"}, nil},
		{"a block quote and its lazy continuation", []string{"> quoted", "lazy", "", "mine"}, []int{0, 1}},
		{"a fence inside a list item", []string{"- step:", "  ```", "  code", "  ```", "- next"}, []int{1, 2, 3}},
		{"a fence inside a quote ends with the quote", []string{"> ```", "> code", "", "after"}, []int{0, 1}},
		{"blank lines after a block are not part of it", []string{"```", "x", "```", "", "", "after"}, []int{0, 1, 2}},
		{"empty text", []string{""}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CodeOrQuoteLines(strings.Join(tc.lines, "\n"))
			if len(got) != len(tc.lines) {
				t.Fatalf("%d flags for %d lines", len(got), len(tc.lines))
			}
			want := make([]bool, len(tc.lines))
			for _, i := range tc.hidden {
				want[i] = true
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("code or quoted:\n got %v\nwant %v\nfor %q", got, want, tc.lines)
			}
		})
	}
}

// hostileTexts are 64 KiB texts (the claims analyser's bound; a GitHub
// comment holds 65536 characters) of the deepest nesting markdown allows,
// which goldmark parses in time growing with the square of the depth.
var hostileTexts = []struct{ name, text string }{
	{"one line of >", strings.Repeat(">", 64<<10)},
	{"one line of list markers", strings.Repeat("- ", 32<<10) + "x"},
	{"one line of ordered markers", strings.Repeat("1. ", 21<<10) + "x"},
	{"lines of list markers to the bound", strings.Repeat(strings.Repeat("- ", 32)+"x\n", 64<<10/67)},
	{"lines of quotes to the bound", strings.Repeat(strings.Repeat("> ", 32)+"x\n", 64<<10/67)},
}

// TestCodeOrQuoteLinesDeepNesting: nesting past maxContainerPrefix is read
// as text, so a hostile text costs bounded time; the line flags still
// cover every line. (Unbounded, the first two took 7 s and 12 s.)
func TestCodeOrQuoteLinesDeepNesting(t *testing.T) {
	for _, tc := range hostileTexts {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			got := CodeOrQuoteLines(tc.text)
			if n := strings.Count(tc.text, "\n") + 1; len(got) != n {
				t.Errorf("%d flags for %d lines", len(got), n)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
	// a quote nested to the bound is still a quote
	if got := CodeOrQuoteLines(strings.Repeat("> ", 30) + "x\nafter\n\nmine"); !got[0] || !got[1] || got[3] {
		t.Errorf("deep quote: %v", got)
	}
}

func BenchmarkCodeOrQuoteLines(b *testing.B) {
	for _, tc := range hostileTexts {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.text)))
			for b.Loop() {
				CodeOrQuoteLines(tc.text)
			}
		})
	}
}
