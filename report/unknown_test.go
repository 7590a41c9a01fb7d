package report

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/report/reporttest"
)

// TestUnknownReceipts: a receipt whose outcome the agent's stream cannot
// prove (the Gemini CLI's shell "success" for a failed command) is unknown:
// never ok, not failed, counted apart, kept in the sample among the
// receipts that are not ok.
func TestUnknownReceipts(t *testing.T) {
	u := NewRollup()
	u.Add(Receipt{Tool: "run_shell_command", OK: true, Brief: "git commit -m fix"})
	u.Add(Receipt{Tool: "run_shell_command", Unknown: true, Brief: "go test ./..."})
	u.Add(Receipt{Tool: "run_shell_command", Unknown: true, OK: true, Brief: "make"}) // unknown wins over ok
	u.Add(Receipt{Tool: "write_file", OK: false, Brief: "a.go"})
	r := u.Receipts()
	if r.Total != 4 || r.Failed != 1 || r.Unknown != 2 {
		t.Fatalf("total %d, failed %d, unknown %d", r.Total, r.Failed, r.Unknown)
	}
	for _, s := range r.Sample {
		if s.Unknown && s.OK {
			t.Errorf("an unknown receipt is ok: %+v", s)
		}
	}
	if !r.Sample[0].Unknown && r.Sample[0].OK || r.Sample[len(r.Sample)-1].Brief != "git commit -m fix" {
		t.Errorf("sample order %+v: the receipts that are not ok come first", r.Sample)
	}
	b, _ := json.Marshal(r)
	if !strings.Contains(string(b), `"unknown":2`) || !strings.Contains(string(b), `"ok":false,"unknown":true`) {
		t.Errorf("encoded %s", b)
	}
}

// TestUnknownCostAndModelEncode: cost_usd and model_used are null when
// unknown, and such a document is valid goalrun/1.
func TestUnknownCostAndModelEncode(t *testing.T) {
	run := Run{Check: "go test ./...", Passed: true, Grounded: true, IterationsTaken: 1, Summary: "done",
		Agent:    &AgentInfo{Name: "codex"},
		Usage:    &Usage{InputTokens: 10, OutputTokens: 5, CostUnknown: true},
		Receipts: &Receipts{Total: 1, Unknown: 1, ByTool: map[string]int{"run_shell_command": 1}, Sample: []Receipt{{Tool: "run_shell_command", Unknown: true, Brief: "make"}}}}
	d := Finish(run, nil)
	b := Encode(d)
	for _, want := range []string{`"model_used":null`, `"cost_usd":null`, `"unknown":1`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("document lacks %s: %s", want, b)
		}
	}
	if err := reporttest.ValidateJSON(b); err != nil {
		t.Errorf("invalid goalrun/1: %v", err)
	}
	var back Document
	if err := json.Unmarshal(b, &back); err != nil || !back.ModelUsed.Unreported || !back.Usage.CostUnknown {
		t.Errorf("decoded %+v %+v, %v", back.ModelUsed, back.Usage, err)
	}
	md := Markdown(d)
	if !strings.Contains(md, "model not reported by the agent") || !strings.Contains(md, "cost not reported by the agent") {
		t.Errorf("markdown does not say it plainly:\n%s", md)
	}
	// A plain command has no model: nothing to say about one.
	cmdRun := run
	cmdRun.Agent = &AgentInfo{Name: "command"}
	if md := Markdown(Finish(cmdRun, nil)); strings.Contains(md, "model not reported") {
		t.Errorf("markdown of a command agent's run speaks of its model:\n%s", md)
	}
	// A run whose agent never ran has no model_used at all.
	run.IterationsTaken, run.Agent = 0, nil
	if b := Encode(Finish(run, nil)); strings.Contains(string(b), "model_used") {
		t.Errorf("model_used without an agent turn: %s", b)
	}
}
