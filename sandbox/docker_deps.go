package sandbox

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/errdefs"
)

// EngineVolumes makes, reads and removes volumes: the workspace, relay,
// deps and view volumes, the kept deps volumes and their marks, dead
// runs' volumes (Reap).
type EngineVolumes interface {
	VolumeCreate(ctx context.Context, options volume.CreateOptions) (volume.Volume, error)
	VolumeRemove(ctx context.Context, volumeID string, force bool) error
	VolumeList(ctx context.Context, options volume.ListOptions) (volume.ListResponse, error)
	VolumeInspect(ctx context.Context, volumeID string) (volume.Volume, error)
}

// Labels of a kept deps volume (SetupConfig.Key). It carries no LabelRun,
// so Reap and Close never remove it; pruneKeptDeps bounds how many stay.
const (
	// LabelDeps holds the kept deps volume's key (keptDepsKey), on the
	// volume and on its ready mark.
	LabelDeps = "goalrun.deps"
	// LabelDepsID holds a random id given to the kept deps volume when it
	// is made, copied into its ready mark: a volume removed and made again
	// under the same name is not the one that was prepared.
	LabelDepsID = "goalrun.deps.id"
)

// KeptDepsMax is how many prepared deps volumes an Engine keeps across
// runs (one per module graph, sandbox and toolchain); the oldest prepared
// beyond it are removed when a run prepares a new one, unless a container
// still uses them.
const KeptDepsMax = 8

// keptDepsStaleAfter is how old a kept deps volume that was never marked
// prepared (its setup failed or was cut short) may get before a run that
// prunes removes it: 24 hours (a run lasts far less).
const keptDepsStaleAfter = 24 * time.Hour

// keptDepsKey is the kept deps volume's key: SetupConfig.Key and what the
// setup steps' outputs depend on in the sandbox — the image, the user, the
// step environments (the toolchain settings: PATH, GOFLAGS, CGO_ENABLED,
// GOCACHE…), the setup's allowlist and the workspace's path. 24 hex digits
// of a SHA-256. The host folders mounted for the toolchains are not in it:
// only Go steps keep a volume (setup.DepsKey), the Go toolchain's identity is
// in SetupConfig.Key, and Go's module cache is addressed by content and its
// build cache by the compilers and flags that built each entry
// (https://pkg.go.dev/cmd/go#hdr-Build_and_test_caching), so a folder added
// to /opt or removed from /usr/local never makes the volume wrong — only a
// volume filled again for nothing.
func (d *Docker) keptDepsKey() string {
	h := sha256.New()
	field := func(parts ...string) {
		for _, p := range parts {
			fmt.Fprintf(h, "%d:%s;", len(p), p)
		}
		h.Write([]byte{'\n'})
	}
	envField := func(name string, m map[string]string) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		field(name)
		for _, k := range keys {
			field(k, m[k])
		}
	}
	field("goalrun-deps/1", d.cfg.Setup.Key)
	// The tree's own packages are compiled into the volume's build cache:
	// another repository (another workspace) never reads them.
	field("workspace", d.cfg.Workspace)
	field("image", d.imageID)
	field("user", fmt.Sprintf("%d:%d", d.uid, d.gid))
	envField("tool", d.cfg.ToolEnv)
	envField("setup", d.cfg.Setup.Env)
	envField("check", d.cfg.Setup.CheckEnv)
	hosts := slices.Clone(d.cfg.Setup.AllowHosts)
	sort.Strings(hosts)
	field(append([]string{"allow"}, hosts...)...)
	return hex.EncodeToString(h.Sum(nil))[:24]
}

// runDeps is a run's dependencies volume (Config.Setup) and what prepares
// it. Set while the sandbox starts (startSetup), before any step, and
// read only afterwards; the setup container's changing state has its own
// lock (dockerSetup.mu).
type runDeps struct {
	volume string       // the deps volume; "" without Config.Setup
	key    string       // Config.Setup.Key: the kept deps volume's key (keptDepsKey); "" when not kept
	setup  *dockerSetup // the setup container
}

func keptDepsName(key string) string  { return "goalrun-deps-" + key }
func keptDepsReady(key string) string { return "goalrun-deps-" + key + "-ready" }

