package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The check views' folders on the host (docs/check-view.md).
//
// In bind mode the Engine sees goalrun's filesystem, so goalrun makes the
// views' upper/ and work/ folders and writes the sanitized git configs
// itself, in a per-run folder of its cache folder (viewsBase): no volume,
// no container and no archive on the way to a check. The Engine's volumes
// hold them when goalrun cannot (copy mode, another user's workspace, a
// cache folder the Engine cannot see or on overlayfs, or the overlay would
// not mount on it).

// viewsDirName is the folder in goalrun's cache folder that holds the runs'
// view folders. No mount may show it (runKeepOuts); Reap removes what dead
// runs left in it.
const viewsDirName = "views"

// overlayfsMagic is statfs's f_type of an overlayfs (OVERLAYFS_SUPER_MAGIC,
// include/uapi/linux/magic.h): an overlay's upper folder cannot lie on one.
const overlayfsMagic = 0x794c7630

// viewsBase returns the folder the runs' view folders are made in: "views"
// in goalrun's folder of the user's cache folder (XDG_CACHE_HOME, else
// HOME/.cache), or "" when neither is set to an absolute path.
func viewsBase(lookup func(string) (string, bool)) string {
	cache, _ := lookup("XDG_CACHE_HOME")
	if !path.IsAbs(cache) {
		home, _ := lookup("HOME")
		if !path.IsAbs(home) {
			return ""
		}
		cache = path.Join(home, ".cache")
	}
	return path.Join(cache, "goalrun", viewsDirName)
}

// viewsHostBase returns where this run's view folder may be made (as
// goalrun and as the Engine's host name it), or "" when the Engine's
// volumes must hold the views: not bind mode, a sandbox user goalrun cannot
// give files to, or a base folder the Engine cannot see, on overlayfs, with
// characters overlay options cannot carry, overlapping the tree, or that
// another user could rename or fill (privateFolder).
func (d *Docker) viewsHostBase() (local, host string) {
	if d.wsMode != WorkspaceBind {
		return "", ""
	}
	if e := os.Geteuid(); e != 0 && (e != d.uid || os.Getegid() != d.gid) {
		return "", ""
	}
	base := viewsBase(d.opts.lookupEnv)
	if base == "" || os.MkdirAll(base, 0o700) != nil {
		return "", ""
	}
	real, err := filepath.EvalSymlinks(base)
	if err != nil || strings.ContainsAny(real, overlayUnsafe) || privateFolder(real) != nil {
		return "", ""
	}
	var st syscall.Statfs_t
	if syscall.Statfs(real, &st) != nil || int64(st.Type) == overlayfsMagic {
		return "", ""
	}
	h, ok := d.view.hostPath(real, true)
	if !ok || strings.ContainsAny(h, overlayUnsafe) {
		return "", ""
	}
	for _, tree := range []string{d.wsSource, d.mountSrc} {
		if tree != "" && (h == tree || isUnder(h, tree) || isUnder(tree, h) || real == tree || isUnder(real, tree) || isUnder(tree, real)) {
			return "", ""
		}
	}
	return real, h
}

// makeViewsHostDir makes the run's view folder when viewsHostBase allows
// one (0700, with an owner file for Reap); Close removes it last.
func (d *Docker) makeViewsHostDir() error {
	base, hostBase := d.viewsHostBase()
	if base == "" {
		return nil
	}
	dir, err := os.MkdirTemp(base, "goalrun-views-")
	if err != nil {
		return nil // the Engine's volumes instead
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), ownerFileContent(d.owner, d.expires), 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return nil
	}
	v := d.views
	v.hostLocal, v.hostEngine, v.hostDirs = dir, path.Join(hostBase, filepath.Base(dir)), true
	return nil
}

// prepareHostViewDirs makes views first…first+n-1's folders in the run's
// view folder: v<i>/upper (the sandbox user's, with the tree root's mode
// and time) and v<i>/work.
func (d *Docker) prepareHostViewDirs(first, n int) ([]viewDirs, error) {
	v := d.views
	dirs := make([]viewDirs, 0, n)
	for i := range n {
		name := "v" + strconv.Itoa(first+i)
		local := filepath.Join(v.hostLocal, name)
		upper := filepath.Join(local, "upper")
		err := os.Mkdir(local, 0o700)
		if err == nil {
			err = os.Mkdir(upper, 0o700)
		}
		if err == nil {
			err = os.Mkdir(filepath.Join(local, "work"), 0o700)
		}
		if err == nil && os.Geteuid() == 0 {
			err = os.Lchown(upper, d.uid, d.gid)
		}
		if err == nil {
			err = os.Chmod(upper, v.rootMode)
		}
		if err == nil && !v.rootTime.IsZero() {
			err = os.Chtimes(upper, v.rootTime, v.rootTime)
		}
		if err != nil {
			_ = removeTree(local)
			for _, dv := range dirs {
				_ = removeTree(dv.local)
			}
			return nil, fmt.Errorf("sandbox: docker: making the folders of the check views in %s: %w", v.hostLocal, err)
		}
		dirs = append(dirs, viewDirs{n: first + i, path: path.Join(v.hostEngine, name), local: local})
	}
	return dirs, nil
}

