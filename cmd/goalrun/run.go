package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/goalrun/goalrun/goal"
	"github.com/goalrun/goalrun/goal/agent"
	"github.com/goalrun/goalrun/goal/workspace"
	"github.com/goalrun/goalrun/grounding"
	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/sandbox"
)

// closeTimeout bounds the sandbox's Close at the end of a run; after an
// interruption sandbox.PhaseCleanup's deadline does.
const closeTimeout = 30 * time.Second

// runCmd is `goalrun run`: parse and validate, run the engine, write the
// document (stdout in --json mode, the human result otherwise) and return
// the exit code.
func runCmd(ctx context.Context, args []string, env lookupEnv, stdout, stderr io.Writer) int {
	eng := defaultEngine()
	eng.keyFirst = true
	return runWith(ctx, args, env, stdout, stderr, eng)
}

// runWith is runCmd with the engine given (tests inject the clock and the
// sandbox). The result is written as soon as the document is final, before
// the sandbox is torn down; in human mode the time line follows once the
// teardown is done and measured.
func runWith(ctx context.Context, args []string, env lookupEnv, stdout, stderr io.Writer, eng engine) int {
	if eng.started.IsZero() {
		eng.started = eng.now()
	}
	cfg, err := parseRunArgs(args, env, os.Getwd)
	if errors.Is(err, flag.ErrHelp) {
		runUsage(stdout)
		return exitMet
	}
	if err == nil {
		eng.streams, err = streamAliases(cfg, stdout, stderr)
	}
	if err != nil {
		return writeStartupError(err, jsonRequested(args), stdout, stderr)
	}
	var sink report.Sink
	if cfg.json {
		sink = dropsNoted(report.NewJSONLSink(stderr), stderr)
	} else {
		sink = report.NewProgressSinkWith(stderr, report.ProgressOptions{Start: eng.started, Verbose: cfg.verbose})
	}
	if !cfg.json { // in JSON mode stderr carries nothing but events
		eng.warn = stderr
		if cfg.configFile != "" && len(cfg.fileKeys) > 0 {
			// Say where settings came from: a .goalrun.yml found in the
			// workdir may not be the user's own (an agent can write one).
			fmt.Fprintf(stderr, "goalrun: settings from %s: %s\n", cfg.configFile, strings.Join(cfg.fileKeys, ", "))
		}
	}
	times := &runTimes{}
	eng.times = times
	eng.deliver = func(doc report.Document) {
		if cfg.json {
			writeDocument(stdout, doc)
		} else {
			writeHumanResult(stdout, doc, cfg)
		}
	}
	_, code := execute(ctx, cfg, eng, sink)
	if !cfg.json && times.measured {
		fmt.Fprintf(stdout, "time: %s\n", times.line())
	}
	if n := droppedOf(stderr); n > 0 && !cfg.json {
		fmt.Fprintf(stderr, "goalrun: %d progress lines were dropped while stderr was not being read\n", n)
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
	// A message may quote a path or a file's text: terminal-safe, and
	// without the document's truncation marker.
	fmt.Fprintf(stderr, "goalrun: %s\n", terminalText(report.Unmarked(doc.Message)))
	for _, s := range doc.Suggestions {
		fmt.Fprintf(stderr, "  %s\n", terminalText(report.Unmarked(s)))
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

// writeDocument writes the encoded document and a newline (never
// dropped by a streamWriter).
func writeDocument(w io.Writer, doc report.Document) {
	b := report.Encode(doc)
	b = append(b, '\n')
	writeWhole(w, b)
}

// terminalText makes text the agent may have written safe to print on a
// terminal or in a CI log (report.TerminalText).
func terminalText(s string) string { return report.TerminalText(s) }

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

// exitCodeFor maps a document to the exit code (README.md, "Exit codes"): 0 goal
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
	// started is when the run began, the start of elapsed_seconds and of
	// every progress line's clock (zero: when execute starts).
	started time.Time
	// deliver, when set, gets the finished document exactly once, after
	// --output is written and before the sandbox is torn down (a teardown
	// that takes long never delays the result); execute's callers that
	// set it do not write the document themselves.
	deliver func(report.Document)
	// times, when set, receives the run's time split and its teardown.
	times *runTimes
	// keyFirst stops a Docker run whose agent has no model API key before
	// anything starts (goalrun run). The action leaves it off: a pull
	// request from a fork gets no secrets, and its check may already pass
	// without an agent turn.
	keyFirst bool
	// changes, when set, receives the run's changes in detail once the loop
	// ended (nil when none were computed) and the folder their paths are
	// relative to; patchBytes is how much of the unified diff they keep.
	changes    func(d *workspace.Diff, root string)
	patchBytes int
	// streams maps "--output" and "--events" to goalrun's own stdout or
	// stderr when the flag names it (outside --json: streamAliases); such
	// a flag is written through that stream.
	streams map[string]io.Writer
	// finish, when set, rewords the finished document before it is
	// written, emitted or delivered (the action names its inputs where
	// goalrun run names flags: actionWords).
	finish func(report.Document) report.Document
}

// runTimes is where a run's time went, as execute measured it: the
// document's timings and elapsed time, how many checks and turns were
// timed, and the teardown after the document.
type runTimes struct {
	measured      bool
	timings       report.Timings
	checks, turns int
	total         time.Duration
	teardown      time.Duration
}

// line is the human "time:" line (report.TimeLine).
func (t *runTimes) line() string {
	return report.TimeLine(t.timings, t.checks, t.turns, t.total, t.teardown)
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
	if c, ok := a.(agent.Codex); ok {
		c.ConfigModel = cfg.codexConfigModel
		return c, nil
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
// builds the document, writes --output (and settles --events), emits
// exactly one terminal event, hands the document to eng.deliver, tears the
// sandbox down (timed into eng.times), and returns the document and the
// exit code. It writes nothing to stdout itself.
//
// ctx may carry a sandbox.StopClock (goalrun's signal handling): once it
// is interrupted every phase of the stop has its deadline, so the document
// is out and the sandbox removed (or left to the janitor and the next
// run's Reap) within sandbox.InterruptBound.
func execute(ctx context.Context, cfg runConfig, eng engine, sinks ...report.Sink) (report.Document, int) {
	started := eng.started
	if started.IsZero() {
		started = eng.now()
	}
	red := report.NewRedactor(secretValues(cfg.secrets)...)
	var closers []io.Closer
	defer func() {
		for _, c := range closers {
			c.Close()
		}
	}()
	// The one document goes out through fin: the run's own, or the
	// watchdog's cancelled one when a signal's stop overran (main).
	fin := finaleOf(ctx)
	deliver := func(doc report.Document, code int) {
		if eng.deliver != nil {
			eng.deliver(doc)
		}
		fin.delivered(doc, code)
	}
	// claimed is what a caller whose document lost the claim returns: the
	// one that was written.
	claimed := func(doc report.Document) (report.Document, int) {
		if d, c, ok := fin.result(context.Background()); ok {
			return d, c
		}
		return doc, exitInterrupted
	}
	early := func(doc report.Document) (report.Document, int) {
		if !fin.claim() {
			return claimed(doc)
		}
		if eng.finish != nil {
			doc = eng.finish(doc)
		}
		deliver(doc, exitCodeFor(doc))
		return doc, exitCodeFor(doc)
	}
	if err := sameResultFiles(cfg.output, cfg.events); err != nil {
		e := report.NewEmitter(report.Tee(sinks...), red, eng.now)
		return early(report.FailStartup(e, report.ErrBadInput, err.Error(), "Give --output and --events two different files."))
	}
	// --output and --events are opened now, before the agent runs, and
	// written through these descriptors: whatever the agent plants at
	// their paths meanwhile (a symlink to a host file) is never followed,
	// and what it puts in their place is undone at the end (ownFile).
	var events, output *ownFile
	if w := eng.streams["--events"]; w != nil {
		events = streamFile("--events", cfg.events, w)
		sinks = append(sinks, report.NewJSONLSink(events))
	} else if cfg.events != "" {
		f, err := openOwnFile("--events", cfg.events, cfg.dir)
		if err != nil {
			e := report.NewEmitter(report.Tee(sinks...), red, eng.now)
			return early(report.FailStartup(e, report.ErrBadInput, fmt.Sprintf("--events %s: %v", cfg.events, err)))
		}
		closers = append(closers, f)
		events = f
		sinks = append(sinks, report.NewJSONLSink(f))
	}
	book := report.NewTimeBook()
	// The first agent turn starts the run's janitor (below) if the run
	// has none yet.
	janAtAgent := &janitorAtAgent{}
	sinks = append(sinks, book, janAtAgent)
	em := report.NewEmitter(report.Tee(sinks...), red, eng.now)
	ctx = withAnnouncer(ctx, em, eng.now)
	roots := []string{cfg.dir} // the trees the sandbox could write (ownFile.settle)
	// conclude writes the document where it was asked (and settles the
	// events), then the terminal event, then delivers it; a file that does
	// not hold what it should is an output_failed event and exit 3.
	conclude := func(doc report.Document) (report.Document, int) {
		if !fin.claim() {
			return claimed(doc)
		}
		if eng.finish != nil {
			doc = eng.finish(doc)
		}
		code := exitCodeFor(doc)
		for _, o := range []*ownFile{output, events} {
			if o == nil {
				continue
			}
			var want []byte
			if o == output {
				want = append(report.Encode(doc), '\n')
			}
			replaced, err := o.settle(want, roots...)
			if err != nil {
				em.Emit(report.EventOutputFailed, report.PhaseRun,
					fmt.Sprintf("could not write %s %s: %v", o.flag, o.path, err),
					map[string]any{"flag": strings.TrimPrefix(o.flag, "--"), "path": o.path, "error": err.Error()})
				if code == exitMet || code == exitNotMet {
					code = exitRunFailed
				}
				continue
			}
			if replaced && eng.warn != nil {
				fmt.Fprintf(eng.warn, "goalrun: %s %s was replaced during the run (the change report lists it); goalrun wrote its own file back in its place\n", o.flag, o.path)
			}
		}
		em.Terminal(doc)
		deliver(doc, code)
		return doc, code
	}
	fail := func(se *startupError) (report.Document, int) {
		return conclude(report.BuildStartup(red, se.code, se.message, se.suggestions...))
	}
	if w := eng.streams["--output"]; w != nil {
		output = streamFile("--output", cfg.output, w)
	} else if cfg.output != "" { // fail before the run, not after it
		f, err := openOwnFile("--output", cfg.output, cfg.dir)
		if err != nil {
			return fail(badInput("--output %s: %v", cfg.output, err))
		}
		closers = append(closers, f)
		output = f
		if events != nil && events.f != nil && sameOpenFile(output.f, events.f) {
			output = nil // nothing of the run may go into it
			return fail(badInput("--output %s and --events %s are the same file (through a link); give two different files", cfg.output, cfg.events))
		}
	}

	// Should a signal's stop overrun (main's watchdog), a cancelled
	// document goes out instead of the run's own, through conclude.
	var knownMu sync.Mutex
	var knownPosture *sandbox.Posture
	fin.arm(func() {
		knownMu.Lock()
		p := knownPosture
		knownMu.Unlock()
		conclude(overrunDocument(ctx, cfg, red, p, eng.now().Sub(started)))
	})

	adapter, err := eng.adapter(cfg)
	if err != nil {
		return fail(asStartupError(err))
	}
	lc := goal.Config{
		Adapter: adapter, Task: cfg.task, Check: cfg.until, InferUntil: cfg.inferUntil,
		AgentBin: cfg.agentBin, Model: cfg.model, AgentArgs: cfg.agentArgs, MaxTurns: cfg.maxTurns,
		MaxIterations: cfg.maxIterations, Timeout: cfg.timeout, StepTimeout: cfg.stepTimeout,
		Events: em, Receipts: report.NewRollup().SetRedactor(red), Now: eng.now, Started: started,
		ModelGateway: cfg.modelGateway,
	}
	if cfg.inferUntil != "" || cfg.judgeCmd != "" {
		if lc.Judge, err = eng.judge(cfg, adapter); err != nil {
			return fail(asStartupError(err))
		}
	}
	if lc.Halter, err = eng.halter(cfg); err != nil {
		return fail(asStartupError(err))
	}
	ev := grounding.NewEvidence().SetRedactor(red)
	lc.Evidence = ev

	if eng.keyFirst && cfg.sandbox == "docker" {
		// A Docker sandbox's agent can only have the key goalrun passes
		// on: without it no turn can work, so say so before anything
		// starts rather than after the sandbox and the first check.
		if k := missingKey(cfg, sandbox.Posture{Mode: "docker"}); k != "" {
			lc.MissingKey = k
			out := goal.MissingKeyOutcome(lc)
			run := out.ReportRun(nil, cfg.allowTestEdits)
			run.Elapsed = eng.now().Sub(started)
			return conclude(report.Build(run, red))
		}
	}

	// What this run cannot remove itself (killed outright, an Engine that
	// stopped answering) a detached janitor removes once it is gone; it
	// starts when the run outlasts janitorDelay or its first agent turn
	// begins, or at the end of a shorter run that could not remove
	// everything.
	jan := startJanitorAfter(janitorDelay, func() *janitor {
		return startJanitor(cfg.timeout+janitorGrace, cfg.sandbox != "local")
	})
	janAtAgent.set(jan)
	clean := false
	defer func() { jan.release(clean) }()
	plan := planSetup(cfg, eng.warn)
	lc.Setup, lc.Environment = plan.steps, plan.env
	scfg := sandboxConfig(cfg)
	scfg.Setup = plan.sandbox
	start := eng.now()
	// The run's --timeout counts from its start: the sandbox's start is
	// inside it (the loop gets the rest, lc.Started).
	sctx, cancelStart := ctx, context.CancelFunc(func() {})
	if cfg.timeout > 0 {
		sctx, cancelStart = context.WithTimeoutCause(ctx, cfg.timeout-start.Sub(started), errStartTimeout)
	}
	defer cancelStart()
	sb, err := eng.sandboxes.start(sctx, cfg, scfg)
	if err != nil {
		if sctx.Err() != nil {
			// A signal, or the run's --timeout, while the sandbox was
			// starting: cancelled or halted, as the loop would say.
			out := goal.StoppedOutcome(ctx, sctx, lc, "the sandbox's start")
			run := out.ReportRun(nil, cfg.allowTestEdits)
			run.Elapsed = eng.now().Sub(started)
			return conclude(report.Build(run, red))
		}
		return fail(asSandboxError(err))
	}
	// The sandbox is removed after the document is out (conclude), within
	// the stop's deadline when interrupted: what an Engine that stopped
	// answering still holds is the janitor's.
	closed := false
	closeSandbox := func() time.Duration {
		if closed {
			return 0
		}
		closed = true
		cctx, cancel := sandbox.Detached(sandbox.WithPhase(ctx, sandbox.PhaseCleanup), closeTimeout)
		defer cancel()
		t0 := eng.now()
		// Close's own calls are bounded one by one, not as a whole (an
		// Engine that stalls every removal would take 30 s for each):
		// past cctx's end what is left is the janitor's.
		closed := make(chan error, 1)
		go func() { closed <- sb.Close(cctx) }()
		select {
		case err := <-closed:
			if err != nil {
				clean = false
			}
		case <-cctx.Done():
			clean = false
		}
		return eng.now().Sub(t0)
	}
	defer closeSandbox()
	clean = true // until a removal fails
	if n, ok := sb.(interface{ Notices() []string }); ok && eng.warn != nil {
		for _, s := range n.Notices() {
			fmt.Fprintf(eng.warn, "goalrun: %s\n", s)
		}
	}
	posture := sb.Posture()
	knownMu.Lock()
	knownPosture = &posture
	knownMu.Unlock()
	// The tracker covers what the sandbox let the agent write: the mount
	// when it is wider than the workspace (a repository root), paths then
	// relative to it (changes.relative_to "mount").
	// goalrun's own --output and --events are not the agent's changes as
	// long as they are the files goalrun opened; what the agent puts in
	// their place is.
	trackOpt := workspace.Options{Check: cfg.until, JudgeCmd: cfg.judgeCmd, Evidence: ev, PatchBytes: eng.patchBytes}
	trackRoot := cfg.dir
	if posture.Mount != nil {
		trackOpt.Root, trackRoot = *posture.Mount, *posture.Mount
		roots = append(roots, *posture.Mount)
	}
	for _, o := range []*ownFile{output, events} {
		if o == nil || !o.regular {
			continue
		}
		if rel := ownFilesRel(trackRoot, true, o.path); len(rel) == 1 {
			trackOpt.OwnFiles = append(trackOpt.OwnFiles, o.identity(rel[0]))
		}
	}
	// The config file this run read, when the agent can write it: the next
	// run with the same command reads it too (the workspace's .goalrun.yml
	// is always watched).
	trackOpt.ConfigFiles = ownFilesRel(trackRoot, true, cfg.configFile)
	tracker := goal.NewWorkspaceTracker(cfg.dir, trackOpt)
	defer func() {
		if tracker.Close() != nil {
			clean = false
		}
	}()
	lc.Tracker = tracker
	startedData := map[string]any{"goal": cmp.Or(cfg.until, cfg.inferUntil), "agent": cfg.agent, "sandbox": posture}
	if cfg.model != "" {
		startedData["model"] = cfg.model
	}
	em.Emit(report.EventStarted, report.PhaseRun, "goal: "+cmp.Or(cfg.until, cfg.inferUntil), startedData)
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
	lc.Environment.Local = posture.Mode == "local"
	lc.MissingKey = missingKey(cfg, posture)
	lc.NotRunnableAdvice = notRunnableAdvice(cfg, posture)
	if len(cfg.upstreams) > 0 && cfg.modelGateway != "" {
		lc.BaseURL = cfg.modelGateway // Codex takes it on its command line
	}
	if a, ok := sb.(agentPlacer); ok { // where the agent is inside a container
		lc.AgentBin = a.agentBin(lc.AgentBin)
		if u := a.baseURL(); u != "" {
			lc.BaseURL = u
		}
	}
	out, err := goal.Run(ctx, lc)
	if err != nil { // a configuration the validation should have refused
		return fail(badInput("%v", err))
	}
	if eng.changes != nil {
		eng.changes(tracker.LastDiff(), trackRoot)
	}
	final := sb.Posture() // counters (egress denials) are final now
	run := out.ReportRun(&final, cfg.allowTestEdits)
	// One clock: the run began before the sandbox started, so the
	// document's elapsed time and its buckets count from there.
	run.Elapsed = eng.now().Sub(started)
	timings := book.Timings(run.Elapsed)
	run.Timings = &timings
	doc, code := conclude(report.Build(run, red))
	teardown := closeSandbox()
	if eng.times != nil {
		checks, turns := book.Counts()
		*eng.times = runTimes{measured: true, timings: timings, checks: checks, turns: turns, total: run.Elapsed, teardown: teardown}
	}
	return doc, code
}

// errStartTimeout ends the sandbox's start when the run's --timeout runs
// out during it.
var errStartTimeout = errors.New("the run's time budget (--timeout) ran out while the sandbox was starting")

// overrunDocument is the cancelled document main's watchdog has written
// when the stop after a signal did not end in time (finale): what the run
// knew for sure (its check, the sandbox's posture once started, the time
// spent), the rest said to be missing.
func overrunDocument(ctx context.Context, cfg runConfig, red *report.Redactor, p *sandbox.Posture, elapsed time.Duration) report.Document {
	run := report.Run{
		Check:     cmp.Or(cfg.until, cfg.inferUntil),
		Cancelled: true,
		Cause:     report.HaltInterrupted,
		Message: fmt.Sprintf("goalrun was interrupted (%s) and its stop did not end within %s of the signal: something it waited for (most likely a Docker Engine that stopped answering) did not end, so this document was written without the run's last results (iterations, changes, the agent's usage).",
			interruptName(ctx), (sandbox.PhaseFinish.Offset() + rescueAfter).Round(10*time.Millisecond)),
		Suggestions: []string{
			"Run goalrun again to continue; work the agent already did stays in the workspace.",
			"If the Docker Engine stopped answering, check it (docker info): goalrun's janitor removes what the sandbox still holds once the Engine answers again.",
		},
		Sandbox: p,
		Elapsed: elapsed,
	}
	return report.Build(run, red)
}

// interruptName names the signal that interrupted ctx's run ("SIGTERM"),
// or "SIGINT, SIGTERM, SIGHUP or SIGQUIT" when it is not known.
func interruptName(ctx context.Context) string {
	if in := sandbox.InterruptOf(ctx); in != nil && in.Signal != nil {
		return sandbox.SignalName(in.Signal)
	}
	return "SIGINT, SIGTERM, SIGHUP or SIGQUIT"
}

// sameResultFiles refuses --output and --events naming one file: the same
// path, or two paths that lead to one file through links or hard links
// (the events would be lost under the document).
func sameResultFiles(output, events string) error {
	if output == "" || events == "" {
		return nil
	}
	if filepath.Clean(output) == filepath.Clean(events) {
		return badInput("--output and --events both name %s; give two different files", output)
	}
	a, errA := os.Stat(output)
	b, errB := os.Stat(events)
	if errA == nil && errB == nil && os.SameFile(a, b) {
		return badInput("--output %s and --events %s are the same file (through a link or a hard link); give two different files", output, events)
	}
	return nil
}

// streamAliases finds --output and --events naming goalrun's own stdout or
// stderr (/dev/stdout, /dev/fd/2, /proc/self/fd/1, or the file or pipe a
// stream is redirected to). In --json mode each is bad input: stdout
// carries exactly one document and stderr nothing but the events, so
// either would get a second document or every event twice. Otherwise the
// flag is written through that stream (the returned map, keyed by flag),
// in order with what goalrun writes there.
func streamAliases(cfg runConfig, stdout, stderr io.Writer) (map[string]io.Writer, error) {
	streams := []struct {
		name, carries string
		w             io.Writer
	}{{"stdout", "the document", stdout}, {"stderr", "the events", stderr}}
	var aliases map[string]io.Writer
	for _, c := range []struct{ flag, path string }{{"--output", cfg.output}, {"--events", cfg.events}} {
		if c.path == "" {
			continue
		}
		a, err := os.Stat(c.path)
		if err != nil {
			continue // a new file: no stream's
		}
		for _, st := range streams {
			f := fileOf(st.w)
			if f == nil {
				continue
			}
			b, err := f.Stat()
			if err != nil || !os.SameFile(a, b) {
				continue
			}
			if cfg.json {
				return nil, badInput("%s %s is goalrun's %s, which in --json mode carries %s alone; give %s a file of its own, or drop --json", c.flag, c.path, st.name, st.carries, c.flag)
			}
			if aliases == nil {
				aliases = map[string]io.Writer{}
			}
			aliases[c.flag] = st.w
			break
		}
	}
	return aliases, nil
}

// sameOpenFile reports whether two open files are one (the check after
// opening, for a link made between sameResultFiles and the open).
func sameOpenFile(a, b *os.File) bool {
	x, err1 := a.Stat()
	y, err2 := b.Stat()
	return err1 == nil && err2 == nil && os.SameFile(x, y)
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

// openResultFile opens --output or --events for writing, created 0644 and
// emptied, refusing a symbolic link as the last path element (an agent
// that had the workspace in an earlier run may have planted one pointing
// at a host file) and anything that is not a regular file or a character
// device (such as a FIFO that would block). Errors name the reason.
func openResultFile(path, workspace string) (*os.File, error) {
	// Read and write: goalrun reads its own file back at the end (ownFile).
	const flags = os.O_RDWR | os.O_CREATE | syscall.O_NOFOLLOW | syscall.O_NONBLOCK
	var f *os.File
	var err error
	dev := isDevPath(path)
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
		// Private or reserved blocks a registry mirror answers at
		// (GOALRUN_EGRESS_ALLOW_NETS), for both egress proxies.
		EgressAllowNets: cfg.egressAllowNets,
		// The sandbox drops what lies outside its mount.
		HostOwned: ownFilesRel(cfg.dir, false, cfg.output, cfg.events),
	}
	// The setup container's proxy uses it too, whatever the agent's network.
	c.OutboundProxy = cfg.outboundProxy
	if cfg.net == sandbox.NetworkEgress {
		c.AllowHosts = cfg.allowHosts
		if cfg.modelGateway == "" { // with a gateway the public API is not the agent's to reach
			c.AllowHosts = append(cfg.spec.AllowHosts(), cfg.allowHosts...)
		}
	}
	if len(cfg.upstreams) > 0 {
		// goalrun serves the model API (and sets its base URL): the CLI's
		// own settings must agree (the Gemini CLI's auth type).
		c.AgentFiles = cfg.spec.Files
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
