package egress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpproxy"
)

// DefaultMaxConns bounds the client connections a Proxy holds open at once
// when Config.MaxConns is 0. Each costs goalrun two file descriptors (the
// client's and the destination's) and two goroutines.
const DefaultMaxConns = 256

// DefaultDenialsKept is how many denials Stats keeps when Config.DenialsKept
// is 0. It equals sandbox.EgressDenialsKept, the posture's bound.
const DefaultDenialsKept = 8

// Timeouts of the proxy's own outbound work. A model API may take minutes to
// answer, so nothing bounds a request once it is connected.
const (
	// ResolveTimeout bounds one DNS lookup of a destination.
	ResolveTimeout = 5 * time.Second
	// DialTimeout bounds connecting to one destination (all its addresses).
	DialTimeout = 10 * time.Second
	// readHeaderTimeout bounds how long a client may take to send a request
	// head to a proxy listener.
	readHeaderTimeout = 30 * time.Second
)

// maxDestBytes caps the destination text kept in a Denial; an attacker
// controls it.
const maxDestBytes = 256

// ErrClosed is returned by ServeForward and ServeUpstream called after Close.
var ErrClosed = errors.New("egress: proxy closed")

// Resolver looks up the addresses of a host name. *net.Resolver satisfies it.
// The proxy calls it with network "ip" and a fully qualified host name ending
// in "." (so search domains never apply); the result may mix IPv4 and IPv6.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// DialFunc connects to address ("ip:port", always an address the proxy has
// checked) over network ("tcp").
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// Upstream is a model API served by a reverse proxy (ServeUpstream) that puts
// the real key on every request.
type Upstream struct {
	// URL is the base URL, "https://api.anthropic.com" or with a path prefix
	// ("https://example.com/openai"); request paths are appended to it.
	URL string
	// Header is the request header the key goes into upstream, e.g.
	// "x-api-key" or "Authorization".
	Header string
	// Prefix is put before Key in Header, e.g. "Bearer ".
	Prefix string
	// Key is the real key. It is never logged, counted or echoed.
	Key string
	// Paths, when not empty, are the only request paths forwarded: each is a
	// clean absolute path prefix matched on segment boundaries ("/v1/messages"
	// allows "/v1/messages" and "/v1/messages/count_tokens", not
	// "/v1/messagesX"). Requests with dot segments or percent-encoded
	// characters in the path are refused then, so the prefix cannot be
	// escaped. Empty means every path: the key's full power is exposed to the
	// sandbox, which is what an agent that needs the whole API requires.
	Paths []string
	// Gateway marks a model gateway the user named (goalrun's
	// --model-gateway: LiteLLM, a corporate proxy): its authority may be,
	// or resolve to, a loopback, private (RFC 1918, ULA) or CGNAT address,
	// and be an IP literal. The allowance holds for this upstream's own
	// host and port only: forward destinations and other upstreams stay
	// under the usual rules, and link-local (cloud metadata), multicast
	// and reserved addresses stay refused.
	Gateway bool
}

