package github

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
// description, shared/contracts/README.md); capping by bytes is always
// within it.
const CommentBodyBytes = 65536

// Comment modes (the comment input).
const (
	CommentOff    = "off"
	CommentSticky = "sticky"
	CommentNew    = "new"
)

// Comment posts the report on the pull request (or issue) Number: in
// sticky mode it edits the one comment that carries its hidden marker
// (paging through every comment to find it) or creates it; in new mode it
// adds a comment each run. Bodies are capped at CommentBodyBytes. A 403 is
// returned as a *PermissionError ("pull-requests: write" / "issues: write").
type Comment struct {
	Client      *gh.Client
	Owner, Repo string
	Number      int
	// Mode is CommentSticky or CommentNew.
	Mode string
	// Key tells sticky comments of different goalrun steps apart (the check
	// name, so a matrix keeps one comment per target).
	Key string
	// Retry bounds retries of 5xx answers and rate limits.
	Retry Retry
	// Render renders the document (nil means report.Markdown).
	Render Renderer
	// URL is set after a successful Publish or Reply to the comment's
	// html_url.
	URL string
}

var _ Publisher = (*Comment)(nil)

// Marker is the hidden HTML comment that identifies goalrun's sticky
// comment for key.
func Marker(key string) string {
	return "<!-- goalrun:sticky:" + strings.NewReplacer("-->", "", "\n", " ").Replace(key) + " -->"
}

// Publish posts the document's markdown rendering.
func (c *Comment) Publish(ctx context.Context, doc report.Document) error {
	md := report.Markdown
	if c.Render != nil {
		md = c.Render
	}
	return c.Reply(ctx, md(doc))
}

// Reply posts markdown as the comment (sticky or new per Mode); the polite
// refusal of a `/goalrun` trigger goes through here too.
func (c *Comment) Reply(ctx context.Context, markdown string) error {
	marker := Marker(c.Key)
	body := fit(marker+"\n"+markdown, CommentBodyBytes)
	if c.Mode == CommentSticky {
		id, err := c.findSticky(ctx, marker)
		if err != nil {
			return classify(err, "find goalrun's sticky comment", "pull-requests: write")
		}
		if id != 0 {
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
	}
	var out *gh.IssueComment
	err := c.Retry.Do(ctx, func(ctx context.Context) error {
		var err error
		out, _, err = c.Client.Issues.CreateComment(ctx, c.Owner, c.Repo, c.Number, &gh.IssueComment{Body: gh.Ptr(body)})
		return err
	})
	if err != nil {
		return classify(err, "comment on the pull request", "pull-requests: write")
	}
	c.URL = out.GetHTMLURL()
	return nil
}

// maxCommentPages bounds the search for the sticky comment: 100 pages of
// 100 comments.
const maxCommentPages = 100

// findSticky returns the id of the newest bot comment carrying marker, or 0.
// Only comments by bots are considered, so a person quoting the marker
// cannot make goalrun edit (or try to edit) their comment.
func (c *Comment) findSticky(ctx context.Context, marker string) (int64, error) {
	if c.Number == 0 {
		return 0, errors.New("no pull request or issue number")
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
			if cm.GetUser().GetType() == "Bot" && strings.HasPrefix(cm.GetBody(), marker) {
				found = cm.GetID()
			}
		}
		if resp == nil || resp.NextPage == 0 {
			return found, nil
		}
		opts.Page = resp.NextPage
	}
	return found, fmt.Errorf("stopped after %d pages of comments", maxCommentPages)
}
