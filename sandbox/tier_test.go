package sandbox

import (
	"reflect"
	"testing"
)

// hardened is a Docker posture where every default of docs/security.md holds.
func hardened(network Network, secrets ...string) Posture {
	return Posture{
		Mode: "docker", Network: network, ReadOnlyRootfs: true, CapDrop: []string{"ALL"},
		NoNewPrivileges: true, Seccomp: "default", PidsLimit: 512, MemoryBytes: 4 << 30,
		NanoCPUs: 2e9, User: "1000:1000", SecretsInSandbox: secrets,
	}
}

func TestComputeTier(t *testing.T) {
	with := func(p Posture, f func(*Posture)) Posture { f(&p); return p }
	tests := []struct {
		name    string
		posture Posture
		want    string
		missing []string
	}{
		{"local host", Posture{Mode: "local", Network: NetworkHost}, TierLocal, []string{"read_only_rootfs", "cap_drop", "no_new_privileges", "seccomp", "pids_limit", "memory_bytes", "nano_cpus", "user"}},
		{"empty mode is not docker", Posture{}, TierLocal, nil},
		{"egress no secrets", hardened(NetworkEgress), TierEgressOnly, nil},
		{"none no secrets", hardened(NetworkNone), TierEgressOnly, nil},
		{"egress with a secret inside", hardened(NetworkEgress, "ANTHROPIC_API_KEY"), TierWorkspaceWrite, nil},
		{"bridge", hardened(NetworkBridge), TierWorkspaceWrite, nil},
		{"host network", hardened(NetworkHost), TierWorkspaceWrite, nil},
		{"writable root", with(hardened(NetworkNone), func(p *Posture) { p.ReadOnlyRootfs = false }), TierContainer, []string{"read_only_rootfs"}},
		{"caps kept", with(hardened(NetworkNone), func(p *Posture) { p.CapDrop = []string{"NET_RAW"} }), TierContainer, []string{"cap_drop"}},
		{"cap_all spelling", with(hardened(NetworkNone), func(p *Posture) { p.CapDrop = []string{"CAP_ALL"} }), TierEgressOnly, nil},
		{"new privileges allowed", with(hardened(NetworkNone), func(p *Posture) { p.NoNewPrivileges = false }), TierContainer, []string{"no_new_privileges"}},
		{"seccomp unconfined", with(hardened(NetworkNone), func(p *Posture) { p.Seccomp = "unconfined" }), TierContainer, []string{"seccomp"}},
		{"seccomp unknown", with(hardened(NetworkNone), func(p *Posture) { p.Seccomp = "" }), TierContainer, []string{"seccomp"}},
		{"custom seccomp profile holds", with(hardened(NetworkNone), func(p *Posture) { p.Seccomp = "custom" }), TierEgressOnly, nil},
		{"no pids limit", with(hardened(NetworkNone), func(p *Posture) { p.PidsLimit = -1 }), TierContainer, []string{"pids_limit"}},
		{"no memory limit", with(hardened(NetworkNone), func(p *Posture) { p.MemoryBytes = 0 }), TierContainer, []string{"memory_bytes"}},
		{"no cpu limit", with(hardened(NetworkNone), func(p *Posture) { p.NanoCPUs = 0 }), TierContainer, []string{"nano_cpus"}},
		{"root by uid", with(hardened(NetworkNone), func(p *Posture) { p.User = "0:1000" }), TierContainer, []string{"user"}},
		{"root by name", with(hardened(NetworkNone), func(p *Posture) { p.User = "root" }), TierContainer, []string{"user"}},
		{"image default user", with(hardened(NetworkNone), func(p *Posture) { p.User = "" }), TierContainer, []string{"user"}},
		{"privileged", with(hardened(NetworkNone), func(p *Posture) { p.Privileged = true }), TierContainer, []string{"privileged"}},
		{"gvisor still egress-only", with(hardened(NetworkEgress), func(p *Posture) { p.Runtime = "runsc" }), TierEgressOnly, nil},
		{"everything missing on bridge", Posture{Mode: "docker", Network: NetworkBridge, User: "0", Privileged: true}, TierContainer,
			[]string{"read_only_rootfs", "cap_drop", "no_new_privileges", "seccomp", "pids_limit", "memory_bytes", "nano_cpus", "user", "privileged"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ComputeTier(tt.posture); got != tt.want {
				t.Errorf("ComputeTier = %q, want %q", got, tt.want)
			}
			if got := MissingHardening(tt.posture); tt.posture.Mode != "" && !reflect.DeepEqual(got, tt.missing) {
				t.Errorf("MissingHardening = %q, want %q", got, tt.missing)
			}
		})
	}
}
