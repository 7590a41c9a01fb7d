package sandbox_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/dockertest"
	"github.com/goalrun/goalrun/sandbox/egress"
	"github.com/goalrun/goalrun/sandbox/egress/egresstest"
)

// recorder is a loopback HTTP server that remembers the keys it was sent.
type recorder struct {
	srv  *httptest.Server
	mu   sync.Mutex
	keys []string
	hits int
}

func newRecorder(t *testing.T, body string) *recorder {
	r := &recorder{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.hits++
		r.keys = append(r.keys, req.Header.Get("x-api-key"))
		r.mu.Unlock()
		io.WriteString(w, body)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *recorder) seen() (int, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hits, append([]string(nil), r.keys...)
}

// TestDockerEgress is the egress "Must show" and the network rows of
// docs/security.md's attack table: with the allowlist holding a local test
// server, a request through the relay succeeds; the model API (a reverse
// proxy) sees the real key while the sandbox only ever holds the dummy one;
// every other destination is refused and counted in egress_denied; no name
// resolves inside; the check step has neither proxy nor key.
func TestDockerEgress(t *testing.T) {
	const realKey = "sk-real-key-goalrun-test-0123456789abcdef"
	model := newRecorder(t, `{"type":"message","content":"ok"}`)
	site := newRecorder(t, "hello from the allowed site\n")
	_, sitePort, _ := net.SplitHostPort(site.srv.Listener.Addr().String())
	// A host-loopback service the agent must not reach.
	hostOnly := newRecorder(t, "host-only secret\n")
	_, hostPort, _ := net.SplitHostPort(hostOnly.srv.Listener.Addr().String())

	res := egresstest.NewResolver(map[string][]netip.Addr{
		"allowed.test":  {egresstest.PublicV4},
		"evil.test":     {egresstest.PublicV4B},
		"rebind.test":   {netip.MustParseAddr("10.0.0.7")},
		"metadata.test": {netip.MustParseAddr("169.254.169.254")},
	})
	router := egresstest.NewRouter()
	router.Route(netip.AddrPortFrom(egresstest.PublicV4, 80).String(), site.srv.Listener.Addr().String())

	cli := dockertest.Client(t)
	sb, _ := startDocker(t, sandbox.Config{
		Network: sandbox.NetworkEgress,
		// rebind.test and metadata.test are allowed by name but resolve to
		// a private and the metadata address: the proxy must refuse them
		// on what it would dial.
		AllowHosts:  []string{"allowed.test:80", "rebind.test:80", "metadata.test:80"},
		RelayBinary: dockertest.GoalrunBinary(t),
		Image:       dockertest.Image(t, cli),
		Upstreams: []sandbox.Upstream{{
			URL: model.srv.URL, BaseURLEnv: "ANTHROPIC_BASE_URL", KeyEnv: "ANTHROPIC_API_KEY", Header: "x-api-key", Key: realKey,
		}},
	}, sandbox.WithEgressConfig(func(c *egress.Config) {
		c.Resolver = res
		c.DialContext = router.DialContext
		c.AllowLoopbackUpstreams = true
	}))

	p := sb.Posture()
	if p.Network != sandbox.NetworkEgress || p.Tier != sandbox.TierEgressOnly || len(p.SecretsInSandbox) != 0 ||
		len(p.EgressAllowlist) != 3 || p.EgressAllowlist[0] != "allowed.test:80" || p.EgressDenied != 0 {
		t.Fatalf("posture at start: %+v", p)
	}

	if got := sb.UpstreamURL(0); got != "http://127.0.0.1:3129" {
		t.Errorf("UpstreamURL(0) = %q, want the relay's loopback port", got)
	}
	if got := sb.UpstreamURL(1); got != "" {
		t.Errorf("UpstreamURL(1) = %q for a missing upstream, want \"\"", got)
	}

	t.Run("model API through the relay gets the real key upstream", func(t *testing.T) {
		out := run(t, sb, sh(sandbox.RoleAgent, `echo "key=$ANTHROPIC_API_KEY base=$ANTHROPIC_BASE_URL"; wget -Y off -q -O- --header "x-api-key: $ANTHROPIC_API_KEY" "$ANTHROPIC_BASE_URL/v1/messages"`))
		if out.ExitCode != 0 || !strings.Contains(string(out.Stdout.Tail), `"content":"ok"`) {
			t.Fatalf("exit %d stdout %q stderr %q", out.ExitCode, out.Stdout.Tail, out.Stderr.Tail)
		}
		if want := "key=" + sandbox.DummyKey + " base=" + sb.UpstreamURL(0) + "\n"; !strings.HasPrefix(string(out.Stdout.Tail), want) {
			t.Errorf("the sandbox's env: %q, want it to start %q", out.Stdout.Tail, want)
		}
		hits, keys := model.seen()
		if hits != 1 || keys[0] != realKey {
			t.Errorf("the model server saw %d requests with keys %q, want 1 with the real key", hits, keys)
		}
	})

	t.Run("allowlisted site through the forward proxy", func(t *testing.T) {
		out := run(t, sb, sh(sandbox.RoleAgent, `wget -q -O- http://allowed.test/`))
		if out.ExitCode != 0 || string(out.Stdout.Tail) != "hello from the allowed site\n" {
			t.Fatalf("exit %d stdout %q stderr %q", out.ExitCode, out.Stdout.Tail, out.Stderr.Tail)
		}
	})

	t.Run("the real key is nowhere inside", func(t *testing.T) {
		// The key is put together inside, so this step's own command line
		// does not carry it.
		half := len(realKey) / 2
		out := run(t, sb, sh(sandbox.RoleAgent, `k1='`+realKey[:half]+`'; k2='`+realKey[half:]+`'; env; cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n'; cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' ' '; grep -r -l -s -e "$k1$k2" / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev; true`))
		if strings.Contains(string(out.Stdout.Tail)+string(out.Stderr.Tail), realKey) {
			t.Errorf("the real key is readable inside the sandbox: breach")
		}
	})

	before := sb.Posture().EgressDenied
	denied := []struct{ name, script string }{
		{"host not on the allowlist", `timeout 20 wget -O- http://evil.test/`},
		{"IP literal", `timeout 20 wget -q -O- http://93.184.215.14/`},
		{"numeric IP spelling", `timeout 20 wget -q -O- http://2130706433/`},
		{"cloud metadata address", `timeout 20 wget -q -O- http://169.254.169.254/latest/meta-data/`},
		{"name resolving to the metadata address", `timeout 20 wget -q -O- http://metadata.test/`},
		{"name resolving to a private address", `timeout 20 wget -q -O- http://rebind.test/`},
		{"Docker bridge gateway", `timeout 20 wget -q -O- http://172.17.0.1:2375/version`},
		{"host loopback through the proxy", `NO_PROXY= no_proxy= timeout 20 wget -q -O- http://127.0.0.1:` + hostPort + `/`},
		{"localhost through the proxy", `NO_PROXY= no_proxy= timeout 20 wget -q -O- http://localhost:` + hostPort + `/`},
		{"allowed host on another port", `timeout 20 wget -q -O- http://allowed.test:` + sitePort + `/`},
		{"CONNECT tunnel to a private address", `printf 'CONNECT 10.0.0.1:22 HTTP/1.1\r\nHost: 10.0.0.1:22\r\n\r\n' | nc -w 5 127.0.0.1 3128 | head -1 | grep -q ' 200 '`},
	}
	for _, tc := range denied {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			n := sb.Posture().EgressDenied
			out := run(t, sb, sh(sandbox.RoleAgent, tc.script))
			if out.ExitCode == 0 {
				t.Fatalf("reached it: breach (stdout %q)", out.Stdout.Tail)
			}
			if got := sb.Posture().EgressDenied; got != n+1 {
				t.Errorf("egress_denied %d → %d, want one more (exit %d stdout %q stderr %q)", n, got, out.ExitCode, out.Stdout.Tail, out.Stderr.Tail)
			}
		})
	}
	if hits, _ := hostOnly.seen(); hits != 0 {
		t.Errorf("the host-loopback service was reached %d times", hits)
	}

	direct := []struct{ name, script string }{
		{"resolve a name inside", `nslookup allowed.test`},
		{"bypass the proxy to an IP", `NO_PROXY='*' no_proxy='*' timeout 10 wget -q -O- http://93.184.215.14/`},
		{"bypass the proxy to the bridge gateway", `nc -w 3 172.17.0.1 2375 </dev/null`},
		{"bypass the proxy to the host's loopback port", `nc -w 3 127.0.0.1 ` + hostPort + ` </dev/null`},
	}
	for _, tc := range direct {
		t.Run("no route: "+tc.name, func(t *testing.T) {
			if out := run(t, sb, sh(sandbox.RoleAgent, tc.script)); out.ExitCode == 0 {
				t.Errorf("succeeded: breach (stdout %q)", out.Stdout.Tail)
			}
		})
	}

	t.Run("check step has no proxy, no key, no network", func(t *testing.T) {
		out := run(t, sb, sh(sandbox.RoleCheck, `env | grep -i -E 'proxy|ANTHROPIC' ; timeout 10 wget -q -O- http://allowed.test/ && echo reached; nc -w 2 127.0.0.1 3128 </dev/null && echo relay-reachable; true`))
		if s := string(out.Stdout.Tail); s != "" {
			t.Errorf("the check saw %q", s)
		}
	})

	p = sb.Posture()
	if p.EgressDenied < before+len(denied) || p.EgressAllowed < 2 || len(p.EgressDenials) == 0 || len(p.EgressDenials) > sandbox.EgressDenialsKept {
		t.Errorf("posture after the attacks: allowed %d denied %d denials %q", p.EgressAllowed, p.EgressDenied, p.EgressDenials)
	}
	for _, d := range p.EgressDenials {
		if strings.Contains(d, realKey) {
			t.Errorf("a denial carries the key: %q", d)
		}
	}
	t.Logf("denials kept: %s", strings.Join(p.EgressDenials, "; "))
	joined := strings.Join(p.EgressDenials, "\n")
	for _, want := range []string{"metadata.test:80 (resolves to 169.254.169.254", "rebind.test:80 (resolves to 10.0.0.7"} {
		if !strings.Contains(joined, want) {
			t.Errorf("denials lack %q", want)
		}
	}
}
