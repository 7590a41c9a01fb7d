package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpproxy"
	"golang.org/x/net/proxy"
)

// Outbound proxy schemes (Config.OutboundProxy): an HTTP proxy spoken to in
// clear or over TLS, or a SOCKS5 proxy (both spellings name the same thing
// here: the destination's name is always sent to it, never resolved first).
var outboundSchemes = map[string]int{"http": 80, "https": 443, "socks5": 1080, "socks5h": 1080}

// OutboundFromEnv reads the proxy settings a corporate network gives
// programs (curl's and Go's names: HTTPS_PROXY, HTTP_PROXY, NO_PROXY, each
// in upper case first, then lower case) through getenv. It returns nil
// when neither HTTPS_PROXY nor HTTP_PROXY is set.
func OutboundFromEnv(getenv func(string) string) *httpproxy.Config {
	first := func(names ...string) string {
		for _, n := range names {
			if v := strings.TrimSpace(getenv(n)); v != "" {
				return v
			}
		}
		return ""
	}
	c := &httpproxy.Config{
		HTTPSProxy: first("HTTPS_PROXY", "https_proxy"),
		HTTPProxy:  first("HTTP_PROXY", "http_proxy"),
		NoProxy:    first("NO_PROXY", "no_proxy"),
	}
	if c.HTTPSProxy == "" && c.HTTPProxy == "" {
		return nil
	}
	return c
}

// CheckOutbound reports what New would refuse in c (an unparsable proxy
// URL, a scheme goalrun cannot speak, a bad port), naming the variable;
// nil for nil. Messages never carry the proxy's password.
func CheckOutbound(c *httpproxy.Config) error {
	_, err := newOutbound(c)
	return err
}

// OutboundPasswords returns the passwords in c's proxy URLs by the
// variable that holds them ("HTTPS_PROXY", "HTTP_PROXY"), for redaction.
func OutboundPasswords(c *httpproxy.Config) map[string]string {
	out := map[string]string{}
	if c == nil {
		return out
	}
	for name, v := range map[string]string{"HTTPS_PROXY": c.HTTPSProxy, "HTTP_PROXY": c.HTTPProxy} {
		if u, err := parseOutbound(name, v); err == nil && u != nil && u.User != nil {
			if pw, ok := u.User.Password(); ok && pw != "" {
				out[name] = pw
			}
		}
	}
	return out
}

// parseOutbound reads one proxy setting the way httpproxy does (a value
// without a scheme is an http proxy) and checks that goalrun can speak to
// it. name is the variable it came from, for errors.
func parseOutbound(name, v string) (*url.URL, error) {
	if v == "" {
		return nil, nil
	}
	u, err := url.Parse(v)
	if err != nil || u.Scheme == "" || u.Host == "" {
		u, err = url.Parse("http://" + v)
	}
	if err != nil || u.Host == "" || u.Opaque != "" {
		return nil, fmt.Errorf("%s: %q is not a proxy URL (want http://host:port)", name, redactProxy(v))
	}
	if _, ok := outboundSchemes[u.Scheme]; !ok {
		return nil, fmt.Errorf("%s: scheme %q is not supported (http, https, socks5 or socks5h)", name, u.Scheme)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%s: port %q of %s is not a port number", name, p, redactProxy(v))
		}
	}
	return u, nil
}

// redactProxy returns a proxy setting without its user information, for
// messages and the posture.
func redactProxy(v string) string {
	if u, err := url.Parse(v); err == nil && u.User != nil {
		u.User = nil
		return u.String()
	}
	if i := strings.LastIndex(v, "@"); i >= 0 { // unparsable: cut what may be a password
		return v[i+1:]
	}
	return v
}

// OutboundString describes c for the posture: which proxy serves which
// scheme and what bypasses them, without user information, e.g.
// "https=http://proxy.corp:3128 http=http://proxy.corp:3128 no_proxy=.corp".
// It is "" for nil.
func OutboundString(c *httpproxy.Config) string {
	if c == nil {
		return ""
	}
	var parts []string
	if c.HTTPSProxy != "" {
		parts = append(parts, "https="+redactProxy(c.HTTPSProxy))
	}
	if c.HTTPProxy != "" {
		parts = append(parts, "http="+redactProxy(c.HTTPProxy))
	}
	if c.NoProxy != "" {
		parts = append(parts, "no_proxy="+c.NoProxy)
	}
	return strings.Join(parts, " ")
}

