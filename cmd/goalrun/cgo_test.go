package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHostCgo: the default sandbox's steps build with cgo exactly when the
// host's go command would and its gcc lies in the mounted host folders.
func TestHostCgo(t *testing.T) {
	// A gcc that is a link, as Debian's /usr/bin/gcc is.
	dir := t.TempDir()
	real := filepath.Join(dir, "x86_64-linux-gnu-gcc-12")
	if err := os.WriteFile(real, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "gcc")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	found := func(string) (string, error) { return link, nil }
	missing := func(string) (string, error) { return "", errors.New("executable file not found in $PATH") }
	mounted := func(p string) bool { return p == real || strings.HasPrefix(p, dir+"/") }
	for _, tc := range []struct {
		name     string
		env      map[string]string
		lookPath func(string) (string, error)
		covers   func(string) bool
		want     bool
	}{
		{"gcc in the mounted folders", nil, found, mounted, true},
		{"CGO_ENABLED=1 set and gcc there", map[string]string{"CGO_ENABLED": "1"}, found, mounted, true},
		{"CGO_ENABLED=0 set by the user", map[string]string{"CGO_ENABLED": "0"}, found, mounted, false},
		{"no gcc on the host", nil, missing, mounted, false},
		{"gcc outside the mounted folders", nil, found, func(string) bool { return false }, false},
		{"only the link's folder mounted, not where it leads", nil, found, func(p string) bool { return p == link }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			if got := hostCgo(getenv, tc.lookPath, tc.covers); got != tc.want {
				t.Errorf("hostCgo = %v, want %v", got, tc.want)
			}
		})
	}
}
