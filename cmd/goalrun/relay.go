package main

import (
	"context"
	"fmt"
	"io"
)

// relayCommand is the hidden subcommand that runs the egress relay inside the sandbox.
const relayCommand = "__relay"

// PLACEHOLDER(owner: egress helper) — replaced by the real implementation.
func relayCmd(ctx context.Context, args []string, env lookupEnv, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "goalrun: relay is being built")
	return exitRunFailed
}
