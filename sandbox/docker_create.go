package sandbox

import (
	"context"
	"fmt"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/errdefs"
)

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
// removal path (Close, removeCheck) removes the recorded container.
func (d *Docker) createContainer(ctx context.Context, cfg *container.Config, hc *container.HostConfig, name string, record func(ref string)) (string, error) {
	cctx, cancel := bg(ctx)
	defer cancel()
	resp, err := d.cli.ContainerCreate(cctx, cfg, hc, nil, nil, name)
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
	d.track(func(c *createdSet) { c.volumes = append(c.volumes, name) })
	cctx, cancel := bg(ctx)
	defer cancel()
	if _, err := d.cli.VolumeCreate(cctx, volume.CreateOptions{Name: name, Labels: d.labels(role)}); err != nil {
		return err
	}
	return ctx.Err()
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
