package ghreport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	gh "github.com/google/go-github/v75/github"
)

// DefaultAPIURL is GitHub.com's REST API; GITHUB_API_URL overrides it (on
// GitHub Enterprise Server it is https://HOST/api/v3).
const DefaultAPIURL = "https://api.github.com"

// NewClient returns a go-github client for apiURL (GITHUB_API_URL; ""
// means DefaultAPIURL) authenticated with token. hc is the HTTP client to
// use (nil means one with a 30-second timeout per request). It returns an
// error when apiURL is not an absolute http(s) URL.
func NewClient(apiURL, token string, hc *http.Client) (*gh.Client, error) {
	if apiURL == "" {
		apiURL = DefaultAPIURL
	}
	u, err := url.Parse(apiURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("GITHUB_API_URL %q is not an absolute http(s) URL", apiURL)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	c := gh.NewClient(hc)
	if token != "" {
		c = c.WithAuthToken(token)
	}
	c.BaseURL = u
	c.UserAgent = "goalrun"
	return c, nil
}

// Retry retries GitHub API calls that failed for a passing reason — 5xx
// answers, primary and secondary rate limits (any 429; a 403 that
// go-github recognises as one or that carries Retry-After or
// x-ratelimit-remaining: 0), network errors — with
// exponential backoff, within a bounded total wait. Any other error (4xx)
// is returned at once. The zero value uses the defaults below.
type Retry struct {
	// Attempts is the most calls made (0 means 5).
	Attempts int
	// Base is the first backoff, doubled each retry (0 means 1s).
	Base time.Duration
	// MaxWait bounds the total time spent waiting between attempts (0
	// means 90s). A Retry-After or rate-limit reset beyond what is left
	// of it ends the retries with the error.
	MaxWait time.Duration
	// Sleep waits d or until ctx ends (nil means a timer).
	Sleep func(ctx context.Context, d time.Duration) error
}

func (r Retry) sleep(ctx context.Context, d time.Duration) error {
	if r.Sleep != nil {
		return r.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Do calls f until it succeeds, fails for good, or the budget is spent; it
// returns f's last error.
func (r Retry) Do(ctx context.Context, f func(ctx context.Context) error) error {
	attempts, base, budget := r.Attempts, r.Base, r.MaxWait
	if attempts <= 0 {
		attempts = 5
	}
	if base <= 0 {
		base = time.Second
	}
	if budget <= 0 {
		budget = 90 * time.Second
	}
	var err error
	backoff := base
	for i := 0; i < attempts; i++ {
		if err = f(ctx); err == nil {
			return nil
		}
		wait, retryable := retryAfter(err, backoff)
		if !retryable || i == attempts-1 || ctx.Err() != nil {
			return err
		}
		if wait > budget {
			return fmt.Errorf("%w (gave up: GitHub asked to wait %s, more than the %s retry budget left)", err, wait.Round(time.Second), budget.Round(time.Second))
		}
		budget -= wait
		if serr := r.sleep(ctx, wait); serr != nil {
			return err
		}
		backoff *= 2
	}
	return err
}

// retryAfter says whether err is worth retrying and how long to wait first.
func retryAfter(err error, backoff time.Duration) (time.Duration, bool) {
	var abuse *gh.AbuseRateLimitError
	if errors.As(err, &abuse) {
		if abuse.RetryAfter != nil && *abuse.RetryAfter > 0 {
			return *abuse.RetryAfter, true
		}
		return max(backoff, time.Minute), true // GitHub: wait at least a minute
	}
	var rl *gh.RateLimitError
	if errors.As(err, &rl) {
		return max(time.Until(rl.Rate.Reset.Time), backoff), true
	}
	var er *gh.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		if rateLimited(er.Response) {
			if d, ok := waitHeader(er.Response, time.Now()); ok {
				return max(d, 0), true
			}
			return max(backoff, time.Minute), true // GitHub: wait at least a minute
		}
		return backoff, er.Response.StatusCode >= 500
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return 0, false
	}
	var ne net.Error
	var ue *url.Error
	if errors.As(err, &ne) || errors.As(err, &ue) {
		return backoff, true
	}
	return 0, false
}

// rateLimited says whether an answer go-github did not recognise as a rate
// limit is one: any 429 (GitHub's primary and secondary limits may answer
// 429, with or without documentation_url), and a 403 carrying Retry-After or
// x-ratelimit-remaining: 0 (GitHub REST API docs, "Rate limits for the REST
// API": "you may receive a 403 or 429 response").
func rateLimited(r *http.Response) bool {
	switch r.StatusCode {
	case http.StatusTooManyRequests:
		return true
	case http.StatusForbidden:
		return r.Header.Get("Retry-After") != "" || r.Header.Get("X-Ratelimit-Remaining") == "0"
	}
	return false
}

// waitHeader reads how long GitHub asks to wait: Retry-After (seconds or an
// HTTP date), else x-ratelimit-reset (epoch seconds) when the remaining
// quota is 0. ok is false when neither says.
func waitHeader(r *http.Response, now time.Time) (time.Duration, bool) {
	if v := strings.TrimSpace(r.Header.Get("Retry-After")); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			return time.Duration(n) * time.Second, true
		}
		if t, err := http.ParseTime(v); err == nil {
			return t.Sub(now), true
		}
	}
	if r.Header.Get("X-Ratelimit-Remaining") == "0" {
		if n, err := strconv.ParseInt(r.Header.Get("X-Ratelimit-Reset"), 10, 64); err == nil {
			return time.Unix(n, 0).Sub(now), true
		}
	}
	return 0, false
}

