package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rhysd/actionlint"
	"gopkg.in/yaml.v3"

	"github.com/goalrun/goalrun/report/ghreport"
)

var updateReadme = flag.Bool("update-readme", false, "rewrite README.md's generated blocks: the minimal workflow and the action's tables")

// The README blocks this file owns lie between these markers; the rest of
// README.md, the prose around them included, belongs to others and is
// never touched.
const (
	readmeWorkflowStart = "<!-- goalrun:minimal-workflow:start (generated from examples/workflows/minimal.yml by go test ./cmd/goalrun -run TestActionMetadataInSync -update-readme) -->"
	readmeWorkflowEnd   = "<!-- goalrun:minimal-workflow:end -->"
	readmeTablesStart   = "<!-- goalrun:action-tables:start (generated from action.yml by go test ./cmd/goalrun -run TestActionMetadataInSync -update-readme) -->"
	readmeTablesEnd     = "<!-- goalrun:action-tables:end -->"
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

// readmeWorkflow renders the README's block that shows
// examples/workflows/minimal.yml verbatim, markers included.
func readmeWorkflow() string {
	minimal, err := os.ReadFile(filepath.Join("..", "..", "examples", "workflows", "minimal.yml"))
	if err != nil {
		minimal = []byte("# examples/workflows/minimal.yml: " + err.Error() + "\n")
	}
	return readmeWorkflowStart + "\n```yaml\n" + string(minimal) + "```\n" + readmeWorkflowEnd + "\n"
}

// readmeTables renders the README's inputs and outputs tables from
// action.yml, markers included.
func readmeTables(inputs, outputs []metaEntry) string {
	var b strings.Builder
	b.WriteString(readmeTablesStart + "\n### Inputs\n\n| input | default | description |\n|---|---|---|\n")
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
	b.WriteString(readmeTablesEnd + "\n")
	return b.String()
}

// readmeBlock returns the block of readme from the start marker through
// the end marker's line, and where it starts; -1 when either is missing.
func readmeBlock(readme []byte, startMarker, endMarker string) (block []byte, at int) {
	start, end := bytes.Index(readme, []byte(startMarker)), bytes.Index(readme, []byte(endMarker))
	if start < 0 || end < start {
		return nil, -1
	}
	stop := end + len(endMarker)
	if stop < len(readme) && readme[stop] == '\n' {
		stop++
	}
	return readme[start:stop], start
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
	if strings.Join(ghreport.Outputs, ",") != strings.Join(ymlOut, ",") {
		t.Errorf("outputs differ:\n action.yml:        %v\n report/ghreport code: %v", ymlOut, ghreport.Outputs)
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
	blocks := []struct{ name, start, end, want string }{
		{"minimal workflow", readmeWorkflowStart, readmeWorkflowEnd, readmeWorkflow()},
		{"action tables", readmeTablesStart, readmeTablesEnd, readmeTables(inputs, outputs)},
	}
	if *updateReadme {
		for _, bl := range blocks {
			old, at := readmeBlock(readme, bl.start, bl.end)
			if at < 0 {
				readme = append(append(bytes.TrimRight(readme, "\n"), "\n\n"...), bl.want...)
				continue
			}
			readme = append(append(append([]byte{}, readme[:at]...), bl.want...), readme[at+len(old):]...)
		}
		if err := os.WriteFile(readmePath, readme, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	for _, bl := range blocks {
		got, at := readmeBlock(readme, bl.start, bl.end)
		if at < 0 {
			t.Errorf("README.md has no %s block between %q and %q (go test ./cmd/goalrun -run TestActionMetadataInSync -update-readme adds it)", bl.name, bl.start, bl.end)
			continue
		}
		if string(got) != bl.want {
			t.Errorf("README.md's %s block is out of date (rerun with -update-readme):\n--- got\n%s\n--- want\n%s", bl.name, got, bl.want)
		}
	}
	// And the table rows themselves name exactly the inputs then the outputs.
	tables, _ := readmeBlock(readme, readmeTablesStart, readmeTablesEnd)
	var rows []string
	for _, m := range tableRow.FindAllStringSubmatch(string(tables), -1) {
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

// TestActionInputsFollowTheSettingTable keeps action.yml's inputs equal to
// settingTable: every setting with an input is declared there, in the
// table's order, with an empty default (so a config file or run's default
// applies) except working-directory's "."; each input's mapping fits the
// setting's type; and the config input tells exactly which settings a
// pull request's config file may set.
func TestActionInputsFollowTheSettingTable(t *testing.T) {
	inputs, _, _ := orderedMeta(t)
	yml := map[string]metaEntry{}
	var order []string
	for _, in := range inputs {
		yml[in.name] = in
		order = append(order, in.name)
	}
	var fromTable []string
	for _, st := range settingTable {
		if st.input == "" {
			continue
		}
		fromTable = append(fromTable, st.input)
		t.Run(st.input, func(t *testing.T) {
			in, ok := yml[st.input]
			if !ok {
				t.Fatalf("action.yml has no input %s for the setting %s", st.input, st.name)
			}
			if want := map[string]string{"working-directory": "."}[st.input]; in.def != want {
				t.Errorf("default %q, want %q", in.def, want)
			}
			var want []inputKind
			switch st.field.(type) {
			case field[[]string]:
				want = []inputKind{perLine, perItem}
			case field[time.Duration]:
				want = []inputKind{minutes}
			case field[string]:
				want = []inputKind{asIs}
				if st.path {
					want = []inputKind{workspaceInput}
				}
			default:
				want = []inputKind{asIs}
			}
			if !slices.Contains(want, st.how) {
				t.Errorf("input %s maps to --%s as %d, want one of %v for its type", st.input, st.name, st.how, want)
			}
			if got := inputWords("--" + st.name); got != "input "+st.input {
				t.Errorf("inputWords(--%s) = %q, want %q", st.name, got, "input "+st.input)
			}
		})
	}
	if got := order[:min(len(fromTable), len(order))]; !slices.Equal(got, fromTable) {
		t.Errorf("action.yml's first inputs %v, want the settings' inputs in the table's order %v", got, fromTable)
	}
	allowed := strings.Join(prConfigAllowed[:len(prConfigAllowed)-1], ", ") + " and " + prConfigAllowed[len(prConfigAllowed)-1]
	if !strings.Contains(yml["config"].description, "may set only "+allowed+".") {
		t.Errorf("the config input's description %q does not say the file may set only %s", yml["config"].description, allowed)
	}
}
