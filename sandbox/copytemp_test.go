package sandbox

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goalrun/goalrun/internal/treecopy"
)

// cutReader yields r's bytes up to n, then fails: a copy-out archive cut
// short (a signal, an Engine that failed mid-transfer).
type cutReader struct {
	r io.Reader
	n int
}

func (c *cutReader) Read(p []byte) (int, error) {
	if c.n <= 0 {
		return 0, errors.New("interrupted")
	}
	if len(p) > c.n {
		p = p[:c.n]
	}
	n, err := c.r.Read(p)
	c.n -= n
	return n, err
}

// TestCutCopyOutLeavesNoPartialFile: an archive that stops in the middle
// of a file leaves neither a part of it at its name — a new file, or a
// changed one of the same size — nor the temporary file it was written
// to.
func TestCutCopyOutLeavesNoPartialFile(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB, not sparse
	for _, tc := range []struct {
		name     string
		existing []byte // the host's file before, nil: none
	}{
		{"a new file", nil},
		{"a changed file of the same size", bytes.Repeat([]byte("x"), len(big))},
		{"a changed file of another size", []byte("the host's version\n")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			if tc.existing != nil {
				if err := os.WriteFile(filepath.Join(ws, "big.bin"), tc.existing, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			tw.WriteHeader(&tar.Header{Name: "workspace/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: time.Unix(1700000000, 0)})
			tw.WriteHeader(&tar.Header{Name: "workspace/big.bin", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(big)), ModTime: time.Unix(1700000000, 0)})
			tw.Write(big)
			tw.Close()
			root, err := os.OpenRoot(ws)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			_, err = applyTar(root, tar.NewReader(&cutReader{r: &buf, n: 1024 + len(big)/3}), nil)
			if err == nil {
				t.Fatal("a cut archive was applied without an error")
			}
			b, rerr := os.ReadFile(filepath.Join(ws, "big.bin"))
			switch {
			case tc.existing == nil && rerr == nil:
				t.Errorf("a part of the new file (%d of %d bytes) is at its name", len(b), len(big))
			case tc.existing != nil && !bytes.Equal(b, tc.existing):
				t.Errorf("the host's file was changed: %d bytes, %v", len(b), rerr)
			}
			names, _ := os.ReadDir(ws)
			for _, e := range names {
				if strings.HasPrefix(e.Name(), treecopy.TempPrefix) {
					t.Errorf("temporary file left: %s", e.Name())
				}
			}
		})
	}
}

// TestStaleCopyTemps: a copy-out temporary file whose goalrun is gone (a
// SIGKILL mid-copy) is removed by the next copy of the workspace into a
// sandbox; a live goalrun's is left alone; neither goes into the sandbox.
func TestStaleCopyTemps(t *testing.T) {
	ws := t.TempDir()
	host, _ := os.Hostname()
	if h := os.Getenv("HOSTNAME"); h != "" {
		host = h
	}
	dead := treecopy.TempPrefix + "0123456789ab-2147483646-1-" + ownerHost(host)
	live := filepath.Base(treecopy.TempName(filepath.Join(ws, "x"), copyTempOwner()))
	elsewhere := treecopy.TempPrefix + "0123456789ab-2147483646-1-another-host"
	for _, n := range []string{dead, live, elsewhere, "keep.txt"} {
		if err := os.WriteFile(filepath.Join(ws, n), []byte("part"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name        string
		stale, temp bool
	}{{dead, true, true}, {live, false, true}, {elsewhere, false, true}, {"keep.txt", false, false}, {".goalrun-copy-0123456789ab", false, false}} {
		if got := StaleCopyTemp(tc.name); got != tc.stale {
			t.Errorf("StaleCopyTemp(%q) = %v, want %v", tc.name, got, tc.stale)
		}
		if got := IsCopyTemp(tc.name); got != tc.temp {
			t.Errorf("IsCopyTemp(%q) = %v, want %v", tc.name, got, tc.temp)
		}
	}
	var buf bytes.Buffer
	if err := tarTree(ws, 1000, 1000, &buf, nil); err != nil {
		t.Fatal(err)
	}
	var inTar []string
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		inTar = append(inTar, h.Name)
	}
	if strings.Contains(strings.Join(inTar, " "), treecopy.TempPrefix) || !strings.Contains(strings.Join(inTar, " "), "keep.txt") {
		t.Errorf("copied into the sandbox: %v", inTar)
	}
	for n, want := range map[string]bool{dead: false, live: true, elsewhere: true, "keep.txt": true} {
		if _, err := os.Stat(filepath.Join(ws, n)); (err == nil) != want {
			t.Errorf("%s exists %v, want %v", n, err == nil, want)
		}
	}
}
