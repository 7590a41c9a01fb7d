package main

import (
	"bytes"
	"encoding/json"
	"path"
	"sync/atomic"

	"github.com/goalrun/goalrun/goal/agent/scripted"
)

// The demo's scripted model: a fixed conversation that goalrun's scripted
// Anthropic Messages server (scripted.NewAnthropic) plays to the real
// Claude Code CLI. It is labelled as such in its first words, in the model
// name the run reports (demoModel) and in what `goalrun demo` prints.
//
// Turn 1 reads the failing test and the code, fixes Sum only (the first fix
// is deliberately incomplete) and claims "All tests pass now." before any
// check ran; goalrun's check then fails on Mean. Turn 2 resumes the session
// (the loop passes --resume), reads the code again, fixes Mean, runs gofmt
// through Bash and ends; goalrun's check passes.
const (
	// demoModel is the model the CLI is told to ask for (--model); the
	// scripted server answers under this name, so the document's
	// model_used says what served the run.
	demoModel = "goalrun-demo-scripted-model"
	// demoTask is the demo run's prompt. The script counts it in a
	// request's history to know which turn the CLI is in.
	demoTask = "Fix the failing tests of this Go module."
	// demoLabel opens the scripted model's first words in each turn.
	demoLabel = "[goalrun demo: scripted model, not a real one] "
	// demoKey is the "real" key goalrun's egress proxy adds upstream; the
	// sandbox only holds sandbox.DummyKey. It opens nothing anywhere.
	demoKey = "goalrun-demo-key-not-a-real-key"
	// demoPrematureClaim is what the model says at the end of turn 1,
	// before any check confirmed it (and the check then fails).
	demoPrematureClaim = "All tests pass now."
)

// The two bugs of examples/demo/calc.go, exactly as the file has them
// (the Edit tool replaces an exact, unique string).
const (
	demoSumBug   = "for i := 1; i < len(xs); i++ { // bug: the loop starts at 1 and skips xs[0]"
	demoSumFix   = "for i := 0; i < len(xs); i++ {"
	demoMeanBug  = "return float64(Sum(xs)) / float64(len(xs)-1) // bug: divides by one less than the count"
	demoMeanFix  = "return float64(Sum(xs)) / float64(len(xs))"
	demoTestFile = "calc_test.go"
	demoCodeFile = "calc.go"
)

// workspacePath is a tool input path inside the workspace as the agent sees
// it. The root is only known once the sandbox has started (/workspace in
// Docker, the temporary folder on the local host), and the scripted server
// marshals tool inputs when it answers, so it is read then.
type workspacePath struct {
	root *atomic.Pointer[string]
	name string
}

// MarshalJSON writes root/name as a JSON string.
func (p workspacePath) MarshalJSON() ([]byte, error) {
	root := "."
	if r := p.root.Load(); r != nil && *r != "" {
		root = *r
	}
	return json.Marshal(path.Join(root, p.name))
}

// demoTurns is the scripted conversation, one list of replies per agent
// turn. Within a turn, reply k answers the request that carries k tool
// results of that turn.
func demoTurns(root *atomic.Pointer[string]) [][]scripted.Reply {
	file := func(name string) workspacePath { return workspacePath{root: root, name: name} }
	return [][]scripted.Reply{
		{ // turn 1: reads, fixes one bug of two, claims success too early
			{Text: demoLabel + "The check `go test ./...` fails. Let me read the failing test first.",
				Tools: []scripted.ToolCall{{Name: "Read", Input: map[string]any{"file_path": file(demoTestFile)}}}},
			{Text: "Now the code under test.",
				Tools: []scripted.ToolCall{{Name: "Read", Input: map[string]any{"file_path": file(demoCodeFile)}}}},
			{Text: "Sum starts its loop at index 1, so it skips the first element. Fixing that.",
				Tools: []scripted.ToolCall{{Name: "Edit", Input: map[string]any{"file_path": file(demoCodeFile), "old_string": demoSumBug, "new_string": demoSumFix}}}},
			{Text: "Fixed Sum: its loop skipped xs[0]. " + demoPrematureClaim},
		},
		{ // turn 2 (resumed): the check said otherwise; fixes the second bug
			{Text: demoLabel + "goalrun's check still fails, in TestMean: Mean divides by len(xs)-1. Reading the file again before editing it.",
				Tools: []scripted.ToolCall{{Name: "Read", Input: map[string]any{"file_path": file(demoCodeFile)}}}},
			{Text: "Mean must divide by the count itself.",
				Tools: []scripted.ToolCall{{Name: "Edit", Input: map[string]any{"file_path": file(demoCodeFile), "old_string": demoMeanBug, "new_string": demoMeanFix}}}},
			{Text: "Checking the formatting.",
				Tools: []scripted.ToolCall{{Name: "Bash", Input: map[string]any{"command": "gofmt -l .", "description": "List files whose formatting differs from gofmt's"}}}},
			{Text: "Fixed Mean: it divided by one less than the count. Both bugs are fixed."},
		},
	}
}

// demoAside answers the CLI's side requests (those that offer no tools,
// such as a title for the session): plain text, no tool call.
var demoAside = scripted.Reply{Text: "goalrun demo"}

// demoScript flattens demoTurns into an scripted.Script. Its Pick reads
// the turn from how many times the request's history carries the task
// (once per goalrun turn: the loop's prompt starts with it) and the step
// within the turn from the tool results beyond those of earlier turns, so
// the answer does not depend on how the CLI groups its history.
func demoScript(root *atomic.Pointer[string]) scripted.Script {
	turns := demoTurns(root)
	var replies []scripted.Reply
	offsets := make([]int, len(turns)) // index of each turn's first reply
	toolsBefore := make([]int, len(turns))
	tools := 0
	for i, t := range turns {
		offsets[i] = len(replies)
		toolsBefore[i] = tools
		for _, r := range t {
			tools += len(r.Tools)
		}
		replies = append(replies, t...)
	}
	aside := len(replies)
	replies = append(replies, demoAside)
	task, _ := json.Marshal(demoTask)
	task = bytes.Trim(task, `"`)
	return scripted.Script{
		Replies: replies,
		Pick: func(r *scripted.Request) int {
			if !r.Contains(`"tools"`) {
				return aside
			}
			t := min(max(bytes.Count(r.Body, task), 1), len(turns)) - 1
			k := min(max(r.ToolResults-toolsBefore[t], 0), len(turns[t])-1)
			return offsets[t] + k
		},
	}
}
