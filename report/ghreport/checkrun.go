package ghreport

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	gh "github.com/google/go-github/v75/github"

	"github.com/goalrun/goalrun/report"
)

// Limits of the Checks API (README.md, "Limits";
// https://docs.github.com/en/rest/checks/runs).
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
// never ran (an interruption) — so it is not left in_progress. A completion
// GitHub refuses is retried with a minimal body, then replaced by a new
// completed check run; only when all of that fails does the error wrap
// ErrLeftInProgress (see complete).
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
	// ChangeNotOnCommit, when set, says the goal was met only with a change
	// that is not on HeadSHA (the agent's, left in a workspace the runner
	// discards or sent as a fix pull request): HeadSHA's own code failed
	// the check. A success or neutral conclusion is then completed as
	// action_required with this as the title, so a required check never
	// passes that commit (GitHub lets success, neutral and skipped pass:
	// https://docs.github.com/en/repositories/configuring-branches-and-merges-in-your-repository/managing-protected-branches/about-protected-branches#require-status-checks-before-merging).
	ChangeNotOnCommit string
	// Now is the clock (nil means time.Now).
	Now func() time.Time
	// FallbackWait bounds each fallback step of a refused completion (see
	// complete); 0 means 20 s. Shorter after an interruption.
	FallbackWait time.Duration

	mu         sync.Mutex
	replacedBy int64
	id         int64
	appSlug    string
	startErr   error
	reported   bool
	attempted  bool // Publish tried to complete the run
	completed  bool
	title      string
	pending    chan struct{} // signals the updater that title changed
	done       chan struct{} // closed when the updater exits
	quit       chan struct{} // closed to stop the updater after its update in flight
	stop       context.CancelFunc
}

