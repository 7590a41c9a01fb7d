package goal

import (
	"time"

	"github.com/goalrun/goalrun/report"
)

// Outcome is how a run ended, as plain values: every fact the document
// needs. The loop builds it; report.Finish turns it into a document (see
// Outcome.ReportRun). A failing goal is an Outcome, never an error.
type Outcome struct {
	// Check is the --until command ("" in judge-only mode); Goal the text
	// the goal was judged against (the check, else --infer-until).
	Check, Goal string
	// Passed says the goal was judged met; Grounded that the verdict came
	// from the check run in the sandbox exiting 0.
	Passed, Grounded bool
	// TestedNothing is the passing check's CheckRun.TestedNothing: the
	// check exited 0 but ran no test (the pass is then not verified).
	TestedNothing string
	// AgentTurns counts agent turns taken (goal.iterations): 0 when the
	// check already passed (or could not run) and the agent never started.
	AgentTurns int
	// Halt is "" when the goal passed, else a report.Halt* value;
	// HaltReason says why in one sentence.
	Halt, HaltReason string
	// Failure is nil when every step ran (the result shape), else why the
	// run failed (the failure shapes).
	Failure *Failure
	// Iterations keeps the first and the last iterations (report's bounds);
	// iteration 0 is the first check alone.
	Iterations *report.IterationLog
	// Summary is the last agent turn's final answer (uncapped; for the
	// command agent a tail with report.CapTail's marker), or goalrun's own
	// sentence when the agent never ran.
	Summary string
	// AgentName, AgentVersion (when the CLI says), SessionID and Model
	// identify the agent and the model that answered last; ModelsServed
	// lists every model seen, first seen first.
	AgentName, AgentVersion, SessionID, Model string
	ModelsServed                              []string
	// Usage is the run's total (agent turns and judge).
	Usage report.Usage
	// Receipts rolls up every tool call the agent made.
	Receipts *report.Rollup
	// Turns is the agent's own turn count summed over invocations;
	// TurnsCompleted counts agent invocations that ended with a result;
	// Delegations counts the sub-agents the agent started.
	Turns, TurnsCompleted, Delegations int
	// Judge is the last judge verdict (nil without a judge).
	Judge *report.Judge
	// Changes is what the agent changed (nil without a Tracker).
	Changes *report.Changes
	// Claims are the ungrounded claims in Summary (nil without Evidence).
	Claims []report.Claim
	// Setup are the setup steps that ran before the first check.
	Setup []SetupResult
	// Started and Elapsed are the run's start and wall-clock duration.
	Started time.Time
	Elapsed time.Duration
}

// Failure is why a run failed: a stable error code (report.Err*), a message
// for people, the cause and its cause-specific fields, and suggestions
// (plain sentences, no shell commands).
type Failure struct {
	Code        string
	Message     string
	Cause       string
	Detail      map[string]any
	Suggestions []string
	// Reason is set for auth_required: invalid_key, expired or missing_key.
	Reason string
}

// Status returns the document status the outcome maps to.
func (o *Outcome) Status() string {
	if o.Failure == nil {
		return report.StatusSuccess
	}
	switch o.Failure.Code {
	case report.ErrCancelled:
		return report.StatusCancelled
	case report.ErrAuthRequired:
		return report.StatusAuthRequired
	}
	return report.StatusError
}

// CheckRun is one run of the check.
type CheckRun struct {
	// Iteration is 0 for the first check, else the agent turn it follows.
	Iteration int
	Command   string
	ExitCode  int
	Passed    bool
	TimedOut  bool
	OOMKilled bool
	// Cancelled is true when the run was interrupted (or timed out) while
	// the check ran; its result then says nothing about the goal.
	Cancelled bool
	Duration  time.Duration
	// Tail is the end of the check's combined stdout and stderr (at most
	// CheckTailKeep bytes); TailBytes the output's total length.
	Tail      string
	TailBytes int64
	// Failures are the failing tests' own lines from anywhere in the
	// output (OutputScanner), at most CheckFailuresKeep bytes; "" when
	// the check passed or none were recognised.
	Failures string
	// Failing says in one sentence which tests failed, named and counted
	// from the whole output (DescribeScannedFailing); "" when the check
	// passed or none were recognised.
	Failing string
	// Environment is set when the check failed because of its
	// environment rather than the code (EnvironmentFailure).
	Environment *EnvFailure
	// TestedNothing, when the check's output shows that every test runner
	// in it ran no test (testTally), says so in one sentence; "" when a
	// test ran or no runner was recognised.
	TestedNothing string
}

// CheckTailKeep is how much of a check's combined output the loop keeps
// per check for prompts, halts and the document (which shows report.TailCap
// of it): 4096 bytes.
const CheckTailKeep = 4096
