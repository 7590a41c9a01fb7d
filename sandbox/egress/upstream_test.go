package egress

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

const (
	realKey  = "sk-real-key-only-goalrun-holds"
	dummyKey = "goalrun-dummy-key-the-proxy-adds-the-real-one"
)

// TestUpstreamKeyInjection sends requests carrying dummy credentials to the
// upstream listeners (through the relay) and checks what the "model API"
// (a loopback httptest server) really received.
func TestUpstreamKeyInjection(t *testing.T) {
	api := newRecordingServer(t)
	ups := []Upstream{
		{URL: api.URL + "/base", Header: "x-api-key", Key: realKey},
		{URL: api.URL, Header: "Authorization", Prefix: "Bearer ", Key: realKey},
		{URL: api.URL, Header: "X-Custom-Key", Key: realKey},
	}
	h := startHarness(t, Config{Upstreams: ups, AllowLoopbackUpstreams: true})
	apiHost := api.Listener.Addr().String()

	tests := []struct {
		name      string
		upstream  int
		raw       string // the request as the sandbox sends it
		wantURI   string
		wantKeys  map[string]string // header -> exact value upstream ("" = absent)
		wantState int
	}{
		{
			name:     "x-api-key replaced, Authorization dropped, path joined to the base",
			upstream: 0,
			raw: "POST /v1/messages?beta=true HTTP/1.1\r\nHost: 127.0.0.1:3129\r\nX-Api-Key: " + dummyKey +
				"\r\nAuthorization: Bearer " + dummyKey + "\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
			wantURI:   "/base/v1/messages?beta=true",
			wantKeys:  map[string]string{"X-Api-Key": realKey, "Authorization": ""},
			wantState: 200,
		},
		{
			name:      "bearer prefix",
			upstream:  1,
			raw:       "GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + dummyKey + "\r\nX-Api-Key: " + dummyKey + "\r\nConnection: close\r\n\r\n",
			wantURI:   "/v1/models",
			wantKeys:  map[string]string{"Authorization": "Bearer " + realKey, "X-Api-Key": ""},
			wantState: 200,
		},
		{
			name:      "custom header; every known credential header dropped",
			upstream:  2,
			raw:       "GET /x HTTP/1.1\r\nHost: x\r\nX-Custom-Key: " + dummyKey + "\r\nApi-Key: d\r\nX-Goog-Api-Key: d\r\nProxy-Authorization: Basic ZA==\r\nConnection: close\r\n\r\n",
			wantURI:   "/x",
			wantKeys:  map[string]string{"X-Custom-Key": realKey, "Api-Key": "", "X-Goog-Api-Key": "", "Proxy-Authorization": "", "Authorization": ""},
			wantState: 200,
		},
		{
			name:      "no key sent: the real one is added",
			upstream:  0,
			raw:       "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
			wantURI:   "/base/v1/models",
			wantKeys:  map[string]string{"X-Api-Key": realKey},
			wantState: 200,
		},
		{
			name:      "key header listed in Connection (hop-by-hop trick)",
			upstream:  0,
			raw:       "GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Api-Key: " + dummyKey + "\r\nConnection: close, x-api-key\r\n\r\n",
			wantURI:   "/base/v1/models",
			wantKeys:  map[string]string{"X-Api-Key": realKey},
			wantState: 200,
		},
		{
			name:      "duplicate key headers collapse to the real one",
			upstream:  0,
			raw:       "GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Api-Key: a\r\nx-api-key: b\r\nConnection: close\r\n\r\n",
			wantURI:   "/base/v1/models",
			wantKeys:  map[string]string{"X-Api-Key": realKey},
			wantState: 200,
		},
		{
			name:      "absolute-form target naming another host still goes upstream",
			upstream:  0,
			raw:       "GET http://evil.com/v1/models HTTP/1.1\r\nHost: evil.com\r\nConnection: close\r\n\r\n",
			wantURI:   "/base/v1/models",
			wantKeys:  map[string]string{"X-Api-Key": realKey},
			wantState: 200,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(api.requests())
			allowed := h.p.Stats().Allowed
			resps := rawExchange(t, h.upstream[tt.upstream], tt.raw, 1)
			if len(resps) != 1 || resps[0].status != tt.wantState {
				t.Fatalf("responses %+v, want one %d", resps, tt.wantState)
			}
			reqs := api.requests()[before:]
			if len(reqs) != 1 {
				t.Fatalf("upstream saw %d requests, want 1", len(reqs))
			}
			got := reqs[0]
			if got.uri != tt.wantURI {
				t.Errorf("upstream URI %q, want %q", got.uri, tt.wantURI)
			}
			if got.host != apiHost {
				t.Errorf("upstream Host %q, want %q", got.host, apiHost)
			}
			for k, want := range tt.wantKeys {
				vals := got.header.Values(k)
				if want == "" && len(vals) != 0 {
					t.Errorf("upstream got %s: %q, want it removed", k, vals)
				}
				if want != "" && (len(vals) != 1 || vals[0] != want) {
					t.Errorf("upstream got %s: %q, want exactly %q", k, vals, want)
				}
			}
			for k, vals := range got.header {
				for _, v := range vals {
					if strings.Contains(v, dummyKey) {
						t.Errorf("the dummy key reached upstream in %s", k)
					}
				}
			}
			if h.p.Stats().Allowed != allowed+1 {
				t.Errorf("upstream request not counted as allowed")
			}
		})
	}

	t.Run("CONNECT to an upstream listener is refused", func(t *testing.T) {
		status, body, _ := connect(t, h.upstream[0], "evil.com:443")
		if status != 403 || !strings.Contains(body, "CONNECT sent to a model API endpoint") {
			t.Errorf("status %d body %q", status, body)
		}
	})
}

