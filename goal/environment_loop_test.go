package goal_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/goal"
	"github.com/goalrun/goalrun/goal/agent"
	"github.com/goalrun/goalrun/report"
)

// realOutput is a check that prints a real tool output fixture and exits
// with code.
func realOutput(t *testing.T, dir, name string, code string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "checkoutput", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "out-"+name), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return "cat out-" + name + "; exit " + code
}

// TestLoopEnvironmentFailureAtTheFirstCheck: a first check that fails for
// its environment (real output of each ecosystem's tool) ends the run
// before any agent turn, with EnvironmentFailed, the check's tail and the
// fix; a plain test failure goes to the agent.
func TestLoopEnvironmentFailureAtTheFirstCheck(t *testing.T) {
	cases := []struct {
		name, fixture, exit string
		env                 goal.Environment
		cause, missing      string // "" = the agent's failure
	}{
		{"go: module download refused", "go-dns.txt", "1", goal.Environment{Setup: []string{"go mod download"}}, goal.EnvDownload, "github.com/google/uuid@v1.6.0"},
		{"go: GOPROXY=off", "go-proxyoff.txt", "1", goal.Environment{}, goal.EnvMissingDependency, "github.com/google/uuid@v1.6.0"},
		{"npm: registry unreachable", "npm-install-enotfound.txt", "1", goal.Environment{}, goal.EnvDownload, "https://registry.npmjs.org/left-pad"},
		{"npm test: jest not installed (exit 127)", "npm-jest-not-found.txt", "127", goal.Environment{}, goal.EnvMissingDependency, "jest"},
		{"python: no pytest", "python-no-pytest.txt", "1", goal.Environment{}, goal.EnvMissingTool, "pytest"},
		{"pytest: declared dependency missing", "pytest-requests-missing.txt", "2", goal.Environment{Declared: map[string][]string{"pypi": {"requests"}}}, goal.EnvMissingDependency, "requests"},
		{"cargo: index unreachable", "cargo-offline-net.txt", "101", goal.Environment{}, goal.EnvDownload, "itoa"},
		{"maven: dependency not downloaded", "mvn-deps-offline.txt", "1", goal.Environment{}, goal.EnvMissingDependency, "com.google.guava:guava:jar:33.0.0-jre"},
		{"gradle: dependency unreachable", "gradle-net.txt", "1", goal.Environment{}, goal.EnvDownload, "https://repo.maven.apache.org/maven2/com/google/guava/guava/33.0.0-jre/guava-33.0.0-jre.pom"},
		{"go: plain test failure", "go-plain-fail.txt", "1", goal.Environment{}, "", ""},
		{"pytest: plain test failure", "pytest-plain-fail.txt", "1", goal.Environment{}, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := workspace(t, nil)
			ev := &recorder{}
			out := run(t, context.Background(), goal.Config{
				Sandbox: local(t, dir), Adapter: agent.Command{}, AgentBin: "touch agent-ran",
				Check: realOutput(t, dir, tc.fixture, tc.exit), MaxIterations: 1, Environment: tc.env,
				Events: ev, Now: (&fakeClock{}).Now,
			})
			if tc.cause == "" {
				if out.Failure != nil || !exists(dir, "agent-ran") || out.AgentTurns != 1 {
					t.Fatalf("a plain test failure did not reach the agent: failure %+v, turns %d", out.Failure, out.AgentTurns)
				}
				return
			}
			f := out.Failure
			if f == nil || f.Code != report.ErrEnvironmentFailed || f.Cause != tc.cause || f.Detail["missing"] != tc.missing {
				t.Fatalf("failure %+v, want %s/%s missing %q", f, report.ErrEnvironmentFailed, tc.cause, tc.missing)
			}
			if out.AgentTurns != 0 || exists(dir, "agent-ran") || len(ev.ofType(report.EventAgentStarted)) != 0 {
				t.Errorf("an agent turn was spent on an environment failure")
			}
			// The message shows the tail and names the line; the
			// suggestions name the fixes.
			lastLine := lastNonEmptyLine(fixtureText(t, tc.fixture))
			if !strings.Contains(f.Message, lastLine) || !strings.Contains(f.Message, "No agent turn was spent") {
				t.Errorf("message does not show the tail (%q):\n%s", lastLine, f.Message)
			}
			if len(tc.env.Setup) > 0 && !strings.Contains(f.Message, tc.env.Setup[0]) {
				t.Errorf("message does not say which setup ran: %s", f.Message)
			}
			all := strings.Join(f.Suggestions, " ")
			for _, flag := range []string{"--image", "--mount"} {
				if !strings.Contains(all, flag) {
					t.Errorf("suggestions lack %s: %q", flag, all)
				}
			}
			its := out.Iterations.Iterations()
			if len(its) != 1 || its[0].Check == nil || its[0].Check.Environment == "" {
				t.Errorf("iteration 0 does not record the environment: %+v", its)
			}
		})
	}
}

