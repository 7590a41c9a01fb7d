package sandbox_test

import (
	"testing"
	"time"

	"github.com/goalrun/goalrun/sandbox"
)

// TestDockerResultFlags: how a step ended is said by Result's flags, for
// agent steps exactly as for checks: a step killed at Cmd.Timeout is
// TimedOut (exit 143: SIGTERM reached it first), a step the kernel killed
// at the memory limit is OOMKilled (exit 137), and the same exit statuses
// reached without a timeout or an OOM kill set neither flag.
func TestDockerResultFlags(t *testing.T) {
	sb, _ := startDocker(t, sandbox.Config{MemoryBytes: 256 << 20})
	for _, role := range bothRoles {
		for _, tc := range []struct {
			name     string
			script   string
			timeout  time.Duration
			exit     int
			timedOut bool
			oom      bool
		}{
			{name: "killed at its timeout", script: "sleep 300", timeout: 2 * time.Second, exit: 143, timedOut: true},
			{name: "SIGTERM of its own", script: "kill -TERM $$; sleep 5", timeout: time.Minute, exit: 143},
			{name: "exit 137 of its own", script: "exit 137", timeout: time.Minute, exit: 137},
			{name: "OOM-killed at the memory limit", script: `awk 'BEGIN { s = "x"; for (i = 0; i < 34; i++) s = s s; print length(s) }'`, timeout: 2 * time.Minute, exit: 137, oom: true},
		} {
			t.Run(role.String()+"/"+tc.name, func(t *testing.T) {
				res := run(t, sb, sandbox.Cmd{Role: role, Args: sandbox.Shell(tc.script), Timeout: tc.timeout})
				if res.ExitCode != tc.exit || res.TimedOut != tc.timedOut || res.OOMKilled != tc.oom || res.Cancelled {
					t.Errorf("exit %d TimedOut %v OOMKilled %v Cancelled %v, want exit %d TimedOut %v OOMKilled %v Cancelled false (stderr %q)",
						res.ExitCode, res.TimedOut, res.OOMKilled, res.Cancelled, tc.exit, tc.timedOut, tc.oom, res.Stderr.Tail)
				}
			})
		}
	}
}
