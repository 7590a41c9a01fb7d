package sandbox

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ctimeTick waits until the clock that stamps ctimes has moved on from
// now, so a change made after it never carries a ctime the scan recorded
// (the kernel's clock advances one tick, 1–10 ms, at a time).
func ctimeTick(t *testing.T) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tick")
	ctime := func() int64 {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Ctim.Nano()
	}
	for c0 := ctime(); ctime() == c0; {
	}
}

// hitPaths returns the hits' paths relative to root.
func hitPaths(root string, hits []LeftOut) []string {
	var out []string
	for _, h := range hits {
		out = append(out, strings.TrimPrefix(h.Path, root))
	}
	return out
}

// TestScanCache: the second scan of unchanged folders is the remembered
// answer; any change the scan could see — an entry added, removed or
// replaced anywhere, a configuration file rewritten — makes the next scan
// look again and find it.
func TestScanCache(t *testing.T) {
	base := map[string]string{
		"usr/bin/python3":          "elf",
		"usr/local/etc/npmrc":      "cafile=/etc/ssl/certs/ca-certificates.crt\n",
		"usr/share/a/b/c/d/README": "deep",
		"opt/tools/bin/tool":       "elf",
		"opt/app/.pgpass":          "*:*:*:u:pw\n",
	}
	for _, tc := range []struct {
		name string
		// change is made after the first, remembered, scan.
		change func(t *testing.T, root string)
		// want are the hits after the change.
		want []string
	}{
		{"nothing changed", func(*testing.T, string) {}, []string{"/opt/app/.pgpass"}},
		{"a credential file added deep inside", func(t *testing.T, root string) {
			hostTree(t, root, map[string]string{"usr/share/a/b/c/d/.pgpass": "*:*:*:u:pw\n"})
		}, []string{"/opt/app/.pgpass", "/usr/share/a/b/c/d/.pgpass"}},
		{"a configuration file gains a token", func(t *testing.T, root string) {
			if err := os.WriteFile(filepath.Join(root, "usr/local/etc/npmrc"), []byte("//registry.npmjs.org/:_authToken=npm_x\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, []string{"/opt/app/.pgpass", "/usr/local/etc/npmrc"}},
		{"a runner appears", func(t *testing.T, root string) {
			hostTree(t, root, map[string]string{"opt/tools/.runner": "{}"})
		}, []string{"/opt/app/.pgpass", "/opt/tools"}},
		{"a credential file removed", func(t *testing.T, root string) {
			if err := os.Remove(filepath.Join(root, "opt/app/.pgpass")); err != nil {
				t.Fatal(err)
			}
		}, nil},
		{"a folder replaced by another holding a credential", func(t *testing.T, root string) {
			other := filepath.Join(root, "elsewhere")
			hostTree(t, other, map[string]string{"b/c/d/.my.cnf": "[client]\npassword=x\n"})
			a := filepath.Join(root, "usr/share/a")
			if err := os.RemoveAll(a); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(other, a); err != nil {
				t.Fatal(err)
			}
		}, []string{"/opt/app/.pgpass", "/usr/share/a/b/c/d/.my.cnf"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			hostTree(t, root, base)
			roots := []string{filepath.Join(root, "usr"), filepath.Join(root, "opt")}
			ctimeTick(t)
			// The tree was just made: a clock an hour ahead lets the
			// answer be kept (the racy window is tested below).
			c := &scanCache{dir: t.TempDir(), now: func() time.Time { return time.Now().Add(time.Hour) }}
			first, cached, _ := c.scan(roots, nil, nil)
			if cached || !slices.Equal(hitPaths(root, first), []string{"/opt/app/.pgpass"}) {
				t.Fatalf("first scan: cached %v hits %q", cached, hitPaths(root, first))
			}
			ctimeTick(t)
			tc.change(t, root)
			// Through the check ahead: the remembered answer comes at
			// once, and its confirmation says whether it still holds.
			early := &scanCache{dir: c.dir, now: c.now, early: CheckHostScanAhead(c.dir)}
			if _, eCached, confirm := early.scan(roots, nil, nil); !eCached || confirm == nil {
				t.Errorf("the answer checked ahead was not taken: cached %v, confirm %v", eCached, confirm != nil)
			} else if held, want := confirm(context.Background()), tc.name == "nothing changed"; held != want {
				t.Errorf("the answer checked ahead held = %v, want %v", held, want)
			}
			got, cached, _ := c.scan(roots, nil, nil)
			if wantCached := tc.name == "nothing changed"; cached != wantCached {
				t.Errorf("second scan cached = %v, want %v", cached, wantCached)
			}
			if !slices.Equal(hitPaths(root, got), tc.want) {
				t.Errorf("second scan hits %q, want %q", hitPaths(root, got), tc.want)
			}
			if direct := scanHost(roots, nil, nil); !slices.Equal(hitPaths(root, got), hitPaths(root, direct)) {
				t.Errorf("cached scan %q differs from a scan without cache %q", hitPaths(root, got), hitPaths(root, direct))
			}
		})
	}
}

// TestScanCacheKeepsNoRacyOrForeignAnswer: an answer about folders that
// changed just before the scan is not kept; a cache file that is damaged,
// or kept for other skipped folders, is not used.
func TestScanCacheKeepsNoRacyOrForeignAnswer(t *testing.T) {
	tree := map[string]string{"usr/bin/python3": "elf", "usr/etc/.pgpass": "x", "usr/lib/x/y": "z"}
	t.Run("changed just before the scan", func(t *testing.T) {
		root := t.TempDir()
		hostTree(t, root, tree)
		c := newScanCache(t.TempDir())
		roots := []string{filepath.Join(root, "usr")}
		for i := range 2 {
			if _, cached, _ := c.scan(roots, nil, nil); cached {
				t.Errorf("scan %d used an answer about folders changed less than %v before it", i, scanRacyWindow)
			}
		}
	})
	for _, tc := range []struct {
		name string
		// spoil acts on the cache folder after the first scan; skip is
		// what the second scan skips.
		spoil func(t *testing.T, dir string)
		skip  string
	}{
		{"a damaged file", func(t *testing.T, dir string) {
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				p := filepath.Join(dir, e.Name())
				b, _ := os.ReadFile(p)
				if err := os.WriteFile(p, b[:len(b)-3], 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}, ""},
		{"another folder skipped", func(*testing.T, string) {}, "usr/lib"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			hostTree(t, root, tree)
			ctimeTick(t)
			dir := t.TempDir()
			c := &scanCache{dir: dir, now: func() time.Time { return time.Now().Add(time.Hour) }}
			roots := []string{filepath.Join(root, "usr")}
			if _, cached, _ := c.scan(roots, nil, nil); cached {
				t.Fatal("first scan cached")
			}
			tc.spoil(t, dir)
			var skip map[string]bool
			if tc.skip != "" {
				skip = map[string]bool{filepath.Join(root, tc.skip): true}
			}
			got, cached, _ := c.scan(roots, skip, nil)
			if cached || !slices.Equal(hitPaths(root, got), []string{"/usr/etc/.pgpass"}) {
				t.Errorf("cached %v hits %q, want a fresh scan finding /usr/etc/.pgpass", cached, hitPaths(root, got))
			}
		})
	}
}

// BenchmarkHostScan measures looking through this machine's host folders
// (the default sandbox's candidates that exist here, as HostTools would)
// without the cache, and with it when nothing changed:
//
//	go test -run '^$' -bench BenchmarkHostScan -benchtime 10x ./sandbox
func BenchmarkHostScan(b *testing.B) {
	var present []string
	for _, c := range hostCandidates() {
		if _, err := os.Stat(c); err == nil {
			present = append(present, c)
		}
	}
	b.Run("walk", func(b *testing.B) {
		for b.Loop() {
			scanHost(present, nil, nil)
		}
	})
	b.Run("cached", func(b *testing.B) {
		c := &scanCache{dir: b.TempDir(), now: time.Now}
		if _, cached, _ := c.scan(present, nil, nil); cached {
			b.Fatal("cached before the first scan")
		}
		for b.Loop() {
			if _, cached, _ := c.scan(present, nil, nil); !cached {
				b.Fatal("not cached: a host folder changed less than 2 s before the scan, or meanwhile")
			}
		}
	})
}

// TestLstatMark: the allocation-free mark every start compares equals the
// one the scan recorded (statMarkOf of os.Lstat, without its path), for
// each kind of file; a missing path, or one not ended by a NUL, gives
// none; and taking a mark allocates nothing.
func TestLstatMark(t *testing.T) {
	dir := t.TempDir()
	paths := map[string]func(p string) error{
		"folder":  func(p string) error { return os.Mkdir(p, 0o755) },
		"file":    func(p string) error { return os.WriteFile(p, []byte("x"), 0o644) },
		"symlink": func(p string) error { return os.Symlink("/nowhere", p) },
		"fifo":    func(p string) error { return syscall.Mkfifo(p, 0o600) },
	}
	for name, make := range paths {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, name)
			if err := make(p); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Lstat(p)
			if err != nil {
				t.Fatal(err)
			}
			want, ok := statMarkOf(p, fi)
			want.Path = ""
			z := append([]byte(p), 0)
			got, gok := lstatMarkZ(z)
			if !ok || !gok || got != want {
				t.Fatalf("lstatMarkZ = %+v, %v; statMarkOf = %+v, %v", got, gok, want, ok)
			}
			if got.Mode != uint32(fi.Mode().Type()) {
				t.Errorf("type bits %v, want os's %v", fs.FileMode(got.Mode), fi.Mode().Type())
			}
			if n := testing.AllocsPerRun(100, func() { lstatMarkZ(z) }); n != 0 {
				t.Errorf("a mark took %v allocations, want none", n)
			}
		})
	}
	for name, p := range map[string][]byte{
		"missing": append([]byte(filepath.Join(dir, "missing")), 0),
		"no NUL":  []byte(filepath.Join(dir, "folder")),
		"empty":   nil,
	} {
		if m, ok := lstatMarkZ(p); ok {
			t.Errorf("%s: gave a mark: %+v", name, m)
		}
	}
}

// TestScanFileUnchanged: a cache file's marks are checked from the open
// file, by any number of workers; a path changed, a mark whose path holds
// a NUL (which would stat a shorter path), a file cut short or with bytes
// after its marks all count as a change.
func TestScanFileUnchanged(t *testing.T) {
	dir := t.TempDir()
	var marks []statMark
	for i := range 40 {
		p := filepath.Join(dir, fmt.Sprintf("d%02d", i))
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := statMarkOf(p, fi)
		marks = append(marks, m)
	}
	key := strings.Repeat("k", 64)
	hits := []LeftOut{{Path: filepath.Join(dir, "d00", ".pgpass"), Reason: "a credential file"}}
	withNUL := slices.Clone(marks)
	withNUL[7].Path = marks[7].Path + "\x00/elsewhere"
	cases := []struct {
		name  string
		marks []statMark
		edit  func(t *testing.T, p string)
		want  bool
	}{
		{name: "unchanged", marks: marks, want: true},
		{name: "a folder changed", marks: marks, edit: func(t *testing.T, _ string) {
			ctimeTick(t)
			if err := os.WriteFile(filepath.Join(marks[33].Path, "new"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "a NUL in a path", marks: withNUL},
		{name: "cut short", marks: marks, edit: func(t *testing.T, p string) {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(p, fi.Size()-3); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "bytes after the marks", marks: marks, edit: func(t *testing.T, p string) {
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.Write([]byte{0}); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newScanCache(filepath.Join(t.TempDir(), "cache"))
			if err := c.save(key, hits, tc.marks); err != nil {
				t.Fatal(err)
			}
			if tc.edit != nil {
				tc.edit(t, c.file(key))
			}
			for _, workers := range []int{1, 2, 3} {
				sf, err := c.openFile(c.file(key))
				if err != nil {
					t.Fatal(err)
				}
				if sf.key != key || !slices.Equal(sf.hits, hits) {
					t.Errorf("read key %q, hits %v; want %q, %v", sf.key, sf.hits, key, hits)
				}
				if got := sf.unchanged(workers); got != tc.want {
					t.Errorf("%d workers: unchanged = %v, want %v", workers, got, tc.want)
				}
				sf.f.Close()
			}
		})
	}
}
