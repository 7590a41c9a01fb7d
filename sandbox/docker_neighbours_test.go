package sandbox_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/dockertest"
)

// neighbourRelease is the file an agent of TestRunsOnOneEngineLeaveEachOtherAlone
// waits for (in its agent container's /tmp) before it fixes the state.
const neighbourRelease = "/tmp/goalrun-test-release"

// TestRunsOnOneEngineLeaveEachOtherAlone: goalrun runs sharing one Engine (a
// self-hosted runner with parallel jobs) never harm each other, wherever they
// run. One run is a goalrun process on the host; the other is goalrun in a
// container on the host's network with the host's Docker socket (a container
// action on such a runner: it has the host's name but its own PID namespace,
// so its pids mean nothing on the host and the host's nothing to it). While
// both are in their agent turns, two more goalrun runs start — one on the
// host, one in another such container — and each reaps leftovers at
// start-up, as goalrun always does; the test process reaps too, as a goalrun
// whose --timeout is shorter than the live runs' age would. Then the agents
// are released: both live runs must pass, their sandboxes intact.
func TestRunsOnOneEngineLeaveEachOtherAlone(t *testing.T) {
	cli := dockertest.Client(t)
	sock, ok := strings.CutPrefix(cli.DaemonHost(), "unix://")
	if !ok {
		t.Skipf("the Engine is not on a Unix socket (%s): the container-action case mounts that socket", cli.DaemonHost())
	}
	image := dockertest.Image(t, cli)
	bin := dockertest.GoalrunBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// The live runs' agent waits until released, so both are mid-turn
	// while the others start.
	live := func(ws string) []string {
		return []string{"run", "--json", "--sandbox", "docker", "--image", image, "--network", "none", "--agent", "command",
			"--agent-bin", "until [ -e " + neighbourRelease + " ]; do sleep 0.2; done; echo fixed > state",
			"--until", "grep -q fixed state", "--max-iterations", "1", "--timeout", "10m", "--workdir", ws}
	}
	// A short run: its check passes at once; what matters is its
	// start-up reap.
	quick := func(ws string) []string {
		return []string{"run", "--json", "--sandbox", "docker", "--image", image, "--network", "none", "--agent", "command",
			"--agent-bin", "true", "--until", "true", "--timeout", "1m", "--workdir", ws}
	}

	onHost := startGoalrun(t, exec.CommandContext(ctx, bin, live(dockertest.Workspace(t, testUID, testGID))...))
	box := hostNetworkContainer(t, ctx, cli, sock, bin)
	inBox := startGoalrun(t, execIn(t, ctx, cli, box, "/usr/local/bin/goalrun", live("/tmp")...))
	hostAgent, boxAgent := onHost.agentContainer(t), inBox.agentContainer(t)

	// Two more runs start and reap, one on each side.
	if code, doc := startGoalrun(t, exec.CommandContext(ctx, bin, quick(dockertest.Workspace(t, testUID, testGID))...)).wait(t); code != 0 {
		t.Errorf("the quick run on the host: exit %d, document %s", code, doc)
	}
	box2 := hostNetworkContainer(t, ctx, cli, sock, bin)
	if code, doc := startGoalrun(t, execIn(t, ctx, cli, box2, "/usr/local/bin/goalrun", quick("/tmp")...)).wait(t); code != 0 {
		t.Errorf("the quick run in a host-network container: exit %d, document %s", code, doc)
	}
	// A goalrun with a short --timeout reaps by age what it cannot judge
	// otherwise; live runs say when they expire.
	if rep, err := sandbox.Reap(ctx, cli, time.Second); err != nil {
		t.Errorf("reap: %v", err)
	} else {
		for _, id := range rep.Containers {
			if strings.HasPrefix(hostAgent, id) || strings.HasPrefix(boxAgent, id) {
				t.Errorf("a reap with a 1 s timeout removed a live run's agent container %s", id)
			}
		}
	}

	for _, agentID := range []string{hostAgent, boxAgent} {
		if err := release(ctx, cli, agentID); err != nil {
			t.Errorf("releasing the agent in %s: %v (was its sandbox removed?)", agentID, err)
		}
	}
	for name, r := range map[string]*goalrunRun{"the run on the host": onHost, "the run in a host-network container": inBox} {
		code, doc := r.wait(t)
		var d struct {
			Status string `json:"status"`
			Goal   struct {
				Passed bool `json:"passed"`
			} `json:"goal"`
		}
		if err := json.Unmarshal(doc, &d); code != 0 || err != nil || d.Status != "success" || !d.Goal.Passed {
			t.Errorf("%s was harmed: exit %d, document %s\nevents:\n%s", name, code, doc, r.events())
		}
	}
}

