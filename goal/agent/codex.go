package agent

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/goalrun/goalrun/goal/agent/internal/jsonscan"
)

// Codex is the adapter for the OpenAI Codex CLI (npm @openai/codex; the
// transcripts in testdata/transcripts are from 0.171.0).
//
// Each turn runs
//
//	codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox
//	      [-m M] [-c model_provider=goalrun -c model_providers.goalrun.…] [EXTRA…]
//	      [resume SESSION] -- PROMPT
//
// Approvals and Codex's own sandbox are off because goalrun's sandbox is the
// boundary. When Turn.BaseURL is set, a custom provider named "goalrun"
// points Codex at it (wire_api "responses", key from OPENAI_API_KEY): Codex
// has no base-URL variable for custom providers, and its OPENAI_BASE_URL is
// deprecated. A later turn resumes the thread with `exec … resume <id>`.
// The prompt follows "--"; one longer than MaxArgPrompt is passed as "-"
// and fed on stdin. Otherwise stdin is /dev/null: Codex reads extra prompt
// text from any other stdin.
type Codex struct{}

var _ Adapter = Codex{}

// CodexProvider is the name of the custom model provider Codex is given
// when Turn.BaseURL is set.
const CodexProvider = "goalrun"

// Name returns "codex".
func (Codex) Name() string { return "codex" }

// Command builds the headless Codex invocation for t.
func (Codex) Command(t Turn) Invocation {
	args := []string{binOr(t.Bin, "codex"), "exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"}
	if t.Model != "" {
		args = append(args, "-m", t.Model)
	}
	if t.BaseURL != "" {
		p := "model_providers." + CodexProvider + "."
		args = append(args,
			"-c", "model_provider="+tomlString(CodexProvider),
			"-c", p+"name="+tomlString(CodexProvider),
			"-c", p+"base_url="+tomlString(t.BaseURL),
			"-c", p+"env_key="+tomlString(CodexSpec.API.KeyEnv),
			"-c", p+"wire_api="+tomlString("responses"),
		)
	}
	args = append(args, t.ExtraArgs...)
	if t.SessionID != "" {
		args = append(args, "resume", t.SessionID)
	}
	inv := Invocation{Env: CodexSpec.environ(t)}
	if len(t.Prompt) > MaxArgPrompt {
		args = append(args, "-")
		inv.Stdin = t.Prompt
	} else {
		args = append(args, "--", t.Prompt)
	}
	inv.Args = args
	return inv
}

// NewParser returns a parser for `codex exec --json` output.
func (Codex) NewParser() Parser { return &codexParser{st: newTurnState()} }

// Spec describes what running Codex needs.
func (Codex) Spec() Spec { return CodexSpec }

