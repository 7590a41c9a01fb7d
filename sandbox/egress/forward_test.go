package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// matrixResolver is the DNS the decision matrix sees.
func matrixResolver() *fakeResolver {
	a := func(s ...string) []netip.Addr {
		out := make([]netip.Addr, len(s))
		for i, x := range s {
			out[i] = netip.MustParseAddr(x)
		}
		return out
	}
	return newResolver(map[string][]netip.Addr{
		"example.com.":            {pubA},
		"dual.example.com.":       {pubA, pubV6},
		"a.example.org.":          {pubB},
		"a.b.example.org.":        {pubB},
		"xn--bcher-kva.example.":  {pubA},
		"evil.com.":               {pubA},
		"rebind-lo.example.com.":  a("127.0.0.1"),
		"rebind-10.example.com.":  a("10.0.0.5"),
		"metadata.example.com.":   a("169.254.169.254"),
		"gateway.example.com.":    a("172.17.0.1"),
		"v6lo.example.com.":       a("::1"),
		"mapped.example.com.":     a("::ffff:10.0.0.1"),
		"nat64.example.com.":      a("64:ff9b::a9fe:a9fe"),
		"ula.example.com.":        a("fd12:3456::1"),
		"cgnat.example.com.":      a("100.64.0.1"),
		"mixed.example.com.":      a(pubA.String(), "192.168.1.10"),
		"zero.example.com.":       a("0.0.0.0"),
		"empty.example.com.":      {},
		"linklocal6.example.com.": a("fe80::1%eth0"),
	})
}

// matrixAllow is the allowlist of the decision matrix: every name the
// resolver answers for is listed, so each denial is for the reason named.
var matrixAllow = []string{
	"example.com", "dual.example.com", "*.example.org", "xn--bcher-kva.example",
	"rebind-lo.example.com", "rebind-10.example.com", "metadata.example.com:80", "gateway.example.com",
	"v6lo.example.com", "mapped.example.com", "nat64.example.com", "ula.example.com", "cgnat.example.com",
	"mixed.example.com", "zero.example.com", "empty.example.com", "linklocal6.example.com", "nxdomain.example.com",
}

