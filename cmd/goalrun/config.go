package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/distribution/reference"
	"golang.org/x/net/http/httpproxy"
	"gopkg.in/yaml.v3"

	"github.com/goalrun/goalrun/goal/agent"
	"github.com/goalrun/goalrun/internal/lazyre"
	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/egress"
)

// Defaults of the run settings (README.md, "`goalrun run` flags").
const (
	defaultAgent         = "claude"
	defaultMaxIterations = 5
	defaultTimeout       = 30 * time.Minute
	defaultStepTimeout   = 15 * time.Minute
	defaultSandbox       = "docker"
	defaultConfigFile    = ".goalrun.yml"
	// maxPromptFileBytes bounds --prompt-file: 1 MiB is far more than any
	// task and keeps a wrong path (a binary, a log) from becoming a prompt.
	maxPromptFileBytes = 1 << 20
	// maxGoalBytes bounds --until and --infer-until: 32768 bytes. The check
	// runs as sh -c CMD, one command-line argument, and Linux refuses any
	// single argument or environment string over 131072 bytes
	// (MAX_ARG_STRLEN, 32 pages: execve(2), "Limits on size of arguments
	// and environment"); a long check belongs in a script. (Prompts of any
	// length reach agents: over agent.MaxArgPrompt they go on stdin.)
	maxGoalBytes = 32 << 10
	// maxConfigFileBytes bounds the YAML config file.
	maxConfigFileBytes = 1 << 20
	// maxIterationsLimit bounds --max-iterations.
	maxIterationsLimit = 1000
	// maxTimeout bounds --timeout and --step-timeout: a week, longer than
	// the longest job GitHub Actions runs (5 days on a self-hosted runner:
	// https://docs.github.com/en/actions/reference/limits), and far from
	// the ~292 years where the graces added to it would overflow.
	maxTimeout = 7 * 24 * time.Hour
)

// sandboxModes are the --sandbox values.
var sandboxModes = []string{"docker", "auto", "local"}

// workspaceModes are the --workspace values.
var workspaceModes = []string{string(sandbox.WorkspaceBind), string(sandbox.WorkspaceCopy), string(sandbox.WorkspaceAuto)}

// settings are the run settings as flags or the YAML file give them, before
// validation. settingTable declares each field's flag, config-file key,
// action input and default.
type settings struct {
	until, inferUntil, judgeCmd string
	agent, agentBin, model      string
	modelGateway                string
	agentArgs                   []string
	prompt, promptFile          string
	maxIterations, maxTurns     int
	noProgressTurns             int
	timeout, stepTimeout        time.Duration
	maxCostUSD                  float64
	maxTokens                   int64
	sandbox, image, network     string
	allowHosts, mounts          []string
	setup                       []string
	setupDefaults               bool
	workspace, workdir          string
	json, allowTestEdits        bool
	verbose                     bool
	output, events              string
}

// setting is one run setting, declared once: the `goalrun run` flag and the
// config file's key (one name), the GitHub Action's input, the default, the
// help text and the field of settings it fills. The flag set, the config
// file's keys and values, the merge of the two and the action's inputs are
// all made from settingTable.
type setting struct {
	// name is the flag's name (without dashes) and the config file's key.
	name string
	// field is where the value goes in settings, and its default.
	field value
	// usage is the flag's help text.
	usage string
	// input is the action.yml input that sets it ("" for none); how says
	// how the input's text becomes flags.
	input string
	how   inputKind
	// fromPR: a config file may set it on an event that may run on a pull
	// request's code (prConfigAllowed).
	fromPR bool
	// path: the value is a path, relative to the current directory on the
	// command line and to the config file's folder (and never outside it)
	// in a config file.
	path bool
}

