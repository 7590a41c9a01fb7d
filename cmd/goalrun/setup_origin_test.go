package main

import (
	"os"
	"path/filepath"
	"slices"
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

// TestPlanSetupSteps: the detected steps and the --setup commands, in that
// order; a --setup command that is a detected step of the workspace's root
// runs once, as the user's (its failure ends the run).
func TestPlanSetupSteps(t *testing.T) {
	tree := map[string]string{
		"go.mod":     "module example.test/p\n\ngo 1.22\n\nrequire example.test/q v1.0.0\n",
		"p.go":       "package p\n",
		"api/go.mod": "module example.test/p/api\n\ngo 1.22\n\nrequire example.test/q v1.0.0\n",
		"api/api.go": "package api\n",
	}
	cases := []struct {
		name  string
		setup []string
		want  []string // "dir: command (detected)"
	}{
		{"detected only", nil, []string{
			".: go mod download (detected)", ".: go test -count=1 -exec true ./... (detected)",
			"api: go mod download (detected)", "api: go test -count=1 -exec true ./... (detected)"}},
		{"--setup repeats a detected root step", []string{"go  mod download", "make deps"}, []string{
			".: go test -count=1 -exec true ./... (detected)",
			"api: go mod download (detected)", "api: go test -count=1 -exec true ./... (detected)",
			": go  mod download", ": make deps"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range tree {
				p := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var cfg runConfig
			cfg.dir, cfg.setupDefaults, cfg.setup, cfg.sandbox = dir, true, tc.setup, "docker"
			var got []string
			for _, s := range planSetup(cfg, nil).steps {
				line := s.Dir + ": " + s.Command
				if s.Detected {
					line += " (detected)"
				}
				got = append(got, line)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("steps\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}
