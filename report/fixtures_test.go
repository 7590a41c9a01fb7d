package report

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/goalrun/goalrun/internal/goldentest"
	"github.com/goalrun/goalrun/report/reporttest"
	"github.com/goalrun/goalrun/sandbox"
)

// golden compares got with testdata/<name>, or writes it with
// go test ./report -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	goldentest.Check(t, filepath.Join("testdata", name), got)
}

// validate fails t unless doc is a valid goalrun/1 document
// (reporttest.ValidateJSON), showing more of it than reporttest.Validate.
func validate(t testing.TB, doc []byte) {
	t.Helper()
	if err := reporttest.ValidateJSON(doc); err != nil {
		shown := doc
		if len(shown) > 3000 {
			shown = shown[:3000]
		}
		t.Fatalf("invalid document: %v\n%s", err, shown)
	}
}

// indent pretty-prints a document for golden files.
func indent(t *testing.T, doc []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.Indent(&b, doc, "", "  "); err != nil {
		t.Fatalf("indent: %v\n%s", err, doc)
	}
	b.WriteByte('\n')
	return b.Bytes()
}

// decode parses an encoded document into a generic map.
func decode(t testing.TB, doc []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatalf("decode: %v\n%s", err, doc)
	}
	return m
}

// t0 is the fixed start of every test clock.
var t0 = time.Date(2026, 11, 2, 9, 30, 0, 0, time.UTC)

// fakeClock returns a clock that advances by step on every call.
func fakeClock(step time.Duration) func() time.Time {
	var mu sync.Mutex
	now := t0
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t := now
		now = now.Add(step)
		return t
	}
}

// recorder is a Sink that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) Emit(ev Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

func (r *recorder) all() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// terminals returns the terminal events recorded.
func (r *recorder) terminals() []Event {
	var out []Event
	for _, ev := range r.all() {
		if ev.Type == EventCompleted || ev.Type == EventFailed {
			out = append(out, ev)
		}
	}
	return out
}

// dockerPosture is a realistic hardened posture.
func dockerPosture() *sandbox.Posture {
	return &sandbox.Posture{
		Mode:             "docker",
		Image:            "goalrun-sandbox:go1.26",
		ImageDigest:      "sha256:6f1c0a4e8d1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5061728394a5b",
		Network:          sandbox.NetworkEgress,
		EgressAllowlist:  []string{"api.anthropic.com:443"},
		EgressAllowed:    12,
		EgressDenied:     1,
		EgressDenials:    []string{"169.254.169.254:80 (link-local)"},
		Tier:             sandbox.TierWorkspaceWrite,
		Root:             "/workspace",
		Workspace:        sandbox.WorkspaceBind,
		CheckView:        sandbox.CheckViewOverlay,
		User:             "1000:1000",
		ReadOnlyRootfs:   true,
		CapDrop:          []string{"ALL"},
		NoNewPrivileges:  true,
		Seccomp:          "default",
		PidsLimit:        512,
		MemoryBytes:      4 << 30,
		NanoCPUs:         2e9,
		Runtime:          "runc",
		SecretsInSandbox: []string{},
	}
}

// localPosture is the posture of a local run after a fallback.
func localPosture() *sandbox.Posture {
	notice := "docker was asked for (--sandbox auto) but no Engine answered at /var/run/docker.sock; running on the local host"
	return &sandbox.Posture{
		Mode:             "local",
		Network:          sandbox.NetworkHost,
		Tier:             sandbox.TierLocal,
		Root:             "/home/dev/calc",
		Workspace:        sandbox.WorkspaceHost,
		CheckView:        sandbox.CheckViewWorkspace,
		User:             "1000:1000",
		CapDrop:          []string{},
		SecretsInSandbox: []string{"ANTHROPIC_API_KEY"},
		FallbackNotice:   &notice,
	}
}

