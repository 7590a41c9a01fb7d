package sandbox_test

// The attacks docs/security.md lists ("What each mount, volume and proxy
// guarantees"), each a named test against the real Engine. An exit 0 from an
// attack is a breach. The network attacks through the egress proxy are in
// docker_egress_test.go.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goalrun/goalrun/goal"
	"github.com/goalrun/goalrun/goal/workspace"
	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/dockertest"
)

var bothRoles = []sandbox.Role{sandbox.RoleAgent, sandbox.RoleCheck}

// TestAttackWriteOutsideWorkspace: writing to /etc, /usr, the image's
// binaries or the root fails with EROFS (or EACCES); only the workspace and
// the tmpfs mounts are writable.
func TestAttackWriteOutsideWorkspace(t *testing.T) {
	sb, _ := startDocker(t, sandbox.Config{})
	for _, role := range bothRoles {
		for _, target := range []string{"/etc/x", "/etc/passwd", "/usr/x", "/bin/busybox", "/x", "/workspace/../x", "/var/x", "/.goalrun-x"} {
			t.Run(role.String()+" "+target, func(t *testing.T) {
				res := run(t, sb, sh(role, "echo pwned >> "+target))
				if res.ExitCode == 0 {
					t.Fatalf("writing %s succeeded: breach", target)
				}
				msg := string(res.Stderr.Tail)
				if !strings.Contains(msg, "Read-only file system") && !strings.Contains(msg, "Permission denied") {
					t.Errorf("writing %s failed for another reason than EROFS/EACCES: %q", target, msg)
				}
			})
		}
		t.Run(role.String()+" workspace and tmpfs are writable", func(t *testing.T) {
			if res := run(t, sb, sh(role, "echo ok > /tmp/x && echo ok > $HOME/x && echo ok > /run/x && echo ok > ws-"+role.String())); res.ExitCode != 0 {
				t.Errorf("exit %d: %s", res.ExitCode, res.Stderr.Tail)
			}
		})
	}
}

// TestAttackNoResolverNoNetwork: without egress there is no interface but
// loopback, and no name resolves (there is no resolver inside).
func TestAttackNoResolverNoNetwork(t *testing.T) {
	sb, _ := startDocker(t, sandbox.Config{Network: sandbox.NetworkNone})
	for _, role := range bothRoles {
		for _, tc := range []struct{ name, script string }{
			{"resolve a name", "nslookup example.com"},
			{"resolve localhost's neighbour", "nslookup goalrun-test.invalid 127.0.0.11"},
			{"connect to an IP literal", "nc -w 2 1.1.1.1 443 </dev/null"},
			{"connect to the metadata address", "timeout 10 wget -q -O- http://169.254.169.254/"},
			{"an interface besides lo", "grep -v -E '^ *(lo|Inter|face)' /proc/net/dev | grep :"},
		} {
			t.Run(role.String()+" "+tc.name, func(t *testing.T) {
				if res := run(t, sb, sh(role, tc.script)); res.ExitCode == 0 {
					t.Errorf("succeeded: breach (stdout %q)", res.Stdout.Tail)
				}
			})
		}
	}
}

