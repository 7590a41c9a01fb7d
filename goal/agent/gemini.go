package agent

import (
	"strings"

	"github.com/goalrun/goalrun/goal/agent/internal/jsonscan"
)

// Gemini is the adapter for the Gemini CLI (npm @google/gemini-cli).
//
// Each turn runs
//
//	gemini --output-format stream-json --yolo [-m M] [--resume SESSION] [EXTRA…] --prompt=PROMPT
//
// --yolo is the CLI's auto-approve mode (goalrun's sandbox is the
// boundary). The prompt is bound to --prompt with "=" so a prompt starting
// with "-" is not read as a flag; one longer than MaxArgPrompt is fed on
// stdin instead (headless mode reads the prompt from a non-terminal stdin).
//
// No transcript of the real CLI exists in this project: the parser follows
// the CLI's documented stream-json events (packages/core/src/output/types.ts
// in google-gemini/gemini-cli: init, message, tool_use, tool_result, error,
// result), and its tests use fixtures written from that description.
type Gemini struct{}

var _ Adapter = Gemini{}

// Name returns "gemini".
func (Gemini) Name() string { return "gemini" }

// Command builds the headless Gemini CLI invocation for t.
func (Gemini) Command(t Turn) Invocation {
	args := []string{binOr(t.Bin, "gemini"), "--output-format", "stream-json", "--yolo"}
	if t.Model != "" {
		args = append(args, "-m", t.Model)
	}
	if t.SessionID != "" {
		args = append(args, "--resume", t.SessionID)
	}
	args = append(args, t.ExtraArgs...)
	inv := Invocation{Env: GeminiSpec.environ(t)}
	if len(t.Prompt) > MaxArgPrompt {
		inv.Stdin = t.Prompt
	} else {
		args = append(args, "--prompt="+t.Prompt)
	}
	inv.Args = args
	return inv
}

// NewParser returns a parser for the Gemini CLI's stream-json output.
func (Gemini) NewParser() Parser { return &geminiParser{st: newTurnState()} }

// Spec describes what running the Gemini CLI needs.
func (Gemini) Spec() Spec { return GeminiSpec }

// geminiWriteTools are the Gemini CLI tools that write the file named by
// their file_path (or absolute_path) parameter.
var geminiWriteTools = map[string]bool{"write_file": true, "replace": true, "edit": true}

// geminiTextMax bounds the assistant text a Gemini parser accumulates for
// one message (deltas are joined): 1 MiB.
const geminiTextMax = 1 << 20

// geminiParser reads the Gemini CLI's stream-json lines:
//
//   - init: session_id and model;
//   - message (role assistant, possibly delta chunks): joined into one
//     KindText per message; the text after the last tool call is the
//     summary;
//   - tool_use / tool_result: receipts (status "error" → failed); write
//     tools (write_file, replace, edit) name the path they write;
//   - error: severity "warning" is a non-fatal KindError; severity "error"
//     makes the turn a failure (CauseErrorEvent) even if a result with
//     status success follows; an auth error ends it as auth_required;
//   - result: the terminal event; status "error" is a failure; stats give
//     this invocation's tokens (input_tokens includes the cached ones).
type geminiParser struct {
	st       turnState
	text     strings.Builder // the assistant message being joined
	final    string          // assistant text since the last tool call
	inTurn   bool            // the model is answering (counts turns)
	errSeen  bool
	errorMsg string
}

