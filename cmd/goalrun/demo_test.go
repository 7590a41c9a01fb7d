package main

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goalrun/goalrun/goal/agent/scripted"
	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/report/reporttest"
	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/dockertest"
)

// demoGuard bounds one `goalrun demo` in the Docker sandbox: a hang guard,
// not a timing assertion. Each of the demo's three checks compiles Go's
// standard library in a fresh container (an empty tmpfs GOCACHE): about 2
// minutes each on a loaded 2-core machine.
const demoGuard = 30 * time.Minute

// demoLocalGuard bounds a demo on the local host (Go's cache is the
// host's).
const demoLocalGuard = 5 * time.Minute

// runDemo runs `goalrun demo args…` from the binary bin in dir, with env
// added to baseEnv (and DOCKER_HOST passed through unless env sets it).
func runDemo(t *testing.T, bin, dir string, guard time.Duration, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"demo"}, args...)...)
	cmd.Dir = dir
	cmd.Env = baseEnv()
	if h, ok := os.LookupEnv("DOCKER_HOST"); ok && !hasEnv(env, "DOCKER_HOST") {
		cmd.Env = append(cmd.Env, "DOCKER_HOST="+h)
	}
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("goalrun demo %q did not end within %s\nstdout:\n%s\nstderr:\n%s", args, guard, out.Bytes(), errb.Bytes())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("running goalrun demo: %v", err)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: out.Bytes(), stderr: errb.Bytes()}
}

func hasEnv(env []string, name string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			return true
		}
	}
	return false
}

// claudeCLI returns the Claude Code executable (GOALRUN_CLAUDE_BIN, else
// PATH), or skips naming the condition (fails with GOALRUN_REQUIRE_AGENTS=1).
func claudeCLI(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(claudeBinEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s=%s: %v", claudeBinEnv, p, err)
		}
		return p
	}
	if p, err := exec.LookPath("claude"); err == nil {
		return p
	}
	msg := "claude code CLI unavailable: " + claudeBinEnv + " is unset and claude is not on PATH"
	if os.Getenv("GOALRUN_REQUIRE_AGENTS") == "1" {
		t.Fatal(msg + " (GOALRUN_REQUIRE_AGENTS=1)")
	}
	t.Skip(msg)
	return ""
}

// pathWithoutClaude is PATH without the folders that hold a claude
// executable, so the demo cannot find Claude Code.
func pathWithoutClaude() string {
	var keep []string
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if st, err := os.Stat(filepath.Join(dir, "claude")); err == nil && !st.IsDir() {
			continue
		}
		keep = append(keep, dir)
	}
	return strings.Join(keep, string(filepath.ListSeparator))
}

// readEvents reads an events file and checks the stream's invariant (every
// line an event, exactly one terminal event, last).
func readEvents(t *testing.T, path string) []report.Event {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the events file: %v", err)
	}
	return result{stderr: b}.events(t)
}

// printed returns the value after "label " on the line of out that starts
// with label (e.g. "document:").
func printed(t *testing.T, out []byte, label string) string {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), label); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("stdout has no %q line:\n%s", label, out)
	return ""
}

// assertDemoVerdict checks what every successful demo shows.
func assertDemoVerdict(t *testing.T, d map[string]any, mode, network string) {
	t.Helper()
	for path, want := range map[string]any{
		"status": "success", "conclusion": "success",
		"goal/passed": true, "goal/grounded": true, "goal/iterations": 2.0, "goal/check": demoCheck,
		"sandbox/mode": mode, "sandbox/network": network,
		"changes/files_changed": 1.0, "changes/check_modified": false,
	} {
		if got := get(d, strings.Split(path, "/")...); got != want {
			t.Errorf("%s = %v, want %v", path, got, want)
		}
	}
	// The demo's workspace is a new temporary copy each run: a kept deps
	// volume could never be reused, and would evict a real project's.
	if v := get(d, "sandbox", "setup_deps_volume"); v != nil {
		t.Errorf("sandbox.setup_deps_volume = %v: the demo kept its deps volume", v)
	}
	its, _ := d["iterations"].([]any)
	if len(its) != 3 {
		t.Fatalf("iterations %v, want check #0 and two turns", d["iterations"])
	}
	for i, wantPassed := range []bool{false, false, true} {
		if got := get(its[i].(map[string]any), "check", "passed"); got != wantPassed {
			t.Errorf("iteration %d check passed = %v, want %v", i, got, wantPassed)
		}
	}
}

