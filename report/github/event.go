// Package github publishes goalrun's run to GitHub: a live check run, a
// sticky or new pull request comment, the job summary, the step outputs,
// `/goalrun` comment triggers and nightly fix pull requests. It reads the
// workflow's event payload and environment, and talks to the REST API with
// go-github (GITHUB_API_URL honoured, so GitHub Enterprise Server works).
//
// Every destination is a small Publisher (and, where it shows progress, a
// report.Sink); Publish runs them all so a failing one never loses the
// document for the others and never changes the run's verdict: its error
// becomes a warning in the log.
package github

import (
	"encoding/json"
	"fmt"
	"strings"

	gh "github.com/google/go-github/v75/github"
)

// Event names goalrun understands (GITHUB_EVENT_NAME).
const (
	EventPullRequest              = "pull_request"
	EventPullRequestTarget        = "pull_request_target"
	EventIssueComment             = "issue_comment"
	EventPullRequestReviewComment = "pull_request_review_comment"
	EventSchedule                 = "schedule"
	EventWorkflowDispatch         = "workflow_dispatch"
	EventPush                     = "push"
)

// Event is what goalrun needs from the workflow's event payload
// (GITHUB_EVENT_PATH) and environment.
type Event struct {
	// Name is GITHUB_EVENT_NAME.
	Name string
	// Action is the payload's "action" ("opened", "created", …), "" when
	// the event has none.
	Action string
	// Owner and Repo name the repository (GITHUB_REPOSITORY, else the
	// payload's repository).
	Owner, Repo string
	// DefaultBranch is the repository's default branch from the payload
	// ("" when the payload does not say).
	DefaultBranch string
	// HeadSHA is the commit a check run belongs to: the pull request's head
	// SHA on pull_request, pull_request_target and
	// pull_request_review_comment events (GITHUB_SHA is the synthetic merge
	// commit there), else GITHUB_SHA. On issue_comment events for a pull
	// request it is "" until resolved through the API (the payload does not
	// carry it).
	HeadSHA string
	// SHA is GITHUB_SHA: the commit the workflow checked out.
	SHA string
	// Number is the pull request or issue number (0 when none).
	Number int
	// IsPullRequest says Number is a pull request (an issue_comment on a
	// pull request's conversation is one).
	IsPullRequest bool
	// Fork is true when the pull request comes from another repository: its
	// GITHUB_TOKEN is read-only.
	Fork bool
	// Comment is set on issue_comment and pull_request_review_comment events.
	Comment *CommentInfo
}

// CommentInfo is the comment that triggered an issue_comment or
// pull_request_review_comment event.
type CommentInfo struct {
	ID   int64
	Body string
	// Login and UserType ("User", "Bot") identify the author.
	Login, UserType string
	// AuthorAssociation is OWNER, MEMBER, COLLABORATOR, CONTRIBUTOR,
	// FIRST_TIME_CONTRIBUTOR, FIRST_TIMER, MANNEQUIN or NONE.
	AuthorAssociation string
}

// ParseEvent reads an event payload of type name (GITHUB_EVENT_NAME).
// repository ("owner/name", GITHUB_REPOSITORY) and sha (GITHUB_SHA) come from
// the environment; either may be "" and is then taken from the payload where
// it can be. The payload types are go-github's (gh.ParseWebHook); schedule
// and unknown events use the common fields only. It returns an error naming
// the event when the payload is not JSON of the expected shape.
func ParseEvent(name string, payload []byte, repository, sha string) (*Event, error) {
	ev := &Event{Name: name, SHA: sha, HeadSHA: sha}
	ev.Owner, ev.Repo, _ = strings.Cut(repository, "/")
	var common struct {
		Action     string `json:"action"`
		Repository *struct {
			Name          string `json:"name"`
			FullName      string `json:"full_name"`
			DefaultBranch string `json:"default_branch"`
			Owner         struct {
				Login string `json:"login"`
			} `json:"owner"`
		} `json:"repository"`
	}
	if len(payload) > 0 {
		if err := json.Unmarshal(payload, &common); err != nil {
			return nil, fmt.Errorf("the %s event payload is not JSON: %w", name, err)
		}
	}
	ev.Action = common.Action
	if r := common.Repository; r != nil {
		ev.DefaultBranch = r.DefaultBranch
		if ev.Owner == "" || ev.Repo == "" {
			ev.Owner, ev.Repo = r.Owner.Login, r.Name
		}
	}
	switch name {
	case EventPullRequest, EventPullRequestTarget:
		var p gh.PullRequestEvent
		if err := json.Unmarshal(payload, &p); err != nil {
			return nil, fmt.Errorf("the %s event payload: %w", name, err)
		}
		pr := p.GetPullRequest()
		if pr == nil {
			return nil, fmt.Errorf("the %s event payload has no pull_request", name)
		}
		ev.Number, ev.IsPullRequest = pr.GetNumber(), true
		if s := pr.GetHead().GetSHA(); s != "" {
			ev.HeadSHA = s
		}
		ev.Fork = pr.GetHead().GetRepo().GetFullName() != pr.GetBase().GetRepo().GetFullName()
	case EventPullRequestReviewComment:
		var p gh.PullRequestReviewCommentEvent
		if err := json.Unmarshal(payload, &p); err != nil {
			return nil, fmt.Errorf("the %s event payload: %w", name, err)
		}
		pr := p.GetPullRequest()
		ev.Number, ev.IsPullRequest = pr.GetNumber(), true
		if s := pr.GetHead().GetSHA(); s != "" {
			ev.HeadSHA = s
		}
		ev.Fork = pr.GetHead().GetRepo().GetFullName() != pr.GetBase().GetRepo().GetFullName()
		ev.Comment = commentInfo(p.GetComment().GetID(), p.GetComment().GetBody(), p.GetComment().GetUser(), p.GetComment().GetAuthorAssociation())
	case EventIssueComment:
		var p gh.IssueCommentEvent
		if err := json.Unmarshal(payload, &p); err != nil {
			return nil, fmt.Errorf("the %s event payload: %w", name, err)
		}
		ev.Number = p.GetIssue().GetNumber()
		ev.IsPullRequest = p.GetIssue().IsPullRequest()
		if ev.IsPullRequest {
			ev.HeadSHA = "" // resolved through the API: GITHUB_SHA is the default branch here
		}
		ev.Comment = commentInfo(p.GetComment().GetID(), p.GetComment().GetBody(), p.GetComment().GetUser(), p.GetComment().GetAuthorAssociation())
	}
	if ev.Owner == "" || ev.Repo == "" {
		return nil, fmt.Errorf("the repository is unknown: GITHUB_REPOSITORY is unset and the %s payload names none", name)
	}
	return ev, nil
}

func commentInfo(id int64, body string, u *gh.User, assoc string) *CommentInfo {
	return &CommentInfo{ID: id, Body: body, Login: u.GetLogin(), UserType: u.GetType(), AuthorAssociation: assoc}
}
