package sandbox

import (
	"bytes"
	"regexp"
	"strings"
)

// Hiding the credentials a checkout leaves in a repository's git
// configuration (actions/checkout persists the job's token as an
// http.<url>.extraheader; a credential helper or a token URL does the same
// job elsewhere). The sandbox sees a sanitized copy of every git config
// file under a .git folder; see sanitizeGitConfig for what is removed.

// gitConfigNote is the first line of a sanitized config, so a person (or
// an agent) reading it knows why settings are missing.
const gitConfigNote = "# goalrun removed the credentials of this file for the sandbox (http.*.extraheader, credential.*, user:password@ in URLs, *token*/*password*/*secret* keys)\n"

// gitConfigMax bounds the size of a git config file goalrun sanitizes:
// 16 MiB, far beyond any real one (git itself reads them whole).
const gitConfigMax = 16 << 20

// isGitConfigFile reports whether rel (a slash path relative to the
// workspace) is one of git's config files inside a .git folder: the
// repository's config, a submodule's (.git/modules/…/config) or a
// worktree's config.worktree.
func isGitConfigFile(rel string) bool {
	parts := strings.Split(rel, "/")
	base := parts[len(parts)-1]
	if base != "config" && base != "config.worktree" {
		return false
	}
	for _, p := range parts[:len(parts)-1] {
		if p == ".git" {
			return true
		}
	}
	return false
}

// isGitPath reports whether rel (a slash path relative to the workspace)
// is a .git entry or lies inside one.
func isGitPath(rel string) bool {
	for _, p := range strings.Split(rel, "/") {
		if p == ".git" {
			return true
		}
	}
	return false
}

// urlUserinfo finds the user information of a URL: scheme://user[:password]@.
var urlUserinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*)://([^/@\s"'\\]+)@`)

// stripUserinfo removes credentials from the URLs in s: for http, https,
// ftp and ftps the whole user information (a token is often given as the
// user name alone: https://<token>@github.com/), for other schemes
// (ssh://git@host) the password only.
func stripUserinfo(s string) string {
	return urlUserinfo.ReplaceAllStringFunc(s, func(m string) string {
		sub := urlUserinfo.FindStringSubmatch(m)
		scheme, info := strings.ToLower(sub[1]), sub[2]
		switch scheme {
		case "http", "https", "ftp", "ftps":
			return sub[1] + "://"
		}
		if user, _, hasPass := strings.Cut(info, ":"); hasPass {
			return sub[1] + "://" + user + "@"
		}
		return m
	})
}

// secretKey reports whether a variable name (lower case, without its
// section) names a secret by itself (github.token, hub.oauthtoken,
// http.proxyPassword…).
func secretKey(name string) bool {
	for _, s := range []string{"token", "password", "passwd", "secret"} {
		if strings.Contains(name, s) {
			return true
		}
	}
	return false
}

// sanitizeGitConfig returns the git config b without its credentials, and
// whether anything was removed (then the result starts with
// gitConfigNote). It drops every credential section ([credential] and
// [credential "<url>"]: helpers, usernames), every http.extraheader
// (http.<url>.extraheader too: actions/checkout's token), and every
// variable whose name says token, password or secret; it removes the user
// information from URLs in values and in section names (remote URLs,
// url.<base>.insteadOf, http.proxy). Everything else is kept byte for
// byte. The syntax is git-config(1)'s: a header may carry a variable on
// the same line, a value may continue on the next line after a backslash;
// the deprecated [section.subsection] form is read too.
func sanitizeGitConfig(b []byte) ([]byte, bool) {
	var out bytes.Buffer
	changed := false
	section := ""        // current section name, lower case
	dropSection := false // inside a credential section
	dropping := false    // inside a dropped variable's continuation lines
	lines := bytes.SplitAfter(b, []byte("\n"))
	for _, raw := range lines {
		if len(raw) == 0 {
			continue
		}
		line := string(raw)
		body := strings.TrimRight(line, "\r\n")
		if dropping {
			changed = true
			dropping = continues(body)
			continue
		}
		trimmed := strings.TrimLeft(body, " \t")
		if strings.HasPrefix(trimmed, "[") {
			name, sub, rest, ok := parseGitHeader(trimmed)
			if ok {
				section = name
				dropSection = name == "credential"
				if dropSection {
					changed = true
					dropping = continues(rest)
					continue
				}
				header := body[:len(body)-len(rest)]
				if clean := stripUserinfo(sub); clean != sub {
					changed = true
					header = strings.Replace(header, sub, clean, 1)
				}
				restOut, drop := sanitizeVariable(section, rest)
				if drop || restOut != rest {
					changed = true
					if drop {
						restOut = ""
						dropping = continues(rest)
					}
				}
				out.WriteString(header + restOut + line[len(body):])
				continue
			}
		}
		if dropSection {
			if trimmed != "" && !strings.HasPrefix(trimmed, "#") && !strings.HasPrefix(trimmed, ";") {
				changed = true
				dropping = continues(body)
				continue
			}
			out.WriteString(line)
			continue
		}
		if trimmed == "" || strings.HasPrefix(trimmed, "#") || strings.HasPrefix(trimmed, ";") {
			out.WriteString(line)
			continue
		}
		clean, drop := sanitizeVariable(section, body)
		if drop {
			changed = true
			dropping = continues(body)
			continue
		}
		if clean != body {
			changed = true
		}
		out.WriteString(clean + line[len(body):])
	}
	if !changed {
		return b, false
	}
	return append([]byte(gitConfigNote), out.Bytes()...), true
}

// continues reports whether a config line goes on on the next line: it
// ends with a backslash that is not itself escaped.
func continues(line string) bool {
	n := 0
	for i := len(line) - 1; i >= 0 && line[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// sanitizeVariable looks at one variable line (possibly empty: the rest of
// a header line) of section: drop is true when it must go; otherwise the
// line is returned with the credentials of its URLs removed.
func sanitizeVariable(section, line string) (string, bool) {
	t := strings.TrimSpace(line)
	if t == "" {
		return line, false
	}
	name := t
	if i := strings.IndexAny(t, "= \t"); i >= 0 {
		name = t[:i]
	}
	name = strings.ToLower(name)
	if section == "http" && name == "extraheader" || secretKey(name) {
		return "", true
	}
	return stripUserinfo(line), false
}

// parseGitHeader reads a section header at the start of s ("[core]",
// `[remote "origin"]`, "[branch.main]"): the section's name in lower
// case, its subsection as written (between the quotes, escapes kept), and
// what follows the closing bracket. ok is false when s is no header.
func parseGitHeader(s string) (name, sub, rest string, ok bool) {
	if !strings.HasPrefix(s, "[") {
		return "", "", "", false
	}
	i := 1
	for i < len(s) && s[i] != ']' && s[i] != '"' && s[i] != ' ' && s[i] != '\t' {
		i++
	}
	name = s[1:i]
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	if i < len(s) && s[i] == '"' {
		start := i + 1
		i++
		for i < len(s) && s[i] != '"' {
			if s[i] == '\\' {
				i++
			}
			i++
		}
		if i >= len(s) {
			return "", "", "", false
		}
		sub = s[start:i]
		i++
	}
	if i >= len(s) || s[i] != ']' {
		return "", "", "", false
	}
	if dot := strings.IndexByte(name, '.'); sub == "" && dot >= 0 {
		name, sub = name[:dot], name[dot+1:]
	}
	return strings.ToLower(name), sub, s[i+1:], true
}