// TestConnectMatrix sends raw CONNECT requests through the relay and the
// Unix-socket forward proxy and checks, for each destination, the status,
// the reason in the 403 body, what was dialled and the counters.
func TestConnectMatrix(t *testing.T) {
	tlsSrv := newTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	target := tlsSrv.Listener.Addr().String()

	tests := []struct {
		name       string
		target     string
		wantStatus int
		wantReason string   // substring of the 403 or 502 body
		wantDial   []string // addresses the dial hook was asked for
		wantLookup bool     // whether DNS was asked at all
		host       string   // Host header; "" means the target itself
	}{
		{name: "allowed host, right port", target: "example.com:443", wantStatus: 200, wantDial: []string{"93.184.215.14:443"}, wantLookup: true},
		{name: "allowed host, upper case", target: "EXAMPLE.COM:443", wantStatus: 200, wantDial: []string{"93.184.215.14:443"}, wantLookup: true},
		{name: "allowed host, trailing dot", target: "example.com.:443", wantStatus: 200, wantDial: []string{"93.184.215.14:443"}, wantLookup: true},
		{name: "allowed host, IPv4 and IPv6", target: "dual.example.com:443", wantStatus: 200, wantDial: []string{"93.184.215.14:443"}, wantLookup: true},
		{name: "wildcard child", target: "a.example.org:443", wantStatus: 200, wantDial: []string{"151.101.1.1:443"}, wantLookup: true},
		{name: "wildcard grandchild", target: "a.b.example.org:443", wantStatus: 200, wantDial: []string{"151.101.1.1:443"}, wantLookup: true},
		{name: "punycode name", target: "xn--bcher-kva.example:443", wantStatus: 200, wantDial: []string{"93.184.215.14:443"}, wantLookup: true},

		{name: "allowed host, wrong port", target: "example.com:80", wantStatus: 403, wantReason: "port 80 not allowed for this host (allowed: 443)"},
		{name: "allowed host, ssh port", target: "example.com:22", wantStatus: 403, wantReason: "port 22 not allowed"},
		{name: "not listed", target: "evil.com:443", wantStatus: 403, wantReason: "not on the allowlist"},
		{name: "wildcard apex", target: "example.org:443", wantStatus: 403, wantReason: "not on the allowlist"},
		{name: "sub-domain of exact entry", target: "www.example.com:443", wantStatus: 403, wantReason: "not on the allowlist"},
		{name: "look-alike suffix", target: "notexample.com:443", wantStatus: 403, wantReason: "not on the allowlist"},
		{name: "localhost", target: "localhost:443", wantStatus: 403, wantReason: "loopback name"},
		{name: "below localhost", target: "x.localhost:443", wantStatus: 403, wantReason: "loopback name"},

		{name: "IPv4 literal public", target: "93.184.215.14:443", wantStatus: 403, wantReason: "93.184.215.14:443: IP literal"},
		{name: "IPv4 literal loopback", target: "127.0.0.1:443", wantStatus: 403, wantReason: "IP literal, loopback"},
		{name: "cloud metadata literal", target: "169.254.169.254:80", wantStatus: 403, wantReason: "169.254.169.254:80: IP literal, link-local"},
		{name: "docker bridge gateway literal", target: "172.17.0.1:443", wantStatus: 403, wantReason: "IP literal, private"},
		{name: "unspecified literal", target: "0.0.0.0:443", wantStatus: 403, wantReason: "IP literal, unspecified"},
		{name: "IPv6 literal", target: "[::1]:443", wantStatus: 403, wantReason: "IP literal, loopback"},
		{name: "IPv6 public literal", target: "[2606:2800:21f:cb07:6820:80da:af6b:8b2c]:443", wantStatus: 403, wantReason: "IP literal"},
		{name: "IPv4-mapped IPv6 literal", target: "[::ffff:127.0.0.1]:443", wantStatus: 403, wantReason: "IP literal, loopback"},
		{name: "IPv6 zone id", target: "[fe80::1%25eth0]:443", wantStatus: 403, wantReason: "invalid character '%'"},
		{name: "decimal integer", target: "2130706433:443", wantStatus: 403, wantReason: "127.0.0.1:443: IP literal, loopback"},
		{name: "hex integer", target: "0x7f000001:443", wantStatus: 403, wantReason: "127.0.0.1:443: IP literal, loopback"},
		{name: "hex short form", target: "0x7f.1:443", wantStatus: 403, wantReason: "127.0.0.1:443: IP literal, loopback"},
		{name: "octal dotted", target: "0177.0.0.1:443", wantStatus: 403, wantReason: "127.0.0.1:443: IP literal, loopback"},
		{name: "short form", target: "127.1:443", wantStatus: 403, wantReason: "IP literal, loopback"},
		{name: "metadata three-part form", target: "169.254.43518:80", wantStatus: 403, wantReason: "169.254.169.254:80: IP literal, link-local"},
		{name: "numeric host not inet_aton", target: "1.2.3.4.5:443", wantStatus: 403, wantReason: "IP literal (numeric form)"},

		{name: "resolves to 127.0.0.1", target: "rebind-lo.example.com:443", wantStatus: 403, wantReason: "resolves to 127.0.0.1 (loopback)", wantLookup: true},
		{name: "resolves to 10.x", target: "rebind-10.example.com:443", wantStatus: 403, wantReason: "resolves to 10.0.0.5 (private)", wantLookup: true},
		{name: "resolves to cloud metadata", target: "metadata.example.com:80", wantStatus: 403, wantReason: "resolves to 169.254.169.254 (link-local)", wantLookup: true},
		{name: "resolves to docker gateway", target: "gateway.example.com:443", wantStatus: 403, wantReason: "resolves to 172.17.0.1 (private)", wantLookup: true},
		{name: "resolves to ::1", target: "v6lo.example.com:443", wantStatus: 403, wantReason: "resolves to ::1 (loopback)", wantLookup: true},
		{name: "resolves to IPv4-mapped private", target: "mapped.example.com:443", wantStatus: 403, wantReason: "resolves to 10.0.0.1 (private)", wantLookup: true},
		{name: "resolves to NAT64 of metadata", target: "nat64.example.com:443", wantStatus: 403, wantReason: "(link-local)", wantLookup: true},
		{name: "resolves to ULA", target: "ula.example.com:443", wantStatus: 403, wantReason: "resolves to fd12:3456::1 (private)", wantLookup: true},
		{name: "resolves to CGNAT", target: "cgnat.example.com:443", wantStatus: 403, wantReason: "(CGNAT)", wantLookup: true},
		{name: "resolves to public and private", target: "mixed.example.com:443", wantStatus: 403, wantReason: "resolves to 192.168.1.10 (private)", wantLookup: true},
		{name: "resolves to 0.0.0.0", target: "zero.example.com:443", wantStatus: 403, wantReason: "(unspecified)", wantLookup: true},
		{name: "resolves to zoned link-local", target: "linklocal6.example.com:443", wantStatus: 403, wantReason: "resolves to fe80::1 (link-local)", wantLookup: true},
		{name: "DNS failure", target: "nxdomain.example.com:443", wantStatus: 502, wantReason: "DNS lookup failed: no such host", wantLookup: true},
		{name: "DNS empty answer", target: "empty.example.com:443", wantStatus: 502, wantReason: "no addresses", wantLookup: true},

		{name: "userinfo smuggles a host", target: "example.com:443@evil.com:443", wantStatus: 403, wantReason: "invalid character '@'", host: "example.com:443"},
		{name: "userinfo without port", target: "example.com@evil.com:443", wantStatus: 403, wantReason: "invalid character '@'", host: "example.com:443"},
		{name: "missing port", target: "example.com", wantStatus: 403, wantReason: "missing port"},
		{name: "port with leading zero", target: "example.com:0443", wantStatus: 403, wantReason: "invalid port"},
		{name: "non-ASCII host", target: "bücher.example:443", wantStatus: 403, wantReason: "punycode", host: "example.com:443"},
		{name: "path form", target: "/example.com:443", wantStatus: 403, wantReason: "invalid character '/'", host: "example.com:443"},
		{name: "absolute URI as CONNECT target", target: "http://example.com:443", wantStatus: 403, wantReason: "invalid character '/'", host: "example.com:443"},
		{name: "overlong name", target: strings.Repeat("a", 250) + ".example.com:443", wantStatus: 403, wantReason: "longer than", host: "example.com:443"},
	}
	res := matrixResolver()
	h := startHarness(t, Config{Allow: matrixAllow, Resolver: res})
	for _, name := range []string{"93.184.215.14:443", "151.101.1.1:443"} {
		h.dial.Route(name, target)
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := h.p.Stats()
			dialsBefore, asksBefore := len(h.dial.Dialed()), len(res.Asked())

			host := tt.host
			if host == "" {
				host = tt.target
			}
			status, body, _ := connectHost(t, h.forward, tt.target, host)

			if status != tt.wantStatus {
				t.Fatalf("CONNECT %s: status %d (%q), want %d", tt.target, status, body, tt.wantStatus)
			}
			after := h.p.Stats()
			dials := h.dial.Dialed()[dialsBefore:]
			asks := res.Asked()[asksBefore:]
			if !slices.Equal(dials, tt.wantDial) {
				t.Errorf("dialled %q, want %q", dials, tt.wantDial)
			}
			if (len(asks) > 0) != tt.wantLookup {
				t.Errorf("DNS questions %q, want lookup=%v", asks, tt.wantLookup)
			}
			for _, q := range asks {
				if !strings.HasSuffix(q, ".") {
					t.Errorf("resolver asked %q, want a fully qualified name", q)
				}
			}
			if tt.wantStatus == 200 {
				if after.Allowed != before.Allowed+1 || after.Denied != before.Denied {
					t.Errorf("counts %d/%d -> %d/%d, want one more allowed", before.Allowed, before.Denied, after.Allowed, after.Denied)
				}
				return
			}
			if !strings.Contains(body, tt.wantReason) {
				t.Errorf("403 body %q, want it to contain %q", body, tt.wantReason)
			}
			// 403: a policy denial; 502: allowed but unreachable (an
			// upstream failure). Both are counted as denials and say who
			// answered.
			prefix := map[int]string{403: "goalrun egress: refused ", 502: "goalrun egress: cannot reach "}[tt.wantStatus]
			if prefix == "" || !strings.HasPrefix(body, prefix) {
				t.Errorf("%d body %q does not start with %q", tt.wantStatus, body, prefix)
			}
			if after.Denied != before.Denied+1 || after.Allowed != before.Allowed {
				t.Errorf("counts %d/%d -> %d/%d, want one more denied", before.Allowed, before.Denied, after.Allowed, after.Denied)
			}
		})
	}
}

