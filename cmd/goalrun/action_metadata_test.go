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

// readmeSection renders the README's GitHub Action section from action.yml
// (the tables) and examples/workflows/minimal.yml (shown verbatim).
func readmeSection(inputs, outputs []metaEntry) string {
	minimal, err := os.ReadFile(filepath.Join("..", "..", "examples", "workflows", "minimal.yml"))
	if err != nil {
		minimal = []byte("# examples/workflows/minimal.yml: " + err.Error() + "\n")
	}
	var b strings.Builder
	b.WriteString(readmeStart + "\n")
	b.WriteString(strings.Replace(`## GitHub Action

Adopting goalrun in a repository takes two steps after `+"`"+`actions/checkout`+"`"+`: install the agent's CLI (skip it when the
runner has it) and `+"`"+`uses: goalrun/goalrun@v1`+"`"+` with the model key and the check. This is the whole workflow
([examples/workflows/minimal.yml](examples/workflows/minimal.yml)):

`+"`"+``+"`"+``+"`"+`yaml
{{minimal}}`+"`"+``+"`"+``+"`"+`

It gives a live check run named `+"`"+`goalrun verdict`+"`"+` on the pull request's head commit, a comment with the report, the
report in the job summary, and step outputs. In branch protection, require `+"`"+`goalrun verdict`+"`"+` (the `+"`"+`check-name`+"`"+`
input): it carries goalrun's conclusion. The job's own check (`+"`"+`goalrun`+"`"+` here, named after the job) only says the
step ran: it is green whenever the goal was met, verified or not. More workflows — a pull request check that gates on `+"`"+`verified`+"`"+`, a `+"`"+`/goalrun`+"`"+` comment bot,
a nightly fix job over a matrix — are in [examples/workflows](examples/workflows). `+"`"+`goalrun/goalrun@v1`+"`"+` follows the
latest v1 release; pin a release's full commit SHA to fix the exact code and binary you run.

**How the action runs.** It is a composite action that runs a released, static goalrun **on the runner itself**, not
in a container. The release workflow ([.github/workflows/release.yml](.github/workflows/release.yml)) builds goalrun
with [.ci/build-release](.ci/build-release) for **Linux on amd64 and arm64** — the only platforms goalrun runs on: its
sandbox is a Linux Docker Engine's containers and goalrun itself uses Linux kernel features, so use `+"`"+`runs-on:
ubuntu-latest`+"`"+` or a Linux self-hosted runner with Docker (on a macOS or Windows runner the action stops with an error
saying so). CI runs the same script on every change, so a release cannot fail to build. The workflow publishes the
binaries with a GitHub release and commits their SHA-256 sums (`+"`"+`dist/SHA256SUMS`+"`"+`, with `+"`"+`dist/VERSION`+"`"+`) on the
release commit; [action/launch.sh](action/launch.sh) downloads the binary for the runner (14.6 MB on linux/amd64, 13.5 MB on arm64), refuses it unless
its SHA-256 is the one listed (it needs `+"`"+`curl`+"`"+` or `+"`"+`wget`+"`"+` and `+"`"+`sha256sum`+"`"+` or `+"`"+`shasum`+"`"+`, and says which is
missing), keeps it in the runner's tool cache and starts `+"`"+`goalrun action`+"`"+` — seconds, with nothing to build. Pinning a release commit by SHA therefore pins the
binary too. A ref that is not a release (a branch, a fork) has no `+"`"+`dist/`+"`"+`: goalrun is then built from the action's
checkout with the runner's Go (`+"`"+`actions/setup-go`+"`"+`), which takes a minute and says so in a notice.

Running on the runner is the point: goalrun sees the runner's `+"`"+`PATH`+"`"+` and toolchains — what `+"`"+`actions/setup-go`+"`"+`,
`+"`"+`setup-node`+"`"+` or the runner image installed — and its default sandbox mounts the runner's system and toolchain folders
read-only, so the check (`+"`"+`go test ./...`+"`"+`) finds the same Go the rest of the job uses, and the agent CLI installed by
`+"`"+`npm install --global`+"`"+` is found on `+"`"+`PATH`+"`"+`. A container action gets neither the runner's `+"`"+`PATH`+"`"+` nor its toolchains:
every project would have to build an image holding its agent CLI and toolchain first. Pass `+"`"+`image:`+"`"+` only for a
toolchain the runner does not have. The sandbox is the runner's Docker Engine (GitHub's Ubuntu runners have one); the
agent and every check run in its hardened containers, as with `+"`"+`goalrun run`+"`"+`.

**The report.** The check run, the comment and the job summary carry the same report: the headline (met or not,
grounded or not), one line saying what to do next (merge the fix pull request; apply the diff, since a change left
on the runner is thrown away with it; read the failing check; raise a budget …), links to the job run and to the fix
pull request or branch, the changed files with their +/− counts, the diff (collapsed, cut to fit), then the agent's
summary, the iterations, the tool calls, unverified claims, risky paths, the sandbox's posture and the goalrun/1
document. The job summary adds a chart of the iteration timings when there are two agent turns or more to compare.
A `+"`"+`/goalrun`+"`"+` comment gets an 👀 reaction and a "working on it" reply at once, naming who asked for what; that reply
becomes the trigger's report, so a second `+"`"+`/goalrun`+"`"+` never overwrites the first's.

**Permissions.** Each example sets the minimal `+"`"+`permissions:`+"`"+` for the API calls goalrun makes:

| workflow | permissions | what for |
|---|---|---|
| minimal, pull request check | `+"`"+`contents: read`+"`"+`, `+"`"+`checks: write`+"`"+`, `+"`"+`pull-requests: write`+"`"+` | checkout; the check run; the comment |
| comment bot | `+"`"+`contents: write`+"`"+`, `+"`"+`checks: write`+"`"+`, `+"`"+`pull-requests: write`+"`"+` | as above, plus reading the pull request's head commit (`+"`"+`issue_comment`+"`"+` payloads lack it), the replies to the comment, and the fix branch and pull request of `+"`"+`open-pr`+"`"+`; add `+"`"+`issues: write`+"`"+` only to answer on plain issues |
| nightly fix pull requests | `+"`"+`contents: write`+"`"+`, `+"`"+`checks: write`+"`"+`, `+"`"+`pull-requests: write`+"`"+` | the fix branch and commit (Git Data API); the check run per target; opening or updating the fix pull request |

The model API key comes from the step's `+"`"+`env:`+"`"+` (for example `+"`"+`ANTHROPIC_API_KEY: ${{ secrets.ANTHROPIC_API_KEY }}`+"`"+`); it is
masked in the log and, in `+"`"+`egress`+"`"+` mode, never enters the sandbox. The examples check out with
`+"`"+`persist-credentials: false`+"`"+`: goalrun talks to the API with `+"`"+`github-token`+"`"+` and needs no git credentials. A pull request
from a fork is recognised from the event's payload: GitHub gives its workflows a read-only token and no secrets, so
goalrun makes no check run, comment or pull request there, says so in one notice, and the job summary carries the
report. Any other check run or comment the token may not write is a warning naming the missing permission; the exit
code is still decided by the goal alone. A completion of the check run that GitHub refuses is
retried with a minimal body, then replaced by a new completed check run of the same name; if even that fails, the step
fails with an error saying the check run is left `+"`"+`in_progress`+"`"+`, never silently. Only people with the write, maintain or
admin role on the repository, by GitHub's collaborator permission API, or bots listed in `+"`"+`allowed-bots`+"`"+` can start a
run (a comment's `+"`"+`author_association`+"`"+` is not a permission — a private organisation's members arrive as
`+"`"+`CONTRIBUTOR`+"`"+` — and decides only when that API refuses, with a warning); others get a polite reply as a new
comment, which never replaces the report's comment (with `+"`"+`comment: off`+"`"+`, only a notice in the log and the job summary).
A sticky comment is edited only when goalrun wrote it: its author must be the token's own identity
(`+"`"+`github-actions[bot]`+"`"+` for the `+"`"+`GITHUB_TOKEN`+"`"+`, the app of an app token, the user of a personal access token), never
another bot or a person quoting the marker. A fix pull request (`+"`"+`open-pr`+"`"+`) is opened only when the goal passed, the verdict is
grounded and the agent changed files. It holds only the agent's change — the paths goalrun's change tracker saw the
agent change, as the workspace holds them, less the new files the repository's `+"`"+`.gitignore`+"`"+` files or
`+"`"+`.git/info/exclude`+"`"+` ignore (bytecode caches, test binaries, build outputs, installed packages), which git would
not commit either and which the pull request names — laid on the commit the run started from, and goes into the branch the
run started from: on a pull request or a `+"`"+`/goalrun`+"`"+` comment on one, the pull request's head commit and head branch
(never the pull request author's own commits again; a fork's head branch cannot be pushed to, so there the change
stays in the report). When the workspace held another commit than that head — `+"`"+`pull_request`+"`"+`'s merge checkout, or a
head the author pushed to after the comment bot's checkout — the fix is laid on the head only if every file the agent
changed is the same in both commits (so neither the base's lines nor a revert of the author's new commit ride along);
otherwise nothing is pushed and the report says why: for a fix tested exactly as it is pushed, check out the head
(`+"`"+`ref: ${{ github.event.pull_request.head.sha }}`+"`"+`). A workspace that holds the workflow's own commit instead of the pull
request's code (`+"`"+`pull_request_target`+"`"+`'s default checkout, or a comment workflow that did not check out the pull request)
gets no fix pull request: the agent fixed the base branch, not the pull request. On `+"`"+`workflow_dispatch`+"`"+`, `+"`"+`schedule`+"`"+` or `+"`"+`push`+"`"+`, the fix goes on the
commit the workspace holds, into its branch (the branch `+"`"+`HEAD`+"`"+` is on, else the workflow's). A `+"`"+`/goalrun`+"`"+` comment on a
plain issue gets a branch of its own per issue (`+"`"+`<prefix>/issue-N-<slug>`+"`"+`) and a pull request into the default branch
whose body starts "Fixes #N", so merging it closes the issue. It is committed through the Git Data API (the host's git never runs in the tree
the agent wrote) and changes under `+"`"+`.github/workflows/`+"`"+` are never pushed, only reported.

**Fix pull requests and the `+"`"+`GITHUB_TOKEN`+"`"+`.** GitHub lets the workflow's `+"`"+`GITHUB_TOKEN`+"`"+` open a pull request only when the
repository (and its organisation) allow it: Settings → Actions → General → Workflow permissions → "Allow GitHub
Actions to create and approve pull requests", which new repositories have off. Without it GitHub answers 403 "GitHub
Actions is not permitted to create or approve pull requests" after the fix branch was pushed: goalrun warns naming
that setting, and the report links the branch's page that opens the pull request by hand. A pull request opened with
the `+"`"+`GITHUB_TOKEN`+"`"+` also starts no workflow (GitHub's guard against runs starting runs), so the fix pull request's own
checks run only after a later push to it. To have them run, give `+"`"+`github-token`+"`"+` a GitHub App installation token (for
example from `+"`"+`actions/create-github-app-token`+"`"+`) or a personal token with `+"`"+`contents: write`+"`"+` and `+"`"+`pull-requests: write`+"`"+`.

**Which commit is checked.** Before the agent runs, goalrun reads the commit the workspace holds from its `+"`"+`.git`+"`"+`
(`+"`"+`HEAD`+"`"+` and the branch's ref, read as files: git never runs in the checkout, and a link out of `+"`"+`.git`+"`"+` or a FIFO
there is refused) and puts the check run only on a commit that was tested. On a pull request (or a comment or review
on one) that is its head commit, when the checkout is the head or, on `+"`"+`pull_request`+"`"+`, GitHub's merge of it into the
base (the default checkout; GitHub's own workflow checks report that merge on the head too). Any other checkout —
`+"`"+`pull_request_target`+"`"+`'s default, which is the base branch, or a head that moved on after a comment bot's checkout —
gets no check run and a warning saying what to check out; the comment and the job summary still carry the report.
On `+"`"+`push`+"`"+`, `+"`"+`schedule`+"`"+` and `+"`"+`workflow_dispatch`+"`"+` the check run is on the checked-out commit. A `+"`"+`/goalrun`+"`"+` comment on a
plain issue gets no check run: its checkout is the default branch's tip, which the issue is not about, and a failing
run must not turn that branch red. A workspace without `+"`"+`.git`+"`"+` (a checkout without git) is taken to hold `+"`"+`GITHUB_SHA`+"`"+`.

**What the check run's conclusion says.** It is about the commit it is on. When the goal was met only with the
agent's change (it changed files git would commit), that commit's own code failed the check, whether the change is
left in the discarded workspace or sent as a fix pull request: the check run concludes `+"`"+`action_required`+"`"+` ("goal met
only with the agent's change…"), so a required check blocks the merge until the fix is on the branch and a new run
passes; the document, the job and the `+"`"+`conclusion`+"`"+` output keep the run's own verdict. A check that passed before any
agent turn is `+"`"+`success`+"`"+`. GitHub lets a required check through on `+"`"+`success`+"`"+`, `+"`"+`neutral`+"`"+` or `+"`"+`skipped`+"`"+`: a `+"`"+`neutral`+"`"+` goalrun check
(the commit passed, but not verified: a judge decided, or the check's output showed no test ran) does not block a
merge. Where only a verified pass may merge, require the job's own check and end the job red when
`+"`"+`steps.<id>.outputs.verified != 'true'`+"`"+`.

**Outputs.** Gate later steps on `+"`"+`verified`+"`"+`: it is `+"`"+`true`+"`"+` only for a pass grounded in goalrun's own check with the
check's files untouched (`+"`"+`passed`+"`"+` is also true for a judge's word or a weakened test). Every verdict output is empty
when no run started (bad input, or a comment that started nothing), so an empty value never reads as "false".

### Inputs

| input | default | description |
|---|---|---|
`, "{{minimal}}", string(minimal), 1))
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
		"sandbox", "image", "network", "allow-hosts", "mounts", "model", "agent-args", "working-directory", "config",
		"github-token", "check-name", "comment", "open-pr", "pr-branch-prefix", "base-branch", "trigger-phrase", "allowed-bots",
	} {
		if !strings.Contains(","+strings.Join(yml, ",")+",", ","+want+",") {
			t.Errorf("action.yml lacks the input %s that issue 6 lists", want)
		}
	}
	if runs["using"] != "composite" {
		t.Errorf("runs = %v, want using: composite (goalrun runs on the runner)", runs)
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
