package goal_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/goal"
	"github.com/goalrun/goalrun/goal/agent"
	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/sandbox"
)

func TestLoopSetupSteps(t *testing.T) {
	cases := []struct {
		name    string
		steps   []goal.SetupStep
		check   string
		failure string // "" = none
		cause   string
		checked bool // the first check ran
		results []int
		skipped []bool
	}{
		{"steps run in order before the first check, in their folders",
			[]goal.SetupStep{{Command: "echo one >> ../order; pwd > ../where", Dir: "sub"}, {Command: "echo two >> order", Detected: true}},
			`test "$(cat order | tr '\n' ' ')" = "one two "`, "", "", true, []int{0, 0}, []bool{false, false}},
		{"a step the user asked for fails: the run ends before the first check",
			[]goal.SetupStep{{Command: "echo cannot reach the registry >&2; exit 3"}, {Command: "touch never"}},
			"touch checked", report.ErrEnvironmentFailed, goal.CauseSetupFailed, false, []int{3}, []bool{false}},
		{"a detected step fails: the first check decides",
			[]goal.SetupStep{{Command: "exit 1", Detected: true}},
			"touch checked", "", "", true, []int{1}, []bool{false}},
		{"a detected step whose program is missing is skipped",
			[]goal.SetupStep{{Command: "goalrun-no-such-tool ci", Detected: true}},
			"touch checked", "", "", true, []int{127}, []bool{true}},
		{"a step the user asked for whose program is missing fails",
			[]goal.SetupStep{{Command: "goalrun-no-such-tool ci"}},
			"touch checked", report.ErrEnvironmentFailed, goal.CauseSetupFailed, false, []int{127}, []bool{false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := workspace(t, map[string]string{"sub/.keep": ""})
			ev := &recorder{}
			out := run(t, context.Background(), goal.Config{
				Sandbox: local(t, dir), Adapter: agent.Command{}, AgentBin: "touch agent-ran",
				Check: tc.check, Setup: tc.steps, MaxIterations: 1, Events: ev, Now: (&fakeClock{}).Now,
			})
			code, cause := "", ""
			if out.Failure != nil {
				code, cause = out.Failure.Code, out.Failure.Cause
			}
			if code != tc.failure || cause != tc.cause {
				t.Fatalf("failure %+v, want %s/%s", out.Failure, tc.failure, tc.cause)
			}
			if got := exists(dir, "checked") || out.Passed; got != tc.checked && tc.check == "touch checked" {
				t.Errorf("the first check ran = %v, want %v", got, tc.checked)
			}
			if len(out.Setup) != len(tc.results) {
				t.Fatalf("setup results %+v, want %d", out.Setup, len(tc.results))
			}
			for i, r := range out.Setup {
				if r.ExitCode != tc.results[i] || r.Skipped != tc.skipped[i] {
					t.Errorf("step %d: exit %d skipped %v, want %d %v", i, r.ExitCode, r.Skipped, tc.results[i], tc.skipped[i])
				}
			}
			if n, m := len(ev.ofType(report.EventPrepareStarted)), len(ev.ofType(report.EventPrepareFinished)); n != len(tc.results) || m != n {
				t.Errorf("%d prepare_started and %d prepare_finished events, want %d", n, m, len(tc.results))
			}
			for _, e := range ev.ofType(report.EventPrepareFinished) {
				if e.Data["work"] != report.WorkSetup {
					t.Errorf("prepare_finished %+v: work is not setup", e)
				}
			}
			if exists(dir, "never") || tc.failure != "" && exists(dir, "agent-ran") {
				t.Errorf("a step or the agent ran after a failed setup step")
			}
			if tc.failure != "" && !strings.Contains(out.Failure.Message, tc.steps[0].Command) {
				t.Errorf("message does not name the step: %s", out.Failure.Message)
			}
			if tc.name == "steps run in order before the first check, in their folders" {
				if !out.Passed {
					t.Errorf("the check did not see the setup's work: %+v", out.Iterations.Iterations()[0].Check)
				}
				b, _ := os.ReadFile(filepath.Join(dir, "where"))
				if !strings.HasSuffix(strings.TrimSpace(string(b)), "/sub") {
					t.Errorf("step ran in %q, want sub", b)
				}
			}
			d := report.Finish(out.ReportRun(nil, false), nil)
			if len(d.Setup) != len(tc.results) {
				t.Errorf("document setup %+v", d.Setup)
			}
		})
	}
}

