package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/report/github/githubtest"
)

// Images these tests make (labelled goalrun.test=github, never pulled):
//
//   - goImageTag: a Go toolchain image made with `docker import` from this
//     machine's GOROOT plus busybox as /bin/sh, under the Dockerfile's
//     default GO_IMAGE tag, so `docker build` of the action never pulls.
//   - the action image: `docker build` of the repository's Dockerfile with
//     its default arguments (vendor/ added to a temporary copy of the build
//     context, so the build needs no network).
//   - a busybox sandbox image for the Docker sandbox's steps.
//
// .ci/run (section github) builds them once and exports
// GOALRUN_ACTION_IMAGE; a test run without it builds them itself.
const (
	goImageTag         = "golang:1.26.8"
	sandboxImageTag    = "goalrun-test-github-sandbox:busybox-all"
	testImageLabel     = "goalrun.test=github"
	dockerBuildTimeout = 15 * time.Minute
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

func docker(t *testing.T, timeout time.Duration, stdin io.Reader, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stdin = stdin
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, lastBytes(out.String(), 4000))
	}
	return strings.TrimSpace(out.String())
}

func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

func imageExists(tag string) bool {
	return exec.Command("docker", "image", "inspect", tag).Run() == nil
}

// busyboxRoot makes a root filesystem folder with busybox as /bin/sh and
// all its applets, /tmp and the host's CA bundle.
func busyboxRoot(t *testing.T) string {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatalf("busybox not installed (Debian: busybox-static): %v", err)
	}
	root := t.TempDir()
	for _, d := range []string{"bin", "tmp", "etc/ssl/certs", "root"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_ = os.Chmod(filepath.Join(root, "tmp"), 0o1777)
	b, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	// Every applet this busybox has (the Docker sandbox's copy mode needs
	// chown, tar and more).
	list, err := exec.Command(bb, "--list").Output()
	if err != nil {
		t.Fatalf("busybox --list: %v", err)
	}
	for _, applet := range strings.Fields(string(list)) {
		if applet == "busybox" || strings.Contains(applet, "/") {
			continue
		}
		if err := os.Symlink("busybox", filepath.Join(root, "bin", applet)); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
	}
	if ca, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt"); err == nil {
		_ = os.WriteFile(filepath.Join(root, "etc/ssl/certs/ca-certificates.crt"), ca, 0o644)
	} else {
		_ = os.WriteFile(filepath.Join(root, "etc/ssl/certs/ca-certificates.crt"), nil, 0o644)
	}
	_ = os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("root:x:0:0:root:/root:/bin/sh\n"), 0o644)
	return root
}

// importImage makes tag from the folder root (plus, when goroot is set,
// the Go toolchain at /usr/local/go) with docker import.
func importImage(t *testing.T, tag, root, goroot string, changes ...string) {
	t.Helper()
	args := []string{"-C", root, "-cf", "-", "."}
	if goroot != "" {
		args = append(args, "-C", filepath.Dir(goroot), "--transform", "s,^"+filepath.Base(goroot)+",usr/local/go,", filepath.Base(goroot))
	}
	tarCmd := exec.Command("tar", args...)
	pipe, err := tarCmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var tarErr bytes.Buffer
	tarCmd.Stderr = &tarErr
	if err := tarCmd.Start(); err != nil {
		t.Fatal(err)
	}
	imp := []string{"import"}
	for _, c := range append(changes, "LABEL "+testImageLabel) {
		imp = append(imp, "--change", c)
	}
	docker(t, dockerBuildTimeout, pipe, append(imp, "-", tag)...)
	if err := tarCmd.Wait(); err != nil {
		t.Fatalf("tar: %v\n%s", err, tarErr.String())
	}
}

// ensureGoImage makes the Dockerfile's default GO_IMAGE locally when absent.
func ensureGoImage(t *testing.T) {
	t.Helper()
	if imageExists(goImageTag) {
		return
	}
	importImage(t, goImageTag, busyboxRoot(t), runtime.GOROOT(),
		"ENV PATH=/usr/local/go/bin:/bin", "ENV GOTOOLCHAIN=local", "ENV HOME=/root")
}

func ensureSandboxImage(t *testing.T) string {
	t.Helper()
	if !imageExists(sandboxImageTag) {
		importImage(t, sandboxImageTag, busyboxRoot(t), "", "ENV PATH=/bin")
	}
	return sandboxImageTag
}

