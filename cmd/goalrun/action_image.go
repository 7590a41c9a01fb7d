package main

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/goalrun/goalrun/goal/agent"
	"github.com/goalrun/goalrun/report"
)

// defaultImageBusybox is the static busybox the minimal sandbox image
// (image: minimal) is built from (sandbox.ImageSpec.Busybox's default:
// Debian's busybox-static).
const defaultImageBusybox = "/usr/bin/busybox"

// agentInstall says how a workflow installs an agent's CLI on the runner
// (the versions .ci/run tests), by agent name.
var agentInstall = map[string]string{
	"claude": "npm install --global @anthropic-ai/claude-code@2.1.332",
	"codex":  "npm install --global @openai/codex@0.171.0",
	"gemini": "npm install --global @google/gemini-cli",
}

// actionImageProblem reports, before any Docker Engine is contacted, a
// Docker sandbox (--sandbox docker or auto) that has no image input and
// whose default image cannot be made where goalrun runs. Without an image,
// the sandbox takes the runner's system folders (read-only) and runs the
// agent CLI found on the runner's PATH; the action runs goalrun on the
// runner itself, so the agent CLI must be installed there in an earlier
// step (npm install --global …), as any tool a workflow uses. The minimal
// image (image: minimal) is built from the runner's static busybox, which
// must be there too. Without this check the run would end in a startup
// error about a missing file that says nothing about the cause.
//
// pathEnv is the PATH to search (the action's environment); isExec tells
// whether a path is an executable regular file. It returns nil when an
// image is given, the sandbox is local, or everything the default image
// needs is present; otherwise a startup error with code AgentNotFound (the
// agent CLI is missing) or BadInput (only busybox is missing, for image:
// minimal). Both exit 2: the workflow must change.
func actionImageProblem(cfg runConfig, pathEnv string, isExec func(string) bool) *startupError {
	if cfg.image != "" || cfg.sandbox == "local" {
		return nil
	}
	var missing []string
	code := report.ErrBadInput
	var suggestions []string
	if cfg.agent != agent.CommandName {
		name := cmp.Or(cfg.agentBin, cfg.spec.Bin)
		if _, ok := lookPathIn(name, pathEnv, isExec); !ok {
			missing = append(missing, fmt.Sprintf("the %s agent's executable %q on the runner's PATH", cfg.agent, name))
			code = report.ErrAgentNotFound
			install := cmp.Or(agentInstall[cfg.agent], "install the "+cfg.agent+" CLI")
			suggestions = append(suggestions, "Add a step before goalrun that installs the agent's CLI on the runner: - run: "+install+
				" (or name it with the agent-bin input).")
		}
	}
	if cfg.minimalImage && !isExec(defaultImageBusybox) {
		missing = append(missing, "the static busybox "+defaultImageBusybox+" the default sandbox image is made of")
		suggestions = append(suggestions, "Install busybox on the runner (Debian and Ubuntu: apt-get install busybox-static), or pass an image that holds the agent CLI and the check's toolchain as the image input.")
	}
	if len(missing) == 0 {
		return nil
	}
	return &startupError{
		code: code,
		message: fmt.Sprintf("no sandbox image: the image input names none, so goalrun builds the sandbox from the runner's own files and toolchains and runs the agent CLI from the runner's PATH, but it cannot find %s",
			strings.Join(missing, " or ")),
		suggestions: suggestions,
	}
}

// lookPathIn finds an executable the way a shell would with PATH=pathEnv:
// a name with a slash is checked as it is; an empty PATH entry means the
// current directory. It returns the path found and whether one was.
func lookPathIn(name, pathEnv string, isExec func(string) bool) (string, bool) {
	if name == "" {
		return "", false
	}
	if strings.Contains(name, "/") {
		return name, isExec(name)
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		if p := filepath.Join(dir, name); isExec(p) {
			return p, true
		}
	}
	return "", false
}

// isExecutableFile reports whether p (symlinks followed) is a regular file
// with an execute bit set.
func isExecutableFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
