package sandbox

import "time"

// Network is a sandbox network mode (sandbox.md, "Network").
type Network string

const (
	// NetworkNone gives the sandbox nothing but loopback.
	NetworkNone Network = "none"
	// NetworkEgress gives the sandbox nothing but loopback and a relay to
	// goalrun's proxy, which allows only allowlisted host:port pairs.
	NetworkEgress Network = "egress"
	// NetworkBridge is Docker's default bridge network: everything is
	// reachable.
	NetworkBridge Network = "bridge"
	// NetworkHost shares the host's network: everything is reachable,
	// including the host's loopback.
	NetworkHost Network = "host"
)

// Networks lists the valid Network values in the order they are documented.
var Networks = []Network{NetworkNone, NetworkEgress, NetworkBridge, NetworkHost}

// WorkspaceMode is how the workspace reaches the sandbox.
type WorkspaceMode string

const (
	// WorkspaceAuto picks bind when the Engine shares goalrun's filesystem
	// (directly or through goalrun's own container's mounts), else copy.
	WorkspaceAuto WorkspaceMode = "auto"
	// WorkspaceBind bind-mounts the workspace at the sandbox root.
	WorkspaceBind WorkspaceMode = "bind"
	// WorkspaceCopy copies the workspace into the sandbox before the first
	// step and the changes back out after each agent step.
	WorkspaceCopy WorkspaceMode = "copy"
	// WorkspaceHost is the local sandbox: steps run in the workspace itself.
	WorkspaceHost WorkspaceMode = "host"
)

// Upstream is an HTTP API (a model API) the agent must reach. In egress mode
// goalrun's proxy serves it as a reverse proxy inside the sandbox and adds the
// real key upstream, so the sandbox only ever holds a dummy key. Without a
// proxy (local, bridge, host) the agent gets the real URL and key and the key's
// name is recorded in Posture.SecretsInSandbox.
type Upstream struct {
	// URL is the real base URL, for example "https://api.anthropic.com".
	URL string
	// BaseURLEnv names the variable that tells the agent the base URL, for
	// example "ANTHROPIC_BASE_URL"; it is set in agent steps.
	BaseURLEnv string
	// KeyEnv names the variable that carries the key, for example
	// "ANTHROPIC_API_KEY"; agent steps get DummyKey in it when the proxy
	// injects the real one, else the real key.
	KeyEnv string
	// Header is the request header the real key goes into upstream, for
	// example "x-api-key" or "Authorization".
	Header string
	// Prefix is put before the key in Header, for example "Bearer ".
	Prefix string
	// Key is the real key. It never enters an egress sandbox.
	Key string
}

// DummyKey is the placeholder key agent steps hold when the egress proxy adds
// the real key upstream.
const DummyKey = "goalrun-dummy-key-the-proxy-adds-the-real-one"

// Mount is an extra bind mount (an agent CLI, a toolchain). Docker refuses
// mounts whose source resolves to the Docker socket or another runtime
// socket, "/", the user's home, ~/.ssh or a cloud credential folder.
type Mount struct {
	// Source is the host path.
	Source string
	// Target is the absolute path inside the sandbox.
	Target string
	// ReadOnly mounts it read-only; it should almost always be true.
	ReadOnly bool
}

// Config says what the sandbox should be. Posture says what it became.
type Config struct {
	// RunID labels everything the run creates (goalrun.run=<RunID>).
	RunID string
	// Workspace is the absolute host path of the workspace.
	Workspace string
	// Network is the network mode; "" means NetworkNone.
	Network Network
	// AllowHosts are the egress allowlist entries, "host:port" (port
	// defaults to 443 when absent).
	AllowHosts []string
	// Upstreams are model APIs served through the proxy with key injection.
	Upstreams []Upstream
	// Env is the non-secret base environment of agent steps (HOME and
	// similar); check steps get only the fixed minimal environment plus
	// Cmd.Env.
	Env map[string]string
	// ToolEnv is a non-secret environment both agent and check steps get
	// (toolchain settings: GOCACHE, CGO_ENABLED, GOFLAGS…; see
	// GoCacheMount). It must hold no secret and no proxy setting: the
	// check's environment stays free of both.
	ToolEnv map[string]string
	// Secrets are passed into agent steps as environment variables; their
	// names are recorded in Posture.SecretsInSandbox and the tier drops.
	Secrets map[string]string
	// FallbackNotice is recorded in the posture when the caller fell back to
	// this sandbox from the one asked for (see Posture.FallbackNotice).
	FallbackNotice string

	// PassEnv lists host variable names the Local sandbox copies into every
	// step (nil means DefaultPassEnv). Docker ignores it.
	PassEnv []string

	// Image is the Docker image reference (Docker only).
	Image string
	// WorkspaceMode is bind, copy or auto (Docker only; "" means auto).
	WorkspaceMode WorkspaceMode
	// HostOwned are files goalrun itself writes during the run (its
	// --output document, its --events log) that lie inside the workspace:
	// slash paths relative to Workspace, "../x" allowed when the mount is
	// widened to a repository root above the workspace (Posture.Mount).
	// They are goalrun's, not the agent's: in copy mode they are never
	// copied into the sandbox, and on copy-back nothing at or under them is
	// written or removed, nor is a folder above them replaced by a non-folder
	// or removed (Docker only; bind mode shares the files, and goalrun
	// writes them through descriptors it opened before the run). Paths that
	// land outside the mounted folder are ignored. StartDocker fails for an
	// absolute path or one naming the workspace or the mount root itself.
	HostOwned []string
	// Mounts are extra bind mounts (Docker only).
	Mounts []Mount
	// User is "uid:gid" for the container; "" means the workspace owner
	// (Docker only; root is never chosen implicitly).
	User string
	// MemoryBytes, PidsLimit and NanoCPUs are resource limits (Docker only;
	// 0 means the defaults: 4 GiB, 512, 2 CPUs).
	MemoryBytes, PidsLimit, NanoCPUs int64
	// RelayBinary is the path, as goalrun sees it, of a static goalrun
	// binary (usually goalrun's own executable) with the hidden __relay
	// subcommand (Docker only). It is bind-mounted read-only into the agent
	// container (or copied into a volume when the Engine cannot see it) and
	// runs as the container's main process: the egress relay, or an idle
	// process without egress. Required for NetworkEgress; without it the
	// other modes idle on the image's own sh.
	RelayBinary string
	// Lifetime is how long the run may last at most (the run's timeout);
	// the Docker sandbox labels what it creates with the time it expires
	// (LabelExpires), so Reap in another goalrun never removes a live run's
	// objects early. 0 means unknown: the label then says UnknownLifetime.
	Lifetime time.Duration
	// SocketDir is the folder in which the per-run folder of the egress
	// proxy's Unix sockets is made (Docker, egress only); "" means
	// os.TempDir(), or, when goalrun runs in a container, the first folder
	// the Engine can see through goalrun's own mounts.
	SocketDir string
}

