package sandbox

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/goalrun/goalrun/sandbox/egress"
)

// EngineNetworks makes and removes the per-run bridge network and lists
// dead runs' networks (Reap).
type EngineNetworks interface {
	NetworkCreate(ctx context.Context, name string, options network.CreateOptions) (network.CreateResponse, error)
	NetworkRemove(ctx context.Context, network string) error
	NetworkList(ctx context.Context, options network.ListOptions) ([]network.Summary, error)
}

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

	// peer is the uid, as goalrun's user namespace sees it, of the one
	// process whose connections the proxy serves: the relay.
	peer atomic.Int64
	// refused counts connections from anyone else.
	refused atomic.Int64
}

// startEgress starts goalrun's proxy on Unix sockets in a fresh per-run
// folder that the Engine can bind-mount into the agent container.
func (d *Docker) startEgress(ctx context.Context) (*dockerEgress, error) {
	return d.startEgressFor(ctx, d.cfg.AllowHosts, d.cfg.Upstreams)
}

// startEgressFor starts a proxy for allow and upstreams (the agent's, or
// the setup container's with no upstream) in a fresh socket folder.
func (d *Docker) startEgressFor(ctx context.Context, allow []string, upstreams []Upstream) (*dockerEgress, error) {
	ecfg := egress.Config{Allow: allow, AllowNets: d.cfg.EgressAllowNets, OutboundProxy: d.cfg.OutboundProxy}
	for _, u := range upstreams {
		ecfg.Upstreams = append(ecfg.Upstreams, egress.Upstream{URL: u.URL, Header: u.Header, Prefix: u.Prefix, Key: u.Key, Gateway: u.Gateway})
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
	e.peer.Store(int64(d.relayUID))
	names := []string{"proxy.sock"}
	for i := range upstreams {
		names = append(names, fmt.Sprintf("up%d.sock", i))
	}
	for _, n := range names {
		l, err := net.Listen("unix", filepath.Join(dir, n))
		if err != nil {
			e.close()
			return nil, fmt.Errorf("sandbox: docker: egress socket %s: %w", filepath.Join(dir, n), err)
		}
		e.listeners = append(e.listeners, &peerListener{Listener: l, e: e})
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

// shareSockets lets the relay's uid (relayUser), and only it, connect.
// Running as root, goalrun gives the folder (0700) and the sockets (0600)
// to that uid. Otherwise it cannot give files away: the folder (0700) and
// the sockets (0000: owner bits included, so the steps' uid — often
// goalrun's own — cannot connect from inside, where the read-only mount
// forbids a chmod) stay goalrun's, and a POSIX ACL entry lets the relay's
// uid in; on a file system without ACLs they are opened to
// all (0711, 0666) and the proxy's peer check (peerListener) is the only
// gate. The peer check applies in every case.
func (d *Docker) shareSockets(e *dockerEgress) error {
	uid := d.relayUID
	if os.Getuid() == 0 {
		for _, n := range e.sockets {
			p := filepath.Join(e.dir, n)
			if err := os.Chmod(p, 0o600); err != nil {
				return fmt.Errorf("sandbox: docker: egress socket: %w", err)
			}
			if err := os.Chown(p, uid, uid); err != nil {
				return fmt.Errorf("sandbox: docker: egress socket: %w", err)
			}
		}
		if err := os.Chown(e.dir, uid, uid); err != nil {
			return fmt.Errorf("sandbox: docker: egress socket folder: %w", err)
		}
		return os.Chmod(e.dir, 0o700)
	}
	type grant struct {
		path       string
		mode, open os.FileMode
		perm       uint16
	}
	// The owner keeps what goalrun needs: the folder, to remove it; never
	// the sockets (goalrun does not connect to its own proxy).
	grants := []grant{{e.dir, 0o700, 0o711, aclExec}}
	for _, n := range e.sockets {
		grants = append(grants, grant{filepath.Join(e.dir, n), 0, 0o666, aclRead | aclWrite})
	}
	for _, g := range grants {
		if err := os.Chmod(g.path, g.mode); err != nil {
			return fmt.Errorf("sandbox: docker: egress socket folder: %w", err)
		}
		err := syscall.Setxattr(g.path, "system.posix_acl_access", posixACL(uint16(g.mode>>6)&7, uid, g.perm), 0)
		if errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EOPNOTSUPP) {
			err = os.Chmod(g.path, g.open)
		}
		if err != nil {
			return fmt.Errorf("sandbox: docker: egress socket folder: granting the relay's uid %d access to %s: %w", uid, g.path, err)
		}
	}
	return nil
}

// POSIX ACL permission bits and entry tags, as Linux stores them in the
// system.posix_acl_access extended attribute (include/uapi/linux/
// posix_acl.h and posix_acl_xattr.h).
const (
	aclRead, aclWrite, aclExec = 4, 2, 1

	aclUserObj  = 0x01
	aclUser     = 0x02
	aclGroupObj = 0x04
	aclMask     = 0x10
	aclOther    = 0x20
	aclVersion  = 2
	aclNoID     = 0xffffffff
)

// posixACL encodes an access ACL: the owner owner's permissions, uid the
// permissions perm, nothing for the group and others.
func posixACL(owner uint16, uid int, perm uint16) []byte {
	b := binary.LittleEndian.AppendUint32(nil, aclVersion)
	add := func(tag, p uint16, id uint32) {
		b = binary.LittleEndian.AppendUint16(b, tag)
		b = binary.LittleEndian.AppendUint16(b, p)
		b = binary.LittleEndian.AppendUint32(b, id)
	}
	add(aclUserObj, owner, aclNoID)
	add(aclUser, perm, uint32(uid))
	add(aclGroupObj, 0, aclNoID)
	add(aclMask, perm, aclNoID)
	add(aclOther, 0, aclNoID)
	return b
}

// peerListener hands the proxy only connections whose peer (SO_PEERCRED,
// unix(7)) runs as the relay's uid; any other is closed at once, before a
// byte is read, and counted. The kernel records the peer's credentials at
// connect(), so no process of another uid can borrow the proxy and its key
// injection, whatever the file permissions allow.
type peerListener struct {
	net.Listener
	e *dockerEgress
}

// Accept returns the next connection from the relay.
func (l *peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if uid, err := peerUID(c); err == nil && int64(uid) == l.e.peer.Load() {
			return c, nil
		}
		c.Close()
		l.e.refused.Add(1)
	}
}

// peerUID reads the uid of a Unix socket connection's peer.
func peerUID(c net.Conn) (uint32, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0, errors.New("not a Unix socket connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, cerr
	}
	return cred.Uid, nil
}

// learnPeer sets the relay's uid as goalrun sees it from the container's
// main process (pid on goalrun's host, 0 when unknown): on an Engine with
// user namespaces (userns-remap) the relay's uid inside maps to another
// outside, and that is what SO_PEERCRED reports. When the process cannot
// be read (goalrun in a container of its own), the uid inside stands.
func (e *dockerEgress) learnPeer(pid, inside int) {
	if pid <= 0 {
		return
	}
	if uid, ok := procUID(pid); ok && uid != inside {
		e.peer.Store(int64(uid))
	}
}

// procUID reads a process's real uid from /proc/<pid>/status.
func procUID(pid int) (int, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				return 0, false
			}
			uid, err := strconv.Atoi(f[0])
			return uid, err == nil
		}
	}
	return 0, false
}