// Config configures a Proxy. Only Allow and Upstreams describe policy; the
// rest injects the world for tests and unusual hosts.
type Config struct {
	// Allow is the forward proxy's allowlist: "host[:port]" (port 443 when
	// absent) or "*.suffix[:port]" (any name strictly below suffix). See the
	// package documentation for matching.
	Allow []string
	// Upstreams are the model APIs served by ServeUpstream(l, i).
	Upstreams []Upstream
	// Resolver resolves destination names; nil means net.DefaultResolver.
	Resolver Resolver
	// DialContext connects to checked addresses; nil means a net.Dialer.
	// Tests use it to map a public test address onto a loopback server, so the
	// allowed path is exercised without real DNS or internet.
	DialContext DialFunc
	// TLSClientConfig verifies HTTPS upstreams and an HTTPS outbound proxy;
	// nil means the system roots. Tests set the httptest server's CA here.
	TLSClientConfig *tls.Config
	// OutboundProxy names the proxies the Proxy's own connections go
	// through, as a corporate network sets them (OutboundFromEnv reads
	// HTTPS_PROXY, HTTP_PROXY and NO_PROXY): CONNECT tunnels and HTTPS
	// upstreams through HTTPSProxy, plain-HTTP requests and HTTP upstreams
	// through HTTPProxy, destinations NoProxy matches (and loopback ones)
	// directly. Every decision stays on the destination the sandbox named,
	// made before the outbound proxy is chosen; the outbound proxy is only
	// asked for an allowed destination, by name, and the sandbox can never
	// name the outbound proxy itself as a destination. nil: every
	// destination is dialled directly.
	OutboundProxy *httpproxy.Config
	// AllowLoopbackUpstreams lets upstreams (never forward destinations)
	// reach loopback addresses, literal (http://127.0.0.1:PORT) or resolved.
	// It exists for tests and local scripted model servers and is off by
	// default; production configuration must leave it false.
	AllowLoopbackUpstreams bool
	// AllowNets are address blocks an allowlisted name (or an upstream) may
	// resolve into although their class is refused: private, CGNAT or
	// reserved blocks where a package registry's mirror lives on some
	// networks (a corporate mirror at 10.x, a CI machine whose registries
	// answer at a documentation address). IP literals stay refused, and the
	// allowlist still decides which names are reached. New refuses a block
	// that overlaps loopback, link-local (cloud metadata), multicast or
	// unspecified addresses: those are never reachable.
	AllowNets []netip.Prefix
	// DenialsKept bounds Stats.Denials; 0 means DefaultDenialsKept.
	DenialsKept int
	// MaxConns bounds the client connections open at once over all
	// listeners; 0 means DefaultMaxConns. At the bound the proxy stops
	// accepting until one closes, so a sandbox that opens connections without
	// end cannot exhaust goalrun's file descriptors.
	MaxConns int
	// Log receives the proxy's warnings (never keys); nil discards them.
	Log io.Writer
}

// Denial is one refused destination.
type Denial struct {
	// Dest is the destination as the client asked for it, normalized to
	// "host:port" when it parsed, else the raw text (at most 256 bytes,
	// non-printable bytes replaced by '?').
	Dest string
	// Reason says why, e.g. "not on the allowlist" or "resolves to
	// 10.0.0.1 (private)".
	Reason string
	// Unreachable is true when the destination passed the policy but could
	// not be resolved (DNS failure, no addresses): an upstream failure, not
	// a policy decision. The proxy answers it 502 Bad Gateway instead of 403
	// Forbidden (see StatusFor) and still counts and keeps it, so the report
	// shows why the sandbox reached nothing.
	Unreachable bool
}

// StatusFor is the HTTP status the proxy answers a refusal with: 403
// Forbidden for a policy denial (not on the allowlist, an IP literal, a
// private or loopback address, a malformed destination), 502 Bad Gateway
// for an allowed destination that could not be resolved or reached.
func (d Denial) StatusFor() int {
	if d.Unreachable {
		return http.StatusBadGateway
	}
	return http.StatusForbidden
}

// String returns "dest (reason)", the form of sandbox.Posture.EgressDenials,
// e.g. "169.254.169.254:80 (IP literal, link-local)".
func (d Denial) String() string { return d.Dest + " (" + d.Reason + ")" }

// Stats counts the proxy's decisions since New.
type Stats struct {
	// Allowed counts requests and tunnels let through (forward and upstream).
	Allowed int
	// Denied counts refusals.
	Denied int
	// Denials is a bounded sample: the first Config.DenialsKept distinct
	// (Dest, Reason) pairs, oldest first. Repeats of a kept denial are only
	// counted, so one retry loop cannot crowd out everything else.
	Denials []Denial
}

// DenialStrings returns Denials formatted for sandbox.Posture.EgressDenials.
func (s Stats) DenialStrings() []string {
	if len(s.Denials) == 0 {
		return nil
	}
	out := make([]string, len(s.Denials))
	for i, d := range s.Denials {
		out[i] = d.String()
	}
	return out
}

