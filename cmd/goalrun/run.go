package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/goalrun/goalrun/goal"
	"github.com/goalrun/goalrun/goal/agent"
	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/sandbox"
)

// closeTimeout bounds the sandbox's Close at the end of a run; after an
// interruption closeGrace does (the 5 seconds of architecture.md include
// stopping the step and writing the document).
const (
	closeTimeout = 30 * time.Second
	closeGrace   = time.Second
)

// runCmd is `goalrun run`: parse and validate, run the engine, write the
// document (stdout in --json mode, a short result otherwise) and return the
// exit code.
func runCmd(ctx context.Context, args []string, env lookupEnv, stdout, stderr io.Writer) int {
	cfg, err := parseRunArgs(args, env, os.Getwd)
	if errors.Is(err, flag.ErrHelp) {
		runUsage(stdout)
		return exitMet
	}
	if err != nil {
		return writeStartupError(err, jsonRequested(args), stdout, stderr)
	}
	eng := defaultEngine()
	var sink report.Sink
	if cfg.json {
		sink = report.NewJSONLSink(stderr)
	} else {
		sink = report.NewProgressSinkSince(stderr, eng.now())
	}
	if !cfg.json { // in JSON mode stderr carries nothing but events
		eng.warn = stderr
		if cfg.configFile != "" && len(cfg.fileKeys) > 0 {
			// Say where settings came from: a .goalrun.yml found in the
			// workdir may not be the user's own (an agent can write one).
			fmt.Fprintf(stderr, "goalrun: settings from %s: %s\n", cfg.configFile, strings.Join(cfg.fileKeys, ", "))
		}
	}
	doc, code := execute(ctx, cfg, eng, sink)
	if cfg.json {
		writeDocument(stdout, doc)
	} else {
		writeShortResult(stdout, doc, cfg)
	}
	return code
}

// jsonRequested reports whether --json appears among the flags (before
// "--"); used when parsing failed and the settings are unknown.
func jsonRequested(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--json", "-json", "--json=true", "-json=true", "--json=1", "-json=1":
			return true
		}
	}
	return false
}

// writeStartupError reports a startup failure: in JSON mode the
// startup-error document on stdout and its one "failed" event on stderr;
// otherwise a readable error on stderr.
func writeStartupError(err error, jsonMode bool, stdout, stderr io.Writer) int {
	se := asStartupError(err)
	if jsonMode {
		e := report.NewEmitter(report.NewJSONLSink(stderr), nil, nil)
		doc := report.FailStartup(e, se.code, se.message, se.suggestions...)
		writeDocument(stdout, doc)
		return exitCodeFor(doc)
	}
	doc := report.StartupError(se.code, se.message, se.suggestions...)
	fmt.Fprintf(stderr, "goalrun: %s\n", doc.Message)
	for _, s := range doc.Suggestions {
		fmt.Fprintf(stderr, "  %s\n", s)
	}
	return exitCodeFor(doc)
}

func asStartupError(err error) *startupError {
	var se *startupError
	if errors.As(err, &se) {
		return se
	}
	return &startupError{code: report.ErrBadInput, message: err.Error()}
}

// writeDocument writes the encoded document and a newline.
func writeDocument(w io.Writer, doc report.Document) {
	b := report.Encode(doc)
	b = append(b, '\n')
	w.Write(b)
}

// writeShortResult is the human result on stdout: the headline, then the
// summary or the failure's message, then where the document went.
func writeShortResult(w io.Writer, doc report.Document, cfg runConfig) {
	brief := doc
	brief.Message = "" // printed whole below
	fmt.Fprintf(w, "goalrun: %s\n", terminalText(report.Headline(brief)))
	switch {
	case doc.Summary != nil && strings.TrimSpace(*doc.Summary) != "":
		fmt.Fprintf(w, "\n%s\n", terminalText(strings.TrimSpace(*doc.Summary)))
	case doc.Message != "":
		fmt.Fprintf(w, "\n%s\n", terminalText(doc.Message))
		for _, s := range doc.Suggestions {
			fmt.Fprintf(w, "  %s\n", terminalText(s))
		}
	}
	if doc.Goal != nil && doc.Goal.HaltReason != "" {
		fmt.Fprintf(w, "\n%s\n", terminalText(doc.Goal.HaltReason))
	}
	if cfg.output != "" && outputHolds(cfg.output, doc) {
		fmt.Fprintf(w, "\ndocument: %s\n", cfg.output)
	}
}

