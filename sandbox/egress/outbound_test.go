package egress

import (
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/http/httpproxy"

	"github.com/goalrun/goalrun/sandbox/egress/egresstest"
)

// corporate starts a scripted corporate proxy for the test.
func corporate(t *testing.T, user string, tlsConfig *tls.Config) *egresstest.CorporateProxy {
	t.Helper()
	c, err := egresstest.NewCorporateProxy(user, tlsConfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// withUser returns proxyURL with user information added.
func withUser(proxyURL, user, password string) string {
	u, _ := url.Parse(proxyURL)
	u.User = url.UserPassword(user, password)
	return u.String()
}

// TestOutboundForward: the sandbox's forward-proxy traffic (CONNECT tunnels
// and plain-HTTP requests) reaches an allowed destination through the
// corporate proxy the environment names, by name, and with the operator's
// proxy credentials; every refusal is decided before the corporate proxy is
// asked anything, and NO_PROXY sends a destination directly.
func TestOutboundForward(t *testing.T) {
	tlsSrv := newTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "tls %s %s", r.Host, r.URL.Path)
	}))
	plain := newRecordingServer(t)
	roots := tlsSrv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	res := newResolver(map[string][]netip.Addr{
		"example.com.":      {pubA},
		"www.example.com.":  {pubA},
		"internal.example.": {netip.MustParseAddr("10.20.30.40")},
		"proxy.corp.":       {netip.MustParseAddr("10.0.0.8")},
		"corp.internal":     {netip.MustParseAddr("127.0.0.1")}, // the operator's name for the corporate proxy
	})
	allow := []string{"example.com", "example.com:80", "www.example.com", "internal.example", "proxy.corp:3128"}

	type result struct {
		status int
		body   string
	}
	do := func(t *testing.T, h *harness, kind, target string) result {
		t.Helper()
		switch kind {
		case "https": // a real client through the forward proxy (CONNECT, TLS inside)
			c := h.client(&http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}})
			resp, err := c.Get("https://" + target + "/p")
			if err != nil {
				return result{status: -1, body: err.Error()}
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return result{resp.StatusCode, string(b)}
		case "connect":
			status, body, _ := connect(t, h.forward, target)
			return result{status, body}
		default: // plain HTTP, absolute form, with a Proxy-Authorization the sandbox made up
			rs := rawExchange(t, h.forward, "GET http://"+target+"/p HTTP/1.1\r\nHost: "+target+"\r\nProxy-Authorization: Basic c2FuZGJveDpzZWNyZXQ=\r\nConnection: close\r\n\r\n", 1)
			if len(rs) != 1 {
				return result{status: -1}
			}
			return result{rs[0].status, rs[0].body}
		}
	}

	tests := []struct {
		name       string
		https      string // HTTPS_PROXY: "corp", "corp+user", "" (none)
		http       string // HTTP_PROXY
		noProxy    string
		refuse     string // a target the corporate proxy refuses
		kind       string // "https", "connect", "http"
		target     string
		wantStatus int
		wantBody   string
		wantCorp   []string // what the corporate proxy was asked
		wantAuth   string   // the Proxy-Authorization it saw on the first request
		wantDirect bool     // the destination was dialled without the corporate proxy
	}{
		{name: "HTTPS through the corporate proxy", https: "corp", kind: "https", target: "example.com",
			wantStatus: 200, wantBody: "tls example.com /p", wantCorp: []string{"example.com:443"}},
		{name: "the operator's proxy credentials, never the sandbox's", https: "corp+user", kind: "https", target: "example.com",
			wantStatus: 200, wantCorp: []string{"example.com:443"}, wantAuth: "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:s3cret"))},
		{name: "plain HTTP in absolute form through HTTP_PROXY", http: "corp", kind: "http", target: "example.com",
			wantStatus: 200, wantBody: "served example.com /p", wantCorp: []string{"example.com:80"}},
		{name: "plain HTTP: the sandbox's Proxy-Authorization is dropped", http: "corp+user", kind: "http", target: "example.com",
			wantStatus: 200, wantCorp: []string{"example.com:80"}, wantAuth: "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:s3cret"))},
		{name: "HTTPS_PROXY alone leaves plain HTTP direct", https: "corp", kind: "http", target: "example.com",
			wantStatus: 200, wantDirect: true},
		{name: "NO_PROXY sends a destination directly", https: "corp", noProxy: "localhost,.corp,example.com", kind: "https", target: "example.com",
			wantStatus: 200, wantDirect: true},
		{name: "NO_PROXY '*' turns the proxy off", https: "corp", http: "corp", noProxy: "*", kind: "http", target: "example.com",
			wantStatus: 200, wantDirect: true},
		{name: "not on the allowlist: refused before the corporate proxy is asked", https: "corp", kind: "connect", target: "evil.example:443",
			wantStatus: 403, wantBody: "not on the allowlist"},
		{name: "allowed name resolving to a private address: refused, though the corporate proxy could reach it", https: "corp", kind: "connect", target: "internal.example:443",
			wantStatus: 403, wantBody: "resolves to 10.20.30.40 (private)"},
		{name: "the corporate proxy's own address is an IP literal like any other", https: "corp", kind: "connect", target: "127.0.0.1:%PORT%",
			wantStatus: 403, wantBody: "IP literal, loopback"},
		{name: "a name for a private address, allowlisted, stays refused", https: "corp", kind: "connect", target: "proxy.corp:3128",
			wantStatus: 403, wantBody: "resolves to 10.0.0.8 (private)"},
		{name: "the corporate proxy by the operator's name", https: "corp-by-name", kind: "https", target: "example.com",
			wantStatus: 200, wantCorp: []string{"example.com:443"}},
		{name: "the corporate proxy's own name, allowlisted, is loopback to the sandbox", https: "corp-by-name", kind: "connect", target: "corp.internal:%PORT%",
			wantStatus: 403, wantBody: "resolves to 127.0.0.1 (loopback)"},
		{name: "the corporate proxy refuses: 502 naming it", https: "corp", refuse: "example.com:443", kind: "connect", target: "example.com:443",
			wantStatus: 502, wantBody: "CONNECT example.com:443 answered 403 Forbidden", wantCorp: []string{"example.com:443"}},
		{name: "missing proxy credentials: 502 naming the 407", https: "corp-needs-user", kind: "connect", target: "example.com:443",
			wantStatus: 502, wantBody: "407 Proxy Authentication Required", wantCorp: []string{"example.com:443"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			user := ""
			if strings.HasPrefix(tt.https, "corp+user") || strings.HasPrefix(tt.http, "corp+user") || tt.https == "corp-needs-user" {
				user = "alice:s3cret"
			}
			corp := corporate(t, user, nil)
			corp.Route("example.com:443", tlsSrv.Listener.Addr().String())
			corp.Route("example.com:80", plain.Listener.Addr().String())
			corp.Route("internal.example:443", tlsSrv.Listener.Addr().String())
			if tt.refuse != "" {
				corp.Refuse(tt.refuse)
			}
			setting := func(v string) string {
				switch v {
				case "corp", "corp-needs-user":
					return corp.URL
				case "corp+user":
					return withUser(corp.URL, "alice", "s3cret")
				case "corp-by-name":
					return strings.Replace(corp.URL, "127.0.0.1", "corp.internal", 1)
				}
				return ""
			}
			_, corpPort, _ := net.SplitHostPort(corp.Addr)
			h := startHarness(t, Config{Allow: append(slices.Clone(allow), "corp.internal:"+corpPort), Resolver: res, TLSClientConfig: &tls.Config{RootCAs: roots},
				OutboundProxy: &httpproxy.Config{HTTPSProxy: setting(tt.https), HTTPProxy: setting(tt.http), NoProxy: tt.noProxy}})
			h.dial.Route(netip.AddrPortFrom(pubA, 443).String(), tlsSrv.Listener.Addr().String())
			h.dial.Route(netip.AddrPortFrom(pubA, 80).String(), plain.Listener.Addr().String())
			target := strings.ReplaceAll(tt.target, "%PORT%", corpPort)

			got := do(t, h, tt.kind, target)
			if got.status != tt.wantStatus || !strings.Contains(got.body, tt.wantBody) {
				t.Fatalf("got %d %q, want %d containing %q", got.status, got.body, tt.wantStatus, tt.wantBody)
			}
			if strings.Contains(got.body, "s3cret") {
				t.Errorf("the proxy password reached the sandbox: %q", got.body)
			}
			if targets := corp.Targets(); !slices.Equal(targets, tt.wantCorp) {
				t.Errorf("the corporate proxy was asked for %q, want %q", targets, tt.wantCorp)
			}
			if tt.wantAuth != "" {
				if reqs := corp.Requests(); len(reqs) == 0 || reqs[0].Auth != tt.wantAuth {
					t.Errorf("the corporate proxy saw %+v, want Proxy-Authorization %q", reqs, tt.wantAuth)
				}
			}
			direct := false
			for _, a := range h.dial.Dialed() {
				if strings.HasPrefix(a, pubA.String()+":") {
					direct = true
				}
				if a != corp.Addr && !strings.HasPrefix(a, pubA.String()+":") {
					t.Errorf("dialled %s: neither the destination nor the corporate proxy", a)
				}
			}
			if direct != tt.wantDirect {
				t.Errorf("direct dial %v, want %v (dialled %q)", direct, tt.wantDirect, h.dial.Dialed())
			}
			for _, a := range plain.requests() {
				if a.header.Get("Proxy-Authorization") != "" {
					t.Errorf("the destination saw Proxy-Authorization %q", a.header.Get("Proxy-Authorization"))
				}
			}
		})
	}
}