// TestUpstreamStreaming checks that server-sent events reach the client as
// they are written: the model server holds its second event until the client
// has read the first, which a buffering proxy would never deliver.
func TestUpstreamStreaming(t *testing.T) {
	release := make(chan struct{})
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != realKey {
			http.Error(w, "bad key", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\ndata: {\"n\":1}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "event: message_stop\ndata: {\"n\":2}\n\n")
	}))
	defer api.Close()
	h := startHarness(t, Config{Upstreams: []Upstream{{URL: api.URL, Header: "x-api-key", Key: realKey}}, AllowLoopbackUpstreams: true})

	req, _ := http.NewRequest("POST", "http://"+h.upstream[0]+"/v1/messages", strings.NewReader(`{"stream":true}`))
	req.Header.Set("X-Api-Key", dummyKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	first := make(chan string, 1)
	go func() {
		var b strings.Builder
		for {
			line, err := br.ReadString('\n')
			b.WriteString(line)
			if err != nil || line == "\n" {
				first <- b.String()
				return
			}
		}
	}()
	select {
	case ev := <-first:
		if !strings.Contains(ev, `"n":1`) {
			t.Fatalf("first event %q", ev)
		}
	case <-time.After(20 * time.Second): // a liveness guard, not a speed target
		close(release)
		t.Fatal("the first event was not delivered before the stream ended: the proxy buffers")
	}
	close(release)
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), `"n":2`) {
		t.Errorf("rest of stream %q", rest)
	}
}

// TestUpstreamDestinationChecks checks that upstreams, implicitly allowed,
// still pass the address checks, and that AllowLoopbackUpstreams opens
// loopback only, only for upstreams.
func TestUpstreamDestinationChecks(t *testing.T) {
	api := newRecordingServer(t)
	_, port, _ := strings.Cut(api.Listener.Addr().String(), ":")
	res := newResolver(map[string][]netip.Addr{
		"model.test.":   {netip.MustParseAddr("127.0.0.1")},
		"private.test.": {netip.MustParseAddr("10.0.0.7")},
	})
	tests := []struct {
		name       string
		url        string
		loopbackOK bool
		wantStatus int
		wantBody   string
	}{
		{name: "name resolving to loopback, flag off", url: "http://model.test:" + port, wantStatus: 403, wantBody: "resolves to 127.0.0.1 (loopback)"},
		{name: "name resolving to loopback, flag on", url: "http://model.test:" + port, loopbackOK: true, wantStatus: 200},
		{name: "name resolving to private, flag on", url: "http://private.test:" + port, loopbackOK: true, wantStatus: 403, wantBody: "resolves to 10.0.0.7 (private)"},
		{name: "localhost name, flag off", url: "http://localhost:" + port, wantStatus: 403, wantBody: "loopback name"},
		{name: "DNS failure is an upstream failure", url: "http://nowhere.test", loopbackOK: true, wantStatus: 502, wantBody: "goalrun egress: cannot reach nowhere.test:80: DNS lookup failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDialer()
			d.Route("127.0.0.1:"+port, api.Listener.Addr().String())
			h := startHarness(t, Config{
				Upstreams:              []Upstream{{URL: tt.url, Header: "x-api-key", Key: realKey}},
				AllowLoopbackUpstreams: tt.loopbackOK,
				Resolver:               res,
				DialContext:            d.DialContext,
			})
			resps := rawExchange(t, h.upstream[0], "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 1)
			if len(resps) != 1 || resps[0].status != tt.wantStatus || !strings.Contains(resps[0].body, tt.wantBody) {
				t.Fatalf("responses %+v, want %d %q", resps, tt.wantStatus, tt.wantBody)
			}
			s := h.p.Stats()
			if tt.wantStatus != 200 && (s.Denied != 1 || s.Allowed != 0) {
				t.Errorf("stats %+v, want one denial", s)
			}
			if kind := map[int]string{403: EgressDenied, 502: EgressUnreachable}[tt.wantStatus]; kind != "" && resps[0].header.Get(EgressHeader) != kind {
				t.Errorf("%s: %q, want %q", EgressHeader, resps[0].header.Get(EgressHeader), kind)
			}
			if tt.wantStatus == 200 && (s.Allowed != 1 || s.Denied != 0) {
				t.Errorf("stats %+v, want one allowed", s)
			}
			if tt.wantStatus != 200 && len(d.Dialed()) != 0 {
				t.Errorf("dialled %q", d.Dialed())
			}
		})
	}

	t.Run("flag on does not open loopback to the forward proxy", func(t *testing.T) {
		h := startHarness(t, Config{
			Allow:                  []string{"model.test:" + port},
			Upstreams:              []Upstream{{URL: "http://model.test:" + port, Header: "x-api-key", Key: realKey}},
			AllowLoopbackUpstreams: true,
			Resolver:               res,
		})
		for _, target := range []string{"127.0.0.1:" + port, "model.test:" + port} {
			if status, body, _ := connect(t, h.forward, target); status != 403 || !strings.Contains(body, "loopback") {
				t.Errorf("CONNECT %s: %d %q, want 403 loopback", target, status, body)
			}
		}
	})
}

