package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/dockertest"
	"github.com/goalrun/goalrun/sandbox/sandboxtest"
)

func TestMain(m *testing.M) {
	dockertest.HelperMain() // this binary re-run as another user (dockertest.AsUser)
	// What an earlier, killed test process left behind would collide with
	// this run's fixed names: remove it first, as goalrun does at start-up.
	if cli, err := sandbox.NewDockerClient(); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if _, err := cli.Ping(ctx); err == nil {
			if _, err := sandbox.Reap(ctx, cli, time.Hour); err != nil {
				fmt.Fprintln(os.Stderr, "reaping leftovers of earlier test runs:", err)
			}
		}
		cancel()
		cli.Close()
	}
	code := m.Run()
	dockertest.Cleanup()
	os.Exit(code)
}

// testUID is the sandbox user of the Docker tests.
const testUID, testGID = 1000, 1000

// testLifetime is the Config.Lifetime of test sandboxes: other goalrun
// processes on the same Engine (other packages' tests run in parallel) must
// not reap them while they run.
const testLifetime = time.Hour

// startDocker starts a Docker sandbox for cfg (filling in what is missing:
// run id, image, a workspace owned by the sandbox user) and closes it when
// the test ends.
func startDocker(t *testing.T, cfg sandbox.Config, opts ...sandbox.DockerOption) (*sandbox.Docker, sandbox.Config) {
	t.Helper()
	cli := dockertest.Client(t)
	if cfg.RunID == "" {
		cfg.RunID = dockertest.RunID(t)
	}
	if cfg.Image == "" {
		cfg.Image = dockertest.Image(t, cli)
	}
	if cfg.Workspace == "" {
		cfg.Workspace = dockertest.Workspace(t, testUID, testGID)
	}
	if cfg.Lifetime == 0 {
		cfg.Lifetime = testLifetime
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := sandbox.StartDocker(ctx, cli, cfg, opts...)
	if err != nil {
		t.Fatalf("StartDocker: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := sb.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return sb, cfg
}

// run executes cmd under a generous guard and fails the test on error.
func run(t *testing.T, sb sandbox.Sandbox, cmd sandbox.Cmd) sandbox.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := sb.Exec(ctx, cmd)
	if err != nil {
		t.Fatalf("Exec %q: %v", cmd.Args, err)
	}
	return res
}

func sh(role sandbox.Role, script string) sandbox.Cmd {
	return sandbox.Cmd{Role: role, Args: sandbox.Shell(script)}
}

// TestDockerHardeningInside is the "Must show": inside a default
// sandbox the process has no capabilities, no new privileges and seccomp in
// filter mode; the root is read-only; the user is not root; the Docker
// socket is absent; and the posture says the same.
func TestDockerHardeningInside(t *testing.T) {
	sb, _ := startDocker(t, sandbox.Config{})
	for _, role := range []sandbox.Role{sandbox.RoleAgent, sandbox.RoleCheck} {
		t.Run(role.String(), func(t *testing.T) {
			res := run(t, sb, sh(role, "grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status"))
			status := parseStatus(string(res.Stdout.Tail))
			for k, want := range map[string]string{"CapEff": "0000000000000000", "CapPrm": "0000000000000000", "CapBnd": "0000000000000000", "NoNewPrivs": "1", "Seccomp": "2"} {
				if status[k] != want {
					t.Errorf("%s = %q, want %q (status %q)", k, status[k], want, res.Stdout.Tail)
				}
			}
			cases := []struct {
				name, script string
				wantExit     func(int) bool
				wantOut      string
			}{
				{"write /etc/x fails", "echo x > /etc/x", func(c int) bool { return c != 0 }, ""},
				{"write /usr/x fails", "echo x > /usr/x", func(c int) bool { return c != 0 }, ""},
				{"write /bin/sh fails", "echo x > /bin/sh", func(c int) bool { return c != 0 }, ""},
				{"uid is not 0", "id -u", func(c int) bool { return c == 0 }, "1000\n"},
				{"docker socket absent", "ls -la /var/run/docker.sock /run/docker.sock 2>&1; test ! -e /var/run/docker.sock && test ! -e /run/docker.sock", func(c int) bool { return c == 0 }, ""},
				{"tmp is writable and executable", "cp /bin/busybox /tmp/true && /tmp/true", func(c int) bool { return c == 0 }, ""},
				{"home is not executable", "cp /bin/busybox $HOME/true && $HOME/true; test $? = 126", func(c int) bool { return c == 0 }, ""},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					res := run(t, sb, sh(role, tc.script))
					if !tc.wantExit(res.ExitCode) {
						t.Errorf("exit %d (stdout %q stderr %q)", res.ExitCode, res.Stdout.Tail, res.Stderr.Tail)
					}
					if tc.wantOut != "" && string(res.Stdout.Tail) != tc.wantOut {
						t.Errorf("stdout %q, want %q", res.Stdout.Tail, tc.wantOut)
					}
				})
			}
		})
	}
	p := sb.Posture()
	if p.Mode != "docker" || p.Network != sandbox.NetworkNone || !p.ReadOnlyRootfs || !p.NoNewPrivileges || p.Seccomp != "default" ||
		len(p.CapDrop) != 1 || p.CapDrop[0] != "ALL" || p.User != "1000:1000" || p.PidsLimit != sandbox.DefaultPidsLimit ||
		p.MemoryBytes != sandbox.DefaultMemoryBytes || p.NanoCPUs != sandbox.DefaultNanoCPUs || p.Tier != sandbox.TierEgressOnly ||
		p.Root != sandbox.DockerRoot || p.Workspace != sandbox.WorkspaceBind || p.Privileged || p.Runtime == "" ||
		!strings.HasPrefix(p.ImageDigest, "sha256:") || len(p.SecretsInSandbox) != 0 || p.FallbackNotice != nil || p.Mount != nil || len(p.ExtraMounts) != 0 {
		t.Errorf("posture does not say what was applied: %+v", p)
	}
}

