package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// No Engine call may hang a run.
//
// The Docker client honours a context for plain requests, but not for a
// connection it hijacks (attach, exec start): it writes the request and
// reads the answer with no deadline, so an Engine that accepts and never
// answers holds the caller for good, whatever its context says. And a call
// made with a context that has no deadline (most of a sandbox's start-up)
// waits as long as the Engine does. Every DockerAPI the sandbox, Reap,
// BuildImage and HostTools use is therefore wrapped (bounded): short calls
// get callTimeout, archive transfers fail once the Engine made no progress
// for callTimeout, and a hijacked connection is closed when its context
// ends, also while the Engine has not answered yet (the dialer of
// NewDockerClient hands the connection over; see guardHijacks).

// callTimeout bounds each short Engine call (inspect, create, start, kill,
// remove, list, pause…) and each stretch without progress of an archive
// transfer or a hijack's answer. It is apiTimeout: a call that takes
// longer is an Engine that stopped answering.
const callTimeout = apiTimeout

// ErrEngineHung wraps the error of an Engine call that got no answer (or
// made no progress) within callTimeout.
var ErrEngineHung = errors.New("the Docker Engine stopped answering")

// bounded returns cli with every call bounded (see above); a cli that is
// already bounded is returned as it is.
func bounded(cli DockerAPI) DockerAPI {
	if cli == nil {
		return nil
	}
	if _, ok := cli.(*boundedEngine); ok {
		return cli
	}
	return &boundedEngine{DockerAPI: cli, limit: callTimeout}
}

// boundedEngine is a DockerAPI whose calls cannot hang (bounded).
type boundedEngine struct {
	DockerAPI
	limit time.Duration
	// beforeStart, when set, must return nil before any container is
	// started (gateStarts).
	beforeStart func(context.Context) error
}

// gateStarts returns cli, bounded, whose ContainerStart first calls gate
// and starts nothing when gate fails (its error is the start's).
func gateStarts(cli DockerAPI, gate func(context.Context) error) DockerAPI {
	b := *bounded(cli).(*boundedEngine)
	b.beforeStart = gate
	return &b
}

// call runs a short Engine call with its own deadline; an expired one is
// ErrEngineHung naming what.
func call[T any](e *boundedEngine, ctx context.Context, what string, f func(context.Context) (T, error)) (T, error) {
	cctx, cancel := context.WithTimeoutCause(ctx, e.limit, errHung)
	defer cancel()
	v, err := f(cctx)
	return v, e.explain(ctx, cctx, what, err)
}

// errHung is the cause of a context this file's deadline ended.
var errHung = errors.New("no answer in time")

// explain turns an error caused by this file's deadline (not by ctx's
// own) into ErrEngineHung naming what.
func (e *boundedEngine) explain(ctx, cctx context.Context, what string, err error) error {
	if err == nil || ctx.Err() != nil || !errors.Is(context.Cause(cctx), errHung) {
		return err
	}
	return fmt.Errorf("%w: %s got no answer within %s: %v", ErrEngineHung, what, e.limit, err)
}

func (e *boundedEngine) Ping(ctx context.Context) (types.Ping, error) {
	return call(e, ctx, "ping", func(c context.Context) (types.Ping, error) { return e.DockerAPI.Ping(c) })
}

func (e *boundedEngine) Info(ctx context.Context) (system.Info, error) {
	return call(e, ctx, "info", func(c context.Context) (system.Info, error) { return e.DockerAPI.Info(c) })
}

func (e *boundedEngine) ContainerCreate(ctx context.Context, cfg *container.Config, hc *container.HostConfig, nc *network.NetworkingConfig, p *ocispec.Platform, name string) (container.CreateResponse, error) {
	return call(e, ctx, "creating a container", func(c context.Context) (container.CreateResponse, error) {
		return e.DockerAPI.ContainerCreate(c, cfg, hc, nc, p, name)
	})
}

func (e *boundedEngine) ContainerStart(ctx context.Context, id string, o container.StartOptions) error {
	if e.beforeStart != nil {
		if err := e.beforeStart(ctx); err != nil {
			return err
		}
	}
	_, err := call(e, ctx, "starting a container", func(c context.Context) (struct{}, error) {
		return struct{}{}, e.DockerAPI.ContainerStart(c, id, o)
	})
	return err
}

func (e *boundedEngine) ContainerInspect(ctx context.Context, id string) (container.InspectResponse, error) {
	return call(e, ctx, "inspecting a container", func(c context.Context) (container.InspectResponse, error) {
		return e.DockerAPI.ContainerInspect(c, id)
	})
}

