package goal

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/sandbox"
)

// SetupStep is one setup command the loop runs before the first check, as
// a sandbox.RoleSetup step (sh -c Command in Dir, a slash path relative to
// the workspace).
type SetupStep struct {
	Command string
	Dir     string
	// Detected marks a default goalrun chose from the tree. Its failure
	// does not end the run by itself: the first check then shows whether
	// anything is missing (and its message names the failed step). A
	// step the user asked for (--setup) that fails ends the run before
	// the first check (EnvironmentFailed, cause setup_failed); so does a
	// detected one whose program is missing (exit 127) — it is skipped
	// instead.
	Detected bool
}

// SetupResult is how a setup step ended.
type SetupResult struct {
	SetupStep
	ExitCode int
	TimedOut bool
	// Skipped: a detected step whose program the sandbox lacks, or that
	// cannot run in this sandbox at all.
	Skipped bool
	// Reused: not run, its outputs were prepared by an earlier run
	// (sandbox.SetupConfig.Key).
	Reused bool
	// NotStarted says why the step could not start at all (the sandbox's
	// reason, e.g. that goalrun must be rebuilt with CGO_ENABLED=0); ""
	// when it started. ExitCode is then 127, as a shell reports a command
	// it cannot run, but nothing exited.
	NotStarted string
	Seconds    float64
	// Tail is the end of its combined output (setupTailKeep bytes).
	Tail string
}

// CauseSetupFailed is failure.cause of an EnvironmentFailed run whose
// setup step (one the user asked for) failed.
const CauseSetupFailed = "setup_failed"

// setupTailKeep is how much of a setup step's output the loop keeps: the
// last 4096 bytes.
const setupTailKeep = 4096

// runSetup runs the setup steps; it returns false when the run is over
// (stopped, or a step the user asked for failed).
func (l *loop) runSetup(parent, ctx context.Context) bool {
	// The setup proxy's refusals accumulate over the steps: each failing
	// step names those it met first, not again those an earlier one named.
	shown := map[string]bool{}
	for i, st := range l.cfg.Setup {
		where := st.Dir
		if where == "" || where == "." {
			where = "the workspace"
		}
		data := map[string]any{"work": report.WorkSetup, "step": i + 1, "command": st.Command, "dir": firstNonBlank(st.Dir, "."), "detected": st.Detected}
		l.events.Emit(report.EventPrepareStarted, report.PhaseSandbox, fmt.Sprintf("running the setup step `%s` in %s", st.Command, where), data)
		out := sandbox.NewTailWriter(nil, setupTailKeep)
		start := l.now()
		dir := st.Dir
		if dir == "." {
			dir = ""
		}
		res, err := l.cfg.Sandbox.Exec(ctx, sandbox.Cmd{Role: sandbox.RoleSetup, Args: sandbox.Shell(st.Command), Dir: dir,
			Stdout: out, Stderr: out, Timeout: l.cfg.StepTimeout})
		r := SetupResult{SetupStep: st, ExitCode: res.ExitCode, TimedOut: res.TimedOut, Reused: res.Reused, Seconds: seconds(l.now().Sub(start)),
			Tail: strings.TrimSpace(string(out.Output().Tail))}
		if l.stopped(parent, ctx, fmt.Sprintf("the setup step %q", st.Command)) {
			l.out.Setup = append(l.out.Setup, r)
			return false
		}
		notStarted := err != nil && errors.Is(err, sandbox.ErrNotStarted)
		if err != nil && !notStarted {
			l.out.Setup = append(l.out.Setup, r)
			l.fail(report.ErrSandboxFailed, "sandbox_failed", fmt.Sprintf("The sandbox failed while running the setup step %q: %v", st.Command, err), nil,
				"Check the sandbox (Docker Engine or host) and run goalrun again.")
			return false
		}
		if notStarted {
			r.ExitCode = 127
			r.NotStarted = notStartedWhy(err)
			r.Tail = strings.TrimSpace(r.Tail + "\n" + err.Error())
		}
		r.Skipped = st.Detected && r.ExitCode == 127
		fin := map[string]any{"work": report.WorkSetup, "step": i + 1, "command": st.Command, "exit_code": r.ExitCode, "seconds": r.Seconds, "detected": st.Detected}
		msg := fmt.Sprintf("setup step `%s` exited %d", st.Command, r.ExitCode)
		switch {
		case r.Reused:
			fin["reused"] = true
			msg = fmt.Sprintf("setup step `%s` not run: an earlier run prepared the same dependencies", st.Command)
		case r.Skipped:
			fin["skipped"] = true
			fin["error"] = "skipped: it cannot run in this sandbox"
			msg = fmt.Sprintf("setup step `%s` skipped: it cannot run in this sandbox", st.Command)
			if r.NotStarted != "" {
				// The reason names the fix: on a line of its own, so the
				// progress line's cap does not cut it.
				fin["error"] = "skipped: it could not start"
				fin["notes"] = []string{r.NotStarted}
				msg += " (" + r.NotStarted + ")"
			}
		case r.NotStarted != "":
			fin["error"] = "could not start"
			fin["notes"] = []string{r.NotStarted}
			msg = fmt.Sprintf("setup step `%s` could not start: %s", st.Command, r.NotStarted)
		case r.TimedOut:
			fin["timed_out"] = true
			fin["error"] = "timed out (--step-timeout)"
			msg = fmt.Sprintf("setup step `%s` timed out (--step-timeout)", st.Command)
		case r.ExitCode != 0:
			fin["error"] = fmt.Sprintf("`%s` exited %d", st.Command, r.ExitCode)
			if last := lastLine(r.Tail); last != "" {
				fin["error"] = fmt.Sprintf("`%s` exited %d: %s", st.Command, r.ExitCode, report.Cap(last, 160))
			}
			// The tool says only "Forbidden"; say whose refusal it was.
			var fresh []string
			for _, d := range l.cfg.Sandbox.Posture().SetupEgressDenials {
				if !shown[d] {
					shown[d] = true
					fresh = append(fresh, d)
				}
			}
			if notes := setupRefusalLines(fresh); len(notes) > 0 {
				fin["notes"] = notes
			}
		}
		l.events.Emit(report.EventPrepareFinished, report.PhaseSandbox, msg, fin)
		l.out.Setup = append(l.out.Setup, r)
		if r.ExitCode != 0 && !st.Detected || r.TimedOut && !st.Detected {
			l.setupFailed(r)
			return false
		}
	}
	return true
}

