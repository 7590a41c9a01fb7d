package treecopy

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// entry is one archive entry of a test; raw, when set, is written as is
// instead (a header archive/tar's writer refuses to make).
type entry struct {
	name, body, link string
	typ              byte
	mode             int64
	raw              []byte
}

// archive builds a tar stream of entries; "OUT" in a name or link is
// replaced by the outside folder.
func archive(t *testing.T, outside string, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		if e.raw != nil {
			if err := tw.Flush(); err != nil {
				t.Fatal(err)
			}
			buf.Write(e.raw)
			continue
		}
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		h := &tar.Header{
			Name:     strings.ReplaceAll(e.name, "OUT", outside),
			Linkname: strings.ReplaceAll(e.link, "OUT", outside),
			Typeflag: e.typ, Mode: mode, ModTime: time.Unix(1700000000, 0),
		}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("%s: %v", e.name, err)
		}
		if h.Size > 0 {
			tw.Write([]byte(e.body))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// rawHeader is one ustar header block of type typ announcing size bytes,
// followed by body bytes of 'a' padded to the block size: the way to
// write what archive/tar's writer refuses (a PAX or GNU long-name record
// above its 1 MiB bound, an entry longer than its data).
func rawHeader(name string, typ byte, size, body int64) []byte {
	h := make([]byte, 512)
	copy(h[0:100], name)
	copy(h[100:108], "0000644\x00")
	copy(h[108:116], "0000000\x00")
	copy(h[116:124], "0000000\x00")
	copy(h[124:136], fmt.Sprintf("%011o\x00", size))
	copy(h[136:148], fmt.Sprintf("%011o\x00", 1700000000))
	copy(h[148:156], "        ")
	h[156] = typ
	copy(h[257:263], "ustar\x00")
	copy(h[263:265], "00")
	sum := 0
	for _, c := range h {
		sum += int(c)
	}
	copy(h[148:156], fmt.Sprintf("%06o\x00 ", sum))
	data := bytes.Repeat([]byte("a"), int(body))
	if pad := body % 512; pad != 0 {
		data = append(data, make([]byte, 512-pad)...)
	}
	return append(h, data...)
}

// treeOf lists dir: each path (slash-separated, relative) with what it is:
// "d" a folder, "l:<target>" a symlink, "f:<content>" a regular file,
// "p" a FIFO, "?" anything else.
func treeOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		switch {
		case e.IsDir():
			got[rel] = "d"
		case e.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			got[rel] = "l:" + target
		case e.Type().IsRegular():
			b, _ := os.ReadFile(p)
			if len(b) > 64 {
				b = fmt.Appendf(b[:32:32], "…(%d bytes)", len(b))
			}
			got[rel] = "f:" + string(b)
		case e.Type()&fs.ModeNamedPipe != 0:
			got[rel] = "p"
		default:
			got[rel] = "?"
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestApplyHostileArchives feeds Apply and RemoveUnseen archives a hostile
// tree can produce and compares the destination with what it must hold;
// the folder outside the destination must never change, and no temporary
// file may be left.
func TestApplyHostileArchives(t *testing.T) {
	kept := func(rel string) bool { return rel == ".git" || strings.HasPrefix(rel, ".git/") }
	tests := []struct {
		name    string
		host    map[string]string // destination before: rel -> content ("" a folder)
		entries []entry
		wantErr bool
		want    map[string]string // treeOf the destination after
	}{
		{
			name: "dotdot names climb out",
			entries: []entry{
				{name: "./", typ: tar.TypeDir, mode: 0o755},
				{name: "./../climbed", typ: tar.TypeReg, body: "x"},
				{name: "./a/../../climbed", typ: tar.TypeReg, body: "x"},
				{name: "../../../../../OUT/climbed", typ: tar.TypeReg, body: "x"},
				{name: "./ok", typ: tar.TypeReg, body: "ok"},
			},
			want: map[string]string{"ok": "f:ok"},
		},
		{
			name: "absolute names",
			entries: []entry{
				{name: "./", typ: tar.TypeDir, mode: 0o755},
				{name: "OUT/abs", typ: tar.TypeReg, body: "x"},
				{name: "/etc/goalrun-treecopy-abs", typ: tar.TypeReg, body: "x"},
			},
			want: map[string]string{},
		},
		{
			name: "a symlinked folder, then a file through it",
			entries: []entry{
				{name: "./", typ: tar.TypeDir, mode: 0o755},
				{name: "./out", typ: tar.TypeSymlink, link: "OUT"},
				{name: "./out/planted", typ: tar.TypeReg, body: "x"},
				{name: "./up", typ: tar.TypeSymlink, link: ".."},
				{name: "./up/planted", typ: tar.TypeReg, body: "x"},
			},
			want: map[string]string{"out": "l:OUT", "up": "l:.."},
		},
		{
			name: "a symlink to a host file, then a file of the same name",
			entries: []entry{
				{name: "./", typ: tar.TypeDir, mode: 0o755},
				{name: "./escape", typ: tar.TypeSymlink, link: "OUT/secret"},
				{name: "./escape", typ: tar.TypeReg, body: "mine"},
			},
			want: map[string]string{"escape": "f:mine"},
		},
		{
			name: "a host symlink replaced by a file is not written through",
			host: map[string]string{"link": "->OUT/secret"},
			entries: []entry{
				{name: "./", typ: tar.TypeDir, mode: 0o755},
				{name: "./link", typ: tar.TypeReg, body: "mine"},
			},
			want: map[string]string{"link": "f:mine"},
		},
		{
			name: "hard links: inside the archive only, to a regular file it wrote",
			entries: []entry{
				{name: "./", typ: tar.TypeDir, mode: 0o755},
				{name: "./early", typ: tar.TypeLink, link: "./a"},
				{name: "./a", typ: tar.TypeReg, body: "a"},
				{name: "./hl", typ: tar.TypeLink, link: "./a"},
				{name: "./outside", typ: tar.TypeLink, link: "OUT/secret"},
				{name: "./climb", typ: tar.TypeLink, link: "./../secret"},
				{name: "./s", typ: tar.TypeSymlink, link: "OUT/secret"},
				{name: "./via-symlink", typ: tar.TypeLink, link: "./s"},
			},
			want: map[string]string{"a": "f:a", "hl": "f:a", "s": "l:OUT/secret"},
		},
		{
			name: "devices and FIFOs never reach the host",
			entries: []entry{
				{name: "./", typ: tar.TypeDir, mode: 0o755},
				{name: "./null", typ: tar.TypeChar},
				{name: "./disk", typ: tar.TypeBlock},
				{name: "./fifo", typ: tar.TypeFifo},
			},
			want: map[string]string{},
		},
		{
			name: "a host FIFO is not removed",
			host: map[string]string{"pipe": "|"},
			entries: []entry{
				{name: "./", typ: tar.TypeDir, mode: 0o755},
			},
			want: map[string]string{"pipe": "p"},
		},
		{
			name: "a PAX record above 1 MiB is an error",
			host: map[string]string{"keep": "host"},
			entries: []entry{
				{name: "./", typ: tar.TypeDir, mode: 0o755},
				{name: "./before", typ: tar.TypeReg, body: "b"},
				{raw: rawHeader("././@PaxHeader", tar.TypeXHeader, 2<<20, 2<<20)},
				{name: "./after", typ: tar.TypeReg, body: "a"},
			},
			wantErr: true,
			want:    map[string]string{"keep": "f:host", "before": "f:b"},
		},
		{
			name: "a GNU long name above 1 MiB is an error",
			entries: []entry{
				{name: "./", typ: tar.TypeDir, mode: 0o755},
				{raw: rawHeader("././@LongLink", tar.TypeGNULongName, 2<<20, 2<<20)},
				{name: "./after", typ: tar.TypeReg, body: "a"},
			},
			wantErr: true,
			want:    map[string]string{},
		},
		{
			name: "a file longer than the stream leaves neither a part nor a temporary file",
			host: map[string]string{"huge": "old", "new": "old"},
			entries: []entry{
				{name: "./", typ: tar.TypeDir, mode: 0o755},
				{raw: rawHeader("./huge", tar.TypeReg, 1<<40, 1<<20)},
			},
			wantErr: true,
			want:    map[string]string{"huge": "f:old", "new": "f:old"},
		},
		{
			name: "a new file longer than the stream is not created",
			entries: []entry{
				{name: "./", typ: tar.TypeDir, mode: 0o755},
				{raw: rawHeader("./huge", tar.TypeReg, 8<<20, 3<<20)},
			},
			wantErr: true,
			want:    map[string]string{},
		},
		{
			name: "special bits are dropped, owner access kept",
			entries: []entry{
				{name: "./", typ: tar.TypeDir, mode: 0o755},
				{name: "./suid", typ: tar.TypeReg, body: "#!/bin/sh\n", mode: 0o6755},
				{name: "./locked/", typ: tar.TypeDir, mode: 0o1000},
			},
			want: map[string]string{"suid": "f:#!/bin/sh\n", "locked": "d"},
		},
		{
			name: "kept paths are neither written nor removed",
			host: map[string]string{".git": "", ".git/config": "host", "gone": "x"},
			entries: []entry{
				{name: "./", typ: tar.TypeDir, mode: 0o755},
				{name: "./.git/config", typ: tar.TypeReg, body: "agent"},
				{name: "./.git/hooks/", typ: tar.TypeDir, mode: 0o755},
			},
			want: map[string]string{".git": "d", ".git/config": "f:host"},
		},
		{
			name: "a folder named like the root stays a folder of its own",
			entries: []entry{
				{name: "workspace/", typ: tar.TypeDir, mode: 0o755},
				{name: "workspace/workspace/", typ: tar.TypeDir, mode: 0o755},
				{name: "workspace/workspace/a", typ: tar.TypeReg, body: "a"},
				{name: "elsewhere/b", typ: tar.TypeReg, body: "b"},
			},
			want: map[string]string{"workspace": "d", "workspace/a": "f:a"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			outside, dst := t.TempDir(), t.TempDir()
			if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret"), 0o600); err != nil {
				t.Fatal(err)
			}
			for rel, body := range tc.host {
				p := filepath.Join(dst, rel)
				os.MkdirAll(filepath.Dir(p), 0o755)
				var err error
				switch {
				case body == "":
					err = os.MkdirAll(p, 0o755)
				case body == "|":
					err = syscall.Mkfifo(p, 0o644)
				case strings.HasPrefix(body, "->"):
					err = os.Symlink(strings.ReplaceAll(body[2:], "OUT", outside), p)
				default:
					err = os.WriteFile(p, []byte(body), 0o644)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			before := treeOf(t, outside)
			root, err := os.OpenRoot(dst)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			opt := Options{RootName: "workspace", Kept: kept, Holds: func(rel string) bool { return false }, Owner: "1-2-testhost"}
			seen, err := Apply(root, tar.NewReader(bytes.NewReader(archive(t, outside, tc.entries...))), opt)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Apply: error %v, want an error: %v", err, tc.wantErr)
			}
			if err == nil {
				if err := RemoveUnseen(root, seen, opt); err != nil {
					t.Fatalf("RemoveUnseen: %v", err)
				}
			}
			got := treeOf(t, dst)
			want := map[string]string{}
			for k, v := range tc.want {
				want[k] = strings.ReplaceAll(v, "OUT", outside)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("destination:\n%v\nwant:\n%v", sorted(got), sorted(want))
			}
			if after := treeOf(t, outside); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("the outside folder changed:\n%v\nwas:\n%v", sorted(after), sorted(before))
			}
			if _, err := os.Stat("/etc/goalrun-treecopy-abs"); err == nil {
				t.Errorf("an absolute name was written at /etc/goalrun-treecopy-abs")
			}
			for rel := range got {
				if IsTemp(filepath.Base(rel)) {
					t.Errorf("temporary file left: %s", rel)
				}
			}
			for rel, st := range modes(t, dst) {
				if st&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 {
					t.Errorf("%s kept a special bit: %v", rel, st)
				}
				if st.IsDir() && st.Perm()&0o700 != 0o700 || st.IsRegular() && st.Perm()&0o400 == 0 {
					t.Errorf("%s: mode %v takes the owner's access away", rel, st)
				}
			}
		})
	}
}

// modes returns the mode of every folder and regular file under dir.
func modes(t *testing.T, dir string) map[string]fs.FileMode {
	t.Helper()
	got := map[string]fs.FileMode{}
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || p == dir || (!e.IsDir() && !e.Type().IsRegular()) {
			return nil
		}
		if info, err := e.Info(); err == nil {
			got[p] = info.Mode()
		}
		return nil
	})
	return got
}

