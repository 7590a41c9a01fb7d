package ghreport

import (
	"context"
	"errors"
	"fmt"
	"strings"

	gh "github.com/google/go-github/v75/github"

	"github.com/goalrun/goalrun/internal/markdown"
)

// DefaultTriggerPhrase starts a goalrun comment command.
const DefaultTriggerPhrase = "/goalrun"

// Trigger decides whether a comment event starts a run: the comment must
// have been created (not edited or deleted), hold the trigger phrase at the
// start of a line a reader sees (not inside a quote, a code block or an HTML
// comment; see findPhrase), and come from a person with write access to
// the repository — the write, maintain or admin role by the collaborator
// permission API (Permission) — or from a bot listed in AllowedBots.
// author_association (OWNER, MEMBER, COLLABORATOR) decides only when the
// permission API cannot be asked or refuses: it is not a permission (a
// private organisation's members arrive as CONTRIBUTOR).
type Trigger struct {
	// Phrase is the trigger phrase ("" means DefaultTriggerPhrase).
	Phrase string
	// AllowedBots are bot logins allowed to trigger runs, with or without
	// the "[bot]" suffix ("dependabot", "renovate[bot]").
	AllowedBots []string
	// Permission returns a login's role on the repository ("admin",
	// "maintain", "write", "triage", "read", "none"; see
	// CollaboratorPermission); nil, or an error, falls back to
	// author_association.
	Permission func(login string) (string, error)
}

// writeRoles are the repository roles that may start a run.
var writeRoles = map[string]bool{"admin": true, "maintain": true, "write": true}

// CollaboratorPermission asks GitHub's collaborator permission API
// (GET /repos/{owner}/{repo}/collaborators/{username}/permission) for
// login's role on the repository: role_name ("admin", "maintain", "write",
// "triage", "read"), else the legacy permission level. Any failure — the
// token may not ask, the user is unknown — is an error.
func CollaboratorPermission(ctx context.Context, client *gh.Client, owner, repo, login string, retry Retry) (string, error) {
	var lvl *gh.RepositoryPermissionLevel
	err := retry.Do(ctx, func(ctx context.Context) error {
		var err error
		lvl, _, err = client.Repositories.GetPermissionLevel(ctx, owner, repo, login)
		return err
	})
	if err != nil {
		return "", classify(err, "read @"+login+"'s permission on "+owner+"/"+repo, "metadata: read")
	}
	if r := strings.ToLower(lvl.GetRoleName()); r != "" {
		return r, nil
	}
	if p := strings.ToLower(lvl.GetPermission()); p != "" {
		return p, nil
	}
	return "", errors.New("the collaborator permission API named no role for @" + login)
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
	// Via says how the author's right was decided: "collaborator
	// permission write", "allowed-bots", or "author association MEMBER"
	// when the permission API could not answer.
	Via string
	// Fallback is why the permission API could not decide ("" when it did
	// or was not asked); the caller warns with it.
	Fallback string
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
	if c.UserType == "Bot" {
		d.Via = "allowed-bots"
		if t.botAllowed(c.Login) {
			d.Allowed = true
		} else {
			d.Reason = fmt.Sprintf("@%s is a bot that is not listed in allowed-bots", c.Login)
		}
		return d
	}
	if t.Permission != nil {
		role, err := t.Permission(c.Login)
		if err == nil {
			d.Via = "collaborator permission " + role
			if writeRoles[role] {
				d.Allowed = true
			} else {
				d.Reason = fmt.Sprintf("@%s has the %s role on this repository; only people with write, maintain or admin access can start goalrun", c.Login, role)
			}
			return d
		}
		d.Fallback = err.Error()
	} else {
		d.Fallback = "no token to ask the collaborator permission API with"
	}
	d.Via = "author association " + orNone(c.AuthorAssociation)
	if writeAssociations[c.AuthorAssociation] {
		d.Allowed = true
	} else {
		d.Reason = fmt.Sprintf("@%s does not have write access to this repository as far as goalrun can tell (author association %s; the collaborator permission API could not be asked); only people with write, maintain or admin access can start goalrun",
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
// code blocks and quotes as CommonMark reads them (internal/markdown: a
// fence of ``` or ~~~ is closed only by the same character at least as
// many times; an unclosed one hides the rest), and any line indented four
// columns or more.
func findPhrase(body, phrase string) (string, bool) {
	body = stripHTMLComments(strings.ReplaceAll(body, "\r\n", "\n"))
	lines := strings.Split(body, "\n")
	hidden := markdown.CodeOrQuoteLines(body)
	for i, line := range lines {
		indent, trimmed := leadingSpace(line)
		if hidden[i] || indent > 3 || !strings.HasPrefix(trimmed, phrase) {
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
