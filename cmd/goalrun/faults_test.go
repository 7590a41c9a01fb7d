package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/dockertest"
)

// engineClient returns a client of the test's Docker Engine (skipping, or
// failing under GOALRUN_REQUIRE_DOCKER=1, when none answers).
func engineClient(t *testing.T) *client.Client {
	t.Helper()
	dockerEngine(t)
	cli, err := sandbox.NewDockerClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// shortTempDir is a fresh folder under /tmp with a short path (egress
// socket paths must stay under Linux's 108 bytes), removed at the end; tests
// give it to goalrun as TMPDIR, so every temporary folder of that run is
// in it.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "gf-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// leftovers lists what the goalrun process pid left behind: containers,
// volumes and networks whose goalrun.owner label names that pid, and
// goalrun's own folders in tmp (egress sockets, baseline copies). Empty
// means nothing is left.
func leftovers(t *testing.T, cli *client.Client, pid int, tmp string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mine := func(labels map[string]string) bool {
		parts := strings.Split(labels[sandbox.LabelOwner], "/")
		return len(parts) == 3 && parts[1] == strconv.Itoa(pid)
	}
	f := filters.NewArgs(filters.Arg("label", sandbox.LabelRun))
	var out []string
	cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if mine(c.Labels) {
			out = append(out, "container "+strings.Join(c.Names, ",")+" ("+c.State+")")
		}
	}
	vs, err := cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs.Volumes {
		if mine(v.Labels) {
			out = append(out, "volume "+v.Name)
		}
	}
	ns, err := cli.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		if mine(n.Labels) {
			out = append(out, "network "+n.Name)
		}
	}
	if tmp != "" {
		dirs, _ := filepath.Glob(filepath.Join(tmp, "goalrun-*"))
		for _, d := range dirs {
			out = append(out, "folder "+d)
		}
	}
	return out
}

// TestEngineDataWorkdirIsRefused: a workdir in the Engine's own data root
// (as the Engine reports it) is bad input before anything is built, copied
// or created — goalrun used to start copying the whole data root into a
// sandbox.
func TestEngineDataWorkdirIsRefused(t *testing.T) {
	cli := engineClient(t)
	info, err := cli.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.DockerRootDir == "" {
		t.Fatal("the Engine reports no data root")
	}
	for _, wd := range []string{info.DockerRootDir, filepath.Join(info.DockerRootDir, "volumes"), filepath.Dir(info.DockerRootDir)} {
		t.Run(wd, func(t *testing.T) {
			if _, err := os.Stat(wd); err != nil {
				t.Skipf("the Engine's data root is not on this machine: %v", err)
			}
			tmp := shortTempDir(t)
			start := time.Now()
			r := goalrun(t, t.TempDir(), []string{"TMPDIR=" + tmp}, "run", "--json", "--agent", "command", "--agent-bin", "true",
				"--until", "true", "--workdir", wd)
			d := r.doc(t)
			r.events(t)
			if r.code != exitBadInput || d["error"] != report.ErrBadInput {
				t.Fatalf("exit %d error %v, want 2 and BadInput\n%s", r.code, d["error"], r.stdout)
			}
			if msg, _ := d["message"].(string); !strings.Contains(msg, "data root") || !strings.Contains(msg, info.DockerRootDir) {
				t.Errorf("message %q does not name the Engine's data root", msg)
			}
			if left := leftovers(t, cli, r.pid, tmp); len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
			t.Logf("refused in %s", time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestMalformedInputIsBadInput: a shell command as --image and a config
// file with a null key end as bad input (exit 2, one startup-error document,
// one failed event) before any sandbox exists.
func TestMalformedInputIsBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		args       []string
		want       string
	}{
		{"an image reference that is a shell command", "", []string{"--image", "busybox;rm -rf /"}, "is not an image reference"},
		{"a null key in the config file", "until: 'true'\n~: 1\n", nil, ".goalrun.yml line 2: the key null"},
		{"a number as a key in the config file", "until: 'true'\n2: x\n", nil, ".goalrun.yml line 2: the key \"2\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			if tc.yaml != "" {
				if err := os.WriteFile(filepath.Join(ws, ".goalrun.yml"), []byte(tc.yaml), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			args := append([]string{"run", "--json", "--agent", "command", "--agent-bin", "true", "--until", "true"}, tc.args...)
			r := goalrun(t, ws, nil, args...)
			d := r.doc(t)
			if evs := r.events(t); len(evs) != 1 {
				t.Errorf("%d events, want the one failed event", len(evs))
			}
			if r.code != exitBadInput || d["error"] != report.ErrBadInput {
				t.Fatalf("exit %d error %v, want 2 and BadInput", r.code, d["error"])
			}
			if msg, _ := d["message"].(string); !strings.Contains(msg, tc.want) {
				t.Errorf("message %q lacks %q", msg, tc.want)
			}
		})
	}
}

// TestUnwritableOutputIsAFailure: a document that cannot be written where
// it was asked is a failure: exit 3, an output_failed event before the
// terminal one, and stdout still carries the document.
func TestUnwritableOutputIsAFailure(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full on this system")
	}
	for _, flag := range []string{"--output", "--events"} {
		t.Run(flag, func(t *testing.T) {
			r := goalrun(t, t.TempDir(), nil, "run", "--json", "--sandbox", "local", "--agent", "command", "--agent-bin", "true",
				"--until", "true", flag, "/dev/full")
			d := r.doc(t)
			evs := r.events(t)
			if r.code != exitRunFailed {
				t.Errorf("exit %d, want 3", r.code)
			}
			if d["status"] != report.StatusSuccess || get(d, "goal", "passed") != true {
				t.Errorf("the document on stdout changed: status %v goal %v", d["status"], d["goal"])
			}
			i := -1
			for j, e := range evs {
				if e.Type == report.EventOutputFailed {
					i = j
				}
			}
			if i < 0 || i != len(evs)-2 || evs[i].Data["path"] != "/dev/full" || evs[i].Data["flag"] != strings.TrimPrefix(flag, "--") {
				t.Fatalf("want an output_failed event for /dev/full right before the terminal event, got %+v", evs)
			}
		})
	}
	t.Run("human mode", func(t *testing.T) {
		r := goalrun(t, t.TempDir(), nil, "run", "--sandbox", "local", "--agent", "command", "--agent-bin", "true",
			"--until", "true", "--output", "/dev/full")
		if r.code != exitRunFailed || !bytes.Contains(r.stderr, []byte("could not write --output /dev/full")) {
			t.Errorf("exit %d, want 3 and a line saying so\n%s", r.code, r.stderr)
		}
		if bytes.Contains(r.stdout, []byte("document: /dev/full")) {
			t.Errorf("stdout names /dev/full as where the document is:\n%s", r.stdout)
		}
	})
}

// TestOutputAndEventsNamingOneFile: --output and --events naming one file —
// the same path, a symbolic link to it, a hard link — are bad input, and
// the file is not written.
func TestOutputAndEventsNamingOneFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(dir string) (output, events string)
	}{
		{"the same path", func(dir string) (string, string) { return "out.json", "./out.json" }},
		{"a symbolic link", func(dir string) (string, string) {
			os.WriteFile(filepath.Join(dir, "out.json"), []byte("keep\n"), 0o644)
			os.Symlink("out.json", filepath.Join(dir, "events-link"))
			return "out.json", "events-link"
		}},
		{"a hard link", func(dir string) (string, string) {
			os.WriteFile(filepath.Join(dir, "out.json"), []byte("keep\n"), 0o644)
			os.Link(filepath.Join(dir, "out.json"), filepath.Join(dir, "events.jsonl"))
			return "out.json", "events.jsonl"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			output, events := tc.make(ws)
			r := goalrun(t, ws, nil, "run", "--json", "--sandbox", "local", "--agent", "command", "--agent-bin", "touch agent-ran",
				"--until", "true", "--output", output, "--events", events)
			d := r.doc(t)
			if evs := r.events(t); len(evs) != 1 {
				t.Errorf("%d events, want the one failed event", len(evs))
			}
			if r.code != exitBadInput || d["error"] != report.ErrBadInput || !strings.Contains(fmt.Sprint(d["message"]), "--output") {
				t.Fatalf("exit %d error %v message %v, want 2 and BadInput naming --output", r.code, d["error"], d["message"])
			}
			if b, err := os.ReadFile(filepath.Join(ws, "out.json")); err == nil && string(b) != "keep\n" {
				t.Errorf("out.json was written: %q", b)
			}
			if exists(filepath.Join(ws, "agent-ran")) {
				t.Error("the run went on")
			}
		})
	}
}

// forgedDocument is what an agent writes in place of goalrun's document: a
// grounded success.
const forgedDocument = `{"schema":"goalrun/1","status":"success","conclusion":"success","goal":{"check":"false","passed":true,"grounded":true,"iterations":1}}`

