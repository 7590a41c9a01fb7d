package egresstest

import (
	"bufio"
	"crypto/tls"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// CorporateProxy is a scripted corporate HTTP(S) proxy on loopback, the kind
// HTTPS_PROXY and HTTP_PROXY name: it tunnels CONNECT requests and forwards
// absolute-form requests, after checking Proxy-Authorization when User is
// set. It knows no DNS: a target reaches a server only through Route, any
// other target is answered 502. Every request it receives is recorded, so
// a test can tell what went through it and what did not. Safe for
// concurrent use.
type CorporateProxy struct {
	// URL is "http://127.0.0.1:PORT" ("https://" over TLS).
	URL string
	// Addr is "127.0.0.1:PORT".
	Addr string

	l      net.Listener
	user   string // "name:password" required, "" for none
	mu     sync.Mutex
	routes map[string]string
	refuse map[string]bool
	seen   []ProxyRequest
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

// ProxyRequest is one request a CorporateProxy received.
type ProxyRequest struct {
	// Method is "CONNECT" or the forwarded request's method.
	Method string
	// Target is the CONNECT authority or the absolute URI.
	Target string
	// Auth is the Proxy-Authorization header ("" when absent).
	Auth string
	// Status is what the proxy answered (200 for an established tunnel).
	Status int
}

// NewCorporateProxy starts a CorporateProxy on 127.0.0.1; user, when not
// "", is the "name:password" it requires (407 otherwise); with tlsConfig
// the proxy is spoken to over TLS (an "https://" proxy URL). Close it when
// done.
func NewCorporateProxy(user string, tlsConfig *tls.Config) (*CorporateProxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	scheme := "http://"
	if tlsConfig != nil {
		l, scheme = tls.NewListener(l, tlsConfig), "https://"
	}
	c := &CorporateProxy{l: l, user: user, routes: map[string]string{}, refuse: map[string]bool{}, conns: map[net.Conn]bool{},
		Addr: l.Addr().String(), URL: scheme + l.Addr().String()}
	c.wg.Add(1)
	go c.serve()
	return c, nil
}

// Route sends the proxy's connections for target ("host:port" as clients
// name it) to to (a "host:port" really dialled).
func (c *CorporateProxy) Route(target, to string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.routes[strings.ToLower(target)] = to
}

// Refuse makes the proxy answer 403 for target ("host:port"), as a
// corporate policy would.
func (c *CorporateProxy) Refuse(target string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refuse[strings.ToLower(target)] = true
}

// Requests returns what the proxy received so far, in order.
func (c *CorporateProxy) Requests() []ProxyRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.seen)
}

// Targets returns the targets of Requests (CONNECT authorities and the
// authorities of absolute URIs), in order.
func (c *CorporateProxy) Targets() []string {
	var out []string
	for _, r := range c.Requests() {
		t := r.Target
		if r.Method != http.MethodConnect {
			t = strings.TrimPrefix(strings.TrimPrefix(t, "http://"), "https://")
			if i := strings.IndexAny(t, "/?"); i >= 0 {
				t = t[:i]
			}
			if _, _, err := net.SplitHostPort(t); err != nil {
				t += ":80"
			}
		}
		out = append(out, t)
	}
	return out
}

// Close stops the proxy, closes the connections clients hold to it and
// waits for them to end.
func (c *CorporateProxy) Close() {
	c.l.Close()
	c.mu.Lock()
	for conn := range c.conns {
		conn.Close()
	}
	c.mu.Unlock()
	c.wg.Wait()
}

func (c *CorporateProxy) serve() {
	defer c.wg.Done()
	for {
		conn, err := c.l.Accept()
		if err != nil {
			return
		}
		c.mu.Lock()
		c.conns[conn] = true
		c.mu.Unlock()
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.handle(conn)
			c.mu.Lock()
			delete(c.conns, conn)
			c.mu.Unlock()
		}()
	}
}

// handle serves one client connection: one CONNECT, or absolute-form
// requests until the client closes.
func (c *CorporateProxy) handle(conn net.Conn) {
	defer conn.Close()
	br := bufio.NewReader(conn)
	for {
		conn.SetReadDeadline(time.Now().Add(time.Minute))
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		conn.SetReadDeadline(time.Time{})
		rec := ProxyRequest{Method: req.Method, Target: req.RequestURI, Auth: req.Header.Get("Proxy-Authorization")}
		status, to := c.decide(req, &rec)
		if status != 0 {
			c.record(rec, status)
			body := "corporate proxy: " + http.StatusText(status) + "\n"
			resp := &http.Response{StatusCode: status, ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{}, Close: true,
				Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body))}
			if status == http.StatusProxyAuthRequired {
				resp.Header.Set("Proxy-Authenticate", `Basic realm="corp"`)
			}
			resp.Write(conn)
			return
		}
		up, err := net.DialTimeout("tcp", to, 10*time.Second)
		if err != nil {
			c.record(rec, http.StatusBadGateway)
			(&http.Response{StatusCode: http.StatusBadGateway, ProtoMajor: 1, ProtoMinor: 1, Close: true}).Write(conn)
			return
		}
		if req.Method == http.MethodConnect {
			c.record(rec, http.StatusOK)
			io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n")
			done := make(chan struct{})
			go func() {
				io.Copy(up, br)
				if tc, ok := up.(*net.TCPConn); ok {
					tc.CloseWrite()
				}
				close(done)
			}()
			io.Copy(conn, up)
			conn.Close()
			up.Close()
			<-done
			return
		}
		c.record(rec, http.StatusOK)
		req.Header.Del("Proxy-Authorization")
		req.Header.Del("Proxy-Connection")
		req.RequestURI = ""
		if err := req.Write(up); err != nil {
			up.Close()
			return
		}
		resp, err := http.ReadResponse(bufio.NewReader(up), req)
		if err != nil {
			up.Close()
			return
		}
		err = resp.Write(conn)
		resp.Body.Close()
		up.Close()
		if err != nil || req.Close {
			return
		}
	}
}

// decide returns the status to refuse req with (0: serve it) and the
// address to dial.
func (c *CorporateProxy) decide(req *http.Request, rec *ProxyRequest) (int, string) {
	target := req.RequestURI
	if req.Method != http.MethodConnect {
		if req.URL == nil || req.URL.Host == "" {
			return http.StatusBadRequest, ""
		}
		target = req.URL.Host
		if req.URL.Port() == "" {
			target += ":80"
		}
	}
	if c.user != "" {
		want := "Basic " + base64.StdEncoding.EncodeToString([]byte(c.user))
		if rec.Auth != want {
			return http.StatusProxyAuthRequired, ""
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refuse[strings.ToLower(target)] {
		return http.StatusForbidden, ""
	}
	to, ok := c.routes[strings.ToLower(target)]
	if !ok {
		return http.StatusBadGateway, ""
	}
	return 0, to
}

func (c *CorporateProxy) record(r ProxyRequest, status int) {
	r.Status = status
	c.mu.Lock()
	c.seen = append(c.seen, r)
	c.mu.Unlock()
}
