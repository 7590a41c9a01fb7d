package github

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
	}{
		{"pull_request.opened.json", EventPullRequest, "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678", 17, true, false, "", ""},
		{"pull_request.opened.json", EventPullRequestTarget, "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678", 17, true, false, "", ""},
		{"pull_request.fork.json", EventPullRequest, "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", 18, true, true, "", ""},
		{"issue_comment.pr.created.json", EventIssueComment, "", 17, true, false, "maintainer-max", "MEMBER"},
		{"issue_comment.issue.created.json", EventIssueComment, gitSHA, 21, false, false, "drive-by", "NONE"},
		{"pull_request_review_comment.created.json", EventPullRequestReviewComment, "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678", 17, true, false, "renovate[bot]", "NONE"},
		{"schedule.json", EventSchedule, gitSHA, 0, false, false, "", ""},
		{"workflow_dispatch.json", EventWorkflowDispatch, gitSHA, 0, false, false, "", ""},
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