// TestAttackSecretsNotReachable: a check step never sees the run's secrets
// (env, /proc/*/environ, files), and no step sees goalrun's own
// environment (GITHUB_TOKEN) or the Docker socket.
func TestAttackSecretsNotReachable(t *testing.T) {
	const token = "ghs_goalrun_test_token_must_not_leak_0123456789"
	const secret = "goalrun-test-secret-value-0123456789"
	t.Setenv("GITHUB_TOKEN", token)
	sb, _ := startDocker(t, sandbox.Config{Secrets: map[string]string{"GOALRUN_TEST_SECRET": secret}})
	// The agent holds the secret it was given; it leaves a background
	// process carrying it, hoping the check can read its environ.
	if res := run(t, sb, sh(sandbox.RoleAgent, `test "$GOALRUN_TEST_SECRET" = "`+secret+`" && (sleep 300 &) && echo started`)); res.ExitCode != 0 {
		t.Fatalf("the agent step did not get its own secret: %d %s", res.ExitCode, res.Stderr.Tail)
	}
	hunt := `env; cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n'; grep -r -l -s -e "%s" / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev 2>/dev/null; true`
	for _, tc := range []struct {
		name  string
		role  sandbox.Role
		value string
	}{
		{"check cannot find the run's secret", sandbox.RoleCheck, secret},
		{"agent cannot find goalrun's GITHUB_TOKEN", sandbox.RoleAgent, token},
		{"check cannot find goalrun's GITHUB_TOKEN", sandbox.RoleCheck, token},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, sb, sh(tc.role, fmt.Sprintf(hunt, tc.value)))
			if strings.Contains(string(res.Stdout.Tail)+string(res.Stderr.Tail), tc.value) {
				t.Errorf("found it: breach")
			}
		})
	}
	t.Run("no runtime socket anywhere", func(t *testing.T) {
		for _, role := range bothRoles {
			res := run(t, sb, sh(role, "find / -xdev -type s 2>/dev/null; find /run /var /tmp -type s 2>/dev/null; ls /var/run/docker.sock /run/docker.sock /run/containerd 2>/dev/null; true"))
			if out := strings.TrimSpace(string(res.Stdout.Tail)); out != "" {
				t.Errorf("%s step sees sockets: %q", role, out)
			}
		}
	})
	if got := sb.Posture().SecretsInSandbox; len(got) != 1 || got[0] != "GOALRUN_TEST_SECRET" {
		t.Errorf("posture secrets_in_sandbox = %q, want the secret's name only", got)
	}
	if tier := sb.Posture().Tier; tier != sandbox.TierWorkspaceWrite {
		t.Errorf("a secret inside drops the tier: %q, want %q", tier, sandbox.TierWorkspaceWrite)
	}
}

// TestAttackForkBomb: a fork bomb hits the pids limit; the step is killed at
// its timeout, the sandbox recovers for the next step and goalrun stays
// responsive.
func TestAttackForkBomb(t *testing.T) {
	sb, _ := startDocker(t, sandbox.Config{NanoCPUs: 5e8, PidsLimit: 128})
	for _, role := range bothRoles {
		t.Run(role.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			var ticks atomic.Int64 // goalrun's own responsiveness
			stop := make(chan struct{})
			go func() {
				for {
					select {
					case <-stop:
						return
					case <-time.After(10 * time.Millisecond):
						ticks.Add(1)
					}
				}
			}()
			res, err := sb.Exec(ctx, sandbox.Cmd{Role: role, Args: sandbox.Shell("b(){ b | b & }; b; sleep 600"), Timeout: 5 * time.Second})
			close(stop)
			if err != nil {
				t.Fatalf("Exec: %v", err)
			}
			if !res.TimedOut || res.ExitCode == 0 {
				t.Errorf("the fork bomb was not stopped at its timeout: %+v", res)
			}
			if ticks.Load() == 0 {
				t.Errorf("goalrun's own goroutines never ran during the bomb")
			}
			after := run(t, sb, sh(role, "cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max; echo alive"))
			if after.ExitCode != 0 || !strings.Contains(string(after.Stdout.Tail), "128\nalive") {
				t.Errorf("the sandbox did not recover: exit %d %q %q", after.ExitCode, after.Stdout.Tail, after.Stderr.Tail)
			}
		})
	}
}

