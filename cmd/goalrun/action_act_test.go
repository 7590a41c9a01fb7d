package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/goalrun/goalrun/report/github/githubtest"
)

// runnerImageTag is the job container image act runs the workflow in,
// standing in for ubuntu-latest: busybox, plus a /bin/bash that runs
// busybox sh (act runs `run:` steps with `bash --noprofile --norc -e -o
// pipefail FILE`).
const runnerImageTag = "goalrun-test-github-runner:busybox-all"

// bashShim accepts the options act gives bash and runs busybox sh.
const bashShim = `#!/bin/sh
# goalrun test runner image: bash stand-in for act's run: steps.
args=""
for a in "$@"; do
  case "$a" in
    --noprofile|--norc) ;;
    *) args="$args '$(printf '%s' "$a" | sed "s/'/'\\\\''/g")'" ;;
  esac
done
eval "exec /bin/busybox sh $args"
`

func ensureRunnerImage(t *testing.T) string {
	t.Helper()
	if imageExists(runnerImageTag) {
		return runnerImageTag
	}
	root := busyboxRoot(t)
	_ = os.Remove(filepath.Join(root, "bin", "bash")) // not a busybox applet, but be sure
	if err := os.WriteFile(filepath.Join(root, "bin", "bash"), []byte(bashShim), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "usr", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(root, "usr", "bin", "env")); err != nil {
		_ = os.Symlink("/bin/busybox", filepath.Join(root, "usr", "bin", "env"))
	}
	importImage(t, runnerImageTag, root, "", "ENV PATH=/usr/bin:/bin")
	return runnerImageTag
}

// actBinary is nektos/act: GOALRUN_ACT_BIN (.ci/run installs it), else PATH.
func actBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("GOALRUN_ACT_BIN"); p != "" {
		return p
	}
	if p, err := exec.LookPath("act"); err == nil {
		return p
	}
	msg := "nektos/act not installed (go install github.com/nektos/act@v0.2.89, or set GOALRUN_ACT_BIN)"
	if os.Getenv("GOALRUN_REQUIRE_DOCKER") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// adaptExample returns examples/workflows/pr-check.yml with the goalrun
