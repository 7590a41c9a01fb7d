package main

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// exampleSandboxTag is the tag the example workflows build their sandbox
// image under and pass as the image input.
const exampleSandboxTag = "goalrun-sandbox:ci"

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
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

// TestExampleWorkflowsSandboxImage: every example workflow builds the
// sandbox image from .github/goalrun/Dockerfile (a copy of
// examples/sandbox/Dockerfile, whose build arguments it uses) before the
// goalrun step and passes it as image; checkouts keep no token in
// .git/config; workflows that run with a write token for any commenter build
// the image from the default branch, never from the pull request; and the
// permissions are exactly the ones the README lists.
func TestExampleWorkflowsSandboxImage(t *testing.T) {
	dockerfile, err := os.ReadFile(filepath.Join("..", "..", "examples", "sandbox", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	args := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^ARG ([A-Z_]+)`).FindAllStringSubmatch(string(dockerfile), -1) {
		args[m[1]] = true
	}
	cases := []struct {
		file        string
		permissions map[string]string
		trusted     bool // the image must come from the default branch
	}{
		{file: "pr-check.yml", permissions: map[string]string{"contents": "read", "checks": "write", "pull-requests": "write"}},
		{file: "comment-bot.yml", permissions: map[string]string{"contents": "read", "checks": "write", "pull-requests": "write"}, trusted: true},
		{file: "nightly-fix.yml", permissions: map[string]string{"contents": "write", "checks": "write", "pull-requests": "write"}},
	}
	buildArg := regexp.MustCompile(`--build-arg ([A-Z_]+)=`)
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
			if !strings.Contains(string(b), "examples/sandbox/Dockerfile") || !strings.Contains(string(b), ".github/goalrun/Dockerfile") {
				t.Errorf("the header does not say to copy examples/sandbox/Dockerfile to .github/goalrun/Dockerfile")
			}
			goalruns := 0
			for name, job := range wf.Jobs {
				build, lastCheckout := -1, -1
				for i, st := range job.Steps {
					switch {
					case strings.HasPrefix(st.Uses, "actions/checkout@"):
						if st.With["persist-credentials"] != "false" {
							t.Errorf("job %s step %d: actions/checkout without persist-credentials: false", name, i+1)
						}
						if build < 0 {
							lastCheckout = i
						}
					case strings.Contains(st.Run, "docker build"):
						if !strings.Contains(st.Run, "docker build -t "+exampleSandboxTag+" -f .github/goalrun/Dockerfile") {
							t.Errorf("job %s step %d: %q does not build %s from .github/goalrun/Dockerfile", name, i+1, st.Run, exampleSandboxTag)
						}
						for _, m := range buildArg.FindAllStringSubmatch(st.Run, -1) {
							if !args[m[1]] {
								t.Errorf("job %s step %d: --build-arg %s is not an ARG of examples/sandbox/Dockerfile", name, i+1, m[1])
							}
						}
						for _, want := range []string{`SANDBOX_UID="$(id -u)"`, `SANDBOX_GID="$(id -g)"`} {
							if !strings.Contains(st.Run, want) {
								t.Errorf("job %s step %d: the build does not pass %s (the sandbox runs as the workspace's owner)", name, i+1, want)
							}
						}
						if tc.trusted {
							if lastCheckout < 0 || job.Steps[lastCheckout].With["ref"] != "${{ github.event.repository.default_branch }}" {
								t.Errorf("job %s: the image is built from a checkout that is not the default branch", name)
							}
						}
						build = i
					case strings.HasPrefix(st.Uses, "goalrun/goalrun@"):
						goalruns++
						if build < 0 {
							t.Errorf("job %s: the goalrun step comes before any sandbox image build", name)
						}
						if st.With["image"] != exampleSandboxTag {
							t.Errorf("job %s: goalrun's image input is %q, want %s", name, st.With["image"], exampleSandboxTag)
						}
					}
				}
			}
			if goalruns == 0 {
				t.Error("no goalrun/goalrun step")
			}
			if tc.trusted {
				events := slices.Collect(maps.Keys(wf.On))
				if !slices.Contains(events, "issue_comment") {
					t.Errorf("events %v: the trusted case is the comment bot", events)
				}
			}
		})
	}
}
