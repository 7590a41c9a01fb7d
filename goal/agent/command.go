package agent

import (
	"strconv"
	"unicode/utf8"

	"github.com/goalrun/goalrun/internal/textcap"
)

// CommandName is the --agent value of the command adapter.
const CommandName = "command"

// Environment variables a command agent receives each turn.
const (
	// PromptEnv carries the turn's prompt (the same text is on stdin); a
	// prompt over MaxArgPrompt is cut there to MaxArgPrompt bytes with
	// textcap.Cap's marker (Linux refuses an environment string over 131072
	// bytes, MAX_ARG_STRLEN), and only stdin has it whole.
	PromptEnv = "GOALRUN_PROMPT"
	// IterationEnv carries the 1-based loop iteration.
	IterationEnv = "GOALRUN_ITERATION"
	// ModelEnv carries --model when one was given.
	ModelEnv = "GOALRUN_MODEL"
)

// CommandSummaryWindow is how much of a command agent's stdout the parser
// keeps for the summary: the last 65536 bytes (the document keeps at most
// report.SummaryCap of them, with a marker stating the total).
const CommandSummaryWindow = 64 << 10

// Command is the adapter for any program that fixes things on its own
// (--agent command --agent-bin 'CMD'). Each turn runs CMD with sh -c; the
// prompt (the task, and the failing check's command, exit code and output
// tail) is in GOALRUN_PROMPT and on stdin; --agent-arg values are the
// script's positional parameters ($1, $2, …). Its stdout is not parsed: the
// last bytes of it are the turn's summary. The whole turn is one receipt
// (tool "command", ok when CMD exits 0, brief = CMD). Exit 0 is a successful
// turn; any other exit status a failed one (cause "exit_status").
type Command struct {
	// Bin is the shell command run each turn when Turn.Bin is empty; it is
	// also the receipt's brief for parsers made by NewParser.
	Bin string
}

var _ Adapter = Command{}

// Name returns "command".
func (Command) Name() string { return CommandName }

// Command returns sh -c CMD with the prompt on stdin and in GOALRUN_PROMPT
// (cut at MaxArgPrompt there; see PromptEnv).
func (c Command) Command(t Turn) Invocation {
	bin := c.bin(t)
	args := append([]string{"sh", "-c", bin, "goalrun-agent"}, t.ExtraArgs...)
	env := map[string]string{
		PromptEnv:    textcap.Cap(t.Prompt, MaxArgPrompt),
		IterationEnv: strconv.Itoa(t.Iteration),
	}
	if t.Model != "" {
		env[ModelEnv] = t.Model
	}
	return Invocation{Args: args, Env: env, Stdin: t.Prompt}
}

func (c Command) bin(t Turn) string {
	if t.Bin != "" {
		return t.Bin
	}
	return c.Bin
}

// NewParser returns a parser whose receipt brief is c.Bin.
func (c Command) NewParser() Parser { return &commandParser{brief: c.Bin} }

// NewTurnParser returns a parser whose receipt brief is the command the turn
// runs (Turn.Bin, else c.Bin). The loop prefers it over NewParser.
func (c Command) NewTurnParser(t Turn) Parser {
	return &commandParser{brief: c.bin(t), iteration: t.Iteration}
}

// commandParser keeps the last CommandSummaryWindow bytes of stdout (lines
// joined with "\n") and the stream's total length.
type commandParser struct {
	brief     string
	iteration int
	window    []byte // ≤ 2*CommandSummaryWindow, trimmed from the front
	total     int64  // bytes of the joined text, oversize lines at their cut length
	lines     int
	oversize  int
}

// Line appends one stdout line to the summary window.
func (p *commandParser) Line(line []byte, oversize bool, emit func(Event)) {
	if oversize {
		p.oversize++
	}
	if p.lines > 0 {
		p.window = append(p.window, '\n')
		p.total++
	}
	p.lines++
	p.total += int64(len(line))
	if len(line) >= CommandSummaryWindow {
		p.window = append(p.window[:0], line[len(line)-CommandSummaryWindow:]...)
		return
	}
	p.window = append(p.window, line...)
	if len(p.window) > 2*CommandSummaryWindow {
		p.window = append(p.window[:0], p.window[len(p.window)-CommandSummaryWindow:]...)
	}
}

// End emits the turn's one receipt and returns how the turn ended.
func (p *commandParser) End(exitCode int, emit func(Event)) TurnResult {
	id := "command-" + strconv.Itoa(p.iteration)
	ok := exitCode == 0
	emit(Event{Kind: KindToolCall, Tool: &Tool{ID: id, Name: CommandName, Brief: p.brief}})
	emit(Event{Kind: KindToolResult, Tool: &Tool{ID: id, Name: CommandName, Brief: p.brief, OK: ok}})

	w := p.window
	if len(w) > CommandSummaryWindow {
		w = w[len(w)-CommandSummaryWindow:]
	}
	for len(w) > 0 && !utf8.RuneStart(w[0]) { // never start mid-rune
		w = w[1:]
	}
	summary := textcap.CapTail(string(w), p.total, CommandSummaryWindow)
	res := TurnResult{
		Status:        StatusSuccess,
		Summary:       summary,
		Turns:         1,
		OversizeLines: p.oversize,
	}
	if !ok {
		res.Status = StatusFailed
		res.Cause = "exit_status"
		res.Message = "the agent command exited with status " + strconv.Itoa(exitCode)
	}
	emit(Event{Kind: KindResult})
	return res
}