// terminalText makes text the agent may have written safe to print on a
// terminal or in a CI log: control characters are replaced
// (report.Printable), and a line that would read as a GitHub Actions workflow command
// ("::add-mask::…", "::stop-commands::…", the older "##[…]" form; leading
// blanks ignored) gets a zero-width space after its first character, so a
// `goalrun run` step in a workflow never obeys the agent.
func terminalText(s string) string {
	s = report.Printable(s)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		t := strings.TrimLeft(l, " \t")
		if strings.HasPrefix(t, "::") || strings.HasPrefix(t, "##[") {
			lead := len(l) - len(t)
			lines[i] = l[:lead+1] + "\u200b" + l[lead+1:]
		}
	}
	return strings.Join(lines, "\n")
}

// outputHolds reports whether the file at path holds exactly doc as
// writeOutput writes it: a --output that could not be written is never
// named as where the document is.
func outputHolds(path string, doc report.Document) bool {
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
		return false // /dev/stdout (reading a pipe's other end would block), a link
	}
	b, err := os.ReadFile(path)
	return err == nil && bytes.Equal(b, append(report.Encode(doc), '\n'))
}

// exitCodeFor maps a document to the exit code (architecture.md): 0 goal
// met, 1 not met, 2 bad input, 3 the run failed, 130 interrupted.
func exitCodeFor(doc report.Document) int {
	switch doc.Status {
	case report.StatusSuccess:
		if doc.Goal != nil && doc.Goal.Passed {
			return exitMet
		}
		return exitNotMet
	case report.StatusCancelled:
		return exitInterrupted
	}
	if doc.Goal == nil { // the startup-error shape: no run existed
		switch doc.Error {
		case report.ErrBadInput, report.ErrAgentNotFound:
			return exitBadInput
		case report.ErrCancelled:
			return exitInterrupted
		}
	}
	return exitRunFailed
}

// engine is what execute needs from the world; tests replace parts.
type engine struct {
	now func() time.Time
	// sandboxes starts the sandbox for a --sandbox mode.
	sandboxes sandboxFactory
	// adapter builds the agent adapter for --agent.
	adapter func(cfg runConfig) (agent.Adapter, error)
	// judge builds the judge for --infer-until/--judge-cmd.
	judge func(cfg runConfig, a agent.Adapter) (goal.Judge, error)
	// halter builds the no-progress and budget halts.
	halter func(cfg runConfig) (goal.Halter, error)
	// warn receives problems that do not change the run's verdict (an
	// --output file that cannot be written); nil drops them.
	warn io.Writer
}

func defaultEngine() engine {
	return engine{
		now:       time.Now,
		sandboxes: defaultSandboxes(),
		adapter:   newAdapter,
		judge:     newJudge,
		halter:    newHalter,
	}
}

// newAdapter builds the adapter for cfg.agent (agent.New's registry).
func newAdapter(cfg runConfig) (agent.Adapter, error) {
	a, err := agent.New(cfg.agent)
	if err != nil {
		return nil, &startupError{code: report.ErrAgentNotFound, message: err.Error()}
	}
	return a, nil
}

// newJudge builds the judge: --judge-cmd decides by its exit code, else the
// agent CLI itself is asked (--infer-until).
func newJudge(cfg runConfig, a agent.Adapter) (goal.Judge, error) {
	if cfg.judgeCmd != "" {
		return &goal.CommandJudge{Command: cfg.judgeCmd, Timeout: cfg.stepTimeout}, nil
	}
	if cfg.agent == agent.CommandName {
		return nil, badInput("--infer-until with the command agent needs --judge-cmd: a plain command cannot be asked whether the goal is met")
	}
	return &goal.AgentJudge{Adapter: a, Bin: cfg.agentBin, Model: cfg.model, Timeout: cfg.stepTimeout}, nil
}

// newHalter builds the smart halts: no_progress (always on unless
// --no-progress-turns is negative) and the budgets.
func newHalter(cfg runConfig) (goal.Halter, error) {
	return goal.NewHalts(goal.HaltOptions{NoProgressTurns: cfg.noProgressTurns, MaxCostUSD: cfg.maxCostUSD, MaxTokens: cfg.maxTokens}), nil
}

