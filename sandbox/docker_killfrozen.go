package sandbox

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/docker/docker/api/types/container"
)

// processLister is the optional ability to list a container's processes
// (GET /containers/{id}/top, which the Engine answers for a paused
// container too). The real client has it.
type processLister interface {
	ContainerTop(ctx context.Context, container string, arguments []string) (container.TopResponse, error)
}

var _ processLister = (*boundedEngine)(nil)

// ContainerTop is the bounded ContainerTop of the wrapped client, an error
// when it has none.
func (e *boundedEngine) ContainerTop(ctx context.Context, id string, args []string) (container.TopResponse, error) {
	l, ok := e.DockerAPI.(processLister)
	if !ok {
		return container.TopResponse{}, errors.ErrUnsupported
	}
	return call(e, ctx, "listing a container's processes", func(c context.Context) (container.TopResponse, error) {
		return l.ContainerTop(c, id, args)
	})
}

// killFrozen sends SIGKILL to every process of the frozen container id,
// from this host, before it is thawed: with the cgroup v1 freezer a signal
// to a frozen task waits for the thaw, and the Engine's kill reaches only
// the container's first process, so the others would run again for a
// moment after the thaw, until the PID namespace is torn down — long enough
// to write into the workspace. A task with SIGKILL pending runs no more of
// its own code once thawed. Only a process whose cgroup names the container
// is signalled (goalrun may not share the Engine's PID namespace); one it
// may not signal (goalrun is not root) is left to the namespace teardown.
// Best effort: the caller kills and thaws the container either way.
func (d *Docker) killFrozen(ctx context.Context, id string) {
	l, ok := d.cli.(processLister)
	if !ok || id == "" {
		return
	}
	top, err := l.ContainerTop(ctx, id, nil)
	if err != nil {
		return
	}
	col := -1
	for i, t := range top.Titles {
		if t == "PID" {
			col = i
		}
	}
	if col < 0 {
		return
	}
	for _, p := range top.Processes {
		if col >= len(p) {
			continue
		}
		pid, err := strconv.Atoi(p[col])
		if err != nil || pid <= 1 || !inContainerCgroup(pid, id) {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// inContainerCgroup reports whether /proc/PID/cgroup of this host names the
// container id (its full id appears in the cgroup path of every driver).
func inContainerCgroup(pid int, id string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	return err == nil && len(id) == 64 && strings.Contains(string(b), id)
}