// openKeptDeps settles the kept deps volume for key: reused when its ready
// mark is there and names this very volume, else made afresh for this
// run's setup steps to fill. A volume under that name that was never marked
// prepared (a setup that failed, was cut short, or still runs in another
// goalrun) is never filled further nor reused: what a failed setup of a
// hostile tree left there (a module cache whose extracted sources do not
// match their zips) would be trusted by every later run. It is removed and
// made again; when the Engine refuses (a container still uses it), this
// run uses a deps volume of its own (kept false).
func (d *Docker) openKeptDeps(ctx context.Context, key string) (reused, kept bool, err error) {
	cctx, cancel := bg(ctx)
	defer cancel()
	name, ready := keptDepsName(key), keptDepsReady(key)
	mark, merr := d.cli.VolumeInspect(cctx, ready)
	vol, verr := d.cli.VolumeInspect(cctx, name)
	switch {
	case merr == nil && verr == nil && vol.Labels[LabelDeps] == key && mark.Labels[LabelDeps] == key &&
		mark.Labels[LabelDepsID] != "" && mark.Labels[LabelDepsID] == vol.Labels[LabelDepsID]:
		return true, true, nil
	case merr == nil:
		// A mark for another volume (the deps volume was removed and
		// made again): it no longer says anything.
		if err := d.cli.VolumeRemove(cctx, ready, true); err != nil && !errdefs.IsNotFound(err) {
			return false, false, fmt.Errorf("sandbox: docker: removing the stale mark %s: %w", ready, err)
		}
	case !errdefs.IsNotFound(merr):
		return false, false, fmt.Errorf("sandbox: docker: inspecting %s: %w", ready, merr)
	}
	if verr == nil {
		if vol.Labels[LabelDeps] != key {
			return false, false, fmt.Errorf("sandbox: docker: volume %s exists but is not goalrun's kept deps volume (label %s); remove it or rename it", name, LabelDeps)
		}
		if err := d.cli.VolumeRemove(cctx, name, false); err != nil {
			if errdefs.IsConflict(err) {
				return false, false, nil // in use: prepare a volume of this run's own
			}
			if !errdefs.IsNotFound(err) {
				return false, false, fmt.Errorf("sandbox: docker: removing %s, a deps volume never marked prepared: %w", name, err)
			}
		}
	} else if !errdefs.IsNotFound(verr) {
		return false, false, fmt.Errorf("sandbox: docker: inspecting %s: %w", name, verr)
	}
	var id [12]byte
	if _, err := rand.Read(id[:]); err != nil {
		return false, false, err
	}
	_, err = d.cli.VolumeCreate(cctx, volume.CreateOptions{Name: name, Labels: map[string]string{LabelDeps: key, LabelDepsID: hex.EncodeToString(id[:]), LabelRole: "deps"}})
	if err != nil {
		if errdefs.IsConflict(err) {
			return false, false, nil // another run made it meanwhile: not shared
		}
		return false, false, fmt.Errorf("sandbox: docker: creating the deps volume %s: %w", name, err)
	}
	return false, true, ctx.Err()
}

// markKeptDeps records that the kept deps volume holds every setup step's
// outputs (all ran and exited 0, the setup container is gone), then prunes
// the Engine's kept volumes to KeptDepsMax. Errors are ignored: the next run
// prepares the volume again.
func (d *Docker) markKeptDeps(ctx context.Context) {
	cctx, cancel := bg(ctx)
	defer cancel()
	key := d.deps.key
	vol, err := d.cli.VolumeInspect(cctx, keptDepsName(key))
	if err != nil || vol.Labels[LabelDepsID] == "" {
		return
	}
	_, err = d.cli.VolumeCreate(cctx, volume.CreateOptions{Name: keptDepsReady(key),
		Labels: map[string]string{LabelDeps: key, LabelDepsID: vol.Labels[LabelDepsID], LabelRole: "deps-ready"}})
	if err != nil {
		return
	}
	_ = pruneKeptDeps(cctx, d.cli, KeptDepsMax, time.Now())
}

// pruneKeptDeps removes the kept deps volumes beyond the keep most recently
// prepared, and those never prepared and older than keptDepsStaleAfter;
// the Engine refuses to remove a volume a container uses, and such a
// volume stays (with its mark).
func pruneKeptDeps(ctx context.Context, cli EngineVolumes, keep int, now time.Time) error {
	vs, err := cli.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", LabelDeps))})
	if err != nil {
		return err
	}
	vols := map[string]*volume.Volume{}
	type mark struct {
		key     string
		created time.Time
	}
	var marks []mark
	for _, v := range vs.Volumes {
		key := v.Labels[LabelDeps]
		switch v.Name {
		case keptDepsName(key):
			vols[key] = v
		case keptDepsReady(key):
			t, _ := time.Parse(time.RFC3339Nano, v.CreatedAt)
			marks = append(marks, mark{key, t})
		}
	}
	sort.Slice(marks, func(i, j int) bool { return marks[i].created.After(marks[j].created) })
	marked := map[string]bool{}
	var errs []string
	for i, m := range marks {
		marked[m.key] = true
		if i < keep {
			continue
		}
		if v := vols[m.key]; v != nil {
			if err := cli.VolumeRemove(ctx, v.Name, false); err != nil && !errdefs.IsNotFound(err) {
				errs = append(errs, err.Error())
				continue // in use: keep it and its mark
			}
		}
		if err := cli.VolumeRemove(ctx, keptDepsReady(m.key), false); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, err.Error())
		}
	}
	for key, v := range vols {
		if marked[key] {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v.CreatedAt)
		if err != nil || now.Sub(t) < keptDepsStaleAfter {
			continue
		}
		if err := cli.VolumeRemove(ctx, v.Name, false); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("sandbox: docker: pruning kept deps volumes: %s", strings.Join(errs, "; "))
	}
	return nil
}
