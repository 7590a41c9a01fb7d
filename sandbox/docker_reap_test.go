package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"

	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/dockertest"
)

// leftovers lists what carries an owner label of pid on host (see
// privateOwner): containers, volumes, networks and egress socket folders.
func leftovers(t *testing.T, cli sandbox.DockerAPI, host string, pid int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prefix := fmt.Sprintf("%s/%d/", host, pid)
	f := filters.NewArgs(filters.Arg("label", sandbox.LabelRun))
	var out []string
	cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if strings.HasPrefix(c.Labels[sandbox.LabelOwner], prefix) {
			out = append(out, "container "+c.Labels[sandbox.LabelRole])
		}
	}
	vs, err := cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs.Volumes {
		if strings.HasPrefix(v.Labels[sandbox.LabelOwner], prefix) {
			out = append(out, "volume "+v.Name)
		}
	}
	ns, err := cli.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		if strings.HasPrefix(n.Labels[sandbox.LabelOwner], prefix) {
			out = append(out, "network "+n.Name)
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "goalrun-egress-*"))
	for _, d := range dirs {
		if b, err := os.ReadFile(filepath.Join(d, "owner")); err == nil && strings.HasPrefix(string(b), prefix) {
			out = append(out, "socket folder "+d)
		}
	}
	return out
}

// privateOwner returns a host name for the owner labels of the goalrun
// processes a reap test starts and kills, and their environment (HOSTNAME
// set to it). goalrun processes of other tests, which reap at start-up too,
// see a host that is not theirs and leave those leftovers alone until they
// expire: what the test finds after the kill, and what is gone after its
// own next run, is the work of that run only.
func privateOwner() (host string, env []string) {
	host = fmt.Sprintf("goalrun-reap-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	return host, append(os.Environ(), "HOSTNAME="+host)
}

// startUntilAgent starts `goalrun run` with env and args and returns once
// its agent turn is running (the agent_started event on stderr).
func startUntilAgent(t *testing.T, bin string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	return startUntilNthEvent(t, bin, env, "agent_started", 1, args...)
}

// TestReapAfterSIGKILL is the issue's "goalrun killed with SIGKILL mid-run:
// the next goalrun start removes the leftovers": two real goalrun
// processes are killed during their agent turns (one in egress mode with a
// copied workspace: container, volume, socket folder; one on a bridge
// network: container, network); the next goalrun run removes all of it at
// start-up and passes.
func TestReapAfterSIGKILL(t *testing.T) {
	cli := dockertest.Client(t)
	bin := dockertest.GoalrunBinary(t)
	image := dockertest.Image(t, cli)
	common := []string{"--sandbox", "docker", "--image", image, "--agent", "command", "--agent-bin", "sleep 600", "--until", "false", "--max-iterations", "1"}

	// Both run at once (a goalrun starting after the first was killed
	// would already reap it), then both are killed mid-turn.
	host, env := privateOwner()
	egressRun := startUntilAgent(t, bin, env, append(common, "--network", "egress", "--allow-host", "example.com", "--workspace", "copy", "--workdir", t.TempDir())...)
	bridgeRun := startUntilAgent(t, bin, env, append(common, "--network", "bridge", "--workdir", dockertest.Workspace(t, testUID, testGID))...)
	for _, c := range []*exec.Cmd{egressRun, bridgeRun} {
		// The run's janitor would remove what it leaves at once: killed
		// first, as a process-group or cgroup kill would, so that the next
		// run's start-up is what is shown.
		if jp := janitorOf(c.Process.Pid); jp != 0 {
			syscall.Kill(jp, syscall.SIGKILL)
		}
		if err := c.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		c.Wait()
	}
	pidEgress, pidBridge := egressRun.Process.Pid, bridgeRun.Process.Pid

	left := append(leftovers(t, cli, host, pidEgress), leftovers(t, cli, host, pidBridge)...)
	for _, want := range []string{"container agent", "volume ", "socket folder ", "network "} {
		found := false
		for _, l := range left {
			found = found || strings.HasPrefix(l, want)
		}
		if !found {
			t.Errorf("the killed runs left no %q (left: %q): the test does not prove the reap", want, left)
		}
	}

	next := exec.Command(bin, "run", "--json", "--sandbox", "docker", "--image", image, "--agent", "command", "--agent-bin", "true", "--until", "true", "--workdir", dockertest.Workspace(t, testUID, testGID))
	next.Env = env
	out, err := next.CombinedOutput()
	if err != nil {
		t.Fatalf("the next goalrun run failed: %v\n%s", err, out)
	}
	if left := append(leftovers(t, cli, host, pidEgress), leftovers(t, cli, host, pidBridge)...); len(left) > 0 {
		t.Errorf("after the next start these leftovers remain: %q", left)
	}
}

// janitorOf returns the pid of the janitor (goalrun __janitor --for PID)
// the goalrun process pid started, 0 when none runs.
func janitorOf(pid int) int {
	want := "\x00__janitor\x00--for\x00" + strconv.Itoa(pid) + "\x00"
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), want) {
			jp, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			return jp
		}
	}
	return 0
}
