package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/docker/docker/api/types/mount"

	"github.com/goalrun/goalrun/internal/safefile"
)

// Keeping .git out of the sandbox's reach (README, "Security model").
//
// A repository's .git folder holds configuration the host's git executes
// (core.fsmonitor, hooks, filter drivers): an agent that could write it
// would run code as the user at the next `git status`. And a checkout may
// have left a credential in .git/config. So, in bind mode, every .git
// entry (folder or file: worktrees and submodules have files) the
// workspace holds at start is mounted read-only over the writable
// workspace, the folders between the workspace root and a nested .git are
// mounted over themselves (a mount point cannot be renamed or removed, so
// the agent cannot move a .git aside and put its own where the old one
// was), and every git config file that carries credentials is replaced by
// a sanitized, read-only copy (sanitizeGitConfig). In copy mode the copy
// put into the sandbox holds sanitized configs and nothing under a .git
// path ever comes back to the host (copyOut).

// maxGitEntries bounds the .git entries a bind-mounted workspace may hold
// (each costs a few mounts per container): 256, far more than a repository
// with its submodules has. A tree with more is refused in bind mode (copy
// mode has no limit).
const maxGitEntries = 256

// gitEntry is a .git folder or file the workspace held at start.
type gitEntry struct {
	rel string // slash path relative to the mounted folder
	dir bool
}

// gitConfig is a sanitized git config file: where it is and what the
// sandbox sees instead.
type gitConfig struct {
	rel  string
	data []byte
}

// findGit walks dir without following symlinks and returns its .git
// entries (folders and files; one inside another .git folder is the
// outer repository's business and not listed) and the git config files
// inside them that carry credentials, sanitized. A symlink named .git is
// left alone: mounting it would mount what it points to.
func findGit(dir string) ([]gitEntry, []gitConfig, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	var entries []gitEntry
	var configs []gitConfig
	err = fs.WalkDir(root.FS(), ".", func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
				return nil // unreadable: the sandbox user cannot read it either
			}
			return err
		}
		if e.Name() != ".git" || p == "." {
			return nil
		}
		switch {
		case e.IsDir():
			entries = append(entries, gitEntry{rel: p, dir: true})
			cs, err := sanitizedConfigs(root, p)
			if err != nil {
				return err
			}
			configs = append(configs, cs...)
			return fs.SkipDir
		case e.Type().IsRegular():
			entries = append(entries, gitEntry{rel: p})
		}
		return nil
	})
	return entries, configs, err
}

// sanitizedConfigs walks the .git folder gitDir (inside root) for git
// config files (isGitConfigFile; object stores are skipped) and returns
// those that carry credentials, sanitized.
func sanitizedConfigs(root *os.Root, gitDir string) ([]gitConfig, error) {
	var out []gitConfig
	err := fs.WalkDir(root.FS(), gitDir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if p != gitDir && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission)) {
				return nil
			}
			return err
		}
		if e.IsDir() {
			if e.Name() == "objects" && p != gitDir {
				return fs.SkipDir
			}
			return nil
		}
		if !e.Type().IsRegular() || !isGitConfigFile(p) {
			return nil
		}
		b, err := safefile.Read(root, filepath.FromSlash(p), gitConfigMax)
		if err != nil {
			return fmt.Errorf("reading the git config %s: %w", p, err)
		}
		if clean, changed := sanitizeGitConfig(b); changed {
			out = append(out, gitConfig{rel: p, data: clean})
		}
		return nil
	})
	return out, err
}

// scanGit finds the workspace's .git entries and the credentials in their
// configs (bind mode; copy mode sanitizes while copying in, tarTree).
func (d *Docker) scanGit() error {
	if d.wsMode != WorkspaceBind {
		return nil
	}
	entries, configs, err := findGit(d.mountSrc)
	if err != nil {
		return fmt.Errorf("sandbox: docker: looking for the git repositories in %q: %w", d.mountSrc, err)
	}
	if len(entries) > maxGitEntries {
		return fmt.Errorf("sandbox: docker: the workspace %q holds %d .git entries; in bind mode goalrun mounts each read-only and takes at most %d: use --workspace copy", d.mountSrc, len(entries), maxGitEntries)
	}
	d.gitEntries, d.gitConfigs = entries, configs
	owned, err := resolveHostOwned(d.cfg.Workspace, d.mountSrc, d.cfg.HostOwned)
	if err != nil {
		return err
	}
	d.ownedFiles = nil
	for rel := range owned {
		if fi, err := os.Lstat(filepath.Join(d.mountSrc, filepath.FromSlash(rel))); err == nil && fi.Mode().IsRegular() {
			d.ownedFiles = append(d.ownedFiles, rel)
		}
	}
	sort.Strings(d.ownedFiles)
	return nil
}

// gitConfigFiles returns the sanitized configs' contents, in the order
// their mounts name them (g/0, g/1… in the git volume).
func (d *Docker) gitConfigFiles() [][]byte {
	var out [][]byte
	for _, c := range d.gitConfigs {
		out = append(out, c.data)
	}
	return out
}

// gitMounts returns the mounts that keep the workspace's .git entries and
// goalrun's own files (its --output and --events, Config.HostOwned) out of
// the sandbox's reach in bind mode: for the agent container the folders
// above nested .git entries and above goalrun's files over themselves (a
// mount point cannot be renamed or removed), each .git and each of
// goalrun's files read-only, and the sanitized configs read-only over the
// originals; for a check on an overlay view (whose writes are discarded
// anyway) the sanitized configs. gitPath is the sanitized configs' folder
// on the Engine's host.
func (d *Docker) gitMounts(forCheck bool, gitPath string) []mount.Mount {
	if d.wsMode != WorkspaceBind {
		return nil
	}
	var out []mount.Mount
	if !forCheck {
		above := map[string]bool{}
		for _, g := range d.gitEntries {
			for p := path.Dir(g.rel); p != "." && p != "/"; p = path.Dir(p) {
				above[p] = true
			}
		}
		for _, f := range d.ownedFiles {
			for p := path.Dir(f); p != "." && p != "/"; p = path.Dir(p) {
				above[p] = true
			}
		}
		dirs := make([]string, 0, len(above))
		for p := range above {
			dirs = append(dirs, p)
		}
		sort.Strings(dirs)
		for _, p := range dirs {
			out = append(out, mount.Mount{Type: mount.TypeBind, Source: path.Join(d.wsSource, p), Target: path.Join(DockerRoot, p)})
		}
		for _, g := range d.gitEntries {
			out = append(out, mount.Mount{Type: mount.TypeBind, Source: path.Join(d.wsSource, g.rel), Target: path.Join(DockerRoot, g.rel), ReadOnly: true})
		}
		for _, f := range d.ownedFiles {
			out = append(out, mount.Mount{Type: mount.TypeBind, Source: path.Join(d.wsSource, f), Target: path.Join(DockerRoot, f), ReadOnly: true})
		}
	}
	for i, c := range d.gitConfigs {
		out = append(out, mount.Mount{Type: mount.TypeBind, Source: path.Join(gitPath, strconv.Itoa(i)), Target: path.Join(DockerRoot, c.rel), ReadOnly: true})
	}
	return out
}

// gitConfigPath waits until the sanitized configs are in the git volume
// and returns its folder on the Engine's host ("" when there are none).
func (d *Docker) gitConfigPath(ctx context.Context) (string, error) {
	if len(d.gitConfigs) == 0 {
		return "", nil
	}
	select {
	case <-d.views.git:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if d.views.err != nil {
		return "", d.views.err
	}
	d.views.mu.Lock()
	defer d.views.mu.Unlock()
	return d.views.gitPath, nil
}