// goalrunRun is a `goalrun run --json` running on the host or in a
// container: its events (stderr, JSON lines) are read as they come.
type goalrunRun struct {
	mu     sync.Mutex
	lines  []string
	ready  chan string // the agent container's id, once its agent started
	done   chan struct{}
	code   int
	stdout bytes.Buffer
}

func (r *goalrunRun) events() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.lines, "\n")
}

// agentContainer waits until the run's agent turn started and returns its
// agent container's id (from sandbox_ready).
func (r *goalrunRun) agentContainer(t *testing.T) string {
	t.Helper()
	select {
	case id, ok := <-r.ready:
		if !ok || id == "" {
			<-r.done
			t.Fatalf("goalrun ended before its agent turn (exit %d): %s\nevents:\n%s", r.code, r.stdout.String(), r.events())
		}
		return id
	case <-time.After(5 * time.Minute):
		t.Fatalf("goalrun's agent turn did not start within 5 minutes; events:\n%s", r.events())
	}
	return ""
}

// wait returns the run's exit code and document.
func (r *goalrunRun) wait(t *testing.T) (int, []byte) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(8 * time.Minute):
		t.Fatalf("goalrun did not end within 8 minutes; events:\n%s", r.events())
	}
	return r.code, bytes.TrimSpace(r.stdout.Bytes())
}

// startGoalrun starts cmd (a goalrun process on the host, or an exec in a
// container from execIn) and follows its events.
func startGoalrun(t *testing.T, cmd *exec.Cmd) *goalrunRun {
	t.Helper()
	r := &goalrunRun{ready: make(chan string, 1), done: make(chan struct{})}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = &r.stdout, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-r.done
	})
	var container string
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			r.mu.Lock()
			r.lines = append(r.lines, line)
			r.mu.Unlock()
			var ev struct {
				Type string         `json:"type"`
				Data map[string]any `json:"data"`
			}
			if json.Unmarshal([]byte(line), &ev) != nil {
				continue
			}
			switch ev.Type {
			case "sandbox_ready":
				container, _ = ev.Data["container_id"].(string)
			case "agent_started":
				if !sent {
					r.ready <- container
					sent = true
				}
			}
		}
		_, _ = io.Copy(io.Discard, pr)
		if !sent {
			close(r.ready)
		}
	}()
	go func() {
		err := cmd.Wait()
		r.code = cmd.ProcessState.ExitCode()
		if err != nil && r.code == 0 {
			r.code = -1
		}
		pw.Close()
		close(r.done)
	}()
	return r
}

// hostNetworkContainer starts a container as a runner starts a container
// action on a self-hosted machine: the host's network (so the host's name),
// its own PID namespace, root, the host's Docker socket, and goalrun (the
// static build) in its own filesystem at /usr/local/bin/goalrun.
func hostNetworkContainer(t *testing.T, ctx context.Context, cli *client.Client, sock, bin string) string {
	t.Helper()
	resp, err := cli.ContainerCreate(ctx, &container.Config{
		Image:      dockertest.Image(t, cli),
		Entrypoint: []string{},
		Cmd:        []string{"sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"},
		User:       "0:0",
		Labels:     map[string]string{"goalrun.test": "neighbours"},
	}, &container.HostConfig{
		NetworkMode: network.NetworkHost,
		Mounts:      []mount.Mount{{Type: mount.TypeBind, Source: sock, Target: "/var/run/docker.sock"}},
	}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = cli.ContainerRemove(ctx, resp.ID, container.RemoveOptions{Force: true})
	})
	if err := cli.CopyToContainer(ctx, resp.ID, "/", tarFile(t, bin, "usr/local/bin/goalrun"), container.CopyToContainerOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	return resp.ID
}

