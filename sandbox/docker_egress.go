package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/goalrun/goalrun/sandbox/egress"
)

// RelayReadyLine is what `goalrun __relay` prints on stdout once every
// listener is bound; StartDocker waits for it before the first step. It is
// egress.RelayReadyLine, so the two cannot drift.
const RelayReadyLine = egress.RelayReadyLine

// maxSocketDirBytes keeps socket paths within Linux's 107-byte sun_path,
// on both sides: "<dir>/up15.sock" must fit.
const maxSocketDirBytes = 90

// dockerEgress is the run's egress proxy and its socket folder.
type dockerEgress struct {
	proxy     *egress.Proxy
	dir       string // as goalrun sees it
	hostDir   string // as the Engine's host sees it
	listeners []net.Listener
	sockets   []string // socket file names, forward proxy first
	wg        sync.WaitGroup
	once      sync.Once
}

// startEgress starts goalrun's proxy on Unix sockets in a fresh per-run
// folder that the Engine can bind-mount into the agent container.
func (d *Docker) startEgress(ctx context.Context) (*dockerEgress, error) {
	ecfg := egress.Config{Allow: d.cfg.AllowHosts}
	for _, u := range d.cfg.Upstreams {
		ecfg.Upstreams = append(ecfg.Upstreams, egress.Upstream{URL: u.URL, Header: u.Header, Prefix: u.Prefix, Key: u.Key})
	}
	if d.opts.egressConfig != nil {
		d.opts.egressConfig(&ecfg)
	}
	proxy, err := egress.New(ecfg)
	if err != nil {
		return nil, fmt.Errorf("sandbox: docker: egress: %w", err)
	}
	base, hostBase, err := d.socketBase()
	if err != nil {
		proxy.Close()
		return nil, err
	}
	dir, err := os.MkdirTemp(base, "goalrun-egress-")
	if err != nil {
		proxy.Close()
		return nil, fmt.Errorf("sandbox: docker: egress socket folder in %s: %w", base, err)
	}
	d.track(func(c *createdSet) { c.dirs = append(c.dirs, dir) })
	if err := os.WriteFile(filepath.Join(dir, ownerFile), ownerFileContent(d.owner, d.expires), 0o600); err != nil {
		proxy.Close()
		return nil, fmt.Errorf("sandbox: docker: egress socket folder: %w", err)
	}
	e := &dockerEgress{proxy: proxy, dir: dir, hostDir: filepath.Join(hostBase, filepath.Base(dir))}
	names := []string{"proxy.sock"}
	for i := range d.cfg.Upstreams {
		names = append(names, fmt.Sprintf("up%d.sock", i))
	}
	for _, n := range names {
		l, err := net.Listen("unix", filepath.Join(dir, n))
		if err != nil {
			e.close()
			return nil, fmt.Errorf("sandbox: docker: egress socket %s: %w", filepath.Join(dir, n), err)
		}
		e.listeners = append(e.listeners, l)
		e.sockets = append(e.sockets, n)
	}
	if err := d.shareSockets(e); err != nil {
		e.close()
		return nil, err
	}
	for i, l := range e.listeners {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			if i == 0 {
				_ = proxy.ServeForward(l)
			} else {
				_ = proxy.ServeUpstream(l, i-1)
			}
		}()
	}
	return e, nil
}

// ownerFile in an egress socket folder names the goalrun process that made
// it and when its run expires, for Reap (see ownerFileContent).
const ownerFile = "owner"

// shareSockets lets the relay's user (relayUser), and only it, connect:
// the folder (0700) and the sockets (0600) belong to that user.
func (d *Docker) shareSockets(e *dockerEgress) error {
	uid, gid, _ := parseUser(relayUser())
	for _, n := range e.sockets {
		p := filepath.Join(e.dir, n)
		if err := os.Chmod(p, 0o600); err != nil {
			return fmt.Errorf("sandbox: docker: egress socket: %w", err)
		}
		if uid != os.Getuid() {
			if err := os.Chown(p, uid, gid); err != nil {
				return fmt.Errorf("sandbox: docker: egress socket: %w", err)
			}
		}
	}
	if uid != os.Getuid() {
		if err := os.Chown(e.dir, uid, gid); err != nil {
			return fmt.Errorf("sandbox: docker: egress socket folder: %w", err)
		}
	}
	return os.Chmod(e.dir, 0o700)
}

