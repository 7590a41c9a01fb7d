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
	p := newMountPolicy(home, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, "unix:///var/run/docker.sock")

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
