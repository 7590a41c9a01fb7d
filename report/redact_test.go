package report

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

const secret = "sk-ant-api03-Zx9QwErTy1234567890"

// TestSecretsNeverLeave puts a secret into every free-text field of a Run
// and into events, and checks it appears nowhere in the document, the
// markdown or the event stream.
func TestSecretsNeverLeave(t *testing.T) {
	red := NewRedactor(secret)
	var events bytes.Buffer
	e := NewEmitter(NewJSONLSink(&events), red, fakeClock(time.Second))
	u := NewRollup().SetRedactor(red)
	u.Add(Receipt{Tool: "Bash " + secret, OK: false, Brief: "curl -H 'Authorization: Bearer " + secret + "'", Via: secret})
	leak := func(prefix string) string { return prefix + " " + secret + " " + strings.Repeat("z", 10) }
	e.Emit(EventStarted, PhaseRun, leak("goal"), map[string]any{"goal": leak("g"), secret: 1, "sandbox": localPosture()})
	e.Emit(EventText, PhaseReasoning, leak("text"), nil)
	e.Emit(EventToolCalled, PhaseActing, "", map[string]any{"tool": "Bash", "brief": leak("b")})
	for _, status := range []string{"", ErrAgentFailed} {
		run := notMetRun()
		run.Error = status
		run.Check = leak("check")
		run.HaltReason = leak("halt")
		run.Summary = strings.Repeat("s", SummaryCap-10) + secret // straddles the cut
		run.Message = leak("msg")
		run.Cause = "exit_status"
		run.CauseFields = map[string]any{"stderr": leak("stderr"), "argv": []string{secret}}
		run.Suggestions = []string{leak("try")}
		run.Iterations[len(run.Iterations)-1].Check.Tail = secret[5:] + " tail " + secret
		run.Agent = &AgentInfo{Name: "claude", SessionID: secret}
		run.ModelUsed = secret
		run.Receipts = u.Receipts()
		run.UngroundedClaims = []Claim{{Claim: leak("claim"), Kind: "tests_pass", Reason: leak("r")}}
		run.Judge = &Judge{Reason: leak("judge"), By: "agent"}
		run.Changes = &Changes{RiskyPaths: []string{leak(".github/workflows")}}
		p := localPosture()
		notice := leak("notice")
		p.FallbackNotice = &notice
		p.EgressAllowlist = []string{secret + ":443"}
		run.Sandbox = p
		d := Finish(run, e)
		doc := Encode(d)
		validate(t, doc)
		md := Markdown(d)
		for what, out := range map[string]string{"document": string(doc), "markdown": md} {
			if strings.Contains(out, secret[8:20]) {
				t.Errorf("status %q: secret in the %s", status, what)
			}
		}
	}
	if strings.Contains(events.String(), secret[8:20]) {
		t.Errorf("secret in the events:\n%s", events.String())
	}
}