func (e *boundedEngine) ContainerKill(ctx context.Context, id, signal string) error {
	_, err := call(e, ctx, "killing a container", func(c context.Context) (struct{}, error) {
		return struct{}{}, e.DockerAPI.ContainerKill(c, id, signal)
	})
	return err
}

// ContainerStop waits for the stop's own grace (o.Timeout seconds) on top
// of the bound.
func (e *boundedEngine) ContainerStop(ctx context.Context, id string, o container.StopOptions) error {
	g := e
	if o.Timeout != nil && *o.Timeout > 0 {
		g = &boundedEngine{DockerAPI: e.DockerAPI, limit: e.limit + time.Duration(*o.Timeout)*time.Second}
	}
	_, err := call(g, ctx, "stopping a container", func(c context.Context) (struct{}, error) {
		return struct{}{}, e.DockerAPI.ContainerStop(c, id, o)
	})
	return err
}

func (e *boundedEngine) ContainerRemove(ctx context.Context, id string, o container.RemoveOptions) error {
	_, err := call(e, ctx, "removing a container", func(c context.Context) (struct{}, error) {
		return struct{}{}, e.DockerAPI.ContainerRemove(c, id, o)
	})
	return err
}

func (e *boundedEngine) ContainerList(ctx context.Context, o container.ListOptions) ([]container.Summary, error) {
	return call(e, ctx, "listing containers", func(c context.Context) ([]container.Summary, error) { return e.DockerAPI.ContainerList(c, o) })
}

func (e *boundedEngine) ContainerPause(ctx context.Context, id string) error {
	_, err := call(e, ctx, "freezing a container", func(c context.Context) (struct{}, error) {
		return struct{}{}, e.DockerAPI.ContainerPause(c, id)
	})
	return err
}

func (e *boundedEngine) ContainerUnpause(ctx context.Context, id string) error {
	_, err := call(e, ctx, "thawing a container", func(c context.Context) (struct{}, error) {
		return struct{}{}, e.DockerAPI.ContainerUnpause(c, id)
	})
	return err
}

func (e *boundedEngine) ContainerExecCreate(ctx context.Context, id string, o container.ExecOptions) (container.ExecCreateResponse, error) {
	return call(e, ctx, "creating an exec", func(c context.Context) (container.ExecCreateResponse, error) {
		return e.DockerAPI.ContainerExecCreate(c, id, o)
	})
}

func (e *boundedEngine) ContainerExecInspect(ctx context.Context, id string) (container.ExecInspect, error) {
	return call(e, ctx, "inspecting an exec", func(c context.Context) (container.ExecInspect, error) {
		return e.DockerAPI.ContainerExecInspect(c, id)
	})
}

func (e *boundedEngine) ContainerStatPath(ctx context.Context, id, p string) (container.PathStat, error) {
	return call(e, ctx, "reading a path's status in a container", func(c context.Context) (container.PathStat, error) {
		return e.DockerAPI.ContainerStatPath(c, id, p)
	})
}

func (e *boundedEngine) ImageInspect(ctx context.Context, ref string, o ...client.ImageInspectOption) (image.InspectResponse, error) {
	return call(e, ctx, "inspecting an image", func(c context.Context) (image.InspectResponse, error) {
		return e.DockerAPI.ImageInspect(c, ref, o...)
	})
}

func (e *boundedEngine) ImageList(ctx context.Context, o image.ListOptions) ([]image.Summary, error) {
	return call(e, ctx, "listing images", func(c context.Context) ([]image.Summary, error) { return e.DockerAPI.ImageList(c, o) })
}

func (e *boundedEngine) ImageRemove(ctx context.Context, ref string, o image.RemoveOptions) ([]image.DeleteResponse, error) {
	return call(e, ctx, "removing an image", func(c context.Context) ([]image.DeleteResponse, error) {
		return e.DockerAPI.ImageRemove(c, ref, o)
	})
}

func (e *boundedEngine) NetworkCreate(ctx context.Context, name string, o network.CreateOptions) (network.CreateResponse, error) {
	return call(e, ctx, "creating a network", func(c context.Context) (network.CreateResponse, error) {
		return e.DockerAPI.NetworkCreate(c, name, o)
	})
}

func (e *boundedEngine) NetworkRemove(ctx context.Context, id string) error {
	_, err := call(e, ctx, "removing a network", func(c context.Context) (struct{}, error) {
		return struct{}{}, e.DockerAPI.NetworkRemove(c, id)
	})
	return err
}

func (e *boundedEngine) NetworkList(ctx context.Context, o network.ListOptions) ([]network.Summary, error) {
	return call(e, ctx, "listing networks", func(c context.Context) ([]network.Summary, error) { return e.DockerAPI.NetworkList(c, o) })
}