// Proxy is goalrun's egress proxy: a forward proxy (ServeForward) and a
// reverse proxy per upstream (ServeUpstream), sharing one policy and one set
// of counters. It is safe for concurrent use.
type Proxy struct {
	cfg       Config
	allow     allowlist
	upstreams []*upstream
	resolver  Resolver
	dial      DialFunc
	logger    *log.Logger
	kept      int
	outbound  *outbound // nil: direct

	forward   http.Handler
	forwardTr *http.Transport

	slots chan struct{} // one token per open client connection
	done  chan struct{} // closed by Close

	mu      sync.Mutex
	closed  bool
	servers []*http.Server
	conns   map[*trackedConn]struct{}
	stats   Stats
	seen    map[Denial]bool
}

// New checks cfg and returns a Proxy that serves nothing until ServeForward
// or ServeUpstream is called. Errors name every bad allowlist entry or
// upstream at once.
func New(cfg Config) (*Proxy, error) {
	al, err := parseAllowlist(cfg.Allow)
	if err != nil {
		return nil, err
	}
	if err := checkAllowNets(cfg.AllowNets); err != nil {
		return nil, err
	}
	p := &Proxy{
		cfg:      cfg,
		allow:    al,
		resolver: cfg.Resolver,
		dial:     cfg.DialContext,
		kept:     cfg.DenialsKept,
		conns:    map[*trackedConn]struct{}{},
		seen:     map[Denial]bool{},
	}
	if p.resolver == nil {
		p.resolver = net.DefaultResolver
	}
	if p.dial == nil {
		d := &net.Dialer{Timeout: DialTimeout}
		p.dial = d.DialContext
	}
	if p.kept <= 0 {
		p.kept = DefaultDenialsKept
	}
	maxConns := cfg.MaxConns
	if maxConns <= 0 {
		maxConns = DefaultMaxConns
	}
	p.slots = make(chan struct{}, maxConns)
	p.done = make(chan struct{})
	logw := cfg.Log
	if logw == nil {
		logw = io.Discard
	}
	p.logger = log.New(logw, "goalrun egress: ", 0)
	if p.outbound, err = newOutbound(cfg.OutboundProxy); err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}

	var errs []error
	for i, u := range cfg.Upstreams {
		up, err := p.newUpstream(u)
		if err != nil {
			errs = append(errs, fmt.Errorf("egress upstream %d: %w", i, err))
			continue
		}
		p.upstreams = append(p.upstreams, up)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	p.forward, p.forwardTr = p.newForward()
	return p, nil
}

// Allowlist returns the normalized forward allowlist ("host:port" and
// "*.suffix:port"), duplicates removed, in the order given; for the posture's
// egress_allowlist.
func (p *Proxy) Allowlist() []string { return append([]string(nil), p.allow.entries...) }

// Stats returns a snapshot of the counters. It is safe to call concurrently
// with serving.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Denials = append([]Denial(nil), p.stats.Denials...)
	return s
}

// ServeForward serves the forward proxy (CONNECT and absolute-form HTTP) on
// l until Close; it closes l. It returns nil after Close, ErrClosed when
// called after Close, and otherwise the listener's error.
func (p *Proxy) ServeForward(l net.Listener) error {
	return p.serve(l, p.forward)
}

// ServeUpstream serves reverse proxy i (an index into Config.Upstreams) on l
// until Close, like ServeForward.
func (p *Proxy) ServeUpstream(l net.Listener, i int) error {
	if i < 0 || i >= len(p.upstreams) {
		l.Close()
		return fmt.Errorf("egress: upstream %d does not exist (%d configured)", i, len(p.upstreams))
	}
	return p.serve(l, p.upstreams[i])
}

