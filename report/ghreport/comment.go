package ghreport

import (
	"context"
	"errors"
	"fmt"
	"strings"

	gh "github.com/google/go-github/v75/github"

	"github.com/goalrun/goalrun/report"
)

// CommentBodyBytes bounds a comment body goalrun sends: 65536. GitHub's
// limit is 65536 characters (422 "Body is too long"; not in the OpenAPI
// description; README.md, "Limits"); capping by bytes is always
// within it.
const CommentBodyBytes = 65536

// Comment modes (the comment input).
const (
	CommentOff    = "off"
	CommentSticky = "sticky"
	CommentNew    = "new"
)

// Comment posts the report on the pull request (or issue) Number: in
// sticky mode it edits the newest comment that carries its hidden marker
// and was written by Author — goalrun's own identity — (paging through the
// comments to find it) or creates it; in new mode it adds a comment each
// run. Bodies are capped at CommentBodyBytes. A 403 is returned as a
// *PermissionError ("pull-requests: write" / "issues: write").
type Comment struct {
	Client      *gh.Client
	Owner, Repo string
	Number      int
	// Mode is CommentSticky or CommentNew.
	Mode string
	// Key tells sticky comments of different goalrun steps apart (the check
	// name, so a matrix keeps one comment per target).
	Key string
	// Author is the login whose comments sticky mode may edit: the token's
	// own identity (see Identity). "" means DefaultAuthor. A comment by
	// anyone else — another bot, a person quoting the marker — is never
	// edited.
	Author string
	// Retry bounds retries of 5xx answers and rate limits.
	Retry Retry
	// Render renders the document (nil means report.Markdown).
	Render Renderer
	// ID, when set, is the comment Publish and Reply edit, whatever Mode
	// is: the "working on it" comment a /goalrun trigger got, which becomes
	// its report (one report per trigger). Say sets it.
	ID int64
	// URL is set after a successful Publish, Reply or Say to the comment's
	// html_url.
	URL string
	// Warnings are problems that did not stop the comment, for the caller to
	// show (e.g. the search for the sticky comment stopped at its page cap).
	Warnings []string

	created int64 // the id of the comment create made last
}

// DefaultAuthor is the login of comments written with a workflow's
// GITHUB_TOKEN.
const DefaultAuthor = "github-actions[bot]"

// Identity returns the login goalrun's comments are written as, for
// Comment.Author: appSlug+"[bot]" when the check run told which GitHub App
// the token belongs to (CheckRun.AppSlug), else the login of GET /user (a
// personal access token), else DefaultAuthor (an installation token, whose
// GET /user answers 403). It never fails: an unknown identity is
// DefaultAuthor, which at worst makes a new comment instead of editing one.
func Identity(ctx context.Context, client *gh.Client, appSlug string, retry Retry) string {
	if appSlug != "" {
		return appSlug + "[bot]"
	}
	var u *gh.User
	err := retry.Do(ctx, func(ctx context.Context) error {
		var err error
		u, _, err = client.Users.Get(ctx, "")
		return err
	})
	if err == nil && u.GetLogin() != "" {
		return u.GetLogin()
	}
	return DefaultAuthor
}

var _ Publisher = (*Comment)(nil)

// Marker is the hidden HTML comment that identifies goalrun's sticky
// comment for key. The key is escaped injectively ("%" as %25, ">" as %3E,
// line breaks as %0A and %0D), so it cannot end the comment early and two
// keys never share a marker ("goalrun-->" is not "goalrun").
func Marker(key string) string {
	return "<!-- goalrun:sticky:" + markerEscaper.Replace(key) + " -->"
}

// markerEscaper is Marker's escaping.
var markerEscaper = strings.NewReplacer("%", "%25", ">", "%3E", "\n", "%0A", "\r", "%0D")

// Publish posts the document's markdown rendering.
func (c *Comment) Publish(ctx context.Context, doc report.Document) error {
	md := report.Markdown
	if c.Render != nil {
		md = c.Render
	}
	return c.Reply(ctx, md(doc))
}

// Reply posts markdown as the report's comment, with the marker (sticky or
// new per Mode).
func (c *Comment) Reply(ctx context.Context, markdown string) error {
	if c.ID != 0 {
		return c.edit(ctx, c.ID, fit(markdown, CommentBodyBytes))
	}
	marker := Marker(c.Key)
	body := fit(marker+"\n"+markdown, CommentBodyBytes)
	if c.Mode == CommentSticky {
		id, err := c.findSticky(ctx, marker)
		if errors.Is(err, errPageCap) {
			what := "a new comment is made"
			if id != 0 {
				what = "the newest one found is edited"
			}
			c.Warnings = append(c.Warnings, fmt.Sprintf("%v while looking for goalrun's sticky comment on #%d: %s", err, c.Number, what))
		} else if err != nil {
			return classify(err, "find goalrun's sticky comment", "pull-requests: write")
		}
		if id != 0 {
			return c.edit(ctx, id, body)
		}
	}
	return c.create(ctx, body)
}

