package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goalrun/goalrun/goal/agent"
	"github.com/goalrun/goalrun/internal/goldentest"
	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/report/reporttest"
	"github.com/goalrun/goalrun/sandbox"
)

// update rewrites the golden files under testdata/: go test ./cmd/goalrun -run Golden -update

// stepClock is a clock that moves on by step each time it is read, so a
// run's every duration is fixed by the order of its steps.
type stepClock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

func (c *stepClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(c.step)
	return c.t
}

// fakeStep is one scripted step of a scriptedSandbox.
type fakeStep struct {
	role   sandbox.Role
	exit   int
	out    string            // written to the step's stdout
	files  map[string]string // written into the workspace first
	during func()            // runs while the step runs (a signal)
	result *sandbox.Result   // returned as it is when set (Cancelled…)
}

// scriptedSandbox plays fakeSteps in order, posing as a Docker sandbox;
// Close records whether the document was delivered before it.
type scriptedSandbox struct {
	t         *testing.T
	dir       string
	steps     []fakeStep
	posture   sandbox.Posture
	delivered *bool
	closedAt  *bool
}

func (s *scriptedSandbox) Exec(ctx context.Context, cmd sandbox.Cmd) (sandbox.Result, error) {
	if len(s.steps) == 0 {
		s.t.Fatalf("an unscripted %s step: %q", cmd.Role, cmd.Args)
	}
	st := s.steps[0]
	s.steps = s.steps[1:]
	if st.role != cmd.Role {
		s.t.Fatalf("a %s step, the script has a %s step next", cmd.Role, st.role)
	}
	for name, body := range st.files {
		if err := os.WriteFile(filepath.Join(s.dir, name), []byte(body), 0o644); err != nil {
			s.t.Fatal(err)
		}
	}
	if cmd.Stdout != nil && st.out != "" {
		io.WriteString(cmd.Stdout, st.out)
	}
	if st.during != nil {
		st.during()
	}
	if st.result != nil {
		return *st.result, nil
	}
	return sandbox.Result{ExitCode: st.exit}, nil
}

func (s *scriptedSandbox) Posture() sandbox.Posture { return s.posture }

func (s *scriptedSandbox) Close(context.Context) error {
	*s.closedAt = *s.delivered
	return nil
}

func (s *scriptedSandbox) ContainerID() string {
	return "3f2a9c1b7d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5061728394a5b6c7d8e"
}

// dockerLikePosture is what a default Docker sandbox reports.
func dockerLikePosture() sandbox.Posture {
	return sandbox.Posture{Mode: "docker", Image: "goalrun/sandbox:0123456789abcdef",
		ImageDigest: "sha256:6f1c0a4e8d1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5061728394a5b",
		Network:     sandbox.NetworkNone, Tier: "egress-only", Root: sandbox.DockerRoot, Workspace: sandbox.WorkspaceBind,
		User: "1000:1000", ReadOnlyRootfs: true, CapDrop: []string{"ALL"}, NoNewPrivileges: true, Seccomp: "default",
		PidsLimit: 512, MemoryBytes: 4 << 30, NanoCPUs: 2e9, Runtime: "runc", SecretsInSandbox: []string{}}
}

// Real go test output of the demo-like module the scenarios use.
const (
	goTestFail = "--- FAIL: TestWords (0.00s)\n    words_test.go:9: Words(\"a  b\") = 3, want 2\nFAIL\nFAIL\texample.com/words\t0.004s\nFAIL\n"
	goTestPass = "ok  \texample.com/words\t0.003s\n"
)

// goTestFarFail is a failing test whose --- FAIL block is followed by
// usage text that passing tests print (as in real CLI libraries), so the
// block is far before the end of the output.
var goTestFarFail = func() string {
	var b strings.Builder
	b.WriteString("--- FAIL: TestWords (0.00s)\n    words_test.go:9: Words(\"a  b\") = 3, want 2\n")
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&b, "usage line %d: words [flags] FILE...\n", i)
	}
	b.WriteString("FAIL\nFAIL\texample.com/words\t0.004s\nFAIL\n")
	return b.String()
}()

