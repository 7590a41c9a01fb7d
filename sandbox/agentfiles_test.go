package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/dockertest"
)

var testAgentFile = sandbox.AgentFile{
	Path:      "/etc/goalrun-test-cli/settings.json",
	Content:   []byte(`{"auth":"api-key"}` + "\n"),
	LocalEnv:  "GOALRUN_TEST_CLI_HOME",
	LocalPath: ".cli/settings.json",
}

// TestAttackAgentFiles: the agent files are readable by agent steps, owned
// by root in a root-owned folder (what a CLI that trusts only root's system
// settings needs), whoever runs goalrun; the agent can neither change,
// replace, remove nor add to them, nor link them away; check steps do not
// see them; the posture lists the folder read-only.
func TestAttackAgentFiles(t *testing.T) {
	sb, _ := startDocker(t, sandbox.Config{AgentFiles: []sandbox.AgentFile{testAgentFile}})
	dir := filepath.Dir(testAgentFile.Path)
	res := run(t, sb, sh(sandbox.RoleAgent, "cat "+testAgentFile.Path+" && stat -c '%u:%g %a' "+testAgentFile.Path+" "+dir))
	if res.ExitCode != 0 {
		t.Fatalf("reading the agent file: exit %d: %s", res.ExitCode, res.Stderr.Tail)
	}
	if got, want := string(res.Stdout.Tail), string(testAgentFile.Content)+"0:0 444\n0:0 755\n"; got != want {
		t.Errorf("agent file and folder: %q, want %q", got, want)
	}
	for _, attack := range []string{
		"echo pwned > " + testAgentFile.Path,
		"echo pwned >> " + testAgentFile.Path,
		"chmod 666 " + testAgentFile.Path,
		"rm -f " + testAgentFile.Path,
		"mv " + testAgentFile.Path + " /tmp/x",
		"echo x > " + dir + "/other.json",
		"ln -s /tmp/x " + dir + "/link",
		"mkdir " + dir + "/sub",
		"touch " + dir,
	} {
		t.Run(attack, func(t *testing.T) {
			if res := run(t, sb, sh(sandbox.RoleAgent, attack)); res.ExitCode == 0 {
				t.Fatalf("%q succeeded: breach", attack)
			}
		})
	}
	if res := run(t, sb, sh(sandbox.RoleAgent, "cat "+testAgentFile.Path)); string(res.Stdout.Tail) != string(testAgentFile.Content) {
		t.Errorf("the agent file changed: %q", res.Stdout.Tail)
	}
	if res := run(t, sb, sh(sandbox.RoleCheck, "test -e "+testAgentFile.Path+" || test -e "+dir)); res.ExitCode == 0 {
		t.Errorf("a check step sees the agent files")
	}
	if p := sb.Posture(); !slices.Contains(p.ExtraMounts, dir+":ro") {
		t.Errorf("extra_mounts %v do not list %s:ro", p.ExtraMounts, dir)
	}
}

// TestLocalAgentFiles: the local sandbox writes the files into a private
// per-run folder named by LocalEnv (agent steps only) and removes it.
func TestLocalAgentFiles(t *testing.T) {
	sb, err := sandbox.StartLocal(context.Background(), sandbox.Config{Workspace: t.TempDir(), AgentFiles: []sandbox.AgentFile{testAgentFile}})
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, sb, sh(sandbox.RoleAgent, `printf %s "$GOALRUN_TEST_CLI_HOME"`))
	home := string(res.Stdout.Tail)
	if home == "" {
		t.Fatal("agent steps do not get GOALRUN_TEST_CLI_HOME")
	}
	b, err := os.ReadFile(filepath.Join(home, ".cli", "settings.json"))
	if err != nil || string(b) != string(testAgentFile.Content) {
		t.Fatalf("the file: %q, %v", b, err)
	}
	if fi, err := os.Stat(home); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the folder's mode: %v, %v", fi.Mode(), err)
	}
	if res := run(t, sb, sh(sandbox.RoleCheck, `printf %s "$GOALRUN_TEST_CLI_HOME"`)); strings.TrimSpace(string(res.Stdout.Tail)) != "" {
		t.Errorf("a check step gets the variable")
	}
	sb.Close(context.Background())
	if _, err := os.Stat(home); !os.IsNotExist(err) {
		t.Errorf("the folder is still there after Close: %v", err)
	}
}

func TestAgentFilesRefused(t *testing.T) {
	for name, f := range map[string]sandbox.AgentFile{
		"system folder":  {Path: "/etc/settings.json"},
		"relative":       {Path: "etc/x/settings.json"},
		"workspace":      {Path: sandbox.DockerRoot + "/x/settings.json"},
		"tmp":            {Path: "/tmp/x/settings.json"},
		"too large":      {Path: "/etc/x/settings.json", Content: make([]byte, sandbox.AgentFileMax+1)},
		"local escapes":  {Path: "/etc/x/settings.json", LocalEnv: "X", LocalPath: "../x"},
		"local absolute": {Path: "/etc/x/settings.json", LocalEnv: "X", LocalPath: "/etc/x"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := sandbox.StartLocal(context.Background(), sandbox.Config{Workspace: t.TempDir(), AgentFiles: []sandbox.AgentFile{f}}); err == nil {
				t.Errorf("StartLocal accepted %+v", f.Path)
			}
		})
	}
}

// BenchmarkStartDockerAgentFiles measures what the agent files add to a
// Docker sandbox's start (a volume, a helper container created and removed,
// one archive copy): the start with and without them, interleaved.
//
//	go test -run '^$' -bench BenchmarkStartDockerAgentFiles -benchtime 10x ./sandbox
func BenchmarkStartDockerAgentFiles(b *testing.B) {
	cli := dockertest.Client(b)
	image := dockertest.Image(b, cli)
	ctx := context.Background()
	var with, without []time.Duration
	for i := 0; i < b.N; i++ {
		for _, files := range [][]sandbox.AgentFile{nil, {testAgentFile}} {
			ws := dockertest.Workspace(b, testUID, testGID)
			start := time.Now()
			sb, err := sandbox.StartDocker(ctx, cli, sandbox.Config{RunID: fmt.Sprintf("goalrun-bench-files-%d-%d", i, len(files)), Image: image, Workspace: ws, Network: sandbox.NetworkNone, Lifetime: time.Hour, AgentFiles: files})
			if err != nil {
				b.Fatal(err)
			}
			d := time.Since(start)
			sb.Close(ctx)
			if files == nil {
				without = append(without, d)
			} else {
				with = append(with, d)
			}
		}
	}
	med := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2].Microseconds()) / 1000
	}
	b.ReportMetric(med(without), "ms-start-plain")
	b.ReportMetric(med(with), "ms-start-with-files")
}