// TestDemoDockerClaude is issue 7's demo "Must show": in the Docker sandbox
// with egress, the real Claude Code CLI, driven by goalrun's scripted model
// server through the egress proxy, makes the demo pass, grounded, in 2
// iterations; the receipts come from the CLI's own stream; the sandbox held
// only the dummy key. It runs the human mode and reads the document and
// the events from the files the demo names.
func TestDemoDockerClaude(t *testing.T) {
	dockerEngine(t)
	claude := claudeCLI(t)
	bin := dockertest.GoalrunBinary(t) // static: the egress relay
	r := runDemo(t, bin, repoRoot(t), demoGuard, []string{claudeBinEnv + "=" + claude}, "--sandbox", "docker")
	if r.code != 0 {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("stdout:\n%s", r.stdout)

	docPath := printed(t, r.stdout, "document:")
	b, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	reporttest.Validate(t, b)
	var d map[string]any
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(docPath)) })
	assertDemoVerdict(t, d, "docker", "egress")

	// The real CLI: its name, version and session from its own stream, the
	// scripted model's name, and receipts of Claude Code's tools.
	if get(d, "agent", "name") != "claude" || get(d, "agent", "version") == nil || get(d, "agent", "session_id") == nil {
		t.Errorf("agent %v, want claude with the CLI's version and session", d["agent"])
	}
	if d["model_used"] != demoModel {
		t.Errorf("model_used %v, want %q", d["model_used"], demoModel)
	}
	byTool, _ := get(d, "receipts", "by_tool").(map[string]any)
	for tool, want := range map[string]float64{"Read": 3, "Edit": 2, "Bash": 1} {
		if byTool[tool] != want {
			t.Errorf("receipts.by_tool[%s] = %v, want %v (by_tool %v)", tool, byTool[tool], want, byTool)
		}
	}
	if _, ok := byTool["command"]; ok || get(d, "receipts", "failed") != 0.0 {
		t.Errorf("receipts %v: want only Claude Code's tools, none failed", d["receipts"])
	}
	if get(d, "turns") != 8.0 {
		t.Errorf("turns %v: want the CLI's own 4+4 model turns over the 2 goalrun turns", d["turns"])
	}
	for _, it := range d["iterations"].([]any)[1:] {
		if a := get(it.(map[string]any), "agent"); get(a.(map[string]any), "status") != "success" || get(a.(map[string]any), "turns") != 4.0 {
			t.Errorf("agent step %v, want success after 4 model turns", a)
		}
	}

	// Egress: the model server was the one destination (no allowlist, no
	// denial), and the key never entered the sandbox.
	if s, _ := get(d, "sandbox", "secrets_in_sandbox").([]any); len(s) != 0 {
		t.Errorf("secrets_in_sandbox %v, want none (the proxy adds the key)", s)
	}
	if get(d, "sandbox", "egress_denied") != 0.0 || get(d, "sandbox", "egress_allowlist") != nil {
		t.Errorf("egress: denied %v, allowlist %v; want 0 and none", get(d, "sandbox", "egress_denied"), get(d, "sandbox", "egress_allowlist"))
	}
	if get(d, "sandbox", "read_only_rootfs") != true || get(d, "sandbox", "tier") != sandbox.TierEgressOnly {
		t.Errorf("sandbox %v", d["sandbox"])
	}

	// Turn 1's "All tests pass now." came before any check: the check
	// after it failed (goal #1 not met), the loop went on, and the final
	// document holds turn 2's summary with no ungrounded claim (its own
	// words are backed by the passing check). The premature claim is in the
	// events (the agent's words), never in the verdict.
	evs := readEvents(t, printed(t, r.stdout, "events:"))
	claimAt, notMetAt := -1, -1
	for i, e := range evs {
		switch {
		case e.Type == report.EventText && strings.Contains(e.Message, demoPrematureClaim) && e.Data["iteration"] == 1.0:
			claimAt = i
		case e.Type == report.EventGoalEvaluated && e.Data["iteration"] == 1.0:
			notMetAt = i
			if e.Data["met"] != false || e.Data["grounded"] != false {
				t.Errorf("goal #1 evaluated %v, want not met", e.Data)
			}
		}
	}
	if claimAt < 0 || notMetAt < claimAt {
		t.Errorf("want turn 1's %q text event before goal #1 (not met): text at %d, goal at %d", demoPrematureClaim, claimAt, notMetAt)
	}
	if claims, ok := d["ungrounded_claims"].([]any); !ok || len(claims) != 0 {
		t.Errorf("ungrounded_claims %v, want [] (the final summary is backed by the check)", d["ungrounded_claims"])
	}
	if s, _ := d["summary"].(string); strings.Contains(s, demoPrematureClaim) || !strings.Contains(s, "Fixed Mean") {
		t.Errorf("summary %q, want turn 2's", s)
	}
	if countType(evs, report.EventAgentStarted) != 2 || countType(evs, report.EventCheckFinished) != 3 {
		t.Errorf("want 2 agent turns and 3 checks in the events")
	}

	// What the demo says in words.
	for _, want := range []string{
		"goalrun: goal met · grounded · 2 iterations · conclusion success",
		"agent: Claude Code 2.1", "(the real CLI, ",
		"  model:     goalrun's scripted demo server at http://127.0.0.1:", "not a real model",
		"model API key: the sandbox held only goalrun's dummy key; goalrun's egress proxy added the demo key on the way to the model server (8 of 8 model requests)",
		"sandbox: docker, network egress",
		"The agent's last words (its own account, not verified by goalrun):",
		"workspace: removed",
	} {
		if !bytes.Contains(r.stdout, []byte(want)) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	assertDemoTerminal(t, r)
	if _, err := os.Stat(filepath.Join(filepath.Dir(docPath), "workspace")); !os.IsNotExist(err) {
		t.Errorf("the workspace was not removed without --keep: %v", err)
	}
	// Live progress on stderr: Claude Code's tool calls as they happened.
	for _, want := range []string{"tool    Read  /workspace/calc_test.go", "tool    Edit  /workspace/calc.go", "tool    Bash  gofmt -l .", "resuming "} {
		if !bytes.Contains(r.stderr, []byte(want)) {
			t.Errorf("the progress view lacks %q:\n%s", want, r.stderr)
		}
	}
}

