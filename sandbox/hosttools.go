package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/system"
)

// The host's toolchains in the default sandbox: the host's system folders
// and the few /etc entries toolchains read, mounted read-only over a Bare
// image (README, "What the default sandbox contains"). Which of them exist
// is asked of the Engine, whose host's paths they are, so the same works
// when goalrun itself runs in a container (the GitHub container action).

// HostSystemFolders are the host's system folders the default sandbox
// mounts read-only at the same paths, those that exist on the Engine's
// host: the programs and libraries (a merged-/usr link such as /bin →
// usr/bin is followed by the mount), /usr/local with /usr, and /opt, where
// actions/setup-go, setup-python, setup-node and setup-java put their
// toolchains (/opt/hostedtoolcache). /opt may hold containerd's
// /opt/containerd (binaries and libraries of its managed plugins, no state:
// containerd's data and sockets are /var/lib/containerd and
// /run/containerd). A folder that holds something the sandbox must not
// see — an Engine's data, a runtime socket, the workspace, a runner's
// folder, a credential file (runKeepOuts, scanHost) — is mounted child by
// child around it (planHostMounts; HostToolchain.LeftOut).
//
// /sbin is not mounted whole: the Engine mounts its init process at
// /sbin/docker-init (HostConfig.Init) and could not make that mount point
// inside a read-only host folder. The Bare image's /sbin is its own
// folder; on a merged-/usr host every /sbin program is in /usr/sbin (on
// PATH), and /sbin/ldconfig, which programs run by that absolute path
// (Python's ctypes.util.find_library), is mounted on its own
// (hostSbinFiles).
var HostSystemFolders = []string{"/usr", "/bin", "/lib", "/lib32", "/lib64", "/libx32", "/opt"}

// hostSbinFiles are the /sbin programs mounted one by one (Ubuntu's
// ldconfig is a script that runs ldconfig.real).
var hostSbinFiles = []string{"/sbin/ldconfig", "/sbin/ldconfig.real"}

// HostEtcEntries are the /etc files and folders the default sandbox mounts
// read-only, those that exist: what toolchains read at run time, never
// /etc whole. They hold no secret (the mount policy refuses /etc/ssl and
// /etc/pki/tls whole, which hold private keys, and /etc/shadow, /etc/ssh…):
//   - the dynamic linker's cache and its sources (ld.so.cache;
//     ldconfig -p and Python's ctypes.util.find_library read it);
//   - CA certificates: Debian and Ubuntu (/etc/ssl/certs, Java's
//     /etc/ssl/certs/java/cacerts, update-ca-certificates' configuration),
//     Alpine and SUSE bundles, RHEL and Fedora (/etc/pki/tls/certs,
//     /etc/pki/ca-trust, /etc/pki/java), OpenSSL's configuration;
//   - Debian's alternatives (/usr/bin/java → /etc/alternatives/java →
//     /usr/lib/jvm/…) and OpenJDK's configuration (/etc/java-N-openjdk, to
//     which the JDK's conf/ links; RHEL's /etc/java);
//   - Debian's Python configuration (/etc/python3, /etc/python3.N);
//   - the time zone, the distribution's name (os-release and friends: pip,
//     node-gyp and test suites read them), and the services, protocols and
//     MIME types tables (Go's net and mime packages read them);
//   - fontconfig's configuration (tests that render text).
//
// Not mounted, on purpose: passwd, group, hosts and nsswitch.conf (the
// image generates its own), anything that may hold a credential or a
// registry token (gitconfig, npmrc, pip.conf, maven, environment,
// profile), and ld.so.preload. The entries mounted are looked through like
// the system folders: a JMX password file in /etc/java-N-openjdk is left
// out.
var HostEtcEntries = hostEtcEntries()