// TestAttackAllocateBeyondMemoryLimit: an unbounded allocation (the table's
// "allocate 16 GiB") is OOM-killed at the memory limit and reported.
func TestAttackAllocateBeyondMemoryLimit(t *testing.T) {
	sb, _ := startDocker(t, sandbox.Config{MemoryBytes: 256 << 20})
	if p := sb.Posture(); p.MemoryBytes != 256<<20 {
		t.Fatalf("posture memory %d, want %d", p.MemoryBytes, 256<<20)
	}
	for _, role := range bothRoles {
		t.Run(role.String(), func(t *testing.T) {
			// awk doubles a string until it holds 16 GiB (2^34 bytes).
			res := run(t, sb, sandbox.Cmd{Role: role, Args: sandbox.Shell(`awk 'BEGIN { s = "x"; for (i = 0; i < 34; i++) s = s s; print length(s) }'`), Timeout: 2 * time.Minute})
			if res.ExitCode == 0 || !res.OOMKilled {
				t.Errorf("exit %d OOMKilled %v, want an OOM kill (stdout %q stderr %q)", res.ExitCode, res.OOMKilled, res.Stdout.Tail, res.Stderr.Tail)
			}
			ok := run(t, sb, sh(role, "echo fine; exit 3"))
			if ok.OOMKilled || ok.ExitCode != 3 {
				t.Errorf("a later failing step is not an OOM: %+v", ok)
			}
		})
	}
}

// TestAttackPrintOneGigabyte: a step printing 1 GiB finishes; the result
// keeps a bounded tail, says truncated with the real total, and goalrun's
// heap stays small while the gigabyte streams through.
func TestAttackPrintOneGigabyte(t *testing.T) {
	sb, _ := startDocker(t, sandbox.Config{})
	for _, role := range bothRoles {
		t.Run(role.String(), func(t *testing.T) {
			// Garbage of earlier tests (a goalrun binary read into memory
			// to be copied into a container, say) stays in the heap until
			// the next collection, which a stream that allocates little
			// may not trigger: collect it first, so the peak is what the
			// stream costs.
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			base := ms.HeapInuse
			var peak atomic.Uint64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				var ms runtime.MemStats
				for {
					runtime.ReadMemStats(&ms)
					if ms.HeapInuse > peak.Load() {
						peak.Store(ms.HeapInuse)
					}
					select {
					case <-stop:
						return
					case <-time.After(20 * time.Millisecond):
					}
				}
			}()
			var streamed countWriter
			// 1 GiB through an agent step; a check step streams a quarter of
			// that (the same code path, less CI time: the Engine's stream
			// path is the slow part).
			size := int64(1 << 30)
			if role == sandbox.RoleCheck {
				size = 256 << 20
			}
			res := run(t, sb, sandbox.Cmd{Role: role, Args: sandbox.Shell(fmt.Sprintf("head -c %d /dev/zero; echo THE-END", size)), Stdout: &streamed, Timeout: 10 * time.Minute})
			close(stop)
			wg.Wait()
			want := size + int64(len("THE-END\n"))
			if res.ExitCode != 0 || res.Stdout.Bytes != want || streamed.n.Load() != want {
				t.Fatalf("exit %d, total %d, streamed %d; want 0, %d", res.ExitCode, res.Stdout.Bytes, streamed.n.Load(), want)
			}
			if !res.Stdout.Truncated || len(res.Stdout.Tail) != sandbox.TailBytes || !strings.HasSuffix(string(res.Stdout.Tail), "THE-END\n") {
				t.Errorf("tail %d bytes truncated %v", len(res.Stdout.Tail), res.Stdout.Truncated)
			}
			if p := peak.Load(); p > 64<<20 {
				t.Errorf("goalrun's heap reached %d MiB while %d MiB streamed: output is being buffered", p>>20, size>>20)
			}
			t.Logf("peak heap in use: %.1f MiB (%.1f MiB before the step)", float64(peak.Load())/(1<<20), float64(base)/(1<<20))
		})
	}
}

type countWriter struct{ n atomic.Int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n.Add(int64(len(p))); return len(p), nil }

// TestAttackIgnoreSIGTERM: a step that ignores SIGTERM is killed at its
// timeout and reported timed out.
func TestAttackIgnoreSIGTERM(t *testing.T) {
	sb, _ := startDocker(t, sandbox.Config{})
	for _, role := range bothRoles {
		t.Run(role.String(), func(t *testing.T) {
			res := run(t, sb, sandbox.Cmd{Role: role, Args: sandbox.Shell("trap '' TERM INT HUP; echo ready; sleep 600; echo survived"), Timeout: 2 * time.Second})
			if !res.TimedOut || res.ExitCode < 128 || strings.Contains(string(res.Stdout.Tail), "survived") {
				t.Errorf("not killed at its timeout: %+v", res)
			}
			if res.Duration > 2*time.Second+30*time.Second {
				t.Errorf("took %s after a 2s timeout", res.Duration)
			}
		})
	}
}