func (e *boundedEngine) VolumeCreate(ctx context.Context, o volume.CreateOptions) (volume.Volume, error) {
	return call(e, ctx, "creating a volume", func(c context.Context) (volume.Volume, error) { return e.DockerAPI.VolumeCreate(c, o) })
}

func (e *boundedEngine) VolumeRemove(ctx context.Context, id string, force bool) error {
	_, err := call(e, ctx, "removing a volume", func(c context.Context) (struct{}, error) {
		return struct{}{}, e.DockerAPI.VolumeRemove(c, id, force)
	})
	return err
}

func (e *boundedEngine) VolumeList(ctx context.Context, o volume.ListOptions) (volume.ListResponse, error) {
	return call(e, ctx, "listing volumes", func(c context.Context) (volume.ListResponse, error) { return e.DockerAPI.VolumeList(c, o) })
}

func (e *boundedEngine) VolumeInspect(ctx context.Context, id string) (volume.Volume, error) {
	return call(e, ctx, "inspecting a volume", func(c context.Context) (volume.Volume, error) { return e.DockerAPI.VolumeInspect(c, id) })
}

// CopyToContainer fails once the Engine took nothing of content for the
// bound (time spent producing content does not count).
func (e *boundedEngine) CopyToContainer(ctx context.Context, id, p string, content io.Reader, o container.CopyToContainerOptions) error {
	w := e.watch(ctx)
	defer w.stop()
	err := e.DockerAPI.CopyToContainer(w.ctx, id, p, w.upload(content), o)
	return e.explain(ctx, w.ctx, "copying into a container", err)
}

// CopyFromContainer's archive fails once the Engine sent nothing for the
// bound while it was being read.
func (e *boundedEngine) CopyFromContainer(ctx context.Context, id, p string) (io.ReadCloser, container.PathStat, error) {
	w := e.watch(ctx)
	rc, st, err := e.DockerAPI.CopyFromContainer(w.ctx, id, p)
	if err != nil {
		w.stop()
		return nil, st, e.explain(ctx, w.ctx, "copying out of a container", err)
	}
	return w.download(rc, "copying out of a container"), st, nil
}

// ImageImport fails once the Engine made no progress for the bound, taking
// the image's layer or answering.
func (e *boundedEngine) ImageImport(ctx context.Context, src image.ImportSource, ref string, o image.ImportOptions) (io.ReadCloser, error) {
	w := e.watch(ctx)
	if src.Source != nil {
		src.Source = w.upload(src.Source)
	}
	rc, err := e.DockerAPI.ImageImport(w.ctx, src, ref, o)
	if err != nil {
		w.stop()
		return nil, e.explain(ctx, w.ctx, "importing an image", err)
	}
	return w.download(rc, "importing an image"), nil
}

// ContainerAttach hijacks a connection that is closed when ctx ends (and
// at once if the Engine does not answer within the bound).
func (e *boundedEngine) ContainerAttach(ctx context.Context, id string, o container.AttachOptions) (types.HijackedResponse, error) {
	return e.hijack(ctx, "attaching to a container", func(c context.Context) (types.HijackedResponse, error) {
		return e.DockerAPI.ContainerAttach(c, id, o)
	})
}

// ContainerExecAttach starts an exec on a hijacked connection that is
// closed when ctx ends (see ContainerAttach).
func (e *boundedEngine) ContainerExecAttach(ctx context.Context, id string, o container.ExecAttachOptions) (types.HijackedResponse, error) {
	return e.hijack(ctx, "starting an exec", func(c context.Context) (types.HijackedResponse, error) {
		return e.DockerAPI.ContainerExecAttach(c, id, o)
	})
}

// hijack runs a call that hijacks its connection. Until the Engine answers,
// the connection (handed over by guardHijacks' dialer) is closed when ctx
// ends or the bound passes, which ends the call; a client without that
// dialer leaves the call behind and its late answer is closed. Once
// answered, the stream is closed when ctx ends.
func (e *boundedEngine) hijack(ctx context.Context, what string, f func(context.Context) (types.HijackedResponse, error)) (types.HijackedResponse, error) {
	h := &hijackConns{}
	type answer struct {
		hj  types.HijackedResponse
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		hj, err := f(context.WithValue(ctx, hijackKey{}, h))
		answered <- answer{hj, err}
	}()
	timer := time.NewTimer(e.limit)
	defer timer.Stop()
	var err error
	select {
	case a := <-answered:
		if a.err != nil {
			h.closeAll()
			return a.hj, a.err
		}
		hj := a.hj
		raw := hj.Conn
		release := context.AfterFunc(ctx, func() { raw.Close() })
		hj.Conn = &streamConn{Conn: raw, release: release}
		return hj, nil
	case <-ctx.Done():
		err = fmt.Errorf("%s: %w", what, context.Cause(ctx))
	case <-timer.C:
		err = fmt.Errorf("%w: %s got no answer within %s", ErrEngineHung, what, e.limit)
	}
	h.closeAll()
	go func() {
		if a := <-answered; a.err == nil {
			a.hj.Close()
		}
	}()
	return types.HijackedResponse{}, err
}