// settingTable lists every run setting. The settings with an action input
// come in action.yml's order (TestActionMetadataInSync).
var settingTable = []setting{
	{name: "agent", field: fieldOf(defaultAgent, func(s *settings) *string { return &s.agent }),
		usage: "the agent: " + strings.Join(agent.Names(), ", "), input: "agent"},
	{name: "agent-bin", field: fieldOf("", func(s *settings) *string { return &s.agentBin }),
		usage: "the agent executable (for command: the shell command run each turn)", input: "agent-bin"},
	{name: "prompt", field: fieldOf("", func(s *settings) *string { return &s.prompt }),
		usage: "the task", input: "prompt", fromPR: true},
	{name: "prompt-file", field: fieldOf("", func(s *settings) *string { return &s.promptFile }),
		usage: "read the task from this file", input: "prompt-file", how: workspaceInput, fromPR: true, path: true},
	{name: "until", field: fieldOf("", func(s *settings) *string { return &s.until }),
		usage: "the deterministic check, run with sh -c in the sandbox; exit 0 = goal met", input: "until"},
	{name: "infer-until", field: fieldOf("", func(s *settings) *string { return &s.inferUntil }),
		usage: "no check: a judge decides from this text (every pass is ungrounded)", input: "infer-until"},
	{name: "judge-cmd", field: fieldOf("", func(s *settings) *string { return &s.judgeCmd }),
		usage: "a command that judges the goal by its exit code (with --infer-until)"},
	{name: "max-iterations", field: fieldOf(defaultMaxIterations, func(s *settings) *int { return &s.maxIterations }),
		usage: "agent turns at most", input: "max-iterations"},
	{name: "max-turns", field: fieldOf(0, func(s *settings) *int { return &s.maxTurns }),
		usage: "the agent's own turns per invocation (agents that support it)"},
	{name: "no-progress-turns", field: fieldOf(0, func(s *settings) *int { return &s.noProgressTurns }),
		usage: "halt after this many turns with the same check failure and an unchanged workspace (0 = 2; negative = never)"},
	{name: "timeout", field: fieldOf(defaultTimeout, func(s *settings) *time.Duration { return &s.timeout }),
		usage: "the whole run's wall clock", input: "timeout-minutes", how: minutes},
	{name: "step-timeout", field: fieldOf(defaultStepTimeout, func(s *settings) *time.Duration { return &s.stepTimeout }),
		usage: "one agent turn or one check", input: "step-timeout-minutes", how: minutes},
	{name: "max-cost-usd", field: fieldOf(0.0, func(s *settings) *float64 { return &s.maxCostUSD }),
		usage: "stop when the reported cost exceeds this many US dollars", input: "max-cost-usd"},
	{name: "max-tokens", field: fieldOf(int64(0), func(s *settings) *int64 { return &s.maxTokens }),
		usage: "stop when input+output tokens exceed this", input: "max-tokens"},
	{name: "sandbox", field: fieldOf(defaultSandbox, func(s *settings) *string { return &s.sandbox }),
		usage: "docker (required), auto (fall back to local with a notice), local", input: "sandbox"},
	{name: "image", field: fieldOf("", func(s *settings) *string { return &s.image }),
		usage: "the sandbox image (docker): an image reference, " + imageHost + " (the default: the host's system folders, read-only) or " + imageMinimal + " (a busybox image built from this machine's files)",
		input: "image"},
	{name: "network", field: fieldOf("", func(s *settings) *string { return &s.network }),
		usage: "none, egress, bridge, host (default egress for model-backed agents, none for command)", input: "network"},
	{name: "allow-host", field: fieldOf([]string(nil), func(s *settings) *[]string { return &s.allowHosts }),
		usage: "add HOST[:PORT] or an ecosystem preset (go, npm, pypi, …) to the egress allowlist of the agent and the setup step (repeatable)",
		input: "allow-hosts", how: perItem},
	{name: "mount", field: fieldOf([]string(nil), func(s *settings) *[]string { return &s.mounts }),
		usage: "mount the host folder HOST read-only at TARGET (default: the same path) in the sandbox: HOST[:TARGET] (repeatable; docker)",
		input: "mounts", how: perLine},
	{name: "setup", field: fieldOf([]string(nil), func(s *settings) *[]string { return &s.setup }),
		usage: "a setup command run with sh -c before the first check, to prepare dependencies (repeatable)", input: "setup", how: perLine},
	{name: "setup-defaults", field: fieldOf(true, func(s *settings) *bool { return &s.setupDefaults }),
		usage: "also run the setup commands goalrun detects (go.mod: module download and build cache; package-lock.json: npm ci)", input: "setup-defaults"},
	{name: "model", field: fieldOf("", func(s *settings) *string { return &s.model }),
		usage: "the model to ask the agent for", input: "model"},
	{name: "model-gateway", field: fieldOf("", func(s *settings) *string { return &s.modelGateway }),
		usage: "base URL of a model gateway the agent's model API requests go to instead of the public API (may be on loopback or a private network)", input: "model-gateway"},
	{name: "agent-arg", field: fieldOf([]string(nil), func(s *settings) *[]string { return &s.agentArgs }),
		usage: "an extra argument for the agent (repeatable)", input: "agent-args", how: perLine},
	{name: "workdir", field: fieldOf("", func(s *settings) *string { return &s.workdir }),
		usage: "the workspace (default: the current directory)", input: "working-directory", how: workspaceInput, fromPR: true, path: true},
	{name: "workspace", field: fieldOf(string(sandbox.WorkspaceAuto), func(s *settings) *string { return &s.workspace }),
		usage: "how the workspace reaches the sandbox: bind, copy, auto (docker)"},
	{name: "json", field: fieldOf(false, func(s *settings) *bool { return &s.json }),
		usage: "stdout = exactly one goalrun/1 document, stderr = JSONL events"},
	{name: "output", field: fieldOf("", func(s *settings) *string { return &s.output }),
		usage: "also write the document to this file", path: true},
	{name: "events", field: fieldOf("", func(s *settings) *string { return &s.events }),
		usage: "also write the events (JSONL) to this file", path: true},
	{name: "allow-test-edits", field: fieldOf(false, func(s *settings) *bool { return &s.allowTestEdits }),
		usage: "a pass after the agent edited the check's files may still conclude success"},
	{name: "verbose", field: fieldOf(false, func(s *settings) *bool { return &s.verbose }),
		usage: "show container ids, image digests and resume ids in the progress view"},
}

// settingValue is the Go type of a setting: a type both package flag and
// yaml.v3 read.
type settingValue interface {
	string | []string | int | int64 | float64 | bool | time.Duration
}

// value is a setting's field in settings: what the flag set, the config
// file and the merge do with it.
type value interface {
	// setDefault stores the default in s.
	setDefault(s *settings)
	// copy copies the setting from src to dst.
	copy(dst, src *settings)
	// bind defines the flag name writing into s, with the default.
	bind(fs *flag.FlagSet, s *settings, name, usage string)
	// decode sets the setting in s from a config file's value; nil, or
	// what does not fit.
	decode(s *settings, v *yaml.Node) *badValue
}

// field is a value of type T: its place in settings and its default.
type field[T settingValue] struct {
	def T
	at  func(*settings) *T
}

func fieldOf[T settingValue](def T, at func(*settings) *T) value { return field[T]{def: def, at: at} }

func (f field[T]) setDefault(s *settings) { *f.at(s) = f.def }

func (f field[T]) copy(dst, src *settings) { *f.at(dst) = *f.at(src) }

// bind defines the flag with package flag's own Var of its type, so the
// help text and the parsing are the standard ones; a list is a repeatable
// flag that starts empty.
func (f field[T]) bind(fs *flag.FlagSet, s *settings, name, usage string) {
	switch p := any(f.at(s)).(type) {
	case *string:
		fs.StringVar(p, name, any(f.def).(string), usage)
	case *[]string:
		fs.Var(listFlag{p}, name, usage)
	case *int:
		fs.IntVar(p, name, any(f.def).(int), usage)
	case *int64:
		fs.Int64Var(p, name, any(f.def).(int64), usage)
	case *float64:
		fs.Float64Var(p, name, any(f.def).(float64), usage)
	case *bool:
		fs.BoolVar(p, name, any(f.def).(bool), usage)
	case *time.Duration:
		fs.DurationVar(p, name, any(f.def).(time.Duration), usage)
	}
}

// pathOf is the field of a path setting (st.path) in s; nil for any other.
func pathOf(s *settings, st setting) *string {
	if f, ok := st.field.(field[string]); ok && st.path {
		return f.at(s)
	}
	return nil
}

// lookupSetting returns the setting named name.
func lookupSetting(name string) (setting, bool) {
	for _, s := range settingTable {
		if s.name == name {
			return s, true
		}
	}
	return setting{}, false
}

// defaults returns the settings a run starts from.
func defaults() settings {
	var s settings
	for _, st := range settingTable {
		st.field.setDefault(&s)
	}
	return s
}

// listFlag is a repeatable string flag.
type listFlag struct{ v *[]string }