// TestConnectRejectedByNetHTTP covers CONNECT requests so malformed that
// net/http answers 400 before the proxy sees them: no destination can be
// named, so nothing is resolved, dialled or counted. (With a well-formed Host
// header the same targets reach the proxy and are counted; see
// TestConnectMatrix.)
func TestConnectRejectedByNetHTTP(t *testing.T) {
	res := matrixResolver()
	h := startHarness(t, Config{Allow: matrixAllow, Resolver: res})
	tests := []struct{ name, target string }{
		{"userinfo with matching Host", "example.com:443@evil.com:443"},
		{"non-ASCII with matching Host", "bücher.example:443"},
		{"percent-encoded host", "%65xample.com:443"},
		{"bare IPv6", "::1:443"},
		{"bare IPv6 with port", "fe80::1:443"},
		{"percent-encoded port", "example.com:%34%34%33"},
		{"zone id unescaped", "[fe80::1%eth0]:443"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body, _ := connect(t, h.forward, tt.target)
			if status != http.StatusBadRequest {
				t.Fatalf("CONNECT %s: %d %q, want 400 from net/http", tt.target, status, body)
			}
		})
	}
	if d := h.dial.Dialed(); len(d) != 0 {
		t.Errorf("dialled %q", d)
	}
	if q := res.Asked(); len(q) != 0 {
		t.Errorf("resolved %q", q)
	}
	if s := h.p.Stats(); s.Allowed != 0 {
		t.Errorf("stats %+v", s)
	}
}

