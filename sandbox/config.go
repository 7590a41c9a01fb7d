package sandbox

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"golang.org/x/net/http/httpproxy"
)

// Network is a sandbox network mode (docs/security.md, "Network modes").
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
	// Gateway marks URL as a model gateway the user named (goalrun's
	// --model-gateway): the egress proxy may reach it on a loopback,
	// private or CGNAT address (that host and port only), and the posture
	// records it (Posture.ModelGateway).
	Gateway bool
}

// gatewayOf returns the URL of the first upstream that is a named model
// gateway, or "".
func gatewayOf(ups []Upstream) string {
	for _, u := range ups {
		if u.Gateway {
			return u.URL
		}
	}
	return ""
}

// DummyKey is the placeholder key agent steps hold when the egress proxy adds
// the real key upstream.
const DummyKey = "goalrun-dummy-key-the-proxy-adds-the-real-one"

// Mount is an extra bind mount (an agent CLI, a toolchain, a host system
// folder). Docker refuses mounts whose source resolves to the Docker socket
// or another runtime socket, "/", a home folder, ~/.ssh or a cloud
// credential folder, the host's secrets in /etc or /etc wholesale, /proc,
// /sys, /dev, /run or the Engine's data (ErrDangerousMount).
type Mount struct {
	// Source is the host path: as goalrun sees it (translated through
	// goalrun's own container's mounts when goalrun runs in a container of
	// the Engine), or, with EngineHost, as the Engine's host sees it.
	Source string
	// Target is the absolute path inside the sandbox. It must not lie
	// inside another read-only mount's target: the Engine could not make
	// its mount point there.
	Target string
	// ReadOnly mounts it read-only; it should almost always be true.
	ReadOnly bool
	// EngineHost says Source is a path on the Engine's host, used as it is
	// (HostTools found it through the Engine): the host's system folders
	// when goalrun itself runs in a container.
	EngineHost bool
	// Name names the mount in errors, e.g. "--mount /opt/jdk"; "" means
	// "mount N (TARGET)".
	Name string
}

// AgentFile is a small file goalrun writes for the agent's CLI (its
// settings, e.g. the Gemini CLI's system settings). Agent steps can read it
// and never write it; check steps never see it.
type AgentFile struct {
	// Path is where the file is in a container: an absolute path whose
	// folder holds nothing else. The Docker sandbox mounts that folder
	// read-only from a per-run volume in which the folder and the file are
	// owned by root (mode 0755 and 0444), whoever runs goalrun: some CLIs
	// ignore a system settings file that is not root's.
	Path string
	// Content is the file's content, at most AgentFileMax bytes.
	Content []byte
	// LocalEnv and LocalPath say where the local sandbox, which cannot
	// place a file at a fixed path, puts it: LocalEnv names a variable
	// agent steps get, set to a per-run folder (mode 0700) that goalrun
	// makes and removes, and the file is written at LocalPath (a relative
	// slash path) inside it. Empty LocalEnv: the local sandbox provides
	// no file.
	LocalEnv, LocalPath string
}

// AgentFileMax bounds AgentFile.Content: 64 KiB (settings, not data).
const AgentFileMax = 64 << 10

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
	// OutboundProxy is the corporate proxy the egress proxy reaches allowed
	// destinations and the model APIs through (goalrun's own HTTPS_PROXY,
	// HTTP_PROXY and NO_PROXY: egress.OutboundFromEnv); nil dials directly.
	// Egress mode only: it decides nothing (egress.Config.OutboundProxy),
	// and the posture records it (Posture.EgressOutboundProxy).
	OutboundProxy *httpproxy.Config
	// EgressAllowNets are address blocks an allowlisted name may resolve
	// into although they are private or reserved (egress.Config.AllowNets),
	// for the agent's and the setup container's proxies: where a registry
	// mirror lives on the operator's network. Recorded in the posture.
	EgressAllowNets []netip.Prefix
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
	// Setup configures setup steps (RoleSetup) and the dependencies they
	// prepare; the zero value prepares nothing.
	Setup SetupConfig
	// AgentFiles are files goalrun writes for the agent's CLI (see
	// AgentFile); agent steps only.
	AgentFiles []AgentFile
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
	// HostLeftOut are the host paths (on the Engine's host) the caller
	// kept out of Mounts (HostToolchain.LeftOut): the posture lists them
	// (host_left_out), and StartDocker refuses a mount that shows one.
	HostLeftOut []LeftOut
	// SocketDir is the folder in which the per-run folder of the egress
	// proxy's Unix sockets is made (Docker, egress only); "" means
	// os.TempDir(), or, when goalrun runs in a container, the first folder
	// the Engine can see through goalrun's own mounts.
	SocketDir string
}