// TestLoopSetupNamedInTheEnvironmentFailure: a detected step that failed
// is named in the message of the first check's environment failure.
func TestLoopSetupNamedInTheEnvironmentFailure(t *testing.T) {
	dir := workspace(t, nil)
	out := run(t, context.Background(), goal.Config{
		Sandbox: local(t, dir), Adapter: agent.Command{}, AgentBin: "true",
		Setup: []goal.SetupStep{{Command: "echo 'go: github.com/x/y@v1.0.0: dial tcp: lookup proxy.golang.org: no such host'; exit 1", Detected: true}},
		Check: realOutput(t, dir, "go-proxyoff.txt", "1"),
	})
	if out.Failure == nil || out.Failure.Code != report.ErrEnvironmentFailed {
		t.Fatalf("failure %+v", out.Failure)
	}
	if !strings.Contains(out.Failure.Message, "the setup step ran: echo") || !strings.Contains(out.Failure.Message, "no such host") {
		t.Errorf("message = %s", out.Failure.Message)
	}
}

// setupUnavailable is a sandbox whose setup steps cannot start, as the
// Docker sandbox's when goalrun is dynamically linked.
type setupUnavailable struct {
	sandbox.Sandbox
	why string
}

func (s setupUnavailable) Exec(ctx context.Context, cmd sandbox.Cmd) (sandbox.Result, error) {
	if cmd.Role == sandbox.RoleSetup {
		return sandbox.Result{}, fmt.Errorf("sandbox: docker: setup step %q: %w: %s", cmd.Args[0], sandbox.ErrNotStarted, s.why)
	}
	return s.Sandbox.Exec(ctx, cmd)
}

// TestLoopSetupNotStarted: when no setup step can start (goalrun must be
// rebuilt without cgo), the setup step's progress shows the whole reason
// on a line of its own, nothing says it "exited 127", and the one
// suggestion is the sandbox's reason (not --setup, --allow-host or
// --image, which cannot help), whether the step was detected (the first
// check then fails for the missing modules) or asked for.
func TestLoopSetupNotStarted(t *testing.T) {
	const why = "goalrun must be rebuilt with CGO_ENABLED=0: its executable /tmp/trial/goalrun is dynamically linked (built with cgo), and the setup step and --network egress reach the network through an egress relay that runs it inside the container"
	cases := []struct {
		name     string
		detected bool
		cause    string
		skipped  bool
	}{
		{"a detected step, then the first check lacks the modules", true, goal.EnvMissingDependency, true},
		{"a step the user asked for", false, goal.CauseSetupFailed, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := workspace(t, nil)
			ev := &recorder{}
			out := run(t, context.Background(), goal.Config{
				Sandbox: setupUnavailable{local(t, dir), why}, Adapter: agent.Command{}, AgentBin: "touch agent-ran",
				Check: realOutput(t, dir, "go-proxyoff.txt", "1"), Setup: []goal.SetupStep{{Command: "go mod download", Detected: tc.detected}},
				MaxIterations: 1, Events: ev, Now: (&fakeClock{}).Now,
			})
			f := out.Failure
			if f == nil || f.Code != report.ErrEnvironmentFailed || f.Cause != tc.cause {
				t.Fatalf("failure %+v, want EnvironmentFailed/%s", f, tc.cause)
			}
			if exists(dir, "agent-ran") {
				t.Error("an agent turn was spent")
			}
			if len(out.Setup) != 1 || out.Setup[0].NotStarted != why || out.Setup[0].Skipped != tc.skipped {
				t.Fatalf("setup results %+v, want one not started (%q), skipped %v", out.Setup, why, tc.skipped)
			}
			// The document's setup step says why, not only exit_code 127.
			if rs := out.ReportRun(nil, false).Setup; len(rs) != 1 || rs[0].NotStarted != why || rs[0].ExitCode != 127 {
				t.Errorf("document setup %+v, want not_started %q and exit_code 127", rs, why)
			}
			if want := []string{"No setup step could prepare the dependencies, since it could not start: " + why + "."}; !slices.Equal(f.Suggestions, want) {
				t.Errorf("suggestions %q, want %q", f.Suggestions, want)
			}
			if strings.Contains(f.Message, "exited 127") {
				t.Errorf("message says the step exited 127: %s", f.Message)
			}
			fin := ev.ofType(report.EventPrepareFinished)
			if len(fin) != 1 {
				t.Fatalf("%d prepare_finished events", len(fin))
			}
			if notes, _ := fin[0].Data["notes"].([]string); !slices.Equal(notes, []string{why}) {
				t.Errorf("notes %q, want the reason", notes)
			}
			if e, _ := fin[0].Data["error"].(string); strings.Contains(e, "127") || !strings.Contains(e, "could not start") {
				t.Errorf("error %q, want it to say the step could not start", e)
			}
		})
	}
}
