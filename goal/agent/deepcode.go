package agent

import (
	"strings"

	"github.com/goalrun/goalrun/goal/agent/internal/jsonscan"
)

// DeepCode is the adapter for the DeepCode CLI's headless mode.
//
// Each turn runs
//
//	deepcode --exec --output-format json [--model M] [--resume SESSION] [EXTRA…] --prompt PROMPT
//
// Its output is NDJSON: a system/init event carrying session_id first,
// assistant and tool message events, and a result event last carrying
// subtype, is_error, session_id, result and usage. The prompt is the value
// of --prompt (a value, so a leading "-" is not read as a flag).
//
// No transcript of the real CLI exists in this project: the parser follows
// that description, and its tests use fixtures written from it. It accepts
// both Anthropic-style content blocks (tool_use / tool_result) and
// OpenAI-style tool_calls / tool_call_id, since DeepCode talks to an
// OpenAI-compatible API.
type DeepCode struct{}

var _ Adapter = DeepCode{}

// Name returns "deepcode".
func (DeepCode) Name() string { return "deepcode" }

// Command builds the headless DeepCode invocation for t.
func (DeepCode) Command(t Turn) Invocation {
	args := []string{binOr(t.Bin, "deepcode"), "--exec", "--output-format", "json"}
	if t.Model != "" {
		args = append(args, "--model", t.Model)
	}
	if t.SessionID != "" {
		args = append(args, "--resume", t.SessionID)
	}
	args = append(args, t.ExtraArgs...)
	args = append(args, "--prompt", t.Prompt)
	return Invocation{Args: args, Env: DeepCodeSpec.environ(t)}
}

// NewParser returns a parser for DeepCode's NDJSON output.
func (DeepCode) NewParser() Parser { return &deepcodeParser{st: newTurnState()} }

// Spec describes what running DeepCode needs.
func (DeepCode) Spec() Spec { return DeepCodeSpec }

// deepcodeParser reads DeepCode's NDJSON events: system/init (session id,
// model, cwd), assistant (text → KindText; tool calls → KindToolCall), tool
// (a tool's result; is_error or status "error" → failed) and result (the
// terminal event: is_error or a subtype other than "success" is a failure;
// usage and cost are this invocation's). Every event's session_id is
// tracked, the latest wins.
type deepcodeParser struct {
	st    turnState
	cwd   string
	model string
}

// Line parses one stdout line.
func (p *deepcodeParser) Line(line []byte, oversize bool, emit func(Event)) {
	if oversize {
		p.st.skipped(true)
		return
	}
	var typ, subtype, sessionID, model, cwd, message, isError, result, usage, numTurns, cost, totalCost, toolUseID, status, errv jsonscan.Value
	err := jsonscan.ParseObject(line, func(k []byte, v jsonscan.Value) {
		switch string(k) {
		case "type":
			typ = v
		case "subtype":
			subtype = v
		case "session_id":
			sessionID = v
		case "model":
			model = v
		case "cwd":
			cwd = v
		case "message":
			message = v
		case "is_error":
			isError = v
		case "result":
			result = v
		case "usage":
			usage = v
		case "num_turns":
			numTurns = v
		case "cost_usd":
			cost = v
		case "total_cost_usd":
			totalCost = v
		case "tool_use_id", "tool_call_id":
			toolUseID = v
		case "status":
			status = v
		case "error":
			errv = v
		}
	})
	if err != nil {
		p.st.skipped(false)
		return
	}
	p.st.session(sessionID.Text(), emit)
	switch typ.Text() {
	case "system":
		if subtype.Text() == "init" {
			p.cwd = cwd.Text()
			p.st.seeModel(model.Text(), emit)
		}
	case "assistant":
		p.assistant(message, emit)
	case "tool", "tool_result":
		id := toolUseID.Text()
		failed := isError.True() || status.Text() == "error"
		if message.Kind() == jsonscan.Object {
			if id == "" {
				id = message.Get("tool_use_id").Text()
			}
			if id == "" {
				id = message.Get("tool_call_id").Text()
			}
			failed = failed || message.Get("is_error").True() || message.Get("status").Text() == "error"
		}
		p.st.result(id, !failed, emit)
	case "result":
		p.result(subtype.Text(), isError.True(), result.Text(), errv, usage, numTurns, cost, totalCost, emit)
	}
}

