package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/dockertest"
)

// forbiddenMount says why a host path or container path a sandbox mounts
// must never be mounted ("" when it may): "/", a home folder (this user's,
// /root, any /home/NAME or /Users/NAME) or a folder above one, ~/.ssh or
// another credential folder of any home (or inside or above one), a
// container runtime socket or a folder above one, /etc/shadow or a folder
// above it (/etc wholesale), /proc, /sys, or the Engine's data root (or
// inside or above it). It is written apart from the sandbox's own policy,
// so that it checks that policy rather than repeats it.
func forbiddenMount(p, home, engineRoot string) string {
	p = path.Clean(p)
	above := func(q string) bool { return p == q || strings.HasPrefix(q, p+"/") || p == "/" }
	within := func(q string) bool { return above(q) || strings.HasPrefix(p, q+"/") }
	if p == "/" {
		return "the root"
	}
	homes := []string{"/root", "/home", "/Users"}
	if home != "" {
		homes = append(homes, home)
	}
	for _, parent := range []string{"/home", "/Users"} {
		if rest, ok := strings.CutPrefix(p, parent+"/"); ok && !strings.Contains(rest, "/") {
			return "a home folder"
		}
	}
	for _, h := range homes {
		if above(h) {
			return "a home folder or a folder holding one"
		}
	}
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for _, c := range []string{".ssh", ".aws", ".azure", ".gnupg", ".kube", ".docker", ".config", ".netrc", ".git-credentials", ".credentials.json", ".claude.json"} {
		for _, part := range parts {
			if part == c {
				return "a credential folder (" + c + ") or a folder holding one"
			}
		}
	}
	for _, s := range []string{"/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock", "/run/podman/podman.sock"} {
		if above(s) {
			return "a runtime socket or a folder holding one"
		}
	}
	for _, q := range []string{"/etc/shadow", "/etc/gshadow", "/etc/ssl/private", "/proc", "/sys"} {
		if within(q) {
			return "the host's secrets (" + q + ")"
		}
	}
	if engineRoot != "" && within(engineRoot) {
		return "the Engine's data"
	}
	return ""
}

func TestForbiddenMount(t *testing.T) {
	for p, want := range map[string]bool{
		"/": true, "/root": true, "/home": true, "/home/runner": true, "/Users/a": true, "/home/me": true,
		"/home/me/.ssh": true, "/root/.ssh/id_rsa": true, "/home/x/.config": true, "/home/x/.config/gcloud": true, "/srv/.aws": true,
		"/var/run/docker.sock": true, "/var/run": true, "/run": true, "/var": true, "/etc": true, "/etc/shadow": true,
		"/etc/ssl": true, "/proc/1": true, "/var/cache/engine": true, "/var/cache/engine/overlay2": true, "/var/cache": true,
		"/usr": false, "/opt": false, "/etc/ssl/certs": false, "/home/me/src/proj": false, "/root/.cache/goalrun/go-build-1": false,
		"/run/goalrun/egress": false, "/goalrun/bin/claude": false,
	} {
		if got := forbiddenMount(p, "/home/me", "/var/cache/engine") != ""; got != want {
			t.Errorf("forbiddenMount(%q) = %v, want %v", p, got, want)
		}
	}
}

// checkPostureMounts fails the test on any mount of the posture that
// forbiddenMount refuses, by container path (extra_mounts) and by host path
// (host_mounts), and on a host mount that is not read-only.
func checkPostureMounts(t *testing.T, sb map[string]any, home, engineRoot string) {
	t.Helper()
	list := func(k string) []string {
		var out []string
		for _, v := range sb[k].([]any) {
			out = append(out, v.(string))
		}
		return out
	}
	extra, host := list("extra_mounts"), list("host_mounts")
	t.Logf("extra_mounts %q", extra)
	t.Logf("host_mounts %q", host)
	if len(extra) == 0 || len(host) == 0 {
		t.Fatalf("the posture lists no mounts: extra %q host %q", extra, host)
	}
	for _, e := range extra {
		target, _, _ := strings.Cut(e, ":")
		if why := forbiddenMount(target, home, engineRoot); why != "" {
			t.Errorf("extra_mounts %q: %s", e, why)
		}
	}
	for _, h := range host {
		f := strings.Split(h, ":")
		if len(f) != 3 {
			t.Errorf("host_mounts %q is not HOST:CONTAINER:MODE", h)
			continue
		}
		if f[2] != "ro" {
			t.Errorf("host_mounts %q is writable", h)
		}
		for _, p := range f[:2] {
			if why := forbiddenMount(p, home, engineRoot); why != "" {
				t.Errorf("host_mounts %q: %s is %s", h, p, why)
			}
		}
	}
}

