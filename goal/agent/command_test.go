package agent_test

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/goalrun/goalrun/goal/agent"
	"github.com/goalrun/goalrun/internal/textcap"
	"github.com/goalrun/goalrun/report"
)

func TestCommandInvocation(t *testing.T) {
	cases := []struct {
		name string
		c    agent.Command
		turn agent.Turn
		want agent.Invocation
	}{
		{
			name: "turn bin, prompt in env and stdin",
			c:    agent.Command{},
			turn: agent.Turn{Iteration: 2, Prompt: "fix it\nplease", Bin: "./fix.sh"},
			want: agent.Invocation{
				Args:  []string{"sh", "-c", "./fix.sh", "goalrun-agent"},
				Env:   map[string]string{"GOALRUN_PROMPT": "fix it\nplease", "GOALRUN_ITERATION": "2"},
				Stdin: "fix it\nplease",
			},
		},
		{
			name: "adapter bin, model and extra args as positional parameters",
			c:    agent.Command{Bin: "my-agent --fast"},
			turn: agent.Turn{Iteration: 1, Prompt: "p", Model: "m-1", ExtraArgs: []string{"a b", "c"}},
			want: agent.Invocation{
				Args:  []string{"sh", "-c", "my-agent --fast", "goalrun-agent", "a b", "c"},
				Env:   map[string]string{"GOALRUN_PROMPT": "p", "GOALRUN_ITERATION": "1", "GOALRUN_MODEL": "m-1"},
				Stdin: "p",
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.c.Command(tc.turn); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Command()\n got %#v\nwant %#v", got, tc.want)
			}
			if tc.c.Name() != "command" {
				t.Errorf("Name() = %q", tc.c.Name())
			}
		})
	}
}

// feed runs stdout through a LineWriter into p, as the loop does.
func feed(p agent.Parser, stdout string, exit int) (agent.TurnResult, []agent.Event) {
	var events []agent.Event
	emit := func(e agent.Event) { events = append(events, e) }
	w := agent.NewLineWriter(p, emit)
	w.Write([]byte(stdout))
	w.Close()
	return p.End(exit, emit), events
}

func TestCommandParser(t *testing.T) {
	cases := []struct {
		name        string
		stdout      string
		exit        int
		wantStatus  string
		wantSummary string
		wantOK      bool
	}{
		{"ok, summary is the output", "editing calc.go\nfixed Sum\n", 0, agent.StatusSuccess, "editing calc.go\nfixed Sum", true},
		{"no trailing newline", "done", 0, agent.StatusSuccess, "done", true},
		{"silent", "", 0, agent.StatusSuccess, "", true},
		{"non-zero exit is a failed turn", "could not fix\n", 3, agent.StatusFailed, "could not fix", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := agent.Command{}.NewTurnParser(agent.Turn{Iteration: 4, Bin: "./fix.sh"})
			res, events := feed(p, tc.stdout, tc.exit)
			if res.Status != tc.wantStatus || res.Summary != tc.wantSummary || res.Turns != 1 {
				t.Errorf("result %+v, want status %q summary %q turns 1", res, tc.wantStatus, tc.wantSummary)
			}
			if tc.exit != 0 && (res.Cause != "exit_status" || !strings.Contains(res.Message, "3")) {
				t.Errorf("failure cause %q message %q", res.Cause, res.Message)
			}
			want := []agent.Event{
				{Kind: agent.KindToolCall, Tool: &agent.Tool{ID: "command-4", Name: "command", Brief: "./fix.sh"}},
				{Kind: agent.KindToolResult, Tool: &agent.Tool{ID: "command-4", Name: "command", Brief: "./fix.sh", OK: tc.wantOK}},
				{Kind: agent.KindResult},
			}
			if !reflect.DeepEqual(events, want) {
				t.Errorf("events\n got %+v\nwant %+v", events, want)
			}
		})
	}
}

func TestCommandParserKeepsTheEndOfHugeOutput(t *testing.T) {
	// 10 MB of multi-byte text in lines; the end is marked.
	line := strings.Repeat("ü€😀", 100) // 900 bytes
	var b strings.Builder
	for b.Len() < 10<<20 {
		b.WriteString(line)
		b.WriteString("\n")
	}
	b.WriteString("THE END")
	stdout := b.String()
	res, _ := feed(agent.Command{Bin: "x"}.NewParser(), stdout, 0)
	if !utf8.ValidString(res.Summary) {
		t.Fatalf("summary is not valid UTF-8")
	}
	if !strings.HasSuffix(res.Summary, "THE END") {
		t.Errorf("summary does not keep the end: …%q", res.Summary[len(res.Summary)-40:])
	}
	if len(res.Summary) > agent.CommandSummaryWindow+textcap.MarkerMaxBytes {
		t.Errorf("summary is %d bytes, more than the window and a marker", len(res.Summary))
	}
	// The marker states the whole output's length; capping for the document
	// keeps that total.
	capped := textcap.CapTail(res.Summary, 0, report.SummaryCap)
	wantMarker := "of " + strconv.Itoa(len(stdout)) + " bytes shown"
	if !strings.Contains(capped, wantMarker) || !strings.HasSuffix(capped, "THE END") {
		t.Errorf("capped summary lacks %q or the end: %q…", wantMarker, capped[:120])
	}
	if len(capped) > report.SummaryCap+textcap.MarkerMaxBytes {
		t.Errorf("capped summary %d bytes", len(capped))
	}
}

// A prompt over MaxArgPrompt reaches a command agent whole on stdin; the
// environment variable, which the kernel caps at 131072 bytes, holds its
// start with textcap.Cap's marker.
func TestCommandHugePrompt(t *testing.T) {
	prompt := strings.Repeat("界", 70_000) // 210000 bytes
	inv := agent.Command{Bin: "cat"}.Command(agent.Turn{Prompt: prompt, Iteration: 1})
	if inv.Stdin != prompt {
		t.Errorf("stdin holds %d bytes, want the whole %d", len(inv.Stdin), len(prompt))
	}
	env := inv.Env[agent.PromptEnv]
	if len(env) > agent.MaxArgPrompt+200 || !strings.HasPrefix(prompt, strings.SplitN(env, "…[truncated", 2)[0]) || !strings.Contains(env, "of 210000 bytes shown") {
		t.Errorf("GOALRUN_PROMPT is %d bytes (%q…): want the first %d bytes and a marker", len(env), env[:min(40, len(env))], agent.MaxArgPrompt)
	}
}
