package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/dockertest"
)

// greenCheck is the already-green check both sides run: it reads the
// workspace and passes, so the time measured is goalrun's own (sandbox,
// check container, report, teardown) against Docker's.
const greenCheck = "test -s go.mod && cat go.mod > /dev/null"

// BenchmarkAlreadyGreen measures a run whose check already passes (the
// common case on pull requests) — the whole `goalrun run` process as
// released (a static build, so the detected setup step runs: its kept deps
// volume is prepared by the first run and reused by the rest), default
// Docker sandbox, the command agent, network none — against one `docker
// run --rm` of the same check in the same image with the same hardening,
// the same host folders mounted (the posture's host_mounts) and the
// workspace bind-mounted. The two are interleaved run by run, so load on the
// machine hits both alike; it reports the median milliseconds of each,
// their ratio (goalrun / plain; the target is ≤ 1.2) and the median of the
// pairs' own ratios:
//
//	go test -run '^$' -bench BenchmarkAlreadyGreen -benchtime 10x ./cmd/goalrun
//
// With GOALRUN_BENCH_OTHER naming another goalrun executable (an older
// build), each round runs it too, in the same rotation, and reports its
// median and ratio beside this build's (other-ms/run, other-ratio): a
// before/after comparison under the same load.
//
// docs/benchmarks.md has the figures and the storage driver they ran on.
func BenchmarkAlreadyGreen(b *testing.B) {
	docker, err := exec.LookPath("docker")
	if err != nil {
		b.Skip("the docker CLI is not installed: the baseline needs it")
	}
	cli := dockertest.Client(b)
	ctx := context.Background()
	info, err := cli.Info(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("Docker Engine %s, storage driver %s", info.ServerVersion, info.Driver)

	// A Go module with a package and its test: what a pull request's
	// checkout holds (goalrun detects its setup step from it).
	ws := b.TempDir()
	for name, body := range map[string]string{
		"go.mod":        "module example.com/green\n\ngo 1.22\n",
		"green.go":      "package green\n\nfunc Answer() int { return 42 }\n",
		"green_test.go": "package green\n\nimport \"testing\"\n\nfunc TestAnswer(t *testing.T) {\n\tif Answer() != 42 {\n\t\tt.Fatal(Answer())\n\t}\n}\n",
	} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	dockertest.Chown(b, ws, 1000, 1000) // bind mode, as for a user's own checkout
	env := os.Environ()
	other := os.Getenv("GOALRUN_BENCH_OTHER")
	goalrunRunWith := func(bin string) map[string]any {
		cmd := exec.Command(bin, "run", "--json", "--agent", "command", "--agent-bin", "true",
			"--until", greenCheck, "--workdir", ws)
		cmd.Env = env
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			b.Fatalf("goalrun run: %v\n%s\n%s", err, out.String(), lastBytes(errb.String(), 2000))
		}
		var d map[string]any
		if err := json.Unmarshal(out.Bytes(), &d); err != nil {
			b.Fatalf("goalrun's document: %v\n%s", err, out.String())
		}
		return d
	}
	static := dockertest.GoalrunBinary(b) // CGO_ENABLED=0, as released
	warm := false
	goalrunRun := func() map[string]any {
		d := goalrunRunWith(static)
		// After the first run the setup step is reused, not run: else
		// this measures the preparation, not an already-green run.
		steps, _ := d["setup"].([]any)
		if len(steps) == 0 {
			b.Fatalf("no setup step was detected: %v", d)
		}
		for _, st := range steps {
			if m, _ := st.(map[string]any); warm && m["reused"] != true {
				b.Fatalf("a later run ran its setup step again: %v", m)
			}
		}
		warm = true
		return d
	}
	// One run first: it builds (or finds) the default image and the Go
	// cache, prepares the kept deps volume, and names the image the
	// baseline runs.
	d := goalrunRun()
	image, _ := get(d, "sandbox", "image").(string)
	if image == "" || get(d, "goal", "grounded") != true {
		b.Fatalf("the first run: %v", d)
	}
	// The same host folders goalrun's default sandbox mounts (read-only),
	// as its posture lists them, and the system PATH.
	var hostMounts []string
	if hm, ok := get(d, "sandbox", "host_mounts").([]any); ok {
		for _, m := range hm {
			parts := strings.Split(m.(string), ":")
			if len(parts) != 3 {
				b.Fatalf("host mount %q", m)
			}
			opt := "type=bind,source=" + parts[0] + ",target=" + parts[1]
			if parts[2] == "ro" {
				opt += ",readonly"
			}
			hostMounts = append(hostMounts, "--mount", opt)
		}
	}
	hardening := []string{
		"--network", "none", "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--init",
		"--user", "1000:1000", "--pids-limit", "512", "--memory", "4g", "--memory-swap", "4g", "--cpus", "2",
		"--ipc", "private", "--cgroupns", "private", "--log-driver", "none", "--label", "goalrun.run=goalrun-bench-green",
		"--tmpfs", "/tmp:rw,nosuid,nodev,exec,mode=1777", "--tmpfs", "/home/goalrun:rw,nosuid,nodev,noexec,mode=0700,uid=1000,gid=1000",
		"--tmpfs", "/run:rw,nosuid,nodev,noexec,mode=0755,uid=1000,gid=1000",
		"--mount", "type=bind,source=" + ws + ",target=/workspace", "-w", "/workspace", "-e", "HOME=/home/goalrun",
		"-e", "PATH=" + sandbox.SystemPath,
	}
	hardening = append(hardening, hostMounts...)
	plainRun := func() {
		args := append(append([]string{"run", "--rm"}, hardening...), image, "sh", "-c", greenCheck)
		if out, err := exec.Command(docker, args...).CombinedOutput(); err != nil {
			b.Fatalf("docker run: %v %s", err, out)
		}
	}
	plainRun() // warm-up of the baseline too
	if other != "" {
		goalrunRunWith(other)
	}

	// Each round runs every side once, the order rotating round by round.
	var g, p, o []float64
	sides := []struct {
		run func()
		out *[]float64
	}{{func() { goalrunRun() }, &g}, {plainRun, &p}}
	if other != "" {
		sides = append(sides, struct {
			run func()
			out *[]float64
		}{func() { goalrunRunWith(other) }, &o})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range sides {
			s := sides[(i+k)%len(sides)]
			t0 := time.Now()
			s.run()
			*s.out = append(*s.out, msSince(t0, time.Now()))
		}
	}
	b.StopTimer()
	mg, mp := medianOf(g), medianOf(p)
	pairs := make([]float64, len(g))
	for i := range g {
		pairs[i] = g[i] / p[i]
	}
	b.Logf("goalrun %s ms; docker run --rm %s ms", joinMS(g), joinMS(p))
	b.ReportMetric(mg, "goalrun-ms/run")
	b.ReportMetric(mp, "plain-ms/run")
	b.ReportMetric(mg/mp, "ratio")
	// The median of each pair's ratio: the two runs of a pair share the
	// machine's load of the moment, which drifts a lot on a shared host.
	b.ReportMetric(medianOf(pairs), "pair-ratio")
	if other != "" {
		mo := medianOf(o)
		b.Logf("%s %s ms", other, joinMS(o))
		b.ReportMetric(mo, "other-ms/run")
		b.ReportMetric(mo/mp, "other-ratio")
		opairs := make([]float64, len(o))
		for i := range o {
			opairs[i] = o[i] / p[i]
		}
		b.ReportMetric(medianOf(opairs), "other-pair-ratio")
	}
}

func msSince(a, b time.Time) float64 { return float64(b.Sub(a)) / float64(time.Millisecond) }

func medianOf(xs []float64) float64 {
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

func joinMS(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strings.Join(parts, " ")
}
