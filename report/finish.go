package report

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"

	"github.com/goalrun/goalrun/sandbox"
)

// Auth reasons ("reason" of the auth_required shape).
const (
	AuthInvalidKey = "invalid_key"
	AuthExpired    = "expired"
	AuthMissingKey = "missing_key"
)

// Run is every fact known when a run ends, as plain values; Finish turns it
// into the document. Zero values mean "nothing happened": no error, not
// cancelled, no receipts, no changes. Strings may be of any size and contain
// secrets and invalid UTF-8: Finish redacts, repairs and caps them.
type Run struct {
	// Check is the --until command, or the --infer-until text.
	Check string
	// Passed says the goal was judged met; Grounded says goalrun's own check
	// decided it (exit 0 in the sandbox).
	Passed, Grounded bool
	// TestedNothing says, for a grounded pass, that the check's output
	// showed it ran no test (one sentence); the pass is then neutral.
	TestedNothing string
	// IterationsTaken is goal.iterations: the number of agent turns taken
	// (0: the check already passed and the agent never ran).
	IterationsTaken int
	// Halt is one of the Halt* values (the schema allows no others), ""
	// when the goal passed (or, for a failure, when no halt applies).
	// HaltReason says why in one sentence.
	Halt, HaltReason string

	// Setup are the setup steps that ran before the first check (at most
	// SetupMax are kept).
	Setup []SetupStep

	// Iterations are the loop's iterations in order (iteration 0 is the
	// first check). Pass all of them, or what an IterationLog kept with its
	// Omitted count in IterationsOmitted: Finish keeps the first IterHead and
	// the last IterTail and adds the rest to IterationsOmitted.
	Iterations        []Iteration
	IterationsOmitted int

	// Summary is the agent's final answer (result shape only).
	Summary string

	// Error is the failure code (Err* values); "" means the machinery did
	// not fail. Message explains it. Cause and CauseFields make the
	// "failure" block ({"cause": Cause, …CauseFields}); Suggestions are plain
	// sentences (no shell commands), defaulted from the code when nil.
	// AuthReason is AuthInvalidKey, AuthExpired or AuthMissingKey for
	// auth_required ("" or another value reads as AuthInvalidKey: the API
	// refused the key it was given).
	Error       string
	Message     string
	Cause       string
	CauseFields map[string]any
	Suggestions []string
	AuthReason  string
	// Cancelled says the run was interrupted (SIGINT/SIGTERM).
	Cancelled bool

	// Turns counts the agent's own turns over the run; TurnsCompleted those
	// that ended normally (failure shapes); Delegations the sub-agent calls.
	Turns, TurnsCompleted, Delegations int

	// Agent identifies the agent (nil: unknown, left out).
	Agent *AgentInfo
	// ModelUsed is the model the agent asked for or reported; ModelsServed
	// the models that answered (at most ModelsServedMax are kept).
	ModelUsed    string
	ModelsServed []ModelServed
	// Usage is the run's token use and cost (nil: unknown).
	Usage *Usage
	// Receipts is the roll-up (Rollup.Receipts); nil means no tool calls.
	Receipts *Receipts
	// UngroundedClaims are the unbacked claims (at most ClaimsMax kept).
	UngroundedClaims []Claim
	// Judge is the model judge's opinion (nil: no judge).
	Judge *Judge
	// Changes is what the agent changed (nil: not computed).
	Changes *Changes
	// AllowTestEdits is --allow-test-edits: a pass with check_modified may
	// still conclude success.
	AllowTestEdits bool
	// Sandbox is the posture as the sandbox reported it (nil: no sandbox
	// started; never invented).
	Sandbox *sandbox.Posture
	// Elapsed is the run's wall-clock time, from the moment goalrun began
	// the run (before the sandbox started) to the document.
	Elapsed time.Duration
	// Timings splits Elapsed into buckets (nil: not measured).
	Timings *Timings
}

// Finish builds the run's document and emits exactly one terminal event
// through e (nil: none). The document is the result shape (status
// "success") unless the run failed: Cancelled (or halt "interrupted") gives
// "cancelled", an auth failure (Error AuthRequired, an AuthReason or halt
// "auth_required") gives "auth_required", any other Error gives "error";
// failure shapes carry error, message, suggestions, failure and everything
// already known, never "summary".
//
// Every string is redacted with e's Redactor (before capping), repaired to
// valid UTF-8 and capped; lists are bounded as README.md, "Limits", says, and
// what a cap dropped is named in "elided". The conclusion is computed by
// Conclusion. The terminal event ("completed" for the result shape, else
// "failed") is built from the returned document, so the two cannot
// disagree; a second Finish on the same Emitter emits nothing more.
func Finish(run Run, e *Emitter) Document {
	d := Build(run, e.Redactor())
	e.terminal(d)
	return d
}

