package goal

import (
	"context"

	"github.com/goalrun/goalrun/goal/agent"
	"github.com/goalrun/goalrun/goal/workspace"
	"github.com/goalrun/goalrun/grounding"
	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/sandbox"
)

// The loop's seams for grounding (the judge, workspace changes, claims,
// no-progress and budget halts). Each is a field of Config; nil switches it
// off. The loop owns these interfaces; implementations live beside them in
// package goal (judge*.go, changes.go over goal/workspace, halt*.go) and in
// grounding (claims).

// Events receives the loop's progress events; *report.Emitter satisfies it
// (it redacts, caps and timestamps). The loop never emits terminal events.
type Events interface {
	Emit(typ, phase, message string, data map[string]any)
}

// Judge decides, after an agent turn, whether the goal is met when there is
// no deterministic check (--infer-until), or gives its opinion beside the
// check's verdict. Its verdict is never grounded.
type Judge interface {
	// Judge returns the verdict for in; sb is the run's sandbox (a judge
	// command runs there as a check step). An error means the judge could
	// not decide; the loop records it and treats the goal as not met.
	Judge(ctx context.Context, sb sandbox.Sandbox, in JudgeInput) (JudgeVerdict, error)
}

// JudgeInput is what a judge sees after turn Iteration.
type JudgeInput struct {
	// Goal is the --infer-until text (or, with a check, the check command).
	Goal string
	// Iteration is the 1-based agent turn just finished.
	Iteration int
	// AgentSummary is the agent's final answer of that turn, uncapped.
	AgentSummary string
	// Check is the check's result for this turn, nil without --until.
	Check *CheckRun
}

// JudgeVerdict is a judge's decision.
type JudgeVerdict struct {
	Met    bool
	Reason string
	// By is "agent" (the agent CLI asked) or "command" (--judge-cmd).
	By string
	// Usage is what judging cost, added to the run's usage.
	Usage agent.Usage
}

// Tracker follows the workspace for the report's changes and no-progress
// detection.
type Tracker interface {
	// Baseline snapshots the workspace before the first agent turn.
	Baseline(ctx context.Context) error
	// AfterTurn is called after each agent turn; it returns a fingerprint of
	// the workspace state (equal fingerprints: nothing changed).
	AfterTurn(ctx context.Context, iteration int) (state string, err error)
	// Changes returns the run's changes for the document (nil if unknown).
	Changes(ctx context.Context) *report.Changes
}

// HostCodeTracker is an optional ability of a Tracker: after AfterTurn it
// names the changes that would make git, run later in this tree on the
// host, run a program the agent wrote (git's executable configuration; see
// workspace.Tracker.HostCode). The loop then halts the run
// (report.HaltUnsafeChange) without running the check on that tree.
type HostCodeTracker interface {
	HostCode() []workspace.RiskyPath
}

// Evidence collects what backs (or contradicts) the agent's claims and
// finds the ungrounded ones at the end; *grounding.Evidence satisfies it.
// The loop turns its receipts into grounding's (evidenceReceipt) and the
// claims into the document's (reportClaims).
type Evidence interface {
	// AddReceipt records one finished tool call.
	AddReceipt(r grounding.Receipt)
	// SetCheck records the latest check run.
	SetCheck(cmd string, ran, passed bool, exitCode int)
	// Claims returns the ungrounded claims in finalText (≤
	// grounding.ClaimsMax).
	Claims(finalText string) []grounding.Claim
}

// Halter decides the smart halts (no_progress, budget). It returns halt ""
// to go on, else a report.Halt* value and a one-sentence reason.
type Halter interface {
	// AfterTurn is called after each turn's check (and judge).
	AfterTurn(f TurnFacts) (halt, reason string)
	// Budget is called whenever usage grows, also mid-turn; a halt stops the
	// running turn.
	Budget(total report.Usage) (halt, reason string)
}

// TurnFacts is what a Halter sees after a turn.
type TurnFacts struct {
	Iteration int
	// CheckRan is false in judge-only mode.
	CheckRan      bool
	CheckExit     int
	CheckTail     string // the end of the check's combined output
	CheckTimedOut bool
	// State is the Tracker's fingerprint ("" without a Tracker).
	State string
	// Usage is the run's total so far.
	Usage report.Usage
}

// TurnParserMaker is an optional ability of an agent.Adapter: a parser that
// knows the turn it parses (the command adapter uses it for the receipt's
// brief). The loop prefers it over Adapter.NewParser.
type TurnParserMaker interface {
	NewTurnParser(t agent.Turn) agent.Parser
}

var _ TurnParserMaker = agent.Command{}
