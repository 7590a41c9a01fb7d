package sandbox_test

import (
	"context"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/dockertest"
)

// Steps of one loop iteration in BenchmarkDockerIteration: the agent edits
// a file, the check reads the tree.
const (
	benchAgentScript = "echo edit >> edited.txt"
	benchCheckScript = "test -s edited.txt && cat edited.txt > /dev/null"
)

// BenchmarkDockerIteration measures one loop iteration (an agent step, then
// a check step) through goalrun's Docker sandbox against the same steps done
// with the plain docker CLI: `docker exec` in a long-running container for
// the agent step and `docker run --rm` with the same hardening for the
// check. The two are interleaved iteration by iteration, so load on the
// machine hits both alike. It reports the median milliseconds of each and
// their ratio (goalrun / plain; the target is ≤ 1.25):
//
//	go test -run '^$' -bench BenchmarkDockerIteration -benchtime 20x ./sandbox
func BenchmarkDockerIteration(b *testing.B) {
	docker, err := exec.LookPath("docker")
	if err != nil {
		b.Skip("the docker CLI is not installed: the baseline needs it")
	}
	cli := dockertest.Client(b)
	image := dockertest.Image(b, cli)
	ctx := context.Background()

	wsGoalrun := benchWorkspace(b)
	sb, err := sandbox.StartDocker(ctx, cli, sandbox.Config{RunID: "goalrun-bench-iteration", Image: image, Workspace: wsGoalrun, Network: sandbox.NetworkNone, Lifetime: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close(ctx)

	wsPlain := benchWorkspace(b)
	hardening := []string{
		"--network", "none", "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--init",
		"--user", "1000:1000", "--pids-limit", "512", "--memory", "4g", "--memory-swap", "4g", "--cpus", "2",
		"--ipc", "private", "--cgroupns", "private", "--log-driver", "none", "--label", "goalrun.run=goalrun-bench-plain",
		"--tmpfs", "/tmp:rw,nosuid,nodev,exec,mode=1777", "--tmpfs", "/home/goalrun:rw,nosuid,nodev,noexec,mode=0700,uid=1000,gid=1000",
		"--tmpfs", "/run:rw,nosuid,nodev,noexec,mode=0755,uid=1000,gid=1000",
		"--mount", "type=bind,source=" + wsPlain + ",target=/workspace", "-w", "/workspace", "-e", "HOME=/home/goalrun",
	}
	out, err := exec.Command(docker, append(append([]string{"run", "-d"}, hardening...), image, "sh", "-c", "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done")...).Output()
	if err != nil {
		b.Fatalf("docker run -d: %v", err)
	}
	plainID := strings.TrimSpace(string(out))
	defer exec.Command(docker, "rm", "-f", plainID).Run()

	goalrunIter := func() {
		for _, c := range []sandbox.Cmd{
			{Role: sandbox.RoleAgent, Args: sandbox.Shell(benchAgentScript)},
			{Role: sandbox.RoleCheck, Args: sandbox.Shell(benchCheckScript)},
		} {
			res, err := sb.Exec(ctx, c)
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("goalrun step %q: %v %+v", c.Args, err, res)
			}
		}
	}
	plainIter := func() {
		if out, err := exec.Command(docker, "exec", "-u", "1000:1000", "-w", "/workspace", plainID, "sh", "-c", benchAgentScript).CombinedOutput(); err != nil {
			b.Fatalf("docker exec: %v %s", err, out)
		}
		args := append(append([]string{"run", "--rm"}, hardening...), image, "sh", "-c", benchCheckScript)
		if out, err := exec.Command(docker, args...).CombinedOutput(); err != nil {
			b.Fatalf("docker run: %v %s", err, out)
		}
	}
	// One warm-up of each (first exec, page cache).
	goalrunIter()
	plainIter()

	var g, p []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		first, second := goalrunIter, plainIter
		if i%2 == 1 { // alternate the order too
			first, second = plainIter, goalrunIter
		}
		t0 := time.Now()
		first()
		t1 := time.Now()
		second()
		t2 := time.Now()
		if i%2 == 0 {
			g, p = append(g, ms(t1.Sub(t0))), append(p, ms(t2.Sub(t1)))
		} else {
			p, g = append(p, ms(t1.Sub(t0))), append(g, ms(t2.Sub(t1)))
		}
	}
	b.StopTimer()
	mg, mp := median(g), median(p)
	b.ReportMetric(mg, "goalrun-ms/iter")
	b.ReportMetric(mp, "plain-ms/iter")
	b.ReportMetric(mg/mp, "ratio")
}

