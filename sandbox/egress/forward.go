package egress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/elazarl/goproxy"
)

// destKey carries the decided destination of a plain-HTTP request from the
// request handler to the transport's dialer.
type destKey struct{}

// newForward builds the forward proxy on goproxy: it handles CONNECT
// tunnelling (hijack, early bytes, half-close) and absolute-form HTTP
// forwarding; we decide every destination and do every dial.
//
// goproxy's defaults are changed where they would weaken the boundary:
//   - ConnectDial is cleared: by default it chains through HTTPS_PROXY from
//     goalrun's environment. With it nil, goproxy dials through
//     ProxyCtx.Dialer, which we set per CONNECT to dial only the checked
//     addresses.
//   - Tr is ours: its Proxy is the outbound proxy chosen for the decided
//     destination (Config.OutboundProxy; never read from the environment
//     here), and its DialContext dials only the destination decided for the
//     request (destKey), or that destination's outbound proxy.
//   - The CONNECT target is parsed from the raw request target, not from
//     r.URL.Host, which net/http derives by URL parsing and which turns
//     "allowed.com:443@evil.com" into host "evil.com" with a user
//     "allowed.com:443".
func (p *Proxy) newForward() (http.Handler, *http.Transport) {
	tr := &http.Transport{
		Proxy:                 proxyFor, // the decision's outbound proxy, never the environment's
		DialContext:           p.dialDecided,
		ForceAttemptHTTP2:     false,
		DisableCompression:    true, // pass the client's Accept-Encoding through untouched
		MaxIdleConns:          16,
		IdleConnTimeout:       DialTimeout * 9,
		TLSHandshakeTimeout:   DialTimeout,
		ExpectContinueTimeout: DialTimeout / 10,
	}
	gp := goproxy.NewProxyHttpServer()
	gp.Logger = p.logger
	gp.Verbose = false
	gp.ConnectDial = nil
	gp.ConnectDialWithReq = nil
	gp.KeepAcceptEncoding = true
	gp.Tr = tr
	gp.ConnectionErrHandler = connectFailed
	gp.NonproxyHandler = http.HandlerFunc(p.serveNonProxy)
	gp.OnRequest().HandleConnectFunc(p.onConnect)
	gp.OnRequest().DoFunc(p.onHTTP)
	return gp, tr
}

// onConnect decides a CONNECT request. Allowed: goproxy dials through
// ctx.Dialer, which connects to the checked addresses only. Refused: a 403
// naming the destination and the reason.
func (p *Proxy) onConnect(_ string, ctx *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
	r := ctx.Req
	d, deny := p.decideRaw(r.Context(), r.RequestURI, 0)
	if deny == nil {
		d, deny = p.route(r.Context(), d, "https")
	}
	if deny != nil {
		p.recordDeny(*deny)
		ctx.Resp = denyResponse(r, *deny)
		return goproxy.RejectConnect, ""
	}
	p.recordAllow()
	ctx.Dialer = func(c context.Context, _, _ string) (net.Conn, error) {
		if d.via != nil {
			return p.dialTunnel(c, d)
		}
		return p.dialDest(c, d)
	}
	return goproxy.OkConnect, d.auth.String()
}

// onHTTP decides an absolute-form plain-HTTP request ("GET http://host/ …").
// Only the http scheme is forwarded (HTTPS goes through CONNECT). The
// authority is taken from the raw request target; the outgoing request's
// URL host and Host header are rewritten from the decision, so a Host
// header that disagrees with the target (for virtual-host or domain
// fronting tricks) never reaches the destination.
func (p *Proxy) onHTTP(r *http.Request, ctx *goproxy.ProxyCtx) (*http.Request, *http.Response) {
	raw, err := absoluteAuthority(r.RequestURI)
	if err != nil {
		deny := Denial{Dest: sanitizeDest(r.URL.Host), Reason: err.Error()}
		p.recordDeny(deny)
		return r, denyResponse(r, deny)
	}
	d, deny := p.decideRaw(r.Context(), raw, 80)
	if deny == nil {
		d, deny = p.route(r.Context(), d, "http")
	}
	if deny != nil {
		p.recordDeny(*deny)
		return r, denyResponse(r, *deny)
	}
	p.recordAllow()
	r.URL.Scheme = "http"
	r.URL.User = nil
	r.URL.Host = d.auth.String()
	r.Host = d.auth.host
	if d.auth.port != 80 {
		r.Host = d.auth.String()
	}
	return r.WithContext(context.WithValue(r.Context(), destKey{}, d)), nil
}

// serveNonProxy refuses an origin-form request ("GET / …") sent to the
// forward proxy: something in the sandbox is not using it as a proxy. It is
// counted as a denial of the Host it named.
func (p *Proxy) serveNonProxy(w http.ResponseWriter, r *http.Request) {
	deny := Denial{Dest: sanitizeDest(r.Host), Reason: "not a proxy request (set HTTP_PROXY/HTTPS_PROXY; send CONNECT or an absolute URI)"}
	p.recordDeny(deny)
	writeDeny(w, deny)
}

