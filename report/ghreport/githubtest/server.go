// Package githubtest is a fake GitHub REST API for tests, named like the
// standard library's httptest. It serves the endpoints goalrun's GitHub sinks
// use — check runs, issue comments, pull requests and the Git Data API
// (refs, trees, blobs, commits) — for one repository, answers like GitHub
// (201/200 bodies, 401/403/404/422 error shapes, Link paging, secondary rate
// limits with Retry-After), and records every request.
//
// It is meant to be driven through a real go-github client (Server.Client),
// so a test proves what the real client sends, not what a hand-written
// request looks like. Every request — path parameters, query and body — is
// validated against GitHub's published OpenAPI description
// (testdata/openapi.json, the part of npm's @octokit/openapi this fake
// serves; see testdata/PROVENANCE.md), and so is every answer; answers are
// built from the description's examples with the fake's state laid over
// them. Check-run bodies are also held to the byte limits the description
// cannot say (output.summary and output.text ≤ 65535 bytes). An invalid
// request is answered 422 with GitHub's error shape, and any mismatch fails
// the test at cleanup (see AllowInvalidRequests), so a passing test proves
// nothing invalid was sent.
//
// The API is served under the path prefix /api/v3 (GitHub Enterprise
// Server's layout), so a client that ignores the path of GITHUB_API_URL gets
// 404s and fails its test.
//
// Git objects are hashed as real Git hashes them (SHA-1 over "blob <len>\0",
// tree and commit objects), so blob SHAs a client computes from files match
// the ones the fake stores.
package githubtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gh "github.com/google/go-github/v75/github"
)

// PathPrefix is the path under which the fake serves the API (GitHub
// Enterprise Server's "/api/v3").
const PathPrefix = "/api/v3"

// Limits GitHub enforces that the request schemas cannot express
// (README.md, "Limits"; testdata/PROVENANCE.md).
const (
	// CheckRunOutputBytes bounds output.summary and output.text: 65535
	// bytes of UTF-8 each (GitHub answers 422 "summary exceeds a maximum
	// bytesize of 65535"; github/docs#35252).
	CheckRunOutputBytes = 65535
	// BodyChars bounds an issue comment's or pull request's body: 65536
	// characters (GitHub answers 422 "Body is too long").
	BodyChars = 65536
	// MaxPerPage is the largest per_page GitHub honours for list endpoints.
	MaxPerPage = 100
	// DefaultPerPage is the page size when per_page is absent.
	DefaultPerPage = 30
)

// Request is one recorded request.
type Request struct {
	// Operation is GitHub's operationId for the route, e.g. "checks/create";
	// "" for a path the fake does not serve (answered 404).
	Operation string
	Method    string
	// Path is the request path without PathPrefix, e.g.
	// "/repos/octo-org/demo/check-runs".
	Path  string
	Query url.Values
	// Body is the raw request body.
	Body []byte
	// Authorization is the request's Authorization header.
	Authorization string
	// Status is the HTTP status the fake answered.
	Status int
	// Time is when the request arrived.
	Time time.Time
}

// Fault scripts a failure for one operation. The zero Status is invalid.
type Fault struct {
	// Status is the HTTP status to answer (403, 404, 500, 502, …).
	Status int
	// Message is the error message; "" means GitHub's usual one for Status.
	Message string
	// SecondaryRateLimit makes a 403 a secondary rate limit (GitHub's
	// message and documentation_url, which go-github turns into an
	// *gh.AbuseRateLimitError).
	SecondaryRateLimit bool
	// RetryAfter sets the Retry-After header, in whole seconds (0 = absent).
	RetryAfter time.Duration
	// Times is how many requests the fault answers before the operation
	// works again; 0 means every request.
	Times int
	// Header holds more response headers, e.g. x-ratelimit-remaining: 0
	// and x-ratelimit-reset for a primary rate limit.
	Header http.Header
	// Body, when set, is sent verbatim instead of GitHub's error body (e.g.
	// a 201 whose JSON was cut off).
	Body string
	// When, when set, limits the fault to requests whose body contains it
	// (e.g. `"conclusion":"success"` fails only a check run's completion);
	// other requests of the operation are served normally and do not count
	// against Times.
	When string
}

// TooManyRequests answers 429 with Retry-After (0 = absent) and GitHub's
// plain error body, without the secondary-rate-limit documentation_url
// that go-github looks for, times times (0 = always).
func TooManyRequests(retryAfter time.Duration, times int) Fault {
	return Fault{Status: http.StatusTooManyRequests, Message: "API rate limit exceeded", RetryAfter: retryAfter, Times: times}
}

