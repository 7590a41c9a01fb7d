package egress

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path"
	"slices"
	"strings"
)

// credentialHeaders are removed from every request to an upstream, whatever
// the configured header: the sandbox holds only a dummy key and must not
// be able to pick the credential the upstream sees.
var credentialHeaders = []string{"Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key", "Proxy-Authorization"}

// reservedKeyHeaders cannot carry a key: they frame the message.
var reservedKeyHeaders = []string{"Host", "Connection", "Content-Length", "Transfer-Encoding", "Te", "Trailer", "Upgrade", "Keep-Alive"}

// upstream is one reverse proxy for a model API.
//
// It is built on net/http/httputil.ReverseProxy rather than goproxy: goproxy
// is a forward proxy (it serves absolute-form requests and CONNECT and hands
// origin-form requests to a NonproxyHandler), while an upstream listener
// receives origin-form requests that must be re-targeted at one fixed URL
// with hop-by-hop headers removed and streaming preserved, which is exactly
// ReverseProxy's job.
type upstream struct {
	p      *Proxy
	pol    policy // upstreamPolicy, or gatewayPolicy for a named gateway
	target *url.URL
	auth   authority
	header string
	value  string
	paths  []string
	rp     *httputil.ReverseProxy
	tr     *http.Transport
}

// newUpstream checks u and builds its reverse proxy.
func (p *Proxy) newUpstream(u Upstream) (*upstream, error) {
	target, err := url.Parse(u.URL)
	if err != nil {
		return nil, fmt.Errorf("URL %q: %w", u.URL, err)
	}
	defaultPort := 0
	switch target.Scheme {
	case "https":
		defaultPort = 443
	case "http":
		defaultPort = 80
	default:
		return nil, fmt.Errorf("URL %q: scheme must be https or http", u.URL)
	}
	if target.User != nil || target.Fragment != "" || target.Opaque != "" {
		return nil, fmt.Errorf("URL %q: give scheme://host[:port][/path] only (no user, fragment)", u.URL)
	}
	a, err := parseAuthority(target.Host, defaultPort)
	if err != nil {
		return nil, fmt.Errorf("URL %q: host: %w", u.URL, err)
	}
	pol := upstreamPolicy
	if u.Gateway {
		pol = gatewayPolicy
	}
	if a.ip.IsValid() && !(u.Gateway || p.cfg.AllowLoopbackUpstreams && classify(a.ip) == classLoopback) {
		return nil, fmt.Errorf("URL %q: IP literal upstreams are refused; use the API's host name (or name it as a model gateway)", u.URL)
	}
	if a.ip.IsValid() && !p.allowedClass(pol, classify(a.ip)) {
		return nil, fmt.Errorf("URL %q: a %s address is refused even for a model gateway", u.URL, classify(a.ip))
	}
	if !validHeaderName(u.Header) {
		return nil, fmt.Errorf("header %q is not a valid header name (want e.g. \"x-api-key\" or \"Authorization\")", u.Header)
	}
	for _, h := range reservedKeyHeaders {
		if strings.EqualFold(u.Header, h) {
			return nil, fmt.Errorf("header %q frames the message and cannot carry a key", u.Header)
		}
	}
	if u.Key == "" {
		return nil, errors.New("the API key is empty; set the model API key in goalrun's environment")
	}
	if strings.ContainsAny(u.Prefix+u.Key, "\r\n\x00") {
		return nil, errors.New("the API key or its prefix contains a line break or NUL")
	}
	for _, pp := range u.Paths {
		if c := path.Clean(pp); !strings.HasPrefix(pp, "/") || (c != pp && c+"/" != pp) || strings.ContainsAny(pp, "%?#") {
			return nil, fmt.Errorf("path %q: want a clean absolute path prefix such as \"/v1/messages\"", pp)
		}
	}
	// The transport dials the canonical authority; write the URL host that
	// way so the two always agree (a trailing dot or upper case would not).
	t := *target
	t.Host = a.host
	if a.ip.Is6() {
		t.Host = "[" + a.host + "]"
	}
	if int(a.port) != defaultPort {
		t.Host = a.String()
	}
	up := &upstream{
		p:      p,
		pol:    pol,
		target: &t,
		auth:   a,
		header: http.CanonicalHeaderKey(u.Header),
		value:  u.Prefix + u.Key,
		paths:  slices.Clone(u.Paths),
	}
	up.tr = &http.Transport{
		Proxy:               proxyFor, // the decision's outbound proxy, never the environment's
		DialContext:         p.dialDecided,
		TLSClientConfig:     p.cfg.TLSClientConfig.Clone(),
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        16,
		IdleConnTimeout:     DialTimeout * 9,
		TLSHandshakeTimeout: DialTimeout,
	}
	up.rp = &httputil.ReverseProxy{
		Rewrite:       up.rewrite,
		Transport:     up.tr,
		FlushInterval: -1, // server-sent events reach the agent as they come
		ErrorLog:      p.logger,
		ErrorHandler:  up.fail,
	}
	return up, nil
}