// TestConnectTunnel carries bytes both ways through an allowed CONNECT and
// checks that the client's half-close reaches the destination.
func TestConnectTunnel(t *testing.T) {
	echo := echoServer(t, "tcp", "127.0.0.1:0")
	h := startHarness(t, Config{Allow: []string{"echo.example.com:7"}, Resolver: newResolver(map[string][]netip.Addr{"echo.example.com.": {pubA}})})
	h.dial.Route("93.184.215.14:7", echo.Addr().String())

	status, body, c := connect(t, h.forward, "echo.example.com:7")
	if status != 200 {
		t.Fatalf("CONNECT: %d %q", status, body)
	}
	if _, err := io.WriteString(c, "hello through the tunnel"); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("reading the echo: %v", err)
	}
	if string(got) != "hello through the tunnel" {
		t.Errorf("echo = %q", got)
	}
}

// TestForwardHTTPS uses a real HTTP client configured with the proxy (as an
// agent would with HTTPS_PROXY) against a TLS server reached through the
// allowed name, and checks that TLS verification of that name still works.
func TestForwardHTTPS(t *testing.T) {
	var seen sync.Map
	srv := newTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.URL.Path, r.Host)
		fmt.Fprint(w, "hello over TLS")
	}))
	h := startHarness(t, Config{Allow: []string{"example.com"}, Resolver: newResolver(map[string][]netip.Addr{"example.com.": {pubA}, "www.example.com.": {pubA}})})
	h.dial.Route("93.184.215.14:443", srv.Listener.Addr().String())
	client := h.client(&http.Transport{TLSClientConfig: &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}})

	tests := []struct {
		name     string
		url      string
		wantBody string
		wantErr  string
	}{
		{name: "allowed", url: "https://example.com/hello", wantBody: "hello over TLS"},
		{name: "allowed host, other port", url: "https://example.com:8443/", wantErr: "Forbidden"},
		{name: "not listed (valid certificate name)", url: "https://www.example.com/", wantErr: "Forbidden"},
		{name: "IP literal", url: "https://127.0.0.1/", wantErr: "Forbidden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := client.Get(tt.url)
			if tt.wantErr != "" {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("GET %s: status %d, want error %q", tt.url, resp.StatusCode, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("GET %s: %v, want %q", tt.url, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("GET %s: %v", tt.url, err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if string(b) != tt.wantBody {
				t.Errorf("body %q, want %q", b, tt.wantBody)
			}
		})
	}
	if host, _ := seen.Load("/hello"); host != "example.com" {
		t.Errorf("server saw Host %v, want example.com", host)
	}
	s := h.p.Stats()
	if s.Allowed != 1 || s.Denied != 3 {
		t.Errorf("stats %+v, want 1 allowed, 3 denied", s)
	}
}

// recordingServer is a plain-HTTP destination that records each request.
type recordingServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []recorded
}

type recorded struct {
	method, host, uri, body string
	header                  http.Header
}

func newRecordingServer(t testing.TB) *recordingServer {
	rs := &recordingServer{}
	rs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rs.mu.Lock()
		rs.reqs = append(rs.reqs, recorded{r.Method, r.Host, r.RequestURI, string(b), r.Header.Clone()})
		rs.mu.Unlock()
		fmt.Fprintf(w, "served %s %s", r.Host, r.RequestURI)
	}))
	t.Cleanup(rs.Close)
	return rs
}

func (rs *recordingServer) requests() []recorded {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return slices.Clone(rs.reqs)
}

// smuggled is a request hidden in another request's body.
const smuggled = "GET http://evil.com/ HTTP/1.1\r\nHost: evil.com\r\nX-Smuggled: 1\r\n\r\n"