// engineRoot is the Engine's data root (docker info).
func engineRoot(t *testing.T) string {
	t.Helper()
	cli := dockertest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	info, err := cli.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.DockerRootDir
}

// staticGoalrun runs the static goalrun (dockertest.GoalrunBinary, which
// can be the egress relay) in dir with the test's environment plus env.
func staticGoalrun(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	saved := goalrunBin
	goalrunBin = dockertest.GoalrunBinary(t)
	defer func() { goalrunBin = saved }()
	return goalrun(t, dir, env, args...)
}

// TestDefaultSandboxMounts is the must-show of the host toolchains: the
// posture of the default sandbox — with the real Claude Code CLI (its
// executable lies outside the host's system folders, so it is mounted),
// egress (the relay and its sockets), the warm Go cache and the host's
// folders — lists every mount, and none is a home folder, /root, ~/.ssh, a
// cloud credential folder, a runtime socket, /etc/shadow or the Engine's
// data. The check passes at check #0, so no model is needed.
func TestDefaultSandboxMounts(t *testing.T) {
	dockerEngine(t)
	claude := dockertest.ClaudeBinary()
	if claude == "" {
		if os.Getenv("GOALRUN_REQUIRE_AGENTS") == "1" {
			t.Fatal("GOALRUN_CLAUDE_BIN names no Claude Code binary and GOALRUN_REQUIRE_AGENTS=1")
		}
		t.Skip("no Claude Code binary (GOALRUN_CLAUDE_BIN)")
	}
	ws := dockertest.Workspace(t, 1000, 1000)
	r := staticGoalrun(t, ws, []string{"ANTHROPIC_API_KEY=sk-ant-test-not-a-key"}, "run", "--json", "--agent-bin", claude,
		"--until", "test \"$(command -v python3)\" = /usr/bin/python3", "make the check pass")
	d := r.doc(t)
	if r.code != 0 || get(d, "goal", "grounded") != true || get(d, "goal", "iterations") != 0.0 {
		t.Fatalf("exit %d goal %v\n%s", r.code, d["goal"], r.stderr)
	}
	sb := d["sandbox"].(map[string]any)
	if img, _ := sb["image"].(string); !strings.HasPrefix(img, sandbox.HostImageRepository+":") || sb["network"] != "egress" {
		t.Errorf("image %v network %v, want the host tools image and egress", sb["image"], sb["network"])
	}
	home, _ := os.UserHomeDir()
	checkPostureMounts(t, sb, home, engineRoot(t))
	hostMounts := fmt.Sprint(sb["host_mounts"])
	for _, want := range []string{"/usr/bin", "/etc/ssl/certs:/etc/ssl/certs:ro", claude + ":/goalrun/bin/claude:ro", ":" + sandbox.GoCacheTarget + ":ro"} {
		if want == "/usr/bin" {
			// /usr whole, or child by child when it holds a credential
			// file (a test may have made one meanwhile).
			if !strings.Contains(hostMounts, "/usr:/usr:ro") && !strings.Contains(hostMounts, "/usr/bin:/usr/bin:ro") {
				t.Errorf("host_mounts %s lacks /usr/bin", hostMounts)
			}
			continue
		}
		if !strings.Contains(hostMounts, want) {
			t.Errorf("host_mounts %s lacks %s", hostMounts, want)
		}
	}
}