// SetupConfig is how the sandbox runs setup steps and shares what they
// prepare.
type SetupConfig struct {
	// Enabled says the run has setup steps: the Docker sandbox creates
	// the deps volume, mounts it into every container and prepares the
	// relay the setup container's egress needs.
	Enabled bool
	// Env is the setup steps' environment on top of ToolEnv: where the
	// tools keep what they download (under DepsDir in Docker), online.
	Env map[string]string
	// CheckEnv is what checks and agent steps get on top of ToolEnv to
	// find the prepared dependencies offline (Docker: with the deps
	// volume mounted read-only at DepsDir). Neither may hold a secret or a
	// proxy setting.
	CheckEnv map[string]string
	// Unavailable says why setup steps cannot run in this sandbox (e.g.
	// no static relay for the setup container's egress); when set, a
	// setup step fails to start (ErrNotStarted) with this reason and
	// Enabled is ignored.
	Unavailable string
	// AllowHosts is the setup container's egress allowlist (Docker):
	// entries as for Config.AllowHosts, egress preset names included. The
	// agent's allowlist and model API are not part of it.
	AllowHosts []string
	// Key, when set, keeps the deps volume across runs (Docker): it names
	// what the setup steps' outputs depend on in the tree (the steps and
	// the module graph: setup.Project.DepsKey); the sandbox adds what they
	// depend on in the sandbox (image, user, environment, mounts). A run
	// that finds the volume an earlier run prepared under the same key
	// runs no setup step (Result.Reused) and mounts it read-only in every
	// container; the setup container is never made. Only for steps that
	// write nothing but the deps volume: in-tree outputs are per run. ""
	// keeps today's per-run volume. See KeptDepsMax.
	Key string
	// Steps is the number of setup steps of the run (with Key): the volume
	// counts as prepared only when that many ran and all exited 0.
	Steps int
}

// DepsDir is where the Docker sandbox mounts the per-run deps volume: read
// and write in setup steps, read-only in checks and agent steps.
const DepsDir = MountRoot + "/deps"

// DefaultPassEnv is the host environment a Local step inherits: enough to
// find programs, write temporary files and build Go code, never the caller's
// whole environment.
var DefaultPassEnv = []string{
	"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "TMPDIR",
	"GOROOT", "GOPATH", "GOCACHE", "GOMODCACHE", "GOFLAGS", "GOPROXY", "GONOSUMDB", "GOTOOLCHAIN",
	"GOPRIVATE", "GONOPROXY", "GOSUMDB", "CGO_ENABLED",
}

