package github

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/report/github/githubtest"
)

// TestCheckRunCancelOnlyUnpublished: Cancel completes the run as cancelled
// only when Publish never tried to complete it; a failed completion stays
// as GitHub has it (never overwritten with "cancelled").
func TestCheckRunCancelOnlyUnpublished(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name           string
		publish        bool
		completionFail *githubtest.Fault
		wantStatus     string
		wantConclusion string
		publishErr     bool
	}{
		{name: "interrupted before publishing", wantStatus: "completed", wantConclusion: "cancelled"},
		{name: "published", publish: true, wantStatus: "completed", wantConclusion: "success"},
		{name: "completion failed with 5xx", publish: true, publishErr: true,
			completionFail: &githubtest.Fault{Status: http.StatusBadGateway, When: `"conclusion":"success"`},
			wantStatus:     "in_progress"},
		{name: "completion refused with 422", publish: true, publishErr: true,
			completionFail: &githubtest.Fault{Status: http.StatusUnprocessableEntity, When: `"conclusion":"success"`},
			wantStatus:     "in_progress"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, sha := newFake(t)
			c := &CheckRun{Client: s.Client("t"), Owner: "octo-org", Repo: "demo", Name: "goalrun", HeadSHA: sha, Retry: noWait}
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if tc.completionFail != nil {
				s.Fail("checks/update", *tc.completionFail)
			}
			if tc.publish {
				if err := c.Publish(ctx, passedDoc()); (err != nil) != tc.publishErr {
					t.Fatalf("Publish = %v, want error %v", err, tc.publishErr)
				}
			}
			if err := c.Cancel(ctx); err != nil {
				t.Fatalf("Cancel = %v", err)
			}
			run := s.CheckRuns()[0]
			if run.Status != tc.wantStatus || run.Conclusion != tc.wantConclusion {
				t.Errorf("run %s/%s, want %s/%s", run.Status, run.Conclusion, tc.wantStatus, tc.wantConclusion)
			}
			for _, r := range s.RequestsFor("checks/update") {
				if tc.publish && strings.Contains(string(r.Body), `"cancelled"`) {
					t.Errorf("Cancel after Publish sent %s", r.Body)
				}
			}
		})
	}
}

// TestCheckRunCreateUnreadable: a 2xx answer to creating the check run
// that cannot be read is an error saying a run may exist in_progress; the
// create is not repeated (that would make a second run).
func TestCheckRunCreateUnreadable(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ name, body string }{
		{"cut-off JSON", `{"id": `},
		{"null", `null`},
		{"no id", `{"status": "in_progress"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, sha := newFake(t)
			s.Fail("checks/create", githubtest.Fault{Status: http.StatusCreated, Body: tc.body})
			c := &CheckRun{Client: s.Client("t"), Owner: "octo-org", Repo: "demo", Name: "goalrun", HeadSHA: sha, Retry: noWait}
			err := c.Start(ctx)
			if err == nil || !strings.Contains(err.Error(), "may now exist") || !strings.Contains(err.Error(), "in_progress") ||
				!strings.Contains(err.Error(), "201") {
				t.Fatalf("Start = %v, want an error saying a check run may exist in_progress", err)
			}
			if n := len(s.RequestsFor("checks/create")); n != 1 {
				t.Errorf("%d creates, want 1", n)
			}
			if err := c.Publish(ctx, passedDoc()); err == nil {
				t.Error("Publish after an unreadable create: no error")
			}
			if n := len(s.RequestsFor("checks/update")); n != 0 {
				t.Errorf("%d updates without an id", n)
			}
		})
	}
}

// TestCheckRunAppSlug: the check run's app.slug is kept (the identity of
// the token's comments).
func TestCheckRunAppSlug(t *testing.T) {
	for _, slug := range []string{githubtest.DefaultAppSlug, "goalrun-bot"} {
		t.Run(slug, func(t *testing.T) {
			s, sha := newFake(t)
			s.SetApp(slug)
			c := &CheckRun{Client: s.Client("t"), Owner: "octo-org", Repo: "demo", Name: "goalrun", HeadSHA: sha, Retry: noWait}
			if err := c.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer c.Cancel(context.Background())
			if got := c.AppSlug(); got != slug {
				t.Errorf("AppSlug = %q, want %q", got, slug)
			}
		})
	}
}
