package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/goal/agent"
)

// quickStart returns the commands of README.md's quick start: the lines of
// the first ```sh block under "## Quick start".
func quickStart(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "## Quick start")
	if !ok {
		t.Fatal(`README.md has no "## Quick start" section`)
	}
	_, rest, ok = strings.Cut(rest, "```sh\n")
	if !ok {
		t.Fatal("the quick start has no ```sh block")
	}
	block, _, _ := strings.Cut(rest, "```")
	var cmds []string
	for _, l := range strings.Split(strings.TrimSpace(block), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			cmds = append(cmds, l)
		}
	}
	return cmds
}

// TestReadmeQuickStart keeps the README honest: exactly two commands, the
// second runs the tests, and the first — the demo — works as written.
func TestReadmeQuickStart(t *testing.T) {
	cmds := quickStart(t)
	if len(cmds) != 2 {
		t.Fatalf("the quick start has %d commands, want exactly 2 (the demo, the tests): %q", len(cmds), cmds)
	}
	if cmds[1] != "bash .ci/run" {
		t.Errorf("the second command is %q, want %q", cmds[1], "bash .ci/run")
	}
	// The demo builds the sandbox image, a static relay and the warm Go
	// cache on its first run: the long demo guard, not the 2-minute one.
	ctx, cancel := context.WithTimeout(context.Background(), demoGuard)
	defer cancel()
	docker := engineAnswers(ctx)
	cmd := exec.CommandContext(ctx, "bash", "-c", cmds[0])
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = baseEnv()
	if h, ok := os.LookupEnv("DOCKER_HOST"); ok {
		cmd.Env = append(cmd.Env, "DOCKER_HOST="+h)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("the demo command failed: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
	}
	if want := "goal met · grounded · 2 iterations · conclusion success"; !strings.Contains(out.String(), want) {
		t.Errorf("the demo's result lacks %q:\n%s", want, out.String())
	}
	// With an Engine the demo is the real thing: Docker and egress.
	if want := "\nsandbox: docker, network egress,"; (docker || os.Getenv("GOALRUN_REQUIRE_DOCKER") == "1") && !strings.Contains(out.String(), want) {
		t.Errorf("the demo did not run in the Docker sandbox with egress (%q):\n%s", want, out.String())
	}
}

// readmeTableKeys returns the backquoted names in the first cell of each
// body row of the first table under heading in README.md (`--until CMD` gives
// "--until"; `--prompt TEXT` / `--prompt-file F` gives both), in order.
func readmeTableKeys(t *testing.T, heading string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README.md has no %q section", heading)
	}
	if next := strings.Index(rest, "\n## "); next >= 0 {
		rest = rest[:next]
	}
	var keys []string
	rows := 0
	for _, l := range strings.Split(rest, "\n") {
		if !strings.HasPrefix(l, "|") {
			if rows > 0 {
				break
			}
			continue
		}
		rows++
		cells := strings.Split(l, "|")
		if rows <= 2 || len(cells) < 2 { // the header and its separator
			continue
		}
		for _, m := range readmeKey.FindAllStringSubmatch(cells[1], -1) {
			keys = append(keys, m[1])
		}
	}
	return keys
}

// readmeKey is a backquoted flag or name at the start of a code span:
// `--setup-defaults=false` gives "--setup-defaults".
var readmeKey = regexp.MustCompile("`(--?[a-z][a-z-]*|[a-z][a-z-]*)[ =`]")

// TestReadmeTablesMatchTheCode: the README's flags table names exactly the
// flags `goalrun run` accepts, and its agents table exactly the agents, so
// the README cannot offer a flag that is gone or miss a new one.
func TestReadmeTablesMatchTheCode(t *testing.T) {
	var runFlags []string
	newFlagSet(&settings{}, new(string), new(bool)).VisitAll(func(f *flag.Flag) {
		runFlags = append(runFlags, "--"+f.Name)
	})
	for _, tc := range []struct {
		name, heading string
		want          []string
	}{
		{"goalrun run flags", "## `goalrun run` flags", runFlags},
		{"agents", "## Agents", agent.Names()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := readmeTableKeys(t, tc.heading)
			slices.Sort(got)
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if !slices.Equal(slices.Compact(got), want) {
				t.Errorf("README's %s table names %q, the code %q", tc.heading, got, want)
			}
		})
	}
}