// TestForgedDocumentFile: --output and --events inside the workspace. The
// agent deletes them and writes a forged grounded success in their place
// (or writes into them); the check fails. After the run the files on disk
// are goalrun's own — the document equal to the one on stdout, the events
// equal to those on stderr — and the change report lists the agent's
// replacements as risky changes. Locally and in the Docker sandbox, with
// the workspace bind-mounted (where goalrun's files are read-only to the
// agent: nothing is replaced) and copied.
func TestForgedDocumentFile(t *testing.T) {
	forge := "rm -f doc.json events.jsonl; printf '%s\\n' '" + forgedDocument + "' > doc.json; " +
		`printf '{"type":"completed","phase":"run","message":"goal met","data":{},"time":"2026-01-01T00:00:00Z"}\n' > events.jsonl; true`
	inPlace := "printf '%s\\n' '" + forgedDocument + "' > events.jsonl"
	for _, tc := range []struct {
		name, agent string
		args        []string
		docker      bool
		replaced    bool // the agent's files are the agent's change on the host
	}{
		{"local: deleted and forged", forge, []string{"--sandbox", "local"}, false, true},
		{"local: events written in place", inPlace, []string{"--sandbox", "local"}, false, false},
		{"docker bind: deleted and forged", forge, []string{"--workspace", "bind"}, true, false},
		{"docker copy: deleted and forged", forge, []string{"--workspace", "copy"}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ws string
			if tc.docker {
				engineClient(t)
				ws = t.TempDir()
				if os.Getuid() == 0 {
					os.Chown(ws, 1000, 1000) // bind mode never runs the sandbox as root
				}
			} else {
				ws = t.TempDir()
			}
			args := append([]string{"run", "--json", "--agent", "command", "--agent-bin", tc.agent, "--until", "false",
				"--max-iterations", "1", "--output", "doc.json", "--events", "events.jsonl"}, tc.args...)
			r := goalrun(t, ws, []string{"TMPDIR=" + shortTempDir(t)}, args...)
			d := r.doc(t)
			r.events(t)
			if r.code != exitNotMet || get(d, "goal", "passed") != false {
				t.Fatalf("exit %d goal %v, want 1 and not passed\n%s", r.code, d["goal"], r.stderr)
			}
			if b, err := os.ReadFile(filepath.Join(ws, "doc.json")); err != nil || !bytes.Equal(b, r.stdout) {
				t.Errorf("doc.json on disk is not goalrun's document (%v):\n%s\nwant:\n%s", err, b, r.stdout)
			}
			if b, err := os.ReadFile(filepath.Join(ws, "events.jsonl")); err != nil || !bytes.Equal(b, r.stderr) {
				t.Errorf("events.jsonl on disk is not goalrun's events (%v):\n%s\nwant:\n%s", err, b, r.stderr)
			}
			risky := fmt.Sprint(get(d, "changes", "risky_paths"))
			for _, f := range []string{"doc.json", "events.jsonl"} {
				if got := strings.Contains(risky, f); got != tc.replaced {
					t.Errorf("risky paths %s: %s listed %v, want %v", risky, f, got, tc.replaced)
				}
			}
		})
	}
}

// stopRun is goalrun (the binary bin) started in the background with its
// stderr (JSONL events in --json mode) watched line by line.
type stopRun struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	mu             sync.Mutex
	seen           chan report.Event // every event, as it arrives
	done           chan struct{}
}

func startGoalrunBin(t *testing.T, bin, dir string, env []string, args ...string) *stopRun {
	t.Helper()
	r := &stopRun{seen: make(chan report.Event, 1024), done: make(chan struct{})}
	r.cmd = exec.Command(bin, args...)
	r.cmd.Dir = dir
	r.cmd.Env = append(baseEnv(), env...)
	r.cmd.Stdout = &r.stdout
	pr, pw := io.Pipe()
	r.cmd.Stderr = pw
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.cmd.Process.Kill(); <-r.done })
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			r.mu.Lock()
			r.stderr.Write(sc.Bytes())
			r.stderr.WriteByte('\n')
			r.mu.Unlock()
			var e report.Event
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				select {
				case r.seen <- e:
				default:
				}
			}
		}
		close(r.seen)
	}()
	go func() { r.cmd.Wait(); pw.Close(); close(r.done) }()
	return r
}

// waitEvent waits for an event of type typ (and iteration it, when ≥ 0).
func (r *stopRun) waitEvent(t *testing.T, typ string, it int) {
	t.Helper()
	timeout := time.After(guard)
	for {
		select {
		case e, ok := <-r.seen:
			if !ok {
				t.Fatalf("goalrun ended before a %s event:\n%s", typ, r.stderrBytes())
			}
			if e.Type == typ && (it < 0 || num(e.Data["iteration"]) == it) {
				return
			}
		case <-timeout:
			t.Fatalf("no %s event within %s:\n%s", typ, guard, r.stderrBytes())
		}
	}
}

func num(v any) int {
	f, _ := v.(float64)
	return int(f)
}

