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
)

func main() {
	// SIGINT/SIGTERM cancel ctx; the subcommands turn that into a
	// "cancelled" document and exit 130. A second signal kills at once.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // restore default handling: the next signal terminates
	}()
	code := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// lookupEnv is how goalrun reads its environment (os.LookupEnv in main, a
// map in tests).
type lookupEnv func(string) (string, bool)

// Exit codes (architecture.md, "Command line").
const (
	exitMet         = 0   // goal met
	exitNotMet      = 1   // goal not met
	exitBadInput    = 2   // startup error
	exitRunFailed   = 3   // sandbox, agent, auth, check not runnable
	exitInterrupted = 130 // SIGINT/SIGTERM
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
