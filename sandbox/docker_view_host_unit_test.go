package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestViewsHostBaseRefusesSharedFolder: the check views' folders are made
// only in a folder no other user can rename or fill (privateFolder). Else
// that user swaps the run's folder (or one above it) for a link between
// goalrun's steps, and goalrun's chmod and git configs, and the Engine's
// overlay (mounted as root, upperdir in that folder), land where the link
// points. XDG_CACHE_HOME in a shared folder such as /tmp is the way there.
// Reap, too, looks for dead runs' views only in a folder no other user
// can change.
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
			// Reap looks only where views may be made.
			if got := reapViewsBase(d.opts.lookupEnv) != ""; got != tc.want {
				t.Errorf("Reap looks in the views' folder: %v, want %v", got, tc.want)
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

// TestRemoveTreeDeep: a check can leave in its folders a tree deeper than
// goalrun may hold files open (mkdir and cd in a loop). os.RemoveAll
// holds one open folder per level and fails on it ("too many open
// files"), so the views' folder stayed behind and every later Reap failed
// on it again. removeTree removes such a tree too, also folders without
// permissions and with links in them, and never follows a link out.
func TestRemoveTreeDeep(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	// A low limit for this test: the tree need not be a million deep.
	low := lim
	low.Cur = 256
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim) }()
	cases := []struct {
		name  string
		depth int
		mode  os.FileMode // of every folder in the tree
	}{
		{"shallow", 3, 0o755},
		{"deeper than the open files allowed", 1000, 0o755},
		{"deep and without permissions", 1000, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			top := t.TempDir()
			outside := filepath.Join(top, "outside")
			if err := os.WriteFile(outside, []byte("keep"), 0o600); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(top, "goalrun-views-x")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			// Built through folder descriptors: the path is longer than
			// PATH_MAX.
			fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
			if err != nil {
				t.Fatal(err)
			}
			for range tc.depth {
				if err := unix.Symlinkat(outside, fd, "link"); err != nil {
					t.Fatal(err)
				}
				if err := unix.Mkdirat(fd, "dddddddddddddddddddddddddddddd", 0o755); err != nil {
					t.Fatal(err)
				}
				next, err := unix.Openat(fd, "dddddddddddddddddddddddddddddd", unix.O_RDONLY|unix.O_DIRECTORY, 0)
				if err != nil {
					t.Fatal(err)
				}
				if err := unix.Fchmod(fd, uint32(tc.mode)); err != nil {
					t.Fatal(err)
				}
				unix.Close(fd)
				fd = next
			}
			unix.Close(fd)
			if err := removeTree(dir); err != nil {
				t.Fatalf("removeTree: %v", err)
			}
			if _, err := os.Lstat(dir); !os.IsNotExist(err) {
				t.Errorf("%s is still there (%v)", dir, err)
			}
			if b, err := os.ReadFile(outside); err != nil || string(b) != "keep" {
				t.Errorf("the file a link pointed at: %q, %v", b, err)
			}
		})
	}
}

// TestRemoveTreeMovedFolder: a folder moved out of the tree while
// removeTree is in it (another process of the same user) ends the removal
// with an error; what lies beside the folder's new place stays.
func TestRemoveTreeMovedFolder(t *testing.T) {
	top := t.TempDir()
	keep := filepath.Join(top, "keep")
	if err := os.WriteFile(keep, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(top, "goalrun-views-x")
	if err := os.MkdirAll(filepath.Join(dir, "a", "b", "c"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a", "b", "c", "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The folder the removal is in moves next to keep.
	removeTreeDown = func(depth int) {
		if depth == 2 {
			if err := os.Rename(filepath.Join(dir, "a", "b"), filepath.Join(top, "b")); err != nil {
				t.Error(err)
			}
		}
	}
	defer func() { removeTreeDown = nil }()
	if err := removeTreeAt(dir); err == nil {
		t.Error("removeTreeAt went on after a folder was moved")
	}
	if b, err := os.ReadFile(keep); err != nil || string(b) != "keep" {
		t.Errorf("the file beside the moved folder: %q, %v", b, err)
	}
}