// TestOutboundUpstream: the model API reverse proxy reaches an HTTPS API
// through the corporate proxy (CONNECT by name, TLS verified end to end,
// the real key on the request), an HTTP model gateway on a private address
// through HTTP_PROXY (absolute form), and a loopback gateway directly (no
// proxy ever carries loopback traffic).
func TestOutboundUpstream(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	api := newTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("x-api-key"))
		mu.Unlock()
		fmt.Fprintf(w, "model answer from %s%s", r.Host, r.URL.Path)
	}))
	gw := newRecordingServer(t)
	roots := api.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	_, gwPort, _ := net.SplitHostPort(gw.Listener.Addr().String())

	tests := []struct {
		name     string
		up       Upstream
		wantBody string
		wantCorp []string
	}{
		{name: "HTTPS model API by name", up: Upstream{URL: "https://example.com"},
			wantBody: "model answer from example.com/v1/messages", wantCorp: []string{"example.com:443"}},
		{name: "HTTP gateway on a private address", up: Upstream{URL: "http://10.9.9.9:8080", Gateway: true},
			wantBody: "served 10.9.9.9:8080 /v1/messages", wantCorp: []string{"10.9.9.9:8080"}},
		{name: "loopback gateway: direct", up: Upstream{URL: "http://127.0.0.1:" + gwPort, Gateway: true},
			wantBody: "served 127.0.0.1:" + gwPort + " /v1/messages"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			corp := corporate(t, "", nil)
			corp.Route("example.com:443", api.Listener.Addr().String())
			corp.Route("10.9.9.9:8080", gw.Listener.Addr().String())
			up := tt.up
			up.Header, up.Key = "x-api-key", realKey
			h := startHarness(t, Config{
				Upstreams:       []Upstream{up},
				Resolver:        newResolver(map[string][]netip.Addr{"example.com.": {pubA}}),
				TLSClientConfig: &tls.Config{RootCAs: roots},
				OutboundProxy:   &httpproxy.Config{HTTPSProxy: corp.URL, HTTPProxy: corp.URL},
			})
			rs := rawExchange(t, h.upstream[0], "POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: "+dummyKey+"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", 1)
			if len(rs) != 1 || rs[0].status != 200 || rs[0].body != tt.wantBody {
				t.Fatalf("responses %+v, want 200 %q", rs, tt.wantBody)
			}
			if targets := corp.Targets(); !slices.Equal(targets, tt.wantCorp) {
				t.Errorf("the corporate proxy was asked for %q, want %q", targets, tt.wantCorp)
			}
			for _, r := range gw.requests() {
				if r.header.Get("x-api-key") != realKey {
					t.Errorf("the gateway saw key %q", r.header.Get("x-api-key"))
				}
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if len(keys) != 1 || keys[0] != realKey {
		t.Errorf("the HTTPS API saw keys %q", keys)
	}
}

// TestOutboundTLSAndSOCKS: an HTTPS corporate proxy (TLS to the proxy, then
// CONNECT) and a SOCKS5 proxy with a user name carry tunnels and model API
// requests, asked for the destination's name.
func TestOutboundTLSAndSOCKS(t *testing.T) {
	api := newTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "answer") }))
	roots := api.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	echo := echoServer(t, "tcp", "127.0.0.1:0")

	tlsCorp := corporate(t, "", &tls.Config{Certificates: api.TLS.Certificates})
	tlsCorp.Route("example.com:443", api.Listener.Addr().String())
	tlsCorp.Route("example.com:7", echo.Addr().String())
	socks := newSOCKS5(t, "bob", "pw")
	socks.route("example.com:443", api.Listener.Addr().String())
	socks.route("example.com:7", echo.Addr().String())

	for _, tc := range []struct {
		name  string
		proxy string
		seen  func() []string
	}{
		{"https proxy", tlsCorp.URL, tlsCorp.Targets},
		{"socks5 proxy", "socks5://bob:pw@" + socks.addr, socks.targets},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startHarness(t, Config{
				Allow:           []string{"example.com:7"},
				Upstreams:       []Upstream{{URL: "https://example.com", Header: "x-api-key", Key: realKey}},
				Resolver:        newResolver(map[string][]netip.Addr{"example.com.": {pubA}}),
				TLSClientConfig: &tls.Config{RootCAs: roots},
				OutboundProxy:   &httpproxy.Config{HTTPSProxy: tc.proxy},
			})
			rs := rawExchange(t, h.upstream[0], "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 1)
			if len(rs) != 1 || rs[0].status != 200 || rs[0].body != "answer" {
				t.Fatalf("model API through %s: %+v", tc.name, rs)
			}
			status, body, c := connect(t, h.forward, "example.com:7")
			if status != 200 {
				t.Fatalf("CONNECT: %d %q", status, body)
			}
			io.WriteString(c, "ping through two proxies")
			c.(*net.TCPConn).CloseWrite()
			if got, _ := io.ReadAll(c); string(got) != "ping through two proxies" {
				t.Errorf("echo %q", got)
			}
			if got := tc.seen(); !slices.Equal(got, []string{"example.com:443", "example.com:7"}) {
				t.Errorf("the proxy was asked for %q", got)
			}
		})
	}
}

