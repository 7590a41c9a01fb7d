package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// KillGrace is how long a step's process group gets between SIGTERM and
// SIGKILL when its timeout expires, its context ends or the sandbox closes.
const KillGrace = 2 * time.Second

// pipeGrace bounds how long Exec waits for a step's output pipes to drain
// after the step's process group was killed; a process that left the group
// (setsid) and kept a pipe open cannot hold Exec longer than this.
const pipeGrace = time.Second

// proxyEnv are the variables that route traffic through a proxy; check steps
// never get them (docs/security.md, "Steps": no proxy settings for a check).
var proxyEnv = []string{
	"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY",
	"http_proxy", "https_proxy", "all_proxy", "no_proxy",
}

// Local is the sandbox that runs steps on the host itself (--sandbox local,
// or the fallback of --sandbox auto). It isolates only what a host process
// can: each step runs in the workspace, in its own process group that is
// killed as a whole, with an environment built from an allowlist instead of
// goalrun's own. It restricts neither the network nor the filesystem, and its
// posture says so (mode local, network host, tier local).
type Local struct {
	cfg      Config
	root     string // the workspace, absolute and with symlinks resolved
	hostEnv  func(string) (string, bool)
	agentEnv []string
	checkEnv []string
	setupEnv []string
	posture  Posture
	// filesEnv points agent steps at the agent files' folders (filesDirs,
	// removed by Close).
	filesEnv  map[string]string
	filesDirs []string

	mu      sync.Mutex
	closed  bool
	running map[*localStep]struct{}
	wg      sync.WaitGroup // running steps
	// since is the start (clock ticks after boot) of the earliest step
	// since the last sweep (0: none): the sweep after the last running step
	// ends what started since then (endStrays).
	since uint64
}

var _ Sandbox = (*Local)(nil)

// LocalOption adjusts StartLocal.
type LocalOption func(*Local)

// WithHostEnv makes the Local sandbox read host variables (those named by
// Config.PassEnv) through lookup instead of os.LookupEnv.
func WithHostEnv(lookup func(string) (string, bool)) LocalOption {
	return func(l *Local) { l.hostEnv = lookup }
}

// StartLocal prepares a Local sandbox for cfg. cfg.Workspace must be an
// existing directory; it is resolved to an absolute path without symlinks,
// which is what steps see as their root. The host environment is read once,
// here. ctx is unused beyond an early cancellation check (starting is
// instantaneous).
//
// Errors: ctx's error, or an error naming the workspace when it is missing
// or not a directory.
func StartLocal(ctx context.Context, cfg Config, opts ...LocalOption) (*Local, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cfg.Workspace == "" {
		return nil, errors.New("sandbox: local: no workspace given")
	}
	abs, err := filepath.Abs(cfg.Workspace)
	if err != nil {
		return nil, fmt.Errorf("sandbox: local: workspace %q: %w", cfg.Workspace, err)
	}
	root, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("sandbox: local: workspace %q: %w", cfg.Workspace, err)
	}
	st, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("sandbox: local: workspace %q: %w", cfg.Workspace, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("sandbox: local: workspace %q is not a directory", cfg.Workspace)
	}
	// No mount policy here (the host is no boundary), but an agent let
	// loose in a container engine's data would rewrite other containers.
	home, _ := os.UserHomeDir()
	if err := CheckEngineData(root, home, ""); err != nil {
		return nil, err
	}
	for k := range cfg.ToolEnv {
		if _, secret := cfg.Secrets[k]; secret || slices.Contains(proxyEnv, k) || k == "HOME" || upstreamKeyEnv(cfg, k) {
			return nil, fmt.Errorf("sandbox: local: Config.ToolEnv %s: a secret, a proxy setting or HOME cannot go into every step (check steps get neither)", k)
		}
	}
	if err := checkSetupEnv(cfg); err != nil {
		return nil, err
	}
	if err := checkAgentFiles(cfg.AgentFiles, ""); err != nil {
		return nil, err
	}
	if err := becomeSubreaper(); err != nil {
		return nil, err
	}
	l := &Local{cfg: cfg, root: root, hostEnv: os.LookupEnv, running: map[*localStep]struct{}{}}
	for _, o := range opts {
		o(l)
	}
	env, dirs, err := writeLocalAgentFiles(cfg.AgentFiles)
	if err != nil {
		return nil, err
	}
	l.filesEnv, l.filesDirs = env, dirs
	l.agentEnv, l.checkEnv, l.setupEnv = l.buildEnv()
	l.posture = l.buildPosture()
	return l, nil
}

