package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/goalrun/goalrun/goal/agent"
	"github.com/goalrun/goalrun/goal/agent/agenttest"
	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/egress"
)

// The demo's fixed settings.
const (
	// demoCheck is the demo's deterministic check.
	demoCheck = "go test ./..."
	// demoSourceDir is where the demo project lives in the repository.
	demoSourceDir = "examples/demo"
	// demoFixScript is the command agent's fix script in the demo project
	// (it fixes one bug per turn).
	demoFixScript = "fix.sh"
	// demoMaxIterations leaves one turn of room beyond the two the demo
	// needs, so a pass is the check's doing, not the limit's.
	demoMaxIterations = 3
	// demoTimeout bounds the whole demo run: generous, because every
	// check is a fresh container and, without a warm Go build cache, each
	// one compiles the standard library again (minutes on a loaded 2-core
	// machine).
	demoTimeout = 60 * time.Minute
	// demoStepTimeout bounds one agent turn or one check.
	demoStepTimeout = 20 * time.Minute
	// claudeBinEnv names the Claude Code executable to use (else `claude`
	// on PATH).
	claudeBinEnv = "GOALRUN_CLAUDE_BIN"
)

// demoOptions are `goalrun demo`'s flags.
type demoOptions struct {
	source  string
	json    bool
	keep    bool
	agent   string // auto, claude, command
	sandbox string // auto, docker, local
}

// demoUsage is `goalrun demo --help`.
const demoUsage = `Usage: goalrun demo [flags]

An offline tour of goalrun, with no API key: it copies the demo project
(examples/demo, a Go module with two bugs and a failing test) to a temporary
folder and runs the full engine on it until ` + "`" + demoCheck + "`" + ` passes.

  - The sandbox is Docker with network egress, from an image built from this
    machine's files (nothing is pulled); with no Docker Engine answering it
    falls back to the local host and says so.
  - The agent is the real Claude Code CLI when it is installed
    (` + claudeBinEnv + `, else claude on PATH), talking to a scripted model
    server inside goalrun that plays a fixed conversation (it is not a real
    model) through goalrun's egress proxy; otherwise the command agent runs
    the demo's fix script. Either way the first fix is incomplete on purpose,
    so the loop runs twice.

It prints the live progress, the markdown report and where the document and
the events were written.

Flags:
`

// demoCmd is `goalrun demo`.
func demoCmd(ctx context.Context, args []string, env lookupEnv, stdout, stderr io.Writer) int {
	var o demoOptions
	fs := flag.NewFlagSet("goalrun demo", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.source, "source", "", "the demo project to copy (default: "+demoSourceDir+" of the repository around the current folder)")
	fs.BoolVar(&o.json, "json", false, "stdout = exactly the goalrun/1 document, stderr = JSONL events")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary workspace (the document and events files are always kept)")
	fs.StringVar(&o.agent, "agent", "auto", "auto (Claude Code if installed, else command), claude, or command")
	fs.StringVar(&o.sandbox, "sandbox", "auto", "auto (Docker, else the local host with a notice), docker, or local")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, demoUsage)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return exitMet
		}
		return writeStartupError(&startupError{code: report.ErrBadInput, message: "demo: " + err.Error(),
			suggestions: []string{"Run goalrun demo --help for the flags."}}, jsonRequested(args), stdout, stderr)
	}
	var bad error
	switch {
	case fs.NArg() > 0:
		bad = badInput("demo: unexpected argument %q; the demo takes flags only (goalrun demo --help)", fs.Arg(0))
	case !contains([]string{"auto", "claude", agent.CommandName}, o.agent):
		bad = badInput("goalrun demo --agent %q: must be auto, claude or command", o.agent)
	case !contains(sandboxModes, o.sandbox):
		bad = badInput("goalrun demo --sandbox %q: must be one of %s", o.sandbox, strings.Join(sandboxModes, ", "))
	}
	if bad != nil {
		return writeStartupError(bad, o.json, stdout, stderr)
	}
	d := &demo{opts: o, env: env, stdout: stdout, stderr: stderr}
	return d.run(ctx)
}

