package sandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/dockertest"
)

// hostToolsConfig is the default sandbox's configuration: the Bare image
// with the host's system folders mounted over it and their environment.
func hostToolsConfig(t *testing.T) (sandbox.Config, sandbox.HostToolchain) {
	t.Helper()
	img, h := dockertest.HostTools(t, dockertest.Client(t))
	return sandbox.Config{Image: img, Mounts: slices.Clone(h.Mounts), ToolEnv: h.Env}, h
}

// TestHostToolsOnThisEngine: the Engine here runs on goalrun's host, so
// what HostTools found through it is what exists here: every candidate
// that exists is mounted, whole or child by child with what is left out
// named (this machine's folders hold no credential of their own, but
// another test may have put a fake runner in /opt meanwhile).
func TestHostToolsOnThisEngine(t *testing.T) {
	cli := dockertest.Client(t)
	if !strings.HasPrefix(cli.DaemonHost(), "unix://") {
		t.Skipf("the Engine at %s may not share this host's filesystem", cli.DaemonHost())
	}
	_, h := dockertest.HostTools(t, cli)
	under := func(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	for _, l := range h.LeftOut {
		if !strings.Contains(l.Path, "/goalrun-test-") {
			t.Errorf("left out %s: %s; nothing on this machine is private but what tests make", l.Path, l.Reason)
		}
	}
	for _, c := range append(append(append([]string(nil), sandbox.HostSystemFolders...), "/sbin/ldconfig", "/sbin/ldconfig.real"), sandbox.HostEtcEntries...) {
		_, err := os.Stat(c)
		mounted := slices.ContainsFunc(h.Mounts, func(m sandbox.Mount) bool { return under(m.Source, c) })
		if mounted != (err == nil) {
			t.Errorf("%s mounted (whole or in part) = %v, exists here = %v", c, mounted, err == nil)
		}
	}
	for _, must := range []string{"/usr/bin", "/bin", "/lib", "/etc/ld.so.cache", "/etc/ssl/certs", "/etc/alternatives"} {
		if !h.Covers(must) {
			t.Errorf("%s is not mounted", must)
		}
	}
	for _, p := range strings.Split(h.Env["PATH"], ":") {
		if p == "/root" || strings.HasPrefix(p, "/root/") || strings.HasPrefix(p, "/home/") {
			t.Errorf("PATH %q holds %s, under a home folder", h.Env["PATH"], p)
		}
	}
}

// TestHostToolchainsInside: the host's toolchains run inside, in agent and
// check steps, in bind and copy mode, as on the host — python3 is Debian's
// /usr/bin/python3 (on this machine the PATH's first python3 is pyenv's
// under /root, which is not mounted), TLS finds the host's CA certificates
// and a C program compiles and runs.
func TestHostToolchainsInside(t *testing.T) {
	for _, mode := range []sandbox.WorkspaceMode{sandbox.WorkspaceBind, sandbox.WorkspaceCopy} {
		t.Run(string(mode), func(t *testing.T) {
			cfg, _ := hostToolsConfig(t)
			cfg.WorkspaceMode = mode
			sb, _ := startDocker(t, cfg)
			p := sb.Posture()
			// /usr whole, or child by child when it holds a credential file.
			if !(slices.Contains(p.ExtraMounts, "/usr:ro") || slices.Contains(p.ExtraMounts, "/usr/bin:ro")) ||
				!(slices.Contains(p.HostMounts, "/usr:/usr:ro") || slices.Contains(p.HostMounts, "/usr/bin:/usr/bin:ro")) {
				t.Errorf("posture extra_mounts %q host_mounts %q, want /usr read-only", p.ExtraMounts, p.HostMounts)
			}
			for _, role := range bothRoles {
				for _, tc := range []struct{ name, host, script, want string }{
					{"python3 is the system's", "/usr/bin/python3", "command -v python3; python3 -c 'import sys; print(sys.version_info[0])'", "/usr/bin/python3\n3\n"},
					{"make", "/usr/bin/make", "make --version | head -n1 | cut -d' ' -f1,2", "GNU Make\n"},
					{"node", "/usr/bin/node", "node -e 'console.log(typeof process.version)'", "string\n"},
					{"java through /etc/alternatives", "/etc/alternatives/java", "java -XshowSettings:properties -version 2>&1 | grep -c 'java.home = /usr/lib/jvm/'", "1\n"},
					{"go", "/usr/local/go/bin/go", "go env GOROOT", "/usr/local/go\n"},
					{"a C program", "/usr/bin/gcc", "printf 'int main(){return 42;}' > /tmp/a.c && gcc -o /tmp/a /tmp/a.c && /tmp/a; echo $?", "42\n"},
					{"the host's CA certificates", "/etc/ssl/certs/ca-certificates.crt", "python3 -c 'import ssl; c = ssl.create_default_context(); print(len(c.get_ca_certs()) > 10)'", "True\n"},
					{"the sandbox user has a name", "/usr/bin/id", "id -un", "sandbox\n"},
				} {
					t.Run(role.String()+" "+tc.name, func(t *testing.T) {
						if _, err := os.Stat(tc.host); err != nil {
							t.Skipf("this machine has no %s: %v", tc.host, err)
						}
						res := run(t, sb, sh(role, tc.script))
						if res.ExitCode != 0 || string(res.Stdout.Tail) != tc.want {
							t.Errorf("exit %d stdout %q stderr %q, want %q", res.ExitCode, res.Stdout.Tail, res.Stderr.Tail, tc.want)
						}
					})
				}
			}
		})
	}
}

// TestAttackHostToolMounts: the host's folders are read-only, hold no
// runtime socket, and reading them exposes no host secret: /etc/shadow,
// TLS private keys, root's home, other homes, the Engine's data and
// goalrun's own caches are not there; a setuid program of the host gains
// nothing (no new privileges).
func TestAttackHostToolMounts(t *testing.T) {
	cfg, h := hostToolsConfig(t)
	sb, _ := startDocker(t, cfg)
	cli := dockertest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	info, err := cli.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, m := range h.Mounts {
		targets = append(targets, m.Target)
	}
	for _, role := range bothRoles {
		t.Run(role.String()+" writes to every mount fail", func(t *testing.T) {
			script := `for t in "$@"; do
  if [ -d "$t" ]; then f="$t/.goalrun-pwned"; else f="$t"; fi
  if (echo pwned >> "$f") 2>/dev/null; then echo "BREACH $f"; fi
  if [ -d "$t" ] && mkdir "$t/.goalrun-pwned-dir" 2>/dev/null; then echo "BREACH mkdir $t"; fi
  if [ ! -d "$t" ] && (: > "$t") 2>/dev/null; then echo "BREACH truncate $t"; fi
done; echo done`
			res := run(t, sb, sandbox.Cmd{Role: role, Args: append([]string{"sh", "-c", script, "attack"}, targets...)})
			if out := string(res.Stdout.Tail); out != "done\n" {
				t.Errorf("the agent wrote a host folder:\n%s", out)
			}
		})
		t.Run(role.String()+" no runtime socket, no host secret", func(t *testing.T) {
			sockets := run(t, sb, sandbox.Cmd{Role: role, Args: append([]string{"sh", "-c", `find "$@" -type s 2>/dev/null; echo done`, "find"}, targets...)})
			if out := string(sockets.Stdout.Tail); out != "done\n" {
				t.Errorf("sockets in the host folders:\n%s", out)
			}
			absent := []string{"/etc/shadow", "/etc/gshadow", "/etc/ssl/private", "/etc/pki/tls/private", "/etc/ssh", "/etc/docker",
				"/var/run/docker.sock", "/run/docker.sock", "/run/containerd", "/var/lib/docker", info.DockerRootDir,
				"/root/.ssh", "/root/.cache", "/root/.pyenv", "/var/cache/goalrun-ci", "/etc/gitconfig", "/etc/environment"}
			script := `for p in "$@"; do [ -e "$p" ] && echo "PRESENT $p"; done
ls -A /root
ls -A /home
awk '$2 == "/run" {print "RUN " $3}' /proc/self/mounts
echo done`
			res := run(t, sb, sandbox.Cmd{Role: role, Args: append([]string{"sh", "-c", script, "attack"}, absent...)})
			if out := string(res.Stdout.Tail); out != "goalrun\nRUN tmpfs\ndone\n" {
				t.Errorf("want only goalrun's HOME in /home, /run a tmpfs, nothing else:\n%s\nstderr %s", out, res.Stderr.Tail)
			}
		})
		t.Run(role.String()+" setuid programs gain nothing", func(t *testing.T) {
			res := run(t, sb, sh(role, "grep -E '^(NoNewPrivs|CapEff):' /proc/self/status | tr -s '\\t ' ' '; mkdir -p /tmp/m; mount -t tmpfs none /tmp/m 2>/dev/null && echo BREACH mounted; su -c id root </dev/null 2>/dev/null && echo BREACH su; echo done"))
			if out := string(res.Stdout.Tail); out != "CapEff: 0000000000000000\nNoNewPrivs: 1\ndone\n" {
				t.Errorf("output %q", out)
			}
		})
	}
}

// TestDockerMountTargets: a mount target inside a read-only mount (the
// Engine cannot make its mount point there), two mounts at one target, or
// a target over what the sandbox provides are refused before anything is
// created, naming the mount as the caller named it.
func TestDockerMountTargets(t *testing.T) {
	cli := dockertest.Client(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		mounts []sandbox.Mount
		want   string
	}{
		{"inside a read-only mount", []sandbox.Mount{
			{Source: "/usr", Target: "/usr", ReadOnly: true, EngineHost: true},
			{Source: dir, Target: "/usr/local/mytool", ReadOnly: true, Name: "--mount " + dir + ":/usr/local/mytool"},
		}, "--mount " + dir + ":/usr/local/mytool: target \"/usr/local/mytool\" lies inside mount 1 (/usr), mounted read-only at /usr"},
		{"one target twice", []sandbox.Mount{
			{Source: dir, Target: "/goalrun/x", ReadOnly: true},
			{Source: "/usr", Target: "/goalrun/x", ReadOnly: true},
		}, "mount 1 (/goalrun/x) and mount 2 (/goalrun/x) both mount at /goalrun/x"},
		{"over HOME", []sandbox.Mount{{Source: dir, Target: sandbox.DockerHome, ReadOnly: true, Name: "--mount " + dir}},
			"--mount " + dir + ": target \"" + sandbox.DockerHome + "\" would cover or hide"},
		{"an Engine-host source is checked by the policy too", []sandbox.Mount{{Source: "/etc", Target: "/etc", ReadOnly: true, EngineHost: true, Name: "host folder /etc"}},
			"host folder /etc /etc contains /etc/shadow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := sandbox.StartDocker(ctx, cli, sandbox.Config{RunID: dockertest.RunID(t), Image: dockertest.Image(t, cli),
				Workspace: dockertest.Workspace(t, testUID, testGID), Mounts: tc.mounts})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	t.Run("refusals are ErrDangerousMount", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := sandbox.StartDocker(ctx, cli, sandbox.Config{RunID: dockertest.RunID(t), Image: dockertest.Image(t, cli),
			Workspace: dockertest.Workspace(t, testUID, testGID), Mounts: []sandbox.Mount{{Source: filepath.Join("/proc", "1"), Target: "/goalrun/p", ReadOnly: true}}})
		if !errors.Is(err, sandbox.ErrDangerousMount) {
			t.Errorf("mounting /proc/1: %v, want ErrDangerousMount", err)
		}
	})
}