// TestAttackBackgroundProcessVsCheck: a process the agent leaves running
// (escaping its process group with setsid) cannot touch the workspace after
// the agent's step, while the check runs nor after it (the agent container
// is frozen from the end of each agent step until the next one; the check
// is a fresh container that does not see it), StopAgent kills it frozen,
// and nothing survives Close.
func TestAttackBackgroundProcessVsCheck(t *testing.T) {
	sb, cfg := startDocker(t, sandbox.Config{})
	res := run(t, sb, sh(sandbox.RoleAgent, `setsid sh -c 'while :; do echo tick >> tamper; echo "package x // tampered" > victim_test.go; sleep 0.1; done' >/dev/null 2>&1 < /dev/null &
until [ -s tamper ]; do sleep 0.05; done; echo left-running`))
	if res.ExitCode != 0 {
		t.Fatalf("agent step: %d %s", res.ExitCode, res.Stderr.Tail)
	}
	chk := run(t, sb, sh(sandbox.RoleCheck, `rm -f victim_test.go; a=$(wc -l < tamper); sleep 2; b=$(wc -l < tamper); echo "$a $b"; test ! -e victim_test.go || echo victim-rewritten; ps -o pid,comm | grep -v -e ps -e PID -e ' sh$' -e init; [ "$a" = "$b" ]`))
	out := string(chk.Stdout.Tail)
	if chk.ExitCode != 0 || strings.Contains(out, "victim-rewritten") || strings.Contains(out, "sleep") {
		t.Errorf("the background process reached the check: exit %d, %q", chk.ExitCode, out)
	}
	tamper := filepath.Join(cfg.Workspace, "tamper")
	// The agent container stays frozen after the check, so nothing the agent
	// left running writes between the check and the end of the run (the
	// attack: a teardown-time write after the passing check) …
	assertStill(t, tamper)
	// … until the next agent step thaws it: the process is the agent's own
	// again and may run during the turn …
	if res := run(t, sb, sh(sandbox.RoleAgent, `a=$(wc -l < tamper); i=0; while [ "$(wc -l < tamper)" = "$a" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done; [ $i -lt 200 ]`)); res.ExitCode != 0 {
		t.Errorf("tamper did not grow during the next agent step: the agent container stayed frozen")
	}
	// … and is frozen again when the step ends …
	assertStill(t, tamper)
	// … until goalrun stops the agent before its final snapshot.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run(t, sb, sh(sandbox.RoleCheck, "true")) // frozen again, then killed frozen
	var stopper sandbox.AgentStopper = sb
	if err := stopper.StopAgent(ctx); err != nil {
		t.Fatal(err)
	}
	assertStill(t, tamper)
	if err := sb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	assertStill(t, tamper)
}

func waitGrowing(t *testing.T, p string) {
	t.Helper()
	size := func() int64 { st, _ := os.Stat(p); return st.Size() }
	before := size()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		if size() != before {
			return
		}
	}
	t.Errorf("%s does not grow during the next agent step: the agent container stayed frozen", filepath.Base(p))
}

func assertStill(t *testing.T, p string) {
	t.Helper()
	st1, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	st2, _ := os.Stat(p)
	if st2.Size() != st1.Size() {
		t.Errorf("%s still grows after Close: a process survived the run", filepath.Base(p))
	}
}