// demo is one `goalrun demo` run.
type demo struct {
	opts           demoOptions
	env            lookupEnv
	stdout, stderr io.Writer

	dir        string // the temporary folder: workspace, document, events
	workspace  string
	document   string
	events     string
	claude     string // the Claude Code executable ("" = command agent)
	claudeWhy  string // why Claude Code is not used, when it is not
	relay      string // a static goalrun for the egress relay ("" = this one)
	relayWhy   error  // why this goalrun cannot be the relay
	relaySrc   string // goalrun's source tree to build the relay from ("" = no build)
	relayCache string // where relay builds are kept
	server     *agenttest.Server
	root       atomic.Pointer[string] // the workspace as the agent sees it
	mode       atomic.Pointer[string] // the sandbox mode that started
	humanOut   io.Writer              // stdout unless --json (then discarded)
	engineDone time.Time
}

// run sets the demo up, runs the engine and reports.
func (d *demo) run(ctx context.Context) int {
	d.humanOut = d.stdout
	if d.opts.json {
		d.humanOut = io.Discard
	}
	src, err := d.findSource()
	if err != nil {
		return writeStartupError(err, d.opts.json, d.stdout, d.stderr)
	}
	if hostGoroot() == "" {
		return writeStartupError(&startupError{code: report.ErrBadInput,
			message:     "the demo's check is `" + demoCheck + "`, but there is no Go toolchain on PATH to run it (in the Docker sandbox it is the host's, mounted read-only)",
			suggestions: []string{"Install Go (1.22 or newer) and put its bin folder on PATH, then run the demo again."}}, d.opts.json, d.stdout, d.stderr)
	}
	if err := d.planRelay(ctx, src); err != nil {
		return writeStartupError(err, d.opts.json, d.stdout, d.stderr)
	}
	if err := d.chooseAgent(); err != nil {
		return writeStartupError(err, d.opts.json, d.stdout, d.stderr)
	}
	if err := d.prepare(src); err != nil {
		return writeStartupError(&startupError{code: report.ErrSandboxFailed, message: "preparing the demo: " + err.Error()}, d.opts.json, d.stdout, d.stderr)
	}
	defer d.cleanup()

	if d.claude != "" {
		d.server = agenttest.NewAnthropic(demoScript(&d.root))
		defer d.server.Close()
	}
	cfg, err := d.config()
	if err != nil {
		return writeStartupError(err, d.opts.json, d.stdout, d.stderr)
	}
	d.intro(src)
	if err := d.buildRelay(ctx); err != nil {
		return writeStartupError(err, d.opts.json, d.stdout, d.stderr)
	}
	fmt.Fprintln(d.humanOut)

	eng := d.engine()
	var sink report.Sink
	if d.opts.json {
		sink = report.NewJSONLSink(d.stderr)
	} else {
		sink = report.NewProgressSinkSince(d.stderr, eng.now())
	}
	doc, code := execute(ctx, cfg, eng, sink)
	d.engineDone = time.Now()
	if d.opts.json {
		writeDocument(d.stdout, doc)
	} else {
		d.outro(doc)
	}
	return code
}

// findSource returns the demo project: --source, else examples/demo of the
// repository around the current folder (walking up). Errors are startup
// errors (bad input) saying what to do.
func (d *demo) findSource() (string, error) {
	if d.opts.source != "" {
		abs, err := filepath.Abs(d.opts.source)
		if err == nil {
			err = isDemoProject(abs)
		}
		if err != nil {
			return "", &startupError{code: report.ErrBadInput, message: fmt.Sprintf("goalrun demo --source %s: %v", d.opts.source, err),
				suggestions: []string{"Name the demo project folder (" + demoSourceDir + " in a clone of the goalrun repository), or leave --source out to find it from the current folder."}}
		}
		return abs, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", badInput("cannot read the current folder: %v", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if cand := filepath.Join(dir, filepath.FromSlash(demoSourceDir)); isDemoProject(cand) == nil {
			return cand, nil
		}
		if filepath.Dir(dir) == dir {
			break
		}
	}
	return "", &startupError{code: report.ErrBadInput,
		message: fmt.Sprintf("cannot find the demo project: there is no %s folder (with go.mod, %s, %s and %s) in %s or any folder above it",
			demoSourceDir, demoCodeFile, demoTestFile, demoFixScript, wd),
		suggestions: []string{
			"Run the demo from inside a clone of the goalrun repository: cd goalrun && go run ./cmd/goalrun demo",
			"Or name the demo project with --source DIR.",
		}}
}