// socketBase picks the folder for the per-run socket folder: Config.SocketDir,
// os.TempDir(), HOME, then (in a container) any writable mount; the first
// one the Engine can see and that keeps socket paths short.
func (d *Docker) socketBase() (base, hostBase string, err error) {
	var cands []string
	if d.cfg.SocketDir != "" {
		cands = append(cands, d.cfg.SocketDir)
	} else {
		cands = append(cands, os.TempDir())
		if h, ok := d.opts.lookupEnv("HOME"); ok && h != "" {
			cands = append(cands, h)
		}
		if d.view.self != nil {
			for _, m := range d.view.self.Mounts {
				if m.RW && m.Destination != DockerRoot {
					cands = append(cands, m.Destination)
				}
			}
		}
	}
	var tried []string
	for _, c := range cands {
		real, err := filepath.EvalSymlinks(c)
		if err != nil {
			tried = append(tried, c+" (missing)")
			continue
		}
		if st, err := os.Stat(real); err != nil || !st.IsDir() {
			tried = append(tried, c+" (not a folder)")
			continue
		}
		h, ok := d.view.hostPath(real, true)
		if !ok {
			tried = append(tried, c+" (the Engine cannot see it)")
			continue
		}
		if len(real)+len("/goalrun-egress-0123456789/up15.sock") > maxSocketDirBytes+20 || len(h) > maxSocketDirBytes {
			tried = append(tried, c+" (path too long for Unix sockets)")
			continue
		}
		return real, h, nil
	}
	return "", "", fmt.Errorf("sandbox: docker: egress needs a folder both goalrun and the Engine at %s can see for its sockets; tried %s. Run goalrun on the Engine's host (or mount a folder into goalrun's container), or choose --network none",
		d.cli.DaemonHost(), strings.Join(tried, ", "))
}

// relayArgs are the relay's mappings: the forward proxy, then each upstream.
func (e *dockerEgress) relayArgs() []string {
	out := make([]string, len(e.sockets))
	for i, n := range e.sockets {
		out[i] = egress.Mapping{Listen: fmt.Sprintf("127.0.0.1:%d", relayProxyPort+i), Socket: path.Join(egressDir, n)}.String()
	}
	return out
}

// upstreamURL is the base URL agent steps use for upstream i.
func (e *dockerEgress) upstreamURL(i int) string {
	return fmt.Sprintf("http://127.0.0.1:%d", relayUpstreamPort+i)
}

// close stops the proxy and its listeners.
func (e *dockerEgress) close() {
	e.once.Do(func() {
		e.proxy.Close()
		for _, l := range e.listeners {
			l.Close()
		}
		e.wg.Wait()
	})
}

// watchRelay attaches to the (not yet started) agent container's output
// and reports on the returned channel once the relay printed RelayReadyLine,
// or an error with its stderr when it ended first. The output keeps being
// drained afterwards (bounded), so the relay never blocks on a full pipe.
func (d *Docker) watchRelay(ctx context.Context) (<-chan error, error) {
	hj, err := d.cli.ContainerAttach(ctx, d.agentID, container.AttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		return nil, fmt.Errorf("sandbox: docker: attaching to the relay: %w", err)
	}
	ready := make(chan error, 1)
	out := &readyWriter{want: []byte(RelayReadyLine + "\n"), ready: ready}
	errTail := NewTailWriter(nil, 4<<10)
	go func() {
		defer hj.Close()
		_, _ = stdcopy.StdCopy(out, errTail, hj.Reader)
		out.fail(fmt.Errorf("sandbox: docker: the relay (%s) ended before it listened: %s",
			strings.Join(d.relayCmd, " "), bytes.TrimSpace(errTail.Output().Tail)))
	}()
	return ready, nil
}

// readyWriter watches a stream for a line and reports once.
type readyWriter struct {
	mu    sync.Mutex
	buf   []byte
	want  []byte
	ready chan<- error
	done  bool
}

func (w *readyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	if bytes.Contains(w.buf, w.want) {
		w.done = true
		w.ready <- nil
		w.buf = nil
	} else if len(w.buf) > 4<<10 {
		w.buf = w.buf[len(w.buf)-len(w.want):]
	}
	return len(p), nil
}

func (w *readyWriter) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.done = true
		w.ready <- err
	}
}

var _ io.Writer = (*readyWriter)(nil)
