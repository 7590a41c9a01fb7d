package agent

import (
	"os"
	"os/exec"
	"testing"
)

// findAgentBin returns the real agent CLI a live test runs: the path in env
// (GOALRUN_CLAUDE_BIN, GOALRUN_CODEX_BIN, exported by .ci/run's agents
// section), else name on PATH. When neither exists the test is skipped with
// the condition named, unless GOALRUN_REQUIRE_AGENTS=1, which makes it fail.
func findAgentBin(t *testing.T, name, env string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s=%s: %v", env, p, err)
		}
		return p
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	msg := "agent CLI " + name + " unavailable: " + env + " is unset and " + name + " is not on PATH"
	if os.Getenv("GOALRUN_REQUIRE_AGENTS") == "1" {
		t.Fatal(msg + " (GOALRUN_REQUIRE_AGENTS=1)")
	}
	t.Skip(msg)
	return ""
}
