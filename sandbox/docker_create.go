package sandbox

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/errdefs"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// EngineContainers makes containers, runs them, watches them and ends
// them: the agent, check, setup, chown and probe containers.
type EngineContainers interface {
	ContainerCreate(ctx context.Context, config *container.Config, hostConfig *container.HostConfig, networkingConfig *network.NetworkingConfig, platform *ocispec.Platform, containerName string) (container.CreateResponse, error)
	ContainerStart(ctx context.Context, container string, options container.StartOptions) error
	ContainerAttach(ctx context.Context, container string, options container.AttachOptions) (types.HijackedResponse, error)
	ContainerWait(ctx context.Context, container string, condition container.WaitCondition) (<-chan container.WaitResponse, <-chan error)
	ContainerInspect(ctx context.Context, container string) (container.InspectResponse, error)
	ContainerKill(ctx context.Context, container, signal string) error
	ContainerStop(ctx context.Context, container string, options container.StopOptions) error
	ContainerRemove(ctx context.Context, container string, options container.RemoveOptions) error
	ContainerList(ctx context.Context, options container.ListOptions) ([]container.Summary, error)
	ContainerPause(ctx context.Context, container string) error
	ContainerUnpause(ctx context.Context, container string) error
}

// Creating Engine objects so that none is ever lost.
//
// A create call cancelled half-way (SIGINT while the request is in flight)
// returns the context's error to the client while the Engine goes on and
// creates the object: its id never reaches goalrun, and nothing would remove
// it before a later run's Reap. So every create here runs on a context
// detached from the caller's (bounded by apiTimeout) and reads the Engine's
// answer, the object is recorded for removal at once, and only then does the
// caller's cancellation count. When the call fails anyway (the bound ran out,
// the connection broke), the object's name is recorded instead: removing a
// name that was never created is a NotFound the removal ignores. Names are
// per run (RunID) and per step, so a name never points at another run's
// object.

// createContainer creates a container named name (never "") and hands its
// reference to record before it returns: the id when the Engine answered,
// else the name (unless the Engine refused the name as taken, which means
// this call created nothing). It returns ctx's error when ctx ended while
// the container was being created; the caller then returns, and its
// removal path (Close, removeCheck) removes the recorded container. When
// ctx ends before the Engine answers at all, it returns at once; a
// container the Engine makes later is removed when it answers.
func (d *Docker) createContainer(ctx context.Context, cfg *container.Config, hc *container.HostConfig, name string, record func(ref string)) (string, error) {
	type answer struct {
		resp container.CreateResponse
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		cctx, cancel := bg(ctx)
		defer cancel()
		resp, err := d.cli.ContainerCreate(cctx, cfg, hc, nil, nil, name)
		for i := 0; err != nil && i < vanishedRetries; i++ {
			// A host file or folder mounted read-only for the toolchains
			// that was removed since the look through the host folders
			// (a package upgrade, a neighbour's temporary file): without
			// it the sandbox holds less, never more.
			less, ok := withoutVanished(hc, err)
			if !ok {
				break
			}
			hc = less
			resp, err = d.cli.ContainerCreate(cctx, cfg, hc, nil, nil, name)
		}
		answered <- answer{resp, err}
	}()
	var a answer
	select {
	case a = <-answered:
	case <-ctx.Done():
		a, ok := awaitAnswer(answered, createGrace)
		if ok {
			return d.settleCreate(ctx, a.resp, a.err, name, record)
		}
		// The run's time is up (--timeout, a signal) and the Engine has
		// not answered: the caller returns now, and what the Engine makes
		// later is removed as soon as it answers (the name is recorded for
		// Close too).
		record(name)
		go func() {
			if late := <-answered; late.err == nil {
				rctx, cancel := bg(ctx)
				defer cancel()
				_ = d.cli.ContainerRemove(rctx, late.resp.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
			}
		}()
		return "", fmt.Errorf("%w (while creating container %s: the Engine had not answered)", ctx.Err(), name)
	}
	return d.settleCreate(ctx, a.resp, a.err, name, record)
}

// createGrace is how long a container create whose run ended meanwhile
// still waits for the Engine's answer, so that a container the Engine made
// is recorded and removed by the caller's removal path, not later.
const createGrace = time.Second

// awaitAnswer receives from c within d.
func awaitAnswer[T any](c <-chan T, d time.Duration) (T, bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case v := <-c:
		return v, true
	case <-t.C:
		var zero T
		return zero, false
	}
}

