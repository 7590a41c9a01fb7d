package dockertest

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// Forwarder is a Unix socket in front of the test's Docker Engine that the
// test can freeze or make hang on chosen requests.
//
// Frozen, it still accepts connections and reads what arrives, but passes
// nothing on either way — an Engine that hangs. Thawed, it forwards again,
// held bytes first.
//
// With stall rules (Stall), it reads each request a client sends and hands
// it to the Engine unless a rule matches: a matched request is never
// forwarded and never answered, nor is anything after it on that
// connection — an Engine that hangs on that one call while answering every
// other. A request that upgrades the connection (attach, exec start: the
// Docker client's hijack) turns the connection into a plain byte pipe once
// forwarded. Point a client (DOCKER_HOST) at Host().
type Forwarder struct {
	// Path is the forwarder's socket.
	Path string

	network, addr string // the Engine's
	l             net.Listener

	mu      sync.Mutex
	frozen  bool
	thawed  *sync.Cond
	conns   []net.Conn
	closed  bool
	rules   []func(*http.Request) bool
	stalled []string // "METHOD path" of every request held
	seen    []string // "METHOD path" of every request read
}

// NewForwarder starts a forwarder to the Engine DOCKER_HOST names (a unix://
// or tcp:// address; the default socket when unset), closed when the test
// ends.
func NewForwarder(t testing.TB) *Forwarder {
	t.Helper()
	network, addr := "unix", "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		u, err := url.Parse(h)
		if err != nil {
			t.Fatalf("DOCKER_HOST %q: %v", h, err)
		}
		switch u.Scheme {
		case "unix":
			addr = u.Path
		case "tcp":
			network, addr = "tcp", u.Host
		default:
			t.Fatalf("DOCKER_HOST %q: the forwarder speaks unix:// and tcp:// only", h)
		}
	}
	dir, err := os.MkdirTemp("", "fwd-") // short: sun_path holds 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	f := &Forwarder{Path: filepath.Join(dir, "docker.sock"), network: network, addr: addr}
	f.thawed = sync.NewCond(&f.mu)
	if f.l, err = net.Listen("unix", f.Path); err != nil {
		t.Fatal(err)
	}
	go f.accept()
	t.Cleanup(func() {
		f.Close()
		os.RemoveAll(dir)
	})
	return f
}

// Host is the DOCKER_HOST value for the forwarder.
func (f *Forwarder) Host() string { return "unix://" + f.Path }

// Freeze makes the forwarder hold everything from now on, in both
// directions, on every connection, old and new.
func (f *Forwarder) Freeze() {
	f.mu.Lock()
	f.frozen = true
	f.mu.Unlock()
}

// Thaw lets everything through again.
func (f *Forwarder) Thaw() {
	f.mu.Lock()
	f.frozen = false
	f.thawed.Broadcast()
	f.mu.Unlock()
}

// Stall adds a rule: every request it matches from now on is held for good
// (see Forwarder). Rules are checked in the order they were added.
func (f *Forwarder) Stall(match func(r *http.Request) bool) {
	f.mu.Lock()
	f.rules = append(f.rules, match)
	f.mu.Unlock()
}

// StallRequests adds a rule matching requests whose method is method (""
// for any) and whose path without the API version prefix ("/v1.41") matches
// the regular expression path, e.g. StallRequests("POST", `^/images/create$`).
func (f *Forwarder) StallRequests(method, path string) {
	re := regexp.MustCompile(path)
	f.Stall(func(r *http.Request) bool {
		return (method == "" || r.Method == method) && re.MatchString(APIPath(r.URL.Path))
	})
}

// StallHijacks adds a rule matching every request that upgrades its
// connection: the Docker client's attach and exec start.
func (f *Forwarder) StallHijacks() {
	f.Stall(IsHijack)
}

// IsHijack reports whether r asks to upgrade its connection (the Docker
// client's attach and exec start do).
func IsHijack(r *http.Request) bool {
	return r.Header.Get("Upgrade") != "" || strings.EqualFold(r.Header.Get("Connection"), "upgrade")
}