// isDemoProject checks that dir holds the demo project's files.
func isDemoProject(dir string) error {
	for _, f := range []string{"go.mod", demoTestFile, demoCodeFile, demoFixScript} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			return fmt.Errorf("not the demo project: %v", err)
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("not the demo project: %s is not a regular file", filepath.Join(dir, f))
		}
	}
	return nil
}

// engineAnswers reports whether a Docker Engine answers a ping.
func engineAnswers(ctx context.Context) bool {
	cli, err := sandbox.NewDockerClient()
	if err != nil {
		return false
	}
	defer cli.Close()
	pctx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	_, err = cli.Ping(pctx)
	return err == nil
}

// chooseAgent picks Claude Code when it is installed and wanted (and, for a
// Docker sandbox, has a native executable to mount); else the command
// agent, with the reason in claudeWhy. --agent claude without a usable
// Claude Code is an error.
func (d *demo) chooseAgent() error {
	if d.opts.agent == agent.CommandName {
		d.claudeWhy = "--agent command was given"
		return nil
	}
	path, why := d.findClaude()
	if path != "" && d.opts.sandbox != "local" {
		if _, err := agent.NativeExecutable(agent.ClaudeSpec, agent.OSFS{}, path); err != nil {
			path, why = "", fmt.Sprintf("Claude Code at %s cannot be mounted into the sandbox: %v", path, err)
		}
	}
	if path == "" {
		d.claudeWhy = why
		if d.opts.agent == "claude" {
			return &startupError{code: report.ErrAgentNotFound, message: "goalrun demo --agent claude: " + why,
				suggestions: []string{"Install Claude Code (npm install -g @anthropic-ai/claude-code) or set " + claudeBinEnv + " to its executable; or leave --agent out to use the demo's fix script."}}
		}
		return nil
	}
	d.claude = path
	return nil
}

// findClaude returns the Claude Code executable: GOALRUN_CLAUDE_BIN, else
// claude on PATH; or "" and why not.
func (d *demo) findClaude() (path, why string) {
	if p, ok := d.env(claudeBinEnv); ok && p != "" {
		abs, err := filepath.Abs(p)
		if err == nil {
			var st os.FileInfo
			if st, err = os.Stat(abs); err == nil && (st.IsDir() || st.Mode().Perm()&0o111 == 0) {
				err = errors.New("not an executable file")
			}
		}
		if err != nil {
			return "", fmt.Sprintf("%s=%s: %v", claudeBinEnv, p, err)
		}
		return abs, ""
	}
	p, err := exec.LookPath(agent.ClaudeSpec.Bin)
	if err != nil {
		return "", "Claude Code (" + agent.ClaudeSpec.Bin + ") is not on PATH and " + claudeBinEnv + " is not set"
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err.Error()
	}
	return abs, ""
}

// prepare makes the temporary folder and copies the demo project into its
// workspace.
func (d *demo) prepare(src string) error {
	dir, err := os.MkdirTemp("", "goalrun-demo-")
	if err != nil {
		return fmt.Errorf("making the temporary folder: %v", err)
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return err
	}
	d.dir = dir
	d.workspace = filepath.Join(dir, "workspace")
	d.document = filepath.Join(dir, "document.json")
	d.events = filepath.Join(dir, "events.jsonl")
	if err := os.Mkdir(d.workspace, 0o755); err != nil {
		return fmt.Errorf("making the workspace: %v", err)
	}
	if err := os.CopyFS(d.workspace, os.DirFS(src)); err != nil {
		return fmt.Errorf("copying the demo project %s to %s: %v", src, d.workspace, err)
	}
	if d.claude != "" {
		// The Claude Code CLI keeps its session under HOME; on the local
		// host that must not be the user's own.
		if err := os.Mkdir(filepath.Join(dir, "home"), 0o700); err != nil {
			return fmt.Errorf("making the agent's home folder: %v", err)
		}
	}
	return nil
}