// sorted prints m one entry a line, sorted.
func sorted(m map[string]string) string {
	var lines []string
	for k, v := range m {
		lines = append(lines, k+" "+v)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// TestTempNames: TempName's names are recognized by IsTemp and give their
// owner back; other names are not temporary files.
func TestTempNames(t *testing.T) {
	tests := []struct {
		name, base       string
		temp             bool
		pid, start, host string
	}{
		{"written with an owner", filepath.Base(TempName("/w/a/file", "12-345-host+4026532")), true, "12", "345", "host+4026532"},
		{"written without an owner", filepath.Base(TempName("file", "")), true, "0", "0", "unknown"},
		{"a host with dashes", TempPrefix + "0123456789ab-1-2-my-host", true, "1", "2", "my-host"},
		{"no owner", TempPrefix + "0123456789ab", false, "", "", ""},
		{"short random part", TempPrefix + "0123-1-2-h", false, "", "", ""},
		{"a file of the tree", "main.go", false, "", "", ""},
		{"the prefix inside a name", "x" + TempPrefix + "0123456789ab-1-2-h", false, "", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsTemp(tc.base); got != tc.temp {
				t.Errorf("IsTemp(%q) = %v, want %v", tc.base, got, tc.temp)
			}
			pid, start, host, ok := TempOwner(tc.base)
			if ok != tc.temp || pid != tc.pid || start != tc.start || host != tc.host {
				t.Errorf("TempOwner(%q) = %q %q %q %v, want %q %q %q %v", tc.base, pid, start, host, ok, tc.pid, tc.start, tc.host, tc.temp)
			}
		})
	}
	if a, b := TempName("f", "1-2-h"), TempName("f", "1-2-h"); a == b {
		t.Errorf("two temporary names are the same: %s", a)
	}
	if got := filepath.Dir(TempName("/w/a/file", "1-2-h")); got != "/w/a" {
		t.Errorf("TempName is in %s, want next to the file (/w/a)", got)
	}
}

// TestRel: names map one to one onto the tree, unsafe ones are refused.
func TestRel(t *testing.T) {
	tests := []struct {
		name, in, prefix, want string
		ok                     bool
	}{
		{"docker's dot prefix", "./a/b.go", "./", "a/b.go", true},
		{"root dot slash", "./", "./", "", true},
		{"root dot", ".", "./", "", true},
		{"a folder named like the root stays itself", "./workspace/a.txt", "./", "workspace/a.txt", true},
		{"that folder itself", "./workspace/", "./", "workspace", true},
		{"named-folder prefix", "workspace/a/b.go", "workspace/", "a/b.go", true},
		{"named-folder root", "workspace/", "workspace/", "", true},
		{"named-folder root without slash", "workspace", "workspace/", "", true},
		{"named folder inside named folder", "workspace/workspace/a", "workspace/", "workspace/a", true},
		{"bare names", "a/b", "", "a/b", true},
		{"dot prefix is optional", "a/b", "./", "a/b", true},
		{"missing folder prefix", "a/b", "workspace/", "", false},
		{"another folder's name", "workspaces/a", "workspace/", "", false},
		{"dotdot", "./a/../../etc/passwd", "./", "", false},
		{"dotdot inside", "./a/../b", "./", "", false},
		{"dot element", "./a/./b", "./", "", false},
		{"double slash", "./a//b", "./", "", false},
		{"absolute", "/etc/passwd", "", "", false},
		{"absolute with prefix", "/etc/passwd", "./", "", false},
		{"empty", "", "", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Rel(tc.in, tc.prefix)
			if got != tc.want || ok != tc.ok {
				t.Errorf("Rel(%q, %q) = %q, %v; want %q, %v", tc.in, tc.prefix, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestPrefix: the prefix comes from the first entry, the archived folder.
func TestPrefix(t *testing.T) {
	for in, want := range map[string]string{"./": "./", ".": "./", "workspace/": "workspace/", "workspace": "workspace/", "a.txt": "", "src/": ""} {
		if got := Prefix(in, "workspace"); got != want {
			t.Errorf("Prefix(%q, \"workspace\") = %q, want %q", in, got, want)
		}
	}
}

// TestCopySparse: copySparse writes the same bytes and leaves holes for blocks of zeros.
func TestCopySparse(t *testing.T) {
	tests := []struct {
		name      string
		data      []byte
		maxBlocks int64 // 512-byte blocks the host file may use
	}{
		{"all zeros", make([]byte, 8<<20), 0},
		{"data in the middle", append(append(make([]byte, 4<<20), []byte("middle")...), make([]byte, 4<<20)...), 2 * sparseBlock / 512},
		{"no zeros", bytes.Repeat([]byte("abcdefgh"), 20_000), 1 << 20},
		{"short tail", []byte("tiny"), 1 << 20},
		{"empty", nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "f")
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := copySparse(f, bytes.NewReader(tc.data)); err != nil {
				t.Fatal(err)
			}
			f.Close()
			got, err := os.ReadFile(p)
			if err != nil || !bytes.Equal(got, tc.data) {
				t.Fatalf("content differs: %d bytes, want %d (%v)", len(got), len(tc.data), err)
			}
			st, _ := os.Stat(p)
			if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Blocks > tc.maxBlocks {
				t.Errorf("file uses %d blocks, want at most %d (holes not left)", sys.Blocks, tc.maxBlocks)
			}
		})
	}
}