func (p *deepcodeParser) assistant(message jsonscan.Value, emit func(Event)) {
	var content, toolCalls, model jsonscan.Value
	_ = message.Each(func(k []byte, v jsonscan.Value) bool {
		switch string(k) {
		case "content":
			content = v
		case "tool_calls":
			toolCalls = v
		case "model":
			model = v
		}
		return true
	})
	p.st.seeModel(model.Text(), emit)
	switch content.Kind() {
	case jsonscan.String:
		if s := content.Text(); strings.TrimSpace(s) != "" {
			emit(Event{Kind: KindText, Text: s})
		}
	case jsonscan.Array:
		_ = content.Elems(func(b jsonscan.Value) bool {
			switch b.Get("type").Text() {
			case "text":
				if s := b.Get("text").Text(); strings.TrimSpace(s) != "" {
					emit(Event{Kind: KindText, Text: s})
				}
			case "tool_use":
				p.call(b.Get("id").Text(), b.Get("name").Text(), b.Get("input"), emit)
			}
			return true
		})
	}
	// OpenAI-style: [{"id","type":"function","function":{"name","arguments":"<JSON>"}}]
	_ = toolCalls.Elems(func(c jsonscan.Value) bool {
		fn := c.Get("function")
		input := fn.Get("arguments")
		if s, ok := input.Str(); ok { // arguments is a JSON text inside a string
			if v, err := jsonscan.Parse([]byte(s)); err == nil {
				input = v
			}
		}
		p.call(c.Get("id").Text(), fn.Get("name").Text(), input, emit)
		return true
	})
}

func (p *deepcodeParser) call(id, name string, input jsonscan.Value, emit func(Event)) {
	t := &Tool{ID: id, Name: name, Brief: briefFrom(input)}
	lower := strings.ToLower(name)
	if strings.Contains(lower, "write") || strings.Contains(lower, "edit") {
		fp := input.Get("file_path").Text()
		if fp == "" {
			fp = input.Get("path").Text()
		}
		if fp != "" {
			t.Paths = []string{relPath(p.cwd, fp)}
		}
	}
	p.st.call(t, emit)
}

func (p *deepcodeParser) result(subtype string, isError bool, text string, errv, usage, numTurns, cost, totalCost jsonscan.Value, emit func(Event)) {
	p.st.terminal = true
	res := &p.st.res
	if n, ok := numTurns.Int(); ok {
		res.Turns = int(n)
	}
	var u Usage
	_ = usage.Each(func(k []byte, v jsonscan.Value) bool {
		switch string(k) {
		case "input_tokens", "prompt_tokens":
			u.InputTokens, _ = v.Int()
		case "output_tokens", "completion_tokens":
			u.OutputTokens, _ = v.Int()
		case "cost_usd":
			u.CostUSD, _ = v.Float()
		}
		return true
	})
	if c, ok := cost.Float(); ok {
		u.CostUSD = c
	} else if c, ok := totalCost.Float(); ok {
		u.CostUSD = c
	}
	res.Usage = u
	emit(Event{Kind: KindUsage, Usage: &u})
	failed := isError || (subtype != "" && subtype != "success")
	switch {
	case res.Status == StatusAuthRequired:
	case !failed:
		res.Status, res.Cause, res.Message = StatusSuccess, "", ""
		res.Summary = text
	default:
		msg := text
		if m := errv.Text(); m != "" {
			msg = m
		} else if m := errv.Get("message").Text(); m != "" {
			msg = m
		}
		if msg == "" {
			msg = "the result event reported " + subtype
		}
		if reason, auth := authFailure(msg); auth {
			p.st.markAuth(reason, msg)
			break
		}
		res.Status, res.Cause, res.Message = StatusFailed, CauseResultError, msg
		if subtype == "error_max_turns" {
			res.Cause = CauseMaxTurns
		}
	}
	emit(Event{Kind: KindResult})
}

// End reports how the turn ended: without a result event the turn failed
// with CauseNoResultEvent whatever the exit code.
func (p *deepcodeParser) End(exitCode int, emit func(Event)) TurnResult {
	return p.st.finish(emit)
}
