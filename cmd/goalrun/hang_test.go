package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/dockertest"
)

// attachTo matches the hijacking attach of a container whose name
// contains part (want true) or does not (want false), asking the Engine
// for the name (the request names the container by id).
func attachTo(cli *client.Client, part string, want bool) func(*http.Request) bool {
	re := regexp.MustCompile(`^/containers/([^/]+)/attach$`)
	return func(r *http.Request) bool {
		m := re.FindStringSubmatch(dockertest.APIPath(r.URL.Path))
		if r.Method != http.MethodPost || m == nil {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := cli.ContainerInspect(ctx, m[1])
		return err == nil && strings.Contains(c.Name, part) == want
	}
}

// waitStalled waits until the forwarder held a request (goalrun is stuck
// in that Engine call).
func waitStalled(t *testing.T, fw *dockertest.Forwarder, r *stopRun) {
	t.Helper()
	for deadline := time.Now().Add(guard); len(fw.Stalled()) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no request was held within %s; seen %v\n%s", guard, fw.Seen(), r.stderrBytes())
		}
		select {
		case <-r.done:
			t.Fatalf("goalrun ended before a request was held:\n%s\n%s", r.stdout.Bytes(), r.stderrBytes())
		default:
		}
	}
}

// TestSignalWhileAnEngineCallHangs: the Engine answers everything but one
// call, which it never answers — the check container's attach, an agent
// turn's exec start, the egress relay's attach. A signal then ends
// goalrun within the bound with exactly one cancelled document on stdout
// and in --output, one terminal event and exit 130 (the Docker client
// alone waits on a hijacked connection for ever), and the sandbox is
// removed.
func TestSignalWhileAnEngineCallHangs(t *testing.T) {
	cli := engineClient(t)
	for _, tc := range []struct {
		name   string
		sig    syscall.Signal
		stall  func(fw *dockertest.Forwarder)
		egress bool
	}{
		{"SIGINT while the check's attach hangs", syscall.SIGINT, func(fw *dockertest.Forwarder) {
			fw.Stall(attachTo(cli, "-check-", true))
		}, false},
		{"SIGTERM while an agent turn's exec start hangs", syscall.SIGTERM, func(fw *dockertest.Forwarder) {
			fw.StallRequests(http.MethodPost, `^/exec/[^/]+/start$`)
		}, false},
		{"SIGHUP while the relay's attach hangs", syscall.SIGHUP, func(fw *dockertest.Forwarder) {
			fw.Stall(attachTo(cli, "-check-", false))
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fw := dockertest.NewForwarder(t)
			tc.stall(fw)
			ws := t.TempDir()
			if os.Getuid() == 0 {
				os.Chown(ws, 1000, 1000)
			}
			tmp := shortTempDir(t)
			bin, args := goalrunBin, []string{"run", "--json", "--agent", "command", "--agent-bin", "touch agent-ran", "--until", "false",
				"--timeout", "10m", "--step-timeout", "5m", "--output", filepath.Join(tmp, "doc.json")}
			if tc.egress {
				bin, args = dockertest.GoalrunBinary(t), append(args, "--network", "egress")
			}
			r := startGoalrunBin(t, bin, ws, []string{"TMPDIR=" + tmp, "DOCKER_HOST=" + fw.Host()}, args...)
			waitStalled(t, fw, r)
			time.Sleep(500 * time.Millisecond)
			took, res := r.signal(t, tc.sig)
			t.Logf("held %v; exited %s after %v", fw.Stalled(), took.Round(time.Millisecond), tc.sig)
			d := res.doc(t)
			evs := res.events(t)
			if took > sandbox.InterruptBound {
				t.Errorf("goalrun took %s to exit after %v, more than %s", took, tc.sig, sandbox.InterruptBound)
			}
			if res.code != exitInterrupted || d["status"] != report.StatusCancelled || get(d, "goal", "halt") != report.HaltInterrupted {
				t.Errorf("exit %d status %v goal %v, want 130, cancelled, interrupted", res.code, d["status"], d["goal"])
			}
			if last := evs[len(evs)-1]; last.Type != report.EventFailed || last.Data["status"] != report.StatusCancelled {
				t.Errorf("terminal event %+v", last)
			}
			if b, err := os.ReadFile(filepath.Join(tmp, "doc.json")); err != nil || !bytes.Equal(b, res.stdout) {
				t.Errorf("--output does not hold the document (%v): %s", err, b)
			}
			left := leftovers(t, cli, res.pid, tmp)
			for deadline := time.Now().Add(90 * time.Second); len(left) > 0 && time.Now().Before(deadline); {
				time.Sleep(500 * time.Millisecond) // what the stop left to the janitor
				left = leftovers(t, cli, res.pid, tmp)
			}
			if len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}

// TestTimeoutBoundsTheSandboxStart: --timeout counts from goalrun's start,
// so an Engine that hangs while the sandbox starts (every container create,
// the image look-up) ends the run at the budget with a timeout halt and
// one document — not when the Engine answers again.
func TestTimeoutBoundsTheSandboxStart(t *testing.T) {
	engineClient(t)
	const budget = 8 * time.Second
	for _, tc := range []struct{ name, method, path string }{
		{"container creates hang", http.MethodPost, `^/containers/create$`},
		{"image look-ups hang", http.MethodGet, `^/images/[^/]+/json$`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fw := dockertest.NewForwarder(t)
			fw.StallRequests(tc.method, tc.path)
			ws := t.TempDir()
			tmp := shortTempDir(t)
			start := time.Now()
			r := goalrun(t, ws, []string{"TMPDIR=" + tmp, "DOCKER_HOST=" + fw.Host()},
				"run", "--json", "--agent", "command", "--agent-bin", "true", "--until", "true", "--timeout", budget.String(),
				"--output", filepath.Join(tmp, "doc.json"))
			took := time.Since(start)
			t.Logf("held %d requests; ended after %s", len(fw.Stalled()), took.Round(time.Millisecond))
			d := r.doc(t)
			evs := r.events(t)
			if len(fw.Stalled()) == 0 {
				t.Fatalf("no request was held: %v", fw.Seen())
			}
			// A correctness bound: the budget, the teardown's limit and slack.
			if limit := budget + 20*time.Second; took > limit {
				t.Errorf("the run took %s with --timeout %s", took, budget)
			}
			if r.code != exitNotMet || d["status"] != report.StatusSuccess || get(d, "goal", "halt") != report.HaltTimeout ||
				d["conclusion"] != report.ConclusionTimedOut {
				t.Errorf("exit %d status %v conclusion %v goal %v, want 1, success, timed_out, halt timeout\n%s", r.code, d["status"], d["conclusion"], d["goal"], r.stderr)
			}
			if reason, _ := get(d, "goal", "halt_reason").(string); !strings.Contains(reason, "--timeout") {
				t.Errorf("the halt reason does not name --timeout: %s", r.stdout)
			}
			if last := evs[len(evs)-1]; last.Type != report.EventCompleted {
				t.Errorf("terminal event %+v", last)
			}
			if b, err := os.ReadFile(filepath.Join(tmp, "doc.json")); err != nil || !bytes.Equal(b, r.stdout) {
				t.Errorf("--output does not hold the document (%v): %s", err, b)
			}
		})
	}
}

// TestStderrNotReadNeverStopsTheRun: a stderr nobody reads (a paused pager,
// Ctrl-S, a stalled log shipper: the pipe fills) neither freezes the loop
// nor loses the document — the run goes past where the pipe filled, and a
// signal then ends it within the bound with its document on stdout and in
// --output.
func TestStderrNotReadNeverStopsTheRun(t *testing.T) {
	ws := t.TempDir()
	tmp := shortTempDir(t)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close() // never read
	var stdout bytes.Buffer
	cmd := exec.Command(goalrunBin, "run", "--json", "--sandbox", "local", "--agent", "command", "--agent-bin", "echo turn >> log",
		"--until", "false", "--max-iterations", "1000", "--no-progress-turns", "-1", "--output", filepath.Join(tmp, "doc.json"))
	cmd.Dir = ws
	cmd.Env = append(baseEnv(), "TMPDIR="+tmp)
	cmd.Stdout, cmd.Stderr = &stdout, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	// Each turn writes events; 64 KiB of pipe fill within a few dozen.
	const turns = 150
	for deadline := time.Now().Add(guard); ; time.Sleep(100 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(ws, "log"))
		if bytes.Count(b, []byte("\n")) >= turns {
			break
		}
		select {
		case <-done:
			t.Fatalf("goalrun ended early (exit %d): %s", cmd.ProcessState.ExitCode(), stdout.Bytes())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run stopped after %d turns with stderr unread", bytes.Count(b, []byte("\n")))
		}
	}
	at := time.Now()
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(guard):
		t.Fatal("goalrun did not exit after SIGINT")
	}
	took := time.Since(at)
	if took > sandbox.InterruptBound {
		t.Errorf("goalrun took %s to exit after SIGINT, more than %s", took, sandbox.InterruptBound)
	}
	res := result{code: cmd.ProcessState.ExitCode(), stdout: stdout.Bytes()}
	d := res.doc(t)
	if res.code != exitInterrupted || d["status"] != report.StatusCancelled {
		t.Errorf("exit %d status %v, want 130, cancelled", res.code, d["status"])
	}
	if b, err := os.ReadFile(filepath.Join(tmp, "doc.json")); err != nil || !bytes.Equal(b, res.stdout) {
		t.Errorf("--output does not hold the document (%v): %s", err, b)
	}
	var doc map[string]any
	if json.Unmarshal(res.stdout, &doc) != nil || num(get(doc, "goal", "iterations")) < turns {
		t.Errorf("the document counts %v iterations, want at least %d", get(doc, "goal", "iterations"), turns)
	}
}