// TestUpstreamHTTPS reaches an HTTPS "model API" by name, dialling the
// checked address, and verifies the certificate against that name.
func TestUpstreamHTTPS(t *testing.T) {
	var gotKey string
	api := newTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotKey = r.Header.Get("Authorization")
		fmt.Fprint(w, r.TLS.ServerName)
	}))
	roots := api.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	res := newResolver(map[string][]netip.Addr{"example.com.": {pubA}, "other.test.": {pubA}})

	tests := []struct {
		name       string
		url        string
		wantStatus int
		wantBody   string
	}{
		{name: "certificate matches the name", url: "https://EXAMPLE.com.", wantStatus: 200, wantBody: "example.com"},
		{name: "certificate does not match the name", url: "https://other.test", wantStatus: 502, wantBody: "certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDialer()
			d.Route("93.184.215.14:443", api.Listener.Addr().String())
			h := startHarness(t, Config{
				Upstreams:       []Upstream{{URL: tt.url, Header: "Authorization", Prefix: "Bearer ", Key: realKey}},
				Resolver:        res,
				DialContext:     d.DialContext,
				TLSClientConfig: &tls.Config{RootCAs: roots},
			})
			resps := rawExchange(t, h.upstream[0], "GET / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+dummyKey+"\r\nConnection: close\r\n\r\n", 1)
			if len(resps) != 1 || resps[0].status != tt.wantStatus || !strings.Contains(resps[0].body, tt.wantBody) {
				t.Fatalf("responses %+v, want %d %q", resps, tt.wantStatus, tt.wantBody)
			}
			if strings.Contains(resps[0].body, realKey) {
				t.Errorf("the real key leaked into a response: %q", resps[0].body)
			}
			if tt.wantStatus == 200 && gotKey != "Bearer "+realKey {
				t.Errorf("upstream saw Authorization %q", gotKey)
			}
		})
	}
}

