package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rhysd/actionlint"
	"gopkg.in/yaml.v3"

	ghsink "github.com/goalrun/goalrun/report/github"
)

var updateReadme = flag.Bool("update-readme", false, "rewrite README.md's GitHub Action section from action.yml")

// The README section this file owns is between these markers; the rest of
// README.md belongs to others and is never touched.
const (
	readmeStart = "<!-- goalrun:action-section:start (generated from action.yml by go test ./cmd/goalrun -run TestActionMetadataInSync -update-readme) -->"
	readmeEnd   = "<!-- goalrun:action-section:end -->"
)

type metaEntry struct {
	name, description, def string
}

// orderedMeta reads action.yml's inputs and outputs in file order.
func orderedMeta(t *testing.T) (inputs, outputs []metaEntry, runs map[string]string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		t.Fatal(err)
	}
	top := root.Content[0]
	runs = map[string]string{}
	for i := 0; i+1 < len(top.Content); i += 2 {
		key, val := top.Content[i].Value, top.Content[i+1]
		switch key {
		case "inputs", "outputs":
			for j := 0; j+1 < len(val.Content); j += 2 {
				e := metaEntry{name: val.Content[j].Value}
				fields := val.Content[j+1]
				for k := 0; k+1 < len(fields.Content); k += 2 {
					switch fields.Content[k].Value {
					case "description":
						e.description = fields.Content[k+1].Value
					case "default":
						e.def = fields.Content[k+1].Value
					}
				}
				if key == "inputs" {
					inputs = append(inputs, e)
				} else {
					outputs = append(outputs, e)
				}
			}
		case "runs":
			for k := 0; k+1 < len(val.Content); k += 2 {
				runs[val.Content[k].Value] = val.Content[k+1].Value
			}
		}
	}
	return inputs, outputs, runs
}