// TestForwardPlainHTTP covers absolute-form requests: a real client with the
// proxy configured, then hand-written requests an attacker would send.
func TestForwardPlainHTTP(t *testing.T) {
	srv := newRecordingServer(t)
	res := newResolver(map[string][]netip.Addr{"example.com.": {pubA}, "evil.com.": {pubB}, "alt.example.com.": {pubA}})
	h := startHarness(t, Config{Allow: []string{"example.com:80", "alt.example.com:8080"}, Resolver: res})
	h.dial.Route("93.184.215.14:80", srv.Listener.Addr().String())
	h.dial.Route("93.184.215.14:8080", srv.Listener.Addr().String())

	t.Run("real client, allowed", func(t *testing.T) {
		resp, err := h.client(nil).Get("http://example.com/path?q=1")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "served example.com /path?q=1" {
			t.Errorf("got %d %q", resp.StatusCode, b)
		}
	})
	t.Run("real client, not listed", func(t *testing.T) {
		resp, err := h.client(nil).Get("http://evil.com/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 403 || resp.Header.Get("X-Goalrun-Egress") != "denied" || !strings.Contains(string(b), "evil.com:80: not on the allowlist") {
			t.Errorf("got %d %q %q", resp.StatusCode, resp.Header, b)
		}
	})

	tests := []struct {
		name         string
		raw          string
		nresp        int
		wantStatus   []int
		wantBody     string   // substring of the last response body
		wantHosts    []string // Host headers the destination saw, in order
		wantDestBody string   // the body the destination saw, when it saw one request
	}{
		{
			name:       "absolute URI wins over a disagreeing Host header",
			raw:        "GET http://example.com/a HTTP/1.1\r\nHost: evil.com\r\nConnection: close\r\n\r\n",
			nresp:      1,
			wantStatus: []int{200},
			wantHosts:  []string{"example.com"},
		},
		{
			name:       "Host header naming an allowed host does not unlock the URI's host",
			raw:        "GET http://evil.com/a HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n",
			nresp:      1,
			wantStatus: []int{403},
			wantBody:   "evil.com:80: not on the allowlist",
		},
		{
			name:       "userinfo in absolute URI",
			raw:        "GET http://example.com:80@evil.com/ HTTP/1.1\r\nHost: evil.com\r\nConnection: close\r\n\r\n",
			nresp:      1,
			wantStatus: []int{403},
			wantBody:   "invalid character '@'",
		},
		{
			name:       "https absolute URI is not forwarded",
			raw:        "GET https://example.com/ HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n",
			nresp:      1,
			wantStatus: []int{403},
			wantBody:   "HTTPS goes through CONNECT",
		},
		{
			name:       "origin-form request to the proxy",
			raw:        "GET / HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n",
			nresp:      1,
			wantStatus: []int{403},
			wantBody:   "not a proxy request",
		},
		{
			name:       "explicit non-default port keeps it in Host",
			raw:        "GET http://ALT.example.com.:8080/x HTTP/1.1\r\nHost: whatever\r\nConnection: close\r\n\r\n",
			nresp:      1,
			wantStatus: []int{200},
			wantHosts:  []string{"alt.example.com:8080"},
		},
		{
			name: "pipelined second request to another host is judged on its own",
			raw: "GET http://example.com/1 HTTP/1.1\r\nHost: example.com\r\n\r\n" +
				"GET http://evil.com/2 HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n",
			nresp:      2,
			wantStatus: []int{200, 403},
			wantBody:   "evil.com:80: not on the allowlist",
			wantHosts:  []string{"example.com"},
		},
		{
			// Both Content-Length and Transfer-Encoding: net/http frames by
			// the chunked encoding (RFC 9112 6.3) and the proxy re-frames
			// the message it sends, so the embedded request stays body.
			name: "smuggling: CL.TE request embedded in a chunked body",
			raw: "POST http://example.com/upload HTTP/1.1\r\nHost: example.com\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
				fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(smuggled), smuggled),
			nresp:        2,
			wantStatus:   []int{200},
			wantHosts:    []string{"example.com"},
			wantDestBody: smuggled,
		},
		{
			name: "smuggling: two different Content-Lengths",
			raw: "POST http://example.com/upload HTTP/1.1\r\nHost: example.com\r\nContent-Length: 0\r\nContent-Length: 44\r\n\r\n" +
				"GET http://evil.com/ HTTP/1.1\r\nHost: evil.com\r\n\r\n",
			nresp:      2,
			wantStatus: []int{400},
		},
		{
			// A folded line stays part of X-A's value: it never becomes a
			// Transfer-Encoding header, so the next request is a request,
			// judged (and refused) on its own.
			name: "smuggling: obsolete line folding",
			raw: "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nX-A: 1\r\n Transfer-Encoding: chunked\r\n\r\n" +
				"GET http://evil.com/ HTTP/1.1\r\nHost: evil.com\r\nConnection: close\r\n\r\n",
			nresp:      2,
			wantStatus: []int{200, 403},
			wantBody:   "evil.com:80: not on the allowlist",
			wantHosts:  []string{"example.com"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(srv.requests())
			resps := rawExchange(t, h.forward, tt.raw, tt.nresp)
			var statuses []int
			for _, r := range resps {
				statuses = append(statuses, r.status)
			}
			if !slices.Equal(statuses, tt.wantStatus) {
				t.Fatalf("statuses %v, want %v (%+v)", statuses, tt.wantStatus, resps)
			}
			if tt.wantBody != "" && !strings.Contains(resps[len(resps)-1].body, tt.wantBody) {
				t.Errorf("body %q, want it to contain %q", resps[len(resps)-1].body, tt.wantBody)
			}
			var hosts []string
			for _, r := range srv.requests()[before:] {
				hosts = append(hosts, r.host)
				if r.header.Get("X-Smuggled") != "" || strings.Contains(r.uri, "evil") {
					t.Errorf("a smuggled request reached the destination: %+v", r)
				}
			}
			if !slices.Equal(hosts, tt.wantHosts) {
				t.Errorf("destination saw hosts %q, want %q", hosts, tt.wantHosts)
			}
			if reqs := srv.requests()[before:]; tt.wantDestBody != "" && (len(reqs) != 1 || reqs[0].body != tt.wantDestBody) {
				t.Errorf("destination saw %+v, want one request with body %q", reqs, tt.wantDestBody)
			}
			if reqs := srv.requests()[before:]; len(reqs) > 0 && reqs[0].header.Get("Transfer-Encoding") != "" {
				t.Errorf("a Transfer-Encoding header reached the destination: %q", reqs[0].header)
			}
		})
	}
	for _, a := range h.dial.Dialed() {
		if a != "93.184.215.14:80" && a != "93.184.215.14:8080" {
			t.Errorf("dialled %s", a)
		}
	}
	for _, q := range res.Asked() {
		if q == "evil.com." {
			t.Errorf("a refused destination was resolved: %q", res.Asked())
		}
	}
}