// cleanup removes the workspace (unless --keep); the document and the
// events stay.
func (d *demo) cleanup() {
	if d.dir == "" || d.opts.keep {
		return
	}
	os.RemoveAll(d.workspace)
	os.RemoveAll(filepath.Join(d.dir, "home"))
}

// config is the run's configuration, parsed and validated by `goalrun
// run`'s own parser from the flags the demo would type, plus the scripted
// model server as the agent's model API.
func (d *demo) config() (runConfig, error) {
	args := []string{
		"--until", demoCheck, "--prompt", demoTask,
		"--sandbox", d.opts.sandbox, "--workdir", d.workspace,
		"--max-iterations", fmt.Sprint(demoMaxIterations),
		"--timeout", demoTimeout.String(), "--step-timeout", demoStepTimeout.String(),
		"--output", d.document, "--events", d.events,
	}
	if d.opts.sandbox != "local" {
		args = append(args, "--network", string(sandbox.NetworkEgress))
	}
	if d.claude != "" {
		args = append(args, "--agent", agent.ClaudeSpec.Name, "--agent-bin", d.claude, "--model", demoModel)
	} else {
		args = append(args, "--agent", agent.CommandName, "--agent-bin", "./"+demoFixScript)
	}
	if d.opts.json {
		args = append(args, "--json")
	}
	// No secret of the caller's environment takes part in the demo: the
	// only key is the demo's own, which opens nothing.
	env := func(k string) (string, bool) {
		if contains(secretEnv, k) {
			return "", false
		}
		return d.env(k)
	}
	cfg, err := parseRunArgs(args, env, os.Getwd)
	if err != nil {
		return runConfig{}, err
	}
	if d.server != nil {
		up := cfg.spec.API.Upstream(demoKey)
		up.URL = d.server.URL
		cfg.upstreams = []sandbox.Upstream{up}
	}
	return cfg, nil
}

// engine is `goalrun run`'s engine with the demo's sandbox settings: the
// egress proxy may reach the scripted model server on loopback (for the
// demo only), the allowlist is empty (the model server is the one
// destination, served as the upstream), the relay is the static build
// buildRelay made when this goalrun is not static, and on the local host
// the agent gets its own HOME.
func (d *demo) engine() engine {
	eng := defaultEngine()
	if !d.opts.json { // in JSON mode stderr carries nothing but events
		eng.warn = d.stderr
	}
	local := eng.sandboxes.local
	eng.sandboxes.docker = func(ctx context.Context, rc runConfig, cfg sandbox.Config) (sandbox.Sandbox, error) {
		cfg.AllowHosts = nil
		if d.relay != "" { // this goalrun is not static (buildRelay)
			cfg.RelayBinary = d.relay
		}
		sb, err := startDocker(ctx, rc, cfg, sandbox.WithEgressConfig(func(c *egress.Config) {
			// The demo's model server listens on 127.0.0.1 in this
			// process: a loopback upstream, allowed for the demo only.
			c.AllowLoopbackUpstreams = true
		}))
		if err == nil {
			d.sandboxStarted(sb)
		}
		return sb, err
	}
	eng.sandboxes.local = func(ctx context.Context, cfg sandbox.Config) (sandbox.Sandbox, error) {
		if d.claude != "" {
			cfg.Env = map[string]string{"HOME": filepath.Join(d.dir, "home")}
		}
		sb, err := local(ctx, cfg)
		if err == nil {
			d.sandboxStarted(sb)
		}
		return sb, err
	}
	return eng
}

// sandboxStarted records where the agent sees the workspace, for the
// scripted model's tool inputs.
func (d *demo) sandboxStarted(sb sandbox.Sandbox) {
	p := sb.Posture()
	root, mode := p.Root, p.Mode
	d.root.Store(&root)
	d.mode.Store(&mode)
}

// agentLine says in one line which agent and which model server the demo
// used.
func (d *demo) agentLine(version string) string {
	a, m := d.agentParts(version)
	return "agent: " + a + " — model: " + m
}

