// Package textcap bounds text: Cap and CapTail cut a text to a number of
// bytes of UTF-8 and mark the cut with a truncation marker that states the
// numbers, Fold puts a text on one line and Printable makes it safe for a
// terminal. The goalrun/1 document's caps (report) and the agents' bounded
// texts (goal/agent) share it, so a marker written by one is recognized by
// the other. It knows nothing of secrets: redact first (internal/redact).
package textcap

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// MarkerMaxBytes is the longest truncation marker Cap can append: the marker
// text with three 19-digit numbers (102 bytes). A capped text is at most its
// cap plus MarkerMaxBytes bytes.
const MarkerMaxBytes = len(markerOpen) + len(markerOf) + len(markerShown) + len(markerClose) + 3*19

const (
	markerOpen  = "…[truncated: "
	markerOf    = " of "
	markerShown = " bytes shown; "
	markerClose = " elided]…"
)

// Cap returns s cut to at most n bytes of UTF-8, on a rune boundary, keeping
// the start. A cut text ends with a marker that states the numbers:
//
//	…[truncated: 4096 of 912345 bytes shown; 908249 elided]…
//
// where "shown" is the bytes kept (≤ n: a multi-byte rune is never split, so
// it may be a little less) and "of" the length of the whole text. The marker
// is not counted in n; the result is at most n+MarkerMaxBytes bytes.
//
// Invalid UTF-8 in s is replaced with U+FFFD first, so the result is always
// valid UTF-8, and the numbers count bytes of the repaired text. Cap never
// redacts: redact (internal/redact's Redactor.Redact) before capping so a secret
// that straddles the cut is replaced whole.
//
// Cap is idempotent and composes: a text that already ends with its own
// marker is not marked twice; capping it again to a smaller n cuts the kept
// part and keeps the original total in the marker. n < 0 counts as 0.
func Cap(s string, n int) string { return capText(s, n, -1, false) }

// CapTail is Cap keeping the end of s instead of its start, for output tails
// (the end of a check's output is where its failure is). The marker comes
// first:
//
//	…[truncated: 512 of 9000 bytes shown; 8488 elided]…ok  example/calc 0.01s
//
// total is the length in bytes of the whole output s is the end of (for
// example a sandbox tail's total stream length); values below len(s) mean
// "s is the whole output". Everything else is as for Cap, with which it
// shares its implementation.
func CapTail(s string, total int64, n int) string {
	t := -1
	if total > 0 && total <= int64(^uint(0)>>1) {
		t = int(total)
	}
	return capText(s, n, t, true)
}

// capText is the one capping implementation behind Cap and CapTail.
// extTotal ≥ 0 overrides the total when it exceeds len(s) (and s carries no
// marker of its own).
func capText(s string, n, extTotal int, tail bool) string {
	if n < 0 {
		n = 0
	}
	s = validUTF8(s)
	content, total, marked := SplitMarker(s, tail)
	if !marked && extTotal > total {
		total = extTotal
	}
	if len(content) <= n {
		if marked || total == len(content) {
			return s
		}
		return WithMarker(content, total, tail)
	}
	var kept string
	if tail {
		i := len(content) - n
		for i < len(content) && !utf8.RuneStart(content[i]) {
			i++
		}
		kept = content[i:]
	} else {
		i := n
		for i > 0 && !utf8.RuneStart(content[i]) {
			i--
		}
		kept = content[:i]
	}
	return WithMarker(kept, total, tail)
}

// WithMarker joins kept and the marker for a text of total bytes.
func WithMarker(kept string, total int, tail bool) string {
	m := marker(len(kept), total)
	if tail {
		return m + kept
	}
	return kept + m
}

// marker returns the truncation marker for shown of total bytes.
func marker(shown, total int) string {
	b := make([]byte, 0, MarkerMaxBytes)
	b = append(b, markerOpen...)
	b = strconv.AppendInt(b, int64(shown), 10)
	b = append(b, markerOf...)
	b = strconv.AppendInt(b, int64(total), 10)
	b = append(b, markerShown...)
	b = strconv.AppendInt(b, int64(total-shown), 10)
	b = append(b, markerClose...)
	return string(b)
}