// TestTeardownBoundWhenRemovalsHang: an Engine that answers everything but
// removals (no signal) holds goalrun at most closeTimeout after its
// document, not one call limit per removal; what it could not remove is
// left to the janitor.
func TestTeardownBoundWhenRemovalsHang(t *testing.T) {
	cli := engineClient(t)
	fw := dockertest.NewForwarder(t)
	fw.StallRequests(http.MethodDelete, ``)
	ws := t.TempDir()
	tmp := shortTempDir(t)
	start := time.Now()
	r := goalrun(t, ws, []string{"TMPDIR=" + tmp, "DOCKER_HOST=" + fw.Host()},
		"run", "--json", "--agent", "command", "--agent-bin", "true", "--until", "true")
	took := time.Since(start)
	t.Cleanup(func() {
		// The janitor talks to the same stalled forwarder: end it, and
		// remove what the run left straight through the Engine.
		if jp := janitorOf(r.pid); jp != 0 {
			syscall.Kill(jp, syscall.SIGKILL)
		}
		removeLeftovers(t, cli, r.pid)
	})
	d := r.doc(t)
	r.events(t)
	if r.code != exitMet || d["status"] != report.StatusSuccess {
		t.Fatalf("exit %d status %v, want 0, success", r.code, d["status"])
	}
	elapsed, _ := d["elapsed_seconds"].(float64)
	after := took - time.Duration(elapsed*float64(time.Second))
	t.Logf("held %d removals; exited %s after the document", len(fw.Stalled()), after.Round(time.Millisecond))
	if len(fw.Stalled()) == 0 {
		t.Fatalf("no removal was held: %v", fw.Seen())
	}
	// A correctness bound: closeTimeout and slack for a loaded machine.
	if limit := closeTimeout + 10*time.Second; after > limit {
		t.Errorf("goalrun exited %s after its document, more than %s", after, limit)
	}
}

// removeLeftovers force-removes what goalrun pid left in the Engine.
func removeLeftovers(t *testing.T, cli *client.Client, pid int) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, l := range leftovers(t, cli, pid, "") {
		kind, name, _ := strings.Cut(l, " ")
		name, _, _ = strings.Cut(name, " ")
		switch kind {
		case "container":
			cli.ContainerRemove(ctx, strings.TrimPrefix(strings.Split(name, ",")[0], "/"), container.RemoveOptions{Force: true, RemoveVolumes: true})
		case "volume":
			cli.VolumeRemove(ctx, name, true)
		case "network":
			cli.NetworkRemove(ctx, name)
		}
	}
	if left := leftovers(t, cli, pid, ""); len(left) > 0 {
		t.Errorf("could not remove %v", left)
	}
}
