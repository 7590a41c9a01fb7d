package sandbox_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/dockertest"
)

// cancelAtCreate is the Engine client with one ContainerCreate interrupted
// at the wire: the Engine receives the request in full and creates the
// container, and the caller's context is cancelled while the call is in
// flight (SIGINT arriving then). With lost set, the call then also fails on
// the client's side, as a broken connection or a client-side cancellation
// makes it: the Engine created a container whose id never reaches the
// sandbox.
type cancelAtCreate struct {
	sandbox.DockerAPI
	role   string // the LabelRole of the container whose create is interrupted
	lost   bool
	cancel context.CancelFunc
	hits   atomic.Int32
}

func (c *cancelAtCreate) ContainerCreate(ctx context.Context, cfg *container.Config, hc *container.HostConfig, nc *network.NetworkingConfig, p *ocispec.Platform, name string) (container.CreateResponse, error) {
	if cfg.Labels[sandbox.LabelRole] != c.role || c.hits.Add(1) != 1 {
		return c.DockerAPI.ContainerCreate(ctx, cfg, hc, nc, p, name)
	}
	resp, err := c.DockerAPI.ContainerCreate(context.WithoutCancel(ctx), cfg, hc, nc, p, name)
	c.cancel()
	if err == nil && c.lost {
		return container.CreateResponse{}, context.Canceled
	}
	return resp, err
}

// runObjects lists the containers (with their state) and volumes labelled
// with run id.
func runObjects(t *testing.T, cli sandbox.DockerAPI, runID string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := filters.NewArgs(filters.Arg("label", sandbox.LabelRun+"="+runID))
	cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range cs {
		out = append(out, "container "+c.Labels[sandbox.LabelRole]+" "+c.State)
	}
	vs, err := cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs.Volumes {
		out = append(out, "volume "+v.Name)
	}
	return out
}

// TestCancelDuringContainerCreateLeavesNothing: a cancellation that arrives
// while the Engine creates a container (the check's, the agent's, the copy
// mode's chown helper) never leaves that container behind once the sandbox
// is closed, whether the create call still returned the id or failed.
func TestCancelDuringContainerCreateLeavesNothing(t *testing.T) {
	cli := dockertest.Client(t)
	image := dockertest.Image(t, cli)
	for _, tc := range []struct {
		name string
		role string // "check": during Exec; else during StartDocker
		mode sandbox.WorkspaceMode
		lost bool
	}{
		{name: "check answered", role: "check"},
		{name: "check id lost", role: "check", lost: true},
		{name: "agent answered", role: "agent"},
		{name: "agent id lost", role: "agent", lost: true},
		{name: "copy-mode chown answered", role: "chown", mode: sandbox.WorkspaceCopy},
		{name: "copy-mode chown id lost", role: "chown", mode: sandbox.WorkspaceCopy, lost: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := sandbox.Config{RunID: dockertest.RunID(t), Image: image, Workspace: dockertest.Workspace(t, testUID, testGID),
				WorkspaceMode: tc.mode, Lifetime: testLifetime}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			wire := &cancelAtCreate{DockerAPI: cli, role: tc.role, lost: tc.lost, cancel: cancel}
			if tc.role != "check" {
				sb, err := sandbox.StartDocker(ctx, wire, cfg)
				if err == nil {
					sb.Close(context.Background())
					t.Fatal("StartDocker succeeded although its context was cancelled during a container create")
				}
				if !errors.Is(err, context.Canceled) {
					t.Errorf("StartDocker: %v, want an error wrapping context.Canceled", err)
				}
			} else {
				sb, err := sandbox.StartDocker(context.Background(), wire, cfg)
				if err != nil {
					t.Fatalf("StartDocker: %v", err)
				}
				res, err := sb.Exec(ctx, sandbox.Cmd{Role: sandbox.RoleCheck, Args: sandbox.Shell("echo ran")})
				if err == nil && !res.Cancelled {
					t.Errorf("Exec ran the check to its end (%+v) although ctx was cancelled at the create", res)
				}
				if err := sb.Close(context.Background()); err != nil {
					t.Errorf("Close: %v", err)
				}
			}
			if wire.hits.Load() == 0 {
				t.Fatalf("no %s container was created: the test did not exercise the create", tc.role)
			}
			if left := runObjects(t, cli, cfg.RunID); len(left) > 0 {
				t.Errorf("left behind after the sandbox returned and closed: %v", left)
			}
		})
	}
}