// upstreamKeyEnv reports whether k names an upstream's key variable.
func upstreamKeyEnv(cfg Config, k string) bool {
	for _, u := range cfg.Upstreams {
		if u.KeyEnv == k {
			return true
		}
	}
	return false
}

// buildEnv returns the base environments (sorted KEY=VALUE) of agent,
// check and setup steps. Agent steps: the allowlisted host variables, then
// Config.ToolEnv, then Config.Env, then each upstream's base URL and real
// key (there is no proxy locally), then Config.Secrets. Check steps: the
// allowlisted host variables minus any proxy variable and any name that
// carries a secret, then Config.ToolEnv (which StartLocal checked holds
// neither), then Config.Setup.CheckEnv. Setup steps: the check's host
// variables plus the host's proxy variables (they download), then
// Config.ToolEnv and Config.Setup.Env.
func (l *Local) buildEnv() (agent, check, setup []string) {
	pass := l.cfg.PassEnv
	if pass == nil {
		pass = DefaultPassEnv
	}
	host := map[string]string{}
	for _, k := range pass {
		if v, ok := l.hostEnv(k); ok {
			host[k] = v
		}
	}
	secretNames := map[string]bool{}
	for k := range l.cfg.Secrets {
		secretNames[k] = true
	}
	for _, u := range l.cfg.Upstreams {
		if u.KeyEnv != "" {
			secretNames[u.KeyEnv] = true
		}
	}

	a := map[string]string{}
	for k, v := range host {
		a[k] = v
	}
	for k, v := range l.cfg.ToolEnv {
		a[k] = v
	}
	for k, v := range l.cfg.Env {
		a[k] = v
	}
	for k, v := range l.filesEnv {
		a[k] = v
	}
	for _, u := range l.cfg.Upstreams {
		if u.BaseURLEnv != "" && u.URL != "" {
			a[u.BaseURLEnv] = u.URL
		}
		if u.KeyEnv != "" && u.Key != "" {
			a[u.KeyEnv] = u.Key
		}
	}
	for k, v := range l.cfg.Secrets {
		a[k] = v
	}

	c := map[string]string{}
	for k, v := range host {
		if secretNames[k] || slices.Contains(proxyEnv, k) {
			continue
		}
		c[k] = v
	}
	for k, v := range l.cfg.ToolEnv {
		c[k] = v
	}
	su := map[string]string{}
	for k, v := range c {
		su[k] = v
	}
	for _, k := range proxyEnv {
		if v, ok := l.hostEnv(k); ok && !secretNames[k] {
			su[k] = v
		}
	}
	for k, v := range l.cfg.Setup.Env {
		su[k] = v
	}
	for k, v := range l.cfg.Setup.CheckEnv {
		c[k] = v
	}
	return envList(a), envList(c), envList(su)
}