func TestNewUpstreamErrors(t *testing.T) {
	tests := []struct {
		name       string
		up         Upstream
		loopbackOK bool
		wantErr    string
	}{
		{name: "bad scheme", up: Upstream{URL: "ftp://api.example.com", Header: "x-api-key", Key: "k"}, wantErr: "scheme must be https or http"},
		{name: "no scheme", up: Upstream{URL: "api.example.com", Header: "x-api-key", Key: "k"}, wantErr: "scheme must be"},
		{name: "userinfo", up: Upstream{URL: "https://u:p@api.example.com", Header: "x-api-key", Key: "k"}, wantErr: "no user"},
		{name: "public IP literal", up: Upstream{URL: "https://93.184.215.14", Header: "x-api-key", Key: "k"}, wantErr: "IP literal upstreams are refused"},
		{name: "loopback literal without the flag", up: Upstream{URL: "http://127.0.0.1:8080", Header: "x-api-key", Key: "k"}, wantErr: "IP literal upstreams are refused"},
		{name: "private literal with the flag", up: Upstream{URL: "http://10.0.0.1:8080", Header: "x-api-key", Key: "k"}, loopbackOK: true, wantErr: "IP literal upstreams are refused"},
		{name: "bad host", up: Upstream{URL: "https://bad_host-.example.com", Header: "x-api-key", Key: "k"}, wantErr: "starts or ends with '-'"},
		{name: "empty header", up: Upstream{URL: "https://api.example.com", Key: "k"}, wantErr: "not a valid header name"},
		{name: "header with space", up: Upstream{URL: "https://api.example.com", Header: "x api key", Key: "k"}, wantErr: "not a valid header name"},
		{name: "framing header", up: Upstream{URL: "https://api.example.com", Header: "Content-Length", Key: "k"}, wantErr: "cannot carry a key"},
		{name: "empty key", up: Upstream{URL: "https://api.example.com", Header: "x-api-key"}, wantErr: "API key is empty"},
		{name: "key with newline", up: Upstream{URL: "https://api.example.com", Header: "x-api-key", Key: "k\r\nX-Evil: 1"}, wantErr: "line break"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(Config{Upstreams: []Upstream{tt.up}, AllowLoopbackUpstreams: tt.loopbackOK})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New error = %v, want %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "k\r\n") {
				t.Errorf("error echoes the key: %v", err)
			}
		})
	}
	t.Run("loopback literal with the flag", func(t *testing.T) {
		if _, err := New(Config{Upstreams: []Upstream{{URL: "http://[::1]:8080", Header: "x-api-key", Key: "k"}}, AllowLoopbackUpstreams: true}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("ServeUpstream index out of range", func(t *testing.T) {
		p, err := New(Config{})
		if err != nil {
			t.Fatal(err)
		}
		l, _ := listenUnix(t, "u.sock")
		if err := p.ServeUpstream(l, 0); err == nil || !strings.Contains(err.Error(), "upstream 0 does not exist") {
			t.Errorf("ServeUpstream = %v", err)
		}
	})
}

// TestUpstreamPaths checks the optional path allowlist, including the tricks
// that would escape a prefix.
func TestUpstreamPaths(t *testing.T) {
	api := newRecordingServer(t)
	h := startHarness(t, Config{
		Upstreams:              []Upstream{{URL: api.URL, Header: "x-api-key", Key: realKey, Paths: []string{"/v1/messages", "/v1/models/"}}},
		AllowLoopbackUpstreams: true,
	})
	tests := []struct {
		name       string
		path       string
		wantStatus int
		wantReason string
	}{
		{name: "exact prefix", path: "/v1/messages", wantStatus: 200},
		{name: "below the prefix", path: "/v1/messages/count_tokens?x=1", wantStatus: 200},
		{name: "prefix written with a trailing slash", path: "/v1/models/claude", wantStatus: 200},
		{name: "prefix with a trailing slash, bare", path: "/v1/models", wantStatus: 200},
		{name: "same start, other segment", path: "/v1/messagesX", wantStatus: 403, wantReason: "not on the API's path allowlist"},
		{name: "other path", path: "/v1/files", wantStatus: 403, wantReason: "not on the API's path allowlist"},
		{name: "dot segments", path: "/v1/messages/../files", wantStatus: 403, wantReason: "dot segments"},
		{name: "encoded dot segments", path: "/v1/messages/%2e%2e/files", wantStatus: 403, wantReason: "percent-encoded"},
		{name: "encoded slash", path: "/v1/messages%2F..%2Ffiles", wantStatus: 403, wantReason: "percent-encoded"},
		{name: "double slash", path: "//v1/messages", wantStatus: 403, wantReason: "dot segments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(api.requests())
			resps := rawExchange(t, h.upstream[0], "GET "+tt.path+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 1)
			if len(resps) != 1 || resps[0].status != tt.wantStatus || !strings.Contains(resps[0].body, tt.wantReason) {
				t.Fatalf("responses %+v, want %d %q", resps, tt.wantStatus, tt.wantReason)
			}
			if got := len(api.requests()) - before; (tt.wantStatus == 200) != (got == 1) {
				t.Errorf("upstream saw %d requests", got)
			}
		})
	}
	t.Run("bad prefix in config", func(t *testing.T) {
		for _, pp := range []string{"v1/messages", "/v1/../x", "/v1/%2e"} {
			if _, err := New(Config{Upstreams: []Upstream{{URL: "https://api.example.com", Header: "x-api-key", Key: "k", Paths: []string{pp}}}}); err == nil || !strings.Contains(err.Error(), "clean absolute path prefix") {
				t.Errorf("Paths %q: New error = %v", pp, err)
			}
		}
	})
}