func parseStatus(s string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// TestDockerConformance runs the sandboxtest suite against the Docker
// sandbox (bind mode, the default for a workspace owned by a normal user).
func TestDockerConformance(t *testing.T) {
	cli := dockertest.Client(t)
	image := dockertest.Image(t, cli)
	sandboxtest.Run(t, func(t *testing.T, cfg sandbox.Config) sandbox.Sandbox {
		cfg.Image = image
		cfg.RunID = dockertest.RunID(t)
		cfg.Lifetime = testLifetime
		dockertest.Chown(t, cfg.Workspace, testUID, testGID)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		sb, err := sandbox.StartDocker(ctx, cli, cfg)
		if err != nil {
			t.Fatalf("StartDocker: %v", err)
		}
		return sb
	})
}

// TestBuildImage: the image is built from files on this machine only, is
// reused by its content hash, and holds what agents need: busybox applets,
// a real bash, CA certificates and a named uid 1000 user.
func TestBuildImage(t *testing.T) {
	cli := dockertest.Client(t)
	ref := dockertest.Image(t, cli)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var agents []string
	if p := dockertest.ClaudeBinary(); p != "" {
		agents = append(agents, p)
	}
	spec := sandbox.DefaultImageSpec(agents...)
	spec.Labels = map[string]string{"goalrun.test": "1"}
	again, err := sandbox.BuildImage(ctx, cli, spec)
	if err != nil || again != ref {
		t.Fatalf("second BuildImage = %q, %v; want the same %q reused", again, err, ref)
	}
	if !strings.HasPrefix(ref, sandbox.ImageRepository+":") {
		t.Errorf("reference %q", ref)
	}
	sb, _ := startDocker(t, sandbox.Config{Image: ref})
	res := run(t, sb, sh(sandbox.RoleCheck, `bash -c 'echo bash=${BASH_VERSINFO[0]}'; id -un; test -s /etc/ssl/certs/ca-certificates.crt && echo certs; echo "$PATH"`))
	out := string(res.Stdout.Tail)
	for _, want := range []string{"bash=5", "sandbox\n", "certs\n", sandbox.ImagePath} {
		if !strings.Contains(out, want) {
			t.Errorf("image lacks %q: %q (stderr %q)", want, out, res.Stderr.Tail)
		}
	}
}

// The agent container's main process ends by itself after the run's
// lifetime plus a grace period (goalrun killed outright never stops it):
// the idle shell sleeps that long, the relay gets --lifetime.
func TestDockerAgentContainerLifetime(t *testing.T) {
	tests := []struct {
		name string
		cfg  sandbox.Config
		want []string
	}{
		{"idle shell", sandbox.Config{Lifetime: 5 * time.Minute}, []string{"sh", "-c", "trap 'exit 0' TERM; sleep 900 & wait $!"}},
		{"relay", sandbox.Config{Lifetime: 5 * time.Minute, RelayBinary: dockertest.GoalrunBinary(t)}, []string{"__relay", "--lifetime", "15m0s"}},
	}
	cli := dockertest.Client(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sb, _ := startDocker(t, tc.cfg)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c, err := cli.ContainerInspect(ctx, sb.ContainerID())
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(c.Config.Cmd, "\x00")
			if !strings.Contains(got, strings.Join(tc.want, "\x00")) {
				t.Errorf("agent container command %q; want it to hold %q", c.Config.Cmd, tc.want)
			}
			// The posture names what else is mounted: the relay's binary
			// (read-only), nothing without one.
			em := sb.Posture().ExtraMounts
			if tc.cfg.RelayBinary == "" && len(em) != 0 || tc.cfg.RelayBinary != "" && (len(em) == 0 || !strings.HasSuffix(em[0], ":ro")) {
				t.Errorf("posture extra_mounts %q", em)
			}
		})
	}
}