// TestDemoCommandAgentFallback: without Claude Code the demo runs the
// command agent with the demo's fix script (one fix per turn) and says why.
// It runs on the local host to keep the suite fast; the command agent in
// the Docker sandbox is TestDockerSandboxEndToEnd's.
func TestDemoCommandAgentFallback(t *testing.T) {
	env := []string{"PATH=" + pathWithoutClaude(), claudeBinEnv + "="}
	t.Run("json", func(t *testing.T) {
		r := runDemo(t, goalrunBin, repoRoot(t), demoLocalGuard, env, "--json", "--sandbox", "local")
		d := r.doc(t)
		r.events(t)
		if r.code != 0 {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		assertDemoVerdict(t, d, "local", "host")
		if get(d, "agent", "name") != "command" || get(d, "receipts", "by_tool", "command") != 2.0 {
			t.Errorf("agent %v receipts %v, want the command agent's 2 runs of fix.sh", d["agent"], d["receipts"])
		}
		if d["model_used"] != nil {
			t.Errorf("model_used %v, want none", d["model_used"])
		}
	})
	t.Run("human", func(t *testing.T) {
		r := runDemo(t, goalrunBin, repoRoot(t), demoLocalGuard, env, "--sandbox", "local", "--keep")
		if r.code != 0 {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		ws := printed(t, r.stdout, "workspace (kept):")
		t.Cleanup(func() { os.RemoveAll(filepath.Dir(ws)) })
		for _, want := range []string{
			"  agent:     the command agent running the demo's fix.sh, which fixes one bug per turn (Claude Code (claude) is not on PATH and GOALRUN_CLAUDE_BIN is not set)",
			"  model:     none", "goalrun: goal met · grounded · 2 iterations · conclusion success",
			"The agent's last words (its own account, not verified by goalrun):\n    Turn 2: fixed Mean",
		} {
			if !bytes.Contains(r.stdout, []byte(want)) {
				t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
			}
		}
		assertDemoTerminal(t, r)
		if n := bytes.Count(r.stdout, []byte("the command agent running the demo's fix.sh")); n != 1 {
			t.Errorf("the agent is explained %d times, want once (the introduction)", n)
		}
		// Turn 1's words, with the claim the check after it overtakes, are
		// in the progress view, before that check's failure.
		said := regexp.MustCompile(`says +Turn 1: fixed Sum, which skipped the first element\. ` + regexp.QuoteMeta(demoPrematureClaim)).FindIndex(r.stderr)
		failed := regexp.MustCompile(`check #1  go test \./\.\.\.  exit 1 \(\d+\.\ds\): TestMean failing in example\.com/calc`).FindIndex(r.stderr)
		if said == nil || failed == nil || failed[0] < said[0] {
			t.Errorf("the progress view does not show turn 1's claim and then the check failing:\n%s", r.stderr)
		}
		md, err := os.ReadFile(printedPath(t, r.stdout, "report:"))
		if err != nil || !bytes.Contains(md, []byte("### ✅ goal met · grounded")) {
			t.Errorf("the markdown report file (%v):\n%s", err, md)
		}
		b, err := os.ReadFile(filepath.Join(ws, demoCodeFile))
		if err != nil || !bytes.Contains(b, []byte("for i := 0;")) || !bytes.Contains(b, []byte("float64(len(xs))\n")) {
			t.Errorf("the kept workspace's calc.go is not fixed (%v):\n%s", err, b)
		}
		src, _ := os.ReadFile(filepath.Join(repoRoot(t), "examples", "demo", demoCodeFile))
		if !bytes.Contains(src, []byte(demoSumBug)) || !bytes.Contains(src, []byte(demoMeanBug)) {
			t.Errorf("the demo project itself was changed; the demo must work on a copy")
		}
	})
	t.Run("markdown", func(t *testing.T) {
		r := runDemo(t, goalrunBin, repoRoot(t), demoLocalGuard, append(env, "TMPDIR="+t.TempDir()), "--sandbox", "local", "--markdown")
		if r.code != 0 || !bytes.HasPrefix(r.stdout, []byte("### ✅ goal met · grounded")) || bytes.Contains(r.stdout, []byte("\ntime: ")) {
			t.Errorf("--markdown: exit %d, stdout is not the markdown report alone:\n%s", r.code, r.stdout)
		}
	})
}

// TestDemoLocalFallback: with DOCKER_HOST pointing at nothing, the demo
// falls back to the local host and the document's posture says so. The
// agent is Claude Code when it is installed (then the model key is in the
// sandbox, as the posture says), else the command agent. The binary is the
// ordinary (cgo) build: without an Engine the relay is not needed.
func TestDemoLocalFallback(t *testing.T) {
	env := []string{"DOCKER_HOST=unix://" + filepath.Join(t.TempDir(), "no-engine.sock")}
	claude := ""
	if p := os.Getenv(claudeBinEnv); p != "" {
		claude = p
	} else if p, err := exec.LookPath("claude"); err == nil {
		claude = p
	}
	if claude != "" {
		env = append(env, claudeBinEnv+"="+claude)
	}
	r := runDemo(t, goalrunBin, repoRoot(t), demoLocalGuard, env, "--json")
	d := r.doc(t)
	evs := r.events(t)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	assertDemoVerdict(t, d, "local", "host")
	notice, _ := get(d, "sandbox", "fallback_notice").(string)
	if !strings.Contains(notice, "the Docker sandbox is unavailable") || !strings.Contains(notice, "egress was asked for") {
		t.Errorf("fallback_notice %q", notice)
	}
	ready := false
	for _, e := range evs {
		if e.Type == report.EventSandboxReady && e.Data["fallback_notice"] == notice {
			ready = true
		}
	}
	if !ready {
		t.Errorf("the sandbox_ready event does not carry the fallback notice")
	}
	secrets, _ := get(d, "sandbox", "secrets_in_sandbox").([]any)
	if claude != "" {
		if get(d, "agent", "name") != "claude" || get(d, "receipts", "by_tool", "Edit") != 2.0 {
			t.Errorf("agent %v receipts %v, want Claude Code's", d["agent"], d["receipts"])
		}
		if len(secrets) != 1 || secrets[0] != "ANTHROPIC_API_KEY" {
			t.Errorf("secrets_in_sandbox %v: without the proxy the agent holds the (demo) key, and the posture must say so", secrets)
		}
	} else {
		t.Logf("Claude Code is not installed: the fallback ran the command agent")
		if get(d, "agent", "name") != "command" || len(secrets) != 0 {
			t.Errorf("agent %v secrets %v", d["agent"], secrets)
		}
	}
}

// TestDemoStartupErrors: what the demo refuses, before any run, with exit 2
// and a message that says what to do.
func TestDemoStartupErrors(t *testing.T) {
	elsewhere := t.TempDir()
	outsideDemo := t.TempDir() // the demo project, outside any goalrun source tree
	if err := os.CopyFS(outsideDemo, os.DirFS(filepath.Join(repoRoot(t), "examples", "demo"))); err != nil {
		t.Fatal(err)
	}
	notDemo := t.TempDir()
	if err := os.WriteFile(filepath.Join(notDemo, "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		dir    string
		args   []string
		want   []string
		static bool // the case needs a dynamic goalrun binary
	}{
		{"no demo project above the current folder", elsewhere, nil,
			[]string{"cannot find the demo project", elsewhere, "cd goalrun && go run ./cmd/goalrun demo", "--source DIR"}, false},
		{"--source is not the demo project", elsewhere, []string{"--source", notDemo},
			[]string{"--source " + notDemo, "not the demo project", "calc_test.go"}, false},
		{"unknown flag", repoRoot(t), []string{"--frobnicate"}, []string{"flag provided but not defined", "goalrun demo --help"}, false},
		{"positional argument", repoRoot(t), []string{"fix it"}, []string{`unexpected argument "fix it"`}, false},
		{"unknown agent", repoRoot(t), []string{"--agent", "codex"}, []string{`--agent "codex": must be auto, claude or command`}, false},
		{"unknown sandbox", repoRoot(t), []string{"--sandbox", "vm"}, []string{`--sandbox "vm": must be one of docker, auto, local`}, false},
		{"a dynamic goalrun outside goalrun's source tree has no relay", elsewhere, []string{"--sandbox", "docker", "--source", outsideDemo},
			[]string{"needs a static goalrun for its egress relay", "dynamically linked", "no github.com/goalrun/goalrun module",
				"CGO_ENABLED=0 go run ./cmd/goalrun demo", "--sandbox local"}, true},
		{"--agent claude without Claude Code", repoRoot(t), []string{"--agent", "claude", "--sandbox", "local"},
			[]string{"--agent claude", "not on PATH", claudeBinEnv}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := []string{"PATH=" + pathWithoutClaude(), claudeBinEnv + "="}
			r := runDemo(t, goalrunBin, tc.dir, guard, env, tc.args...)
			if tc.static && staticBinary(t, goalrunBin) {
				t.Skipf("the test's goalrun binary is static (CGO_ENABLED=0 or no C compiler), so the demo never refuses it")
			}
			if r.code != exitBadInput {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, exitBadInput, r.stdout, r.stderr)
			}
			for _, w := range tc.want {
				if !bytes.Contains(r.stderr, []byte(w)) {
					t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
				}
			}
			if len(r.stdout) != 0 {
				t.Errorf("stdout is not empty:\n%s", r.stdout)
			}
			// --json: the same refusal as a startup-error document.
			rj := runDemo(t, goalrunBin, tc.dir, guard, env, append([]string{"--json"}, tc.args...)...)
			d := rj.doc(t)
			rj.events(t)
			if rj.code != r.code || d["status"] != "error" {
				t.Errorf("--json: exit %d, document %v", rj.code, d)
			}
		})
	}
}

// TestDemoBuildsStaticRelay: the README's `go run ./cmd/goalrun demo`
// builds goalrun with cgo, which cannot run the egress relay inside the
// container; the demo then builds a static goalrun from the source tree it
// found (once per source version, in the user's cache folder), says so in
// one line, and the run has its egress sandbox.
func TestDemoBuildsStaticRelay(t *testing.T) {
	if staticBinary(t, goalrunBin) {
		t.Skipf("the test's goalrun binary is static (CGO_ENABLED=0 or no C compiler): it is its own relay")
	}
	dockerEngine(t)
	env := []string{"PATH=" + pathWithoutClaude(), claudeBinEnv + "="}
	r := runDemo(t, goalrunBin, repoRoot(t), demoGuard, env, "--sandbox", "docker", "--agent", "command")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !bytes.Contains(r.stdout, []byte("  relay:     this goalrun was built with cgo, so the egress relay is a static build of "+repoRoot(t)+"\n")) {
		t.Errorf("the introduction does not say why a relay is built:\n%s", r.stdout)
	}
	line := regexp.MustCompile(`(?m)^relay: (\S+/goalrun-relay-[0-9a-f]{16}) \((built now in \d+\.\d s|built before for this source)\)$`).FindSubmatch(r.stdout)
	if line == nil {
		t.Fatalf("stdout lacks the relay line:\n%s", r.stdout)
	}
	if bytes.Contains(line[2], []byte("built now")) && !bytes.Contains(r.stderr, []byte("prepare   building a static goalrun for the egress relay")) {
		t.Errorf("the relay was built without a progress line:\n%s", r.stderr)
	}
	if !staticBinary(t, string(line[1])) {
		t.Errorf("%s is not static", line[1])
	}
	docPath := printed(t, r.stdout, "document:")
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(docPath)) })
	b, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	assertDemoVerdict(t, d, "docker", "egress")
}

