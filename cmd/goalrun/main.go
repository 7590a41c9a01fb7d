// Command goalrun runs a coding agent inside a hardened sandbox, in a loop,
// until a deterministic check passes, and reports one goalrun/1 document.
//
// main is thin: it builds the real dependencies (environment, clock, writers,
// signals) and calls run; everything else is testable without globals.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/goalrun/goalrun/sandbox"
)

func main() {
	// A write to a closed stdout or stderr (goalrun run … | head -1) fails
	// with EPIPE instead of killing goalrun (os/signal, "SIGPIPE"): the run
	// goes on, removes its sandbox, writes --output and ends with its own
	// code. Notify rather than Ignore, so the steps goalrun starts get the
	// default SIGPIPE back at exec.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	ctx, clock := sandbox.WithStopClock(context.Background())
	args := os.Args[1:]
	if len(args) > 0 && (args[0] == janitorCommand || args[0] == relayCommand) {
		// goalrun's own helpers: their streams are goalrun's pipes or
		// /dev/null, written directly.
		watchSignals(clock, newFinale(), nil)
		if args[0] == janitorCommand {
			os.Exit(janitorCmd(ctx, args[1:], os.Stdin))
		}
		os.Exit(run(ctx, args, os.LookupEnv, os.Stdout, os.Stderr))
	}
	// stdout and stderr are written from queues of their own: a terminal
	// or pipe that stops being read never stops the run (streams.go).
	stdout, stderr := newStreamWriter(os.Stdout), newStreamWriter(os.Stderr)
	streams := []*streamWriter{stdout, stderr}
	fin := newFinale()
	ctx = withFinale(ctx, fin)
	watchSignals(clock, fin, streams)
	janitorEnabled = true
	code := run(ctx, args, os.LookupEnv, stdout, stderr)
	exitFlushed(code, clock, streams)
}

// exitFlushed exits with code once stdout took everything queued for it (a
// document is never cut off by goalrun's own exit) and stderr did, or
// stderrFlushLimit passed; after a signal, by sandbox.PhaseExit's deadline
// plus exitSlack at the latest.
func exitFlushed(code int, clock *sandbox.StopClock, streams []*streamWriter) {
	flushDone := make(chan struct{})
	go func() {
		defer close(flushDone)
		for i, s := range streams {
			var deadline time.Time // stdout: until it takes the document
			if i > 0 {
				deadline = time.Now().Add(stderrFlushLimit)
			}
			if in := clock.Interrupted(); in != nil {
				deadline = in.By(sandbox.PhaseExit).Add(exitSlack)
			}
			s.flush(deadline)
		}
	}()
	// A signal while waiting for a stream bounds the wait (watchSignals
	// exits then).
	<-flushDone
	os.Exit(code)
}

// exitSlack is the time past sandbox.PhaseExit's deadline the streams get
// to take what is queued (the document, the terminal event) before the
// process exits, within sandbox.InterruptBound.
const exitSlack = 300 * time.Millisecond

// watchSignals turns SIGINT, SIGTERM, SIGHUP (a closed terminal, a
// dropped ssh connection) and SIGQUIT (Ctrl-\, often pressed after
// Ctrl-C; no goroutine dump) into the run's interruption: the first one
// cancels the run (the clock fixes every phase's deadline), later ones
// change nothing (the stop is already bounded, and a second signal must
// not kill goalrun half-way through writing its document). Should the run
// not have begun writing its document soon after the loop's last work was
// due (rescueAt), the finale writes a cancelled one; at
// sandbox.PhaseExit's deadline the process exits with the delivered
// document's code (130 before one), the streams flushed within exitSlack.
func watchSignals(clock *sandbox.StopClock, fin *finale, streams []*streamWriter) {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	go func() {
		for s := range sigs {
			if !clock.Interrupt(s) {
				continue
			}
			armWatchdog(clock.Interrupted(), fin, streams, os.Exit)
		}
	}()
}

// armWatchdog bounds the stop after the interruption in: at rescueAt it has
// fin write a cancelled document unless the run began writing its own; at
// sandbox.PhaseExit's deadline it calls exit with the delivered document's
// code (130 before one), the streams flushed within exitSlack.
func armWatchdog(in *sandbox.Interrupted, fin *finale, streams []*streamWriter, exit func(int)) {
	time.AfterFunc(time.Until(rescueAt(in)), fin.rescueNow)
	time.AfterFunc(time.Until(in.By(sandbox.PhaseExit)), func() {
		code := exitInterrupted
		if c := fin.exitCode(); c >= 0 {
			code = c
		}
		for _, st := range streams {
			st.flush(in.By(sandbox.PhaseExit).Add(exitSlack))
		}
		exit(code)
	})
}

// lookupEnv is how goalrun reads its environment (os.LookupEnv in main, a
// map in tests).
type lookupEnv func(string) (string, bool)

// Exit codes (README.md, "Exit codes").
const (
	exitMet         = 0   // goal met
	exitNotMet      = 1   // goal not met
	exitBadInput    = 2   // startup error
	exitRunFailed   = 3   // sandbox, agent, auth, check not runnable
	exitInterrupted = 130 // SIGINT, SIGTERM, SIGHUP, SIGQUIT
)

// run dispatches a subcommand and returns the process exit code.
func run(ctx context.Context, args []string, env lookupEnv, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitBadInput
	}
	switch args[0] {
	case "run":
		return runCmd(ctx, args[1:], env, stdout, stderr)
	case "action":
		return actionCmd(ctx, args[1:], env, stdout, stderr)
	case "demo":
		return demoCmd(ctx, args[1:], env, stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, versionString())
		return exitMet
	case relayCommand: // hidden: the egress relay inside the sandbox
		return relayCmd(ctx, args[1:], env, stdout, stderr)
	case sandbox.HostScanCommand: // hidden: looks through the host folders from a container
		if err := sandbox.RunHostScan(args[1:], stdout); err != nil {
			fmt.Fprintf(stderr, "goalrun %s: %v\n", sandbox.HostScanCommand, err)
			return exitRunFailed
		}
		return exitMet
	case "help", "-h", "--help":
		usage(stdout)
		return exitMet
	default:
		fmt.Fprintf(stderr, "goalrun: unknown command %q\n\n", args[0])
		usage(stderr)
		return exitBadInput
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `goalrun runs a coding agent in a hardened sandbox until a check passes.

Usage:
  goalrun run [flags] [--] [PROMPT…]   run an agent until the check passes
  goalrun action                       the GitHub Action's entry point (reads INPUT_* and GITHUB_*)
  goalrun demo                         run the bundled example end to end on this machine
  goalrun version                      print the version

Run "goalrun run --help" for the flags.
`)
}
