package ghreport

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goalrun/goalrun/report/ghreport/githubtest"
)

// TestRetryRateLimits: every shape of rate limit GitHub answers is retried
// within the budget, with the wait it asks for; other 4xx are not.
func TestRetryRateLimits(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		fault    func() githubtest.Fault
		realWait bool // go-github itself blocks until the reset: sleep for real
		ok       bool
		attempts int
		minWait  time.Duration // of the first wait
		maxWait  time.Duration
	}{
		{name: "429 with Retry-After and no documentation_url", fault: func() githubtest.Fault { return githubtest.TooManyRequests(7*time.Second, 1) },
			ok: true, attempts: 2, minWait: 7 * time.Second, maxWait: 7 * time.Second},
		{name: "429 without Retry-After waits a minute", fault: func() githubtest.Fault { return githubtest.TooManyRequests(0, 1) },
			ok: true, attempts: 2, minWait: time.Minute, maxWait: time.Minute},
		{name: "403 with Retry-After", fault: func() githubtest.Fault {
			return githubtest.Fault{Status: http.StatusForbidden, Message: "slow down", RetryAfter: 3 * time.Second, Times: 1}
		}, ok: true, attempts: 2, minWait: 3 * time.Second, maxWait: 3 * time.Second},
		{name: "403 with x-ratelimit-remaining 0 waits for the reset", realWait: true, fault: func() githubtest.Fault {
			h := http.Header{}
			h.Set("X-Ratelimit-Remaining", "0")
			h.Set("X-Ratelimit-Limit", "5000")
			h.Set("X-Ratelimit-Reset", strconv.FormatInt(time.Now().Add(time.Second).Unix(), 10))
			return githubtest.Fault{Status: http.StatusForbidden, Message: "API rate limit exceeded", Header: h, Times: 1}
		}, ok: true, attempts: 2, minWait: 0, maxWait: 2 * time.Second},
		{name: "secondary limit (403 with documentation_url)", fault: func() githubtest.Fault { return githubtest.SecondaryRateLimit(time.Second, 1) },
			realWait: true, ok: true, attempts: 2, minWait: time.Second, maxWait: time.Second},
		{name: "429 forever is bounded by the attempts", fault: func() githubtest.Fault { return githubtest.TooManyRequests(time.Second, 0) },
			attempts: 5, minWait: time.Second, maxWait: time.Second},
		{name: "429 beyond the budget gives up", fault: func() githubtest.Fault { return githubtest.TooManyRequests(time.Hour, 0) },
			attempts: 1},
		{name: "plain 403 is not retried", fault: githubtest.Forbidden, attempts: 1},
		{name: "422 is not retried", fault: func() githubtest.Fault { return githubtest.Fault{Status: http.StatusUnprocessableEntity} }, attempts: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, sha := newFake(t)
			s.Fail("checks/create", tc.fault())
			var waits []time.Duration
			r := Retry{Sleep: func(ctx context.Context, d time.Duration) error {
				waits = append(waits, d)
				if tc.realWait {
					time.Sleep(d)
				}
				return nil
			}}
			c := &CheckRun{Client: s.Client("t"), Owner: "octo-org", Repo: "demo", Name: "g", HeadSHA: sha, Retry: r}
			err := c.Start(ctx)
			if (err == nil) != tc.ok {
				t.Fatalf("Start = %v, want ok %v", err, tc.ok)
			}
			if n := len(s.RequestsFor("checks/create")); n != tc.attempts {
				t.Errorf("%d attempts, want %d", n, tc.attempts)
			}
			if tc.attempts > 1 {
				if len(waits) == 0 || waits[0] < tc.minWait || waits[0] > tc.maxWait {
					t.Errorf("waits = %v, want the first in [%s, %s]", waits, tc.minWait, tc.maxWait)
				}
			}
			if !tc.ok && strings.Contains(tc.name, "429") && IsPermission(err) {
				t.Errorf("a rate limit reported as a permission problem: %v", err)
			}
			if tc.ok {
				_ = c.Cancel(ctx)
			}
		})
	}
}

func TestWaitHeader(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		header map[string]string
		want   time.Duration
		ok     bool
	}{
		{"seconds", map[string]string{"Retry-After": "12"}, 12 * time.Second, true},
		{"HTTP date", map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)}, 90 * time.Second, true},
		{"reset", map[string]string{"X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": strconv.FormatInt(now.Add(time.Minute).Unix(), 10)}, time.Minute, true},
		{"reset without exhaustion", map[string]string{"X-Ratelimit-Remaining": "10", "X-Ratelimit-Reset": "1"}, 0, false},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0, false},
		{"none", nil, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &http.Response{Header: http.Header{}}
			for k, v := range tc.header {
				r.Header.Set(k, v)
			}
			got, ok := waitHeader(r, now)
			if got != tc.want || ok != tc.ok {
				t.Errorf("waitHeader = %s, %v; want %s, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