func (l listFlag) String() string {
	if l.v == nil {
		return ""
	}
	return strings.Join(*l.v, ",")
}

func (l listFlag) Set(s string) error { *l.v = append(*l.v, s); return nil }

// newFlagSet binds every setting (and --config, --no-config) to a FlagSet
// writing into s.
func newFlagSet(s *settings, configFile *string, noConfig *bool) *flag.FlagSet {
	fs := flag.NewFlagSet("goalrun run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, st := range settingTable {
		st.field.bind(fs, s, st.name, st.usage)
	}
	fs.StringVar(configFile, "config", "", "YAML config file (default: "+defaultConfigFile+" in the workdir, if present)")
	fs.BoolVar(noConfig, "no-config", false, "read no config file, not even "+defaultConfigFile+" in the workdir")
	return fs
}

// loadedFile is a parsed config file: its settings, which keys it set and
// on which line.
type loadedFile struct {
	path  string
	s     settings
	lines map[string]int // key → line
}

// startupError is a failure before any run existed: it becomes the
// startup-error document (exit 2 for bad input, 3 for an unavailable
// sandbox).
type startupError struct {
	code        string
	message     string
	suggestions []string
}

func (e *startupError) Error() string { return e.message }

func badInput(format string, args ...any) *startupError {
	return &startupError{code: report.ErrBadInput, message: fmt.Sprintf(format, args...)}
}

// loadConfigFile reads a YAML config file and decodes it by walking its
// node tree against settingTable: its top level is a mapping whose keys are
// settings' names, each written once as plain text (no merge key), with
// values of the setting's type. A value that is null sets the type's zero
// value. Errors name the file, the line (and for a value, the column) and
// the key, and suggest the closest known key.
func loadConfigFile(path string) (*loadedFile, *startupError) {
	data, err := readCapped(path, maxConfigFileBytes)
	if err != nil {
		return nil, badInput("config file %s: %v; is it the right file?", path, err)
	}
	lf := &loadedFile{path: path, lines: map[string]int{}}

	if !utf8.Valid(data) {
		return nil, badInput("config file %s is not UTF-8 text (byte %d); save it as UTF-8", path, invalidUTF8At(data))
	}
	var root yaml.Node
	nodes := yaml.NewDecoder(bytes.NewReader(data))
	if err := nodes.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) { // empty file: no settings
			return lf, nil
		}
		return nil, syntaxError(path, err)
	}
	var second yaml.Node
	if err := nodes.Decode(&second); err == nil && !emptyDocument(&second) {
		return nil, badInput("config file %s line %d: a second YAML document (after ---); goalrun reads one, put every setting in it", path, second.Line)
	} else if err != nil && !errors.Is(err, io.EOF) {
		return nil, syntaxError(path, err)
	}
	doc := &root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	if doc.Kind == yaml.ScalarNode && doc.Tag == "!!null" {
		return lf, nil
	}
	if doc.Kind != yaml.MappingNode {
		return nil, badInput("config file %s line %d: the file must be a mapping of settings (key: value), not a %s", path, doc.Line, nodeKind(doc))
	}
	// The keys: each one plain text, once.
	for i := 0; i+1 < len(doc.Content); i += 2 {
		k := doc.Content[i]
		if k.Value == "<<" || k.Tag == "!!merge" {
			return nil, badInput("config file %s line %d: a YAML merge key (<<); goalrun reads plain settings, write each one out", path, k.Line)
		}
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
			// A null key (~, null, an empty key) or a number is no
			// setting's name, even where its text would be ("1" might
			// one day): refuse every key that is not written as text.
			return nil, badInput("config file %s line %d: the key %s is not a setting's name; keys are the run flags' names (until, agent, …) written as plain text", path, k.Line, keyShown(k))
		}
		if _, dup := lf.lines[k.Value]; dup {
			return nil, badInput("config file %s line %d: key %q is set twice (first on line %d)", path, k.Line, k.Value, lf.lines[k.Value])
		}
		lf.lines[k.Value] = k.Line
	}
	// The values: every unknown key and every value of the wrong type, in
	// the file's order.
	var problems []string
	unknown, badValues := false, false
	for i := 0; i+1 < len(doc.Content); i += 2 {
		k, v := doc.Content[i], doc.Content[i+1]
		st, ok := lookupSetting(k.Value)
		if !ok {
			msg := fmt.Sprintf("config file %s line %d column %d: unknown key %q", path, k.Line, k.Column, k.Value)
			if near := closestKey(k.Value); near != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", near)
			}
			problems, unknown = append(problems, msg), true
			continue
		}
		if bad := st.field.decode(&lf.s, v); bad != nil {
			problems = append(problems, fmt.Sprintf("config file %s line %d column %d: %s: %s", path, bad.node.Line, bad.node.Column, st.name, bad.text))
			badValues = true
		}
	}
	if len(problems) > 0 {
		se := &startupError{code: report.ErrBadInput, message: strings.Join(problems, "; ")}
		if unknown {
			se.suggestions = append(se.suggestions, "Use only the documented keys; they are the run flags' names without the leading dashes.")
		}
		if badValues {
			se.suggestions = append(se.suggestions, "Write each value as its flag takes it (goalrun run --help lists the flags and their types).")
		}
		return nil, se
	}
	// Paths in the file are relative to the file's folder and must stay
	// inside it, also through symbolic links: a config file is often not
	// the user's own words (an agent can write .goalrun.yml in the
	// workspace; a pull request carries its own), and one that could name
	// any path would feed a host file (a key, /proc/self/environ) into the
	// agent's prompt or overwrite one with the document. Flags can name
	// any path.
	base := filepath.Dir(path)
	for _, st := range settingTable {
		v := pathOf(&lf.s, st)
		if !st.path || *v == "" {
			continue
		}
		what := fmt.Sprintf("config file %s line %d: %s", path, lf.lines[st.name], st.name)
		if filepath.IsAbs(*v) {
			return nil, badInput("%s: %q is an absolute path; a config file's paths are relative to its folder and stay inside it (give an outside path as the --%s flag)", what, *v, st.name)
		}
		p, err := insideFolder(what, "the config file's folder", base, *v)
		if err != nil {
			return nil, badInput("%v (give an outside path as the --%s flag)", err, st.name)
		}
		*v = p
	}
	return lf, nil
}

