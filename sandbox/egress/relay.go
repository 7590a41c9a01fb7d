package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// maxSocketPath is the longest Unix socket path Linux accepts: sun_path holds
// 108 bytes including the terminating NUL (unix(7)).
const maxSocketPath = 107

// RelayReadyLine is the line `goalrun __relay` prints on its standard output
// once every mapping is bound (also with none), so whoever started it can
// wait for it before letting anything connect.
const RelayReadyLine = "goalrun relay: ready"

// relayDialTimeout bounds connecting to a proxy socket.
const relayDialTimeout = 10 * time.Second

// Mapping is one relay route: TCP connections accepted on Listen (a loopback
// "ip:port" inside the sandbox) are carried to the Unix socket at Socket.
type Mapping struct {
	// Listen is a loopback address and port, e.g. "127.0.0.1:3128".
	Listen string
	// Socket is the absolute path of the proxy's Unix socket as the relay
	// sees it, e.g. "/goalrun/egress/proxy.sock".
	Socket string
}

// String returns "LISTEN=SOCKET", the form ParseMapping reads and the
// `goalrun __relay` arguments use.
func (m Mapping) String() string { return m.Listen + "=" + m.Socket }

// ParseMapping parses "127.0.0.1:PORT=/abs/path.sock". The listen side must
// be a loopback IP literal with a port 1..65535 (the relay never resolves
// names); the socket must be an absolute, clean path of at most 107 bytes
// (Linux's sun_path). Errors quote the mapping and say what to write.
func ParseMapping(s string) (Mapping, error) {
	listen, socket, ok := strings.Cut(s, "=")
	if !ok {
		return Mapping{}, fmt.Errorf("relay mapping %q: want LISTEN=SOCKET, e.g. 127.0.0.1:3128=/goalrun/egress/proxy.sock", s)
	}
	m := Mapping{Listen: listen, Socket: socket}
	if err := m.check(); err != nil {
		return Mapping{}, err
	}
	if ap, _ := netip.ParseAddrPort(listen); ap.Port() == 0 {
		return Mapping{}, fmt.Errorf("relay mapping %q: listen port must be 1..65535, not 0", s)
	}
	return m, nil
}

// check validates m; errors name the mapping and what to write instead.
func (m Mapping) check() error {
	ap, err := netip.ParseAddrPort(m.Listen)
	if err != nil {
		return fmt.Errorf("relay mapping %q: listen address %q is not ip:port (the relay listens on a loopback IP literal, e.g. 127.0.0.1:3128)", m.String(), m.Listen)
	}
	if !ap.Addr().IsLoopback() {
		return fmt.Errorf("relay mapping %q: listen address %s is not loopback; the relay only listens inside the sandbox (127.0.0.1 or [::1])", m.String(), ap.Addr())
	}
	if m.Socket == "" || !filepath.IsAbs(m.Socket) {
		return fmt.Errorf("relay mapping %q: socket %q must be an absolute path", m.String(), m.Socket)
	}
	if filepath.Clean(m.Socket) != m.Socket {
		return fmt.Errorf("relay mapping %q: socket %q is not a clean path (want %q)", m.String(), m.Socket, filepath.Clean(m.Socket))
	}
	if len(m.Socket) > maxSocketPath {
		return fmt.Errorf("relay mapping %q: socket path is %d bytes, Linux allows %d", m.String(), len(m.Socket), maxSocketPath)
	}
	return nil
}

// Relayer carries TCP connections from loopback listeners to Unix sockets.
// Make one with ListenRelay; Serve runs it.
type Relayer struct {
	mappings  []Mapping
	listeners []net.Listener
}

// ListenRelay checks mappings and binds every listen address, so that when
// it returns the relay is reachable. On error nothing stays bound. A port of
// 0 binds a free port (Addrs tells which); duplicates are refused.
func ListenRelay(mappings []Mapping) (*Relayer, error) {
	seen := map[string]bool{}
	for _, m := range mappings {
		if err := m.check(); err != nil {
			return nil, err
		}
		if ap, _ := netip.ParseAddrPort(m.Listen); ap.Port() != 0 && seen[m.Listen] {
			return nil, fmt.Errorf("relay mapping %q: %s is mapped twice", m.String(), m.Listen)
		}
		seen[m.Listen] = true
	}
	r := &Relayer{mappings: mappings}
	for _, m := range mappings {
		l, err := net.Listen("tcp", m.Listen)
		if err != nil {
			r.closeListeners()
			return nil, fmt.Errorf("relay mapping %q: %w", m.String(), err)
		}
		r.listeners = append(r.listeners, l)
	}
	return r, nil
}

