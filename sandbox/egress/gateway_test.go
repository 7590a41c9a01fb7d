package egress

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

// TestGatewayOnLoopback: a model gateway the user named on loopback is
// reached, with the real key, through its upstream listener.
func TestGatewayOnLoopback(t *testing.T) {
	gw := newRecordingServer(t)
	for _, url := range []string{gw.URL, strings.Replace(gw.URL, "127.0.0.1", "localhost", 1)} {
		t.Run(url, func(t *testing.T) {
			d := newDialer()
			_, port, _ := strings.Cut(gw.Listener.Addr().String(), ":")
			d.Route("127.0.0.1:"+port, gw.Listener.Addr().String())
			h := startHarness(t, Config{
				Upstreams:   []Upstream{{URL: url, Header: "x-api-key", Key: realKey, Gateway: true}},
				Resolver:    newResolver(map[string][]netip.Addr{"localhost.": {netip.MustParseAddr("127.0.0.1")}}),
				DialContext: d.DialContext,
			})
			resps := rawExchange(t, h.upstream[0], "POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: dummy\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", 1)
			if len(resps) != 1 || resps[0].status != 200 {
				t.Fatalf("responses %+v", resps)
			}
			reqs := gw.requests()
			if last := reqs[len(reqs)-1]; last.header.Get("x-api-key") != realKey || last.uri != "/v1/messages" {
				t.Errorf("the gateway got %+v", last)
			}
		})
	}
}

// TestAttackGatewayAllowanceOpensNothingElse: naming a loopback or private
// model gateway must not let the agent reach anything else on loopback or
// private ranges: not the gateway itself through the forward proxy (also
// when --allow-host names it), not another port or address, not through a
// request line or Host header aimed elsewhere, not through a redirect the
// gateway sends, not through a second upstream that is no gateway; and
// link-local (cloud metadata) stays refused even when named.
func TestAttackGatewayAllowanceOpensNothingElse(t *testing.T) {
	gw := newRecordingServer(t)
	other := newRecordingServer(t) // another service on this machine's loopback
	_, gwPort, _ := strings.Cut(gw.Listener.Addr().String(), ":")
	_, otherPort, _ := strings.Cut(other.Listener.Addr().String(), ":")
	res := newResolver(map[string][]netip.Addr{
		"gateway.corp.":  {netip.MustParseAddr("10.1.2.3")},
		"evil.example.":  {netip.MustParseAddr("10.1.2.3")}, // same private address, another name
		"other.example.": {netip.MustParseAddr("127.0.0.1")},
	})
	d := newDialer()
	d.Route("10.1.2.3:"+gwPort, gw.Listener.Addr().String())
	d.Route("127.0.0.1:"+otherPort, other.Listener.Addr().String())
	h := startHarness(t, Config{
		Allow: []string{"gateway.corp:" + gwPort, "evil.example:" + gwPort, "other.example:" + otherPort},
		Upstreams: []Upstream{
			{URL: "http://gateway.corp:" + gwPort, Header: "x-api-key", Key: realKey, Gateway: true},
			{URL: "http://other.example:" + otherPort, Header: "x-api-key", Key: realKey}, // not a gateway
		},
		Resolver:    res,
		DialContext: d.DialContext,
	})
	// Forward proxy: the gateway and everything private stay refused,
	// allowlisted or not.
	for _, target := range []string{"gateway.corp:" + gwPort, "evil.example:" + gwPort, "10.1.2.3:" + gwPort, "127.0.0.1:" + gwPort, "127.0.0.1:" + otherPort, "other.example:" + otherPort, "localhost:" + otherPort} {
		if status, body, _ := connect(t, h.forward, target); status != 403 {
			t.Errorf("CONNECT %s: %d %q, want 403", target, status, body)
		}
	}
	resp, err := h.client(nil).Get("http://gateway.corp:" + gwPort + "/v1/messages")
	if err == nil {
		if resp.StatusCode != 403 {
			t.Errorf("plain HTTP to the gateway through the forward proxy: %d", resp.StatusCode)
		}
		resp.Body.Close()
	}
	// The gateway's listener only ever reaches the gateway, whatever the
	// request line or Host header say.
	for _, req := range []string{
		"GET http://127.0.0.1:" + otherPort + "/secret HTTP/1.1\r\nHost: 127.0.0.1:" + otherPort + "\r\nConnection: close\r\n\r\n",
		"GET /secret HTTP/1.1\r\nHost: other.example:" + otherPort + "\r\nConnection: close\r\n\r\n",
		"GET //127.0.0.1:" + otherPort + "/secret HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
	} {
		rawExchange(t, h.upstream[0], req, 1)
	}
	if n := len(other.requests()); n != 0 {
		t.Errorf("the other loopback service got %d requests through the gateway's listener", n)
	}
	// The second upstream is no gateway: its loopback address is refused.
	if resps := rawExchange(t, h.upstream[1], "GET /secret HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 1); len(resps) != 1 || resps[0].status != 403 {
		t.Errorf("a non-gateway loopback upstream: %+v, want 403", resps)
	}
	if n := len(other.requests()); n != 0 {
		t.Errorf("the other loopback service was reached: %d requests", n)
	}
	if got := len(gw.requests()); got != 3 {
		t.Errorf("the gateway got %d requests, want the 3 sent to its listener", got)
	}

	// A redirect from the gateway is handed to the agent, never followed.
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.1:"+otherPort+"/secret", http.StatusFound)
	}))
	defer redirecting.Close()
	rh := startHarness(t, Config{Upstreams: []Upstream{{URL: redirecting.URL, Header: "x-api-key", Key: realKey, Gateway: true}}})
	_, rport, _ := strings.Cut(redirecting.Listener.Addr().String(), ":")
	rh.dial.Route("127.0.0.1:"+rport, redirecting.Listener.Addr().String())
	if resps := rawExchange(t, rh.upstream[0], "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 1); len(resps) != 1 || resps[0].status != http.StatusFound {
		t.Errorf("redirect: %+v", resps)
	}
	if n := len(other.requests()); n != 0 {
		t.Errorf("the redirect was followed: %d requests", n)
	}

	// Refused even for a gateway: link-local (cloud metadata), multicast,
	// unspecified, by literal or by name.
	for _, url := range []string{"http://169.254.169.254", "http://[fe80::1]:80", "http://224.0.0.1", "http://0.0.0.0:8080"} {
		if _, err := New(Config{Upstreams: []Upstream{{URL: url, Header: "x-api-key", Key: realKey, Gateway: true}}}); err == nil {
			t.Errorf("a gateway at %s was accepted", url)
		}
	}
	meta := startHarness(t, Config{
		Upstreams: []Upstream{{URL: "http://metadata.example", Header: "x-api-key", Key: realKey, Gateway: true}},
		Resolver:  newResolver(map[string][]netip.Addr{"metadata.example.": {netip.MustParseAddr("169.254.169.254")}}),
	})
	if resps := rawExchange(t, meta.upstream[0], "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 1); len(resps) != 1 || resps[0].status != 403 || !strings.Contains(resps[0].body, "link-local") {
		t.Errorf("a gateway name resolving to link-local: %+v", resps)
	}
}
