package main

import (
	"context"
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
	"github.com/goalrun/goalrun/goal/agent/scripted"
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
	source   string
	json     bool
	keep     bool
	agent    string // auto, claude, command
	sandbox  string // auto, docker, local
	markdown bool   // stdout = the markdown report
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

It prints the live progress (stderr), then the verdict with the failing
check's output, the agent's words and where the time went, and writes the
goalrun/1 document, the events and the markdown report GitHub would show to
files it names.

Flags:
`

// demoCmd is `goalrun demo`.
func demoCmd(ctx context.Context, args []string, env lookupEnv, stdout, stderr io.Writer) int {
	var o demoOptions
	fs := flag.NewFlagSet("goalrun demo", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.source, "source", "", "the demo project to copy (default: "+demoSourceDir+" of the repository around the current folder)")
	fs.BoolVar(&o.json, "json", false, "stdout = exactly the goalrun/1 document, stderr = JSONL events")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary workspace (the document, events and report files are always kept)")
	fs.BoolVar(&o.markdown, "markdown", false, "stdout = the markdown report (as a check run or pull request comment shows it), stderr = the progress")
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
	case o.json && o.markdown:
		bad = badInput("goalrun demo: --json and --markdown both claim stdout; choose one (the markdown report is also written to a file)")
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

	dir        string // the temporary folder: workspace, document, events, report
	workspace  string
	document   string
	events     string
	mdReport   string      // the markdown report
	claude     string      // the Claude Code executable ("" = command agent)
	claudeWhy  string      // why Claude Code is not used, when it is not
	relay      string      // a static goalrun for the egress relay ("" = this one)
	relayWhy   error       // why this goalrun cannot be the relay
	relaySrc   string      // goalrun's source tree to build the relay from ("" = no build)
	relayCache string      // where relay builds are kept
	relayBuilt staticRelay // the relay build buildRelay made or reused
	server     *scripted.Server
	root       atomic.Pointer[string] // the workspace as the agent sees it
	mode       atomic.Pointer[string] // the sandbox mode that started
	humanOut   io.Writer              // stdout unless --json or --markdown (then discarded)
	cfg        runConfig
}

// run sets the demo up, runs the engine and reports. The run's clock
// starts here, so the relay build, the image and everything else the demo
// does first is in its time split.
func (d *demo) run(ctx context.Context) int {
	begin := time.Now()
	d.humanOut = d.stdout
	if d.opts.json || d.opts.markdown {
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
		d.server = scripted.NewAnthropic(demoScript(&d.root))
		defer d.server.Close()
	}
	cfg, err := d.config()
	if err != nil {
		return writeStartupError(err, d.opts.json, d.stdout, d.stderr)
	}
	d.cfg = cfg
	d.intro(src)
	fmt.Fprintln(d.humanOut)

	eng := d.engine()
	eng.started = begin
	times := &runTimes{}
	eng.times = times
	eng.deliver = func(doc report.Document) {
		md := report.Markdown(doc)
		mdErr := os.WriteFile(d.mdReport, []byte(md), 0o644)
		switch {
		case d.opts.json:
			writeDocument(d.stdout, doc)
		case d.opts.markdown:
			io.WriteString(d.stdout, md)
		default:
			d.outro(doc, mdErr)
		}
	}
	var sink report.Sink
	if d.opts.json {
		sink = report.NewJSONLSink(d.stderr)
	} else {
		sink = report.NewProgressSinkWith(d.stderr, report.ProgressOptions{Start: begin})
	}
	_, code := execute(ctx, cfg, eng, sink)
	if times.measured {
		fmt.Fprintf(d.humanOut, "time: %s\n", times.line())
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
	d.mdReport = filepath.Join(dir, "report.md")
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
		// The workspace is a new temporary copy each time, and the kept
		// deps volume's key holds the workspace's path: no later run could
		// reuse it, and keeping it would evict a real project's (at most
		// sandbox.KeptDepsMax are kept). The run's own deps volume goes
		// with the run.
		cfg.Setup.Key = ""
		if err := d.buildRelay(ctx); err != nil {
			return nil, err
		}
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

// agentLine names the agent CLI that ran, with the version it reported,
// when the introduction could not know it yet ("" for the command agent,
// which the introduction already named in full).
func (d *demo) agentLine(version string) string {
	if d.claude == "" {
		return ""
	}
	a, _ := d.agentParts(version)
	return "agent: " + a
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
		fmt.Fprintf(w, "             the host's system folders (its Go toolchain too) are mounted read-only; the check runs in a fresh container\n")
		fmt.Fprintf(w, "             with no network and no secret each time\n")
	}
	if d.relaySrc != "" {
		fmt.Fprintf(w, "  relay:     this goalrun was built with cgo, so the egress relay is a static build of %s\n", d.relaySrc)
		fmt.Fprintf(w, "             (made once per source version, in %s)\n", d.relayCache)
	}
	if d.claude != "" {
		fmt.Fprintf(w, "  scripted:  turn 1 reads the test, fixes one bug of two and says %q before any check ran;\n", demoPrematureClaim)
		fmt.Fprintf(w, "             goalrun's check disagrees, turn 2 resumes the conversation and fixes the second bug\n")
	} else {
		fmt.Fprintf(w, "  scripted:  turn 1 fixes one bug of two and says %q without running the tests;\n", demoPrematureClaim)
		fmt.Fprintf(w, "             goalrun's check disagrees, turn 2 fixes the second bug\n")
	}
}

// outro prints the verdict as `goalrun run` does, then what the demo used
// and where its files are; the time line follows once the sandbox is torn
// down (run). mdErr is the markdown report's write error, if any.
func (d *demo) outro(doc report.Document, mdErr error) {
	w := d.stdout
	writeHumanResult(w, doc, d.cfg)
	fmt.Fprintln(w)
	if n := overtakenClaim(doc); n != "" {
		fmt.Fprint(w, report.Wrap(n, humanWidth, "")+"\n\n")
	}
	version := ""
	if doc.Agent != nil {
		version = doc.Agent.Version
	}
	if l := d.agentLine(version); l != "" {
		fmt.Fprintf(w, "%s\n", l)
	}
	if doc.Sandbox != nil {
		p := doc.Sandbox
		fmt.Fprintf(w, "sandbox: %s, network %s, workspace %s, tier %s\n", p.Mode, p.Network, p.Workspace, p.Tier)
	}
	if d.server != nil {
		fmt.Fprintf(w, "model API key: %s\n", d.keyLine(doc))
	}
	if r := d.relayBuilt; r.path != "" {
		how := "built before for this source"
		if r.built {
			how = fmt.Sprintf("built now in %.1f s", r.took.Seconds())
		}
		fmt.Fprintf(w, "relay: %s (%s)\n", r.path, how)
	}
	if mdErr != nil {
		fmt.Fprintf(w, "report: could not be written: %v\n", mdErr)
	} else {
		fmt.Fprintf(w, "report: %s (the markdown a check run or pull request comment shows; --markdown prints it)\n", d.mdReport)
	}
	fmt.Fprintf(w, "events: %s\n", d.events)
	if d.opts.keep {
		fmt.Fprintf(w, "workspace (kept): %s\n", d.workspace)
	} else {
		fmt.Fprintf(w, "workspace: removed (--keep keeps it)\n")
	}
}

// overtakenClaim points at turn 1's premature claim when the check after
// that turn failed: the lesson of the demo ("" when it did not happen).
func overtakenClaim(doc report.Document) string {
	for _, it := range doc.Iterations {
		if it.N == 1 && it.Check != nil && !it.Check.Passed {
			return fmt.Sprintf("Turn 1: the agent said %q, and goalrun's check #1 failed right after it (see the progress above): "+
				"the verdict is always goalrun's own check, never the agent's word.", demoPrematureClaim)
		}
	}
	return ""
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
