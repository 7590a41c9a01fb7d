package githubtest

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

//go:embed testdata/github-checks-create.request.json testdata/github-checks-update.request.json
var schemaFiles embed.FS

var (
	schemasOnce                sync.Once
	createSchema, updateSchema *jsonschema.Schema
	schemaErr                  error
)

// schemas compiles the two request schemas once, with format assertions on
// (started_at/completed_at must be RFC 3339 date-times).
func schemas() (create, update *jsonschema.Schema, err error) {
	schemasOnce.Do(func() {
		c := jsonschema.NewCompiler()
		c.AssertFormat()
		for _, name := range []string{"github-checks-create.request.json", "github-checks-update.request.json"} {
			b, err := schemaFiles.ReadFile("testdata/" + name)
			if err != nil {
				schemaErr = err
				return
			}
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
			if err != nil {
				schemaErr = fmt.Errorf("githubtest: %s: %w", name, err)
				return
			}
			if err := c.AddResource("https://goalrun.invalid/contracts/"+name, doc); err != nil {
				schemaErr = err
				return
			}
		}
		createSchema, schemaErr = c.Compile("https://goalrun.invalid/contracts/github-checks-create.request.json")
		if schemaErr != nil {
			return
		}
		updateSchema, schemaErr = c.Compile("https://goalrun.invalid/contracts/github-checks-update.request.json")
	})
	return createSchema, updateSchema, schemaErr
}