func TestSourceHash(t *testing.T) {
	root := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module "+goalrunModule+"\n")
	write("cmd/goalrun/main.go", "package main\n")
	base, err := sourceHash(root, "go1.26.8")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, rel, body string
		changes         bool
	}{
		{"a test file", "cmd/goalrun/x_test.go", "package main", false},
		{"testdata", "report/testdata/a.go", "package x", false},
		{"a README", "README.md", "# x", false},
		{"a source file", "sandbox/x.go", "package sandbox", true},
		{"go.sum", "go.sum", "x v1 h1:y", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			write(tc.rel, tc.body)
			defer os.Remove(filepath.Join(root, tc.rel))
			got, err := sourceHash(root, "go1.26.8")
			if err != nil {
				t.Fatal(err)
			}
			if (got != base) != tc.changes {
				t.Errorf("hash changed = %v, want %v", got != base, tc.changes)
			}
		})
	}
	if other, _ := sourceHash(root, "go1.27"); other == base {
		t.Errorf("another toolchain gives the same hash")
	}
	if got, err := findGoalrunModule(filepath.Join(root, "cmd", "goalrun")); err != nil || got != root {
		t.Errorf("findGoalrunModule = %q, %v; want %q", got, err, root)
	}
	if _, err := findGoalrunModule(t.TempDir()); err == nil {
		t.Errorf("findGoalrunModule found a module in an empty folder")
	}
}

