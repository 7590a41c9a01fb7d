package sandbox

import (
	"strings"
)

// ComputeTier returns the tier of an observed posture (docs/security.md, "Tier"),
// weakest first: TierLocal for anything that is not a Docker sandbox;
// TierContainer when some default hardening is missing (see
// MissingHardening); TierWorkspaceWrite when the hardening holds but the
// network reaches more than the allowlist (bridge, host) or a secret is inside;
// TierEgressOnly when the hardening holds, the network is none or egress and no
// secret is inside. It reads only what was observed, so a Posture built from
// ContainerInspect gives the tier that was really applied.
func ComputeTier(p Posture) string {
	if p.Mode != "docker" {
		return TierLocal
	}
	if len(MissingHardening(p)) > 0 {
		return TierContainer
	}
	if (p.Network == NetworkNone || p.Network == NetworkEgress) && len(p.SecretsInSandbox) == 0 {
		return TierEgressOnly
	}
	return TierWorkspaceWrite
}

// MissingHardening lists, in a fixed order, the defaults (docs/security.md) an
// observed Docker posture lacks: "read_only_rootfs", "cap_drop", "no_new_privileges",
// "seccomp", "pids_limit", "memory_bytes", "nano_cpus", "user" (root or
// unknown), "privileged". nil means every default holds.
func MissingHardening(p Posture) []string {
	var missing []string
	if !p.ReadOnlyRootfs {
		missing = append(missing, "read_only_rootfs")
	}
	if !dropsAll(p.CapDrop) {
		missing = append(missing, "cap_drop")
	}
	if !p.NoNewPrivileges {
		missing = append(missing, "no_new_privileges")
	}
	if p.Seccomp == "" || p.Seccomp == "unconfined" {
		missing = append(missing, "seccomp")
	}
	if p.PidsLimit <= 0 {
		missing = append(missing, "pids_limit")
	}
	if p.MemoryBytes <= 0 {
		missing = append(missing, "memory_bytes")
	}
	if p.NanoCPUs <= 0 {
		missing = append(missing, "nano_cpus")
	}
	if isRootUser(p.User) {
		missing = append(missing, "user")
	}
	if p.Privileged {
		missing = append(missing, "privileged")
	}
	return missing
}

func dropsAll(caps []string) bool {
	for _, c := range caps {
		if strings.EqualFold(c, "ALL") || strings.EqualFold(c, "CAP_ALL") {
			return true
		}
	}
	return false
}

// isRootUser reports whether a Docker user string ("uid", "uid:gid", "name",
// "name:group" or "") runs as root. "" is the image's default user, which is
// root unless the image says otherwise, so it counts as root: a posture must
// not claim what it did not observe.
func isRootUser(user string) bool {
	u, _, _ := strings.Cut(user, ":")
	return u == "" || u == "0" || u == "root"
}
