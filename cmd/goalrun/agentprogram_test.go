package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/sandbox"
)

// TestAgentProgramUnseen: the command agent's absolute program path that
// exists on this machine but that the default Docker sandbox cannot see
// (not in the workspace's place, not under a --mount target, not in a
// host folder the sandbox mounts) is bad input naming both fixes; any
// path the sandbox may see, or that is not on this machine, is left to
// the sandbox.
func TestAgentProgramUnseen(t *testing.T) {
	onHost := map[string]bool{"/tmp/trial/fix-color.sh": true, "/usr/local/bin/fix": true, "/mnt/agents/fix.sh": true}
	lstat := func(p string) (os.FileInfo, error) {
		if onHost[p] {
			return nil, nil
		}
		return nil, fs.ErrNotExist
	}
	covers := func(p string) bool { return strings.HasPrefix(p, "/usr/") }
	mounts := []sandbox.Mount{{Source: "/tmp/trial/agents", Target: "/mnt/agents"}}
	cases := []struct {
		name, bin string
		refused   bool
	}{
		{"a host file outside every mount", "/tmp/trial/fix-color.sh", true},
		{"a host file outside every mount, with arguments", "/tmp/trial/fix-color.sh --fast", true},
		{"under a --mount target", "/mnt/agents/fix.sh", false},
		{"in a host folder the sandbox mounts", "/usr/local/bin/fix", false},
		{"in the workspace's place in the container", sandbox.DockerRoot + "/fix.sh", false},
		{"not on this machine (the image may hold it)", "/opt/agent/run", false},
		{"a relative path", "./fix.sh", false},
		{"a shell command line", "sh -c 'echo hi'", false},
		{"empty", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			se := agentProgramUnseen(tc.bin, mounts, covers, lstat)
			if (se != nil) != tc.refused {
				t.Fatalf("refused = %v (%+v), want %v", se != nil, se, tc.refused)
			}
			if se == nil {
				return
			}
			if se.code != report.ErrBadInput || !strings.Contains(se.message, "cannot see it") || !strings.Contains(se.message, "/tmp/trial/fix-color.sh") {
				t.Errorf("error %s %q", se.code, se.message)
			}
			if want := "--mount /tmp/trial:/mnt/agent --agent-bin /mnt/agent/fix-color.sh"; len(se.suggestions) != 1 || !strings.Contains(se.suggestions[0], want) || !strings.Contains(se.suggestions[0], "./fix-color.sh") {
				t.Errorf("suggestions %q, want the workspace and %q", se.suggestions, want)
			}
		})
	}
}

// TestAgentProgramUnseenBeforeOneTimeWork: with the Docker sandbox and a
// user cache that holds nothing yet (the Go cache would be warmed, which
// takes minutes the first time), a command agent's program the sandbox
// cannot see is refused as bad input before any one-time work starts.
func TestAgentProgramUnseenBeforeOneTimeWork(t *testing.T) {
	dockerEngine(t)
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "go.mod"), []byte("module example.test/unseen\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fix := filepath.Join(t.TempDir(), "fix.sh") // a host folder no mount covers
	if err := os.WriteFile(fix, []byte("#!/bin/sh\ntrue\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := goalrun(t, ws, []string{"XDG_CACHE_HOME=" + t.TempDir()}, "run", "--json", "--sandbox", "docker", "--agent", "command", "--agent-bin", fix,
		"--until", "false", "--workdir", ws)
	d := r.doc(t)
	if r.code != exitBadInput || d["error"] != report.ErrBadInput {
		t.Fatalf("exit %d error %v, want bad input\n%s", r.code, d["error"], r.stderr)
	}
	for _, e := range r.events(t) {
		if w, _ := e.Data["work"].(string); w != "" && w != report.WorkImage {
			t.Errorf("one-time work %q started before the bad input was said: %s", w, e.Message)
		}
	}
}
