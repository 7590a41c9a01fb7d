package agent

import (
	"sort"
	"strconv"
	"strings"

	"github.com/goalrun/goalrun/goal/agent/internal/jsonscan"
	"github.com/goalrun/goalrun/internal/lazyre"
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
// The parser is checked against the real CLI's output (0.61.0,
// testdata/transcripts/gemini-cli-0.61.0) and live tests run the pinned CLI
// against package scripted's Gemini API. The CLI only honours the base
// URL goalrun gives it with the settings of GeminiSettings.
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
func (Gemini) NewParser() Parser {
	p := &geminiParser{st: newTurnState(), shellCalls: map[string]bool{}}
	p.st.stormLimit = GeminiRetryStormLimit
	return p
}

// GeminiRetryStormLimit is how many consecutive model API retries for
// 429, 5xx or a failed connection end a Gemini CLI turn (CauseRetryStorm).
// The CLI retries each request up to 10 times with 5–30 s backoff, and its
// router's request up to 5 times first: about five minutes against an API
// answering 429 (measured with 0.61.0), all of it on stderr. Claude Code
// gives up by itself after its tenth attempt (the 529 transcript: nine
// retries in two minutes) and Codex after 5 reconnects; five Gemini
// retries take about as long as Claude Code's own.
const GeminiRetryStormLimit = 5

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
//   - init: session_id (its "model" is what was asked for, "auto" for the
//     CLI's router: not a model that answered);
//   - message (role assistant, possibly delta chunks): joined into one
//     KindText per message; the text after the last tool call is the
//     summary;
//   - tool_use / tool_result: receipts (status "error" → failed); write
//     tools (write_file, replace, edit) name the path they write; a
//     run_shell_command's status says only that the tool ran, so its
//     outcome is read from the output the CLI shows (geminiShellOutcome),
//     and is unknown when that cannot tell;
//   - error: severity "warning" is a non-fatal KindError; severity "error"
//     makes the turn a failure (CauseErrorEvent) even if a result with
//     status success follows; an auth error ends it as auth_required;
//   - result: the terminal event; status "error" is a failure; stats give
//     this invocation's tokens (input_tokens includes the cached ones) and,
//     in stats.models, the models that answered (those with tokens; the
//     one with the most is the turn's model);
//   - stderr: the CLI's retries of model API calls, which it reports only
//     there ("Attempt 2 failed with status 429. Retrying with backoff...");
//     AuthRetryLimit consecutive 401/403 retries end the turn as
//     auth_required, GeminiRetryStormLimit consecutive 429/5xx or
//     connection retries end it as CauseRetryStorm.
type geminiParser struct {
	st       turnState
	text     strings.Builder // the assistant message being joined
	final    string          // assistant text since the last tool call
	inTurn   bool            // the model is answering (counts turns)
	errSeen  bool
	errorMsg string
	// shellCalls are the waiting calls of run_shell_command, whose
	// outcome is read from their output.
	shellCalls map[string]bool
}

// Line parses one stdout line.
func (p *geminiParser) Line(line []byte, oversize bool, emit func(Event)) {
	if oversize {
		p.st.skipped(true)
		return
	}
	var typ, sessionID, role, content, delta, toolName, toolID, params, status, errv, severity, message, stats, output jsonscan.Value
	err := jsonscan.ParseObject(line, func(k []byte, v jsonscan.Value) {
		switch string(k) {
		case "type":
			typ = v
		case "session_id":
			sessionID = v
		case "output":
			output = v
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
	case "message":
		if role.Text() != "assistant" {
			p.flushText(emit)
			return
		}
		p.modelTurn()
		p.st.answered()
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
		p.st.answered()
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
		if name == geminiShellTool && tool.ID != "" {
			p.shellCalls[tool.ID] = true
		}
		p.st.call(tool, emit)
	case "tool_result":
		p.inTurn = false
		id := toolID.Text()
		ok, unknown := status.Text() == "success", false
		if p.shellCalls[id] {
			delete(p.shellCalls, id)
			if ok {
				ok, unknown = geminiShellOutcome(output)
			}
		}
		p.st.resultOutcome(id, ok, unknown, emit)
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
		case "models":
			p.models(v, emit)
		}
		return true
	})
	u.NoCost = true // the Gemini CLI reports no cost
	p.st.res.Usage = u
	emit(Event{Kind: KindUsage, Usage: &u})
	res := &p.st.res
	switch {
	case res.Status == StatusAuthRequired, res.Cause == CauseRetryStorm:
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

// geminiShellTool is the Gemini CLI's shell tool.
const geminiShellTool = "run_shell_command"

// Outputs of run_shell_command that prove a failure: the CLI shows them
// only when the command printed nothing (0.61.0, the shell tool's
// returnDisplay: "Command exited with code: N", "Command terminated by
// signal: S", "Command failed: …", a timeout or cancellation notice).
var geminiShellFailedRe = lazyre.New(`^(Command exited with code: [1-9][0-9]*|Command terminated by signal: \S+|Command failed: |Command cancelled by user\.|Command timed out)`)

// geminiShellOutcome reads a run_shell_command result the CLI called a
// success (the tool ran) for the command's own outcome. The CLI shows the
// command's output when there is any, and says nothing of its exit code
// then: unknown. With no output it shows "" for exit 0 (ok) and a notice
// for anything else (failed). An output the command printed itself can
// only fake a failure, never a success.
func geminiShellOutcome(output jsonscan.Value) (ok, unknown bool) {
	if output == nil || output.Kind() != jsonscan.String {
		return false, true
	}
	out := output.Text()
	switch {
	case out == "":
		return true, false
	case geminiShellFailedRe.MatchString(out):
		return false, false
	}
	return false, true
}

// models reads stats.models: every model with tokens answered this turn
// (the router's and the main model; a model listed with zeros was only
// asked, as after a 401). They are announced most tokens first, and the
// turn's model is the one with the most.
func (p *geminiParser) models(v jsonscan.Value, emit func(Event)) {
	type used struct {
		name   string
		tokens int64
	}
	var ms []used
	_ = v.Each(func(k []byte, m jsonscan.Value) bool {
		var n int64
		for _, f := range []string{"total_tokens", "input_tokens", "output_tokens"} {
			if t, ok := m.Get(f).Int(); ok && t > n {
				n = t
			}
		}
		if name, ok := jsonscan.Value(append([]byte(`"`), append(k, '"')...)).Str(); ok && n > 0 && name != "" {
			ms = append(ms, used{name, n})
		}
		return true
	})
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].tokens > ms[j].tokens })
	for i := len(ms) - 1; i >= 0; i-- { // the main model last: it is the turn's
		p.st.seeModel(ms[i].name, emit)
	}
}

