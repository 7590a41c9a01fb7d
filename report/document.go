// Package report builds the goalrun/1 run document (docs/goalrun-1.md), its
// JSONL events, and its markdown rendering, from plain values. It caps every
// free-text field in bytes on rune boundaries, redacts secrets before capping,
// and guarantees the encoded document fits in DocumentBytes.
//
// How a run becomes a document:
//
//   - During the run, events go through an Emitter (redacted, capped,
//     timestamped) to Sinks: NewJSONLSink (stderr in JSON mode, --events),
//     NewProgressSink (the human view), Tee, and the GitHub check run.
//     Receipts go into a Rollup and iterations into an IterationLog, both in
//     memory that does not grow with the run.
//   - At the end, Finish turns a Run (plain values) into a Document — the
//     result shape or a failure shape, with its conclusion — and emits the
//     one terminal event from the same values. StartupError (or FailStartup)
//     is the shape for failures before any run existed.
//   - Encode writes the document (at most DocumentBytes, eliding in the
//     fixed order ElisionSteps when it must); Markdown renders it for GitHub.
//     In tests, reporttest.Validate and reporttest.ValidateJSON check a
//     document against docs/goalrun-1.schema.json.
//
// Text is always processed in the same order: redact (Redactor), fold
// one-line fields (Fold), cap (Cap, or CapTail for output tails). A cap
// bounds the kept text; the truncation marker that states the numbers comes
// on top (MarkerMaxBytes at most), so "summary ≤ 4096 bytes plus the
// marker".
package report

import (
	"bytes"
	"encoding/json"

	"github.com/goalrun/goalrun/sandbox"
)

// Schema is the value of every document's "schema" key.
const Schema = "goalrun/1"

// Statuses (the document's "status").
const (
	StatusSuccess      = "success"       // every step ran; read goal for the verdict
	StatusError        = "error"         // the run (or its start) failed
	StatusAuthRequired = "auth_required" // the agent's model API refused its credentials
	StatusCancelled    = "cancelled"     // interrupted by SIGINT/SIGTERM
)

// Conclusions: the GitHub check-run conclusion a document maps to.
const (
	ConclusionSuccess        = "success"         // passed and grounded
	ConclusionNeutral        = "neutral"         // passed, not grounded (or check modified)
	ConclusionFailure        = "failure"         // not passed, or error
	ConclusionTimedOut       = "timed_out"       // halted by the time budget
	ConclusionCancelled      = "cancelled"       // interrupted
	ConclusionActionRequired = "action_required" // auth_required
)

// Halts (goal.halt). Empty means the goal passed (JSON null).
const (
	HaltMaxIterations = "max_iterations"
	HaltTimeout       = "timeout"
	HaltBudget        = "budget"
	HaltNoProgress    = "no_progress"
	HaltAgentError    = "agent_error"
	HaltInterrupted   = "interrupted"
	HaltAuthRequired  = "auth_required"
	// HaltUnsafeChange: the agent changed git's executable configuration
	// (changes.git_executable); the run fails closed whatever the check
	// says, and the check is not run on that tree. Additive.
	HaltUnsafeChange = "unsafe_change"
)

// Error codes (the failure shapes' "error").
const (
	ErrBadInput           = "BadInput"
	ErrAgentFailed        = "AgentFailed"
	ErrAgentNotFound      = "AgentNotFound"
	ErrSandboxUnavailable = "SandboxUnavailable"
	ErrSandboxFailed      = "SandboxFailed"
	ErrCheckNotRunnable   = "CheckNotRunnable"
	// ErrEnvironmentFailed: the first check failed because of its
	// environment (a dependency it could not download or does not have, a
	// missing tool, the network), which no agent turn can mend; additive.
	ErrEnvironmentFailed = "EnvironmentFailed"
	ErrAuthRequired      = "AuthRequired"
	ErrCancelled         = "Cancelled"
	ErrGitHubUnavailable = "GitHubUnavailable"
)