// humanResult is one humanRun.
type humanResult struct {
	dir                    string // the workspace
	stderr, stdout         string // the workspace's path replaced by $WORK
	code                   int
	deliveredBeforeClosing bool // the result reached stdout before the sandbox was torn down
}

// humanRun runs `goalrun run` through runWith on a scripted sandbox with
// a step clock.
func humanRun(t *testing.T, steps []fakeStep, args ...string) (stderr, stdout string, code int, deliveredFirst bool) {
	r := humanRunIn(t, steps, args...)
	return r.stderr, r.stdout, r.code, r.deliveredBeforeClosing
}

func humanRunIn(t *testing.T, steps []fakeStep, args ...string) humanResult {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{"go.mod": "module example.com/words\n\ngo 1.22\n", "fix.sh": "#!/bin/sh\n",
		"words.go": "package words\n\nfunc Words(s string) int { return len(s) - 1 }\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range steps {
		if steps[i].during != nil {
			steps[i].during = cancel // the scenario's signal
		}
	}
	clock := &stepClock{t: time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC), step: 100 * time.Millisecond}
	eng := defaultEngine()
	eng.now = clock.now
	eng.started = clock.now()
	eng.keyFirst = true
	var delivered, closedAfter bool
	eng.sandboxes.docker = func(ctx context.Context, rc runConfig, cfg sandbox.Config) (sandbox.Sandbox, error) {
		done := announce(ctx, report.WorkImage, "making the default sandbox image (once; later runs reuse it) and finding the host's system folders")
		clock.now()
		done(nil)
		return &scriptedSandbox{t: t, dir: dir, steps: steps, posture: dockerLikePosture(), delivered: &delivered, closedAt: &closedAfter}, nil
	}
	var out, errb bytes.Buffer
	w := &deliveryWatch{w: &out, delivered: &delivered}
	// The scenarios script the checks and turns; the setup step goalrun
	// detects for the go.mod is not part of them.
	code := runWith(ctx, append([]string{"--workdir", dir, "--output", filepath.Join(dir, "doc.json"), "--agent", "command", "--agent-bin", "./fix.sh", "--setup-defaults=false"}, args...),
		noEnv, w, &errb, eng)
	return humanResult{dir: dir, stderr: errb.String(), stdout: strings.ReplaceAll(out.String(), dir, "$WORK"), code: code, deliveredBeforeClosing: closedAfter}
}

// deliveryWatch notes when the first byte reaches stdout.
type deliveryWatch struct {
	w         io.Writer
	delivered *bool
}

func (d *deliveryWatch) Write(p []byte) (int, error) {
	*d.delivered = true
	return d.w.Write(p)
}

