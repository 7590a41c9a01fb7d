package goal

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/goal/agent"
	"github.com/goalrun/goalrun/goal/workspace"
	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/sandbox"
)

// noisyFailingCheck fails the same way each time, with a different duration
// and temporary path in its output, as real test runners do.
const noisyFailingCheck = `printf -- '--- FAIL: TestSum (%s.%ss)\n    calc_test.go:6: got -1, want 3\nFAIL\texample.com/calc\t0.%ss\nbuild dir /tmp/go-build%s\n' $(date +%S) $(date +%N) $(date +%N) $(date +%N); exit 1`

func runHalting(t *testing.T, agentCmd string, maxIter int) (Outcome, report.Document) {
	t.Helper()
	dir := t.TempDir()
	chWrite(t, dir, map[string]string{"calc.go": "package calc\n"})
	sb, err := sandbox.StartLocal(t.Context(), sandbox.Config{Workspace: dir, RunID: "halt-" + t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	tracker := NewWorkspaceTracker(dir, workspace.Options{Check: noisyFailingCheck, TempDir: t.TempDir()})
	defer tracker.Close()
	out, err := Run(t.Context(), Config{
		Sandbox: sb, Adapter: agent.Command{Bin: agentCmd}, Check: noisyFailingCheck,
		MaxIterations: maxIter, Tracker: tracker, Halter: NewHalts(HaltOptions{}),
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, report.Finish(out.ReportRun(nil, false), nil)
}

// TestIdleAgentHaltsNoProgress: an agent that changes nothing while the
// check fails the same way halts with no_progress after two turns, before
// --max-iterations, with the reason in the document.
func TestIdleAgentHaltsNoProgress(t *testing.T) {
	out, doc := runHalting(t, `echo "I looked at calc.go; it seems fine."`, 5)
	if out.Halt != report.HaltNoProgress || out.AgentTurns != 2 {
		t.Fatalf("halt %q after %d turns (%s), want no_progress after 2", out.Halt, out.AgentTurns, out.HaltReason)
	}
	if doc.Goal == nil || doc.Goal.Halt == nil || *doc.Goal.Halt != report.HaltNoProgress ||
		!strings.Contains(doc.Goal.HaltReason, "No progress for 2 turns") || !strings.Contains(doc.Goal.HaltReason, "TestSum failing in example.com/calc") || strings.Contains(doc.Goal.HaltReason, "go:") {
		t.Errorf("document goal = %+v", doc.Goal)
	}
	if doc.Conclusion != report.ConclusionFailure {
		t.Errorf("conclusion = %q", doc.Conclusion)
	}
}

// TestBusyAgentIsNotHaltedForNoProgress: an agent that keeps changing the
// workspace runs to --max-iterations even though the check fails the same
// way.
func TestBusyAgentIsNotHaltedForNoProgress(t *testing.T) {
	out, _ := runHalting(t, `echo "// try $GOALRUN_ITERATION" >> calc.go`, 4)
	if out.Halt != report.HaltMaxIterations || out.AgentTurns != 4 {
		t.Fatalf("halt %q after %d turns, want max_iterations after 4", out.Halt, out.AgentTurns)
	}
	if out.Changes == nil || out.Changes.Insertions != 4 {
		t.Errorf("changes = %+v", out.Changes)
	}
}

// costSandbox replays a Claude Code turn that reports a cost; checks fail.
type costSandbox struct{ turn string }

func (s costSandbox) Exec(ctx context.Context, cmd sandbox.Cmd) (sandbox.Result, error) {
	if cmd.Role == sandbox.RoleCheck {
		if cmd.Stdout != nil {
			io.WriteString(cmd.Stdout, "--- FAIL: TestSum (0.00s)\n")
		}
		return sandbox.Result{ExitCode: 1}, nil
	}
	io.WriteString(cmd.Stdout, s.turn)
	return sandbox.Result{}, nil
}
func (costSandbox) Posture() sandbox.Posture    { return sandbox.Posture{Mode: "local"} }
func (costSandbox) Close(context.Context) error { return nil }

// TestBudgetHalts: a turn whose reported cost (or tokens) exceeds the
// budget halts the run with budget and the reason.
func TestBudgetHalts(t *testing.T) {
	turn := claudeJudgeStream("I tried something.") // costs $0.0123, 125 tokens
	cases := []struct {
		name  string
		opt   HaltOptions
		words string
	}{
		{"cost", HaltOptions{MaxCostUSD: 0.01}, "--max-cost-usd"},
		{"tokens", HaltOptions{MaxTokens: 100}, "--max-tokens"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := Run(t.Context(), Config{
				Sandbox: costSandbox{turn: turn}, Adapter: agent.Claude{}, Check: "go test ./...",
				MaxIterations: 5, Halter: NewHalts(c.opt),
			})
			if err != nil {
				t.Fatal(err)
			}
			if out.Halt != report.HaltBudget || out.AgentTurns != 1 || !strings.Contains(out.HaltReason, c.words) {
				t.Fatalf("halt %q after %d turns: %s", out.Halt, out.AgentTurns, out.HaltReason)
			}
			doc := report.Finish(out.ReportRun(nil, false), nil)
			if doc.Goal.HaltReason == "" || *doc.Goal.Halt != report.HaltBudget {
				t.Errorf("document goal = %+v", doc.Goal)
			}
		})
	}
}