// Addrs returns the bound listen addresses, in mapping order.
func (r *Relayer) Addrs() []net.Addr {
	out := make([]net.Addr, len(r.listeners))
	for i, l := range r.listeners {
		out[i] = l.Addr()
	}
	return out
}

func (r *Relayer) closeListeners() {
	for _, l := range r.listeners {
		l.Close()
	}
}

// Serve accepts and relays until ctx ends, then closes the listeners and
// every open connection, waits for its goroutines and returns nil. With no
// mappings it just waits for ctx (the container's idle main process). A
// connection whose socket cannot be reached is closed and logged to logw
// (nil discards). Accept errors such as running out of file descriptors
// are logged and retried with a back-off; a listener closed under the relay
// stops it with an error.
func (r *Relayer) Serve(ctx context.Context, logw io.Writer) error {
	if logw == nil {
		logw = io.Discard
	}
	logger := log.New(logw, "goalrun relay: ", 0)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var (
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
	)
	track := func(c net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if ctx.Err() != nil {
			return false
		}
		conns[c] = struct{}{}
		return true
	}
	untrack := func(c net.Conn) {
		mu.Lock()
		delete(conns, c)
		mu.Unlock()
		c.Close()
	}

	for i, l := range r.listeners {
		m := r.mappings[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			delay := 5 * time.Millisecond
			for {
				c, err := l.Accept()
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					if !errors.Is(err, net.ErrClosed) {
						// Out of file descriptors, an aborted handshake:
						// the relay must outlive a sandbox that opens
						// connections without end, so wait and go on.
						logger.Printf("%s: accept: %v; retrying in %v", m.Listen, err, delay)
						select {
						case <-time.After(delay):
						case <-ctx.Done():
							return
						}
						delay = min(2*delay, time.Second)
						continue
					}
					errMu.Lock()
					if first == nil {
						first = fmt.Errorf("relay %s: accept: %w", m.Listen, err)
					}
					errMu.Unlock()
					cancel()
					return
				}
				delay = 5 * time.Millisecond
				if !track(c) {
					c.Close()
					return
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer untrack(c)
					r.relayConn(ctx, c, m, logger, track, untrack)
				}()
			}
		}()
	}

	<-ctx.Done()
	r.closeListeners()
	mu.Lock()
	for c := range conns {
		c.Close()
	}
	mu.Unlock()
	wg.Wait()
	return first
}

// relayConn connects c to m.Socket and copies both ways, passing each
// side's end of stream on as a half-close, until both directions are done.
func (r *Relayer) relayConn(ctx context.Context, c net.Conn, m Mapping, logger *log.Logger, track func(net.Conn) bool, untrack func(net.Conn)) {
	d := net.Dialer{Timeout: relayDialTimeout}
	s, err := d.DialContext(ctx, "unix", m.Socket)
	if err != nil {
		if ctx.Err() == nil {
			logger.Printf("%s: %v", m.Listen, err)
		}
		return
	}
	if !track(s) {
		s.Close()
		return
	}
	defer untrack(s)
	done := make(chan struct{}, 2)
	go func() { splice(s, c); done <- struct{}{} }()
	go func() { splice(c, s); done <- struct{}{} }()
	<-done
	<-done
}

// splice copies src to dst, then half-closes dst's write side (or closes dst
// when it cannot half-close) so the peer sees the end of the stream.
func splice(dst, src net.Conn) {
	_, err := io.Copy(dst, src)
	if err != nil {
		// A broken direction ends both: closing unblocks the other copy.
		dst.Close()
		src.Close()
		return
	}
	if hc, ok := dst.(interface{ CloseWrite() error }); ok {
		hc.CloseWrite()
		return
	}
	dst.Close()
}

// Relay binds every mapping and relays until ctx ends (see ListenRelay and
// Relayer.Serve). It is the body of the hidden `goalrun __relay` subcommand.
func Relay(ctx context.Context, mappings []Mapping, logw io.Writer) error {
	r, err := ListenRelay(mappings)
	if err != nil {
		return err
	}
	return r.Serve(ctx, logw)
}