// Line parses one stdout line.
func (p *geminiParser) Line(line []byte, oversize bool, emit func(Event)) {
	if oversize {
		p.st.skipped(true)
		return
	}
	var typ, sessionID, model, role, content, delta, toolName, toolID, params, status, errv, severity, message, stats jsonscan.Value
	err := jsonscan.ParseObject(line, func(k []byte, v jsonscan.Value) {
		switch string(k) {
		case "type":
			typ = v
		case "session_id":
			sessionID = v
		case "model":
			model = v
		case "role":
			role = v
		case "content":
			content = v
		case "delta":
			delta = v
		case "tool_name":
			toolName = v
		case "tool_id":
			toolID = v
		case "parameters":
			params = v
		case "status":
			status = v
		case "error":
			errv = v
		case "severity":
			severity = v
		case "message":
			message = v
		case "stats":
			stats = v
		}
	})
	if err != nil {
		p.st.skipped(false)
		return
	}
	t := typ.Text()
	if t != "message" {
		p.flushText(emit)
	}
	switch t {
	case "init":
		p.st.session(sessionID.Text(), emit)
		p.st.seeModel(model.Text(), emit)
	case "message":
		if role.Text() != "assistant" {
			p.flushText(emit)
			return
		}
		p.modelTurn()
		if !delta.True() {
			p.flushText(emit)
		}
		if s := content.Text(); p.text.Len()+len(s) <= geminiTextMax {
			p.text.WriteString(s)
		}
		if !delta.True() {
			p.flushText(emit)
		}
	case "tool_use":
		p.modelTurn()
		p.final = ""
		name := toolName.Text()
		tool := &Tool{ID: toolID.Text(), Name: name, Brief: briefFrom(params)}
		if geminiWriteTools[name] {
			fp := params.Get("file_path").Text()
			if fp == "" {
				fp = params.Get("absolute_path").Text()
			}
			if fp != "" {
				tool.Paths = []string{fp}
			}
		}
		p.st.call(tool, emit)
	case "tool_result":
		p.inTurn = false
		p.st.result(toolID.Text(), status.Text() == "success", emit)
	case "error":
		msg := message.Text()
		if reason, auth := authFailure(msg); auth {
			p.st.stopAuth(reason, msg, emit)
			return
		}
		fatal := severity.Text() == "error"
		if fatal {
			p.errSeen = true
			p.errorMsg = msg
		}
		p.st.lastError = msg
		emit(Event{Kind: KindError, Error: &Error{Message: msg, Fatal: fatal}})
	case "result":
		p.result(status.Text(), errv, stats, emit)
	}
}

// modelTurn counts a model turn when the model starts answering again after
// a tool result (or for the first time).
func (p *geminiParser) modelTurn() {
	if !p.inTurn {
		p.inTurn = true
		p.st.res.Turns++
	}
}

func (p *geminiParser) flushText(emit func(Event)) {
	if p.text.Len() == 0 {
		return
	}
	s := p.text.String()
	p.text.Reset()
	p.final += s
	if strings.TrimSpace(s) != "" {
		emit(Event{Kind: KindText, Text: s})
	}
}

func (p *geminiParser) result(status string, errv, stats jsonscan.Value, emit func(Event)) {
	p.st.terminal = true
	var u Usage
	_ = stats.Each(func(k []byte, v jsonscan.Value) bool {
		n, _ := v.Int()
		switch string(k) {
		case "input_tokens":
			u.InputTokens = n
		case "output_tokens":
			u.OutputTokens = n
		}
		return true
	})
	p.st.res.Usage = u
	emit(Event{Kind: KindUsage, Usage: &u})
	res := &p.st.res
	switch {
	case res.Status == StatusAuthRequired:
	case status == "success" && p.errSeen:
		res.Status, res.Cause, res.Message = StatusFailed, CauseErrorEvent, p.errorMsg
	case status == "success":
		res.Status, res.Cause, res.Message = StatusSuccess, "", ""
		res.Summary = p.final
	default:
		msg := errv.Get("message").Text()
		if msg == "" {
			msg = p.errorMsg
		}
		if msg == "" {
			msg = "the result event reported status " + strings.TrimSpace(status)
		}
		if reason, auth := authFailure(msg); auth {
			p.st.markAuth(reason, msg)
			break
		}
		res.Status, res.Cause, res.Message = StatusFailed, CauseResultError, msg
	}
	emit(Event{Kind: KindResult})
}

// End reports how the turn ended: without a result event the turn failed
// with CauseNoResultEvent whatever the exit code.
func (p *geminiParser) End(exitCode int, emit func(Event)) TurnResult {
	p.flushText(emit)
	if !p.st.terminal && p.st.res.Status != StatusAuthRequired && p.errorMsg != "" {
		p.st.res.Message = "the agent's output ended without its final result event; its last error: " + p.errorMsg
	}
	return p.st.finish(emit)
}
