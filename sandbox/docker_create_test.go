package sandbox

import (
	"errors"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
)

// TestWithoutVanished: a read-only bind source the Engine says is gone is
// dropped from the create; anything else (a writable mount, another
// error) is left for the caller to report.
func TestWithoutVanished(t *testing.T) {
	hc := &container.HostConfig{Mounts: []mount.Mount{
		{Type: mount.TypeBind, Source: "/usr/bin", Target: "/usr/bin", ReadOnly: true},
		{Type: mount.TypeBind, Source: "/usr/local/etc/gone/tool.txt", Target: "/usr/local/etc/gone/tool.txt", ReadOnly: true},
		{Type: mount.TypeBind, Source: "/home/u/ws", Target: "/workspace"},
	}}
	engine := func(path string) error {
		return errors.New(`Error response from daemon: invalid mount config for type "bind": bind source path does not exist: ` + path)
	}
	cases := []struct {
		name string
		err  error
		want int // mounts left; -1: not dropped
	}{
		{"a vanished read-only host file is dropped", engine("/usr/local/etc/gone/tool.txt"), 2},
		{"the workspace (writable) is never dropped", engine("/home/u/ws"), -1},
		{"a path no mount names", engine("/nowhere"), -1},
		{"another error", errors.New("Error response from daemon: conflict"), -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := withoutVanished(hc, tc.err)
			if tc.want < 0 {
				if ok {
					t.Fatalf("dropped a mount: %+v", got.Mounts)
				}
				return
			}
			if !ok || len(got.Mounts) != tc.want {
				t.Fatalf("withoutVanished = %v, %v", got, ok)
			}
			for _, m := range got.Mounts {
				if m.Source == "/usr/local/etc/gone/tool.txt" {
					t.Errorf("the vanished source is still mounted")
				}
			}
			if len(hc.Mounts) != 3 {
				t.Errorf("the caller's HostConfig changed")
			}
		})
	}
}
