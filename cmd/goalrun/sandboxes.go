package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/sandbox"
)

// sandboxFactory starts the sandbox a --sandbox mode asks for. docker is nil
// until the Docker sandbox is wired in; local is sandbox.StartLocal.
type sandboxFactory struct {
	docker func(ctx context.Context, cfg sandbox.Config) (sandbox.Sandbox, error)
	local  func(ctx context.Context, cfg sandbox.Config) (sandbox.Sandbox, error)
}

// errDockerNotBuilt is the Docker factory's error while this build has no
// Docker sandbox.
var errDockerNotBuilt = errors.New("this build of goalrun has no Docker sandbox yet")

func defaultSandboxes() sandboxFactory {
	return sandboxFactory{
		local: func(ctx context.Context, cfg sandbox.Config) (sandbox.Sandbox, error) {
			return sandbox.StartLocal(ctx, cfg)
		},
	}
}

// sandboxError is a sandbox that could not start: unavailable (no Engine,
// or not built) or failed while starting.
type sandboxError struct {
	unavailable bool
	err         error
}

func (e *sandboxError) Error() string { return e.err.Error() }
func (e *sandboxError) Unwrap() error { return e.err }

// start starts the sandbox for mode (docker, auto, local). auto tries
// Docker and falls back to the local host, recording why in the posture's
// fallback_notice.
func (f sandboxFactory) start(ctx context.Context, mode string, cfg sandbox.Config) (sandbox.Sandbox, error) {
	startDocker := func() (sandbox.Sandbox, error) {
		if f.docker == nil {
			return nil, &sandboxError{unavailable: true, err: errDockerNotBuilt}
		}
		sb, err := f.docker(ctx, cfg)
		if err != nil {
			return nil, &sandboxError{unavailable: true, err: err}
		}
		return sb, nil
	}
	startLocal := func(cfg sandbox.Config) (sandbox.Sandbox, error) {
		sb, err := f.local(ctx, cfg)
		if err != nil {
			return nil, &sandboxError{err: err}
		}
		return sb, nil
	}
	switch mode {
	case "local":
		return startLocal(cfg)
	case "auto":
		sb, err := startDocker()
		if err == nil {
			return sb, nil
		}
		cfg.FallbackNotice = fmt.Sprintf("--sandbox auto: the Docker sandbox could not start (%v); the run used the local host instead, without a container, with the host's network (%s was asked for)", err, networkOrNone(cfg.Network))
		cfg.Network = sandbox.NetworkHost
		return startLocal(cfg)
	default:
		return startDocker()
	}
}

func networkOrNone(n sandbox.Network) sandbox.Network {
	if n == "" {
		return sandbox.NetworkNone
	}
	return n
}

// asSandboxError turns a start failure into the startup error it is.
func asSandboxError(err error) *startupError {
	var se *sandboxError
	if errors.As(err, &se) && se.unavailable {
		return &startupError{code: report.ErrSandboxUnavailable,
			message: fmt.Sprintf("the Docker sandbox is unavailable: %v", se.err)}
	}
	return &startupError{code: report.ErrSandboxFailed, message: fmt.Sprintf("the sandbox could not start: %v", err)}
}