func hostEtcEntries() []string {
	out := []string{
		"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
		"/etc/ssl/certs", "/etc/ssl/openssl.cnf", "/etc/ssl/cert.pem", "/etc/ssl/ca-bundle.pem",
		"/etc/ca-certificates", "/etc/ca-certificates.conf",
		"/etc/pki/tls/certs", "/etc/pki/tls/cert.pem", "/etc/pki/tls/openssl.cnf", "/etc/pki/ca-trust", "/etc/pki/java",
		"/etc/alternatives", "/etc/java",
	}
	// OpenJDK 8 to 25 (Debian names its configuration by the version).
	for v := 8; v <= 25; v++ {
		out = append(out, fmt.Sprintf("/etc/java-%d-openjdk", v))
	}
	out = append(out, "/etc/python3")
	for v := 6; v <= 14; v++ {
		out = append(out, fmt.Sprintf("/etc/python3.%d", v))
	}
	return append(out,
		"/etc/localtime", "/etc/timezone",
		"/etc/os-release", "/etc/lsb-release", "/etc/debian_version", "/etc/redhat-release", "/etc/alpine-release",
		"/etc/services", "/etc/protocols", "/etc/mime.types",
		"/etc/fonts")
}

// HostToolEnv are the toolchain variables HostTools carries from goalrun's
// environment into every step when each path in their value lies inside
// the mounted folders (a value that is not a list of absolute paths is not
// carried): where toolchains are and how their libraries are found. Names
// starting with JAVA_HOME_ or GOROOT_ (JAVA_HOME_17_X64 on GitHub's runner
// images) are carried too. CARGO_HOME and GEM_HOME are not: their tools
// write there, and the mounts are read-only.
var HostToolEnv = []string{
	"JAVA_HOME", "GOROOT", "DOTNET_ROOT", "RUSTUP_HOME",
	"ANDROID_HOME", "ANDROID_SDK_ROOT", "ANDROID_NDK", "ANDROID_NDK_HOME", "ANDROID_NDK_ROOT", "ANDROID_NDK_LATEST_HOME",
	"GRADLE_HOME", "MAVEN_HOME", "M2_HOME", "ANT_HOME",
	"pythonLocation", "Python_ROOT_DIR", "Python2_ROOT_DIR", "Python3_ROOT_DIR",
	"CONDA", "VCPKG_INSTALLATION_ROOT", "PKG_CONFIG_PATH", "LD_LIBRARY_PATH",
}

// hostToolEnvPrefixes extend HostToolEnv by prefix.
var hostToolEnvPrefixes = []string{"JAVA_HOME_", "GOROOT_"}

// HostToolsOptions says how HostTools looks.
type HostToolsOptions struct {
	// Image is an image on the Engine that the Engine's mount check names
	// (a Bare image made with BuildImage); it also runs the scan of the
	// host folders when goalrun cannot see them (ScanBinary).
	Image string
	// Env is goalrun's environment (KEY=VALUE); nil means os.Environ().
	// PATH (its entries inside the mounted folders come first in the
	// steps' PATH), HostToolEnv's variables, HOME and the credential
	// variables of the mount policy, and the private paths of runKeepOuts
	// (TMPDIR, XDG_CACHE_HOME, RUNNER_*) are read from it.
	Env []string
	// Info is the Engine's Info, when the caller has just read it from
	// the same client; nil means HostTools asks.
	Info *system.Info
	// ConfirmInfo, when not nil, says Info is a remembered info not yet
	// confirmed against the live one: it returns nil when the live info
	// agrees (else ErrEngineChanged, or why it could not be read). The
	// Engine's answers are remembered under Info's identity (Facts) only
	// then, so another Engine now at the same address never has its
	// answers kept as the remembered one's.
	ConfirmInfo func(context.Context) error
	// Facts, when set, remembers which candidates exist on the Engine's
	// host, so later runs skip the Engine's probe (EngineFacts); the
	// answer is keyed by the Engine and by which candidates goalrun itself
	// sees, and the mount policy applies to it as to a fresh one.
	Facts EngineFacts
	// Reprobe asks the Engine even when a fact is remembered (a bind
	// source the fact named turned out missing), and stores the new
	// answer.
	Reprobe bool
	// Workspace is the run's workspace as goalrun sees it ("" for none):
	// it and the repository above it are kept out of the host folders
	// (runKeepOuts).
	Workspace string
	// ScanBinary is a statically linked goalrun that can run HostScanCommand;
	// it looks through the host folders from inside a container when goalrun
	// cannot see them itself (goalrun runs in a container, or the Engine is
	// on another host). "" then makes that case an error.
	ScanBinary string
	// CacheDir is a folder (made 0700 when missing) where the answer of
	// the look through the host folders is kept, with what it looked at,
	// for the next run to take while none of that changed; "" keeps none.
	// Only used when goalrun looks through the folders itself.
	CacheDir string
	// Ahead, when not nil, is CacheDir's newest answer checked ahead
	// (CheckHostScanAhead): taken when it is the one this look needs.
	Ahead *HostScanAhead

	// plan replaces scanAndPlan and scanThroughEngine (tests).
	plan func(ctx context.Context, p mountPolicy, candidates []string) (hostPlan, error)
}