// writeHostGitConfigs writes the sanitized git configs as g/0, g/1… (0444)
// in the run's view folder and records the folder (views.gitPath).
func (d *Docker) writeHostGitConfigs(files [][]byte) error {
	v := d.views
	g := filepath.Join(v.hostLocal, "g")
	if err := os.Mkdir(g, 0o700); err != nil {
		return fmt.Errorf("sandbox: docker: writing the sanitized git configs: %w", err)
	}
	for i, f := range files {
		if err := os.WriteFile(filepath.Join(g, strconv.Itoa(i)), f, 0o444); err != nil {
			return fmt.Errorf("sandbox: docker: writing the sanitized git configs: %w", err)
		}
	}
	v.mu.Lock()
	v.gitPath = path.Join(v.hostEngine, "g")
	v.mu.Unlock()
	return nil
}

// removeTree removes dir and what it holds, also folders a step left
// without write or search permission for their owner (each is given
// 0700 first) and trees deeper than this process may hold files open
// (os.RemoveAll keeps a folder open per level); links are never followed.
// Nothing may be writing in dir.
func removeTree(dir string) error {
	if dir == "" {
		return nil
	}
	if os.RemoveAll(dir) == nil {
		return nil
	}
	return removeTreeAt(dir)
}

// removeTreeDown, when set (tests), is called each time removeTreeAt goes
// down a folder, with the new depth.
var removeTreeDown func(depth int)

// removeTreeAt removes dir depth first holding one folder open at a time:
// it goes down into the first folder it cannot remove and back up through
// "..", so neither the depth nor PATH_MAX limits it. Each ".." must be the
// folder it came down from (device and inode): a folder moved meanwhile
// ends the removal with an error, never a removal outside dir.
func removeTreeAt(dir string) error {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Open(dir, flags, 0)
	if errors.Is(err, unix.EACCES) {
		if fi, lerr := os.Lstat(dir); lerr == nil && fi.IsDir() {
			_ = os.Chmod(dir, 0o700)
			fd, err = unix.Open(dir, flags, 0)
		}
	}
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("removing %s: %w", dir, err)
	}
	type folderID struct{ dev, ino uint64 }
	var above []folderID // the folders gone down from, dir first
	id := func(fd int) (folderID, error) {
		var st unix.Stat_t
		err := unix.Fstat(fd, &st)
		return folderID{uint64(st.Dev), st.Ino}, err
	}
	depth := 0
	for {
		_ = unix.Fchmod(fd, 0o700)
		f := os.NewFile(uintptr(fd), dir)
		names, err := f.Readdirnames(-1)
		if err != nil {
			f.Close()
			return fmt.Errorf("removing %s (%d folders down): %w", dir, depth, err)
		}
		down := -1
		for _, n := range names {
			err := unix.Unlinkat(fd, n, 0)
			if err == nil || errors.Is(err, unix.ENOENT) {
				continue
			}
			if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
				f.Close()
				return fmt.Errorf("removing %s (%d folders down): %s: %w", dir, depth, n, err)
			}
			err = unix.Unlinkat(fd, n, unix.AT_REMOVEDIR)
			if err == nil {
				continue
			}
			if !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EEXIST) {
				f.Close()
				return fmt.Errorf("removing %s (%d folders down): %s: %w", dir, depth, n, err)
			}
			_ = unix.Fchmodat(fd, n, 0o700, 0) // a folder (rmdir said so)
			if down, err = unix.Openat(fd, n, flags, 0); err != nil {
				f.Close()
				return fmt.Errorf("removing %s (%d folders down): %s: %w", dir, depth, n, err)
			}
			break
		}
		switch {
		case down >= 0:
			here, err := id(fd)
			f.Close()
			if err != nil {
				unix.Close(down)
				return fmt.Errorf("removing %s (%d folders down): %w", dir, depth, err)
			}
			above = append(above, here)
			fd, depth = down, depth+1
			if removeTreeDown != nil {
				removeTreeDown(depth)
			}
		case depth == 0:
			f.Close()
			return os.Remove(dir)
		default:
			up, err := unix.Openat(fd, "..", flags, 0)
			f.Close()
			if err != nil {
				return fmt.Errorf("removing %s (%d folders down): ..: %w", dir, depth, err)
			}
			if got, err := id(up); err != nil || got != above[len(above)-1] {
				unix.Close(up)
				return fmt.Errorf("removing %s (%d folders down): a folder was moved during the removal", dir, depth)
			}
			above = above[:len(above)-1]
			fd, depth = up, depth-1
		}
	}
}

// errNotPrivate is privateFolder's error for a folder that is not
// goalrun's own: not a folder, another user's, or one another user could
// rename or fill.
var errNotPrivate = errors.New("not goalrun's own")

// privateFolder reports whether dir (a path without links: EvalSymlinks's
// answer) is a folder only this process's user can change: dir is owned
// by it and writable by no one else, and each folder above it is owned by
// it or root and writable by no one else, or sticky (/tmp: others may
// not rename what they do not own). Else another user could rename dir or
// one above it and put a link in its place between goalrun's steps, and
// goalrun (and the Engine, which mounts the check views' folders as root)
// would write where that user chose.
func privateFolder(dir string) error {
	me := uint32(os.Geteuid())
	for p := dir; ; p = filepath.Dir(p) {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
			return fmt.Errorf("%s: %w (not a folder)", p, errNotPrivate)
		}
		if st.Uid != me && (p == dir || st.Uid != 0) {
			return fmt.Errorf("%s: %w (owned by uid %d)", p, errNotPrivate, st.Uid)
		}
		if st.Mode&0o022 != 0 && (p == dir || st.Mode&syscall.S_ISVTX == 0) {
			return fmt.Errorf("%s: %w (writable by others, mode %o)", p, errNotPrivate, st.Mode&0o7777)
		}
		if up := filepath.Dir(p); up == p {
			return nil
		}
	}
}