// tomlString quotes s as a TOML basic string (Codex parses -c values as
// TOML).
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\u`)
			h := strconv.FormatInt(int64(r), 16)
			b.WriteString(strings.Repeat("0", 4-len(h)) + h)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// codexParser reads `codex exec --json` lines:
//
//   - thread.started: the thread (session) id;
//   - turn.started: counts turns;
//   - item.started / item.updated / item.completed: command_execution
//     (receipt "command_execution", brief = the command with Codex's
//     `/bin/bash -lc '…'` wrapper removed, ok = completed with exit code 0),
//     file_change (receipt "file_change", Paths = the changed paths),
//     mcp_tool_call ("mcp__<server>__<tool>", ok = completed without error),
//     collab_tool_call ("collab_<tool>"; spawn_agent counts a delegation),
//     web_search; agent_message → KindText, the last one is the summary;
//     error items are warnings (a non-fatal KindError);
//   - turn.completed: usage, cumulative for the thread (Usage.Cumulative);
//     the terminal event of a successful turn;
//   - turn.failed: the terminal event of a failed turn (auth_required when
//     its message says the API refused the key, or no key was set);
//   - error: "Reconnecting... n/m (…)" is a KindRetry, not fatal;
//     AuthRetryLimit consecutive reconnects for 401/403 end the turn as
//     auth_required and ask the runner to stop the process. Other errors
//     are remembered for the failure message.
type codexParser struct {
	st          turnState
	delegations map[string]bool
}

var (
	codexReconnectRe = regexp.MustCompile(`^Reconnecting\.*\s*(\d+)/(\d+)`)
	codexStatusRe    = regexp.MustCompile(`(?i)status[: ]+(\d{3})\b`)
)

// Line parses one stdout line.
func (p *codexParser) Line(line []byte, oversize bool, emit func(Event)) {
	if oversize {
		p.st.skipped(true)
		return
	}
	var typ, threadID, item, usage, errv, message jsonscan.Value
	err := jsonscan.ParseObject(line, func(k []byte, v jsonscan.Value) {
		switch string(k) {
		case "type":
			typ = v
		case "thread_id":
			threadID = v
		case "item":
			item = v
		case "usage":
			usage = v
		case "error":
			errv = v
		case "message":
			message = v
		}
	})
	if err != nil {
		p.st.skipped(false)
		return
	}
	switch typ.Text() {
	case "thread.started":
		p.st.session(threadID.Text(), emit)
	case "turn.started":
		p.st.res.Turns++
	case "item.started", "item.updated":
		p.item(item, false, emit)
	case "item.completed":
		p.item(item, true, emit)
	case "turn.completed":
		p.st.terminal = true
		var u Usage
		u.Cumulative = true
		_ = usage.Each(func(k []byte, v jsonscan.Value) bool {
			n, _ := v.Int()
			switch string(k) {
			case "input_tokens": // includes cached_input_tokens (OpenAI counts them inside)
				u.InputTokens = n
			case "output_tokens":
				u.OutputTokens = n
			}
			return true
		})
		p.st.res.Usage = u
		emit(Event{Kind: KindUsage, Usage: &u})
		if p.st.res.Status != StatusAuthRequired {
			p.st.res.Status, p.st.res.Cause, p.st.res.Message = StatusSuccess, "", ""
		}
		emit(Event{Kind: KindResult})
	case "turn.failed":
		p.st.terminal = true
		msg := errv.Get("message").Text()
		if msg == "" {
			msg = "codex reported turn.failed"
		}
		switch reason, auth := authFailure(msg); {
		case p.st.res.Status == StatusAuthRequired:
		case auth:
			p.st.markAuth(reason, msg)
		default:
			p.st.res.Status, p.st.res.Cause, p.st.res.Message = StatusFailed, CauseTurnFailed, msg
		}
		emit(Event{Kind: KindResult})
	case "error":
		p.topError(message.Text(), emit)
	}
}

// topError handles a top-level error event: a reconnect notice becomes a
// retry; anything else is remembered (a turn.failed usually follows).
func (p *codexParser) topError(msg string, emit func(Event)) {
	if m := codexReconnectRe.FindStringSubmatch(msg); m != nil {
		attempt, _ := strconv.Atoi(m[1])
		status := 0
		if s := codexStatusRe.FindStringSubmatch(msg); s != nil {
			status, _ = strconv.Atoi(s[1])
		}
		detail := msg
		if i := strings.IndexByte(msg, '('); i >= 0 {
			detail = strings.TrimSuffix(msg[i+1:], ")")
		}
		p.st.retry(Retry{Attempt: attempt, Status: status, Message: detail}, emit)
		return
	}
	p.st.lastError = msg
	emit(Event{Kind: KindError, Error: &Error{Message: msg}})
}

func (p *codexParser) item(item jsonscan.Value, completed bool, emit func(Event)) {
	var id, typ, command, exitCode, status, text, changes, server, tool, args, ierr, query, prompt jsonscan.Value
	_ = item.Each(func(k []byte, v jsonscan.Value) bool {
		switch string(k) {
		case "id":
			id = v
		case "type":
			typ = v
		case "command":
			command = v
		case "exit_code":
			exitCode = v
		case "status":
			status = v
		case "text":
			text = v
		case "changes":
			changes = v
		case "server":
			server = v
		case "tool":
			tool = v
		case "arguments":
			args = v
		case "error":
			ierr = v
		case "query":
			query = v
		case "prompt":
			prompt = v
		case "message":
			if text == nil {
				text = v
			}
		}
		return true
	})
	callID := id.Text()
	st := status.Text()
	var t *Tool
	ok := false
	switch typ.Text() {
	case "agent_message":
		if completed {
			if s := text.Text(); s != "" {
				p.st.res.Summary = s
				emit(Event{Kind: KindText, Text: s})
			}
		}
		return
	case "error":
		if completed {
			emit(Event{Kind: KindError, Error: &Error{Message: text.Text()}})
		}
		return
	case "command_execution":
		t = &Tool{ID: callID, Name: "command_execution", Brief: foldBrief(unwrapShell(command.Text()))}
		code, hasCode := exitCode.Int()
		ok = st == "completed" && (!hasCode || code == 0)
	case "file_change":
		var paths []string
		_ = changes.Elems(func(c jsonscan.Value) bool {
			if s := c.Get("path").Text(); s != "" {
				paths = append(paths, s)
			}
			return true
		})
		t = &Tool{ID: callID, Name: "file_change", Brief: foldBrief(strings.Join(paths, ", ")), Paths: paths}
		ok = st == "completed"
	case "mcp_tool_call":
		t = &Tool{ID: callID, Name: "mcp__" + server.Text() + "__" + tool.Text(), Brief: briefFrom(args)}
		ok = st == "completed" && ierr.IsNull()
	case "collab_tool_call":
		name := tool.Text()
		t = &Tool{ID: callID, Name: "collab_" + name, Brief: foldBrief(prompt.Text())}
		ok = st == "completed"
		if name == "spawn_agent" && callID != "" {
			if p.delegations == nil {
				p.delegations = map[string]bool{}
			}
			if !p.delegations[callID] {
				p.delegations[callID] = true
				p.st.res.Delegations++
			}
		}
	case "web_search":
		t = &Tool{ID: callID, Name: "web_search", Brief: foldBrief(query.Text())}
		ok = st != "failed"
	default: // reasoning, todo_list, plan, …: not tool calls
		return
	}
	if callID == "" {
		callID = "codex-" + typ.Text()
		t.ID = callID
	}
	if p.st.waiting(callID) == nil {
		p.st.call(t, emit)
	}
	if completed {
		p.st.result(callID, ok, emit)
	}
}

// End reports how the turn ended: without turn.completed or turn.failed the
// turn failed with CauseNoResultEvent whatever the exit code.
func (p *codexParser) End(exitCode int, emit func(Event)) TurnResult {
	return p.st.finish(emit)
}
