package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestViewsHostBaseRefusesSharedFolder: the check views' folders are made
// only in a folder no other user can rename or fill (privateFolder). Else
// that user swaps the run's folder (or one above it) for a link between
// goalrun's steps, and goalrun's chmod and git configs, and the Engine's
// overlay (mounted as root, upperdir in that folder), land where the link
// points. XDG_CACHE_HOME in a shared folder such as /tmp is the way there.
func TestViewsHostBaseRefusesSharedFolder(t *testing.T) {
	const other = 4242
	cases := []struct {
		name    string
		prepare func(t *testing.T, cache string) // cache is XDG_CACHE_HOME, made 0700
		want    bool                             // the views' folders may be made there
	}{
		{"own private cache folder", func(*testing.T, string) {}, true},
		{"cache folder writable by everyone", func(t *testing.T, c string) { chmod(t, c, 0o777) }, false},
		{"cache folder group-writable", func(t *testing.T, c string) { chmod(t, c, 0o770) }, false},
		{"sticky shared cache folder with goalrun's own folder", func(t *testing.T, c string) {
			chmod(t, c, 0o777|os.ModeSticky)
		}, true},
		{"sticky shared cache folder with another user's goalrun folder", func(t *testing.T, c string) {
			chmod(t, c, 0o777|os.ModeSticky)
			mkdirOwned(t, filepath.Join(c, "goalrun"), 0o755, other)
		}, false},
		{"views folder another user's", func(t *testing.T, c string) {
			mkdirOwned(t, filepath.Join(c, "goalrun"), 0o700, os.Geteuid())
			mkdirOwned(t, filepath.Join(c, "goalrun", viewsDirName), 0o700, other)
		}, false},
		{"views folder writable by everyone", func(t *testing.T, c string) {
			mkdirOwned(t, filepath.Join(c, "goalrun"), 0o700, os.Geteuid())
			mkdirOwned(t, filepath.Join(c, "goalrun", viewsDirName), 0o777, os.Geteuid())
		}, false},
		{"views folder a link to a shared folder", func(t *testing.T, c string) {
			shared := filepath.Join(filepath.Dir(c), "shared")
			mkdirOwned(t, shared, 0o777, os.Geteuid())
			mkdirOwned(t, filepath.Join(c, "goalrun"), 0o700, os.Geteuid())
			if err := os.Symlink(shared, filepath.Join(c, "goalrun", viewsDirName)); err != nil {
				t.Fatal(err)
			}
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if os.Geteuid() != 0 && strings.Contains(tc.name, "another user's") {
				t.Skip("giving a folder to another user takes root")
			}
			top := t.TempDir()
			chmod(t, top, 0o700)
			cache := filepath.Join(top, "cache")
			mkdirOwned(t, cache, 0o700, os.Geteuid())
			tc.prepare(t, cache)
			t.Cleanup(func() { _ = removeTree(top) })
			env := map[string]string{"XDG_CACHE_HOME": cache, "HOME": top}
			d := &Docker{wsMode: WorkspaceBind, uid: os.Geteuid(), gid: os.Getegid(), view: engineView{local: true}, wsSource: filepath.Join(top, "ws")}
			d.opts.lookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
			local, _ := d.viewsHostBase()
			if got := local != ""; got != tc.want {
				t.Errorf("views' folders may be made in %q: %v, want %v", local, got, tc.want)
			}
		})
	}
}

func chmod(t *testing.T, p string, m os.FileMode) {
	t.Helper()
	if err := os.Chmod(p, m); err != nil {
		t.Fatal(err)
	}
}

// mkdirOwned makes p (or takes it when it is there) with mode m and owner uid.
func mkdirOwned(t *testing.T, p string, m os.FileMode, uid int) {
	t.Helper()
	if err := os.Mkdir(p, 0o700); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
	chmod(t, p, m)
	if uid != os.Geteuid() {
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
}