// ValidateCheckRunRequest validates a check-run request body the way the
// fake does: against GitHub's request schema for op ("checks/create" or
// "checks/update") and the byte limits of output.summary and output.text.
// It returns nil for a valid body, else an error saying what is wrong.
func ValidateCheckRunRequest(op string, body []byte) error {
	create, update, err := schemas()
	if err != nil {
		return err
	}
	sch := create
	if op == "checks/update" {
		sch = update
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("body is not JSON: %w", err)
	}
	if err := sch.Validate(inst); err != nil {
		return err
	}
	var out struct {
		Output *struct {
			Summary *string `json:"summary"`
			Text    *string `json:"text"`
		} `json:"output"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return err
	}
	if out.Output != nil {
		if out.Output.Summary != nil && len(*out.Output.Summary) > CheckRunOutputBytes {
			return &byteLimitError{field: "summary", n: len(*out.Output.Summary)}
		}
		if out.Output.Text != nil && len(*out.Output.Text) > CheckRunOutputBytes {
			return &byteLimitError{field: "text", n: len(*out.Output.Text)}
		}
	}
	return nil
}

type byteLimitError struct {
	field string
	n     int
}

func (e *byteLimitError) Error() string {
	return fmt.Sprintf("%s exceeds a maximum bytesize of %d", e.field, CheckRunOutputBytes)
}

// CheckRun is the fake's record of one check run.
type CheckRun struct {
	ID          int64
	Name        string
	HeadSHA     string
	Status      string
	Conclusion  string
	StartedAt   string
	CompletedAt string
	DetailsURL  string
	ExternalID  string
	Title       string
	Summary     string
	Text        string
	// Statuses lists every status the run was in, in order, starting with
	// the one it was created with (repeats collapsed).
	Statuses []string
	// Titles lists every output.title it was given, in order.
	Titles []string
	// Updates counts accepted update requests.
	Updates int
}

// CheckRuns returns copies of the check runs created so far, oldest first.
func (s *Server) CheckRuns() []CheckRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]CheckRun, 0, len(s.checkRuns))
	for _, c := range s.checkRuns {
		cp := *c
		cp.Statuses = append([]string(nil), c.Statuses...)
		cp.Titles = append([]string(nil), c.Titles...)
		out = append(out, cp)
	}
	return out
}

type checkRunBody struct {
	Name        *string `json:"name"`
	HeadSHA     *string `json:"head_sha"`
	Status      *string `json:"status"`
	Conclusion  *string `json:"conclusion"`
	StartedAt   *string `json:"started_at"`
	CompletedAt *string `json:"completed_at"`
	DetailsURL  *string `json:"details_url"`
	ExternalID  *string `json:"external_id"`
	Output      *struct {
		Title   *string `json:"title"`
		Summary *string `json:"summary"`
		Text    *string `json:"text"`
	} `json:"output"`
}

// checkBody validates a check-run body and answers 422 in GitHub's shapes
// when it is invalid.
func checkBody(w http.ResponseWriter, op string, body []byte) bool {
	err := ValidateCheckRunRequest(op, body)
	if err == nil {
		return true
	}
	var ble *byteLimitError
	if errors.As(err, &ble) {
		validationFailed(w, "CheckRun", ble.field, "custom", ble.Error())
		return false
	}
	// GitHub answers schema violations with "Invalid request." and the
	// validator's words.
	writeError(w, http.StatusUnprocessableEntity, "Invalid request.\n\n"+err.Error(), nil)
	return false
}

func (s *Server) createCheckRun(w http.ResponseWriter, r *http.Request) {
	if s.personal != "" {
		writeError(w, http.StatusForbidden, "You must authenticate via a GitHub App.", nil)
		return
	}
	body := requestBody(r)
	if !checkBody(w, "checks/create", body) {
		return
	}
	var b checkRunBody
	if err := json.Unmarshal(body, &b); err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON", nil)
		return
	}
	if _, ok := s.git.commits[*b.HeadSHA]; !ok {
		validationFailed(w, "CheckRun", "head_sha", "custom", "No commit found for SHA: "+*b.HeadSHA)
		return
	}
	if b.Conclusion != nil && *b.Conclusion == "stale" {
		validationFailed(w, "CheckRun", "conclusion", "custom", "Conclusion stale can only be set by GitHub")
		return
	}
	c := &CheckRun{ID: s.newID(), Name: *b.Name, HeadSHA: *b.HeadSHA, Status: "queued"}
	s.applyCheckRun(c, b)
	s.checkRuns = append(s.checkRuns, c)
	writeJSON(w, http.StatusCreated, s.checkRunJSON(c))
}

func (s *Server) updateCheckRun(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("check_run_id"), 10, 64)
	var c *CheckRun
	for _, x := range s.checkRuns {
		if err == nil && x.ID == id {
			c = x
		}
	}
	if c == nil {
		writeError(w, http.StatusNotFound, "Not Found", nil)
		return
	}
	body := requestBody(r)
	if !checkBody(w, "checks/update", body) {
		return
	}
	var b checkRunBody
	if err := json.Unmarshal(body, &b); err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON", nil)
		return
	}
	if b.Conclusion != nil && *b.Conclusion == "stale" {
		validationFailed(w, "CheckRun", "conclusion", "custom", "Conclusion stale can only be set by GitHub")
		return
	}
	s.applyCheckRun(c, b)
	c.Updates++
	writeJSON(w, http.StatusOK, s.checkRunJSON(c))
}

// applyCheckRun merges a valid body into c. A conclusion without a status
// completes the run, as GitHub does ("Providing conclusion will
// automatically set the status parameter to completed").
func (s *Server) applyCheckRun(c *CheckRun, b checkRunBody) {
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	if b.Name != nil && *b.Name != "" {
		c.Name = *b.Name
	}
	set(&c.Status, b.Status)
	set(&c.Conclusion, b.Conclusion)
	if b.Conclusion != nil && b.Status == nil {
		c.Status = "completed"
	}
	set(&c.StartedAt, b.StartedAt)
	set(&c.CompletedAt, b.CompletedAt)
	set(&c.DetailsURL, b.DetailsURL)
	set(&c.ExternalID, b.ExternalID)
	if c.Status == "completed" && c.CompletedAt == "" {
		c.CompletedAt = s.timestamp()
	}
	if c.StartedAt == "" {
		c.StartedAt = s.timestamp()
	}
	if o := b.Output; o != nil {
		set(&c.Title, o.Title)
		set(&c.Summary, o.Summary)
		set(&c.Text, o.Text)
		if o.Title != nil {
			c.Titles = append(c.Titles, *o.Title)
		}
	}
	if n := len(c.Statuses); n == 0 || c.Statuses[n-1] != c.Status {
		c.Statuses = append(c.Statuses, c.Status)
	}
}

func (s *Server) checkRunJSON(c *CheckRun) map[string]any {
	return fromExample("checks/create", http.StatusCreated, s.checkRunOwn(c))
}

func (s *Server) checkRunOwn(c *CheckRun) map[string]any {
	m := map[string]any{
		"id":          c.ID,
		"node_id":     "CR_" + strconv.FormatInt(c.ID, 10),
		"name":        c.Name,
		"head_sha":    c.HeadSHA,
		"status":      c.Status,
		"conclusion":  nil,
		"started_at":  c.StartedAt,
		"external_id": c.ExternalID,
		"html_url":    s.htmlURL("runs/%d", c.ID),
		"app":         map[string]any{"id": 15368, "slug": s.appSlug, "name": s.appSlug, "node_id": "MDM6QXBwMTUzNjg="},
		"url":         fmt.Sprintf("%s/repos/%s/%s/check-runs/%d", s.URL, s.Owner, s.Repo, c.ID),
		"output": map[string]any{
			"title":             nilIfEmpty(c.Title),
			"summary":           nilIfEmpty(c.Summary),
			"text":              nilIfEmpty(c.Text),
			"annotations_count": 0,
		},
	}
	m["completed_at"], m["details_url"] = nil, nil
	if c.Conclusion != "" {
		m["conclusion"] = c.Conclusion
	}
	if c.CompletedAt != "" {
		m["completed_at"] = c.CompletedAt
	}
	if c.DetailsURL != "" {
		m["details_url"] = c.DetailsURL
	}
	return m
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func requestBody(r *http.Request) []byte {
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(r.Body)
	return buf.Bytes()
}
