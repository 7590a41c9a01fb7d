package main

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// exampleWorkflow is the part of a workflow file these tests read.
type exampleWorkflow struct {
	On          map[string]any    `yaml:"on"`
	Permissions map[string]string `yaml:"permissions"`
	Jobs        map[string]struct {
		Steps []struct {
			Name string            `yaml:"name"`
			Uses string            `yaml:"uses"`
			Run  string            `yaml:"run"`
			With map[string]string `yaml:"with"`
			Env  map[string]string `yaml:"env"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

// TestExampleWorkflows: every example workflow adopts goalrun without a
// Dockerfile or an image build — checkout, the agent's CLI installed from
// npm at the version CI tests (agentInstall), goalrun/goalrun@v1 with the
// model key from a secret in the step's env — checks out with no token
// left in .git/config, and has exactly the permissions the README lists.
func TestExampleWorkflows(t *testing.T) {
	cases := []struct {
		file        string
		permissions map[string]string
		keyEnv      string
		agent       string
	}{
		{file: "minimal.yml", permissions: map[string]string{"contents": "read", "checks": "write", "pull-requests": "write"}, keyEnv: "ANTHROPIC_API_KEY", agent: "claude"},
		{file: "pr-check.yml", permissions: map[string]string{"contents": "read", "checks": "write", "pull-requests": "write"}, keyEnv: "ANTHROPIC_API_KEY", agent: "claude"},
		{file: "comment-bot.yml", permissions: map[string]string{"contents": "write", "checks": "write", "pull-requests": "write"}, keyEnv: "ANTHROPIC_API_KEY", agent: "claude"},
		{file: "nightly-fix.yml", permissions: map[string]string{"contents": "write", "checks": "write", "pull-requests": "write"}, keyEnv: "OPENAI_API_KEY", agent: "codex"},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("..", "..", "examples", "workflows", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			var wf exampleWorkflow
			if err := yaml.Unmarshal(b, &wf); err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(wf.Permissions, tc.permissions) {
				t.Errorf("permissions %v, want %v", wf.Permissions, tc.permissions)
			}
			goalruns := 0
			for name, job := range wf.Jobs {
				installed, checkedOut := false, false
				for i, st := range job.Steps {
					if strings.Contains(st.Run, "docker build") || st.With["image"] != "" {
						t.Errorf("job %s step %d builds or names a sandbox image; adoption must not need one", name, i+1)
					}
					switch {
					case strings.HasPrefix(st.Uses, "actions/checkout@"):
						checkedOut = true
						if st.With["persist-credentials"] != "false" {
							t.Errorf("job %s step %d: actions/checkout without persist-credentials: false", name, i+1)
						}
					case st.Run == agentInstall[tc.agent]:
						installed = true
					case strings.HasPrefix(st.Uses, "goalrun/goalrun@"):
						goalruns++
						if !checkedOut || !installed {
							t.Errorf("job %s: goalrun runs before the checkout (%v) or the agent's install step %q (%v)", name, checkedOut, agentInstall[tc.agent], installed)
						}
						if st.Env[tc.keyEnv] != "${{ secrets."+tc.keyEnv+" }}" {
							t.Errorf("job %s: the goalrun step's env has %s=%q, want it from the secret", name, tc.keyEnv, st.Env[tc.keyEnv])
						}
						if a := st.With["agent"]; a != "" && a != tc.agent {
							t.Errorf("job %s: agent %q, want %q", name, a, tc.agent)
						}
					}
				}
			}
			if goalruns != 1 {
				t.Errorf("%d goalrun/goalrun steps, want 1", goalruns)
			}
			if tc.file == "comment-bot.yml" {
				events := slices.Collect(maps.Keys(wf.On))
				if !slices.Contains(events, "issue_comment") || !slices.Contains(events, "pull_request_review_comment") {
					t.Errorf("events %v: the comment bot answers both kinds of comment", events)
				}
			}
		})
	}
}

// TestMinimalWorkflowIsTwoSteps: the README's minimal workflow is
// examples/workflows/minimal.yml, verbatim, and it is the adoption the
// README promises: actions/checkout, the agent CLI's npm install, and
// goalrun/goalrun@v1 with the key and the check — nothing else.
func TestMinimalWorkflowIsTwoSteps(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "workflows", "minimal.yml"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```yaml\n"+string(b)+"```\n") {
		t.Error("README.md does not show examples/workflows/minimal.yml verbatim in a yaml block")
	}
	var wf exampleWorkflow
	if err := yaml.Unmarshal(b, &wf); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, job := range wf.Jobs {
		for _, st := range job.Steps {
			switch {
			case strings.HasPrefix(st.Uses, "actions/checkout@"):
				kinds = append(kinds, "checkout")
			case st.Run == agentInstall["claude"]:
				kinds = append(kinds, "install the agent")
			case strings.HasPrefix(st.Uses, "goalrun/goalrun@v1"):
				kinds = append(kinds, "goalrun")
				if len(st.With) != 1 || st.With["until"] == "" {
					t.Errorf("goalrun's with: %v, want only the check", st.With)
				}
			default:
				kinds = append(kinds, "other: "+st.Uses+st.Run)
			}
		}
	}
	if got := strings.Join(kinds, ", "); got != "checkout, install the agent, goalrun" {
		t.Errorf("steps: %s", got)
	}
}
