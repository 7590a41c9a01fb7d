package sandbox_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/sandboxtest"
)

func startLocal(t *testing.T, cfg sandbox.Config) sandbox.Sandbox {
	t.Helper()
	sb, err := sandbox.StartLocal(t.Context(), cfg)
	if err != nil {
		t.Fatalf("StartLocal: %v", err)
	}
	return sb
}

func TestLocalConformance(t *testing.T) {
	sandboxtest.Run(t, startLocal)
}

func TestStartLocalRefusesBadWorkspace(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, workspace, wantInErr string
	}{
		{"empty", "", "no workspace"},
		{"missing", filepath.Join(dir, "missing"), "missing"},
		{"a file", file, "not a directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sandbox.StartLocal(t.Context(), sandbox.Config{Workspace: tc.workspace})
			if err == nil || !strings.Contains(err.Error(), tc.wantInErr) {
				t.Errorf("err = %v, want one mentioning %q", err, tc.wantInErr)
			}
		})
	}
}

func TestLocalPosture(t *testing.T) {
	dir := t.TempDir()
	real, _ := filepath.EvalSymlinks(dir)
	user := strconv.Itoa(os.Getuid()) + ":" + strconv.Itoa(os.Getgid())
	notice := "docker unavailable: no Engine answered at unix:///var/run/docker.sock"
	cases := []struct {
		name string
		cfg  sandbox.Config
		want sandbox.Posture
	}{
		{
			name: "explicit local, no secrets",
			cfg:  sandbox.Config{Workspace: dir},
			want: sandbox.Posture{Mode: "local", Network: sandbox.NetworkHost, Tier: sandbox.TierLocal, Root: real,
				Workspace: sandbox.WorkspaceHost, CheckView: sandbox.CheckViewWorkspace, User: user, CapDrop: []string{}, SecretsInSandbox: []string{}},
		},
		{
			name: "fallback with a secret and an upstream key",
			cfg: sandbox.Config{Workspace: dir, FallbackNotice: notice, Network: sandbox.NetworkEgress,
				Secrets:   map[string]string{"GITHUB_TOKEN": "ghp_x", "EMPTY": ""},
				Upstreams: []sandbox.Upstream{{URL: "https://api.anthropic.com", BaseURLEnv: "ANTHROPIC_BASE_URL", KeyEnv: "ANTHROPIC_API_KEY", Key: "sk-ant"}}},
			want: sandbox.Posture{Mode: "local", Network: sandbox.NetworkHost, Tier: sandbox.TierLocal, Root: real,
				Workspace: sandbox.WorkspaceHost, CheckView: sandbox.CheckViewWorkspace, User: user, CapDrop: []string{},
				SecretsInSandbox: []string{"ANTHROPIC_API_KEY", "GITHUB_TOKEN"}, FallbackNotice: &notice},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sb, err := sandbox.StartLocal(t.Context(), tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close(context.Background())
			if got := sb.Posture(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("posture\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestLocalEnvironment(t *testing.T) {
	host := map[string]string{
		"PATH": os.Getenv("PATH"), "HOME": "/home/h", "HTTPS_PROXY": "http://proxy:3128",
		"NOT_ALLOWED": "x", "ANTHROPIC_API_KEY": "sk-host",
	}
	lookup := func(k string) (string, bool) { v, ok := host[k]; return v, ok }
	cfg := sandbox.Config{
		Workspace: t.TempDir(),
		PassEnv:   []string{"PATH", "HOME", "HTTPS_PROXY", "ANTHROPIC_API_KEY"},
		Env:       map[string]string{"HOME": "/home/agent"},
		ToolEnv:   map[string]string{"GOCACHE": "/opt/cache", "CGO_ENABLED": "0"},
		Secrets:   map[string]string{"GITHUB_TOKEN": "ghp_secret"},
		Upstreams: []sandbox.Upstream{{URL: "https://api.anthropic.com", BaseURLEnv: "ANTHROPIC_BASE_URL", KeyEnv: "ANTHROPIC_API_KEY", Key: "sk-real"}},
	}
	sb, err := sandbox.StartLocal(t.Context(), cfg, sandbox.WithHostEnv(lookup))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	cases := []struct {
		name string
		role sandbox.Role
		want map[string]string // "" value: must be absent
	}{
		{"agent: Config.Env wins over the host, upstream key and secrets present", sandbox.RoleAgent, map[string]string{
			"HOME": "/home/agent", "HTTPS_PROXY": "http://proxy:3128", "ANTHROPIC_BASE_URL": "https://api.anthropic.com",
			"ANTHROPIC_API_KEY": "sk-real", "GITHUB_TOKEN": "ghp_secret", "NOT_ALLOWED": "", "STEP": "1",
			"GOCACHE": "/opt/cache", "CGO_ENABLED": "0"}},
		{"check: host allowlist only, no proxy, no secret names even from the host; ToolEnv too", sandbox.RoleCheck, map[string]string{
			"HOME": "/home/h", "HTTPS_PROXY": "", "ANTHROPIC_BASE_URL": "", "ANTHROPIC_API_KEY": "",
			"GITHUB_TOKEN": "", "NOT_ALLOWED": "", "STEP": "1", "GOCACHE": "/opt/cache", "CGO_ENABLED": "0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := sb.Exec(t.Context(), sandbox.Cmd{Role: tc.role, Args: []string{"env"}, Env: map[string]string{"STEP": "1"}})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, line := range strings.Split(string(res.Stdout.Tail), "\n") {
				if k, v, ok := strings.Cut(line, "="); ok {
					got[k] = v
				}
			}
			for k, want := range tc.want {
				v, ok := got[k]
				switch {
				case want == "" && ok:
					t.Errorf("%s=%q is set, want absent", k, v)
				case want != "" && v != want:
					t.Errorf("%s=%q, want %q", k, v, want)
				}
			}
		})
	}
}

// TestLocalRefusesToolEnvThatWouldLeak: ToolEnv reaches check steps, so it
// may not carry a secret, a proxy setting or HOME (as Docker refuses).
func TestLocalRefusesToolEnvThatWouldLeak(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  sandbox.Config
	}{
		{"a secret's name", sandbox.Config{Secrets: map[string]string{"GITHUB_TOKEN": "x"}, ToolEnv: map[string]string{"GITHUB_TOKEN": "y"}}},
		{"an upstream's key", sandbox.Config{Upstreams: []sandbox.Upstream{{KeyEnv: "ANTHROPIC_API_KEY", Key: "k"}}, ToolEnv: map[string]string{"ANTHROPIC_API_KEY": "k"}}},
		{"a proxy setting", sandbox.Config{ToolEnv: map[string]string{"HTTPS_PROXY": "http://p:3128"}}},
		{"HOME", sandbox.Config{ToolEnv: map[string]string{"HOME": "/tmp"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Workspace = t.TempDir()
			sb, err := sandbox.StartLocal(t.Context(), tc.cfg)
			if err == nil {
				sb.Close(context.Background())
				t.Fatal("StartLocal accepted it")
			}
			if !strings.Contains(err.Error(), "ToolEnv") {
				t.Errorf("error %q does not name ToolEnv", err)
			}
		})
	}
}

func TestLocalLooksUpProgramsOnTheStepPath(t *testing.T) {
	ws := t.TempDir()
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "only-on-step-path"), []byte("#!/bin/sh\necho found\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "not-executable"), []byte("#!/bin/sh\necho no\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lookup := func(k string) (string, bool) {
		if k == "PATH" {
			return bin + ":/usr/bin:/bin", true
		}
		return "", false
	}
	sb, err := sandbox.StartLocal(t.Context(), sandbox.Config{Workspace: ws}, sandbox.WithHostEnv(lookup))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	res, err := sb.Exec(t.Context(), sandbox.Cmd{Args: []string{"only-on-step-path"}})
	if err != nil || string(res.Stdout.Tail) != "found\n" {
		t.Errorf("program on the step's PATH: %q, %v", res.Stdout.Tail, err)
	}
	_, err = sb.Exec(t.Context(), sandbox.Cmd{Args: []string{"./not-executable"}})
	if !errors.Is(err, sandbox.ErrNotStarted) {
		t.Errorf("non-executable file: err = %v, want ErrNotStarted", err)
	}
}

func TestLocalRefusesSymlinkedDirOutsideWorkspace(t *testing.T) {
	ws := t.TempDir()
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(ws, "out")); err != nil {
		t.Fatal(err)
	}
	sb := startLocal(t, sandbox.Config{Workspace: ws})
	defer sb.Close(context.Background())
	_, err := sb.Exec(t.Context(), sandbox.Cmd{Dir: "out", Args: sandbox.Shell("touch escaped")})
	if !errors.Is(err, sandbox.ErrNotStarted) {
		t.Errorf("err = %v, want ErrNotStarted", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "escaped")); err == nil {
		t.Errorf("the step ran outside the workspace")
	}
}

// BenchmarkLocalExec measures one Local step (sh -c true) against plain
// os/exec running the same, to show the sandbox's own overhead (process
// group, pipes, tails, environment) per step.
func BenchmarkLocalExec(b *testing.B) {
	sb, err := sandbox.StartLocal(context.Background(), sandbox.Config{Workspace: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close(context.Background())
	b.Run("sandbox.Local", func(b *testing.B) {
		for b.Loop() {
			if _, err := sb.Exec(context.Background(), sandbox.Cmd{Args: sandbox.Shell("true")}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("os/exec", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("sh", "-c", "true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A step whose argument is over the kernel's 131072-byte limit for one
// string exists: it is not reported as a program that was not found.
func TestLocalArgumentTooLargeIsNotNotFound(t *testing.T) {
	ws := t.TempDir()
	sb, err := sandbox.StartLocal(t.Context(), sandbox.Config{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	_, err = sb.Exec(t.Context(), sandbox.Cmd{Args: []string{"true", strings.Repeat("x", 200_000)}})
	if err == nil || errors.Is(err, sandbox.ErrNotStarted) || !strings.Contains(err.Error(), "too large") {
		t.Errorf("err = %v; want a plain error saying the arguments are too large", err)
	}
}

// TestLocalPostureNamesGitCredentials: a step on the local host can read
// the token actions/checkout persists in .git/config (the Docker sandbox
// hides it; the host cannot), so the posture names every git config that
// holds a credential — the workspace's repositories and the one it lies
// in — and only those.
func TestLocalPostureNamesGitCredentials(t *testing.T) {
	repo := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(repo, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".git/config", "[core]\n\tbare = false\n[http \"https://github.com/\"]\n\textraheader = AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46Z2hzX3NlY3JldA==\n")
	write("app/vendor/lib/.git/config", "[remote \"origin\"]\n\turl = https://user:ghp_secret@github.com/o/lib.git\n")
	write("app/clean/.git/config", "[core]\n\tbare = false\n")
	sb, err := sandbox.StartLocal(t.Context(), sandbox.Config{Workspace: filepath.Join(repo, "app")})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(t.Context())
	p := sb.Posture()
	want := []string{"git-config:../.git/config", "git-config:vendor/lib/.git/config"}
	if !slices.Equal(p.SecretsInSandbox, want) {
		t.Errorf("secrets_in_sandbox = %q, want %q", p.SecretsInSandbox, want)
	}
	for _, s := range p.SecretsInSandbox {
		if strings.Contains(s, "ghp_secret") || strings.Contains(s, "eC1h") {
			t.Errorf("a credential's value in the posture: %q", s)
		}
	}
}
