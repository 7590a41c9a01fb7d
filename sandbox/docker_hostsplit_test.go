package sandbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/dockertest"
)

// TestAttackRunnerInSystemFolders: a self-hosted runner lives in /opt with
// the job's workspace in its _work, another runner lives in /usr/local,
// and credential files sit in /usr/local/etc. The default sandbox mounts
// /opt and /usr child by child around them: in bind and copy mode, agent
// and check steps find none of the runners' credentials, no other
// checkout's token, no credential file, and the workspace's .git/config
// only without its token — through any mounted path — while the runner's
// tool cache and the rest of /opt and /usr/local are there.
func TestAttackRunnerInSystemFolders(t *testing.T) {
	cli := dockertest.Client(t)
	if !strings.HasPrefix(cli.DaemonHost(), "unix://") {
		t.Skipf("the Engine at %s may not share this host's filesystem, where the test makes the runner", cli.DaemonHost())
	}
	image, _ := dockertest.HostTools(t, cli)
	runner := dockertest.NewFakeRunner(t, "/opt", testUID, testGID)
	other := dockertest.NewFakeRunner(t, "/usr/local", testUID, testGID)
	creds := dockertest.NewFakeCredentials(t, "/usr/local/etc", runner.Marker)
	env := os.Environ()
	for k, v := range runner.Env {
		env = append(env, k+"="+v)
	}
	lookup := func(k string) (string, bool) {
		if v, ok := runner.Env[k]; ok {
			return v, true
		}
		return os.LookupEnv(k)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	h, err := sandbox.HostTools(ctx, cli, sandbox.HostToolsOptions{Image: image, Env: env, Workspace: runner.Workspace})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, l := range h.LeftOut {
		left = append(left, l.Path)
	}
	for _, want := range []string{
		runner.Root + "/.credentials", runner.Root + "/.runner", runner.Root + "/.env", runner.Root + "/_diag",
		runner.Root + "/_work/demo", runner.Root + "/_work/other", runner.Root + "/_work/_temp",
		other.Root, creds + "/npmrc", creds + "/pip.conf", creds + "/gitconfig", creds + "/.docker", creds + "/kubeconfig", creds + "/.env",
	} {
		if !slices.Contains(left, want) {
			t.Errorf("%s is not among what is left out:\n%s", want, strings.Join(left, "\n"))
		}
	}
	for _, p := range []string{runner.Tool, creds + "/tool.txt", "/usr/bin", "/usr/local/bin", "/usr/local/etc/npmrc"} {
		if _, err := os.Stat(p); err == nil && !h.Covers(p) {
			t.Errorf("%s is not mounted", p)
		}
	}
	for _, m := range h.Mounts {
		if m.Source == "/opt" || m.Source == "/usr" || m.Source == "/usr/local" || m.Source == runner.Root || isUnderPath(runner.Workspace, m.Source) {
			t.Errorf("%s is mounted whole", m.Source)
		}
	}
	ents, _ := os.ReadDir("/opt")
	for _, e := range ents {
		if p := filepath.Join("/opt", e.Name()); p != runner.Root && !h.Covers(p) && !strings.HasPrefix(e.Name(), "goalrun-test-") {
			t.Errorf("/opt's child %s is not mounted", p)
		}
	}

	// The runner's folder itself is there (the tool cache is mounted in
	// it); none of its files are.
	secrets := []string{other.Root, runner.Root + "/.runner", runner.Root + "/.env", runner.Root + "/_work/demo", runner.Root + "/_work/_temp", creds + "/npmrc", creds + "/pip.conf", creds + "/gitconfig", creds + "/.docker/config.json", creds + "/kubeconfig", creds + "/.env",
		runner.Root + "/_work/other/other/.git/config", runner.Root + "/.credentials"}
	script := `marker=$1; tool=$2; shift 2
for p in "$@"; do [ -e "$p" ] && echo "PRESENT $p"; done
grep -rlsF "$marker" /opt /usr/local /etc /goalrun /workspace /tmp 2>/dev/null | sed 's/^/LEAK /'
for f in $(find /usr /opt /lib /bin -name 'goalrun-test-*' 2>/dev/null); do grep -rlsF "$marker" "$f" | sed 's/^/LEAK /'; done
grep -q "^# goalrun removed the credentials" /workspace/.git/config && echo sanitized
grep -rlsF harmless /usr/local/etc | grep -q goalrun-test-creds && echo control
"$tool"
echo done`
	for _, mode := range []sandbox.WorkspaceMode{sandbox.WorkspaceBind, sandbox.WorkspaceCopy} {
		t.Run(string(mode), func(t *testing.T) {
			sb, _ := startDocker(t, sandbox.Config{Image: image, Mounts: slices.Clone(h.Mounts), ToolEnv: h.Env, HostLeftOut: h.LeftOut,
				Workspace: runner.Workspace, WorkspaceMode: mode}, sandbox.WithDockerHostEnv(lookup))
			p := sb.Posture()
			if !slices.ContainsFunc(p.HostLeftOut, func(s string) bool { return strings.HasPrefix(s, runner.Root+"/.credentials: ") }) {
				t.Errorf("posture host_left_out %q does not name the runner's credentials", p.HostLeftOut)
			}
			for _, hm := range p.HostMounts {
				if src, _, _ := strings.Cut(hm, ":"); src == "/opt" || src == "/usr" || src == runner.Root || src == other.Root {
					t.Errorf("posture host_mounts has %s", hm)
				}
			}
			for _, role := range bothRoles {
				t.Run(role.String(), func(t *testing.T) {
					res := run(t, sb, sandbox.Cmd{Role: role, Args: append([]string{"sh", "-c", script, "attack", runner.Marker, runner.Tool}, secrets...)})
					// "control": the same search finds the harmless file beside
					// the credential files, so the search itself works.
					if out := string(res.Stdout.Tail); out != "sanitized\ncontrol\ntool-ok\ndone\n" {
						t.Errorf("want the sanitized .git/config, the harmless file, the tool cache's tool and nothing else:\n%s\nstderr %s", out, res.Stderr.Tail)
					}
				})
			}
		})
	}
	t.Run("a mount that shows the workspace or the runner's folder is refused", func(t *testing.T) {
		for _, src := range []string{"/opt", runner.Root, runner.Root + "/_work/other", filepath.Dir(creds)} {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			_, err := sandbox.StartDocker(ctx, cli, sandbox.Config{RunID: dockertest.RunID(t), Image: image, Workspace: runner.Workspace, HostLeftOut: h.LeftOut,
				Mounts: []sandbox.Mount{{Source: src, Target: "/mnt/x", ReadOnly: true, Name: "--mount " + src}}}, sandbox.WithDockerHostEnv(lookup))
			cancel()
			if !errors.Is(err, sandbox.ErrDangerousMount) || !strings.Contains(err.Error(), "--mount "+src) {
				t.Errorf("--mount %s: %v, want it refused", src, err)
			}
		}
	})
}

func isUnderPath(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// TestContainerActionRunnerInOpt: goalrun runs in a container of the
// Engine (a GitHub container job: the runner's _work at /__w, its tool
// cache at /__t, the host's Docker socket), the runner itself in the
// host's /opt. goalrun cannot see the host's /opt, so a container of the
// Engine looks through it (HostScanCommand); the agent and the check find
// no credential of the runner, no other checkout's token and no unsanitized
// .git/config through any mounted path, in bind and copy mode, and the
// tool cache is there.
func TestContainerActionRunnerInOpt(t *testing.T) {
	cli := dockertest.Client(t)
	sock, ok := strings.CutPrefix(cli.DaemonHost(), "unix://")
	if !ok {
		t.Skipf("the Engine is not on a Unix socket (%s): the container-action case mounts that socket", cli.DaemonHost())
	}
	image := dockertest.Image(t, cli)
	bin := dockertest.GoalrunBinary(t)
	runner := dockertest.NewFakeRunner(t, "/opt", testUID, testGID)
	hostHome := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	resp, err := cli.ContainerCreate(ctx, &container.Config{
		Image: image, Entrypoint: []string{},
		Cmd:  []string{"sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"},
		User: "0:0",
		Env: []string{"HOME=/github/home", "GITHUB_WORKSPACE=/__w/demo/demo", "RUNNER_WORKSPACE=/__w/demo",
			"RUNNER_TEMP=/__w/_temp", "RUNNER_TOOL_CACHE=/__t"},
		Labels: map[string]string{"goalrun.test": "container-action-runner"},
	}, &container.HostConfig{
		NetworkMode: network.NetworkNone,
		Mounts: []mount.Mount{
			{Type: mount.TypeBind, Source: sock, Target: "/var/run/docker.sock"},
			{Type: mount.TypeBind, Source: runner.Root + "/_work", Target: "/__w"},
			{Type: mount.TypeBind, Source: runner.Env["RUNNER_TOOL_CACHE"], Target: "/__t", ReadOnly: true},
			{Type: mount.TypeBind, Source: hostHome, Target: "/github/home"},
		},
	}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cli.ContainerRemove(ctx, resp.ID, container.RemoveOptions{Force: true})
	})
	if err := cli.CopyToContainer(ctx, resp.ID, "/", tarFile(t, bin, "usr/local/bin/goalrun"), container.CopyToContainerOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	// Both steps look for the marker everywhere it could be mounted; the
	// agent's findings are kept in the workspace for the check to judge.
	look := `marker=` + runner.Marker + `
for p in ` + runner.Root + `/.credentials ` + runner.Root + `/.runner ` + runner.Root + `/_work/other/other/.git/config ` + runner.Root + `/_work/_temp; do [ -e "$p" ] && echo "PRESENT $p"; done
grep -rlsF "$marker" /opt /usr/local /etc /goalrun /workspace /tmp 2>/dev/null | sed 's/^/LEAK /'
grep -q "^# goalrun removed the credentials" /workspace/.git/config || echo "UNSANITIZED .git/config"
test "$(` + runner.Tool + `)" = tool-ok || echo "NO TOOL CACHE"
`
	agent := "{ " + look + "} > agent-found.txt 2>&1"
	// Check #0 fails (the agent has not looked yet), so the agent runs.
	check := "test -f agent-found.txt && test ! -s agent-found.txt && test -z \"$({ " + look + "} 2>&1)\""
	for _, mode := range []string{"bind", "copy"} {
		t.Run(mode, func(t *testing.T) {
			os.Remove(filepath.Join(runner.Workspace, "agent-found.txt"))
			// The document goes to a file, so stderr shows what a person sees.
			argv := []string{"/usr/local/bin/goalrun", "run", "--output", "/github/home/doc-" + mode + ".json", "--sandbox", "docker", "--image", "host", "--agent", "command",
				"--network", "none", "--workspace", mode, "--workdir", "/__w/demo/demo", "--agent-bin", agent, "--until", check}
			ec, err := cli.ContainerExecCreate(ctx, resp.ID, container.ExecOptions{Cmd: argv, AttachStdout: true, AttachStderr: true})
			if err != nil {
				t.Fatal(err)
			}
			hj, err := cli.ContainerExecAttach(ctx, ec.ID, container.ExecAttachOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer hj.Close()
			var out, errb bytes.Buffer
			stdcopy.StdCopy(&out, &errb, hj.Reader)
			var doc map[string]any
			b, _ := os.ReadFile(filepath.Join(hostHome, "doc-"+mode+".json"))
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatalf("no document: %v\nstdout %s\nstderr %s", err, out.Bytes(), errb.Bytes())
			}
			sb, _ := doc["sandbox"].(map[string]any)
			goal, _ := doc["goal"].(map[string]any)
			found, _ := os.ReadFile(filepath.Join(runner.Workspace, "agent-found.txt"))
			if doc["status"] != "success" || goal["passed"] != true || sb["workspace"] != mode || len(doc["iterations"].([]any)) < 2 {
				t.Errorf("status %v goal %v workspace %v; the agent found:\n%s\nstderr:\n%s", doc["status"], goal, sb["workspace"], found, errb.Bytes())
			}
			left := fmt.Sprint(sb["host_left_out"])
			if !strings.Contains(left, runner.Root+"/.credentials: ") || !strings.Contains(left, runner.Root+"/_work/other: ") {
				t.Errorf("host_left_out %s does not name the runner's credentials and the other checkout", left)
			}
			if !strings.Contains(errb.String(), "leaves out the host's "+runner.Root+"/.credentials") {
				t.Errorf("stderr does not say what is left out:\n%s", errb.Bytes())
			}
			for _, hm := range sb["host_mounts"].([]any) {
				if src, _, _ := strings.Cut(hm.(string), ":"); src == "/opt" || src == runner.Root {
					t.Errorf("host_mounts has %s", hm)
				}
			}
		})
	}
}
