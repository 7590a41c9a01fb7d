// Package agent holds one adapter per agent CLI (claude, codex, gemini, car,
// deepcode, command). An adapter is pure: given a Turn it returns the command
// to run and a Parser for that command's stdout. It does no I/O of its own, so
// it is tested with tables and golden files; the loop in package goal runs the
// command in a sandbox and feeds the parser live.
//
// What a runner uses:
//
//   - New(name) and Names() pick an adapter; SpecOf(name) says what running
//     it needs: the model API (Spec.API: default URL, base-URL and key
//     variables, the header the egress proxy puts the real key in, and
//     Spec.AllowHosts for the egress allowlist) and the fixed environment
//     the adapter already puts into every Invocation.
//   - NativeExecutable resolves the agent found on the host's PATH to the
//     native binary a Docker sandbox bind-mounts (Claude Code's glibc build,
//     Codex's static musl build — not their npm wrappers).
//   - NewStreams gives a step's stdout and stderr writers that split lines
//     (LineWriter: bounded memory, lines over MaxLineBytes cut and counted)
//     and feed the parser; events come out through emit. An event with Stop
//     set means kill the step now (an auth storm); KindResult is the CLI's
//     terminal event (kill after TerminalGrace if it lingers). Parser.End
//     returns the TurnResult: status, cause, session, usage, summary.
//
// The parsers are checked against real CLI output (testdata/transcripts),
// written fixtures for the CLIs no transcript exists for (car, deepcode), a
// fuzz test, and live tests that run the real claude, codex and gemini
// against the scripted model servers of package scripted, locally and
// inside the Docker sandbox.
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
	// BaseURL is the model API's base URL as the agent must see it from
	// inside the sandbox (the egress proxy's address, a scripted server's in
	// tests); "" means the agent's own default. Adapters whose CLI reads the
	// URL from an environment variable (Spec.API.BaseURLEnv) also put it
	// there; Codex has no such variable for a custom provider, so its
	// adapter passes it on the command line (-c model_providers…base_url).
	BaseURL string
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
// The line slice is only valid during the call. End is called once after
// the process exited with its exit code; it returns how the turn ended. A
// parser never fails: input it cannot use is skipped and counted in
// TurnResult.
//
// Two events ask the runner (goal's loop) to act: an event with Stop set means
// "kill the process now" (an auth storm the CLI would retry for minutes),
// and KindResult is the CLI's terminal event, after which the process gets
// TerminalGrace to exit before it is killed. Either way End then reports
// how the turn ended from what the parser saw, whatever the exit code.
//
// A Parser is not safe for concurrent use; Streams serializes the calls
// for a step's stdout and stderr.
type Parser interface {
	Line(line []byte, oversize bool, emit func(Event))
	End(exitCode int, emit func(Event)) TurnResult
}

// StderrParser is implemented by parsers that also read the CLI's stderr,
// line by line, under the same rules as Line (car writes its JSONL progress
// events there). Parsers that do not implement it never see stderr: it is
// kept apart, as a bounded tail for failure messages.
type StderrParser interface {
	StderrLine(line []byte, oversize bool, emit func(Event))
}

// MaxLineBytes is the longest stdout line a parser sees whole: 8 MiB. Longer
// lines are cut (and counted as oversize); the reader's memory stays bounded.
const MaxLineBytes = 8 << 20

// Kind is a normalized event kind.
type Kind string

// The normalized event kinds (docs/architecture.md, step 6).
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
	// Time is when the line was seen: parsers leave it zero (they are pure)
	// and the runner may stamp it with its clock.
	Time time.Time
	// Stop asks the runner to kill the process now, without grace: the
	// parser already knows how the turn ends (AuthRetryLimit consecutive
	// 401/403 answers from the model API, which the CLI would otherwise
	// retry for minutes). It is set on the KindError event that says why.
	Stop bool
}

// AuthRetryLimit is how many consecutive 401/403 answers from the model API
// (as retry notices in the CLI's stream) end a turn as auth_required. The
// real Claude Code retries a 401 ten times over about two minutes; two in
// a row is already not a transient fault.
const AuthRetryLimit = 2

// TerminalGrace is how long a process may keep running after its terminal
// event (Claude's result, Codex's turn.completed) before the runner kills
// it (goal.DefaultResultGrace is this value).
const TerminalGrace = 5 * time.Second

// Tool is a tool call (and, on KindToolResult, its outcome).
type Tool struct {
	// ID is the CLI's call id, e.g. "toolu_a1" or "item_1".
	ID string `json:"id"`
	// Name is the tool's name, e.g. "Bash", "Edit", "command_execution".
	Name string `json:"name"`
	// Brief is the one-line gist (docs/goalrun-1.md: the first identifying
	// string parameter, BriefKeys), whitespace folded, at most BriefMax
	// bytes; the report caps it to report.BriefCap with a marker.
	Brief string `json:"brief"`
	// Paths are the workspace paths the call wrote (edits, file changes),
	// when the CLI says so; used to back "I edited X" claims.
	Paths []string `json:"paths,omitempty"`
	// OK is set on KindToolResult: the call succeeded.
	OK bool `json:"ok"`
	// Unknown is set on KindToolResult (with OK false) when the call
	// finished but the CLI's stream cannot show whether it succeeded (the
	// Gemini CLI's shell results carry no exit code when the command
	// printed something): such a receipt backs no claim.
	Unknown bool `json:"unknown,omitempty"`
	// Via names the sub-agent that made the call ("" for the main agent).
	Via string `json:"via,omitempty"`
}

