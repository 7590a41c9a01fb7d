package github

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	gh "github.com/google/go-github/v75/github"

	"github.com/goalrun/goalrun/report"
)

// Limits of the Checks API (shared/contracts/README.md).
const (
	// CheckSummaryBytes bounds output.summary and output.text: 65535 bytes
	// of UTF-8 (GitHub Checks API; it answers 422 "summary exceeds a
	// maximum bytesize of 65535", github/docs#35252).
	CheckSummaryBytes = 65535
	// CheckTitleBytes bounds the output.title goalrun sends. GitHub
	// documents no limit; the title is one line in the UI.
	CheckTitleBytes = 256
)

// Publisher receives the final document once the run is over. Publish
// returns an error when the destination could not be updated; the caller
// reports it as a warning and goes on with the other publishers.
type Publisher interface {
	Publish(ctx context.Context, doc report.Document) error
}

// Renderer turns a document into markdown (report.Markdown by default).
type Renderer func(report.Document) string

// CheckRun is the live check run: Start creates it in_progress on HeadSHA,
// Emit turns goal_evaluated events into title updates ("iteration 2/5:
// check failing"), Publish completes it with the document's conclusion and
// its markdown rendering, and Cancel completes it as cancelled if Publish
// never ran (an interruption) — so it is not left in_progress.
//
// When Start fails (403 on a fork pull request or without "checks: write")
// the sink is disabled: Emit, Publish and Cancel do nothing and Publish
// returns the start error once, so the caller warns and the job summary
// carries the report instead.
type CheckRun struct {
	// Client talks to the API; Owner and Repo name the repository.
	Client      *gh.Client
	Owner, Repo string
	// Name is the check's name (the check-name input).
	Name string
	// HeadSHA is the commit the check belongs to (Event.HeadSHA).
	HeadSHA string
	// DetailsURL links the run's log ("" for none).
	DetailsURL string
	// MaxIterations is shown in live titles ("iteration 2/5").
	MaxIterations int
	// Retry bounds retries of 5xx answers and rate limits.
	Retry Retry
	// Render renders the document (nil means report.Markdown).
	Render Renderer
	// Now is the clock (nil means time.Now).
	Now func() time.Time

	mu        sync.Mutex
	id        int64
	appSlug   string
	startErr  error
	reported  bool
	attempted bool // Publish tried to complete the run
	completed bool
	title     string
	pending   chan struct{} // signals the updater that title changed
	done      chan struct{} // closed when the updater exits
	stop      context.CancelFunc
}

var (
	_ report.Sink = (*CheckRun)(nil)
	_ Publisher   = (*CheckRun)(nil)
)

func (c *CheckRun) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *CheckRun) render(doc report.Document) string {
	if c.Render != nil {
		return c.Render(doc)
	}
	return report.Markdown(doc)
}

// ID returns the check run's id (0 before a successful Start).
func (c *CheckRun) ID() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.id
}

// AppSlug returns the slug of the GitHub App the check run was created as
// (the check run's app.slug, "github-actions" for a GITHUB_TOKEN); "" before
// a successful Start or when GitHub did not say. Its bot user is
// AppSlug()+"[bot]", the author of comments the same token writes.
func (c *CheckRun) AppSlug() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.appSlug
}

