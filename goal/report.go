package goal

import (
	"github.com/goalrun/goalrun/grounding"
	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/sandbox"
)

// ReportRun returns the facts report.Finish needs, from the outcome and
// what only the caller knows: the sandbox's posture (read at the end, so
// its counters are final; nil when no sandbox started) and
// --allow-test-edits.
func (o *Outcome) ReportRun(posture *sandbox.Posture, allowTestEdits bool) report.Run {
	run := report.Run{
		Check:           o.Goal,
		Passed:          o.Passed,
		Grounded:        o.Grounded,
		TestedNothing:   o.TestedNothing,
		IterationsTaken: o.AgentTurns,
		Halt:            o.Halt,
		HaltReason:      o.HaltReason,
		Summary:         o.Summary,
		Turns:           o.Turns,
		TurnsCompleted:  o.TurnsCompleted,
		Delegations:     o.Delegations,
		ModelUsed:       o.Model,
		Judge:           o.Judge,
		Changes:         o.Changes,
		AllowTestEdits:  allowTestEdits,
		Sandbox:         posture,
		Elapsed:         o.Elapsed,
	}
	for _, r := range o.Setup {
		dir := r.Dir
		if dir == "." {
			dir = ""
		}
		run.Setup = append(run.Setup, report.SetupStep{Command: r.Command, Dir: dir, Detected: r.Detected,
			ExitCode: r.ExitCode, Seconds: r.Seconds, Skipped: r.Skipped, Reused: r.Reused, TimedOut: r.TimedOut, NotStarted: r.NotStarted})
	}
	if o.Iterations != nil {
		run.Iterations = o.Iterations.Iterations()
		run.IterationsOmitted = o.Iterations.Omitted()
	}
	if o.Failure != nil {
		run.Error = o.Failure.Code
		run.Message = o.Failure.Message
		run.Cause = o.Failure.Cause
		run.CauseFields = o.Failure.Detail
		run.Suggestions = o.Failure.Suggestions
		run.AuthReason = o.Failure.Reason
		run.Cancelled = o.Failure.Code == report.ErrCancelled
	}
	if o.AgentName != "" {
		run.Agent = &report.AgentInfo{Name: o.AgentName, Version: o.AgentVersion, SessionID: o.SessionID}
	}
	for _, m := range o.ModelsServed {
		run.ModelsServed = append(run.ModelsServed, report.ModelServed{ModelID: m})
	}
	if o.Usage != (report.Usage{}) {
		u := o.Usage
		run.Usage = &u
	}
	if o.Receipts != nil {
		run.Receipts = o.Receipts.Receipts()
	}
	if o.Claims != nil {
		run.UngroundedClaims = o.Claims
	}
	return run
}

// evidenceReceipt returns the claims analysis's record of a finished tool
// call: r as the receipts roll-up keeps it (its brief uncapped) and paths,
// the workspace paths the call wrote (agent.Tool.Paths). Via is not read.
func evidenceReceipt(r report.Receipt, paths []string) grounding.Receipt {
	return grounding.Receipt{Tool: r.Tool, OK: r.OK, Unknown: r.Unknown, Brief: r.Brief, Paths: paths}
}

// reportClaims returns the ungrounded claims as the document's
// "ungrounded_claims" entries, in order. nil stays nil (no analysis ran)
// and an empty list stays empty (it ran and found none). grounding caps
// them as the document does (TestGroundingCapsAreTheDocuments).
func reportClaims(cs []grounding.Claim) []report.Claim {
	if cs == nil {
		return nil
	}
	out := make([]report.Claim, len(cs))
	for i, c := range cs {
		out[i] = report.Claim{Claim: c.Claim, Kind: c.Kind, Reason: c.Reason}
	}
	return out
}