// Forbidden is the 403 a read-only GITHUB_TOKEN gets (fork pull requests,
// missing "checks: write" or "pull-requests: write").
func Forbidden() Fault {
	return Fault{Status: http.StatusForbidden, Message: "Resource not accessible by integration"}
}

// ServerError answers 502 Bad Gateway times times (0 = always).
func ServerError(times int) Fault {
	return Fault{Status: http.StatusBadGateway, Message: "Server Error", Times: times}
}

// SecondaryRateLimit answers GitHub's secondary rate limit (403 with
// Retry-After) times times (0 = always).
func SecondaryRateLimit(retryAfter time.Duration, times int) Fault {
	return Fault{Status: http.StatusForbidden, SecondaryRateLimit: true, RetryAfter: retryAfter, Times: times}
}

type fault struct {
	Fault
	left int // remaining answers; <0 = unlimited
}

// Server is the fake API. Create it with NewServer; it is closed by the
// test's cleanup. All methods are safe for concurrent use.
type Server struct {
	// URL is the API base URL to put in GITHUB_API_URL, e.g.
	// "http://127.0.0.1:41234/api/v3" (no trailing slash).
	URL string
	// Owner and Repo name the one repository the fake serves; requests for
	// any other repository get 404.
	Owner, Repo string

	srv *httptest.Server

	mu       sync.Mutex
	requests []Request
	faults   map[string]*fault
	nextID   int64
	now      func() time.Time

	checkRuns []*CheckRun
	issues    map[int]bool // issue and pull request numbers that exist
	comments  []*Comment
	pulls     []*Pull
	nextIssue int
	git       *objects
	refs      map[string]string // "refs/heads/main" -> commit SHA
	// appSlug is the GitHub App the token belongs to ("" for a personal
	// access token); personal is the login of a personal access token.
	appSlug, personal string
	// ProtectWorkflows refuses ref updates whose commit changes
	// .github/workflows/ compared with its first parent, as GitHub refuses
	// them for a token without the "workflows" permission. On by default.
	protectWorkflows bool
	// problems are requests and answers that did not match GitHub's
	// OpenAPI description; allowInvalid excuses the requests.
	problems     []specProblem
	allowInvalid bool
	permissions  map[string]string // lower-case login -> role
	reactions    []Reaction
}

// NewServer starts a fake GitHub API serving the repository "owner/name"
// and registers its shutdown with tb.Cleanup.
func NewServer(tb testing.TB, repository string) *Server {
	tb.Helper()
	owner, name, ok := strings.Cut(repository, "/")
	if !ok || owner == "" || name == "" {
		tb.Fatalf("githubtest.NewServer: repository %q is not owner/name", repository)
	}
	s := &Server{
		Owner: owner, Repo: name,
		faults:           map[string]*fault{},
		issues:           map[int]bool{},
		nextIssue:        1,
		git:              newObjects(),
		refs:             map[string]string{},
		now:              time.Now,
		protectWorkflows: true,
		nextID:           1000,
		appSlug:          DefaultAppSlug,
		permissions:      map[string]string{},
	}
	mux := http.NewServeMux()
	s.routes(mux)
	s.srv = httptest.NewServer(s.handler(mux))
	s.URL = s.srv.URL + PathPrefix
	tb.Cleanup(func() {
		s.srv.Close()
		s.checkProblems(tb)
	})
	return s
}

// Client returns a real go-github client for the fake, authenticated with
// token, with its BaseURL set from URL the way goalrun sets it from
// GITHUB_API_URL.
func (s *Server) Client(token string) *gh.Client {
	c := gh.NewClient(s.srv.Client()).WithAuthToken(token)
	u, _ := url.Parse(s.URL + "/")
	c.BaseURL = u
	return c
}

// Fail scripts f for every request of operation op (a GitHub operationId
// such as "checks/create"; see the route table in routes.go). A later Fail
// for the same op replaces the earlier one; Fault{} removes it.
func (s *Server) Fail(op string, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.Status == 0 {
		delete(s.faults, op)
		return
	}
	left := f.Times
	if left == 0 {
		left = -1
	}
	s.faults[op] = &fault{Fault: f, left: left}
}

// DefaultAppSlug is the GitHub App a workflow's GITHUB_TOKEN belongs to.
const DefaultAppSlug = "github-actions"

// SetApp makes the token an installation token of the GitHub App slug:
// check runs carry app.slug = slug and comments created through the API
// are written by "slug[bot]" (type Bot). GET /user answers 403, as GitHub
// answers an installation token.
func (s *Server) SetApp(slug string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appSlug, s.personal = slug, ""
}

// UsePersonalToken makes the token a personal access token of login:
// GET /user answers login, comments are written by login (type User), and
// creating a check run answers 403 (GitHub: only GitHub Apps may write
// check runs).
func (s *Server) UsePersonalToken(login string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appSlug, s.personal = "", login
}