// TestHumanOutputGolden pins the human output of `goalrun run` — the
// progress on stderr and the result on stdout — for a met run, a not-met
// run whose agent claims a success the check denies, a check that cannot
// run, and an interrupted run.
func TestHumanOutputGolden(t *testing.T) {
	fix := map[string]string{"words.go": "package words\n\nimport \"strings\"\n\nfunc Words(s string) int { return len(strings.Fields(s)) }\n"}
	for _, tc := range []struct {
		name     string
		args     []string
		steps    []fakeStep
		wantCode int
		want     []string // must appear in stdout
		not      []string // must not appear anywhere
	}{
		{"met", []string{"--until", "go test ./...", "fix the words test"}, []fakeStep{
			{role: sandbox.RoleCheck, exit: 1, out: goTestFail},
			{role: sandbox.RoleAgent, out: "Words now counts fields with strings.Fields; go test ./... passes.\n", files: fix},
			{role: sandbox.RoleCheck, out: goTestPass},
		}, exitMet, []string{"goal met · grounded", "its own account, not verified", "Changes: 1 file", "  - words.go\n", "time: sandbox start"}, nil},
		{"many-changed-paths", []string{"--until", "go test ./...", "fix the words test"}, []fakeStep{
			{role: sandbox.RoleCheck, exit: 1, out: goTestFail},
			{role: sandbox.RoleAgent, out: "Fixed Words and tidied the docs.\n", files: manyFiles(fix, 11)},
			{role: sandbox.RoleCheck, out: goTestPass},
		}, exitMet, []string{"Changes: 12 files", "  - note01.md\n", "  - note08.md\n", "  - and 4 more\n"}, []string{"note09"}},
		{"not-met-false-claim", []string{"--until", "go test ./...", "--max-iterations", "1", "fix the words test"}, []fakeStep{
			{role: sandbox.RoleCheck, exit: 1, out: goTestFail},
			{role: sandbox.RoleAgent, out: "I fixed everything, all tests pass now.\n"},
			{role: sandbox.RoleCheck, exit: 1, out: goTestFail},
		}, exitNotMet, []string{"Why it stopped", "TestWords failing in", "--- FAIL: TestWords", "not verified by goalrun",
			"Ungrounded claims", "all tests pass now", "time: "}, []string{"go:TestWords", "gopkg:"}},
		{"failing-test-far-from-the-end", []string{"--until", "go test ./...", "--max-iterations", "1", "fix the words test"}, []fakeStep{
			{role: sandbox.RoleCheck, exit: 1, out: goTestFarFail},
			{role: sandbox.RoleAgent, out: "I looked at words.go.\n"},
			{role: sandbox.RoleCheck, exit: 1, out: goTestFarFail},
		}, exitNotMet, []string{"--- FAIL: TestWords", "Words(\"a  b\") = 3, want 2", "usage line 40"}, nil},
		{"check-not-runnable", []string{"--until", "python3 -m pytest -q"}, []fakeStep{
			{role: sandbox.RoleCheck, exit: 127, out: "sh: 1: python3: not found\n"},
		}, exitRunFailed, []string{"CheckNotRunnable", "--image", "The default sandbox holds", "sh: 1: python3: not found", "time: "}, []string{"by hand"}},
		{"interrupted", []string{"--until", "go test ./...", "fix the words test"}, []fakeStep{
			{role: sandbox.RoleCheck, exit: 1, out: goTestFail},
			{role: sandbox.RoleAgent, out: "Looking at words.go\n", during: func() {}, result: &sandbox.Result{ExitCode: 143, Cancelled: true}},
		}, exitInterrupted, []string{"cancelled", "interrupted", "time: "}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stderr, stdout, code, deliveredFirst := humanRun(t, tc.steps, tc.args...)
			if code != tc.wantCode {
				t.Errorf("exit %d, want %d\n%s\n%s", code, tc.wantCode, stderr, stdout)
			}
			if !deliveredFirst {
				t.Errorf("the sandbox was torn down before the result reached stdout")
			}
			for _, w := range tc.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout)
				}
			}
			all := stderr + stdout
			for _, n := range append(tc.not, "truncated:", "3f2a9c1b7d4e", "sha256:") {
				if strings.Contains(all, n) {
					t.Errorf("the output shows %q:\n%s\n%s", n, stderr, stdout)
				}
			}
			if !strings.HasPrefix(lastLine(stdout), "time: ") {
				t.Errorf("stdout does not end with the time line:\n%s", stdout)
			}
			golden(t, filepath.Join("human", tc.name+".txt"), "== stderr (progress)\n"+stderr+"== stdout (result)\n"+stdout)
		})
	}
}

// manyFiles returns files plus n markdown notes (note01, note02, …).
func manyFiles(files map[string]string, n int) map[string]string {
	out := maps.Clone(files)
	for i := 1; i <= n; i++ {
		out[fmt.Sprintf("note%02d.md", i)] = fmt.Sprintf("note %d\n", i)
	}
	return out
}