// TestAttackGitConfigDoesNotRunOnHost plants every git execution hook an
// agent could leave in the tree (a hook, core.fsmonitor, core.hooksPath, a
// clean/smudge filter, a diff driver, core.sshCommand, an alias) pointing at
// a command that writes a marker file on the host; then goalrun does what it
// does after an agent turn (copy-out in copy mode, the changes computation)
// and the marker must not exist — not even after the user runs the host's
// git in the tree: the sandbox cannot write .git (bind mode: read-only;
// copy mode: never copied back), so the host's .git is byte for byte what
// it was. A control applies the same plant to a copy on the host, where
// git runs it: the plant is real.
func TestAttackGitConfigDoesNotRunOnHost(t *testing.T) {
	const plantScript = `
for h in pre-commit post-checkout post-merge pre-push fsmonitor-watchman reference-transaction; do printf '#!/bin/sh\n%[1]s\n' > .git/hooks/$h; chmod +x .git/hooks/$h; done
mkdir -p evil-hooks && printf '#!/bin/sh\n%[1]s\n' > evil-hooks/post-checkout && chmod +x evil-hooks/post-checkout
cat >> .git/config <<'EOF'
[core]
	fsmonitor = "%[1]s"
	hooksPath = evil-hooks
	sshCommand = "%[1]s"
	pager = "%[1]s"
[filter "evil"]
	clean = "%[1]s"
	smudge = "%[1]s"
	process = "%[1]s"
[diff "evil"]
	textconv = "%[1]s"
	command = "%[1]s"
[alias]
	status = "!%[1]s"
EOF
printf '* filter=evil diff=evil\n' > .gitattributes
echo "package main // changed" > main.go`
	hostGit := func(ws string) {
		for _, args := range [][]string{{"status"}, {"diff"}, {"log", "-p", "-1"}} {
			c := exec.Command("git", append([]string{"-C", ws, "-c", "safe.directory=*"}, args...)...)
			c.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1")
			_ = c.Run()
		}
	}
	t.Run("control on the host", func(t *testing.T) {
		marker := filepath.Join(t.TempDir(), "ran-on-host")
		ws := t.TempDir()
		if err := os.WriteFile(filepath.Join(ws, "main.go"), []byte("package main\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		gitInit(t, ws)
		c := exec.Command("sh", "-c", fmt.Sprintf(plantScript, "touch "+marker))
		c.Dir = ws
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("planting on the host: %v %s", err, out)
		}
		hostGit(ws)
		if _, err := os.Stat(marker); err != nil {
			t.Fatalf("the host's git did not run the plant (%v): the attack is not real", err)
		}
	})
	for _, mode := range []sandbox.WorkspaceMode{sandbox.WorkspaceBind, sandbox.WorkspaceCopy} {
		t.Run(string(mode), func(t *testing.T) {
			markerDir := t.TempDir()
			os.Chmod(markerDir, 0o777)
			marker := filepath.Join(markerDir, "ran-on-host")
			ws := dockertest.Workspace(t, testUID, testGID)
			if err := os.WriteFile(filepath.Join(ws, "main.go"), []byte("package main\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			gitInit(t, ws)
			dockertest.Chown(t, ws, testUID, testGID)
			before := treeHashes(t, ws)
			tracker := goal.NewWorkspaceTracker(ws, workspace.Options{})
			defer tracker.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := tracker.Baseline(ctx); err != nil {
				t.Fatal(err)
			}
			sb, _ := startDocker(t, sandbox.Config{Workspace: ws, WorkspaceMode: mode})
			res := run(t, sb, sh(sandbox.RoleAgent, fmt.Sprintf(plantScript, "touch "+marker)))
			if mode == sandbox.WorkspaceBind && !strings.Contains(string(res.Stderr.Tail), "Read-only file system") {
				t.Errorf("writing .git in bind mode did not fail with EROFS: %s", res.Stderr.Tail)
			}
			// What goalrun does after a turn: (copy-out happened inside Exec)
			// the changes computation, the diff, the final changes.
			if _, err := tracker.AfterTurn(ctx, 1); err != nil {
				t.Fatal(err)
			}
			if _, err := tracker.Diff(ctx); err != nil {
				t.Logf("diff: %v", err)
			}
			ch := tracker.Changes(ctx)
			if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a planted git command ran on the host: %v", err)
			}
			if ch == nil || ch.FilesChanged == 0 {
				t.Errorf("the changes computation saw nothing: %+v", ch)
			}
			if d := diffHashes(before, treeHashes(t, ws)); len(d) > 0 {
				t.Errorf("the host's .git changed: breach\n%s", strings.Join(d, "\n"))
			}
			// The user's own git after the run runs nothing planted.
			hostGit(ws)
			if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the host's git ran a planted command after the run: %v", err)
			}
		})
	}
}

func gitInit(t *testing.T, dir string) {
	t.Helper()
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"commit", "-q", "-m", "init"}} {
		c := exec.Command("git", append([]string{"-C", dir, "-c", "safe.directory=*", "-c", "user.name=t", "-c", "user.email=t@e"}, args...)...)
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
}