// TokenIdentity returns the login and user type of comments created
// through the API with the current token.
func (s *Server) TokenIdentity() (login, userType string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.identity()
}

func (s *Server) identity() (login, userType string) {
	if s.personal != "" {
		return s.personal, "User"
	}
	return s.appSlug + "[bot]", "Bot"
}

// AllowWorkflowChanges lets ref updates change .github/workflows/ (as a
// token with the "workflows" permission could).
func (s *Server) AllowWorkflowChanges() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.protectWorkflows = false
}

// Requests returns a copy of every request so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// RequestsFor returns the recorded requests of operation op.
func (s *Server) RequestsFor(op string) []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Operation == op {
			out = append(out, r)
		}
	}
	return out
}

// handler wraps the route mux: it strips PathPrefix, records the request,
// and answers 404 for paths outside it. The answer is held until the
// request is recorded, so a client never sees an answer whose request is
// not yet in Requests.
func (s *Server) handler(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := &captureWriter{header: http.Header{}, status: http.StatusOK}
		path, ok := strings.CutPrefix(r.URL.Path, PathPrefix)
		req := Request{Method: r.Method, Path: path, Query: r.URL.Query(), Body: body,
			Authorization: r.Header.Get("Authorization"), Time: s.clock()}
		if !ok {
			writeError(rec, http.StatusNotFound, "Not Found", nil)
		} else {
			r2 := r.Clone(r.Context())
			r2.URL.Path = path
			r2.URL.RawPath = ""
			if raw, ok := strings.CutPrefix(r.URL.EscapedPath(), PathPrefix); ok {
				r2.URL.RawPath = raw
			}
			r2 = r2.WithContext(context.WithValue(r2.Context(), opKey{}, &req))
			mux.ServeHTTP(rec, r2)
		}
		req.Status = rec.status
		s.mu.Lock()
		s.requests = append(s.requests, req)
		s.mu.Unlock()
		for k, vs := range rec.header {
			w.Header()[k] = vs
		}
		w.WriteHeader(rec.status)
		_, _ = w.Write(rec.body.Bytes())
	})
}

func (s *Server) clock() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now()
}

type opKey struct{}

// handle registers one operation: it checks authentication, the repository
// (for routes under /repos/), the request against GitHub's OpenAPI
// description (an invalid one is answered 422 "Invalid request", as GitHub
// answers, and recorded as a problem) and scripted faults, then calls h
// with the server locked and checks its answer against the description too
// (a mismatch is the fake's bug, recorded as a problem). NewServer's cleanup
// fails the test on any problem.
func (s *Server) handle(mux *http.ServeMux, pattern string, rt route, h func(w http.ResponseWriter, r *http.Request)) {
	repoRoute := strings.Contains(pattern, "{owner}")
	sr, routeErr := specRoute(rt)
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if req, ok := r.Context().Value(opKey{}).(*Request); ok {
			req.Operation = rt.op
		}
		if routeErr != nil {
			s.problem(specProblem{op: rt.op, what: "route", err: routeErr})
			writeError(w, http.StatusInternalServerError, routeErr.Error(), nil)
			return
		}
		if r.Header.Get("Authorization") == "" {
			writeError(w, http.StatusUnauthorized, "Requires authentication", nil)
			return
		}
		if repoRoute && (r.PathValue("owner") != s.Owner || r.PathValue("repo") != s.Repo) {
			writeError(w, http.StatusNotFound, "Not Found", nil)
			return
		}
		body := peekBody(r)
		in, err := validateRequest(r.Context(), sr, r, body)
		if err != nil {
			s.problem(specProblem{op: rt.op, what: "request", err: err})
			writeError(w, http.StatusUnprocessableEntity, "Invalid request.\n\n"+err.Error(), nil)
			return
		}
		s.mu.Lock()
		if f := s.faults[rt.op]; f != nil && (f.When == "" || strings.Contains(string(body), f.When)) {
			if f.left > 0 {
				f.left--
				if f.left == 0 {
					delete(s.faults, rt.op)
				}
			}
			s.mu.Unlock()
			writeFault(w, f.Fault) // deliberately any shape: not checked
			return
		}
		cw := &captureWriter{header: http.Header{}, status: http.StatusOK}
		h(cw, r)
		s.mu.Unlock()
		if err := validateResponse(r.Context(), in, cw.status, cw.header, cw.body.Bytes()); err != nil {
			s.problem(specProblem{op: rt.op, what: fmt.Sprintf("%d answer", cw.status), err: err})
		}
		for k, vs := range cw.header {
			w.Header()[k] = vs
		}
		w.WriteHeader(cw.status)
		_, _ = w.Write(cw.body.Bytes())
	})
}

