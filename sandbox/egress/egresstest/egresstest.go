// Package egresstest has the fakes that let tests exercise goalrun's egress
// proxy on its allowed paths without DNS or internet: a Resolver answering
// from a table and a Router that carries the proxy's dials to checked public
// addresses onto loopback test servers. Plug them into egress.Config's
// Resolver and DialContext.
//
// Hand out ordinary public addresses (PublicV4, PublicV4B, PublicV6): the
// proxy refuses every special-purpose range, documentation ranges such as
// 203.0.113.0/24 included, so a fake answer there would be denied.
package egresstest

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
)

// Public addresses to hand out from a fake Resolver. They are never dialled
// for real: a Router maps them onto loopback servers.
var (
	PublicV4  = netip.MustParseAddr("93.184.215.14")
	PublicV4B = netip.MustParseAddr("151.101.1.1")
	PublicV6  = netip.MustParseAddr("2606:2800:21f:cb07:6820:80da:af6b:8b2c")
)

// Resolver answers LookupNetIP from Answers and records every question. It
// satisfies egress.Resolver. Keys are host names with or without the
// trailing dot (the proxy always asks with it). An unknown name fails like
// NXDOMAIN (a *net.DNSError with IsNotFound). Safe for concurrent use.
type Resolver struct {
	mu      sync.Mutex
	answers map[string][]netip.Addr
	asked   []string
}

// NewResolver returns a Resolver answering from answers (copied).
func NewResolver(answers map[string][]netip.Addr) *Resolver {
	r := &Resolver{answers: map[string][]netip.Addr{}}
	for k, v := range answers {
		r.answers[strings.TrimSuffix(k, ".")] = slices.Clone(v)
	}
	return r
}

// Set replaces the answer for name (for example to rebind it mid-test).
func (r *Resolver) Set(name string, addrs ...netip.Addr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answers[strings.TrimSuffix(name, ".")] = addrs
}

// LookupNetIP answers from the table; network must be "ip" (what the proxy
// asks), anything else is an error.
func (r *Resolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, host)
	if network != "ip" {
		return nil, fmt.Errorf("egresstest.Resolver: network %q, want \"ip\"", network)
	}
	addrs, ok := r.answers[strings.TrimSuffix(host, ".")]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return slices.Clone(addrs), nil
}

// Asked returns the names looked up so far, in order, as the proxy asked
// them (fully qualified, with the trailing dot).
func (r *Resolver) Asked() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.asked)
}

// Router is a dial hook for egress.Config.DialContext: it maps checked
// "ip:port" addresses onto real (loopback) servers and records every
// address it is asked to dial. A loopback address without a route is
// dialled as it is (the proxy only passes loopback to upstreams with
// AllowLoopbackUpstreams); any other address without a route fails like an
// unreachable host. Safe for concurrent use.
type Router struct {
	mu     sync.Mutex
	routes map[string]string
	dialed []string
}

// NewRouter returns a Router with no routes.
func NewRouter() *Router { return &Router{routes: map[string]string{}} }

// Route sends dials of from ("ip:port") to to (a "host:port" to really dial).
func (r *Router) Route(from, to string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.routes[from] = to
}

// DialContext dials the route for addr; see Router.
func (r *Router) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	r.mu.Lock()
	r.dialed = append(r.dialed, addr)
	to, ok := r.routes[addr]
	r.mu.Unlock()
	if !ok {
		ap, err := netip.ParseAddrPort(addr)
		if err != nil || !ap.Addr().Unmap().IsLoopback() {
			return nil, fmt.Errorf("egresstest.Router: no route to %s", addr)
		}
		to = addr
	}
	var d net.Dialer
	return d.DialContext(ctx, network, to)
}

// Dialed returns the addresses asked for so far, in order.
func (r *Router) Dialed() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.dialed)
}
