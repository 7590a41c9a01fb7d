package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/dockertest"
)

// Size of BenchmarkCheckView's workspace: benchViewDirs folders of
// benchViewFiles files of benchViewFileBytes each (2,000 files, 16 MiB).
const (
	benchViewDirs      = 20
	benchViewFiles     = 100
	benchViewFileBytes = 8 << 10
)

// benchViewCheck is the check of BenchmarkCheckView: it reads a file and
// writes a by-product, as a test run does.
const benchViewCheck = "cat d7/f42 > /dev/null && mkdir -p __pycache__ && echo x > __pycache__/x.pyc"

// BenchmarkCheckView measures what the check's view of the workspace costs
// per check: one check step through goalrun's Docker sandbox on the overlay
// view, and on the snapshot copy (forced, as on an Engine that refuses
// overlay volumes), against `docker run --rm` of the same image with the
// same hardening and the workspace bind-mounted directly (no view: what a
// check cost before views; its writes stay in the workspace). The
// workspace holds 2,000 files (16 MiB). The three are interleaved check by
// check, so load on the machine hits all alike; it reports the median
// milliseconds of each:
//
//	go test -run '^$' -bench BenchmarkCheckView -benchtime 10x ./sandbox
func BenchmarkCheckView(b *testing.B) {
	docker, err := exec.LookPath("docker")
	if err != nil {
		b.Skip("the docker CLI is not installed: the baseline needs it")
	}
	cli := dockertest.Client(b)
	image := dockertest.Image(b, cli)
	ctx := context.Background()
	ws := benchWorkspace(b)
	body := bytes.Repeat([]byte("x"), benchViewFileBytes)
	for d := range benchViewDirs {
		dir := filepath.Join(ws, fmt.Sprintf("d%d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range benchViewFiles {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d", f)), body, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	dockertest.Chown(b, ws, testUID, testGID)

	start := func(api sandbox.DockerAPI, id string) *sandbox.Docker {
		sb, err := sandbox.StartDocker(ctx, api, sandbox.Config{RunID: id, Image: image, Workspace: ws, WorkspaceMode: sandbox.WorkspaceBind, Network: sandbox.NetworkNone, Lifetime: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { sb.Close(context.Background()) })
		return sb
	}
	overlay := start(cli, "goalrun-bench-view-overlay")
	copyView := start(refuseOverlay{cli}, "goalrun-bench-view-copy")
	if m, _ := overlay.CheckView(); m != sandbox.CheckViewOverlay {
		b.Fatalf("the overlay sandbox got the %q view", m)
	}
	if m, _ := copyView.CheckView(); m != sandbox.CheckViewCopy {
		b.Fatalf("the copy sandbox got the %q view", m)
	}
	check := func(sb *sandbox.Docker) func() {
		return func() {
			res, err := sb.Exec(ctx, sandbox.Cmd{Role: sandbox.RoleCheck, Args: sandbox.Shell(benchViewCheck)})
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("check: %v %+v", err, res)
			}
		}
	}
	plainArgs := []string{
		"run", "--rm", "--network", "none", "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--init",
		"--user", "1000:1000", "--pids-limit", "512", "--memory", "4g", "--memory-swap", "4g", "--cpus", "2",
		"--ipc", "private", "--cgroupns", "private", "--log-driver", "none", "--label", "goalrun.run=goalrun-bench-plain",
		"--tmpfs", "/tmp:rw,nosuid,nodev,exec,mode=1777", "--tmpfs", "/home/goalrun:rw,nosuid,nodev,noexec,mode=0700,uid=1000,gid=1000",
		"--tmpfs", "/run:rw,nosuid,nodev,noexec,mode=0755,uid=1000,gid=1000",
		"--mount", "type=bind,source=" + ws + ",target=/workspace", "-w", "/workspace", "-e", "HOME=/home/goalrun",
		image, "sh", "-c", benchViewCheck,
	}
	plain := func() {
		if out, err := exec.Command(docker, plainArgs...).CombinedOutput(); err != nil {
			b.Fatalf("docker run: %v %s", err, out)
		}
	}
	kinds := []struct {
		name string
		run  func()
		ms   []float64
	}{{"overlay", check(overlay), nil}, {"copy", check(copyView), nil}, {"plain", plain, nil}}
	for _, k := range kinds {
		k.run() // warm-up
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range kinds {
			k := &kinds[(i+j)%len(kinds)] // rotate the order too
			t0 := time.Now()
			k.run()
			k.ms = append(k.ms, ms(time.Since(t0)))
		}
	}
	b.StopTimer()
	for _, k := range kinds {
		b.ReportMetric(median(k.ms), k.name+"-ms/check")
	}
	b.ReportMetric(median(kinds[0].ms)-median(kinds[2].ms), "overlay-extra-ms/check")
}
