package agent

import (
	"strconv"
	"strings"

	"github.com/goalrun/goalrun/goal/agent/internal/jsonscan"
	"github.com/goalrun/goalrun/internal/lazyre"
)

// Claude is the adapter for Claude Code (npm @anthropic-ai/claude-code; the
// transcripts in testdata/transcripts are from 2.1.332).
//
// Each turn runs
//
//	claude -p --output-format stream-json --verbose --dangerously-skip-permissions
//	       [--model M] [--max-turns N] [--resume SESSION] [EXTRA…] -- PROMPT
//
// Permissions are off because the sandbox is the boundary (docs/security.md);
// Claude Code refuses that flag as root unless IS_SANDBOX=1, which Spec.Env
// sets. The prompt comes after "--" so a prompt starting with "-" is not
// read as a flag; a prompt longer than MaxArgPrompt goes to stdin instead
// (Claude Code reads the prompt from stdin when none is given). stdin is
// otherwise /dev/null.
//
// The parser reads the stream-json lines (see claudeParser).
type Claude struct{}

var _ Adapter = Claude{}

// MaxArgPrompt is the longest prompt passed on the command line: 96 KiB.
// Linux refuses a single argument over 128 KiB (MAX_ARG_STRLEN); longer
// prompts go to the CLI's stdin where the CLI supports it.
const MaxArgPrompt = 96 << 10

// Name returns "claude".
func (Claude) Name() string { return "claude" }

