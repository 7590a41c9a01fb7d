package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/report/reporttest"
	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/dockertest"
)

// goalrunBin is the goalrun binary built once for the whole package, so the
// end-to-end tests exercise the real program: flags, signals, exit codes,
// stdout and stderr.
var goalrunBin string

func TestMain(m *testing.M) {
	dockertest.HelperMain() // this binary re-run as another user (dockertest.AsUser)
	dir, err := os.MkdirTemp("", "goalrun-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	goalrunBin = filepath.Join(dir, "goalrun")
	build := exec.Command("go", "build", "-o", goalrunBin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building goalrun:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	removeKeptDeps()
	dockertest.Cleanup()
	os.Exit(code)
}

// guard bounds a whole goalrun invocation in these tests: a hang guard, not
// a timing assertion.
const guard = 2 * time.Minute

// result is one goalrun invocation.
type result struct {
	code           int
	stdout, stderr []byte
	pid            int // the goalrun process's id (its objects' goalrun.owner label names it)
}

// goalrun runs the binary in dir with args and env (added to a minimal
// environment: PATH, HOME and Go's caches, so `go test` checks work).
func goalrun(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	cmd := exec.CommandContext(ctx, goalrunBin, args...)
	cmd.Dir = dir
	cmd.Env = append(baseEnv(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("running goalrun: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("goalrun %q did not end within %s", args, guard)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: out.Bytes(), stderr: errb.Bytes(), pid: cmd.Process.Pid}
}

func baseEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "GOCACHE", "GOMODCACHE", "GOPATH", "GOROOT", "GOFLAGS", "GOPROXY", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, "GOTOOLCHAIN=local")
}

// doc decodes and schema-validates the one document on stdout.
func (r result) doc(t *testing.T) map[string]any {
	t.Helper()
	b := bytes.TrimSuffix(r.stdout, []byte("\n"))
	if bytes.Count(b, []byte("\n")) != 0 {
		t.Fatalf("stdout is not exactly one document line:\n%s", r.stdout)
	}
	reporttest.Validate(t, b)
	var d map[string]any
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, r.stdout)
	}
	return d
}

// events decodes stderr as JSONL events and checks the stream's invariant:
// every line an event, exactly one terminal event, and it is the last.
func (r result) events(t *testing.T) []report.Event {
	t.Helper()
	var evs []report.Event
	sc := bufio.NewScanner(bytes.NewReader(r.stderr))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e report.Event
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("stderr line is not an event: %v\n%s", err, sc.Text())
		}
		evs = append(evs, e)
	}
	terminal := 0
	for _, e := range evs {
		if e.Type == report.EventCompleted || e.Type == report.EventFailed {
			terminal++
		}
	}
	if terminal != 1 || len(evs) == 0 || (evs[len(evs)-1].Type != report.EventCompleted && evs[len(evs)-1].Type != report.EventFailed) {
		t.Fatalf("want exactly one terminal event, last; got %d in:\n%s", terminal, r.stderr)
	}
	return evs
}