// Build is Finish without the terminal event: the document of run,
// redacted with red (nil: nothing). Emit the event with Emitter.Terminal once
// the document is wherever it must be (goalrun writes --output first, so a
// failure to write it can still be an event before the terminal one).
func Build(run Run, red *Redactor) Document {
	if run.Changes != nil && len(run.Changes.GitExecutable) > 0 && run.Passed {
		// Fail closed: a pass over a tree that makes git run the agent's
		// programs is no pass (the loop halts before the check; this holds
		// for any producer).
		run.Passed, run.Grounded = false, false
		run.Halt, run.HaltReason = HaltUnsafeChange, UnsafeChangeReason(run.Changes.GitExecutable)
	}
	d := Document{Schema: Schema, Status: runStatus(run)}
	halt := run.Halt
	switch d.Status {
	case StatusCancelled:
		halt = HaltInterrupted
	case StatusAuthRequired:
		halt = HaltAuthRequired
	case StatusSuccess:
		if run.Passed {
			halt = ""
		}
	}
	d.Goal = &Goal{
		Check:      run.Check,
		Passed:     run.Passed,
		Grounded:   run.Grounded,
		Iterations: max(run.IterationsTaken, 0),
		HaltReason: run.HaltReason,
	}
	if halt != "" {
		d.Goal.Halt = &halt
	}
	if d.Goal.Passed && d.Goal.Grounded {
		d.Goal.TestedNothing = run.TestedNothing
	}
	d.Elided = []string{}

	if d.Status == StatusSuccess {
		s := run.Summary
		d.Summary = &s
	} else {
		d.Error = run.Error
		switch d.Status {
		case StatusCancelled:
			d.Error = ErrCancelled
		case StatusAuthRequired:
			d.Error = ErrAuthRequired
			switch d.Reason = run.AuthReason; d.Reason {
			case AuthInvalidKey, AuthExpired, AuthMissingKey:
			default: // the API refused the key it was given
				d.Reason = AuthInvalidKey
			}
		}
		d.Message = run.Message
		if strings.TrimSpace(d.Message) == "" {
			d.Message = defaultMessage(d.Error)
		}
		d.Suggestions = run.Suggestions
		if d.Suggestions == nil {
			d.Suggestions = DefaultSuggestions(d.Error, d.Reason)
		}
		if d.Suggestions == nil {
			d.Suggestions = []string{}
		}
		cause := run.Cause
		if cause == "" {
			switch d.Status {
			case StatusCancelled:
				cause = HaltInterrupted
			case StatusAuthRequired:
				cause = d.Reason
			default:
				cause = snake(d.Error)
			}
		}
		d.Failure = &Failure{Cause: cause, Detail: run.CauseFields}
		d.TurnsCompleted = ptr(max(run.TurnsCompleted, 0))
	}

	if len(run.Setup) > 0 {
		d.Setup = append([]SetupStep(nil), run.Setup...)
	}
	// Iterations: the first IterHead and the last IterTail.
	its, omitted := run.Iterations, max(run.IterationsOmitted, 0)
	if n := len(its); n > IterHead+IterTail {
		kept := make([]Iteration, 0, IterHead+IterTail)
		kept = append(kept, its[:IterHead]...)
		kept = append(kept, its[n-IterTail:]...)
		omitted += n - len(kept)
		its = kept
	} else {
		its = append([]Iteration(nil), its...)
	}
	if d.Status == StatusSuccess || len(its) > 0 || omitted > 0 {
		if its == nil {
			its = []Iteration{}
		}
		d.Iterations = its
		d.IterationsOmitted = ptr(omitted)
	}
	d.Turns = ptr(max(run.Turns, 0))
	d.Delegations = ptr(max(run.Delegations, 0))
	if run.Agent != nil {
		a := *run.Agent
		d.Agent = &a
	}
	d.ModelUsed = ModelName{Name: run.ModelUsed, Unreported: run.ModelUsed == "" && run.IterationsTaken > 0}
	if run.ModelsServed != nil || d.Status == StatusSuccess {
		d.ModelsServed = append([]ModelServed{}, run.ModelsServed...)
	}
	if run.Usage != nil {
		u := *run.Usage
		d.Usage = &u
	}
	switch {
	case run.Receipts != nil:
		r := *run.Receipts
		r.ByTool = copyCounts(r.ByTool)
		r.Sample = append([]Receipt{}, r.Sample...)
		d.Receipts = &r
	case d.Status == StatusSuccess:
		d.Receipts = &Receipts{ByTool: map[string]int{}, Sample: []Receipt{}}
	}
	if run.UngroundedClaims != nil || d.Status == StatusSuccess {
		d.UngroundedClaims = append([]Claim{}, run.UngroundedClaims...)
	}
	if run.Judge != nil {
		j := *run.Judge
		d.Judge = &j
	}
	if run.Changes != nil {
		c := *run.Changes
		c.RiskyPaths = append([]string{}, c.RiskyPaths...)
		d.Changes = &c
	}
	if run.Sandbox != nil {
		p := copyPosture(*run.Sandbox)
		d.Sandbox = &p
	}
	d.ElapsedSeconds = ptr(run.Elapsed.Seconds())
	if run.Timings != nil {
		t := *run.Timings
		if t.Prepare != nil {
			t.Prepare = make(map[string]float64, len(run.Timings.Prepare))
			for k, v := range run.Timings.Prepare {
				t.Prepare[k] = v
			}
		}
		d.Timings = &t
	}

	normalize(&d, red)
	d.Conclusion = Conclusion(d.Status, d.Goal, d.Changes, run.AllowTestEdits)
	return d
}

