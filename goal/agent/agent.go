// Package agent holds one adapter per agent CLI (claude, codex, gemini, car,
// deepcode, command). An adapter is pure: given a Turn it returns the command
// to run and a Parser for that command's stdout. It does no I/O of its own, so
// it is tested with tables and golden files; the loop in package goal runs the
// command in a sandbox and feeds the parser live.
package agent

import "time"

// Turn is what an adapter needs to build one agent invocation.
type Turn struct {
	// Iteration is the 1-based loop iteration.
	Iteration int
	// Prompt is the full prompt for this turn: the task, and on later turns
	// the failing check's command, exit code and output tail.
	Prompt string
	// SessionID is the session (thread) to resume; "" starts a new one.
	SessionID string
	// Bin is the agent executable (for "command": the shell command); ""
	// means the adapter's usual name on PATH.
	Bin string
	// Model is the model to ask for; "" means the agent's default.
	Model string
	// MaxTurns bounds the agent's own turns inside this invocation (0 = its
	// default), where the CLI supports it.
	MaxTurns int
	// ExtraArgs are passed through verbatim (--agent-arg).
	ExtraArgs []string
}

// Invocation is the command an adapter wants run for a Turn.
type Invocation struct {
	// Args is the argv (Args[0] is the executable).
	Args []string
	// Env is added to the agent environment for this step.
	Env map[string]string
	// Stdin is fed to the process; "" means /dev/null.
	Stdin string
}

// Adapter builds invocations for one agent CLI.
type Adapter interface {
	// Name is the --agent value, e.g. "claude".
	Name() string
	// Command returns the invocation for t.
	Command(t Turn) Invocation
	// NewParser returns a fresh parser for one invocation's stdout.
	NewParser() Parser
}

// Parser turns one invocation's stdout into normalized events.
//
// Line is called once per stdout line (without the newline). A line longer
// than MaxLineBytes is cut to MaxLineBytes and passed with oversize=true.
// End is called once after the process exited with its exit code; it
// returns how the turn ended. A parser never fails: input it cannot use is
// skipped and counted in TurnResult.
type Parser interface {
	Line(line []byte, oversize bool, emit func(Event))
	End(exitCode int, emit func(Event)) TurnResult
}

// MaxLineBytes is the longest stdout line a parser sees whole: 8 MiB. Longer
// lines are cut (and counted as oversize); the reader's memory stays bounded.
const MaxLineBytes = 8 << 20

// Kind is a normalized event kind.
type Kind string

// The normalized event kinds (architecture.md, "Boundaries").
const (
	KindSession    Kind = "session"     // SessionID set
	KindModel      Kind = "model"       // Model set
	KindText       Kind = "text"        // Text set: the agent's prose
	KindToolCall   Kind = "tool_call"   // Tool set
	KindToolResult Kind = "tool_result" // Tool and OK set
	KindUsage      Kind = "usage"       // Usage set
	KindRetry      Kind = "retry"       // Retry set
	KindResult     Kind = "result"      // the CLI's terminal event
	KindError      Kind = "error"       // Error set; Error.Fatal says whether the turn failed
)

// Event is one normalized event; which fields are set depends on Kind.
type Event struct {
	Kind      Kind
	SessionID string
	Model     string
	Text      string
	Tool      *Tool
	Usage     *Usage
	Retry     *Retry
	Error     *Error
	// Time is when the parser saw the line (zero when unknown).
	Time time.Time
}

// Tool is a tool call (and, on KindToolResult, its outcome).
type Tool struct {
	// ID is the CLI's call id, e.g. "toolu_a1" or "item_1".
	ID string
	// Name is the tool's name, e.g. "Bash", "Edit", "command_execution".
	Name string
	// Brief is the one-line gist (run-document.md: first identifying
	// string parameter), uncapped; the report caps it.
	Brief string
	// Paths are the workspace paths the call wrote (edits, file changes),
	// when the CLI says so; used to back "I edited X" claims.
	Paths []string
	// OK is set on KindToolResult: the call succeeded.
	OK bool
	// Via names the sub-agent that made the call ("" for the main agent).
	Via string
}

// Usage is token use and cost as the CLI reports it.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
	// CostUSD is the cost in US dollars; 0 when the CLI does not say.
	CostUSD float64
	// Cumulative is true when the figures are the session's running total
	// (Codex thread usage), false when they are for this invocation only.
	Cumulative bool
}

// Retry is a model API retry the CLI reported.
type Retry struct {
	Attempt int
	// Status is the HTTP status that caused it (401, 429, 529, …); 0 when
	// unknown.
	Status    int
	BackoffMS int64
}

// Error is an error the CLI reported.
type Error struct {
	Message string
	// Fatal is true when the error ends the turn as a failure.
	Fatal bool
}

// Turn statuses in TurnResult.Status.
const (
	StatusSuccess      = "success"
	StatusFailed       = "failed"
	StatusAuthRequired = "auth_required"
)

// TurnResult is how one invocation ended, as the parser understood it.
type TurnResult struct {
	// Status is StatusSuccess, StatusFailed or StatusAuthRequired.
	Status string
	// Cause explains a failure: "no_result_event", "result_error",
	// "exit_status", "auth_required", "turn_failed", ….
	Cause string
	// Message is the CLI's own words about a failure, uncapped.
	Message string
	// SessionID is the latest session id seen ("" if none).
	SessionID string
	// Model is the model that answered ("" if unknown).
	Model string
	// Summary is the agent's final answer, uncapped.
	Summary string
	// Turns is the number of agent turns the CLI reports for the invocation.
	Turns int
	// Usage is the invocation's usage (see Usage.Cumulative).
	Usage Usage
	// PermissionDenials counts tool calls the CLI refused itself.
	PermissionDenials int
	// SkippedLines counts stdout lines that were not JSON; OversizeLines
	// those longer than MaxLineBytes.
	SkippedLines, OversizeLines int
}