// TestHumanTimeLineAgreesWithTheDocument: one clock — the time line's
// total is the document's elapsed_seconds, which counts from the run's
// start (the image build and the sandbox's start included), its buckets
// are the document's timings, and they add up to the total.
func TestHumanTimeLineAgreesWithTheDocument(t *testing.T) {
	r := humanRunIn(t, []fakeStep{{role: sandbox.RoleCheck, out: goTestPass}}, "--until", "go test ./...")
	b, err := os.ReadFile(filepath.Join(r.dir, "doc.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc report.Document
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.ElapsedSeconds == nil || doc.Timings == nil {
		t.Fatalf("document without elapsed_seconds or timings: %s", b)
	}
	tm := *doc.Timings
	sum := tm.SandboxStart + tm.Checks + tm.AgentTurns + tm.Other
	for _, v := range tm.Prepare {
		sum += v
	}
	if math.Abs(sum-*doc.ElapsedSeconds) > 0.002 {
		t.Errorf("timings %+v add up to %.3f, elapsed_seconds %.3f", tm, sum, *doc.ElapsedSeconds)
	}
	// The step clock moves 100 ms per read: the image build took 3 reads,
	// the sandbox's start 4 more, one check 1; the run began 1 read before.
	if tm.Prepare[report.WorkImage] != 0.3 || tm.SandboxStart != 0.4 || tm.Checks != 0.1 {
		t.Errorf("timings %+v, want image 0.3, sandbox start 0.4, checks 0.1", tm)
	}
	line := lastLine(r.stdout)
	want := fmt.Sprintf("total %.1f s · then teardown 0.1 s", *doc.ElapsedSeconds)
	if !strings.Contains(line, want) || !strings.Contains(line, "sandbox start 0.4 s · image build 0.3 s · checks (1) 0.1 s · agent turns (0) 0 ms") {
		t.Errorf("time line %q does not say %q", line, want)
	}
	if !strings.Contains(r.stderr, fmt.Sprintf("conclusion success (%.1fs)", *doc.ElapsedSeconds)) {
		t.Errorf("the completed line does not show elapsed_seconds %.1f:\n%s", *doc.ElapsedSeconds, r.stderr)
	}
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndex(s, "\n")+1:]
}

// golden compares got with testdata/<name>, or writes it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	goldentest.Check(t, filepath.Join("testdata", name), []byte(got))
}

// TestMissingKeyIsReportedBeforeAnythingStarts: `goalrun run` with a
// model-backed agent in Docker and its key unset stops at once,
// auth_required (missing_key) naming the variable — no sandbox started,
// no check ran. The action keeps checking first (keyFirst off), so an
// already-passing check on a fork's pull request still reports.
func TestMissingKeyIsReportedBeforeAnythingStarts(t *testing.T) {
	dir := t.TempDir()
	eng := defaultEngine()
	eng.keyFirst = true
	eng.sandboxes.docker = func(context.Context, runConfig, sandbox.Config) (sandbox.Sandbox, error) {
		t.Error("the sandbox was started although the key is missing")
		return nil, errors.New("not started")
	}
	var out, errb bytes.Buffer
	code := runWith(context.Background(), []string{"--workdir", dir, "--until", "go test ./...", "--agent", "claude", "--json"}, noEnv, &out, &errb, eng)
	var doc report.Document
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("stdout is not one document: %v\n%s", err, out.String())
	}
	if code != exitRunFailed || doc.Status != report.StatusAuthRequired || doc.Reason != report.AuthMissingKey ||
		!strings.Contains(doc.Message, "ANTHROPIC_API_KEY") || !strings.Contains(doc.Message, "before starting anything") {
		t.Errorf("exit %d status %q reason %q message %q", code, doc.Status, doc.Reason, doc.Message)
	}
	if doc.Sandbox != nil || len(doc.Iterations) != 0 {
		t.Errorf("a sandbox or a check is reported: %+v %+v", doc.Sandbox, doc.Iterations)
	}
	if err := reporttest.ValidateJSON(bytes.TrimSpace(out.Bytes())); err != nil {
		t.Errorf("document invalid: %v", err)
	}
}

