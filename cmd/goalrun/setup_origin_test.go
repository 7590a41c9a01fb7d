package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOriginURL: the kept deps volume's key takes the origin remote of the
// repository holding the workdir, read from .git/config without git.
func TestOriginURL(t *testing.T) {
	cases := []struct {
		name, config, sub, want string
	}{
		{"the workdir is the repository", "[remote \"origin\"]\n\turl = https://github.com/corp/project\n", "", "https://github.com/corp/project"},
		{"the workdir is inside it", "[remote \"origin\"]\n\turl = https://github.com/someone/project\n", "pkg/sub", "https://github.com/someone/project"},
		{"no origin", "[remote \"upstream\"]\n\turl = https://example.com/x\n", "", ""},
		{"an unreadable config", "[remote \"origin\"\n", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			repo := t.TempDir()
			if err := os.MkdirAll(filepath.Join(repo, ".git"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(repo, ".git", "config"), []byte(tc.config), 0o644); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(repo, filepath.FromSlash(tc.sub))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if got := originURL(dir); got != tc.want {
				t.Errorf("originURL = %q, want %q", got, tc.want)
			}
		})
	}
	if got := originURL(t.TempDir()); got != "" {
		t.Errorf("outside any repository: %q", got)
	}
}
