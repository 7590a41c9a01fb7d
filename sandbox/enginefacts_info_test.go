package sandbox

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/docker/docker/api/types/system"
)

// TestRememberedInfo: the Engine's info is kept per Engine address (its
// decisive part only), read back while younger than MaxAge, and any field
// goalrun decides on makes two infos different Engines.
func TestRememberedInfo(t *testing.T) {
	now := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	f := EngineFacts{Dir: filepath.Join(t.TempDir(), "engines"), Now: func() time.Time { return now }}
	info := system.Info{ID: "E1", Name: "host", ServerVersion: "20.10.24", KernelVersion: "6.1", OperatingSystem: "Debian",
		Architecture: "x86_64", Driver: "overlay2", DockerRootDir: "/var/lib/docker", SecurityOptions: []string{"name=seccomp,profile=default"},
		DefaultRuntime: "runc", Containers: 7, SystemTime: "now"}
	if _, ok := f.RememberedInfo("unix:///var/run/docker.sock"); ok {
		t.Fatal("an info before any was kept")
	}
	if err := f.RememberInfo("unix:///var/run/docker.sock", info); err != nil {
		t.Fatal(err)
	}
	got, ok := f.RememberedInfo("unix:///var/run/docker.sock")
	if !ok || !SameEngine(got, info) || got.Containers != 0 || got.SystemTime != "" {
		t.Fatalf("remembered %+v, %v; want the decisive part of %+v", got, ok, info)
	}
	if _, ok := f.RememberedInfo("tcp://127.0.0.1:2375"); ok {
		t.Error("another Engine address read this Engine's info")
	}
	now = now.Add(DefaultFactAge + time.Minute)
	if _, ok := f.RememberedInfo("unix:///var/run/docker.sock"); ok {
		t.Error("an info older than MaxAge was used")
	}
	if err := (EngineFacts{}).RememberInfo("h", info); err != nil {
		t.Errorf("the zero EngineFacts: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(f.Dir, "*"))
	if len(files) != 1 {
		t.Errorf("files %q, want one", files)
	}
	if st, err := os.Stat(files[0]); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the info file: %v %v, want 0600", st, err)
	}

	for _, tc := range []struct {
		name   string
		change func(*system.Info)
		same   bool
	}{
		{"counts and times", func(i *system.Info) { i.Containers, i.SystemTime, i.NGoroutines = 99, "later", 5 }, true},
		{"ID", func(i *system.Info) { i.ID = "E2" }, false},
		{"host name", func(i *system.Info) { i.Name = "other" }, false},
		{"version", func(i *system.Info) { i.ServerVersion = "28.0" }, false},
		{"kernel", func(i *system.Info) { i.KernelVersion = "6.12" }, false},
		{"storage driver", func(i *system.Info) { i.Driver = "vfs" }, false},
		{"data root", func(i *system.Info) { i.DockerRootDir = "/srv/docker" }, false},
		{"security options", func(i *system.Info) { i.SecurityOptions = append(i.SecurityOptions, "name=rootless") }, false},
		{"default runtime", func(i *system.Info) { i.DefaultRuntime = "runsc" }, false},
		{"system", func(i *system.Info) { i.OperatingSystem = "Ubuntu" }, false},
		{"architecture", func(i *system.Info) { i.Architecture = "aarch64" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other := info
			other.SecurityOptions = append([]string(nil), info.SecurityOptions...)
			tc.change(&other)
			if got := SameEngine(info, other); got != tc.same {
				t.Errorf("SameEngine = %v, want %v", got, tc.same)
			}
		})
	}
}
