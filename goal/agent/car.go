package agent

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/goalrun/goalrun/goal/agent/internal/jsonscan"
)

// Car is the adapter for CAR's assistant, `car do --json`.
//
// Each turn runs
//
//	car do --json --local --full-access [--model M] [--max-turns N] [EXTRA…] -- PROMPT
//
// --local runs the assistant on the host it is started on (goalrun's
// sandbox; CAR would otherwise try a Docker sandbox of its own) and
// --full-access answers its approval prompts, which nobody could answer
// headless. `car do` has no sessions: every turn starts fresh and
// Turn.SessionID is ignored.
//
// Its output contract (schema "car.do/1"): stdout is exactly one JSON
// document written once at the end, also on failure — status "success",
// "max_turns" or "error", summary (success shapes only), message and error
// (error shape), turns, delegations, model_used, receipts (a roll-up);
// stderr carries JSONL progress events {"type","phase","message","data"}
// (started, text, tool_called, tool_result, tool_failed, goal_evaluated,
// completed, failed), mixed with occasional plain warning lines.
//
// No transcript of the real CLI exists in this project: the parser follows
// that published contract, and its tests use fixtures written from it.
type Car struct{}

var _ Adapter = Car{}

// Name returns "car".
func (Car) Name() string { return "car" }

// Command builds the `car do --json` invocation for t.
func (Car) Command(t Turn) Invocation {
	args := []string{binOr(t.Bin, "car"), "do", "--json", "--local", "--full-access"}
	if t.Model != "" {
		args = append(args, "--model", t.Model)
	}
	if t.MaxTurns > 0 {
		args = append(args, "--max-turns", strconv.Itoa(t.MaxTurns))
	}
	args = append(args, t.ExtraArgs...)
	args = append(args, "--", t.Prompt)
	return Invocation{Args: args, Env: CarSpec.environ(t)}
}

// NewParser returns a parser for car's stdout document and stderr events.
func (Car) NewParser() Parser { return &carParser{st: newTurnState(), byTool: map[string][]string{}} }

// Spec describes what running car needs.
func (Car) Spec() Spec { return CarSpec }

// CarSchema is the schema of the document `car do --json` writes.
const CarSchema = "car.do/1"

// carDocMax bounds the stdout bytes a car parser keeps while assembling the
// document: 1 MiB (car caps its document far below that: 4096-byte summary,
// 8 receipts in the sample).
const carDocMax = 1 << 20

// carParser assembles car's stdout document (one line, or pretty-printed
// over many) and reads its stderr events. The document is the terminal
// event: its status decides the turn ("success"; "max_turns" is a failure
// with CauseMaxTurns that keeps the summary; "error" a failure, or
// auth_required when car says the API refused the key). Receipts come from
// the stderr events (tool_called, then tool_result or tool_failed, matched
// by data.call_id, else by tool name in order), because the document holds
// only a sample of them.
type carParser struct {
	st        turnState
	doc       []byte
	docLost   bool // stdout outgrew carDocMax
	done      bool // the document was read
	seq       int
	byTool    map[string][]string // tool name → ids waiting, in call order
	lastFatal string              // a stderr "failed" event's words
}

// Line reads one stdout line: part (or all) of the final document.
func (p *carParser) Line(line []byte, oversize bool, emit func(Event)) {
	if p.done {
		p.st.skipped(oversize)
		return
	}
	if oversize || len(p.doc)+len(line)+1 > carDocMax {
		p.docLost = true
		p.st.skipped(oversize)
		return
	}
	trimmed := bytes.TrimSpace(line)
	if len(p.doc) == 0 && (len(trimmed) == 0 || trimmed[0] != '{') {
		p.st.skipped(false) // not the document: stdout should hold nothing else
		return
	}
	p.doc = append(p.doc, line...)
	p.doc = append(p.doc, '\n')
	// A one-line document, or the closing brace of a pretty-printed one.
	if len(p.doc) == len(line)+1 || (len(line) > 0 && line[0] == '}') {
		p.tryDocument(emit)
	}
}

