package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrDangerousMount is wrapped by StartDocker's error when a configured mount
// (the workspace or Config.Mounts) resolves to a path the sandbox must never
// see: a container runtime socket or a folder holding one, "/", the user's
// home, ~/.ssh, or a credential folder (sandbox.md, "Defaults").
var ErrDangerousMount = errors.New("sandbox: dangerous mount refused")

// ErrRootWorkspace is returned by StartDocker when a bind-mounted workspace
// belongs to root and Config.User is empty: goalrun never runs a sandbox as
// root implicitly. Copy mode, a chown to a normal user or Config.User
// avoids it.
var ErrRootWorkspace = errors.New("sandbox: docker: root-owned workspace refused")

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

// credentialDirs are folders (relative to the home directory) that hold
// credentials; neither they, anything inside them nor anything above them may
// be mounted.
var credentialDirs = []string{
	".ssh", ".gnupg", ".aws", ".azure", ".config/gcloud", ".kube", ".docker",
	".config/gh", ".oci", ".config/doctl", ".terraform.d", ".netrc",
	".git-credentials", ".npmrc", ".pypirc", ".config/containers",
}

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
	// reasons explains each path in above and tree.
	reasons map[string]string
}

// newMountPolicy builds the policy from the environment: home is the user's
// home directory ("" when unknown), lookup reads variables naming credential
// files, daemonHost is the Engine address in use ("unix:///var/run/docker.sock"),
// whose socket is refused too.
func newMountPolicy(home string, lookup func(string) (string, bool), daemonHost string) mountPolicy {
	p := mountPolicy{reasons: map[string]string{}}
	addAbove := func(path, reason string) {
		for _, q := range resolvedForms(path) {
			p.above = append(p.above, q)
			p.reasons[q] = reason
		}
	}
	addTree := func(path, reason string) {
		for _, q := range resolvedForms(path) {
			p.tree = append(p.tree, q)
			p.reasons[q] = reason
		}
	}
	addAbove("/", "the host's root folder")
	for _, s := range runtimeSockets {
		addAbove(s, "a container runtime socket")
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

// check refuses source (a path as goalrun sees it) when it, or the path its
// symlinks resolve to, is dangerous; it also refuses a source that is itself
// a socket. what names the mount in the error ("workspace", "mount 2").
func (p mountPolicy) check(what, source string) error {
	if !filepath.IsAbs(source) {
		return fmt.Errorf("sandbox: %s %q: the source must be an absolute path", what, source)
	}
	forms := resolvedForms(source)
	for _, f := range forms {
		for _, a := range p.above {
			if f == a || isUnder(a, f) {
				return p.refuse(what, source, f, a)
			}
		}
		for _, t := range p.tree {
			if f == t || isUnder(t, f) || isUnder(f, t) {
				return p.refuse(what, source, f, t)
			}
		}
		if st, err := os.Stat(f); err == nil && st.Mode().Type()&fs.ModeSocket != 0 {
			return fmt.Errorf("%w: %s %q resolves to the socket %q; sockets never go into a sandbox (goalrun shares only its own egress proxy sockets)", ErrDangerousMount, what, source, f)
		}
	}
	return nil
}

func (p mountPolicy) refuse(what, source, resolved, hit string) error {
	shown := source
	if resolved != source {
		shown = fmt.Sprintf("%s (resolves to %s)", source, resolved)
	}
	rel := "is"
	switch {
	case isUnder(hit, resolved):
		rel = "contains"
	case isUnder(resolved, hit):
		rel = "is inside"
	}
	return fmt.Errorf("%w: %s %s %s %s, %s; mount a narrower folder that holds no credentials or sockets",
		ErrDangerousMount, what, shown, rel, hit, p.reasons[hit])
}

// isUnder reports whether path is strictly below dir (both clean, absolute).
func isUnder(path, dir string) bool {
	if dir == "/" {
		return path != "/" && strings.HasPrefix(path, "/")
	}
	return strings.HasPrefix(path, dir+"/")
}
