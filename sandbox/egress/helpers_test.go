package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goalrun/goalrun/sandbox/egress/egresstest"
)

// Public addresses the fake resolver hands out (never dialled: the test
// dialer maps them onto loopback servers).
var (
	pubA  = egresstest.PublicV4
	pubB  = egresstest.PublicV4B
	pubV6 = egresstest.PublicV6
)

// fakeResolver and routeDialer are the egresstest fakes under the names the
// tests use.
type (
	fakeResolver = egresstest.Resolver
	routeDialer  = egresstest.Router
)

func newResolver(answers map[string][]netip.Addr) *fakeResolver {
	return egresstest.NewResolver(answers)
}

func newDialer() *routeDialer { return egresstest.NewRouter() }

// shortTempDir returns a temporary directory with a short path: a Unix
// socket path must fit 107 bytes, which t.TempDir's long names can exceed.
func shortTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "egr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// listenUnix listens on a fresh Unix socket and returns it with its path.
func listenUnix(t testing.TB, name string) (net.Listener, string) {
	t.Helper()
	path := filepath.Join(shortTempDir(t), name)
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	return l, path
}

// harness is the production wiring in miniature: the proxy serves on Unix
// sockets, the relay carries loopback TCP to them, and clients talk to the
// relay's TCP addresses, as an agent inside the sandbox would.
type harness struct {
	p        *Proxy
	res      *fakeResolver
	dial     *routeDialer
	forward  string   // "127.0.0.1:PORT" of the forward proxy, via the relay
	upstream []string // "127.0.0.1:PORT" of each upstream, via the relay
	relayLog *syncBuffer
}

// startHarness builds a Proxy from cfg (its Resolver and DialContext are
// replaced by fakes when nil), serves it through a relay and stops both at
// the end of the test.
func startHarness(t testing.TB, cfg Config) *harness {
	t.Helper()
	h := &harness{dial: newDialer(), relayLog: &syncBuffer{}}
	if cfg.Resolver == nil {
		h.res = newResolver(nil)
		cfg.Resolver = h.res
	} else if fr, ok := cfg.Resolver.(*fakeResolver); ok {
		h.res = fr
	}
	if cfg.DialContext == nil {
		cfg.DialContext = h.dial.DialContext
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.p = p

	var wg sync.WaitGroup
	serve := func(f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil {
				t.Errorf("serve: %v", err)
			}
		}()
	}
	fl, fpath := listenUnix(t, "proxy.sock")
	serve(func() error { return p.ServeForward(fl) })
	mappings := []Mapping{{Listen: "127.0.0.1:0", Socket: fpath}}
	for i := range cfg.Upstreams {
		ul, upath := listenUnix(t, fmt.Sprintf("up%d.sock", i))
		serve(func() error { return p.ServeUpstream(ul, i) })
		mappings = append(mappings, Mapping{Listen: "127.0.0.1:0", Socket: upath})
	}
	r, err := ListenRelay(mappings)
	if err != nil {
		t.Fatalf("ListenRelay: %v", err)
	}
	addrs := r.Addrs()
	h.forward = addrs[0].String()
	for _, a := range addrs[1:] {
		h.upstream = append(h.upstream, a.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	serve(func() error { return r.Serve(ctx, h.relayLog) })
	t.Cleanup(func() {
		cancel()
		p.Close()
		wg.Wait()
	})
	return h
}

// client returns an HTTP client that uses the harness's forward proxy for
// every URL, trusting roots for TLS (nil: system roots).
func (h *harness) client(tr *http.Transport) *http.Client {
	if tr == nil {
		tr = &http.Transport{}
	}
	tr.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: h.forward})
	tr.DisableKeepAlives = true
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// rawResponse is one HTTP response read off a raw connection.
type rawResponse struct {
	status int
	header http.Header
	body   string
}

// rawExchange writes req verbatim to addr and reads the responses to
// nreq requests (a request the server refuses to parse ends the stream).
func rawExchange(t *testing.T, addr, req string, nreq int) []rawResponse {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var out []rawResponse
	for range nreq {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				break
			}
			t.Fatalf("reading response: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		out = append(out, rawResponse{status: resp.StatusCode, header: resp.Header, body: string(b)})
	}
	return out
}

// connect sends "CONNECT target" on a raw connection, with target as the
// Host header too (as curl does), and returns the status code, the body of a
// refusal and the open connection (for a tunnel).
func connect(t *testing.T, addr, target string) (int, string, net.Conn) {
	t.Helper()
	return connectHost(t, addr, target, target)
}

// connectHost is connect with a chosen Host header.
func connectHost(t *testing.T, addr, target, host string) (int, string, net.Conn) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, host)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return 0, "", c
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), c
	}
	if br.Buffered() > 0 {
		t.Fatalf("CONNECT %s: %d unexpected bytes after 200", target, br.Buffered())
	}
	c.SetDeadline(time.Time{})
	return resp.StatusCode, "", c
}

// newTLSServer starts an httptest TLS server (certificate for example.com,
// *.example.com, 127.0.0.1, ::1) that does not log handshake failures, which
// some tests cause on purpose.
func newTLSServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// echoServer accepts TCP connections on loopback and echoes each one
// ("hello" in, "hello" out) until the peer half-closes.
func echoServer(t testing.TB, network, addr string) net.Listener {
	t.Helper()
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return l
}