// The agent runs as the workspace's owner and can set the setuid or setgid
// bit on what it owns. A program left so on the host would run as that
// owner for any local user who can reach the tree; the host must get no bit
// the workspace did not already have: after the agent step, and after a
// background process set more once the step ended (swept when the agent
// stops). A setgid folder the host already had keeps its bit.
func TestAttackSetuidLeftOnHost(t *testing.T) {
	for _, mode := range []sandbox.WorkspaceMode{sandbox.WorkspaceBind, sandbox.WorkspaceCopy} {
		t.Run(string(mode), func(t *testing.T) {
			ws := dockertest.Workspace(t, testUID, testGID)
			shared := filepath.Join(ws, "shared")
			if err := os.Mkdir(shared, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"kept", "kept2"} {
				if err := os.WriteFile(filepath.Join(ws, f), []byte("#!/bin/sh\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			dockertest.Chown(t, ws, testUID, testGID)
			if err := os.Chmod(shared, 0o775|os.ModeSetgid); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"kept", "kept2"} {
				if err := os.Chmod(filepath.Join(ws, f), 0o755|os.ModeSetuid); err != nil {
					t.Fatal(err)
				}
			}
			sb, _ := startDocker(t, sandbox.Config{Workspace: ws, WorkspaceMode: mode})
			plant := `set -e
printf '#!/bin/sh\nid\n' > tool && chmod 4755 tool
mkdir sg && chmod 2777 sg
printf x > sg/f && chmod 6755 sg/f
ln kept kept-link
printf 'not the host program' > new && chmod 4755 new && mv new kept2 && chmod 4755 kept2
mkdir hide && printf z > hide/sh && chmod 4755 hide/sh && chmod 0111 hide
(sleep 2; printf y > late && chmod 4755 late) >/dev/null 2>&1 &`
			if res := run(t, sb, sh(sandbox.RoleAgent, plant)); res.ExitCode != 0 {
				t.Fatalf("planting: %d %s", res.ExitCode, res.Stderr.Tail)
			}
			time.Sleep(3 * time.Second) // the background chmod would have happened
			if _, err := os.Lstat(filepath.Join(ws, "late")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a process the agent left running wrote after its step (%v): the agent container was not frozen", err)
			}
			if mode == sandbox.WorkspaceBind {
				for _, p := range []string{"tool", "sg", "sg/f", "kept2", "hide/sh"} {
					if st, err := os.Lstat(filepath.Join(ws, p)); err != nil || st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
						t.Errorf("after the agent step %s: %v %v; want no setuid/setgid bit", p, st.Mode(), err)
					}
				}
			}
			var stopper sandbox.AgentStopper = sb
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := stopper.StopAgent(ctx); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{"tool", "sg", "sg/f", "kept2", "hide/sh"} {
				st, err := os.Lstat(filepath.Join(ws, p))
				if err != nil {
					t.Errorf("after the agent stopped %s: %v", p, err)
				} else if st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
					t.Errorf("after the agent stopped %s: %v; want no setuid/setgid bit", p, st.Mode())
				}
			}
			if _, err := os.Lstat(filepath.Join(ws, "late")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the process the agent left running wrote while it was being stopped (%v): it was not killed frozen", err)
			}
			if st, err := os.Lstat(shared); err != nil || st.Mode()&os.ModeSetgid == 0 {
				t.Errorf("the host's own setgid folder lost its bit: %v %v", st.Mode(), err)
			}
			if st, err := os.Lstat(filepath.Join(ws, "kept")); err != nil || st.Mode()&os.ModeSetuid == 0 {
				t.Errorf("the host's own setuid program (hard-linked by the agent) lost its bit: %v %v", st.Mode(), err)
			}
		})
	}
	// The agent kills its container's main process during its step: the
	// container is dead when the step ends (it cannot be frozen), and the
	// workspace is swept all the same, then and when goalrun stops it.
	t.Run("agent kills its container", func(t *testing.T) {
		ws := dockertest.Workspace(t, testUID, testGID)
		sb, _ := startDocker(t, sandbox.Config{Workspace: ws, WorkspaceMode: sandbox.WorkspaceBind})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := sb.Exec(ctx, sh(sandbox.RoleAgent, `printf x > evil; chmod 4755 evil; kill -9 -1`))
		t.Logf("the step that killed its container: %v", err)
		st, err := os.Lstat(filepath.Join(ws, "evil"))
		if err != nil {
			t.Fatalf("the plant did not happen: %v", err)
		}
		if st.Mode()&os.ModeSetuid != 0 {
			t.Errorf("after the step evil is %v; want no setuid bit", st.Mode())
		}
		if err := sb.StopAgent(ctx); err != nil {
			t.Fatal(err)
		}
		if st, err := os.Lstat(filepath.Join(ws, "evil")); err != nil || st.Mode()&os.ModeSetuid != 0 {
			t.Errorf("evil: %v %v; want no setuid bit", st, err)
		}
	})
}