// outbound is the parsed Config.OutboundProxy.
type outbound struct {
	pick func(*url.URL) (*url.URL, error)
}

// newOutbound checks c; nil means no outbound proxy.
func newOutbound(c *httpproxy.Config) (*outbound, error) {
	if c == nil || c.HTTPSProxy == "" && c.HTTPProxy == "" {
		return nil, nil
	}
	cc := *c
	cc.CGI = false // goalrun is no CGI handler; HTTP_PROXY is the operator's
	var errs []error
	for _, s := range []struct{ name, v string }{{"HTTPS_PROXY", cc.HTTPSProxy}, {"HTTP_PROXY", cc.HTTPProxy}} {
		if _, err := parseOutbound(s.name, s.v); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("outbound proxy: %w", err)
	}
	return &outbound{pick: cc.ProxyFunc()}, nil
}

// via is an outbound proxy a decided destination is reached through.
type via struct {
	url  *url.URL    // as configured, user information included
	name string      // the variable that chose it, for messages
	dest destination // the proxy's own address(es)
}

// String names the proxy without user information.
func (v *via) String() string {
	u := *v.url
	u.User = nil
	return u.Scheme + "://" + u.Host + " (" + v.name + ")"
}

// route picks the outbound proxy for d, reached for scheme ("https" for
// tunnels and HTTPS upstreams, "http" for plain-HTTP requests and HTTP
// upstreams), as the environment's proxy settings say (NO_PROXY included;
// loopback destinations never go through a proxy). The decision on d is
// already made and is not revisited: the proxy only carries what was
// allowed. The proxy's own address is resolved here, without the address
// checks (the operator named it; the sandbox cannot reach it except
// through this route). A proxy whose name does not resolve is a 502.
func (p *Proxy) route(ctx context.Context, d destination, scheme string) (destination, *Denial) {
	if p.outbound == nil {
		return d, nil
	}
	u, err := p.outbound.pick(&url.URL{Scheme: scheme, Host: d.auth.String()})
	if err != nil {
		return destination{}, &Denial{Dest: d.auth.String(), Reason: "outbound proxy: " + err.Error(), Unreachable: true}
	}
	if u == nil {
		return d, nil
	}
	name := "HTTPS_PROXY"
	if scheme == "http" {
		name = "HTTP_PROXY"
	}
	v := &via{url: u, name: name}
	port := outboundSchemes[u.Scheme]
	if ps := u.Port(); ps != "" {
		port, _ = strconv.Atoi(ps)
	}
	host := strings.TrimSuffix(u.Hostname(), ".")
	v.dest.auth = authority{host: host, port: uint16(port)}
	if ip, err := netip.ParseAddr(host); err == nil {
		v.dest.auth.ip = ip
		v.dest.addrs = []netip.Addr{ip.WithZone("").Unmap()}
	} else {
		lctx, cancel := context.WithTimeout(ctx, ResolveTimeout)
		defer cancel()
		// Without a trailing dot: a proxy named "proxy" is found through the
		// resolver's search domains, as every other program finds it.
		addrs, err := p.resolver.LookupNetIP(lctx, "ip", host)
		if err != nil || len(addrs) == 0 {
			reason := "no addresses"
			if err != nil {
				reason = shortDNSError(err)
			}
			return destination{}, &Denial{Dest: d.auth.String(), Reason: "outbound proxy " + v.String() + ": DNS lookup failed: " + reason, Unreachable: true}
		}
		for _, a := range addrs {
			if a = a.WithZone("").Unmap(); !containsAddr(v.dest.addrs, a) {
				v.dest.addrs = append(v.dest.addrs, a)
			}
		}
	}
	d.via = v
	return d, nil
}

// proxyFor is the transports' Proxy function: the outbound proxy of the
// destination decided for the request, or none.
func proxyFor(r *http.Request) (*url.URL, error) {
	if d, ok := r.Context().Value(destKey{}).(destination); ok && d.via != nil {
		return d.via.url, nil
	}
	return nil, nil
}

