package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrDangerousMount is wrapped by StartDocker's error when a configured mount
// (the workspace or Config.Mounts) resolves to a path the sandbox must never
// see: a container runtime socket or a folder holding one, "/", a home
// folder, /root, ~/.ssh or another credential folder, the host's secrets
// in /etc (shadow, SSH host keys, TLS private keys) or /etc wholesale, the
// kernel's /proc, /sys and /dev, or the Engine's own data (docs/security.md,
// "Defaults of every container"; README.md, "Security model").
var ErrDangerousMount = errors.New("sandbox: dangerous mount refused")

// ErrMountTarget is wrapped by StartDocker's error when a Config.Mounts
// target cannot be: not a clean absolute path, over what the sandbox
// provides (the workspace, /tmp, /run, HOME), taken by another mount, or
// inside a read-only mount where the Engine cannot make its mount point.
var ErrMountTarget = errors.New("sandbox: mount target refused")

// ErrRootWorkspace is returned by StartDocker when a bind-mounted workspace
// belongs to root and Config.User is empty: goalrun never runs a sandbox as
// root implicitly. Copy mode, a chown to a normal user or Config.User
// avoids it.
var ErrRootWorkspace = errors.New("sandbox: docker: root-owned workspace refused")

// RootWorkspaceError is StartDocker's error for a root-owned bind-mounted
// workspace (errors.Is ErrRootWorkspace); callers with flags of their own
// name them from Workspace instead of Config.User.
type RootWorkspaceError struct {
	// Workspace is the host path of the refused workspace.
	Workspace string
}

func (e *RootWorkspaceError) Error() string {
	return fmt.Sprintf("%v: the workspace %q belongs to root and goalrun never runs a sandbox as root implicitly; give it to a normal user (chown -R 1000:1000 %q), copy it in and out instead (WorkspaceCopy or WorkspaceAuto) or set the sandbox user (Config.User)",
		ErrRootWorkspace, e.Workspace, e.Workspace)
}

// Unwrap makes errors.Is(err, ErrRootWorkspace) hold.
func (e *RootWorkspaceError) Unwrap() error { return ErrRootWorkspace }

// runtimeSockets are the usual places of container runtime sockets. Mounting
// one (or a folder above it) hands the sandbox the host: whoever can talk to
// the runtime can start a privileged container.
var runtimeSockets = []string{
	"/var/run/docker.sock", "/run/docker.sock",
	"/run/containerd/containerd.sock", "/var/run/containerd/containerd.sock",
	"/run/k3s/containerd/containerd.sock",
	"/run/crio/crio.sock", "/var/run/crio/crio.sock",
	"/run/podman/podman.sock", "/var/run/podman/podman.sock",
	"/run/buildkit/buildkitd.sock",
	"/var/run/cri-dockerd.sock", "/run/cri-dockerd.sock",
	"/run/dockershim.sock",
}

// engineDataDirs are where container engines and runtimes usually keep their
// data: images, containers' file systems, volumes, snapshots. A sandbox given
// one (or a folder inside or above it) could rewrite other containers and the
// Engine's own state, and copy mode would copy the whole of it. The Engine's
// own data root (Info.DockerRootDir) is refused too, wherever it is.
var engineDataDirs = []string{
	"/var/lib/docker", "/var/lib/containerd", "/run/containerd", "/var/run/containerd",
	"/var/lib/containers", "/run/containers", "/var/lib/buildkit", "/var/lib/cri-o",
	"/var/snap/docker/common/var-lib-docker", "/var/lib/rancher", "/var/lib/kubelet",
	"/run/docker", "/var/run/docker",
}

// engineDataHomeDirs are the rootless engines' data folders, relative to the
// home folder (rootless Docker, rootless Podman).
var engineDataHomeDirs = []string{".local/share/docker", ".local/share/containers"}

// credentialDirs are folders and files (relative to a home directory) that
// hold credentials; neither they, anything inside them nor anything above
// them may be mounted. The agents' own logins are files, not their folders:
// Claude Code's older local install lives in ~/.claude/local, which may be
// mounted; ~/.claude/.credentials.json may not.
var credentialDirs = []string{
	".ssh", ".gnupg", ".aws", ".azure", ".config/gcloud", ".kube", ".docker",
	".config/gh", ".oci", ".config/doctl", ".terraform.d", ".netrc",
	".git-credentials", ".npmrc", ".pypirc", ".config/containers",
	".cargo/credentials", ".cargo/credentials.toml", ".m2/settings.xml", ".m2/settings-security.xml",
	".gradle/gradle.properties", ".vault-token", ".password-store", ".local/share/keyrings",
	".claude/.credentials.json", ".claude.json", ".codex/auth.json", ".gemini/oauth_creds.json",
	// A GitHub Actions runner's registration and credentials (a folder
	// holding one is the runner's: runnerMarkers).
	".runner", ".credentials", ".credentials_rsaparams",
	// Private keys, database and cloud tools' logins.
	"id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "_netrc", ".pgpass", ".my.cnf", ".s3cfg", ".boto",
	".dockercfg", "kubeconfig", ".terraformrc", ".gem/credentials", ".config/hub", ".config/git/credentials",
	".composer/auth.json", ".config/composer/auth.json", ".pulumi/credentials.json", ".databrickscfg",
}

