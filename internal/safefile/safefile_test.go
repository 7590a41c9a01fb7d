package safefile_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/goalrun/goalrun/internal/safefile"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("small", "abc")
	write("exact", "12345")
	write("big", "123456")
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("small", filepath.Join(dir, "in")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "folder"), 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()

	cases := []struct {
		name, file, want string
		is               error
	}{
		{"a small file", "small", "abc", nil},
		{"a file of exactly the limit", "exact", "12345", nil},
		{"a file over the limit", "big", "", safefile.ErrTooLarge},
		{"a FIFO is refused, not waited on", "fifo", "", safefile.ErrNotRegular},
		{"a folder", "folder", "", safefile.ErrNotRegular},
		{"a link inside the tree is followed", "in", "abc", nil},
		{"a link out of the tree is refused", "out", "", nil},
		{"a missing file", "none", "", fs.ErrNotExist},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := safefile.Read(root, tc.file, 5)
			if tc.want != "" {
				if err != nil || string(b) != tc.want {
					t.Fatalf("Read = %q, %v; want %q", b, err, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("Read = %q, want an error", b)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
			if tc.is == safefile.ErrTooLarge && !strings.Contains(err.Error(), "big is over 5 bytes") {
				t.Errorf("error %q does not name the file and its limit", err)
			}
		})
	}
}
