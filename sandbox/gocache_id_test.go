package sandbox

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestGoToolchainID: a release toolchain is identified from its VERSION
// file without running its go command; one without a VERSION file (or
// with one that names no release) is asked with `go env`.
func TestGoToolchainID(t *testing.T) {
	cases := []struct {
		name    string
		version string // "" for no VERSION file
		wantRun bool
		want    string // prefix of the identity
	}{
		{"release", "go1.99.1\ntime 2026-08-28T16:20:06Z\n", false, "go1.99.1\n" + runtime.GOOS + "\n" + runtime.GOARCH + "\n"},
		{"built from source", "", true, "devel-from-go-env\n"},
		{"a VERSION file that names no release", "weird\n", true, "devel-from-go-env\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			goroot := t.TempDir()
			ran := filepath.Join(goroot, "ran")
			if err := os.MkdirAll(filepath.Join(goroot, "bin"), 0o755); err != nil {
				t.Fatal(err)
			}
			script := "#!/bin/sh\ntouch " + ran + "\nprintf 'devel-from-go-env\\nlinux\\namd64\\n'\n"
			if err := os.WriteFile(filepath.Join(goroot, "bin", "go"), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			if c.version != "" {
				if err := os.WriteFile(filepath.Join(goroot, "VERSION"), []byte(c.version), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			id, err := goToolchainID(t.Context(), goroot, goEnv(goroot, "", false))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(id, c.want) {
				t.Errorf("id %q, want it to begin %q", id, c.want)
			}
			if _, err := os.Stat(ran); (err == nil) != c.wantRun {
				t.Errorf("the go command ran: %v, want %v", err == nil, c.wantRun)
			}
		})
	}
	// A go command replaced at the same place and version is another
	// toolchain.
	goroot := t.TempDir()
	os.MkdirAll(filepath.Join(goroot, "bin"), 0o755)
	os.WriteFile(filepath.Join(goroot, "VERSION"), []byte("go1.99.1\n"), 0o644)
	os.WriteFile(filepath.Join(goroot, "bin", "go"), []byte("one"), 0o755)
	a, _ := goToolchainID(t.Context(), goroot, nil)
	os.WriteFile(filepath.Join(goroot, "bin", "go"), []byte("another"), 0o755)
	if b, _ := goToolchainID(t.Context(), goroot, nil); a == b {
		t.Errorf("a rebuilt go command keeps the identity %q", a)
	}
}

// TestRemoveStaleWarmings: warming folders a killed goalrun left more than
// a day ago are removed; a recent one (another goalrun may be filling it)
// and the warmed caches stay.
func TestRemoveStaleWarmings(t *testing.T) {
	root := t.TempDir()
	now := time.Now()
	for name, age := range map[string]time.Duration{
		"go-build-warming-1": 48 * time.Hour, "go-build-warming-2": time.Hour, "go-build-0123456789abcdef": 48 * time.Hour,
	} {
		d := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Join(d, "cache"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(d, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	removeStaleWarmings(root, now)
	for name, want := range map[string]bool{"go-build-warming-1": false, "go-build-warming-2": true, "go-build-0123456789abcdef": true} {
		if _, err := os.Stat(filepath.Join(root, name)); (err == nil) != want {
			t.Errorf("%s: there %v, want %v", name, err == nil, want)
		}
	}
}