// decideRaw parses raw (defaultPort 0: the port is required) and checks it
// under the forward policy.
func (p *Proxy) decideRaw(ctx context.Context, raw string, defaultPort int) (destination, *Denial) {
	a, err := parseAuthority(raw, defaultPort)
	if err != nil {
		reason := "invalid destination: " + err.Error()
		dest := sanitizeDest(raw)
		if errors.Is(err, errNumericHost) { // an address in a spelling we do not decode
			reason, dest = "IP literal (numeric form)", a.String()
		}
		return destination{}, &Denial{Dest: dest, Reason: reason}
	}
	return p.check(ctx, a, forwardPolicy)
}

// absoluteAuthority returns the raw authority of an absolute-form request
// target "http://authority/path?query". Schemes other than http are refused
// (HTTPS goes through CONNECT); the authority is returned as written, for
// parseAuthority to judge (userinfo and percent-encoding are refused there).
func absoluteAuthority(target string) (string, error) {
	scheme, rest, ok := strings.Cut(target, "://")
	if !ok {
		return "", fmt.Errorf("not an absolute URI")
	}
	if !strings.EqualFold(scheme, "http") {
		return "", fmt.Errorf("scheme %q not forwarded (HTTPS goes through CONNECT)", sanitizeDest(scheme))
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	return rest, nil
}

// dialDecided is the transports' dialer: it connects only to the
// destination decided for the request that asked for the connection, and
// only when the transport wants that very authority, or, when the decision
// goes through an outbound proxy, only to that proxy (the transport then
// speaks to it: absolute-form requests, CONNECT or SOCKS5 for the decided
// destination).
func (p *Proxy) dialDecided(ctx context.Context, _, addr string) (net.Conn, error) {
	d, ok := ctx.Value(destKey{}).(destination)
	if !ok {
		return nil, fmt.Errorf("egress: refusing to dial %s: no decision for this request", addr)
	}
	if d.via != nil {
		if want := canonicalAddr(d.via.url); addr != want {
			return nil, fmt.Errorf("egress: refusing to dial %s: the decision goes through %s", addr, d.via)
		}
		c, err := p.dialDest(ctx, d.via.dest)
		if err != nil {
			return nil, fmt.Errorf("egress: via %s: %w", d.via, err)
		}
		return c, nil
	}
	if addr != d.auth.String() {
		return nil, fmt.Errorf("egress: refusing to dial %s: the decision was for %s", addr, d.auth)
	}
	return p.dialDest(ctx, d)
}

// Egress refusals carry the header EgressHeader, whose value says which
// kind (EgressDenied or EgressUnreachable), and a text/plain body that starts
// with BodyPrefix ("goalrun egress: "), so a client (or goalrun reading an
// agent's error) can tell goalrun's own proxy from the model API:
//
//	403 goalrun egress: refused evil.com:443: not on the allowlist
//	502 goalrun egress: cannot reach api.anthropic.com:443: DNS lookup failed: no such host
const (
	EgressHeader      = "X-Goalrun-Egress"
	EgressDenied      = "denied"
	EgressUnreachable = "unreachable"
	BodyPrefix        = "goalrun egress: "
)

// denyResponse is the response goproxy writes for a refused request or
// CONNECT: 403 for a policy denial, 502 for an unreachable destination.
func denyResponse(r *http.Request, d Denial) *http.Response {
	body := denyBody(d)
	h := http.Header{}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set(EgressHeader, denyKind(d))
	code := d.StatusFor()
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", code, http.StatusText(code)),
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Close:         r.Method == http.MethodConnect,
		Request:       r,
	}
}

// writeDeny writes the response for a refused request directly (403, or
// 502 for an unreachable destination).
func writeDeny(w http.ResponseWriter, d Denial) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set(EgressHeader, denyKind(d))
	w.WriteHeader(d.StatusFor())
	w.Write(denyBody(d))
}

func denyKind(d Denial) string {
	if d.Unreachable {
		return EgressUnreachable
	}
	return EgressDenied
}

func denyBody(d Denial) []byte {
	if d.Unreachable {
		return []byte(BodyPrefix + "cannot reach " + d.Dest + ": " + d.Reason + "\n")
	}
	return []byte(BodyPrefix + "refused " + d.Dest + ": " + d.Reason + "\n")
}

// connectFailed answers a CONNECT whose allowed, resolved destination could
// not be dialled (goproxy's ConnectionErrHandler): 502 with goalrun's
// prefix, so the client sees who failed and why.
func connectFailed(w io.Writer, ctx *goproxy.ProxyCtx, err error) {
	body := BodyPrefix + "cannot reach " + sanitizeDest(ctx.Req.RequestURI) + ": " + strings.TrimPrefix(err.Error(), "egress: ") + "\n"
	if rw, ok := w.(http.ResponseWriter); ok { // goproxy's HTTP/2 mode
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		rw.Header().Set(EgressHeader, EgressUnreachable)
		rw.WriteHeader(http.StatusBadGateway)
		io.WriteString(rw, body)
		return
	}
	fmt.Fprintf(w, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\n%s: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		EgressHeader, EgressUnreachable, len(body), body)
}