// Document is one goalrun/1 document in any of its three shapes. Which keys
// appear is decided by the constructors (Finish, StartupError) and the
// encoder; a zero Document is not valid on its own.
//
// Presence rule of the list-valued keys (suggestions, iterations,
// models_served, ungrounded_claims, elided): a nil slice is left out, a
// non-nil one is written, even empty ("[]" says "none", absence says "not
// known" or "not part of this shape").
type Document struct {
	Schema     string `json:"schema"`
	Status     string `json:"status"`
	Conclusion string `json:"conclusion"`

	// Result shape only.
	Summary *string `json:"summary,omitempty"`

	// Failure and startup-error shapes only.
	Error       string   `json:"error,omitempty"`
	Message     string   `json:"message,omitempty"`
	Suggestions []string `json:"suggestions,omitzero"`
	Failure     *Failure `json:"failure,omitempty"`
	Reason      string   `json:"reason,omitempty"`

	// Result and failure shapes.
	Goal              *Goal            `json:"goal,omitempty"`
	Setup             []SetupStep      `json:"setup,omitempty"`
	Iterations        []Iteration      `json:"iterations,omitzero"`
	IterationsOmitted *int             `json:"iterations_omitted,omitempty"`
	Turns             *int             `json:"turns,omitempty"`
	TurnsCompleted    *int             `json:"turns_completed,omitempty"`
	Delegations       *int             `json:"delegations,omitempty"`
	Agent             *AgentInfo       `json:"agent,omitempty"`
	ModelUsed         ModelName        `json:"model_used,omitzero"`
	ModelsServed      []ModelServed    `json:"models_served,omitzero"`
	Usage             *Usage           `json:"usage,omitempty"`
	Receipts          *Receipts        `json:"receipts,omitempty"`
	UngroundedClaims  []Claim          `json:"ungrounded_claims,omitzero"`
	Judge             *Judge           `json:"judge,omitempty"`
	Changes           *Changes         `json:"changes,omitempty"`
	Sandbox           *sandbox.Posture `json:"sandbox,omitempty"`
	ElapsedSeconds    *float64         `json:"elapsed_seconds,omitempty"`
	// Timings splits ElapsedSeconds into buckets (additive; absent when
	// not measured).
	Timings *Timings `json:"timings,omitempty"`

	// Elided lists the optional detail the encoder dropped to fit
	// DocumentBytes, in the order it dropped it.
	Elided []string `json:"elided,omitzero"`
}

// Goal is the verdict.
type Goal struct {
	// Check is the --until command (capped), or the --infer-until text.
	Check string `json:"check"`
	// Passed says the goal was judged met.
	Passed bool `json:"passed"`
	// Grounded says the verdict came from goalrun's own check, run in the
	// sandbox, exiting 0.
	Grounded bool `json:"grounded"`
	// Iterations counts agent turns taken; 0 means the agent never ran.
	Iterations int `json:"iterations"`
	// Halt is nil when the goal passed, else one of the Halt* values.
	Halt *string `json:"halt"`
	// HaltReason explains the halt in one sentence (capped); additive.
	HaltReason string `json:"halt_reason,omitempty"`
	// TestedNothing, on a grounded pass, says in one sentence that the
	// check's output showed it ran no test (every go test package "[no
	// tests to run]" or "[no test files]", pytest "no tests ran" …): the
	// pass is not verified and concludes neutral. Additive.
	TestedNothing string `json:"tested_nothing,omitempty"`
}

// SetupStep is one setup command run before the first check (--setup or
// a detected default); additive.
type SetupStep struct {
	// Command is the command (capped at BriefCap); Dir the folder it ran
	// in, relative to the workspace ("" for its root).
	Command string `json:"command"`
	Dir     string `json:"dir,omitempty"`
	// Detected marks a default goalrun chose from the tree.
	Detected bool    `json:"detected,omitempty"`
	ExitCode int     `json:"exit_code"`
	Seconds  float64 `json:"seconds"`
	// Skipped: a detected step that could not run in this sandbox.
	Skipped bool `json:"skipped,omitempty"`
	// Reused: not run, an earlier run prepared the same dependencies
	// (the kept deps volume; additive).
	Reused   bool `json:"reused,omitempty"`
	TimedOut bool `json:"timed_out,omitempty"`
	// NotStarted says why the step could not start (its exit_code is then
	// 127, as a shell's for a command not found); capped at ReasonCap;
	// additive.
	NotStarted string `json:"not_started,omitempty"`
}