// staticBinary reports whether the ELF file bin has no interpreter.
func staticBinary(t *testing.T, bin string) bool {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}

func TestDemoHelp(t *testing.T) {
	r := runDemo(t, goalrunBin, t.TempDir(), guard, nil, "--help")
	if r.code != 0 {
		t.Fatalf("exit %d", r.code)
	}
	for _, want := range []string{"-source", "-json", "-keep", "-agent", "-sandbox", claudeBinEnv, "not a real", "egress"} {
		if !bytes.Contains(r.stdout, []byte(want)) {
			t.Errorf("demo --help lacks %q:\n%s", want, r.stdout)
		}
	}
}

// TestDemoScriptPick: the scripted model answers by turn (how often the
// task is in the history) and by the tool results of that turn, whatever
// the CLI's grouping of messages; side requests without tools get text.
func TestDemoScriptPick(t *testing.T) {
	var root atomic.Pointer[string]
	s := demoScript(&root)
	turns := demoTurns(&root)
	n1 := len(turns[0])
	req := func(tasks, toolResults int, tools bool) *scripted.Request {
		var body strings.Builder
		body.WriteString(`{"model":"m","messages":[`)
		for i := 0; i < tasks; i++ {
			fmt.Fprintf(&body, `{"role":"user","content":"%s\n\nThe check failed."},`, demoTask)
		}
		body.WriteString(`{"role":"user","content":"x"}]`)
		if tools {
			body.WriteString(`,"tools":[{"name":"Read"}]`)
		}
		body.WriteString("}")
		return &scripted.Request{Body: []byte(body.String()), ToolResults: toolResults}
	}
	for _, tc := range []struct {
		name string
		r    *scripted.Request
		want int
	}{
		{"turn 1 starts: read the test", req(1, 0, true), 0},
		{"turn 1 after two reads: edit Sum", req(1, 2, true), 2},
		{"turn 1 after its three tools: the premature claim", req(1, 3, true), 3},
		{"turn 1 beyond its script stays on its last reply", req(1, 9, true), n1 - 1},
		{"turn 2 starts with turn 1's three results in the history", req(2, 3, true), n1},
		{"turn 2 after read and edit: gofmt", req(2, 5, true), n1 + 2},
		{"turn 2 ends", req(2, 6, true), n1 + 3},
		{"a third turn replays turn 2's end", req(3, 40, true), n1 + len(turns[1]) - 1},
		{"no task at all counts as turn 1", req(0, 0, true), 0},
		{"a side request without tools gets plain text", req(1, 0, false), len(s.Replies) - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := s.Pick(tc.r); got != tc.want {
				t.Errorf("Pick = %d, want %d", got, tc.want)
			}
		})
	}
	if last := s.Replies[len(s.Replies)-1]; len(last.Tools) != 0 || last.Text == "" {
		t.Errorf("the side-request reply %+v must be text only", last)
	}
	// Each turn opens with the label, and turn 1 ends with the claim.
	for i, turn := range turns {
		if !strings.HasPrefix(turn[0].Text, demoLabel) {
			t.Errorf("turn %d does not open with the label: %q", i+1, turn[0].Text)
		}
	}
	if !strings.HasSuffix(turns[0][n1-1].Text, demoPrematureClaim) {
		t.Errorf("turn 1 ends with %q", turns[0][n1-1].Text)
	}
}