func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// readmeSection renders the README's GitHub Action section from action.yml.
func readmeSection(inputs, outputs []metaEntry) string {
	var b strings.Builder
	b.WriteString(readmeStart + "\n")
	b.WriteString(`## GitHub Action

goalrun is also a container action (` + "`runs: using: docker, image: Dockerfile`" + `): ` + "`goalrun action`" + ` runs the same
engine as ` + "`goalrun run`" + `, with a live check run on the pull request's head commit, one sticky pull request comment,
the report and a mermaid chart of the iteration timings in the job summary, and step outputs. Workflows for a pull
request check, a ` + "`/goalrun`" + ` comment bot and a nightly fix job over a matrix are in
[examples/workflows](examples/workflows). In them ` + "`goalrun/goalrun@v1`" + ` stands for the release you use: pin a release
tag or, better, a full commit SHA of this repository.

**The sandbox image.** The action's container is a static goalrun on ` + "`scratch`" + `: it has no agent CLI, no shell and
no Go. Without ` + "`image:`" + ` goalrun would build its small default image from the files where it runs and mount the
agent from ` + "`PATH`" + `, which works on a developer's machine but not in the action (the run stops at once with an error
that says so). So every workflow builds a sandbox image first and passes it: copy
[examples/sandbox/Dockerfile](examples/sandbox/Dockerfile) (Node.js, Claude Code and Codex pinned, Go, git, bash, a
non-root user, the repository's Go modules for the offline check) to ` + "`.github/goalrun/Dockerfile`" + ` and add, after
` + "`actions/checkout`" + `:

` + "```yaml" + `
      - name: Build the sandbox image
        run: >-
          docker build -t goalrun-sandbox:ci -f .github/goalrun/Dockerfile
          --build-arg SANDBOX_UID="$(id -u)" --build-arg SANDBOX_GID="$(id -g)" .
      - uses: goalrun/goalrun@v1
        with:
          image: goalrun-sandbox:ci
` + "```" + `

The runner mounts its Docker socket into container actions, so goalrun's container uses the runner's own Engine: the
image built in the step before is found by its local tag, nothing is pushed or pulled, and the workspace is mounted
into the sandbox by its host path. ` + "`SANDBOX_UID`/`SANDBOX_GID`" + ` make the image's user the workspace's owner (the
runner user, uid 1001 on GitHub-hosted runners), which is the user goalrun runs the sandbox as. The image must
contain the agent CLI and everything the check needs offline: the check runs in a fresh container with no network.
In the comment bot the image is built from the default branch, never from the pull request, because that workflow
holds a write token before goalrun has checked who commented. The examples check out with
` + "`persist-credentials: false`" + ` so that no token sits in ` + "`.git/config`" + ` where the agent could read it.

**Permissions.** Each example sets the minimal ` + "`permissions:`" + ` for the API calls goalrun makes:

| workflow | permissions | what for |
|---|---|---|
| pull request check | ` + "`contents: read`, `checks: write`, `pull-requests: write`" + ` | checkout; the check run; the sticky comment |
| comment bot | ` + "`contents: read`, `checks: write`, `pull-requests: write`" + ` | as above, plus reading the pull request's head commit (` + "`issue_comment`" + ` payloads lack it) and the reply to the comment; add ` + "`issues: write`" + ` only to answer on plain issues |
| nightly fix pull requests | ` + "`contents: write`, `checks: write`, `pull-requests: write`" + ` | the fix branch and commit (Git Data API); the check run per target; opening or updating the fix pull request |

The model API key comes from the step's ` + "`env:`" + ` (for example ` + "`ANTHROPIC_API_KEY: ${{ secrets.ANTHROPIC_API_KEY }}`" + `); it is
masked in the log and, in ` + "`egress`" + ` mode, never enters the sandbox. A check run or comment the token may not write
(pull requests from forks get a read-only token) is a warning: the job summary carries the report and the exit code is
still decided by the goal alone. Only comment authors with write access (owner, member, collaborator) or bots listed in
` + "`allowed-bots`" + ` can start a run; others get a polite reply as a new comment, which never replaces the report's
comment (with ` + "`comment: off`" + `, only a notice in the log and the job summary). A sticky comment is edited only when
goalrun wrote it: its author must be the token's own identity (` + "`github-actions[bot]`" + ` for the ` + "`GITHUB_TOKEN`" + `, the app
of an app token, the user of a personal access token), never another bot or a person quoting the marker. A fix pull
request is opened only when the goal passed, the verdict is grounded and the workspace changed; it is committed
through the Git Data API (the host's git never runs in the tree the agent wrote) and changes under
` + "`.github/workflows/`" + ` are never pushed, only reported.

### Inputs

| input | default | description |
|---|---|---|
`)
	for _, in := range inputs {
		def := "—"
		if in.def != "" {
			def = "`" + mdCell(in.def) + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", in.name, def, mdCell(in.description))
	}
	b.WriteString("\n### Outputs\n\n| output | description |\n|---|---|\n")
	for _, out := range outputs {
		fmt.Fprintf(&b, "| `%s` | %s |\n", out.name, mdCell(out.description))
	}
	b.WriteString(readmeEnd + "\n")
	return b.String()
}

var tableRow = regexp.MustCompile("(?m)^\\| `([a-z-]+)` \\|")

// TestActionMetadataInSync keeps action.yml, README.md's tables and the
// code's lists of inputs and outputs identical (names, order, and the
// README's defaults and descriptions).
func TestActionMetadataInSync(t *testing.T) {
	inputs, outputs, runs := orderedMeta(t)
	var code []string
	for _, in := range actionInputs {
		code = append(code, in.name)
	}
	var yml []string
	for _, in := range inputs {
		yml = append(yml, in.name)
	}
	if strings.Join(code, ",") != strings.Join(yml, ",") {
		t.Errorf("inputs differ:\n action.yml: %v\n action.go:  %v", yml, code)
	}
	var ymlOut []string
	for _, o := range outputs {
		ymlOut = append(ymlOut, o.name)
	}
	if strings.Join(ghsink.Outputs, ",") != strings.Join(ymlOut, ",") {
		t.Errorf("outputs differ:\n action.yml:        %v\n report/github code: %v", ymlOut, ghsink.Outputs)
	}
	for _, want := range []string{
		"agent", "prompt", "prompt-file", "until", "infer-until", "max-iterations", "timeout-minutes", "max-cost-usd",
		"sandbox", "image", "network", "allow-hosts", "model", "agent-args", "working-directory", "config",
		"github-token", "check-name", "comment", "open-pr", "pr-branch-prefix", "base-branch", "trigger-phrase", "allowed-bots",
	} {
		if !strings.Contains(","+strings.Join(yml, ",")+",", ","+want+",") {
			t.Errorf("action.yml lacks the input %s that issue 6 lists", want)
		}
	}
	if runs["using"] != "docker" || runs["image"] != "Dockerfile" {
		t.Errorf("runs = %v, want using: docker, image: Dockerfile", runs)
	}

	readmePath := filepath.Join("..", "..", "README.md")
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	want := readmeSection(inputs, outputs)
	start, end := bytes.Index(readme, []byte(readmeStart)), bytes.Index(readme, []byte(readmeEnd))
	if *updateReadme {
		var updated []byte
		if start < 0 || end < start {
			updated = append(append(bytes.TrimRight(readme, "\n"), "\n\n"...), want...)
		} else {
			updated = append(append(append([]byte{}, readme[:start]...), want...), readme[end+len(readmeEnd)+1:]...)
		}
		if err := os.WriteFile(readmePath, updated, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if start < 0 || end < start {
		t.Fatalf("README.md has no GitHub Action section between %q and %q (go test ./cmd/goalrun -run TestActionMetadataInSync -update-readme adds it)", readmeStart, readmeEnd)
	}
	got := string(readme[start : end+len(readmeEnd)+1])
	if got != want {
		t.Errorf("README.md's GitHub Action section is out of date with action.yml (rerun with -update-readme):\n--- got\n%s\n--- want\n%s", got, want)
	}
	// And the table rows themselves name exactly the inputs then the outputs.
	var rows []string
	for _, m := range tableRow.FindAllStringSubmatch(got, -1) {
		rows = append(rows, m[1])
	}
	if strings.Join(rows, ",") != strings.Join(append(yml, ymlOut...), ",") {
		t.Errorf("README table rows %v, want %v", rows, append(yml, ymlOut...))
	}
}

// TestActionlint runs rhysd/actionlint on every example workflow and on a
// workflow that uses the action from this repository (`uses: ./`) with
// every input, which makes actionlint parse and check action.yml itself.
func TestActionlint(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	linter, err := actionlint.NewLinter(&out, &actionlint.LinterOptions{WorkingDir: root})
	if err != nil {
		t.Fatal(err)
	}
	project, err := actionlint.NewProject(root)
	if err != nil {
		t.Fatal(err)
	}
	examples, err := filepath.Glob(filepath.Join(root, "examples", "workflows", "*.yml"))
	if err != nil || len(examples) < 3 {
		t.Fatalf("examples/workflows: %v, %v (want the PR check, the comment bot and the nightly fix)", examples, err)
	}
	for _, f := range examples {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		errs, err := linter.Lint(f, b, project)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, e := range errs {
			t.Errorf("%s:%d:%d: %s [%s]", filepath.Base(f), e.Line, e.Column, e.Message, e.Kind)
		}
		if !bytes.Contains(b, []byte("\npermissions:")) {
			t.Errorf("%s has no top-level permissions: block", filepath.Base(f))
		}
	}

	var wf strings.Builder
	wf.WriteString("name: self\non: [pull_request]\npermissions:\n  contents: read\njobs:\n  goalrun:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n      - uses: ./\n        with:\n")
	for _, in := range actionInputs {
		fmt.Fprintf(&wf, "          %s: \"x\"\n", in.name)
	}
	wf.WriteString("      - uses: ./\n        with:\n          not-an-input: x\n")
	errs, err := linter.Lint(filepath.Join(root, ".github", "workflows", "self.yml"), []byte(wf.String()), project)
	if err != nil {
		t.Fatal(err)
	}
	// Exactly one error: the undeclared input, which proves actionlint read
	// action.yml; anything else is a problem with action.yml.
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Message)
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Message, "not-an-input") {
		t.Errorf("actionlint on a workflow using ./ with every input: %q, want exactly the error about not-an-input", msgs)
	}
}
