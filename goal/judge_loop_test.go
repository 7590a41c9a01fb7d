package goal

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/goal/agent"
	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/report/reporttest"
	"github.com/goalrun/goalrun/sandbox"
)

// runJudged runs the loop in judge mode (or with a check too) with the
// command agent, and returns the outcome and its encoded document.
func runJudged(t *testing.T, agentCmd, check string, judge Judge) (Outcome, map[string]any) {
	t.Helper()
	dir := t.TempDir()
	chWrite(t, dir, map[string]string{"README.md": "# tool\n"})
	sb, err := sandbox.StartLocal(t.Context(), sandbox.Config{Workspace: dir, RunID: "judge-" + t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	out, err := Run(t.Context(), Config{
		Sandbox: sb, Adapter: agent.Command{Bin: agentCmd}, Task: "Document --foo in README.md.",
		Check: check, InferUntil: "README.md documents the --foo flag", MaxIterations: 2, Judge: judge,
	})
	if err != nil {
		t.Fatal(err)
	}
	b := report.Encode(report.Finish(out.ReportRun(nil, false), nil))
	if err := reporttest.ValidateJSON(b); err != nil {
		t.Fatalf("invalid document: %v\n%s", err, b)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return out, doc
}

func field(doc map[string]any, path ...string) any {
	var v any = doc
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// TestInferUntilIsNeverGrounded: with --infer-until alone, a judge that says
// "met" passes the goal, but the verdict is never grounded, the conclusion
// never success, and the judge's reason is in the document.
func TestInferUntilIsNeverGrounded(t *testing.T) {
	judges := map[string]Judge{
		"command judge": &CommandJudge{Command: `grep -q -- --foo README.md && echo "README.md mentions --foo"`},
		"agent judge":   &AgentJudge{Adapter: agentJudgeStub{}},
	}
	for name, j := range judges {
		t.Run(name, func(t *testing.T) {
			out, doc := runJudged(t, `echo "Use --foo to enable foo." >> README.md; echo "Documented --foo."`, "", j)
			if !out.Passed || out.Grounded {
				t.Fatalf("passed=%v grounded=%v, want passed and not grounded", out.Passed, out.Grounded)
			}
			if field(doc, "goal", "grounded") != false || field(doc, "goal", "passed") != true {
				t.Errorf("goal = %v", doc["goal"])
			}
			if c := doc["conclusion"]; c != report.ConclusionNeutral {
				t.Errorf("conclusion = %v, want neutral", c)
			}
			reason, _ := field(doc, "judge", "reason").(string)
			if !strings.Contains(reason, "--foo") || field(doc, "judge", "met") != true {
				t.Errorf("judge = %v, want met with a reason", doc["judge"])
			}
		})
	}
}

// TestInferUntilNotMet: a judge that refuses keeps the goal unmet; its
// reason is still reported.
func TestInferUntilNotMet(t *testing.T) {
	out, doc := runJudged(t, `echo "I think it is done."`, "", &CommandJudge{Command: `echo "README.md has no --foo"; exit 1`})
	if out.Passed || out.Halt != report.HaltMaxIterations {
		t.Fatalf("passed=%v halt=%q", out.Passed, out.Halt)
	}
	if doc["conclusion"] != report.ConclusionFailure || !strings.Contains(field(doc, "judge", "reason").(string), "no --foo") {
		t.Errorf("conclusion %v judge %v", doc["conclusion"], doc["judge"])
	}
}

// TestCheckDecidesJudgeIsRecorded: --until and --infer-until together: the
// check decides (grounded) and the judge's dissent is recorded beside it.
func TestCheckDecidesJudgeIsRecorded(t *testing.T) {
	out, doc := runJudged(t, `echo "--foo" >> README.md`, "grep -q -- --foo README.md",
		&CommandJudge{Command: `echo "the docs are too thin"; exit 1`})
	if !out.Passed || !out.Grounded {
		t.Fatalf("passed=%v grounded=%v, want the check's grounded pass", out.Passed, out.Grounded)
	}
	if doc["conclusion"] != report.ConclusionSuccess || field(doc, "judge", "met") != false ||
		!strings.Contains(field(doc, "judge", "reason").(string), "too thin") {
		t.Errorf("conclusion %v judge %v", doc["conclusion"], doc["judge"])
	}
}

// agentJudgeStub is an adapter whose "CLI" is a shell script printing a
// Claude Code stream that answers met, parsed by the real claude parser.
type agentJudgeStub struct{}

func (agentJudgeStub) Name() string { return "stub-claude" }
func (agentJudgeStub) Command(t agent.Turn) agent.Invocation {
	return agent.Invocation{Args: []string{"sh", "-c", `cat <<'EOF'
` + claudeJudgeStream("```json\n{\"met\": true, \"reason\": \"README.md documents --foo\"}\n```") + `EOF`}}
}
func (agentJudgeStub) NewParser() agent.Parser { return agent.Claude{}.NewParser() }