// DefaultPassEnv is the host environment a Local step inherits: enough to
// find programs, write temporary files and build Go code, never the caller's
// whole environment.
var DefaultPassEnv = []string{
	"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "TMPDIR",
	"GOROOT", "GOPATH", "GOCACHE", "GOMODCACHE", "GOFLAGS", "GOPROXY", "GONOSUMDB", "GOTOOLCHAIN",
	"GOPRIVATE", "GONOPROXY", "GOSUMDB", "CGO_ENABLED",
}

// Posture is what a sandbox really applied, as recorded in the goalrun/1
// document's "sandbox" block (run-document.md). Field names and JSON tags are
// that contract; add fields only additively.
type Posture struct {
	// Mode is "docker" or "local".
	Mode string `json:"mode"`
	// Image and ImageDigest identify the image ("" for local).
	Image       string `json:"image,omitempty"`
	ImageDigest string `json:"image_digest,omitempty"`
	// Network is the applied network mode; local is always "host".
	Network Network `json:"network"`
	// EgressAllowlist is the host:port allowlist in egress mode.
	EgressAllowlist []string `json:"egress_allowlist,omitempty"`
	// EgressAllowed and EgressDenied count the proxy's decisions so far.
	EgressAllowed int `json:"egress_allowed,omitempty"`
	EgressDenied  int `json:"egress_denied"`
	// EgressDenials is a bounded sample (at most EgressDenialsKept) of
	// refused destinations with the reason, e.g. "169.254.169.254:80 (link-local)".
	EgressDenials []string `json:"egress_denials,omitempty"`
	// Tier is local, container, workspace-write or egress-only (sandbox.md,
	// "Tier"), computed from what was observed.
	Tier string `json:"tier"`
	// Root is the workspace path as the steps see it.
	Root string `json:"root"`
	// Mount is the host path mounted when it is wider than Root; nil otherwise.
	Mount *string `json:"mount"`
	// Workspace is how the workspace got in: bind, copy or host.
	Workspace WorkspaceMode `json:"workspace"`
	// User is "uid:gid" the steps run as.
	User string `json:"user"`
	// ReadOnlyRootfs, CapDrop, NoNewPrivileges, Seccomp, PidsLimit,
	// MemoryBytes and NanoCPUs are the applied hardening, read back from the
	// Engine.
	ReadOnlyRootfs  bool     `json:"read_only_rootfs"`
	CapDrop         []string `json:"cap_drop"`
	NoNewPrivileges bool     `json:"no_new_privileges"`
	Seccomp         string   `json:"seccomp,omitempty"`
	PidsLimit       int64    `json:"pids_limit"`
	MemoryBytes     int64    `json:"memory_bytes"`
	NanoCPUs        int64    `json:"nano_cpus,omitempty"`
	// Privileged is true when the container runs privileged (never chosen by
	// goalrun; recorded because a posture states what was observed).
	Privileged bool `json:"privileged,omitempty"`
	// Runtime is the OCI runtime (runc, runsc); "" for local.
	Runtime string `json:"runtime,omitempty"`
	// ExtraMounts lists, besides the workspace, every folder or file of the
	// host (or an Engine volume) the containers mount, as the container
	// path and ":ro" or ":rw", e.g. "/opt/goalrun/gocache:ro" (read back
	// from the Engine; the agent binary, a Go toolchain, goalrun's relay
	// and egress sockets). Empty for local.
	ExtraMounts []string `json:"extra_mounts,omitempty"`
	// SecretsInSandbox names (never values) the secrets the agent could read.
	SecretsInSandbox []string `json:"secrets_in_sandbox"`
	// FallbackNotice says why a sandbox that was asked for was replaced by
	// the local host; nil when there was no fallback.
	FallbackNotice *string `json:"fallback_notice"`
}

// EgressDenialsKept bounds Posture.EgressDenials.
const EgressDenialsKept = 8

// Tiers, weakest first (sandbox.md, "Tier").
const (
	TierLocal          = "local"
	TierContainer      = "container"
	TierWorkspaceWrite = "workspace-write"
	TierEgressOnly     = "egress-only"
)