// TestDefaultSandboxRunsHostToolchains: with only --agent command and
// --until, a project whose check needs python3 and make (which the old
// busybox image lacked: CheckNotRunnable) ends grounded in one iteration,
// in bind and copy mode, with the agent's own edit as the only change; a
// Go check hits the warm standard-library cache with the host's Go,
// visible through /usr, and builds a cgo package with the host's gcc.
func TestDefaultSandboxRunsHostToolchains(t *testing.T) {
	dockerEngine(t)
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Fatalf("the cgo package of this test needs the host's gcc: %v", err)
	}
	for _, mode := range []string{"bind", "copy"} {
		t.Run(mode, func(t *testing.T) {
			ws := dockertest.Workspace(t, 1000, 1000)
			files := map[string]string{
				"Makefile":     "test:\n\tpython3 -B check.py\n",
				"check.py":     "import json, sys\nsys.exit(0 if json.load(open('state.json'))['fixed'] else 1)\n",
				"state.json":   `{"fixed": false}`,
				"go.mod":       "module example.test/calc\n\ngo 1.21\n",
				"calc.go":      "package calc\n",
				"calc_test.go": "package calc\n\nimport (\n\t\"fmt\"\n\t\"testing\"\n)\n\nfunc TestSum(t *testing.T) { fmt.Sprint(1 + 1) }\n",
				// A cgo package: it builds only with CGO_ENABLED=1 and the
				// host's gcc inside, as it does on the host.
				"twice/twice.go":      "package twice\n\n// static int twice(int x) { return 2 * x; }\nimport \"C\"\n\nfunc Twice(x int) int { return int(C.twice(C.int(x))) }\n",
				"twice/twice_test.go": "package twice\n\nimport \"testing\"\n\nfunc TestTwice(t *testing.T) {\n\tif Twice(21) != 42 {\n\t\tt.Fatal(Twice(21))\n\t}\n}\n",
			}
			for name, body := range files {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, name)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			dockertest.Chown(t, ws, 1000, 1000)
			// The standard library is not stale: the warm cache was made
			// with the steps' own CGO_ENABLED (1 here).
			check := `make -s test && test "$(go env CGO_ENABLED)" = 1 && go list -f '{{.ImportPath}} stale={{.Stale}}' fmt testing net | grep -v stale=true && go test -count=1 ./...`
			r := goalrun(t, ws, nil, "run", "--json", "--workspace", mode, "--agent", "command",
				"--agent-bin", `python3 -c 'import json; json.dump({"fixed": True}, open("state.json", "w"))'`, "--until", check)
			d := r.doc(t)
			if r.code != 0 || get(d, "goal", "grounded") != true || get(d, "goal", "iterations") != 1.0 {
				t.Fatalf("exit %d goal %v checks %v\n%s", r.code, d["goal"], d["iterations"], r.stderr)
			}
			if get(d, "changes", "files_changed") != 1.0 || get(d, "sandbox", "workspace") != mode {
				t.Errorf("changes %v workspace %v, want the agent's one file in %s mode", d["changes"], get(d, "sandbox", "workspace"), mode)
			}
			home, _ := os.UserHomeDir()
			checkPostureMounts(t, d["sandbox"].(map[string]any), home, engineRoot(t))
		})
	}
}

// TestMountFlag: --mount brings a host folder in read-only at the target
// asked for; bad input (a home folder, a credential folder, /etc, a
// missing folder, a target inside the host's read-only /usr, the
// workspace or a folder holding it, TMPDIR) ends before anything runs,
// exit 2, naming --mount.
func TestMountFlag(t *testing.T) {
	dockerEngine(t)
	tool := t.TempDir()
	if err := os.WriteFile(filepath.Join(tool, "tool.sh"), []byte("#!/bin/sh\necho tool-ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Run("a toolchain elsewhere", func(t *testing.T) {
		ws := dockertest.Workspace(t, 1000, 1000)
		r := goalrun(t, ws, nil, "run", "--json", "--agent", "command", "--agent-bin", "true", "--mount", tool+":/mnt/tool",
			"--until", "/mnt/tool/tool.sh | grep -q tool-ran && ! touch /mnt/tool/x 2>/dev/null")
		d := r.doc(t)
		if r.code != 0 || get(d, "goal", "passed") != true {
			t.Fatalf("exit %d goal %v\n%s", r.code, d["goal"], r.stderr)
		}
		if hm := fmt.Sprint(get(d, "sandbox", "host_mounts")); !strings.Contains(hm, tool+":/mnt/tool:ro") {
			t.Errorf("host_mounts %s lacks %s:/mnt/tool:ro", hm, tool)
		}
	})
	home, _ := os.UserHomeDir()
	for _, tc := range []struct{ name, value, want string }{
		{"the home folder", home, "home folder"},
		{"ssh keys", filepath.Join(home, ".ssh"), "credential"},
		{"etc wholesale", "/etc", "/etc/shadow"},
		{"the Docker socket", "/var/run/docker.sock", "socket"},
		{"a folder that exists nowhere", "/goalrun-test-no-such-folder", "exists neither on this machine nor on the Docker Engine's host"},
		{"a target inside the host's /usr", tool + ":/usr/bin/mytool", "mounted read-only at /usr"},
		{"the workspace", "WS:/mnt/ws", "the workspace"},
		{"the folder holding the workspace", "WS/..:/mnt/ws", "the workspace"},
		{"the temporary folder", os.TempDir() + ":/mnt/tmp", "TMPDIR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := dockertest.Workspace(t, 1000, 1000)
			if v, ok := strings.CutPrefix(tc.value, "WS"); ok {
				rel, target, _ := strings.Cut(v, ":")
				tc.value = filepath.Clean(ws+rel) + ":" + target
			}
			r := goalrun(t, ws, nil, "run", "--json", "--agent", "command", "--agent-bin", "true", "--mount", tc.value, "--until", "true")
			d := r.doc(t)
			msg, _ := d["message"].(string)
			if r.code != 2 || d["error"] != report.ErrBadInput || !strings.Contains(msg, "--mount "+tc.value) || !strings.Contains(msg, tc.want) {
				t.Errorf("exit %d error %v message %q, want bad input naming --mount %s and %q", r.code, d["error"], msg, tc.value, tc.want)
			}
		})
	}
}