// canonicalAddr is "host:port" of a proxy URL as http.Transport dials it
// (the scheme's port when the URL has none).
func canonicalAddr(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = strconv.Itoa(outboundSchemes[u.Scheme])
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// dialTunnel opens a byte stream to d through its outbound proxy: CONNECT
// (RFC 9110 section 9.3.6) to an HTTP or HTTPS proxy, or a SOCKS5 CONNECT
// (RFC 1928). The proxy is asked for d's host name, never an address, so
// its own policy (by name) applies as it does to every program on this
// network. Connecting and the proxy's answer are bounded by DialTimeout.
func (p *Proxy) dialTunnel(ctx context.Context, d destination) (net.Conn, error) {
	v := d.via
	ctx, cancel := context.WithTimeout(ctx, DialTimeout)
	defer cancel()
	if v.url.Scheme == "socks5" || v.url.Scheme == "socks5h" {
		var auth *proxy.Auth
		if v.url.User != nil {
			pw, _ := v.url.User.Password()
			auth = &proxy.Auth{User: v.url.User.Username(), Password: pw}
		}
		var raw net.Conn
		fwd := dialerFunc(func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, err := p.dialDest(ctx, v.dest)
			raw = c
			return c, err
		})
		sd, err := proxy.SOCKS5("tcp", v.dest.auth.String(), auth, fwd)
		if err != nil {
			return nil, fmt.Errorf("egress: via %s: %w", v, err)
		}
		c, err := sd.(proxy.ContextDialer).DialContext(ctx, "tcp", d.auth.String())
		if err != nil {
			return nil, fmt.Errorf("egress: via %s: %w", v, err)
		}
		return &tunnelConn{Conn: c, raw: raw}, nil
	}
	c, err := p.dialDest(ctx, v.dest)
	if err != nil {
		return nil, fmt.Errorf("egress: via %s: %w", v, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	conn, err := p.connectThrough(c, d)
	if !stop() {
		err = errors.Join(err, ctx.Err())
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("egress: via %s: %w", v, err)
	}
	c.SetDeadline(time.Time{})
	return conn, nil
}

// connectThrough speaks CONNECT on c, an open connection to d's HTTP(S)
// proxy, and returns the tunnel.
func (p *Proxy) connectThrough(c net.Conn, d destination) (net.Conn, error) {
	v := d.via
	conn := c
	if v.url.Scheme == "https" {
		cfg := p.cfg.TLSClientConfig.Clone()
		if cfg == nil {
			cfg = &tls.Config{}
		}
		if cfg.ServerName == "" {
			cfg.ServerName = v.url.Hostname()
		}
		tc := tls.Client(c, cfg)
		if err := tc.Handshake(); err != nil {
			return nil, fmt.Errorf("TLS with the proxy: %w", err)
		}
		conn = tc
	}
	target := d.auth.String()
	req := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n"
	if u := v.url.User; u != nil {
		pw, _ := u.Password()
		req += "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(u.Username()+":"+pw)) + "\r\n"
	}
	req += "\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		return nil, fmt.Errorf("CONNECT %s: %w", target, err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return nil, fmt.Errorf("CONNECT %s: reading the proxy's answer: %w", target, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("CONNECT %s answered %s", target, resp.Status)
	}
	t := &tunnelConn{Conn: conn, raw: c}
	if br.Buffered() > 0 {
		t.r = br
	}
	return t, nil
}

// dialerFunc adapts a function to proxy.ContextDialer.
type dialerFunc func(ctx context.Context, network, addr string) (net.Conn, error)

func (f dialerFunc) Dial(network, addr string) (net.Conn, error) {
	return f(context.Background(), network, addr)
}

func (f dialerFunc) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return f(ctx, network, addr)
}

// tunnelConn is a stream through an outbound proxy: Conn speaks to the
// destination (over TLS to the proxy, or after the SOCKS5 reply), raw is
// the connection to the proxy, r holds bytes that came with the proxy's
// answer. It can half-close, as goproxy's tunnels need to pass a client's
// EOF on without losing the answer: CloseWrite ends the writing side of
// Conn (TLS close_notify) or of raw, CloseRead that of raw.
type tunnelConn struct {
	net.Conn
	raw net.Conn
	r   *bufio.Reader
}

func (c *tunnelConn) Read(b []byte) (int, error) {
	if c.r != nil {
		return c.r.Read(b)
	}
	return c.Conn.Read(b)
}

func (c *tunnelConn) CloseWrite() error {
	if hc, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return hc.CloseWrite()
	}
	if hc, ok := c.raw.(interface{ CloseWrite() error }); ok {
		return hc.CloseWrite()
	}
	return c.Close()
}

func (c *tunnelConn) CloseRead() error {
	if hc, ok := c.raw.(interface{ CloseRead() error }); ok {
		return hc.CloseRead()
	}
	return nil
}

// Close closes both.
func (c *tunnelConn) Close() error {
	err := c.Conn.Close()
	c.raw.Close()
	return err
}