// TestOutboundUnreachable: a corporate proxy that does not answer, or whose
// name does not resolve, is a 502 naming it (never its password); a
// destination that does not resolve locally is refused before the proxy is
// asked (goalrun decides on the addresses it sees).
func TestOutboundUnreachable(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	tests := []struct {
		name     string
		proxy    string
		target   string
		wantBody string
	}{
		{"proxy not listening", "http://alice:s3cret@" + deadAddr, "example.com:443", "via http://" + deadAddr + " (HTTPS_PROXY)"},
		{"proxy name does not resolve", "http://alice:s3cret@proxy.nowhere:3128", "example.com:443", "outbound proxy http://proxy.nowhere:3128 (HTTPS_PROXY): DNS lookup failed"},
		{"destination does not resolve here", "http://" + deadAddr, "unknown.example.com:443", "DNS lookup failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := startHarness(t, Config{Allow: []string{"example.com", "*.example.com"}, Resolver: newResolver(map[string][]netip.Addr{"example.com.": {pubA}}),
				OutboundProxy: &httpproxy.Config{HTTPSProxy: tt.proxy}})
			status, body, _ := connect(t, h.forward, tt.target)
			if status != 502 || !strings.Contains(body, tt.wantBody) || strings.Contains(body, "s3cret") {
				t.Fatalf("got %d %q, want 502 with %q and no password", status, body, tt.wantBody)
			}
			for _, d := range h.p.Stats().Denials {
				if strings.Contains(d.String(), "s3cret") {
					t.Errorf("denial %q keeps the password", d)
				}
			}
		})
	}
}

