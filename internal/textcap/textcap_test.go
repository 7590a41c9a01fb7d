package textcap

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCap(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		n    int
		want string
	}{
		{"empty", "", 10, ""},
		{"fits", "hello", 5, "hello"},
		{"ascii cut", "hello world", 5, "hello…[truncated: 5 of 11 bytes shown; 6 elided]…"},
		{"zero cap", "abc", 0, "…[truncated: 0 of 3 bytes shown; 3 elided]…"},
		{"negative cap counts as zero", "abc", -4, "…[truncated: 0 of 3 bytes shown; 3 elided]…"},
		{"multi-byte rune not split", "héllo", 2, "h…[truncated: 1 of 6 bytes shown; 5 elided]…"},
		{"4-byte rune not split", "a😀b", 4, "a…[truncated: 1 of 6 bytes shown; 5 elided]…"},
		{"rune exactly at the cut", "a😀b", 5, "a😀…[truncated: 5 of 6 bytes shown; 1 elided]…"},
		{"invalid UTF-8 repaired when short", "a\xffb", 10, "a\uFFFDb"},
		{"a run of invalid bytes becomes one U+FFFD", "\xff\xfe\xfd", 4, "\uFFFD"},
		{"invalid UTF-8 repaired then cut", "\xffa\xfeb\xfd", 4, "\uFFFDa…[truncated: 4 of 11 bytes shown; 7 elided]…"},
		{"already capped is left alone", "hello…[truncated: 5 of 11 bytes shown; 6 elided]…", 5, "hello…[truncated: 5 of 11 bytes shown; 6 elided]…"},
		{"already capped, cut further keeps the total", "hello…[truncated: 5 of 11 bytes shown; 6 elided]…", 2, "he…[truncated: 2 of 11 bytes shown; 9 elided]…"},
		{"a marker with wrong numbers is text", "hi…[truncated: 9 of 11 bytes shown; 2 elided]…", 2, "hi…[truncated: 2 of 50 bytes shown; 48 elided]…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Cap(tc.in, tc.n)
			if got != tc.want {
				t.Errorf("Cap(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
			}
			if !utf8.ValidString(got) {
				t.Errorf("invalid UTF-8: %q", got)
			}
			if again := Cap(got, tc.n); again != got {
				t.Errorf("not idempotent: %q → %q", got, again)
			}
		})
	}
}

func TestCapTail(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    string
		total int64
		n     int
		want  string
	}{
		{"fits", "ok", 0, 10, "ok"},
		{"keeps the end", "line1\nline2\nFAIL", 0, 4, "…[truncated: 4 of 16 bytes shown; 12 elided]…FAIL"},
		{"rune not split at the start", "xé", 1, 1, "…[truncated: 0 of 3 bytes shown; 3 elided]…"},
		{"rune kept whole", "xéz", 0, 3, "…[truncated: 3 of 4 bytes shown; 1 elided]…éz"},
		{"a window of a longer stream says so even when it fits", "tail", 10485760, 512, "…[truncated: 4 of 10485760 bytes shown; 10485756 elided]…tail"},
		{"a window of a longer stream, cut", "abcdef", 1000, 2, "…[truncated: 2 of 1000 bytes shown; 998 elided]…ef"},
		{"total below the text length is ignored", "abcdef", 3, 2, "…[truncated: 2 of 6 bytes shown; 4 elided]…ef"},
		{"re-cap of a tail keeps the stream total", "…[truncated: 6 of 1000 bytes shown; 994 elided]…abcdef", 0, 2, "…[truncated: 2 of 1000 bytes shown; 998 elided]…ef"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CapTail(tc.in, tc.total, tc.n)
			if got != tc.want {
				t.Errorf("CapTail(%q, %d, %d) = %q, want %q", tc.in, tc.total, tc.n, got, tc.want)
			}
			if again := CapTail(got, 0, tc.n); again != got {
				t.Errorf("not idempotent: %q → %q", got, again)
			}
		})
	}
}

