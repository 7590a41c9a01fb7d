package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/goalrun/goalrun/sandbox/egress"
)

// relayCommand is the hidden subcommand that runs the egress relay inside the
// sandbox:
//
//	goalrun __relay 127.0.0.1:3128=/goalrun/egress/proxy.sock 127.0.0.1:3129=/goalrun/egress/up0.sock
//
// It is the egress container's main process (under the Engine's init, tini):
// it listens on loopback inside the container, which has no other network
// interface, and carries every connection to goalrun's proxy through the
// Unix socket bind-mounted from outside. With no mappings it idles until
// SIGTERM, so a network-less container can use it as its main process too.
//
// The relay needs nothing in the container but a kernel: goalrun is built
// with CGO_ENABLED=0, so the binary is static and the relay never resolves a
// name (listen addresses are IP literals) or loads a library.
const relayCommand = "__relay"

// relayUsage is printed for --help and after a bad mapping.
const relayUsage = `usage: goalrun __relay [--lifetime DURATION] [LISTEN=SOCKET …]

Internal: the egress relay goalrun starts inside an egress sandbox. Each
LISTEN is a loopback ip:port inside the container, each SOCKET the absolute
path of a goalrun proxy socket, e.g.
  goalrun __relay --lifetime 40m 127.0.0.1:3128=/goalrun/egress/proxy.sock
Once every LISTEN is bound it prints "goalrun relay: ready" on stdout. With
no mappings it waits for SIGTERM. It exits 0 on SIGTERM/SIGINT, and when
the lifetime (a Go duration) has passed, so a sandbox whose goalrun was
killed outright does not idle forever.
`

// relayCmd binds every mapping, prints egress.RelayReadyLine on stdout, and
// relays until ctx ends (SIGTERM/SIGINT) or the --lifetime has passed,
// returning 0 then. A bad mapping
// exits 2 naming it; a relay failure (a port in use) exits 3, with the
// reason on stderr and no ready line.
func relayCmd(ctx context.Context, args []string, _ lookupEnv, stdout, stderr io.Writer) int {
	mappings := make([]egress.Mapping, 0, len(args))
	var lifetime time.Duration
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch a {
		case "-h", "--help", "help":
			fmt.Fprint(stdout, relayUsage)
			return exitMet
		}
		if v, ok := strings.CutPrefix(a, "--lifetime"); ok && (v == "" || v[0] == '=') {
			if v == "" {
				if i+1 == len(args) {
					fmt.Fprintf(stderr, "goalrun %s: --lifetime needs a duration\n\n%s", relayCommand, relayUsage)
					return exitBadInput
				}
				i++
				v = args[i]
			} else {
				v = v[1:]
			}
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				fmt.Fprintf(stderr, "goalrun %s: --lifetime %q: want a positive duration such as 40m\n\n%s", relayCommand, v, relayUsage)
				return exitBadInput
			}
			lifetime = d
			continue
		}
		m, err := egress.ParseMapping(a)
		if err != nil {
			fmt.Fprintf(stderr, "goalrun %s: %v\n\n%s", relayCommand, err, relayUsage)
			return exitBadInput
		}
		mappings = append(mappings, m)
	}
	if lifetime > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, lifetime)
		defer cancel()
	}
	r, err := egress.ListenRelay(mappings)
	if err != nil {
		fmt.Fprintf(stderr, "goalrun %s: %v\n", relayCommand, err)
		return exitRunFailed
	}
	// Every mapping is bound: tell the Docker sandbox, which waits for this
	// line before the first agent step.
	fmt.Fprintln(stdout, egress.RelayReadyLine)
	if err := r.Serve(ctx, stderr); err != nil {
		fmt.Fprintf(stderr, "goalrun %s: %v\n", relayCommand, err)
		return exitRunFailed
	}
	return exitMet
}
