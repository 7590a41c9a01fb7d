package sandbox_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/dockertest"
)

// TestDockerContainerAction is the GitHub container-action case: goalrun
// runs inside a container with the host's Docker socket mounted and the
// workspace at /github/workspace (a bind mount of a host folder). The real
// goalrun binary lives in that container's own filesystem. It must find
// its own container ($HOSTNAME), translate the workspace and its egress
// socket folder (under $HOME=/github/home, also a host bind) to host paths
// for the sandbox's bind mounts, copy the relay binary in (the Engine cannot
// see it), and fall back to copy mode for a workspace only its own
// filesystem holds.
func TestDockerContainerAction(t *testing.T) {
	cli := dockertest.Client(t)
	sock, ok := strings.CutPrefix(cli.DaemonHost(), "unix://")
	if !ok {
		t.Skipf("the Engine is not on a Unix socket (%s): the container-action case mounts that socket", cli.DaemonHost())
	}
	image := dockertest.Image(t, cli)
	bin := dockertest.GoalrunBinary(t)
	hostWS := dockertest.Workspace(t, testUID, testGID)
	hostHome := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	resp, err := cli.ContainerCreate(ctx, &container.Config{
		Image:      image,
		Entrypoint: []string{},
		Cmd:        []string{"sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"},
		User:       "0:0",
		Env:        []string{"HOME=/github/home", "GITHUB_WORKSPACE=/github/workspace"},
		Labels:     map[string]string{"goalrun.test": "container-action"},
	}, &container.HostConfig{
		NetworkMode: network.NetworkNone,
		Mounts: []mount.Mount{
			{Type: mount.TypeBind, Source: sock, Target: "/var/run/docker.sock"},
			{Type: mount.TypeBind, Source: hostWS, Target: "/github/workspace"},
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
	// goalrun goes into the action container's own filesystem, as in an
	// action image: no host path holds it.
	if err := cli.CopyToContainer(ctx, resp.ID, "/", tarFile(t, bin, "usr/local/bin/goalrun"), container.CopyToContainerOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}

	goalrunWith := func(t *testing.T, img string, args ...string) (map[string]any, string) {
		t.Helper()
		argv := append([]string{"/usr/local/bin/goalrun", "run", "--json", "--sandbox", "docker", "--image", img, "--agent", "command"}, args...)
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
		if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
			t.Fatalf("goalrun in the action container printed no document: %v\nstdout %s\nstderr %s", err, out.Bytes(), errb.Bytes())
		}
		return doc, errb.String()
	}
	goalrun := func(t *testing.T, args ...string) (map[string]any, string) {
		t.Helper()
		return goalrunWith(t, image, args...)
	}

	t.Run("bind through the container's mounts, egress sockets under HOME", func(t *testing.T) {
		doc, events := goalrun(t, "--network", "egress", "--allow-host", "example.com", "--workdir", "/github/workspace",
			"--agent-bin", "echo from-agent > made-by-agent", "--until", "test -f made-by-agent")
		sb, _ := doc["sandbox"].(map[string]any)
		goal, _ := doc["goal"].(map[string]any)
		if doc["status"] != "success" || goal["passed"] != true || sb["workspace"] != "bind" || sb["network"] != "egress" || sb["user"] != "1000:1000" {
			t.Fatalf("document: status %v goal %v sandbox %v\nevents:\n%s", doc["status"], goal, sb, events)
		}
		st, err := os.Stat(filepath.Join(hostWS, "made-by-agent"))
		if err != nil {
			t.Fatalf("the agent's file did not reach the host folder behind /github/workspace: %v", err)
		}
		if uid := fileUID(st); uid != testUID {
			t.Errorf("the agent's file belongs to uid %d on the host, want %d", uid, testUID)
		}
		if left, _ := filepath.Glob(filepath.Join(hostHome, "goalrun-egress-*")); len(left) != 0 {
			t.Errorf("the egress socket folder was not removed: %q", left)
		}
	})

	// The default sandbox (--image host) from inside a container: goalrun
	// sees its own container's /usr (busybox, no python3, goalrun itself
	// in /usr/local/bin), while the sandbox must get the Engine's host's
	// folders, found through the Engine.
	for _, tc := range []struct{ name, workdir, workspace string }{
		{"the default sandbox takes the Engine's host's folders, bind", "/github/workspace", "bind"},
		{"the default sandbox takes the Engine's host's folders, copy", "/tmp", "copy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := "test \"$(command -v python3)\" = /usr/bin/python3 && python3 -c 'import ssl' && make --version >/dev/null && ! test -e /usr/local/bin/goalrun && test -s fixed"
			doc, events := goalrunWith(t, "host", "--network", "none", "--workdir", tc.workdir,
				"--agent-bin", "echo fixed > fixed", "--until", check)
			sb, _ := doc["sandbox"].(map[string]any)
			goal, _ := doc["goal"].(map[string]any)
			if doc["status"] != "success" || goal["passed"] != true || goal["grounded"] != true || sb["workspace"] != tc.workspace {
				t.Fatalf("document: status %v goal %v sandbox %v\nevents:\n%s", doc["status"], goal, sb, events)
			}
			hostMounts := fmt.Sprint(sb["host_mounts"])
			if img, _ := sb["image"].(string); !strings.HasPrefix(img, sandbox.HostImageRepository+":") || !strings.Contains(hostMounts, "/usr:/usr:ro") && !strings.Contains(hostMounts, "/usr/bin:/usr/bin:ro") {
				t.Errorf("image %v host_mounts %s, want the host tools image with the Engine host's /usr", sb["image"], hostMounts)
			}
			for _, h := range sb["host_mounts"].([]any) {
				src, _, _ := strings.Cut(h.(string), ":")
				if src == "/root" || src == "/home" || strings.HasPrefix(src, "/etc/shadow") || src == "/etc" || strings.HasSuffix(src, ".sock") {
					t.Errorf("host_mounts has %s", h)
				}
			}
		})
	}

	t.Run("a workspace only the container holds is copied", func(t *testing.T) {
		doc, events := goalrun(t, "--network", "none", "--workdir", "/tmp",
			"--agent-bin", "echo copied > made-in-copy", "--until", "test -f made-in-copy")
		sb, _ := doc["sandbox"].(map[string]any)
		goal, _ := doc["goal"].(map[string]any)
		if doc["status"] != "success" || goal["passed"] != true || sb["workspace"] != "copy" {
			t.Fatalf("document: status %v goal %v sandbox %v\nevents:\n%s", doc["status"], goal, sb, events)
		}
	})
}

// tarFile returns a tar stream holding the file at src as name (mode 0755).
func tarFile(t *testing.T, src, name string) io.Reader {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(b)), Typeflag: tar.TypeReg})
	tw.Write(b)
	tw.Close()
	return &buf
}

func fileUID(st os.FileInfo) int {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(s.Uid)
	}
	return -1
}
