package report

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestUnmarkedAndShorten(t *testing.T) {
	long := strings.Repeat("é", 300)
	for _, tc := range []struct {
		name, in, want string
	}{
		{"a capped text ends plainly", Cap("abcdef", 3), "abc…"},
		{"a capped tail starts plainly", CapTail("0123456789", 0, 4), "…6789"},
		{"plain text unchanged", "all tests pass", "all tests pass"},
		{"a look-alike marker with wrong numbers is text", "x…[truncated: 9 of 9 bytes shown; 0 elided]…", "x…[truncated: 9 of 9 bytes shown; 0 elided]…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Unmarked(tc.in); got != tc.want {
				t.Errorf("Unmarked(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name string
		in   string
		n    int
		want string
	}{
		{"short enough", "hello", 10, "hello"},
		{"cut plainly", "hello world, this is long", 12, "hello wor…"},
		{"a marker never reaches the terminal", Cap(strings.Repeat("a", 50), 20), 200, strings.Repeat("a", 20) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Shorten(tc.in, tc.n)
			if got != tc.want || len(got) > tc.n {
				t.Errorf("Shorten(%q, %d) = %q, want %q (at most %d bytes)", tc.in, tc.n, got, tc.want, tc.n)
			}
		})
	}
	if got := Shorten(long, 101); !utf8.ValidString(got) || len(got) > 101 || strings.Contains(got, "truncated") {
		t.Errorf("Shorten of multi-byte text: %q", got)
	}
}

func TestWrap(t *testing.T) {
	got := Wrap("The check runs in a fresh container, not on this machine, so a command found here is not found there.\n\n  indented line kept", 40, "    ")
	want := "    The check runs in a fresh container,\n    not on this machine, so a command\n    found here is not found there.\n\n      indented line kept"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	for _, l := range strings.Split(got, "\n") {
		if utf8.RuneCountInString(l) > 40 {
			t.Errorf("line over 40 columns: %q", l)
		}
	}
	if got := Wrap(strings.Repeat("x", 60), 40, ""); got != strings.Repeat("x", 60) {
		t.Errorf("a long word is kept whole: %q", got)
	}
}

func TestTerminalText(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain text and tabs kept", "fixed Add\n\tand Mean", "fixed Add\n\tand Mean"},
		{"ANSI clear screen", "\x1b[2Jdone", "\uFFFD[2Jdone"},
		{"carriage return overwrite", "all tests pass\rFAIL", "all tests pass\uFFFDFAIL"},
		{"workflow command", "done\n::add-mask::x\n", "done\n:\u200b:add-mask::x\n"},
		{"indented workflow command", "  ::stop-commands::tok", "  :\u200b:stop-commands::tok"},
		{"old form", "##[set-output name=a]b", "#\u200b#[set-output name=a]b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := TerminalText(tc.in); got != tc.want {
				t.Errorf("TerminalText(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
