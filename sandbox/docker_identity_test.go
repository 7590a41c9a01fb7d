package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/dockertest"
	"github.com/goalrun/goalrun/sandbox/egress"
)

// egressFolder finds the socket folder of the one egress sandbox this
// process runs (its owner file names this process).
func egressFolder(t *testing.T) string {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "goalrun-egress-*"))
	me := fmt.Sprintf("/%d/", os.Getpid())
	for _, d := range dirs {
		if b, err := os.ReadFile(filepath.Join(d, "owner")); err == nil && strings.Contains(string(b), me) {
			return d
		}
	}
	t.Fatalf("no egress socket folder of this process in %s", os.TempDir())
	return ""
}

// relayPID is the host pid of the relay: the child of the agent
// container's init.
func relayPID(t *testing.T, sb *sandbox.Docker) int {
	t.Helper()
	cli := dockertest.Client(t)
	c, err := cli.ContainerInspect(context.Background(), sb.ContainerID())
	if err != nil || c.State == nil || c.State.Pid == 0 {
		t.Fatalf("inspecting the agent container: %v", err)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(c.State.Pid) && strings.Contains(s, "(goalrun)") {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			return pid
		}
	}
	t.Fatalf("no relay below the container's init (pid %d)", c.State.Pid)
	return 0
}