// badValue is a config file value that does not fit its setting: the node
// (for its line and column) and what is wrong with it.
type badValue struct {
	node *yaml.Node
	text string
}

// decode sets the field in s from the config file's value node v. A
// scalar is read by yaml.v3 itself, as it reads a Go value of the field's
// type (so "3" is an int, "yes" no bool); a list also takes one string. An
// alias is followed. Null sets the zero value.
func (f field[T]) decode(s *settings, v *yaml.Node) *badValue {
	v = resolveAlias(v)
	p := f.at(s)
	if v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null" {
		var zero T
		*p = zero
		return nil
	}
	switch p := any(p).(type) {
	case *[]string:
		switch v.Kind {
		case yaml.ScalarNode:
			*p = []string{v.Value}
			return nil
		case yaml.SequenceNode:
			list := make([]string, 0, len(v.Content))
			for i, item := range v.Content {
				item = resolveAlias(item)
				var text string
				if item.Kind != yaml.ScalarNode || item.Decode(&text) != nil {
					return &badValue{item, fmt.Sprintf("item %d is %s, not text", i+1, shownValue(item))}
				}
				list = append(list, text)
			}
			*p = list
			return nil
		}
		return &badValue{v, shownValue(v) + " is not " + wantOf(p)}
	case *time.Duration:
		var text string
		if v.Kind == yaml.ScalarNode && v.Decode(&text) == nil {
			if d, err := time.ParseDuration(text); err == nil {
				*p = d
				return nil
			}
		}
		return &badValue{v, shownValue(v) + " is not " + wantOf(p)}
	}
	if v.Kind != yaml.ScalarNode || v.Decode(p) != nil {
		return &badValue{v, shownValue(v) + " is not " + wantOf(p)}
	}
	return nil
}

// wantOf says what a setting of p's type takes, for errors.
func wantOf(p any) string {
	switch p.(type) {
	case *[]string:
		return "text or a list of texts"
	case *int, *int64:
		return "a whole number"
	case *float64:
		return "a number"
	case *bool:
		return "true or false"
	case *time.Duration:
		return "a duration; write it like 30m, 90s or 1h30m"
	}
	return "text"
}

// shownValue names a value node for errors: a scalar's text, quoted, or
// the kind of node.
func shownValue(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return fmt.Sprintf("%q", n.Value)
	}
	return "a " + nodeKind(n)
}

// resolveAlias follows an alias node to the node it names.
func resolveAlias(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// syntaxError is a config file that is not YAML. yaml.v3 reports syntax
// errors as text only ("yaml: line 3: did not find expected key"); the
// message keeps it, after the file's name.
func syntaxError(path string, err error) *startupError {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if strings.HasPrefix(msg, "line ") {
		return badInput("config file %s %s", path, msg)
	}
	return badInput("config file %s: %s", path, msg)
}

// keyShown names a mapping key that is not a string, for errors: "null",
// "the number 1", "a list", …
func keyShown(k *yaml.Node) string {
	switch {
	case k.Kind == yaml.ScalarNode && k.ShortTag() == "!!null":
		return "null (~, null or nothing before the colon)"
	case k.Kind == yaml.ScalarNode:
		return fmt.Sprintf("%q (read as %s, not text)", k.Value, strings.TrimPrefix(k.ShortTag(), "!!"))
	case k.Kind == yaml.AliasNode:
		return "an alias (*" + k.Value + ")"
	}
	return "a " + nodeKind(k)
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		return "single value"
	case yaml.AliasNode:
		return "alias"
	case yaml.MappingNode:
		return "mapping"
	}
	return "document"
}