// SplitMarker recognizes Cap's own marker at the end of s (or, for tails, at
// the start) whose numbers agree with the text: shown equals the length of
// the rest and shown+elided equals total. It returns the text without the
// marker and the total the marker states; without a marker, s and len(s).
func SplitMarker(s string, tail bool) (content string, total int, marked bool) {
	var m string
	if tail {
		if !strings.HasPrefix(s, markerOpen) {
			return s, len(s), false
		}
		end := strings.Index(s, markerClose)
		if end < 0 {
			return s, len(s), false
		}
		m, content = s[:end+len(markerClose)], s[end+len(markerClose):]
	} else {
		if !strings.HasSuffix(s, markerClose) {
			return s, len(s), false
		}
		start := strings.LastIndex(s, markerOpen)
		if start < 0 {
			return s, len(s), false
		}
		content, m = s[:start], s[start:]
	}
	shown, tot, ok := parseMarker(m)
	if !ok || shown != len(content) || tot < shown {
		return s, len(s), false
	}
	return content, tot, true
}

// parseMarker reads the numbers of one marker; ok is false unless m is
// exactly a marker with consistent numbers.
func parseMarker(m string) (shown, total int, ok bool) {
	rest, found := strings.CutPrefix(m, markerOpen)
	if !found {
		return 0, 0, false
	}
	rest, found = strings.CutSuffix(rest, markerClose)
	if !found {
		return 0, 0, false
	}
	a, rest, found := strings.Cut(rest, markerOf)
	if !found {
		return 0, 0, false
	}
	b, c, found := strings.Cut(rest, markerShown)
	if !found {
		return 0, 0, false
	}
	x, err1 := strconv.Atoi(a)
	y, err2 := strconv.Atoi(b)
	z, err3 := strconv.Atoi(c)
	if err1 != nil || err2 != nil || err3 != nil || x < 0 || z < 0 || x+z != y {
		return 0, 0, false
	}
	return x, y, true
}

// Fold returns s on one line: every run of line breaks, tabs, other control
// characters (C0, DEL, C1) and the Unicode line and paragraph separators,
// with the spaces around it, becomes one space, and the ends are trimmed.
// Invalid UTF-8 is replaced with U+FFFD. Briefs, event messages and
// markdown table cells are folded.
func Fold(s string) string {
	valid := utf8.ValidString(s)
	if valid && !hasFoldable(s) && strings.TrimSpace(s) == s {
		return s
	}
	// One pass: repair (a run of invalid bytes becomes one U+FFFD, as
	// strings.ToValidUTF8 does), fold and trim.
	var b strings.Builder
	b.Grow(len(s))
	space, invalid := false, false
	emit := func() {
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			invalid = false
			if c < 0x20 || c == 0x7f || c == ' ' {
				space = true
				continue
			}
			emit()
			b.WriteByte(c)
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if r == utf8.RuneError && size == 1 {
			if !invalid {
				emit()
				b.WriteString("\uFFFD")
			}
			invalid = true
			continue
		}
		invalid = false
		if Foldable(r) {
			space = true
			continue
		}
		emit()
		b.WriteRune(r)
	}
	return b.String()
}

// validUTF8 returns s with invalid UTF-8 replaced by U+FFFD; valid text
// (the usual case, checked fast) is returned as it is.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// hasFoldable reports whether valid UTF-8 s holds a rune Fold folds; ASCII
// is checked a byte at a time.
func hasFoldable(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if Foldable(r) {
			return true
		}
		i += size
	}
	return false
}

// Printable returns s for a terminal or a CI log, line structure kept:
// every rune Fold would fold except newline and tab (C0 and C1 controls, so
// ANSI/OSC escape sequences lose their ESC; DEL; U+2028/U+2029) becomes
// U+FFFD, and invalid UTF-8 too.
func Printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r != '\n' && r != '\t' && Foldable(r) {
			return '\uFFFD'
		}
		return r
	}, validUTF8(s))
}

// Foldable reports whether Fold turns r into a space: C0 and C1 controls,
// DEL, and U+2028 and U+2029.
func Foldable(r rune) bool {
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u2028' || r == '\u2029'
}
