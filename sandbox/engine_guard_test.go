package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
)

// silentEngine is a Unix socket that reads Engine API requests and answers
// as told: never (an Engine that hangs), an upgrade and then nothing, or
// a body cut short. It records whether each connection was closed by the
// client.
type silentEngine struct {
	path   string
	answer func(w *bufio.Writer, r *http.Request) // nil: never answer
	mu     sync.Mutex
	opened int
	closed int
	seen   chan string
}

func newSilentEngine(t *testing.T, answer func(w *bufio.Writer, r *http.Request)) *silentEngine {
	t.Helper()
	dir, err := os.MkdirTemp("", "eng-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	e := &silentEngine{path: filepath.Join(dir, "docker.sock"), answer: answer, seen: make(chan string, 16)}
	l, err := net.Listen("unix", e.path)
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
			e.mu.Lock()
			e.opened++
			e.mu.Unlock()
			go e.serve(c)
		}
	}()
	t.Setenv("DOCKER_HOST", "unix://"+e.path)
	t.Setenv("DOCKER_API_VERSION", "1.41") // no version negotiation
	return e
}

func (e *silentEngine) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	e.seen <- req.Method + " " + req.URL.Path
	if e.answer != nil {
		w := bufio.NewWriter(c)
		e.answer(w, req)
		w.Flush()
	}
	// Hold the connection until the client drops it. The body of an
	// upload is not read for a while (the client's writes back up, past
	// the bound), then drained until the client's close shows.
	if req.Method == http.MethodPut {
		time.Sleep(2 * time.Second)
	}
	_, _ = io.Copy(io.Discard, br)
	e.mu.Lock()
	e.closed++
	e.mu.Unlock()
}

// allClosed waits (up to 5 s) for every connection to be closed by the
// client.
func (e *silentEngine) allClosed(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		e.mu.Lock()
		done := e.opened > 0 && e.closed == e.opened
		e.mu.Unlock()
		if done {
			return
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	t.Errorf("%d of %d connections to the Engine are still open", e.opened-e.closed, e.opened)
}

// TestHungEngineCallsEnd: against an Engine that accepts and never
// answers, every kind of call made through the sandbox's client ends — a
// hijacked attach or exec start when its context ends (the Docker client
// alone would wait for ever) or when the bound passes, a short call and an
// archive transfer at the bound — and no connection stays open.
func TestHungEngineCallsEnd(t *testing.T) {
	const limit = 300 * time.Millisecond
	upgrade := func(w *bufio.Writer, r *http.Request) {
		w.WriteString("HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n")
	}
	halfArchive := func(w *bufio.Writer, r *http.Request) {
		w.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/x-tar\r\nX-Docker-Container-Path-Stat: e30=\r\nContent-Length: 100000\r\n\r\n")
		w.Write(make([]byte, 1000))
	}
	for _, tc := range []struct {
		name   string
		answer func(*bufio.Writer, *http.Request)
		cancel bool // the call's context ends after 200 ms
		call   func(ctx context.Context, e DockerAPI) error
		hung   bool // the error is ErrEngineHung
	}{
		{"attach, the context ends", nil, true, func(ctx context.Context, e DockerAPI) error {
			_, err := e.ContainerAttach(ctx, "c1", container.AttachOptions{Stream: true, Stdout: true})
			return err
		}, false},
		{"exec start, the context ends", nil, true, func(ctx context.Context, e DockerAPI) error {
			_, err := e.ContainerExecAttach(ctx, "x1", container.ExecAttachOptions{})
			return err
		}, false},
		{"attach, no answer within the bound", nil, false, func(ctx context.Context, e DockerAPI) error {
			_, err := e.ContainerAttach(ctx, "c1", container.AttachOptions{Stream: true, Stdout: true})
			return err
		}, true},
		{"an answered attach's stream, the context ends", upgrade, true, func(ctx context.Context, e DockerAPI) error {
			hj, err := e.ContainerAttach(ctx, "c1", container.AttachOptions{Stream: true, Stdout: true})
			if err != nil {
				return err
			}
			_, err = io.ReadAll(hj.Reader) // ends only when the stream is closed
			return errors.Join(err, errors.New("stream closed"))
		}, false},
		{"inspect", nil, false, func(ctx context.Context, e DockerAPI) error {
			_, err := e.ContainerInspect(ctx, "c1")
			return err
		}, true},
		{"volume inspect", nil, false, func(ctx context.Context, e DockerAPI) error {
			_, err := e.VolumeInspect(ctx, "v1")
			return err
		}, true},
		{"create", nil, false, func(ctx context.Context, e DockerAPI) error {
			_, err := e.ContainerCreate(ctx, &container.Config{Image: "x"}, nil, nil, nil, "")
			return err
		}, true},
		{"an archive download that stops", halfArchive, false, func(ctx context.Context, e DockerAPI) error {
			rc, _, err := e.CopyFromContainer(ctx, "c1", "/")
			if err != nil {
				return err
			}
			defer rc.Close()
			_, err = io.ReadAll(rc)
			return err
		}, true},
		{"an archive upload never taken", nil, false, func(ctx context.Context, e DockerAPI) error {
			return e.CopyToContainer(ctx, "c1", "/", bytes.NewReader(make([]byte, 64<<20)), container.CopyToContainerOptions{})
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng := newSilentEngine(t, tc.answer)
			cli, err := NewDockerClient()
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			e := &boundedEngine{DockerAPI: cli, limit: limit}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				time.AfterFunc(200*time.Millisecond, cancel)
			}
			done := make(chan error, 1)
			start := time.Now()
			go func() { done <- tc.call(ctx, e) }()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the call did not end within 10 s")
			}
			took := time.Since(start)
			t.Logf("ended after %s: %v", took.Round(time.Millisecond), err)
			if err == nil {
				t.Fatal("no error")
			}
			if got := errors.Is(err, ErrEngineHung); got != tc.hung {
				t.Errorf("errors.Is(err, ErrEngineHung) = %v, want %v", got, tc.hung)
			}
			if tc.hung && !strings.Contains(err.Error(), limit.String()) {
				t.Errorf("the error does not name the bound: %v", err)
			}
			select {
			case <-eng.seen:
			default:
				t.Error("the Engine never got the request")
			}
			eng.allClosed(t)
		})
	}
}