func (r *stopRun) stderrBytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]byte(nil), r.stderr.Bytes()...)
}

// signal sends sig and returns how long goalrun took to exit (failing the
// test after guard) and its result.
func (r *stopRun) signal(t *testing.T, sig syscall.Signal) (time.Duration, result) {
	t.Helper()
	at := time.Now()
	if err := r.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.done:
	case <-time.After(guard):
		t.Fatalf("goalrun did not exit after %v", sig)
	}
	took := time.Since(at)
	for range r.seen { // the scanner drains what is left
	}
	return took, result{code: r.cmd.ProcessState.ExitCode(), stdout: r.stdout.Bytes(), stderr: r.stderrBytes(), pid: r.cmd.Process.Pid}
}

// TestStopWithinTheBoundWhateverTheEngineDoes: SIGINT, SIGTERM, SIGHUP or
// SIGQUIT (Ctrl-\: no goroutine dump on stderr) during an agent turn, a
// check or the sandbox's start ends goalrun within 5 seconds with
// exactly one cancelled document, one terminal event and exit 130 — also
// when the Docker Engine stops answering just before the signal (through a
// forwarder the test freezes). goalrun's own folders are gone at once;
// with a healthy Engine nothing is left at all, with a hung one what is
// left in the Engine goes to the next run's Reap, and after it nothing is.
func TestStopWithinTheBoundWhateverTheEngineDoes(t *testing.T) {
	cli := engineClient(t)
	for _, tc := range []struct {
		name      string
		sig       syscall.Signal
		hang      bool
		during    string // report.EventAgentStarted or report.EventCheckStarted
		workspace string
		egress    bool // --network egress: the proxy's socket folder too (a static goalrun runs the relay)
	}{
		{"SIGINT during an agent turn, the Engine hung", syscall.SIGINT, true, report.EventAgentStarted, "bind", false},
		{"SIGTERM during a check, the Engine hung", syscall.SIGTERM, true, report.EventCheckStarted, "bind", false},
		{"SIGHUP during an agent turn in copy mode, the Engine hung", syscall.SIGHUP, true, report.EventAgentStarted, "copy", false},
		{"SIGHUP during an agent turn", syscall.SIGHUP, false, report.EventAgentStarted, "bind", false},
		{"SIGTERM during a check", syscall.SIGTERM, false, report.EventCheckStarted, "copy", false},
		{"SIGHUP during an agent turn with egress, the Engine hung", syscall.SIGHUP, true, report.EventAgentStarted, "bind", true},
		{"SIGHUP during an agent turn with egress", syscall.SIGHUP, false, report.EventAgentStarted, "bind", true},
		{"SIGINT while the sandbox starts, the Engine hung from the start", syscall.SIGINT, true, "", "bind", false},
		{"SIGQUIT during a check", syscall.SIGQUIT, false, report.EventCheckStarted, "bind", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fw := dockertest.NewForwarder(t)
			ws := t.TempDir()
			if os.Getuid() == 0 {
				os.Chown(ws, 1000, 1000)
			}
			tmp := shortTempDir(t)
			until, agentCmd, it := "false", "trap '' TERM; sleep 300", 1
			if tc.during == report.EventCheckStarted {
				until, agentCmd, it = "trap '' TERM; sleep 300", "true", 0
			}
			bin, args := goalrunBin, []string{"run", "--json", "--agent", "command", "--agent-bin", agentCmd, "--until", until,
				"--workspace", tc.workspace, "--output", filepath.Join(tmp, "doc.json")}
			if tc.egress {
				bin, args = dockertest.GoalrunBinary(t), append(args, "--network", "egress")
			}
			if tc.during == "" {
				fw.Freeze() // before goalrun's first call
			}
			r := startGoalrunBin(t, bin, ws, []string{"TMPDIR=" + tmp, "DOCKER_HOST=" + fw.Host()}, args...)
			if tc.during != "" {
				r.waitEvent(t, tc.during, it)
			}
			time.Sleep(time.Second) // the step is running (or the first Engine call waiting)
			if tc.hang {
				fw.Freeze()
			}
			took, res := r.signal(t, tc.sig)
			t.Logf("exited %s after %v", took.Round(time.Millisecond), tc.sig)
			d := res.doc(t)
			evs := res.events(t)
			if took > sandbox.InterruptBound {
				t.Errorf("goalrun took %s to exit after %v, more than %s", took, tc.sig, sandbox.InterruptBound)
			}
			// Also before the sandbox exists: cancelled, as the README
			// says, never an error.
			wantStatus := report.StatusCancelled
			if res.code != exitInterrupted || d["status"] != wantStatus || d["conclusion"] != report.ConclusionCancelled ||
				get(d, "goal", "halt") != report.HaltInterrupted {
				t.Errorf("exit %d status %v conclusion %v goal %v, want 130, %s, cancelled, interrupted", res.code, d["status"], d["conclusion"], d["goal"], wantStatus)
			}
			if msg, _ := d["message"].(string); !strings.Contains(msg, sandbox.SignalName(tc.sig)) {
				t.Errorf("message %q does not name %v", msg, tc.sig)
			}
			if last := evs[len(evs)-1]; last.Type != report.EventFailed || last.Data["status"] != wantStatus {
				t.Errorf("terminal event %+v", last)
			}
			if b, err := os.ReadFile(filepath.Join(tmp, "doc.json")); err != nil || !bytes.Equal(b, res.stdout) {
				t.Errorf("--output does not hold the document (%v): %s", err, b)
			}
			dirs, _ := filepath.Glob(filepath.Join(tmp, "goalrun-*"))
			if len(dirs) > 0 {
				t.Errorf("goalrun's own folders left behind: %v", dirs)
			}
			left := leftovers(t, cli, res.pid, tmp)
			if tc.hang {
				// What the hung Engine still holds is the janitor's: it
				// removes it once the Engine answers again.
				fw.Thaw()
				for deadline := time.Now().Add(90 * time.Second); len(left) > 0 && time.Now().Before(deadline); {
					time.Sleep(500 * time.Millisecond)
					left = leftovers(t, cli, res.pid, tmp)
				}
				for deadline := time.Now().Add(time.Minute); janitorOf(res.pid) != 0 && time.Now().Before(deadline); {
					time.Sleep(200 * time.Millisecond)
				}
			}
			if len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}

// TestClosedPipesNeverKillARun: goalrun's stdout or stderr closed by its
// reader (goalrun run … | head -1, 2> >(head -3)) is no reason to die of
// SIGPIPE: the run goes on, removes its sandbox, writes --output and ends
// with the run's own exit code.
func TestClosedPipesNeverKillARun(t *testing.T) {
	cli := engineClient(t)
	for _, tc := range []struct {
		name   string
		json   bool
		closed string // "stdout" or "stderr"
		keep   int    // lines read before closing
	}{
		{"stderr closed after three events", true, "stderr", 3},
		{"stderr closed after the first progress line", false, "stderr", 1},
		{"stdout closed at once", true, "stdout", 0},
		{"stdout and the human result closed at once", false, "stdout", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			if os.Getuid() == 0 {
				os.Chown(ws, 1000, 1000)
			}
			tmp := shortTempDir(t)
			args := []string{"run", "--agent", "command", "--agent-bin", "echo turn >> log", "--until", "test -s log",
				"--output", filepath.Join(tmp, "doc.json")}
			if tc.json {
				args = append(args, "--json")
			}
			cmd := exec.Command(goalrunBin, args...)
			cmd.Dir = ws
			cmd.Env = append(baseEnv(), "TMPDIR="+tmp)
			var pipe io.ReadCloser
			var err error
			var other bytes.Buffer
			if tc.closed == "stderr" {
				cmd.Stdout = &other
				pipe, err = cmd.StderrPipe()
			} else {
				cmd.Stderr = &other
				pipe, err = cmd.StdoutPipe()
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(pipe)
			for i := 0; i < tc.keep && sc.Scan(); i++ {
			}
			pipe.Close() // every later write by goalrun gets EPIPE
			waited := make(chan error, 1)
			go func() { waited <- cmd.Wait() }()
			select {
			case <-waited:
			case <-time.After(guard):
				cmd.Process.Kill()
				t.Fatal("goalrun did not end")
			}
			ws2 := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if ws2.Signaled() {
				t.Fatalf("goalrun was killed by %v", ws2.Signal())
			}
			if code := cmd.ProcessState.ExitCode(); code != exitMet {
				t.Errorf("exit %d, want the run's own 0\n%s", code, other.Bytes())
			}
			b, err := os.ReadFile(filepath.Join(tmp, "doc.json"))
			if err != nil {
				t.Fatalf("--output was not written: %v", err)
			}
			var d map[string]any
			if err := json.Unmarshal(b, &d); err != nil || get(d, "goal", "passed") != true {
				t.Errorf("--output %s: %v", b, err)
			}
			if left := leftovers(t, cli, cmd.Process.Pid, tmp); len(left) > 1 || (len(left) == 1 && !strings.HasSuffix(left[0], "doc.json")) {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}

// TestEgressRelayIdentityWhenGoalrunIsNotRoot: goalrun run by a normal user
// (who owns the workspace, so the sandbox user is that same uid) still
// gives the relay a uid of its own: the agent can neither kill nor stop
// it, nor reach the proxy's socket with a relay of its own; on the host
// neither another user nor goalrun's own uid gets an answer from the
// socket, while the relay's uid does.
func TestEgressRelayIdentityWhenGoalrunIsNotRoot(t *testing.T) {
	cli := engineClient(t)
	if os.Getuid() != 0 {
		t.Skip("the test starts goalrun as another user: it needs root")
	}
	const user = 1000
	sockPath := "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); strings.HasPrefix(h, "unix://") {
		sockPath = strings.TrimPrefix(h, "unix://")
	} else if h != "" {
		t.Skipf("DOCKER_HOST %s: goalrun reaches the Engine without the docker group", h)
	}
	st, err := os.Stat(sockPath)
	if err != nil {
		t.Fatal(err)
	}
	dockerGID := st.Sys().(*syscall.Stat_t).Gid
	ws, home, tmp := shortTempDir(t), shortTempDir(t), shortTempDir(t) // each 0700 and given to the user: no root-only folder above
	for _, d := range []string{ws, home, tmp} {
		if err := os.Chown(d, user, user); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(tmp, 0o711)               // like /tmp: the relay's uid may pass through (the host-side control)
	bin := dockertest.GoalrunBinary(t) // static: the relay
	os.Chmod(filepath.Dir(bin), 0o755)
	agent := `id -u > agent-uid
for p in $(pidof goalrun) 1; do kill -STOP $p 2>/dev/null && echo stopped $p; kill -9 $p 2>/dev/null && echo killed $p; done > signals
/.goalrun/goalrun __relay 127.0.0.1:4000=/run/goalrun/egress/proxy.sock & sleep 1
printf 'GET http://example.test/ HTTP/1.0\r\n\r\n' | nc -w 5 127.0.0.1 4000 | head -1 > own-relay
printf 'GET http://example.test/ HTTP/1.0\r\n\r\n' | nc -w 5 127.0.0.1 3128 | head -1 > goalruns-relay
kill $!; touch ready; i=0; while [ ! -e host-done ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; touch done`
	cmd := exec.Command(bin, "run", "--json", "--agent", "command", "--agent-bin", agent, "--until", "test -e done",
		"--network", "egress", "--image", dockertest.Image(t, cli), "--workspace", "bind", "--max-iterations", "1")
	cmd.Dir = ws
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=" + tmp}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: user, Gid: user, Groups: []uint32{dockerGID}}}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	deadline := time.After(guard)
	for !exists(filepath.Join(ws, "ready")) {
		select {
		case <-waited:
			t.Fatalf("goalrun ended before the agent was ready:\n%s", stderr.Bytes())
		case <-deadline:
			cmd.Process.Kill()
			t.Fatal("the agent never got ready")
		case <-time.After(50 * time.Millisecond):
		}
	}
	socks, _ := filepath.Glob(filepath.Join(tmp, "goalrun-egress-*", "proxy.sock"))
	if len(socks) != 1 {
		t.Fatalf("proxy sockets in %s: %v", tmp, socks)
	}
	relayUID := -1
	procs, _ := filepath.Glob("/proc/[0-9]*/status")
	for _, p := range procs {
		b, _ := os.ReadFile(p)
		if !strings.HasPrefix(string(b), "Name:\tgoalrun\n") {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
				if uid, _ := strconv.Atoi(strings.Fields(rest)[0]); uid >= 60578 && uid <= 61183 {
					relayUID = uid
				}
			}
		}
	}
	host := map[string]string{
		"another user":    dockertest.AsUser(t, 4242, 4242, "dial", socks[0]),
		"goalrun's uid":   dockertest.AsUser(t, user, user, "dial", socks[0]),
		"the relay's uid": "",
	}
	if relayUID < 0 {
		t.Errorf("no relay with a uid of its own runs")
	} else {
		host["the relay's uid"] = dockertest.AsUser(t, relayUID, relayUID, "dial", socks[0])
	}
	os.WriteFile(filepath.Join(ws, "host-done"), nil, 0o644)
	select {
	case <-waited:
	case <-time.After(guard):
		cmd.Process.Kill()
		t.Fatal("goalrun did not end")
	}
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(ws, name))
		return strings.TrimSpace(string(b))
	}
	if read("agent-uid") != strconv.Itoa(user) {
		t.Errorf("the agent ran as %q, want goalrun's own uid %d (the workspace owner)", read("agent-uid"), user)
	}
	if s := read("signals"); s != "" {
		t.Errorf("the agent signalled the relay or init: %q", s)
	}
	if s := read("own-relay"); s != "" {
		t.Errorf("the agent's own relay got an answer from goalrun's proxy: %q", s)
	}
	if s := read("goalruns-relay"); !strings.HasPrefix(s, "HTTP/1.") {
		t.Errorf("goalrun's relay did not answer (the control): %q", s)
	}
	for who, got := range host {
		want := who == "the relay's uid"
		if answered := strings.HasPrefix(got, "answered:"); answered != want {
			t.Errorf("%s on the host: %q (answer wanted: %v)", who, got, want)
		}
	}
	if code := cmd.ProcessState.ExitCode(); code != exitMet {
		t.Errorf("exit %d\n%s", code, stderr.Bytes())
	}
}

// janitorOf returns the pid of the janitor goalrun process pid started (0
// when none runs).
func janitorOf(pid int) int {
	want := "\x00" + janitorCommand + "\x00--for\x00" + strconv.Itoa(pid) + "\x00"
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), want) {
			jp, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			return jp
		}
	}
	return 0
}

