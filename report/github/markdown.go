package github

import (
	"strings"

	"github.com/goalrun/goalrun/report"
)

// mdText makes text goalrun does not control — file names the agent chose,
// error messages quoting them — safe inline in the markdown goalrun writes
// (pull request bodies, job-summary notes), with the rule report's own
// rendering applies to agent text (report/markdown.go mdText; a test keeps
// the two equal): folded onto one line (report.Fold), markdown punctuation
// that could start emphasis, code, links, tables or strikethrough
// backslash-escaped, HTML's <, > and & as entities, and a zero-width space
// after an @ that starts a word so an @mention notifies no one.
func mdText(s string) string {
	rs := []rune(report.Fold(s))
	word := func(i int) bool {
		if i < 0 || i >= len(rs) {
			return false
		}
		r := rs[i]
		return ('0' <= r && r <= '9') || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || r >= 0x80
	}
	var b strings.Builder
	b.Grow(len(rs) + len(rs)/8)
	for i, r := range rs {
		switch r {
		case '\\', '`', '*', '[', ']', '|', '~':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '_':
			if !word(i-1) || !word(i+1) {
				b.WriteByte('\\')
			}
			b.WriteRune(r)
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '@':
			b.WriteRune('@')
			if !word(i - 1) {
				b.WriteString("\u200b")
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
