package sandbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/dockertest"
)

// TestDockerAgentStartsWithTheFirstAgentStep: the agent container is
// created at start (its posture is read back from the Engine) but started
// only by the first agent step, so a run whose check already passes never
// starts it — in both workspace modes and with the egress relay — and a
// later agent step finds it running.
func TestDockerAgentStartsWithTheFirstAgentStep(t *testing.T) {
	cli := dockertest.Client(t)
	for _, tc := range []struct {
		name string
		cfg  sandbox.Config
	}{
		{"bind", sandbox.Config{WorkspaceMode: sandbox.WorkspaceBind}},
		{"copy", sandbox.Config{WorkspaceMode: sandbox.WorkspaceCopy}},
		{"egress relay", sandbox.Config{WorkspaceMode: sandbox.WorkspaceBind, Network: sandbox.NetworkEgress, RelayBinary: dockertest.GoalrunBinary(t)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb, _ := startDocker(t, tc.cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			state := func() (status string, started bool) {
				t.Helper()
				c, err := cli.ContainerInspect(ctx, sb.ContainerID())
				if err != nil {
					t.Fatal(err)
				}
				return c.State.Status, c.State.StartedAt != "" && c.State.StartedAt != "0001-01-01T00:00:00Z"
			}
			p := sb.Posture()
			if p.Mode != "docker" || !p.ReadOnlyRootfs || len(p.CapDrop) == 0 || p.PidsLimit == 0 {
				t.Errorf("the posture was not read back from the created container: %+v", p)
			}
			res, err := sb.Exec(ctx, sandbox.Cmd{Role: sandbox.RoleCheck, Args: sandbox.Shell("test -d .")})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("check: %v %+v", err, res)
			}
			if status, started := state(); status != "created" || started {
				t.Errorf("after a passing check the agent container is %q (ever started: %v), want created and never started", status, started)
			}
			res, err = sb.Exec(ctx, sandbox.Cmd{Role: sandbox.RoleAgent, Args: sandbox.Shell("echo edit > edited.txt")})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("agent step: %v %+v", err, res)
			}
			// Copy mode freezes it before its copy-out: paused is running too.
			if status, started := state(); (status != "running" && status != "paused") || !started {
				t.Errorf("after an agent step the agent container is %q (ever started: %v), want it started", status, started)
			}
			res, err = sb.Exec(ctx, sandbox.Cmd{Role: sandbox.RoleCheck, Args: sandbox.Shell("test -s edited.txt")})
			if err != nil || res.ExitCode != 0 {
				t.Errorf("the check does not see the agent's edit: %v %+v", err, res)
			}
			if err := sb.StopAgent(ctx); err != nil {
				t.Errorf("StopAgent: %v", err)
			}
		})
	}
}

// TestDockerStopAgentBeforeItRan: stopping (and closing) a sandbox whose
// agent never started kills nothing and fails nothing.
func TestDockerStopAgentBeforeItRan(t *testing.T) {
	sb, _ := startDocker(t, sandbox.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := sb.StopAgent(ctx); err != nil {
		t.Errorf("StopAgent before any agent step: %v", err)
	}
	if err := sb.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}
