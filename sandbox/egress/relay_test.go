package egress

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestParseMapping(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Mapping
		wantErr string
	}{
		{name: "IPv4", in: "127.0.0.1:3128=/goalrun/egress/proxy.sock", want: Mapping{"127.0.0.1:3128", "/goalrun/egress/proxy.sock"}},
		{name: "IPv6 loopback", in: "[::1]:3129=/goalrun/egress/up0.sock", want: Mapping{"[::1]:3129", "/goalrun/egress/up0.sock"}},
		{name: "other loopback address", in: "127.0.0.2:80=/s", want: Mapping{"127.0.0.2:80", "/s"}},
		{name: "no equals sign", in: "127.0.0.1:3128", wantErr: "want LISTEN=SOCKET"},
		{name: "name instead of IP", in: "localhost:3128=/s", wantErr: "is not ip:port"},
		{name: "no port", in: "127.0.0.1=/s", wantErr: "is not ip:port"},
		{name: "port zero", in: "127.0.0.1:0=/s", wantErr: "listen port must be 1..65535"},
		{name: "not loopback", in: "0.0.0.0:3128=/s", wantErr: "is not loopback"},
		{name: "public address", in: "93.184.215.14:3128=/s", wantErr: "is not loopback"},
		{name: "relative socket", in: "127.0.0.1:3128=proxy.sock", wantErr: "must be an absolute path"},
		{name: "empty socket", in: "127.0.0.1:3128=", wantErr: "must be an absolute path"},
		{name: "unclean socket", in: "127.0.0.1:3128=/goalrun/../etc/x.sock", wantErr: "not a clean path"},
		{name: "socket path too long", in: "127.0.0.1:3128=/" + strings.Repeat("s", 107), wantErr: "Linux allows 107"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseMapping(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseMapping(%q) = %v, %v; want error %q", tt.in, m, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseMapping(%q): %v", tt.in, err)
			}
			if m != tt.want || m.String() != tt.in {
				t.Errorf("ParseMapping(%q) = %+v (%s), want %+v", tt.in, m, m, tt.want)
			}
		})
	}
}

// startRelay runs a relay for mappings until the test ends; it returns the
// bound addresses, the log and a function that stops the relay and returns
// Serve's result.
func startRelay(t *testing.T, mappings []Mapping) ([]string, *syncBuffer, func() error) {
	t.Helper()
	r, err := ListenRelay(mappings)
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, a := range r.Addrs() {
		addrs = append(addrs, a.String())
	}
	logw := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Serve(ctx, logw) }()
	var once sync.Once
	var result error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case result = <-done:
			case <-time.After(20 * time.Second): // liveness guard
				result = errors.New("relay did not stop after cancel")
			}
		})
		return result
	}
	t.Cleanup(func() { stop() })
	return addrs, logw, stop
}

// TestRelaySplice carries many concurrent connections through the relay to
// real Unix-socket echo servers; each sends 256 KiB, half-closes and must get
// exactly its bytes back followed by EOF (the half-close crossed the relay
// both ways).
func TestRelaySplice(t *testing.T) {
	_, sockA := listenUnixEcho(t, "a.sock")
	_, sockB := listenUnixEcho(t, "b.sock")
	addrs, _, stop := startRelay(t, []Mapping{{"127.0.0.1:0", sockA}, {"127.0.0.1:0", sockB}})

	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			addr := addrs[i%2]
			payload := make([]byte, 256<<10)
			rand.Read(payload)
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(30 * time.Second))
			go func() {
				c.Write(payload)
				c.(*net.TCPConn).CloseWrite()
			}()
			got, err := io.ReadAll(c)
			if err != nil {
				t.Errorf("conn %d: %v", i, err)
				return
			}
			if !bytes.Equal(got, payload) {
				t.Errorf("conn %d: got %d bytes back, want the %d sent", i, len(got), len(payload))
			}
		}()
	}
	wg.Wait()
	if err := stop(); err != nil {
		t.Errorf("Serve = %v, want nil", err)
	}
}

// listenUnixEcho serves an echo on a fresh Unix socket.
func listenUnixEcho(t *testing.T, name string) (net.Listener, string) {
	t.Helper()
	l, path := listenUnix(t, name)
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
				c.(*net.UnixConn).CloseWrite()
			}()
		}
	}()
	return l, path
}

