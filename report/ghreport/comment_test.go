package ghreport

import (
	"context"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/report/ghreport/githubtest"
)

// TestCommentStickyIdentity: sticky mode edits only a marker comment written
// by goalrun's own identity, never one by a person, another bot or another
// app that carries the same marker.
func TestCommentStickyIdentity(t *testing.T) {
	ctx := context.Background()
	render := func(d report.Document) string { return "report: " + d.Conclusion }
	marker := Marker("goalrun")
	for _, tc := range []struct {
		name  string
		token func(*githubtest.Server) // the token's kind
		// appSlug as the check run reported it ("" when there was none).
		appSlug string
		// seeded comments: login, type ("User"/"Bot"); each carries the marker.
		seed     [][2]string
		wantEdit string // login of the comment that must be edited; "" = a new comment
	}{
		{name: "GITHUB_TOKEN edits github-actions[bot]'s", token: func(*githubtest.Server) {}, appSlug: "github-actions",
			seed: [][2]string{{"troll", "User"}, {"github-actions[bot]", "Bot"}, {"other-app[bot]", "Bot"}}, wantEdit: "github-actions[bot]"},
		{name: "another app's newer marker comment is left alone", token: func(*githubtest.Server) {}, appSlug: "github-actions",
			seed: [][2]string{{"github-actions[bot]", "Bot"}, {"renovate[bot]", "Bot"}}, wantEdit: "github-actions[bot]"},
		{name: "only other bots: a new comment", token: func(*githubtest.Server) {}, appSlug: "github-actions",
			seed: [][2]string{{"other-app[bot]", "Bot"}, {"troll", "User"}}},
		{name: "own app edits its own, not github-actions'", token: func(s *githubtest.Server) { s.SetApp("goalrun-app") }, appSlug: "goalrun-app",
			seed: [][2]string{{"goalrun-app[bot]", "Bot"}, {"github-actions[bot]", "Bot"}}, wantEdit: "goalrun-app[bot]"},
		{name: "no check run: GET /user 403 falls back to github-actions[bot]", token: func(*githubtest.Server) {},
			seed: [][2]string{{"github-actions[bot]", "Bot"}, {"other-app[bot]", "Bot"}}, wantEdit: "github-actions[bot]"},
		{name: "personal access token edits its user's", token: func(s *githubtest.Server) { s.UsePersonalToken("release-bot-user") },
			seed: [][2]string{{"release-bot-user", "User"}, {"github-actions[bot]", "Bot"}, {"troll", "User"}}, wantEdit: "release-bot-user"},
		{name: "personal access token never edits github-actions'", token: func(s *githubtest.Server) { s.UsePersonalToken("release-bot-user") },
			seed: [][2]string{{"github-actions[bot]", "Bot"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newFake(t)
			ids := map[string]int64{}
			for _, sd := range tc.seed {
				if sd[1] == "Bot" {
					ids[sd[0]] = s.AddBotComment(17, sd[0], marker+"\nold report by "+sd[0])
				} else {
					ids[sd[0]] = s.AddComment(17, sd[0], "NONE", marker+"\nold report by "+sd[0])
				}
			}
			tc.token(s)
			author := Identity(ctx, s.Client("t"), tc.appSlug, noWait)
			c := &Comment{Client: s.Client("t"), Owner: "octo-org", Repo: "demo", Number: 17, Mode: CommentSticky, Key: "goalrun",
				Author: author, Retry: noWait, Render: render}
			if err := c.Publish(ctx, passedDoc()); err != nil {
				t.Fatal(err)
			}
			comments := s.Comments(17)
			for _, cm := range comments {
				seeded := ids[cm.Login] == cm.ID
				switch {
				case seeded && cm.Login == tc.wantEdit:
					if cm.Edits != 1 || !strings.HasSuffix(cm.Body, "report: success") {
						t.Errorf("%s's comment not edited: %+v", cm.Login, cm)
					}
				case seeded:
					if cm.Edits != 0 {
						t.Errorf("edited %s's comment (author %q)", cm.Login, author)
					}
				}
			}
			wantCount := len(tc.seed)
			if tc.wantEdit == "" {
				wantCount++
				login, _ := s.TokenIdentity()
				if last := comments[len(comments)-1]; last.Login != login || !strings.HasPrefix(last.Body, marker) {
					t.Errorf("new comment = %+v", last)
				}
			}
			if len(comments) != wantCount {
				t.Errorf("%d comments, want %d", len(comments), wantCount)
			}
		})
	}
}

func TestIdentity(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		token    func(*githubtest.Server)
		appSlug  string
		want     string
		requests int // GET /user requests
	}{
		{"check run's app", func(*githubtest.Server) {}, "my-app", "my-app[bot]", 0},
		{"installation token without a check run", func(*githubtest.Server) {}, "", DefaultAuthor, 1},
		{"personal access token", func(s *githubtest.Server) { s.UsePersonalToken("octocat") }, "", "octocat", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newFake(t)
			tc.token(s)
			if got := Identity(ctx, s.Client("t"), tc.appSlug, noWait); got != tc.want {
				t.Errorf("Identity = %q, want %q", got, tc.want)
			}
			if n := len(s.RequestsFor("users/get-authenticated")); n != tc.requests {
				t.Errorf("%d GET /user, want %d", n, tc.requests)
			}
		})
	}
}

