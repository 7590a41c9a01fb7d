package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/goalrun/goalrun/goal/agent"
	"github.com/goalrun/goalrun/report"
)

// defaultImageBusybox is the static busybox the default sandbox image is
// built from (sandbox.ImageSpec.Busybox's default: Debian's busybox-static).
const defaultImageBusybox = "/usr/bin/busybox"

// sandboxExampleURL is the example sandbox image for workflows, named in the
// error a workflow gets when it passes no image.
const sandboxExampleURL = "https://github.com/goalrun/goalrun/blob/main/examples/sandbox/Dockerfile"

// actionImageProblem reports, before any Docker Engine is contacted, a
// Docker sandbox (--sandbox docker or auto) that has no image input and
// whose default image cannot be made where goalrun runs. Without an image,
// startDocker builds a small image from this machine's files (a static
// busybox at defaultImageBusybox) and mounts the agent's executable from
// PATH into it; in a GitHub container action goalrun runs in its own
// scratch-based container, which has neither, so the run would end in a
// startup error about a missing file that says nothing about the cause.
// This one says what the workflow must do instead: build an image that
// contains the agent CLI and the check's toolchain, and pass it as image.
//
// pathEnv is the PATH to search (the action's environment); isExec tells
// whether a path is an executable regular file. It returns nil when an
// image is given, the sandbox is local, or everything the default image
// needs is present; otherwise a startup error with code AgentNotFound (the
// agent CLI is missing) or BadInput (only busybox is missing: the command
// agent needs an image too). Both exit 2: the workflow must change.
func actionImageProblem(cfg runConfig, pathEnv string, isExec func(string) bool) *startupError {
	if cfg.image != "" || cfg.sandbox == "local" {
		return nil
	}
	var missing []string
	code := report.ErrBadInput
	if cfg.agent != agent.CommandName {
		name := firstNonEmpty(cfg.agentBin, cfg.spec.Bin)
		if _, ok := lookPathIn(name, pathEnv, isExec); !ok {
			missing = append(missing, fmt.Sprintf("the %s agent's executable %q on PATH", cfg.agent, name))
			code = report.ErrAgentNotFound
		}
	}
	if !isExec(defaultImageBusybox) {
		missing = append(missing, "the static busybox "+defaultImageBusybox)
	}
	if len(missing) == 0 {
		return nil
	}
	return &startupError{
		code: code,
		message: fmt.Sprintf("no sandbox image: the image input is empty, so goalrun would build a default image from the files where it runs and mount the agent CLI from PATH, but it cannot find %s here (in a GitHub Action goalrun runs in its own minimal container). In a GitHub Action the sandbox image must contain the agent CLI and the check's toolchain: build one in a step before goalrun and pass it as image (see examples/sandbox/Dockerfile)",
			strings.Join(missing, " or ")),
		suggestions: []string{
			"Copy " + sandboxExampleURL + " to .github/goalrun/Dockerfile, add a step after actions/checkout that runs docker build -t goalrun-sandbox:ci -f .github/goalrun/Dockerfile --build-arg SANDBOX_UID=\"$(id -u)\" --build-arg SANDBOX_GID=\"$(id -g)\" . and set image: goalrun-sandbox:ci on the goalrun step.",
			"The action reaches the runner's Docker Engine, so an image built in an earlier step of the job is found without pushing or pulling it.",
		},
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