// closestKey returns the known key nearest to k (edit distance ≤ 3), or "".
func closestKey(k string) string {
	best, bestD := "", 4
	for _, f := range settingTable {
		if d := editDistance(k, f.name); d < bestD {
			best, bestD = f.name, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// runConfig is a validated run: everything execute needs, as plain values.
type runConfig struct {
	settings
	// task is the prompt text, from --prompt, --prompt-file or the
	// positional arguments.
	task string
	// dir is the workspace, absolute.
	dir string
	// net is the resolved network mode.
	net sandbox.Network
	// configFile is the YAML file used ("" for none).
	configFile string
	// fileKeys are the settings the config file supplied (flags did not
	// override them), sorted.
	fileKeys []string
	// secrets are the secret values found in the environment, by name (all
	// of them go to the Redactor; none is passed into a step by name).
	secrets map[string]string
	// spec is the agent's Spec; upstreams its model API with the real key
	// (none when the key is not in the environment).
	spec      agent.Spec
	upstreams []sandbox.Upstream
	// outboundProxy is the corporate proxy goalrun's environment names
	// (HTTPS_PROXY, HTTP_PROXY, NO_PROXY), which the egress proxy reaches
	// destinations through; nil for none.
	outboundProxy *httpproxy.Config
	// codexConfigModel is the model the user's own Codex configuration
	// names (local sandbox only: a container's HOME is empty).
	codexConfigModel string
	// minimalImage asks for the busybox image built from this machine's
	// files (--image minimal) instead of the host's system folders; image
	// is then "" (it holds only a real image reference).
	minimalImage bool
	// extraMounts are the --mount settings, parsed (Name says which).
	extraMounts []sandbox.Mount
	// egressAllowNets are GOALRUN_EGRESS_ALLOW_NETS: private or reserved
	// blocks allowlisted names may resolve into.
	egressAllowNets []netip.Prefix
}

// EgressAllowNetsEnv names the variable that lets allowlisted names resolve
// into private or reserved address blocks (a registry mirror on the
// operator's network): comma-separated CIDR blocks or addresses. It is an
// environment variable, never a flag or config key, so a config file in a
// workspace (which an agent or a pull request may write) cannot open the
// operator's network.
const EgressAllowNetsEnv = "GOALRUN_EGRESS_ALLOW_NETS"

// parseAllowNets reads EgressAllowNetsEnv's value.
func parseAllowNets(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' }) {
		p, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil {
				return nil, fmt.Errorf("%q is neither an address block (10.1.2.0/24) nor an address", f)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p)
	}
	if _, err := egress.New(egress.Config{AllowNets: out}); err != nil {
		return nil, err
	}
	return out, nil
}

// The --image values that are not image references. A real image with one
// of these names is given with its tag (minimal:latest).
const (
	// imageHost is the default sandbox: a generated image that holds no
	// programs, with the host's system folders mounted read-only.
	imageHost = "host"
	// imageMinimal is the busybox image built from this machine's files
	// (what the default sandbox was before it took the host's folders).
	imageMinimal = "minimal"
)

// secretEnv names the environment variables whose values are secrets:
// redacted everywhere, never given to check steps.
var secretEnv = []string{
	"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN",
	"OPENAI_API_KEY", "CODEX_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY",
	"GITHUB_TOKEN", "GH_TOKEN", "ACTIONS_RUNTIME_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
	// Credentials commonly present on developer machines and CI runners: never
	// passed into a sandbox (its environment is an allowlist), but redacted
	// should an agent on the local host print one it read from elsewhere.
	"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AZURE_CLIENT_SECRET", "GOOGLE_APPLICATION_CREDENTIALS_JSON",
	"GITLAB_TOKEN", "NPM_TOKEN", "NODE_AUTH_TOKEN", "PYPI_TOKEN", "TWINE_PASSWORD", "HF_TOKEN",
	"DOCKER_PASSWORD", "CODECOV_TOKEN", "SLACK_BOT_TOKEN", "OPENROUTER_API_KEY", "MISTRAL_API_KEY", "GROQ_API_KEY",
}

// parseRunArgs parses `goalrun run` arguments and the YAML config file into
// a validated runConfig. Flags win over the file; the file wins over the
// defaults. getwd supplies the current directory (relative paths on the
// command line are relative to it).
//
// Errors: flag.ErrHelp for -h/--help; otherwise a *startupError naming what
// is wrong and where (the flag, or the file, line and key).
func parseRunArgs(args []string, env lookupEnv, getwd func() (string, error)) (runConfig, error) {
	var fl settings
	var configFile string
	var noConfig bool
	fs := newFlagSet(&fl, &configFile, &noConfig)
	positional, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return runConfig{}, err
		}
		return runConfig{}, flagError(err)
	}
	flagSet := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { flagSet[f.Name] = true })

	cwd, err := getwd()
	if err != nil {
		return runConfig{}, badInput("cannot read the current directory: %v", err)
	}
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(cwd, p)
	}
	for _, st := range settingTable {
		if st.path {
			p := pathOf(&fl, st)
			*p = abs(*p)
		}
	}
	configFile = abs(configFile)

	// The config file: --config, else .goalrun.yml in the workdir, unless
	// --no-config.
	var lf *loadedFile
	if noConfig && configFile != "" {
		return runConfig{}, badInput("--config and --no-config exclude each other; give one")
	}
	if noConfig {
		// no file
	} else if configFile != "" {
		l, serr := loadConfigFile(configFile)
		if serr != nil {
			return runConfig{}, serr
		}
		lf = l
	} else {
		wd := fl.workdir
		if wd == "" {
			wd = cwd
		}
		p := filepath.Join(wd, defaultConfigFile)
		if _, err := os.Stat(p); err == nil {
			l, serr := loadConfigFile(p)
			if serr != nil {
				return runConfig{}, serr
			}
			lf = l
		}
	}

	s := defaults()
	where := map[string]string{}
	var fileKeys []string
	for _, f := range settingTable {
		if lf != nil {
			if line, ok := lf.lines[f.name]; ok {
				f.field.copy(&s, &lf.s)
				where[f.name] = fmt.Sprintf("%q in %s line %d", f.name, lf.path, line)
			}
		}
		if flagSet[f.name] {
			f.field.copy(&s, &fl)
			where[f.name] = "--" + f.name
		} else if lf != nil {
			if _, ok := lf.lines[f.name]; ok {
				fileKeys = append(fileKeys, f.name)
			}
		}
	}
	sort.Strings(fileKeys)
	cfg := runConfig{settings: s, fileKeys: fileKeys}
	if lf != nil {
		cfg.configFile = lf.path
	}
	if len(positional) > 0 {
		cfg.task = strings.Join(positional, " ")
	}
	if serr := validate(&cfg, where, len(positional) > 0, cwd, env); serr != nil {
		return runConfig{}, serr
	}
	return cfg, nil
}

// flagError is the bad input of a command line the flag set refused: an
// unknown flag is named as typed with two dashes, with the nearest
// setting (closestKey) as the fix.
func flagError(err error) *startupError {
	const unknown = "flag provided but not defined: -"
	msg, fixes := err.Error(), []string{"Run goalrun run --help for the flags."}
	if name, ok := strings.CutPrefix(msg, unknown); ok {
		msg = "unknown flag --" + name
		if best := closestKey(name); best != "" {
			fixes = append([]string{"Did you mean --" + best + "?"}, fixes...)
		}
	}
	return &startupError{code: report.ErrBadInput, message: "goalrun run: " + msg, suggestions: fixes}
}

// parseInterleaved parses flags and positional arguments in any order; "--"
// ends the flags.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			return nil, err
		}
		rem := fs.Args()
		consumed := len(rest) - len(rem)
		if consumed > 0 && rest[consumed-1] == "--" {
			return append(positional, rem...), nil
		}
		if len(rem) == 0 {
			return positional, nil
		}
		positional = append(positional, rem[0])
		rest = rem[1:]
	}
}