func countType(evs []report.Event, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// get reads a nested value: get(d, "goal", "passed").
func get(d map[string]any, path ...string) any {
	var v any = d
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// demoWorkspace copies examples/demo to a temporary directory.
func demoWorkspace(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	src := filepath.Join("..", "..", "examples", "demo")
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestDemo is issue 2's first "Must show": the demo ends passed and
// grounded. Its fix script fixes one bug per turn on purpose (see
// examples/demo/fix.sh), so the loop takes 2 iterations.
func TestDemo(t *testing.T) {
	ws := demoWorkspace(t)
	r := goalrun(t, ws, nil, "run", "--json", "--sandbox", "local", "--agent", "command",
		"--agent-bin", "./fix.sh", "--until", "go test ./...", "Fix the failing tests.")
	d := r.doc(t)
	evs := r.events(t)
	if r.code != 0 {
		t.Fatalf("exit %d, want 0\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	for path, want := range map[string]any{
		"status": "success", "conclusion": "success",
		"goal/passed": true, "goal/grounded": true, "goal/iterations": 2.0, "goal/halt": nil,
		"sandbox/mode": "local", "sandbox/network": "host", "receipts/total": 2.0,
	} {
		if got := get(d, strings.Split(path, "/")...); got != want {
			t.Errorf("%s = %v, want %v", path, got, want)
		}
	}
	its, _ := d["iterations"].([]any)
	if len(its) != 3 {
		t.Fatalf("%d iterations, want 3 (check #0 and two turns)", len(its))
	}
	if tail, _ := get(its[0].(map[string]any), "check", "tail").(string); !strings.Contains(tail, "FAIL") {
		t.Errorf("iteration 0's tail does not show the failure: %q", tail)
	}
	if n := countType(evs, report.EventAgentStarted); n != 2 {
		t.Errorf("%d agent_started events, want 2", n)
	}
	if n := countType(evs, report.EventGoalEvaluated); n != 3 {
		t.Errorf("%d goal_evaluated events, want 3", n)
	}
	if evs[len(evs)-1].Type != report.EventCompleted {
		t.Errorf("terminal event %q, want completed", evs[len(evs)-1].Type)
	}
	if src, _ := os.ReadFile(filepath.Join("..", "..", "examples", "demo", "calc.go")); !bytes.Contains(src, []byte("for i := 1;")) {
		t.Errorf("the repository's examples/demo/calc.go lost its bug: the demo must run on a copy")
	}
	if fixed, _ := os.ReadFile(filepath.Join(ws, "calc.go")); bytes.Contains(fixed, []byte("bug:")) {
		t.Errorf("the workspace copy still has a bug comment:\n%s", fixed)
	}
}

func TestAlreadyPassingCheckNeverStartsTheAgent(t *testing.T) {
	ws := t.TempDir()
	r := goalrun(t, ws, nil, "run", "--json", "--sandbox", "local", "--agent", "command",
		"--agent-bin", "touch agent-ran", "--until", "true")
	d := r.doc(t)
	evs := r.events(t)
	if r.code != 0 || get(d, "goal", "passed") != true || get(d, "goal", "grounded") != true || get(d, "goal", "iterations") != 0.0 {
		t.Fatalf("exit %d goal %v", r.code, d["goal"])
	}
	if exists(filepath.Join(ws, "agent-ran")) {
		t.Errorf("the agent command ran")
	}
	if n := countType(evs, report.EventAgentStarted); n != 0 {
		t.Errorf("%d agent_started events", n)
	}
}

// TestNeverFixingAgentHaltsAtMaxIterations: an agent that keeps changing
// the workspace without fixing anything runs every turn. (An agent that
// changes nothing at all halts earlier, no_progress: see
// TestGroundingThroughTheBinary.)
func TestNeverFixingAgentHaltsAtMaxIterations(t *testing.T) {
	ws := t.TempDir()
	r := goalrun(t, ws, nil, "run", "--json", "--sandbox", "local", "--agent", "command",
		"--agent-bin", "echo turn $GOALRUN_ITERATION >> turns; echo I tried", "--until", "echo still failing; exit 1")
	d := r.doc(t)
	r.events(t)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s", r.code, r.stdout)
	}
	if get(d, "goal", "halt") != report.HaltMaxIterations || get(d, "goal", "iterations") != 5.0 || get(d, "status") != "success" {
		t.Errorf("goal %v status %v", d["goal"], d["status"])
	}
	its, _ := d["iterations"].([]any)
	if len(its) != 6 || get(d, "iterations_omitted") != 0.0 {
		t.Fatalf("%d iterations recorded (omitted %v), want all 6 (check #0 and 5 turns)", len(its), d["iterations_omitted"])
	}
	for i, it := range its {
		m := it.(map[string]any)
		if m["n"] != float64(i) || get(m, "check", "exit_code") != 1.0 || (i > 0 && get(m, "agent", "status") != "success") {
			t.Errorf("iteration %d: %v", i, m)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "turns")); strings.Count(string(b), "turn") != 5 {
		t.Errorf("the agent ran %d times, want 5", strings.Count(string(b), "turn"))
	}
}

func TestCheckNotRunnable(t *testing.T) {
	ws := t.TempDir()
	r := goalrun(t, ws, nil, "run", "--json", "--sandbox", "local", "--agent", "command",
		"--agent-bin", "touch agent-ran", "--until", "no-such-cmd")
	d := r.doc(t)
	evs := r.events(t)
	if r.code != 3 {
		t.Fatalf("exit %d, want 3", r.code)
	}
	if d["error"] != report.ErrCheckNotRunnable || get(d, "goal", "iterations") != 0.0 {
		t.Errorf("error %v goal %v", d["error"], d["goal"])
	}
	if msg, _ := d["message"].(string); !strings.Contains(msg, "no-such-cmd") {
		t.Errorf("message does not name the check: %q", msg)
	}
	if exists(filepath.Join(ws, "agent-ran")) || countType(evs, report.EventAgentStarted) != 0 {
		t.Errorf("an agent turn was spent on a check that cannot run")
	}
}

// TestSIGTERMDuringAgentStep: the agent ignores SIGTERM and sleeps; goalrun
// gets SIGTERM once the agent runs, and must write one cancelled document
// and one terminal event and exit 130 within the 5 seconds README.md ("Stopping")
// promises (the deadline is that bound, enforced with a context).
func TestSIGTERMDuringAgentStep(t *testing.T) {
	ws := t.TempDir()
	cmd := exec.Command(goalrunBin, "run", "--json", "--sandbox", "local", "--agent", "command",
		"--agent-bin", "trap '' TERM; touch agent-started; sleep 300; touch agent-finished", "--until", "false")
	cmd.Dir = ws
	cmd.Env = baseEnv()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	deadline := time.Now().Add(guard)
	for !exists(filepath.Join(ws, "agent-started")) {
		if time.Now().After(deadline) {
			t.Fatalf("the agent never started; stderr:\n%s", errb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("goalrun did not exit within 5 s of SIGTERM; stderr:\n%s", errb.String())
	}
	r := result{code: cmd.ProcessState.ExitCode(), stdout: out.Bytes(), stderr: errb.Bytes()}
	d := r.doc(t)
	evs := r.events(t)
	if r.code != 130 {
		t.Errorf("exit %d, want 130", r.code)
	}
	if d["status"] != report.StatusCancelled || d["conclusion"] != report.ConclusionCancelled || get(d, "goal", "halt") != report.HaltInterrupted {
		t.Errorf("status %v conclusion %v goal %v", d["status"], d["conclusion"], d["goal"])
	}
	if last := evs[len(evs)-1]; last.Type != report.EventFailed || last.Data["status"] != report.StatusCancelled {
		t.Errorf("terminal event %+v", last)
	}
	if exists(filepath.Join(ws, "agent-finished")) {
		t.Errorf("the agent step was not stopped")
	}
}

// TestStartupErrors: bad flags and bad YAML exit 2 with the startup-error
// shape (JSON mode) naming what is wrong, or a readable error (human mode).
func TestStartupErrors(t *testing.T) {
	cases := []struct {
		name  string
		yaml  string // .goalrun.yml in the workdir, if any
		args  []string
		code  int
		error string
		want  []string // in the message
	}{
		{"unknown flag", "", []string{"--frobnicate"}, 2, report.ErrBadInput, []string{"frobnicate"}},
		{"no goal", "", []string{"--agent", "command", "--agent-bin", "x"}, 2, report.ErrBadInput, []string{"--until"}},
		{"zero iterations", "", []string{"--until", "true", "--max-iterations", "0"}, 2, report.ErrBadInput, []string{"--max-iterations", "0"}},
		{"bad duration", "", []string{"--until", "true", "--timeout", "soon"}, 2, report.ErrBadInput, []string{"timeout"}},
		{"cost NaN", "", []string{"--until", "true", "--max-cost-usd", "NaN"}, 2, report.ErrBadInput, []string{"--max-cost-usd", "finite"}},
		{"cost infinite", "", []string{"--until", "true", "--max-cost-usd", "+Inf"}, 2, report.ErrBadInput, []string{"--max-cost-usd", "finite"}},
		{"unknown agent", "", []string{"--until", "true", "--agent", "hal9000"}, 2, report.ErrAgentNotFound, []string{"hal9000", "command"}},
		{"command without bin", "", []string{"--until", "true", "--agent", "command"}, 2, report.ErrBadInput, []string{"--agent-bin"}},
		{"bad sandbox", "", []string{"--until", "true", "--sandbox", "podman"}, 2, report.ErrBadInput, []string{"--sandbox", "podman"}},
		{"bad network", "", []string{"--until", "true", "--network", "wifi"}, 2, report.ErrBadInput, []string{"--network", "wifi"}},
		{"network the host cannot enforce", "", []string{"--until", "true", "--sandbox", "local", "--network", "none"}, 2, report.ErrBadInput, []string{"--network", "local"}},
		{"model-backed agent without a network", "", []string{"--until", "true", "--agent", "claude", "--network", "none"}, 2, report.ErrBadInput, []string{"--network none", "claude", "https://api.anthropic.com", "egress"}},
		{"allow-host with a scheme", "", []string{"--until", "true", "--allow-host", "https://api.example.com"}, 2, report.ErrBadInput, []string{"--allow-host", "scheme"}},
		{"two task sources", "", []string{"--until", "true", "--prompt", "a", "b"}, 2, report.ErrBadInput, []string{"more than once"}},
		{"missing prompt file", "", []string{"--until", "true", "--prompt-file", "nope.txt"}, 2, report.ErrBadInput, []string{"--prompt-file", "nope.txt"}},
		{"yaml unknown key", "until: go test ./...\nmax-iteration: 3\n", nil, 2, report.ErrBadInput,
			[]string{".goalrun.yml", "line 2", `unknown key "max-iteration"`, `did you mean "max-iterations"`}},
		{"yaml wrong type", "until: go test ./...\nmax-iterations: many\n", nil, 2, report.ErrBadInput,
			[]string{".goalrun.yml", "line 2", "many"}},
		{"yaml syntax", "until: [go test\n", nil, 2, report.ErrBadInput, []string{".goalrun.yml", "line"}},
		{"yaml bad duration", "until: x\ntimeout: 5 minutes\n", nil, 2, report.ErrBadInput, []string{".goalrun.yml", "line 2", "timeout", "30m"}},
		{"yaml not a mapping", "- until\n", nil, 2, report.ErrBadInput, []string{".goalrun.yml", "mapping"}},
		{"yaml bad value names file and line", "until: x\nsandbox: lxc\n", nil, 2, report.ErrBadInput, []string{`"sandbox"`, ".goalrun.yml line 2", "lxc"}},
		{"check with a NUL byte", "until: \"go test\\0 ./...\"\n", nil, 2, report.ErrBadInput, []string{`"until" in`, "NUL byte at byte 7"}},
		{"agent command with a NUL byte", "until: x\nagent: command\nagent-bin: \"a\\0b\"\n", nil, 2, report.ErrBadInput, []string{"agent-bin", "NUL byte at byte 1"}},
		{"timeout beyond a week", "", []string{"--until", "true", "--timeout", "9223372036s"}, 2, report.ErrBadInput, []string{"--timeout", "at most 168h0m0s"}},
		{"step timeout beyond a week", "until: x\nstep-timeout: 200h\n", nil, 2, report.ErrBadInput, []string{"step-timeout", "at most 168h0m0s"}},
		{"image with an upper-case name", "", []string{"--until", "true", "--image", "UPPER/case"}, 2, report.ErrBadInput, []string{"--image", "UPPER/case", "lower case"}},
		{"task with a NUL byte", "until: x\nprompt: \"fix\\0it\"\n", nil, 2, report.ErrBadInput, []string{"NUL byte at byte 3"}},
		{"config file names an absolute prompt file", "until: x\nprompt-file: /proc/self/environ\n", nil, 2, report.ErrBadInput, []string{".goalrun.yml line 2: prompt-file", "/proc/self/environ", "absolute path", "--prompt-file flag"}},
		{"config file path climbs out", "until: x\noutput: ../../victim.json\n", nil, 2, report.ErrBadInput, []string{".goalrun.yml line 2: output", "leaves the config file's folder"}},
		{"config and no-config", "", []string{"--until", "true", "--config", "a.yml", "--no-config"}, 2, report.ErrBadInput, []string{"--no-config"}},
		{"check over 32 KiB", "", []string{"--until", "true " + strings.Repeat("x", 40_000)}, 2, report.ErrBadInput, []string{"--until is 40005 bytes", "at most 32768", "script"}},
		{"goal text over 32 KiB", "", []string{"--infer-until", strings.Repeat("x", 40_000)}, 2, report.ErrBadInput, []string{"--infer-until is 40000 bytes"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			if tc.yaml != "" {
				if err := os.WriteFile(filepath.Join(ws, ".goalrun.yml"), []byte(tc.yaml), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			t.Run("json", func(t *testing.T) {
				r := goalrun(t, ws, nil, append([]string{"run", "--json"}, tc.args...)...)
				d := r.doc(t)
				evs := r.events(t)
				if r.code != tc.code {
					t.Errorf("exit %d, want %d", r.code, tc.code)
				}
				if d["status"] != "error" || d["conclusion"] != "failure" || d["error"] != tc.error {
					t.Errorf("status %v conclusion %v error %v", d["status"], d["conclusion"], d["error"])
				}
				for _, k := range []string{"goal", "sandbox", "iterations", "summary"} {
					if _, ok := d[k]; ok {
						t.Errorf("startup-error document has %q", k)
					}
				}
				msg, _ := d["message"].(string)
				for _, w := range tc.want {
					if !strings.Contains(msg, w) {
						t.Errorf("message %q does not name %q", msg, w)
					}
				}
				if sugg, _ := d["suggestions"].([]any); len(sugg) == 0 {
					t.Errorf("no suggestions")
				}
				if len(evs) != 1 || evs[0].Type != report.EventFailed {
					t.Errorf("events %+v, want exactly one failed event", evs)
				}
			})
			t.Run("human", func(t *testing.T) {
				r := goalrun(t, ws, nil, append([]string{"run"}, tc.args...)...)
				if r.code != tc.code || len(r.stdout) != 0 {
					t.Errorf("exit %d stdout %q, want %d and nothing", r.code, r.stdout, tc.code)
				}
				for _, w := range tc.want {
					if !bytes.Contains(r.stderr, []byte(w)) {
						t.Errorf("stderr %q does not name %q", r.stderr, w)
					}
				}
			})
		})
	}
}

func TestConfigFileAndFlagPrecedence(t *testing.T) {
	ws := t.TempDir()
	cfg := "until: exit 1\nagent: command\nagent-bin: echo x >> turns\nmax-iterations: 4\nsandbox: local\njson: true\n"
	if err := os.WriteFile(filepath.Join(ws, ".goalrun.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("file alone", func(t *testing.T) {
		r := goalrun(t, ws, nil, "run")
		d := r.doc(t)
		if r.code != 1 || get(d, "goal", "iterations") != 4.0 || get(d, "goal", "check") != "exit 1" {
			t.Errorf("exit %d goal %v", r.code, d["goal"])
		}
	})
	t.Run("flag wins", func(t *testing.T) {
		r := goalrun(t, ws, nil, "run", "--max-iterations", "2", "--until", "test -e never")
		d := r.doc(t)
		if get(d, "goal", "iterations") != 2.0 || get(d, "goal", "check") != "test -e never" {
			t.Errorf("goal %v, want the flags' values", d["goal"])
		}
	})
	t.Run("--config elsewhere", func(t *testing.T) {
		other := filepath.Join(t.TempDir(), "ci.yml")
		if err := os.WriteFile(other, []byte("until: \"true\"\nagent: command\nagent-bin: \"true\"\nsandbox: local\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := goalrun(t, ws, nil, "run", "--json", "--config", other)
		d := r.doc(t)
		if r.code != 0 || get(d, "goal", "check") != "true" {
			t.Errorf("exit %d goal %v", r.code, d["goal"])
		}
	})
}

func TestOutputAndEventsFiles(t *testing.T) {
	ws := t.TempDir()
	out := filepath.Join(t.TempDir(), "doc.json")
	evf := filepath.Join(t.TempDir(), "events.jsonl")
	r := goalrun(t, ws, nil, "run", "--json", "--sandbox", "local", "--agent", "command", "--agent-bin", "touch ok",
		"--until", "test -e ok", "--output", out, "--events", evf)
	r.doc(t)
	fileDoc, err := os.ReadFile(out)
	if err != nil || !bytes.Equal(fileDoc, r.stdout) {
		t.Errorf("--output holds %q (%v), want stdout's document", fileDoc, err)
	}
	fileEvents, err := os.ReadFile(evf)
	if err != nil || !bytes.Equal(fileEvents, r.stderr) {
		t.Errorf("--events differs from stderr's events (%v)", err)
	}
}

// TestResultFilesAreNotFollowed: --output and --events never write
// through a symbolic link (the attack: an agent plants one at the path,
// pointing at a host file such as ~/.bashrc), nor block on a FIFO.
func TestResultFilesAreNotFollowed(t *testing.T) {
	hostFile := func(t *testing.T) string {
		p := filepath.Join(t.TempDir(), "bashrc")
		if err := os.WriteFile(p, []byte("host file\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	untouched := func(t *testing.T, p string) {
		if b, err := os.ReadFile(p); err != nil || string(b) != "host file\n" {
			t.Errorf("the host file was written: %q (%v)", b, err)
		}
	}
	t.Run("output replaced by a symlink during the run", func(t *testing.T) {
		ws, target := t.TempDir(), hostFile(t)
		r := goalrun(t, ws, nil, "run", "--sandbox", "local", "--agent", "command",
			"--agent-bin", "ln -sf "+target+" doc.json && touch ok", "--until", "test -e ok", "--output", "doc.json")
		untouched(t, target)
		// goalrun's own document replaces the agent's link (never written
		// through it), and says so.
		if r.code != 0 || !bytes.Contains(r.stderr, []byte("replaced during the run")) || !bytes.Contains(r.stdout, []byte("document:")) {
			t.Errorf("exit %d; want 0, a warning and the document line\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		if fi, err := os.Lstat(filepath.Join(ws, "doc.json")); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("doc.json is not goalrun's regular file: %v %v", fi, err)
		} else if b, _ := os.ReadFile(filepath.Join(ws, "doc.json")); !bytes.Contains(b, []byte(`"schema":"goalrun/1"`)) {
			t.Errorf("doc.json holds %q", b)
		}
	})
	for _, name := range []string{"--output", "--events"} {
		t.Run(name+" that is a symlink", func(t *testing.T) {
			ws, target := t.TempDir(), hostFile(t)
			if err := os.Symlink(target, filepath.Join(ws, "planted")); err != nil {
				t.Fatal(err)
			}
			r := goalrun(t, ws, nil, "run", "--json", "--sandbox", "local", "--agent", "command", "--agent-bin", "true",
				"--until", "true", name, "planted")
			untouched(t, target)
			d := r.doc(t)
			if r.code != 2 || d["error"] != "BadInput" || !strings.Contains(d["message"].(string), "symbolic link") {
				t.Errorf("exit %d error %v message %v, want 2, BadInput, naming the link", r.code, d["error"], d["message"])
			}
		})
	}
	t.Run("output that is a FIFO", func(t *testing.T) {
		ws := t.TempDir()
		if err := syscall.Mkfifo(filepath.Join(ws, "pipe"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := goalrun(t, ws, nil, "run", "--json", "--sandbox", "local", "--agent", "command", "--agent-bin", "true",
			"--until", "true", "--output", "pipe")
		// Opening a FIFO without a reader fails at once (ENXIO, not a
		// hang); one with a reader is refused as a named pipe.
		msg := ""
		if d := r.doc(t); d["message"] != nil {
			msg = d["message"].(string)
		}
		if r.code != 2 || !strings.HasPrefix(msg, "--output") || !(strings.Contains(msg, "named pipe") || strings.Contains(msg, "no such device")) {
			t.Errorf("exit %d message %q, want 2 refusing the pipe", r.code, msg)
		}
	})
	// What an earlier run's agent could have left in the workspace. The
	// host file and the workspace share one temporary folder, so a hard
	// link between them always works.
	for _, tc := range []struct {
		name, output, want string
		plant              func(ws, target string) error
	}{
		{"output below a planted folder link", "out/bashrc", "symbolic link",
			func(ws, target string) error { return os.Symlink(filepath.Dir(target), filepath.Join(ws, "out")) }},
		{"output that is a hard link", "doc.json", "hard links",
			func(ws, target string) error { return os.Link(target, filepath.Join(ws, "doc.json")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			top := t.TempDir()
			ws, target := filepath.Join(top, "ws"), filepath.Join(top, "host", "bashrc")
			for _, d := range []string{ws, filepath.Dir(target)} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(target, []byte("host file\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := tc.plant(ws, target); err != nil {
				t.Fatal(err)
			}
			r := goalrun(t, ws, nil, "run", "--json", "--sandbox", "local", "--agent", "command", "--agent-bin", "true",
				"--until", "true", "--output", tc.output)
			untouched(t, target)
			if d := r.doc(t); r.code != 2 || !strings.Contains(d["message"].(string), tc.want) {
				t.Errorf("exit %d message %v, want 2 naming the %s", r.code, d["message"], tc.want)
			}
		})
	}
	t.Run("output /dev/stdout", func(t *testing.T) {
		r := goalrun(t, t.TempDir(), nil, "run", "--sandbox", "local", "--agent", "command", "--agent-bin", "true",
			"--until", "true", "--output", "/dev/stdout")
		if r.code != 0 || !bytes.Contains(r.stdout, []byte(`"schema":"goalrun/1"`)) {
			t.Errorf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("output /dev/null", func(t *testing.T) {
		r := goalrun(t, t.TempDir(), nil, "run", "--json", "--sandbox", "local", "--agent", "command", "--agent-bin", "true",
			"--until", "true", "--output", "/dev/null")
		if r.doc(t); r.code != 0 {
			t.Errorf("exit %d\n%s", r.code, r.stderr)
		}
	})
}

func TestTerminalText(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain text and tabs kept", "fixed Add\n\tand Mean", "fixed Add\n\tand Mean"},
		{"ANSI clear screen", "\x1b[2Jdone", "\uFFFD[2Jdone"},
		{"OSC window title", "\x1b]0;pwned\x07ok", "\uFFFD]0;pwned\uFFFDok"},
		{"C1 CSI", "a\u009b31mb", "a\uFFFD31mb"},
		{"carriage return overwrite", "all tests pass\rFAIL", "all tests pass\uFFFDFAIL"},
		{"workflow command", "done\n::add-mask::x\n", "done\n:\u200b:add-mask::x\n"},
		{"indented workflow command", "  ::stop-commands::tok", "  :\u200b:stop-commands::tok"},
		{"old form", "##[set-output name=a]b", "#\u200b#[set-output name=a]b"},
		{"colons inside a line kept", "see a::b", "see a::b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := terminalText(tc.in); got != tc.want {
				t.Errorf("terminalText(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestHumanModeNeutralisesAgentText(t *testing.T) {
	r := goalrun(t, t.TempDir(), nil, "run", "--sandbox", "local", "--agent", "command",
		"--agent-bin", `touch ok; printf '\033[2J\n::add-mask::hidden\n'`, "--until", "test -e ok")
	if r.code != 0 || bytes.Contains(r.stdout, []byte("\x1b")) || bytes.Contains(r.stdout, []byte("\n::add-mask::")) {
		t.Errorf("exit %d; stdout carries the agent's escapes or workflow command:\n%q", r.code, r.stdout)
	}
}

func TestHumanMode(t *testing.T) {
	ws := t.TempDir()
	r := goalrun(t, ws, nil, "run", "--sandbox", "local", "--agent", "command", "--agent-bin", "touch ok; echo all fixed",
		"--until", "test -e ok")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if !bytes.Contains(r.stdout, []byte("goal met · grounded")) || !bytes.Contains(r.stdout, []byte("all fixed")) {
		t.Errorf("short result:\n%s", r.stdout)
	}
	if bytes.HasPrefix(bytes.TrimSpace(r.stderr), []byte("{")) || !bytes.Contains(r.stderr, []byte("check #0")) {
		t.Errorf("progress view:\n%s", r.stderr)
	}
}

// TestHugeMultibyteSummary: an agent that prints 10 MB of multi-byte text;
// the document's summary keeps its end, at most 4096 bytes plus the marker,
// whose numbers are right, and stays valid UTF-8.
func TestHugeMultibyteSummary(t *testing.T) {
	ws := t.TempDir()
	// 64 lines of 100 × "é€😀" (9 bytes) each → a 57664-byte block; 182 blocks.
	line := strings.Repeat("é€😀", 100)
	var block strings.Builder
	for i := 0; i < 64; i++ {
		block.WriteString(line + "\n")
	}
	if err := os.WriteFile(filepath.Join(ws, "block"), []byte(block.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	const blocks = 182
	total := blocks*block.Len() - 1 // the summary is the output without its final newline
	r := goalrun(t, ws, nil, "run", "--json", "--sandbox", "local", "--agent", "command",
		"--agent-bin", fmt.Sprintf("touch ok; i=0; while [ $i -lt %d ]; do cat block; i=$((i+1)); done", blocks),
		"--until", "test -e ok")
	d := r.doc(t)
	if r.code != 0 {
		t.Fatalf("exit %d", r.code)
	}
	s, _ := d["summary"].(string)
	if !utf8.ValidString(s) {
		t.Fatal("summary is not valid UTF-8")
	}
	marker := fmt.Sprintf("of %d bytes shown; ", total)
	if !strings.HasPrefix(s, "…[truncated: ") || !strings.Contains(s, marker) {
		t.Errorf("summary does not start with a marker stating %d bytes: %.120q", total, s)
	}
	_, kept, _ := strings.Cut(s, " elided]…")
	if len(kept) > report.SummaryCap || len(s) > report.SummaryCap+report.MarkerMaxBytes {
		t.Errorf("summary keeps %d bytes (%d with the marker)", len(kept), len(s))
	}
	shown := fmt.Sprintf("…[truncated: %d of %d bytes shown; %d elided]…", len(kept), total, total-len(kept))
	if !strings.HasPrefix(s, shown) {
		t.Errorf("marker %.90q, want %q", s, shown)
	}
	if !strings.HasSuffix(s, "😀") {
		t.Errorf("summary does not keep the end of the output")
	}
}

func TestSecretsAreRedacted(t *testing.T) {
	ws := t.TempDir()
	const secret = "sk-ant-api03-very-secret-value-0123456789"
	r := goalrun(t, ws, []string{"ANTHROPIC_API_KEY=" + secret}, "run", "--json", "--sandbox", "local",
		"--agent", "command", "--agent-bin", `echo "$GOALRUN_PROMPT"; env; touch ok`, "--until", "echo ${ANTHROPIC_API_KEY:-unset}; test -e ok",
		"Use the key "+secret+" to fix it.")
	r.doc(t)
	r.events(t)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stdout)
	}
	if bytes.Contains(r.stdout, []byte(secret)) || bytes.Contains(r.stderr, []byte(secret)) {
		t.Errorf("the secret's value reached the document or the events")
	}
	if !bytes.Contains(r.stdout, []byte("***")) {
		t.Errorf("no redaction marker in the document: the prompt echo should have been redacted")
	}
}

func TestVersionAndHelp(t *testing.T) {
	r := goalrun(t, t.TempDir(), nil, "version")
	if r.code != 0 || !bytes.HasPrefix(r.stdout, []byte("goalrun ")) || !bytes.Contains(r.stdout, []byte(runtime.Version())) {
		t.Errorf("version: exit %d %q", r.code, r.stdout)
	}
	r = goalrun(t, t.TempDir(), nil, "run", "--help")
	if r.code != 0 {
		t.Errorf("run --help exit %d", r.code)
	}
	for _, name := range flagNames() {
		if !bytes.Contains(r.stdout, []byte("-"+name)) {
			t.Errorf("run --help does not list -%s", name)
		}
	}
}

// dockerEngine skips the test when no Docker Engine answers, unless
// GOALRUN_REQUIRE_DOCKER=1 (CI), which makes it fail instead.
func dockerEngine(t *testing.T) {
	t.Helper()
	cli, err := sandbox.NewDockerClient()
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = cli.Ping(ctx)
		cancel()
		cli.Close()
	}
	if err != nil {
		if os.Getenv("GOALRUN_REQUIRE_DOCKER") == "1" {
			t.Fatalf("docker engine unavailable and GOALRUN_REQUIRE_DOCKER=1: %v", err)
		}
		t.Skipf("docker engine unavailable: %v", err)
	}
}

// TestDockerSandboxEndToEnd runs goalrun with the default --sandbox docker
// (the default image built from this machine's busybox, the command agent,
// network none): the posture is Docker's, read back from the Engine.
func TestDockerSandboxEndToEnd(t *testing.T) {
	dockerEngine(t)
	ws := t.TempDir()
	r := goalrun(t, ws, nil, "run", "--json", "--agent", "command",
		"--agent-bin", "echo fixed > fixed; id -u", "--until", "test -s fixed")
	d := r.doc(t)
	evs := r.events(t)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for path, want := range map[string]any{
		"goal/passed": true, "goal/grounded": true, "goal/iterations": 1.0,
		"sandbox/mode": "docker", "sandbox/network": "none", "sandbox/read_only_rootfs": true,
	} {
		if got := get(d, strings.Split(path, "/")...); got != want {
			t.Errorf("%s = %v, want %v", path, got, want)
		}
	}
	if s, _ := d["summary"].(string); strings.TrimSpace(s) == "0" {
		t.Errorf("the agent ran as root in the container")
	}
	for _, e := range evs {
		if e.Type == report.EventSandboxReady {
			if id, _ := e.Data["container_id"].(string); len(id) != 12 {
				t.Errorf("sandbox_ready container_id %q", id)
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(ws, "fixed")); err != nil || string(b) != "fixed\n" {
		t.Errorf("the agent's write is not in the host workspace: %q %v", b, err)
	}
}

// TestGroundingThroughTheBinary: the halts and the judge are wired in.
func TestGroundingThroughTheBinary(t *testing.T) {
	t.Run("an idle agent halts no_progress", func(t *testing.T) {
		ws := t.TempDir()
		r := goalrun(t, ws, nil, "run", "--json", "--sandbox", "local", "--agent", "command",
			"--agent-bin", "echo thinking", "--until", "echo FAIL: TestX; exit 1")
		d := r.doc(t)
		r.events(t)
		if r.code != 1 || get(d, "goal", "halt") != report.HaltNoProgress || get(d, "goal", "iterations") != 2.0 {
			t.Errorf("exit %d goal %v, want exit 1 and no_progress after 2 turns", r.code, d["goal"])
		}
	})
	t.Run("--no-progress-turns -1 switches it off", func(t *testing.T) {
		ws := t.TempDir()
		r := goalrun(t, ws, nil, "run", "--json", "--sandbox", "local", "--agent", "command", "--no-progress-turns", "-1",
			"--max-iterations", "3", "--agent-bin", "echo thinking", "--until", "exit 1")
		d := r.doc(t)
		if get(d, "goal", "halt") != report.HaltMaxIterations || get(d, "goal", "iterations") != 3.0 {
			t.Errorf("goal %v, want max_iterations after 3 turns", d["goal"])
		}
	})
	t.Run("judge command: met but ungrounded", func(t *testing.T) {
		ws := t.TempDir()
		r := goalrun(t, ws, nil, "run", "--json", "--sandbox", "local", "--agent", "command",
			"--agent-bin", "echo done > notes.md", "--infer-until", "notes.md says done", "--judge-cmd", "grep -q done notes.md && echo notes are done")
		d := r.doc(t)
		r.events(t)
		if r.code != 0 || get(d, "goal", "passed") != true || get(d, "goal", "grounded") != false || d["conclusion"] != report.ConclusionNeutral {
			t.Errorf("exit %d conclusion %v goal %v, want 0, neutral, passed and ungrounded", r.code, d["conclusion"], d["goal"])
		}
		if get(d, "judge", "met") != true || get(d, "judge", "by") != "command" {
			t.Errorf("judge %v", d["judge"])
		}
	})
	t.Run("changes are reported", func(t *testing.T) {
		ws := t.TempDir()
		if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := goalrun(t, ws, nil, "run", "--json", "--sandbox", "local", "--agent", "command",
			"--agent-bin", "echo two >> a.txt", "--until", "grep -q two a.txt")
		d := r.doc(t)
		if r.code != 0 || get(d, "changes", "files_changed") != 1.0 || get(d, "changes", "insertions") != 1.0 {
			t.Errorf("exit %d changes %v", r.code, d["changes"])
		}
	})
}

// TestMissingAgentCLIWithTheDockerSandbox is the newcomer's first run: the
// default agent (claude) with the Docker sandbox and no claude on PATH ends
// with AgentNotFound (exit 2) and advice about the CLI, not SandboxFailed
// and advice about the Docker Engine.
func TestMissingAgentCLIWithTheDockerSandbox(t *testing.T) {
	dockerEngine(t)
	ws := t.TempDir()
	emptyPath := t.TempDir()
	r := goalrun(t, ws, []string{"PATH=" + emptyPath, "ANTHROPIC_API_KEY=sk-ant-fake123"}, "run", "--json", "--until", "go test ./...", "fix")
	d := r.doc(t)
	evs := r.events(t)
	if r.code != 2 || d["error"] != report.ErrAgentNotFound {
		t.Fatalf("exit %d error %v, want 2 and %s\n%s", r.code, d["error"], report.ErrAgentNotFound, r.stdout)
	}
	if msg, _ := d["message"].(string); !strings.Contains(msg, `executable "claude" is not on this machine's PATH`) {
		t.Errorf("message %q does not say claude is not on PATH", msg)
	}
	sugg := fmt.Sprint(d["suggestions"])
	if !strings.Contains(sugg, "Install the agent's CLI") || strings.Contains(sugg, "Docker Engine") {
		t.Errorf("suggestions %s, want the agent CLI's advice and nothing about the Docker Engine", sugg)
	}
	if len(evs) != 1 || evs[0].Type != report.EventFailed {
		t.Errorf("events %+v, want exactly one failed event", evs)
	}
}

// TestFailedCommandAgentOutputReachesEverySink: a failing command agent's
// stderr and stdout are in the document's message and failure fields, in
// the --events file and in the human progress view.
func TestFailedCommandAgentOutputReachesEverySink(t *testing.T) {
	args := []string{"--sandbox", "local", "--until", "exit 1", "--agent", "command",
		"--agent-bin", "echo oops-stderr >&2; echo oops-stdout; exit 2"}
	cases := []struct {
		name string
		json bool
	}{{"json", true}, {"human", false}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			events := filepath.Join(t.TempDir(), "events.jsonl")
			a := append([]string{"run", "--events", events}, args...)
			if tc.json {
				a = append(a, "--json")
			}
			r := goalrun(t, ws, nil, a...)
			if r.code != 3 {
				t.Fatalf("exit %d, want 3\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			evs, err := os.ReadFile(events)
			if err != nil {
				t.Fatal(err)
			}
			sinks := map[string][]byte{"--events file": evs}
			if tc.json {
				d := r.doc(t)
				if d["error"] != report.ErrAgentFailed {
					t.Errorf("error %v, want AgentFailed", d["error"])
				}
				for _, k := range []string{"stderr_tail", "stdout_tail"} {
					if v, _ := get(d, "failure", k).(string); !strings.Contains(v, "oops-") {
						t.Errorf("failure.%s = %q", k, v)
					}
				}
				sinks["document"] = r.stdout
			} else {
				sinks["progress"] = r.stderr
				sinks["short result"] = r.stdout
			}
			for name, b := range sinks {
				for _, w := range []string{"oops-stderr", "oops-stdout"} {
					if !bytes.Contains(b, []byte(w)) {
						t.Errorf("%s does not contain %q:\n%s", name, w, b)
					}
				}
			}
		})
	}
}

// TestConfigFileNamedInHumanOutput: the human output says which settings a
// config file supplied (a .goalrun.yml in the workdir may be an agent's);
// the JSON stderr carries events only.
func TestConfigFileNamedInHumanOutput(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, ".goalrun.yml"), []byte("until: \"true\"\nsandbox: local\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := goalrun(t, ws, nil, "run", "--agent", "command", "--agent-bin", "true", "--sandbox", "local")
	if r.code != exitMet {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if !bytes.Contains(r.stderr, []byte("goalrun: settings from "+filepath.Join(ws, ".goalrun.yml")+": until\n")) {
		t.Errorf("stderr does not name the file and the settings it supplied (sandbox came from a flag):\n%s", r.stderr)
	}
	r = goalrun(t, ws, nil, "run", "--json", "--agent", "command", "--agent-bin", "true", "--sandbox", "local")
	if bytes.Contains(r.stderr, []byte("settings from")) {
		t.Errorf("JSON mode's stderr must hold events only:\n%s", r.stderr)
	}
}

// TestHugeTaskReachesCommandAgent: a task longer than the kernel's
// 131072-byte limit for one argument or environment string (a long
// --prompt-file, a long /goalrun comment) reaches the command agent whole
// on stdin; the run does not fail to start the agent.
func TestHugeTaskReachesCommandAgent(t *testing.T) {
	ws := t.TempDir()
	task := strings.Repeat("界", 70_000) // 210000 bytes
	if err := os.WriteFile(filepath.Join(ws, "task.md"), []byte(task), 0o644); err != nil {
		t.Fatal(err)
	}
	r := goalrun(t, ws, nil, "run", "--json", "--sandbox", "local", "--no-config", "--prompt-file", "task.md",
		"--agent", "command", "--agent-bin", `wc -c > got.txt; printf %s "$GOALRUN_PROMPT" | wc -c > env.txt`, "--until", "test -s got.txt", "--max-iterations", "1")
	if r.code != exitMet {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	got, _ := os.ReadFile(filepath.Join(ws, "got.txt"))
	if n, _ := strconv.Atoi(strings.TrimSpace(string(got))); n < len(task) {
		t.Errorf("the agent read %d bytes on stdin, want the whole task (%d) and more", n, len(task))
	}
	env, _ := os.ReadFile(filepath.Join(ws, "env.txt"))
	if n, _ := strconv.Atoi(strings.TrimSpace(string(env))); n == 0 || n > 131072 {
		t.Errorf("GOALRUN_PROMPT held %d bytes", n)
	}
}
