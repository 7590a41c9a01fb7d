package githubtest

import (
	"context"
	"net/http"
	"testing"

	gh "github.com/google/go-github/v75/github"
)

// TestTokenKinds: the fake answers like GitHub for each kind of token:
// GET /user, the author of created comments, check runs' app.slug, and a
// personal access token's refused check run.
func TestTokenKinds(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		set        func(*Server)
		userStatus int
		login      string
		userType   string
		app        string // "" = check runs refused
	}{
		{"GITHUB_TOKEN", func(*Server) {}, http.StatusForbidden, "github-actions[bot]", "Bot", "github-actions"},
		{"app installation token", func(s *Server) { s.SetApp("goalrun-app") }, http.StatusForbidden, "goalrun-app[bot]", "Bot", "goalrun-app"},
		{"personal access token", func(s *Server) { s.UsePersonalToken("octocat") }, http.StatusOK, "octocat", "User", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewServer(t, "octo-org/demo")
			sha := s.Seed("main", map[string]File{"a": {Content: []byte("a\n")}}, "init")
			s.AddIssue(1)
			tc.set(s)
			c := s.Client("tok")
			u, resp, err := c.Users.Get(ctx, "")
			if resp == nil || resp.StatusCode != tc.userStatus {
				t.Fatalf("GET /user: %v %v, want %d", resp, err, tc.userStatus)
			}
			if err == nil && u.GetLogin() != tc.login {
				t.Errorf("GET /user login %q, want %q", u.GetLogin(), tc.login)
			}
			cm, _, err := c.Issues.CreateComment(ctx, "octo-org", "demo", 1, &gh.IssueComment{Body: gh.Ptr("hi")})
			if err != nil || cm.GetUser().GetLogin() != tc.login || cm.GetUser().GetType() != tc.userType {
				t.Errorf("comment by %q (%q), %v; want %q (%q)", cm.GetUser().GetLogin(), cm.GetUser().GetType(), err, tc.login, tc.userType)
			}
			run, resp, err := c.Checks.CreateCheckRun(ctx, "octo-org", "demo", gh.CreateCheckRunOptions{Name: "g", HeadSHA: sha})
			if tc.app == "" {
				if resp == nil || resp.StatusCode != http.StatusForbidden {
					t.Errorf("check run with a personal token: %v, want 403", err)
				}
				return
			}
			if err != nil || run.GetApp().GetSlug() != tc.app {
				t.Errorf("check run app %q, %v; want %q", run.GetApp().GetSlug(), err, tc.app)
			}
		})
	}
}

// TestFaultWhenAndBody: a fault limited by When spares other requests, and
// Body is sent verbatim.
func TestFaultWhenAndBody(t *testing.T) {
	ctx := context.Background()
	s := NewServer(t, "octo-org/demo")
	sha := s.Seed("main", map[string]File{"a": {Content: []byte("a\n")}}, "init")
	c := s.Client("tok")
	s.Fail("checks/create", Fault{Status: http.StatusBadGateway, When: `"name":"bad"`})
	if _, _, err := c.Checks.CreateCheckRun(ctx, "octo-org", "demo", gh.CreateCheckRunOptions{Name: "good", HeadSHA: sha}); err != nil {
		t.Errorf("a request the fault does not match failed: %v", err)
	}
	if _, resp, _ := c.Checks.CreateCheckRun(ctx, "octo-org", "demo", gh.CreateCheckRunOptions{Name: "bad", HeadSHA: sha}); resp == nil || resp.StatusCode != http.StatusBadGateway {
		t.Errorf("the matching request was not failed: %v", resp)
	}
	s.Fail("checks/create", Fault{Status: http.StatusCreated, Body: `{"id": `})
	if _, resp, err := c.Checks.CreateCheckRun(ctx, "octo-org", "demo", gh.CreateCheckRunOptions{Name: "x", HeadSHA: sha}); err == nil || resp == nil || resp.StatusCode != http.StatusCreated {
		t.Errorf("cut-off 201: %v %v", resp, err)
	}
}