// TestHostToolsConfirmAhead: with the cache checked ahead, HostTools
// answers from the remembered look before the check of its folders ends
// and hands back a Confirm; Confirm passes while nothing changed and says
// ErrHostScanStale once a folder the look read changed (a chmod of /opt
// to its own mode changes its ctime, as installing into it would), so the
// caller looks again before anything runs with those mounts.
func TestHostToolsConfirmAhead(t *testing.T) {
	cli := dockertest.Client(t)
	img, _ := dockertest.HostTools(t, cli)
	ctx := context.Background()
	cache := t.TempDir()
	opts := sandbox.HostToolsOptions{Image: img, CacheDir: cache}
	if _, err := sandbox.HostTools(ctx, cli, opts); err != nil { // fills the cache
		t.Fatal(err)
	}
	opts.Ahead = sandbox.CheckHostScanAhead(cache)
	h, err := sandbox.HostTools(ctx, cli, opts)
	if err != nil {
		t.Fatal(err)
	}
	if h.Confirm == nil {
		t.Fatal("the answer checked ahead was not taken: no Confirm")
	}
	if err := h.Confirm(ctx); err != nil {
		t.Fatalf("Confirm with nothing changed: %v", err)
	}

	st, err := os.Stat("/opt")
	if err != nil {
		t.Fatalf("this test changes /opt's ctime: %v", err)
	}
	time.Sleep(20 * time.Millisecond) // past the ctime clock's tick
	if err := os.Chmod("/opt", st.Mode().Perm()); err != nil {
		t.Fatal(err)
	}
	opts.Ahead = sandbox.CheckHostScanAhead(cache)
	h, err = sandbox.HostTools(ctx, cli, opts)
	if err != nil {
		t.Fatal(err)
	}
	if h.Confirm == nil {
		t.Fatal("the answer checked ahead was not taken: no Confirm")
	}
	if err := h.Confirm(ctx); !errors.Is(err, sandbox.ErrHostScanStale) {
		t.Fatalf("Confirm after /opt changed: %v, want ErrHostScanStale", err)
	}
	// The look done again without Ahead reads the folders afresh.
	opts.Ahead = nil
	if h, err = sandbox.HostTools(ctx, cli, opts); err != nil || h.Confirm != nil {
		t.Fatalf("HostTools without Ahead: %v, Confirm %v", err, h.Confirm != nil)
	}
}