// The range a run's relay uid is picked from: systemd's unused 60578–61183
// ("Users, Groups, UIDs and GIDs on systemd Systems",
// https://systemd.io/UIDS-GIDS/), clear of regular users (up to 60000),
// systemd-homed (60001–60513), DynamicUser (61184–65519) and nobody
// (65534), and below 65536 so an Engine with user namespaces (a range of
// 65536 ids) can map it.
const relayUIDFirst, relayUIDLast = 60578, 61183

// pickRelayUID picks a run's relay uid (also its gid) at random in the
// relay range: one no account in /etc/passwd or /etc/group has, no process
// this host shows runs as (real, effective, saved or file-system ids:
// used, from relayIDsInUse), and not in exclude (the steps' uid and gid,
// goalrun's own).
func pickRelayUID(used, exclude map[int]bool) (int, error) {
	n := relayUIDLast - relayUIDFirst + 1
	start := rand.IntN(n)
	for i := 0; i < n; i++ {
		if id := relayUIDFirst + (start+i)%n; !used[id] && !exclude[id] {
			return id, nil
		}
	}
	return 0, fmt.Errorf("sandbox: docker: every uid from %d to %d is in use on this host; the egress relay needs one of its own", relayUIDFirst, relayUIDLast)
}

// relayIDsInUse returns the ids in the relay range that an account in
// /etc/passwd or /etc/group has or a process this host shows runs as (the
// Uid: and Gid: lines of /proc/<pid>/status). Every start reads it, beside
// the Engine's first answers: one read of each process's status.
func relayIDsInUse() map[int]bool {
	used := map[int]bool{}
	add := func(field []byte) {
		if id, err := strconv.Atoi(string(field)); err == nil && id >= relayUIDFirst && id <= relayUIDLast {
			used[id] = true
		}
	}
	for _, f := range []string{"/etc/passwd", "/etc/group"} {
		b, _ := os.ReadFile(f)
		for line := range bytes.Lines(b) {
			if parts := bytes.Split(line, []byte(":")); len(parts) > 2 {
				add(parts[2])
			}
		}
	}
	procs, _ := os.ReadDir("/proc")
	for _, e := range procs {
		if name := e.Name(); name == "" || name[0] < '0' || name[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		for _, key := range [][]byte{[]byte("\nUid:"), []byte("\nGid:")} {
			i := bytes.Index(b, key)
			if i < 0 {
				continue
			}
			line := b[i+len(key):]
			if j := bytes.IndexByte(line, '\n'); j >= 0 {
				line = line[:j]
			}
			for _, f := range bytes.Fields(line) {
				add(f)
			}
		}
	}
	return used
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
	return d.watchRelayOf(ctx, d.agentID, d.relayCmd)
}

// watchRelayOf is watchRelay for container id whose main process is
// relayCmd.
func (d *Docker) watchRelayOf(ctx context.Context, id string, relayCmd []string) (<-chan error, error) {
	hj, err := d.cli.ContainerAttach(ctx, id, container.AttachOptions{Stream: true, Stdout: true, Stderr: true})
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
			strings.Join(relayCmd, " "), bytes.TrimSpace(errTail.Output().Tail)))
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
