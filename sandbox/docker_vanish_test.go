package sandbox_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/sandbox"
)

// TestDockerMountVanishedBeforeFirstTurn: a host folder mounted read-only
// is removed after the sandbox started (the agent container is created
// then, and started at the first turn): the agent's step runs without it,
// and so does the check after it, in bind and copy mode.
func TestDockerMountVanishedBeforeFirstTurn(t *testing.T) {
	for _, mode := range []sandbox.WorkspaceMode{sandbox.WorkspaceBind, sandbox.WorkspaceCopy} {
		t.Run(string(mode), func(t *testing.T) {
			src := filepath.Join(t.TempDir(), "tools")
			if err := os.MkdirAll(src, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(src, "tool.txt"), []byte("here\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			sb, _ := startDocker(t, sandbox.Config{WorkspaceMode: mode,
				Mounts: []sandbox.Mount{{Source: src, Target: "/mnt/tools", ReadOnly: true, Name: "--mount " + src}}})
			if err := os.RemoveAll(src); err != nil {
				t.Fatal(err)
			}
			for _, role := range []sandbox.Role{sandbox.RoleAgent, sandbox.RoleCheck, sandbox.RoleAgent} {
				res := run(t, sb, sh(role, "test -e /mnt/tools/tool.txt && echo present; echo ran"))
				if out := string(res.Stdout.Tail); res.ExitCode != 0 || strings.TrimSpace(out) != "ran" {
					t.Errorf("%s step: exit %d, stdout %q, stderr %q; want it to run without the vanished folder", role, res.ExitCode, out, res.Stderr.Tail)
				}
			}
		})
	}
}