func TestOutboundConfigErrors(t *testing.T) {
	tests := []struct {
		name    string
		cfg     httpproxy.Config
		wantErr string
	}{
		{"unsupported scheme", httpproxy.Config{HTTPSProxy: "ftp://proxy:21"}, `HTTPS_PROXY: scheme "ftp" is not supported`},
		{"bad port", httpproxy.Config{HTTPProxy: "http://u:hunter2@proxy:99999"}, `HTTP_PROXY: port "99999"`},
		{"both named", httpproxy.Config{HTTPSProxy: "gopher://a", HTTPProxy: "ldap://b"}, "HTTP_PROXY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(Config{OutboundProxy: &tt.cfg})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("New: %v, want %q and no password", err, tt.wantErr)
			}
		})
	}
	for _, ok := range []string{"proxy.corp:3128", "http://proxy:8080", "https://proxy.corp", "socks5h://127.0.0.1:1080"} {
		if _, err := New(Config{OutboundProxy: &httpproxy.Config{HTTPSProxy: ok}}); err != nil {
			t.Errorf("HTTPS_PROXY=%s: %v", ok, err)
		}
	}
}

func TestOutboundFromEnv(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want *httpproxy.Config
		str  string
	}{
		{"none", map[string]string{"NO_PROXY": "x"}, nil, ""},
		{"upper case first", map[string]string{"HTTPS_PROXY": "http://A:1", "https_proxy": "http://b:2", "no_proxy": ".corp"},
			&httpproxy.Config{HTTPSProxy: "http://A:1", NoProxy: ".corp"}, "https=http://A:1 no_proxy=.corp"},
		{"lower case", map[string]string{"http_proxy": "http://u:pw@c:3", "https_proxy": " "},
			&httpproxy.Config{HTTPProxy: "http://u:pw@c:3"}, "http=http://c:3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := OutboundFromEnv(func(k string) string { return tt.env[k] })
			if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			if s := OutboundString(got); s != tt.str {
				t.Errorf("OutboundString = %q, want %q", s, tt.str)
			}
		})
	}
}

