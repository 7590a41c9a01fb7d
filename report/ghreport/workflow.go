package ghreport

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/sethvargo/go-githubactions"

	"github.com/goalrun/goalrun/report"
)

// Log owns the step's stdout, where the runner reads workflow commands
// (::warning::, ::add-mask::, ::stop-commands::). Text that goalrun does
// not control — the agent's output, progress lines quoting it — goes
// through Untrusted, which wraps it in a ::stop-commands::TOKEN region with
// a random token, so nothing the agent prints is run as a command. Commands
// goalrun issues itself go through Commands, which ends that region first
// (::TOKEN::). Both writers are safe for concurrent use and never fail: a
// broken stdout drops output instead of panicking go-githubactions.
type Log struct {
	mu      sync.Mutex
	w       io.Writer
	token   string
	stopped bool
	midLine bool // the last untrusted byte was not a newline
}

// NewLog returns a Log writing to w with a random stop-commands token.
func NewLog(w io.Writer) *Log {
	return &Log{w: w, token: randomToken()}
}

// Token returns the stop-commands token (for tests).
func (l *Log) Token() string { return l.token }

// Untrusted returns the writer for output goalrun does not control.
func (l *Log) Untrusted() io.Writer { return logWriter{l, false} }

// Commands returns the writer for workflow commands goalrun issues (give
// it to go-githubactions with WithWriter).
func (l *Log) Commands() io.Writer { return logWriter{l, true} }

// Close ends a stop-commands region still open, so later steps' commands
// work. It never fails.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.resume()
	return nil
}

func (l *Log) resume() {
	if !l.stopped {
		return
	}
	if l.midLine {
		_, _ = io.WriteString(l.w, "\n")
		l.midLine = false
	}
	_, _ = io.WriteString(l.w, "::"+l.token+"::\n")
	l.stopped = false
}

type logWriter struct {
	l       *Log
	command bool
}

func (w logWriter) Write(p []byte) (int, error) {
	l := w.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.command {
		l.resume()
	} else if !l.stopped && len(p) > 0 {
		_, _ = io.WriteString(l.w, "::stop-commands::"+l.token+"\n")
		l.stopped = true
	}
	if len(p) == 0 {
		return 0, nil
	}
	_, _ = l.w.Write(p)
	if !w.command {
		l.midLine = p[len(p)-1] != '\n'
	}
	return len(p), nil
}

func randomToken() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error()) // rand.Read never fails on supported platforms
	}
	return hex.EncodeToString(b[:])
}

// Outputs are the action's outputs (action.yml), in the order declared.
var Outputs = []string{
	"verified", "conclusion", "passed", "grounded", "check-modified", "files-changed",
	"iterations", "halt", "status", "session-id", "cost-usd", "document", "pr-url",
}

// OutputValues returns the action's outputs for doc: documentPath is the
// document file, prURL the fix pull request ("" when none). Every name in
// Outputs is present. A value that does not apply is "", and so is every
// verdict output when no run started (a startup error: doc has no goal),
// so a workflow never reads "false" for "nothing was tried":
//
//   - verified is "true" only when the conclusion is success (the goal
//     passed, grounded in goalrun's own check, and the agent did not modify
//     the check's files); passed and grounded say less.
//   - check-modified and files-changed come from the document's changes
//     block ("" when it has none).
//   - iterations is "0" when the check passed before any agent turn.
func OutputValues(doc report.Document, documentPath, prURL string) map[string]string {
	v := map[string]string{}
	for _, name := range Outputs {
		v[name] = ""
	}
	v["status"] = doc.Status
	v["conclusion"] = doc.Conclusion
	if g := doc.Goal; g != nil {
		v["verified"] = strconv.FormatBool(doc.Conclusion == report.ConclusionSuccess)
		v["passed"] = strconv.FormatBool(g.Passed)
		v["grounded"] = strconv.FormatBool(g.Grounded)
		v["iterations"] = strconv.Itoa(g.Iterations)
		if g.Halt != nil {
			v["halt"] = *g.Halt
		}
	}
	if c := doc.Changes; c != nil {
		v["check-modified"] = strconv.FormatBool(c.CheckModified)
		v["files-changed"] = strconv.Itoa(c.FilesChanged)
	}
	if doc.Agent != nil {
		v["session-id"] = doc.Agent.SessionID
	}
	if doc.Usage != nil {
		if !doc.Usage.CostUnknown { // empty: the agent reports no cost
			v["cost-usd"] = strconv.FormatFloat(doc.Usage.CostUSD, 'f', -1, 64)
		}
	}
	v["document"] = documentPath
	v["pr-url"] = prURL
	return v
}

