package ghreport

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParseEvent(t *testing.T) {
	const gitSHA = "ffffffffffffffffffffffffffffffffffffffff" // GITHUB_SHA: the merge commit on pull_request
	for _, tc := range []struct {
		file, name   string
		headSHA      string
		number       int
		isPR, fork   bool
		commentLogin string
		association  string
		prCode       bool // the checkout may be a pull request author's code
	}{
		{"pull_request.opened.json", EventPullRequest, "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678", 17, true, false, "", "", true},
		{"pull_request.opened.json", EventPullRequestTarget, "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678", 17, true, false, "", "", true},
		{"pull_request.fork.json", EventPullRequest, "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", 18, true, true, "", "", true},
		{"pull_request_review.submitted.fork.json", EventPullRequestReview, "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", 18, true, true, "", "", true},
		{"issue_comment.pr.created.json", EventIssueComment, "", 17, true, false, "maintainer-max", "MEMBER", true},
		{"issue_comment.issue.created.json", EventIssueComment, gitSHA, 21, false, false, "drive-by", "NONE", false},
		{"pull_request_review_comment.created.json", EventPullRequestReviewComment, "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678", 17, true, false, "renovate[bot]", "NONE", true},
		{"workflow_run.completed.pr.json", EventWorkflowRun, gitSHA, 0, false, false, "", "", true},
		{"workflow_run.completed.fork.json", EventWorkflowRun, gitSHA, 0, false, false, "", "", true},
		{"workflow_run.completed.push.json", EventWorkflowRun, gitSHA, 0, false, false, "", "", false},
		{"merge_group.checks_requested.json", EventMergeGroup, gitSHA, 0, false, false, "", "", true},
		{"check_suite.rerequested.pr.json", EventCheckSuite, gitSHA, 0, false, false, "", "", true},
		{"push.main.json", EventPush, gitSHA, 0, false, false, "", "", false},
		{"schedule.json", EventSchedule, gitSHA, 0, false, false, "", "", false},
		{"workflow_dispatch.json", EventWorkflowDispatch, gitSHA, 0, false, false, "", "", false},
		{"deployment_status.preview.json", "deployment_status", gitSHA, 0, false, false, "", "", true},
	} {
		t.Run(tc.name+"/"+tc.file, func(t *testing.T) {
			payload, err := os.ReadFile(filepath.Join("testdata", "events", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			ev, err := ParseEvent(tc.name, payload, "octo-org/demo", gitSHA)
			if err != nil {
				t.Fatal(err)
			}
			if ev.HeadSHA != tc.headSHA || ev.Number != tc.number || ev.IsPullRequest != tc.isPR || ev.Fork != tc.fork {
				t.Errorf("got head %q number %d pr %v fork %v; want %q %d %v %v", ev.HeadSHA, ev.Number, ev.IsPullRequest, ev.Fork, tc.headSHA, tc.number, tc.isPR, tc.fork)
			}
			if ev.PullRequestCode != tc.prCode {
				t.Errorf("PullRequestCode %v, want %v", ev.PullRequestCode, tc.prCode)
			}
			if ev.Owner != "octo-org" || ev.Repo != "demo" || ev.DefaultBranch != "main" || ev.SHA != gitSHA {
				t.Errorf("repository %s/%s default %q sha %q", ev.Owner, ev.Repo, ev.DefaultBranch, ev.SHA)
			}
			if tc.commentLogin == "" {
				if ev.Comment != nil {
					t.Errorf("unexpected comment %+v", ev.Comment)
				}
				return
			}
			if ev.Comment == nil || ev.Comment.Login != tc.commentLogin || ev.Comment.AuthorAssociation != tc.association || ev.Comment.ID == 0 {
				t.Errorf("comment = %+v", ev.Comment)
			}
		})
	}
}

func TestParseEventErrors(t *testing.T) {
	for _, tc := range []struct {
		name, event, payload, repo string
	}{
		{"not JSON", EventPullRequest, "{", "o/r"},
		{"pull_request without pull_request", EventPullRequest, `{"action":"opened"}`, "o/r"},
		{"no repository anywhere", EventSchedule, `{"schedule":"* * * * *"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseEvent(tc.event, []byte(tc.payload), tc.repo, "abc"); err == nil {
				t.Error("no error")
			}
		})
	}
	ev, err := ParseEvent(EventSchedule, []byte(`{"repository":{"name":"demo","owner":{"login":"octo-org"},"default_branch":"trunk"}}`), "", "abc")
	if err != nil || ev.Owner != "octo-org" || ev.Repo != "demo" || ev.DefaultBranch != "trunk" {
		t.Errorf("repository from the payload: %+v, %v", ev, err)
	}
}

// TestCarriesPullRequest: the rule's edges, on payloads cut down to what it
// reads. Whatever cannot be told is a pull request's code (fail closed).
func TestCarriesPullRequest(t *testing.T) {
	for _, tc := range []struct {
		name, event, payload string
		want                 bool
	}{
		{"a pull request event without a number", "pull_request_review_thread", `{}`, true},
		{"an unknown event holding a pull request", "deployment", `{"pull_request":{"number":3}}`, true},
		{"a comment on an issue", EventIssueComment, `{"issue":{"number":4}}`, false},
		{"a comment on a pull request", EventIssueComment, `{"issue":{"number":4,"pull_request":{"url":"u"}}}`, true},
		{"a null pull_request", EventIssueComment, `{"issue":{"number":4,"pull_request":null}}`, false},
		{"a workflow_run after a comment", EventWorkflowRun, `{"workflow_run":{"event":"issue_comment","head_repository":{"full_name":"octo-org/demo"}}}`, true},
		{"a workflow_run after a schedule", EventWorkflowRun, `{"workflow_run":{"event":"schedule","head_repository":{"full_name":"octo-org/demo"}}}`, false},
		{"a workflow_run after another workflow_run", EventWorkflowRun, `{"workflow_run":{"event":"workflow_run","head_repository":{"full_name":"octo-org/demo"}}}`, true},
		{"a workflow_run pushed from a fork", EventWorkflowRun, `{"workflow_run":{"event":"push","head_repository":{"full_name":"stranger/demo"}}}`, true},
		{"a workflow_run without its run", EventWorkflowRun, `{}`, true},
		{"a check suite on the default branch", EventCheckSuite, `{"check_suite":{"head_branch":"main","pull_requests":[]}}`, false},
		{"a check suite of a fork (no branch, no pull requests)", EventCheckSuite, `{"check_suite":{"head_branch":null,"pull_requests":[]}}`, true},
		{"a check run on a pull request", EventCheckRun, `{"check_run":{"pull_requests":[{"number":5}],"check_suite":{"head_branch":"main"}}}`, true},
		{"a check run on the default branch", EventCheckRun, `{"check_run":{"pull_requests":[],"check_suite":{"head_branch":"main","pull_requests":[]}}}`, false},
		{"a merge queue", EventMergeGroup, `{"merge_group":{"head_sha":"c0ffee"}}`, true},
		{"a push", EventPush, `{"ref":"refs/heads/main"}`, false},
		{"a deployment status of a preview branch", "deployment_status", `{"deployment":{"ref":"feature","sha":"c0ffee"},"deployment_status":{"state":"success"}}`, true},
		{"a deployment", "deployment", `{"deployment":{"ref":"main","sha":"c0ffee"}}`, true},
		{"an event goalrun does not know", "discussion_comment", `{"discussion":{"number":1}}`, true},
		{"an issue opened", "issues", `{"issue":{"number":4}}`, false},
		{"a release", "release", `{"release":{"tag_name":"v1"}}`, false},
		{"a repository dispatch", "repository_dispatch", `{"action":"go"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			payload := `{"repository":{"name":"demo","full_name":"octo-org/demo","owner":{"login":"octo-org"},"default_branch":"main"},` + tc.payload[1:]
			if tc.payload == `{}` {
				payload = `{"repository":{"name":"demo","full_name":"octo-org/demo","owner":{"login":"octo-org"},"default_branch":"main"}}`
			}
			ev, err := ParseEvent(tc.event, []byte(payload), "octo-org/demo", "abc")
			if err != nil {
				t.Fatal(err)
			}
			if ev.PullRequestCode != tc.want {
				t.Errorf("PullRequestCode %v, want %v", ev.PullRequestCode, tc.want)
			}
		})
	}
}