func TestUsageLine(t *testing.T) {
	ran := &report.Goal{Iterations: 2}
	for _, tc := range []struct {
		name string
		doc  report.Document
		want string
	}{
		{"the agent never ran", report.Document{Goal: &report.Goal{}, Usage: &report.Usage{InputTokens: 5}}, ""},
		{"model, tokens and cost", report.Document{Goal: ran, ModelUsed: report.ModelName{Name: "claude-sonnet-4-5"},
			Usage: &report.Usage{InputTokens: 12345, OutputTokens: 678, CostUSD: 0.1234}},
			"Usage: model claude-sonnet-4-5 · 12345 tokens in, 678 out · $0.1234 (as the agent reported it)"},
		{"no cost reported", report.Document{Goal: ran, Usage: &report.Usage{InputTokens: 10, OutputTokens: 2, CostUnknown: true}},
			"Usage: 10 tokens in, 2 out · cost not reported by the agent"},
		{"no model reported", report.Document{Goal: ran, ModelUsed: report.ModelName{Unreported: true}, Usage: &report.Usage{InputTokens: 10, OutputTokens: 2, CostUnknown: true}},
			"Usage: model not reported by the agent · 10 tokens in, 2 out · cost not reported by the agent"},
		{"no model from a plain command", report.Document{Goal: ran, Agent: &report.AgentInfo{Name: agent.CommandName}, ModelUsed: report.ModelName{Unreported: true}}, ""},
		{"nothing reported", report.Document{Goal: ran}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := usageLine(tc.doc); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestVerboseShowsIDs: container ids and image digests are left out of the
// progress view unless --verbose asks for them.
func TestVerboseShowsIDs(t *testing.T) {
	steps := func() []fakeStep { return []fakeStep{{role: sandbox.RoleCheck, out: goTestPass}} }
	plain := humanRunIn(t, steps(), "--until", "go test ./...")
	verbose := humanRunIn(t, steps(), "--until", "go test ./...", "--verbose")
	if strings.Contains(plain.stderr, "3f2a9c1b7d4e") || strings.Contains(plain.stderr, "sha256:") {
		t.Errorf("ids without --verbose:\n%s", plain.stderr)
	}
	if !strings.Contains(verbose.stderr, "container 3f2a9c1b7d4e") || !strings.Contains(verbose.stderr, "image sha256:6f1c0a4e") {
		t.Errorf("--verbose does not show the container and the image:\n%s", verbose.stderr)
	}
}

// TestFailingCheckNamesWhatFailedFromTheWholeOutput: the result line names
// the failing tests with the sentence the progress line shows (the
// document's check.failing, counted from the whole output), not one
// rebuilt from the kept failing lines, which a long output cuts.
func TestFailingCheckNamesWhatFailedFromTheWholeOutput(t *testing.T) {
	cut := "--- FAIL: TestIssue218 (0.00s)\n    color_test.go:9: bad\n"
	for _, tc := range []struct {
		name    string
		failing string
		want    string
	}{
		{"the whole output's sentence", "TestColor, TestNoFormatString, TestIssue218 and 8 more failing in github.com/fatih/color",
			"(exit 1: TestColor, TestNoFormatString, TestIssue218 and 8 more failing in github.com/fatih/color)"},
		{"a document without it reads the kept lines", "", "(exit 1: TestIssue218 failing)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := report.Document{Goal: &report.Goal{Check: "go test ./..."}, Iterations: []report.Iteration{{N: 5,
				Check: &report.CheckResult{ExitCode: 1, Failures: cut, Failing: tc.failing, Tail: "FAIL\n"}}}}
			title, _ := failingCheck(doc)
			if !strings.Contains(title, tc.want) {
				t.Errorf("title %q does not hold %q", title, tc.want)
			}
		})
	}
}