// repoRoot is the repository holding this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// actionImage returns the action image: GOALRUN_ACTION_IMAGE when set (made
// by .ci/run), else one built now from the Dockerfile, tagged by a hash of
// the build context so an unchanged tree reuses it.
func actionImage(t *testing.T) string {
	t.Helper()
	if img := os.Getenv("GOALRUN_ACTION_IMAGE"); img != "" {
		if !imageExists(img) {
			t.Fatalf("GOALRUN_ACTION_IMAGE=%s does not exist", img)
		}
		return img
	}
	ensureGoImage(t)
	ctxDir := buildContext(t)
	tag := "goalrun-test-action:" + contextHash(t, ctxDir)
	if !imageExists(tag) {
		// --network none: the build is offline by design (vendored modules).
		docker(t, dockerBuildTimeout, nil, "build", "--network", "none", "--label", testImageLabel, "-t", tag, ctxDir)
	}
	return tag
}

// buildContext copies the repository's files (tracked and untracked, not
// ignored by git or .dockerignore) to a temporary folder and vendors the
// modules into it.
func buildContext(t *testing.T) string {
	t.Helper()
	root := repoRoot(t)
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	dst := t.TempDir()
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if dockerIgnored(rel) {
			continue
		}
		src := filepath.Join(root, rel)
		fi, err := os.Lstat(src)
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the work tree, or not a regular file
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dst, rel)
		_ = os.MkdirAll(filepath.Dir(target), 0o755)
		if err := os.WriteFile(target, b, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	vendor := exec.Command("go", "mod", "vendor", "-o", filepath.Join(dst, "vendor"))
	vendor.Dir = dst
	vendor.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if b, err := vendor.CombinedOutput(); err != nil {
		t.Fatalf("go mod vendor: %v\n%s", err, b)
	}
	return dst
}

// dockerIgnored applies the repository's .dockerignore (.git, .ci,
// .github, **/*_test.go) so the copied context is exactly what `docker
// build` sends — and what act, which does not read .dockerignore, sends too,
// so both builds share Docker's layer cache.
func dockerIgnored(rel string) bool {
	first, _, _ := strings.Cut(rel, "/")
	switch first {
	case ".git", ".ci", ".github":
		return true
	}
	return strings.HasSuffix(rel, "_test.go")
}