// TestRelayMissingSocket: when the proxy socket is absent the client's
// connection is closed (never left hanging) and the reason is logged.
func TestRelayMissingSocket(t *testing.T) {
	sock := shortTempDir(t) + "/absent.sock"
	addrs, logw, _ := startRelay(t, []Mapping{{"127.0.0.1:0", sock}})
	c, err := net.Dial("tcp", addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatalf("read %d bytes from a relay with no socket", n)
	}
	for range 100 {
		if strings.Contains(logw.String(), "absent.sock") {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(logw.String(), "absent.sock: connect: no such file or directory") {
		t.Errorf("log %q does not name the missing socket", logw.String())
	}
}

// TestRelayShutdown: cancelling the context closes the listener and every
// open relayed connection, and Serve returns nil.
func TestRelayShutdown(t *testing.T) {
	l, sock := listenUnix(t, "hold.sock")
	held := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			held <- c // accept and never answer
		}
	}()
	addrs, _, stop := startRelay(t, []Mapping{{"127.0.0.1:0", sock}})
	c, err := net.Dial("tcp", addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "ping")
	var server net.Conn
	select {
	case server = <-held:
		defer server.Close()
	case <-time.After(20 * time.Second):
		t.Fatal("the relay never connected to the socket")
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(server, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("server read %q, %v", buf, err)
	}

	if err := stop(); err != nil {
		t.Fatalf("Serve = %v, want nil", err)
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Read(buf); err == nil {
		t.Error("client connection still open after shutdown")
	}
	server.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := server.Read(buf); err == nil {
		t.Error("socket side still open after shutdown")
	}
	if c2, err := net.Dial("tcp", addrs[0]); err == nil {
		c2.Close()
		t.Error("listener still accepting after shutdown")
	}
}

// TestRelayNoMappings: with nothing to relay, Serve waits for the context
// (the container's idle main process) and then returns nil.
func TestRelayNoMappings(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Relay(ctx, nil, nil) }()
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Relay with no mappings returned before cancel: %v", err)
	default:
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Relay = %v, want nil", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Relay did not return after cancel")
	}
}

func TestListenRelayErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	freeAddr := free.Addr().String()
	free.Close()

	tests := []struct {
		name     string
		mappings []Mapping
		wantErr  string
	}{
		{name: "port in use", mappings: []Mapping{{busy.Addr().String(), "/s"}}, wantErr: "address already in use"},
		{name: "mapped twice", mappings: []Mapping{{"127.0.0.1:3128", "/a"}, {"127.0.0.1:3128", "/b"}}, wantErr: "mapped twice"},
		{name: "not loopback", mappings: []Mapping{{"0.0.0.0:3128", "/a"}}, wantErr: "not loopback"},
		{name: "second fails, first released", mappings: []Mapping{{freeAddr, "/a"}, {busy.Addr().String(), "/b"}}, wantErr: "address already in use"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ListenRelay(tt.mappings); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ListenRelay = %v, want %q", err, tt.wantErr)
			}
		})
	}
	// The first listener of the failed call must have been released.
	l, err := net.Listen("tcp", freeAddr)
	if err != nil {
		t.Errorf("the first mapping stayed bound after a failed ListenRelay: %v", err)
	} else {
		l.Close()
	}
}

// flakyListener fails its first Accept calls with EMFILE, as a listener
// does when the process is out of file descriptors.
type flakyListener struct {
	net.Listener
	fails int
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.fails > 0 {
		l.fails--
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestRelaySurvivesAcceptErrors: running out of file descriptors (a sandbox
// opening connections without end) must not stop the relay.
func TestRelaySurvivesAcceptErrors(t *testing.T) {
	_, sock := listenUnixEcho(t, "e.sock")
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Relayer{mappings: []Mapping{{tl.Addr().String(), sock}}, listeners: []net.Listener{&flakyListener{Listener: tl, fails: 3}}}
	logw := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Serve(ctx, logw) }()

	c, err := net.Dial("tcp", tl.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	io.WriteString(c, "still here")
	buf := make([]byte, len("still here"))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "still here" {
		t.Fatalf("echo %q, %v", buf, err)
	}
	c.Close()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve = %v", err)
	}
	if !strings.Contains(logw.String(), "too many open files; retrying") {
		t.Errorf("log %q does not mention the accept failures", logw.String())
	}
}