// execute runs the engine for a validated configuration: it starts the
// sandbox, emits the run's events to sinks (and --events), runs the loop,
// builds the document with exactly one terminal event, writes --output,
// closes the sandbox, and returns the document and the exit code. It
// writes nothing to stdout itself.
func execute(ctx context.Context, cfg runConfig, eng engine, sinks ...report.Sink) (report.Document, int) {
	red := report.NewRedactor(secretValues(cfg.secrets)...)
	var closers []io.Closer
	defer func() {
		for _, c := range closers {
			c.Close()
		}
	}()
	if cfg.events != "" {
		f, err := openResultFile(cfg.events, cfg.dir)
		if err != nil {
			e := report.NewEmitter(report.Tee(sinks...), red, eng.now)
			doc := report.FailStartup(e, report.ErrBadInput, fmt.Sprintf("--events %s: %v", cfg.events, err))
			return doc, exitCodeFor(doc)
		}
		closers = append(closers, f)
		sinks = append(sinks, report.NewJSONLSink(f))
	}
	em := report.NewEmitter(report.Tee(sinks...), red, eng.now)
	// --output is opened now, before the agent runs, and written through
	// this descriptor at the end: whatever the agent plants at that path
	// meanwhile (a symlink to a host file) is never followed.
	var output *os.File
	fail := func(se *startupError) (report.Document, int) {
		doc := report.FailStartup(em, se.code, se.message, se.suggestions...)
		writeOutput(output, cfg.output, doc, eng.warn)
		return doc, exitCodeFor(doc)
	}
	if cfg.output != "" { // fail before the run, not after it
		f, err := openResultFile(cfg.output, cfg.dir)
		if err != nil {
			return fail(badInput("--output %s: %v", cfg.output, err))
		}
		closers = append(closers, f)
		output = f
	}

	adapter, err := eng.adapter(cfg)
	if err != nil {
		return fail(asStartupError(err))
	}
	lc := goal.Config{
		Adapter: adapter, Task: cfg.task, Check: cfg.until, InferUntil: cfg.inferUntil,
		AgentBin: cfg.agentBin, Model: cfg.model, AgentArgs: cfg.agentArgs, MaxTurns: cfg.maxTurns,
		MaxIterations: cfg.maxIterations, Timeout: cfg.timeout, StepTimeout: cfg.stepTimeout,
		Events: em, Receipts: report.NewRollup().SetRedactor(red), Now: eng.now,
	}
	if cfg.inferUntil != "" || cfg.judgeCmd != "" {
		if lc.Judge, err = eng.judge(cfg, adapter); err != nil {
			return fail(asStartupError(err))
		}
	}
	if lc.Halter, err = eng.halter(cfg); err != nil {
		return fail(asStartupError(err))
	}
	ev := report.NewEvidence().SetRedactor(red)
	lc.Evidence = ev

	start := eng.now()
	sb, err := eng.sandboxes.start(ctx, cfg, sandboxConfig(cfg))
	if err != nil {
		if ctx.Err() != nil { // SIGINT/SIGTERM while the sandbox was starting
			return fail(&startupError{code: report.ErrCancelled,
				message: fmt.Sprintf("goalrun was interrupted (SIGINT or SIGTERM) while the sandbox was starting: %v", err)})
		}
		return fail(asSandboxError(err))
	}
	defer func() {
		wait := closeTimeout
		if ctx.Err() != nil {
			wait = closeGrace
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait)
		defer cancel()
		sb.Close(cctx)
	}()
	posture := sb.Posture()
	// The tracker covers what the sandbox let the agent write: the mount
	// when it is wider than the workspace (a repository root), paths then
	// relative to it (changes.relative_to "mount").
	// goalrun's own --output and --events are not the agent's changes.
	trackOpt := goal.ChangeOptions{Check: cfg.until, Evidence: ev}
	trackRoot := cfg.dir
	if posture.Mount != nil {
		trackOpt.Root, trackRoot = *posture.Mount, *posture.Mount
	}
	trackOpt.Ignore = ownFilesRel(trackRoot, true, cfg.output, cfg.events)
	tracker := goal.NewWorkspaceTracker(cfg.dir, trackOpt)
	defer tracker.Close()
	lc.Tracker = tracker
	started := map[string]any{"goal": firstNonEmpty(cfg.until, cfg.inferUntil), "agent": cfg.agent, "sandbox": posture}
	if cfg.model != "" {
		started["model"] = cfg.model
	}
	em.Emit(report.EventStarted, report.PhaseRun, "goal: "+firstNonEmpty(cfg.until, cfg.inferUntil), started)
	ready := map[string]any{"seconds": eng.now().Sub(start).Seconds(), "mode": posture.Mode}
	if c, ok := sb.(interface{ ContainerID() string }); ok && c.ContainerID() != "" {
		ready["container_id"] = shortID(c.ContainerID())
	}
	if posture.ImageDigest != "" {
		ready["image_digest"] = posture.ImageDigest
	}
	if posture.FallbackNotice != nil {
		ready["fallback_notice"] = *posture.FallbackNotice
	}
	em.Emit(report.EventSandboxReady, report.PhaseSandbox, "sandbox ready: "+posture.Mode, ready)

	lc.Sandbox = sb
	lc.MissingKey = missingKey(cfg, posture)
	if a, ok := sb.(agentPlacer); ok { // where the agent is inside a container
		lc.AgentBin, lc.BaseURL = a.agentBin(lc.AgentBin), a.baseURL()
	}
	out, err := goal.Run(ctx, lc)
	if err != nil { // a configuration the validation should have refused
		return fail(badInput("%v", err))
	}
	final := sb.Posture() // counters (egress denials) are final now
	doc := report.Finish(out.ReportRun(&final, cfg.allowTestEdits), em)
	writeOutput(output, cfg.output, doc, eng.warn)
	return doc, exitCodeFor(doc)
}