// TestCapBounds checks the byte bounds on many lengths and alphabets.
func TestCapBounds(t *testing.T) {
	units := []string{"a", "é", "€", "😀", "a\xff", "\x00"}
	for _, u := range units {
		for _, size := range []int{0, 1, 2, 3, 159, 160, 161, 4095, 4096, 4097, 10000} {
			for _, n := range []int{0, 1, 3, 160, 4096} {
				s := huge(u, size)
				for _, tail := range []bool{false, true} {
					var got string
					if tail {
						got = CapTail(s, 0, n)
					} else {
						got = Cap(s, n)
					}
					if len(got) > n+MarkerMaxBytes {
						t.Fatalf("unit %q size %d cap %d tail %v: %d bytes > cap+marker", u, size, n, tail, len(got))
					}
					if !utf8.ValidString(got) {
						t.Fatalf("unit %q size %d cap %d: invalid UTF-8", u, size, n)
					}
					content, total, marked := SplitMarker(got, tail)
					if marked && len(content) > n {
						t.Fatalf("kept %d bytes > cap %d", len(content), n)
					}
					if repaired := len(strings.ToValidUTF8(s, "\uFFFD")); marked && total != repaired {
						t.Fatalf("marker total %d, want %d", total, repaired)
					}
				}
			}
		}
	}
}

func TestMarkerMaxBytes(t *testing.T) {
	const maxInt = int(^uint(0) >> 1)
	if got := len(marker(maxInt/2, maxInt)); got > MarkerMaxBytes {
		t.Errorf("longest marker is %d bytes > MarkerMaxBytes %d", got, MarkerMaxBytes)
	}
	if MarkerMaxBytes != 101 {
		t.Errorf("MarkerMaxBytes = %d; the schema's maxLength values assume 101", MarkerMaxBytes)
	}
}

func TestFold(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "go test ./...", "go test ./..."},
		{"newlines", "line1\nline2\r\nline3\rline4", "line1 line2 line3 line4"},
		{"runs collapse", "a \n\n\t  b", "a b"},
		{"trimmed", "\n  a  \n", "a"},
		{"control and separators", "a\x00b\x1bc\u2028d\u0085e", "a b c d e"},
		{"invalid UTF-8", "a\xffb", "a\uFFFDb"},
		{"only space", " \n\t ", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Fold(tc.in); got != tc.want {
				t.Errorf("Fold(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestFoldMatchesToValidUTF8 pins Fold's repair to strings.ToValidUTF8's
// (a run of invalid bytes becomes one U+FFFD) on inputs with nothing to fold.
func TestFoldMatchesToValidUTF8(t *testing.T) {
	for _, s := range []string{"a\xffb", "\xff\xfe", "x\xff\xfey\xfdz", "é\xc3", "\xe2\x80", "ok"} {
		if got, want := Fold(s), strings.ToValidUTF8(s, "\uFFFD"); got != want {
			t.Errorf("Fold(%q) = %q, want %q", s, got, want)
		}
	}
	if got := Fold("a\xff\nb\xfe"); got != "a\uFFFD b\uFFFD" {
		t.Errorf("Fold = %q", got)
	}
}

func TestPrintable(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"lines and tabs kept", "a\n\tb", "a\n\tb"},
		{"ESC", "\x1b[2Jx", "\uFFFD[2Jx"},
		{"carriage return and BEL", "a\rb\a", "a\uFFFDb\uFFFD"},
		{"C1 and DEL", "a\u009b\x7fb", "a\uFFFD\uFFFDb"},
		{"line separator", "a\u2028b", "a\uFFFDb"},
		{"invalid UTF-8", "a\xffb", "a\uFFFDb"},
		{"plain", "héllo", "héllo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Printable(tc.in); got != tc.want {
				t.Errorf("Printable(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// huge returns unit repeated to n bytes, cut back to a rune boundary when
// unit is valid UTF-8 (so it may be up to 3 bytes shorter).
func huge(unit string, n int) string {
	s := strings.Repeat(unit, n/len(unit)+1)[:n]
	if utf8.ValidString(unit) {
		for len(s) > 0 && !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
	}
	return s
}
