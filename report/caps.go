package report

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Caps of the goalrun/1 document (README.md, "Limits";
// docs/goalrun-1.schema.json). Text caps are in bytes of UTF-8 and bound the
// text that is kept; a cut text also carries the truncation marker (see Cap),
// which is not counted in the cap and is at most MarkerMaxBytes long.
const (
	// SummaryCap bounds "summary" (result shape) and "message" (failure and
	// startup-error shapes): 4096 bytes.
	SummaryCap = 4096
	// BriefCap bounds a receipt "brief", a claim excerpt, "goal.check" and
	// the "message" of a non-text event: 160 bytes.
	BriefCap = 160
	// TextEventCap bounds the "message" of a "text" event: 640 bytes.
	TextEventCap = 640
	// TailCap bounds a check-output tail in "iterations[].check.tail": 512
	// bytes, the end of the output.
	TailCap = 512
	// SetupMax bounds "setup": 16 steps, the first ones.
	SetupMax = 16
	// FailuresCap bounds "iterations[].check.failures": 512 bytes, the
	// start of the failing tests' lines.
	FailuresCap = 512
	// SampleMax bounds "receipts.sample": 8 items, failures first.
	SampleMax = 8
	// ByToolMax bounds the keys of "receipts.by_tool": 32 keys, the
	// "(other)" key included.
	ByToolMax = 32
	// ClaimsMax bounds "ungrounded_claims": 8 items.
	ClaimsMax = 8
	// IterHead and IterTail bound "iterations": the first 1 and the last 5
	// are kept, the rest counted in "iterations_omitted".
	IterHead = 1
	IterTail = 5
	// ModelsServedMax bounds "models_served": 8 items.
	ModelsServedMax = 8
	// RiskyPathsMax bounds "changes.risky_paths": 16 paths.
	RiskyPathsMax = 16
	// ChangedPathsMax bounds "changes.paths": 16 paths.
	ChangedPathsMax = 16
	// DocumentBytes bounds the whole encoded document: 32768 bytes, a hard
	// guarantee of Encode for any input.
	DocumentBytes = 32768
)

// goalrun's own caps for fields the outside limits leave open. They are
// goalrun/1 limits too (the schema states them), chosen to keep the document
// small; they are not outside limits.
const (
	// ReasonCap bounds "goal.halt_reason", "judge.reason",
	// "sandbox.fallback_notice" and each suggestion: 640 bytes.
	ReasonCap = 640
	// NameCap bounds identifiers: a tool name (a "by_tool" key or a sample's
	// "tool"), "via", agent name/version/session id, model ids, a posture
	// string, an allowlist entry, a risky path, a secret's name, a
	// cause-specific field's name: 160 bytes.
	NameCap = 160
	// SuggestionsMax bounds "suggestions": 8 sentences.
	SuggestionsMax = 8
	// GitExecutableMax bounds "changes.git_executable": 8 entries (the
	// tracker collapses them per folder and counts the rest in the last).
	// They head "changes.risky_paths" and are never cut from it: 8 < 16.
	GitExecutableMax = 8
	// FailureFieldsMax bounds the cause-specific fields of "failure": 16.
	FailureFieldsMax = 16
	// TimingsPrepareMax bounds the kinds of one-time work in
	// "timings.prepare": 8.
	TimingsPrepareMax = 8
	// ListMax bounds the posture lists that no outside limit bounds
	// ("egress_allowlist", "cap_drop", "secrets_in_sandbox"): 64 items; the
	// encoder shrinks them further only under DocumentBytes pressure.
	ListMax = 64
)

// OtherTool is the "receipts.by_tool" key that counts every tool beyond the
// first ByToolMax-1.
const OtherTool = "(other)"

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
// redacts: redact (Redactor.Redact) before capping so a secret that straddles
// the cut is replaced whole.
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
	content, total, marked := splitMarker(s, tail)
	if !marked && extTotal > total {
		total = extTotal
	}
	if len(content) <= n {
		if marked || total == len(content) {
			return s
		}
		return withMarker(content, total, tail)
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
	return withMarker(kept, total, tail)
}

// withMarker joins kept and the marker for a text of total bytes.
func withMarker(kept string, total int, tail bool) string {
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

// splitMarker recognizes Cap's own marker at the end of s (or, for tails, at
// the start) whose numbers agree with the text: shown equals the length of
// the rest and shown+elided equals total. It returns the text without the
// marker and the total the marker states; without a marker, s and len(s).
func splitMarker(s string, tail bool) (content string, total int, marked bool) {
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
		if foldable(r) {
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
		if foldable(r) {
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
		if r != '\n' && r != '\t' && foldable(r) {
			return '\uFFFD'
		}
		return r
	}, validUTF8(s))
}

// foldable reports whether Fold turns r into a space.
func foldable(r rune) bool {
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u2028' || r == '\u2029'
}

// Brief returns the one-line gist of a tool call's identifying parameter:
// redacted with r (nil: no redaction), folded onto one line (Fold) and
// capped at BriefCap (docs/goalrun-1.md: "a brief … folded onto one line and
// capped").
func Brief(r *Redactor, s string) string {
	return Cap(Fold(r.Redact(s)), BriefCap)
}