// Usage is token use and cost as the CLI reports it.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	// CostUSD is the cost in US dollars; 0 when the CLI does not say.
	CostUSD float64 `json:"cost_usd"`
	// NoCost is true when the CLI reports no cost at all (Codex, the
	// Gemini CLI): CostUSD then says nothing, and the run's cost is
	// unknown, not zero.
	NoCost bool `json:"no_cost,omitempty"`
	// Cumulative is true when the figures are the session's running total
	// (Codex thread usage), false when they are for this invocation only.
	Cumulative bool `json:"cumulative,omitempty"`
}

// Retry is a model API retry the CLI reported.
type Retry struct {
	// Attempt is the CLI's attempt number (1 for the first retry).
	Attempt int `json:"attempt"`
	// Status is the HTTP status that caused it (401, 429, 529, …); 0 when
	// unknown (a connection error).
	Status int `json:"status"`
	// BackoffMS is how long the CLI waits before retrying, in milliseconds;
	// 0 when it does not say.
	BackoffMS int64 `json:"backoff_ms"`
	// Message is the CLI's words about the failure (e.g. "overloaded").
	Message string `json:"message,omitempty"`
}

// Error is an error the CLI reported.
type Error struct {
	Message string `json:"message"`
	// Fatal is true when the error ends the turn as a failure.
	Fatal bool `json:"fatal"`
	// Auth is true when the model API refused the credentials.
	Auth bool `json:"auth,omitempty"`
}

// Turn statuses in TurnResult.Status.
const (
	StatusSuccess      = "success"
	StatusFailed       = "failed"
	StatusAuthRequired = "auth_required"
)

// Failure causes in TurnResult.Cause.
const (
	// CauseNoResultEvent: the output ended without the CLI's terminal
	// event (killed, crashed, timed out), whatever the exit code.
	CauseNoResultEvent = "no_result_event"
	// CauseResultError: the terminal event says the turn failed (Claude's
	// result with is_error, Gemini's result with status error, …).
	CauseResultError = "result_error"
	// CauseTurnFailed: Codex's turn.failed.
	CauseTurnFailed = "turn_failed"
	// CauseErrorEvent: an error event (Gemini severity "error") came before
	// a terminal event that claimed success.
	CauseErrorEvent = "error_event"
	// CauseMaxTurns: the CLI stopped at its own turn limit.
	CauseMaxTurns = "max_turns"
	// CauseAuthRequired: the model API refused the credentials.
	CauseAuthRequired = "auth_required"
	// CauseExitStatus: a plain command exited non-zero (command adapter).
	CauseExitStatus = "exit_status"
	// CauseRetryStorm: the CLI kept retrying the model API for 429, 5xx or
	// failed connections (ClaudeRetryStormLimit, CodexRetryStormLimit,
	// GeminiRetryStormLimit in a row) and the turn was stopped instead of
	// waiting minutes for the CLI to give up.
	CauseRetryStorm = "retry_storm"
	// CauseEgressRefused: the refusal came from goalrun's own egress proxy
	// (its answers start with "goalrun egress:"), not from the model API:
	// the model API's host was not on the allowlist, could not be resolved
	// or could not be reached. Never auth_required: the key was not judged.
	CauseEgressRefused = "egress_refused"
)

// Reasons for StatusAuthRequired in TurnResult.AuthReason; they are the
// goalrun/1 document's "reason" values (docs/goalrun-1.md).
const (
	AuthInvalidKey = "invalid_key"
	AuthExpired    = "expired"
	AuthMissingKey = "missing_key"
)

// TurnResult is how one invocation ended, as the parser understood it.
type TurnResult struct {
	// Status is StatusSuccess, StatusFailed or StatusAuthRequired.
	Status string `json:"status"`
	// Cause explains a failure: one of the Cause* values.
	Cause string `json:"cause,omitempty"`
	// AuthReason is set with StatusAuthRequired: AuthInvalidKey,
	// AuthExpired or AuthMissingKey.
	AuthReason string `json:"auth_reason,omitempty"`
	// Message is the CLI's own words about a failure, uncapped.
	Message string `json:"message,omitempty"`
	// SessionID is the latest session id seen ("" if none).
	SessionID string `json:"session_id,omitempty"`
	// Model is the model that answered ("" if unknown).
	Model string `json:"model,omitempty"`
	// Version is the CLI's version when its stream says so (Claude's
	// system/init claude_code_version), else "".
	Version string `json:"version,omitempty"`
	// Summary is the agent's final answer, uncapped.
	Summary string `json:"summary,omitempty"`
	// Turns is the number of agent turns the CLI reports for the invocation.
	Turns int `json:"turns"`
	// Usage is the invocation's usage (see Usage.Cumulative).
	Usage Usage `json:"usage"`
	// PermissionDenials counts tool calls the CLI refused itself.
	PermissionDenials int `json:"permission_denials,omitempty"`
	// Delegations counts sub-agents the agent started (Claude's Task/Agent
	// calls, Codex's spawn_agent, car's delegations).
	Delegations int `json:"delegations,omitempty"`
	// Retries counts model API retries the CLI reported.
	Retries int `json:"retries,omitempty"`
	// SkippedLines counts stdout lines that were not JSON (or not the
	// JSON the CLI writes); OversizeLines those longer than MaxLineBytes.
	SkippedLines  int `json:"skipped_lines,omitempty"`
	OversizeLines int `json:"oversize_lines,omitempty"`
}
