package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/goalrun/goalrun/report/ghreport/githubtest"
)

// requireDocker skips (or, with GOALRUN_REQUIRE_DOCKER=1, fails) when no
// Docker Engine answers the docker CLI.
func requireDocker(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.APIVersion}}").CombinedOutput()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("docker engine unavailable (docker version: %v: %s)", err, bytes.TrimSpace(out))
	if os.Getenv("GOALRUN_REQUIRE_DOCKER") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
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

// testRelease is a release of the action as .github/workflows/release.yml
// makes one, on this machine: a static goalrun for this platform, and the
// action's files with dist/VERSION and dist/SHA256SUMS.
type testRelease struct {
	version   string
	actionDir string // action.yml, action/launch.sh, dist/
	assets    string // the release's downloadable files, under <version>/
	binary    string // the goalrun in it
}

const testReleaseVersion = "v0.0.0-test"

// makeRelease builds the static goalrun with release.yml's flags and lays
// out the release. sums, when not nil, replaces dist/SHA256SUMS' content.
func makeRelease(t *testing.T, sums []byte) testRelease {
	t.Helper()
	tmp := t.TempDir()
	r := testRelease{version: testReleaseVersion, actionDir: filepath.Join(tmp, "action-repo"), assets: filepath.Join(tmp, "assets")}
	name := "goalrun-" + runtime.GOOS + "-" + runtime.GOARCH
	r.binary = filepath.Join(r.assets, r.version, name)
	if err := os.MkdirAll(filepath.Dir(r.binary), 0o755); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version="+r.version, "-o", r.binary, ".")
	build.Env = append(baseEnv(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the release binary: %v\n%s", err, out)
	}
	b, err := os.ReadFile(r.binary)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if sums == nil {
		sums = []byte(hex.EncodeToString(sum[:]) + "  " + name + "\n")
	}
	for rel, content := range map[string][]byte{
		"dist/VERSION":    []byte(r.version + "\n"),
		"dist/SHA256SUMS": sums,
	} {
		p := filepath.Join(r.actionDir, rel)
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, rel := range []string{"action.yml", "action/launch.sh"} {
		b, err := os.ReadFile(filepath.Join("..", "..", rel))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(r.actionDir, rel)
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// serve serves the release's assets like GitHub's release downloads and
// counts the requests.
func (r testRelease) serve(t *testing.T) (url string, downloads *atomic.Int64) {
	t.Helper()
	downloads = new(atomic.Int64)
	fs := http.FileServer(http.Dir(r.assets))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		downloads.Add(1)
		fs.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, downloads
}

// adaptMinimal returns examples/workflows/minimal.yml with only what cannot
// run offline here replaced: the agent CLI's npm install becomes an echo
// (the agent is the command agent, so no model is needed) and the goalrun
// step's with: gains the inputs in extra. Everything else — the checkout,
// uses: goalrun/goalrun@v1, the key from secrets, until — stays as written.
func adaptMinimal(t *testing.T, extra map[string]string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "workflows", "minimal.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	installs, goalruns := 0, 0
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if k.Value == "run" && strings.HasPrefix(v.Value, "npm install --global ") {
					installs++
					v.Value = `echo "the agent is the command agent here: nothing to install"`
				}
				if k.Value == "uses" && strings.HasPrefix(v.Value, "goalrun/goalrun@") {
					goalruns++
					for j := 0; j+1 < len(n.Content); j += 2 {
						if n.Content[j].Value != "with" {
							continue
						}
						with := n.Content[j+1]
						for name, val := range extra {
							with.Content = append(with.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: name},
								&yaml.Node{Kind: yaml.ScalarNode, Value: val, Style: yaml.DoubleQuotedStyle})
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
	if installs != 1 || goalruns != 1 {
		t.Fatalf("examples/workflows/minimal.yml: %d npm install steps and %d goalrun steps, want one each", installs, goalruns)
	}
	out, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestActMinimalWorkflow runs the README's minimal workflow
// (examples/workflows/minimal.yml) under nektos/act, a real third-party
// runner, with this machine as a self-hosted runner (-P
// ubuntu-latest=-self-hosted): goalrun runs on the runner as it does on
// GitHub's, with the runner's PATH, its Go toolchain (the check `go test
// ./...` runs in the Docker sandbox on the runner's Go, no image built) and
// its Docker Engine. The action is this repository laid out as a release
// (--local-repository goalrun/goalrun@v1=…): action/launch.sh downloads the
// static goalrun from a local release server (GOALRUN_RELEASE_URL) and runs
// it only because its SHA-256 is the one dist/SHA256SUMS lists. The check
// run in githubtest must complete with the document, and the comment carry
// the report.
func TestActMinimalWorkflow(t *testing.T) {
	requireDocker(t)
	act := actBinary(t)
	rel := makeRelease(t, nil)
	releaseURL, downloads := rel.serve(t)

	srv := githubtest.NewServer(t, "octo-org/demo")
	head := seedDemo(t, srv)
	srv.AddIssue(17)

	tmp := t.TempDir()
	repo := filepath.Join(tmp, "repo")
	copyDir(t, filepath.Join("..", "..", "examples", "demo"), repo)
	wf := adaptMinimal(t, map[string]string{"agent": "command", "agent-bin": "sh fix.sh", "max-iterations": "3"})
	_ = os.MkdirAll(filepath.Join(repo, ".github", "workflows"), 0o755)
	if err := os.WriteFile(filepath.Join(repo, ".github", "workflows", "minimal.yml"), wf, 0o644); err != nil {
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
	payload, err := os.ReadFile(filepath.Join("..", "..", "report", "ghreport", "testdata", "events", "pull_request.opened.json"))
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
	_ = os.WriteFile(filepath.Join(home, ".actrc"), []byte("-P ubuntu-latest=-self-hosted\n"), 0o644)

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, act, "pull_request",
		"-W", ".github/workflows/minimal.yml", "-e", eventPath,
		"-P", "ubuntu-latest=-self-hosted", "--action-offline-mode",
		"--local-repository", "goalrun/goalrun@v1="+rel.actionDir,
		"--env", "GITHUB_API_URL="+srv.URL, "--env", "GITHUB_REPOSITORY=octo-org/demo",
		"--env", "GOALRUN_RELEASE_URL="+releaseURL,
		"-s", "GITHUB_TOKEN="+testToken, "-s", "ANTHROPIC_API_KEY=sk-ant-test-unused",
		"--action-cache-path", filepath.Join(tmp, "act-cache"), "--cache-server-path", filepath.Join(tmp, "actcache"))
	cmd.Dir = repo
	cmd.Env = append(baseEnv(), "HOME="+home)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()
	log := out.String()
	if runErr != nil {
		t.Errorf("act failed: %v\n%s", runErr, lastBytes(log, 8000))
	}
	if strings.Contains(log, "building goalrun from source") || downloads.Load() != 1 {
		t.Errorf("goalrun was not downloaded once from the release (%d downloads):\n%s", downloads.Load(), lastBytes(log, 4000))
	}
	runs := srv.CheckRuns()
	if len(runs) != 1 {
		t.Fatalf("%d check runs, want 1\n%s", len(runs), lastBytes(log, 8000))
	}
	run := runs[0]
	if run.Status != "completed" || run.HeadSHA != head || !strings.Contains(run.Summary, "goalrun/1 document") {
		t.Fatalf("check run %+v\n%s", run, lastBytes(log, 8000))
	}
	// The head's own tests failed and the agent fixed them in the
	// discarded workspace: the check run asks for that fix.
	if run.Conclusion != "action_required" {
		t.Errorf("conclusion %q:\n%s\n%s", run.Conclusion, lastBytes(run.Summary, 3000), lastBytes(log, 6000))
	}
	// The check ran in the Docker sandbox on the runner's Go toolchain:
	// mounted itself, or inside the runner's /usr, mounted read-only.
	goroot := runtime.GOROOT()
	goMounted := strings.Contains(run.Summary, goroot) || strings.HasPrefix(goroot, "/usr/") && strings.Contains(run.Summary, "/usr:ro")
	if !strings.Contains(run.Summary, "mode docker") || !goMounted {
		t.Errorf("the report does not show a Docker sandbox with the runner's Go mounted:\n%s", lastBytes(run.Summary, 3000))
	}
	if c := srv.Comments(17); len(c) != 1 || !strings.Contains(c[0].Body, "goal met") {
		t.Errorf("comments on #17: %+v", c)
	}
}

// TestLaunchRefusesWrongChecksum: a downloaded goalrun whose SHA-256 is not
// the one dist/SHA256SUMS lists is never run (exit 3, an error naming both
// sums), also when a binary of that name already sits in the tool cache.
func TestLaunchRefusesWrongChecksum(t *testing.T) {
	name := "goalrun-" + runtime.GOOS + "-" + runtime.GOARCH
	rel := makeRelease(t, []byte(strings.Repeat("0", 64)+"  "+name+"\n"))
	url, downloads := rel.serve(t)
	toolCache := t.TempDir()
	cached := filepath.Join(toolCache, "goalrun", rel.version, runtime.GOOS+"-"+runtime.GOARCH, "goalrun")
	_ = os.MkdirAll(filepath.Dir(cached), 0o755)
	if err := os.WriteFile(cached, []byte("#!/bin/sh\ntouch \"$MARK\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	mark := filepath.Join(t.TempDir(), "ran")
	cmd := exec.Command("bash", filepath.Join(rel.actionDir, "action", "launch.sh"))
	cmd.Env = append(baseEnv(), "GITHUB_ACTION_PATH="+rel.actionDir, "GOALRUN_RELEASE_URL="+url, "RUNNER_OS=Linux", "RUNNER_ARCH="+runnerArch(),
		"RUNNER_TOOL_CACHE="+toolCache, "RUNNER_TEMP="+t.TempDir(), "MARK="+mark)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err == nil || !asExit(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("launch.sh: %v, want exit 3\n%s", err, out)
	}
	if !strings.Contains(string(out), "::error::goalrun: the download") || !strings.Contains(string(out), "it was not run") {
		t.Errorf("output:\n%s", out)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Error("a binary with the wrong checksum ran")
	}
	if downloads.Load() != 1 {
		t.Errorf("%d downloads, want 1", downloads.Load())
	}
}

// runnerArch is RUNNER_ARCH as a runner of this test's platform sets it.
func runnerArch() string {
	return map[string]string{"amd64": "X64", "arm64": "ARM64"}[runtime.GOARCH]
}

func asExit(err error, ee **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	*ee = e
	return ok
}
func repoRoot(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestLaunchBuildsFromSource: on a ref that is not a release (no dist/, as
// this checkout), launch.sh builds goalrun from the action's checkout with
// the runner's Go, says so in a notice, and runs it as `goalrun action`
// (which, outside a workflow, stops with its own bad-input error); without
// Go on PATH it fails naming both ways out.
func TestLaunchBuildsFromSource(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "dist", "VERSION")); err == nil {
		t.Skip("this checkout is a release commit")
	}
	launch := filepath.Join(root, "action", "launch.sh")
	runnerTemp := t.TempDir()
	cmd := exec.Command("bash", launch)
	cmd.Env = append(baseEnv(), "GITHUB_ACTION_PATH="+root, "RUNNER_TEMP="+runnerTemp, "GITHUB_ACTION_REF=main")
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "::notice::goalrun: main is not a release ref; building goalrun from source") {
		t.Errorf("no notice about the source build:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(runnerTemp, "goalrun-source-build", "goalrun")); err != nil {
		t.Errorf("no binary built: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "GITHUB_EVENT_NAME is not set") {
		t.Errorf("the built goalrun did not run as goalrun action:\n%s", out)
	}

	noGo := exec.Command("bash", launch)
	noGo.Env = []string{"PATH=/usr/bin:/bin", "GITHUB_ACTION_PATH=" + root, "RUNNER_TEMP=" + t.TempDir()}
	if _, err := exec.LookPath("/usr/bin/go"); err == nil {
		t.Skip("/usr/bin/go exists: cannot make a PATH without Go")
	}
	out, err = noGo.CombinedOutput()
	var ee *exec.ExitError
	if !asExit(err, &ee) || ee.ExitCode() != 3 || !strings.Contains(string(out), "pin a release tag") || !strings.Contains(string(out), "actions/setup-go") {
		t.Errorf("without Go: %v\n%s", err, out)
	}
}