// Gemini CLI retry notices on stderr (0.61.0, retryWithBackoff and
// logRetryAttempt): "Attempt N failed with status S. Retrying with
// backoff... ERROR", "Attempt N failed. Retrying with backoff... ERROR",
// "Attempt N failed with 429 error (no Retry-After header). Retrying…",
// "Attempt N failed with 5xx error. Retrying…" and, for a quota error that
// names its delay, "Attempt N failed: MESSAGE. Retrying after Dms...".
var (
	geminiRetryRe      = lazyre.New(`^Attempt (\d+) failed(?: with status (\d{3})| with (429) error \(no Retry-After header\)| with (5)xx error)?\. Retrying with backoff\.\.\.\s*(.*)$`)
	geminiRetryAfterRe = lazyre.New(`^Attempt (\d+) failed: (.*)\. Retrying after (\d+)ms\.\.\.$`)
	geminiErrMessageRe = lazyre.New(`"message":\s*"((?:[^"\\]|\\.)*)"`)
)

// geminiRetryMessageMax bounds the words a retry keeps from the CLI's
// error: 300 bytes.
const geminiRetryMessageMax = 300

// StderrLine reads the CLI's stderr for its model API retries.
func (p *geminiParser) StderrLine(line []byte, oversize bool, emit func(Event)) {
	if oversize || len(line) < 8 || string(line[:8]) != "Attempt " {
		return
	}
	s := strings.TrimSpace(string(line))
	if m := geminiRetryRe.FindStringSubmatch(s); m != nil {
		attempt, _ := strconv.Atoi(m[1])
		status := 0
		switch {
		case m[2] != "":
			status, _ = strconv.Atoi(m[2])
		case m[3] != "":
			status = 429
		}
		msg := geminiRetryMessage(m[5])
		if m[4] != "" && msg == "" {
			msg = "a 5xx error"
		}
		p.st.retry(Retry{Attempt: attempt, Status: status, Message: msg}, emit)
		return
	}
	if m := geminiRetryAfterRe.FindStringSubmatch(s); m != nil {
		attempt, _ := strconv.Atoi(m[1])
		delay, _ := strconv.ParseInt(m[3], 10, 64)
		// Only quota errors carry a delay: the API's 429.
		p.st.retry(Retry{Attempt: attempt, Status: 429, BackoffMS: delay, Message: geminiRetryMessage(m[2])}, emit)
	}
}

// geminiRetryMessage is the API's own message in the CLI's error text (the
// JSON error body's "message"), else the text itself, capped.
func geminiRetryMessage(s string) string {
	s = strings.TrimSpace(s)
	if m := geminiErrMessageRe.FindStringSubmatch(s); m != nil {
		if u, err := strconv.Unquote(`"` + m[1] + `"`); err == nil {
			s = u
		}
	}
	s = strings.TrimPrefix(s, "_ApiError: ")
	return foldBrief(capBytes(s, geminiRetryMessageMax))
}