// Say posts markdown as a new comment without the sticky marker, whatever
// Mode is: a reply (the polite refusal of a `/goalrun` trigger) that no
// later run edits and that never replaces the report's comment.
func (c *Comment) Say(ctx context.Context, markdown string) error {
	if err := c.create(ctx, fit(markdown, CommentBodyBytes)); err != nil {
		return err
	}
	c.ID = c.created
	return nil
}

// edit replaces comment id's body.
func (c *Comment) edit(ctx context.Context, id int64, body string) error {
	var out *gh.IssueComment
	err := c.Retry.Do(ctx, func(ctx context.Context) error {
		var err error
		out, _, err = c.Client.Issues.EditComment(ctx, c.Owner, c.Repo, id, &gh.IssueComment{Body: gh.Ptr(body)})
		return err
	})
	if err != nil {
		return classify(err, "update the pull request comment", "pull-requests: write")
	}
	c.URL = out.GetHTMLURL()
	return nil
}

func (c *Comment) create(ctx context.Context, body string) error {
	var out *gh.IssueComment
	err := c.Retry.Do(ctx, func(ctx context.Context) error {
		var err error
		out, _, err = c.Client.Issues.CreateComment(ctx, c.Owner, c.Repo, c.Number, &gh.IssueComment{Body: gh.Ptr(body)})
		return err
	})
	if err != nil {
		return classify(err, "comment on the pull request", "pull-requests: write")
	}
	c.URL, c.created = out.GetHTMLURL(), out.GetID()
	return nil
}

// React adds a reaction ("eyes", "rocket", …) to the comment of a comment
// event: an issue comment, or a pull request review comment.
func React(ctx context.Context, client *gh.Client, ev *Event, content string, retry Retry) error {
	if ev.Comment == nil || ev.Comment.ID == 0 {
		return errors.New("no comment to react to")
	}
	err := retry.Do(ctx, func(ctx context.Context) error {
		var err error
		if ev.Name == EventPullRequestReviewComment {
			_, _, err = client.Reactions.CreatePullRequestCommentReaction(ctx, ev.Owner, ev.Repo, ev.Comment.ID, content)
		} else {
			_, _, err = client.Reactions.CreateIssueCommentReaction(ctx, ev.Owner, ev.Repo, ev.Comment.ID, content)
		}
		return err
	})
	return classify(err, "react to the comment", "pull-requests: write")
}

// maxCommentPages bounds the search for the sticky comment: 100 pages of
// 100 comments.
const maxCommentPages = 100

// errPageCap is findSticky's error when it stopped at maxCommentPages.
var errPageCap = fmt.Errorf("stopped after %d pages of comments", maxCommentPages)

// findSticky returns the id of the newest comment carrying marker whose
// author is the comment's Author, or 0. Comments by anyone else are never
// considered, so neither a person quoting the marker nor another bot (or
// another workflow's token) can make goalrun edit their comment. When it
// stops at maxCommentPages it returns the newest match so far (0 if none)
// with errPageCap.
func (c *Comment) findSticky(ctx context.Context, marker string) (int64, error) {
	if c.Number == 0 {
		return 0, errors.New("no pull request or issue number")
	}
	author := c.Author
	if author == "" {
		author = DefaultAuthor
	}
	opts := &gh.IssueListCommentsOptions{ListOptions: gh.ListOptions{PerPage: 100}}
	var found int64
	for page := 0; page < maxCommentPages; page++ {
		var list []*gh.IssueComment
		var resp *gh.Response
		err := c.Retry.Do(ctx, func(ctx context.Context) error {
			var err error
			list, resp, err = c.Client.Issues.ListComments(ctx, c.Owner, c.Repo, c.Number, opts)
			return err
		})
		if err != nil {
			return 0, err
		}
		for _, cm := range list {
			if strings.EqualFold(cm.GetUser().GetLogin(), author) && strings.HasPrefix(cm.GetBody(), marker) {
				found = cm.GetID()
			}
		}
		if resp == nil || resp.NextPage == 0 {
			return found, nil
		}
		opts.Page = resp.NextPage
	}
	return found, errPageCap
}