// execIn returns a command that runs argv in container id through the
// Engine (`docker exec`), so startGoalrun can follow it like a host process.
func execIn(t *testing.T, ctx context.Context, cli *client.Client, id, prog string, args ...string) *exec.Cmd {
	t.Helper()
	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Skipf("the docker CLI is not installed: %v", err)
	}
	cmd := exec.CommandContext(ctx, docker, append([]string{"exec", id, prog}, args...)...)
	cmd.Env = append(os.Environ(), "DOCKER_HOST="+cli.DaemonHost())
	return cmd
}

// release creates neighbourRelease in the agent container id as the
// sandbox user, which lets its waiting agent step go on.
func release(ctx context.Context, cli *client.Client, id string) error {
	ec, err := cli.ContainerExecCreate(ctx, id, container.ExecOptions{User: "1000:1000", Cmd: []string{"touch", neighbourRelease}, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return err
	}
	hj, err := cli.ContainerExecAttach(ctx, ec.ID, container.ExecAttachOptions{})
	if err != nil {
		return err
	}
	var out bytes.Buffer
	_, _ = stdcopy.StdCopy(&out, &out, hj.Reader)
	hj.Close()
	ins, err := cli.ContainerExecInspect(ctx, ec.ID)
	if err != nil {
		return err
	}
	if ins.ExitCode != 0 {
		return fmt.Errorf("touch %s exited %d: %s", neighbourRelease, ins.ExitCode, out.String())
	}
	return nil
}

// TestEveryObjectSaysWhenItExpires: what a Docker sandbox creates carries
// goalrun.expires — start + Config.Lifetime + 10 minutes, or
// sandbox.UnknownLifetime when the caller gave none — so a Reap that
// cannot check the owner (another PID namespace, another machine) never
// goes by its own, possibly shorter, run timeout.
func TestEveryObjectSaysWhenItExpires(t *testing.T) {
	cli := dockertest.Client(t)
	for _, tc := range []struct {
		name     string
		lifetime time.Duration
		want     time.Duration
	}{
		{"lifetime given", 5 * time.Minute, 15 * time.Minute},
		{"lifetime unknown", 0, sandbox.UnknownLifetime + 10*time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cfg := sandbox.Config{RunID: dockertest.RunID(t), Image: dockertest.Image(t, cli), Workspace: dockertest.Workspace(t, testUID, testGID),
				WorkspaceMode: sandbox.WorkspaceCopy, Lifetime: tc.lifetime}
			start := time.Now()
			sb, err := sandbox.StartDocker(ctx, cli, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close(ctx)
			c, err := cli.ContainerInspect(ctx, sb.ContainerID())
			if err != nil {
				t.Fatal(err)
			}
			vol, err := cli.VolumeInspect(ctx, "goalrun-"+cfg.RunID+"-ws")
			if err != nil {
				t.Fatal(err)
			}
			for what, labels := range map[string]map[string]string{"agent container": c.Config.Labels, "workspace volume": vol.Labels} {
				exp, err := strconv.ParseInt(labels[sandbox.LabelExpires], 10, 64)
				if err != nil {
					t.Errorf("%s: %s = %q: %v", what, sandbox.LabelExpires, labels[sandbox.LabelExpires], err)
					continue
				}
				if lo, hi := start.Add(tc.want).Unix()-1, time.Now().Add(tc.want).Unix()+1; exp < lo || exp > hi {
					t.Errorf("%s expires at %d, want between %d and %d", what, exp, lo, hi)
				}
			}
		})
	}
}
