package main

import (
	"context"
	"fmt"
	"io"
)

// PLACEHOLDER(owner: see prompt) — replaced by the real implementation.
func demoCmd(ctx context.Context, args []string, env lookupEnv, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "goalrun: demo is being built")
	return exitRunFailed
}