// step's inputs replaced by ones that run offline here (the command agent
// and a busybox check in the Docker sandbox, with the test's sandbox image)
// and the example's "Build the sandbox image" step reduced to an echo: its
// Dockerfile starts from public images, which cannot be pulled here, and
// the stand-in runner image has no docker CLI. Every other line stays as it
// is. The example must have that build step and pass its tag as image.
func adaptExample(t *testing.T, with map[string]string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "workflows", "pr-check.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	found, built, tagged := false, false, false
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == "run" && strings.Contains(n.Content[i+1].Value, "docker build -t "+exampleSandboxTag) {
					built = true
					n.Content[i+1].Value = `echo "sandbox image: built by the test, not from examples/sandbox/Dockerfile"`
					n.Content[i+1].Style = 0
				}
				if n.Content[i].Value == "uses" && strings.HasPrefix(n.Content[i+1].Value, "goalrun/goalrun@") {
					found = true
					for j := 0; j+1 < len(n.Content); j += 2 {
						if n.Content[j].Value == "with" {
							var orig map[string]string
							_ = n.Content[j+1].Decode(&orig)
							tagged = orig["image"] == exampleSandboxTag
							var w yaml.Node
							m, _ := yaml.Marshal(with)
							_ = yaml.Unmarshal(m, &w)
							n.Content[j+1] = w.Content[0]
						}
					}
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&doc)
	if !found {
		t.Fatal("examples/workflows/pr-check.yml has no goalrun/goalrun@ step")
	}
	if !built || !tagged {
		t.Fatalf("examples/workflows/pr-check.yml: build step with docker build -t %s: %v; goalrun step with image: %s: %v", exampleSandboxTag, built, exampleSandboxTag, tagged)
	}
	out, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestActPRCheckExample runs the PR-check example workflow under nektos/act,
// a real third-party runner, offline: the job container is a locally built
// image (-P ubuntu-latest=… --pull=false), actions/checkout is served from
// the local repository (act copies the working folder instead of running
// it), goalrun/goalrun@v1 is this repository (--local-repository), which
// act builds from its Dockerfile and runs as a container action with the
// host's Docker socket. The check run in githubtest must complete with the
// document.
func TestActPRCheckExample(t *testing.T) {
	requireDocker(t)
	act := actBinary(t)
	ensureGoImage(t)
	runner := ensureRunnerImage(t)
	sbImage := ensureSandboxImage(t)
	actionDir := buildContext(t)

	srv := githubtest.NewServer(t, "octo-org/demo")
	files := map[string]githubtest.File{
		"check.sh": {Content: []byte("#!/bin/sh\ngrep -q fixed state\n"), Mode: githubtest.ModeExecutable},
		"state":    {Content: []byte("broken\n")},
	}
	head := srv.Seed("main", files, "base")
	srv.AddIssue(17)

	tmp := t.TempDir()
	repo := filepath.Join(tmp, "repo")
	for name, f := range files {
		p := filepath.Join(repo, name)
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, f.Content, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	wf := adaptExample(t, map[string]string{
		"agent": "command", "agent-bin": "echo fixed > state", "until": "sh check.sh", "prompt": "fix the state file",
		"sandbox": "docker", "image": sbImage, "network": "none", "max-iterations": "3",
	})
	_ = os.MkdirAll(filepath.Join(repo, ".github", "workflows"), 0o755)
	if err := os.WriteFile(filepath.Join(repo, ".github", "workflows", "pr-check.yml"), wf, 0o644); err != nil {
		t.Fatal(err)
	}
	// act reads the repository's git metadata; this is a folder the test
	// made, so running git in it is safe.
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"},
		{"-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "base"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	payload, err := os.ReadFile(filepath.Join("..", "..", "report", "github", "testdata", "events", "pull_request.opened.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	_ = json.Unmarshal(payload, &p)
	setHead(head)(p)
	payload, _ = json.Marshal(p)
	eventPath := filepath.Join(tmp, "event.json")
	_ = os.WriteFile(eventPath, payload, 0o644)
	home := filepath.Join(tmp, "home")
	_ = os.MkdirAll(home, 0o755)
	// act asks for a default image on its first run unless ~/.actrc exists.
	_ = os.WriteFile(filepath.Join(home, ".actrc"), []byte("-P ubuntu-latest="+runner+"\n"), 0o644)

	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, act, "pull_request",
		"-W", ".github/workflows/pr-check.yml", "-e", eventPath,
		"-P", "ubuntu-latest="+runner, "--pull=false", "--action-offline-mode", "--rm",
		"--local-repository", "goalrun/goalrun@v1="+actionDir,
		"--env", "GITHUB_API_URL="+srv.URL, "--env", "GITHUB_REPOSITORY=octo-org/demo",
		"-s", "GITHUB_TOKEN="+testToken, "--action-cache-path", filepath.Join(tmp, "act-cache"),
		"--cache-server-path", filepath.Join(tmp, "actcache"))
	cmd.Dir = repo
	cmd.Env = append(baseEnv(), "HOME="+home, "DOCKER_HOST=unix:///var/run/docker.sock")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()
	t.Cleanup(func() { removeActLeftovers(t) })
	log := out.String()
	runs := srv.CheckRuns()
	if len(runs) != 1 {
		t.Fatalf("act: %v; %d check runs, want 1\n%s", runErr, len(runs), lastBytes(log, 8000))
	}
	run := runs[0]
	if run.Status != "completed" || run.HeadSHA != head || !strings.Contains(run.Summary, "goalrun/1 document") {
		t.Fatalf("check run %+v\n%s", run, lastBytes(log, 8000))
	}
	if run.Conclusion != "success" {
		t.Errorf("conclusion %q (the document is in the summary):\n%s\n%s", run.Conclusion, lastBytes(run.Summary, 3000), lastBytes(log, 6000))
	}
	if runErr != nil {
		t.Errorf("act failed: %v\n%s", runErr, lastBytes(log, 8000))
	}
	if !strings.Contains(log, "passed=true grounded=true") {
		t.Errorf("the example's next step did not see the outputs:\n%s", lastBytes(log, 4000))
	}
}

// removeActLeftovers removes what act made for this test's workflow (its job
// container and volumes are named after the workflow and job) and the
// action image it built.
func removeActLeftovers(t *testing.T) {
	const prefix = "act-goalrun-PR-check-goalrun"
	if ids, err := exec.Command("docker", "ps", "-aq", "--filter", "name="+prefix).Output(); err == nil {
		for _, id := range strings.Fields(string(ids)) {
			_ = exec.Command("docker", "rm", "-f", "-v", id).Run()
		}
	}
	if vols, err := exec.Command("docker", "volume", "ls", "-q", "--filter", "name="+prefix).Output(); err == nil {
		for _, v := range strings.Fields(string(vols)) {
			_ = exec.Command("docker", "volume", "rm", "-f", v).Run()
		}
	}
	_ = exec.Command("docker", "rmi", "-f", "act-goalrun-goalrun-v1-dockeraction:latest").Run()
	_ = exec.Command("docker", "volume", "rm", "-f", "act-toolcache").Run() // act's tool cache, empty here
}
