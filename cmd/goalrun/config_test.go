package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/egress"
)

// TestSettingsAreOneList keeps the flags and the config file's keys equal
// to settingTable: every setting is settable both ways under one name, and
// the table's marks fit the fields they describe.
func TestSettingsAreOneList(t *testing.T) {
	var names []string
	seen := map[string]bool{}
	for _, f := range settingTable {
		if seen[f.name] {
			t.Errorf("setting %q is declared twice", f.name)
		}
		seen[f.name] = true
		names = append(names, f.name)
		if f.path && pathOf(&settings{}, f) == nil {
			t.Errorf("setting %q is marked as a path but is no text", f.name)
		}
		if f.usage == "" {
			t.Errorf("setting %q has no help text", f.name)
		}
	}
	sort.Strings(names)
	var flags []string
	for _, n := range flagNames() {
		if n != "config" && n != "no-config" {
			flags = append(flags, n)
		}
	}
	if !reflect.DeepEqual(names, flags) {
		t.Errorf("settings %v\nflags    %v", names, flags)
	}
	// Every key decodes from a config file.
	for _, f := range settingTable {
		var s settings
		n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "1", Line: 1, Column: 1}
		if f.name == "timeout" || f.name == "step-timeout" {
			n.Value = "1m"
		} else if _, ok := f.field.(field[bool]); ok {
			n.Tag, n.Value = "!!bool", "true"
		} else if _, ok := f.field.(field[string]); !ok {
			if _, ok := f.field.(field[[]string]); !ok {
				n.Tag = "!!int"
			}
		}
		if bad := f.field.decode(&s, n); bad != nil {
			t.Errorf("setting %q does not decode %q: %s", f.name, n.Value, bad.text)
		}
	}
	if want := []string{"prompt", "prompt-file", "workdir"}; !reflect.DeepEqual(prConfigAllowed, want) {
		t.Errorf("a pull request's config file may set %v, want %v (what to do, never how it is isolated, checked or paid for)", prConfigAllowed, want)
	}
	var paths []string
	for _, f := range settingTable {
		if f.path {
			paths = append(paths, f.name)
		}
	}
	if want := []string{"prompt-file", "workdir", "output", "events"}; !reflect.DeepEqual(paths, want) {
		t.Errorf("path settings %v, want %v", paths, want)
	}
	// The architecture's flag table, plus this project's additions.
	for _, want := range []string{"until", "infer-until", "agent", "agent-bin", "agent-arg", "model", "prompt", "prompt-file",
		"max-iterations", "timeout", "step-timeout", "max-cost-usd", "sandbox", "image", "network", "allow-host", "workdir",
		"json", "output", "events", "judge-cmd", "allow-test-edits", "max-tokens", "workspace", "max-turns"} {
		if !contains(names, want) {
			t.Errorf("setting %q is missing", want)
		}
	}
}

func noEnv(string) (string, bool) { return "", false }

func parse(t *testing.T, dir string, args ...string) (runConfig, error) {
	t.Helper()
	return parseRunArgs(args, noEnv, func() (string, error) { return dir, nil })
}

