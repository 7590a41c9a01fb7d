package goal_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/goalrun/goalrun/grounding"
	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/report/reporttest"
)

var (
	goalrunBinOnce sync.Once
	goalrunBin     string
	goalrunBinErr  error
)

// buildGoalrun builds ./cmd/goalrun once per test binary.
func buildGoalrun(t *testing.T) string {
	t.Helper()
	goalrunBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "goalrun-e2e-")
		if err != nil {
			goalrunBinErr = err
			return
		}
		goalrunBin = filepath.Join(dir, "goalrun")
		out, err := exec.Command("go", "build", "-o", goalrunBin, "github.com/goalrun/goalrun/cmd/goalrun").CombinedOutput()
		if err != nil {
			goalrunBinErr = errors.New(string(out))
		}
	})
	if goalrunBinErr != nil {
		t.Fatalf("go build ./cmd/goalrun: %v", goalrunBinErr)
	}
	return goalrunBin
}

// runBinary runs `goalrun run --json …` in a fresh workspace and returns the
// document, the events and the exit code.
func runBinary(t *testing.T, files map[string]string, args ...string) (map[string]any, []report.Event, int) {
	t.Helper()
	bin := buildGoalrun(t)
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, append([]string{"run", "--json", "--sandbox", "local", "--workdir", dir}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if err := reporttest.ValidateJSON(bytes.TrimSpace(stdout.Bytes())); err != nil {
		t.Fatalf("stdout is not one valid goalrun/1 document: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	var doc map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	var events []report.Event
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		var ev report.Event
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Type != "" {
			events = append(events, ev)
		}
	}
	return doc, events, code
}

func at(doc map[string]any, path ...string) any {
	var v any = doc
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	return v
}

// TestBinaryInferUntilIsNeverGrounded: end to end through the goalrun
// binary, --infer-until with a judge that says "met" ends with the goal
// passed, grounded false, conclusion neutral (exit 0: the goal was judged
// met) and the judge's reason in the document; a judge that refuses ends
// not met.
func TestBinaryInferUntilIsNeverGrounded(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the goalrun binary; skipped with -short")
	}
	readme := map[string]string{"README.md": "# tool\n"}
	agentCmd := `echo "Use --foo to enable foo." >> README.md; echo "Documented --foo in README.md. All tests pass."`
	doc, events, code := runBinary(t, readme, "--agent", "command", "--agent-bin", agentCmd,
		"--infer-until", "README.md documents the --foo flag",
		"--judge-cmd", `grep -q -- --foo README.md && echo "README.md mentions --foo"`, "--max-iterations", "2")
	if code != 0 || at(doc, "goal", "passed") != true || at(doc, "goal", "grounded") != false {
		t.Fatalf("exit %d, goal %v", code, doc["goal"])
	}
	if doc["conclusion"] != report.ConclusionNeutral {
		t.Errorf("conclusion = %v, want neutral", doc["conclusion"])
	}
	if r, _ := at(doc, "judge", "reason").(string); !strings.Contains(r, "README.md mentions --foo") || at(doc, "judge", "by") != "command" {
		t.Errorf("judge = %v", doc["judge"])
	}
	// no check ran, so the agent's "All tests pass." is not backed by anything
	claims, _ := doc["ungrounded_claims"].([]any)
	if len(claims) != 1 || at(claims[0].(map[string]any), "kind") != grounding.ClaimTestsPass {
		t.Errorf("ungrounded_claims = %v", doc["ungrounded_claims"])
	}
	var evaluated []report.Event
	for _, ev := range events {
		if ev.Type == report.EventGoalEvaluated {
			evaluated = append(evaluated, ev)
		}
	}
	if len(evaluated) != 1 || evaluated[0].Data["grounded"] != false || !strings.Contains(evaluated[0].Message, "judge") {
		t.Errorf("goal_evaluated events = %+v", evaluated)
	}

	doc, _, code = runBinary(t, readme, "--agent", "command", "--agent-bin", `echo "I think it is done."`,
		"--infer-until", "README.md documents the --foo flag",
		"--judge-cmd", `echo "README.md has no --foo"; exit 1`, "--max-iterations", "1")
	if code != 1 || at(doc, "goal", "passed") != false || doc["conclusion"] != report.ConclusionFailure {
		t.Errorf("refusing judge: exit %d, conclusion %v, goal %v", code, doc["conclusion"], doc["goal"])
	}
	if r, _ := at(doc, "judge", "reason").(string); !strings.Contains(r, "no --foo") {
		t.Errorf("judge = %v", doc["judge"])
	}
}

// TestBinaryNoProgressAndTestEdits: end to end, an idle agent halts with
// no_progress before --max-iterations, with the reason in the document; an
// agent that edits the check's script gets check_modified and a neutral
// conclusion.
func TestBinaryNoProgressAndTestEdits(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the goalrun binary; skipped with -short")
	}
	doc, events, code := runBinary(t, map[string]string{"check.sh": "echo '--- FAIL: TestX (0.01s)'; exit 1\n"},
		"--agent", "command", "--agent-bin", `echo "Looked around."`, "--until", "sh check.sh", "--max-iterations", "5")
	if code != 1 || at(doc, "goal", "halt") != report.HaltNoProgress || at(doc, "goal", "iterations") != float64(2) {
		t.Fatalf("exit %d, goal %v", code, doc["goal"])
	}
	if r, _ := at(doc, "goal", "halt_reason").(string); !strings.Contains(r, "No progress") {
		t.Errorf("halt_reason = %q", r)
	}
	haltEvent := false
	for _, ev := range events {
		if ev.Type == report.EventGoalEvaluated && ev.Data["halt"] == report.HaltNoProgress {
			r, _ := ev.Data["halt_reason"].(string)
			haltEvent = strings.Contains(r, "No progress") && strings.Contains(ev.Message, "No progress")
		}
	}
	if !haltEvent {
		t.Errorf("no goal_evaluated event carries the no_progress halt and its reason: %+v", events)
	}

	doc, _, code = runBinary(t, map[string]string{"check.sh": "exit 1\n"},
		"--agent", "command", "--agent-bin", `echo "exit 0" > check.sh; echo "Fixed."`, "--until", "sh check.sh")
	if code != 0 || at(doc, "goal", "grounded") != true || doc["conclusion"] != report.ConclusionNeutral ||
		at(doc, "changes", "check_modified") != true {
		t.Fatalf("exit %d, conclusion %v, changes %v", code, doc["conclusion"], doc["changes"])
	}
	if risky, _ := at(doc, "changes", "risky_paths").([]any); len(risky) == 0 || risky[0] != "check.sh" {
		t.Errorf("risky_paths = %v", at(doc, "changes", "risky_paths"))
	}
}