// HostToolchain is what the default sandbox takes from the Engine's host.
type HostToolchain struct {
	// Mounts are the host system folders and /etc entries that exist on
	// the Engine's host, read-only at the same paths (EngineHost), for
	// Config.Mounts; a folder that holds something private is there child
	// by child (planHostMounts).
	Mounts []Mount
	// Env is PATH and the carried toolchain variables, for Config.ToolEnv.
	Env map[string]string
	// LeftOut are the paths that exist but are not mounted, each with the
	// reason (a runner's folder, the workspace, a credential file, /opt
	// when the Engine keeps its data in it), for Config.HostLeftOut; the
	// caller should say so.
	LeftOut []LeftOut
	// Remembered says which folders exist came from a remembered fact,
	// not from the Engine this run: when the Engine then reports a bind
	// source missing, call HostTools again with Reprobe.
	Remembered bool
	// Confirm, when not nil, must be called before anything runs with
	// these mounts: the look through the host folders was taken from its
	// cache while the cache's check was still going on (Ahead). It waits
	// for the check and returns ErrHostScanStale when a folder the look
	// read has changed since; then call HostTools again without Ahead.
	Confirm func(context.Context) error
}

// ErrHostScanStale is HostToolchain.Confirm's error: the remembered look
// through the host folders no longer holds, so the mounts made from it
// may show what must stay out.
var ErrHostScanStale = errors.New("sandbox: host tools: a host folder changed since its look was remembered")

// Covers reports whether the host path p is one of the mounted folders or
// lies inside one: it is then at the same path in the sandbox already.
func (h HostToolchain) Covers(p string) bool {
	p = path.Clean(p)
	for _, m := range h.Mounts {
		if p == m.Source || isUnder(p, m.Source) {
			return true
		}
	}
	return false
}

