package github

import (
	"fmt"
	"strings"
)

// DefaultTriggerPhrase starts a goalrun comment command.
const DefaultTriggerPhrase = "/goalrun"

// Trigger decides whether a comment event starts a run: the comment must
// have been created (not edited or deleted), hold the trigger phrase at the
// start of a line a reader sees (not inside a quote, a code block or an HTML
// comment; see findPhrase), and come from an author with write
// access — OWNER, MEMBER or COLLABORATOR by author_association — or from a
// bot listed in AllowedBots.
type Trigger struct {
	// Phrase is the trigger phrase ("" means DefaultTriggerPhrase).
	Phrase string
	// AllowedBots are bot logins allowed to trigger runs, with or without
	// the "[bot]" suffix ("dependabot", "renovate[bot]").
	AllowedBots []string
}

// Decision is what a comment event asks for.
type Decision struct {
	// Triggered is true when the comment holds the trigger phrase.
	Triggered bool
	// Allowed is true when its author may start a run.
	Allowed bool
	// Prompt is the text after the phrase (the rest of that line and every
	// following line), trimmed; "" means "use the prompt input".
	Prompt string
	// Reason explains a refusal or a skip, in plain words.
	Reason string
}

// writeAssociations are the author associations that imply write access.
var writeAssociations = map[string]bool{"OWNER": true, "MEMBER": true, "COLLABORATOR": true}

// Decide looks at ev's comment.
func (t Trigger) Decide(ev *Event) Decision {
	phrase := t.Phrase
	if phrase == "" {
		phrase = DefaultTriggerPhrase
	}
	c := ev.Comment
	if c == nil {
		return Decision{Reason: "the event is not a comment"}
	}
	if ev.Action != "" && ev.Action != "created" {
		return Decision{Reason: fmt.Sprintf("the comment was %s, not created", ev.Action)}
	}
	prompt, ok := findPhrase(c.Body, phrase)
	if !ok {
		return Decision{Reason: fmt.Sprintf("the comment does not start a line with %q", phrase)}
	}
	d := Decision{Triggered: true, Prompt: prompt}
	switch {
	case c.UserType == "Bot":
		if t.botAllowed(c.Login) {
			d.Allowed = true
		} else {
			d.Reason = fmt.Sprintf("@%s is a bot that is not listed in allowed-bots", c.Login)
		}
	case writeAssociations[c.AuthorAssociation]:
		d.Allowed = true
	default:
		d.Reason = fmt.Sprintf("@%s does not have write access to this repository (author association %s); only owners, members and collaborators can start goalrun",
			c.Login, strings.ToLower(orNone(c.AuthorAssociation)))
	}
	return d
}

func orNone(s string) string {
	if s == "" {
		return "NONE"
	}
	return s
}

func (t Trigger) botAllowed(login string) bool {
	name := strings.TrimSuffix(strings.ToLower(login), "[bot]")
	for _, b := range t.AllowedBots {
		if strings.TrimSuffix(strings.ToLower(strings.TrimSpace(b)), "[bot]") == name && name != "" {
			return true
		}
	}
	return false
}

// findPhrase finds phrase at the start of a line of body — after at most
// three spaces, as markdown reads a paragraph — followed by whitespace or
// the end, and returns the text after it. What a reader of the rendered
// comment does not see as a paragraph line never counts: HTML comments
// (`<!-- … -->`, removed first, also from the returned prompt, so a hidden
// instruction never reaches the agent; an unclosed one hides the rest),
// fenced code blocks (``` or ~~~, closed only by the same character at least
// as many times, per CommonMark), indented code (four spaces or a tab) and
// quoted lines (">").
func findPhrase(body, phrase string) (string, bool) {
	body = stripHTMLComments(strings.ReplaceAll(body, "\r\n", "\n"))
	lines := strings.Split(body, "\n")
	var fence string // the open fence's run of ` or ~, "" outside a block
	for i, line := range lines {
		indent, trimmed := leadingSpace(line)
		if run := fenceRun(trimmed); indent <= 3 && run != "" {
			switch {
			case fence == "":
				if run[0] == '`' && strings.Contains(trimmed[len(run):], "`") {
					break // not a fence: an info string may not hold a backtick
				}
				fence = run
				continue
			case run[0] == fence[0] && len(run) >= len(fence) && strings.TrimSpace(trimmed[len(run):]) == "":
				fence = ""
				continue
			}
		}
		if fence != "" || indent > 3 || !strings.HasPrefix(trimmed, phrase) {
			continue
		}
		rest := trimmed[len(phrase):]
		if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
			continue // "/goalrunner" is not "/goalrun"
		}
		prompt := strings.TrimSpace(rest)
		if tail := strings.TrimSpace(strings.Join(lines[i+1:], "\n")); tail != "" {
			if prompt != "" {
				prompt += "\n"
			}
			prompt += tail
		}
		return prompt, true
	}
	return "", false
}

// leadingSpace returns line's indentation in columns (a tab advances to
// the next multiple of four) and the line without it.
func leadingSpace(line string) (int, string) {
	col := 0
	for i, r := range line {
		switch r {
		case ' ':
			col++
		case '\t':
			col += 4 - col%4
		default:
			return col, line[i:]
		}
	}
	return col, ""
}

// fenceRun returns the run of three or more backticks or tildes s starts
// with, or "".
func fenceRun(s string) string {
	if s == "" || (s[0] != '`' && s[0] != '~') {
		return ""
	}
	n := 0
	for n < len(s) && s[n] == s[0] {
		n++
	}
	if n < 3 {
		return ""
	}
	return s[:n]
}

// stripHTMLComments removes every `<!-- … -->` from s; an unclosed one
// removes the rest of s (a comment block hides it all when rendered).
func stripHTMLComments(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "<!--")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		j := strings.Index(s[i+4:], "-->")
		if j < 0 {
			return b.String()
		}
		s = s[i+4+j+3:]
	}
}

// RefusalMessage is the polite reply to a comment whose author may not
// start a run.
func RefusalMessage(d Decision, login string) string {
	return fmt.Sprintf("Thanks for the request, @%s! goalrun did not start: %s. A maintainer can run it by commenting the same command.", login, d.Reason)
}
