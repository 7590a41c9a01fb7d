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
package ghreport

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
	EventPullRequestReview        = "pull_request_review"
	EventWorkflowRun              = "workflow_run"
	EventMergeGroup               = "merge_group"
	EventCheckSuite               = "check_suite"
	EventCheckRun                 = "check_run"
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
	// Fork is true when the pull request comes from another repository
	// (head repository ≠ base repository; on issue_comment events known
	// once the pull request was read through the API, see SetPull).
	Fork bool
	// HeadRef and HeadRepo are the pull request's head branch and its
	// repository ("owner/name"); BaseRef its base branch. "" when not a
	// pull request, or not known yet.
	HeadRef, HeadRepo, BaseRef string
	// Ref is GITHUB_REF, the ref the workflow ran on ("refs/heads/dev"
	// for a workflow_dispatch from dev); the caller sets it.
	Ref string
	// PullRequestCode says the run may work on a pull request author's code
	// rather than the repository's own: the event is one of a pull request
	// or names one (see carriesPullRequest), so the checkout — and any
	// config file in it — may be the author's.
	PullRequestCode bool
	// Comment is set on issue_comment and pull_request_review_comment events.
	Comment *CommentInfo
}

// CommentInfo is the comment that triggered an issue_comment or
// pull_request_review_comment event.
type CommentInfo struct {
	ID   int64
	Body string
	// URL is the comment's html_url ("" when the payload has none).
	URL string
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
	case EventPullRequest, EventPullRequestTarget, EventPullRequestReview:
		var p gh.PullRequestEvent
		if err := json.Unmarshal(payload, &p); err != nil {
			return nil, fmt.Errorf("the %s event payload: %w", name, err)
		}
		pr := p.GetPullRequest()
		if pr == nil {
			return nil, fmt.Errorf("the %s event payload has no pull_request", name)
		}
		ev.SetPull(pr)
	case EventPullRequestReviewComment:
		var p gh.PullRequestReviewCommentEvent
		if err := json.Unmarshal(payload, &p); err != nil {
			return nil, fmt.Errorf("the %s event payload: %w", name, err)
		}
		ev.SetPull(p.GetPullRequest())
		ev.Comment = commentInfo(p.GetComment().GetID(), p.GetComment().GetBody(), p.GetComment().GetUser(), p.GetComment().GetAuthorAssociation())
		ev.Comment.URL = p.GetComment().GetHTMLURL()
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
		ev.Comment.URL = p.GetComment().GetHTMLURL()
	}
	if ev.Owner == "" || ev.Repo == "" {
		return nil, fmt.Errorf("the repository is unknown: GITHUB_REPOSITORY is unset and the %s payload names none", name)
	}
	var named prMentions
	if len(payload) > 0 {
		if err := json.Unmarshal(payload, &named); err != nil {
			return nil, fmt.Errorf("the %s event payload: %w", name, err)
		}
	}
	ev.PullRequestCode = ev.IsPullRequest || carriesPullRequest(name, named, ev.Owner+"/"+ev.Repo, ev.DefaultBranch)
	return ev, nil
}

// prMentions are the places where a webhook payload names a pull request
// or where the code it runs on came from (GitHub's "Webhook events and
// payloads": https://docs.github.com/en/webhooks/webhook-events-and-payloads).
type prMentions struct {
	PullRequest json.RawMessage `json:"pull_request"`
	Issue       *struct {
		PullRequest json.RawMessage `json:"pull_request"`
	} `json:"issue"`
	MergeGroup  json.RawMessage `json:"merge_group"`
	WorkflowRun *struct {
		Event          string            `json:"event"`
		PullRequests   []json.RawMessage `json:"pull_requests"`
		HeadRepository *struct {
			FullName string `json:"full_name"`
		} `json:"head_repository"`
	} `json:"workflow_run"`
	CheckSuite *checkHead `json:"check_suite"`
	CheckRun   *struct {
		PullRequests []json.RawMessage `json:"pull_requests"`
		CheckSuite   *checkHead        `json:"check_suite"`
	} `json:"check_run"`
}

// checkHead is what a check suite says about the commit it checks.
type checkHead struct {
	HeadBranch   *string           `json:"head_branch"`
	PullRequests []json.RawMessage `json:"pull_requests"`
}