// TestCommentSay: a reply is a new comment without the marker, so it never
// replaces the report's sticky comment and no later run edits it.
func TestCommentSay(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []string{CommentSticky, CommentNew} {
		t.Run(mode, func(t *testing.T) {
			s, _ := newFake(t)
			s.AddIssue(17)
			report0 := &Comment{Client: s.Client("t"), Owner: "octo-org", Repo: "demo", Number: 17, Mode: CommentSticky, Key: "goalrun", Retry: noWait,
				Render: func(report.Document) string { return "the report" }}
			if err := report0.Publish(ctx, passedDoc()); err != nil {
				t.Fatal(err)
			}
			c := &Comment{Client: s.Client("t"), Owner: "octo-org", Repo: "demo", Number: 17, Mode: mode, Key: "goalrun", Retry: noWait}
			if err := c.Say(ctx, "Thanks, @drive-by! goalrun did not start."); err != nil {
				t.Fatal(err)
			}
			cs := s.Comments(17)
			if len(cs) != 2 || cs[0].Edits != 0 || !strings.HasSuffix(cs[0].Body, "the report") {
				t.Fatalf("comments = %+v", cs)
			}
			if strings.Contains(cs[1].Body, "goalrun:sticky") || !strings.Contains(cs[1].Body, "did not start") {
				t.Errorf("reply = %q", cs[1].Body)
			}
			// The next report still edits the first comment, not the reply.
			if err := report0.Publish(ctx, failedDoc()); err != nil {
				t.Fatal(err)
			}
			if cs := s.Comments(17); len(cs) != 2 || cs[0].Edits != 1 || cs[1].Edits != 0 {
				t.Errorf("after the next report: %+v", cs)
			}
		})
	}
}

// TestCommentPageCap: stopping at the page cap keeps what was found: the
// match is edited (or a new comment made) and a warning says so.
func TestCommentPageCap(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		seedAt int // index of goalrun's marker comment among the seeded ones; -1 = none
		edit   bool
	}{
		{"match on page 3", 250, true},
		{"no match within the cap", -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newFake(t)
			total := maxCommentPages*100 + 50
			var ours int64
			for i := 0; i < total; i++ {
				if i == tc.seedAt {
					ours = s.AddBotComment(17, DefaultAuthor, Marker("goalrun")+"\nold")
					continue
				}
				s.AddComment(17, "someone", "NONE", "chatter")
			}
			c := &Comment{Client: s.Client("t"), Owner: "octo-org", Repo: "demo", Number: 17, Mode: CommentSticky, Key: "goalrun", Retry: noWait,
				Render: func(report.Document) string { return "new report" }}
			if err := c.Publish(ctx, passedDoc()); err != nil {
				t.Fatal(err)
			}
			if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "stopped after 100 pages") {
				t.Errorf("warnings = %q", c.Warnings)
			}
			if n := len(s.RequestsFor("issues/list-comments")); n != maxCommentPages {
				t.Errorf("%d list requests, want %d", n, maxCommentPages)
			}
			cs := s.Comments(17)
			edited, created := 0, len(cs)-total
			for _, cm := range cs {
				if cm.Edits > 0 {
					edited++
					if cm.ID != ours {
						t.Errorf("edited comment %d, not goalrun's %d", cm.ID, ours)
					}
				}
			}
			if tc.edit && (edited != 1 || created != 0) || !tc.edit && (edited != 0 || created != 1) {
				t.Errorf("edited %d, created %d; want edit %v", edited, created, tc.edit)
			}
		})
	}
}