// TestForwardDialFailure checks that an allowed destination that does not
// answer gets a 502 and is still counted as allowed (the decision was
// "allow"; the network failed).
func TestForwardDialFailure(t *testing.T) {
	h := startHarness(t, Config{Allow: []string{"down.example.com"}, Resolver: newResolver(map[string][]netip.Addr{"down.example.com.": {pubA, pubB}})})
	status, body, _ := connect(t, h.forward, "down.example.com:443")
	if status != http.StatusBadGateway || !strings.Contains(body, "no route to 151.101.1.1:443") {
		t.Errorf("status %d body %q, want 502 naming both addresses tried", status, body)
	}
	if got := h.dial.Dialed(); !slices.Equal(got, []string{"93.184.215.14:443", "151.101.1.1:443"}) {
		t.Errorf("dialled %q", got)
	}
	if s := h.p.Stats(); s.Allowed != 1 || s.Denied != 0 {
		t.Errorf("stats %+v", s)
	}
}

// TestStats checks the counters and the bounded, de-duplicated denial list,
// and that Stats is safe while decisions are made concurrently (run with
// -race).
func TestStats(t *testing.T) {
	h := startHarness(t, Config{Allow: []string{"example.com"}, Resolver: matrixResolver(), DenialsKept: 3})
	ctx := context.Background()
	decide := func(target string) {
		a, err := parseAuthority(target, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, deny := h.p.check(ctx, a, forwardPolicy); deny != nil {
			h.p.recordDeny(*deny)
		} else {
			h.p.recordAllow()
		}
	}
	for range 5 {
		decide("evil.com:443") // the same denial five times: kept once
	}
	decide("example.com:443")
	decide("example.com:80")
	decide("127.0.0.1:22")
	decide("169.254.169.254:80") // past DenialsKept: counted, not kept

	s := h.p.Stats()
	if s.Allowed != 1 || s.Denied != 8 {
		t.Errorf("Allowed %d Denied %d, want 1 and 8", s.Allowed, s.Denied)
	}
	want := []string{
		"evil.com:443 (not on the allowlist)",
		"example.com:80 (port 80 not allowed for this host (allowed: 443))",
		"127.0.0.1:22 (IP literal, loopback)",
	}
	if got := s.DenialStrings(); !slices.Equal(got, want) {
		t.Errorf("DenialStrings() = %q, want %q", got, want)
	}
	s.Denials[0].Dest = "mutated"
	if h.p.Stats().Denials[0].Dest != "evil.com:443" {
		t.Error("Stats returned the proxy's own slice")
	}

	t.Run("default bound is 8", func(t *testing.T) {
		p, err := New(Config{Resolver: newResolver(nil)})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			p.recordDeny(Denial{Dest: fmt.Sprintf("h%d.example:443", i), Reason: "not on the allowlist"})
		}
		if s := p.Stats(); s.Denied != 20 || len(s.Denials) != DefaultDenialsKept || DefaultDenialsKept != 8 {
			t.Errorf("Denied %d, kept %d", s.Denied, len(s.Denials))
		}
	})

	t.Run("concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		base := h.p.Stats()
		for i := range 8 {
			wg.Add(2)
			go func() {
				defer wg.Done()
				for range 25 {
					status, _, _ := connect(t, h.forward, fmt.Sprintf("c%d.example.net:443", i))
					if status != 403 {
						t.Errorf("status %d", status)
					}
				}
			}()
			go func() {
				defer wg.Done()
				for range 50 {
					_ = h.p.Stats()
				}
			}()
		}
		wg.Wait()
		if got := h.p.Stats().Denied - base.Denied; got != 200 {
			t.Errorf("concurrent denials counted %d, want 200", got)
		}
	})
}