// agentParts says which agent and which model server the demo uses.
func (d *demo) agentParts(version string) (agentText, modelText string) {
	if d.claude == "" {
		return fmt.Sprintf("the command agent running the demo's %s, which fixes one bug per turn (%s)", demoFixScript, d.claudeWhy),
			"none (the command agent asks no model)"
	}
	v := "Claude Code"
	if version != "" {
		v += " " + version
	}
	return fmt.Sprintf("%s (the real CLI, %s)", v, d.claude),
		fmt.Sprintf("goalrun's scripted demo server at %s, playing a fixed conversation — not a real model", d.server.URL)
}

// intro prints what the demo is about to do.
func (d *demo) intro(src string) {
	w := d.humanOut
	fmt.Fprintf(w, "goalrun demo — an offline tour with no API key\n")
	fmt.Fprintf(w, "  project:   %s, copied to %s\n", src, d.workspace)
	fmt.Fprintf(w, "  check:     %s (goalrun runs it; exit 0 = goal met)\n", demoCheck)
	agentText, modelText := d.agentParts("")
	fmt.Fprintf(w, "  agent:     %s\n", agentText)
	fmt.Fprintf(w, "  model:     %s\n", modelText)
	switch d.opts.sandbox {
	case "local":
		fmt.Fprintf(w, "  sandbox:   the local host (--sandbox local): no container, the host's network\n")
	default:
		fallback := ""
		if d.opts.sandbox == "auto" {
			fallback = "; the local host if no Docker Engine answers"
		}
		fmt.Fprintf(w, "  sandbox:   Docker, network egress: goalrun's proxy is the only way out%s\n", fallback)
		if d.claude != "" {
			fmt.Fprintf(w, "             the proxy serves the model server as the agent's API and adds the key; the server is on\n")
			fmt.Fprintf(w, "             127.0.0.1, a loopback upstream the proxy allows for this demo only\n")
		}
		fmt.Fprintf(w, "             the host's Go toolchain is mounted read-only for the check, which runs in a fresh container\n")
		fmt.Fprintf(w, "             with no network and no secret each time\n")
	}
	if d.claude != "" {
		fmt.Fprintf(w, "  scripted:  turn 1 reads the test, fixes one bug of two and says %q before any check ran;\n", demoPrematureClaim)
		fmt.Fprintf(w, "             goalrun's check disagrees, turn 2 resumes the session and fixes the second bug\n")
	}
}

// outro prints the markdown report and what the demo used and measured.
func (d *demo) outro(doc report.Document) {
	w := d.stdout
	fmt.Fprintf(w, "\n%s\n", report.Markdown(doc))
	fmt.Fprintf(w, "goalrun: %s\n", report.Headline(doc))
	version := ""
	if doc.Agent != nil {
		version = doc.Agent.Version
	}
	fmt.Fprintf(w, "%s\n", d.agentLine(version))
	if doc.Sandbox != nil {
		p := doc.Sandbox
		fmt.Fprintf(w, "sandbox: %s, network %s, workspace %s, tier %s\n", p.Mode, p.Network, p.Workspace, p.Tier)
		if p.FallbackNotice != nil {
			fmt.Fprintf(w, "NOTICE: %s\n", *p.FallbackNotice)
		}
	}
	if d.server != nil {
		fmt.Fprintf(w, "model API key: %s\n", d.keyLine(doc))
	}
	if s, err := readTimeSplit(d.events); err == nil {
		s.cleanup = d.engineDone.Sub(s.terminal)
		fmt.Fprintf(w, "time: %s\n", s)
	} else {
		fmt.Fprintf(w, "time: cannot read the events file: %v\n", err)
	}
	fmt.Fprintf(w, "document: %s\n", d.document)
	fmt.Fprintf(w, "events:   %s\n", d.events)
	if d.opts.keep {
		fmt.Fprintf(w, "workspace (kept): %s\n", d.workspace)
	} else {
		fmt.Fprintf(w, "workspace: removed (--keep keeps it)\n")
	}
}