// HostTools finds which of HostSystemFolders and HostEtcEntries exist on
// the Engine's host (asking the Engine, see EngineHasPaths), looks through
// them for what must stay out of the sandbox (scanHost: credential files,
// runners' folders) and plans their mounts around that and the run's
// private paths (runKeepOuts, the mount policy): a folder that holds one is
// mounted child by child, recursively (planHostMounts), and what is left
// out is in LeftOut. It returns them as read-only mounts with the
// environment steps need to use them: PATH (the entries of goalrun's PATH
// that lie inside the mounted folders, in their order, then SystemPath)
// and the HostToolEnv variables whose paths lie inside them. goalrun looks
// through the folders itself when it shares the Engine's filesystem, else
// from a container of the Engine (ScanBinary). Errors: the Engine cannot
// be asked (it does not say which bind sources are missing), an Engine
// call failed, or the folders cannot be looked through.
func HostTools(ctx context.Context, cli DockerAPI, opts HostToolsOptions) (HostToolchain, error) {
	cli = bounded(cli)
	env := opts.Env
	if env == nil {
		env = os.Environ()
	}
	vars := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	var info system.Info
	if opts.Info != nil {
		info = *opts.Info
	} else {
		var err error
		if info, err = cli.Info(ctx); err != nil {
			return HostToolchain{}, fmt.Errorf("sandbox: host tools: reading the Engine's info at %s: %w", cli.DaemonHost(), err)
		}
	}
	candidates := hostCandidates()
	var h HostToolchain
	var err error
	exists, remembered := rememberedHostPaths(opts, info, candidates)
	if remembered {
		h.Remembered = true
	} else {
		if exists, err = EngineHasPaths(ctx, cli, opts.Image, candidates); err != nil {
			return HostToolchain{}, err
		}
		var there []string
		for _, p := range candidates {
			if exists[p] {
				there = append(there, p)
			}
		}
		rememberHostPaths(ctx, opts, info, candidates, there)
	}
	var present []string
	for _, p := range candidates {
		if exists[p] {
			present = append(present, p)
		}
	}
	hostname := vars["HOSTNAME"]
	if hostname == "" {
		hostname, _ = os.Hostname()
	}
	view := detectEngineView(ctx, cli, info, hostname)
	ws := ""
	if opts.Workspace != "" {
		if ws, err = workspaceDir(opts.Workspace); err != nil {
			return HostToolchain{}, err
		}
	}
	policy := newMountPolicy(vars["HOME"], lookup, cli.DaemonHost())
	if r := info.DockerRootDir; r != "" && path.IsAbs(r) {
		policy.addTree(r, "the Docker Engine's data root (docker info: Docker Root Dir)")
	}
	policy = policy.withKeepOuts(runKeepOuts(lookup, func(p string) (string, bool) { return view.hostPath(p, false) }, ws))
	shares := sharesFilesystem(view, candidates, exists)
	if !shares && remembered && opts.plan == nil && view.self == nil && view.local {
		// The remembered answer differs from what goalrun sees on the
		// Engine's own host: ask the Engine again.
		if exists, err = EngineHasPaths(ctx, cli, opts.Image, candidates); err != nil {
			return HostToolchain{}, err
		}
		h.Remembered, present = false, nil
		for _, p := range candidates {
			if exists[p] {
				present = append(present, p)
			}
		}
		rememberHostPaths(ctx, opts, info, candidates, present)
		shares = sharesFilesystem(view, candidates, exists)
	}
	var plan hostPlan
	switch {
	case opts.plan != nil:
		plan, err = opts.plan(ctx, policy, present)
	case shares:
		cache := newScanCache(opts.CacheDir)
		if cache != nil {
			cache.early = opts.Ahead
		}
		plan = scanAndPlan(policy, present, cache)
	case opts.ScanBinary != "":
		plan, err = scanThroughEngine(ctx, cli, opts.Image, opts.ScanBinary, policy, present)
	default:
		err = fmt.Errorf("sandbox: host tools: goalrun cannot see the folders of the Engine at %s's host to look through them (it runs in a container, or the Engine elsewhere), and has no statically linked goalrun to look from a container", cli.DaemonHost())
	}
	if err != nil {
		return HostToolchain{}, err
	}
	if c := plan.confirm; c != nil {
		h.Confirm = func(ctx context.Context) error {
			if !c(ctx) {
				if err := ctx.Err(); err != nil {
					return err
				}
				return ErrHostScanStale
			}
			return nil
		}
	}
	for _, m := range plan.Mounts {
		h.Mounts = append(h.Mounts, Mount{Source: m.Source, Target: m.Target, ReadOnly: true, EngineHost: true, Name: "host folder " + m.Source})
	}
	h.LeftOut = plan.LeftOut
	h.Env = map[string]string{"PATH": stepPath(vars["PATH"], h.Covers)}
	for k, v := range vars {
		if !carriedToolVar(k) {
			continue
		}
		if carriedValue(v, h.Covers) {
			h.Env[k] = v
		}
	}
	return h, nil
}

// factHostPaths is the EngineFacts kind "these candidates exist on the
// Engine's host".
const factHostPaths = "host-paths"

