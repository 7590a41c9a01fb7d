package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/goalrun/goalrun/report/ghreport/githubtest"
)

// fakeActionDir lays out the action's files as a release commit holds them
// (action.yml, action/launch.sh, dist/VERSION and dist/SHA256SUMS listing
// binary under linux/amd64's and linux/arm64's names); without binary, no
// dist/ (a ref that is not a release).
func fakeActionDir(t *testing.T, binary []byte) string {
	t.Helper()
	dir := t.TempDir()
	for _, rel := range []string{"action.yml", "action/launch.sh"} {
		b, err := os.ReadFile(filepath.Join("..", "..", rel))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, rel)
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if binary != nil {
		sum := sha256.Sum256(binary)
		sums := ""
		for _, n := range []string{"goalrun-linux-amd64", "goalrun-linux-arm64"} {
			sums += hex.EncodeToString(sum[:]) + "  " + n + "\n"
		}
		_ = os.MkdirAll(filepath.Join(dir, "dist"), 0o755)
		for rel, content := range map[string]string{"dist/VERSION": "v1.2.3\n", "dist/SHA256SUMS": sums} {
			if err := os.WriteFile(filepath.Join(dir, rel), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// toolPath returns a folder holding links to the named programs of this
// machine (those that exist) and the given fake scripts: a PATH with
// exactly those tools.
func toolPath(t *testing.T, tools []string, fakes map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range tools {
		if _, faked := fakes[name]; faked {
			continue
		}
		p, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		if err := os.Symlink(p, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	for name, script := range fakes {
		// O_EXCL: a new file, never written through a link to the real
		// program.
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString("#!/bin/sh\n" + script + "\n"); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// launchTools are the programs launch.sh uses besides the downloader and
// the checksum tools.
var launchTools = []string{"bash", "sh", "uname", "tr", "awk", "cut", "mkdir", "mktemp", "chmod", "mv", "rm", "cat", "dirname"}

// TestLaunchFailures: every way launch.sh can fail before goalrun starts is
// an ::error:: that names the fix, exit 3, and the step output
// status=error (never an empty status, never a shell's bare "command not
// found").
func TestLaunchFailures(t *testing.T) {
	binary := []byte("#!/bin/sh\necho goalrun ran\n")
	cases := []struct {
		name    string
		release bool
		tools   []string
		fakes   map[string]string
		env     []string
		want    []string
	}{
		{name: "macOS runner", release: true, tools: launchTools,
			fakes: map[string]string{"uname": `case "$1" in -s) echo Darwin ;; *) echo arm64 ;; esac`},
			want:  []string{"goalrun runs on Linux runners only (this one is Darwin)", "runs-on: ubuntu-latest"}},
		{name: "unknown machine type", release: true, tools: launchTools,
			fakes: map[string]string{"uname": `case "$1" in -s) echo Linux ;; *) echo riscv64 ;; esac`},
			want:  []string{"no goalrun build for the machine type riscv64"}},
		{name: "no sha256sum or shasum", release: true, tools: append(slices.Clone(launchTools), "curl", "wget"),
			fakes: map[string]string{"uname": `case "$1" in -s) echo Linux ;; *) echo x86_64 ;; esac`},
			want:  []string{"neither sha256sum nor shasum is on the runner's PATH", "apt-get install coreutils"}},
		{name: "no curl or wget", release: true, tools: append(slices.Clone(launchTools), "sha256sum"),
			fakes: map[string]string{"uname": `case "$1" in -s) echo Linux ;; *) echo x86_64 ;; esac`},
			want:  []string{"neither curl nor wget is on the runner's PATH", "/v1.2.3/goalrun-linux-amd64", "apt-get install curl"}},
		{name: "download refused", release: true, tools: append(slices.Clone(launchTools), "curl", "sha256sum"),
			fakes: map[string]string{"uname": `case "$1" in -s) echo Linux ;; *) echo x86_64 ;; esac`},
			want:  []string{"could not download http://127.0.0.1:9/none/v1.2.3/goalrun-linux-amd64"}},
		{name: "RUNNER_OS says macOS", release: true, tools: launchTools, env: []string{"RUNNER_OS=macOS", "RUNNER_ARCH=ARM64"},
			fakes: map[string]string{"uname": `case "$1" in -s) echo Linux ;; *) echo x86_64 ;; esac`},
			want:  []string{"goalrun runs on Linux runners only (this one is macOS)"}},
		{name: "RUNNER_ARCH 32-bit", release: true, tools: launchTools, env: []string{"RUNNER_OS=Linux", "RUNNER_ARCH=X86"},
			fakes: map[string]string{"uname": `case "$1" in -s) echo Linux ;; *) echo x86_64 ;; esac`},
			want:  []string{"no goalrun build for the machine type X86"}},
		{name: "not a release and no Go", tools: launchTools,
			fakes: map[string]string{"uname": `case "$1" in -s) echo Linux ;; *) echo x86_64 ;; esac`},
			want:  []string{"there is no Go on the runner's PATH", "pin a release tag", "actions/setup-go"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var bin []byte
			if tc.release {
				bin = binary
			}
			action := fakeActionDir(t, bin)
			output := filepath.Join(t.TempDir(), "set_output")
			if err := os.WriteFile(output, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			path := toolPath(t, tc.tools, tc.fakes)
			cmd := exec.Command(filepath.Join(path, "bash"), filepath.Join(action, "action", "launch.sh"))
			cmd.Env = []string{"PATH=" + path, "GITHUB_ACTION_PATH=" + action, "GITHUB_OUTPUT=" + output,
				"RUNNER_TOOL_CACHE=" + t.TempDir(), "RUNNER_TEMP=" + t.TempDir(), "GOALRUN_RELEASE_URL=http://127.0.0.1:9/none"}
			cmd.Env = append(cmd.Env, tc.env...)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !asExit(err, &ee) || ee.ExitCode() != 3 {
				t.Fatalf("launch.sh: %v, want exit 3\n%s", err, out)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			last := lines[len(lines)-1]
			if !strings.HasPrefix(last, "::error::goalrun: ") {
				t.Errorf("the last line is not goalrun's error:\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(last, w) {
					t.Errorf("the error lacks %q:\n%s", w, out)
				}
			}
			if strings.Contains(string(out), "not found") || strings.Contains(string(out), "goalrun ran") {
				t.Errorf("a shell error or the binary ran:\n%s", out)
			}
			b, _ := os.ReadFile(output)
			entries, err := githubtest.ParseFileCommand(string(b))
			if err != nil || len(entries) != 1 || entries[0] != [2]string{"status", "error"} {
				t.Errorf("GITHUB_OUTPUT = %q (%v), want only status=error", b, err)
			}
		})
	}
}

// TestActionRunsFromActionPath: action.yml starts launch.sh through the
// GITHUB_ACTION_PATH variable, which in a container job holds the path
// inside the job's container; the github.action_path expression (the host's
// path there) appears in no value of the step.
func TestActionRunsFromActionPath(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var a struct {
		Runs struct {
			Steps []struct {
				Run string            `yaml:"run"`
				Env map[string]string `yaml:"env"`
			} `yaml:"steps"`
		} `yaml:"runs"`
	}
	if err := yaml.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	if len(a.Runs.Steps) != 1 {
		t.Fatalf("action.yml has %d steps, want 1", len(a.Runs.Steps))
	}
	st := a.Runs.Steps[0]
	values := []string{st.Run}
	for _, v := range st.Env {
		values = append(values, v)
	}
	for _, v := range values {
		if strings.Contains(strings.ReplaceAll(v, " ", ""), "github.action_path") {
			t.Errorf("the step uses github.action_path (the host's path in a container job): %q", v)
		}
	}
	// The step's command, as the runner runs it in a container job: the
	// action's files at the container's path, no Go, not a release.
	action := fakeActionDir(t, nil)
	path := toolPath(t, launchTools, nil)
	cmd := exec.Command(filepath.Join(path, "bash"), "-e", "-c", st.Run)
	cmd.Env = []string{"PATH=" + path, "GITHUB_ACTION_PATH=" + action, "RUNNER_TEMP=" + t.TempDir()}
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "::error::goalrun: this ref of goalrun/goalrun is not a release") {
		t.Errorf("launch.sh did not start from GITHUB_ACTION_PATH:\n%s", out)
	}
}

// TestReleaseTargets: what a release holds is decided in one place,
// .ci/build-release's target list, and it is what release.yml builds (by
// running that script, with no build of its own), what .ci/run builds on
// every run, and what launch.sh downloads: for each target, launch.sh on a
// runner of that platform (RUNNER_OS and RUNNER_ARCH as the runner sets
// them, which decide over uname) fetches goalrun-<os>-<arch>, checks its
// SHA-256 and runs it.
func TestReleaseTargets(t *testing.T) {
	root := repoRoot(t)
	out, err := exec.Command("bash", filepath.Join(root, ".ci", "build-release"), "--targets").Output()
	if err != nil {
		t.Fatal(err)
	}
	targets := strings.Fields(string(out))
	if strings.Join(targets, " ") != "linux/amd64 linux/arm64" {
		t.Errorf("targets %v: goalrun builds for Linux only", targets)
	}
	rel, err := os.ReadFile(filepath.Join(root, ".github", "workflows", "release.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		Jobs map[string]struct {
			Steps []struct {
				Run string `yaml:"run"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	if err := yaml.Unmarshal(rel, &wf); err != nil {
		t.Fatal(err)
	}
	builds := 0
	for _, job := range wf.Jobs {
		for _, st := range job.Steps {
			if strings.Contains(st.Run, "go build") || strings.Contains(st.Run, "GOOS") {
				t.Errorf("release.yml builds on its own: %q", st.Run)
			}
			if strings.Contains(st.Run, "bash .ci/build-release out ") {
				builds++
			}
		}
	}
	if builds != 1 {
		t.Errorf("release.yml runs .ci/build-release %d times, want once", builds)
	}
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ci), "\nbash .ci/build-release ") {
		t.Error(".ci/run does not build the release's targets")
	}

	for _, target := range targets {
		t.Run(target, func(t *testing.T) {
			goos, goarch, _ := strings.Cut(target, "/")
			runnerArch := map[string]string{"amd64": "X64", "arm64": "ARM64"}[goarch]
			if goos != "linux" || runnerArch == "" {
				t.Fatalf("launch.sh has no mapping for %s", target)
			}
			binary := []byte("#!/bin/sh\necho \"goalrun ran: $*\"\n")
			action := fakeActionDir(t, binary)
			assets := t.TempDir()
			asset := filepath.Join(assets, "v1.2.3", "goalrun-"+goos+"-"+goarch)
			_ = os.MkdirAll(filepath.Dir(asset), 0o755)
			if err := os.WriteFile(asset, binary, 0o644); err != nil {
				t.Fatal(err)
			}
			path := toolPath(t, append(slices.Clone(launchTools), "curl", "sha256sum"),
				map[string]string{"uname": `echo "uname must not decide when RUNNER_ARCH says" >&2; exit 1`})
			cmd := exec.Command(filepath.Join(path, "bash"), filepath.Join(action, "action", "launch.sh"))
			cmd.Env = []string{"PATH=" + path, "GITHUB_ACTION_PATH=" + action, "RUNNER_TOOL_CACHE=" + t.TempDir(),
				"GOALRUN_RELEASE_URL=file://" + assets, "RUNNER_OS=Linux", "RUNNER_ARCH=" + runnerArch}
			got, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(got), "goalrun ran: action") {
				t.Errorf("launch.sh on a %s runner: %v\n%s", target, err, got)
			}
		})
	}
}
