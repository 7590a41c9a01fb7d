package agent

import (
	"cmp"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/goalrun/goalrun/goal/agent/internal/jsonscan"
	"github.com/goalrun/goalrun/internal/lazyre"
)

// Codex is the adapter for the OpenAI Codex CLI (npm @openai/codex; the
// transcripts in testdata/transcripts are from 0.171.0).
//
// Each turn runs
//
//	codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox
//	      -c analytics.enabled=false -c features.plugins=false
//	      [-m M] [-c model_provider=goalrun -c model_providers.goalrun.…] [EXTRA…]
//	      [resume SESSION] -- PROMPT
//
// Approvals and Codex's own sandbox are off because goalrun's sandbox is the
// boundary. CodexQuiet turns off what Codex calls besides the model API. When Turn.BaseURL is set, a custom provider named "goalrun"
// points Codex at it (wire_api "responses", key from OPENAI_API_KEY): Codex
// has no base-URL variable for custom providers, and its OPENAI_BASE_URL is
// deprecated. A later turn resumes the thread with `exec … resume <id>`.
// The prompt follows "--"; one longer than MaxArgPrompt is passed as "-"
// and fed on stdin. Otherwise stdin is /dev/null: Codex reads extra prompt
// text from any other stdin.
type Codex struct {
	// ConfigModel is the model Codex's own configuration names
	// (CodexConfigModel), used to name the model when neither the stream
	// nor the turn does; "" when unknown (a container's empty HOME).
	ConfigModel string
}

var _ Adapter = Codex{}

// CodexProvider is the name of the custom model provider Codex is given
// when Turn.BaseURL is set.
const CodexProvider = "goalrun"

// CodexQuiet are the settings that keep Codex (0.171.0) to the model API.
// Without them every turn calls four other hosts, each an egress denial in
// goalrun's sandbox: its metrics exporter (statsig, ab.chatgpt.com;
// analytics.enabled) and the startup sync of its curated plugins, which
// tries github.com (git ls-remote), then api.github.com, then
// chatgpt.com's export archive (features.plugins). Found in the CLI's own
// strings ("https://ab.chatgpt.com/otlp/v1/metrics", "codex.plugins.
// startup_sync", "plugins feature is disabled") and checked with a proxy
// that records every request (TestLiveAgentsCallOnlyTheModelAPI). Extra
// arguments come after them, so a user's -c can turn either back on.
var CodexQuiet = []string{"-c", "analytics.enabled=false", "-c", "features.plugins=false"}

// Name returns "codex".
func (Codex) Name() string { return "codex" }

// Command builds the headless Codex invocation for t.
func (Codex) Command(t Turn) Invocation {
	args := []string{binOr(t.Bin, "codex"), "exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"}
	args = append(args, CodexQuiet...)
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
func (c Codex) NewParser() Parser { return newCodexParser(c.ConfigModel) }

func newCodexParser(asked string) *codexParser {
	p := &codexParser{st: newTurnState(), asked: asked}
	p.st.stormLimit = CodexRetryStormLimit
	return p
}

// CodexRetryStormLimit is how many consecutive reconnects for 429, 5xx or
// a failed connection end a Codex turn (CauseRetryStorm). Codex 0.171.0
// reconnects five times by default (its stream_max_retries) and then fails
// the turn by itself, about 25 s into a storm of 500s (measured against a
// scripted server; a 429 it does not retry at all); a configuration that
// raises the limit (a user's ~/.codex on the local host) is cut at the
// default.
const CodexRetryStormLimit = 5

// NewTurnParser returns a parser for turn t's output: Codex's stream names
// no model, so the turn's model is the one t asks for (--model, or -m /
// --model / -c model=… among the extra arguments), else the model of
// Codex's own configuration (ConfigModel), else none.
func (c Codex) NewTurnParser(t Turn) Parser {
	return newCodexParser(cmp.Or(codexModelArg(t.ExtraArgs), t.Model, c.ConfigModel))
}

// codexModelArg is the model named in Codex's extra arguments (the last
// -m, --model or -c model=… wins, as Codex's own parser does), or "".
func codexModelArg(args []string) string {
	var m string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case (a == "-m" || a == "--model") && i+1 < len(args):
			m = args[i+1]
			i++
		case strings.HasPrefix(a, "--model="):
			m = strings.TrimPrefix(a, "--model=")
		case (a == "-c" || a == "--config") && i+1 < len(args):
			if v, ok := strings.CutPrefix(args[i+1], "model="); ok {
				m = strings.Trim(strings.TrimSpace(v), `"'`)
			}
			i++
		}
	}
	return m
}

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
//     auth_required, CodexRetryStormLimit consecutive reconnects for 429,
//     5xx or a failed connection as CauseRetryStorm, and either asks the
//     runner to stop the process. Other errors are remembered for the
//     failure message.
type codexParser struct {
	st          turnState
	delegations map[string]bool
	asked       string // the model the turn asked for (see NewTurnParser)
}

var (
	codexReconnectRe = lazyre.New(`^Reconnecting\.*\s*(\d+)/(\d+)`)
	codexStatusRe    = lazyre.New(`(?i)status[: ]+(\d{3})\b`)
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
		u.NoCost = true // Codex reports tokens, never a cost
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
		case p.st.res.Status == StatusAuthRequired, p.st.res.Cause == CauseRetryStorm:
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
	if p.st.res.Model == "" && p.asked != "" && p.st.res.Status != StatusAuthRequired && p.st.res.Turns > 0 && p.st.res.Usage.OutputTokens > 0 {
		// The API answered (tokens came back) under the model the turn
		// asked for; the stream itself names none.
		p.st.seeModel(p.asked, emit)
	}
	return p.st.finish(emit)
}

// CodexConfigModel returns the model Codex's own configuration names:
// config.toml in codexHome (CODEX_HOME, else $HOME/.codex), its top-level
// "model", or the model of the profile its top-level "profile" selects
// (Codex's config reference: https://github.com/openai/codex/blob/main/docs/config.md).
// "" when the file is missing, unreadable, larger than 1 MiB or names no
// model.
func CodexConfigModel(codexHome string) string {
	f, err := os.Open(filepath.Join(codexHome, "config.toml"))
	if err != nil {
		return ""
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 1<<20+1))
	if err != nil || len(b) > 1<<20 {
		return ""
	}
	var cfg struct {
		Model    string `toml:"model"`
		Profile  string `toml:"profile"`
		Profiles map[string]struct {
			Model string `toml:"model"`
		} `toml:"profiles"`
	}
	if err := toml.Unmarshal(b, &cfg); err != nil {
		return ""
	}
	if p, ok := cfg.Profiles[cfg.Profile]; ok && cfg.Profile != "" && p.Model != "" {
		return p.Model
	}
	return cfg.Model
}