// Iteration is one loop iteration: iteration 0 is the first check alone.
type Iteration struct {
	N     int          `json:"n"`
	Agent *AgentStep   `json:"agent,omitempty"`
	Check *CheckResult `json:"check,omitempty"`
}

// AgentStep is one agent turn within an iteration.
type AgentStep struct {
	Status  string  `json:"status"`
	Cause   string  `json:"cause,omitempty"`
	Turns   int     `json:"turns"`
	Seconds float64 `json:"seconds"`
}

// CheckResult is one run of the check.
type CheckResult struct {
	ExitCode int     `json:"exit_code"`
	Passed   bool    `json:"passed"`
	Seconds  float64 `json:"seconds"`
	// Environment says, when the check failed because of its environment
	// rather than the code, what was missing or unreachable (capped at
	// ReasonCap, one line); additive.
	Environment string `json:"environment,omitempty"`
	// Failures are the failing tests' own lines found anywhere in the
	// output (go test's --- FAIL blocks, pytest's failures…), the first
	// FailuresCap bytes; additive.
	Failures string `json:"failures,omitempty"`
	// Failing says in one sentence which tests failed, named and counted
	// from the whole output ("TestA, TestB, TestC and 8 more failing in
	// example.com/p"), capped at ReasonCap, one line; additive.
	Failing string `json:"failing,omitempty"`
	// Tail is the end of the check's combined output, capped at TailCap.
	Tail      string `json:"tail"`
	TimedOut  bool   `json:"timed_out,omitempty"`
	OOMKilled bool   `json:"oom_killed,omitempty"`
	// OutputBytes is the length in bytes of the check's whole output, of
	// which Tail is the end (0: Tail is all of it). Finish uses it for the
	// numbers of Tail's truncation marker; additive.
	OutputBytes int64 `json:"output_bytes,omitempty"`
}

// AgentInfo identifies the agent.
type AgentInfo struct {
	Name      string `json:"name"`
	Version   string `json:"version,omitempty"`
	SessionID string `json:"session_id,omitempty"`
}

// ModelName is "model_used": the model that answered the agent, JSON null
// when the agent ran and no model it named answered (the CLI's stream
// names none, and none was asked for), absent when no agent ran.
type ModelName struct {
	Name string
	// Unreported: the agent ran and no model is known (null).
	Unreported bool
}

// IsZero reports whether model_used is left out.
func (m ModelName) IsZero() bool { return m.Name == "" && !m.Unreported }

// MarshalJSON writes the name, or null.
func (m ModelName) MarshalJSON() ([]byte, error) {
	if m.Name == "" {
		return []byte("null"), nil
	}
	var b bytes.Buffer
	if err := writeJSON(&b, m.Name); err != nil { // no HTML escaping, like the rest
		return nil, err
	}
	return b.Bytes(), nil
}

// UnmarshalJSON reads a name or null.
func (m *ModelName) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*m = ModelName{Unreported: true}
		return nil
	}
	m.Unreported = false
	return json.Unmarshal(b, &m.Name)
}

// ModelServed is a model that answered the agent.
type ModelServed struct {
	ModelID         string `json:"model_id"`
	LocalLastResort bool   `json:"local_last_resort"`
}

// Usage is the run's total token use and cost. cost_usd is JSON null when
// CostUnknown: the agent reports no cost (Codex, the Gemini CLI), which is
// not the same as free.
type Usage struct {
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CostUSD      float64 `json:"cost_usd"`
	// CostUnknown: some of the usage came with no cost (CostUSD then
	// counts only the part that had one).
	CostUnknown bool `json:"-"`
}

type usageJSON struct {
	InputTokens  int64    `json:"input_tokens"`
	OutputTokens int64    `json:"output_tokens"`
	CostUSD      *float64 `json:"cost_usd"`
}