// contextHash hashes the build context's paths and contents.
func contextHash(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	var paths []string
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			paths = append(paths, p)
		}
		return nil
	})
	sort.Strings(paths)
	for _, p := range paths {
		b, _ := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(h, "%s\x00%d\x00", rel, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// TestActionImage builds the action image from the Dockerfile without
// pulling anything and checks what it holds.
func TestActionImage(t *testing.T) {
	requireDocker(t)
	img := actionImage(t)
	var cfg []struct {
		Config struct {
			Entrypoint []string
			Env        []string
		}
		Size int64
	}
	if err := json.Unmarshal([]byte(docker(t, time.Minute, nil, "image", "inspect", img)), &cfg); err != nil || len(cfg) != 1 {
		t.Fatalf("inspect: %v", err)
	}
	if got := strings.Join(cfg[0].Config.Entrypoint, " "); got != "/usr/local/bin/goalrun action" {
		t.Errorf("entrypoint = %q", got)
	}
	t.Logf("action image %s: %.1f MB", img, float64(cfg[0].Size)/1e6)
	if cfg[0].Size > 60<<20 {
		t.Errorf("the action image is %d bytes; a static binary on scratch should be far smaller", cfg[0].Size)
	}
	out := docker(t, time.Minute, nil, "run", "--rm", "--network", "none", "--label", testImageLabel, "--entrypoint", "/usr/local/bin/goalrun", img, "version")
	if !strings.HasPrefix(out, "goalrun ") {
		t.Errorf("goalrun version in the image: %q", out)
	}
}

// TestActionContainer runs the action image the way a runner runs a
// container action — the host's Docker socket and the workspace mounted at
// /github/workspace, the file commands at /github/file_commands, the event
// at /github/workflow/event.json, GITHUB_* and INPUT_* in the environment —
// against githubtest, with the Docker sandbox (which must translate
// /github/workspace to the host path for its own containers).
func TestActionContainer(t *testing.T) {
	requireDocker(t)
	img := actionImage(t)
	sbImage := ensureSandboxImage(t)

	srv := githubtest.NewServer(t, "octo-org/demo")
	srv.AddIssue(16)
	files := map[string]githubtest.File{
		"check.sh": {Content: []byte("#!/bin/sh\ngrep -q fixed state\n"), Mode: githubtest.ModeExecutable},
		"state":    {Content: []byte("broken\n")},
	}
	base := srv.Seed("main", files, "base")
	srv.AddIssue(17)

	tmp := t.TempDir()
	ws, fc, wf, home := filepath.Join(tmp, "workspace"), filepath.Join(tmp, "file_commands"), filepath.Join(tmp, "_github_workflow"), filepath.Join(tmp, "_github_home")
	for _, d := range []string{ws, fc, wf, home} {
		if err := os.MkdirAll(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	for name, f := range files {
		if err := os.WriteFile(filepath.Join(ws, name), f.Content, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	payload, err := os.ReadFile(filepath.Join("..", "..", "report", "github", "testdata", "events", "pull_request.opened.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	_ = json.Unmarshal(payload, &p)
	setHead(base)(p)
	payload, _ = json.Marshal(p)
	_ = os.WriteFile(filepath.Join(wf, "event.json"), payload, 0o644)
	for _, f := range []string{"set_output", "step_summary"} {
		_ = os.WriteFile(filepath.Join(fc, f), nil, 0o666)
	}

	env := map[string]string{
		"GITHUB_ACTIONS": "true", "CI": "true", "GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": "/github/workflow/event.json",
		"GITHUB_REPOSITORY": "octo-org/demo", "GITHUB_SHA": "ffffffffffffffffffffffffffffffffffffffff",
		"GITHUB_API_URL": srv.URL, "GITHUB_WORKSPACE": "/github/workspace", "HOME": "/github/home",
		"GITHUB_OUTPUT": "/github/file_commands/set_output", "GITHUB_STEP_SUMMARY": "/github/file_commands/step_summary",
		"RUNNER_TEMP": tmp, "GITHUB_RUN_ID": "7",
	}
	for name, in := range loadActionYAML(t).Inputs {
		v := in.Default
		if strings.Contains(v, "${{") {
			v = testToken
		}
		env["INPUT_"+strings.ToUpper(name)] = v
	}
	for k, v := range map[string]string{"agent": "command", "agent-bin": "echo fixed > state", "until": "sh check.sh",
		"sandbox": "docker", "image": sbImage, "network": "none", "prompt": "fix the state file"} {
		env["INPUT_"+strings.ToUpper(k)] = v
	}
	args := []string{"run", "--rm", "--label", testImageLabel, "--network", "host", "--workdir", "/github/workspace",
		"-v", "/var/run/docker.sock:/var/run/docker.sock",
		"-v", ws + ":/github/workspace", "-v", fc + ":/github/file_commands", "-v", wf + ":/github/workflow", "-v", home + ":/github/home"}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "-e", k+"="+env[k])
	}
	args = append(args, img)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("docker run: %v", err)
	}
	docPath := filepath.Join(wf, "goalrun-goalrun.json")
	b, rerr := os.ReadFile(docPath)
	if rerr != nil {
		t.Fatalf("no document at %s (exit %d): %v\n%s", docPath, code, rerr, lastBytes(out.String(), 6000))
	}
	var d report.Document
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.Error == report.ErrSandboxUnavailable && strings.Contains(d.Message, "no Docker sandbox yet") {
		t.Skipf("this build of goalrun has no Docker sandbox wired in yet (%s)", d.Message)
	}
	if code != exitMet || d.Goal == nil || !d.Goal.Passed || !d.Goal.Grounded {
		t.Fatalf("exit %d, document %s\n%s", code, b, lastBytes(out.String(), 6000))
	}
	if d.Sandbox == nil || d.Sandbox.Mode != "docker" {
		t.Errorf("posture = %+v, want docker", d.Sandbox)
	}
	if st, _ := os.ReadFile(filepath.Join(ws, "state")); strings.TrimSpace(string(st)) != "fixed" {
		t.Errorf("the agent's write did not reach the host workspace: state = %q", st)
	}
	runs := srv.CheckRuns()
	if len(runs) != 1 || runs[0].Conclusion != "success" || runs[0].HeadSHA != base || !strings.Contains(runs[0].Summary, "goalrun/1 document") {
		t.Errorf("check runs = %+v", runs)
	}
	outputs, err := os.ReadFile(filepath.Join(fc, "set_output"))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := githubtest.ParseFileCommand(string(outputs))
	if err != nil || len(entries) != len(loadActionYAML(t).Outputs) {
		t.Errorf("outputs %v, %v", entries, err)
	}
	for _, e := range entries {
		if e[0] == "document" && e[1] != filepath.Join(tmp, "_github_workflow", "goalrun-goalrun.json") {
			t.Errorf("document output %q is not the host path", e[1])
		}
	}
}

// TestDockerignoreMatchesBuildContext keeps dockerIgnored equal to
// .dockerignore's patterns.
func TestDockerignoreMatchesBuildContext(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			patterns = append(patterns, line)
		}
	}
	if got, want := strings.Join(patterns, " "), ".git .ci .github **/*_test.go"; got != want {
		t.Errorf(".dockerignore patterns %q, dockerIgnored implements %q: update both", got, want)
	}
	for rel, want := range map[string]bool{".git/config": true, ".ci/run": true, "cmd/goalrun/action_test.go": true,
		"cmd/goalrun/action.go": false, "report/github/githubtest/testdata/PROVENANCE.md": false, "go.mod": false} {
		if dockerIgnored(rel) != want {
			t.Errorf("dockerIgnored(%q) = %v", rel, !want)
		}
	}
}