func fixtureText(t *testing.T, name string) string {
	b, err := os.ReadFile(filepath.Join("testdata", "checkoutput", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func lastNonEmptyLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// TestLoopAgentAddsADependencyThePreparedOutputsLack: after a turn that
// imports a module the check's prepared dependencies lack, the check's
// failure says so in the iteration, in the next prompt and in the halt
// reason, which names the fix.
func TestLoopAgentAddsADependencyThePreparedOutputsLack(t *testing.T) {
	dir := workspace(t, nil)
	newdep := fixtureText(t, "go-newdep-modmod.txt")
	if err := os.WriteFile(filepath.Join(dir, "newdep.txt"), []byte(newdep), 0o644); err != nil {
		t.Fatal(err)
	}
	// The check fails like a plain test before the agent's turn and like a
	// missing module after it.
	check := `if [ -e added ]; then cat newdep.txt; exit 1; fi; echo "--- FAIL: TestX (0.00s)"; exit 1`
	out := run(t, context.Background(), goal.Config{
		Sandbox: local(t, dir), Adapter: agent.Command{}, AgentBin: `touch added; cat > prompt-$GOALRUN_ITERATION`,
		Check: check, MaxIterations: 2, Now: (&fakeClock{}).Now,
	})
	if out.Failure != nil || out.Halt != report.HaltMaxIterations {
		t.Fatalf("failure %+v halt %q", out.Failure, out.Halt)
	}
	its := out.Iterations.Iterations()
	if its[0].Check.Environment != "" {
		t.Errorf("the plain failure of check #0 was taken for the environment's: %q", its[0].Check.Environment)
	}
	if e := its[1].Check.Environment; !strings.Contains(e, "github.com/google/go-cmp/cmp") {
		t.Errorf("iteration 1's check environment = %q", e)
	}
	p, err := os.ReadFile(filepath.Join(dir, "prompt-2"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"This failure is the environment's", "github.com/google/go-cmp/cmp", "rather than adding new ones"} {
		if !strings.Contains(string(p), w) {
			t.Errorf("prompt of turn 2 lacks %q:\n%s", w, p)
		}
	}
	for _, w := range []string{"github.com/google/go-cmp/cmp", "run goalrun again", "--setup"} {
		if !strings.Contains(out.HaltReason, w) {
			t.Errorf("halt reason lacks %q: %s", w, out.HaltReason)
		}
	}
}

// TestLoopPromptPutsTheFailingTestsFirst: a real CLI's go test output whose
// first failing test lies far before the end (passing tests print their
// usage text after it) reaches the agent's prompt and the document's
// iteration, not only "FAIL <module>".
func TestLoopPromptPutsTheFailingTestsFirst(t *testing.T) {
	dir := workspace(t, nil)
	out := run(t, context.Background(), goal.Config{
		Sandbox: local(t, dir), Adapter: agent.Command{}, AgentBin: `cat > prompt-$GOALRUN_ITERATION`,
		Check: realOutput(t, dir, "go-cli-usage.txt", "1"), MaxIterations: 1, Now: (&fakeClock{}).Now,
	})
	p, err := os.ReadFile(filepath.Join(dir, "prompt-1"))
	if err != nil {
		t.Fatal(err)
	}
	prompt := string(p)
	greet := `cli_test.go:15: greet printed "Hello, Ada!\n", want "Hello, Ada\n"`
	fi, ti := strings.Index(prompt, greet), strings.Index(prompt, "The end of its output")
	if fi < 0 || ti < 0 || fi > ti {
		t.Errorf("the first failing test is not quoted before the tail:\n%s", prompt)
	}
	c := out.Iterations.Iterations()[0].Check
	if !strings.Contains(c.Failures, greet) || !strings.Contains(c.Failures, "--- FAIL: TestTrim/b") {
		t.Errorf("iteration 0's failures = %q", c.Failures)
	}
	d := report.Finish(out.ReportRun(nil, false), nil)
	if f := d.Iterations[0].Check.Failures; !strings.HasPrefix(f, "--- FAIL: TestGreet (0.00s)\n    "+greet) {
		t.Errorf("document's check failures = %q", f)
	}
}