// liveUpdateWait bounds one live title update, its retries included: the
// completion waits for an update in flight rather than cancel it (GitHub
// may still apply a request whose client gave up, after the completion,
// and so turn the run in_progress again), so a hung update delays it by at
// most this long.
const liveUpdateWait = 15 * time.Second

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
	c.quit = make(chan struct{})
	go c.updater(uctx, c.quit)
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
func (c *CheckRun) updater(ctx context.Context, quit <-chan struct{}) {
	defer close(c.done)
	var sent string
	for {
		select {
		case <-quit:
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
		uctx, cancel := context.WithTimeout(ctx, liveUpdateWait)
		_ = r.Do(uctx, func(ctx context.Context) error {
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
		cancel()
	}
}

// stopUpdater stops the updater and waits for its update in flight to be
// answered, so no update can land after the completion. Only when ctx
// ends first (the time left to publish ran out) is the update cancelled.
func (c *CheckRun) stopUpdater(ctx context.Context) {
	c.mu.Lock()
	quit, stop, done := c.quit, c.stop, c.done
	c.quit = nil
	c.mu.Unlock()
	if quit != nil {
		close(quit)
	}
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			stop()
			<-done
		}
	}
	if stop != nil {
		stop()
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
	c.stopUpdater(ctx)
	conclusion := doc.Conclusion
	if conclusion == "" {
		conclusion = report.ConclusionFailure
	}
	title := report.Headline(doc)
	if c.ChangeNotOnCommit != "" && (conclusion == report.ConclusionSuccess || conclusion == report.ConclusionNeutral) {
		conclusion, title = report.ConclusionActionRequired, c.ChangeNotOnCommit
	}
	md := c.render(doc)
	return c.complete(ctx, conclusion, title, md)
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
	c.stopUpdater(ctx)
	return c.complete(ctx, report.ConclusionCancelled, "goalrun was cancelled",
		"goalrun was interrupted (SIGINT/SIGTERM) before it could report; see the workflow log.")
}

// ErrLeftInProgress marks a completion error after which the check run is
// still in_progress on GitHub: neither the full completion, nor the minimal
// one, nor a new completed check run in its place was accepted. A required
// check in that state blocks the merge until someone re-runs the job, so
// the caller reports it as a failure, not a warning.
var ErrLeftInProgress = errors.New("the check run is left in_progress")

// fallbackWait bounds each fallback step of a completion (the minimal body,
// the replacement check run) when CheckRun.FallbackWait is 0: its own
// deadline, so a full completion that spent the publish budget on retries
// still leaves the fallback its chance.
const fallbackWait = 20 * time.Second

// complete completes the check run with conclusion, title and summary. When
// GitHub refuses that (a 422 on the body, 5xx or rate limits past the retry
// budget) it retries once with a minimal body — status, conclusion,
// completed_at and a short goalrun-written output — and when that fails too
// it creates a new check run of the same name on the same commit, already
// completed with the conclusion, which GitHub then shows (and required
// checks read) in place of the stuck one. Every outcome but the first is an
// error saying what happened; one wrapping ErrLeftInProgress when the run
// could not be completed at all.
func (c *CheckRun) complete(ctx context.Context, conclusion, title, summary string) error {
	c.mu.Lock()
	id := c.id
	c.mu.Unlock()
	now := &gh.Timestamp{Time: c.now().UTC()}
	opts := gh.UpdateCheckRunOptions{
		Name:        c.Name,
		Status:      gh.Ptr("completed"),
		Conclusion:  gh.Ptr(conclusion),
		CompletedAt: now,
		Output: &gh.CheckRunOutput{
			Title:   gh.Ptr(fit(title, CheckTitleBytes)),
			Summary: gh.Ptr(fit(summary, CheckSummaryBytes)),
		},
	}
	err := c.Retry.Do(ctx, func(ctx context.Context) error {
		_, _, err := c.Client.Checks.UpdateCheckRun(ctx, c.Owner, c.Repo, id, opts)
		return err
	})
	if err == nil {
		c.markCompleted()
		return nil
	}
	full := classify(err, "complete the check run", "checks: write")

	// A minimal body: nothing of the report that GitHub could refuse.
	short := minimalOutput(conclusion, c.DetailsURL)
	err = c.fallback(ctx, func(ctx context.Context) error {
		_, _, err := c.Client.Checks.UpdateCheckRun(ctx, c.Owner, c.Repo, id, gh.UpdateCheckRunOptions{
			Name: c.Name, Status: gh.Ptr("completed"), Conclusion: gh.Ptr(conclusion), CompletedAt: now,
			Output: &gh.CheckRunOutput{Title: gh.Ptr(short.title), Summary: gh.Ptr(short.summary)},
		})
		return err
	})
	if err == nil {
		c.markCompleted()
		return fmt.Errorf("%w; it was completed (%s) with a short summary instead, the full report is in the job summary", full, conclusion)
	}
	minimal := classify(err, "complete it with a minimal body", "checks: write")

	// A new completed check run of the same name replaces the stuck one.
	var replacement *gh.CheckRun
	err = c.fallback(ctx, func(ctx context.Context) error {
		create := gh.CreateCheckRunOptions{
			Name: c.Name, HeadSHA: c.HeadSHA, Status: gh.Ptr("completed"), Conclusion: gh.Ptr(conclusion),
			CompletedAt: now,
			Output: &gh.CheckRunOutput{Title: gh.Ptr(short.title),
				Summary: gh.Ptr(short.summary + fmt.Sprintf(" It replaces check run %d, which GitHub refused to complete.", id))},
		}
		if c.DetailsURL != "" {
			create.DetailsURL = gh.Ptr(c.DetailsURL)
		}
		var err error
		replacement, _, err = c.Client.Checks.CreateCheckRun(ctx, c.Owner, c.Repo, create)
		return err
	})
	if err == nil {
		c.markCompleted()
		c.mu.Lock()
		c.replacedBy = replacement.GetID()
		c.mu.Unlock()
		return fmt.Errorf("%w; %v; a new check run %d of the same name was created completed (%s) in its place, the full report is in the job summary",
			full, minimal, replacement.GetID(), conclusion)
	}
	return fmt.Errorf("%w: %v; %v; and a completed check run could not be created in its place: %v — re-run the job, or complete check run %d by hand",
		ErrLeftInProgress, full, minimal, classify(err, "create a replacement", "checks: write"), id)
}

// fallback runs one fallback step with its own deadline (FallbackWait, else
// fallbackWait) and a short retry budget.
func (c *CheckRun) fallback(ctx context.Context, f func(ctx context.Context) error) error {
	wait := c.FallbackWait
	if wait <= 0 {
		wait = fallbackWait
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait)
	defer cancel()
	r := c.Retry
	r.Attempts, r.MaxWait = 3, min(wait/2, 5*time.Second)
	return r.Do(fctx, f)
}

func (c *CheckRun) markCompleted() {
	c.mu.Lock()
	c.completed = true
	c.mu.Unlock()
}

// ReplacedBy returns the id of the completed check run created in place of
// this one when GitHub refused every completion (0 when none was needed).
func (c *CheckRun) ReplacedBy() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.replacedBy
}

type shortOutput struct{ title, summary string }

// minimalOutput is the output of a fallback completion: goalrun's own
// words only.
func minimalOutput(conclusion, detailsURL string) shortOutput {
	where := "the workflow run's job summary"
	if detailsURL != "" {
		where += " (" + detailsURL + ")"
	}
	return shortOutput{
		title:   "goalrun: " + conclusion,
		summary: "goalrun finished with conclusion " + conclusion + ". GitHub refused the full report on this check run; it is in " + where + ".",
	}
}