// validate checks the merged settings and resolves the derived values.
// where names the source of each setting that was given ("--until" or
// "\"until\" in FILE line N"); a setting not in where has its default.
func validate(cfg *runConfig, where map[string]string, hasPositional bool, cwd string, env lookupEnv) *startupError {
	src := func(name string) string {
		if w, ok := where[name]; ok {
			return w
		}
		return "--" + name
	}
	given := func(name string) bool { _, ok := where[name]; return ok }

	// The goal.
	if strings.TrimSpace(cfg.until) == "" && strings.TrimSpace(cfg.inferUntil) == "" {
		return &startupError{code: report.ErrBadInput,
			message:     "no goal: give a check with --until (for example a test command) or a goal text with --infer-until",
			suggestions: []string{"Set until to the command that exits 0 when the goal is met, such as the project's test command."}}
	}
	if given("until") && strings.TrimSpace(cfg.until) == "" {
		return badInput("%s is empty: the check must be a command", src("until"))
	}

	// The task.
	sources := 0
	for _, n := range []string{"prompt", "prompt-file"} {
		if given(n) {
			sources++
		}
	}
	if hasPositional {
		sources++
	}
	if sources > 1 {
		return badInput("the task is given more than once (--prompt, --prompt-file and positional arguments exclude each other); give it one way")
	}
	switch {
	case given("prompt"):
		cfg.task = cfg.prompt
	case given("prompt-file"):
		base := ""
		if cfg.configFile != "" && strings.HasPrefix(where["prompt-file"], `"prompt-file" in `) {
			base = filepath.Dir(cfg.configFile) // opened inside it: no link swapped in since the check leads out
		}
		b, err := readCappedIn(base, cfg.promptFile, maxPromptFileBytes)
		if err != nil {
			return badInput("%s: %v", src("prompt-file"), err)
		}
		cfg.task = string(b)
	}
	// A task is passed to agents as a command-line argument and in the
	// environment, where a NUL byte cannot go.
	if i := strings.IndexByte(cfg.task, 0); i >= 0 {
		return badInput("the task has a NUL byte at byte %d (a binary file as --prompt-file?); agents take text", i)
	}
	for i, c := range cfg.setup {
		if strings.TrimSpace(c) == "" {
			return badInput("%s %d is empty: a setup step must be a command", src("setup"), i+1)
		}
		if len(c) > maxGoalBytes || strings.IndexByte(c, 0) >= 0 {
			return badInput("%s %d is %d bytes or holds a NUL byte; at most %d bytes of text: it runs as sh -c with one command-line argument; put a long setup in a script in the workspace and run that", src("setup"), i+1, len(c), maxGoalBytes)
		}
	}
	for _, n := range []string{"until", "infer-until"} {
		v := cfg.until
		if n == "infer-until" {
			v = cfg.inferUntil
		}
		if len(v) > maxGoalBytes {
			return badInput("%s is %d bytes; at most %d: the check runs as sh -c with it as one command-line argument, which Linux caps at 131072 bytes; put a long check in a script in the workspace and run that", src(n), len(v), maxGoalBytes)
		}
	}
	// Commands run as command-line arguments, where a NUL byte cannot go
	// (a config file can spell one: "\0").
	for _, c := range []struct{ name, v string }{{"until", cfg.until}, {"infer-until", cfg.inferUntil}, {"judge-cmd", cfg.judgeCmd}, {"agent-bin", cfg.agentBin}} {
		if i := strings.IndexByte(c.v, 0); i >= 0 {
			return badInput("%s has a NUL byte at byte %d; a command is text", src(c.name), i)
		}
	}

	// The agent.
	if !contains(agent.Names(), cfg.agent) {
		return &startupError{code: report.ErrAgentNotFound,
			message:     fmt.Sprintf("%s: unknown agent %q; known agents: %s", src("agent"), cfg.agent, strings.Join(agent.Names(), ", ")),
			suggestions: []string{"Choose one of the known agents, or run any program with the command agent and agent-bin."}}
	}
	if cfg.agent == "command" && strings.TrimSpace(cfg.agentBin) == "" {
		return badInput("--agent command needs --agent-bin: the shell command to run each turn")
	}
	if cfg.agent == "command" && cfg.maxTurns != 0 {
		return badInput("%s: the command agent has no turns of its own to limit; drop it or use an agent CLI that supports it", src("max-turns"))
	}

	// Limits.
	if cfg.maxIterations < 1 || cfg.maxIterations > maxIterationsLimit {
		return badInput("%s %d: must be between 1 and %d", src("max-iterations"), cfg.maxIterations, maxIterationsLimit)
	}
	if cfg.maxTurns < 0 {
		return badInput("%s %d: must not be negative", src("max-turns"), cfg.maxTurns)
	}
	if cfg.timeout <= 0 || cfg.timeout > maxTimeout {
		return badInput("%s %s: must be positive and at most %s (a week)", src("timeout"), cfg.timeout, maxTimeout)
	}
	if cfg.stepTimeout <= 0 || cfg.stepTimeout > maxTimeout {
		return badInput("%s %s: must be positive and at most %s (a week)", src("step-timeout"), cfg.stepTimeout, maxTimeout)
	}
	if cfg.maxCostUSD < 0 || math.IsNaN(cfg.maxCostUSD) || math.IsInf(cfg.maxCostUSD, 0) {
		return badInput("%s %g: must be a finite amount of US dollars, not negative (0: no limit)", src("max-cost-usd"), cfg.maxCostUSD)
	}
	if cfg.maxTokens < 0 {
		return badInput("%s %d: must not be negative", src("max-tokens"), cfg.maxTokens)
	}

	// The sandbox.
	if !contains(sandboxModes, cfg.sandbox) {
		return badInput("%s %q: must be one of %s", src("sandbox"), cfg.sandbox, strings.Join(sandboxModes, ", "))
	}
	if !contains(workspaceModes, cfg.workspace) {
		return badInput("%s %q: must be one of %s", src("workspace"), cfg.workspace, strings.Join(workspaceModes, ", "))
	}
	switch {
	case cfg.network == "" && cfg.sandbox == "local":
		cfg.net = sandbox.NetworkHost
	case cfg.network == "" && cfg.agent == "command":
		cfg.net = sandbox.NetworkNone
	case cfg.network == "":
		cfg.net = sandbox.NetworkEgress
	default:
		cfg.net = sandbox.Network(cfg.network)
		if !contains(networkNames(), cfg.network) {
			return badInput("%s %q: must be one of %s", src("network"), cfg.network, strings.Join(networkNames(), ", "))
		}
	}
	if cfg.sandbox == "local" {
		// The host cannot enforce what a container would: refuse rather
		// than silently ignore.
		if cfg.net != sandbox.NetworkHost {
			return badInput("%s %s cannot be enforced with --sandbox local, which runs on the host's network; use --sandbox docker, or leave the network unset", src("network"), cfg.net)
		}
		if given("image") {
			return badInput("%s applies to the Docker sandbox; --sandbox local runs on the host", src("image"))
		}
		if given("mount") {
			return badInput("%s applies to the Docker sandbox; --sandbox local sees the whole host", src("mount"))
		}
		if given("workspace") && cfg.workspace != string(sandbox.WorkspaceAuto) {
			return badInput("%s applies to the Docker sandbox; --sandbox local works in the workdir itself", src("workspace"))
		}
	}
	if cfg.image != "" {
		// The Engine would refuse it too, but only once the sandbox starts
		// and as a failed run (SandboxFailed); it is a typo, say so now.
		_, err := reference.ParseAnyReference(cfg.image)
		if err == nil && upperCaseRepository(cfg.image) {
			err = errors.New("repository name must be lowercase")
		}
		if err != nil {
			return badInput("%s %q is not an image reference (%v); write it as NAME[:TAG][@DIGEST] in lower case, e.g. busybox:1.36, ghcr.io/owner/image:tag or an image id", src("image"), cfg.image, err)
		}
	}
	if cfg.net == sandbox.NetworkNone {
		// A model-backed agent with no network can only retry until its
		// turn times out: refuse at once.
		if spec, err := agent.SpecOf(cfg.agent); err == nil && spec.API.URL != "" {
			return badInput("%s none: the %s agent must reach its model API (%s), and with no network it can only retry until --step-timeout; use egress (the default: only the model API is reachable), or the command agent", src("network"), cfg.agent, spec.API.URL)
		}
	}
	for i, h := range cfg.allowHosts {
		norm, err := egress.ParseAllowEntry(h)
		if err != nil {
			return badInput("%s %q: %v", src("allow-host"), h, err)
		}
		cfg.allowHosts[i] = norm
	}
	if v, ok := env(EgressAllowNetsEnv); ok && strings.TrimSpace(v) != "" {
		nets, err := parseAllowNets(v)
		if err != nil {
			return badInput("%s: %v", EgressAllowNetsEnv, err)
		}
		cfg.egressAllowNets = nets
	}
	if len(cfg.allowHosts) > 0 && cfg.net != sandbox.NetworkEgress && cfg.net != sandbox.NetworkNone {
		return badInput("%s only applies to --network egress, and to the setup step of a Docker sandbox (the network is %s, which reaches everything)", src("allow-host"), cfg.net)
	}
	switch strings.TrimSpace(cfg.image) {
	case imageHost:
		cfg.image = ""
	case imageMinimal:
		cfg.image, cfg.minimalImage = "", true
	}
	for _, m := range cfg.mounts {
		mnt, err := parseMount(m)
		if err != nil {
			return badInput("%s %q: %v", src("mount"), m, err)
		}
		cfg.extraMounts = append(cfg.extraMounts, mnt)
	}

	// The workspace.
	wd := cfg.workdir
	if wd == "" {
		wd = cwd
	}
	st, err := os.Stat(wd)
	if err != nil {
		return badInput("%s: %v", src("workdir"), err)
	}
	if !st.IsDir() {
		return badInput("%s %s is not a directory", src("workdir"), wd)
	}
	cfg.dir = wd
	if cfg.agent == "command" {
		if serr := checkAgentProgram(cfg, src("agent-bin")); serr != nil {
			return serr
		}
	}

	// Secrets from the environment: all of them are redacted; the agent's
	// own model API key is served to it as an upstream (in egress mode the
	// proxy adds it and the sandbox holds a dummy key).
	cfg.secrets = map[string]string{}
	for _, k := range secretEnv {
		if v, ok := env(k); ok && v != "" {
			cfg.secrets[k] = v
		}
	}
	spec, err := agent.SpecOf(cfg.agent)
	if err != nil {
		return &startupError{code: report.ErrAgentNotFound, message: err.Error()}
	}
	cfg.spec = spec
	if spec.NoUsage && (cfg.maxCostUSD > 0 || cfg.maxTokens > 0) {
		flag := src("max-cost-usd")
		if cfg.maxCostUSD <= 0 {
			flag = src("max-tokens")
		}
		return &startupError{code: report.ErrBadInput,
			message:     fmt.Sprintf("%s: the %s agent reports no token use or cost (its output is not parsed), so a budget could never stop the run; bound it with --max-iterations or --timeout instead", flag, cfg.agent),
			suggestions: []string{"Use max-iterations or timeout to bound a run of a plain command."}}
	}
	if cfg.maxCostUSD > 0 && spec.NoCost {
		return &startupError{code: report.ErrBadInput,
			message:     fmt.Sprintf("%s: the %s agent reports token use but no cost, so a cost budget could never stop the run; bound it by tokens with --max-tokens (input + output) instead", src("max-cost-usd"), cfg.agent),
			suggestions: []string{"Use max-tokens to bound a run of this agent, or choose an agent that reports its cost (claude, car, deepcode)."}}
	}
	if cfg.agent == "codex" && cfg.sandbox == "local" {
		home, _ := env("CODEX_HOME")
		if home == "" {
			if h, ok := env("HOME"); ok && h != "" {
				home = filepath.Join(h, ".codex")
			}
		}
		if home != "" {
			cfg.codexConfigModel = agent.CodexConfigModel(home)
		}
	}
	if serr := validateGateway(cfg, src("model-gateway")); serr != nil {
		return serr
	}
	// The setup step's container reaches its registries through an egress
	// proxy even when the agent's network is none.
	if cfg.net == sandbox.NetworkEgress || cfg.net == sandbox.NetworkNone {
		cfg.outboundProxy = egress.OutboundFromEnv(func(k string) string { v, _ := env(k); return v })
		if err := egress.CheckOutbound(cfg.outboundProxy); err != nil {
			return badInput("goalrun's environment: %v; the egress proxy reaches the model API and the allowed hosts through it (fix the variable, or unset it)", err)
		}
		for name, pw := range egress.OutboundPasswords(cfg.outboundProxy) {
			cfg.secrets[name] = pw // redacted wherever it might appear
		}
	}
	if k := spec.API.KeyEnv; k != "" {
		if v, ok := env(k); ok && v != "" {
			cfg.secrets[k] = v
			up := spec.API.Upstream(v)
			if cfg.modelGateway != "" {
				up.URL, up.Gateway = cfg.modelGateway, true
			}
			cfg.upstreams = []sandbox.Upstream{up}
		}
	}
	return nil
}

