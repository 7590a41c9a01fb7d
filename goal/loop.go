// Package goal is goalrun's loop: check → agent turn → check … until the
// check passes or a halt (docs/architecture.md, "One run, step by step"). It owns time
// (iteration and wall-clock limits, cancellation), runs every step in a
// sandbox.Sandbox, feeds the agent's stdout through its adapter's parser,
// turns what it learns into progress events and receipts, and returns an
// Outcome value. It never formats output.
package goal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/goalrun/goalrun/goal/agent"
	"github.com/goalrun/goalrun/grounding"
	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/sandbox"
)

// Defaults of Config's zero values.
const (
	// DefaultMaxIterations bounds agent turns (README.md, "Limits": 5).
	DefaultMaxIterations = 5
	// DefaultResultGrace is how long an agent process may keep running after
	// its terminal event before the loop kills it (agent.TerminalGrace).
	DefaultResultGrace = agent.TerminalGrace
	// finishGrace bounds the work done after a cancellation without a
	// sandbox.StopClock (an interrupted run has PhaseFinish's deadline).
	finishGrace = time.Second
	// finishTimeout bounds the work done after a normal end.
	finishTimeout = 2 * time.Minute
	// agentStderrKeep is how much of an agent step's stderr the loop keeps
	// for a failure's message: the last 4096 bytes.
	agentStderrKeep = 4096
	// pendingCallsMax bounds the tool calls awaiting their results in one
	// turn; calls beyond it are counted at once as failed receipts.
	pendingCallsMax = 4096
)

// Config is one run of the loop. Sandbox, Adapter and Check (or Judge) are
// required; everything else has a default.
type Config struct {
	// Sandbox runs every step; the loop never closes it.
	Sandbox sandbox.Sandbox
	// Adapter builds the agent's command and parses its stdout.
	Adapter agent.Adapter
	// Task is the user's prompt.
	Task string
	// Check is the --until command, run with sh -c as a check step; ""
	// means judge-only mode (Judge required).
	Check string
	// InferUntil is the --infer-until text the judge decides against.
	InferUntil string
	// AgentBin, Model, AgentArgs, MaxTurns and BaseURL go into every
	// agent.Turn (BaseURL: the model API's base URL as the agent sees it
	// inside the sandbox; "" = the agent's default).
	AgentBin  string
	Model     string
	AgentArgs []string
	MaxTurns  int
	BaseURL   string
	// NotRunnableAdvice are the suggestions of a CheckNotRunnable failure:
	// what the sandbox holds and the flag that gives it the command (nil: a
	// generic sentence). The runner knows the sandbox; the loop does not.
	NotRunnableAdvice []string
	// MissingKey names the variable the agent reads its model API key from
	// when the runner knows the agent cannot have a key: the variable is not
	// set and the sandbox holds no login of the agent's own (a Docker
	// sandbox's HOME starts empty). "" means the key is there or cannot be
	// judged (a local run may use the CLI's own login). When set and the
	// first check fails, the run ends auth_required (missing_key) before any
	// agent turn, naming the variable.
	MissingKey string
	// ModelGateway is the --model-gateway base URL the agent's model API
	// requests go to ("" = the agent's public API): an auth failure's
	// advice names it, since the gateway (or the API behind it) is what
	// refused the key.
	ModelGateway string
	// MaxIterations bounds agent turns (0 = DefaultMaxIterations).
	MaxIterations int
	// Timeout bounds the whole run's wall clock (0 = none); StepTimeout one
	// agent turn or one check (0 = none).
	Timeout, StepTimeout time.Duration
	// Started is when the run began, before its sandbox started: Timeout
	// counts from it (zero: from the loop's start).
	Started time.Time
	// ResultGrace is how long an agent process may run on after its
	// terminal event (0 = DefaultResultGrace).
	ResultGrace time.Duration
	// Events receives progress events (nil discards them).
	Events Events
	// Receipts collects the tool calls (nil: the loop makes its own).
	Receipts *report.Rollup
	// Now is the clock (nil = time.Now); durations in the outcome and
	// events are measured with it.
	Now func() time.Time
	// Setup are the setup steps run before the first check
	// (sandbox.RoleSetup), in order.
	Setup []SetupStep
	// Environment is what goalrun knows of the project beyond the check's
	// output (declared dependencies, the setup commands that ran), for
	// telling a check that fails for its environment from the agent's
	// failure (EnvironmentFailure).
	Environment Environment

	// Grounding seams (nil = off); see hooks.go.
	Judge    Judge
	Tracker  Tracker
	Evidence Evidence
	Halter   Halter
}

// ErrBadConfig is wrapped by Run's error when Config cannot describe a run.
var ErrBadConfig = errors.New("goal: bad loop configuration")

// Run runs the loop until the goal passes or a halt, and returns how it
// ended. ctx ending (SIGINT/SIGTERM) stops the running step and ends the run
// as interrupted. The returned error is non-nil only for a Config that
// cannot run (wrapping ErrBadConfig); every other ending, the machinery's
// failures included, is an Outcome.
func Run(ctx context.Context, cfg Config) (Outcome, error) {
	if cfg.Sandbox == nil || cfg.Adapter == nil {
		return Outcome{}, fmt.Errorf("%w: a sandbox and an agent adapter are required", ErrBadConfig)
	}
	if cfg.Check == "" && cfg.Judge == nil {
		return Outcome{}, fmt.Errorf("%w: neither a check (--until) nor a judge (--infer-until)", ErrBadConfig)
	}
	if cfg.MaxIterations < 0 {
		return Outcome{}, fmt.Errorf("%w: max iterations %d < 0", ErrBadConfig, cfg.MaxIterations)
	}
	l := newLoop(cfg)
	l.run(ctx)
	return l.finish(ctx), nil
}

// loop is one run's state.
type loop struct {
	cfg    Config
	now    func() time.Time
	events Events

	out      Outcome
	started  time.Time
	lastText string // the agent's last prose, a fallback summary
	lastRun  *CheckRun
	halted   bool
	state    string // the Tracker's latest fingerprint

	mu       sync.Mutex // guards what the parser's emit callback touches
	seq      int
	pending  map[string]pendingCall
	models   map[string]bool
	usage    usageBook
	turnHalt struct{ halt, reason string } // a budget halt raised mid-turn
	// egress tracks model API retries goalrun's own egress proxy caused
	// in the running turn (unreachable upstream: answered 502).
	egress struct {
		deniedAtStart int  // the sandbox's EgressDenied when the turn began
		run           int  // consecutive 502 retries matched by new denials
		stopped       bool // the turn was stopped for them
	}
}

type pendingCall struct {
	seq   int
	tool  string
	brief string
	via   string
	paths []string
}