func (p *Proxy) serve(l net.Listener, h http.Handler) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ErrorLog:          p.logger,
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.Close()
		return ErrClosed
	}
	p.servers = append(p.servers, srv)
	p.mu.Unlock()
	err := srv.Serve(&trackingListener{Listener: l, p: p})
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops every server, closes the listeners and every connection still
// open (tunnels included). It is idempotent and returns nil.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	servers := p.servers
	conns := make([]*trackedConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, s := range servers {
		s.Close()
	}
	for _, c := range conns {
		c.Close()
	}
	p.forwardTr.CloseIdleConnections()
	for _, u := range p.upstreams {
		u.tr.CloseIdleConnections()
	}
	return nil
}

// recordAllow counts an allowed request or tunnel.
func (p *Proxy) recordAllow() {
	p.mu.Lock()
	p.stats.Allowed++
	p.mu.Unlock()
}

// recordDeny counts a refusal and keeps it when it is new and there is room.
func (p *Proxy) recordDeny(d Denial) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.Denied++
	if len(p.stats.Denials) < p.kept && !p.seen[d] {
		p.seen[d] = true
		p.stats.Denials = append(p.stats.Denials, d)
	}
}

// destination is a decided destination: the authority and the addresses
// checked for it, which are the only ones the proxy dials.
type destination struct {
	auth  authority
	addrs []netip.Addr
	via   *via // the outbound proxy that carries it (Proxy.route), or nil
}

// policy says which rules apply to a destination.
type policy int

const (
	// forwardPolicy: the allowlist applies, loopback never allowed.
	forwardPolicy policy = iota
	// upstreamPolicy: a configured upstream; no allowlist, loopback only
	// with Config.AllowLoopbackUpstreams.
	upstreamPolicy
	// gatewayPolicy: an upstream that is a named model gateway
	// (Upstream.Gateway); loopback, private and CGNAT addresses allowed.
	gatewayPolicy
)

// gatewayClasses are the refused address classes a named model gateway
// may be in (a gateway on this machine or the local network).
var gatewayClasses = map[string]bool{classLoopback: true, classPrivate: true, classCGNAT: true}

// allowedClass reports whether an address of class (refused in general)
// is allowed under pol.
func (p *Proxy) allowedClass(pol policy, class string) bool {
	switch {
	case class == "":
		return true
	case pol == gatewayPolicy:
		return gatewayClasses[class]
	case pol == upstreamPolicy:
		return p.cfg.AllowLoopbackUpstreams && class == classLoopback
	}
	return false
}