// validateGateway checks --model-gateway: an http or https base URL with a
// host and nothing that could carry a secret or be misread (no user
// information, query or fragment), for an agent that has a model API. The
// URL is stored without a trailing slash.
func validateGateway(cfg *runConfig, src string) *startupError {
	g := strings.TrimSpace(cfg.modelGateway)
	if g == "" {
		cfg.modelGateway = ""
		return nil
	}
	if cfg.spec.API.URL == "" {
		return badInput("%s: the %s agent has no model API to send through a gateway", src, cfg.agent)
	}
	u, err := url.Parse(g)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return badInput("%s %q: give the gateway's base URL as http(s)://host[:port][/path], the address the %s CLI would be given instead of %s", src, g, cfg.agent, cfg.spec.API.URL)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(g, "?") {
		return badInput("%s %q: no user, password, query or fragment in the gateway URL (the key goes in %s; goalrun's proxy adds it)", src, g, cfg.spec.API.KeyEnv)
	}
	if _, err := egress.ParseAllowEntry(u.Host); err != nil && net.ParseIP(u.Hostname()) == nil && u.Hostname() != "localhost" {
		return badInput("%s %q: host %q: %v", src, g, u.Host, err)
	}
	cfg.modelGateway = strings.TrimSuffix(u.String(), "/")
	return nil
}