// Conclusion maps a document to its GitHub check-run conclusion
// (docs/goalrun-1.md, "Reading the verdict"): cancelled → "cancelled", auth_required
// → "action_required", error → "failure"; for the result shape "failure"
// whenever the agent changed git's executable configuration
// (changes.git_executable), else "success"
// when the goal passed, grounded, and the agent did not modify the check (or
// allowTestEdits) and the check tested something (goal.tested_nothing
// empty), "neutral" when it passed otherwise (not grounded, the check
// modified, or nothing tested), "timed_out" when the time budget halted it, else
// "failure".
func Conclusion(status string, g *Goal, c *Changes, allowTestEdits bool) string {
	switch status {
	case StatusCancelled:
		return ConclusionCancelled
	case StatusAuthRequired:
		return ConclusionActionRequired
	case StatusSuccess:
	default:
		return ConclusionFailure
	}
	if g == nil {
		return ConclusionFailure
	}
	modified := c != nil && c.CheckModified && !allowTestEdits
	switch {
	case c != nil && len(c.GitExecutable) > 0:
		return ConclusionFailure // fails closed, passed or not
	case g.Passed && g.Grounded && !modified && g.TestedNothing == "":
		return ConclusionSuccess
	case g.Passed:
		return ConclusionNeutral
	case g.Halt != nil && *g.Halt == HaltTimeout:
		return ConclusionTimedOut
	}
	return ConclusionFailure
}

// runStatus decides the document's status from a Run.
func runStatus(run Run) string {
	switch {
	case run.Cancelled || run.Halt == HaltInterrupted || run.Error == ErrCancelled:
		return StatusCancelled
	case run.Error == ErrAuthRequired || run.AuthReason != "" || run.Halt == HaltAuthRequired:
		return StatusAuthRequired
	case run.Error != "":
		return StatusError
	}
	return StatusSuccess
}

// StartupError returns the startup-error document: a failure before any run
// existed (bad flag, unreadable config, unknown agent, Docker required but
// absent). It has only schema, status "error", conclusion "failure", error
// (code; "" becomes ErrBadInput), message (capped at SummaryCap, repaired;
// defaulted from the code when blank) and suggestions (plain sentences, no
// shell commands; defaulted from the code when none are given) — no sandbox
// block is invented. It emits nothing; see FailStartup for the event.
func StartupError(code, message string, suggestions ...string) Document {
	if code == "" {
		code = ErrBadInput
	}
	if strings.TrimSpace(message) == "" {
		message = defaultMessage(code)
	}
	if suggestions == nil {
		suggestions = DefaultSuggestions(code, "")
	}
	d := Document{
		Schema:      Schema,
		Status:      StatusError,
		Conclusion:  ConclusionFailure,
		Error:       code,
		Message:     message,
		Suggestions: append([]string{}, suggestions...),
	}
	normalize(&d, nil)
	return d
}

// FailStartup is StartupError with its message and suggestions redacted by
// e's Redactor, and the one terminal "failed" event emitted through e, for a
// startup failure in a process that already streams events.
func FailStartup(e *Emitter, code, message string, suggestions ...string) Document {
	d := BuildStartup(e.Redactor(), code, message, suggestions...)
	e.terminal(d)
	return d
}

// BuildStartup is FailStartup without the terminal event (see Build).
func BuildStartup(red *Redactor, code, message string, suggestions ...string) Document {
	rs := make([]string, len(suggestions))
	for i, s := range suggestions {
		rs[i] = red.Redact(s)
	}
	if suggestions == nil {
		rs = nil
	}
	return StartupError(code, red.Redact(message), rs...)
}