// OutputsFile writes step outputs to GITHUB_OUTPUT through go-githubactions'
// file command, with a fresh random delimiter per value (checked not to
// occur in it), so no value — an agent summary holding "EOF" lines or
// "::set-output" — can end its own value early and inject another output.
// (go-githubactions' SetOutput uses a fixed delimiter, hence not SetOutput.)
type OutputsFile struct {
	// Action issues the file command; its Getenv must give GITHUB_OUTPUT.
	Action *githubactions.Action
}

// Set writes one output. It returns an error, never panics, when
// GITHUB_OUTPUT is unset or cannot be written.
func (o OutputsFile) Set(name, value string) (err error) {
	if o.Action.Getenv("GITHUB_OUTPUT") == "" {
		return errors.New("GITHUB_OUTPUT is not set: outputs not written")
	}
	if strings.ContainsAny(name, "\r\n<=") {
		return fmt.Errorf("output name %q is invalid", name)
	}
	delim := "ghadelimiter_" + randomToken()
	for strings.Contains(value, delim) {
		delim = "ghadelimiter_" + randomToken()
	}
	defer func() {
		if r := recover(); r != nil { // IssueFileCommand panics when the file cannot be written
			err = fmt.Errorf("could not write output %s: %v", name, r)
		}
	}()
	o.Action.IssueFileCommand(&githubactions.Command{
		Name:    "output",
		Message: name + "<<" + delim + "\n" + value + "\n" + delim,
	})
	return nil
}

// SetAll writes every output of values in the order of Outputs and returns
// the first error.
func (o OutputsFile) SetAll(values map[string]string) error {
	for _, name := range Outputs {
		if err := o.Set(name, values[name]); err != nil {
			return err
		}
	}
	return nil
}

// Mask issues ::add-mask:: for each secret (line by line: the runner masks
// single lines), so the runner replaces it with *** in the log. Empty values
// and lines shorter than 4 bytes are skipped (masking "a" would garble the
// whole log).
func Mask(a *githubactions.Action, secrets ...string) {
	for _, s := range secrets {
		for _, line := range strings.Split(s, "\n") {
			line = strings.TrimRight(line, "\r")
			if len(line) >= 4 {
				a.AddMask(line)
			}
		}
	}
}

// CheckFileCommands reports which of the runner's file-command variables
// are unset or point at files that cannot be opened for appending, so the
// action can warn and skip what depends on them instead of letting
// go-githubactions panic.
func CheckFileCommands(getenv func(string) string) map[string]error {
	problems := map[string]error{}
	for _, name := range []string{"GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY"} {
		p := getenv(name)
		if p == "" {
			problems[name] = fmt.Errorf("%s is not set", name)
			continue
		}
		f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			problems[name] = fmt.Errorf("%s (%s) cannot be written: %w", name, p, err)
			continue
		}
		_ = f.Close()
	}
	return problems
}

// Publish runs every publisher with doc, in order, and returns one error
// per publisher that failed (nil entries dropped); none of them stops the
// others.
func Publish(ctx context.Context, doc report.Document, pubs ...Publisher) []error {
	var errs []error
	for _, p := range pubs {
		if p == nil {
			continue
		}
		if err := safePublish(ctx, p, doc); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

func safePublish(ctx context.Context, p Publisher, doc report.Document) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%T panicked: %v", p, r)
		}
	}()
	return p.Publish(ctx, doc)
}

// fit caps s with report.Cap so that the result, marker included, is at
// most limit bytes (report.Cap bounds the kept text and adds its marker on
// top). For a limit too small for any marker it cuts on a rune boundary.
func fit(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	for reserve := 128; reserve < limit; reserve *= 2 {
		if out := report.Cap(s, limit-reserve); len(out) <= limit {
			return out
		}
	}
	i := max(limit, 0)
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}
