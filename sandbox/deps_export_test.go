package sandbox

import (
	"context"
	"time"
)

// DepsVolume is the deps volume the sandbox mounts at DepsDir (tests).
func (d *Docker) DepsVolume() string { return d.deps.volume }

// PruneKeptDeps is pruneKeptDeps for tests.
func PruneKeptDeps(ctx context.Context, cli DockerAPI, keep int, now time.Time) error {
	return pruneKeptDeps(ctx, cli, keep, now)
}
