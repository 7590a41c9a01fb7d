package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/docker/docker/api/types/system"

	"github.com/goalrun/goalrun/internal/safefile"
)

// EngineFacts remembers answers about a Docker Engine that goalrun would
// otherwise probe before every run's first check: whether it mounts an
// overlay view of the workspace, which host folders exist on its host, and
// its info (enginefacts_info.go: confirmed live before it counts).
// Each answer is one small JSON file in Dir, named by a hash of everything
// the answer depends on (the Engine's ID, version, kernel, storage driver,
// data root and security options, plus what the fact itself is about), so
// another Engine, an upgraded one or another kernel never reads it.
//
// A remembered answer only saves a probe: it never widens what a
// container mounts (the mount policy runs on it as on a fresh answer), and
// a step that fails the way a wrong answer would make it fail has the fact
// forgotten and probed again. The zero value (Dir "") remembers nothing.
type EngineFacts struct {
	// Dir is the folder of the facts (created 0700 on the first store).
	Dir string
	// MaxAge is how long a fact is used; zero means DefaultFactAge.
	MaxAge time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// DefaultFactAge is how long a remembered fact is used before it is
// probed again, although nothing it depends on changed: a host folder
// installed since (a new toolchain under /opt) shows up at the latest
// after this long.
const DefaultFactAge = 24 * time.Hour

// DefaultEngineFactsDir is where goalrun keeps Engine facts:
// <user cache folder>/goalrun/engines (os.UserCacheDir).
func DefaultEngineFactsDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(base, "goalrun", "engines"), nil
}

// engineIdentity is what every fact about the Engine info describes
// depends on.
func engineIdentity(info system.Info) string {
	return strings.Join([]string{
		info.ID, info.ServerVersion, info.KernelVersion, info.OperatingSystem, info.Architecture,
		info.Driver, info.DockerRootDir, strings.Join(info.SecurityOptions, ","),
	}, "\x00")
}

// factFile is the file of the fact kind about key.
func (f EngineFacts) factFile(kind string, info system.Info, key string) string {
	sum := sha256.Sum256([]byte(kind + "\x00" + engineIdentity(info) + "\x00" + key))
	return filepath.Join(f.Dir, kind+"-"+hex.EncodeToString(sum[:16])+".json")
}

// factFileMax bounds what is read of a fact's file (bytes): the largest
// fact, an Engine's decisive info, takes a few kilobytes.
const factFileMax = 1 << 20

// storedFact is a fact on disk.
type storedFact struct {
	Saved time.Time       `json:"saved"`
	Value json.RawMessage `json:"value"`
}

// load reads the fact kind about key into v; false when there is none, it
// is older than MaxAge, or it cannot be read (a fact is only a shortcut).
func (f EngineFacts) load(kind string, info system.Info, key string, v any) bool {
	if f.Dir == "" || info.ID == "" {
		return false
	}
	b, err := safefile.ReadOwn(f.factFile(kind, info, key), factFileMax)
	if err != nil {
		return false
	}
	var s storedFact
	if json.Unmarshal(b, &s) != nil {
		return false
	}
	age := f.now().Sub(s.Saved)
	if age < 0 || age > f.maxAge() {
		return false
	}
	return json.Unmarshal(s.Value, v) == nil
}

// store writes the fact kind about key (atomically: runs that start
// together may store the same fact). Errors are returned for tests;
// callers ignore them (the next run probes again).
func (f EngineFacts) store(kind string, info system.Info, key string, v any) error {
	if f.Dir == "" || info.ID == "" {
		return nil
	}
	return f.storeFile(f.factFile(kind, info, key), v)
}

// storeFile writes v, stamped now, to the fact file p (atomically).
func (f EngineFacts) storeFile(p string, v any) error {
	val, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b, err := json.Marshal(storedFact{Saved: f.now(), Value: val})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(f.Dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(f.Dir, ".fact-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(b)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("sandbox: storing an Engine fact: %w", err)
	}
	return nil
}

// forget removes the fact kind about key (it proved wrong).
func (f EngineFacts) forget(kind string, info system.Info, key string) {
	if f.Dir == "" || info.ID == "" {
		return
	}
	_ = os.Remove(f.factFile(kind, info, key))
}

func (f EngineFacts) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

func (f EngineFacts) maxAge() time.Duration {
	if f.MaxAge > 0 {
		return f.MaxAge
	}
	return DefaultFactAge
}

// fsTypeOf names the filesystem p lies on (statfs's type number; "?" when
// it cannot be read): an overlay's lower layer on another filesystem may
// mount differently.
func fsTypeOf(p string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(p, &st); err != nil {
		return "?"
	}
	return fmt.Sprint(st.Type)
}
