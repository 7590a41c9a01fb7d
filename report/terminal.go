package report

import (
	"strings"
	"unicode/utf8"

	"github.com/goalrun/goalrun/internal/textcap"
)

// Text for a terminal or a CI log: what people read, never parsed. It
// carries no truncation markers (a cut is a plain "…"), no control
// characters, and no line a CI runner would obey as a workflow command.

// Ellipsis marks a plain cut in terminal text.
const Ellipsis = "…"

// Unmarked returns s without Cap's truncation marker: a text cut at its end
// ends with Ellipsis instead, an output tail cut at its start (CapTail)
// begins with it. Text without a marker is returned as it is.
func Unmarked(s string) string {
	if content, _, ok := textcap.SplitMarker(s, true); ok {
		return Ellipsis + content
	}
	if content, _, ok := textcap.SplitMarker(s, false); ok {
		return content + Ellipsis
	}
	return s
}

// Shorten returns s cut to at most n bytes on a rune boundary, ending with
// Ellipsis when it was cut (and first without a truncation marker).
func Shorten(s string, n int) string {
	s = Unmarked(strings.ToValidUTF8(s, "\uFFFD"))
	if len(s) <= n {
		return s
	}
	i := n - len(Ellipsis)
	if i < 0 {
		i = 0
	}
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return strings.TrimRight(s[:i], " ") + Ellipsis
}

// TerminalText makes text that an agent or a check may have written safe to
// print on a terminal or in a CI log: control characters other than
// newline and tab become U+FFFD (Printable), and a line that would read as
// a GitHub Actions workflow command ("::add-mask::…", "::stop-commands::…",
// the older "##[…]" form; leading blanks ignored) gets a zero-width space
// after its first character, so a goalrun step in a workflow never obeys
// the agent.
func TerminalText(s string) string {
	s = Printable(s)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		t := strings.TrimLeft(l, " \t")
		if strings.HasPrefix(t, "::") || strings.HasPrefix(t, "##[") {
			lead := len(l) - len(t)
			lines[i] = l[:lead+1] + "\u200b" + l[lead+1:]
		}
	}
	return strings.Join(lines, "\n")
}

// Wrap breaks each line of s at spaces so that no line is longer than
// width columns (a word longer than that stays whole on its own line), and
// starts every line with indent (width includes it). Columns are counted in
// runes. Blank lines are kept.
func Wrap(s string, width int, indent string) string {
	var out strings.Builder
	room := width - utf8.RuneCountInString(indent)
	if room < 20 {
		room = 20
	}
	for i, line := range strings.Split(s, "\n") {
		if i > 0 {
			out.WriteByte('\n')
		}
		line = strings.TrimRight(line, " \t")
		if line == "" {
			continue
		}
		// Keep the line's own leading blanks (code, indented output).
		lead := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
		words := strings.Fields(line)
		col := 0
		out.WriteString(indent + lead)
		col = utf8.RuneCountInString(lead)
		for j, w := range words {
			n := utf8.RuneCountInString(w)
			if j > 0 && col+1+n > room {
				out.WriteString("\n" + indent + lead)
				col = utf8.RuneCountInString(lead)
			} else if j > 0 {
				out.WriteByte(' ')
				col++
			}
			out.WriteString(w)
			col += n
		}
	}
	return out.String()
}