// TestCloseEndsTunnels checks that Close reaches connections the HTTP server
// no longer tracks (hijacked CONNECT tunnels) and that serving after Close
// is refused.
func TestCloseEndsTunnels(t *testing.T) {
	echo := echoServer(t, "tcp", "127.0.0.1:0")
	h := startHarness(t, Config{Allow: []string{"echo.example.com:7"}, Resolver: newResolver(map[string][]netip.Addr{"echo.example.com.": {pubA}})})
	h.dial.Route("93.184.215.14:7", echo.Addr().String())
	status, _, c := connect(t, h.forward, "echo.example.com:7")
	if status != 200 {
		t.Fatalf("CONNECT: %d", status)
	}
	io.WriteString(c, "x")
	buf := make([]byte, 1)
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatal(err)
	}
	h.p.Close()
	if _, err := c.Read(buf); err == nil {
		t.Error("tunnel still open after Close")
	}
	l, _ := listenUnix(t, "late.sock")
	if err := h.p.ServeForward(l); err != ErrClosed {
		t.Errorf("ServeForward after Close = %v, want ErrClosed", err)
	}
	if err := h.p.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

// rebindingResolver answers with a public address the first time it is
// asked about a name and with loopback every time after, as an attacker's
// DNS server with a zero TTL would.
type rebindingResolver struct {
	mu    sync.Mutex
	calls int
}

func (r *rebindingResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.calls == 1 {
		return []netip.Addr{pubA}, nil
	}
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

// TestDNSRebinding: the address checked is the address dialled (one lookup
// per decision), and a later rebinding is caught by the next decision even
// when a kept-alive upstream connection exists.
func TestDNSRebinding(t *testing.T) {
	t.Run("CONNECT dials the checked address", func(t *testing.T) {
		echo := echoServer(t, "tcp", "127.0.0.1:0")
		res := &rebindingResolver{}
		h := startHarness(t, Config{Allow: []string{"rebind.example.com"}, Resolver: res})
		h.dial.Route("93.184.215.14:443", echo.Addr().String())
		if status, body, _ := connect(t, h.forward, "rebind.example.com:443"); status != 200 {
			t.Fatalf("first CONNECT: %d %q", status, body)
		}
		if status, body, _ := connect(t, h.forward, "rebind.example.com:443"); status != 403 || !strings.Contains(body, "resolves to 127.0.0.1 (loopback)") {
			t.Fatalf("second CONNECT: %d %q, want 403 loopback", status, body)
		}
		if got := h.dial.Dialed(); !slices.Equal(got, []string{"93.184.215.14:443"}) {
			t.Errorf("dialled %q, want only the checked public address", got)
		}
		res.mu.Lock()
		calls := res.calls
		res.mu.Unlock()
		if calls != 2 {
			t.Errorf("%d lookups for two decisions, want 2", calls)
		}
	})
	t.Run("plain HTTP on a kept-alive connection is decided again", func(t *testing.T) {
		srv := newRecordingServer(t)
		res := &rebindingResolver{}
		h := startHarness(t, Config{Allow: []string{"rebind.example.com:80"}, Resolver: res})
		h.dial.Route("93.184.215.14:80", srv.Listener.Addr().String())
		resps := rawExchange(t, h.forward,
			"GET http://rebind.example.com/1 HTTP/1.1\r\nHost: rebind.example.com\r\n\r\n"+
				"GET http://rebind.example.com/2 HTTP/1.1\r\nHost: rebind.example.com\r\nConnection: close\r\n\r\n", 2)
		if len(resps) != 2 || resps[0].status != 200 || resps[1].status != 403 {
			t.Fatalf("responses %+v, want 200 then 403", resps)
		}
		if n := len(srv.requests()); n != 1 {
			t.Errorf("destination saw %d requests, want 1", n)
		}
	})
}

// TestForwardPlainHTTPLiterals: IP literals in an absolute URI are refused
// like CONNECT's.
func TestForwardPlainHTTPLiterals(t *testing.T) {
	h := startHarness(t, Config{Allow: []string{"example.com:80"}})
	tests := []struct{ name, uri, want string }{
		{"IPv4", "http://169.254.169.254/latest/meta-data/", "169.254.169.254:80: IP literal, link-local"},
		{"IPv6", "http://[::1]:8080/", "[::1]:8080: IP literal, loopback"},
		{"decimal", "http://2130706433/", "127.0.0.1:80: IP literal, loopback"},
		{"octal", "http://0177.0.0.1/", "127.0.0.1:80: IP literal, loopback"},
		{"bridge gateway", "http://172.17.0.1:2375/containers/json", "172.17.0.1:2375: IP literal, private"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resps := rawExchange(t, h.forward, "GET "+tt.uri+" HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n", 1)
			if len(resps) != 1 || resps[0].status != 403 || !strings.Contains(resps[0].body, tt.want) {
				t.Fatalf("responses %+v, want 403 %q", resps, tt.want)
			}
		})
	}
	if d := h.dial.Dialed(); len(d) != 0 {
		t.Errorf("dialled %q", d)
	}
}