// passedRun is the spec's result example: fixed after two agent turns.
func passedRun() Run {
	u := NewRollup()
	for i := 0; i < 9; i++ {
		u.Add(Receipt{Tool: "Bash", OK: i != 4, Brief: "go test ./..."})
	}
	u.Add(Receipt{Tool: "Edit", OK: true, Brief: "calc/sum.go"})
	u.Add(Receipt{Tool: "Edit", OK: true, Brief: "calc/sum.go"})
	u.Add(Receipt{Tool: "Edit", OK: true, Brief: "calc/sum_test.go", Via: "task:reviewer"})
	u.Add(Receipt{Tool: "Read", OK: true, Brief: "calc/sum.go"})
	u.Add(Receipt{Tool: "Read", OK: true, Brief: "calc/sum_test.go"})
	return Run{
		Check:           "go test ./...",
		Passed:          true,
		Grounded:        true,
		IterationsTaken: 2,
		Iterations: []Iteration{
			{N: 0, Check: &CheckResult{ExitCode: 1, Seconds: 2.1, Tail: "--- FAIL: TestSum (0.00s)\n    sum_test.go:9: Sum(1,2) = 2, want 3\nFAIL\nFAIL\texample/calc\t0.01s"}},
			{N: 1, Agent: &AgentStep{Status: "success", Turns: 6, Seconds: 41}, Check: &CheckResult{ExitCode: 1, Seconds: 2.0, Tail: "--- FAIL: TestSumNegative (0.00s)\nFAIL"}},
			{N: 2, Agent: &AgentStep{Status: "success", Turns: 3, Seconds: 19.5}, Check: &CheckResult{ExitCode: 0, Passed: true, Seconds: 2.2, Tail: "ok  \texample/calc\t0.01s"}},
		},
		Summary:      "Fixed the off-by-one in Sum; go test passes.",
		Turns:        9,
		Agent:        &AgentInfo{Name: "claude", Version: "2.1.332", SessionID: "9be58827-2f51-4c1e-9d0a-6f1f0c9f7e21"},
		ModelUsed:    "claude-sonnet-4-5",
		ModelsServed: []ModelServed{{ModelID: "claude-sonnet-4-5"}},
		Usage:        &Usage{InputTokens: 18211, OutputTokens: 2410, CostUSD: 0.41},
		Receipts:     u.Receipts(),
		Changes:      &Changes{FilesChanged: 1, Insertions: 1, Deletions: 1, PatchSHA256: "3b1f9c0e4d2a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c"},
		Sandbox:      dockerPosture(),
		Elapsed:      70300 * time.Millisecond,
	}
}

// notMetRun is an agent that never fixes anything: halted by max_iterations.
func notMetRun() Run {
	r := passedRun()
	r.Passed, r.Grounded = false, false // grounded is a pass our own check confirmed
	r.Halt, r.HaltReason = HaltMaxIterations, "5 agent turns taken (--max-iterations 5); the check still fails"
	r.IterationsTaken = 5
	r.Iterations = nil
	for n := 0; n <= 5; n++ {
		it := Iteration{N: n, Check: &CheckResult{ExitCode: 1, Seconds: 1.5, Tail: "FAIL\texample/calc\t0.01s"}}
		if n > 0 {
			it.Agent = &AgentStep{Status: "success", Turns: 2, Seconds: 10}
		}
		r.Iterations = append(r.Iterations, it)
	}
	r.Summary = "All tests pass now."
	r.UngroundedClaims = []Claim{{Claim: "All tests pass now.", Kind: "tests_pass", Reason: "the check exited 1 after this turn"}}
	return r
}

// agentFailedRun is a run whose agent broke on its second turn.
func agentFailedRun() Run {
	r := passedRun()
	r.Passed, r.Grounded = false, false // grounded is a pass our own check confirmed
	r.Halt = HaltAgentError
	r.Iterations = r.Iterations[:2]
	r.Iterations[1].Check = nil
	r.Iterations[1].Agent = &AgentStep{Status: "failed", Cause: "no_result_event", Turns: 2, Seconds: 12.5}
	r.IterationsTaken = 1
	r.Error = ErrAgentFailed
	r.Message = "claude exited 1 without a result event: \"Error: connect ECONNREFUSED 127.0.0.1:443\""
	r.Cause = "no_result_event"
	r.CauseFields = map[string]any{"exit_code": 1, "iteration": 1}
	r.TurnsCompleted = 1
	return r
}