// check decides on a parsed authority: it applies the allowlist (forward
// policy), resolves the name and checks every address. It returns the
// destination to dial, or a Denial with the reason. It records nothing.
func (p *Proxy) check(ctx context.Context, a authority, pol policy) (destination, *Denial) {
	loopbackOK := p.allowedClass(pol, classLoopback)
	deny := func(reason string) (destination, *Denial) {
		return destination{}, &Denial{Dest: a.String(), Reason: reason}
	}
	unreachable := func(reason string) (destination, *Denial) {
		return destination{}, &Denial{Dest: a.String(), Reason: reason, Unreachable: true}
	}
	if a.ip.IsValid() {
		class := classify(a.ip)
		if class != "" && p.allowedClass(pol, class) || class == "" && pol == gatewayPolicy {
			return destination{auth: a, addrs: []netip.Addr{a.ip.WithZone("").Unmap()}}, nil
		}
		if class != "" {
			return deny("IP literal, " + class)
		}
		return deny("IP literal")
	}
	if isLocalhostName(a.host) && !loopbackOK {
		return deny("loopback name")
	}
	if pol == forwardPolicy {
		if ok, reason := p.allow.match(a); !ok {
			return deny(reason)
		}
	}
	lctx, cancel := context.WithTimeout(ctx, ResolveTimeout)
	defer cancel()
	addrs, err := p.resolver.LookupNetIP(lctx, "ip", a.host+".")
	if err != nil {
		return unreachable("DNS lookup failed: " + shortDNSError(err))
	}
	if len(addrs) == 0 {
		return unreachable("DNS lookup returned no addresses")
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, ip := range addrs {
		ip = ip.WithZone("").Unmap()
		class := classify(ip)
		if !p.allowedClass(pol, class) && !p.inAllowedNet(ip, class) {
			return deny("resolves to " + ip.String() + " (" + class + ")")
		}
		if !containsAddr(out, ip) {
			out = append(out, ip)
		}
	}
	return destination{auth: a, addrs: out}, nil
}

func containsAddr(s []netip.Addr, a netip.Addr) bool {
	for _, x := range s {
		if x == a {
			return true
		}
	}
	return false
}

// shortDNSError returns a lookup error without the resolver's server address.
func shortDNSError(err error) string {
	var de *net.DNSError
	if errors.As(err, &de) {
		switch {
		case de.IsNotFound:
			return "no such host"
		case de.IsTimeout:
			return "timeout"
		}
		return de.Err
	}
	return err.Error()
}

// dialDest connects to the first of d's checked addresses that answers:
// IPv4 addresses first (hosts without IPv6 routes are common), each attempt
// given an equal share of what is left of DialTimeout, so one black-holed
// address cannot use up the whole budget.
func (p *Proxy) dialDest(ctx context.Context, d destination) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, DialTimeout)
	defer cancel()
	addrs := slices.Clone(d.addrs)
	slices.SortStableFunc(addrs, func(a, b netip.Addr) int {
		switch {
		case a.Is4() && !b.Is4():
			return -1
		case !a.Is4() && b.Is4():
			return 1
		}
		return 0
	})
	var errs []error
	for i, ip := range addrs {
		deadline, _ := ctx.Deadline()
		actx, acancel := context.WithTimeout(ctx, time.Until(deadline)/time.Duration(len(addrs)-i))
		c, err := p.dial(actx, "tcp", netip.AddrPortFrom(ip, d.auth.port).String())
		acancel()
		if err == nil {
			return p.track(c), nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("egress: connect to %s: %w", d.auth, errors.Join(errs...))
}

// sanitizeDest makes client-controlled text safe to keep in a Denial.
func sanitizeDest(s string) string {
	if len(s) > maxDestBytes {
		s = s[:maxDestBytes]
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c > 0x7e {
			c = '?'
		}
		b.WriteByte(c)
	}
	if b.Len() == 0 {
		return "?"
	}
	return b.String()
}

// trackingListener registers every accepted connection with the proxy, so
// Close reaches hijacked CONNECT tunnels that http.Server no longer tracks,
// and holds one of the proxy's connection slots for each until it closes.
type trackingListener struct {
	net.Listener
	p *Proxy
}

func (l *trackingListener) Accept() (net.Conn, error) {
	select {
	case l.p.slots <- struct{}{}:
	case <-l.p.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.p.slots
		return nil, err
	}
	tc := l.p.track(c)
	tc.release = func() { <-l.p.slots }
	return tc, nil
}

// track registers c; a connection made after Close is closed at once.
func (p *Proxy) track(c net.Conn) *trackedConn {
	tc := &trackedConn{Conn: c, p: p}
	p.mu.Lock()
	closed := p.closed
	if !closed {
		p.conns[tc] = struct{}{}
	}
	p.mu.Unlock()
	if closed {
		c.Close()
	}
	return tc
}

// trackedConn is a connection Close can reach. It keeps the half-close
// abilities of TCP and Unix connections, which tunnels use to pass EOF on.
type trackedConn struct {
	net.Conn
	p       *Proxy
	release func() // frees the connection slot; nil for outbound connections
	once    sync.Once
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.p.mu.Lock()
		delete(c.p.conns, c)
		c.p.mu.Unlock()
		if c.release != nil {
			c.release()
		}
	})
	return err
}

// CloseWrite half-closes the connection; without that ability it closes it.
func (c *trackedConn) CloseWrite() error {
	if hc, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return hc.CloseWrite()
	}
	return c.Close()
}

// CloseRead half-closes the reading side when the connection can.
func (c *trackedConn) CloseRead() error {
	if hc, ok := c.Conn.(interface{ CloseRead() error }); ok {
		return hc.CloseRead()
	}
	return nil
}