// Posture is what a sandbox really applied, as recorded in the goalrun/1
// document's "sandbox" block (docs/goalrun-1.md). Field names and JSON tags are
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
	// Tier is local, container, workspace-write or egress-only (docs/security.md,
	// "Tier"), computed from what was observed.
	Tier string `json:"tier"`
	// Root is the workspace path as the steps see it.
	Root string `json:"root"`
	// Mount is the host path mounted when it is wider than Root; nil otherwise.
	Mount *string `json:"mount"`
	// Workspace is how the workspace got in: bind, copy or host.
	Workspace WorkspaceMode `json:"workspace"`
	// CheckView is what check steps run on: "overlay" or "copy" (Docker: a
	// copy-on-write view or a snapshot copy of the agent's frozen tree,
	// whose writes are thrown away after each check), "workspace" (local:
	// the workspace itself, writes kept). Additive to goalrun/1.
	CheckView string `json:"check_view,omitempty"`
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
	// path and ":ro" or ":rw", e.g. "/goalrun/gocache:ro" (read back
	// from the Engine; the host's system folders, the agent binary, a Go
	// toolchain, goalrun's relay and egress sockets). Empty for local.
	ExtraMounts []string `json:"extra_mounts,omitempty"`
	// HostMounts lists the same bind mounts by the host path behind them,
	// as "HOST:CONTAINER:ro" or ":rw" (docker run -v's form; HOST as the
	// Engine's host knows it), e.g. "/usr:/usr:ro" or
	// "/home/u/.cache/goalrun/go-build-…:/goalrun/gocache:ro", sorted.
	// Volumes are not host paths and are not listed. Empty for local.
	HostMounts []string `json:"host_mounts,omitempty"`
	// HostLeftOut lists what the default sandbox did not mount of the
	// host's folders although it lies in them, as "PATH: reason" (the
	// workspace, a runner's folder, a credential file …; Config.HostLeftOut),
	// sorted. Additive.
	HostLeftOut []string `json:"host_left_out,omitempty"`
	// EgressAllowNets lists Config.EgressAllowNets: private or reserved
	// blocks the egress proxies let allowlisted names resolve into;
	// additive.
	EgressAllowNets []string `json:"egress_allow_nets,omitempty"`
	// SetupEgressAllowlist is the setup container's egress allowlist (the
	// ecosystems' registries and --allow-host; Docker with setup steps
	// only), SetupEgressAllowed/Denied count its proxy's decisions and
	// SetupEgressDenials samples its refusals; additive.
	SetupEgressAllowlist []string `json:"setup_egress_allowlist,omitempty"`
	SetupEgressAllowed   int      `json:"setup_egress_allowed,omitempty"`
	SetupEgressDenied    int      `json:"setup_egress_denied,omitempty"`
	SetupEgressDenials   []string `json:"setup_egress_denials,omitempty"`
	// SetupDepsVolume names the kept deps volume (SetupConfig.Key) the
	// run mounts at DepsDir, prepared by this run or an earlier one
	// (remove it with docker volume rm to prepare again); additive.
	SetupDepsVolume string `json:"setup_deps_volume,omitempty"`
	// SecretsInSandbox names (never values) the secrets the agent could read.
	SecretsInSandbox []string `json:"secrets_in_sandbox"`
	// ModelGateway is the model gateway's base URL when the user named one
	// (--model-gateway): the agent's model API requests go there, and in
	// egress mode the proxy may reach it even on a loopback or private
	// address (that host and port only). Additive.
	ModelGateway string `json:"model_gateway,omitempty"`
	// EgressOutboundProxy says, in egress mode, which corporate proxy the
	// egress proxy reaches destinations through, from goalrun's
	// environment, without user information, e.g.
	// "https=http://proxy.corp:3128 no_proxy=.corp" (egress.OutboundString).
	// Additive.
	EgressOutboundProxy string `json:"egress_outbound_proxy,omitempty"`
	// FallbackNotice says why a sandbox that was asked for was replaced by
	// the local host; nil when there was no fallback.
	FallbackNotice *string `json:"fallback_notice"`
}

// EgressDenialsKept bounds Posture.EgressDenials.
const EgressDenialsKept = 8

// Tiers, weakest first (docs/security.md, "Tier").
const (
	TierLocal          = "local"
	TierContainer      = "container"
	TierWorkspaceWrite = "workspace-write"
	TierEgressOnly     = "egress-only"
)

// checkSetupEnv refuses a secret, a proxy setting or HOME in
// Config.Setup's environments: setup steps get no secret, and checks and
// agent steps get Setup.CheckEnv.
func checkSetupEnv(cfg Config) error {
	for what, env := range map[string]map[string]string{"Env": cfg.Setup.Env, "CheckEnv": cfg.Setup.CheckEnv} {
		for k := range env {
			if _, secret := cfg.Secrets[k]; secret || slices.Contains(proxyEnv, k) || k == "HOME" || upstreamKeyEnv(cfg, k) {
				return fmt.Errorf("sandbox: Config.Setup.%s %s: a secret, a proxy setting or HOME cannot go into setup or check steps", what, k)
			}
		}
	}
	return nil
}