// Command builds the headless Claude Code invocation for t.
func (Claude) Command(t Turn) Invocation {
	args := []string{binOr(t.Bin, "claude"), "-p", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions"}
	if t.Model != "" {
		args = append(args, "--model", t.Model)
	}
	if t.MaxTurns > 0 {
		args = append(args, "--max-turns", strconv.Itoa(t.MaxTurns))
	}
	if t.SessionID != "" {
		args = append(args, "--resume", t.SessionID)
	}
	args = append(args, t.ExtraArgs...)
	inv := Invocation{Env: ClaudeSpec.environ(t)}
	if len(t.Prompt) > MaxArgPrompt {
		inv.Stdin = t.Prompt
	} else {
		args = append(args, "--", t.Prompt)
	}
	inv.Args = args
	return inv
}

// ReadOnlyArgs returns the arguments that keep one Claude Code invocation
// from changing the workspace: --disallowedTools removes the editing tools
// and Bash from the session (docs.anthropic.com, "CLI reference"); Read,
// Grep and Glob stay. The judge of --infer-until (goal.AgentJudge) adds
// them to its call.
func (Claude) ReadOnlyArgs() []string {
	return []string{"--disallowedTools", "Edit,Write,MultiEdit,NotebookEdit,Bash"}
}

// NewParser returns a parser for Claude Code's stream-json output.
func (Claude) NewParser() Parser { return newClaudeParser() }

// Spec describes what running Claude Code needs.
func (Claude) Spec() Spec { return ClaudeSpec }

func binOr(bin, def string) string {
	if bin != "" {
		return bin
	}
	return def
}

// claudeParser reads Claude Code's `--output-format stream-json --verbose`
// lines:
//
//   - session id from system/init and every later line's session_id (the
//     latest wins; a resumed session keeps its id);
//   - system/init: model, claude_code_version, cwd (tool paths are made
//     relative to it);
//   - system/api_retry: a KindRetry (attempt, error_status, retry_delay_ms);
//     AuthRetryLimit consecutive 401/403 retries end the turn as
//     auth_required, ClaudeRetryStormLimit consecutive 429/5xx or
//     connection retries as CauseRetryStorm, and either asks the runner to
//     stop the process;
//   - assistant: text blocks (main agent only) → KindText; tool_use,
//     server_tool_use and mcp_tool_use blocks → KindToolCall with a brief
//     (BriefKeys) and, for Edit/Write/MultiEdit/NotebookEdit, the path
//     written; server tool results in the same message resolve their call;
//   - user: tool_result blocks resolve their call (is_error → failed);
//   - lines of a sub-agent carry parent_tool_use_id: their calls name the
//     sub-agent in Via (the Task/Agent call's subagent_type);
//   - result (the terminal event): usage and cost for this invocation (see
//     claudeUsage), num_turns, permission_denials, the answer; is_error true
//     or a subtype other than "success" is a failure whatever the rest says,
//     and an API status 401/403 in it is auth_required.
type claudeParser struct {
	st     turnState
	cwd    string
	via    map[string]string // Task/Agent call id → the sub-agent's name
	blocks []claudeBlock     // the current line's message content (reused)
	cur    jsonscan.Cursor
}

func newClaudeParser() *claudeParser {
	p := &claudeParser{st: newTurnState(), via: map[string]string{}}
	p.st.stormLimit = ClaudeRetryStormLimit
	return p
}

// ClaudeRetryStormLimit is how many consecutive model API retries for 429,
// 5xx or a failed connection end a Claude Code turn (CauseRetryStorm).
// Claude Code 2.1.332 retries ten times with backoffs of about 0.5, 1, 2,
// 4.5, 9, 17, 36, 38, 32 and 35 s and then gives up by itself: about three
// minutes against an API answering 429, 500 or 529 (measured against a
// scripted server). The eighth retry comes about 72 s into the storm, as
// long as the Gemini CLI's fifth (GeminiRetryStormLimit): long enough for
// a per-minute rate limit to clear, without the last two minutes.
const ClaudeRetryStormLimit = 8

// claudeLine holds the members of one line the parser looks at.
type claudeLine struct {
	typ, subtype, sessionID, parent jsonscan.Value
	msgModel, model, version, cwd   jsonscan.Value
	attempt, retryDelay, errStatus  jsonscan.Value
	errWord, isError, result        jsonscan.Value
	usage, totalCost, sinceLast     jsonscan.Value
	numTurns, denials, apiStatus    jsonscan.Value
	errors                          jsonscan.Value
}

// claudeBlock is one block of message.content (tool_use, tool_result, text,
// server tool blocks), its members raw.
type claudeBlock struct {
	typ, id, name, input, text, toolUseID, isError, content jsonscan.Value
}

func (l *claudeLine) collect(k []byte, v jsonscan.Value) {
	switch string(k) {
	case "type":
		l.typ = v
	case "subtype":
		l.subtype = v
	case "session_id":
		l.sessionID = v
	case "parent_tool_use_id":
		l.parent = v
	case "model":
		l.model = v
	case "claude_code_version":
		l.version = v
	case "cwd":
		l.cwd = v
	case "attempt":
		l.attempt = v
	case "retry_delay_ms":
		l.retryDelay = v
	case "error_status":
		l.errStatus = v
	case "error":
		l.errWord = v
	case "is_error":
		l.isError = v
	case "result":
		l.result = v
	case "usage":
		l.usage = v
	case "total_cost_usd":
		l.totalCost = v
	case "model_usage_since_last_result":
		l.sinceLast = v
	case "num_turns":
		l.numTurns = v
	case "permission_denials":
		l.denials = v
	case "api_error_status":
		l.apiStatus = v
	case "errors":
		l.errors = v
	}
}

// scan walks the line once (jsonscan.Cursor): top-level members are kept
// raw, and message.content is split into blocks on the way, so a tool
// result carrying megabytes is scanned once.
func (p *claudeParser) scan(line []byte, l *claudeLine) error {
	c := &p.cur
	c.Reset(line)
	p.blocks = p.blocks[:0]
	c.Object(func(k []byte) {
		if string(k) != "message" {
			l.collect(k, c.Value())
			return
		}
		if c.Peek() != '{' {
			return
		}
		c.Object(func(k []byte) {
			switch string(k) {
			case "model":
				l.msgModel = c.Value()
			case "content":
				if c.Peek() != '[' {
					return
				}
				c.Array(func() {
					if c.Peek() != '{' {
						return
					}
					var b claudeBlock
					c.Object(func(k []byte) {
						switch string(k) {
						case "type":
							b.typ = c.Value()
						case "id":
							b.id = c.Value()
						case "name":
							b.name = c.Value()
						case "input":
							b.input = c.Value()
						case "text":
							b.text = c.Value()
						case "tool_use_id":
							b.toolUseID = c.Value()
						case "is_error":
							b.isError = c.Value()
						case "content":
							b.content = c.Value()
						}
					})
					p.blocks = append(p.blocks, b)
				})
			}
		})
	})
	return c.Done()
}

// Line parses one stdout line.
func (p *claudeParser) Line(line []byte, oversize bool, emit func(Event)) {
	if oversize {
		p.st.skipped(true)
		p.salvage(line, emit)
		return
	}
	var l claudeLine
	if err := p.scan(line, &l); err != nil {
		p.st.skipped(false)
		return
	}
	p.st.session(l.sessionID.Text(), emit)
	switch l.typ.Text() {
	case "system":
		p.system(&l, emit)
	case "assistant":
		p.assistant(&l, emit)
	case "user":
		p.user(&l, emit)
	case "result":
		p.result(&l, emit)
	}
	clear(p.blocks) // they point into line, valid only during this call
	p.blocks = p.blocks[:0]
}

func (p *claudeParser) system(l *claudeLine, emit func(Event)) {
	switch l.subtype.Text() {
	case "init":
		if v := l.version.Text(); v != "" {
			p.st.res.Version = v
		}
		if c := l.cwd.Text(); c != "" {
			p.cwd = c
		}
		// init's model is the one asked for, not one that answered: the
		// assistant messages name those.
	case "api_retry":
		attempt, _ := l.attempt.Int()
		status, _ := l.errStatus.Int()
		delay, _ := l.retryDelay.Int()
		p.st.retry(Retry{Attempt: int(attempt), Status: int(status), BackoffMS: delay, Message: l.errWord.Text()}, emit)
	}
}

func (p *claudeParser) assistant(l *claudeLine, emit func(Event)) {
	parent := l.parent.Text()
	if m := l.msgModel.Text(); parent == "" && m != claudeSyntheticModel {
		p.st.seeModel(m, emit)
	}
	for i := range p.blocks {
		b := &p.blocks[i]
		t := b.typ.Text()
		switch {
		case t == "text":
			if parent == "" {
				if s := b.text.Text(); strings.TrimSpace(s) != "" {
					emit(Event{Kind: KindText, Text: s})
				}
			}
		case t == "tool_use" || t == "server_tool_use" || t == "mcp_tool_use":
			p.toolUse(b.id.Text(), b.name.Text(), b.input, parent, emit)
		case strings.HasSuffix(t, "_tool_result"): // a server tool's result, e.g. web_search_tool_result
			ok := !strings.HasSuffix(b.content.Get("type").Text(), "_error")
			p.st.result(b.toolUseID.Text(), ok, emit)
		}
	}
}

// claudeSyntheticModel is the model Claude Code names on a message it made
// up itself (its API error notice), which no model answered.
const claudeSyntheticModel = "<synthetic>"

// claudeWriteTools are the tools whose file_path (notebook_path) is a path
// the call writes.
var claudeWriteTools = map[string]bool{"Edit": true, "Write": true, "MultiEdit": true, "NotebookEdit": true}

// claudeDelegateTools start a sub-agent.
var claudeDelegateTools = map[string]bool{"Task": true, "Agent": true}

func (p *claudeParser) toolUse(id, name string, input jsonscan.Value, parent string, emit func(Event)) {
	t := &Tool{ID: id, Name: name, Brief: briefFrom(input)}
	if claudeWriteTools[name] {
		fp := input.Get("file_path").Text()
		if fp == "" {
			fp = input.Get("notebook_path").Text()
		}
		if fp != "" {
			t.Paths = []string{relPath(p.cwd, fp)}
		}
	}
	if parent != "" {
		t.Via = p.via[parent]
		if t.Via == "" {
			t.Via = "subagent:" + parent
		}
	}
	if claudeDelegateTools[name] {
		p.st.res.Delegations++
		who := input.Get("subagent_type").Text()
		if who == "" {
			who = name
		}
		if id != "" {
			p.via[id] = who
		}
	}
	p.st.call(t, emit)
}

func (p *claudeParser) user(l *claudeLine, emit func(Event)) {
	for i := range p.blocks {
		if b := &p.blocks[i]; b.typ.Text() == "tool_result" {
			p.st.result(b.toolUseID.Text(), !b.isError.True(), emit)
		}
	}
}

func (p *claudeParser) result(l *claudeLine, emit func(Event)) {
	p.st.terminal = true
	res := &p.st.res
	if n, ok := l.numTurns.Int(); ok {
		res.Turns = int(n)
	}
	if l.denials.Kind() == jsonscan.Array {
		n := 0
		_ = l.denials.Elems(func(jsonscan.Value) bool { n++; return true })
		res.PermissionDenials = n
	}
	u := claudeUsage(l)
	res.Usage = u
	emit(Event{Kind: KindUsage, Usage: &u})

	text := l.result.Text()
	subtype := l.subtype.Text()
	failed := l.isError.True() || (subtype != "" && subtype != "success")
	switch {
	case res.Status == StatusAuthRequired, res.Cause == CauseRetryStorm:
		// an auth or retry storm already decided; the runner is stopping the process
	case !failed:
		res.Status, res.Cause, res.Message = StatusSuccess, "", ""
		res.Summary = text
	default:
		msg := claudeFailureMessage(subtype, text, l.errors)
		status, _ := l.apiStatus.Int()
		if reason, auth := authFailure(msg); isAuthStatus(int(status)) || auth {
			if reason == "" {
				reason = authReason(int(status), msg)
			}
			p.st.markAuth(reason, msg)
			break
		}
		res.Status, res.Message = StatusFailed, msg
		res.Cause = CauseResultError
		if subtype == "error_max_turns" {
			res.Cause = CauseMaxTurns
		}
	}
	emit(Event{Kind: KindResult})
}

// claudeFailureMessage joins what a failed result says: the subtype, the
// result text and the errors list, when present.
func claudeFailureMessage(subtype, text string, errs jsonscan.Value) string {
	var parts []string
	if text != "" {
		parts = append(parts, text)
	}
	if errs.Kind() == jsonscan.Array {
		_ = errs.Elems(func(v jsonscan.Value) bool {
			if s := v.Text(); s != "" {
				parts = append(parts, s)
			}
			return true
		})
	}
	msg := strings.Join(parts, "; ")
	if subtype != "" && subtype != "success" {
		if msg == "" {
			return subtype
		}
		return subtype + ": " + msg
	}
	if msg == "" {
		return "the result event reported is_error"
	}
	return msg
}

// claudeUsage reads a result event's usage for this invocation:
//
//   - input tokens are usage.input_tokens plus the cache creation and cache
//     read tokens (all the input the model processed; Anthropic counts the
//     cached parts apart), output tokens usage.output_tokens — both are for
//     this invocation only;
//   - cost is the sum of model_usage_since_last_result[*].costUSD when the
//     line has it, else total_cost_usd: on a resumed session total_cost_usd
//     (and modelUsage) is the session's running total, not this
//     invocation's (see testdata/transcripts/…/resume-same-session.jsonl:
//     total 0.00056, this invocation 0.00014).
func claudeUsage(l *claudeLine) Usage {
	var u Usage
	_ = l.usage.Each(func(k []byte, v jsonscan.Value) bool {
		n, _ := v.Int()
		switch string(k) {
		case "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens":
			u.InputTokens += n
		case "output_tokens":
			u.OutputTokens = n
		}
		return true
	})
	if l.sinceLast.Kind() == jsonscan.Object {
		_ = l.sinceLast.Each(func(_ []byte, m jsonscan.Value) bool {
			if c, ok := m.Get("costUSD").Float(); ok {
				u.CostUSD += c
			}
			return true
		})
		return u
	}
	u.CostUSD, _ = l.totalCost.Float()
	return u
}

// Patterns for salvaging an oversize line's prefix (Claude Code writes its
// members in a fixed order: a tool_result's tool_use_id before its content,
// a tool_use's id and name before its input).
var (
	salvageResultRe = lazyre.New(`"tool_use_id":"([^"\\]+)"`)
	salvageCallRe   = lazyre.New(`"type":"tool_use","id":"([^"\\]+)","name":"([^"\\]+)","input":\{"(?:file_path|command|notebook_path)":"([^"\\]*)"`)
)

// salvageWindow is how much of an oversize line salvage reads: 256 KiB.
const salvageWindow = 256 << 10

// salvage reads what it can from the kept prefix of a line longer than
// MaxLineBytes: a tool call whose input holds a huge file (its id, name and
// path), or tool results carrying a huge output. Such a result is taken as
// a success: its is_error member comes after the content and is lost, and
// Claude Code's failed tool results are short error messages, not
// megabytes.
func (p *claudeParser) salvage(prefix []byte, emit func(Event)) {
	// The ids and names sit at the start of a line; do not run the
	// patterns over megabytes of file content.
	if len(prefix) > salvageWindow {
		prefix = prefix[:salvageWindow]
	}
	for _, m := range salvageCallRe.FindAllSubmatch(prefix, -1) {
		t := &Tool{ID: string(m[1]), Name: string(m[2]), Brief: foldBrief(string(m[3]))}
		if claudeWriteTools[t.Name] && len(m[3]) > 0 {
			t.Paths = []string{relPath(p.cwd, string(m[3]))}
		}
		p.st.call(t, emit)
	}
	for _, m := range salvageResultRe.FindAllSubmatch(prefix, -1) {
		p.st.result(string(m[1]), true, emit)
	}
}

// End reports how the turn ended. Calls still waiting for their results are
// reported failed; without a result event the turn failed with
// CauseNoResultEvent whatever the exit code.
func (p *claudeParser) End(exitCode int, emit func(Event)) TurnResult {
	return p.st.finish(emit)
}
