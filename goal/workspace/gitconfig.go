package workspace

import (
	"strings"
)

// gitConfigEntry is one variable of a git configuration file: section and
// key lower-cased (git compares them without case), the subsection as
// written ([includeIf "gitdir:…"], [filter "lfs"]), the value after quote
// and escape removal ("" and blank for a bare "key", which git reads as
// true).
type gitConfigEntry struct {
	section, subsection, key, value string
	blank                           bool
}

// parseGitConfig reads git's configuration syntax (git-config(1),
// "CONFIGURATION FILE"): [section], [section "subsection"], the deprecated
// [section.subsection], "key = value" and bare "key" lines, a section
// header followed by a variable on the same line, # and ; comments outside
// quotes, double quotes, the escapes \" \\ \n \t \b, and backslash-newline
// continuations. It never fails: a malformed line is skipped, as this
// reader only widens what goalrun watches (the files a baseline
// configuration names), never narrows it.
//
// No library is used: the Go git-config readers either panic on malformed
// escapes or follow gcfg's grammar rather than git's.
func parseGitConfig(data []byte) []gitConfigEntry {
	var out []gitConfigEntry
	s := string(data)
	section, sub := "", ""
	i := 0
	for i < len(s) {
		// Skip blanks (also blank lines).
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n') {
			i++
		}
		if i >= len(s) {
			break
		}
		switch c := s[i]; {
		case c == '#' || c == ';':
			i = skipLine(s, i)
		case c == '[':
			j := i + 1
			for j < len(s) && s[j] != ']' && s[j] != '\n' && s[j] != '"' && s[j] != ' ' && s[j] != '\t' {
				j++
			}
			name := s[i+1 : j]
			section, sub = strings.ToLower(name), ""
			if dot := strings.IndexByte(name, '.'); dot >= 0 { // [section.subsection]
				section, sub = strings.ToLower(name[:dot]), strings.ToLower(name[dot+1:])
			}
			for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
				j++
			}
			if j < len(s) && s[j] == '"' {
				var b strings.Builder
				j++
				for j < len(s) && s[j] != '"' && s[j] != '\n' {
					if s[j] == '\\' && j+1 < len(s) && s[j+1] != '\n' {
						j++
					}
					b.WriteByte(s[j])
					j++
				}
				sub = b.String()
				if j < len(s) && s[j] == '"' {
					j++
				}
			}
			for j < len(s) && s[j] != ']' && s[j] != '\n' {
				j++
			}
			if j >= len(s) || s[j] != ']' {
				section, sub = "", "" // a broken header: what follows has no section
				i = skipLine(s, i)
				continue
			}
			i = j + 1
		default:
			j := i
			for j < len(s) && (isAlnum(s[j]) || s[j] == '-') {
				j++
			}
			if j == i { // not a variable name
				i = skipLine(s, i)
				continue
			}
			key := strings.ToLower(s[i:j])
			for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
				j++
			}
			if j >= len(s) || s[j] == '\n' || s[j] == '#' || s[j] == ';' || s[j] == '\r' {
				if section != "" {
					out = append(out, gitConfigEntry{section: section, subsection: sub, key: key, blank: true})
				}
				i = skipLine(s, j)
				continue
			}
			if s[j] != '=' {
				i = skipLine(s, i)
				continue
			}
			value, next := gitConfigValue(s, j+1)
			if section != "" {
				out = append(out, gitConfigEntry{section: section, subsection: sub, key: key, value: value})
			}
			i = next
		}
	}
	return out
}

// gitConfigValue reads a value starting at i (after the '='), up to the
// end of its line (continuations joined), and returns it and the index
// after it.
func gitConfigValue(s string, i int) (string, int) {
	var b strings.Builder
	quoted := false
	pendingSpace := 0 // blanks kept only when something follows them
	started := false
	for i < len(s) {
		c := s[i]
		switch {
		case c == '\n':
			return b.String(), i + 1
		case !quoted && (c == '#' || c == ';'):
			return b.String(), skipLine(s, i)
		case c == '\\' && i+1 < len(s):
			i++
			switch s[i] {
			case '\n':
				i++
				continue
			case 'n':
				c = '\n'
			case 't':
				c = '\t'
			case 'b':
				c = '\b'
			default:
				c = s[i]
			}
		case c == '"':
			quoted = !quoted
			i++
			continue
		case !quoted && (c == ' ' || c == '\t' || c == '\r'):
			if started {
				pendingSpace++
			}
			i++
			continue
		}
		for ; pendingSpace > 0; pendingSpace-- {
			b.WriteByte(' ')
		}
		b.WriteByte(c)
		started = true
		i++
	}
	return b.String(), i
}

func skipLine(s string, i int) int {
	for i < len(s) && s[i] != '\n' {
		i++
	}
	return i
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// gitExecKey says whether a configuration variable makes git run a program
// (its value is a command) or read other files that can (include paths,
// hooks folder, attributes file), and which: "command", "include",
// "hooks", "attributes"; "" otherwise. The list follows git-config(1).
func gitExecKey(e gitConfigEntry) string {
	switch e.section + "." + e.key {
	case "include.path", "includeif.path":
		return "include"
	case "core.hookspath":
		return "hooks"
	case "core.attributesfile":
		return "attributes"
	case "core.fsmonitor", "core.sshcommand", "core.askpass", "core.editor", "core.pager", "core.gitproxy",
		"sequence.editor", "diff.external", "credential.helper", "gpg.program", "filter.clean", "filter.smudge",
		"filter.process", "diff.command", "diff.textconv", "merge.driver", "interactive.difffilter",
		"uploadpack.packobjectshook", "remote.uploadpack", "remote.receivepack":
		return "command"
	}
	switch {
	case e.section == "alias" && strings.HasPrefix(strings.TrimSpace(e.value), "!"),
		e.section == "pager", e.section == "gpg" && e.key == "program",
		e.section == "difftool" && e.key == "cmd", e.section == "mergetool" && e.key == "cmd",
		e.section == "submodule" && e.key == "update" && strings.HasPrefix(strings.TrimSpace(e.value), "!"):
		return "command"
	}
	return ""
}