// parseMount reads a --mount value: HOST, HOST:TARGET or HOST:TARGET:ro,
// both absolute paths (TARGET defaults to HOST). The mount is always
// read-only; ":rw" is refused. The mount policy (no home folder, no
// credential folder, no socket…) is applied when the sandbox starts.
func parseMount(v string) (sandbox.Mount, error) {
	parts := strings.Split(v, ":")
	if len(parts) == 3 {
		switch parts[2] {
		case "ro":
			parts = parts[:2]
		case "rw":
			return sandbox.Mount{}, errors.New("mounts are read-only: the sandbox writes only its workspace, /tmp and HOME; drop :rw")
		default:
			return sandbox.Mount{}, fmt.Errorf("unknown option %q: write HOST[:TARGET] (read-only)", parts[2])
		}
	}
	if len(parts) > 2 || parts[0] == "" {
		return sandbox.Mount{}, errors.New("write HOST[:TARGET], absolute paths without ':'")
	}
	host, target := parts[0], parts[0]
	if len(parts) == 2 {
		target = parts[1]
	}
	for _, p := range []struct{ what, p string }{{"HOST", host}, {"TARGET", target}} {
		if !filepath.IsAbs(p.p) {
			return sandbox.Mount{}, fmt.Errorf("%s %s must be an absolute path", p.what, p.p)
		}
		if filepath.Clean(p.p) != p.p || p.p == "/" {
			return sandbox.Mount{}, fmt.Errorf("%s %s must be a clean path other than / (write %s)", p.what, p.p, filepath.Clean(p.p))
		}
	}
	return sandbox.Mount{Source: host, Target: target, ReadOnly: true, Name: "--mount " + v}, nil
}

// emptyDocument reports whether n is a YAML document with nothing in it (a
// lone "---" at the end of a file).
func emptyDocument(n *yaml.Node) bool {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	return n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

// invalidUTF8At is the offset of the first byte of b that is not valid
// UTF-8 (len(b) when there is none).
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

func networkNames() []string {
	out := make([]string, len(sandbox.Networks))
	for i, n := range sandbox.Networks {
		out[i] = string(n)
	}
	return out
}

// readCapped reads a file of at most max bytes.
func readCapped(path string, max int64) ([]byte, error) {
	return readCappedIn("", path, max)
}

// readCappedIn is readCapped for a regular file only (a FIFO or device is
// refused, not waited on: the open does not block), opened through an
// os.Root at base when base is not "" (path must then lie inside base; no
// symbolic link leads out of it, whatever is swapped in after a check).
func readCappedIn(base, path string, max int64) ([]byte, error) {
	var f *os.File
	var err error
	if base != "" {
		rel, rerr := filepath.Rel(base, path)
		if rerr != nil || escapes(rel) {
			return nil, fmt.Errorf("%s is not inside %s", path, base)
		}
		root, oerr := os.OpenRoot(base)
		if oerr != nil {
			return nil, oerr
		}
		defer root.Close()
		f, err = root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	} else {
		f, err = os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return nil, err
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, st.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, max)
	}
	return b, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// flagNames lists the run flags (for tests and help).
func flagNames() []string {
	var s settings
	var c string
	var nc bool
	var names []string
	newFlagSet(&s, &c, &nc).VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	sort.Strings(names)
	return names
}

// upperCaseRepository reports whether ref's first path component has upper
// case letters while it is no registry host (no "." or ":", not
// localhost): the reference grammar reads "UPPER/case" as an image on a
// host named UPPER, which no Engine pulls, where the user meant a Docker Hub
// repository (whose names are lower case).
func upperCaseRepository(ref string) bool {
	first, _, ok := strings.Cut(ref, "/")
	return ok && first != strings.ToLower(first) && !strings.ContainsAny(first, ".:") && first != "localhost"
}

// plainProgram matches a command's first word that the shell takes as it
// is: no quoting, expansion, redirection or assignment.
var plainProgram = lazyre.New(`^[A-Za-z0-9_./+-]+$`)

// checkAgentProgram refuses, before anything starts, a command agent whose
// program is a path goalrun can check and that does not exist: a relative
// path (the command runs in the workspace), an absolute path with the local
// sandbox, or one inside a --mount'ed folder. A bare name (found on the
// sandbox's PATH), a path into the sandbox image, a path a --setup command
// may create, or a command the shell must expand first is left to the
// sandbox: goalrun cannot check it here.
func checkAgentProgram(cfg *runConfig, name string) *startupError {
	fields := strings.Fields(cfg.agentBin)
	if len(fields) == 0 || !strings.Contains(fields[0], "/") || !plainProgram.MatchString(fields[0]) || len(cfg.setup) > 0 {
		return nil
	}
	prog := fields[0]
	host := ""
	switch {
	case !path.IsAbs(prog):
		host = filepath.Join(cfg.dir, filepath.FromSlash(prog))
	case cfg.sandbox == "local":
		host = prog
	default:
		for _, m := range cfg.extraMounts {
			if rel, ok := strings.CutPrefix(path.Clean(prog), path.Clean(m.Target)+"/"); ok {
				host = filepath.Join(m.Source, filepath.FromSlash(rel))
			}
		}
	}
	if host == "" || slices.Contains(strings.Split(prog, "/"), "node_modules") {
		return nil
	}
	if _, err := os.Lstat(host); err == nil || !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return &startupError{code: report.ErrBadInput,
		message:     fmt.Sprintf("%s %q: the program %s does not exist (looked for %s); nothing was started", name, cfg.agentBin, prog, host),
		suggestions: []string{fmt.Sprintf("Correct the program's path in %s: a relative path is taken from the workspace (%s), where the command runs each turn.", name, cfg.dir)}}
}