// missingKey names the agent's key variable when the agent cannot have a
// key: the variable is unset (no upstream was configured with it) and the
// sandbox is a Docker container, whose HOME starts empty, so no login of
// the agent CLI's own is inside either. "" otherwise: the command agent
// needs no key, and on the local host the CLI may use its own login.
func missingKey(cfg runConfig, p sandbox.Posture) string {
	k := cfg.spec.API.KeyEnv
	if k == "" || cfg.agent == agent.CommandName || len(cfg.upstreams) > 0 || p.Mode != "docker" {
		return ""
	}
	return k
}

// writeOutput writes the document to f, the --output file opened by
// openResultFile (nothing when f is nil), replacing what it held. A failure
// to write it never changes the run's verdict; it is reported on warn,
// naming path.
func writeOutput(f *os.File, path string, doc report.Document, warn io.Writer) {
	if f == nil {
		return
	}
	b := append(report.Encode(doc), '\n')
	if fi, err := f.Stat(); err == nil && !fi.Mode().IsRegular() { // /dev/stdout, a terminal
		if _, err := f.Write(b); err != nil && warn != nil {
			fmt.Fprintf(warn, "goalrun: writing --output %s: %v\n", path, err)
		}
		return
	}
	err := f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt(b, 0)
	}
	if err == nil && !stillAt(f, path) {
		err = errors.New("the path was replaced during the run (by the agent?); the document was not written through it")
	}
	if err != nil && warn != nil {
		fmt.Fprintf(warn, "goalrun: writing --output %s: %v\n", path, err)
	}
}

// stillAt reports whether path (not followed) still names the file f.
func stillAt(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Lstat(path)
	return err == nil && os.SameFile(a, b)
}

