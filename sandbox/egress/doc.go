// Package egress is goalrun's network boundary for sandboxes in the "egress"
// mode (docs/security.md, "Network modes"): a forward proxy that lets the sandbox reach
// only allowlisted host:port pairs, a reverse proxy per model API that puts
// the real key on requests upstream (so the sandbox only ever holds a dummy
// key), and the relay that runs inside the network-less container and
// carries loopback TCP connections to the proxies' Unix sockets.
//
// # Decisions
//
// Every destination is decided on the authority the proxy itself dials, never
// on a header the client controls:
//
//   - The authority is parsed strictly: ASCII letters,
//     digits, '-', '_', '.', one ':' before a decimal port; no userinfo,
//     percent-encoding, zone ids or paths. Host names are compared in lower
//     case with one trailing dot removed. Non-ASCII names are refused; write
//     them in their punycode ("xn--") form.
//   - IP literals are refused in every spelling: dotted IPv4, bracketed or bare
//     IPv6 (also IPv4-mapped), and the numeric forms inet_aton accepts
//     ("2130706433", "0x7f.1", "0177.0.0.1", "127.1"): any host whose last
//     label is numeric is treated as an address, since no top-level domain is.
//   - Host and port must match the allowlist. An entry is "host[:port]" (port
//     443 when absent) matching that host exactly, or "*.suffix[:port]"
//     matching any name strictly below suffix (not suffix itself); the suffix
//     must have at least two labels ("*.com" is refused). "localhost" and
//     names below it are never allowed (RFC 6761).
//   - The name is resolved by the proxy (Config.Resolver) as a fully
//     qualified name (trailing dot, so resolv.conf search domains never
//     apply). When any address is loopback, private (RFC 1918, RFC 4193 ULA,
//     deprecated site-local), link-local (169.254.0.0/16 including the cloud
//     metadata address 169.254.169.254, fe80::/10), CGNAT (100.64.0.0/10),
//     multicast, unspecified or otherwise reserved (documentation,
//     benchmarking, 240.0.0.0/4, IPv4-compatible, NAT64/6to4 of a refused
//     IPv4 address, Teredo), the destination is refused. A failed lookup is a
//     refusal too.
//   - The proxy then dials exactly the addresses it checked (Config.DialContext
//     receives "ip:port"), so DNS rebinding between the check and the dial
//     is impossible.
//
// Each decision is counted (Stats); refusals keep a bounded sample with the
// reason (Config.DenialsKept). Refused CONNECT and plain-HTTP requests get a
// 403 whose body names the destination and the reason. A request so
// malformed that net/http refuses it (400, e.g. a CONNECT whose Host header
// is not a valid authority) names no destination and is not counted; nothing
// is resolved or dialled for it either. A CONNECT target must carry its port
// (RFC 9110 section 9.3.6); an absolute-form http URI defaults to port 80.
// Only the http scheme is forwarded in absolute form; HTTPS goes through
// CONNECT, so the proxy never terminates TLS.
//
// # What the allowlist cannot see
//
// A CONNECT tunnel is opaque: the proxy does not terminate TLS, so an agent
// that reaches an allowed host may send any bytes to it, including a TLS
// ClientHello whose SNI names another site served by the same front end
// (domain fronting). The allowlist bounds where bytes go, not what they say.
//
// # Reverse proxies (model APIs)
//
// Each Upstream is served on its own listener (ServeUpstream). Every request
// is forwarded to the upstream URL with its path and query preserved; any key
// the client sent (x-api-key, Authorization, api-key, x-goog-api-key,
// Proxy-Authorization and the configured header) is removed and the real key
// set; responses stream (server-sent events are flushed at once). The
// upstream host needs no allowlist entry, but its addresses pass the same
// checks; Config.AllowLoopbackUpstreams (tests only) lets loopback upstreams
// through. The upstream hosts are not added to the forward allowlist: the
// agent reaches a model API through its base URL, not through CONNECT.
// Upstream.Paths optionally narrows what the real key may be used for to a
// few path prefixes (say "/v1/messages"); without it the sandbox can call
// every endpoint of the API with the real key's rights, though it never
// learns the key.
//
// # Outbound proxy (a corporate proxy)
//
// Config.OutboundProxy (goalrun passes its own HTTPS_PROXY, HTTP_PROXY and
// NO_PROXY, see OutboundFromEnv) makes the proxy reach destinations through
// a corporate proxy: CONNECT tunnels and HTTPS upstreams through the HTTPS
// proxy (CONNECT to an http or https proxy, or SOCKS5), plain-HTTP requests
// and HTTP upstreams through the HTTP proxy (absolute form), NO_PROXY and
// loopback destinations directly, with the proxy's user information as
// Proxy-Authorization (never the sandbox's: goproxy and the upstreams drop
// the header the client sent). It changes only how an allowed destination
// is reached, never what is allowed: the destination is decided first,
// exactly as without it (allowlist, local resolution, address classes), and
// the corporate proxy is then asked for it by name, so its own policy
// applies too. The sandbox cannot name the corporate proxy as a
// destination: its address is loopback or private, or an IP literal, and
// refused like any other. Two consequences: a destination whose name does
// not resolve on goalrun's host is refused (where only the corporate proxy
// can resolve public names, nothing is reachable), and the corporate proxy
// resolves the name again, so the address it connects to is its resolver's
// answer, not the one checked here.
//
// # Resources
//
// Config.MaxConns bounds the client connections open at once (each costs two
// file descriptors and two goroutines); further clients wait. DNS lookups
// are bounded by ResolveTimeout, connecting by DialTimeout; an established
// tunnel or streaming response has no time limit (model answers can take
// minutes).
//
// The package does not import package sandbox; package sandbox builds a
// Config from its own and feeds Stats into sandbox.Posture.
package egress
