package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/goalrun/goalrun/sandbox"
)

const secret = "sk-ant-api03-Zx9QwErTy1234567890"

func TestRedact(t *testing.T) {
	for _, tc := range []struct {
		name    string
		secrets []string
		in      string
		want    string
	}{
		{"no secrets", nil, "key " + secret, "key " + secret},
		{"replaced", []string{secret}, "key=" + secret + " done", "key=*** done"},
		{"every occurrence", []string{secret}, secret + secret + " " + secret, "****** ***"},
		{"empty and short secrets are ignored", []string{"", "a", "abc"}, "a abc b", "a abc b"},
		{"four bytes is enough", []string{"pa5s"}, "user pa5s", "user ***"},
		{"trimmed variant", []string{secret + "\n"}, "k=" + secret + ".", "k=***."},
		{"multi-line secret line by line", []string{"-----BEGIN KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END KEY-----"}, "leaked MIIEvQIBADANBgkqhkiG9w0BAQEFAASC here", "leaked *** here"},
		{"longer secret wins an overlap", []string{"token-abcd", "token-abcdefgh"}, "x token-abcdefgh y token-abcd", "x *** y ***"},
		{"fragment at the start (a cut tail)", []string{secret}, secret[10:] + " rest of output", "*** rest of output"},
		{"fragment at the end (a cut head)", []string{secret}, "Authorization: " + secret[:12], "Authorization: ***"},
		{"short fragments stay", []string{secret}, "sk-ant begins many words", "sk-ant begins many words"},
		{"fragment before a Cap marker", []string{secret}, "key " + secret[:15] + "…[truncated: 19 of 100 bytes shown; 81 elided]…", "key ***…[truncated: 7 of 88 bytes shown; 81 elided]…"},
		{"marker numbers fixed after redaction", []string{secret}, secret + "…[truncated: 32 of 100 bytes shown; 68 elided]…", "***…[truncated: 3 of 71 bytes shown; 68 elided]…"},
		{"tail marker numbers fixed", []string{secret}, "…[truncated: 36 of 5000 bytes shown; 4964 elided]…end " + secret, "…[truncated: 7 of 4971 bytes shown; 4964 elided]…end ***"},
		{"digits of a marker are not a secret", []string{"1000"}, "x…[truncated: 1 of 1000 bytes shown; 999 elided]…", "x…[truncated: 1 of 1000 bytes shown; 999 elided]…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRedactor(tc.secrets...)
			if got := r.Redact(tc.in); got != tc.want {
				t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestRedactNil(t *testing.T) {
	var r *Redactor
	if got := r.Redact(secret); got != secret {
		t.Errorf("nil Redactor changed the text: %q", got)
	}
	r.Add("x") // no panic
	if r.Len() != 0 {
		t.Error("nil Redactor has secrets")
	}
}

// TestRedactBeforeCap: a secret that straddles the cut of a capped text is
// replaced whole, never left half-visible.
func TestRedactBeforeCap(t *testing.T) {
	r := NewRedactor(secret)
	for cut := 0; cut < 80; cut++ {
		text := strings.Repeat("a", cut) + secret + strings.Repeat("b", 200)
		for _, n := range []int{cut + 1, cut + 5, cut + 20} {
			got := Cap(r.Redact(text), n)
			if strings.Contains(got, secret[:8]) {
				t.Fatalf("cut %d cap %d: part of the secret is visible: %q", cut, n, got)
			}
		}
	}
}

func TestRedactValue(t *testing.T) {
	r := NewRedactor(secret)
	type custom struct {
		Token string `json:"token"`
		N     int    `json:"n"`
	}
	in := map[string]any{
		"s":       "x " + secret,
		"list":    []string{secret},
		"any":     []any{secret, 1, true, nil},
		"nested":  map[string]any{"k": secret, secret: "key"},
		"strmap":  map[string]string{"k": secret},
		"err":     errors.New("dial " + secret),
		"struct":  custom{Token: secret, N: 3},
		"nan":     math.NaN(),
		"inf32":   float32(math.Inf(1)),
		"dur":     2 * time.Second,
		"time":    t0,
		"chan":    make(chan int),
		"posture": *dockerPosture(),
	}
	out := r.RedactValue(in)
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatalf("redacted value does not marshal: %v", err)
	}
	if bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte("Zx9QwErTy")) {
		t.Errorf("secret survived: %s", b)
	}
	m := out.(map[string]any)
	if m["nan"] != nil || m["inf32"] != nil || m["chan"] != nil {
		t.Errorf("non-JSON values kept: nan=%v inf=%v chan=%v", m["nan"], m["inf32"], m["chan"])
	}
	if m["dur"] != "2s" {
		t.Errorf("duration = %v, want its String", m["dur"])
	}
	if p, ok := m["posture"].(map[string]any); !ok || p["mode"] != "docker" {
		t.Errorf("posture = %#v, want a JSON object", m["posture"])
	}
}

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

func TestRedactorConcurrentAdd(t *testing.T) {
	r := NewRedactor()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			r.Add(strings.Repeat("k", 4+i%50))
		}
	}()
	for i := 0; i < 200; i++ {
		_ = r.Redact("kkkkkkkk text")
	}
	<-done
	if got := r.Redact("kkkk"); got != Redacted {
		t.Errorf("Redact = %q", got)
	}
	_ = sandbox.Posture{}
}
