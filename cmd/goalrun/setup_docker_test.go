package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/sandbox/dockertest"
)

// setupGuard bounds one goalrun run with a setup step in these tests (a
// hang guard: the first run on a busy machine compiles the standard
// library and the project's dependencies).
const setupGuard = 15 * time.Minute

// runStatic runs a static goalrun (CGO_ENABLED=0, as the README installs
// it: the setup container's egress relay is goalrun itself) in dir, the way
// a user would: only the
// flags given, the registries' addresses on this machine named in
// GOALRUN_EGRESS_ALLOW_NETS when they are private or reserved (see
// dockertest.RegistryNets).
func runStatic(t *testing.T, dir string, args ...string) result {
	t.Helper()
	return runStaticWith(t, dir, []string{"proxy.golang.org"}, args...)
}

// runStaticWith is runStatic for the registries hosts.
func runStaticWith(t *testing.T, dir string, hosts []string, args ...string) result {
	t.Helper()
	env := baseEnv()
	var nets []string
	for _, n := range dockertest.RegistryNets(t, hosts...) {
		nets = append(nets, n.String())
	}
	if len(nets) > 0 {
		env = append(env, EgressAllowNetsEnv+"="+strings.Join(nets, ","))
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, dockertest.GoalrunBinary(t), args...)
	cmd.Dir, cmd.Env = dir, env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("running goalrun: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("goalrun %q did not end within %s\n%s", args, setupGuard, errb.Bytes())
	}
	var d struct {
		Sandbox struct {
			Deps string `json:"setup_deps_volume"`
		} `json:"sandbox"`
	}
	if json.Unmarshal(out.Bytes(), &d) == nil && strings.HasPrefix(d.Sandbox.Deps, "goalrun-deps-") {
		keptDepsMade.Store(d.Sandbox.Deps, true)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: out.Bytes(), stderr: errb.Bytes(), pid: cmd.Process.Pid}
}

// keptDepsMade are the kept deps volumes the static runs used; TestMain
// removes them (removeKeptDeps) after every test, so a later test run
// prepares its own.
var keptDepsMade sync.Map

// removeKeptDeps removes the kept deps volumes (and their ready marks) the
// tests' runs used.
func removeKeptDeps() {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	keptDepsMade.Range(func(k, _ any) bool {
		_ = cli.VolumeRemove(ctx, k.(string), true)
		_ = cli.VolumeRemove(ctx, k.(string)+"-ready", true)
		return true
	})
}

// treeNonce makes the module graphs of one test binary's trees its own
// (writeUserTree adds it to each go.mod), so no kept deps volume of another
// test run is reused by a test that expects its setup step to run.
var treeNonce = fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())

// writeUserTree writes files under dir and gives them to the workspace user.
func writeUserTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		if path.Base(name) == "go.mod" {
			body += "\n// test tree " + treeNonce + "\n"
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	dockertest.Chown(t, dir, 1000, 1000)
}

const uuidSum = "github.com/google/uuid v1.6.0 h1:NIvaJDMOsjHA8n1jAhLSgzrAzy1Hgr+hNrb57e+94F0=\n" +
	"github.com/google/uuid v1.6.0/go.mod h1:TIyPZe4MgqvfeYDBFedMoGGpEw/LqOeaOT+nhxU+yHo=\n"

const cmpSum = "github.com/google/go-cmp v0.6.0 h1:ofyhxvXcZhMsU5ulbFiLKl/XBFqE1GSq7atu8tAmTRI=\n" +
	"github.com/google/go-cmp v0.6.0/go.mod h1:17dUlkBOakJ0+DkrSSNjCkIjxS6bF9zb3elmeNGIjoY=\n"

// goModuleWithDeps is a Go module that depends on github.com/google/uuid
// (no vendor folder) with a bug the agent's one-line edit fixes.
var goModuleWithDeps = map[string]string{
	"go.mod":      "module example.test/ids\n\ngo 1.22\n\nrequire github.com/google/uuid v1.6.0\n",
	"go.sum":      uuidSum,
	"ids.go":      "package ids\n\nimport \"github.com/google/uuid\"\n\n// New returns a new random id.\nfunc New() string { return uuid.NewString()[:35] }\n",
	"ids_test.go": "package ids\n\nimport \"testing\"\n\nfunc TestNew(t *testing.T) {\n\tif got := New(); len(got) != 36 {\n\t\tt.Errorf(\"New() = %q, want 36 characters\", got)\n\t}\n}\n",
	"fix.sh":      "#!/bin/sh\nsed -i 's/uuid.NewString()\\[:35\\]/uuid.NewString()/' ids.go\n",
}