// apiVersion is the "/v1.41" a versioned Engine API path starts with.
var apiVersion = regexp.MustCompile(`^/v[0-9]+\.[0-9]+/`)

// APIPath is an Engine API path without its version prefix:
// "/v1.41/containers/x/attach" → "/containers/x/attach".
func APIPath(p string) string {
	if loc := apiVersion.FindStringIndex(p); loc != nil {
		return p[loc[1]-1:]
	}
	return p
}

// Stalled lists the requests held so far ("METHOD /path", the path
// without its API version).
func (f *Forwarder) Stalled() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.stalled...)
}

// Seen lists every request read so far, in order ("METHOD /path").
func (f *Forwarder) Seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}

// Close stops the forwarder and drops every connection.
func (f *Forwarder) Close() {
	f.mu.Lock()
	f.closed = true
	f.frozen = false
	f.thawed.Broadcast()
	conns := f.conns
	f.conns = nil
	f.mu.Unlock()
	f.l.Close()
	for _, c := range conns {
		c.Close()
	}
}

// gate blocks while the forwarder is frozen; false once it is closed.
func (f *Forwarder) gate() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.frozen && !f.closed {
		f.thawed.Wait()
	}
	return !f.closed
}

func (f *Forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		c.Close()
		return false
	}
	f.conns = append(f.conns, c)
	return true
}

// stalls records r and reports whether a rule holds it.
func (f *Forwarder) stalls(r *http.Request) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := r.Method + " " + APIPath(r.URL.Path)
	f.seen = append(f.seen, name)
	for _, match := range f.rules {
		if match(r) {
			f.stalled = append(f.stalled, name)
			return true
		}
	}
	return false
}

func (f *Forwarder) accept() {
	for {
		c, err := f.l.Accept()
		if err != nil {
			return
		}
		if !f.track(c) {
			return
		}
		go f.serve(c)
	}
}

// serve forwards one client connection: requests one by one (each checked
// against the rules), the Engine's answers as a plain byte stream, and
// after an upgrade everything as bytes.
func (f *Forwarder) serve(c net.Conn) {
	br := bufio.NewReaderSize(c, 64<<10)
	var up net.Conn
	defer func() {
		if up == nil {
			c.Close()
		}
	}()
	for {
		// A frozen Engine accepts and never answers: read the next request
		// only once thawed.
		if !f.gate() {
			return
		}
		req, err := http.ReadRequest(br)
		if err != nil {
			if up != nil {
				if hc, ok := up.(interface{ CloseWrite() error }); ok {
					hc.CloseWrite()
				} else {
					up.Close()
				}
			}
			return
		}
		if f.stalls(req) {
			// Never answered: hold the connection until the client drops
			// it, then drop the Engine's side too.
			_, _ = io.Copy(io.Discard, br)
			c.Close()
			if up != nil {
				up.Close()
			}
			return
		}
		if up == nil {
			if up, err = net.Dial(f.network, f.addr); err != nil {
				return
			}
			if !f.track(up) {
				up = nil
				return
			}
			go f.pipe(c, up)
		}
		if !f.gate() {
			return
		}
		if err := req.Write(up); err != nil {
			up.Close()
			return
		}
		if IsHijack(req) {
			// The connection is the step's stream from now on: bytes both
			// ways, what the reader already holds first.
			if n := br.Buffered(); n > 0 {
				b, _ := br.Peek(n)
				if _, err := up.Write(b); err != nil {
					return
				}
				br.Discard(n)
			}
			f.pipe(up, c)
			return
		}
	}
}

// pipe copies src to dst, holding each chunk while frozen; the end of src
// half-closes dst.
func (f *Forwarder) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !f.gate() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				src.Close()
				return
			}
		}
		if err != nil {
			if err != io.EOF && !strings.Contains(err.Error(), "use of closed") {
				dst.Close()
				return
			}
			if hc, ok := dst.(interface{ CloseWrite() error }); ok {
				hc.CloseWrite()
			} else {
				dst.Close()
			}
			return
		}
	}
}