// hostSecrets are system paths that hold the host's secrets or state;
// neither they, anything inside them nor anything above them may be mounted
// (so /etc is never mounted wholesale, nor /var). Container engines' data
// are engineDataDirs.
var hostSecrets = []struct{ path, reason string }{
	{"/etc/shadow", "the host's password hashes"},
	{"/etc/shadow-", "the host's password hashes"},
	{"/etc/gshadow", "the host's group password hashes"},
	{"/etc/gshadow-", "the host's group password hashes"},
	{"/etc/sudoers", "the host's sudo rules"},
	{"/etc/sudoers.d", "the host's sudo rules"},
	{"/etc/ssh", "the host's SSH keys"},
	{"/etc/ssl/private", "the host's TLS private keys"},
	{"/etc/pki/tls/private", "the host's TLS private keys"},
	{"/etc/docker", "the Docker Engine's configuration and TLS keys"},
	{"/etc/kubernetes", "the cluster's credentials"},
	{"/etc/rancher", "the cluster's credentials"},
	{"/proc", "the kernel's view of every process (environments hold secrets)"},
	{"/sys", "the kernel's devices and settings"},
	{"/dev", "the host's devices"},
	{"/run", "the host's runtime state and sockets"},
	{"/var/run", "the host's runtime state and sockets"},
}

// homeParents are the folders whose direct children are home folders;
// a home folder of any user (and /root) is refused as the user's own is,
// also on an Engine's host where goalrun cannot know who the users are.
var homeParents = []string{"/home", "/Users", "/var/home"}

// credentialEnv name variables that point at credential files or folders.
var credentialEnv = []string{
	"AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "GOOGLE_APPLICATION_CREDENTIALS",
	"KUBECONFIG", "DOCKER_CONFIG", "AZURE_CONFIG_DIR", "CLOUDSDK_CONFIG", "GNUPGHOME",
	"XDG_RUNTIME_DIR",
}

// mountPolicy decides which bind sources are refused.
type mountPolicy struct {
	// above are refused when the source is one of them or an ancestor of
	// one (mounting "/var" exposes "/var/run/docker.sock").
	above []string
	// tree are refused when the source is one of them, inside one or above
	// one.
	tree []string
	// allow are paths inside a tree entry that are not refused for
	// lying in it (a runner's tool cache inside the runner's work folder).
	allow []string
	// reasons explains each path in above and tree.
	reasons map[string]string
}

// newMountPolicy builds the policy from the environment: home is the user's
// home directory ("" when unknown), lookup reads variables naming credential
// files, daemonHost is the Engine address in use ("unix:///var/run/docker.sock"),
// whose socket is refused too. The caller adds the Engine's own data root
// (addTree).
func newMountPolicy(home string, lookup func(string) (string, bool), daemonHost string) mountPolicy {
	p := mountPolicy{reasons: map[string]string{}}
	addAbove, addTree := p.addAbove, p.addTree
	addAbove("/", "the host's root folder")
	p.addEngineData(home)
	addAbove("/root", "root's home folder")
	for _, s := range runtimeSockets {
		addAbove(s, "a container runtime socket")
	}
	for _, s := range hostSecrets {
		addTree(s.path, s.reason)
	}
	if sock, ok := strings.CutPrefix(daemonHost, "unix://"); ok && sock != "" {
		addAbove(sock, "the Docker Engine's socket")
	}
	if home != "" && filepath.IsAbs(home) {
		addAbove(home, "the home folder")
		for _, d := range credentialDirs {
			addTree(filepath.Join(home, d), "a credential folder (~/"+d+")")
		}
	}
	for _, k := range credentialEnv {
		if v, ok := lookup(k); ok && filepath.IsAbs(v) {
			for _, part := range filepath.SplitList(v) {
				if filepath.IsAbs(part) {
					if k == "XDG_RUNTIME_DIR" {
						addAbove(part, "the user's runtime folder (rootless runtime sockets, $XDG_RUNTIME_DIR)")
					} else {
						addTree(part, "a credential path ($"+k+")")
					}
				}
			}
		}
	}
	return p
}

// clone returns a copy of p that can be added to without changing p.
func (p mountPolicy) clone() mountPolicy {
	c := mountPolicy{above: slices.Clone(p.above), tree: slices.Clone(p.tree), allow: slices.Clone(p.allow), reasons: make(map[string]string, len(p.reasons))}
	for k, v := range p.reasons {
		c.reasons[k] = v
	}
	return c
}