// Start creates the check run in_progress. On error the sink is disabled
// (see CheckRun) and the error — a *PermissionError for 403/404 — is
// returned for the caller to warn about.
func (c *CheckRun) Start(ctx context.Context) error {
	opts := gh.CreateCheckRunOptions{
		Name:      c.Name,
		HeadSHA:   c.HeadSHA,
		Status:    gh.Ptr("in_progress"),
		StartedAt: &gh.Timestamp{Time: c.now().UTC()},
		Output: &gh.CheckRunOutput{
			Title:   gh.Ptr("goalrun is running"),
			Summary: gh.Ptr("goalrun is running the agent until the check passes; this run will be completed with the report."),
		},
	}
	if c.DetailsURL != "" {
		opts.DetailsURL = gh.Ptr(c.DetailsURL)
	}
	var run *gh.CheckRun
	var status int
	err := c.Retry.Do(ctx, func(ctx context.Context) error {
		var err error
		var resp *gh.Response
		run, resp, err = c.Client.Checks.CreateCheckRun(ctx, c.Owner, c.Repo, opts)
		status = 0
		if resp != nil {
			status = resp.StatusCode
		}
		return err
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	if status >= 200 && status < 300 && (err != nil || run.GetID() == 0) {
		// GitHub made the run but its answer cannot be read: there is no id
		// to complete it with, and creating another would show two.
		why := "it has no id"
		if err != nil {
			why = err.Error()
		}
		c.startErr = fmt.Errorf("GitHub answered %d to creating the check run %q but the answer could not be read (%s): a check run may now exist on %s, left in_progress, which goalrun cannot complete without its id",
			status, c.Name, why, c.HeadSHA)
		return c.startErr
	}
	if err != nil {
		c.startErr = classify(err, "create the check run", "checks: write")
		return c.startErr
	}
	c.id = run.GetID()
	c.appSlug = run.GetApp().GetSlug()
	c.pending = make(chan struct{}, 1)
	c.done = make(chan struct{})
	uctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.stop = cancel
	go c.updater(uctx)
	return nil
}

// Emit turns goal_evaluated events into live title updates ("iteration
// 2/5: check failing"); it never blocks: a newer title replaces one not yet
// sent.
func (c *CheckRun) Emit(e report.Event) {
	title := liveTitle(e, c.MaxIterations)
	if title == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.id == 0 || c.completed {
		return
	}
	c.title = title
	select {
	case c.pending <- struct{}{}:
	default:
	}
}

// liveTitle returns the check-run title for a progress event, or "".
func liveTitle(e report.Event, maxIter int) string {
	switch e.Type {
	case report.EventGoalEvaluated:
		it, _ := intData(e.Data, "iteration")
		state := "check failing"
		if met, _ := e.Data["met"].(bool); met {
			state = "check passing"
		}
		if maxIter > 0 {
			return fmt.Sprintf("iteration %d/%d: %s", it, maxIter, state)
		}
		return fmt.Sprintf("iteration %d: %s", it, state)
	}
	return ""
}

// intData reads an integer from event data, whatever numeric type it has.
func intData(d map[string]any, key string) (int, bool) {
	switch v := d[key].(type) {
	case int:
		return v, true
	case int64:
		return int(v), true
	case float64:
		return int(v), true
	}
	return 0, false
}

// updater sends title updates one at a time until stopped.
func (c *CheckRun) updater(ctx context.Context) {
	defer close(c.done)
	var sent string
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.pending:
		}
		c.mu.Lock()
		title, id := c.title, c.id
		c.mu.Unlock()
		if title == sent {
			continue
		}
		sent = title
		// Live updates are best effort: one quick retry budget, errors
		// dropped (the completion reports what matters).
		r := c.Retry
		r.MaxWait = min(r.MaxWait, 10*time.Second)
		if r.MaxWait <= 0 {
			r.MaxWait = 10 * time.Second
		}
		_ = r.Do(ctx, func(ctx context.Context) error {
			_, _, err := c.Client.Checks.UpdateCheckRun(ctx, c.Owner, c.Repo, id, gh.UpdateCheckRunOptions{
				Name:   c.Name,
				Status: gh.Ptr("in_progress"),
				Output: &gh.CheckRunOutput{
					Title:   gh.Ptr(fit(title, CheckTitleBytes)),
					Summary: gh.Ptr("goalrun is running: " + fit(title, CheckTitleBytes)),
				},
			})
			return err
		})
	}
}

// stopUpdater waits for an in-flight update so it cannot land after the
// completion.
func (c *CheckRun) stopUpdater() {
	c.mu.Lock()
	stop, done := c.stop, c.done
	c.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// Publish completes the check run with doc's conclusion, report.Headline
// as the title (met/not met, grounded/ungrounded), and the markdown
// rendering as the summary (≤ CheckSummaryBytes).
func (c *CheckRun) Publish(ctx context.Context, doc report.Document) error {
	c.mu.Lock()
	if c.startErr != nil {
		err := c.startErr
		reported := c.reported
		c.reported = true
		c.mu.Unlock()
		if reported {
			return nil
		}
		return err
	}
	if c.id == 0 {
		c.mu.Unlock()
		return errors.New("could not complete the check run: it was never started")
	}
	c.attempted = true
	c.mu.Unlock()
	c.stopUpdater()
	conclusion := doc.Conclusion
	if conclusion == "" {
		conclusion = report.ConclusionFailure
	}
	md := c.render(doc)
	return c.complete(ctx, conclusion, report.Headline(doc), md)
}

// Cancel completes the check run as cancelled when it was started and
// Publish never tried to complete it (the run was interrupted before a
// document existed). After any Publish — also one that failed, whose
// completion GitHub may have applied all the same — it does nothing, so a
// failed completion never turns into "cancelled".
func (c *CheckRun) Cancel(ctx context.Context) error {
	c.mu.Lock()
	if c.id == 0 || c.completed || c.attempted {
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	c.stopUpdater()
	return c.complete(ctx, report.ConclusionCancelled, "goalrun was cancelled",
		"goalrun was interrupted (SIGINT/SIGTERM) before it could report; see the workflow log.")
}

func (c *CheckRun) complete(ctx context.Context, conclusion, title, summary string) error {
	c.mu.Lock()
	id := c.id
	c.mu.Unlock()
	opts := gh.UpdateCheckRunOptions{
		Name:        c.Name,
		Status:      gh.Ptr("completed"),
		Conclusion:  gh.Ptr(conclusion),
		CompletedAt: &gh.Timestamp{Time: c.now().UTC()},
		Output: &gh.CheckRunOutput{
			Title:   gh.Ptr(fit(title, CheckTitleBytes)),
			Summary: gh.Ptr(fit(summary, CheckSummaryBytes)),
		},
	}
	err := c.Retry.Do(ctx, func(ctx context.Context) error {
		_, _, err := c.Client.Checks.UpdateCheckRun(ctx, c.Owner, c.Repo, id, opts)
		return err
	})
	if err != nil {
		return classify(err, "complete the check run", "checks: write")
	}
	c.mu.Lock()
	c.completed = true
	c.mu.Unlock()
	return nil
}
