package sandbox

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/system"
)

// TestReadPrivateFileRefusesPlanted: a remembered Engine info, an Engine
// fact and a host scan cache file are read only when they are regular
// files of this user within their bound; a fifo in their place (which an
// open waits on for ever), a link (to /dev/zero: endless), another user's
// file or a huge one is not read, and nothing waits.
func TestReadPrivateFileRefusesPlanted(t *testing.T) {
	now := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	const host = "unix:///var/run/docker.sock"
	info := system.Info{ID: "E1", Name: "host", DockerRootDir: "/var/lib/docker"}
	cases := []struct {
		name  string
		plant func(t *testing.T, p string) // p: the file goalrun reads
		root  bool                         // needs root (another user's file)
	}{
		{"fifo", func(t *testing.T, p string) {
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"link to /dev/zero", func(t *testing.T, p string) {
			if err := os.Symlink("/dev/zero", p); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"link to a valid file", func(t *testing.T, p string) {
			if err := os.Rename(p+".valid", p+".elsewhere"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(p+".elsewhere", p); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"another user's file", func(t *testing.T, p string) {
			if err := os.Rename(p+".valid", p); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(p, 4242, 4242); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"huge file", func(t *testing.T, p string) {
			if err := os.Rename(p+".valid", p); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(p, scanCacheMax+1); err != nil {
				t.Fatal(err)
			}
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root && os.Geteuid() != 0 {
				t.Skip("giving a file to another user takes root")
			}
			f := EngineFacts{Dir: filepath.Join(t.TempDir(), "engines"), Now: func() time.Time { return now }}
			if err := f.RememberInfo(host, info); err != nil {
				t.Fatal(err)
			}
			if err := f.store(factOverlay, info, "k", true); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{f.infoFile(host), f.factFile(factOverlay, info, "k")} {
				if err := os.Rename(p, p+".valid"); err != nil {
					t.Fatal(err)
				}
				tc.plant(t, p)
			}
			done := make(chan struct{})
			var gotInfo, gotFact, gotScan bool
			go func() {
				defer close(done)
				_, gotInfo = f.RememberedInfo(host)
				var v bool
				gotFact = f.load(factOverlay, info, "k", &v)
				c := newScanCache(f.Dir)
				sf, err := c.openFile(f.infoFile(host))
				if gotScan = err == nil; gotScan {
					sf.f.Close()
				}
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("reading a planted file did not return in 10 s")
			}
			if gotInfo || gotFact || gotScan {
				t.Errorf("planted files were read: info %v, fact %v, scan cache %v", gotInfo, gotFact, gotScan)
			}
		})
	}
}