func benchWorkspace(b *testing.B) string {
	dir, err := os.MkdirTemp("", "goalrun-bench-ws-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	dockertest.Chown(b, dir, testUID, testGID)
	return dir
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BenchmarkHostTools measures what the default sandbox adds to start-up:
// asking the Engine which of the host's system folders and /etc entries
// exist (sandbox.HostTools: one refused container create per candidate,
// eight at a time, nothing created) and looking through them for what must
// stay out — every time ("no cache"), or through the cache of that look
// when nothing changed since ("cached", as goalrun runs) — with the Bare
// image already built:
//
//	go test -run '^$' -bench BenchmarkHostTools -benchtime 10x ./sandbox
func BenchmarkHostTools(b *testing.B) {
	cli := dockertest.Client(b)
	img, _ := dockertest.HostTools(b, cli)
	ctx := context.Background()
	for _, bc := range []struct {
		name  string
		cache string
	}{{"no cache", ""}, {"cached", b.TempDir()}} {
		b.Run(bc.name, func(b *testing.B) {
			opts := sandbox.HostToolsOptions{Image: img, CacheDir: bc.cache}
			if _, err := sandbox.HostTools(ctx, cli, opts); err != nil { // fills the cache
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := sandbox.HostTools(ctx, cli, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCheckStep measures one check step (`true` in a fresh check
// container) in the default sandbox (the Bare image with the host's
// folders: about twenty read-only bind mounts) and in the minimal busybox
// image, interleaved, reporting the median milliseconds of each:
//
//	go test -run '^$' -bench BenchmarkCheckStep -benchtime 20x ./sandbox
func BenchmarkCheckStep(b *testing.B) {
	cli := dockertest.Client(b)
	hostImg, h := dockertest.HostTools(b, cli)
	ctx := context.Background()
	start := func(name string, cfg sandbox.Config) *sandbox.Docker {
		cfg.RunID, cfg.Workspace, cfg.Network, cfg.Lifetime = "goalrun-bench-check-"+name, benchWorkspace(b), sandbox.NetworkNone, time.Hour
		sb, err := sandbox.StartDocker(ctx, cli, cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { sb.Close(context.Background()) })
		return sb
	}
	host := start("host", sandbox.Config{Image: hostImg, Mounts: h.Mounts, ToolEnv: h.Env})
	minimal := start("minimal", sandbox.Config{Image: dockertest.Image(b, cli)})
	var tHost, tMinimal []float64
	step := func(sb *sandbox.Docker, into *[]float64) {
		t0 := time.Now()
		res, err := sb.Exec(ctx, sandbox.Cmd{Role: sandbox.RoleCheck, Args: sandbox.Shell("true")})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("check: %v exit %d %s", err, res.ExitCode, res.Stderr.Tail)
		}
		*into = append(*into, float64(time.Since(t0).Milliseconds()))
	}
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			step(host, &tHost)
			step(minimal, &tMinimal)
		} else {
			step(minimal, &tMinimal)
			step(host, &tHost)
		}
		i++
	}
	med := func(v []float64) float64 { sort.Float64s(v); return v[len(v)/2] }
	b.ReportMetric(med(tHost), "host-ms")
	b.ReportMetric(med(tMinimal), "minimal-ms")
}
