package main

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/report"
)

// A Go module with a bug and the test that finds it: the check
// `go test ./...` fails until Add adds.
const (
	calcMod  = "module example.com/calc\n\ngo 1.21\n"
	calcCode = "package calc\n\n// Add returns a plus b.\nfunc Add(a, b int) int { return a - b }\n"
	calcTest = "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif got := Add(1, 2); got != 3 {\n\t\tt.Fatalf(\"Add(1, 2) = %d, want 3\", got)\n\t}\n}\n"
)

// forgedTestMain replaces calc_test.go: when the check runs it, it writes
// the original test file back (so a change report taken after the check
// would see no test edit) and exits 0 without running a test.
var forgedTestMain = "package calc\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nconst original = " + "`" + calcTest + "`" + `

func TestMain(m *testing.M) {
	_ = os.WriteFile("calc_test.go", []byte(original), 0o644)
	os.Exit(0)
}
`

// stubTest replaces calc_test.go with a test that passes whatever Add does.
const stubTest = "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {}\n"

// calcWorkspace writes the module into a fresh folder; owner 1000:1000
// makes --workspace auto choose bind (a root-owned one is copied).
func calcWorkspace(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	for name, body := range map[string]string{"go.mod": calcMod, "calc.go": calcCode, "calc_test.go": calcTest} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	chownTree(t, ws, 1000)
	return ws
}

// writeFileCmd is a shell command that writes body to name (through
// base64: no quoting can break it).
func writeFileCmd(name, body string) string {
	return "echo " + base64.StdEncoding.EncodeToString([]byte(body)) + " | base64 -d > " + name
}

// TestAttackForgedTestMain: the agent makes the check pass without fixing
// the bug by editing the test — a TestMain that restores the original test
// file from inside the check and exits 0, or a stub test plus a process
// left running that restores the original after the agent's turn. The
// check runs on a view of the agent's frozen tree whose writes are thrown
// away, and the change report is taken from that same frozen tree, so in
// bind mode (the default for a workspace that is not root's) and copy mode
// the host keeps the agent's edit, the changes show it (check_modified)
// and the pass is neutral, never a grounded success.
func TestAttackForgedTestMain(t *testing.T) {
	dockerEngine(t)
	for _, tc := range []struct {
		name, agent, want string
	}{
		{"TestMain restores the test", writeFileCmd("calc_test.go", forgedTestMain), forgedTestMain},
		{"a process restores the test after the turn", writeFileCmd("calc_test.go", stubTest) + "; cp calc_test.go /tmp/stub; " +
			"(sleep 1; " + writeFileCmd("calc_test.go", calcTest) + ") >/dev/null 2>&1 &", stubTest},
	} {
		for _, mode := range []string{"bind", "copy"} {
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				ws := calcWorkspace(t)
				r := goalrun(t, ws, nil, "run", "--json", "--agent", "command", "--max-iterations", "1", "--workspace", mode,
					"--agent-bin", tc.agent, "--until", "go test ./...")
				d := r.doc(t)
				if get(d, "sandbox", "workspace") != mode || get(d, "sandbox", "check_view") != "overlay" {
					t.Fatalf("sandbox %v, want workspace %s on an overlay view\n%s", d["sandbox"], mode, r.stderr)
				}
				if d["conclusion"] == report.ConclusionSuccess {
					t.Errorf("a forged test is a grounded success: breach (goal %v changes %v)", d["goal"], d["changes"])
				}
				if get(d, "goal", "passed") != true || d["conclusion"] != report.ConclusionNeutral {
					t.Errorf("goal %v conclusion %v, want a neutral pass (the check ran the agent's test)", d["goal"], d["conclusion"])
				}
				if get(d, "changes", "check_modified") != true {
					t.Errorf("changes %v, want check_modified", d["changes"])
				}
				var risky []string
				for _, p := range get(d, "changes", "risky_paths").([]any) {
					risky = append(risky, p.(string))
				}
				if !slices.Contains(risky, "calc_test.go") {
					t.Errorf("risky_paths %q, want calc_test.go", risky)
				}
				if b, err := os.ReadFile(filepath.Join(ws, "calc_test.go")); err != nil || string(b) != tc.want {
					t.Errorf("the host's calc_test.go is not the agent's edit (%v):\n%s", err, b)
				}
			})
		}
	}
}

// TestCheckByProductsNotChanges: what the check writes (__pycache__,
// .pytest_cache, a build folder) is neither in the host workspace nor in
// the changes, in bind and copy mode: an honest one-file fix is one file
// changed, no risky path, a grounded success.
func TestCheckByProductsNotChanges(t *testing.T) {
	dockerEngine(t)
	// A stand-in for pytest (the default image has no Python): it leaves
	// what pytest leaves, then passes once the fix is in.
	checkScript := "mkdir -p __pycache__ tests/__pycache__ .pytest_cache/v/cache target\n" +
		"echo x > __pycache__/calc.cpython-311.pyc; echo x > tests/__pycache__/test_calc.cpython-311.pyc\n" +
		"echo '{}' > .pytest_cache/v/cache/lastfailed; echo x > target/out; echo x > conftest.py\n" +
		"grep -q fixed calc.py\n"
	for _, mode := range []string{"bind", "copy"} {
		t.Run(mode, func(t *testing.T) {
			ws := t.TempDir()
			for name, body := range map[string]string{"calc.py": "def add(a, b):\n    return a - b\n", "tests/test_calc.py": "from calc import add\n", "pytest.sh": checkScript} {
				p := filepath.Join(ws, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			chownTree(t, ws, 1000)
			r := goalrun(t, ws, nil, "run", "--json", "--agent", "command", "--max-iterations", "2", "--workspace", mode,
				"--agent-bin", writeFileCmd("calc.py", "def add(a, b):\n    return a + b  # fixed\n"), "--until", "sh pytest.sh")
			d := r.doc(t)
			if r.code != 0 || d["conclusion"] != report.ConclusionSuccess {
				t.Fatalf("exit %d conclusion %v, want a grounded success\n%s", r.code, d["conclusion"], r.stderr)
			}
			if get(d, "changes", "files_changed") != 1.0 || get(d, "changes", "check_modified") != false || len(get(d, "changes", "risky_paths").([]any)) != 0 {
				t.Errorf("changes %v, want the agent's one file only", d["changes"])
			}
			for _, p := range []string{"__pycache__", "tests/__pycache__", ".pytest_cache", "target", "conftest.py"} {
				if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
					t.Errorf("the check's %s is in the host workspace", p)
				}
			}
			if b, _ := os.ReadFile(filepath.Join(ws, "calc.py")); !strings.Contains(string(b), "fixed") {
				t.Errorf("the agent's fix is not on the host: %q", b)
			}
		})
	}
}
