package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/goalrun/goalrun/goal/agent"
	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/sandbox"
)

// engineHost answers the Engine's bind-source check (sandbox.EngineHasPaths)
// from a set of paths on a pretend Engine host; any other call panics.
type engineHost struct {
	sandbox.DockerAPI
	paths map[string]bool
}

func (e engineHost) DaemonHost() string { return "unix:///var/run/docker.sock" }

func (e engineHost) ContainerCreate(_ context.Context, _ *container.Config, hc *container.HostConfig, _ *network.NetworkingConfig, _ *ocispec.Platform, _ string) (container.CreateResponse, error) {
	if src := hc.Mounts[0].Source; !e.paths[src] {
		return container.CreateResponse{}, errors.New(`invalid mount config for type "bind": bind source path does not exist: ` + src)
	}
	return container.CreateResponse{}, errors.New(`invalid mount config for type "tmpfs": invalid mount path: '` + hc.Mounts[1].Target + `' mount path must be absolute`)
}

// TestPlaceHostAgent: the default sandbox runs the agent's CLI where it is
// when it (and what it links to) lies in the mounted host folders, mounts
// its native executable under /goalrun/bin otherwise, and, when goalrun
// cannot see it (in a container), finds it on the sandbox's PATH through
// the Engine.
func TestPlaceHostAgent(t *testing.T) {
	self, err := os.Executable() // an ELF executable for this machine
	if err != nil {
		t.Fatal(err)
	}
	elf, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	system, elsewhere := t.TempDir(), t.TempDir()
	put := func(dir, name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, elf, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	inside := put(system, "claude")
	outside := put(elsewhere, "claude-native")
	link := filepath.Join(system, "claude-link")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	h := sandbox.HostToolchain{
		Mounts: []sandbox.Mount{{Source: system, Target: system, ReadOnly: true, EngineHost: true}},
		Env:    map[string]string{"PATH": "/usr/local/bin:/usr/bin"},
	}
	claude := runConfig{settings: settings{agent: "claude"}, spec: agent.ClaudeSpec}
	with := func(bin string) runConfig { c := claude; c.agentBin = bin; return c }
	ctx := context.Background()

	t.Run("inside the host folders: run where it is", func(t *testing.T) {
		bin, mounts, err := placeHostAgent(ctx, engineHost{}, with(inside), h, "img")
		if err != nil || bin != inside || len(mounts) != 0 {
			t.Errorf("bin %q mounts %+v err %v, want %s unmounted", bin, mounts, err, inside)
		}
	})
	for name, p := range map[string]string{"outside the host folders": outside, "a link inside to a file outside": link} {
		t.Run(name+": mounted under /goalrun/bin", func(t *testing.T) {
			bin, mounts, err := placeHostAgent(ctx, engineHost{}, with(p), h, "img")
			if err != nil || bin != "/goalrun/bin/claude" || len(mounts) != 1 || mounts[0].Source != outside || mounts[0].Target != bin || !mounts[0].ReadOnly {
				t.Errorf("bin %q mounts %+v err %v, want %s at /goalrun/bin/claude", bin, mounts, err, outside)
			}
		})
	}
	t.Run("not on goalrun's PATH: on the sandbox's PATH on the Engine's host", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		cli := engineHost{paths: map[string]bool{"/usr/bin/claude": true}}
		bin, mounts, err := placeHostAgent(ctx, cli, claude, h, "img")
		if err != nil || bin != "/usr/bin/claude" || len(mounts) != 0 {
			t.Errorf("bin %q mounts %+v err %v, want /usr/bin/claude found through the Engine", bin, mounts, err)
		}
	})
	t.Run("nowhere: AgentNotFound", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		_, _, err := placeHostAgent(ctx, engineHost{paths: map[string]bool{}}, claude, h, "img")
		var se *startupError
		if !errors.As(err, &se) || se.code != report.ErrAgentNotFound || !strings.Contains(se.message, `"claude" is not on this machine's PATH`) {
			t.Errorf("err %v, want AgentNotFound", err)
		}
	})
}