// In copy mode the host gets the tree the check ran on: a folder the agent
// names like the sandbox's workspace folder ("workspace") comes back as that
// folder, not merged onto the workspace root over the files the check saw.
func TestAttackCopyOutFolderNamedLikeTheRoot(t *testing.T) {
	ws := dockertest.Workspace(t, testUID, testGID)
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("bad\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dockertest.Chown(t, ws, testUID, testGID)
	sb, _ := startDocker(t, sandbox.Config{Workspace: ws, WorkspaceMode: sandbox.WorkspaceCopy})
	if res := run(t, sb, sh(sandbox.RoleAgent, `echo good > a.txt && mkdir workspace && echo evil > workspace/a.txt`)); res.ExitCode != 0 {
		t.Fatalf("agent: %d %s", res.ExitCode, res.Stderr.Tail)
	}
	if res := run(t, sb, sh(sandbox.RoleCheck, `grep -qx good a.txt`)); res.ExitCode != 0 {
		t.Fatalf("the check did not see a.txt = good: %d", res.ExitCode)
	}
	for rel, want := range map[string]string{"a.txt": "good\n", "workspace/a.txt": "evil\n"} {
		if b, err := os.ReadFile(filepath.Join(ws, rel)); err != nil || string(b) != want {
			t.Errorf("host %s = %q, %v; want %q (the tree the check ran on)", rel, b, err, want)
		}
	}
}

// In copy mode a process the agent left running cannot change the
// sandbox's tree after the copy-out: the check must see what the host got.
// The agent container is frozen before the copy-out.
func TestAttackCopyOutThenLateWrite(t *testing.T) {
	ws := dockertest.Workspace(t, testUID, testGID)
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("bad\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dockertest.Chown(t, ws, testUID, testGID)
	sb, _ := startDocker(t, sandbox.Config{Workspace: ws, WorkspaceMode: sandbox.WorkspaceCopy})
	run(t, sb, sh(sandbox.RoleAgent, `(sleep 1; echo good > a.txt) >/dev/null 2>&1 &`))
	time.Sleep(3 * time.Second) // the late write would have happened by now
	res := run(t, sb, sh(sandbox.RoleCheck, `cat a.txt`))
	host, err := os.ReadFile(filepath.Join(ws, "a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout.Tail) != string(host) {
		t.Errorf("the check saw %q, the host has %q: they must be the same tree", res.Stdout.Tail, host)
	}
}
