package grounding_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/grounding"
)

// TestCheckPythonEnvKeepsPytestCacheOut: with CheckPythonEnv, pytest
// neither reads nor writes the tree's .pytest_cache: a lastfailed list an
// agent left that makes `pytest --lf` run only a passing test does not
// decide what runs (both tests run, the failing one fails), and the run
// leaves no .pytest_cache in the tree. Without it the same run passes:
// the attack is real. Needs Debian's python3-pytest (.ci/run installs it).
func TestCheckPythonEnvKeepsPytestCacheOut(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-m", "pytest", "--version").Run(); err != nil {
		if os.Getenv("GOALRUN_REQUIRE_DOCKER") != "" {
			t.Fatalf("the host's python3 has no pytest (.ci/run installs python3-pytest): %v", err)
		}
		t.Skipf("the host's python3 has no pytest: %v", err)
	}
	run := func(env map[string]string) (string, error, bool) {
		dir := t.TempDir()
		files := map[string]string{
			"test_ab.py":                       "def test_a():\n    assert True\n\n\ndef test_b():\n    assert False\n",
			".pytest_cache/v/cache/lastfailed": "{\"test_ab.py::test_a\": true}\n",
		}
		for name, body := range files {
			p := filepath.Join(dir, name)
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command("/usr/bin/python3", "-m", "pytest", "--lf", "-q")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		out, err := cmd.CombinedOutput()
		_, statErr := os.Stat(filepath.Join(dir, ".pytest_cache", "README.md")) // what pytest writes into a cache it used
		return string(out), err, statErr == nil
	}
	if out, err, _ := run(nil); err != nil {
		t.Fatalf("without CheckPythonEnv, pytest --lf ran more than the planted list (the attack is not real): %v\n%s", err, out)
	}
	out, err, wrote := run(grounding.CheckPythonEnv())
	if err == nil || !strings.Contains(out, "test_b") {
		t.Errorf("with CheckPythonEnv, pytest --lf followed the tree's cache: %v\n%s", err, out)
	}
	if wrote {
		t.Errorf("with CheckPythonEnv, pytest wrote its cache into the tree")
	}
}
