package grounding_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/goal"
	"github.com/goalrun/goalrun/goal/agent"
	"github.com/goalrun/goalrun/goal/workspace"
	"github.com/goalrun/goalrun/grounding"
	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/report/reporttest"
	"github.com/goalrun/goalrun/sandbox"
)

// replaySandbox is a real local sandbox whose agent steps replay a
// recorded-format transcript on stdout instead of running an agent CLI;
// check steps really run.
type replaySandbox struct {
	*sandbox.Local
	transcript []byte
	agentArgs  [][]string
}

func (s *replaySandbox) Exec(ctx context.Context, cmd sandbox.Cmd) (sandbox.Result, error) {
	if cmd.Role == sandbox.RoleCheck {
		return s.Local.Exec(ctx, cmd)
	}
	s.agentArgs = append(s.agentArgs, cmd.Args)
	if cmd.Stdout != nil {
		cmd.Stdout.Write(s.transcript)
	}
	return sandbox.Result{ExitCode: 0}, nil
}

// TestReplayedTranscriptClaims replays a Claude Code stream-json transcript
// (hand-written in the real format, see testdata/claims/transcripts) in
// which the agent's Edit, go test and git commit all failed while its final
// message claims a fixed file, passing tests and a commit. Through the real
// loop, the agents' claude parser, the workspace tracker and the evidence,
// the document lists exactly those three ungrounded claims.
func TestReplayedTranscriptClaims(t *testing.T) {
	transcript, err := os.ReadFile(filepath.Join("testdata", "claims", "transcripts", "claude-failed-tools-claims-success.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	calc := "package calc\n\n// Sum returns a+b.\nfunc Sum(a, b int) int {\n\treturn a - b\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "calc.go"), []byte(calc), 0o644); err != nil {
		t.Fatal(err)
	}
	local, err := sandbox.StartLocal(t.Context(), sandbox.Config{Workspace: dir, RunID: "claims-replay"})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close(context.Background())
	sb := &replaySandbox{Local: local, transcript: transcript}

	ev := grounding.NewEvidence()
	tracker := goal.NewWorkspaceTracker(dir, workspace.Options{Check: "grep -q 'a + b' calc.go", Evidence: ev, TempDir: t.TempDir()})
	defer tracker.Close()
	out, err := goal.Run(t.Context(), goal.Config{
		Sandbox: sb, Adapter: agent.Claude{}, Task: "Fix Sum.", Check: "grep -q 'a + b' calc.go",
		MaxIterations: 1, Evidence: ev, Tracker: tracker,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(sb.agentArgs) != 1 || out.Passed || out.Halt != report.HaltMaxIterations {
		t.Fatalf("outcome: passed=%v halt=%q agent calls=%d", out.Passed, out.Halt, len(sb.agentArgs))
	}
	if r := out.Receipts.Receipts(); r.Total != 4 || r.Failed != 3 {
		t.Fatalf("receipts = %+v, want 4 calls, 3 failed", r)
	}

	doc := report.Finish(out.ReportRun(nil, false), nil)
	b := report.Encode(doc)
	if err := reporttest.ValidateJSON(b); err != nil {
		t.Fatalf("document invalid: %v\n%s", err, b)
	}
	var parsed struct {
		Conclusion       string         `json:"conclusion"`
		UngroundedClaims []report.Claim `json:"ungrounded_claims"`
	}
	if err := json.Unmarshal(b, &parsed); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, c := range parsed.UngroundedClaims {
		kinds = append(kinds, c.Kind)
		t.Logf("ungrounded: %-12s %q — %s", c.Kind, c.Claim, c.Reason)
		if c.Claim == "" || c.Reason == "" || len(c.Claim) > report.BriefCap+report.MarkerMaxBytes {
			t.Errorf("claim %+v: excerpt and reason must be present and capped", c)
		}
	}
	if parsed.UngroundedClaims[0].Kind != grounding.ClaimTestsPass || !strings.Contains(parsed.UngroundedClaims[0].Reason, "failed after the last turn") {
		t.Errorf("the goal contradiction must come first: %+v", parsed.UngroundedClaims[0])
	}
	sort.Strings(kinds)
	want := []string{grounding.ClaimCommitted, grounding.ClaimEditedFile, grounding.ClaimTestsPass}
	if strings.Join(kinds, ",") != strings.Join(want, ",") {
		t.Errorf("ungrounded kinds = %v, want %v", kinds, want)
	}
	for _, c := range parsed.UngroundedClaims {
		if c.Kind == grounding.ClaimEditedFile && !strings.Contains(c.Reason, "calc.go") {
			t.Errorf("edited_file reason does not name calc.go: %q", c.Reason)
		}
		if c.Kind == grounding.ClaimCommitted && !strings.Contains(c.Reason, "failed") {
			t.Errorf("committed reason does not say the commit failed: %q", c.Reason)
		}
	}
	if parsed.Conclusion != report.ConclusionFailure {
		t.Errorf("conclusion = %q", parsed.Conclusion)
	}
}
