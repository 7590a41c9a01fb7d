// Package sandboxtest is the conformance suite every sandbox.Sandbox must
// pass (docs/architecture.md, "Package map"). It exercises only the
// portable contract of the interface, with steps written for a POSIX shell and
// busybox utilities (sh, echo, printf, cat, env, head, yes, sleep, kill, pwd,
// trap), so the same suite runs against the local host and a minimal
// container image.
//
// Use it from an implementation's test:
//
//	func TestConformance(t *testing.T) {
//		sandboxtest.Run(t, func(t *testing.T, cfg sandbox.Config) sandbox.Sandbox {
//			sb, err := sandbox.StartLocal(t.Context(), cfg)
//			if err != nil {
//				t.Fatal(err)
//			}
//			return sb
//		})
//	}
//
// The factory receives a Config with Workspace (a fresh host directory),
// RunID, Env and Secrets filled in; it adds what its implementation needs
// (image, mounts) and returns a started sandbox. The suite closes every
// sandbox it starts.
package sandboxtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goalrun/goalrun/sandbox"
)

// Factory starts a sandbox for cfg or fails the test.
type Factory func(t *testing.T, cfg sandbox.Config) sandbox.Sandbox

// Variables the suite sets and looks for.
const (
	// HostOnlyVar is set in goalrun's own environment (t.Setenv) and must not
	// reach any step: steps get an allowlisted environment.
	HostOnlyVar = "GOALRUN_SANDBOXTEST_HOST_ONLY"
	// EnvVar is passed in Config.Env: agent steps see it.
	EnvVar = "GOALRUN_SANDBOXTEST_ENV"
	// SecretVar is passed in Config.Secrets: agent steps see it, check steps
	// never do.
	SecretVar = "GOALRUN_SANDBOXTEST_SECRET"
	// StepVar is passed in Cmd.Env: every step sees it.
	StepVar = "GOALRUN_SANDBOXTEST_STEP"

	secretValue = "s3cr3t-value-that-must-not-reach-checks"
)

// deadline bounds every single case: far more than any case needs, so a
// broken implementation fails with a message instead of hanging the suite.
// It is a guard, not a timing assertion.
const deadline = 60 * time.Second