// addAbove refuses path (both spellings), and what holds it, for reason;
// what lies inside it may be mounted.
func (p *mountPolicy) addAbove(path, reason string) {
	for _, q := range resolvedForms(path) {
		p.above = append(p.above, q)
		p.reason(q, reason)
	}
}

// reason records why q is refused, unless an earlier rule said so.
func (p *mountPolicy) reason(q, why string) {
	if _, ok := p.reasons[q]; !ok {
		p.reasons[q] = why
	}
}

// addAllow lets path, and what lies in it, be mounted although it lies in
// a tree entry.
func (p *mountPolicy) addAllow(path string) {
	p.allow = append(p.allow, resolvedForms(path)...)
}

// addTree refuses path (both spellings, see resolvedForms), what is inside
// it and what holds it, for reason.
func (p *mountPolicy) addTree(path, reason string) {
	for _, q := range resolvedForms(path) {
		p.tree = append(p.tree, q)
		p.reason(q, reason)
	}
}

// addEngineData refuses the usual engine and runtime data folders
// (engineDataDirs, and engineDataHomeDirs below home when it is known).
func (p *mountPolicy) addEngineData(home string) {
	for _, d := range engineDataDirs {
		p.addTree(d, "a container engine's or runtime's data")
	}
	if home != "" && filepath.IsAbs(home) {
		for _, d := range engineDataHomeDirs {
			p.addTree(filepath.Join(home, d), "a rootless container engine's data (~/"+d+")")
		}
	}
}

// CheckEngineData refuses a workspace that is, lies inside or holds a
// container engine's or runtime's data folder (the usual places, and
// dataRoot when not "": an Engine's reported data root) — for sandboxes
// without a mount policy of their own (Local). home is the user's home
// folder ("" when unknown). The error wraps ErrDangerousMount.
func CheckEngineData(workspace, home, dataRoot string) error {
	p := mountPolicy{reasons: map[string]string{}}
	p.addEngineData(home)
	if dataRoot != "" && filepath.IsAbs(dataRoot) {
		p.addTree(dataRoot, "the Docker Engine's data root (docker info: Docker Root Dir)")
	}
	return p.check("workspace", workspace)
}

// CheckMountSource refuses a bind mount source (a path as goalrun sees it,
// or on the Engine's host) that StartDocker's mount policy would refuse
// for goalrun's environment (lookup reads HOME and the credential
// variables) and the Engine at daemonHost, so a caller can say so before
// it looks for the path; StartDocker checks again, with the Engine's data
// root. what names the mount in the error, which wraps ErrDangerousMount.
func CheckMountSource(what, source string, lookup func(string) (string, bool), daemonHost string) error {
	home, _ := lookup("HOME")
	return newMountPolicy(home, lookup, daemonHost).check(what, source)
}

// resolvedForms returns the cleaned path and, when it differs, the path with
// symlinks resolved (as far as it exists), so both spellings are caught.
func resolvedForms(path string) []string {
	clean := filepath.Clean(path)
	out := []string{clean}
	if r := resolveExisting(clean); r != clean {
		out = append(out, r)
	}
	return out
}