func envList(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// buildPosture records what Local applies: nothing beyond the host's own
// user and a process group.
func (l *Local) buildPosture() Posture {
	secrets := []string{}
	for k, v := range l.cfg.Secrets {
		if v != "" {
			secrets = append(secrets, k)
		}
	}
	for _, u := range l.cfg.Upstreams {
		if u.KeyEnv != "" && u.Key != "" && !slices.Contains(secrets, u.KeyEnv) {
			secrets = append(secrets, u.KeyEnv)
		}
	}
	secrets = append(secrets, gitCredentialNames(l.root)...)
	sort.Strings(secrets)
	var notice *string
	if l.cfg.FallbackNotice != "" {
		n := l.cfg.FallbackNotice
		notice = &n
	}
	return Posture{
		Mode:             "local",
		Network:          NetworkHost,
		Tier:             TierLocal,
		Root:             l.root,
		Workspace:        WorkspaceHost,
		CheckView:        CheckViewWorkspace,
		User:             strconv.Itoa(os.Getuid()) + ":" + strconv.Itoa(os.Getgid()),
		CapDrop:          []string{},
		SecretsInSandbox: secrets,
		ModelGateway:     gatewayOf(l.cfg.Upstreams),
		FallbackNotice:   notice,
	}
}

// Posture returns what Local applies (a copy; the caller may keep it).
func (l *Local) Posture() Posture {
	p := l.posture
	p.CapDrop = slices.Clone(p.CapDrop)
	p.SecretsInSandbox = slices.Clone(p.SecretsInSandbox)
	if p.FallbackNotice != nil {
		n := *p.FallbackNotice
		p.FallbackNotice = &n
	}
	return p
}

// Root returns the workspace as steps see it (absolute, symlinks resolved).
func (l *Local) Root() string { return l.root }

// localStep is one running step's process group and how to stop it.
type localStep struct {
	pgid  int
	start uint64        // the leader's start time (stepStart)
	stop  chan struct{} // closed by Close: kill the step
	once  sync.Once
}

func (s *localStep) kill() { s.once.Do(func() { close(s.stop) }) }

// Exec runs cmd on the host (see Sandbox). Cmd.Args[0] is looked up on the
// step's own PATH (the allowlisted one), not goalrun's. The step runs in its
// own process group; when its timeout expires, ctx ends or the sandbox
// closes, the group gets SIGTERM and, KillGrace later, SIGKILL. When the
// step's main process exits, whatever it left running in its group is
// killed, so no step outlives itself.
//
// Errors: ErrClosed after Close; an error wrapping ErrNotStarted when the
// program is not found, not executable, or Cmd.Dir leaves the workspace;
// ctx's error when ctx ended before the step started.
func (l *Local) Exec(ctx context.Context, cmd Cmd) (Result, error) {
	if len(cmd.Args) == 0 {
		return Result{}, fmt.Errorf("sandbox: local: empty command: %w", ErrNotStarted)
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	dir, err := l.stepDir(cmd.Dir)
	if err != nil {
		return Result{}, err
	}
	base := l.agentEnv
	switch cmd.Role {
	case RoleCheck:
		base = l.checkEnv
	case RoleSetup:
		base = l.setupEnv
	}
	env := mergeEnv(base, cmd.Env)
	path, err := lookPath(cmd.Args[0], envValue(env, "PATH"), dir)
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: local: %s step %q: %w: %w", cmd.Role, cmd.Args[0], ErrNotStarted, err)
	}

	step := &localStep{stop: make(chan struct{})}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return Result{}, ErrClosed
	}
	l.running[step] = struct{}{}
	l.wg.Add(1)
	l.mu.Unlock()
	defer l.wg.Done()
	return runLocalStep(ctx, step, cmd, path, dir, env, l.stepEnded)
}

// stepEnded takes the ended step out of the running ones and, when it was
// the last, ends every process the steps since the last sweep started that
// outlived them (endStrays; goalrun is a child subreaper, so a setsid
// daemon is among them), sparing the processes goalrun keeps on purpose
// (KeepProcess). An error means something the step started is still alive.
func (l *Local) stepEnded(step *localStep) error {
	l.mu.Lock()
	delete(l.running, step)
	if step.start != 0 && (l.since == 0 || step.start < l.since) {
		l.since = step.start
	}
	if len(l.running) > 0 || l.since == 0 {
		l.mu.Unlock()
		return nil
	}
	since := l.since
	l.since = 0
	l.mu.Unlock()
	return endStrays(since, func(pid int) bool {
		_, kept := keptProcesses.Load(pid)
		return kept
	})
}

// stepDir resolves Cmd.Dir inside the workspace; a path that leaves it
// (.., absolute, or a symlink pointing out) is refused.
func (l *Local) stepDir(rel string) (string, error) {
	if rel == "" || rel == "." {
		return l.root, nil
	}
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("sandbox: local: step directory %q is not inside the workspace: %w", rel, ErrNotStarted)
	}
	real, err := filepath.EvalSymlinks(filepath.Join(l.root, rel))
	if err != nil {
		return "", fmt.Errorf("sandbox: local: step directory %q: %w: %w", rel, ErrNotStarted, err)
	}
	if real != l.root && !strings.HasPrefix(real, l.root+string(filepath.Separator)) {
		return "", fmt.Errorf("sandbox: local: step directory %q resolves to %q, outside the workspace: %w", rel, real, ErrNotStarted)
	}
	return real, nil
}