// TestKilledRunLeavesNothingBehind: goalrun killed outright (SIGKILL: no
// document can be written) during a check — its agent container frozen, so
// the container's own self-ending timer cannot fire — or during an agent
// turn with egress. The janitor it started removes everything it left
// (containers, the frozen one too, volume, socket folder, baseline copy)
// within seconds; with the janitor killed as well, the next goalrun's
// start-up does.
func TestKilledRunLeavesNothingBehind(t *testing.T) {
	cli := engineClient(t)
	for _, tc := range []struct {
		name         string
		during       string
		egress       bool
		killJanitor  bool
		wantInTmpDir bool // a baseline copy or socket folder exists before the kill
	}{
		{"SIGKILL during a check, the agent container frozen", report.EventCheckStarted, false, false, true},
		{"SIGKILL during an agent turn with egress", report.EventAgentStarted, true, false, true},
		{"SIGKILL of the run and its janitor during a check: the next run reaps", report.EventCheckStarted, false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			if os.Getuid() == 0 {
				os.Chown(ws, 1000, 1000)
			}
			tmp := shortTempDir(t)
			until, agentCmd, it := "false", "sleep 300", 1
			if tc.during == report.EventCheckStarted {
				// The agent container starts with the first agent turn:
				// check #0 fails, turn 1 runs, and check #1 (with the agent
				// container frozen) is where the run is killed.
				until, agentCmd, it = "if test -e agent-ran; then sleep 300; else false; fi", "touch agent-ran", 1
			}
			bin, args := goalrunBin, []string{"run", "--json", "--agent", "command", "--agent-bin", agentCmd, "--until", until, "--workspace", "copy"}
			if tc.egress {
				bin, args = dockertest.GoalrunBinary(t), append(args, "--network", "egress")
			}
			r := startGoalrunBin(t, bin, ws, []string{"TMPDIR=" + tmp}, args...)
			r.waitEvent(t, tc.during, it)
			time.Sleep(time.Second)
			pid := r.cmd.Process.Pid
			before := leftovers(t, cli, pid, tmp)
			if tc.during == report.EventCheckStarted {
				paused := false
				cs, _ := cli.ContainerList(t.Context(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", sandbox.LabelRole+"=agent"))})
				for _, c := range cs {
					if strings.Split(c.Labels[sandbox.LabelOwner], "/")[1] == strconv.Itoa(pid) {
						paused = c.State == "paused"
					}
				}
				if !paused {
					t.Fatalf("the agent container is not frozen during the check: the test would prove nothing (%v)", before)
				}
			}
			if hasDir := strings.Contains(fmt.Sprint(before), "folder "); hasDir != tc.wantInTmpDir || len(before) == 0 {
				t.Fatalf("before the kill: %v", before)
			}
			if tc.killJanitor {
				jp := janitorOf(pid)
				if jp == 0 {
					t.Fatal("the run has no janitor")
				}
				syscall.Kill(jp, syscall.SIGKILL)
			}
			r.cmd.Process.Signal(syscall.SIGKILL)
			<-r.done
			if tc.killJanitor {
				// Any goalrun starting on this Engine reaps dead runs: on a
				// shared machine another one may come first.
				if left := leftovers(t, cli, pid, tmp); len(left) == 0 {
					t.Log("another goalrun on this Engine reaped the dead run before the next run of this test")
				}
				if janitorOf(pid) != 0 {
					t.Fatal("the janitor still runs")
				}
				next := goalrun(t, t.TempDir(), []string{"TMPDIR=" + tmp}, "run", "--json", "--sandbox", "docker", "--agent", "command", "--agent-bin", "true", "--until", "true")
				if next.code != exitMet {
					t.Fatalf("the next run: exit %d\n%s", next.code, next.stderr)
				}
			}
			killed := time.Now()
			deadline := killed.Add(time.Minute)
			left := leftovers(t, cli, pid, tmp)
			for len(left) > 0 && time.Now().Before(deadline) {
				time.Sleep(200 * time.Millisecond)
				left = leftovers(t, cli, pid, tmp)
			}
			if len(left) > 0 {
				t.Errorf("left behind a minute after the kill: %v", left)
			} else {
				t.Logf("nothing left %s after the kill (before: %v)", time.Since(killed).Round(100*time.Millisecond), before)
			}
			for deadline := time.Now().Add(time.Minute); janitorOf(pid) != 0 && time.Now().Before(deadline); {
				time.Sleep(200 * time.Millisecond)
			}
			if jp := janitorOf(pid); jp != 0 {
				syscall.Kill(jp, syscall.SIGKILL)
				t.Errorf("the janitor still runs after its work")
			}
		})
	}
}

// TestJSONStreamsAreNotWrittenTwice: in --json mode --output or --events
// naming goalrun's own stdout or stderr (either way round) would put a
// second document or every event twice on a stream, or the document among
// the events: bad input.
func TestJSONStreamsAreNotWrittenTwice(t *testing.T) {
	for _, tc := range []struct{ flag, path string }{
		{"--output", "/dev/stdout"}, {"--events", "/dev/stderr"},
		{"--events", "/dev/stdout"}, {"--output", "/dev/stderr"}, {"--output", "/dev/fd/2"},
	} {
		t.Run(tc.flag+" "+tc.path, func(t *testing.T) {
			r := goalrun(t, t.TempDir(), nil, "run", "--json", "--sandbox", "local", "--agent", "command", "--agent-bin", "true",
				"--until", "true", tc.flag, tc.path)
			d := r.doc(t)
			r.events(t)
			if r.code != exitBadInput || !strings.Contains(fmt.Sprint(d["message"]), tc.flag) {
				t.Errorf("exit %d message %v, want 2 naming %s", r.code, d["message"], tc.flag)
			}
		})
	}
}

// TestOutputThroughOwnStreams: outside --json, --output /dev/stdout or
// --events /dev/stderr with the stream redirected to a file is written
// through that stream, after what goalrun wrote there: the run keeps its
// exit code and the file holds the document or the events — never "the
// path was replaced during the run".
func TestOutputThroughOwnStreams(t *testing.T) {
	for _, tc := range []struct {
		name, flag, path string
		stream           string // the redirected stream the flag names
		want             string // what the file must end with (JSON of it)
	}{
		{"--output /dev/stdout > file", "--output", "/dev/stdout", "stdout", "document"},
		{"--events /dev/stderr 2> file", "--events", "/dev/stderr", "stderr", "events"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			out, err := os.Create(filepath.Join(t.TempDir(), "stream"))
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			var other bytes.Buffer
			cmd := exec.Command(goalrunBin, "run", "--sandbox", "local", "--agent", "command", "--agent-bin", "true", "--until", "true",
				tc.flag, tc.path)
			cmd.Dir = ws
			cmd.Env = baseEnv()
			if tc.stream == "stdout" {
				cmd.Stdout, cmd.Stderr = out, &other
			} else {
				cmd.Stdout, cmd.Stderr = &other, out
			}
			if err := cmd.Run(); err != nil && cmd.ProcessState == nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(out.Name())
			if code := cmd.ProcessState.ExitCode(); code != exitMet {
				t.Fatalf("exit %d, want 0\n%s\n%s", code, other.Bytes(), b)
			}
			if bytes.Contains(append(b, other.Bytes()...), []byte("replaced")) {
				t.Errorf("a false replacement was reported:\n%s\n%s", b, other.Bytes())
			}
			switch tc.want {
			case "document":
				// The human result, then the document (the time line may
				// follow it).
				i := bytes.Index(b, []byte(`{"schema":"goalrun/1"`))
				if i < 0 {
					t.Fatalf("no document in the stream:\n%s", b)
				}
				line, _, _ := bytes.Cut(b[i:], []byte("\n"))
				var d map[string]any
				if err := json.Unmarshal(line, &d); err != nil || get(d, "goal", "passed") != true {
					t.Errorf("the document in the stream: %v\n%s", err, line)
				}
			case "events":
				n := 0
				for _, l := range bytes.Split(b, []byte("\n")) {
					var e report.Event
					if json.Unmarshal(l, &e) == nil && e.Type != "" {
						n++
						if e.Type == report.EventCompleted {
							n += 1000
						}
					}
				}
				if n < 1000 {
					t.Errorf("no completed event in the stream:\n%s", b)
				}
			}
		})
	}
}
