package report

import "time"

// Event types (docs/goalrun-1.md, "Events").
const (
	EventStarted       = "started"
	EventSandboxReady  = "sandbox_ready"
	EventCheckStarted  = "check_started"
	EventCheckFinished = "check_finished"
	EventAgentStarted  = "agent_started"
	// EventAgentFinished ends an agent turn: data iteration, seconds,
	// exit_code, status (the turn's result: success or failed).
	EventAgentFinished = "agent_finished"
	// EventPrepareStarted announces one-time work before it starts (data
	// work: a Work* value); EventPrepareFinished ends it (work, seconds,
	// and error when it failed). See TimeBook.
	EventPrepareStarted  = "prepare_started"
	EventPrepareFinished = "prepare_finished"
	EventModelServed     = "model_served"
	EventInferenceRetry  = "inference_retry"
	EventText            = "text"
	EventToolCalled      = "tool_called"
	EventToolResult      = "tool_result"
	EventToolFailed      = "tool_failed"
	EventGoalEvaluated   = "goal_evaluated"
	// EventOutputFailed says a file goalrun was asked to write (--output,
	// --events) does not hold what it should: data "flag", "path",
	// "error". It comes before the terminal event; the run exits 3.
	EventOutputFailed = "output_failed"
	EventCompleted    = "completed" // terminal
	EventFailed       = "failed"    // terminal
)

// Event phases.
const (
	PhaseRun       = "run"
	PhaseSandbox   = "sandbox"
	PhaseVerifying = "verifying"
	PhaseActing    = "acting"
	PhaseInference = "inference"
	PhaseReasoning = "reasoning"
)

// Event is one JSONL progress event: {"type","phase","message","data","time"}.
type Event struct {
	Type    string         `json:"type"`
	Phase   string         `json:"phase"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data"`
	Time    time.Time      `json:"time"`
}

// Sink receives events as they happen. Emit must not block for long and
// must not fail the run: a sink that cannot deliver drops the event and says
// so itself. Emit must be safe for concurrent use: the Emitter forwards
// events from several goroutines without holding a lock (so a sink may call
// the Emitter itself); it delivers the terminal event after every other.
type Sink interface {
	Emit(Event)
}