// keyLine says which key reached the scripted model server.
func (d *demo) keyLine(doc report.Document) string {
	reqs := d.server.ModelRequests()
	withDemo, withDummy := 0, 0
	for _, r := range reqs {
		switch r.Key() {
		case demoKey:
			withDemo++
		case sandbox.DummyKey:
			withDummy++
		}
	}
	egressed := doc.Sandbox != nil && doc.Sandbox.Network == sandbox.NetworkEgress
	switch {
	case len(reqs) == 0:
		return "the scripted model server received no request"
	case egressed && withDemo == len(reqs):
		return fmt.Sprintf("the sandbox held only goalrun's dummy key; goalrun's egress proxy added the demo key on the way to the model server (%d of %d model requests)", withDemo, len(reqs))
	case egressed:
		return fmt.Sprintf("%d of %d model requests carried the demo key added by the proxy, %d the sandbox's dummy key", withDemo, len(reqs), withDummy)
	default:
		return fmt.Sprintf("without the egress proxy the agent held the demo key itself (%d model requests); this is why goalrun prefers Docker with egress", len(reqs))
	}
}

// timeSplit is where a run's time went, from its events' timestamps.
type timeSplit struct {
	sandboxStart time.Duration // starting the sandbox (image build or reuse included)
	agent        time.Duration // agent turns: agent_started → the next check_started
	checks       time.Duration // check_started → check_finished
	reporting    time.Duration // the last check's end → the terminal event
	other        time.Duration // the rest (workspace snapshots, evaluation)
	total        time.Duration // sandbox start → the terminal event
	cleanup      time.Duration // the terminal event → the engine returned (sandbox removal)
	terminal     time.Time
	turns        int
	nchecks      int
}

// String is one line: "sandbox start 1.9 s · agent turns (2) 3.8 s · …"
// (milliseconds below one second).
func (s timeSplit) String() string {
	sec := func(d time.Duration) string {
		if d > -time.Second && d < time.Second {
			return fmt.Sprintf("%d ms", d.Milliseconds())
		}
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	out := fmt.Sprintf("sandbox start %s · agent turns (%d) %s · checks (%d) %s · reporting %s · other %s · total %s",
		sec(s.sandboxStart), s.turns, sec(s.agent), s.nchecks, sec(s.checks), sec(s.reporting), sec(s.other), sec(s.total))
	if s.cleanup > 0 {
		out += " · then sandbox removal " + sec(s.cleanup)
	}
	return out
}

// readTimeSplit reads an events file (JSONL) and splits the run's time.
func readTimeSplit(path string) (timeSplit, error) {
	f, err := os.Open(path)
	if err != nil {
		return timeSplit{}, err
	}
	defer f.Close()
	var evs []report.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e report.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return timeSplit{}, fmt.Errorf("%s: %v", path, err)
		}
		evs = append(evs, e)
	}
	if err := sc.Err(); err != nil {
		return timeSplit{}, err
	}
	return splitTime(evs)
}

// splitTime splits a run's time from its events.
func splitTime(evs []report.Event) (timeSplit, error) {
	var s timeSplit
	var begin, agentAt, checkAt, lastCheckEnd time.Time
	for _, e := range evs {
		switch e.Type {
		case report.EventSandboxReady:
			secs, _ := e.Data["seconds"].(float64)
			s.sandboxStart = time.Duration(secs * float64(time.Second))
			begin = e.Time.Add(-s.sandboxStart)
		case report.EventAgentStarted:
			agentAt = e.Time
			s.turns++
		case report.EventCheckStarted:
			if !agentAt.IsZero() {
				s.agent += e.Time.Sub(agentAt)
				agentAt = time.Time{}
			}
			checkAt = e.Time
		case report.EventCheckFinished:
			if !checkAt.IsZero() {
				s.checks += e.Time.Sub(checkAt)
				s.nchecks++
				checkAt = time.Time{}
			}
			lastCheckEnd = e.Time
		case report.EventCompleted, report.EventFailed:
			s.terminal = e.Time
			if !agentAt.IsZero() { // the run ended during a turn
				s.agent += e.Time.Sub(agentAt)
				lastCheckEnd = e.Time
			}
		}
	}
	if begin.IsZero() || s.terminal.IsZero() {
		return s, errors.New("the events have no sandbox_ready or no terminal event")
	}
	if !lastCheckEnd.IsZero() {
		s.reporting = s.terminal.Sub(lastCheckEnd)
	}
	s.total = s.terminal.Sub(begin)
	s.other = s.total - s.sandboxStart - s.agent - s.checks - s.reporting
	return s, nil
}