// runLocalStep starts the process, streams its output and waits for it;
// ended (the Local's stepEnded) runs once the step's process group is dead,
// before its output is drained, and its error is the step's.
func runLocalStep(ctx context.Context, step *localStep, cmd Cmd, path, dir string, env []string, ended func(*localStep) error) (Result, error) {
	fwdOut, fwdErr := StepWriters(cmd.Stdout, cmd.Stderr)
	outTail := NewTailWriter(fwdOut, TailBytes)
	errTail := NewTailWriter(fwdErr, TailBytes)

	outR, outW, err := os.Pipe()
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: local: stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return Result{}, fmt.Errorf("sandbox: local: stderr pipe: %w", err)
	}
	var inR, inW *os.File
	var stdin io.Reader
	switch in := cmd.Stdin.(type) {
	case nil: // exec opens /dev/null
	case *os.File:
		stdin = in
	default:
		if inR, inW, err = os.Pipe(); err != nil {
			outR.Close()
			outW.Close()
			errR.Close()
			errW.Close()
			return Result{}, fmt.Errorf("sandbox: local: stdin pipe: %w", err)
		}
		stdin = inR
	}

	c := &exec.Cmd{
		Path:   path,
		Args:   cmd.Args,
		Env:    env,
		Dir:    dir,
		Stdin:  stdin,
		Stdout: outW,
		Stderr: errW,
		// Setsid: the step and its children form one group (and one
		// session, which nothing it starts can leave for goalrun's own:
		// the sweep tells them apart by it), killed as a whole.
		// Pdeathsig: if goalrun itself dies, the kernel kills the step's
		// leader (goalrun never locks OS threads, so "the creating thread
		// dies" only happens with the process).
		SysProcAttr: &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL},
	}
	start := time.Now()
	// A sweep reads the process table and kills under stepsMu: the step's
	// new session is live before any sweep can see its leader.
	stepsMu.Lock()
	startErr := c.Start()
	if startErr == nil {
		liveSteps.Store(c.Process.Pid, true) // its session id: the leader's pid
	}
	stepsMu.Unlock()
	outW.Close() // the child holds its own copies now
	errW.Close()
	if inR != nil {
		inR.Close()
	}
	if startErr != nil {
		ended(step) // nothing started: nothing to sweep for this step
		outR.Close()
		errR.Close()
		if inW != nil {
			inW.Close()
		}
		if errors.Is(startErr, syscall.E2BIG) {
			// The program exists; its arguments or environment are too
			// large for execve: not "not found".
			return Result{}, fmt.Errorf("sandbox: local: starting %s step %q: its arguments and environment are too large for the kernel (one string at most 131072 bytes, all of them together about a quarter of the stack limit): %w", cmd.Role, cmd.Args[0], startErr)
		}
		return Result{}, fmt.Errorf("sandbox: local: starting %s step %q: %w: %w", cmd.Role, cmd.Args[0], ErrNotStarted, startErr)
	}
	step.pgid = c.Process.Pid
	step.start = stepStart(c.Process.Pid) // not reaped before c.Wait

	var copies sync.WaitGroup
	copies.Add(2)
	go func() { defer copies.Done(); io.Copy(outTail, outR) }()
	go func() { defer copies.Done(); io.Copy(errTail, errR) }()
	if inW != nil {
		go func() {
			io.Copy(inW, cmd.Stdin) // EPIPE when the step stops reading
			inW.Close()
		}()
	}

	waited := make(chan error, 1)
	go func() { waited <- c.Wait() }()

	var timer <-chan time.Time
	if cmd.Timeout > 0 {
		t := time.NewTimer(cmd.Timeout)
		defer t.Stop()
		timer = t.C
	}
	var res Result
	select {
	case <-waited:
	case <-timer:
		res.TimedOut = true
		killGroup(step.pgid, waited, killGrace(ctx))
	case <-ctx.Done():
		res.Cancelled = true
		killGroup(step.pgid, waited, killGrace(ctx))
	case <-step.stop:
		res.Cancelled = true
		killGroup(step.pgid, waited, killGrace(ctx))
	}
	res.Duration = time.Since(start)
	// Whatever the step left behind in its group dies with it, and so
	// does whatever left the group (setsid) and outlived it.
	_ = syscall.Kill(-step.pgid, syscall.SIGKILL)
	liveSteps.Delete(step.pgid)
	sweepErr := ended(step)
	if inW != nil {
		inW.Close() // unblocks a stdin copy still writing
	}

	drained := make(chan struct{})
	go func() { copies.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(pipeGrace):
		// A process outside the group still holds a pipe: stop reading.
		outR.Close()
		errR.Close()
		<-drained
	}
	outR.Close()
	errR.Close()

	res.ExitCode = exitCode(c.ProcessState)
	res.Stdout = outTail.Output()
	res.Stderr = errTail.Output()
	return res, sweepErr
}