// Run runs the conformance suite against the sandboxes newSandbox starts.
// It uses t.Setenv, so the calling test must not be parallel.
func Run(t *testing.T, newSandbox Factory) {
	t.Setenv(HostOnlyVar, "leaked-from-the-host")
	start := func(t *testing.T) (sandbox.Sandbox, sandbox.Config) {
		t.Helper()
		cfg := sandbox.Config{
			RunID:     "sandboxtest-" + strings.ReplaceAll(strings.ToLower(t.Name()), "/", "-"),
			Workspace: t.TempDir(),
			Env:       map[string]string{EnvVar: "env-value"},
			Secrets:   map[string]string{SecretVar: secretValue},
		}
		sb := newSandbox(t, cfg)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			if err := sb.Close(ctx); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return sb, cfg
	}

	t.Run("ExitCodes", func(t *testing.T) {
		sb, _ := start(t)
		cases := []struct {
			name   string
			role   sandbox.Role
			script string
			want   int
		}{
			{"zero", sandbox.RoleAgent, "true", 0},
			{"one", sandbox.RoleCheck, "false", 1},
			{"three", sandbox.RoleAgent, "exit 3", 3},
			{"command not found is a result", sandbox.RoleCheck, "goalrun-sandboxtest-no-such-command", 127},
			{"killed by SIGKILL is 128+9", sandbox.RoleAgent, "kill -9 $$", 137},
			{"killed by SIGTERM is 128+15", sandbox.RoleCheck, "kill -15 $$", 143},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				res := mustExec(t, sb, sandbox.Cmd{Role: tc.role, Args: sandbox.Shell(tc.script)})
				if res.ExitCode != tc.want {
					t.Errorf("exit code = %d, want %d (stderr %q)", res.ExitCode, tc.want, res.Stderr.Tail)
				}
				if res.TimedOut || res.Cancelled {
					t.Errorf("TimedOut=%v Cancelled=%v, want both false", res.TimedOut, res.Cancelled)
				}
			})
		}
	})

	t.Run("OutputTailsAndTotals", func(t *testing.T) {
		sb, _ := start(t)
		var out, errOut bytes.Buffer
		res := mustExec(t, sb, sandbox.Cmd{
			Args:   sandbox.Shell("printf 'to stdout\\n'; printf 'to stderr\\n' >&2"),
			Stdout: &out, Stderr: &errOut,
		})
		for _, c := range []struct {
			name    string
			got     sandbox.Output
			written string
			want    string
		}{
			{"stdout", res.Stdout, out.String(), "to stdout\n"},
			{"stderr", res.Stderr, errOut.String(), "to stderr\n"},
		} {
			if string(c.got.Tail) != c.want || c.got.Bytes != int64(len(c.want)) || c.got.Truncated {
				t.Errorf("%s: tail %q bytes %d truncated %v, want %q %d false", c.name, c.got.Tail, c.got.Bytes, c.got.Truncated, c.want, len(c.want))
			}
			if c.written != c.want {
				t.Errorf("%s: streamed %q, want %q", c.name, c.written, c.want)
			}
		}
	})

	t.Run("HugeOutputKeepsBoundedTail", func(t *testing.T) {
		sb, _ := start(t)
		// 1 MiB + "THE-END\n" on stdout, 256 KiB on stderr: far more than the tail.
		const outN, errN = 1 << 20, 256 << 10
		script := fmt.Sprintf("yes 0123456789abcde | head -c %d; echo THE-END; yes e | head -c %d >&2", outN, errN)
		var streamed countingWriter
		res := mustExec(t, sb, sandbox.Cmd{Args: sandbox.Shell(script), Stdout: &streamed})
		wantOut := int64(outN + len("THE-END\n"))
		if res.Stdout.Bytes != wantOut || streamed.n.Load() != wantOut {
			t.Errorf("stdout total %d, streamed %d, want %d", res.Stdout.Bytes, streamed.n.Load(), wantOut)
		}
		if len(res.Stdout.Tail) != sandbox.TailBytes || !res.Stdout.Truncated {
			t.Errorf("stdout tail %d bytes truncated=%v, want %d bytes truncated", len(res.Stdout.Tail), res.Stdout.Truncated, sandbox.TailBytes)
		}
		if res.Stderr.Bytes != errN || len(res.Stderr.Tail) != sandbox.TailBytes || !res.Stderr.Truncated {
			t.Errorf("stderr total %d tail %d truncated %v, want %d %d true", res.Stderr.Bytes, len(res.Stderr.Tail), res.Stderr.Truncated, errN, sandbox.TailBytes)
		}
		// Reconstruct the expected tail: the stream is a repetition of a
		// 16-byte line, so its last TailBytes before THE-END are determined.
		want := expectedTail(outN, "0123456789abcde\n", "THE-END\n", sandbox.TailBytes)
		if !bytes.Equal(res.Stdout.Tail, want) {
			t.Errorf("stdout tail differs from the stream's last %d bytes; ends %q", sandbox.TailBytes, lastBytes(res.Stdout.Tail, 48))
		}
	})

	t.Run("StreamsWhileRunning", func(t *testing.T) {
		sb, cfg := start(t)
		// The step waits for a file that the test creates only after it has
		// seen the step's first line: it can end only if output is streamed.
		w := &signalWriter{want: "ready", fire: func() {
			_ = os.WriteFile(filepath.Join(cfg.Workspace, "go-on"), nil, 0o644)
		}}
		res := mustExec(t, sb, sandbox.Cmd{
			Args:    sandbox.Shell("echo ready; i=0; while [ ! -e go-on ]; do i=$((i+1)); [ $i -gt 300 ] && exit 9; sleep 0.1; done; echo done"),
			Stdout:  w,
			Timeout: 45 * time.Second,
		})
		if res.ExitCode != 0 {
			t.Fatalf("exit code %d: the first line was not streamed before the step ended (stdout %q)", res.ExitCode, res.Stdout.Tail)
		}
		if got := w.String(); got != "ready\ndone\n" {
			t.Errorf("streamed %q, want %q", got, "ready\ndone\n")
		}
	})

	t.Run("SharedWriterForBothStreams", func(t *testing.T) {
		sb, _ := start(t)
		var both bytes.Buffer // not safe for concurrent use: the sandbox must serialize
		res := mustExec(t, sb, sandbox.Cmd{
			Args:   sandbox.Shell("for i in 1 2 3 4 5 6 7 8; do echo out$i; echo err$i >&2; done"),
			Stdout: &both, Stderr: &both,
		})
		if res.ExitCode != 0 {
			t.Fatalf("exit code %d", res.ExitCode)
		}
		for i := 1; i <= 8; i++ {
			for _, s := range []string{"out", "err"} {
				if line := fmt.Sprintf("%s%d\n", s, i); !strings.Contains(both.String(), line) {
					t.Errorf("combined output lacks %q: %q", line, both.String())
				}
			}
		}
	})

	t.Run("TimeoutKillsGroupIgnoringSIGTERM", func(t *testing.T) {
		sb, cfg := start(t)
		// The shell and a background child both ignore SIGTERM; the child
		// writes a tick file every 0.2 s. After the timeout, the ticks stop.
		script := `trap '' TERM; (trap '' TERM; while :; do echo t >> ticks; sleep 0.2; done) & until [ -s ticks ]; do sleep 0.05; done; echo started; sleep 120; echo survived`
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		res, err := sb.Exec(ctx, sandbox.Cmd{Args: sandbox.Shell(script), Timeout: time.Second})
		if err != nil {
			t.Fatalf("Exec: %v", err)
		}
		if ctx.Err() != nil {
			t.Fatalf("Exec returned only after the suite's %s guard", deadline)
		}
		if !res.TimedOut || res.Cancelled {
			t.Errorf("TimedOut=%v Cancelled=%v, want true false", res.TimedOut, res.Cancelled)
		}
		if res.ExitCode < 128 {
			t.Errorf("exit code %d, want 128+signal", res.ExitCode)
		}
		if strings.Contains(string(res.Stdout.Tail), "survived") {
			t.Errorf("the step ran to its end: %q", res.Stdout.Tail)
		}
		assertStopsGrowing(t, filepath.Join(cfg.Workspace, "ticks"))
	})

	// Scripts below start a background writer of a tick file and say
	// "started" only once the first tick exists.
	t.Run("ContextCancelKillsGroup", func(t *testing.T) {
		sb, cfg := start(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		w := &signalWriter{want: "started", fire: cancel}
		guard := time.AfterFunc(deadline, cancel)
		defer guard.Stop()
		res, err := sb.Exec(ctx, sandbox.Cmd{
			Args:   sandbox.Shell(`(while :; do echo t >> ticks; sleep 0.2; done) & until [ -s ticks ]; do sleep 0.05; done; echo started; sleep 120`),
			Stdout: w,
		})
		if err != nil {
			t.Fatalf("Exec: %v", err)
		}
		if !res.Cancelled || res.TimedOut {
			t.Errorf("Cancelled=%v TimedOut=%v, want true false", res.Cancelled, res.TimedOut)
		}
		assertStopsGrowing(t, filepath.Join(cfg.Workspace, "ticks"))
	})

	t.Run("ContextAlreadyDone", func(t *testing.T) {
		sb, cfg := start(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		res, err := sb.Exec(ctx, sandbox.Cmd{Args: sandbox.Shell("echo ran > ran")})
		if err == nil && !res.Cancelled {
			t.Errorf("Exec with a done context: err nil and not cancelled (%+v)", res)
		}
		if _, err := os.Stat(filepath.Join(cfg.Workspace, "ran")); err == nil {
			t.Errorf("a step ran although its context was done")
		}
	})

	t.Run("EnvironmentAllowlist", func(t *testing.T) {
		sb, _ := start(t)
		step := map[string]string{StepVar: "step-value"}
		cases := []struct {
			name    string
			role    sandbox.Role
			present map[string]string
			absent  []string
		}{
			{"agent", sandbox.RoleAgent,
				map[string]string{EnvVar: "env-value", SecretVar: secretValue, StepVar: "step-value"},
				[]string{HostOnlyVar}},
			{"check", sandbox.RoleCheck,
				map[string]string{StepVar: "step-value"},
				[]string{HostOnlyVar, SecretVar, "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				res := mustExec(t, sb, sandbox.Cmd{Role: tc.role, Args: []string{"env"}, Env: step})
				env := parseEnv(string(res.Stdout.Tail))
				for k, v := range tc.present {
					if env[k] != v {
						t.Errorf("%s = %q, want %q", k, env[k], v)
					}
				}
				for _, k := range tc.absent {
					if v, ok := env[k]; ok {
						t.Errorf("%s is set (%q); it must not reach a %s step", k, v, tc.name)
					}
				}
				if tc.role == sandbox.RoleCheck && strings.Contains(string(res.Stdout.Tail), secretValue) {
					t.Errorf("the secret's value reached a check step")
				}
				if _, ok := env["PATH"]; !ok {
					t.Errorf("PATH is not set")
				}
			})
		}
	})

	t.Run("WorkingDirectory", func(t *testing.T) {
		sb, cfg := start(t)
		if err := os.MkdirAll(filepath.Join(cfg.Workspace, "sub", "deeper"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cfg.Workspace, "sub", "deeper", "marker"), []byte("in deeper\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cfg.Workspace, "root-marker"), []byte("in root\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			name, dir, script, want string
		}{
			{"root by default", "", "cat root-marker", "in root\n"},
			{"dot is the root", ".", "cat root-marker", "in root\n"},
			{"nested", "sub/deeper", "cat marker", "in deeper\n"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				res := mustExec(t, sb, sandbox.Cmd{Role: sandbox.RoleCheck, Dir: tc.dir, Args: sandbox.Shell(tc.script)})
				if string(res.Stdout.Tail) != tc.want {
					t.Errorf("stdout %q (exit %d, stderr %q), want %q", res.Stdout.Tail, res.ExitCode, res.Stderr.Tail, tc.want)
				}
			})
		}
		root := sb.Posture().Root
		res := mustExec(t, sb, sandbox.Cmd{Dir: "sub", Args: []string{"pwd"}})
		if got := strings.TrimSpace(string(res.Stdout.Tail)); got != strings.TrimSuffix(root, "/")+"/sub" {
			t.Errorf("pwd in sub = %q, want %q (posture root %q)", got, root+"/sub", root)
		}
		for _, bad := range []string{"..", "../x", "/etc", "sub/../../x"} {
			t.Run("refuses "+bad, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				defer cancel()
				res, err := sb.Exec(ctx, sandbox.Cmd{Dir: bad, Args: sandbox.Shell("echo escaped > escaped")})
				if err == nil && res.ExitCode == 0 {
					t.Errorf("Dir %q outside the workspace ran: %+v", bad, res)
				}
			})
		}
	})

	t.Run("Stdin", func(t *testing.T) {
		sb, _ := start(t)
		big := strings.Repeat("0123456789abcdef", 64<<10) // 1 MiB: more than a pipe buffer
		cases := []struct {
			name  string
			stdin io.Reader
			want  string
		}{
			{"nil is empty input", nil, "0\n"},
			{"short", strings.NewReader("hello\nworld\n"), "12\n"},
			{"larger than a pipe", strings.NewReader(big), fmt.Sprintf("%d\n", len(big))},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				res := mustExec(t, sb, sandbox.Cmd{Args: sandbox.Shell("wc -c | tr -d ' '"), Stdin: tc.stdin})
				if string(res.Stdout.Tail) != tc.want {
					t.Errorf("byte count %q, want %q", res.Stdout.Tail, tc.want)
				}
			})
		}
		t.Run("step that ignores stdin", func(t *testing.T) {
			res := mustExec(t, sb, sandbox.Cmd{Args: sandbox.Shell("echo ignored"), Stdin: strings.NewReader(big)})
			if res.ExitCode != 0 || string(res.Stdout.Tail) != "ignored\n" {
				t.Errorf("exit %d stdout %q", res.ExitCode, res.Stdout.Tail)
			}
		})
	})

	t.Run("WorkspaceWritesVisibleOnHost", func(t *testing.T) {
		sb, cfg := start(t)
		if err := os.WriteFile(filepath.Join(cfg.Workspace, "from-host"), []byte("host wrote this\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		res := mustExec(t, sb, sandbox.Cmd{Args: sandbox.Shell("cat from-host > copied && mkdir -p made/dir && echo inside > made/dir/file")})
		if res.ExitCode != 0 {
			t.Fatalf("exit %d stderr %q", res.ExitCode, res.Stderr.Tail)
		}
		for name, want := range map[string]string{"copied": "host wrote this\n", "made/dir/file": "inside\n"} {
			got, err := os.ReadFile(filepath.Join(cfg.Workspace, filepath.FromSlash(name)))
			if err != nil || string(got) != want {
				t.Errorf("host reads %s: %q, %v; want %q", name, got, err, want)
			}
		}
	})

	t.Run("NotStarted", func(t *testing.T) {
		sb, _ := start(t)
		cases := []struct {
			name string
			args []string
		}{
			{"no such program", []string{"goalrun-sandboxtest-no-such-program"}},
			{"no such path", []string{"/goalrun-sandboxtest/no/such/program"}},
			{"empty argv", nil},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				defer cancel()
				_, err := sb.Exec(ctx, sandbox.Cmd{Args: tc.args})
				if !errors.Is(err, sandbox.ErrNotStarted) {
					t.Errorf("err = %v, want one wrapping sandbox.ErrNotStarted", err)
				}
			})
		}
	})

	t.Run("Posture", func(t *testing.T) {
		sb, _ := start(t)
		p := sb.Posture()
		if p.Mode == "" || p.Network == "" || p.Tier == "" || p.Root == "" || p.Workspace == "" || p.User == "" {
			t.Errorf("posture misses basic facts: %+v", p)
		}
		if p.SecretsInSandbox == nil || p.CapDrop == nil {
			t.Errorf("posture lists must be empty, not nil (JSON [] not null): %+v", p)
		}
		for _, s := range p.SecretsInSandbox {
			if s == secretValue {
				t.Errorf("posture holds a secret's value")
			}
		}
	})

	// The cases above mostly run agent steps; a check step may take
	// another path (Docker runs it in a fresh container), so the same
	// contract is exercised for RoleCheck here.
	t.Run("CheckStepsKeepTheContract", func(t *testing.T) {
		sb, cfg := start(t)
		big := strings.Repeat("0123456789abcdef", 64<<10) // 1 MiB
		t.Run("stdin larger than a pipe", func(t *testing.T) {
			res := mustExec(t, sb, sandbox.Cmd{Role: sandbox.RoleCheck, Args: sandbox.Shell("wc -c | tr -d ' '"), Stdin: strings.NewReader(big)})
			if want := fmt.Sprintf("%d\n", len(big)); string(res.Stdout.Tail) != want {
				t.Errorf("byte count %q, want %q", res.Stdout.Tail, want)
			}
		})
		t.Run("nil stdin is empty", func(t *testing.T) {
			res := mustExec(t, sb, sandbox.Cmd{Role: sandbox.RoleCheck, Args: sandbox.Shell("wc -c | tr -d ' '")})
			if string(res.Stdout.Tail) != "0\n" {
				t.Errorf("byte count %q, want 0", res.Stdout.Tail)
			}
		})
		t.Run("working directory", func(t *testing.T) {
			if err := os.MkdirAll(filepath.Join(cfg.Workspace, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			res := mustExec(t, sb, sandbox.Cmd{Role: sandbox.RoleCheck, Dir: "sub", Args: []string{"pwd"}})
			root := sb.Posture().Root
			if got := strings.TrimSpace(string(res.Stdout.Tail)); got != strings.TrimSuffix(root, "/")+"/sub" {
				t.Errorf("pwd = %q, want %q", got, root+"/sub")
			}
		})
		t.Run("missing program is not started", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			if _, err := sb.Exec(ctx, sandbox.Cmd{Role: sandbox.RoleCheck, Args: []string{"goalrun-sandboxtest-no-such-program"}}); !errors.Is(err, sandbox.ErrNotStarted) {
				t.Errorf("err = %v, want one wrapping sandbox.ErrNotStarted", err)
			}
		})
		t.Run("timeout kills the whole step ignoring SIGTERM", func(t *testing.T) {
			script := `trap '' TERM; (trap '' TERM; while :; do echo t >> check-ticks; sleep 0.2; done) & until [ -s check-ticks ]; do sleep 0.05; done; echo started; sleep 120; echo survived`
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			res, err := sb.Exec(ctx, sandbox.Cmd{Role: sandbox.RoleCheck, Args: sandbox.Shell(script), Timeout: 3 * time.Second})
			if err != nil {
				t.Fatalf("Exec: %v", err)
			}
			if !res.TimedOut || res.Cancelled || res.ExitCode < 128 || strings.Contains(string(res.Stdout.Tail), "survived") {
				t.Errorf("not killed at its timeout: %+v", res)
			}
			// A check on a view (Docker) writes check-ticks into a folder that
			// is thrown away; the workspace never gets it.
			if v := sb.Posture().CheckView; v == "" || v == sandbox.CheckViewWorkspace {
				assertStopsGrowing(t, filepath.Join(cfg.Workspace, "check-ticks"))
			} else if _, err := os.Stat(filepath.Join(cfg.Workspace, "check-ticks")); err == nil {
				t.Errorf("the check's write reached the workspace through its %s view", v)
			}
		})
		t.Run("context cancel", func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w := &signalWriter{want: "started", fire: cancel}
			guard := time.AfterFunc(deadline, cancel)
			defer guard.Stop()
			res, err := sb.Exec(ctx, sandbox.Cmd{Role: sandbox.RoleCheck, Args: sandbox.Shell("echo started; sleep 120; echo survived"), Stdout: w})
			if err != nil {
				t.Fatalf("Exec: %v", err)
			}
			if !res.Cancelled || res.TimedOut || strings.Contains(string(res.Stdout.Tail), "survived") {
				t.Errorf("Cancelled=%v TimedOut=%v stdout %q, want cancelled", res.Cancelled, res.TimedOut, res.Stdout.Tail)
			}
		})
	})

	t.Run("CloseKillsRunningStepsAndIsIdempotent", func(t *testing.T) {
		sb, cfg := start(t)
		started := make(chan struct{})
		var once sync.Once
		w := &signalWriter{want: "started", fire: func() { once.Do(func() { close(started) }) }}
		type outcome struct {
			res sandbox.Result
			err error
		}
		done := make(chan outcome, 1)
		go func() {
			res, err := sb.Exec(context.Background(), sandbox.Cmd{
				Args:   sandbox.Shell(`trap '' TERM; (while :; do echo t >> ticks; sleep 0.2; done) & until [ -s ticks ]; do sleep 0.05; done; echo started; sleep 120`),
				Stdout: w,
			})
			done <- outcome{res, err}
		}()
		select {
		case <-started:
		case <-time.After(deadline):
			t.Fatal("the step never started")
		}
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		if err := sb.Close(ctx); err != nil {
			t.Fatalf("first Close: %v", err)
		}
		select {
		case o := <-done:
			if o.err == nil && o.res.ExitCode == 0 {
				t.Errorf("the running step ended normally after Close: %+v", o.res)
			}
		case <-time.After(deadline):
			t.Fatal("the running step outlived Close")
		}
		assertStopsGrowing(t, filepath.Join(cfg.Workspace, "ticks"))
		if err := sb.Close(ctx); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if _, err := sb.Exec(ctx, sandbox.Cmd{Args: sandbox.Shell("true")}); !errors.Is(err, sandbox.ErrClosed) {
			t.Errorf("Exec after Close: %v, want sandbox.ErrClosed", err)
		}
	})
}