// hostPathsKey is what the Engine's answer about candidates depends on
// besides the Engine: the candidates, and which of them goalrun sees
// (lstat). When goalrun runs on the Engine's host, a folder that appears
// or goes away there changes the key; otherwise the fact's age bounds how
// long a change goes unseen (and a missing bind source has it probed
// again).
func hostPathsKey(candidates []string) string {
	var b strings.Builder
	for _, p := range candidates {
		b.WriteString(p)
		if _, err := os.Lstat(p); err == nil {
			b.WriteString("\x01")
		} else {
			b.WriteString("\x00")
		}
	}
	return b.String()
}

// rememberHostPaths keeps there, the candidates that exist on the Engine's
// host, as info's answer (opts.Facts), once opts.ConfirmInfo confirmed
// info when it is a remembered one.
func rememberHostPaths(ctx context.Context, opts HostToolsOptions, info system.Info, candidates, there []string) {
	if opts.Facts.Dir == "" {
		return
	}
	if opts.ConfirmInfo != nil && opts.ConfirmInfo(ctx) != nil {
		return
	}
	_ = opts.Facts.store(factHostPaths, info, hostPathsKey(candidates), there)
}

// rememberedHostPaths returns the remembered answer about which
// candidates exist (only candidates: a fact can never add a path), unless
// opts asks for a fresh probe or none is remembered.
func rememberedHostPaths(opts HostToolsOptions, info system.Info, candidates []string) (map[string]bool, bool) {
	if opts.Reprobe {
		return nil, false
	}
	var there []string
	if !opts.Facts.load(factHostPaths, info, hostPathsKey(candidates), &there) {
		return nil, false
	}
	exists := make(map[string]bool, len(candidates))
	for _, p := range candidates {
		exists[p] = slices.Contains(there, p)
	}
	return exists, true
}

// IsBindSourceMissing reports whether err is the Engine's refusal of a
// bind mount whose source is not on its host.
func IsBindSourceMissing(err error) bool {
	return err != nil && strings.Contains(err.Error(), bindSourceMissing)
}

// sharesFilesystem reports whether goalrun sees the Engine's host's
// folders itself: the Engine is local (engineView) and every candidate
// exists here exactly when it exists there (goalrun in a container the
// Engine does not know sees another /usr, /lib32 …).
func sharesFilesystem(view engineView, candidates []string, exists map[string]bool) bool {
	if view.self != nil || !view.local {
		return false
	}
	for _, c := range candidates {
		_, err := os.Stat(c)
		if (err == nil) != exists[c] {
			return false
		}
	}
	return true
}

// hostCandidates are the host paths HostTools looks for, in mount order.
func hostCandidates() []string {
	out := append([]string(nil), HostSystemFolders...)
	out = append(out, hostSbinFiles...)
	return append(out, HostEtcEntries...)
}

// carriedToolVar reports whether k is one of HostToolEnv or starts with one
// of hostToolEnvPrefixes.
func carriedToolVar(k string) bool {
	for _, n := range HostToolEnv {
		if k == n {
			return true
		}
	}
	for _, pre := range hostToolEnvPrefixes {
		if strings.HasPrefix(k, pre) && len(k) > len(pre) {
			return true
		}
	}
	return false
}

// carriedValue reports whether v is a non-empty list of absolute paths
// (":"-separated) that all lie inside the mounted folders.
func carriedValue(v string, covers func(string) bool) bool {
	if v == "" || strings.ContainsAny(v, "\n\x00") {
		return false
	}
	for _, p := range strings.Split(v, ":") {
		if !path.IsAbs(p) || !covers(p) {
			return false
		}
	}
	return true
}