func TestParseRunArgs(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fix.sh"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "task.md"), []byte("Fix the flaky test.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		args  []string
		check func(t *testing.T, c runConfig)
	}{
		{"defaults", []string{"--until", "go test ./..."}, func(t *testing.T, c runConfig) {
			if c.agent != "claude" || c.maxIterations != 5 || c.timeout != 30*time.Minute || c.stepTimeout != 15*time.Minute ||
				c.sandbox != "docker" || c.net != sandbox.NetworkEgress || c.dir != dir || c.workspace != "auto" {
				t.Errorf("defaults %+v", c)
			}
		}},
		{"command agent defaults to no network", []string{"--until", "x", "--agent", "command", "--agent-bin", "./fix.sh"}, func(t *testing.T, c runConfig) {
			if c.net != sandbox.NetworkNone {
				t.Errorf("network %q", c.net)
			}
		}},
		{"local sandbox is the host network", []string{"--until", "x", "--sandbox", "local"}, func(t *testing.T, c runConfig) {
			if c.net != sandbox.NetworkHost {
				t.Errorf("network %q", c.net)
			}
		}},
		{"positional task after and between flags", []string{"Fix", "--until", "x", "it", "--", "--now"}, func(t *testing.T, c runConfig) {
			if c.task != "Fix it --now" || c.until != "x" {
				t.Errorf("task %q until %q", c.task, c.until)
			}
		}},
		{"prompt file relative to the current directory", []string{"--until", "x", "--prompt-file", "task.md"}, func(t *testing.T, c runConfig) {
			if c.task != "Fix the flaky test.\n" {
				t.Errorf("task %q", c.task)
			}
		}},
		{"repeatable flags", []string{"--until", "x", "--agent-arg", "a", "--agent-arg", "b c", "--allow-host", "h:8443", "--allow-host", "g"}, func(t *testing.T, c runConfig) {
			if !reflect.DeepEqual(c.agentArgs, []string{"a", "b c"}) || !reflect.DeepEqual(c.allowHosts, []string{"h:8443", "g:443"}) {
				t.Errorf("agent args %q allow hosts %q", c.agentArgs, c.allowHosts)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parse(t, dir, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
	if _, err := parse(t, dir, "--help"); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("--help: %v", err)
	}
}

// TestUnknownFlag: a misspelt flag is bad input that names it as typed and
// the setting it is nearest to; one near none gets only the --help advice.
func TestUnknownFlag(t *testing.T) {
	cases := []struct {
		name, flag, msg, fix string
	}{
		{"one letter doubled", "--untill", "unknown flag --untill", "Did you mean --until?"},
		{"a letter missing", "--max-iteration", "unknown flag --max-iteration", "Did you mean --max-iterations?"},
		{"near nothing", "--frobnicate", "unknown flag --frobnicate", "Run goalrun run --help for the flags."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, t.TempDir(), tc.flag, "x")
			var se *startupError
			if !errors.As(err, &se) || se.code != report.ErrBadInput || se.message != "goalrun run: "+tc.msg {
				t.Fatalf("error %v, want bad input %q", err, tc.msg)
			}
			if len(se.suggestions) == 0 || se.suggestions[0] != tc.fix {
				t.Errorf("suggestions %q, want first %q", se.suggestions, tc.fix)
			}
		})
	}
}

func TestConfigFile(t *testing.T) {
	cases := []struct {
		name    string
		yaml    string
		args    []string
		check   func(t *testing.T, c runConfig)
		wantErr []string
	}{
		{
			name: "every kind of value",
			yaml: "until: go test ./...\nagent: claude\nagent-bin: ./fix.sh\nagent-arg: one\nallow-host: [a.example:443, b.example]\n" +
				"max-iterations: 3\ntimeout: 1h30m\nstep-timeout: 90s\nmax-cost-usd: 2.5\nmax-tokens: 100000\nnetwork: egress\njson: true\nprompt-file: task.md\n",
			check: func(t *testing.T, c runConfig) {
				if c.until != "go test ./..." || c.agent != "claude" || c.maxIterations != 3 || c.timeout != 90*time.Minute ||
					c.stepTimeout != 90*time.Second || c.maxCostUSD != 2.5 || c.maxTokens != 100000 || !c.json ||
					!reflect.DeepEqual(c.agentArgs, []string{"one"}) || len(c.allowHosts) != 2 || c.task != "from the file's folder\n" {
					t.Errorf("config %+v", c)
				}
			},
		},
		{
			name: "flags win one setting at a time",
			yaml: "until: from-file\nmax-iterations: 3\nagent-arg: [x]\n",
			args: []string{"--max-iterations", "7"},
			check: func(t *testing.T, c runConfig) {
				if c.until != "from-file" || c.maxIterations != 7 || !reflect.DeepEqual(c.agentArgs, []string{"x"}) {
					t.Errorf("until %q iterations %d args %q", c.until, c.maxIterations, c.agentArgs)
				}
			},
		},
		{name: "empty file", yaml: "", args: []string{"--until", "x"}, check: func(t *testing.T, c runConfig) {}},
		{name: "comments only", yaml: "# nothing\n", args: []string{"--until", "x"}, check: func(t *testing.T, c runConfig) {}},
		{name: "unknown key", yaml: "until: x\nagnet: command\n", wantErr: []string{".goalrun.yml line 2", `unknown key "agnet"`, `did you mean "agent"`}},
		{name: "two unknown keys", yaml: "foo: 1\nuntil: x\nbar: 2\n", wantErr: []string{"line 1", `"foo"`, "line 3", `"bar"`}},
		{name: "duplicate key", yaml: "until: x\nuntil: y\n", wantErr: []string{"line 2", `"until"`, "twice"}},
		{name: "wrong type", yaml: "until: x\njson: maybe\n", wantErr: []string{"line 2", "maybe"}},
		{name: "value error names file and line", yaml: "until: x\nmax-iterations: -1\n", wantErr: []string{`"max-iterations" in`, ".goalrun.yml line 2", "-1"}},
		{name: "a second document", yaml: "until: x\n---\nsandbox: local\n", wantErr: []string{".goalrun.yml line 2", "second YAML document"}},
		{name: "not UTF-8", yaml: "until: x\nprompt: caf\xe9\n", wantErr: []string{".goalrun.yml", "not UTF-8", "byte 20"}},
		{name: "a path through a link out of the folder", yaml: "until: x\nprompt-file: out/task.md\n", wantErr: []string{".goalrun.yml line 2: prompt-file", "symbolic link", "outside the config file's folder"}},
		{name: "a path through a link inside", yaml: "until: x\nprompt-file: in/task.md\n", check: func(t *testing.T, c runConfig) {
			if c.task != "from the file's folder\n" {
				t.Errorf("task %q", c.task)
			}
		}},
		{name: "a FIFO as the prompt file is refused, not waited on", yaml: "until: x\nprompt-file: task.fifo\n", wantErr: []string{"task.fifo", "not a regular file"}},
		{name: "a YAML merge key", yaml: "base: &b {until: x}\n<<: *b\n", wantErr: []string{".goalrun.yml line 2", "merge key"}},
		{name: "a null key", yaml: "until: x\n~: 1\n", wantErr: []string{".goalrun.yml line 2", "null"}},
		{name: "a null key spelled out", yaml: "until: x\nnull: local\n", wantErr: []string{".goalrun.yml line 2", "null"}},
		{name: "an empty key", yaml: "until: x\n? \n: 1\n", wantErr: []string{".goalrun.yml line 2", "null"}},
		{name: "a number as a key", yaml: "until: x\n1: 2\n", wantErr: []string{".goalrun.yml line 2", `"1" (read as int`}},
		{name: "a boolean as a key", yaml: "until: x\ntrue: 2\n", wantErr: []string{".goalrun.yml line 2", "bool"}},
		{name: "a list as a key", yaml: "until: x\n? [a, b]\n: 2\n", wantErr: []string{".goalrun.yml line 2", "a list"}},
		{name: "an alias as a key", yaml: "a: &k until\n*k : x\n", wantErr: []string{".goalrun.yml line 2", "alias"}},
		{name: "a quoted key is text", yaml: "\"until\": x\n", args: nil, check: func(t *testing.T, c runConfig) {
			if c.until != "x" {
				t.Errorf("until %q", c.until)
			}
		}},
		{name: "no-config skips the workdir's file", yaml: "until: x\nsandbox: local\n", args: []string{"--no-config", "--until", "y"}, check: func(t *testing.T, c runConfig) {
			if c.until != "y" || c.sandbox != defaultSandbox || c.configFile != "" {
				t.Errorf("until %q sandbox %q config %q: the file was read", c.until, c.sandbox, c.configFile)
			}
		}},
		{name: "a second document start only", yaml: "until: x\n---\n", check: func(t *testing.T, c runConfig) {}, args: []string{"--until", "x"}},
		{name: "a wrong type names the column", yaml: "until: x\nmax-tokens: {a: 1}\n", wantErr: []string{".goalrun.yml line 2 column 13: max-tokens: a mapping is not a whole number"}},
		{name: "a list item that is not text", yaml: "until: x\nsetup:\n  - make\n  - [a, b]\n", wantErr: []string{".goalrun.yml line 4 column 5: setup: item 2 is a list, not text"}},
		{name: "a list as text", yaml: "until: [a, b]\n", wantErr: []string{".goalrun.yml line 1 column 8: until: a list is not text"}},
		{name: "an unknown key and a wrong type together", yaml: "until: x\njson: maybe\nagnet: claude\n", wantErr: []string{
			`line 2 column 7: json: "maybe" is not true or false`, `line 3 column 1: unknown key "agnet" (did you mean "agent"?)`}},
		{name: "an unknown key inside a flow mapping", yaml: "{until: x, sandbx: local}\n", wantErr: []string{"line 1 column 12", `unknown key "sandbx"`, `did you mean "sandbox"`}},
		{name: "a bad duration", yaml: "until: x\ntimeout: 5 minutes\n", wantErr: []string{`line 2 column 10: timeout: "5 minutes" is not a duration; write it like 30m, 90s or 1h30m`}},
		{name: "a number as a duration", yaml: "until: x\nstep-timeout: 30\n", wantErr: []string{`step-timeout: "30" is not a duration`}},
		{name: "a quoted number is no whole number", yaml: "until: x\nmax-iterations: \"3\"\n", wantErr: []string{`max-iterations: "3" is not a whole number`}},
		{name: "values of every type", yaml: "until: 3\nmax-turns: 0x10\nno-progress-turns: -1\nmax-cost-usd: 1\nsetup-defaults: false\nallow-test-edits: true\nsetup: [make, 7]\n",
			check: func(t *testing.T, c runConfig) {
				if c.until != "3" || c.maxTurns != 16 || c.noProgressTurns != -1 || c.maxCostUSD != 1 || c.setupDefaults || !c.allowTestEdits ||
					!reflect.DeepEqual(c.setup, []string{"make", "7"}) {
					t.Errorf("config %+v", c.settings)
				}
			}},
		{name: "an alias repeats a value", yaml: "until: &u go test ./...\ninfer-until: *u\nsetup: [*u]\n", check: func(t *testing.T, c runConfig) {
			if c.inferUntil != "go test ./..." || !reflect.DeepEqual(c.setup, []string{"go test ./..."}) {
				t.Errorf("infer-until %q setup %q", c.inferUntil, c.setup)
			}
		}},
		{name: "null sets the zero value, not the default", yaml: "until: x\nsetup-defaults: ~\nagent-arg:\n", check: func(t *testing.T, c runConfig) {
			if c.setupDefaults || c.agentArgs != nil || !reflect.DeepEqual(c.fileKeys, []string{"agent-arg", "setup-defaults", "until"}) {
				t.Errorf("setup-defaults %v agent args %q file keys %q", c.setupDefaults, c.agentArgs, c.fileKeys)
			}
		}},
		{name: "a syntax error names the line", yaml: "until: x\nsetup: [make\n", wantErr: []string{".goalrun.yml line 1: did not find expected ',' or ']'"}}, // yaml.v3's own text, its line number included
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, ".goalrun.yml"), []byte(tc.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "task.md"), []byte("from the file's folder\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			outside := t.TempDir()
			os.WriteFile(filepath.Join(outside, "task.md"), []byte("a host file\n"), 0o644)
			if err := os.Symlink(outside, filepath.Join(dir, "out")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(".", filepath.Join(dir, "in")); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(filepath.Join(dir, "task.fifo"), 0o644); err != nil {
				t.Fatal(err)
			}
			cwd := t.TempDir() // relative paths in the file are relative to the file, not here
			args := append([]string{"--workdir", dir}, tc.args...)
			c, err := parseRunArgs(args, noEnv, func() (string, error) { return cwd, nil })
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("no error")
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				var se *startupError
				if !errors.As(err, &se) || se.code != report.ErrBadInput {
					t.Errorf("error %T %v, want a BadInput startup error", err, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

func TestSecretsFromTheEnvironment(t *testing.T) {
	env := func(k string) (string, bool) {
		switch k {
		case "ANTHROPIC_API_KEY":
			return "sk-a", true
		case "GITHUB_TOKEN":
			return "ghp_b", true
		case "OPENAI_API_KEY":
			return "", true // set but empty: not a secret
		case "AWS_SECRET_ACCESS_KEY":
			return "aws-c", true
		}
		return "", false
	}
	c, err := parseRunArgs([]string{"--until", "x"}, env, func() (string, error) { return t.TempDir(), nil })
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.secrets, map[string]string{"ANTHROPIC_API_KEY": "sk-a", "GITHUB_TOKEN": "ghp_b", "AWS_SECRET_ACCESS_KEY": "aws-c"}) {
		t.Errorf("secrets %v", c.secrets)
	}
	if got := secretValues(c.secrets); !reflect.DeepEqual(got, []string{"sk-a", "aws-c", "ghp_b"}) {
		t.Errorf("secret values %v", got)
	}
}

func TestExitCodeFor(t *testing.T) {
	halt := report.HaltMaxIterations
	cases := []struct {
		name string
		doc  report.Document
		want int
	}{
		{"met", report.Document{Status: report.StatusSuccess, Goal: &report.Goal{Passed: true}}, 0},
		{"not met", report.Document{Status: report.StatusSuccess, Goal: &report.Goal{Halt: &halt}}, 1},
		{"cancelled", report.Document{Status: report.StatusCancelled, Goal: &report.Goal{}}, 130},
		{"run failed", report.Document{Status: report.StatusError, Error: report.ErrCheckNotRunnable, Goal: &report.Goal{}}, 3},
		{"auth", report.Document{Status: report.StatusAuthRequired, Goal: &report.Goal{}}, 3},
		{"bad input", report.StartupError(report.ErrBadInput, "x"), 2},
		{"unknown agent", report.StartupError(report.ErrAgentNotFound, "x"), 2},
		{"sandbox unavailable", report.StartupError(report.ErrSandboxUnavailable, "x"), 3},
		{"interrupted before the run", report.StartupError(report.ErrCancelled, "x"), 130},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := exitCodeFor(tc.doc); got != tc.want {
				t.Errorf("exit %d, want %d", got, tc.want)
			}
		})
	}
}

func TestSandboxSelection(t *testing.T) {
	noEngine := errors.New("no Docker Engine answered at unix:///var/run/docker.sock")
	var gotCfg sandbox.Config
	local := func(ctx context.Context, cfg sandbox.Config) (sandbox.Sandbox, error) {
		gotCfg = cfg
		return sandbox.StartLocal(ctx, cfg)
	}
	failingDocker := func(context.Context, runConfig, sandbox.Config) (sandbox.Sandbox, error) {
		return nil, fmt.Errorf("%w: %v", errEngineUnavailable, noEngine)
	}
	brokenDocker := func(context.Context, runConfig, sandbox.Config) (sandbox.Sandbox, error) {
		return nil, errors.New("creating the container: no space left on device")
	}
	noAgentCLI := func(context.Context, runConfig, sandbox.Config) (sandbox.Sandbox, error) {
		return nil, &startupError{code: report.ErrAgentNotFound, message: `the claude agent's executable "claude" is not on this machine's PATH`,
			suggestions: []string{"Install the agent's CLI."}}
	}
	rootWorkspace := func(context.Context, runConfig, sandbox.Config) (sandbox.Sandbox, error) {
		return nil, fmt.Errorf("sandbox: starting: %w", &sandbox.RootWorkspaceError{Workspace: "/src"})
	}
	cases := []struct {
		name       string
		f          sandboxFactory
		mode       string
		wantMode   string
		wantNotice string
		wantCode   string
	}{
		{"local", sandboxFactory{local: local}, "local", "local", "", ""},
		{"docker not built", sandboxFactory{local: local}, "docker", "", "", report.ErrSandboxUnavailable},
		{"docker that fails to start", sandboxFactory{local: local, docker: brokenDocker}, "docker", "", "", report.ErrSandboxFailed},
		{"auto does not hide a broken docker", sandboxFactory{local: local, docker: brokenDocker}, "auto", "", "", report.ErrSandboxFailed},
		{"docker keeps a startup error's own code", sandboxFactory{local: local, docker: noAgentCLI}, "docker", "", "", report.ErrAgentNotFound},
		{"auto keeps a startup error's own code", sandboxFactory{local: local, docker: noAgentCLI}, "auto", "", "", report.ErrAgentNotFound},
		{"docker without an engine", sandboxFactory{local: local, docker: failingDocker}, "docker", "", "", report.ErrSandboxUnavailable},
		{"a root-owned bind workspace is bad input", sandboxFactory{local: local, docker: rootWorkspace}, "docker", "", "", report.ErrBadInput},
		{"auto falls back with a notice", sandboxFactory{local: local, docker: failingDocker}, "auto", "local", "no Docker Engine answered", ""},
		{"auto without docker built", sandboxFactory{local: local}, "auto", "local", "has no Docker sandbox", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gotCfg = sandbox.Config{}
			sb, err := tc.f.start(t.Context(), runConfig{settings: settings{sandbox: tc.mode}}, sandbox.Config{Workspace: t.TempDir(), Network: sandbox.NetworkNone})
			if tc.wantCode != "" {
				if se := asSandboxError(err); err == nil || se.code != tc.wantCode {
					t.Fatalf("err %v, want %s", err, tc.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close(context.Background())
			p := sb.Posture()
			if p.Mode != tc.wantMode {
				t.Errorf("mode %q", p.Mode)
			}
			switch {
			case tc.wantNotice == "" && p.FallbackNotice != nil:
				t.Errorf("unexpected notice %q", *p.FallbackNotice)
			case tc.wantNotice != "" && (p.FallbackNotice == nil || !strings.Contains(*p.FallbackNotice, tc.wantNotice)):
				t.Errorf("notice %v, want one mentioning %q", p.FallbackNotice, tc.wantNotice)
			case tc.wantNotice != "" && gotCfg.Network != sandbox.NetworkHost:
				t.Errorf("fallback config network %q, want host", gotCfg.Network)
			}
		})
	}
}

func TestAllowHostsAreValidatedAndNormalized(t *testing.T) {
	dir := t.TempDir()
	c, err := parse(t, dir, "--until", "x", "--allow-host", "API.Example.com", "--allow-host", "*.pkg.dev:8443", "--allow-host", "Go", "--allow-host", "npm")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.allowHosts, []string{"api.example.com:443", "*.pkg.dev:8443", "go", "npm"}) {
		t.Errorf("allow hosts %q", c.allowHosts)
	}
	for _, bad := range []string{"https://x.com", "x.com/path", "10.0.0.1", "localhost", "x.com:0", "x.com:70000"} {
		if _, err := parse(t, dir, "--until", "x", "--allow-host", bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestImageReferences: --image (flag or config file) must be an image
// reference; a malformed one is bad input naming where it came from, not a
// sandbox that fails to start.
func TestImageReferences(t *testing.T) {
	const hex = "3f57d9401f8d42f986df300f0c69192fc41da28ccc8d797829467780db3dd741"
	for _, tc := range []struct {
		name, image string
		ok          bool
	}{
		{"name", "busybox", true},
		{"name and tag", "busybox:1.36", true},
		{"registry, path and tag", "ghcr.io/owner/image:v1.2", true},
		{"registry with a port", "localhost:5000/goalrun-sandbox:ci", true},
		{"by digest", "busybox@sha256:" + hex, true},
		{"an image id", "sha256:" + hex, true},
		{"a bare id", hex, true},
		{"a shell command", "busybox;rm -rf /", false},
		{"upper case", "Busybox", false},
		{"a space", "busy box", false},
		{"an empty tag", "busybox:", false},
		{"a bad digest", "busybox@sha256:xyz", false},
		{"a URL", "https://ghcr.io/owner/image", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			_, err := parse(t, dir, "--until", "x", "--image", tc.image)
			if tc.ok {
				if err != nil {
					t.Fatalf("--image %q refused: %v", tc.image, err)
				}
				return
			}
			var se *startupError
			if !errors.As(err, &se) || se.code != report.ErrBadInput || !strings.Contains(se.message, "--image") || !strings.Contains(se.message, "image reference") {
				t.Fatalf("--image %q: %v, want bad input naming --image", tc.image, err)
			}
			if err := os.WriteFile(filepath.Join(dir, ".goalrun.yml"), []byte("until: x\nimage: '"+tc.image+"'\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err = parse(t, dir)
			if !errors.As(err, &se) || se.code != report.ErrBadInput || !strings.Contains(se.message, ".goalrun.yml line 2") {
				t.Fatalf("image %q in a config file: %v, want bad input naming the file and line", tc.image, err)
			}
		})
	}
}

// TestMaxCostNeedsAnAgentThatReportsCost: a cost budget with an agent that
// reports no cost would never halt the run; it is bad input naming
// --max-tokens.
func TestMaxCostNeedsAnAgentThatReportsCost(t *testing.T) {
	for _, c := range []struct {
		agent string
		bad   bool
	}{{"codex", true}, {"gemini", true}, {"claude", false}} {
		t.Run(c.agent, func(t *testing.T) {
			_, err := parse(t, t.TempDir(), "--until", "true", "--agent", c.agent, "--max-cost-usd", "2")
			if !c.bad {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			se := asStartupError(err)
			if err == nil || se.code != report.ErrBadInput || !strings.Contains(se.message, "--max-tokens") || !strings.Contains(se.message, "--max-cost-usd") {
				t.Fatalf("err %v", err)
			}
		})
	}
	if _, err := parse(t, t.TempDir(), "--until", "true", "--agent", "codex", "--max-tokens", "1000"); err != nil {
		t.Errorf("--max-tokens with codex: %v", err)
	}
	// The command agent reports no usage at all: neither budget could
	// ever stop it.
	for _, flag := range []string{"--max-cost-usd", "--max-tokens"} {
		_, err := parse(t, t.TempDir(), "--until", "true", "--agent", "command", "--agent-bin", "sh fix.sh", flag, "2")
		se := asStartupError(err)
		if err == nil || se.code != report.ErrBadInput || !strings.Contains(se.message, flag) || !strings.Contains(se.message, "--max-iterations") {
			t.Errorf("command agent with %s: %v, want bad input naming %s and --max-iterations", flag, err, flag)
		}
	}
}

// TestModelGateway: --model-gateway (flag or config key) points the agent's
// model API upstream at the gateway, marked as a gateway, with the real
// key; the public API is not on the allowlist then; bad URLs are bad input.
func TestModelGateway(t *testing.T) {
	env := func(k string) (string, bool) {
		if k == "ANTHROPIC_API_KEY" {
			return "sk-gw", true
		}
		return "", false
	}
	dir := t.TempDir()
	c, err := parseRunArgs([]string{"--until", "true", "--model-gateway", "http://127.0.0.1:4000/"}, env, func() (string, error) { return dir, nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(c.upstreams) != 1 || c.upstreams[0].URL != "http://127.0.0.1:4000" || !c.upstreams[0].Gateway || c.upstreams[0].Key != "sk-gw" || c.upstreams[0].BaseURLEnv != "ANTHROPIC_BASE_URL" {
		t.Errorf("upstreams %+v", c.upstreams)
	}
	if sc := sandboxConfig(c); len(sc.AllowHosts) != 0 {
		t.Errorf("allowlist %v: the public API must not be reachable beside a gateway", sc.AllowHosts)
	}
	if err := os.WriteFile(filepath.Join(dir, ".goalrun.yml"), []byte("model-gateway: https://llm.corp.example/anthropic\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err = parseRunArgs([]string{"--until", "true"}, env, func() (string, error) { return dir, nil })
	if err != nil || c.modelGateway != "https://llm.corp.example/anthropic" || !contains(c.fileKeys, "model-gateway") {
		t.Errorf("from the config file: %q %v (%v)", c.modelGateway, c.fileKeys, err)
	}
	for _, bad := range []string{"ftp://x", "llm.corp:4000", "http://user:pw@llm.corp", "http://llm.corp/?key=1", "http://llm.corp/#x", "http://", "http://bad host/"} {
		if _, err := parse(t, t.TempDir(), "--until", "true", "--model-gateway", bad); err == nil || !strings.Contains(err.Error(), "--model-gateway") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if _, err := parse(t, t.TempDir(), "--until", "true", "--agent", "command", "--agent-bin", "true", "--model-gateway", "http://localhost:4000"); err == nil {
		t.Errorf("the command agent accepted a model gateway")
	}
}

// TestOutboundProxyFromEnvironment: goalrun's HTTPS_PROXY, HTTP_PROXY and
// NO_PROXY reach the Docker egress proxy (and only in egress mode); their
// passwords are redacted; a setting goalrun cannot use is bad input naming
// the variable, never echoing the password.
func TestOutboundProxyFromEnvironment(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		args    []string
		want    string // sandbox.Config's OutboundProxy, as egress.OutboundString says
		wantErr string
	}{
		{name: "none", env: map[string]string{"NO_PROXY": ".corp"}},
		{name: "upper and lower case", env: map[string]string{"https_proxy": "http://alice:pw-123456@proxy.corp:3128", "HTTP_PROXY": "proxy.corp:3128", "no_proxy": ".corp,10.0.0.0/8"},
			want: "https=http://proxy.corp:3128 http=proxy.corp:3128 no_proxy=.corp,10.0.0.0/8"},
		{name: "not with network bridge", env: map[string]string{"HTTPS_PROXY": "http://proxy.corp:3128"}, args: []string{"--network", "bridge"}},
		{name: "unusable", env: map[string]string{"HTTPS_PROXY": "ftp://alice:pw-123456@proxy.corp"}, wantErr: `HTTPS_PROXY: scheme "ftp" is not supported`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			dir := t.TempDir()
			c, err := parseRunArgs(append([]string{"--until", "true"}, tc.args...), env, func() (string, error) { return dir, nil })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "pw-123456") {
					t.Fatalf("error %v, want %q without the password", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := egress.OutboundString(sandboxConfig(c).OutboundProxy); got != tc.want {
				t.Errorf("outbound proxy %q, want %q", got, tc.want)
			}
			if strings.Contains(tc.env["https_proxy"], "pw-123456") && c.secrets["HTTPS_PROXY"] != "pw-123456" {
				t.Errorf("the proxy password is not among the redacted secrets: %v", c.secrets)
			}
		})
	}
}

// TestImageKeywords: --image host is the default sandbox (the host's
// system folders), --image minimal brings back the busybox image built from
// this machine's files; a real image of either name is given with its tag.
func TestImageKeywords(t *testing.T) {
	for _, tc := range []struct {
		image, ref string
		minimal    bool
	}{
		{"", "", false},
		{"host", "", false},
		{"minimal", "", true},
		{"minimal:latest", "minimal:latest", false},
		{"ghcr.io/owner/image:v1", "ghcr.io/owner/image:v1", false},
	} {
		t.Run(fmt.Sprintf("%q", tc.image), func(t *testing.T) {
			args := []string{"--until", "x"}
			if tc.image != "" {
				args = append(args, "--image", tc.image)
			}
			c, err := parse(t, t.TempDir(), args...)
			if err != nil {
				t.Fatal(err)
			}
			if c.image != tc.ref || c.minimalImage != tc.minimal {
				t.Errorf("image %q minimal %v, want %q %v", c.image, c.minimalImage, tc.ref, tc.minimal)
			}
			if got := sandboxConfig(c).Image; got != tc.ref {
				t.Errorf("sandbox image %q, want %q", got, tc.ref)
			}
		})
	}
}

// TestMountSetting: --mount HOST[:TARGET] is read-only, repeatable and a
// config key; bad input names the flag (or the file and line) and says
// what is wrong. The mount policy itself is applied when the sandbox starts
// (TestDefaultSandboxMounts, sandbox's TestMountPolicy).
func TestMountSetting(t *testing.T) {
	for _, tc := range []struct {
		name, value    string
		source, target string
		wantErr        string
	}{
		{"a host folder at its own path", "/opt/jdk-21", "/opt/jdk-21", "/opt/jdk-21", ""},
		{"at another path", "/srv/tools/jdk-21:/mnt/jdk", "/srv/tools/jdk-21", "/mnt/jdk", ""},
		{"docker's :ro", "/srv/jdk:/mnt/jdk:ro", "/srv/jdk", "/mnt/jdk", ""},
		{"read-write is refused", "/srv/jdk:/mnt/jdk:rw", "", "", "mounts are read-only"},
		{"an unknown option", "/srv/jdk:/mnt/jdk:z", "", "", `unknown option "z"`},
		{"a relative host path", "tools/jdk", "", "", "HOST tools/jdk must be an absolute path"},
		{"a relative target", "/srv/jdk:jdk", "", "", "TARGET jdk must be an absolute path"},
		{"the root", "/", "", "", "other than /"},
		{"an unclean path", "/srv/../etc", "", "", "write /etc"},
		{"empty", "", "", "", "write HOST[:TARGET]"},
		{"too many parts", "/a:/b:ro:x", "", "", "write HOST[:TARGET]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			c, err := parse(t, dir, "--until", "x", "--mount", tc.value)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				want := []sandbox.Mount{{Source: tc.source, Target: tc.target, ReadOnly: true, Name: "--mount " + tc.value}}
				if !reflect.DeepEqual(c.extraMounts, want) {
					t.Errorf("mounts %+v, want %+v", c.extraMounts, want)
				}
				return
			}
			var se *startupError
			if !errors.As(err, &se) || se.code != report.ErrBadInput || !strings.Contains(se.message, "--mount") || !strings.Contains(se.message, tc.wantErr) {
				t.Fatalf("--mount %q: %v, want bad input naming --mount and saying %q", tc.value, err, tc.wantErr)
			}
		})
	}
	t.Run("repeatable, and a config key", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, ".goalrun.yml"), []byte("until: x\nmount:\n  - /opt/a\n  - /srv/b:/mnt/b\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := parse(t, dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.extraMounts) != 2 || c.extraMounts[1].Target != "/mnt/b" || !reflect.DeepEqual(c.fileKeys, []string{"mount", "until"}) {
			t.Errorf("mounts %+v file keys %q", c.extraMounts, c.fileKeys)
		}
		c, err = parse(t, dir, "--mount", "/opt/c", "--mount", "/opt/d")
		if err != nil || len(c.extraMounts) != 2 || c.extraMounts[0].Source != "/opt/c" {
			t.Errorf("flags over the file: mounts %+v, %v", c.extraMounts, err)
		}
		if err := os.WriteFile(filepath.Join(dir, ".goalrun.yml"), []byte("until: x\nmount: tools\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = parse(t, dir)
		var se *startupError
		if !errors.As(err, &se) || !strings.Contains(se.message, `"mount" in `) || !strings.Contains(se.message, "line 2") {
			t.Errorf("a relative mount in the file: %v, want the file and line named", err)
		}
	})
	t.Run("not with the local sandbox", func(t *testing.T) {
		_, err := parse(t, t.TempDir(), "--until", "x", "--sandbox", "local", "--mount", "/opt/jdk")
		var se *startupError
		if !errors.As(err, &se) || se.code != report.ErrBadInput || !strings.Contains(se.message, "--mount applies to the Docker sandbox") {
			t.Errorf("%v", err)
		}
	})
}

// TestRootWorkspaceNamesTheFlag: a root-owned workspace refused by
// --workspace bind is bad input whose message and advice name the flag and
// config key that mend it, never the library's Config.User.
func TestRootWorkspaceNamesTheFlag(t *testing.T) {
	se := asSandboxError(fmt.Errorf("sandbox: starting: %w", &sandbox.RootWorkspaceError{Workspace: "/src"}))
	text := se.message + "\n" + strings.Join(se.suggestions, "\n")
	if se.code != report.ErrBadInput {
		t.Errorf("code %s, want %s", se.code, report.ErrBadInput)
	}
	for _, w := range []string{`--workspace bind`, `"/src"`, "belongs to root", "--workspace copy", "workspace: copy", "chown"} {
		if !strings.Contains(text, w) {
			t.Errorf("%q does not say %q", text, w)
		}
	}
	if strings.Contains(text, "Config.User") {
		t.Errorf("%q names Config.User, which users cannot set", text)
	}
}

// TestCommandAgentProgramMustExist: a mistyped program path of the command
// agent is bad input before anything starts, naming --agent-bin; what
// goalrun cannot check on this machine (a name on the sandbox's PATH, a
// path into the image, a path a setup step may create, a shell expansion)
// is left to the sandbox.
func TestCommandAgentProgramMustExist(t *testing.T) {
	dir := t.TempDir()
	mnt := t.TempDir()
	for _, f := range []string{filepath.Join(dir, "fix.sh"), filepath.Join(mnt, "tool.sh")} {
		if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/usr/local/bin/in-image", filepath.Join(dir, "link.sh")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		args    []string
		refused bool
	}{
		{"a mistyped relative path", []string{"--agent-bin", "./fixx.sh"}, true},
		{"a mistyped path with arguments", []string{"--agent-bin", "scripts/fix.sh --fast"}, true},
		{"an existing relative path", []string{"--agent-bin", "./fix.sh --fast"}, false},
		{"a link into the image", []string{"--agent-bin", "./link.sh"}, false},
		{"a missing file in a mounted folder", []string{"--mount", mnt + ":/mnt/tools", "--agent-bin", "/mnt/tools/tol.sh"}, true},
		{"an existing file in a mounted folder", []string{"--mount", mnt + ":/mnt/tools", "--agent-bin", "/mnt/tools/tool.sh"}, false},
		{"an absolute path in the image", []string{"--agent-bin", "/opt/fixer/run"}, false},
		{"a missing absolute path with the local sandbox", []string{"--sandbox", "local", "--agent-bin", filepath.Join(dir, "fixx.sh")}, true},
		{"a name on the sandbox's PATH", []string{"--agent-bin", "goalrun-no-such-fixer"}, false},
		{"a path a setup step may create", []string{"--setup", "make tools", "--agent-bin", "./bin/fixer"}, false},
		{"a shell expansion", []string{"--agent-bin", "$FIXER/run.sh"}, false},
		{"an assignment first", []string{"--agent-bin", "MODE=fast ./fixx.sh"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, dir, append([]string{"--agent", "command", "--until", "true"}, tc.args...)...)
			var se *startupError
			switch {
			case !tc.refused && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.refused && (!errors.As(err, &se) || se.code != report.ErrBadInput):
				t.Fatalf("err %v, want bad input", err)
			case tc.refused && (!strings.Contains(se.message, "--agent-bin") || !strings.Contains(se.message, "does not exist")):
				t.Errorf("message %q does not name --agent-bin and the missing program", se.message)
			}
		})
	}
}
