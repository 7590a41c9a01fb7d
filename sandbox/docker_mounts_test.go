package sandbox

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMountPolicy(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home", "user")
	mk := func(p string) string {
		t.Helper()
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	link := func(target, name string) string {
		t.Helper()
		p := filepath.Join(base, name)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mk(filepath.Join(home, ".ssh"))
	mk(filepath.Join(home, ".aws"))
	mk(filepath.Join(home, ".config", "gcloud"))
	project := mk(filepath.Join(home, "src", "project"))
	kube := mk(filepath.Join(base, "elsewhere", "kube"))
	other := mk(filepath.Join(base, "work", "repo"))
	sock := filepath.Join(base, "work", "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	runtimeDir := mk(filepath.Join(base, "run", "user", "1000"))

	env := map[string]string{
		"KUBECONFIG":      filepath.Join(kube, "config"),
		"XDG_RUNTIME_DIR": runtimeDir,
	}
	engineData := mk(filepath.Join(base, "opt", "docker-data"))
	p := newMountPolicy(home, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, "unix:///var/run/docker.sock")
	p.addTree(engineData, "the Docker Engine's data root")

	tests := []struct {
		name   string
		source string
		refuse bool
	}{
		{"root", "/", true},
		{"home", home, true},
		{"above home", filepath.Join(base, "home"), true},
		{"the temp base above home", base, true},
		{"project inside home", project, false},
		{"a folder elsewhere", other, false},
		{"ssh folder", filepath.Join(home, ".ssh"), true},
		{"inside ssh", filepath.Join(home, ".ssh", "id_ed25519"), true},
		{"aws credentials", filepath.Join(home, ".aws"), true},
		{"gcloud", filepath.Join(home, ".config", "gcloud"), true},
		{"above a credential folder", filepath.Join(home, ".config"), true},
		{"docker socket", "/var/run/docker.sock", true},
		{"run folder holding runtime sockets", "/run", true},
		{"var holding /var/run", "/var", true},
		{"containerd socket", "/run/containerd/containerd.sock", true},
		{"kubeconfig from env", filepath.Join(kube, "config"), true},
		{"above kubeconfig", kube, true},
		{"xdg runtime dir", runtimeDir, true},
		{"inside xdg runtime dir is fine", filepath.Join(runtimeDir, "x"), false},
		{"any socket", sock, true},
		{"symlink to ssh", link(filepath.Join(home, ".ssh"), "innocent"), true},
		{"symlink to root", link("/", "rootlink"), true},
		{"symlink to a project", link(project, "projlink"), false},
		{"dotdot spelling of home", filepath.Join(project, "..", ".."), true},
		{"usr is fine", "/usr", false},
		{"docker's data", "/var/lib/docker", true},
		{"inside docker's data", "/var/lib/docker/volumes/x/_data", true},
		{"var/lib holding docker's data", "/var/lib", true},
		{"containerd's data", "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs", true},
		{"podman's storage", "/var/lib/containers/storage", true},
		{"rootless docker's data", filepath.Join(home, ".local", "share", "docker"), true},
		{"a sibling of engine data is fine", "/var/lib/apt", false},
		{"a toolchain under opt is fine", "/opt/hostedtoolcache/go/1.26.0/x64", false},
		{"CA certificates are fine", "/etc/ssl/certs", false},
		{"the dynamic linker's cache is fine", "/etc/ld.so.cache", false},
		{"etc wholesale", "/etc", true},
		{"etc/ssl holds the private keys", "/etc/ssl", true},
		{"TLS private keys", "/etc/ssl/private", true},
		{"RHEL TLS private keys", "/etc/pki/tls/private/host.key", true},
		{"shadow", "/etc/shadow", true},
		{"gshadow", "/etc/gshadow", true},
		{"sudoers", "/etc/sudoers.d", true},
		{"SSH host keys", "/etc/ssh", true},
		{"the Engine's TLS keys", "/etc/docker", true},
		{"proc", "/proc", true},
		{"another process's environment", "/proc/1/environ", true},
		{"sys", "/sys", true},
		{"dev", "/dev", true},
		{"inside run", "/run/secrets", true},
		{"inside var/run", "/var/run/secrets", true},
		{"this Engine's data root", engineData, true},
		{"inside this Engine's data root", filepath.Join(engineData, "overlay2"), true},
		{"above this Engine's data root", filepath.Dir(engineData), true},
		{"root's home", "/root", true},
		{"root's ssh", "/root/.ssh", true},
		{"root's agent login", "/root/.claude/.credentials.json", true},
		{"root's claude folder holds the login", "/root/.claude", true},
		{"Claude Code's local install is fine", "/root/.claude/local/node_modules/.bin", false},
		{"a subfolder of root's home is fine", "/root/sdk/go1.26", false},
		{"another user's home", "/home/runner", true},
		{"all homes", "/home", true},
		{"a mac home", "/Users/alice", true},
		{"inside another user's home is fine", "/home/runner/work/_tool", false},
		{"another user's aws keys", "/home/runner/.aws", true},
		{"inside another user's gcloud", "/home/runner/.config/gcloud/creds.db", true},
		{"another user's .config holds gcloud", "/home/runner/.config", true},
		{"a cargo home holds the registry token", "/home/runner/.cargo", true},
		{"cargo's binaries are fine", "/home/runner/.cargo/bin", false},
		{"a maven settings file", "/srv/ci/.m2/settings.xml", true},
		{"a .ssh folder anywhere", "/srv/backup/.ssh", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := p.check("mount", tc.source)
			if got := errors.Is(err, ErrDangerousMount); got != tc.refuse {
				t.Errorf("check(%q) = %v, want refused=%v", tc.source, err, tc.refuse)
			}
		})
	}
	t.Run("relative source", func(t *testing.T) {
		if err := p.check("mount", "relative/path"); err == nil {
			t.Error("a relative source was accepted")
		}
	})
	t.Run("message says what and why", func(t *testing.T) {
		err := p.check("workspace", link(filepath.Join(home, ".ssh"), "msg"))
		want := "is " + filepath.Join(home, ".ssh") + ", a credential folder (~/.ssh)"
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "mount a narrower folder") {
			t.Errorf("error %q should contain %q and a way out", err, want)
		}
	})
}

// TestCheckEngineData: the data folders of container engines are refused
// as a workspace by the sandboxes that have no mount policy (Local), and so
// is a data root an Engine reports elsewhere.
func TestCheckEngineData(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "engine", "root")
	if err := os.MkdirAll(filepath.Join(root, "volumes"), 0o755); err != nil {
		t.Fatal(err)
	}
	project := filepath.Join(base, "project")
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, ws string
		refuse   bool
	}{
		{"docker's usual data", "/var/lib/docker", true},
		{"the reported data root", root, true},
		{"inside the reported data root", filepath.Join(root, "volumes"), true},
		{"above the reported data root", filepath.Join(base, "engine"), true},
		{"a project", project, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckEngineData(tc.ws, "", root)
			if got := errors.Is(err, ErrDangerousMount); got != tc.refuse {
				t.Fatalf("CheckEngineData(%q) = %v, want refused=%v", tc.ws, err, tc.refuse)
			}
			if tc.refuse && !strings.Contains(err.Error(), "data") {
				t.Errorf("error %q does not say it is an engine's data", err)
			}
		})
	}
}