// authRun is a run whose model API refused the key.
func authRun() Run {
	r := agentFailedRun()
	r.Error = ErrAuthRequired
	r.AuthReason = AuthInvalidKey
	r.Message = "the model API answered 401 invalid x-api-key (7 retries)"
	r.Cause = ""
	r.CauseFields = map[string]any{"http_status": 401, "retries": 7}
	return r
}

// cancelledRun is a run interrupted by SIGTERM during an agent step.
func cancelledRun() Run {
	r := agentFailedRun()
	r.Error, r.Message, r.Cause, r.CauseFields = "", "", "", map[string]any{"signal": "SIGTERM"}
	r.Cancelled = true
	r.Iterations[1].Agent = &AgentStep{Status: "failed", Cause: "interrupted", Turns: 1, Seconds: 3.2}
	return r
}

// environmentRun is a run whose first check could not download a Go
// module (real output of go test without network): no agent turn.
func environmentRun() Run {
	r := passedRun()
	r.Passed, r.Grounded = false, false
	r.IterationsTaken, r.Turns, r.TurnsCompleted = 0, 0, 0
	r.Summary, r.Receipts, r.Changes, r.Usage, r.ModelsServed, r.ModelUsed = "", nil, nil, nil, nil, ""
	out := "go: downloading github.com/google/uuid v1.6.0\n# example.com/uuidapp\n" +
		"app.go:3:8: github.com/google/uuid@v1.6.0: Get \"https://proxy.golang.org/github.com/google/uuid/@v/v1.6.0.zip\": dial tcp: lookup proxy.golang.org on 10.255.255.53:53: dial udp 10.255.255.53:53: connect: network is unreachable\n" +
		"FAIL\texample.com/uuidapp [setup failed]\nFAIL\n"
	r.Iterations = []Iteration{{N: 0, Check: &CheckResult{ExitCode: 1, Seconds: 0.4, Tail: out,
		Environment: "the check tried to download Go dependency github.com/google/uuid@v1.6.0 and could not (the check has no network)",
		Failures:    "# example.com/uuidapp\napp.go:3:8: github.com/google/uuid@v1.6.0: Get \"https://proxy.golang.org/github.com/google/uuid/@v/v1.6.0.zip\": dial tcp: lookup proxy.golang.org on 10.255.255.53:53: dial udp 10.255.255.53:53: connect: network is unreachable\nFAIL\texample.com/uuidapp [setup failed]"}}}
	r.Setup = []SetupStep{{Command: "go mod download", Detected: true, ExitCode: 1, Seconds: 0.3},
		{Command: "go test -count=1 -exec true ./...", Detected: true, ExitCode: 1, Seconds: 0.5}}
	r.Error = ErrEnvironmentFailed
	r.Cause = "dependency_download"
	r.Message = "The check \"go test ./...\" cannot pass in this environment: the check tried to download Go dependency github.com/google/uuid@v1.6.0 and could not (the check has no network). No agent turn was spent on it."
	r.CauseFields = map[string]any{"iteration": 0, "ecosystem": "go", "missing": "github.com/google/uuid@v1.6.0", "exit_code": 1}
	r.Suggestions = []string{"Prepare the dependencies before the first check with a --setup command (the setup setting)."}
	return r
}

// huge returns unit repeated to n bytes, cut back to a rune boundary when
// unit is valid UTF-8 (so it may be up to 3 bytes shorter).
func huge(unit string, n int) string {
	s := strings.Repeat(unit, n/len(unit)+1)[:n]
	if utf8.ValidString(unit) {
		for len(s) > 0 && !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
	}
	return s
}