// TestDockerSetupGoModuleWithDependencies is the must-show: a Go
// module with a third-party dependency and no vendor folder ends grounded
// success in one iteration with the default sandbox and only the command
// agent and the check as flags — the detected setup step downloads the
// module through its own egress proxy and warms the build cache; the check
// runs with no network; changes are exactly the agent's edit — in bind and
// copy mode. The second run (copy) of the same module graph runs no setup
// container: it mounts the deps volume the first one kept.
func TestDockerSetupGoModuleWithDependencies(t *testing.T) {
	dockerEngine(t)
	prepared := ""
	// One workspace path for both runs (the kept volume's key holds it),
	// the untouched tree written afresh for each.
	ws := filepath.Join(t.TempDir(), "ws")
	for _, mode := range []string{"bind", "copy"} {
		t.Run(mode, func(t *testing.T) {
			if err := os.RemoveAll(ws); err != nil {
				t.Fatal(err)
			}
			writeUserTree(t, ws, goModuleWithDeps)
			args := []string{"run", "--json", "--agent", "command", "--agent-bin", "./fix.sh", "--until", "go test ./..."}
			if mode == "copy" {
				args = append(args, "--workspace", "copy")
			}
			r := runStatic(t, ws, args...)
			d := r.doc(t)
			if r.code != 0 || get(d, "goal", "passed") != true || get(d, "goal", "grounded") != true || get(d, "goal", "iterations") != 1.0 ||
				d["conclusion"] != report.ConclusionSuccess {
				t.Fatalf("exit %d, document %s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			if get(d, "sandbox", "workspace") != mode || get(d, "sandbox", "mode") != "docker" {
				t.Errorf("sandbox %v", d["sandbox"])
			}
			if get(d, "changes", "files_changed") != 1.0 || get(d, "changes", "insertions") != 1.0 || get(d, "changes", "deletions") != 1.0 {
				t.Errorf("changes %v, want the agent's one-line edit of ids.go", d["changes"])
			}
			// The second run of the same module graph (copy, after bind)
			// reuses the kept deps volume: no setup container, no download.
			vol, _ := get(d, "sandbox", "setup_deps_volume").(string)
			reuse := prepared != ""
			if vol == "" || reuse && vol != prepared {
				t.Errorf("kept deps volume %q, the earlier run's %q", vol, prepared)
			}
			steps, _ := d["setup"].([]any)
			var cmds []string
			for _, s := range steps {
				m := s.(map[string]any)
				cmds = append(cmds, m["command"].(string))
				if m["exit_code"] != 0.0 || (m["reused"] == true) != reuse {
					t.Errorf("setup step %v failed, or reused is not %v", m, reuse)
				}
			}
			if strings.Join(cmds, " | ") != "go mod download | go test -count=1 -exec true ./..." {
				t.Errorf("setup steps %q", cmds)
			}
			allow, _ := get(d, "sandbox", "setup_egress_allowlist").([]any)
			switch {
			case get(d, "sandbox", "network") != "none":
				t.Errorf("the agent's network %v", get(d, "sandbox", "network"))
			case reuse && allow != nil:
				t.Errorf("a run that reused the deps volume had a setup container (egress %v)", allow)
			case !reuse && (len(allow) == 0 || allow[0] != "proxy.golang.org:443"):
				t.Errorf("the setup's egress %v", allow)
			}
			if !reuse {
				prepared = vol
			}
			its := d["iterations"].([]any)
			first := its[0].(map[string]any)["check"].(map[string]any)
			if first["environment"] != nil || !strings.Contains(first["failures"].(string), "want 36 characters") {
				t.Errorf("check #0 %v: want the test's own failure, not the environment's", first)
			}
		})
	}
}

// TestDockerSetupMultiModuleRepository: a repository with two Go modules,
// each with its own third-party dependency: the setup step prepares both,
// the check tests both offline.
func TestDockerSetupMultiModuleRepository(t *testing.T) {
	dockerEngine(t)
	ws := t.TempDir()
	files := map[string]string{
		"tools/go.mod":       "module example.test/repo/tools\n\ngo 1.22\n\nrequire github.com/google/go-cmp v0.6.0\n",
		"tools/go.sum":       cmpSum,
		"tools/diff.go":      "package tools\n\nimport \"github.com/google/go-cmp/cmp\"\n\n// Same reports whether a and b are equal.\nfunc Same(a, b []int) bool { return !cmp.Equal(a, b) }\n",
		"tools/diff_test.go": "package tools\n\nimport \"testing\"\n\nfunc TestSame(t *testing.T) {\n\tif !Same([]int{1}, []int{1}) {\n\t\tt.Error(\"equal slices differ\")\n\t}\n}\n",
		"check.sh":           "#!/bin/sh\nset -e\ngo test ./...\ncd tools && go test ./...\n",
		"fix.sh":             "#!/bin/sh\nsed -i 's/return !cmp.Equal/return cmp.Equal/' tools/diff.go\n",
	}
	for k, v := range goModuleWithDeps {
		if k != "fix.sh" {
			files[k] = strings.ReplaceAll(v, "[:35]", "")
		}
	}
	writeUserTree(t, ws, files)
	r := runStatic(t, ws, "run", "--json", "--agent", "command", "--agent-bin", "./fix.sh", "--until", "./check.sh")
	d := r.doc(t)
	if r.code != 0 || get(d, "goal", "grounded") != true || get(d, "goal", "iterations") != 1.0 {
		t.Fatalf("exit %d, document %s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	var dirs []string
	for _, s := range d["setup"].([]any) {
		m := s.(map[string]any)
		dir, _ := m["dir"].(string)
		dirs = append(dirs, dir+":"+m["command"].(string))
	}
	if !strings.Contains(strings.Join(dirs, " "), ":go mod download") || !strings.Contains(strings.Join(dirs, " "), "tools:go mod download") {
		t.Errorf("setup steps %q, want both modules downloaded", dirs)
	}
	if get(d, "changes", "files_changed") != 1.0 {
		t.Errorf("changes %v", d["changes"])
	}
}

// TestDockerCheckNeedsTheNetwork: a check that downloads a module itself
// at check #0 (nothing the setup step could know of) ends the run with
// EnvironmentFailed before any agent turn, naming the module, with the
// check's tail; the agent never ran.
func TestDockerCheckNeedsTheNetwork(t *testing.T) {
	dockerEngine(t)
	ws := t.TempDir()
	writeUserTree(t, ws, map[string]string{"go.mod": "module example.test/net\n\ngo 1.22\n", "a.go": "package a\n"})
	r := runStatic(t, ws, "run", "--json", "--agent", "command", "--agent-bin", "touch agent-ran",
		"--until", "go run golang.org/x/example/hello@v0.0.0-20240205180059-32022caedd6a")
	d := r.doc(t)
	if r.code != exitRunFailed || d["error"] != report.ErrEnvironmentFailed || get(d, "goal", "iterations") != 0.0 {
		t.Fatalf("exit %d, document %s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	msg, _ := d["message"].(string)
	if !strings.Contains(msg, "golang.org/x/example") || !strings.Contains(msg, "No agent turn was spent") || !strings.Contains(msg, "output ends") {
		t.Errorf("message %q", msg)
	}
	if _, err := os.Stat(filepath.Join(ws, "agent-ran")); err == nil {
		t.Errorf("the agent ran")
	}
	for _, e := range r.events(t) {
		if e.Type == report.EventAgentStarted {
			t.Errorf("an agent turn started")
		}
	}
}

// TestDockerSetupPythonProject: a Python project checked with
// `python3 -m pytest` (pytest from the host's packages, Debian's
// python3-pytest; PyPI is not reachable) ends grounded success in one
// iteration, in bind and copy mode, and what pytest writes (__pycache__,
// .pytest_cache) is not the agent's change.
func TestDockerSetupPythonProject(t *testing.T) {
	dockerEngine(t)
	if err := exec.Command("/usr/bin/python3", "-m", "pytest", "--version").Run(); err != nil {
		t.Fatalf("the host's python3 has no pytest (.ci/run installs python3-pytest): %v", err)
	}
	for _, mode := range []string{"bind", "copy"} {
		t.Run(mode, func(t *testing.T) {
			ws := t.TempDir()
			writeUserTree(t, ws, map[string]string{
				"calc.py":            "def add(a, b):\n    return a - b\n",
				"tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
				"conftest.py":        "import sys, os\nsys.path.insert(0, os.path.dirname(__file__))\n",
				"fix.sh":             "#!/bin/sh\nsed -i 's/return a - b/return a + b/' calc.py\n",
			})
			r := runStatic(t, ws, "run", "--json", "--agent", "command", "--agent-bin", "./fix.sh", "--workspace", mode, "--until", "python3 -m pytest")
			d := r.doc(t)
			if r.code != 0 || get(d, "goal", "grounded") != true || get(d, "goal", "iterations") != 1.0 || d["conclusion"] != report.ConclusionSuccess {
				t.Fatalf("exit %d, document %s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			if get(d, "changes", "files_changed") != 1.0 || get(d, "changes", "insertions") != 1.0 {
				t.Errorf("changes %v, want the agent's one-line edit of calc.py", d["changes"])
			}
			first := d["iterations"].([]any)[0].(map[string]any)["check"].(map[string]any)
			if f, _ := first["failures"].(string); !strings.Contains(f, "assert -1 == 5") {
				t.Errorf("check #0's failures %q", f)
			}
			for _, p := range []string{"__pycache__", ".pytest_cache", "tests/__pycache__"} {
				if _, err := os.Stat(filepath.Join(ws, p)); err == nil {
					t.Errorf("%s reached the workspace", p)
				}
			}
		})
	}
}

// TestDockerSetupNpmProject: a Node.js project with a lock file and no
// node_modules: the detected `npm ci` installs the locked package through
// the setup container's proxy (the npm preset) into the setup layer; the
// check (`npm test`, offline) finds it below the agent's tree; the agent's
// one-line fix is the only change and node_modules never reaches the
// workspace.
func TestDockerSetupNpmProject(t *testing.T) {
	dockerEngine(t)
	if _, err := exec.LookPath("npm"); err != nil {
		t.Fatalf("npm is not on this machine: %v", err)
	}
	ws := t.TempDir()
	writeUserTree(t, ws, map[string]string{
		"package.json": `{"name":"pad","version":"1.0.0","private":true,"scripts":{"test":"node --test"},"dependencies":{"left-pad":"1.3.0"}}` + "\n",
		"package-lock.json": `{"name":"pad","version":"1.0.0","lockfileVersion":3,"requires":true,"packages":{"":{"name":"pad","version":"1.0.0","dependencies":{"left-pad":"1.3.0"}},` +
			`"node_modules/left-pad":{"version":"1.3.0","resolved":"https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz","integrity":"sha512-XI5MPzVNApjAyhQzphX8BkmKsKUxD4LdyK24iZeQGinBN9yTQT3bFlCBy/aVx2HrNcqQGsdot8ghrjyrvMCoEA==","license":"WTFPL"}}}` + "\n",
		"pad.js":      "const leftPad = require('left-pad');\nexports.id = (n) => leftPad(String(n), 4, 'x');\n",
		"pad.test.js": "const test = require('node:test');\nconst assert = require('node:assert');\nconst { id } = require('./pad');\ntest('pads with zeros', () => { assert.strictEqual(id(7), '0007'); });\n",
		"fix.sh":      "#!/bin/sh\nsed -i \"s/4, 'x'/4, '0'/\" pad.js\n",
	})
	r := runStaticWith(t, ws, []string{"registry.npmjs.org"}, "run", "--json", "--agent", "command", "--agent-bin", "./fix.sh", "--until", "npm test")
	d := r.doc(t)
	if r.code != 0 || get(d, "goal", "grounded") != true || get(d, "goal", "iterations") != 1.0 {
		t.Fatalf("exit %d, document %s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	steps := d["setup"].([]any)
	if len(steps) != 1 || steps[0].(map[string]any)["command"] != "npm ci" || steps[0].(map[string]any)["exit_code"] != 0.0 {
		t.Errorf("setup %v", steps)
	}
	if get(d, "changes", "files_changed") != 1.0 {
		t.Errorf("changes %v, want the agent's edit of pad.js", d["changes"])
	}
	if _, err := os.Stat(filepath.Join(ws, "node_modules")); err == nil {
		t.Errorf("node_modules reached the workspace")
	}
	allow, _ := get(d, "sandbox", "setup_egress_allowlist").([]any)
	if len(allow) == 0 || allow[0] != "registry.npmjs.org:443" {
		t.Errorf("setup egress %v", allow)
	}
}