// socks5Server is a minimal SOCKS5 proxy (RFC 1928, user/password auth of
// RFC 1929) for the tests: CONNECT only, targets reached through routes.
type socks5Server struct {
	addr   string
	mu     sync.Mutex
	routes map[string]string
	seen   []string
}

func newSOCKS5(t *testing.T, user, pass string) *socks5Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	s := &socks5Server{addr: l.Addr().String(), routes: map[string]string{}}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go s.serve(c, user, pass)
		}
	}()
	return s
}

func (s *socks5Server) route(target, to string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.routes[target] = to
}

func (s *socks5Server) targets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.seen)
}

func (s *socks5Server) serve(c net.Conn, user, pass string) {
	defer c.Close()
	buf := make([]byte, 512)
	read := func(n int) []byte {
		if _, err := io.ReadFull(c, buf[:n]); err != nil {
			return nil
		}
		return buf[:n]
	}
	h := read(2)
	if h == nil || h[0] != 5 || read(int(h[1])) == nil {
		return
	}
	c.Write([]byte{5, 2}) // username/password
	v := read(2)
	if v == nil {
		return
	}
	u := string(read(int(v[1])))
	pl := read(1)
	if pl == nil {
		return
	}
	p := string(read(int(pl[0])))
	if u != user || p != pass {
		c.Write([]byte{1, 1})
		return
	}
	c.Write([]byte{1, 0})
	r := read(4)
	if r == nil || r[1] != 1 {
		return
	}
	var host string
	switch r[3] {
	case 3:
		n := read(1)
		host = string(read(int(n[0])))
	case 1:
		host = net.IP(read(4)).String()
	default:
		return
	}
	port := binary.BigEndian.Uint16(read(2))
	target := net.JoinHostPort(host, fmt.Sprint(port))
	s.mu.Lock()
	s.seen = append(s.seen, target)
	to, ok := s.routes[target]
	s.mu.Unlock()
	if !ok {
		c.Write([]byte{5, 4, 0, 1, 0, 0, 0, 0, 0, 0})
		return
	}
	up, err := net.Dial("tcp", to)
	if err != nil {
		c.Write([]byte{5, 5, 0, 1, 0, 0, 0, 0, 0, 0})
		return
	}
	defer up.Close()
	c.Write([]byte{5, 0, 0, 1, 0, 0, 0, 0, 0, 0})
	go func() {
		io.Copy(up, c)
		up.(*net.TCPConn).CloseWrite()
	}()
	io.Copy(c, up)
}