// TestMinimalImage: --image minimal is the small busybox image of before
// (built from this machine's files), without the host's folders.
func TestMinimalImage(t *testing.T) {
	dockerEngine(t)
	ws := dockertest.Workspace(t, 1000, 1000)
	r := goalrun(t, ws, nil, "run", "--json", "--image", "minimal", "--agent", "command", "--agent-bin", "echo fixed > fixed",
		"--until", "test -s fixed && readlink /bin/sh | grep -q busybox && ! command -v python3")
	d := r.doc(t)
	if r.code != 0 || get(d, "goal", "passed") != true {
		t.Fatalf("exit %d goal %v\n%s", r.code, d["goal"], r.stderr)
	}
	sb := d["sandbox"].(map[string]any)
	if img, _ := sb["image"].(string); !strings.HasPrefix(img, sandbox.ImageRepository+":") {
		t.Errorf("image %q, want the minimal image", img)
	}
	if hm, _ := json.Marshal(sb["host_mounts"]); strings.Contains(string(hm), "/usr:/usr") {
		t.Errorf("host_mounts %s: the minimal image mounts no host system folder", hm)
	}
}

// TestGoToolchainOutsideHostFolders: a Go toolchain that lies outside the
// host's system folders (here a stand-in under /var/tmp, which is not
// mounted) is mounted at its own path, first on PATH, as before.
func TestGoToolchainOutsideHostFolders(t *testing.T) {
	dockerEngine(t)
	base, err := os.MkdirTemp("/var/tmp", "goalrun-test-goroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	goroot := filepath.Join(base, "go")
	for _, d := range []string{"bin", "src/runtime"} {
		if err := os.MkdirAll(filepath.Join(goroot, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Only `go version` answers: warming a cache with it fails, and the
	// run goes on without one.
	if err := os.WriteFile(filepath.Join(goroot, "bin", "go"), []byte("#!/bin/sh\n[ \"$1\" = version ] && echo stand-in-go && exit 0\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ws := dockertest.Workspace(t, 1000, 1000)
	r := goalrun(t, ws, []string{"PATH=" + filepath.Join(goroot, "bin") + ":" + os.Getenv("PATH")}, "run", "--json", "--agent", "command", "--agent-bin", "true",
		"--until", `test "$(go version)" = stand-in-go && test "$(command -v go)" = `+filepath.Join(goroot, "bin", "go"))
	d := r.doc(t)
	if r.code != 0 || get(d, "goal", "passed") != true {
		t.Fatalf("exit %d goal %v iterations %v\n%s", r.code, d["goal"], d["iterations"], r.stderr)
	}
	if hm := fmt.Sprint(get(d, "sandbox", "host_mounts")); !strings.Contains(hm, goroot+":"+goroot+":ro") {
		t.Errorf("host_mounts %s lacks the toolchain at its own path", hm)
	}
}
