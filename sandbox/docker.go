package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/errdefs"

	"github.com/goalrun/goalrun/sandbox/egress"
)

// EngineSystem is the Engine's own state: whether it answers, what it is
// (Info, the address it is reached at) and the stream of its events (a
// container's death; docker_exec.go).
type EngineSystem interface {
	Ping(ctx context.Context) (types.Ping, error)
	Info(ctx context.Context) (system.Info, error)
	DaemonHost() string
	Events(ctx context.Context, options events.ListOptions) (<-chan events.Message, <-chan error)
}

// Paths inside every Docker sandbox.
const (
	// DockerRoot is where the workspace is mounted (or copied) inside the
	// sandbox; Posture.Root says the same.
	DockerRoot = "/workspace"
	// DockerHome is HOME inside the sandbox (a noexec tmpfs) unless
	// Config.Env sets HOME.
	DockerHome = "/home/goalrun"
	// MountRoot holds goalrun's own read-only additions to the sandbox:
	// the warm Go build cache (GoCacheTarget), agent executables from the
	// host (MountRoot/bin). It lies outside every host system folder
	// HostTools mounts, so the Engine can make mount points in it.
	MountRoot = "/goalrun"
	// relayPath is where the goalrun binary (the relay) is mounted.
	relayPath = "/.goalrun/goalrun"
	// relayDir holds relayPath when the binary is copied into a volume.
	relayDir = "/.goalrun"
	// egressDir is where the per-run egress socket folder is mounted.
	egressDir = "/run/goalrun/egress"
	// stepPidDir holds one pid file per agent step (the /run tmpfs, owned by
	// the sandbox user), read to kill the step's process group.
	stepPidDir = "/run"
)

// Defaults of Config's resource limits for Docker (docs/security.md,
// "Defaults of every container").
const (
	DefaultMemoryBytes = 4 << 30
	DefaultPidsLimit   = 512
	DefaultNanoCPUs    = 2e9
	// DefaultUID and DefaultGID are the sandbox user when the workspace
	// belongs to root and the workspace is copied (root is never chosen
	// implicitly).
	DefaultUID, DefaultGID = 1000, 1000
)

// Labels on everything a Docker sandbox creates (containers, networks,
// volumes), so Reap can find what a dead run left behind.
const (
	// LabelRun holds Config.RunID.
	LabelRun = "goalrun.run"
	// LabelRole is "agent", "check" or "relay-copy" on containers.
	LabelRole = "goalrun.role"
	// LabelOwner identifies the goalrun process that created the object:
	// "<hostname>[+<PID namespace inode>]/<pid>/<process start time in
	// clock ticks>"; the namespace is there when goalrun does not run in the
	// host's PID namespace (see ownerHost).
	LabelOwner = "goalrun.owner"
	// LabelExpires is when the run's objects are leftovers at the latest
	// (Unix seconds): start + Config.Lifetime (UnknownLifetime when 0) +
	// expiryGrace. Objects without it (made by older goalrun versions) are
	// judged by age.
	LabelExpires = "goalrun.expires"
)

// expiryGrace is added to Config.Lifetime for LabelExpires: the run's
// clean-up after its timeout, and clock differences between hosts.
const expiryGrace = 10 * time.Minute

// UnknownLifetime is the lifetime StartDocker labels a run with when
// Config.Lifetime is 0. A Reap that cannot check the owner process (it runs
// in another PID namespace or on another machine) would otherwise go by
// its own run timeout, and a goalrun with a short --timeout would remove
// the live sandbox of a longer run; a day outlasts any run goalrun allows
// by default, and leftovers whose owner can be checked are removed at once
// anyway.
const UnknownLifetime = 24 * time.Hour

// relayUser is the user of the agent container's main process (the relay,
// or the idle shell without one): the run's own relay identity
// (pickRelayUID), a uid nobody else uses and never the steps' — whether
// goalrun runs as root or not — so an agent can neither kill nor stop it
// (no CAP_KILL), and the egress proxy accepts connections from that uid
// alone (see shareSockets and peerListener).
func (d *Docker) relayUser() string {
	return strconv.Itoa(d.relayUID) + ":" + strconv.Itoa(d.relayUID)
}

// Relay ports inside the agent container in egress mode: the forward proxy,
// then one port per Config.Upstreams entry.
const (
	relayProxyPort    = 3128
	relayUpstreamPort = 3129
)

// stepKillWait bounds how long Exec waits for a step's streams to end after
// its process group was killed, before it kills the whole container.
const stepKillWait = 5 * time.Second

// relayReadyWait bounds how long StartDocker waits for the relay to report
// that it listens.
const relayReadyWait = 30 * time.Second

// apiTimeout bounds Engine calls made on cleanup paths, where the caller's
// context may already be done.
const apiTimeout = 30 * time.Second

var runIDPattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$`)

// lifetimeGrace is what the agent container's main process lives beyond
// Config.Lifetime: cleanup and the last copy-out take place after the
// run's timeout.
const lifetimeGrace = 10 * time.Minute

// unknownLifetime bounds the agent container's main process when the run
// has no timeout (Config.Lifetime 0): 24 hours.
const unknownLifetime = 24 * time.Hour

// containerLifetime is how long the agent container's main process runs
// before it ends by itself (then the container stops): Config.Lifetime plus
// lifetimeGrace, or unknownLifetime. goalrun stops it long before, on every
// exit path it lives to see; this bounds the one it does not (SIGKILL).
// A later step restarts a stopped container (ensureAgent).
func (d *Docker) containerLifetime() time.Duration {
	if d.cfg.Lifetime > 0 {
		return (d.cfg.Lifetime + lifetimeGrace).Round(time.Second)
	}
	return unknownLifetime
}

// Docker is the sandbox that runs steps in hardened containers on a Docker
// Engine: one long-lived agent container per run (steps are execs in it) and
// a fresh, network-less, secret-less container per check step. See
// docs/security.md for the policy and StartDocker for how it is applied.
//
// Where it adds to the defaults of docs/security.md, and why:
//   - Steps need a POSIX sh in the image (only the relay needs nothing but a
//     kernel): the Engine cannot signal an exec's processes, so each step
//     starts through a tiny sh wrapper that records its process group for
//     the timeout kill (stepWrapper). Checks need sh anyway (`sh -c`).
//   - The agent container is frozen (docker pause) while a check runs, so a
//     process the agent left behind cannot rewrite the shared workspace
//     during the check; the fresh check container alone would not stop that
//     in bind mode.
//   - A workspace owned by root is copied in auto mode: the sandbox user is
//     never root implicitly, and could not write a root-owned bind mount.
//   - The relay runs as a uid of its own (relayUser: reserved per run, never
//     the steps'), so an agent cannot kill or stop it; the proxy sockets
//     are given to that uid alone and the proxy checks every connection's
//     peer (SO_PEERCRED) is that uid.
//   - Containers use the "none" log driver: a step printing gigabytes
//     streams to goalrun and never fills the Engine's disk.
//   - Copy mode prepares its volume with a throwaway container that holds
//     CAP_CHOWN only (chownVolumeRoot): the archive API never changes the
//     owner of the folder it extracts into.
//   - Egress needs the Engine on goalrun's host (Unix sockets do not cross
//     machines); with a remote Engine only none, bridge and host work.
type Docker struct {
	cli  DockerAPI
	cfg  Config
	opts dockerOptions

	user     string // "uid:gid"
	uid, gid int
	home     string
	image    string // the reference as given
	imageID  string
	digest   string
	info     system.Info
	// confirmed returns nil once the live info agrees with info (at once
	// when info is the live one; ErrEngineChanged when it disagrees):
	// what is probed on the Engine is remembered as info's only then.
	confirmed  func(context.Context) error
	view       engineView
	wsMode     WorkspaceMode
	wsVolume   string // copy mode: the workspace volume
	wsPath     string // copy mode: the workspace volume's folder on the Engine's host
	wsSource   string // bind mode: mountSrc as the Engine's host sees it
	mountSrc   string // what is mounted at DockerRoot: the workspace, or the git repository root above it
	root       string // the workspace inside the sandbox: DockerRoot, or below it when mountSrc is wider
	extraMnts  []mount.Mount
	netName    string // bridge: the per-run network
	netMode    container.NetworkMode
	agentID    string
	agentName  string                // the agent container's name (createAgent)
	agentCfg   *container.Config     // what the agent container was created with,
	agentHC    *container.HostConfig // for recreateAgent
	agentEnv   []string
	checkEnv   []string
	relayCmd   []string // main process of the agent container
	owner      string
	expires    string // LabelExpires
	secrets    []string
	egress     *dockerEgress // nil unless NetworkEgress
	relayUID   int           // the main process's (the relay's) uid and gid (relayUser)
	postureFix Posture       // inspected once at start
	deps       runDeps       // Config.Setup: the deps volume and the setup container (docker_deps.go)
	relayMount mount.Mount   // the relay binary as the agent container mounts it

	mu        sync.Mutex
	closed    bool
	closing   chan struct{} // closed by Close: running steps stop
	steps     sync.WaitGroup
	agentBusy int  // agent steps running
	agentDead bool // the agent container is not running (not started yet, or killed); start it before the next agent step
	agentRan  bool // the agent container was started at least once
	paused    bool // a check is freezing, or froze, the agent container
	frozen    bool // the agent container is frozen and stays so until thaw (the next agent step)
	stepSeq   int
	checks    map[string]struct{} // check containers alive
	removals  sync.WaitGroup      // background removals of finished check containers
	created   createdSet
	copyOutMu sync.Mutex

	// views hands out the check steps' views of the workspace
	// (docker_view.go); nil until start prepares them.
	views *views
	// gitEntries are the .git folders and files the workspace held at
	// start, gitConfigs the sanitized copies of their configs that carry
	// credentials (bind mode; docker_git.go).
	gitEntries []gitEntry
	// ownedFiles are goalrun's own files (Config.HostOwned) that exist as
	// regular files in the bind-mounted folder at start, as slash paths
	// relative to it: mounted read-only in the agent container.
	ownedFiles []string
	gitConfigs []gitConfig

	// sweep removes the setuid and setgid bits the agent sets (bind
	// mode; docker_workspace.go).
	sweep bindSweep
}

var _ Sandbox = (*Docker)(nil)

// createdSet records what a run created, for Close.
type createdSet struct {
	containers []string
	volumes    []string
	networks   []string
	dirs       []string // host folders (egress sockets)
}

// DockerOption adjusts StartDocker.
type DockerOption func(*dockerOptions)

type dockerOptions struct {
	egressConfig func(*egress.Config)
	lookupEnv    func(string) (string, bool)
	hostname     string
	now          func() time.Time
	info         *system.Info
	infoCheck    func(context.Context) (system.Info, error)
	facts        EngineFacts
}

// WithEngineFacts lets StartDocker use (and keep) remembered answers about
// the Engine instead of probing it on every run (EngineFacts); without it
// every run probes.
func WithEngineFacts(f EngineFacts) DockerOption {
	return func(o *dockerOptions) { o.facts = f }
}

// WithEngineInfo gives StartDocker the Engine's Info that the caller read
// from the same client moments before (after a successful Ping), so the
// start does not ask again: one round trip fewer on the way to the first
// check.
func WithEngineInfo(info system.Info) DockerOption {
	return func(o *dockerOptions) { o.info = &info }
}

// WithEgressConfig lets a caller adjust the egress proxy's configuration
// before it starts (tests inject a resolver, a dialer, TLS roots and
// loopback upstreams). Production code does not use it.
func WithEgressConfig(f func(*egress.Config)) DockerOption {
	return func(o *dockerOptions) { o.egressConfig = f }
}

// WithDockerHostEnv makes StartDocker read goalrun's environment (HOME,
// HOSTNAME, credential paths for the mount policy) through lookup instead of
// os.LookupEnv.
func WithDockerHostEnv(lookup func(string) (string, bool)) DockerOption {
	return func(o *dockerOptions) { o.lookupEnv = lookup }
}

// StartDocker prepares the run's agent container on the Engine behind cli
// (created, started by the first agent step) and returns the sandbox; the
// caller must Close it on every exit path.
//
// It applies every default of docs/security.md: cap-drop ALL, no-new-privileges,
// the Engine's default seccomp profile, a read-only root with tmpfs /tmp
// (exec), HOME (noexec) and /run, a non-root numeric user (Config.User, else
// the workspace owner; root is never chosen implicitly), pids/memory (no
// extra swap)/CPU limits, an init process, private IPC and cgroup
// namespaces, Docker's masked and read-only /proc paths (MaskedPaths and
// ReadonlyPaths are left nil) and the label goalrun.run=<RunID> on every
// container, network and volume. It refuses a workspace or mount that
// resolves to a runtime socket, "/", the home folder, ~/.ssh or another
// credential folder (ErrDangerousMount). The image must already exist on the
// Engine (nothing is pulled; see BuildImage).
//
// Network: none and egress give the agent container NetworkMode none; egress
// starts goalrun's proxy on Unix sockets in a per-run folder that is
// bind-mounted into the container, where the relay (Config.RelayBinary,
// running as the container's main process) listens on 127.0.0.1 and forwards
// to them. bridge gets a per-run bridge network, host the host's.
//
// Workspace: a workspace inside a git repository (below its root) gets the
// repository root mounted instead, so git works in the sandbox; steps still
// start in the workspace (Posture.Root is below DockerRoot) and
// Posture.Mount records the wider path. bind mounts it at DockerRoot,
// translating the path through goalrun's own container's mounts when
// goalrun runs in a container on the same Engine; copy puts the tree into a
// per-run volume before the first step and copies the changes out after
// each agent step (the host tree is read once, at start); auto picks bind
// when the Engine can see the workspace (and its owner is not root), else
// copy.
//
// The posture is read back from ContainerInspect and Info. Errors name what
// failed and what to do; an error wrapping ErrDangerousMount means a mount
// was refused. On error, everything created so far is removed.
func StartDocker(ctx context.Context, cli DockerAPI, cfg Config, options ...DockerOption) (*Docker, error) {
	cli = bounded(cli) // no Engine call can hang the run (engine_guard.go)
	opts := dockerOptions{lookupEnv: os.LookupEnv, now: time.Now}
	for _, o := range options {
		o(&opts)
	}
	if opts.hostname == "" {
		if h, ok := opts.lookupEnv("HOSTNAME"); ok && h != "" {
			opts.hostname = h
		} else if h, err := os.Hostname(); err == nil {
			opts.hostname = h
		}
	}
	d := &Docker{
		cli:     cli,
		cfg:     cfg,
		opts:    opts,
		closing: make(chan struct{}),
		checks:  map[string]struct{}{},
		owner:   ownerLabel(ownerHost(opts.hostname)),
	}
	lifetime := cfg.Lifetime
	if lifetime <= 0 {
		lifetime = UnknownLifetime
	}
	d.expires = strconv.FormatInt(opts.now().Add(lifetime+expiryGrace).Unix(), 10)
	if err := d.start(ctx); err != nil {
		cctx, cancel := bg(ctx)
		defer cancel()
		if cerr := d.Close(cctx); cerr != nil {
			err = fmt.Errorf("%w (cleaning up also failed: %v)", err, cerr)
		}
		return nil, err
	}
	return d, nil
}

func (d *Docker) start(ctx context.Context) error {
	cfg := d.cfg
	if !runIDPattern.MatchString(cfg.RunID) {
		return fmt.Errorf("sandbox: docker: run id %q must be 1-128 letters, digits, '_', '.' or '-', starting with a letter or digit", cfg.RunID)
	}
	if cfg.Image == "" {
		return errors.New("sandbox: docker: no image given; build one with sandbox.BuildImage (goalrun demo does) or pass --image")
	}
	switch cfg.Network {
	case "", NetworkNone, NetworkEgress, NetworkBridge, NetworkHost:
	default:
		return fmt.Errorf("sandbox: docker: unknown network mode %q (want none, egress, bridge or host)", cfg.Network)
	}
	if cfg.Network == "" {
		d.cfg.Network = NetworkNone
		cfg.Network = NetworkNone
	}
	ws, err := workspaceDir(cfg.Workspace)
	if err != nil {
		return err
	}
	d.cfg.Workspace = ws
	d.mountSrc, d.root = ws, DockerRoot
	// The ids the relay's uid must avoid are read beside the Engine's
	// answers below.
	relayIDs := make(chan map[int]bool, 1)
	go func() { relayIDs <- relayIDsInUse() }()

	// A given info that is to be confirmed (WithEngineInfoCheck) is
	// confirmed while the start goes on: before any container starts
	// (gateStarts) and before StartDocker returns. Until then only what
	// runs nothing is done (look-ups, creations, copies into volumes);
	// a disagreement removes it all (ErrEngineChanged).
	confirmEngine := func(context.Context) error { return nil }
	if d.opts.info != nil {
		d.info = *d.opts.info
		if check := d.opts.infoCheck; check != nil {
			remembered, host := d.info, d.cli.DaemonHost()
			confirmEngine = onceConfirmed(func(ctx context.Context) error {
				live, err := check(ctx)
				if err != nil {
					return fmt.Errorf("sandbox: docker: reading the Engine's info at %s: %w", host, err)
				}
				if !SameEngine(live, remembered) {
					return ErrEngineChanged
				}
				return nil
			})
			d.cli = gateStarts(d.cli, confirmEngine)
		}
	} else {
		if _, err := d.cli.Ping(ctx); err != nil {
			return fmt.Errorf("sandbox: docker: no Docker Engine answers at %s: %w; start the Engine or choose --sandbox local", d.cli.DaemonHost(), err)
		}
		info, err := d.cli.Info(ctx)
		if err != nil {
			return fmt.Errorf("sandbox: docker: reading the Engine's info at %s: %w", d.cli.DaemonHost(), err)
		}
		d.info = info
	}
	d.confirmed = confirmEngine
	info := d.info

	home, _ := d.opts.lookupEnv("HOME")
	policy := newMountPolicy(home, d.opts.lookupEnv, d.cli.DaemonHost())
	if r := info.DockerRootDir; r != "" && filepath.IsAbs(r) {
		policy.addTree(r, "the Docker Engine's data root (docker info: Docker Root Dir)")
	}
	if err := policy.check("workspace", ws); err != nil {
		return err
	}
	// A workspace inside a git repository (a monorepo's subfolder) gets
	// the repository's root mounted, so git works inside; steps still
	// start in the workspace, and the posture's mount records the wider
	// path. A root the mount policy refuses (a home folder kept in git)
	// is not widened to.
	if repo := repoRootAbove(ws); repo != "" && policy.check("repository root", repo) == nil {
		rel, err := filepath.Rel(repo, ws)
		if err == nil && filepath.IsLocal(rel) {
			d.mountSrc, d.root = repo, path.Join(DockerRoot, filepath.ToSlash(rel))
		}
	}
	for i, m := range cfg.Mounts {
		if err := policy.check(mountName(i, m), m.Source); err != nil {
			return err
		}
	}
	for i, m := range cfg.Mounts {
		what := mountName(i, m)
		if !path.IsAbs(m.Target) || path.Clean(m.Target) != m.Target || m.Target == "/" {
			return fmt.Errorf("%w: %s: target %q must be a clean absolute path other than /", ErrMountTarget, what, m.Target)
		}
		for _, own := range []string{DockerRoot, "/tmp", "/run", relayDir, d.homeTarget()} {
			if m.Target == own || isUnder(m.Target, own) || isUnder(own, m.Target) {
				return fmt.Errorf("%w: %s: target %q would cover or hide %s, which the sandbox itself provides; mount it elsewhere (e.g. /mnt/…)", ErrMountTarget, what, m.Target, own)
			}
		}
		for j, o := range cfg.Mounts {
			if j == i {
				continue
			}
			if o.Target == m.Target {
				return fmt.Errorf("%w: %s and %s both mount at %s; give one another target", ErrMountTarget, what, mountName(j, o), m.Target)
			}
			if o.ReadOnly && isUnder(m.Target, o.Target) {
				return fmt.Errorf("%w: %s: target %q lies inside %s, mounted read-only at %s, where the Engine cannot make its mount point; mount it elsewhere (e.g. /mnt/…)", ErrMountTarget, what, m.Target, mountName(j, o), o.Target)
			}
		}
	}

	id, digest, err := lookupImage(ctx, d.cli, cfg.Image, d.cli.DaemonHost())
	if err != nil {
		return err
	}
	d.image, d.imageID, d.digest = cfg.Image, id, digest

	d.view = detectEngineView(ctx, d.cli, info, d.opts.hostname)
	owner, err := ownerOf(ws)
	if err != nil {
		return err
	}
	if err := d.chooseWorkspace(owner); err != nil {
		return err
	}
	if d.wsSource != "" && d.wsSource != d.mountSrc {
		// The Engine's host names the workspace otherwise (goalrun runs
		// in a container): its data root is a path on that host.
		if err := policy.check("workspace on the Engine's host", d.wsSource); err != nil {
			return err
		}
	}
	if err := d.chooseUser(owner); err != nil {
		return err
	}
	uid, err := pickRelayUID(<-relayIDs, map[int]bool{d.uid: true, d.gid: true, os.Getuid(): true, os.Getgid(): true})
	if err != nil {
		return err
	}
	d.relayUID = uid
	d.home = DockerHome
	if h := cfg.Env["HOME"]; h != "" {
		if !path.IsAbs(h) || path.Clean(h) != h || h == "/" || h == DockerRoot || isUnder(h, DockerRoot) || isUnder(DockerRoot, h) {
			return fmt.Errorf("sandbox: docker: Config.Env HOME %q must be a clean absolute path outside %s (it becomes a tmpfs)", h, DockerRoot)
		}
		d.home = h
	}

	if err := checkAgentFiles(cfg.AgentFiles, d.home); err != nil {
		return err
	}
	if err := agentFilesOverlap(cfg.AgentFiles, cfg.Mounts); err != nil {
		return err
	}
	// No mount may show the workspace whole, nor this run's other private
	// paths or what the host tools left out (runKeepOuts, HostLeftOut),
	// as the Engine's host names them.
	private := policy.withKeepOuts(runKeepOuts(d.opts.lookupEnv, func(p string) (string, bool) { return d.view.hostPath(p, false) }, ws)).withLeftOut(cfg.HostLeftOut)
	for i, m := range cfg.Mounts {
		src := filepath.Clean(m.Source)
		if !m.EngineHost {
			var ok bool
			src, ok = d.view.hostPath(m.Source, false)
			if !ok {
				return fmt.Errorf("sandbox: docker: %s: the Engine at %s cannot see %q (it does not share goalrun's filesystem); copy what the step needs into the image instead", mountName(i, m), d.cli.DaemonHost(), m.Source)
			}
			if src != m.Source {
				if err := policy.check(mountName(i, m)+" on the Engine's host", src); err != nil {
					return err
				}
			}
		}
		if err := private.check(mountName(i, m), src); err != nil {
			return err
		}
		d.extraMnts = append(d.extraMnts, mount.Mount{Type: mount.TypeBind, Source: src, Target: m.Target, ReadOnly: m.ReadOnly})
	}

	if err := d.setupNetwork(ctx); err != nil {
		return err
	}
	if d.wsMode == WorkspaceCopy {
		name := "goalrun-" + cfg.RunID + "-ws"
		vol, err := d.createVolumeWith(ctx, name, "workspace", nil)
		if err != nil {
			return fmt.Errorf("sandbox: docker: creating the workspace volume %s: %w", name, err)
		}
		d.wsVolume, d.wsPath = name, vol.Mountpoint
	}
	for k := range cfg.ToolEnv {
		if _, secret := cfg.Secrets[k]; secret || slices.Contains(proxyEnv, k) || k == "HOME" {
			return fmt.Errorf("sandbox: docker: Config.ToolEnv %s: a secret, a proxy setting or HOME cannot go into every step (check steps get neither)", k)
		}
	}
	if err := d.startSetup(ctx); err != nil {
		return err
	}
	d.buildEnv()
	if err := d.scanGit(); err != nil {
		return err
	}
	lower := d.wsSource
	if d.wsMode == WorkspaceCopy {
		lower = d.wsPath
	}
	// The check views are prepared while the agent container starts.
	d.startViews(ctx, lower, d.gitConfigFiles())
	if err := d.createAgent(ctx); err != nil {
		return err
	}
	if err := d.viewsReady(ctx); err != nil {
		return err
	}
	if err := confirmEngine(ctx); err != nil {
		return err
	}
	return d.readPosture(ctx)
}

// workspaceDir returns the workspace as an absolute, clean path after
// checking that it is a directory.
func workspaceDir(ws string) (string, error) {
	if ws == "" {
		return "", errors.New("sandbox: docker: no workspace given")
	}
	abs, err := filepath.Abs(ws)
	if err != nil {
		return "", fmt.Errorf("sandbox: docker: workspace %q: %w", ws, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("sandbox: docker: workspace %q: %w", ws, err)
	}
	st, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("sandbox: docker: workspace %q: %w", ws, err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("sandbox: docker: workspace %q is not a directory", ws)
	}
	return real, nil
}

// fileOwner is a uid/gid pair.
type fileOwner struct{ uid, gid int }

func ownerOf(p string) (fileOwner, error) {
	st, err := os.Stat(p)
	if err != nil {
		return fileOwner{}, fmt.Errorf("sandbox: docker: workspace %q: %w", p, err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return fileOwner{}, fmt.Errorf("sandbox: docker: cannot read the owner of the workspace %q on this system; set Config.User", p)
	}
	return fileOwner{int(sys.Uid), int(sys.Gid)}, nil
}

// chooseWorkspace settles bind or copy (see StartDocker).
func (d *Docker) chooseWorkspace(owner fileOwner) error {
	mode := d.cfg.WorkspaceMode
	if mode == "" {
		mode = WorkspaceAuto
	}
	src, visible := d.view.hostPath(d.mountSrc, true)
	switch mode {
	case WorkspaceBind:
		if !visible {
			return fmt.Errorf("sandbox: docker: workspace %q cannot be bind-mounted: the Engine at %s does not share goalrun's filesystem (and no mount of goalrun's own container holds it writable); use --workspace copy or auto", d.cfg.Workspace, d.cli.DaemonHost())
		}
		d.wsMode, d.wsSource = WorkspaceBind, src
	case WorkspaceCopy:
		d.wsMode = WorkspaceCopy
	case WorkspaceAuto:
		// A root-owned workspace is copied: a bind mount would make the
		// non-root sandbox user unable to write it (root is never chosen
		// implicitly), while copied files can belong to that user.
		if visible && (owner.uid != 0 || d.cfg.User != "") {
			d.wsMode, d.wsSource = WorkspaceBind, src
		} else {
			d.wsMode = WorkspaceCopy
		}
	default:
		return fmt.Errorf("sandbox: docker: unknown workspace mode %q (want bind, copy or auto)", mode)
	}
	return nil
}

// chooseUser settles the numeric user steps run as.
func (d *Docker) chooseUser(owner fileOwner) error {
	if u := d.cfg.User; u != "" {
		uid, gid, err := parseUser(u)
		if err != nil {
			return err
		}
		d.uid, d.gid = uid, gid
		d.user = strconv.Itoa(uid) + ":" + strconv.Itoa(gid)
		return nil
	}
	if owner.uid == 0 {
		if d.wsMode == WorkspaceBind {
			return &RootWorkspaceError{Workspace: d.cfg.Workspace}
		}
		d.uid, d.gid = DefaultUID, DefaultGID
	} else {
		d.uid, d.gid = owner.uid, owner.gid
	}
	d.user = strconv.Itoa(d.uid) + ":" + strconv.Itoa(d.gid)
	return nil
}

// parseUser reads "uid" or "uid:gid" (numeric; names depend on the image's
// /etc/passwd, which a posture could not vouch for).
func parseUser(u string) (uid, gid int, err error) {
	us, gs, hasG := strings.Cut(u, ":")
	uid, err = strconv.Atoi(us)
	if err != nil || uid < 0 {
		return 0, 0, fmt.Errorf("sandbox: docker: user %q must be numeric uid[:gid], e.g. 1000:1000", u)
	}
	gid = uid
	if hasG {
		if gid, err = strconv.Atoi(gs); err != nil || gid < 0 {
			return 0, 0, fmt.Errorf("sandbox: docker: user %q must be numeric uid[:gid], e.g. 1000:1000", u)
		}
	}
	return uid, gid, nil
}

// setupNetwork creates what the network mode needs.
func (d *Docker) setupNetwork(ctx context.Context) error {
	switch d.cfg.Network {
	case NetworkNone:
		d.netMode = network.NetworkNone
	case NetworkHost:
		d.netMode = network.NetworkHost
	case NetworkBridge:
		// A per-run bridge network keeps the sandbox away from other
		// containers on Docker's default bridge.
		name := "goalrun-" + d.cfg.RunID
		if err := d.createNetwork(ctx, name); err != nil {
			return fmt.Errorf("sandbox: docker: creating the bridge network %s: %w", name, err)
		}
		d.netName = name
		d.netMode = container.NetworkMode(name)
	case NetworkEgress:
		d.netMode = network.NetworkNone
		eg, err := d.startEgress(ctx)
		if err != nil {
			return err
		}
		d.egress = eg
	}
	return nil
}

// labels returns the labels of an object the run creates.
func (d *Docker) labels(role string) map[string]string {
	l := map[string]string{LabelRun: d.cfg.RunID, LabelRole: role, LabelOwner: d.owner}
	if d.expires != "" {
		l[LabelExpires] = d.expires
	}
	return l
}

func (d *Docker) track(f func(*createdSet)) {
	d.mu.Lock()
	f(&d.created)
	d.mu.Unlock()
}

// buildEnv settles the base environments of agent and check steps (sorted
// KEY=VALUE; the image's own ENV comes first, through the Engine).
func (d *Docker) buildEnv() {
	a := map[string]string{"HOME": d.home}
	for k, v := range d.cfg.ToolEnv {
		a[k] = v
	}
	for k, v := range d.cfg.Env {
		a[k] = v
	}
	secrets := map[string]bool{}
	for i, u := range d.cfg.Upstreams {
		switch {
		case d.egress != nil:
			if u.BaseURLEnv != "" {
				a[u.BaseURLEnv] = d.egress.upstreamURL(i)
			}
			if u.KeyEnv != "" {
				a[u.KeyEnv] = DummyKey
			}
		default:
			if u.BaseURLEnv != "" && u.URL != "" {
				a[u.BaseURLEnv] = u.URL
			}
			if u.KeyEnv != "" && u.Key != "" {
				a[u.KeyEnv] = u.Key
				secrets[u.KeyEnv] = true
			}
		}
	}
	if d.egress != nil {
		proxy := fmt.Sprintf("http://127.0.0.1:%d", relayProxyPort)
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
			a[k] = proxy
		}
		for _, k := range []string{"NO_PROXY", "no_proxy"} {
			a[k] = "localhost,127.0.0.1,::1"
		}
	}
	for k, v := range d.cfg.Secrets {
		a[k] = v
		if v != "" {
			secrets[k] = true
		}
	}
	for k, v := range d.cfg.Setup.CheckEnv {
		a[k] = v
	}
	d.agentEnv = envList(a)
	c := map[string]string{"HOME": d.home}
	for k, v := range d.cfg.ToolEnv {
		c[k] = v
	}
	for k, v := range d.cfg.Setup.CheckEnv {
		c[k] = v
	}
	d.checkEnv = envList(c)
	d.secrets = make([]string, 0, len(secrets))
	for k := range secrets {
		d.secrets = append(d.secrets, k)
	}
	sort.Strings(d.secrets)
}

// hostConfig is the hardened HostConfig shared by agent and check
// containers; netMode and extra mounts differ.
func (d *Docker) hostConfig(netMode container.NetworkMode, mounts []mount.Mount) *container.HostConfig {
	mem := d.cfg.MemoryBytes
	if mem <= 0 {
		mem = DefaultMemoryBytes
	}
	pids := d.cfg.PidsLimit
	if pids <= 0 {
		pids = DefaultPidsLimit
	}
	cpus := d.cfg.NanoCPUs
	if cpus <= 0 {
		cpus = DefaultNanoCPUs
	}
	init := true
	ids := fmt.Sprintf("uid=%d,gid=%d", d.uid, d.gid)
	return &container.HostConfig{
		NetworkMode:    netMode,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		ReadonlyRootfs: true,
		Privileged:     false,
		Tmpfs: map[string]string{
			"/tmp": "rw,nosuid,nodev,exec,mode=1777",
			d.home: "rw,nosuid,nodev,noexec,mode=0700," + ids,
			"/run": "rw,nosuid,nodev,noexec,mode=0755," + ids,
		},
		IpcMode:      container.IPCModePrivate,
		CgroupnsMode: container.CgroupnsModePrivate,
		Init:         &init,
		Resources: container.Resources{
			Memory:     mem,
			MemorySwap: mem, // memory + swap = memory: no extra swap
			NanoCPUs:   cpus,
			PidsLimit:  &pids,
		},
		// MaskedPaths and ReadonlyPaths stay nil: nil keeps Docker's masking
		// of /proc/kcore, /proc/keys, /sys/firmware…; an empty slice would
		// turn it off.
		Mounts:     mounts,
		LogConfig:  container.LogConfig{Type: "none"},
		AutoRemove: false,
	}
}

// workspaceMount is the workspace as the containers mount it.
func (d *Docker) workspaceMount() mount.Mount {
	if d.wsMode == WorkspaceCopy {
		// NoCopy: the image's own files at DockerRoot never enter the tree.
		return mount.Mount{Type: mount.TypeVolume, Source: d.wsVolume, Target: DockerRoot, VolumeOptions: &mount.VolumeOptions{NoCopy: true}}
	}
	return mount.Mount{Type: mount.TypeBind, Source: d.wsSource, Target: DockerRoot}
}

// createAgent creates the agent container (started by the first agent
// step: deferAgentStart); its main process is the relay (or an idle
// shell), and steps are execs in it.
func (d *Docker) createAgent(ctx context.Context) error {
	mounts := []mount.Mount{d.workspaceMount()}
	if len(d.gitEntries) > 0 || len(d.ownedFiles) > 0 {
		gitPath, err := d.gitConfigPath(ctx)
		if err != nil {
			return err
		}
		mounts = append(mounts, d.gitMounts(false, gitPath)...)
	}
	mounts = append(mounts, d.extraMnts...)
	files, err := d.prepareAgentFiles(ctx)
	if err != nil {
		return err
	}
	mounts = append(mounts, files...)
	var relayVolume string
	switch {
	case d.cfg.RelayBinary != "":
		bin, err := filepath.EvalSymlinks(d.cfg.RelayBinary)
		if err != nil {
			return fmt.Errorf("sandbox: docker: relay binary %q: %w", d.cfg.RelayBinary, err)
		}
		if src, ok := d.view.hostPath(bin, false); ok {
			d.relayMount = mount.Mount{Type: mount.TypeBind, Source: src, Target: relayPath, ReadOnly: true}
			mounts = append(mounts, d.relayMount)
		} else {
			// The Engine cannot see the binary (goalrun runs in an image,
			// or the Engine is remote): copy it into a root-owned volume
			// before the container starts.
			relayVolume = "goalrun-" + d.cfg.RunID + "-relay"
			if err := d.createVolume(ctx, relayVolume, "relay"); err != nil {
				return fmt.Errorf("sandbox: docker: creating the relay volume: %w", err)
			}
			mounts = append(mounts, mount.Mount{Type: mount.TypeVolume, Source: relayVolume, Target: relayDir})
			d.relayMount = mount.Mount{Type: mount.TypeVolume, Source: relayVolume, Target: relayDir, ReadOnly: true}
		}
		d.relayCmd = []string{relayPath, "__relay", "--lifetime", d.containerLifetime().String()}
		if d.egress != nil {
			d.relayCmd = append(d.relayCmd, d.egress.relayArgs()...)
		}
	case d.egress != nil:
		return errors.New("sandbox: docker: egress needs the relay: set Config.RelayBinary to a static goalrun binary (goalrun's own executable)")
	default:
		// No relay: idle on the image's shell. Checks need sh anyway.
		d.relayCmd = []string{"sh", "-c", fmt.Sprintf("trap 'exit 0' TERM; sleep %d & wait $!", int64(d.containerLifetime().Seconds()))}
	}
	if d.egress != nil {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: d.egress.hostDir, Target: egressDir, ReadOnly: true})
	}
	mounts = append(mounts, d.depsMount(true)...)

	var chowned chan error
	if d.wsMode == WorkspaceCopy || d.deps.volume != "" && !d.depsReused() {
		// In parallel with creating the agent container: give the
		// volume's root folder to the sandbox user.
		chowned = make(chan error, 1)
		go func() { chowned <- d.chownVolumeRoot(ctx) }()
	}

	// The main process (the relay, or the idle shell) keeps the
	// container's self-ending timer: never the agent's to kill or stop.
	mainUser := d.relayUser()
	cfg := &container.Config{
		Image:      d.imageID,
		Cmd:        d.relayCmd,
		Entrypoint: []string{},
		User:       mainUser,
		WorkingDir: d.root,
		Env:        []string{"HOME=" + d.home},
		Labels:     d.labels("agent"),
		// The relay's stdout says when it listens (see waitRelay).
		AttachStdout: true,
		AttachStderr: true,
	}
	hc := d.hostConfig(d.netMode, mounts)
	name := "goalrun-" + d.cfg.RunID + "-agent"
	id, err := d.createContainer(ctx, cfg, hc, name, func(ref string) {
		d.track(func(c *createdSet) { c.containers = append(c.containers, ref) })
	})
	if err != nil {
		if chowned != nil {
			<-chowned
		}
		return fmt.Errorf("sandbox: docker: creating the agent container from %s: %w", d.image, err)
	}
	d.agentID, d.agentName, d.agentCfg, d.agentHC = id, name, cfg, hc

	if relayVolume != "" {
		if err := d.copyRelayIn(ctx); err != nil {
			return err
		}
	}
	if d.wsMode == WorkspaceCopy {
		err := d.copyIn(ctx)
		if cerr := <-chowned; err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	} else if chowned != nil {
		if err := <-chowned; err != nil {
			return err
		}
	}
	d.deferAgentStart()
	if d.wsMode == WorkspaceBind {
		if err := d.verifyBind(ctx); err != nil {
			return err
		}
		keep, err := specialBitFiles(d.mountSrc, false)
		if err != nil {
			return fmt.Errorf("sandbox: docker: reading the workspace %q before the agent runs: %w", d.mountSrc, err)
		}
		d.sweep.keep = specialKeys(keep)
	}
	return nil
}

// deferAgentStart leaves the created agent container stopped until the
// first agent step needs it (ensureAgent starts it then): a run whose
// check already passes — the common case on pull requests — never starts
// it, and check #0 does not wait for it. Everything that needs only the
// created container (the posture read back from the Engine, the relay
// and workspace copies, the bind check) is done at start all the same.
func (d *Docker) deferAgentStart() {
	d.mu.Lock()
	d.agentDead = true
	d.mu.Unlock()
}

// startAgent starts (or restarts) the agent container and, when the relay
// is its main process, waits until the relay listens.
func (d *Docker) startAgent(ctx context.Context) error {
	var ready <-chan error
	if d.cfg.RelayBinary != "" {
		r, err := d.watchRelay(ctx)
		if err != nil {
			return err
		}
		ready = r
	}
	d.mu.Lock()
	d.agentRan = true // from here on, processes of the agent's may run
	d.mu.Unlock()
	for dropped := 0; ; dropped++ {
		err := d.cli.ContainerStart(ctx, d.agentID, container.StartOptions{})
		if err == nil {
			break
		}
		// The agent container was created at sandbox start and starts at
		// the first turn: a host file mounted read-only for the toolchains
		// may have been removed meanwhile (see createContainer).
		less, ok := withoutVanished(d.agentHC, err)
		if !ok || dropped >= vanishedRetries {
			return fmt.Errorf("sandbox: docker: starting the agent container: %w", err)
		}
		if rerr := d.recreateAgent(ctx, less); rerr != nil {
			return fmt.Errorf("sandbox: docker: starting the agent container: %w (re-creating it without the vanished mount: %v)", err, rerr)
		}
		if d.cfg.RelayBinary != "" {
			r, err := d.watchRelay(ctx)
			if err != nil {
				return err
			}
			ready = r
		}
	}
	if ready != nil {
		select {
		case err := <-ready:
			if err != nil {
				return err
			}
		case <-time.After(relayReadyWait):
			return fmt.Errorf("sandbox: docker: the relay (%s) did not report ready within %s", strings.Join(d.relayCmd, " "), relayReadyWait)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// recreateAgent replaces the agent container, never started, by one made
// from the same configuration with hc: the container is removed and created
// again under its name. Its volumes (the workspace copy, the relay, the
// deps) are kept, so what was copied in before is there. Mounts no longer in
// hc leave d.extraMnts (check containers do without them too); the posture
// read at start still lists them: the sandbox holds less than it says,
// never more.
func (d *Docker) recreateAgent(ctx context.Context, hc *container.HostConfig) error {
	old := d.agentID
	rctx, cancel := bg(ctx)
	err := d.cli.ContainerRemove(rctx, old, container.RemoveOptions{Force: true})
	cancel()
	if err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("removing the agent container: %w", err)
	}
	d.track(func(c *createdSet) { c.containers = without(c.containers, []string{old}) })
	id, err := d.createContainer(ctx, d.agentCfg, hc, d.agentName, func(ref string) {
		d.track(func(c *createdSet) { c.containers = append(c.containers, ref) })
	})
	if err != nil {
		return err
	}
	d.agentID, d.agentHC = id, hc
	d.extraMnts = slices.DeleteFunc(slices.Clone(d.extraMnts), func(m mount.Mount) bool {
		return !slices.ContainsFunc(hc.Mounts, func(k mount.Mount) bool { return k.Source == m.Source && k.Target == m.Target })
	})
	return nil
}

// readPosture inspects the agent container and the Engine and records what
// was applied.
func (d *Docker) readPosture(ctx context.Context) error {
	c, err := d.cli.ContainerInspect(ctx, d.agentID)
	if err != nil {
		return fmt.Errorf("sandbox: docker: inspecting the agent container: %w", err)
	}
	if d.egress != nil && c.State != nil {
		d.egress.learnPeer(c.State.Pid, d.relayUID)
	}
	p := postureFromInspect(c, d.info)
	p.ExtraMounts = extraMounts(c.Mounts, d.workspaceMount().Target)
	p.HostMounts = hostMounts(c.Mounts, d.workspaceMount().Target)
	for _, l := range d.cfg.HostLeftOut {
		p.HostLeftOut = append(p.HostLeftOut, l.String())
	}
	p.Image = d.image
	p.ImageDigest = d.digest
	p.Root = d.root
	if d.mountSrc != d.cfg.Workspace {
		m := d.mountSrc
		p.Mount = &m
	}
	p.Workspace = d.wsMode
	p.CheckView, _ = d.CheckView()
	// Steps run as d.user (every exec and check container names it); the
	// agent container's own user is the relay's when there is one.
	p.User = d.user
	if d.egress != nil && p.Network == NetworkNone {
		p.Network = NetworkEgress
		p.EgressAllowlist = d.egress.proxy.Allowlist()
		p.EgressOutboundProxy = egress.OutboundString(d.cfg.OutboundProxy)
	}
	if d.egress != nil || d.deps.setup != nil {
		for _, n := range d.cfg.EgressAllowNets {
			p.EgressAllowNets = append(p.EgressAllowNets, n.String())
		}
	}
	p.SecretsInSandbox = slices.Clone(d.secrets)
	p.ModelGateway = gatewayOf(d.cfg.Upstreams)
	if d.cfg.FallbackNotice != "" {
		n := d.cfg.FallbackNotice
		p.FallbackNotice = &n
	}
	p.Tier = ComputeTier(p) // again: network and secrets are settled now
	d.postureFix = p
	return nil
}

// extraMounts lists the bind and volume mounts of an inspected container
// other than the workspace's (at wsTarget), as "TARGET:ro" or "TARGET:rw",
// sorted.
func extraMounts(ms []container.MountPoint, wsTarget string) []string {
	var out []string
	for _, m := range ms {
		if m.Destination == wsTarget || (m.Type != mount.TypeBind && m.Type != mount.TypeVolume) {
			continue
		}
		mode := ":ro"
		if m.RW {
			mode = ":rw"
		}
		out = append(out, m.Destination+mode)
	}
	sort.Strings(out)
	return out
}

// hostMounts lists the bind mounts of an inspected container other than
// the workspace's (at wsTarget) by their host path, as
// "SOURCE:TARGET:ro" or ":rw", sorted.
func hostMounts(ms []container.MountPoint, wsTarget string) []string {
	var out []string
	for _, m := range ms {
		if m.Destination == wsTarget || m.Type != mount.TypeBind {
			continue
		}
		mode := ":ro"
		if m.RW {
			mode = ":rw"
		}
		out = append(out, m.Source+":"+m.Destination+mode)
	}
	sort.Strings(out)
	return out
}

// homeTarget is HOME inside the sandbox (a tmpfs): Config.Env's HOME, else
// DockerHome.
func (d *Docker) homeTarget() string {
	if h := d.cfg.Env["HOME"]; h != "" {
		return path.Clean(h)
	}
	return DockerHome
}

// mountName names Config.Mounts[i] in errors: its Name, else "mount N
// (TARGET)".
func mountName(i int, m Mount) string {
	if m.Name != "" {
		return m.Name
	}
	return fmt.Sprintf("mount %d (%s)", i+1, m.Target)
}

// postureFromInspect reads the hardening the Engine applied to c.
func postureFromInspect(c container.InspectResponse, info system.Info) Posture {
	p := Posture{Mode: "docker", CapDrop: []string{}, SecretsInSandbox: []string{}}
	if c.Config != nil {
		p.User = c.Config.User
	}
	hc := c.HostConfig
	if hc == nil {
		return p
	}
	switch {
	case hc.NetworkMode.IsNone():
		p.Network = NetworkNone
	case hc.NetworkMode.IsHost():
		p.Network = NetworkHost
	default:
		p.Network = NetworkBridge
	}
	p.ReadOnlyRootfs = hc.ReadonlyRootfs
	p.CapDrop = append(p.CapDrop, hc.CapDrop...)
	p.Privileged = hc.Privileged
	p.NoNewPrivileges, p.Seccomp = securityOpts(hc.SecurityOpt, info.SecurityOptions)
	if hc.Privileged {
		p.Seccomp = "unconfined" // privileged containers run without seccomp
	}
	if hc.PidsLimit != nil {
		p.PidsLimit = *hc.PidsLimit
	}
	p.MemoryBytes = hc.Memory
	p.NanoCPUs = hc.NanoCPUs
	p.Runtime = hc.Runtime
	if p.Runtime == "" {
		p.Runtime = info.DefaultRuntime
	}
	p.Tier = ComputeTier(p)
	return p
}

// securityOpts reads no-new-privileges and the seccomp profile from a
// container's SecurityOpt and, when the container names no profile, the
// Engine's own (Info.SecurityOptions, e.g. "name=seccomp,profile=default").
// The seccomp result is "default", "custom" (a profile was given),
// "unconfined" or "" (the Engine does not apply seccomp).
func securityOpts(opts, engine []string) (noNewPrivs bool, seccomp string) {
	for _, o := range opts {
		k, v, hasV := strings.Cut(o, "=")
		if !hasV {
			k, v, hasV = strings.Cut(o, ":")
		}
		switch k {
		case "no-new-privileges":
			noNewPrivs = !hasV || v == "true"
		case "seccomp":
			if v == "unconfined" {
				seccomp = "unconfined"
			} else {
				seccomp = "custom"
			}
		}
	}
	if seccomp == "" {
		for _, e := range engine {
			if !strings.Contains(e, "name=seccomp") {
				continue
			}
			seccomp = "default"
			for _, kv := range strings.Split(e, ",") {
				if prof, ok := strings.CutPrefix(kv, "profile="); ok && prof != "default" && prof != "builtin" {
					seccomp = prof
					if prof != "unconfined" {
						seccomp = "custom"
					}
				}
			}
		}
	}
	return noNewPrivs, seccomp
}

// Posture returns what the sandbox applied, with the egress counters as of
// now. The caller may keep the copy.
func (d *Docker) Posture() Posture {
	p := d.postureFix
	if mode, _ := d.CheckView(); mode != "" {
		// A view that would not mount changes it after the start.
		p.CheckView = mode
	}
	p.CapDrop = slices.Clone(p.CapDrop)
	p.SecretsInSandbox = slices.Clone(p.SecretsInSandbox)
	p.EgressAllowlist = slices.Clone(p.EgressAllowlist)
	p.EgressAllowNets = slices.Clone(p.EgressAllowNets)
	if p.FallbackNotice != nil {
		n := *p.FallbackNotice
		p.FallbackNotice = &n
	}
	if d.egress != nil {
		s := d.egress.proxy.Stats()
		p.EgressAllowed, p.EgressDenied = s.Allowed, s.Denied
		p.EgressDenials = s.DenialStrings()
	}
	d.setupPosture(&p)
	return p
}

// Root returns the workspace as steps see it: DockerRoot, or a folder
// below it when the git repository root above the workspace is mounted.
func (d *Docker) Root() string { return d.root }

// UpstreamURL returns the base URL of Config.Upstreams[i] as agent steps
// must use it: the relay's loopback address inside the sandbox in egress
// mode ("http://127.0.0.1:3129" for the first), the real URL otherwise, ""
// when i is out of range. It is what the upstream's BaseURLEnv holds, for
// agents that take the URL as a flag instead (Codex).
func (d *Docker) UpstreamURL(i int) string {
	if i < 0 || i >= len(d.cfg.Upstreams) {
		return ""
	}
	if d.egress != nil {
		return d.egress.upstreamURL(i)
	}
	return d.cfg.Upstreams[i].URL
}

// ContainerID returns the agent container's id (for the sandbox_ready event).
func (d *Docker) ContainerID() string { return d.agentID }

// Close stops every running step and removes everything the run created:
// the agent container, check containers, the workspace and relay volumes,
// the bridge network, the egress proxy and its socket folder. It is
// idempotent and safe on every exit path. Engine calls run even when ctx is
// already done, each bounded by apiTimeout and, once the run was
// interrupted, by the deadline of ctx's phase (Detached; cmd marks its
// Close PhaseCleanup): an Engine that stops answering cannot hold goalrun
// past InterruptBound. goalrun's own host folders go first, as they need no
// Engine. It returns the first removal error (each names the object; a
// later Reap removes what was left).
func (d *Docker) Close(ctx context.Context) error {
	d.mu.Lock()
	if !d.closed {
		d.closed = true
		close(d.closing)
	}
	d.mu.Unlock()

	var errs []error
	// The proxy and its sockets are goalrun's alone: removed whatever the
	// Engine does (the relay, if still running, loses its sockets).
	if d.egress != nil {
		d.egress.close()
	}
	d.mu.Lock()
	dirs := d.created.dirs
	d.created.dirs = nil
	d.mu.Unlock()
	for _, dir := range dirs {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("sandbox: docker: removing %s: %w", dir, err))
		}
	}

	cctx, cancel := bg(ctx)
	defer cancel()
	d.sealSetup(cctx)
	// A container frozen after the last check is killed while frozen, so
	// nothing the agent left running runs again.
	if err := d.StopAgent(cctx); err != nil && cctx.Err() == nil {
		_ = err // removal below still force-removes it
	}
	// An agent container that never started holds nothing to wait for:
	// its removal overlaps the wait below.
	var early chan error
	d.mu.Lock()
	earlyID := ""
	if !d.agentRan {
		earlyID = d.agentID
	}
	d.mu.Unlock()
	if earlyID != "" {
		early = make(chan error, 1)
		go func() {
			early <- d.cli.ContainerRemove(cctx, earlyID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		}()
	}
	// Running steps see closing, kill themselves and return.
	done := make(chan struct{})
	go func() { d.steps.Wait(); d.removals.Wait(); close(done) }()
	select {
	case <-done:
	case <-cctx.Done():
	}

	d.mu.Lock()
	created := d.created
	d.created = createdSet{}
	for id := range d.checks {
		created.containers = append(created.containers, id)
	}
	d.checks = map[string]struct{}{}
	d.mu.Unlock()

	// The containers are removed side by side: each removal is the
	// Engine's own wait (unmounting, deleting the writable layer).
	var errMu sync.Mutex
	var removing sync.WaitGroup
	if early != nil {
		if err := <-early; err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("sandbox: docker: removing container %.12s: %w", earlyID, err))
		}
	}
	for _, id := range created.containers {
		if id == earlyID {
			continue
		}
		removing.Add(1)
		go func() {
			defer removing.Done()
			if err := d.cli.ContainerRemove(cctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !errdefs.IsNotFound(err) {
				errMu.Lock()
				errs = append(errs, fmt.Errorf("sandbox: docker: removing container %.12s: %w", id, err))
				errMu.Unlock()
			}
		}()
	}
	removing.Wait()
	for _, n := range created.networks {
		if err := d.cli.NetworkRemove(cctx, n); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("sandbox: docker: removing network %s: %w", n, err))
		}
	}
	// Volumes side by side too (none is in use once the containers are
	// gone).
	for _, v := range created.volumes {
		removing.Add(1)
		go func() {
			defer removing.Done()
			if err := d.cli.VolumeRemove(cctx, v, true); err != nil && !errdefs.IsNotFound(err) {
				errMu.Lock()
				errs = append(errs, fmt.Errorf("sandbox: docker: removing volume %s: %w", v, err))
				errMu.Unlock()
			}
		}()
	}
	removing.Wait()
	// The views' folders last: no container mounts them any more.
	if v := d.views; v != nil && v.hostLocal != "" {
		if err := removeTree(v.hostLocal); err != nil {
			errs = append(errs, fmt.Errorf("sandbox: docker: removing the check views' folder: %w", err))
		}
	}
	for _, dir := range created.dirs {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("sandbox: docker: removing %s: %w", dir, err))
		}
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}