// MarshalJSON writes cost_usd as null when the cost is unknown.
func (u Usage) MarshalJSON() ([]byte, error) {
	j := usageJSON{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens}
	if !u.CostUnknown {
		c := u.CostUSD
		j.CostUSD = &c
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads cost_usd null as an unknown cost.
func (u *Usage) UnmarshalJSON(b []byte) error {
	var j usageJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*u = Usage{InputTokens: j.InputTokens, OutputTokens: j.OutputTokens, CostUnknown: j.CostUSD == nil}
	if j.CostUSD != nil {
		u.CostUSD = *j.CostUSD
	}
	return nil
}

// Receipts roll up every tool call the agent made.
type Receipts struct {
	Total  int `json:"total"`
	Failed int `json:"failed"`
	// Unknown counts the calls whose outcome the agent's stream does not
	// show (not in Failed; never ok); additive, present when not 0.
	Unknown       int            `json:"unknown,omitempty"`
	ByTool        map[string]int `json:"by_tool"`
	Sample        []Receipt      `json:"sample"`
	SampleOmitted int            `json:"sample_omitted"`
}

// Receipt is one tool call.
type Receipt struct {
	Tool string `json:"tool"`
	OK   bool   `json:"ok"`
	// Unknown is true (with OK false) when the call finished but the
	// agent's stream cannot show whether it succeeded (the Gemini CLI's
	// shell results carry no exit code); additive. Such a receipt backs no
	// claim.
	Unknown bool   `json:"unknown,omitempty"`
	Brief   string `json:"brief"`
	Via     string `json:"via,omitempty"`
}

// Claim is an operational claim in the agent's final prose that no receipt
// backs.
type Claim struct {
	Claim  string `json:"claim"`
	Kind   string `json:"kind"`
	Reason string `json:"reason"`
}

// Judge is the model judge's opinion (--infer-until); additive.
type Judge struct {
	Met    bool   `json:"met"`
	Reason string `json:"reason"`
	// By says who judged: "agent" (the agent CLI) or "command" (--judge-cmd).
	By string `json:"by"`
}

// Changes is what the agent changed in the workspace (or in the wider
// mount the sandbox gave it; see RelativeTo).
type Changes struct {
	FilesChanged int      `json:"files_changed"`
	Insertions   int      `json:"insertions"`
	Deletions    int      `json:"deletions"`
	RiskyPaths   []string `json:"risky_paths"`
	// RiskyPathsOmitted counts the risky paths left out of RiskyPaths (at
	// most RiskyPathsMax are listed; Encode may drop more): the total minus
	// len(RiskyPaths), like receipts.sample_omitted. Additive; always
	// present.
	RiskyPathsOmitted int `json:"risky_paths_omitted"`
	// Paths are the changed paths (added, modified or deleted; git's
	// database excepted), in byte order, at most ChangedPathsMax; relative
	// like RiskyPaths. Additive.
	Paths []string `json:"paths,omitzero"`
	// PathsOmitted counts the changed paths left out of Paths (the cap, or
	// Encode's bound). Additive.
	PathsOmitted int `json:"paths_omitted,omitzero"`
	// GitExecutable names the changes to git's executable configuration
	// (config and what it includes, hooks, info/attributes, a new git
	// repository, a .gitattributes or .gitmodules adding a driver or a
	// command), at most GitExecutableMax, collapsed per folder; they also
	// head RiskyPaths and are never cut from it. A run with any fails
	// closed: goal not passed, halt unsafe_change. Additive.
	GitExecutable []string `json:"git_executable,omitzero"`
	CheckModified bool     `json:"check_modified"`
	// CheckModifiedReason names, when CheckModified, the most serious change
	// of the check and the rule that made it one ("go.mod: go.mod replace
	// directives changed …"). Additive.
	CheckModifiedReason string `json:"check_modified_reason,omitempty"`
	PatchSHA256         string `json:"patch_sha256,omitempty"`
	// RelativeTo says what the paths are relative to: RelativeToMount when
	// the sandbox mounted a folder wider than the workspace (sandbox.mount,
	// e.g. the repository root of a subfolder workspace) and the changes
	// cover all of it; absent (""): the workspace. Additive.
	RelativeTo string `json:"relative_to,omitempty"`
}

// RelativeToMount is Changes.RelativeTo when paths are relative to the
// sandbox's mount (sandbox.mount), not to the workspace.
const RelativeToMount = "mount"

// Failure carries the cause of a failure shape and cause-specific fields.
// It marshals flat: {"cause": "exit_status", "exit_code": 2, …} (see
// failure.go).
type Failure struct {
	Cause string
	// Detail holds the cause-specific fields (exit_code, iteration, …),
	// written beside "cause" at the same level, keys sorted. A "cause" key in
	// Detail is ignored.
	Detail map[string]any
}