func procStatusID(t *testing.T, pid int, field string) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			id, _ := strconv.Atoi(strings.Fields(rest)[0])
			return id
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// TestEgressTrustsOnlyItsRelay: the proxy that adds the real model key
// serves the relay alone. The relay runs as a uid of its own — not the
// sandbox user's, not nobody's, not goalrun's — and the proxy's sockets let
// only that uid in. Another host user can neither use the sockets nor kill
// the relay; the agent can neither reach the sockets (directly, or with a
// relay of its own started from the mounted goalrun binary) nor kill or
// stop the relay; the relay still serves afterwards.
func TestEgressTrustsOnlyItsRelay(t *testing.T) {
	const realKey = "sk-real-key-goalrun-identity-0123456789"
	model := newRecorder(t, `{"type":"message","content":"ok"}`)
	sb, cfg := startDocker(t, sandbox.Config{
		Network:     sandbox.NetworkEgress,
		RelayBinary: dockertest.GoalrunBinary(t),
		Upstreams: []sandbox.Upstream{{
			URL: model.srv.URL, BaseURLEnv: "ANTHROPIC_BASE_URL", KeyEnv: "ANTHROPIC_API_KEY", Header: "x-api-key", Key: realKey,
		}},
	}, sandbox.WithEgressConfig(func(c *egress.Config) { c.AllowLoopbackUpstreams = true }))
	served := func() int { n, _ := model.seen(); return n }

	// The agent container (and the relay, its main process) starts with
	// the first agent step.
	run(t, sb, sh(sandbox.RoleAgent, "true"))
	relay := relayPID(t, sb)
	relayUID := procStatusID(t, relay, "Uid")
	sandboxUID, _ := strconv.Atoi(strings.Split(sb.Posture().User, ":")[0])
	for _, other := range []struct {
		name string
		uid  int
	}{{"the sandbox user", sandboxUID}, {"goalrun", os.Getuid()}, {"nobody", 65534}} {
		if relayUID == other.uid {
			t.Errorf("the relay runs as %s (uid %d)", other.name, relayUID)
		}
	}
	if relayUID < 60578 || relayUID > 61183 {
		t.Errorf("the relay's uid %d is outside goalrun's reserved range", relayUID)
	}
	dir := egressFolder(t)
	sock := filepath.Join(dir, "up0.sock")

	t.Run("the relay's uid can use the socket (the control)", func(t *testing.T) {
		before := served()
		if got := dockertest.AsUser(t, relayUID, relayUID, "dial", sock); !strings.HasPrefix(got, "answered: HTTP/1.1 200") || served() != before+1 {
			t.Errorf("uid %d: %q", relayUID, got)
		}
	})
	t.Run("another host user cannot use the socket", func(t *testing.T) {
		before := served()
		got := dockertest.AsUser(t, 4242, 4242, "dial", sock)
		if strings.HasPrefix(got, "answered") || served() != before {
			t.Errorf("uid 4242 got through to the model API: %q", got)
		}
	})
	t.Run("another host user cannot kill the relay", func(t *testing.T) {
		if got := dockertest.AsUser(t, 4242, 4242, "kill", strconv.Itoa(relay)); !strings.Contains(got, "operation not permitted") {
			t.Errorf("kill as uid 4242: %q", got)
		}
	})
	t.Run("the sandbox user's uid on the host cannot use the socket", func(t *testing.T) {
		before := served()
		got := dockertest.AsUser(t, sandboxUID, sandboxUID, "dial", sock)
		if strings.HasPrefix(got, "answered") || served() != before {
			t.Errorf("uid %d got through to the model API: %q", sandboxUID, got)
		}
	})
	t.Run("the agent cannot reach the socket, even with a relay of its own", func(t *testing.T) {
		before := served()
		// The same request through goalrun's relay (port 3129) is the
		// control: it must get through.
		out := run(t, sb, sh(sandbox.RoleAgent, `/.goalrun/goalrun __relay 127.0.0.1:4000=/run/goalrun/egress/up0.sock & sleep 1
timeout 10 wget -Y off -q -O- --header "x-api-key: x" http://127.0.0.1:4000/v1/messages && echo THROUGH-OWN
timeout 10 wget -Y off -q -O- --header "x-api-key: x" http://127.0.0.1:3129/v1/messages && echo THROUGH-GOALRUNS
kill $! 2>/dev/null; true`))
		s := string(out.Stdout.Tail)
		if strings.Contains(s, "THROUGH-OWN") || !strings.Contains(s, "THROUGH-GOALRUNS") || served() != before+1 {
			t.Errorf("want the agent's own relay refused and goalrun's served (model API hits %d → %d):\n%s\n%s", before, served(), s, out.Stderr.Tail)
		}
	})
	t.Run("the agent cannot kill or stop the relay", func(t *testing.T) {
		out := run(t, sb, sh(sandbox.RoleAgent, `for p in $(pidof goalrun) 1; do kill -STOP $p 2>/dev/null && echo stopped $p; kill -9 $p 2>/dev/null && echo killed $p; done; true`))
		if s := string(out.Stdout.Tail); strings.Contains(s, "killed") || strings.Contains(s, "stopped") {
			t.Errorf("the agent signalled the relay: %q", s)
		}
		before := served()
		out = run(t, sb, sh(sandbox.RoleAgent, `timeout 10 wget -Y off -q -O- --header "x-api-key: $ANTHROPIC_API_KEY" "$ANTHROPIC_BASE_URL/v1/messages"`))
		if out.ExitCode != 0 || served() != before+1 {
			t.Errorf("the relay no longer serves: exit %d %q %q", out.ExitCode, out.Stdout.Tail, out.Stderr.Tail)
		}
		if _, keys := model.seen(); len(keys) == 0 || keys[len(keys)-1] != realKey {
			t.Errorf("the model API saw %q, want the real key", keys[len(keys)-1])
		}
	})
	_ = cfg
}

// TestAgentCannotStopTheMainProcess: without a relay the agent container's
// main process (an idle shell that ends the container when the run's
// lifetime is over, even when goalrun was killed outright) runs as a uid of
// its own too: the agent can neither stop nor kill it, nor the init.
func TestAgentCannotStopTheMainProcess(t *testing.T) {
	sb, _ := startDocker(t, sandbox.Config{})
	out := run(t, sb, sh(sandbox.RoleAgent, `ps -o pid,user,comm | grep -v -e ps -e PID -e 'sh$' >&2
for p in 1 $(pidof sleep); do kill -STOP $p 2>/dev/null && echo stopped $p; kill -9 $p 2>/dev/null && echo killed $p; done; true`))
	if s := string(out.Stdout.Tail); s != "" {
		t.Errorf("the agent signalled the container's main process: %q (processes: %s)", s, out.Stderr.Tail)
	}
	if !strings.Contains(string(out.Stderr.Tail), "sleep") {
		t.Errorf("the idle main process is not visible to the test: %s", out.Stderr.Tail)
	}
	if res := run(t, sb, sh(sandbox.RoleAgent, "true")); res.ExitCode != 0 {
		t.Errorf("the container no longer runs steps: %+v", res)
	}
}
