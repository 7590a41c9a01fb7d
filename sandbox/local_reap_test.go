package sandbox_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goalrun/goalrun/sandbox"
)

// alive reports whether pid is a live process (not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && len(b) > i+2 && b[i+2] != 'Z'
}

// TestLocalStepLeavesNothingRunning: whatever a local step starts ends with
// it, however it detached — a setsid daemon that traps every catchable
// signal, a double fork whose middle process exits at once, a nohup'd
// background job — before Exec returns: none of them writes its file
// afterwards, and each is gone. A process goalrun keeps on purpose
// (KeepProcess: the run's janitor) survives the sweep.
func TestLocalStepLeavesNothingRunning(t *testing.T) {
	ws := t.TempDir()
	sb := startLocal(t, sandbox.Config{Workspace: ws})
	defer sb.Close(t.Context())

	keep := exec.Command("sleep", "30")
	keep.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := keep.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { keep.Process.Kill(); keep.Wait() }()
	sandbox.KeepProcess(keep.Process.Pid)

	cases := map[string]string{
		"setsid daemon trapping signals": `setsid sh -c 'trap "" HUP INT TERM QUIT USR1 USR2 PIPE; echo $$ > pid; sleep 2; touch planted' </dev/null >/dev/null 2>&1 &`,
		"double fork":                    `sh -c '(sh -c "echo \$\$ > pid; sleep 2; touch planted" &) ' </dev/null >/dev/null 2>&1`,
		"nohup background job":           `nohup sh -c 'echo $$ > pid; sleep 2; touch planted' </dev/null >/dev/null 2>&1 &`,
	}
	for name, script := range cases {
		t.Run(name, func(t *testing.T) {
			for _, f := range []string{"pid", "planted"} {
				os.Remove(filepath.Join(ws, f))
			}
			// The step waits until its daemon wrote its pid, then ends.
			res, err := sb.Exec(t.Context(), sandbox.Cmd{Role: sandbox.RoleAgent, Args: sandbox.Shell(script +
				"\nfor i in $(seq 50); do [ -s pid ] && break; sleep 0.1; done"), Timeout: time.Minute})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("step: exit %d, %v", res.ExitCode, err)
			}
			b, err := os.ReadFile(filepath.Join(ws, "pid"))
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil || pid == 0 {
				t.Fatalf("the step's daemon did not start (%v): %q", err, b)
			}
			if alive(pid) {
				t.Errorf("the daemon (pid %d) is alive after the step returned", pid)
			}
			time.Sleep(3 * time.Second) // past the daemon's sleep
			if _, err := os.Stat(filepath.Join(ws, "planted")); err == nil {
				t.Errorf("the daemon wrote its file after the step ended")
			}
		})
	}
	if !alive(keep.Process.Pid) {
		t.Errorf("the kept process (pid %d) was ended by a sweep", keep.Process.Pid)
	}
}

// TestLocalSweepSparesOthers: the sweep after a local step ends only what
// that step left. A step of another Local sandbox still running in the same
// process (two runs side by side, as tests are) and a process goalrun's own
// code started meanwhile (in goalrun's own session) both outlive it.
func TestLocalSweepSparesOthers(t *testing.T) {
	wsA, wsB := t.TempDir(), t.TempDir()
	a := startLocal(t, sandbox.Config{Workspace: wsA})
	defer a.Close(t.Context())
	b := startLocal(t, sandbox.Config{Workspace: wsB})
	defer b.Close(t.Context())

	type outcome struct {
		res sandbox.Result
		err error
	}
	// waitStep runs a step in sb that writes its pid, then waits until the
	// file release appears in ws and leaves its mark.
	waitStep := func(sb sandbox.Sandbox, ws, release string) <-chan outcome {
		done := make(chan outcome, 1)
		go func() {
			res, err := sb.Exec(t.Context(), sandbox.Cmd{Role: sandbox.RoleAgent, Timeout: 2 * time.Minute,
				Args: sandbox.Shell(`echo $$ > pid; while [ ! -e ` + release + ` ]; do sleep 0.05; done; echo done > mark`)})
			done <- outcome{res, err}
		}()
		for i := 0; ; i++ {
			if b, err := os.ReadFile(filepath.Join(ws, "pid")); err == nil && len(b) > 0 {
				return done
			}
			if i > 1200 {
				t.Fatal("a step never started")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// A's step starts, then B's; A's ends while B's runs: A's sweep covers
	// the time B's step started in and must spare it.
	aDone := waitStep(a, wsA, "go")
	bDone := waitStep(b, wsB, "go")
	if err := os.WriteFile(filepath.Join(wsA, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if o := <-aDone; o.err != nil || o.res.ExitCode != 0 {
		t.Fatalf("A's step: exit %d, %v", o.res.ExitCode, o.err)
	}

	// goalrun's own code starts a process while A's next step runs: the
	// step's sweep covers the time it started in and must spare it.
	os.Remove(filepath.Join(wsA, "pid"))
	aDone = waitStep(a, wsA, "go2")
	own := exec.Command("sleep", "30")
	if err := own.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { own.Process.Kill(); own.Wait() }()
	if err := os.WriteFile(filepath.Join(wsA, "go2"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if o := <-aDone; o.err != nil || o.res.ExitCode != 0 {
		t.Fatalf("A's second step: exit %d, %v", o.res.ExitCode, o.err)
	}
	if !alive(own.Process.Pid) {
		t.Errorf("a process goalrun's own code started (pid %d) was ended by a step's sweep", own.Process.Pid)
	}

	if err := os.WriteFile(filepath.Join(wsB, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if o := <-bDone; o.err != nil || o.res.ExitCode != 0 || o.res.Cancelled {
		t.Fatalf("B's step was ended by A's sweep: exit %d, cancelled %v, %v", o.res.ExitCode, o.res.Cancelled, o.err)
	}
	if m, err := os.ReadFile(filepath.Join(wsB, "mark")); err != nil || strings.TrimSpace(string(m)) != "done" {
		t.Errorf("B's step did not finish its work: %q, %v", m, err)
	}
}