// streamConn is a hijacked stream whose Close also drops the context hook
// that would close it.
type streamConn struct {
	net.Conn
	release func() bool
}

func (c *streamConn) Close() error {
	c.release()
	return c.Conn.Close()
}

// CloseWrite half-closes the stream when the connection can (as
// types.HijackedResponse.CloseWrite does).
func (c *streamConn) CloseWrite() error {
	if cw, ok := c.Conn.(types.CloseWriter); ok {
		return cw.CloseWrite()
	}
	return nil
}

// hijackKey marks the context of a call that hijacks its connection; its
// value is the *hijackConns the dialer hands the connection to.
type hijackKey struct{}

// hijackConns are the connections dialled for one hijacking call.
type hijackConns struct {
	mu     sync.Mutex
	conns  []net.Conn
	closed bool
}

// add records c; false (and c closed) when the call already ended.
func (h *hijackConns) add(c net.Conn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		c.Close()
		return false
	}
	h.conns = append(h.conns, c)
	return true
}

// closeAll closes every connection recorded, and any added later.
func (h *hijackConns) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for _, c := range h.conns {
		c.Close()
	}
	h.conns = nil
}

// guardHijacks is a client option (after the host is set): connections
// dialled for a hijacking call (hijackKey in the context) are handed to
// that call, so it can close them while the Engine has not answered. The
// client's other connections are untouched (its pool's dials are detached
// from any request's context).
func guardHijacks(c *client.Client) error {
	tr, ok := c.HTTPClient().Transport.(*http.Transport)
	if !ok || tr.DialContext == nil {
		return nil // TLS or a foreign transport: hijack still returns on ctx, leaving the call behind
	}
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if h, ok := ctx.Value(hijackKey{}).(*hijackConns); ok && !h.add(conn) {
			return nil, fmt.Errorf("sandbox: the call ended before the Engine answered: %w", context.Canceled)
		}
		return conn, nil
	}
	return nil
}

// transferWatch ends its context once the Engine made no progress for the
// bound: the clock runs while goalrun waits for the Engine (an upload not
// taken, an answer not come, a download read that waits), never while
// goalrun itself produces the upload or handles what it read.
type transferWatch struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	limit  time.Duration

	mu    sync.Mutex
	timer *time.Timer
	done  bool
}

// watch starts a transferWatch whose clock runs (the call is in flight).
func (e *boundedEngine) watch(ctx context.Context) *transferWatch {
	c, cancel := context.WithCancelCause(ctx)
	w := &transferWatch{ctx: c, cancel: cancel, limit: e.limit}
	w.timer = time.AfterFunc(e.limit, func() { cancel(errHung) })
	return w
}

// run restarts the clock (goalrun waits for the Engine).
func (w *transferWatch) run() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.timer.Reset(w.limit)
	}
}

// pause stops the clock (goalrun is busy itself).
func (w *transferWatch) pause() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timer.Stop()
}

// stop ends the watch and its context.
func (w *transferWatch) stop() {
	w.mu.Lock()
	w.done = true
	w.timer.Stop()
	w.mu.Unlock()
	w.cancel(context.Canceled)
}

// upload wraps what goalrun sends: producing it pauses the clock.
func (w *transferWatch) upload(r io.Reader) io.Reader {
	return readerFunc(func(p []byte) (int, error) {
		w.pause()
		defer w.run()
		return r.Read(p)
	})
}

// download wraps what the Engine sends: the clock runs only while a read
// waits; Close ends the watch.
func (w *transferWatch) download(rc io.ReadCloser, what string) io.ReadCloser {
	w.pause()
	return &watchedBody{rc: rc, w: w, what: what}
}

type watchedBody struct {
	rc   io.ReadCloser
	w    *transferWatch
	what string
}

func (b *watchedBody) Read(p []byte) (int, error) {
	b.w.run()
	n, err := b.rc.Read(p)
	b.w.pause()
	if err != nil && err != io.EOF && errors.Is(context.Cause(b.w.ctx), errHung) {
		err = fmt.Errorf("%w: %s made no progress within %s: %v", ErrEngineHung, b.what, b.w.limit, err)
	}
	return n, err
}

func (b *watchedBody) Close() error {
	err := b.rc.Close()
	b.w.stop()
	return err
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }
