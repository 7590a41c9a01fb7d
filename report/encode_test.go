package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/goalrun/goalrun/docs"
	"github.com/goalrun/goalrun/report/reporttest"
	"github.com/goalrun/goalrun/sandbox"
)

func schemaBytes() []byte { return docs.GoalrunSchema }

// ctl is a text that JSON-escapes to six bytes per byte.
func ctl(n int) string { return huge("\x01", n) }

// worstRun fills every free-text field and list of a Run with s and makes
// every list as long as n.
func worstRun(s string, n int) Run {
	r := notMetRun()
	r.Check, r.HaltReason, r.Summary, r.Message = s, s, s, s
	r.Suggestions = nil
	r.Iterations = nil
	for i := 0; i < n; i++ {
		r.Iterations = append(r.Iterations, Iteration{N: i,
			Agent: &AgentStep{Status: s, Cause: s, Turns: i, Seconds: 1},
			Check: &CheckResult{ExitCode: 1, Seconds: 1, Tail: s, Failures: s, Failing: s, Environment: s}})
		r.Suggestions = append(r.Suggestions, s)
		r.Setup = append(r.Setup, SetupStep{Command: s, Dir: s, ExitCode: i % 2, Seconds: 1, Detected: true, Reused: i%2 == 0, NotStarted: s})
	}
	bt := map[string]int{}
	sample := []Receipt{}
	for i := 0; i < n; i++ {
		bt[s+strconv.Itoa(i)] = i + 1
		sample = append(sample, Receipt{Tool: s, OK: i%2 == 0, Brief: s, Via: s})
	}
	r.Receipts = &Receipts{Total: n, Failed: n / 2, ByTool: bt, Sample: sample}
	r.UngroundedClaims = nil
	r.ModelsServed = nil
	for i := 0; i < n; i++ {
		r.UngroundedClaims = append(r.UngroundedClaims, Claim{Claim: s, Kind: s, Reason: s})
		r.ModelsServed = append(r.ModelsServed, ModelServed{ModelID: s})
	}
	r.Agent = &AgentInfo{Name: s, Version: s, SessionID: s}
	r.ModelUsed = s
	r.Judge = &Judge{Reason: s, By: s}
	r.Changes = &Changes{RiskyPaths: make([]string, n), PatchSHA256: s}
	for i := range r.Changes.RiskyPaths {
		r.Changes.RiskyPaths[i] = s
	}
	r.CauseFields = map[string]any{}
	for i := 0; i < n; i++ {
		r.CauseFields[s+strconv.Itoa(i)] = s
	}
	p := dockerPosture()
	p.Image, p.ImageDigest, p.Root, p.User, p.Seccomp, p.Runtime, p.SetupDepsVolume = s, s, s, s, s, s, s
	p.Mount, p.FallbackNotice = &s, &s
	list := func() []string {
		l := make([]string, n)
		for i := range l {
			l[i] = s
		}
		return l
	}
	p.EgressAllowlist, p.EgressDenials, p.CapDrop, p.SecretsInSandbox = list(), list(), list(), list()
	p.SetupEgressAllowlist, p.SetupEgressDenials, p.EgressAllowNets = list(), list(), list()
	r.Sandbox = p
	return r
}

// TestEncodeWorstCases: whatever the input, the document fits 32768 bytes,
// is valid JSON and UTF-8, matches the schema, and says what it left out in
// the fixed order.
func TestEncodeWorstCases(t *testing.T) {
	shapes := map[string]func(*Run){
		"result":    func(r *Run) {},
		"error":     func(r *Run) { r.Error = ErrAgentFailed },
		"auth":      func(r *Run) { r.Error = ErrAuthRequired },
		"cancelled": func(r *Run) { r.Cancelled = true },
	}
	for _, tc := range []struct {
		name string
		s    string
		n    int
	}{
		{"control characters", ctl(20_000), 50},
		{"control characters, thousands of items", ctl(1000), 3000},
		{"quotes and backslashes", huge(`"\`, 20_000), 40},
		{"invalid UTF-8", huge("\xff\xfe", 20_000), 40},
		{"4-byte runes", huge("😀", 20_000), 40},
		{"line and paragraph separators", huge("\u2028\u2029", 20_000), 40},
		{"html", huge("<script>&</script>", 20_000), 40},
		{"10 MB", huge("x", 10<<20), 2},
		{"empty", "", 0},
	} {
		for shape, mutate := range shapes {
			if len(tc.s) > 1<<20 && shape != "result" && shape != "error" {
				continue // the 10 MB texts cost seconds under -race; two shapes prove the point
			}
			t.Run(tc.name+"/"+shape, func(t *testing.T) {
				run := worstRun(tc.s, tc.n)
				mutate(&run)
				d := Finish(run, nil)
				doc := Encode(d)
				validate(t, doc)
				if bytes.Contains(doc, []byte(`\u003c`)) {
					t.Error("HTML-escaped output")
				}
				m := decode(t, doc)
				var steps []string
				for _, e := range m["elided"].([]any) {
					rest, ok := strings.CutPrefix(e.(string), ElidedPrefix)
					if !ok {
						continue
					}
					name, _, _ := strings.Cut(rest, ":")
					if indexOf(ElisionSteps, name) < 0 {
						t.Errorf("unknown elision step in %q", e)
					}
					steps = append(steps, name)
				}
				last := -1
				for _, s := range steps {
					i := indexOf(ElisionSteps, s)
					if i <= last {
						t.Errorf("elision %q out of the fixed order in %v", s, steps)
					}
					last = i
				}
				// No silent clipping: the risky paths listed plus those
				// counted as omitted are all the run had.
				if c, _ := m["changes"].(map[string]any); c == nil {
					t.Error("changes block dropped")
				} else if got := len(c["risky_paths"].([]any)) + int(c["risky_paths_omitted"].(float64)); got != tc.n {
					t.Errorf("risky paths listed + omitted = %d, want %d", got, tc.n)
				}
				if len(doc) > 20_000 && len(steps) == 0 && bytes.Contains(doc, []byte(`\u0001`)) {
					t.Logf("large but not elided: %d bytes", len(doc))
				}
				// Encode is stable: encoding the decoded document again
				// gives a document as valid and no larger.
				var back Document
				if err := json.Unmarshal(doc, &back); err != nil {
					t.Fatalf("round trip: %v", err)
				}
				again := Encode(back)
				validate(t, again)
			})
		}
	}
}

func indexOf(l []string, s string) int {
	for i, x := range l {
		if x == s {
			return i
		}
	}
	return -1
}

// TestEncodeElisionSteps: the documented order and the implementation agree.
func TestEncodeElisionSteps(t *testing.T) {
	if len(ElisionSteps) != len(elisions) {
		t.Fatalf("%d documented steps, %d implemented", len(ElisionSteps), len(elisions))
	}
	for i, e := range elisions {
		if e.name != ElisionSteps[i] {
			t.Errorf("step %d: implemented %q, documented %q", i+1, e.name, ElisionSteps[i])
		}
	}
}

// TestEncodeGoldenWorstCase pins what the encoder drops for one worst case.
func TestEncodeGoldenWorstCase(t *testing.T) {
	d := Finish(worstRun(ctl(5000), 12), nil)
	doc := Encode(d)
	validate(t, doc)
	golden(t, "golden/result-worst-case.json", indent(t, doc))
}

func TestEncodeSmallDocumentUntouched(t *testing.T) {
	d := Finish(passedRun(), nil)
	doc := Encode(d)
	validate(t, doc)
	var b bytes.Buffer
	if err := writeJSON(&b, d); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(doc, b.Bytes()) {
		t.Error("Encode changed a document that fits")
	}
	if bytes.HasSuffix(doc, []byte("\n")) {
		t.Error("trailing newline")
	}
	if d.Elided == nil || len(d.Elided) != 0 {
		t.Errorf("elided = %#v, want []", d.Elided)
	}
}

// TestEncodeHandBuilt: Encode bounds documents that did not come from
// Finish (caps applied again, unencodable values dropped). Such a document
// lacks keys its shape requires, so only size, UTF-8 and JSON are checked:
// schema validity is Finish's and StartupError's promise.
func TestEncodeHandBuilt(t *testing.T) {
	s := ctl(10_000)
	bt := map[string]int{}
	for i := 0; i < 5000; i++ {
		bt[strconv.Itoa(i)+s[:100]] = i
	}
	d := Document{
		Schema: Schema, Status: StatusError, Conclusion: ConclusionFailure,
		Error: s, Message: s, Suggestions: []string{s, s},
		Failure:  &Failure{Cause: s, Detail: map[string]any{"ch": make(chan int), "f": func() {}, "ok": 1}},
		Receipts: &Receipts{Total: -5, ByTool: bt},
		Elided:   []string{s},
	}
	doc := Encode(d)
	if len(doc) > DocumentBytes || !utf8.Valid(doc) || !json.Valid(doc) {
		t.Fatalf("bad encoding: %d bytes", len(doc))
	}
	m := decode(t, doc)
	if r := m["receipts"].(map[string]any); len(r["by_tool"].(map[string]any)) > ByToolMax || r["total"].(float64) < 0 {
		t.Errorf("receipts not bounded: %v", r)
	}
	if f := m["failure"].(map[string]any); f["ok"] != 1.0 || f["ch"] != nil {
		t.Errorf("failure fields = %v", f)
	}
	if d.Receipts.Total != -5 || len(d.Elided) != 1 {
		t.Error("Encode modified its argument")
	}
}

// TestFailureMarshalsFlat checks the failure block's wire form.
func TestFailureMarshalsFlat(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    Failure
		want string
	}{
		{"cause only", Failure{Cause: "exit_status"}, `{"cause":"exit_status"}`},
		{"fields sorted beside cause", Failure{Cause: "exit_status", Detail: map[string]any{"iteration": 2, "exit_code": 127}}, `{"cause":"exit_status","exit_code":127,"iteration":2}`},
		{"a cause field cannot override", Failure{Cause: "a", Detail: map[string]any{"cause": "b"}}, `{"cause":"a"}`},
		{"unencodable dropped", Failure{Cause: "a", Detail: map[string]any{"c": make(chan int)}}, `{"cause":"a"}`},
		{"no HTML escaping", Failure{Cause: "<a&b>"}, `{"cause":"<a&b>"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := writeJSON(&buf, tc.f)
			b := buf.Bytes()
			if err != nil || string(b) != tc.want {
				t.Fatalf("Marshal = %s, %v; want %s", b, err, tc.want)
			}
			var back Failure
			if err := json.Unmarshal(b, &back); err != nil || back.Cause != tc.f.Cause {
				t.Errorf("round trip: %+v, %v", back, err)
			}
		})
	}
	var f Failure
	if err := json.Unmarshal([]byte(`{"cause":3}`), &f); err == nil {
		t.Error("a numeric cause was accepted")
	}
}

// TestSchemaMatchesCaps keeps the schema's bounds equal to the constants.
func TestSchemaMatchesCaps(t *testing.T) {
	var s map[string]any
	if err := json.Unmarshal(schemaBytes(), &s); err != nil {
		t.Fatal(err)
	}
	defs := s["$defs"].(map[string]any)
	get := func(path ...string) float64 {
		var v any = defs
		for _, p := range path {
			v = v.(map[string]any)[p]
		}
		return v.(float64)
	}
	for _, tc := range []struct {
		path []string
		want int
	}{
		{[]string{"summaryText", "maxLength"}, SummaryCap + MarkerMaxBytes},
		{[]string{"briefText", "maxLength"}, BriefCap + MarkerMaxBytes},
		{[]string{"reasonText", "maxLength"}, ReasonCap + MarkerMaxBytes},
		{[]string{"tailText", "maxLength"}, TailCap + MarkerMaxBytes},
		{[]string{"failuresText", "maxLength"}, FailuresCap + MarkerMaxBytes},
		{[]string{"runKeys", "properties", "setup", "maxItems"}, SetupMax},
		{[]string{"name", "maxLength"}, NameCap + MarkerMaxBytes},
		{[]string{"receipts", "properties", "sample", "maxItems"}, SampleMax},
		{[]string{"receipts", "properties", "by_tool", "maxProperties"}, ByToolMax},
		{[]string{"changes", "properties", "risky_paths", "maxItems"}, RiskyPathsMax},
		{[]string{"runKeys", "properties", "ungrounded_claims", "maxItems"}, ClaimsMax},
		{[]string{"runKeys", "properties", "iterations", "maxItems"}, IterHead + IterTail},
		{[]string{"runKeys", "properties", "models_served", "maxItems"}, ModelsServedMax},
		{[]string{"suggestions", "maxItems"}, SuggestionsMax},
		{[]string{"failureBlock", "maxProperties"}, FailureFieldsMax + 1},
		{[]string{"posture", "properties", "egress_denials", "maxItems"}, sandbox.EgressDenialsKept},
		{[]string{"posture", "properties", "egress_allowlist", "maxItems"}, ListMax},
		{[]string{"elided", "maxItems"}, elidedMax + 1},
	} {
		t.Run(strings.Join(tc.path, "."), func(t *testing.T) {
			if got := get(tc.path...); int(got) != tc.want {
				t.Errorf("schema says %v, code says %d", got, tc.want)
			}
		})
	}
}

// TestSchemaRejects: the schema is not vacuous — broken documents fail.
func TestSchemaRejects(t *testing.T) {
	good := Encode(Finish(passedRun(), nil))
	fail := Encode(Finish(agentFailedRun(), nil))
	start := Encode(StartupError(ErrBadInput, "bad flag"))
	for _, tc := range []struct {
		name string
		doc  []byte
		edit func(m map[string]any)
	}{
		{"result with error", good, func(m map[string]any) { m["error"] = "AgentFailed" }},
		{"failure with summary", fail, func(m map[string]any) { m["summary"] = "done" }},
		{"startup error with sandbox", start, func(m map[string]any) { m["sandbox"] = map[string]any{} }},
		{"wrong schema", good, func(m map[string]any) { m["schema"] = "goalrun/2" }},
		{"unknown status", good, func(m map[string]any) { m["status"] = "ok" }},
		{"ungrounded success", good, func(m map[string]any) { m["goal"].(map[string]any)["grounded"] = false }},
		{"not passed but success", good, func(m map[string]any) { m["goal"].(map[string]any)["passed"] = false }},
		{"passed with a halt", good, func(m map[string]any) { m["goal"].(map[string]any)["halt"] = "timeout" }},
		{"unknown halt", fail, func(m map[string]any) { m["goal"].(map[string]any)["halt"] = "bored" }},
		{"missing sample_omitted", good, func(m map[string]any) { delete(m["receipts"].(map[string]any), "sample_omitted") }},
		{"nine samples", good, func(m map[string]any) {
			r := m["receipts"].(map[string]any)
			s := r["sample"].([]any)
			for len(s) < 9 {
				s = append(s, s[0])
			}
			r["sample"] = s
		}},
		{"summary over the cap", good, func(m map[string]any) { m["summary"] = huge("x", SummaryCap+MarkerMaxBytes+1) }},
		{"failure without cause", fail, func(m map[string]any) { m["failure"] = map[string]any{"exit_code": 1} }},
		{"error status with action_required", fail, func(m map[string]any) { m["conclusion"] = "action_required" }},
		{"auth without reason", fail, func(m map[string]any) {
			m["status"], m["conclusion"], m["error"] = "auth_required", "action_required", "AuthRequired"
		}},
		{"unknown top-level key", good, func(m map[string]any) { m["extra"] = 1 }},
		{"negative turns", good, func(m map[string]any) { m["turns"] = -1 }},
		{"missing ungrounded_claims", good, func(m map[string]any) { delete(m, "ungrounded_claims") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := decode(t, tc.doc)
			tc.edit(m)
			b, _ := json.Marshal(m)
			if err := reporttest.ValidateJSON(b); err == nil {
				t.Errorf("schema accepted: %s", b)
			}
		})
	}
	if err := reporttest.ValidateJSON(append(append([]byte{}, good...), []byte(" {}")...)); err == nil {
		t.Error("trailing data accepted")
	}
	if err := reporttest.ValidateJSON([]byte("{\"schema\":\"goalrun/1\xff\"}")); err == nil {
		t.Error("invalid UTF-8 accepted")
	}
	if err := reporttest.ValidateJSON(bytes.Repeat([]byte(" "), DocumentBytes+1)); err == nil || !strings.Contains(err.Error(), fmt.Sprint(DocumentBytes)) {
		t.Errorf("oversize: %v", err)
	}
}

// BenchmarkFinishEncode measures building and encoding a typical document:
// go test ./report -run '^$' -bench 'FinishEncode|Markdown' -benchmem
func BenchmarkFinishEncode(b *testing.B) {
	run := passedRun()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = Encode(Finish(run, nil))
	}
}

// BenchmarkEncodeWorstCase measures a document that needs elision (every
// field full of control characters).
func BenchmarkEncodeWorstCase(b *testing.B) {
	d := Finish(worstRun(ctl(5000), 40), nil)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = Encode(d)
	}
}

// BenchmarkMarkdown measures the markdown rendering of a typical document.
func BenchmarkMarkdown(b *testing.B) {
	d := Finish(passedRun(), nil)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = MarkdownWith(d, MarkdownOptions{Mermaid: true})
	}
}

// TestRequiredOnly: the last elision step alone gives a schema-valid
// document of every shape, far below the bound, keeping counts and notes.
func TestRequiredOnly(t *testing.T) {
	for name, run := range map[string]Run{
		"result":    worstRun(ctl(2000), 50),
		"error":     func() Run { r := worstRun(ctl(2000), 50); r.Error = ErrSandboxFailed; return r }(),
		"auth":      func() Run { r := worstRun(ctl(2000), 50); r.AuthReason = AuthExpired; return r }(),
		"cancelled": func() Run { r := worstRun(ctl(2000), 50); r.Cancelled = true; return r }(),
	} {
		t.Run(name, func(t *testing.T) {
			d := Finish(run, nil)
			r := requiredOnly(d)
			r.Elided = append(r.Elided, ElidedPrefix+"required_only: test")
			var b bytes.Buffer
			if err := writeJSON(&b, r); err != nil {
				t.Fatal(err)
			}
			validate(t, b.Bytes())
			if b.Len() > DocumentBytes/4 {
				t.Errorf("required keys alone take %d bytes", b.Len())
			}
			m := decode(t, b.Bytes())
			if m["receipts"] != nil && m["receipts"].(map[string]any)["total"].(float64) != 50 {
				t.Errorf("receipts total lost: %v", m["receipts"])
			}
			if om := m["iterations_omitted"]; om == nil || om.(float64) < 6 {
				t.Errorf("iterations_omitted = %v, want the dropped iterations counted", om)
			}
			if c, _ := m["changes"].(map[string]any); c == nil || c["risky_paths_omitted"].(float64) != 50 {
				t.Errorf("changes = %v, want kept with all 50 risky paths counted as omitted", m["changes"])
			}
		})
	}
}

// TestEncodeKeepsGitExecutable: the encoder's last steps, which empty the
// risky paths and keep only required keys, still keep the changes to git's
// executable configuration at the head of risky_paths and in
// git_executable.
func TestEncodeKeepsGitExecutable(t *testing.T) {
	git := []string{".git/config", ".git/hooks/ (3 files changed)"}
	d := Finish(Run{Check: "go test ./...", IterationsTaken: 1, Halt: HaltUnsafeChange,
		Changes: &Changes{FilesChanged: 9, RiskyPaths: append(append([]string{}, git...), "a", "b", "c"), GitExecutable: git}}, nil)
	for _, name := range []string{"changes.risky_paths", "required_only"} {
		t.Run(name, func(t *testing.T) {
			c := d
			ch := *d.Changes
			c.Changes = &ch
			for _, e := range elisions {
				if e.name == name {
					e.apply(&c)
				}
			}
			if !slices.Equal(c.Changes.RiskyPaths, git) || !slices.Equal(c.Changes.GitExecutable, git) ||
				c.Changes.RiskyPathsOmitted != 3 {
				t.Errorf("after %s: risky %q (%d omitted), git_executable %q; want %q kept", name,
					c.Changes.RiskyPaths, c.Changes.RiskyPathsOmitted, c.Changes.GitExecutable, git)
			}
			if err := reporttest.ValidateJSON(Encode(c)); err != nil {
				t.Error(err)
			}
		})
	}
}