// TestBoundedIsIdempotent: wrapping twice does not stack the bounds.
func TestBoundedIsIdempotent(t *testing.T) {
	cli, err := NewDockerClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	once := bounded(cli)
	if bounded(once) != once {
		t.Error("bounded wrapped a bounded client again")
	}
	if bounded(nil) != nil {
		t.Error("bounded(nil) is not nil")
	}
}

// TestEveryEngineCallIsBounded: every method of DockerAPI — of each
// per-concern interface it composes — is defined by boundedEngine itself
// (engine_guard.go, docker_killfrozen.go), so a method added to any of
// them never reaches the Engine without a deadline by being promoted from
// the wrapped client. The few that are not bounded say why here.
func TestEveryEngineCallIsBounded(t *testing.T) {
	unbounded := map[string]string{
		"DaemonHost":    "no request: the address the client was made with",
		"Events":        "a stream that lasts as long as the run watches; it ends with its context",
		"ContainerWait": "waits as long as the container runs; it ends with its context",
	}
	defined := map[string]bool{}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || len(fd.Recv.List) != 1 {
				continue
			}
			if star, ok := fd.Recv.List[0].Type.(*ast.StarExpr); ok {
				if id, ok := star.X.(*ast.Ident); ok && id.Name == "boundedEngine" {
					defined[fd.Name.Name] = true
				}
			}
		}
	}
	api := reflect.TypeFor[DockerAPI]()
	for i := range api.NumMethod() {
		m := api.Method(i).Name
		t.Run(m, func(t *testing.T) {
			why, exempt := unbounded[m]
			switch {
			case exempt && defined[m]:
				t.Errorf("boundedEngine defines %s, which this test lists as unbounded (%s): remove it from the list", m, why)
			case !exempt && !defined[m]:
				t.Errorf("boundedEngine does not define %s: the wrapped client's would run without a deadline; bound it in engine_guard.go", m)
			}
		})
	}
	for m := range unbounded {
		if _, ok := api.MethodByName(m); !ok {
			t.Errorf("%s is listed as unbounded but DockerAPI has no such method", m)
		}
	}
}

// startsRecorded is a DockerAPI that records the containers it was asked
// to start and starts nothing.
type startsRecorded struct {
	DockerAPI
	started []string
}

func (s *startsRecorded) ContainerStart(_ context.Context, id string, _ container.StartOptions) error {
	s.started = append(s.started, id)
	return nil
}

func (s *startsRecorded) ContainerTop(context.Context, string, []string) (container.TopResponse, error) {
	return container.TopResponse{Titles: []string{"PID"}}, nil
}

// TestGateStarts: a gated client starts a container only once its gate
// says yes; the gate's refusal is the start's error, and the client keeps
// its other abilities (listing processes).
func TestGateStarts(t *testing.T) {
	refused := errors.New("not confirmed")
	cases := []struct {
		name    string
		gate    error
		started []string
	}{
		{name: "confirmed", started: []string{"c1"}},
		{name: "refused", gate: refused},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inner := &startsRecorded{}
			asked := 0
			cli := gateStarts(inner, func(context.Context) error { asked++; return tc.gate })
			if err := cli.ContainerStart(t.Context(), "c1", container.StartOptions{}); !errors.Is(err, tc.gate) || (tc.gate == nil) != (err == nil) {
				t.Fatalf("start: %v, want %v", err, tc.gate)
			}
			if asked != 1 || !slices.Equal(inner.started, tc.started) {
				t.Errorf("gate asked %d times, started %q; want once, %q", asked, inner.started, tc.started)
			}
			if _, ok := cli.(processLister); !ok {
				t.Error("the gated client lost ContainerTop")
			}
		})
	}
}

// TestOnceConfirmed: the confirmation runs once for every caller, at once
// or later, and a result its caller's cancellation caused is asked again.
func TestOnceConfirmed(t *testing.T) {
	var calls atomic.Int32
	confirm := onceConfirmed(func(ctx context.Context) error {
		calls.Add(1)
		if err := ctx.Err(); err != nil {
			return err
		}
		return ErrEngineChanged
	})
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	if err := confirm(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := confirm(t.Context()); !errors.Is(err, ErrEngineChanged) {
				t.Errorf("confirm: %v, want ErrEngineChanged", err)
			}
		}()
	}
	wg.Wait()
	if n := calls.Load(); n != 2 {
		t.Errorf("the check ran %d times, want 2 (once cancelled, once for all)", n)
	}
}