// ownCodeTriggers are the events a workflow_run may follow that run on the
// repository's own code, started by someone with write access. Any other
// triggering event — a pull request's, a comment's, an unknown one — counts
// as a pull request's code.
var ownCodeTriggers = map[string]bool{
	EventPush: true, EventSchedule: true, EventWorkflowDispatch: true, "repository_dispatch": true, "release": true,
}

// ownCodeEvents are the events a workflow itself may run on that check out
// the repository's own code: ownCodeTriggers, and issues and comments on
// an issue (the default branch; a comment on a pull request is caught
// before). Every other event — a deployment of a preview branch, one
// goalrun does not know — counts as a pull request's code.
var ownCodeEvents = map[string]bool{
	EventPush: true, EventSchedule: true, EventWorkflowDispatch: true, "repository_dispatch": true, "release": true,
	"issues": true, EventIssueComment: true,
}

// carriesPullRequest is the one rule for which events may run on a pull
// request author's code: every pull_request* event; any payload holding a
// pull request (a comment on a pull request's conversation included); a
// merge_group (the merge queue's branch holds the queued pull requests);
// a workflow_run that follows a pull request's run (its pull_requests, a
// head repository other than this one — GitHub leaves pull_requests empty
// for forks — or a triggering event not in ownCodeTriggers); a check suite
// or check run that names pull requests or checks a commit off the default
// branch; and any event not in ownCodeEvents. repo is "owner/name",
// defaultBranch the repository's ("" when the payload does not say).
func carriesPullRequest(name string, p prMentions, repo, defaultBranch string) bool {
	present := func(m json.RawMessage) bool { return len(m) > 0 && string(m) != "null" }
	switch {
	case strings.HasPrefix(name, "pull_request"), name == EventMergeGroup:
		return true
	case present(p.PullRequest), present(p.MergeGroup):
		return true
	case p.Issue != nil && present(p.Issue.PullRequest):
		return true
	}
	if wr := p.WorkflowRun; wr != nil || name == EventWorkflowRun {
		if wr == nil {
			return true // a workflow_run without its run: nothing says whose code it is
		}
		fromFork := wr.HeadRepository == nil || !strings.EqualFold(wr.HeadRepository.FullName, repo)
		return len(wr.PullRequests) > 0 || fromFork || !ownCodeTriggers[wr.Event]
	}
	offDefault := func(h *checkHead) bool {
		return h == nil || len(h.PullRequests) > 0 || h.HeadBranch == nil || defaultBranch == "" || *h.HeadBranch != defaultBranch
	}
	switch {
	case p.CheckSuite != nil || name == EventCheckSuite:
		return offDefault(p.CheckSuite)
	case p.CheckRun != nil || name == EventCheckRun:
		if p.CheckRun == nil {
			return true
		}
		return len(p.CheckRun.PullRequests) > 0 || offDefault(p.CheckRun.CheckSuite)
	}
	return !ownCodeEvents[name]
}

// SetPull takes what goalrun needs from a pull request — from the payload,
// or read through the API on issue_comment events: its number, head commit,
// head and base branches, and whether its head is in a fork.
func (ev *Event) SetPull(pr *gh.PullRequest) {
	if pr == nil {
		return
	}
	ev.Number, ev.IsPullRequest = pr.GetNumber(), true
	if s := pr.GetHead().GetSHA(); s != "" {
		ev.HeadSHA = s
	}
	ev.HeadRef, ev.BaseRef = pr.GetHead().GetRef(), pr.GetBase().GetRef()
	ev.HeadRepo = pr.GetHead().GetRepo().GetFullName()
	ev.Fork = !strings.EqualFold(ev.HeadRepo, pr.GetBase().GetRepo().GetFullName())
}

// ReadOnlyToken says the workflow's GITHUB_TOKEN is read-only for this
// event: GitHub gives events caused by a pull request from a fork
// (pull_request, pull_request_review, pull_request_review_comment) a
// read-only token and no secrets; issue_comment and pull_request_target
// run in the base repository with its token.
func (ev *Event) ReadOnlyToken() bool {
	if !ev.Fork {
		return false
	}
	switch ev.Name {
	case EventPullRequest, EventPullRequestReview, EventPullRequestReviewComment:
		return true
	}
	return false
}

func commentInfo(id int64, body string, u *gh.User, assoc string) *CommentInfo {
	return &CommentInfo{ID: id, Body: body, Login: u.GetLogin(), UserType: u.GetType(), AuthorAssociation: assoc}
}