// DefaultSuggestions returns plain-sentence suggestions for an error code
// (and, for AuthRequired, an auth reason); nil for unknown codes. They name
// flags and settings, never shell commands, because programs and other
// hosts read them.
func DefaultSuggestions(code, reason string) []string {
	switch code {
	case ErrBadInput:
		return []string{"Correct the flag, input or configuration key named in the message and run again."}
	case ErrAgentNotFound:
		return []string{"Install the agent's CLI where the sandbox can run it, or name its executable with --agent-bin (the agent-bin setting)."}
	case ErrAgentFailed:
		return []string{"Read the agent's own words in the message and the last iteration; if the model API was unavailable, run again later."}
	case ErrSandboxUnavailable:
		return []string{
			"Start a Docker Engine that goalrun can reach (DOCKER_HOST or the default socket).",
			"To run without a container on purpose, use --sandbox local (the sandbox setting), or --sandbox auto to fall back to it with a notice.",
		}
	case ErrSandboxFailed:
		return []string{"The sandbox broke during the run; check the Docker Engine's health and the sandbox image (--image, the image setting), then run again."}
	case ErrCheckNotRunnable:
		return []string{"Make sure the check's command exists in the sandbox and is executable there (the check runs inside it, not on this machine); give the sandbox an image that has it with --image (the image setting). No agent turn was spent on it."}
	case ErrEnvironmentFailed:
		return []string{"Prepare what the check needs before the first check with the setup setting, allow its registry with the allow-host setting, or give the sandbox an image or mount that holds it; no agent turn was spent on it."}
	case ErrAuthRequired:
		switch reason {
		case AuthMissingKey:
			return []string{"Provide the model API key to goalrun as a secret (for example ANTHROPIC_API_KEY or OPENAI_API_KEY)."}
		case AuthExpired:
			return []string{"Renew the agent's model API credentials: they have expired."}
		}
		return []string{"Replace the agent's model API key: the model API refused it."}
	case ErrCancelled:
		return []string{"The run was interrupted; the work done so far is reported here. Run it again to finish."}
	case ErrGitHubUnavailable:
		return []string{"GitHub's API could not be reached or refused the request; the document is still in the job's output and summary."}
	}
	return nil
}

// defaultMessage is the message of a failure that came without one.
func defaultMessage(code string) string {
	switch code {
	case ErrCancelled:
		return "The run was interrupted (SIGINT or SIGTERM) before the goal was decided."
	case ErrAuthRequired:
		return "The agent's model API refused its credentials."
	case "":
		return "The run failed."
	}
	return fmt.Sprintf("The run failed with %s.", code)
}

// snake turns an error code into a cause: "AgentFailed" → "agent_failed".
func snake(code string) string {
	var b strings.Builder
	for i, r := range code {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	if b.Len() == 0 {
		return "error"
	}
	return b.String()
}

func ptr[T any](v T) *T { return &v }

func copyCounts(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// copyPosture returns p with its slices and pointers copied.
func copyPosture(p sandbox.Posture) sandbox.Posture {
	p.EgressAllowlist = append([]string(nil), p.EgressAllowlist...)
	p.EgressDenials = append([]string(nil), p.EgressDenials...)
	p.CapDrop = append([]string{}, p.CapDrop...)
	p.ExtraMounts = append([]string(nil), p.ExtraMounts...)
	p.HostMounts = append([]string(nil), p.HostMounts...)
	p.SetupEgressAllowlist = append([]string(nil), p.SetupEgressAllowlist...)
	p.SetupEgressDenials = append([]string(nil), p.SetupEgressDenials...)
	p.EgressAllowNets = append([]string(nil), p.EgressAllowNets...)
	p.HostLeftOut = append([]string(nil), p.HostLeftOut...)
	p.SecretsInSandbox = append([]string{}, p.SecretsInSandbox...)
	if p.Mount != nil {
		m := *p.Mount
		p.Mount = &m
	}
	if p.FallbackNotice != nil {
		f := *p.FallbackNotice
		p.FallbackNotice = &f
	}
	return p
}

// seconds makes a duration in seconds safe for JSON: NaN, infinite and
// negative values become 0, and it is rounded to milliseconds.
func seconds(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0
	}
	if f > 1e12 {
		return 1e12
	}
	return math.Round(f*1000) / 1000
}

// UnsafeChangeReason is the halt reason of HaltUnsafeChange for the changes
// named in paths (changes.git_executable): git's executable configuration,
// or goalrun's own configuration file.
func UnsafeChangeReason(paths []string) string {
	return fmt.Sprintf("The agent changed git's executable configuration or goalrun's configuration (%s): git or goalrun "+
		"run in this tree on this machine would run programs the agent wrote, so the run fails closed whatever the check "+
		"says. Restore these paths from a trusted copy (or delete a new repository) before running git or goalrun here.", strings.Join(paths, ", "))
}
