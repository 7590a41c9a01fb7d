package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/goalrun/goalrun/report"
)

// TestDockerChangesCoverTheWidenedMount: a workspace in a subfolder of a
// repository gets the repository root mounted (sandbox.mount), so the
// changes cover that root too — an agent that rewrites the check's own
// script above the workspace, plants a workflow and a new repository with
// core.fsmonitor set is caught (check_modified, risky paths relative to
// the mount, the new repository's config first), and the run fails closed
// for it (unsafe_change). Its hook and branch move in the repository's own
// .git fail: that .git is mounted read-only and stays as it was.
func TestDockerChangesCoverTheWidenedMount(t *testing.T) {
	dockerEngine(t)
	repo := t.TempDir()
	for name, body := range map[string]string{
		"test.sh":              "exit 1\n",
		"app/a.txt":            "a\n",
		".git/HEAD":            "ref: refs/heads/main\n",
		".git/refs/heads/main": "1111111111111111111111111111111111111111\n",
		".git/hooks/README":    "hooks\n",
	} {
		p := filepath.Join(repo, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := filepath.Walk(repo, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, 1000, 1000) // a bind workspace owned by a user, as a checkout is
	}); err != nil {
		t.Fatal(err)
	}
	agent := "echo 'exit 0' > ../test.sh; mkdir -p ../.github/workflows && echo 'on: push' > ../.github/workflows/evil.yml; " +
		"echo '#!/bin/sh' > ../.git/hooks/pre-commit; echo 2222222222222222222222222222222222222222 > ../.git/refs/heads/main; " +
		"mkdir -p ../vendored/.git && printf '[core]\\n\\tfsmonitor = evil\\n' > ../vendored/.git/config"
	r := goalrun(t, filepath.Join(repo, "app"), nil, "run", "--json", "--agent", "command", "--max-iterations", "1",
		"--agent-bin", agent, "--until", "sh ../test.sh")
	d := r.doc(t)
	if get(d, "sandbox", "mount") == nil {
		t.Fatalf("the mount was not widened to the repository root: sandbox %v\n%s", d["sandbox"], r.stderr)
	}
	if get(d, "goal", "passed") != false || d["conclusion"] != report.ConclusionFailure || get(d, "goal", "halt") != report.HaltUnsafeChange {
		t.Errorf("passed %v conclusion %v halt %v, want failed closed (unsafe_change)", get(d, "goal", "passed"), d["conclusion"], get(d, "goal", "halt"))
	}
	if get(d, "changes", "check_modified") != true || get(d, "changes", "relative_to") != report.RelativeToMount ||
		get(d, "changes", "files_changed") != 3.0 {
		t.Errorf("changes = %v, want check_modified, relative to the mount, 3 files", d["changes"])
	}
	var risky []string
	for _, p := range get(d, "changes", "risky_paths").([]any) {
		risky = append(risky, p.(string))
	}
	want := []string{"vendored/.git/ (a new git repository)", "test.sh", ".github/workflows/evil.yml"}
	if !slices.Equal(risky, want) {
		t.Errorf("risky_paths = %q, want %q", risky, want)
	}
	if b, err := os.ReadFile(filepath.Join(repo, ".git/refs/heads/main")); err != nil || string(b) != "1111111111111111111111111111111111111111\n" {
		t.Errorf("the host's branch moved: %q %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(repo, ".git/hooks/pre-commit")); err == nil {
		t.Errorf("the agent planted a hook in the host's .git")
	}
}