// openResultFile opens --output or --events for writing, created 0644 and
// emptied, refusing a symbolic link as the last path element (an agent
// that had the workspace in an earlier run may have planted one pointing
// at a host file) and anything that is not a regular file or a character
// device (such as a FIFO that would block). Errors name the reason.
func openResultFile(path, workspace string) (*os.File, error) {
	const flags = os.O_WRONLY | os.O_CREATE | syscall.O_NOFOLLOW | syscall.O_NONBLOCK
	var f *os.File
	var err error
	dev := strings.HasPrefix(filepath.Clean(path), "/dev/")
	if rel, inside := underWorkspace(path, workspace); inside {
		// An agent could have planted links anywhere in the workspace,
		// also in a folder of the path: open it through os.Root, which
		// never leaves the workspace.
		var root *os.Root
		if root, err = os.OpenRoot(workspace); err != nil {
			return nil, err
		}
		f, err = root.OpenFile(rel, flags, 0o644)
		root.Close()
		if err != nil && strings.Contains(err.Error(), "path escapes from parent") {
			return nil, fmt.Errorf("a symbolic link in its path leads out of the workspace; goalrun does not write through links (one in a workspace may have been planted by an agent), name a real folder")
		}
	} else if dev {
		// /dev/stdout, /dev/stderr, /dev/fd/N are links no agent can plant.
		f, err = os.OpenFile(path, os.O_WRONLY, 0)
	} else {
		f, err = os.OpenFile(path, flags, 0o644)
	}
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("it is a symbolic link; goalrun does not write through links (one in a workspace may have been planted by an agent), name the file itself")
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	switch m := fi.Mode(); {
	case dev: // a terminal, a pipe, /dev/null: written as they are
	case m.IsRegular():
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
			f.Close()
			return nil, fmt.Errorf("it has %d hard links; goalrun does not write a file that has other names (one may be a host file an agent linked), name a new file", st.Nlink)
		}
		if err := f.Truncate(0); err != nil {
			f.Close()
			return nil, err
		}
	case m&os.ModeCharDevice != 0: // /dev/null, a terminal
	default:
		f.Close()
		return nil, fmt.Errorf("it is a %s, not a regular file", fileKind(m))
	}
	return f, nil
}

// underWorkspace reports whether path lies inside the workspace folder and
// its path relative to it (both made absolute; the workspace's own links
// resolved, which the user chose).
func underWorkspace(path, workspace string) (rel string, inside bool) {
	if workspace == "" {
		return "", false
	}
	ws, err := filepath.EvalSymlinks(workspace)
	if err != nil {
		return "", false
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", false
	}
	for _, w := range []string{workspace, ws} {
		if r, err := filepath.Rel(w, abs); err == nil && filepath.IsLocal(r) {
			return r, true
		}
	}
	return "", false
}

// fileKind names a non-regular file mode for errors.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&os.ModeNamedPipe != 0:
		return "named pipe"
	case m&os.ModeSocket != 0:
		return "socket"
	case m&os.ModeDevice != 0:
		return "block device"
	}
	return "special file"
}

// sandboxConfig is the sandbox's configuration for a run: the agent's
// model API as an upstream (its real key injected by the egress proxy, or
// passed in where there is no proxy), and the egress allowlist (the model
// API's host plus --allow-host).
func sandboxConfig(cfg runConfig) sandbox.Config {
	c := sandbox.Config{
		RunID:         runID(),
		Workspace:     cfg.dir,
		Network:       cfg.net,
		Upstreams:     cfg.upstreams,
		Image:         cfg.image,
		WorkspaceMode: sandbox.WorkspaceMode(cfg.workspace),
		// The sandbox drops what lies outside its mount.
		HostOwned: ownFilesRel(cfg.dir, false, cfg.output, cfg.events),
	}
	if cfg.net == sandbox.NetworkEgress {
		c.AllowHosts = append(cfg.spec.AllowHosts(), cfg.allowHosts...)
	}
	return c
}

// shortID is the first 12 characters of a container id, as docker ps shows.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// runID is a run's unique label: the time and the process id.
func runID() string {
	return fmt.Sprintf("%s-%d", time.Now().UTC().Format("20060102T150405.000000000"), os.Getpid())
}

func secretValues(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, m[k])
	}
	return out
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// runUsage prints `goalrun run --help`.
func runUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: goalrun run [flags] [--] [PROMPT…]

Runs an agent in a sandbox, in a loop, until the check (--until) passes.
Every flag can also be set in a YAML config file under the same name
(--config FILE, else .goalrun.yml in the workdir); a flag wins over the file.

Flags:
`)
	var s settings
	var c string
	var nc bool
	fs := newFlagSet(&s, &c, &nc)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprint(w, `
Exit codes: 0 goal met, 1 goal not met, 2 bad input, 3 the run failed
(sandbox, agent, auth, check not runnable), 130 interrupted.
`)
}