func (p *carParser) tryDocument(emit func(Event)) bool {
	var schema, status, summary, message, errCode, turns, delegations, model, usage jsonscan.Value
	err := jsonscan.ParseObject(p.doc, func(k []byte, v jsonscan.Value) {
		switch string(k) {
		case "schema":
			schema = v
		case "status":
			status = v
		case "summary":
			summary = v
		case "message":
			message = v
		case "error":
			errCode = v
		case "turns":
			turns = v
		case "delegations":
			delegations = v
		case "model_used":
			model = v
		case "usage":
			usage = v
		}
	})
	if err != nil {
		return false
	}
	p.done = true
	p.st.terminal = true
	p.doc = nil
	res := &p.st.res
	if n, ok := turns.Int(); ok {
		res.Turns = int(n)
	}
	if n, ok := delegations.Int(); ok {
		res.Delegations = int(n)
	}
	p.st.seeModel(model.Text(), emit)
	if usage.Kind() == jsonscan.Object {
		var u Usage
		_ = usage.Each(func(k []byte, v jsonscan.Value) bool {
			switch string(k) {
			case "input_tokens":
				u.InputTokens, _ = v.Int()
			case "output_tokens":
				u.OutputTokens, _ = v.Int()
			case "cost_usd":
				u.CostUSD, _ = v.Float()
			}
			return true
		})
		res.Usage = u
		emit(Event{Kind: KindUsage, Usage: &u})
	}
	if s := schema.Text(); s != "" && !strings.HasPrefix(s, "car.do/") {
		res.Status, res.Cause = StatusFailed, CauseResultError
		res.Message = "car wrote a document with schema " + strconv.Quote(s) + ", expected " + CarSchema
		emit(Event{Kind: KindResult})
		return true
	}
	switch st := status.Text(); {
	case res.Status == StatusAuthRequired:
	case st == "success":
		res.Status, res.Cause, res.Message = StatusSuccess, "", ""
		res.Summary = summary.Text()
	case st == "max_turns":
		res.Status, res.Cause = StatusFailed, CauseMaxTurns
		res.Summary = summary.Text()
		res.Message = "car stopped at its turn limit"
	default:
		msg := message.Text()
		code := errCode.Text()
		if msg == "" {
			msg = code
		}
		if msg == "" {
			msg = "car reported status " + strconv.Quote(st)
		}
		if reason, auth := authFailure(msg); auth || code == "AuthRequired" {
			if !auth {
				reason = AuthInvalidKey
			}
			p.st.markAuth(reason, msg)
			break
		}
		if code != "" && !strings.Contains(msg, code) {
			msg = code + ": " + msg
		}
		res.Status, res.Cause, res.Message = StatusFailed, CauseResultError, msg
	}
	emit(Event{Kind: KindResult})
	return true
}

// StderrLine reads one of car's JSONL progress events; other lines
// (runtime warnings) are ignored, as car's contract tells consumers to do.
func (p *carParser) StderrLine(line []byte, oversize bool, emit func(Event)) {
	if oversize || len(line) == 0 || line[0] != '{' {
		return
	}
	var typ, message, data jsonscan.Value
	if jsonscan.ParseObject(line, func(k []byte, v jsonscan.Value) {
		switch string(k) {
		case "type":
			typ = v
		case "message":
			message = v
		case "data":
			data = v
		}
	}) != nil {
		return
	}
	get := func(k string) jsonscan.Value { return data.Get(k) }
	switch typ.Text() {
	case "started":
		p.st.seeModel(get("model").Text(), emit)
	case "model_served":
		p.st.seeModel(get("model_id").Text(), emit)
	case "text":
		msg := message.Text()
		if strings.HasPrefix(msg, "[") { // the loop's own notices, not the model's prose
			return
		}
		if strings.TrimSpace(msg) != "" {
			emit(Event{Kind: KindText, Text: msg})
		}
	case "tool_called":
		name := get("tool").Text()
		id := get("call_id").Text()
		if id == "" {
			p.seq++
			id = "car-" + strconv.Itoa(p.seq)
		}
		p.byTool[name] = append(p.byTool[name], id)
		p.st.call(&Tool{ID: id, Name: name, Brief: foldBrief(get("brief").Text()), Via: get("via").Text()}, emit)
	case "tool_result", "tool_failed":
		ok := typ.Text() == "tool_result"
		if okv, has := get("ok").Bool(); has {
			ok = okv
		}
		id := get("call_id").Text()
		if id == "" || p.st.waiting(id) == nil {
			id = p.oldestWaiting(get("tool").Text())
		}
		p.st.result(id, ok, emit)
	case "inference_retry":
		attempt, _ := get("attempt").Int()
		status, _ := get("status").Int()
		backoff, _ := get("backoff_ms").Int()
		p.st.retry(Retry{Attempt: int(attempt), Status: int(status), BackoffMS: backoff, Message: message.Text()}, emit)
	case "failed":
		msg := get("error").Text()
		if m := message.Text(); m != "" {
			msg = strings.TrimSpace(msg + " " + m)
		}
		p.lastFatal = msg
		p.st.lastError = msg
	}
}

// oldestWaiting returns the id of the oldest call of tool still waiting for
// its result ("" when none).
func (p *carParser) oldestWaiting(tool string) string {
	ids := p.byTool[tool]
	for len(ids) > 0 {
		id := ids[0]
		ids = ids[1:]
		if p.st.waiting(id) != nil {
			p.byTool[tool] = ids
			return id
		}
	}
	p.byTool[tool] = ids
	return ""
}

// End reads a document that was still being assembled and reports how the
// turn ended; without a document the turn failed with CauseNoResultEvent.
func (p *carParser) End(exitCode int, emit func(Event)) TurnResult {
	if !p.done && len(p.doc) > 0 && !p.docLost {
		if !p.tryDocument(emit) {
			p.st.res.SkippedLines++
		}
	}
	if !p.done && p.st.res.Status != StatusAuthRequired {
		switch {
		case p.docLost:
			p.st.res.Message = "car's stdout document was longer than 1 MiB and could not be read"
		case p.lastFatal != "":
			p.st.res.Message = "car wrote no result document; its last event said: " + p.lastFatal
		}
	}
	return p.st.finish(emit)
}
