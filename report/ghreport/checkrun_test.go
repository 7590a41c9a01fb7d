package ghreport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	gh "github.com/google/go-github/v75/github"

	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/report/ghreport/githubtest"
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

// TestCheckRunCompletionRefused: a completion GitHub refuses never leaves
// the check run in_progress unnoticed. A 422 on the full report is retried
// with a minimal body; when every completion of the run is refused (422 or
// 5xx past the retry budget) a new check run of the same name is created
// completed in its place; when that is refused too the error wraps
// ErrLeftInProgress.
func TestCheckRunCompletionRefused(t *testing.T) {
	ctx := context.Background()
	unprocessable := func(when string, times int) githubtest.Fault {
		return githubtest.Fault{Status: http.StatusUnprocessableEntity, Message: "Invalid request.", When: when, Times: times}
	}
	for _, tc := range []struct {
		name           string
		update, create *githubtest.Fault
		// want: the first run's status/conclusion, the replacement's
		// conclusion ("" for none), and the error ("" for none).
		wantFirst, wantReplacement string
		wantErr                    string
		stuck                      bool
	}{
		{name: "a 5xx once is retried", update: ptr(githubtest.ServerError(1)), wantFirst: "completed/success"},
		{name: "422 on the full report: minimal body", update: ptr(unprocessable("goalrun/1 document", 0)),
			wantFirst: "completed/success", wantErr: "short summary"},
		{name: "5xx on every completion: a replacement run", update: ptr(githubtest.Fault{Status: http.StatusBadGateway, When: `"status":"completed"`}),
			wantFirst: "in_progress/", wantReplacement: "success", wantErr: "in its place"},
		{name: "422 on every completion: a replacement run", update: ptr(unprocessable(`"status":"completed"`, 0)),
			wantFirst: "in_progress/", wantReplacement: "success", wantErr: "in its place"},
		{name: "everything refused: left in_progress, said so", update: ptr(unprocessable(`"status":"completed"`, 0)),
			create:    ptr(githubtest.Fault{Status: http.StatusInternalServerError, When: `"status":"completed"`}),
			wantFirst: "in_progress/", wantErr: "left in_progress", stuck: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, sha := newFake(t)
			c := &CheckRun{Client: s.Client("t"), Owner: "octo-org", Repo: "demo", Name: "goalrun", HeadSHA: sha,
				DetailsURL: "https://github.example/octo-org/demo/actions/runs/7", Retry: noWait}
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if tc.update != nil {
				s.Fail("checks/update", *tc.update)
			}
			if tc.create != nil {
				s.Fail("checks/create", *tc.create)
			}
			err := c.Publish(ctx, passedDoc())
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Publish = %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Publish = %v, want an error saying %q", err, tc.wantErr)
			}
			if got := errors.Is(err, ErrLeftInProgress); got != tc.stuck {
				t.Errorf("errors.Is(err, ErrLeftInProgress) = %v, want %v (%v)", got, tc.stuck, err)
			}
			runs := s.CheckRuns()
			if got := runs[0].Status + "/" + runs[0].Conclusion; got != tc.wantFirst {
				t.Errorf("first run %s, want %s", got, tc.wantFirst)
			}
			switch {
			case tc.wantReplacement == "" && len(runs) != 1:
				t.Errorf("%d check runs, want 1", len(runs))
			case tc.wantReplacement != "":
				if len(runs) != 2 {
					t.Fatalf("%d check runs, want the first and its replacement", len(runs))
				}
				r := runs[1]
				if r.Status != "completed" || r.Conclusion != tc.wantReplacement || r.Name != "goalrun" || r.HeadSHA != sha ||
					!strings.Contains(r.Summary, "job summary") || r.DetailsURL != c.DetailsURL {
					t.Errorf("replacement %+v", r)
				}
				if c.ReplacedBy() != r.ID {
					t.Errorf("ReplacedBy = %d, want %d", c.ReplacedBy(), r.ID)
				}
			}
			if strings.Contains(tc.name, "minimal") {
				last := s.RequestsFor("checks/update")
				body := string(last[len(last)-1].Body)
				if !strings.Contains(body, `"conclusion":"success"`) || strings.Contains(body, "goalrun/1 document") || len(body) > 1024 {
					t.Errorf("minimal completion body: %s", body)
				}
			}
			// Cancel after any completion attempt changes nothing.
			if err := c.Cancel(ctx); err != nil {
				t.Errorf("Cancel = %v", err)
			}
		})
	}
}

// holdingTransport holds each live title update (a PATCH setting
// in_progress) until a completion has been answered or hold has passed,
// and sends it then even when its client gave up meanwhile — as GitHub
// may apply a request whose connection the client closed.
type holdingTransport struct {
	base      http.RoundTripper
	hold      time.Duration
	started   chan struct{} // closed when the first update is held
	completed chan struct{} // closed once a completion was answered
	once      sync.Once
	doneOnce  sync.Once
}

func (h *holdingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	switch {
	case req.Method == http.MethodPatch && bytes.Contains(body, []byte(`"status":"in_progress"`)):
		h.once.Do(func() { close(h.started) })
		type result struct {
			resp *http.Response
			err  error
		}
		out := make(chan result, 1)
		go func() {
			select {
			case <-h.completed:
			case <-time.After(h.hold):
			}
			held := req.Clone(context.WithoutCancel(req.Context()))
			held.Body = io.NopCloser(bytes.NewReader(body))
			resp, err := h.base.RoundTrip(held)
			out <- result{resp, err}
		}()
		select {
		case r := <-out:
			return r.resp, r.err
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	case req.Method == http.MethodPatch && bytes.Contains(body, []byte(`"conclusion"`)):
		resp, err := h.base.RoundTrip(req)
		h.doneOnce.Do(func() { close(h.completed) })
		return resp, err
	}
	return h.base.RoundTrip(req)
}

// TestCheckRunCompletionAfterLiveUpdate: a live title update in flight when
// the run ends is waited for, never cancelled, so it cannot reach GitHub
// after the completion and turn the run in_progress again.
func TestCheckRunCompletionAfterLiveUpdate(t *testing.T) {
	ctx := context.Background()
	s, sha := newFake(t)
	ht := &holdingTransport{base: http.DefaultTransport, hold: 200 * time.Millisecond,
		started: make(chan struct{}), completed: make(chan struct{})}
	client := gh.NewClient(&http.Client{Transport: ht}).WithAuthToken("t")
	u, _ := url.Parse(s.URL + "/")
	client.BaseURL = u
	c := &CheckRun{Client: client, Owner: "octo-org", Repo: "demo", Name: "goalrun", HeadSHA: sha, Retry: noWait, MaxIterations: 5}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c.Emit(report.Event{Type: report.EventGoalEvaluated, Data: map[string]any{"iteration": 1, "met": false}})
	<-ht.started
	if err := c.Publish(ctx, passedDoc()); err != nil {
		t.Fatal(err)
	}
	// An update the client gave up on would be sent right after the
	// completion was answered; give it the time to land before looking.
	time.Sleep(2 * ht.hold)
	runs := s.CheckRuns()
	if len(runs) != 1 {
		t.Fatalf("%d check runs", len(runs))
	}
	if r := runs[0]; r.Status != "completed" || r.Conclusion != "success" || r.Statuses[len(r.Statuses)-1] != "completed" {
		t.Errorf("check run %s/%s, statuses %v: a live update landed after the completion", r.Status, r.Conclusion, r.Statuses)
	}
}