// rewrite re-targets the request at the upstream URL (path and query
// appended to the URL's) and swaps whatever credential the client sent for
// the real key. ReverseProxy has already removed hop-by-hop headers,
// including any header a client listed in Connection.
func (up *upstream) rewrite(pr *httputil.ProxyRequest) {
	pr.SetURL(up.target)
	for _, h := range credentialHeaders {
		pr.Out.Header.Del(h)
	}
	pr.Out.Header.Del(up.header)
	pr.Out.Header.Set(up.header, up.value)
}

// ServeHTTP decides the upstream's destination for this request (resolved
// and checked every time, like a forward destination), counts it, and
// forwards the request.
func (up *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := up.p
	if r.Method == http.MethodConnect {
		d := Denial{Dest: sanitizeDest(r.RequestURI), Reason: "CONNECT sent to a model API endpoint (use it as a base URL, not a proxy)"}
		p.recordDeny(d)
		writeDeny(w, d)
		return
	}
	if reason := up.pathRefused(r.URL); reason != "" {
		d := Denial{Dest: up.auth.String() + sanitizeDest(r.URL.EscapedPath()), Reason: reason}
		p.recordDeny(d)
		writeDeny(w, d)
		return
	}
	d, deny := p.check(r.Context(), up.auth, up.pol)
	if deny == nil {
		d, deny = p.route(r.Context(), d, up.target.Scheme)
	}
	if deny != nil {
		p.recordDeny(*deny)
		writeDeny(w, *deny)
		return
	}
	p.recordAllow()
	up.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), destKey{}, d)))
}

// pathRefused says why u's path may not be forwarded, or "" when it may
// (always, without Upstream.Paths).
func (up *upstream) pathRefused(u *url.URL) string {
	if len(up.paths) == 0 {
		return ""
	}
	p := u.Path
	if u.RawPath != "" || strings.Contains(u.EscapedPath(), "%") {
		return "percent-encoded request path refused (the API's path allowlist is on)"
	}
	if c := path.Clean(p); !strings.HasPrefix(p, "/") || (c != p && c+"/" != p) {
		return "request path with dot segments refused (the API's path allowlist is on)"
	}
	for _, pp := range up.paths {
		pp = strings.TrimSuffix(pp, "/")
		if p == pp || strings.HasPrefix(p, pp+"/") {
			return ""
		}
	}
	return "path not on the API's path allowlist"
}

// fail answers a request the upstream could not serve (connection refused,
// TLS failure) with a 502 that names the upstream, never the key.
func (up *upstream) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) {
		return // the client went away
	}
	up.p.logger.Printf("upstream %s: %v", up.auth, err)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusBadGateway)
	fmt.Fprintf(w, "goalrun egress: upstream %s failed: %v\n", up.auth, err)
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			continue
		}
		if !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}