func newLoop(cfg Config) *loop {
	if cfg.MaxIterations == 0 {
		cfg.MaxIterations = DefaultMaxIterations
	}
	if cfg.ResultGrace <= 0 {
		cfg.ResultGrace = DefaultResultGrace
	}
	if cfg.Receipts == nil {
		cfg.Receipts = report.NewRollup()
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	events := cfg.Events
	if events == nil {
		events = discardEvents{}
	}
	goalText := cfg.Check
	if goalText == "" {
		goalText = cfg.InferUntil
	}
	return &loop{
		cfg:    cfg,
		now:    now,
		events: events,
		out: Outcome{
			Check:      cfg.Check,
			Goal:       goalText,
			AgentName:  cfg.Adapter.Name(),
			Iterations: &report.IterationLog{},
			Receipts:   cfg.Receipts,
		},
		models:  map[string]bool{},
		pending: map[string]pendingCall{},
		usage:   newUsageBook(),
	}
}

type discardEvents struct{}

func (discardEvents) Emit(string, string, string, map[string]any) {}

// errRunTimeout is the cause of the run context when --timeout expires.
var errRunTimeout = errors.New("the run's time budget (--timeout) ran out")

// run is the loop proper; it leaves its verdict in l.out.
func (l *loop) run(parent context.Context) {
	l.started = l.now()
	l.out.Started = l.started
	ctx := parent
	if l.cfg.Timeout > 0 {
		budget := l.cfg.Timeout
		if !l.cfg.Started.IsZero() {
			budget -= l.started.Sub(l.cfg.Started)
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(parent, budget, errRunTimeout)
		defer cancel()
	}

	if !l.runSetup(parent, ctx) {
		return
	}
	if l.cfg.Check != "" {
		cr, err := l.runCheck(ctx, 0)
		l.out.Iterations.Add(report.Iteration{N: 0, Check: checkResult(cr)})
		switch {
		case l.stopped(parent, ctx, "the first check"):
			return
		case err == nil && cr.Environment != nil:
			l.environmentFailed(cr)
			return
		case err != nil && errors.Is(err, sandbox.ErrNotStarted), err == nil && (cr.ExitCode == 126 || cr.ExitCode == 127):
			l.checkNotRunnable(cr, err)
			return
		case err != nil:
			l.fail(report.ErrSandboxFailed, "sandbox_failed", fmt.Sprintf("The sandbox failed while running the first check: %v", err), nil,
				"Check that the sandbox can run commands in the workspace, then run goalrun again.")
			return
		}
		l.evaluate(0, cr, nil)
		if cr.Passed {
			l.out.Passed, l.out.Grounded, l.out.TestedNothing = true, true, cr.TestedNothing
			l.out.Summary = "The check already passed before any agent turn; the agent was not started."
			return
		}
	}

	if l.cfg.Tracker != nil {
		if err := l.cfg.Tracker.Baseline(ctx); err != nil {
			if l.stopped(parent, ctx, "the workspace snapshot") {
				return
			}
			l.fail(report.ErrSandboxFailed, "snapshot_failed", fmt.Sprintf("Could not snapshot the workspace before the first agent turn: %v", err), nil,
				"Check that the workspace is readable, then run goalrun again.")
			return
		}
		l.trackState(ctx, 0)
	}
	// The first check and the untouched workspace are the Halter's point of
	// comparison for turn 1 (an idle agent halts after NoProgressTurns).
	if l.cfg.Halter != nil && l.lastRun != nil {
		l.cfg.Halter.AfterTurn(l.facts(0, *l.lastRun))
	}

	if l.cfg.MissingKey != "" {
		l.missingKey()
		return
	}
	for i := 1; i <= l.cfg.MaxIterations; i++ {
		if l.stopped(parent, ctx, fmt.Sprintf("before agent turn %d", i)) {
			return
		}
		if done := l.iteration(parent, ctx, i); done {
			return
		}
	}
	// Only reached when the last turn neither passed nor halted itself
	// (it always does; kept so the loop can never end without a verdict).
	if !l.halted {
		l.halt(report.HaltMaxIterations, maxIterationsReason(l.cfg.MaxIterations))
	}
}

// iteration runs agent turn i, the check and the judge; it returns true when
// the run is over (passed, halted or failed).
func (l *loop) iteration(parent, ctx context.Context, i int) bool {
	it := report.Iteration{N: i}
	step, tr, err := l.agentTurn(ctx, i)
	if err == nil || !errors.Is(err, sandbox.ErrNotStarted) {
		l.out.AgentTurns = i // a turn whose agent never started is not a turn taken
	}
	it.Agent = &report.AgentStep{Status: tr.Status, Cause: tr.Cause, Turns: tr.Turns, Seconds: seconds(step.duration)}
	record := func() { l.out.Iterations.Add(it) }

	switch {
	case l.stopped(parent, ctx, fmt.Sprintf("agent turn %d", i)):
		record()
		return true
	case err != nil && errors.Is(err, sandbox.ErrNotStarted):
		record()
		l.fail(report.ErrAgentNotFound, "agent_not_started",
			fmt.Sprintf("The %s agent could not be started in the sandbox: %v", l.cfg.Adapter.Name(), err),
			map[string]any{"iteration": i},
			"Install the agent in the sandbox or name its executable with --agent-bin.")
		l.out.Halt, l.out.HaltReason = report.HaltAgentError, "The agent could not be started."
		return true
	case err != nil:
		record()
		l.fail(report.ErrSandboxFailed, "sandbox_failed", fmt.Sprintf("The sandbox failed during agent turn %d: %v", i, err),
			map[string]any{"iteration": i}, "Check the sandbox (Docker Engine or host) and run goalrun again.")
		return true
	case tr.Status == agent.StatusAuthRequired:
		record()
		msg := firstNonBlank(tr.Message, "The agent's model API refused its credentials.")
		reason := firstNonBlank(tr.AuthReason, agent.AuthInvalidKey)
		var keyEnv string
		if spec, err := agent.SpecOf(l.cfg.Adapter.Name()); err == nil {
			keyEnv = spec.API.KeyEnv
		}
		advice, haltReason := authAdvice(reason, keyEnv, l.cfg.ModelGateway)
		detail := map[string]any{"iteration": i}
		if keyEnv != "" {
			detail["key_env"] = keyEnv
		}
		l.out.Failure = &Failure{
			Code: report.ErrAuthRequired, Message: msg, Cause: "auth_required", Reason: reason,
			Detail: detail, Suggestions: []string{advice},
		}
		l.out.Halt, l.out.HaltReason = report.HaltAuthRequired, haltReason
		return true
	}
	if h := l.budgetHalt(); h.halt != "" {
		record()
		l.halt(h.halt, h.reason)
		return true
	}

	if l.cfg.Tracker != nil {
		l.trackState(ctx, i)
		if hc, ok := l.cfg.Tracker.(HostCodeTracker); ok {
			if found := hc.HostCode(); len(found) > 0 {
				// Fail closed before the check: on the local host the
				// check itself could run git in this tree.
				record()
				paths := make([]string, len(found))
				for k, f := range found {
					paths[k] = f.Path
				}
				reason := report.UnsafeChangeReason(paths)
				l.emitEvaluated(i, false, false, "the agent changed git's executable configuration or goalrun's configuration; the check is not run", report.HaltUnsafeChange, reason)
				l.halt(report.HaltUnsafeChange, reason)
				return true
			}
		}
	}

	var cr CheckRun
	if l.cfg.Check != "" {
		var cerr error
		cr, cerr = l.runCheck(ctx, i)
		it.Check = checkResult(cr)
		if l.stopped(parent, ctx, fmt.Sprintf("the check after agent turn %d", i)) {
			record()
			return true
		}
		if cerr != nil {
			record()
			l.fail(report.ErrSandboxFailed, "sandbox_failed", fmt.Sprintf("The sandbox failed while running the check after agent turn %d: %v", i, cerr),
				map[string]any{"iteration": i}, "Check the sandbox (Docker Engine or host) and run goalrun again.")
			return true
		}
	}
	record()

	var verdict *JudgeVerdict
	if l.cfg.Judge != nil {
		// The judge judges the --infer-until text; the check, if any, is in
		// in.Check.
		in := JudgeInput{Goal: firstNonBlank(l.cfg.InferUntil, l.out.Goal), Iteration: i, AgentSummary: tr.Summary}
		if l.cfg.Check != "" {
			in.Check = &cr
		}
		v, err := l.cfg.Judge.Judge(ctx, l.cfg.Sandbox, in)
		if l.stopped(parent, ctx, fmt.Sprintf("the judge after agent turn %d", i)) {
			return true
		}
		if err != nil {
			v = JudgeVerdict{Met: false, Reason: fmt.Sprintf("the judge could not decide: %v", err), By: firstNonBlank(v.By, "judge")}
		}
		verdict = &v
		l.out.Judge = &report.Judge{Met: v.Met, Reason: v.Reason, By: v.By}
		l.usage.addJudge(v.Usage)
	}

	met, grounded, why := l.verdict(cr, verdict)
	if met {
		l.emitEvaluated(i, met, grounded, why, "", "")
		l.out.Passed, l.out.Grounded = true, grounded
		if grounded {
			l.out.TestedNothing = cr.TestedNothing
		}
		return true
	}

	// Not met: decide whether to go on before saying so, so the event that
	// says "not met" also says why the run stops here.
	var halt, reason string
	if l.cfg.Halter != nil {
		if halt, reason = l.cfg.Halter.AfterTurn(l.facts(i, cr)); halt == "" {
			halt, reason = l.cfg.Halter.Budget(l.usage.total())
		}
	}
	failed := halt == "" && tr.Status != agent.StatusSuccess
	if failed {
		halt, reason = report.HaltAgentError, fmt.Sprintf("Agent turn %d failed: %s.", i, causeWords(firstNonBlank(tr.Cause, agent.CauseTurnFailed), step.exitCode))
	}
	if halt == "" && i == l.cfg.MaxIterations {
		halt, reason = report.HaltMaxIterations, maxIterationsReason(l.cfg.MaxIterations)
	}
	if halt != "" && cr.Environment != nil {
		reason += " The last check failed for its environment, not a test: " + cr.Environment.Describe() +
			"; the check sees only the dependencies prepared before the first turn. " + envRerunAdvice
	}
	l.emitEvaluated(i, met, grounded, why, halt, reason)
	switch {
	case failed:
		msg, detail, advice := l.turnFailure(i, step, tr)
		l.fail(report.ErrAgentFailed, firstNonBlank(tr.Cause, "turn_failed"), msg, detail, advice)
		l.out.Halt, l.out.HaltReason = halt, reason
		return true
	case halt != "":
		l.halt(halt, reason)
		return true
	}
	return false
}

// trackState asks the Tracker for the workspace's fingerprint after turn i
// (0: before the first turn). On error the state is unknown (""), which
// the Halter never takes for "unchanged".
func (l *loop) trackState(ctx context.Context, i int) {
	state, err := l.cfg.Tracker.AfterTurn(ctx, i)
	if err != nil {
		state = ""
	}
	l.state = state
}

// facts is what the Halter sees after turn i (0: the first check).
func (l *loop) facts(i int, cr CheckRun) TurnFacts {
	return TurnFacts{Iteration: i, CheckRan: l.cfg.Check != "", CheckExit: cr.ExitCode, CheckTail: cr.Tail,
		CheckTimedOut: cr.TimedOut, State: l.state, Usage: l.usage.total()}
}

// evaluate decides whether the goal is met after the first check and emits
// goal_evaluated.
func (l *loop) evaluate(i int, cr CheckRun, v *JudgeVerdict) (met, grounded bool) {
	met, grounded, why := l.verdict(cr, v)
	l.emitEvaluated(i, met, grounded, why, "", "")
	return met, grounded
}

// emitEvaluated emits goal_evaluated; a halt decided with the verdict goes
// into its data (halt, halt_reason) and its message.
func (l *loop) emitEvaluated(i int, met, grounded bool, why, halt, reason string) {
	data := map[string]any{"iteration": i, "met": met, "grounded": grounded}
	if halt != "" {
		data["halt"], data["halt_reason"] = halt, reason
		why += "; halting (" + halt + "): " + reason
	}
	l.events.Emit(report.EventGoalEvaluated, report.PhaseVerifying, why, data)
}

// verdict decides whether the goal is met after a check (and judge), and
// says why. The check decides when there is one; the judge decides only
// without one, and is never grounded.
func (l *loop) verdict(cr CheckRun, v *JudgeVerdict) (met, grounded bool, why string) {
	switch {
	case l.cfg.Check != "":
		met, grounded = cr.Passed, cr.Passed
		why = checkWhy(cr)
		if v != nil {
			why += fmt.Sprintf("; the judge says %s: %s", metWord(v.Met), v.Reason)
		}
	case v != nil:
		met = v.Met
		why = fmt.Sprintf("the judge (%s) says %s: %s", v.By, metWord(v.Met), v.Reason)
	}
	return met, grounded, why
}

func metWord(met bool) string {
	if met {
		return "met"
	}
	return "not met"
}

func checkWhy(cr CheckRun) string {
	switch {
	case cr.TimedOut && cr.Cancelled:
		return fmt.Sprintf("the run's time budget (--timeout) ran out during the check, after %.1fs", seconds(cr.Duration))
	case cr.TimedOut:
		return fmt.Sprintf("the check timed out after %.1fs (--step-timeout)", seconds(cr.Duration))
	case cr.OOMKilled:
		return "the check was killed for exceeding the sandbox's memory limit"
	case cr.Passed && cr.TestedNothing != "":
		return "the check exited 0 but tested nothing"
	case cr.Passed:
		return "the check exited 0"
	}
	return fmt.Sprintf("the check exited %d", cr.ExitCode)
}

// stopped reports whether the run must stop now because ctx ended: the
// parent's end is an interruption, the run context's alone a timeout. where
// says what was running.
func (l *loop) stopped(parent, ctx context.Context, where string) bool {
	if l.halted {
		return true
	}
	switch {
	case parent.Err() != nil:
		sig := "SIGINT, SIGTERM, SIGHUP or SIGQUIT"
		if in := sandbox.InterruptOf(parent); in != nil && in.Signal != nil {
			sig = sandbox.SignalName(in.Signal)
		}
		l.out.Failure = &Failure{
			Code: report.ErrCancelled, Cause: "interrupted",
			Message:     fmt.Sprintf("goalrun was interrupted (%s) during %s; the running step was stopped.", sig, where),
			Suggestions: []string{"Run goalrun again to continue; work the agent already did stays in the workspace."},
		}
		l.out.Halt, l.out.HaltReason = report.HaltInterrupted, "Interrupted by a signal during "+where+"."
		l.halted = true
		return true
	case ctx.Err() != nil:
		l.halt(report.HaltTimeout, fmt.Sprintf("The run's time budget of %s (--timeout) ran out during %s.", l.cfg.Timeout, where))
		return true
	}
	return false
}

func (l *loop) halt(halt, reason string) {
	l.out.Halt, l.out.HaltReason = halt, reason
	l.halted = true
}

func (l *loop) fail(code, cause, msg string, detail map[string]any, suggestions ...string) {
	l.out.Failure = &Failure{Code: code, Cause: cause, Message: msg, Detail: detail, Suggestions: suggestions}
	l.halted = true
}

// checkNotRunnable ends the run when the first check cannot run at all.
func (l *loop) checkNotRunnable(cr CheckRun, err error) {
	detail := map[string]any{"iteration": 0, "command": l.cfg.Check}
	msg := fmt.Sprintf("The check %q cannot run in the sandbox", l.cfg.Check)
	switch {
	case err != nil:
		msg += fmt.Sprintf(": %v", err)
	case cr.ExitCode == 127:
		detail["exit_code"] = cr.ExitCode
		msg += " (exit status 127: command not found)"
	default:
		detail["exit_code"] = cr.ExitCode
		msg += " (exit status 126: found but not executable)"
	}
	if tail := strings.TrimSpace(cr.Tail); tail != "" {
		msg += ". Its output ends: " + report.Shorten(report.Fold(tail), report.BriefCap)
	}
	msg += ". No agent turn was spent on it."
	l.fail(report.ErrCheckNotRunnable, "check_not_runnable", msg, detail, firstNonNil(l.cfg.NotRunnableAdvice,
		[]string{"Make sure the check's command exists in the sandbox and is executable there: the check runs inside the sandbox, not on this machine."})...)
}

func firstNonNil(a, b []string) []string {
	if a != nil {
		return a
	}
	return b
}

// envTailBytes is how much of the check's output tail the message of an
// environment failure quotes: the last 1024 bytes (the whole message is
// capped at report.SummaryCap).
const envTailBytes = 1024

// environmentFailed ends the run when the first check failed for its
// environment: no agent turn could mend it.
func (l *loop) environmentFailed(cr CheckRun) {
	e := cr.Environment
	detail := map[string]any{"iteration": 0, "command": l.cfg.Check, "exit_code": cr.ExitCode, "line": e.Line}
	if e.Ecosystem != "" {
		detail["ecosystem"] = e.Ecosystem
	}
	if e.Missing != "" {
		detail["missing"] = e.Missing
	}
	msg := fmt.Sprintf("The check %q cannot pass in this environment: %s. No agent turn was spent on it. The line that shows it: %s", l.cfg.Check, e.Describe(), e.Line)
	if notes := l.setupNotes(); notes != "" {
		msg += ". Before the check, the setup step ran: " + notes
	} else if len(l.cfg.Environment.Setup) > 0 {
		msg += fmt.Sprintf(". Before the check, the setup step ran: %s", strings.Join(l.cfg.Environment.Setup, "; "))
	}
	p := l.cfg.Sandbox.Posture()
	if note := egressRefusalNote("the setup step", p.SetupEgressDenied, p.SetupEgressDenials); note != "" {
		msg += ". " + note
		detail["egress_denials"] = strings.Join(p.SetupEgressDenials, "; ")
	}
	if tail := strings.TrimSpace(report.CapTail(cr.Tail, cr.TailBytes, envTailBytes)); tail != "" {
		msg += ". The check's output ends:\n" + tail
	}
	fixes := withAllowNetsFix(e.Fixes(l.cfg.Environment), p.SetupEgressDenials)
	if fix := l.setupNotStartedFix(); fix != "" {
		fixes = []string{fix}
	}
	l.fail(report.ErrEnvironmentFailed, e.Cause, msg, detail, fixes...)
}

// maxIterationsReason is the halt reason for max_iterations after n turns.
func maxIterationsReason(n int) string {
	turns := "agent turns"
	if n == 1 {
		turns = "agent turn"
	}
	return fmt.Sprintf("The goal was not met after %d %s (--max-iterations).", n, turns)
}

// causeWords says an agent turn's failure cause in plain words, for halt
// reasons people read (the code itself is in failure.cause).
func causeWords(cause string, exitCode int) string {
	switch cause {
	case agent.CauseNoResultEvent:
		return "its CLI ended without its final result (it crashed or was killed)"
	case agent.CauseResultError:
		return "its CLI reported the turn as an error"
	case agent.CauseTurnFailed:
		return "its CLI reported the turn as failed"
	case agent.CauseErrorEvent:
		return "its CLI reported an error during the turn"
	case agent.CauseMaxTurns:
		return "its CLI stopped at its own turn limit (--max-turns)"
	case agent.CauseExitStatus:
		return fmt.Sprintf("the command exited %d", exitCode)
	case agent.CauseRetryStorm:
		return "its CLI kept retrying the model API, which was overloaded or unreachable"
	case agent.CauseEgressRefused:
		return "goalrun's egress proxy could not reach the model API (--allow-host)"
	case CauseStepTimeout:
		return "it ran longer than --step-timeout and was killed"
	case CauseOOM:
		return "it ran out of the sandbox's memory and was killed"
	}
	return strings.ReplaceAll(cause, "_", " ")
}

// Causes of an agent turn's failure that the sandbox, not the agent's
// output, decides (failure.cause in the document).
const (
	CauseStepTimeout = "step_timeout" // killed at --step-timeout
	CauseOOM         = "oom"          // killed for the sandbox's memory limit
)

// NoExitCode is the exit code recorded for a check that was stopped (by a
// time limit or a signal) without an exit status of its own.
const NoExitCode = -1

// runCheck runs the check as a fresh check step and emits its events.
func (l *loop) runCheck(ctx context.Context, i int) (CheckRun, error) {
	l.events.Emit(report.EventCheckStarted, report.PhaseVerifying, "check: "+l.cfg.Check,
		map[string]any{"iteration": i, "command": l.cfg.Check})
	scan := NewOutputScanner()
	runs := grounding.Runners(l.cfg.Check)
	tally := &testTally{pytest: runs["pytest"]}
	script := l.cfg.Check
	// What people see (the kept tail); the scanner and the tally read
	// every byte as the check printed it.
	tail := sandbox.NewTailWriter(nil, CheckTailKeep)
	var shown io.Writer = tail
	var quiet *goQuiet
	if runs["gotest"] {
		script = goVerbosePrefix + script
		if !goVerboseAsked(l.cfg.Check) {
			quiet = newGoQuiet(tail)
			shown = quiet
		}
	}
	// This writer serialises stdout and stderr and passes every byte on.
	out := sandbox.NewTailWriter(io.MultiWriter(scan, tally, shown), 0)
	start := l.now()
	res, err := l.cfg.Sandbox.Exec(ctx, sandbox.Cmd{
		Role:    sandbox.RoleCheck,
		Args:    sandbox.Shell(script),
		Env:     grounding.CheckPythonEnv(),
		Stdout:  out,
		Stderr:  out,
		Timeout: l.cfg.StepTimeout,
	})
	if quiet != nil {
		quiet.Close()
	}
	o := tail.Output()
	cr := CheckRun{
		Iteration: i, Command: l.cfg.Check, ExitCode: res.ExitCode,
		TimedOut: res.TimedOut, OOMKilled: res.OOMKilled, Cancelled: res.Cancelled,
		Duration: l.now().Sub(start), Tail: string(o.Tail), TailBytes: o.Bytes,
	}
	if (res.Cancelled || err != nil) && ctx.Err() != nil { // stopped by the run's --timeout or a signal
		cr.Cancelled = true
		cr.TimedOut = cr.TimedOut || errors.Is(ctx.Err(), context.DeadlineExceeded)
	}
	if (cr.Cancelled || cr.TimedOut) && cr.ExitCode == 0 {
		cr.ExitCode = NoExitCode // stopped, possibly before it started: it did not exit 0
	}
	cr.Passed = err == nil && res.ExitCode == 0 && !res.TimedOut && !res.Cancelled && !res.OOMKilled
	if !cr.Passed {
		cr.Failures = scan.Failures()
		cr.Failing = DescribeScannedFailing(scan, cr.Failures, cr.Tail)
		if err == nil && !cr.TimedOut && !cr.Cancelled && !cr.OOMKilled {
			cr.Environment = EnvironmentFailure(scan.EnvLines()+"\n"+cr.Tail, l.cfg.Environment)
		}
	}
	if nothing, why := tally.nothing(); nothing && cr.Passed {
		cr.TestedNothing = why
	}
	data := map[string]any{"iteration": i, "command": l.cfg.Check, "exit_code": cr.ExitCode,
		"seconds": seconds(cr.Duration), "passed": cr.Passed}
	if cr.TimedOut {
		data["timed_out"] = true
	}
	if !cr.Passed && err == nil {
		// What people need to see of a failing check: what failed, the
		// failing tests' own lines, and the end of its output.
		if cr.Failing != "" {
			data["failing"] = cr.Failing
		}
		tail := cr.Tail
		if cr.TailBytes > int64(len(tail)) { // the kept tail starts mid-line
			tail = report.Ellipsis + tail
		}
		fl, tl := CheckExcerpt(cr.Failures, tail, CheckEventLines, CheckEventLines)
		if len(fl) > 0 {
			data["failure_lines"] = fl
		}
		if len(tl) > 0 {
			data["tail_lines"] = tl
		}
	}
	msg := fmt.Sprintf("check %s in %.1fs", passWord(cr), seconds(cr.Duration))
	if cr.Environment != nil {
		data["environment"] = cr.Environment.Cause
		msg += " — for its environment: " + cr.Environment.Describe()
		data["failing"] = "for its environment: " + cr.Environment.Describe()
	}
	if err != nil && cr.Cancelled {
		data["error"] = err.Error()
		msg = "check stopped: " + checkWhy(cr)
	} else if err != nil {
		data["error"] = err.Error()
		msg = "check could not run: " + err.Error()
	}
	l.events.Emit(report.EventCheckFinished, report.PhaseVerifying, msg, data)
	if l.cfg.Evidence != nil && err == nil && !res.Cancelled {
		l.cfg.Evidence.SetCheck(l.cfg.Check, true, cr.Passed, res.ExitCode)
		if te, ok := l.cfg.Evidence.(interface{ SetTestedNothing() }); ok && cr.TestedNothing != "" {
			te.SetTestedNothing()
		}
	}
	l.lastRun = &cr
	return cr, err
}

// CheckEventLines is how many lines of a failing check's output its
// check_finished event carries (tail_lines), each at most
// CheckEventLineBytes long (cut plainly).
const (
	CheckEventLines     = 10
	CheckEventLineBytes = 200
)

// CheckExcerpt returns what to show of a failing check: up to nFail of
// the failing tests' own lines (failures: CheckRun.Failures, found anywhere
// in the output) and the last nTail lines of its tail (TailLines) — only
// the last few when the failing tests' lines lead. The failing tests'
// lines are left out when the tail already shows them all.
// Every line is shortened plainly to CheckEventLineBytes.
func CheckExcerpt(failures, tail string, nFail, nTail int) (failLines, tailLines []string) {
	tailLines = TailLines(tail, nTail)
	in := map[string]bool{}
	for _, l := range tailLines {
		in[l] = true
	}
	all := true
	for _, l := range strings.Split(strings.TrimSpace(report.Unmarked(failures)), "\n") {
		l = strings.TrimRight(l, "\r\t ")
		if strings.TrimSpace(l) == "" {
			continue
		}
		l = report.Shorten(l, CheckEventLineBytes)
		if !in[l] {
			all = false
		}
		if len(failLines) < nFail {
			failLines = append(failLines, l)
		}
	}
	if all {
		return nil, tailLines
	}
	if len(tailLines) > excerptTailAfterFailures { // the end is only context now
		tailLines = tailLines[len(tailLines)-excerptTailAfterFailures:]
	}
	return failLines, tailLines
}

// excerptTailAfterFailures is how many of the tail's last lines
// CheckExcerpt keeps when the failing tests' own lines lead.
const excerptTailAfterFailures = 4

// TailLines returns the last n non-blank lines of a check's output tail,
// each shortened to CheckEventLineBytes with a plain "…". A tail cut at
// its start (it begins with report.Ellipsis or CapTail's marker) loses its
// first, partial line unless that is the only one.
func TailLines(tail string, n int) []string {
	tail = strings.TrimRight(report.Unmarked(tail), "\n\r\t ")
	if tail == "" || n <= 0 {
		return nil
	}
	lines := strings.Split(tail, "\n")
	if strings.HasPrefix(lines[0], report.Ellipsis) && len(lines) > 1 {
		lines = lines[1:]
	}
	var out []string
	for i := len(lines) - 1; i >= 0 && len(out) < n; i-- {
		l := strings.TrimRight(lines[i], "\r\t ")
		if strings.TrimSpace(l) == "" {
			continue
		}
		out = append(out, report.Shorten(l, CheckEventLineBytes))
	}
	slices.Reverse(out)
	return out
}

func passWord(cr CheckRun) string {
	switch {
	case cr.Passed:
		return "passed (exit 0)"
	case cr.TimedOut:
		return "timed out"
	case cr.Cancelled:
		return "stopped"
	}
	return fmt.Sprintf("failed (exit %d)", cr.ExitCode)
}

// checkResult is the document's view of a check run: the raw tail and the
// output's total length, which report.Finish caps (CapTail) after redaction.
func checkResult(cr CheckRun) *report.CheckResult {
	r := &report.CheckResult{
		ExitCode: cr.ExitCode, Passed: cr.Passed, Seconds: seconds(cr.Duration),
		Failures: cr.Failures, Failing: cr.Failing, Tail: cr.Tail, OutputBytes: cr.TailBytes,
		TimedOut: cr.TimedOut, OOMKilled: cr.OOMKilled,
	}
	if cr.Environment != nil {
		r.Environment = cr.Environment.Describe()
	}
	return r
}

// egressFailure is the failure of agent turn i whose model API requests
// were refused by goalrun's own egress proxy (agent.CauseEgressRefused):
// a network cause, never a bad key. The message quotes the proxy's
// refusals as the sandbox recorded them; the advice names --allow-host and
// the document's sandbox.egress_denials.
func (l *loop) egressFailure(i int, msg string, detail map[string]any) (string, map[string]any, string) {
	p := l.cfg.Sandbox.Posture()
	msg = fmt.Sprintf("Agent turn %d failed: goalrun's egress proxy refused or could not reach the agent's model API, so the API never judged the key: %s", i, msg)
	if len(p.EgressDenials) > 0 {
		msg += fmt.Sprintf("; egress refusals so far (%d): %s", p.EgressDenied, strings.Join(p.EgressDenials, "; "))
	}
	if len(p.EgressAllowlist) > 0 {
		detail["egress_allowlist"] = strings.Join(p.EgressAllowlist, ", ")
	}
	advice := "The agent's model API could not be reached through goalrun's egress proxy: check that this machine can resolve and reach the model API's host (network, DNS, firewall), " +
		"add any other host the agent needs with --allow-host (the allow-host setting), and read sandbox.egress_denials in the document for each refused destination and why."
	if fix := allowNetsFix(p.EgressDenials); fix != "" {
		advice = fix + " Read sandbox.egress_denials in the document for each refused destination and why."
	}
	return msg, detail, advice
}

// missingKey ends the run before any agent turn: the agent needs the key
// in Config.MissingKey and cannot have it (auth_required, missing_key).
func (l *loop) missingKey() {
	key := l.cfg.MissingKey
	advice, haltReason := authAdvice(agent.AuthMissingKey, key, l.cfg.ModelGateway)
	l.out.Failure = &Failure{
		Code: report.ErrAuthRequired, Cause: "auth_required", Reason: agent.AuthMissingKey,
		Message: fmt.Sprintf("The %s agent needs its model API key in %s, which is not set in goalrun's environment, and the sandbox holds no login of the agent's own; no agent turn was started.",
			l.cfg.Adapter.Name(), key),
		Detail:      map[string]any{"iteration": 1, "key_env": key},
		Suggestions: []string{advice},
	}
	l.out.Halt, l.out.HaltReason = report.HaltAuthRequired, haltReason
	l.halted = true
}

// StoppedOutcome is how a run ends that stopped before the loop began
// (while its sandbox was starting): cancelled when parent was interrupted,
// halted "timeout" when ctx (parent with the run's deadline) ran out; where
// names what was under way ("the sandbox's start"). cfg needs Adapter and
// the check or goal text.
func StoppedOutcome(parent, ctx context.Context, cfg Config, where string) Outcome {
	l := newLoop(cfg)
	if !l.stopped(parent, ctx, where) {
		l.halt(report.HaltTimeout, fmt.Sprintf("The run's time budget of %s (--timeout) ran out during %s.", l.cfg.Timeout, where))
	}
	return l.out
}

// MissingKeyOutcome is how a run ends that goalrun stops before anything
// starts (no sandbox, no check) because the agent needs the model API key
// named in cfg.MissingKey and cannot have it: auth_required, missing_key,
// the same failure the loop reports when it finds out after the first
// check. cfg needs Adapter, MissingKey and the check or goal text.
func MissingKeyOutcome(cfg Config) Outcome {
	l := newLoop(cfg)
	l.missingKey()
	l.out.Failure.Message = fmt.Sprintf("The %s agent needs its model API key in %s, which is not set in goalrun's environment, and a Docker sandbox holds no login of the agent's own; goalrun stopped before starting anything.",
		l.cfg.Adapter.Name(), cfg.MissingKey)
	return l.out
}

// authAdvice is the suggestion for an auth_required turn: it names the
// variable the agent reads its key from (keyEnv; "" when unknown) and, when
// the model API requests go to a model gateway (gateway, --model-gateway),
// the gateway, whose key or upstream credentials are then what to fix.
func authAdvice(reason, keyEnv, gateway string) (advice, halt string) {
	key := "the agent's model API key"
	if keyEnv != "" {
		key = keyEnv
	}
	if gateway != "" {
		gw := "the model gateway " + gateway + " (--model-gateway)"
		switch reason {
		case agent.AuthMissingKey:
			return fmt.Sprintf("Set %s to the key %s expects in the environment goalrun runs in (in GitHub Actions, from a repository secret), then run goalrun again: goalrun sends the agent's model API requests there with that key.", key, gw),
				fmt.Sprintf("The agent has no key for its model gateway (%s is not set).", key)
		case agent.AuthExpired:
			return fmt.Sprintf("Renew the credentials in %s, or those %s holds for the API behind it: the answer says they have expired.", key, gw),
				"The model gateway says the agent's credentials have expired."
		}
		return fmt.Sprintf("Check the key in %s against %s, and the credentials the gateway holds for the API behind it: the gateway (or that API) refused the agent's key. Then run goalrun again.", key, gw),
			"The model gateway refused the agent's credentials."
	}
	switch reason {
	case agent.AuthMissingKey:
		return fmt.Sprintf("Set %s in the environment goalrun runs in (in GitHub Actions, from a repository secret), then run goalrun again: the agent has no key for its model API.", key),
			fmt.Sprintf("The agent has no model API key (%s is not set).", key)
	case agent.AuthExpired:
		return fmt.Sprintf("Renew the credentials in %s: the model API says they have expired.", key), "The model API says the agent's credentials have expired."
	}
	return fmt.Sprintf("Set a valid API key in %s in the environment goalrun runs in, then run goalrun again: the model API refused the one it was given.", key),
		"The model API refused the agent's credentials."
}

// turnStep is what the loop measured of one agent step.
type turnStep struct {
	duration   time.Duration
	exitCode   int
	stderrTail string // the last agentStderrKeep bytes of stderr, trimmed
	stderrSize int64  // stderr's total length when the tail is not all of it, else 0
	timedOut   bool   // killed at --step-timeout
	oomKilled  bool   // killed by the kernel for the sandbox's memory limit
}

// turnFailure builds the failure of agent turn i that ended tr: the
// message (the agent's own words, then the end of its stderr and, for the
// command agent, whose stdout is plain text, the end of its stdout), the
// failure fields (iteration, exit_code, stderr_tail, stdout_tail: each tail
// at most report.TailCap bytes, cut at its start with a marker; Finish
// redacts them) and the advice, which points at what the document holds.
func (l *loop) turnFailure(i int, step turnStep, tr agent.TurnResult) (msg string, detail map[string]any, advice string) {
	detail = map[string]any{"iteration": i, "exit_code": step.exitCode}
	msg = firstNonBlank(tr.Message, "the agent's turn failed")
	var tails []string
	if step.stderrTail != "" {
		t := report.CapTail(step.stderrTail, step.stderrSize, report.TailCap)
		detail["stderr_tail"] = t
		tails = append(tails, "stderr_tail")
		if !strings.Contains(msg, step.stderrTail) {
			msg += "; its stderr ends with: " + t
		}
	}
	if l.cfg.Adapter.Name() == agent.CommandName {
		if out := strings.TrimSpace(tr.Summary); out != "" {
			t := report.CapTail(out, 0, report.TailCap)
			detail["stdout_tail"] = t
			tails = append(tails, "stdout_tail")
			msg += "; its stdout ends with: " + t
		}
	}
	if step.timedOut {
		detail["timed_out"] = true
	}
	if step.oomKilled {
		detail["oom_killed"] = true
	}
	if tr.Cause == agent.CauseEgressRefused {
		return l.egressFailure(i, msg, detail)
	}
	msg = fmt.Sprintf("Agent turn %d failed and the goal is not met: %s", i, msg)
	advice = "Read the agent's output in the events for the reason it failed."
	if len(tails) > 0 {
		advice = "Read the end of the agent's output in the message and in the failure's " + strings.Join(tails, " and ") + " for the reason it failed."
	}
	switch {
	case step.oomKilled:
		advice = "The agent ran out of memory in the sandbox (failure.oom_killed): give the task less to hold at once, or run it in a sandbox with more memory."
	case step.timedOut:
		advice = "The agent turn hit --step-timeout (failure.timed_out): raise --step-timeout, or give the agent a smaller task per turn."
	case tr.Cause == agent.CauseRetryStorm:
		advice = "The model API kept failing (rate limit, quota or a server error, as the message says) and the agent would have kept retrying for minutes: check the key's quota and the provider's status, then run goalrun again."
	}
	return msg, detail, advice
}

// agentTurn runs agent turn i: the adapter's command as an agent step, its
// stdout parsed live into events and receipts.
func (l *loop) agentTurn(ctx context.Context, i int) (turnStep, agent.TurnResult, error) {
	turn := agent.Turn{
		Iteration: i, Prompt: l.prompt(), SessionID: l.out.SessionID,
		Bin: l.cfg.AgentBin, Model: l.cfg.Model, MaxTurns: l.cfg.MaxTurns, ExtraArgs: l.cfg.AgentArgs, BaseURL: l.cfg.BaseURL,
	}
	inv := l.cfg.Adapter.Command(turn)
	var parser agent.Parser
	if m, ok := l.cfg.Adapter.(TurnParserMaker); ok {
		parser = m.NewTurnParser(turn)
	} else {
		parser = l.cfg.Adapter.NewParser()
	}
	data := map[string]any{"iteration": i}
	if turn.SessionID != "" {
		data["session_id"] = turn.SessionID
	}
	l.mu.Lock()
	l.egress.deniedAtStart, l.egress.run, l.egress.stopped = l.cfg.Sandbox.Posture().EgressDenied, 0, false
	l.mu.Unlock()
	l.events.Emit(report.EventAgentStarted, report.PhaseActing, fmt.Sprintf("agent turn %d: %s", i, l.cfg.Adapter.Name()), data)

	stepCtx, stopStep := context.WithCancel(ctx)
	defer stopStep()
	var graceTimer *time.Timer
	var graceMu sync.Mutex
	defer func() {
		graceMu.Lock()
		if graceTimer != nil {
			graceTimer.Stop()
		}
		graceMu.Unlock()
	}()
	l.mu.Lock()
	l.turnHalt.halt, l.turnHalt.reason = "", ""
	l.usage.startTurn()
	l.mu.Unlock()

	emit := func(ev agent.Event) {
		if ev.Stop { // the parser already knows how the turn ends: kill now
			stopStep()
		}
		if ev.Kind == agent.KindResult {
			graceMu.Lock()
			if graceTimer == nil { // the process may linger: kill it after a grace
				graceTimer = time.AfterFunc(l.cfg.ResultGrace, stopStep)
			}
			graceMu.Unlock()
		}
		if halt := l.onEvent(i, ev); halt {
			stopStep()
		}
	}
	// Streams serializes the parser's calls across stdout and stderr (a
	// parser may read both); stderr is also kept as a tail for messages.
	st := agent.NewStreams(parser, emit)
	stderr := sandbox.NewTailWriter(st.Stderr, agentStderrKeep)
	var stdin strings.Reader
	cmd := sandbox.Cmd{
		Role: sandbox.RoleAgent, Args: inv.Args, Env: inv.Env,
		Stdout: st.Stdout, Stderr: stderr, Timeout: l.cfg.StepTimeout,
	}
	if inv.Stdin != "" {
		stdin.Reset(inv.Stdin)
		cmd.Stdin = &stdin
	}
	start := l.now()
	res, err := l.cfg.Sandbox.Exec(stepCtx, cmd)
	errOut := stderr.Output()
	step := turnStep{duration: l.now().Sub(start), exitCode: res.ExitCode, stderrTail: strings.TrimSpace(string(errOut.Tail)),
		timedOut: res.TimedOut, oomKilled: res.OOMKilled}
	if errOut.Truncated { // else the trimmed tail is the whole stream
		step.stderrSize = errOut.Bytes
	}
	if err != nil {
		l.emitAgentFinished(i, step, agent.StatusFailed)
		return step, agent.TurnResult{Status: agent.StatusFailed, Cause: "not_started", Message: err.Error()}, err
	}
	st.Close()
	tr := parser.End(res.ExitCode, emit)
	l.mu.Lock()
	egressStopped := l.egress.stopped
	l.mu.Unlock()
	if egressStopped && tr.Cause != agent.CauseAuthRequired {
		tr.Status, tr.Cause = agent.StatusFailed, agent.CauseEgressRefused
		tr.Message = fmt.Sprintf("the agent's model API requests were answered 502 by goalrun's egress proxy %d times in a row (it could not reach the model API); the turn was stopped instead of retrying for minutes", agent.AuthRetryLimit)
	}
	// A kill by the sandbox explains the turn's end better than what the
	// parser saw of it (exit 143 or 137, no result event), unless the
	// parser already knows a more specific cause.
	if (res.TimedOut || res.OOMKilled) && tr.Cause != agent.CauseAuthRequired && tr.Cause != agent.CauseEgressRefused {
		why := fmt.Sprintf("the agent turn ran longer than --step-timeout (%s) and was killed", l.cfg.StepTimeout)
		tr.Cause = CauseStepTimeout
		if res.OOMKilled {
			why = "the agent was killed for exceeding the sandbox's memory limit"
			if m := l.cfg.Sandbox.Posture().MemoryBytes; m > 0 {
				why += fmt.Sprintf(" (%d MiB)", m>>20)
			}
			tr.Cause = CauseOOM
		}
		if tr.Status == agent.StatusFailed && tr.Message != "" {
			why += "; before that: " + tr.Message
		}
		tr.Status, tr.Message = agent.StatusFailed, why
	}
	l.mu.Lock()
	said := l.lastText != ""
	l.mu.Unlock()
	if w := lastWords(tr.Summary); !said && w != "" {
		// An agent whose words reached no text event (the command agent's
		// plain stdout) still says them in the progress, like the others.
		l.events.Emit(report.EventText, report.PhaseReasoning, w, map[string]any{"iteration": i})
	}
	l.endTurn(i, tr)
	l.emitAgentFinished(i, step, tr.Status)
	return step, tr, nil
}

// lastWords is the end of a turn's summary for a text event: without a
// truncation marker, at most report.TextEventCap bytes (a cut start shown
// as report.Ellipsis), "" for a blank summary.
func lastWords(summary string) string {
	s := strings.TrimSpace(report.Unmarked(summary))
	if len(s) <= report.TextEventCap {
		return s
	}
	cut := len(s) - report.TextEventCap + len(report.Ellipsis)
	for cut < len(s) && !utf8.RuneStart(s[cut]) {
		cut++
	}
	return report.Ellipsis + s[cut:]
}

// emitAgentFinished emits agent_finished for turn i: its duration, exit
// code and status.
func (l *loop) emitAgentFinished(i int, step turnStep, status string) {
	l.events.Emit(report.EventAgentFinished, report.PhaseActing,
		fmt.Sprintf("agent turn %d finished in %.1fs", i, seconds(step.duration)),
		map[string]any{"iteration": i, "seconds": seconds(step.duration), "exit_code": step.exitCode, "status": status})
}

// endTurn folds a finished turn's result into the outcome.
func (l *loop) endTurn(i int, tr agent.TurnResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// Calls that never got a result are failed receipts.
	for id, c := range l.pending {
		l.receipt(id, c, false)
	}
	clear(l.pending)
	l.usage.endTurn(tr.SessionID, tr.Usage)
	if tr.SessionID != "" {
		l.out.SessionID = tr.SessionID
	}
	if tr.Model != "" {
		l.out.Model = tr.Model
		l.seeModel(tr.Model)
	}
	l.out.Turns += tr.Turns
	l.out.Delegations += tr.Delegations
	if tr.Version != "" {
		l.out.AgentVersion = tr.Version
	}
	if tr.Status == agent.StatusSuccess {
		l.out.TurnsCompleted++
	}
	summary := firstNonBlank(tr.Summary, l.lastText)
	if summary != "" {
		l.out.Summary = summary
	}
	l.lastText = ""
}

// onEvent turns one parser event into progress events, receipts and usage;
// it returns true when the running turn must stop (a budget halt).
func (l *loop) onEvent(i int, ev agent.Event) (stop bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch ev.Kind {
	case agent.KindSession:
		if ev.SessionID != "" {
			l.out.SessionID = ev.SessionID
			l.usage.setSession(ev.SessionID)
		}
	case agent.KindModel:
		if ev.Model != "" {
			l.out.Model = ev.Model
			l.seeModel(ev.Model)
		}
	case agent.KindText:
		if strings.TrimSpace(ev.Text) != "" {
			l.lastText = ev.Text
			l.events.Emit(report.EventText, report.PhaseReasoning, ev.Text, map[string]any{"iteration": i})
		}
	case agent.KindToolCall:
		if ev.Tool == nil {
			return false
		}
		l.call(ev.Tool)
	case agent.KindToolResult:
		if ev.Tool == nil {
			return false
		}
		c, ok := l.pending[ev.Tool.ID]
		if !ok || ev.Tool.ID == "" { // a result without its call: count both now
			c = l.call(ev.Tool)
		}
		if len(ev.Tool.Paths) > 0 {
			c.paths = ev.Tool.Paths
		}
		delete(l.pending, ev.Tool.ID)
		l.receipt(ev.Tool.ID, c, ev.Tool.OK, ev.Tool.Unknown)
	case agent.KindUsage:
		if ev.Usage != nil {
			l.usage.live(*ev.Usage)
			return l.checkBudget()
		}
	case agent.KindRetry:
		if ev.Retry != nil {
			l.events.Emit(report.EventInferenceRetry, report.PhaseInference,
				fmt.Sprintf("model API retry %d (HTTP %d), next in %d ms", ev.Retry.Attempt, ev.Retry.Status, ev.Retry.BackoffMS),
				map[string]any{"attempt": ev.Retry.Attempt, "status": ev.Retry.Status, "backoff_ms": ev.Retry.BackoffMS})
			return l.egressRetry(ev.Retry.Status)
		}
	}
	return false
}

// egressRetry counts a model API retry against goalrun's egress proxy: a
// 502 while the proxy recorded at least as many new refusals in this turn
// is the proxy failing to reach the model API (no network, no DNS), which
// retrying does not mend. After agent.AuthRetryLimit such retries in a row
// the turn is stopped (true); agentTurn then reports it as
// agent.CauseEgressRefused. The caller holds l.mu.
func (l *loop) egressRetry(status int) (stop bool) {
	if status != http.StatusBadGateway {
		l.egress.run = 0
		return false
	}
	if l.cfg.Sandbox.Posture().EgressDenied-l.egress.deniedAtStart <= l.egress.run {
		l.egress.run = 0 // an upstream's own 502, not the proxy's
		return false
	}
	l.egress.run++
	if l.egress.run >= agent.AuthRetryLimit && !l.egress.stopped {
		l.egress.stopped = true
		return true
	}
	return false
}

// call registers a tool call and emits tool_called; the caller holds l.mu.
func (l *loop) call(t *agent.Tool) pendingCall {
	l.seq++
	c := pendingCall{seq: l.seq, tool: t.Name, brief: t.Brief, via: t.Via, paths: t.Paths}
	id := t.ID
	if id == "" {
		id = fmt.Sprintf("call-%d", l.seq)
	}
	data := map[string]any{"call_id": id, "sequence": c.seq, "tool": t.Name, "brief": t.Brief}
	if t.Via != "" {
		data["via"] = t.Via
	}
	l.events.Emit(report.EventToolCalled, report.PhaseActing, t.Name+": "+t.Brief, data)
	if t.ID != "" {
		if len(l.pending) >= pendingCallsMax { // never answered in time: failed
			l.receipt(id, c, false)
		} else {
			l.pending[id] = c
		}
	}
	return c
}

// receipt records a finished call and emits tool_result or tool_failed; the
// caller holds l.mu. A call of unknown outcome (agent.Tool.Unknown) is a
// tool_result that is not ok and says "unknown".
func (l *loop) receipt(id string, c pendingCall, ok bool, unknown ...bool) {
	if id == "" {
		id = fmt.Sprintf("call-%d", c.seq)
	}
	unk := len(unknown) > 0 && unknown[0]
	typ := report.EventToolResult
	word := "ok"
	data := map[string]any{"call_id": id, "sequence": c.seq, "tool": c.tool, "ok": ok && !unk}
	switch {
	case unk:
		word = "finished, outcome unknown (the agent's output does not say)"
		data["unknown"] = true
	case !ok:
		typ, word = report.EventToolFailed, "failed"
	}
	l.events.Emit(typ, report.PhaseActing, c.tool+" "+word, data)
	r := report.Receipt{Tool: c.tool, OK: ok && !unk, Unknown: unk, Brief: c.brief, Via: c.via}
	l.out.Receipts.Add(r)
	if l.cfg.Evidence != nil {
		l.cfg.Evidence.AddReceipt(evidenceReceipt(r, c.paths))
	}
}

// seeModel records a model that answered and emits model_served the first
// time; the caller holds l.mu.
func (l *loop) seeModel(m string) {
	if l.models[m] {
		return
	}
	l.models[m] = true
	if len(l.out.ModelsServed) < report.ModelsServedMax {
		l.out.ModelsServed = append(l.out.ModelsServed, m)
	}
	l.events.Emit(report.EventModelServed, report.PhaseInference, "model: "+m,
		map[string]any{"model_id": m, "local_last_resort": false})
}

// checkBudget asks the Halter about the usage so far; the caller holds l.mu.
func (l *loop) checkBudget() bool {
	if l.cfg.Halter == nil || l.turnHalt.halt != "" {
		return false
	}
	if halt, reason := l.cfg.Halter.Budget(l.usage.total()); halt != "" {
		l.turnHalt.halt, l.turnHalt.reason = halt, reason
		return true
	}
	return false
}

func (l *loop) budgetHalt() struct{ halt, reason string } {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.turnHalt
}

// prompt is the task, and once a check has run and failed, its command, exit
// code and output tail.
func (l *loop) prompt() string {
	return Prompt(l.cfg.Task, l.out.Goal, l.lastRun)
}

// PromptTailBytes is how much of the failing check's output a prompt quotes:
// the last 4096 bytes.
const PromptTailBytes = 4096

// PromptFailuresBytes is how much of the failing tests' own lines a prompt
// quotes, before the tail: the first 4096 bytes.
const PromptFailuresBytes = CheckFailuresKeep

// envRerunAdvice tells the user how a dependency added during the run
// reaches the check.
const envRerunAdvice = "To give the check a dependency the agent added, run goalrun again (the setup step prepares what the workspace declares when the run starts) or add a --setup command that fetches it."

// Prompt builds an agent turn's prompt: the task, then, when the last check
// failed, its command and exit code, whether the failure is the
// environment's, the failing tests' own lines (when the output is longer
// than the tail quoted), and the end of its output. An empty task
// becomes "Make the check pass." (or "Meet this goal: …" in judge mode).
func Prompt(task, goalText string, last *CheckRun) string {
	var b strings.Builder
	task = strings.TrimSpace(task)
	if task == "" {
		if last != nil {
			task = "Make the check pass."
		} else {
			task = "Meet this goal: " + goalText
		}
	}
	b.WriteString(task)
	if last != nil && !last.Passed {
		b.WriteString("\n\nThe check `")
		b.WriteString(last.Command)
		switch {
		case last.TimedOut:
			b.WriteString("` timed out.")
		default:
			fmt.Fprintf(&b, "` failed with exit code %d.", last.ExitCode)
		}
		b.WriteString(" It is run with sh -c in the workspace; the goal is met when it exits 0.")
		if e := last.Environment; e != nil {
			b.WriteString("\nThis failure is the environment's, not a test's: ")
			b.WriteString(e.Describe())
			b.WriteString(". The check runs without network and sees only the dependencies prepared before your first turn, from the workspace as it was then: use the dependencies the project already has rather than adding new ones.")
		}
		whole := last.TailBytes <= int64(len(last.Tail)) && len(last.Tail) <= PromptTailBytes
		if f := strings.TrimSpace(last.Failures); f != "" && !whole {
			b.WriteString("\nThe failing tests' own lines, from anywhere in its output:\n\n")
			b.WriteString(report.Cap(f, PromptFailuresBytes))
			b.WriteString("\n")
		}
		if tail := report.CapTail(last.Tail, last.TailBytes, PromptTailBytes); strings.TrimSpace(tail) != "" {
			b.WriteString("\nThe end of its output:\n\n")
			b.WriteString(tail)
			if !strings.HasSuffix(tail, "\n") {
				b.WriteString("\n")
			}
		}
	}
	return b.String()
}

// finish computes what is computed once at the end and returns the outcome.
func (l *loop) finish(parent context.Context) Outcome {
	// Detached: the run's context may be done. An interrupted run
	// (sandbox.StopClock) has until PhaseFinish's deadline; a cancelled
	// one without a clock finishGrace.
	limit := finishTimeout
	if parent.Err() != nil && sandbox.StopClockOf(parent) == nil {
		limit = finishGrace
	}
	ctx, cancel := sandbox.Detached(sandbox.WithPhase(parent, sandbox.PhaseFinish), limit)
	defer cancel()
	// Nothing the agent left running may write after the last check: stop
	// it before the final snapshot, so whatever it wrote is seen.
	if st, ok := l.cfg.Sandbox.(sandbox.AgentStopper); ok && l.out.AgentTurns > 0 {
		// Half of what is left at most: an Engine that stopped answering
		// must not take the change snapshot's time too.
		sctx, scancel := ctx, context.CancelFunc(func() {})
		if dl, ok := ctx.Deadline(); ok {
			sctx, scancel = context.WithTimeout(ctx, time.Until(dl)/2)
		}
		_ = st.StopAgent(sctx) // the snapshot below still sees what happened until now
		scancel()
	}
	if l.cfg.Tracker != nil && l.out.AgentTurns > 0 {
		l.out.Changes = l.cfg.Tracker.Changes(ctx)
	}
	if l.cfg.Evidence != nil && l.out.AgentTurns > 0 {
		l.out.Claims = reportClaims(l.cfg.Evidence.Claims(l.out.Summary))
	}
	l.out.Usage = l.usage.total()
	l.out.Elapsed = l.now().Sub(l.started)
	return l.out
}

// firstNonBlank returns the first of s that holds more than white space,
// as it is (untrimmed), or "". Unlike cmp.Or, a value of only spaces or
// line breaks (an agent's empty answer, a blank message) is passed over.
func firstNonBlank(s ...string) string {
	for _, v := range s {
		if strings.TrimSpace(v) != "" {
			return v
		}
	}
	return ""
}

func seconds(d time.Duration) float64 {
	return float64(d.Round(time.Millisecond)) / float64(time.Second)
}