// TestMaxConns: at the connection bound the proxy stops answering new
// clients until one closes, so a sandbox cannot exhaust goalrun's file
// descriptors; closed connections give their slot back.
func TestMaxConns(t *testing.T) {
	echo := echoServer(t, "tcp", "127.0.0.1:0")
	h := startHarness(t, Config{Allow: []string{"echo.example.com:7"}, Resolver: newResolver(map[string][]netip.Addr{"echo.example.com.": {pubA}}), MaxConns: 2})
	h.dial.Route("93.184.215.14:7", echo.Addr().String())

	var open []net.Conn
	for range 2 {
		status, _, c := connect(t, h.forward, "echo.example.com:7")
		if status != 200 {
			t.Fatalf("CONNECT: %d", status)
		}
		open = append(open, c)
	}
	// The third client reaches the relay, but the proxy does not accept it
	// while two tunnels are open.
	third, err := net.Dial("tcp", h.forward)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	io.WriteString(third, "CONNECT echo.example.com:7 HTTP/1.1\r\nHost: echo.example.com:7\r\n\r\n")
	third.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := third.Read(make([]byte, 64)); err == nil {
		t.Fatalf("third connection answered (%d bytes) past MaxConns", n)
	}
	open[0].Close()
	third.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(third), &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("third CONNECT after a slot freed: %v %v", resp, err)
	}
}

// TestUnreachableIsBadGateway: a destination the policy allows but that
// cannot be resolved or reached is an upstream failure, answered 502 with
// goalrun's prefix and the "unreachable" header; only policy denials are 403.
func TestUnreachableIsBadGateway(t *testing.T) {
	res := newResolver(map[string][]netip.Addr{"down.example.com.": {pubA}})
	tests := []struct {
		name       string
		target     string
		wantStatus int
		wantKind   string
		wantBody   string
		wantDenied int
	}{
		{"not on the allowlist", "evil.example.net:443", 403, EgressDenied, "goalrun egress: refused evil.example.net:443: not on the allowlist", 1},
		{"IP literal", "93.184.215.14:443", 403, EgressDenied, "goalrun egress: refused 93.184.215.14:443: IP literal", 1},
		{"name does not resolve", "gone.example.com:443", 502, EgressUnreachable, "goalrun egress: cannot reach gone.example.com:443: DNS lookup failed", 1},
		{"resolved but nothing answers", "down.example.com:443", 502, EgressUnreachable, "goalrun egress: cannot reach down.example.com:443: connect to down.example.com:443", 0},
	}
	h := startHarness(t, Config{Allow: []string{"down.example.com:443", "gone.example.com:443"}, Resolver: res})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := h.p.Stats()
			c, err := net.DialTimeout("tcp", h.forward, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(30 * time.Second))
			fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", tt.target, tt.target)
			resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.wantStatus || resp.Header.Get(EgressHeader) != tt.wantKind || !strings.HasPrefix(string(b), tt.wantBody) {
				t.Errorf("got %d %s=%q %q, want %d %q %q", resp.StatusCode, EgressHeader, resp.Header.Get(EgressHeader), b, tt.wantStatus, tt.wantKind, tt.wantBody)
			}
			if d := h.p.Stats().Denied - before.Denied; d != tt.wantDenied {
				t.Errorf("denied +%d, want +%d", d, tt.wantDenied)
			}
		})
	}
}