// stepPath is the PATH steps get: the absolute entries of hostPath that
// covers accepts, in their order, then SystemPath's entries not already
// there; duplicates are dropped.
func stepPath(hostPath string, covers func(string) bool) string {
	seen := map[string]bool{}
	var out []string
	for _, p := range strings.Split(hostPath, ":") {
		if !path.IsAbs(p) {
			continue
		}
		p = path.Clean(p)
		if seen[p] || !covers(p) {
			continue
		}
		seen[p] = true
		out = append(out, p)
	}
	for _, p := range strings.Split(SystemPath, ":") {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return strings.Join(out, ":")
}

// The Engine's own check of a bind mount's source answers "does this path
// exist on the Engine's host?" without creating anything: a container
// create whose first mount is the path and whose second is invalid fails
// either because the path is missing (bindSourceMissing, moby's
// errBindSourceDoesNotExist in volume/mounts/linux_parser.go) or, the path
// being there, on the second mount (its target is not absolute, so it names
// probeSentinel).
const (
	bindSourceMissing = "bind source path does not exist"
	probeSentinel     = "goalrun-probe-sentinel"
	// probeConcurrency bounds the Engine calls EngineHasPaths makes at
	// once.
	probeConcurrency = 8
)

// errProbeUnreliable is wrapped by EngineHasPaths when the Engine does not
// answer the mount check as expected.
var errProbeUnreliable = errors.New("the Engine does not say which bind mount sources are missing")

// EngineHasPaths reports which of paths (absolute) exist on the Engine's
// host, asking the Engine (see bindSourceMissing; image must be on the
// Engine, no container is created). It first checks that a path that
// cannot exist is reported missing, so an Engine that validates mounts in
// another order (or not at all) is an error, not a list of paths that are
// not there.
func EngineHasPaths(ctx context.Context, cli DockerAPI, image string, paths []string) (map[string]bool, error) {
	cli = bounded(cli)
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	absent := "/goalrun-absent-" + hex.EncodeToString(nonce[:])
	if there, err := engineHasPath(ctx, cli, image, absent); err != nil {
		return nil, err
	} else if there {
		return nil, fmt.Errorf("sandbox: host tools: %w: the Engine at %s accepted %s as a bind source", errProbeUnreliable, cli.DaemonHost(), absent)
	}
	out := make(map[string]bool, len(paths))
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	sem := make(chan struct{}, probeConcurrency)
	for _, p := range paths {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			there, err := engineHasPath(ctx, cli, image, p)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			out[p] = there
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}

// engineHasPath asks the Engine whether p exists on its host (see
// bindSourceMissing). Should the Engine create the container after all, it
// is removed at once and the answer is an error.
func engineHasPath(ctx context.Context, cli containerEngine, image, p string) (bool, error) {
	hc := &container.HostConfig{
		NetworkMode: network.NetworkNone,
		Mounts: []mount.Mount{
			{Type: mount.TypeBind, Source: p, Target: "/goalrun-probe", ReadOnly: true},
			{Type: mount.TypeTmpfs, Target: probeSentinel},
		},
	}
	host := os.Getenv("HOSTNAME")
	if host == "" {
		host, _ = os.Hostname()
	}
	labels := map[string]string{
		LabelRun: "host-tools-probe", LabelRole: "probe", LabelOwner: ownerLabel(ownerHost(host)),
		LabelExpires: strconv.FormatInt(time.Now().Add(expiryGrace).Unix(), 10),
	}
	resp, err := cli.ContainerCreate(ctx, &container.Config{Image: image, Entrypoint: []string{}, Cmd: []string{"true"}, Labels: labels}, hc, nil, nil, "")
	if err == nil {
		cctx, cancel := bg(ctx)
		defer cancel()
		_ = cli.ContainerRemove(cctx, resp.ID, container.RemoveOptions{Force: true})
		return false, fmt.Errorf("sandbox: host tools: %w: the Engine at %s created a container with an invalid mount", errProbeUnreliable, cli.DaemonHost())
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, bindSourceMissing):
		return false, nil
	case strings.Contains(msg, probeSentinel):
		return true, nil
	case ctx.Err() != nil:
		return false, ctx.Err()
	}
	return false, fmt.Errorf("sandbox: host tools: asking the Engine at %s whether %s exists: %w", cli.DaemonHost(), p, err)
}