// TestDemoScriptEdits: the scripted Edit calls match examples/demo/calc.go
// exactly (Claude Code's Edit replaces one exact, unique string), and the
// two fixes make the file what the fix script makes it.
func TestDemoScriptEdits(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(repoRoot(t), "examples", "demo", demoCodeFile))
	if err != nil {
		t.Fatal(err)
	}
	code := string(src)
	for _, bug := range []string{demoSumBug, demoMeanBug} {
		if n := strings.Count(code, bug); n != 1 {
			t.Fatalf("%q occurs %d times in calc.go, want exactly once", bug, n)
		}
	}
	var root atomic.Pointer[string]
	for _, turn := range demoTurns(&root) {
		for _, r := range turn {
			for _, tc := range r.Tools {
				if tc.Name != "Edit" {
					continue
				}
				in := tc.Input.(map[string]any)
				code = strings.Replace(code, in["old_string"].(string), in["new_string"].(string), 1)
			}
		}
	}
	if strings.Contains(code, "bug:") || !strings.Contains(code, demoSumFix) || !strings.Contains(code, demoMeanFix) {
		t.Errorf("after the scripted edits calc.go is:\n%s", code)
	}
}

func TestWorkspacePathMarshal(t *testing.T) {
	var root atomic.Pointer[string]
	p := workspacePath{root: &root, name: "calc.go"}
	for _, tc := range []struct {
		name, root, want string
	}{
		{"before the sandbox started", "", `"calc.go"`},
		{"Docker", sandbox.DockerRoot, `"/workspace/calc.go"`},
		{"local host", "/tmp/goalrun-demo-1/workspace", `"/tmp/goalrun-demo-1/workspace/calc.go"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.root
			root.Store(&r)
			b, err := json.Marshal(map[string]any{"file_path": p})
			if err != nil {
				t.Fatal(err)
			}
			if want := `{"file_path":` + tc.want + `}`; string(b) != want {
				t.Errorf("got %s, want %s", b, want)
			}
		})
	}
}

// assertDemoTerminal checks what the demo prints on a terminal: no raw
// markdown, no JSON document, no truncation marker, and the time line last.
func assertDemoTerminal(t *testing.T, r result) {
	t.Helper()
	for _, bad := range []string{"### ", "```", `{"schema":"goalrun/1"`, "truncated:"} {
		if bytes.Contains(r.stdout, []byte(bad)) || bytes.Contains(r.stderr, []byte(bad)) {
			t.Errorf("the terminal shows %q:\n%s\n%s", bad, r.stdout, r.stderr)
		}
	}
	out := strings.TrimRight(string(r.stdout), "\n")
	last := out[strings.LastIndex(out, "\n")+1:]
	if !regexp.MustCompile(`^time: sandbox start \d+(\.\d s| ms) · .*checks \(3\) \d+(\.\d s| ms) · agent turns \(2\) \d+(\.\d s| ms) · other \d+(\.\d s| ms) · total \d+\.\d s`).MatchString(last) {
		t.Errorf("stdout does not end with the time split: %q", last)
	}
}

// printedPath is printed's value up to the first blank (a path followed by
// words in parentheses).
func printedPath(t *testing.T, out []byte, label string) string {
	t.Helper()
	p := printed(t, out, label)
	if i := strings.Index(p, " "); i > 0 {
		p = p[:i]
	}
	return p
}
