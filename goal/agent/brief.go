package agent

import (
	"strings"
	"unicode/utf8"

	"github.com/goalrun/goalrun/goal/agent/internal/jsonscan"
)

// BriefKeys are the parameters a brief is taken from, in order: the first
// one present as a non-empty string wins (docs/goalrun-1.md, "Top-level fields").
var BriefKeys = []string{
	"command", "cmd", "file_path", "path", "url", "query", "pattern", "goal", "prompt",
	"expression", "subject", "name", "description", "content",
}

// BriefMax bounds a Tool.Brief in bytes: 4096. The document caps a brief at
// 160 bytes with a marker (report.BriefCap); this earlier, silent cut only
// keeps an event from carrying a whole file when the only identifying
// parameter is a file's content.
const BriefMax = 4096

// briefFrom returns the brief of a tool call's input object: the first
// BriefKeys member that is a non-empty string, whitespace folded. It never
// falls back to the whole object, which carries file contents.
func briefFrom(input jsonscan.Value) string {
	if input.Kind() != jsonscan.Object {
		return ""
	}
	best := len(BriefKeys)
	var val jsonscan.Value
	_ = input.Each(func(k []byte, v jsonscan.Value) bool {
		if v.Kind() != jsonscan.String || len(v) <= 2 {
			return true
		}
		for i := 0; i < best; i++ {
			if string(k) == BriefKeys[i] {
				best, val = i, v
				break
			}
		}
		return best != 0
	})
	if val == nil {
		return ""
	}
	// Decode at most a little more than BriefMax: a brief never needs more.
	if len(val) > 4*BriefMax {
		val = truncatedString(val, 4*BriefMax)
	}
	return foldBrief(val.Text())
}

// truncatedString returns the JSON string v cut to about n bytes of its
// body and closed again, so it still decodes (an escape cut in half is
// dropped).
func truncatedString(v jsonscan.Value, n int) jsonscan.Value {
	body := v[1 : len(v)-1]
	if len(body) <= n {
		return v
	}
	body = body[:n]
	// Do not end inside an escape sequence: drop a trailing partial one.
	if i := strings.LastIndexByte(string(body[max(0, len(body)-6):]), '\\'); i >= 0 {
		body = body[:max(0, len(body)-6)+i]
	}
	out := make([]byte, 0, len(body)+2)
	out = append(out, '"')
	out = append(out, body...)
	out = append(out, '"')
	return out
}

// foldBrief folds every run of whitespace (newlines included) into one
// space, trims the ends and cuts the result to BriefMax bytes on a rune
// boundary.
func foldBrief(s string) string {
	var b strings.Builder
	b.Grow(min(len(s), BriefMax))
	space := false
	for _, r := range s {
		if r == ' ' || r == '\n' || r == '\t' || r == '\r' || r == '\v' || r == '\f' {
			space = b.Len() > 0
			continue
		}
		if space {
			if b.Len()+1 > BriefMax {
				break
			}
			b.WriteByte(' ')
			space = false
		}
		if b.Len()+utf8.RuneLen(r) > BriefMax {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// unwrapShell returns the script of a command line of the form
// `/bin/bash -lc '<script>'` (how Codex reports its exec_command calls),
// decoding the shell quoting; any other command is returned unchanged.
func unwrapShell(cmd string) string {
	for _, prefix := range []string{"/bin/bash -lc ", "/bin/bash -c ", "bash -lc ", "bash -c ", "/bin/sh -c ", "sh -c ", "/bin/zsh -lc ", "zsh -lc "} {
		if rest, ok := strings.CutPrefix(cmd, prefix); ok {
			if s, ok := shellWord(rest); ok {
				return s
			}
			return cmd
		}
	}
	return cmd
}

// shellWord decodes s when it is exactly one POSIX shell word made of
// single-quoted parts, double-quoted parts (with \" \\ \$ \` escapes) and
// plain characters; ok is false otherwise (s has unquoted spaces or shell
// syntax, so it is not one word).
func shellWord(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); {
		switch c := s[i]; c {
		case '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return "", false
			}
			b.WriteString(s[i+1 : i+1+j])
			i += j + 2
		case '"':
			i++
			closed := false
			for i < len(s) {
				if s[i] == '"' {
					closed = true
					i++
					break
				}
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					b.WriteByte(s[i+1])
					i += 2
					continue
				}
				b.WriteByte(s[i])
				i++
			}
			if !closed {
				return "", false
			}
		case '\\':
			if i+1 >= len(s) {
				return "", false
			}
			b.WriteByte(s[i+1])
			i += 2
		case ' ', '\t', '\n', ';', '&', '|', '<', '>', '(', ')', '$', '`', '*', '?', '[', '#', '~':
			return "", false
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), true
}

// capBytes cuts s to at most n bytes on a rune boundary.
func capBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