// PermissionError is a 403 (not a rate limit) that means the token may not
// do what a sink needs (fork pull requests get a read-only GITHUB_TOKEN; a
// workflow without the permission in its permissions: block gets none).
type PermissionError struct {
	// What is the sink's action, e.g. "create the check run".
	What string
	// Permission is the workflow permission it needs, e.g. "checks: write".
	Permission string
	// Err is the API error.
	Err error
}

func (e *PermissionError) Error() string {
	return fmt.Sprintf("could not %s: the token lacks the %q permission (add it to the workflow's permissions: block; pull requests from forks get a read-only token): %s",
		e.What, e.Permission, APIErrorText(e.Err))
}

func (e *PermissionError) Unwrap() error { return e.Err }

// NotFoundError is a 404: what was asked for does not exist, or the token
// may not see it (GitHub answers 404, not 403, for a private repository
// the token cannot read). It is not called a missing permission.
type NotFoundError struct {
	// What is the sink's action, e.g. "read pull request #17".
	What string
	// Err is the API error.
	Err error
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("could not %s: GitHub answered 404 Not Found (it does not exist, or the token may not see it)", e.What)
}

func (e *NotFoundError) Unwrap() error { return e.Err }

// classify wraps a 403 (not a rate limit) as a PermissionError, a 404 as a
// NotFoundError, and any other error with what was being done, in plain
// words (APIErrorText).
func classify(err error, what, permission string) error {
	if err == nil {
		return nil
	}
	var er *gh.ErrorResponse
	if errors.As(err, &er) && er.Response != nil && !rateLimited(er.Response) {
		switch er.Response.StatusCode {
		case http.StatusForbidden:
			return &PermissionError{What: what, Permission: permission, Err: err}
		case http.StatusNotFound:
			return &NotFoundError{What: what, Err: err}
		}
	}
	return &apiError{what: what, err: err}
}

// apiError is classify's error for anything else.
type apiError struct {
	what string
	err  error
}

func (e *apiError) Error() string { return "could not " + e.what + ": " + APIErrorText(e.err) }
func (e *apiError) Unwrap() error { return e.err }

// APIErrorText says what GitHub answered, without the request's method and
// API address (go-github puts both, and an empty "[]" for no error items,
// into its errors): "GitHub answered 422 Validation Failed: …". Errors that
// are not GitHub answers are returned as they are.
func APIErrorText(err error) string {
	var inner error
	var text string
	var er *gh.ErrorResponse
	var ae *gh.AbuseRateLimitError
	var rl *gh.RateLimitError
	switch {
	case errors.As(err, &ae):
		inner, text = ae, "GitHub's secondary rate limit: "+ae.Message
	case errors.As(err, &rl):
		inner, text = rl, "GitHub's rate limit: "+rl.Message
	case errors.As(err, &er) && er.Response != nil:
		inner = er
		text = fmt.Sprintf("GitHub answered %d %s", er.Response.StatusCode, http.StatusText(er.Response.StatusCode))
		if m := strings.TrimSpace(er.Message); m != "" && !strings.EqualFold(m, http.StatusText(er.Response.StatusCode)) {
			text += ": " + strings.Join(strings.Fields(m), " ")
		}
		var items []string
		for _, e := range er.Errors {
			item := e.Message
			if item == "" {
				item = strings.TrimSpace(strings.Join([]string{e.Resource, e.Field, e.Code}, " "))
			}
			if item != "" {
				items = append(items, item)
			}
		}
		if len(items) > 0 {
			text += " (" + strings.Join(items, "; ") + ")"
		}
	default:
		return err.Error()
	}
	// What was added around the answer (a retry budget) stays.
	full, base := err.Error(), inner.Error()
	if i := strings.Index(full, base); i >= 0 {
		return full[:i] + text + full[i+len(base):]
	}
	return text
}

// IsPermission reports whether err is (or wraps) a PermissionError.
func IsPermission(err error) bool {
	var pe *PermissionError
	return errors.As(err, &pe)
}
