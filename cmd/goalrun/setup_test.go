package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/report"
)

// TestLocalSetupRunsBeforeTheBaseline: with --sandbox local the setup
// commands run on the host, in the workspace, before the first check and
// before goalrun records the starting state: the check sees what they
// wrote, and it is not counted as the agent's change.
func TestLocalSetupRunsBeforeTheBaseline(t *testing.T) {
	ws := t.TempDir()
	for name, body := range map[string]string{"app.txt": "broken\n"} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := goalrun(t, ws, nil, "run", "--json", "--sandbox", "local", "--agent", "command",
		"--setup", "mkdir -p node_modules/dep && echo ready > node_modules/dep/index.js",
		"--setup", "echo second >> node_modules/dep/index.js",
		"--agent-bin", "echo fixed > app.txt",
		"--until", "test \"$(cat node_modules/dep/index.js)\" = \"$(printf 'ready\\nsecond')\" && grep -q fixed app.txt")
	d := r.doc(t)
	if r.code != 0 || get(d, "goal", "grounded") != true || get(d, "goal", "iterations") != 1.0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if get(d, "changes", "files_changed") != 1.0 {
		t.Errorf("changes %v: the setup's node_modules was counted as the agent's", d["changes"])
	}
	steps := d["setup"].([]any)
	if len(steps) != 2 || steps[0].(map[string]any)["exit_code"] != 0.0 || steps[0].(map[string]any)["detected"] != nil {
		t.Errorf("setup %v", steps)
	}
	var started, finished int
	for _, e := range r.events(t) {
		switch {
		case e.Type == report.EventPrepareStarted && e.Data["work"] == report.WorkSetup:
			started++
		case e.Type == report.EventPrepareFinished && e.Data["work"] == report.WorkSetup:
			finished++
		}
	}
	if started != 2 || finished != 2 {
		t.Errorf("%d prepare_started and %d prepare_finished events of the setup", started, finished)
	}
}

// TestSetupFailureEndsTheRun: a --setup command that fails ends the run
// before the first check with EnvironmentFailed (setup_failed), its output
// in the message; the agent never runs.
func TestSetupFailureEndsTheRun(t *testing.T) {
	ws := t.TempDir()
	r := goalrun(t, ws, nil, "run", "--json", "--sandbox", "local", "--agent", "command",
		"--setup", "echo 'npm error code E404' >&2; exit 7", "--agent-bin", "touch agent-ran", "--until", "touch checked; false")
	d := r.doc(t)
	if r.code != exitRunFailed || d["error"] != report.ErrEnvironmentFailed || get(d, "failure", "cause") != "setup_failed" {
		t.Fatalf("exit %d\n%s", r.code, r.stdout)
	}
	if msg, _ := d["message"].(string); !strings.Contains(msg, "npm error code E404") || !strings.Contains(msg, "exited 7") {
		t.Errorf("message %q", msg)
	}
	for _, f := range []string{"agent-ran", "checked"} {
		if _, err := os.Stat(filepath.Join(ws, f)); err == nil {
			t.Errorf("%s exists: the run went on after the failed setup", f)
		}
	}
}

// TestSetupSettings: --setup is repeatable, the config key takes a string
// or a list, an empty command is bad input naming where it came from, and
// the detected defaults can be switched off.
func TestSetupSettings(t *testing.T) {
	dir := t.TempDir()
	c, err := parse(t, dir, "--until", "x", "--setup", "go generate ./...", "--setup", "make deps", "--setup-defaults=false")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.setup, "|") != "go generate ./...|make deps" || c.setupDefaults {
		t.Errorf("setup %q defaults %v", c.setup, c.setupDefaults)
	}
	if err := os.WriteFile(filepath.Join(dir, ".goalrun.yml"), []byte("until: x\nsetup: npm ci\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err = parse(t, dir); err != nil || strings.Join(c.setup, "|") != "npm ci" || !c.setupDefaults {
		t.Errorf("config file: %q %v %v", c.setup, c.setupDefaults, err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".goalrun.yml"), []byte("until: x\nsetup:\n  - a\n  - b\nsetup-defaults: false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err = parse(t, dir); err != nil || strings.Join(c.setup, "|") != "a|b" || c.setupDefaults {
		t.Errorf("config file list: %q %v %v", c.setup, c.setupDefaults, err)
	}
	if _, err := parse(t, t.TempDir(), "--until", "x", "--setup", "  "); err == nil || !strings.Contains(err.Error(), "--setup") {
		t.Errorf("an empty --setup: %v", err)
	}
	withNets := func(v string) (runConfig, error) {
		env := func(k string) (string, bool) {
			if k == EgressAllowNetsEnv {
				return v, true
			}
			return "", false
		}
		wd := t.TempDir()
		return parseRunArgs([]string{"--until", "x"}, env, func() (string, error) { return wd, nil })
	}
	for v, n := range map[string]int{"203.0.113.80": 1, "10.1.2.0/24, fd00::/8": 2} {
		if c, err := withNets(v); err != nil || len(c.egressAllowNets) != n {
			t.Errorf("%s=%q: %v %v", EgressAllowNetsEnv, v, c.egressAllowNets, err)
		}
	}
	for _, v := range []string{"127.0.0.1", "169.254.169.254/32", "0.0.0.0/0", "not-an-address"} {
		if _, err := withNets(v); err == nil || !strings.Contains(err.Error(), EgressAllowNetsEnv) {
			t.Errorf("%s=%q accepted: %v", EgressAllowNetsEnv, v, err)
		}
	}
}
