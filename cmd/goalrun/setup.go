package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	gitconfig "github.com/go-git/go-git/v5/plumbing/format/config"

	"github.com/goalrun/goalrun/goal"
	"github.com/goalrun/goalrun/internal/safefile"
	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/setup"
)

// setupPlan is a run's setup step: the commands run before the first
// check, what the loop knows of the project for telling an environment
// failure from the agent's, and how a Docker sandbox runs the steps.
type setupPlan struct {
	steps   []goal.SetupStep
	env     goal.Environment
	sandbox sandbox.SetupConfig
}

// planSetup reads the untouched workspace (setup.Detect) and decides the
// setup steps: the detected defaults unless --setup-defaults=false, then
// each --setup command. A workspace that cannot be read is reported on
// warn and prepared by --setup alone.
func planSetup(cfg runConfig, warn io.Writer) setupPlan {
	proj, err := setup.Detect(cfg.dir)
	if err != nil && warn != nil {
		fmt.Fprintf(warn, "goalrun: the setup step's detection could not read the workspace: %v\n", err)
	}
	var p setupPlan
	if cfg.setupDefaults {
		for _, s := range proj.Steps() {
			// A --setup command that is a detected step (in the workspace's
			// root) runs once, as the user's: its failure ends the run.
			if (s.Dir == "" || s.Dir == ".") && slices.ContainsFunc(cfg.setup, func(c string) bool { return sameCommand(c, s.Command) }) {
				continue
			}
			p.steps = append(p.steps, goal.SetupStep{Command: s.Command, Dir: s.Dir, Detected: true})
		}
	}
	for _, c := range cfg.setup {
		p.steps = append(p.steps, goal.SetupStep{Command: c})
	}
	if len(proj.PythonDeps) > 0 {
		p.env.Declared = map[string][]string{setup.PyPI: proj.PythonDeps}
	}
	for _, s := range p.steps {
		p.env.Setup = append(p.env.Setup, s.Command)
	}
	// The local host prepares dependencies in its own caches with its own
	// network (no deps volume, no offline settings).
	if len(p.steps) > 0 && cfg.sandbox != "local" {
		p.sandbox = sandbox.SetupConfig{
			Enabled:    true,
			Env:        proj.Env(sandbox.DepsDir, false),
			CheckEnv:   proj.Env(sandbox.DepsDir, true),
			AllowHosts: append(proj.AllowHosts(), cfg.allowHosts...),
		}
		// Only goalrun's own Go steps are kept across runs: they write
		// nothing but the deps volume.
		var steps []setup.Step
		for _, s := range p.steps {
			steps = append(steps, setup.Step{Command: s.Command, Dir: s.Dir, Detected: s.Detected})
		}
		if err == nil {
			p.sandbox.Key = setup.DepsKey(cfg.dir, proj, steps, "go "+goToolchainID(hostGoroot()), "origin "+originURL(cfg.dir))
			p.sandbox.Steps = len(steps)
		}
	}
	return p
}

// sameCommand reports whether two setup commands are the same words
// (spacing aside).
func sameCommand(a, b string) bool {
	return slices.Equal(strings.Fields(a), strings.Fields(b))
}

// goToolchainID names the Go toolchain at goroot for the kept deps
// volume's key: its VERSION file's first line (or the go binary's size and
// time when it has none), "" without one.
func goToolchainID(goroot string) string {
	if goroot == "" {
		return ""
	}
	if b, err := os.ReadFile(filepath.Join(goroot, "VERSION")); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		return goroot + " " + line
	}
	if st, err := os.Stat(filepath.Join(goroot, "bin", "go")); err == nil {
		return fmt.Sprintf("%s %d %d", goroot, st.Size(), st.ModTime().UnixNano())
	}
	return goroot
}

// gitConfigBytes bounds the repository config originURL reads: 1 MiB.
const gitConfigBytes = 1 << 20

// originURL is the URL of the "origin" remote of the repository holding
// dir, read from its .git/config before any agent ran (never running
// git), "" when there is none. The kept deps volume's key takes it: the
// volume's build cache holds the tree's compiled packages, and two
// repositories checked out one after the other at the same path (a
// self-hosted runner's folder) must not share it.
func originURL(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Lstat(filepath.Join(d, ".git"))
		if err == nil {
			if !st.IsDir() {
				return "" // a worktree's or submodule's .git file
			}
			root, err := os.OpenRoot(filepath.Join(d, ".git"))
			if err != nil {
				return ""
			}
			defer root.Close()
			b, err := safefile.Read(root, "config", gitConfigBytes)
			if err != nil {
				return ""
			}
			cfg := gitconfig.New()
			if err := gitconfig.NewDecoder(bytes.NewReader(b)).Decode(cfg); err != nil {
				return ""
			}
			return cfg.Section("remote").Subsection("origin").Option("url")
		}
		if d == filepath.Dir(d) {
			return ""
		}
	}
}
