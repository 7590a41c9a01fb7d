package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"sync"

	"github.com/docker/docker/api/types/system"

	"github.com/goalrun/goalrun/internal/safefile"
)

// The Engine's info, remembered: reading it (GET /info) takes the Engine
// 30-80 ms, and everything else in a sandbox's start waits for it. A run
// starts on the info the last run read from the same Engine address and
// reads the live one beside it; StartDocker confirms the two agree
// (WithEngineInfoCheck) before it starts any container and before it
// returns, else what it created is removed and the start is done again on
// the live info (ErrEngineChanged).

// factEngineInfo is the EngineFacts kind of a remembered info.
const factEngineInfo = "engine-info"

// ErrEngineChanged is StartDocker's error when the Engine's live info
// disagrees with the info it started from (WithEngineInfo): a remembered
// info of an Engine since reconfigured, upgraded or replaced. No container
// was started, and what was created is removed; the caller starts again
// with the live info.
var ErrEngineChanged = errors.New("sandbox: docker: the Engine is not the one remembered")

// infoFile is the file of the info remembered for the Engine at host.
func (f EngineFacts) infoFile(host string) string {
	sum := sha256.Sum256([]byte(factEngineInfo + "\x00" + host))
	return filepath.Join(f.Dir, factEngineInfo+"-"+hex.EncodeToString(sum[:16])+".json")
}

// decisiveInfo is the part of an Engine's info goalrun decides on (the
// mount policy, the view of the Engine's host, the posture, every fact's
// identity); the rest (counts, times) is not kept.
func decisiveInfo(i system.Info) system.Info {
	return system.Info{
		ID: i.ID, Name: i.Name, ServerVersion: i.ServerVersion, KernelVersion: i.KernelVersion,
		OperatingSystem: i.OperatingSystem, Architecture: i.Architecture, Driver: i.Driver,
		DockerRootDir: i.DockerRootDir, SecurityOptions: slices.Clone(i.SecurityOptions), DefaultRuntime: i.DefaultRuntime,
	}
}

// SameEngine reports whether a and b agree on everything goalrun decides
// on (decisiveInfo).
func SameEngine(a, b system.Info) bool {
	x, y := decisiveInfo(a), decisiveInfo(b)
	return x.ID == y.ID && x.Name == y.Name && x.ServerVersion == y.ServerVersion && x.KernelVersion == y.KernelVersion &&
		x.OperatingSystem == y.OperatingSystem && x.Architecture == y.Architecture && x.Driver == y.Driver &&
		x.DockerRootDir == y.DockerRootDir && slices.Equal(x.SecurityOptions, y.SecurityOptions) && x.DefaultRuntime == y.DefaultRuntime
}

// RememberedInfo returns the info RememberInfo kept for the Engine at host
// (its client's DaemonHost), unless it is older than MaxAge or unreadable.
func (f EngineFacts) RememberedInfo(host string) (system.Info, bool) {
	if f.Dir == "" || host == "" {
		return system.Info{}, false
	}
	b, err := safefile.ReadOwn(f.infoFile(host), factFileMax)
	if err != nil {
		return system.Info{}, false
	}
	var s storedFact
	var info system.Info
	if json.Unmarshal(b, &s) != nil || json.Unmarshal(s.Value, &info) != nil || info.ID == "" {
		return system.Info{}, false
	}
	if age := f.now().Sub(s.Saved); age < 0 || age > f.maxAge() {
		return system.Info{}, false
	}
	return info, true
}

// RememberInfo keeps info's decisive part for the Engine at host; errors
// are returned for tests (callers ignore them: the next run waits for the
// live info).
func (f EngineFacts) RememberInfo(host string, info system.Info) error {
	if f.Dir == "" || host == "" || info.ID == "" {
		return nil
	}
	return f.storeFile(f.infoFile(host), decisiveInfo(info))
}

// WithEngineInfoCheck has StartDocker confirm the info it was given
// (WithEngineInfo, a remembered one) against live, which returns the
// Engine's live info: before the first container starts and before
// StartDocker returns, while the rest of the start goes on. An error from
// live is the start's error, a disagreement is ErrEngineChanged.
func WithEngineInfoCheck(live func(context.Context) (system.Info, error)) DockerOption {
	return func(o *dockerOptions) { o.infoCheck = live }
}

// onceConfirmed returns check, run once: later calls (another start, from
// any goroutine) wait for its result. A result the caller's cancellation
// caused is not kept.
func onceConfirmed(check func(context.Context) error) func(context.Context) error {
	var mu sync.Mutex
	var done bool
	var result error
	return func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			result = check(ctx)
			done = result == nil || ctx.Err() == nil
		}
		return result
	}
}
