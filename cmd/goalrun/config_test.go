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

	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/sandbox"
)

// TestSettingsAreOneList keeps the flags, the YAML keys and the merge table
// identical: every setting is settable both ways under one name.
func TestSettingsAreOneList(t *testing.T) {
	var names []string
	for _, f := range fields {
		names = append(names, f.name)
	}
	sort.Strings(names)
	var flags []string
	for _, n := range flagNames() {
		if n != "config" && n != "no-config" {
			flags = append(flags, n)
		}
	}
	var keys []string
	ft := reflect.TypeOf(fileConfig{})
	for i := 0; i < ft.NumField(); i++ {
		keys = append(keys, ft.Field(i).Tag.Get("yaml"))
	}
	sort.Strings(keys)
	if !reflect.DeepEqual(names, flags) {
		t.Errorf("fields %v\nflags  %v", names, flags)
	}
	if !reflect.DeepEqual(names, keys) {
		t.Errorf("fields %v\nyaml   %v", names, keys)
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
			yaml: "until: go test ./...\nagent: command\nagent-bin: ./fix.sh\nagent-arg: one\nallow-host: [a.example:443, b.example]\n" +
				"max-iterations: 3\ntimeout: 1h30m\nstep-timeout: 90s\nmax-cost-usd: 2.5\nmax-tokens: 100000\nnetwork: egress\njson: true\nprompt-file: task.md\n",
			check: func(t *testing.T, c runConfig) {
				if c.until != "go test ./..." || c.agent != "command" || c.maxIterations != 3 || c.timeout != 90*time.Minute ||
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
		{name: "no-config skips the workdir's file", yaml: "until: x\nsandbox: local\n", args: []string{"--no-config", "--until", "y"}, check: func(t *testing.T, c runConfig) {
			if c.until != "y" || c.sandbox != defaultSandbox || c.configFile != "" {
				t.Errorf("until %q sandbox %q config %q: the file was read", c.until, c.sandbox, c.configFile)
			}
		}},
		{name: "a second document start only", yaml: "until: x\n---\n", check: func(t *testing.T, c runConfig) {}, args: []string{"--until", "x"}},
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
		return nil, fmt.Errorf("%w: the workspace \"/src\" belongs to root", sandbox.ErrRootWorkspace)
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
	c, err := parse(t, dir, "--until", "x", "--allow-host", "API.Example.com", "--allow-host", "*.pkg.dev:8443")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.allowHosts, []string{"api.example.com:443", "*.pkg.dev:8443"}) {
		t.Errorf("allow hosts %q", c.allowHosts)
	}
	for _, bad := range []string{"https://x.com", "x.com/path", "10.0.0.1", "localhost", "x.com:0", "x.com:70000"} {
		if _, err := parse(t, dir, "--until", "x", "--allow-host", bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