// settleCreate records what a container create answered (see createContainer)
// and returns its id, or ctx's error when the run ended meanwhile.
func (d *Docker) settleCreate(ctx context.Context, resp container.CreateResponse, err error, name string, record func(ref string)) (string, error) {
	if err != nil {
		if !errdefs.IsConflict(err) {
			record(name)
		}
		if cerr := ctx.Err(); cerr != nil {
			return "", fmt.Errorf("%w (while creating container %s: %v)", cerr, name, err)
		}
		return "", err
	}
	record(resp.ID)
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return resp.ID, nil
}

// createVolume creates the named volume and records it for Close first
// (see createContainer).
func (d *Docker) createVolume(ctx context.Context, name, role string) error {
	_, err := d.createVolumeWith(ctx, name, role, nil)
	return err
}

// createVolumeWith is createVolume with the local driver's options
// (type, device, o; nil for a plain volume); it returns the Engine's
// answer, which says where the volume lives (Mountpoint).
func (d *Docker) createVolumeWith(ctx context.Context, name, role string, opts map[string]string) (volume.Volume, error) {
	d.track(func(c *createdSet) { c.volumes = append(c.volumes, name) })
	cctx, cancel := bg(ctx)
	defer cancel()
	o := volume.CreateOptions{Name: name, Labels: d.labels(role), DriverOpts: opts}
	if opts != nil {
		o.Driver = "local"
	}
	v, err := d.cli.VolumeCreate(cctx, o)
	if err != nil {
		return v, err
	}
	return v, ctx.Err()
}

// createNetwork creates the named bridge network and records it for Close
// (by id; by name when the call failed, see createContainer).
func (d *Docker) createNetwork(ctx context.Context, name string) error {
	cctx, cancel := bg(ctx)
	defer cancel()
	resp, err := d.cli.NetworkCreate(cctx, name, network.CreateOptions{Driver: "bridge", Labels: d.labels("network")})
	ref := resp.ID
	if err != nil {
		ref = name
	}
	if err == nil || !errdefs.IsConflict(err) {
		d.track(func(c *createdSet) { c.networks = append(c.networks, ref) })
	}
	if err != nil {
		return err
	}
	return ctx.Err()
}

// removeLater removes the containers ids (and then the volumes vols) in
// the background, off the caller's path; Close waits for it (the caller
// must hold a d.removals or d.steps count, so Close has not begun its
// wait). What was removed is no longer Close's to remove; what could not
// be stays recorded.
func (d *Docker) removeLater(ctx context.Context, ids, vols []string) {
	if len(ids) == 0 && len(vols) == 0 {
		return
	}
	d.removals.Add(1)
	go func() {
		defer d.removals.Done()
		cctx, cancel := bg(ctx)
		defer cancel()
		var gone, goneVols []string
		for _, id := range ids {
			if err := d.cli.ContainerRemove(cctx, id, container.RemoveOptions{Force: true}); err == nil || errdefs.IsNotFound(err) {
				gone = append(gone, id)
			}
		}
		for _, v := range vols {
			if err := d.cli.VolumeRemove(cctx, v, true); err == nil || errdefs.IsNotFound(err) {
				goneVols = append(goneVols, v)
			}
		}
		d.track(func(c *createdSet) {
			c.containers = without(c.containers, gone)
			c.volumes = without(c.volumes, goneVols)
		})
	}()
}

// without returns list without the entries of drop (a new slice).
func without(list, drop []string) []string {
	if len(drop) == 0 {
		return list
	}
	out := make([]string, 0, len(list))
	for _, s := range list {
		if !slices.Contains(drop, s) {
			out = append(out, s)
		}
	}
	return out
}

// vanishedRetries bounds how many vanished read-only bind sources one
// container create drops (withoutVanished) before it gives up.
const vanishedRetries = 8

// withoutVanished returns hc without the read-only bind mount whose source
// the Engine said does not exist (err, moby's "bind source path does not
// exist: PATH"), and false when err is not that or names no such mount (a
// writable mount, the workspace, is never dropped). hc is not changed.
func withoutVanished(hc *container.HostConfig, err error) (*container.HostConfig, bool) {
	msg := err.Error()
	i := strings.Index(msg, bindSourceMissing+": ")
	if i < 0 {
		return nil, false
	}
	missing := strings.TrimSpace(msg[i+len(bindSourceMissing)+2:])
	for j, m := range hc.Mounts {
		if m.Type == mount.TypeBind && m.ReadOnly && m.Source == missing {
			out := *hc
			out.Mounts = append(slices.Clone(hc.Mounts[:j]), hc.Mounts[j+1:]...)
			return &out, true
		}
	}
	return nil, false
}