// mustExec runs cmd under the suite's guard deadline and fails on error.
func mustExec(t *testing.T, sb sandbox.Sandbox, cmd sandbox.Cmd) sandbox.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	res, err := sb.Exec(ctx, cmd)
	if err != nil {
		t.Fatalf("Exec %q: %v", cmd.Args, err)
	}
	if res.Cancelled {
		t.Fatalf("Exec %q hit the suite's %s guard", cmd.Args, deadline)
	}
	return res
}

// assertStopsGrowing checks that nothing appends to path any more: its size
// is the same before and after a pause several times the writer's period.
func assertStopsGrowing(t *testing.T, path string) {
	t.Helper()
	size := func() int64 {
		st, err := os.Stat(path)
		if err != nil {
			return -1
		}
		return st.Size()
	}
	before := size()
	if before <= 0 {
		t.Fatalf("%s was never written: the background process did not run", filepath.Base(path))
	}
	time.Sleep(1200 * time.Millisecond)
	if after := size(); after != before {
		t.Errorf("%s still grows (%d → %d bytes): a process of the step survived", filepath.Base(path), before, after)
	}
}

// signalWriter records what it is given and calls fire once the text seen
// so far contains want.
type signalWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	want  string
	fire  func()
	fired bool
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.buf.Write(p)
	fire := !w.fired && strings.Contains(w.buf.String(), w.want)
	if fire {
		w.fired = true
	}
	w.mu.Unlock()
	if fire {
		w.fire()
	}
	return len(p), nil
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// countingWriter counts bytes and keeps none.
type countingWriter struct{ n atomic.Int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n.Add(int64(len(p)))
	return len(p), nil
}

func parseEnv(s string) map[string]string {
	env := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	return env
}

// expectedTail is the last n bytes of (unit repeated to total bytes) + end.
func expectedTail(total int, unit, end string, n int) []byte {
	var b bytes.Buffer
	for b.Len() < total {
		b.WriteString(unit)
	}
	stream := append(b.Bytes()[:total], end...)
	return stream[len(stream)-n:]
}

func lastBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