// captureWriter holds an answer until it is checked.
type captureWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (c *captureWriter) Header() http.Header         { return c.header }
func (c *captureWriter) WriteHeader(code int)        { c.status = code }
func (c *captureWriter) Write(b []byte) (int, error) { return c.body.Write(b) }

// problem records a request or answer that does not match the description.
func (s *Server) problem(p specProblem) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.problems = append(s.problems, p)
}

// SpecProblems returns every request and answer so far that did not match
// GitHub's OpenAPI description, one line each.
func (s *Server) SpecProblems() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.problems))
	for _, p := range s.problems {
		out = append(out, p.String())
	}
	return out
}

// AllowInvalidRequests stops the test's cleanup from failing on requests
// that do not match the description (for tests that send them on purpose);
// answers that do not match still fail it.
func (s *Server) AllowInvalidRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.allowInvalid = true
}

// checkProblems fails tb on the problems recorded (see handle).
func (s *Server) checkProblems(tb testing.TB) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.problems {
		if p.what == "request" && s.allowInvalid {
			continue
		}
		tb.Errorf("githubtest: %s", p)
	}
}

// peekBody returns r's body and puts it back for the handler.
func peekBody(r *http.Request) []byte {
	b, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	return b
}

// writeFault answers a scripted fault in GitHub's shapes.
func writeFault(w http.ResponseWriter, f Fault) {
	for k, vs := range f.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if f.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(f.RetryAfter.Round(time.Second)/time.Second)))
	}
	if f.Body != "" {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(f.Status)
		_, _ = io.WriteString(w, f.Body)
		return
	}
	msg := f.Message
	if f.SecondaryRateLimit {
		if msg == "" {
			msg = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID."
		}
		writeJSON(w, f.Status, map[string]any{
			"message":           msg,
			"documentation_url": "https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits",
			"status":            strconv.Itoa(f.Status),
		})
		return
	}
	if msg == "" {
		msg = http.StatusText(f.Status)
	}
	writeError(w, f.Status, msg, nil)
}

// writeError answers GitHub's error shape:
// {"message", "errors"?, "documentation_url", "status"}.
func writeError(w http.ResponseWriter, status int, message string, errs []map[string]any) {
	body := map[string]any{
		"message":           message,
		"documentation_url": "https://docs.github.com/rest",
		"status":            strconv.Itoa(status),
	}
	if errs != nil {
		body["errors"] = errs
	}
	writeJSON(w, status, body)
}

// validationFailed answers 422 "Validation Failed" with one error item.
func validationFailed(w http.ResponseWriter, resource, field, code, message string) {
	item := map[string]any{"resource": resource, "field": field, "code": code}
	if message != "" {
		item["message"] = message
	}
	writeError(w, http.StatusUnprocessableEntity, "Validation Failed", []map[string]any{item})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decode reads a JSON request body into v, answering 400 "Problems parsing
// JSON" (GitHub's answer) when it is not JSON.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON", nil)
		return false
	}
	return true
}

// page applies per_page/page to n items, sets GitHub's Link header and
// returns the [lo, hi) slice bounds.
func (s *Server) page(w http.ResponseWriter, r *http.Request, n int) (lo, hi int) {
	per, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
	if per <= 0 {
		per = DefaultPerPage
	}
	per = min(per, MaxPerPage)
	pg, _ := strconv.Atoi(r.URL.Query().Get("page"))
	if pg <= 0 {
		pg = 1
	}
	last := max(1, (n+per-1)/per)
	link := func(p int, rel string) string {
		q := r.URL.Query()
		q.Set("page", strconv.Itoa(p))
		q.Set("per_page", strconv.Itoa(per))
		return fmt.Sprintf(`<%s%s%s?%s>; rel="%s"`, s.srv.URL, PathPrefix, r.URL.Path, q.Encode(), rel)
	}
	var links []string
	if pg < last {
		links = append(links, link(pg+1, "next"), link(last, "last"))
	}
	if pg > 1 {
		links = append(links, link(1, "first"), link(pg-1, "prev"))
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, ", "))
	}
	lo = min((pg-1)*per, n)
	hi = min(lo+per, n)
	return lo, hi
}

func (s *Server) newID() int64 {
	s.nextID++
	return s.nextID
}

func (s *Server) htmlURL(format string, args ...any) string {
	return fmt.Sprintf("https://github.example/%s/%s/", s.Owner, s.Repo) + fmt.Sprintf(format, args...)
}

func (s *Server) timestamp() string { return s.now().UTC().Format(time.RFC3339) }