// killGroup sends SIGTERM to the group, SIGKILL after grace (KillGrace, or
// InterruptGrace once the run was interrupted), and waits for the group's
// leader to be reaped.
func killGroup(pgid int, waited <-chan error, grace time.Duration) {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-waited:
	case <-t.C:
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-waited
	}
}

// exitCode is the step's exit status; 128+signal when a signal ended it.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// mergeEnv returns base with extra's variables added or replaced, sorted.
func mergeEnv(base []string, extra map[string]string) []string {
	if len(extra) == 0 {
		return base
	}
	m := make(map[string]string, len(base)+len(extra))
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	for k, v := range extra {
		m[k] = v
	}
	return envList(m)
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// lookPath finds name on pathList (the step's PATH); a name with a slash is
// taken as is (relative to dir).
func lookPath(name, pathList, dir string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := executable(p); err != nil {
			return "", err
		}
		return p, nil
	}
	for _, d := range filepath.SplitList(pathList) {
		if d == "" || !filepath.IsAbs(d) {
			continue // a relative PATH entry would resolve inside the agent's tree
		}
		p := filepath.Join(d, name)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%q not found on the step's PATH (%s): %w", name, pathList, exec.ErrNotFound)
}

func executable(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return &fs.PathError{Op: "exec", Path: p, Err: fs.ErrPermission}
	}
	return nil
}

// Close kills every running step (SIGTERM, then SIGKILL after KillGrace) and
// waits for them to end, or for ctx to end. Later Execs fail with ErrClosed.
// Close is idempotent; it returns ctx's error when ctx ended first.
func (l *Local) Close(ctx context.Context) error {
	l.mu.Lock()
	l.closed = true
	for s := range l.running {
		s.kill()
	}
	l.mu.Unlock()
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	defer func() {
		for _, d := range l.filesDirs {
			os.RemoveAll(d)
		}
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// gitCredentialNames names the git config files that hold credentials
// (sanitizeGitConfig: an http.<url>.extraheader, a credential section, a
// token-named variable, user:password@ in a URL) which a step on the local
// host can read: those of every repository in root and of the repository
// root lies in. The Docker sandbox hides them; the local host cannot, so the
// posture names each as "git-config:PATH" (PATH relative to root, slashes)
// in secrets_in_sandbox. Unreadable folders are skipped: a step running as
// this user could not read them either.
func gitCredentialNames(root string) []string {
	var names []string
	if _, configs, err := findGit(root); err == nil {
		for _, c := range configs {
			names = append(names, "git-config:"+c.rel)
		}
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return names
	}
	up := ".."
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		if fi, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			if !fi.IsDir() {
				break // a linked worktree or submodule: its config lives in another repository
			}
			if r, err := os.OpenRoot(dir); err == nil {
				configs, _ := sanitizedConfigs(r, ".git")
				r.Close()
				for _, c := range configs {
					names = append(names, "git-config:"+up+"/"+c.rel)
				}
			}
			break // the enclosing repository; those above it are other trees
		}
		if dir == filepath.Dir(dir) {
			break
		}
		up += "/.."
	}
	return names
}