// resolveExisting resolves symlinks in the longest existing prefix of path
// and appends the rest unchanged.
func resolveExisting(path string) string {
	rest := ""
	cur := path
	for {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return path
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// relation is how a mount source stands to a path the policy refuses.
type relation int

const (
	relNone   relation = iota
	relIs              // the source is the refused path
	relInside          // the source lies inside it
	relHolds           // the source is a folder above it
)

// verdict is the policy's answer for one source: the first refusal found,
// a source that is or lies in a refused path before one that only holds
// one (the default sandbox mounts a folder that holds one child by child,
// see planHostMounts).
type verdict struct {
	rel relation
	// form is the spelling of the source that hit (resolvedForms).
	form string
	// hit is the refused path ("" for a rule by name).
	hit string
	// reason says what hit is, or the rule by name.
	reason string
	// socket: form is itself a socket.
	socket bool
}

// judge applies the policy to source (absolute; as goalrun sees it, and as
// its symlinks resolve here). A source that is a refused path wins over
// one inside a refused path, which wins over one holding a refused path;
// among equals, the first rule found.
func (p mountPolicy) judge(source string) verdict {
	var best verdict
	rank := map[relation]int{relNone: 0, relHolds: 1, relInside: 2, relIs: 3}
	keep := func(v verdict) {
		if rank[v.rel] > rank[best.rel] {
			best = v
		}
	}
	for _, f := range resolvedForms(source) {
		for _, a := range p.above {
			switch {
			case f == a:
				keep(verdict{rel: relIs, form: f, hit: a, reason: p.reasons[a]})
			case isUnder(a, f):
				keep(verdict{rel: relHolds, form: f, hit: a, reason: p.reasons[a]})
			}
		}
		for _, t := range p.tree {
			keep(p.judgeTree(f, t))
		}
		keep(p.judgeNames(f))
		if st, err := os.Stat(f); err == nil && st.Mode().Type()&fs.ModeSocket != 0 {
			keep(verdict{rel: relIs, form: f, socket: true})
		}
	}
	return best
}

// judgeTree relates f to the tree entry t, minding the allowed paths
// inside t (p.allow): an allowed path and what lies in it are not refused
// for lying in t, and t, or a folder in t, that holds one is a folder that
// holds refused paths (its other children) rather than one refused whole.
func (p mountPolicy) judgeTree(f, t string) verdict {
	v := verdict{form: f, hit: t, reason: p.reasons[t]}
	holdsAllowed := false
	for _, a := range p.allow {
		if !isUnder(a, t) {
			continue
		}
		if f == a || isUnder(f, a) {
			return verdict{}
		}
		holdsAllowed = holdsAllowed || f == t || isUnder(a, f)
	}
	switch {
	case holdsAllowed:
		v.rel = relHolds
	case f == t:
		v.rel = relIs
	case isUnder(t, f):
		v.rel = relHolds
	case isUnder(f, t):
		v.rel = relInside
	}
	return v
}

// check refuses source (a path as goalrun sees it) when it, or the path its
// symlinks resolve to, is dangerous; it also refuses a source that is itself
// a socket. what names the mount in the error ("workspace", "mount 2").
func (p mountPolicy) check(what, source string) error {
	if !filepath.IsAbs(source) {
		return fmt.Errorf("sandbox: %s %q: the source must be an absolute path", what, source)
	}
	v := p.judge(source)
	if v.rel == relNone {
		return nil
	}
	return p.refusal(what, source, v)
}

// refusal is the error for a source the policy refused (v.rel != relNone).
func (p mountPolicy) refusal(what, source string, v verdict) error {
	shown := source
	if v.form != source {
		shown = fmt.Sprintf("%s (resolves to %s)", source, v.form)
	}
	switch {
	case v.socket:
		return fmt.Errorf("%w: %s %q resolves to the socket %q; sockets never go into a sandbox (goalrun shares only its own egress proxy sockets)", ErrDangerousMount, what, source, v.form)
	case v.hit == "":
		return fmt.Errorf("%w: %s %s is %s; mount a narrower folder that holds no credentials or sockets",
			ErrDangerousMount, what, shown, v.reason)
	}
	rel := "is"
	switch v.rel {
	case relHolds:
		rel = "contains"
	case relInside:
		rel = "is inside"
	}
	return fmt.Errorf("%w: %s %s %s %s, %s; mount a narrower folder that holds no credentials or sockets",
		ErrDangerousMount, what, shown, rel, v.hit, v.reason)
}

// judgeNames refuses, by its name alone, a path that is any user's home
// folder (a direct child of /home, /Users or /var/home) or a folder above
// one, or that is, lies in or is above a credential folder of credentialDirs
// wherever it is (".../.ssh", ".../.config" above ".config/gcloud"). These
// rules need no lookup, so they hold for paths on an Engine's host that
// goalrun cannot see (Mount.EngineHost).
func (p mountPolicy) judgeNames(f string) verdict {
	for _, hp := range homeParents {
		if f == hp {
			return verdict{rel: relHolds, form: f, reason: "the folder of home folders"}
		}
		if isUnder(f, hp) && !strings.Contains(strings.TrimPrefix(f, hp+"/"), "/") {
			return verdict{rel: relIs, form: f, reason: "a home folder"}
		}
	}
	parts := strings.Split(strings.TrimPrefix(f, "/"), "/")
	for _, d := range credentialDirs {
		cred := strings.Split(d, "/")
		for i := range parts {
			n := 0
			for n < len(cred) && i+n < len(parts) && parts[i+n] == cred[n] {
				n++
			}
			switch {
			case n == len(cred) && i+n == len(parts):
				return verdict{rel: relIs, form: f, reason: "a credential folder or file (…/" + d + ")"}
			case n == len(cred):
				return verdict{rel: relInside, form: f, reason: "a credential folder or file (…/" + d + ")"}
			case n > 0 && i+n == len(parts):
				return verdict{rel: relHolds, form: f, reason: "above a credential folder or file (…/" + d + ")"}
			}
		}
	}
	return verdict{}
}

// isUnder reports whether path is strictly below dir (both clean, absolute).
func isUnder(path, dir string) bool {
	if dir == "/" {
		return path != "/" && strings.HasPrefix(path, "/")
	}
	return strings.HasPrefix(path, dir+"/")
}