// setupFailed ends the run when a setup step the user asked for failed.
func (l *loop) setupFailed(r SetupResult) {
	how := fmt.Sprintf("exited %d", r.ExitCode)
	switch {
	case r.NotStarted != "":
		how = "could not start (" + r.NotStarted + ")"
	case r.TimedOut:
		how = "timed out (--step-timeout)"
	}
	msg := fmt.Sprintf("The setup step %q %s before the first check; no agent turn was spent.", r.Command, how)
	if tail := strings.TrimSpace(report.CapTail(r.Tail, 0, envTailBytes)); tail != "" {
		msg += " Its output ends:\n" + tail
	}
	detail := map[string]any{"command": r.Command, "exit_code": r.ExitCode}
	if r.Dir != "" && r.Dir != "." {
		detail["dir"] = r.Dir
	}
	fixes := []string{"Run the setup command by hand in the workspace; it must exit 0 before goalrun can prepare the dependencies with it."}
	if f := EnvironmentFailure(r.Tail, l.cfg.Environment); f != nil {
		detail["line"] = f.Line
		if f.Missing != "" {
			detail["missing"] = f.Missing
		}
		fixes = append(fixes, f.Fixes(l.cfg.Environment)...)
	} else if !l.cfg.Environment.Local {
		fixes = append(fixes, dockerSetupFix)
	}
	p := l.cfg.Sandbox.Posture()
	if note := egressRefusalNote("the setup step", p.SetupEgressDenied, p.SetupEgressDenials); note != "" {
		msg += "\n" + note + "."
		detail["egress_denials"] = strings.Join(p.SetupEgressDenials, "; ")
	}
	fixes = withAllowNetsFix(fixes, p.SetupEgressDenials)
	if fix := l.setupNotStartedFix(); fix != "" {
		fixes = []string{fix}
	}
	l.fail(report.ErrEnvironmentFailed, CauseSetupFailed, msg, detail, fixes...)
}

// setupNotStartedFix is the one fix when a setup step could not start at
// all: the sandbox's reason, which names it (a --setup command, the
// allowlist or an image cannot help while no setup step can start). It is
// "" when every setup step started.
func (l *loop) setupNotStartedFix() string {
	for _, r := range l.out.Setup {
		if r.NotStarted != "" {
			return "No setup step could prepare the dependencies, since it could not start: " + r.NotStarted + "."
		}
	}
	return ""
}

// notStartedWhy is the reason in a step's error wrapping
// sandbox.ErrNotStarted: what follows that error's text, or the whole
// error when nothing does.
func notStartedWhy(err error) string {
	s := err.Error()
	mark := sandbox.ErrNotStarted.Error() + ": "
	if i := strings.Index(s, mark); i >= 0 && i+len(mark) < len(s) {
		return strings.TrimSpace(s[i+len(mark):])
	}
	return s
}

// dockerSetupFix is the advice on what a setup step in Docker may reach.
const dockerSetupFix = "In Docker the setup step may reach only the registries of the ecosystems goalrun detected and the hosts allowed with --allow-host (ecosystem names such as go, npm or pypi stand for their registries); its tools come from the sandbox image or the host folders mounted into it (--image, --mount)."

// setupNotes describes the setup steps that ran, for an environment
// failure's message: "go mod download (exit 0); npm ci (exit 1: …)".
func (l *loop) setupNotes() string {
	var parts []string
	for _, r := range l.out.Setup {
		s := fmt.Sprintf("%s (exit %d)", r.Command, r.ExitCode)
		switch {
		case r.Reused:
			s = r.Command + " (prepared by an earlier run)"
		case r.NotStarted != "":
			s = r.Command + " (could not start)"
		case r.Skipped:
			s = r.Command + " (skipped: it cannot run in this sandbox)"
		case r.TimedOut:
			s = r.Command + " (timed out)"
		case r.ExitCode != 0:
			if last := lastLine(r.Tail); last != "" {
				s = fmt.Sprintf("%s (exit %d: %s)", r.Command, r.ExitCode, report.Cap(last, 240))
			}
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[i+1:])
	}
	return s
}
