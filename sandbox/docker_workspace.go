package sandbox

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/system"

	"github.com/goalrun/goalrun/internal/treecopy"
)

// EngineArchive moves trees in and out of a container as tar archives (the
// workspace in copy mode, the relay, the agent's files, the check views'
// layers) and reads a path's state there.
type EngineArchive interface {
	CopyToContainer(ctx context.Context, container, path string, content io.Reader, options container.CopyToContainerOptions) error
	CopyFromContainer(ctx context.Context, container, srcPath string) (io.ReadCloser, container.PathStat, error)
	ContainerStatPath(ctx context.Context, container, path string) (container.PathStat, error)
}

// engineView says how a path as goalrun sees it reaches the Engine's host.
type engineView struct {
	// local: the Engine runs on goalrun's host and goalrun is not in a
	// container of it, so goalrun's paths are the Engine's paths.
	local bool
	// self is goalrun's own container when goalrun runs in a container of
	// the same Engine (the GitHub container-action case: the host's socket
	// is mounted); paths are translated through its mounts.
	self *container.InspectResponse
}

// cgroupID finds a 64-hex container id in /proc/self/cgroup (cgroup v1
// paths like /docker/<id>, systemd scopes like docker-<id>.scope).
var cgroupID = regexp.MustCompile(`[0-9a-f]{64}`)

// containerEngine is the Engine's containers and the address it is
// reached at (to name it in errors, and to tell a local Engine).
type containerEngine interface {
	EngineContainers
	EngineSystem
}

// detectEngineView finds out whether goalrun runs in a container of the
// Engine (inspecting $HOSTNAME, which Docker sets to the container id's
// first 12 characters, and the id in /proc/self/cgroup) and otherwise
// whether the Engine shares goalrun's filesystem (a Unix socket, or an
// Engine whose name is this host's).
func detectEngineView(ctx context.Context, cli containerEngine, info system.Info, hostname string) engineView {
	var candidates []string
	if len(hostname) >= 12 {
		candidates = append(candidates, hostname)
	}
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		if id := cgroupID.Find(b); id != nil {
			candidates = append(candidates, string(id))
		}
	}
	for _, cand := range candidates {
		c, err := cli.ContainerInspect(ctx, cand)
		if err != nil {
			// Not found (or a host name that is no valid container
			// reference): goalrun is not in a container of this Engine.
			continue
		}
		if c.ContainerJSONBase == nil || !strings.HasPrefix(c.ID, cand) || c.State == nil || !c.State.Running {
			continue
		}
		return engineView{self: &c}
	}
	local := strings.HasPrefix(cli.DaemonHost(), "unix://") || (info.Name != "" && info.Name == hostname)
	return engineView{local: local}
}

// hostPath translates p (absolute, symlinks resolved, as goalrun sees it)
// into the path the Engine's host knows; ok is false when the Engine cannot
// see p. writable requires a writable mount in the container case.
func (v engineView) hostPath(p string, writable bool) (string, bool) {
	if v.self == nil {
		if !v.local {
			return "", false
		}
		return p, true
	}
	best := -1
	for i, m := range v.self.Mounts {
		if m.Destination == p || isUnder(p, m.Destination) {
			if best < 0 || len(m.Destination) > len(v.self.Mounts[best].Destination) {
				best = i
			}
		}
	}
	if best < 0 {
		return "", false
	}
	m := v.self.Mounts[best]
	if (m.Type != mount.TypeBind && m.Type != mount.TypeVolume) || m.Source == "" || (writable && !m.RW) {
		return "", false
	}
	return m.Source + strings.TrimPrefix(p, m.Destination), true
}

// verifyBind checks that the agent container sees the workspace goalrun
// sees: same permissions and modification time of the root folder. A
// mismatch means the Engine resolved the path on another filesystem (goalrun
// in a container that could not be recognized); copy mode is then the way.
func (d *Docker) verifyBind(ctx context.Context) error {
	st, err := os.Stat(d.mountSrc)
	if err != nil {
		return fmt.Errorf("sandbox: docker: workspace %q: %w", d.mountSrc, err)
	}
	ps, err := d.cli.ContainerStatPath(ctx, d.agentID, DockerRoot)
	if err != nil {
		return fmt.Errorf("sandbox: docker: checking the bind-mounted workspace: %w", err)
	}
	if !ps.Mtime.Equal(st.ModTime()) || ps.Mode.Perm() != st.Mode().Perm() {
		return fmt.Errorf("sandbox: docker: the Engine at %s mounted a different folder at %s than goalrun's workspace %q (modified %s vs %s); goalrun cannot share its filesystem with this Engine: use --workspace copy",
			d.cli.DaemonHost(), DockerRoot, d.mountSrc, ps.Mtime, st.ModTime())
	}
	return nil
}

// repoRootAbove returns the nearest folder above ws (not ws itself) that
// holds a .git entry (a folder, or a file for worktrees and submodules),
// or "" when ws is a repository root itself or in none. It only looks
// (Lstat); it never runs git.
func repoRootAbove(ws string) string {
	if _, err := os.Lstat(filepath.Join(ws, ".git")); err == nil {
		return ""
	}
	for dir := filepath.Dir(ws); dir != "/" && dir != "."; dir = filepath.Dir(dir) {
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			return dir
		}
	}
	return ""
}

// dirExists reports whether rel is a folder inside the workspace, without
// following symlinks out of it.
func dirExists(workspace, rel string) error {
	root, err := os.OpenRoot(workspace)
	if err != nil {
		return err
	}
	defer root.Close()
	st, err := root.Stat(filepath.FromSlash(rel))
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return errNotDir
	}
	return nil
}

// ownedPaths is the set of host-owned paths (Config.HostOwned) as slash
// paths relative to the mounted folder (mountSrc).
type ownedPaths map[string]bool

// resolveHostOwned turns Config.HostOwned (relative to the workspace ws)
// into paths relative to the mounted folder mountSrc (ws, or a repository
// root above it), dropping those outside it. It fails for an absolute path
// and for one that names the mounted folder, the workspace or a folder
// holding the workspace: the agent's work would never come back.
func resolveHostOwned(ws, mountSrc string, rels []string) (ownedPaths, error) {
	owned := ownedPaths{}
	for _, r := range rels {
		if r == "" || path.IsAbs(r) || filepath.IsAbs(r) {
			return nil, fmt.Errorf("sandbox: docker: host-owned path %q (Config.HostOwned) must be a path relative to the workspace %s", r, ws)
		}
		abs := filepath.Join(ws, filepath.FromSlash(r))
		if abs == ws || isUnder(ws, abs) || abs == mountSrc {
			return nil, fmt.Errorf("sandbox: docker: host-owned path %q (Config.HostOwned) names the workspace %s or a folder holding it; name goalrun's own files only (--output, --events)", r, ws)
		}
		rel, err := filepath.Rel(mountSrc, abs)
		if err != nil || !filepath.IsLocal(rel) {
			continue // outside the mount: the sandbox never has it
		}
		owned[filepath.ToSlash(rel)] = true
	}
	return owned, nil
}

// covers reports whether rel (a slash path relative to the mounted folder)
// is a host-owned path or lies under one.
func (o ownedPaths) covers(rel string) bool {
	for p := range o {
		if rel == p || strings.HasPrefix(rel, p+"/") {
			return true
		}
	}
	return false
}

// holds reports whether rel is a folder above a host-owned path.
func (o ownedPaths) holds(rel string) bool {
	for p := range o {
		if strings.HasPrefix(p, rel+"/") {
			return true
		}
	}
	return false
}

// copyIn puts the host workspace into the workspace volume through the
// (created, not yet started) agent container. Files are owned by the
// sandbox user; symlinks are copied as symlinks, never followed; sockets,
// devices and fifos are skipped, and so are the host-owned paths
// (Config.HostOwned); git configs are sanitized. The .git entries it
// copies are recorded (gitEntries): copyOut never writes or removes them.
func (d *Docker) copyIn(ctx context.Context) error {
	owned, err := resolveHostOwned(d.cfg.Workspace, d.mountSrc, d.cfg.HostOwned)
	if err != nil {
		return err
	}
	pr, pw := io.Pipe()
	var gits []gitEntry
	walked := make(chan struct{})
	go func() {
		defer close(walked)
		pw.CloseWithError(tarTreeGit(d.mountSrc, d.uid, d.gid, pw, owned, func(g gitEntry) { gits = append(gits, g) }))
	}()
	err = d.cli.CopyToContainer(ctx, d.agentID, DockerRoot, pr, container.CopyToContainerOptions{})
	pr.CloseWithError(err)
	<-walked
	d.gitEntries = gits
	if err != nil {
		return fmt.Errorf("sandbox: docker: copying the workspace %q into the sandbox: %w", d.mountSrc, err)
	}
	return nil
}

// chownVolumeRoot gives the workspace volume's root folder to the sandbox
// user. The Engine's archive API never changes the owner of the folder it
// extracts into, and the sandbox's own root has no capabilities (a
// privileged exec is refused: the bounding set is empty), so a throwaway
// container does it: root with CAP_CHOWN only, no network, read-only root,
// running chown on those folders: the image's, or the host's through the
// extra mounts (HostTools' system folders) when the image has no programs.
//
// The deps volume's root (Config.Setup) is given to the sandbox user by the
// same container.
func (d *Docker) chownVolumeRoot(ctx context.Context) error {
	var mounts []mount.Mount
	var targets []string
	if d.wsMode == WorkspaceCopy {
		mounts, targets = append(mounts, d.workspaceMount()), append(targets, DockerRoot)
	}
	if deps := d.depsMount(false); deps != nil && !d.depsReused() {
		mounts, targets = append(mounts, deps...), append(targets, DepsDir)
	}
	hc := d.hostConfig(network.NetworkNone, append(mounts, d.extraMnts...))
	hc.CapAdd = []string{"CHOWN"}
	cfg := &container.Config{
		Image:      d.imageID,
		Entrypoint: []string{},
		Cmd:        append([]string{"chown", fmt.Sprintf("%d:%d", d.uid, d.gid)}, targets...),
		User:       "0:0",
		Labels:     d.labels("chown"),
	}
	// Recorded for Close as well: Close removes it when this removal
	// could not (the Engine went away for a moment).
	var refs []string
	defer func() {
		cctx, cancel := bg(ctx)
		defer cancel()
		for _, ref := range refs {
			_ = d.cli.ContainerRemove(cctx, ref, container.RemoveOptions{Force: true})
		}
	}()
	id, err := d.createContainer(ctx, cfg, hc, "goalrun-"+d.cfg.RunID+"-chown", func(ref string) {
		refs = append(refs, ref)
		d.track(func(c *createdSet) { c.containers = append(c.containers, ref) })
	})
	if err != nil {
		return fmt.Errorf("sandbox: docker: creating the container that prepares the workspace volume: %w", err)
	}
	waitC, errC := d.cli.ContainerWait(ctx, id, container.WaitConditionNextExit)
	if err := d.cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		return fmt.Errorf("sandbox: docker: preparing the workspace volume (the image needs chown): %w", err)
	}
	select {
	case st := <-waitC:
		if st.StatusCode != 0 {
			return fmt.Errorf("sandbox: docker: preparing the workspace volume: chown %d:%d %s exited %d", d.uid, d.gid, strings.Join(targets, " "), st.StatusCode)
		}
	case err := <-errC:
		return fmt.Errorf("sandbox: docker: preparing the workspace volume: %w", err)
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// tarTree writes dir as a tar stream: "./" first (so the volume's root gets
// the owner), then every entry in lexical order, names relative to dir,
// leaving out what owned covers. Git config files (isGitConfigFile) go in
// sanitized: the sandbox never gets the credentials a checkout left in them.
func tarTree(dir string, uid, gid int, w io.Writer, owned ownedPaths) error {
	return tarTreeGit(dir, uid, gid, w, owned, nil)
}

// tarTreeGit is tarTree that also hands every .git folder or file it
// writes (not those inside another .git folder) to onGit, when not nil.
func tarTreeGit(dir string, uid, gid int, w io.Writer, owned ownedPaths, onGit func(gitEntry)) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	tw := tar.NewWriter(bw)
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		if owned.covers(name) {
			if e.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: name, Mode: int64(info.Mode().Perm()), Uid: uid, Gid: gid, ModTime: info.ModTime(), Format: tar.FormatPAX}
		switch {
		case info.IsDir():
			hdr.Typeflag = tar.TypeDir
			if name == "." {
				hdr.Name = "./"
			} else {
				hdr.Name += "/"
			}
		case info.Mode().IsRegular() && IsCopyTemp(e.Name()):
			// A file a copy-out was writing: never the workspace's own;
			// one a killed goalrun left is removed.
			if StaleCopyTemp(e.Name()) {
				_ = os.Remove(p)
			}
			return nil
		case info.Mode().IsRegular():
			hdr.Typeflag = tar.TypeReg
			hdr.Size = info.Size()
			if isGitConfigFile(name) {
				return writeGitConfig(tw, hdr, p)
			}
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
		default:
			return nil // sockets, devices, fifos stay behind
		}
		if onGit != nil && e.Name() == ".git" && name != "." && !isGitPath(path.Dir(name)) && hdr.Typeflag != tar.TypeSymlink {
			onGit(gitEntry{rel: name, dir: info.IsDir()})
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			n, err := io.Copy(tw, io.LimitReader(f, hdr.Size))
			f.Close()
			if err != nil {
				return err
			}
			if n != hdr.Size {
				return fmt.Errorf("%s shrank while it was copied (%d of %d bytes)", p, n, hdr.Size)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

// copyRelayIn copies the relay binary into the relay volume, owned by root
// and read-only, so the sandbox user cannot replace it.
func (d *Docker) copyRelayIn(ctx context.Context) error {
	f, err := os.Open(d.cfg.RelayBinary)
	if err != nil {
		return fmt.Errorf("sandbox: docker: relay binary: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("sandbox: docker: relay binary: %w", err)
	}
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := tw.WriteHeader(&tar.Header{Name: path.Base(relayPath), Typeflag: tar.TypeReg, Mode: 0o555, Size: st.Size(), ModTime: st.ModTime()})
		if err == nil {
			_, err = io.Copy(tw, f)
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	err = d.cli.CopyToContainer(ctx, d.agentID, relayDir, pr, container.CopyToContainerOptions{})
	pr.CloseWithError(err)
	if err != nil {
		return fmt.Errorf("sandbox: docker: copying the relay into the sandbox: %w", err)
	}
	return nil
}

// copyOut brings the sandbox's tree back into the host workspace after an
// agent step (copy mode). Nothing at or under a .git path is ever written
// or removed: the host's .git folders and files stay as they were (and the
// folders above them stay folders), and a .git the agent made stays in the
// sandbox. The tree is hostile: every write goes through an
// os.Root on the workspace, so nothing lands outside it and no symlink is
// followed; symlinks are recreated as symlinks; only regular files,
// folders, symlinks and hardlinks inside the tree are taken, with
// permission bits only (no setuid, setgid or sticky bits); files that did
// not change are left alone, and host files the sandbox no longer has are
// removed. The host-owned paths (Config.HostOwned) are goalrun's: nothing
// at or under them is written or removed, and the folders above them stay
// folders.
func (d *Docker) copyOut(ctx context.Context) error {
	d.copyOutMu.Lock()
	defer d.copyOutMu.Unlock()
	owned, err := resolveHostOwned(d.cfg.Workspace, d.mountSrc, d.cfg.HostOwned)
	if err != nil {
		return err
	}
	for _, g := range d.gitEntries {
		owned[g.rel] = true
	}
	rc, _, err := d.cli.CopyFromContainer(ctx, d.agentID, DockerRoot+"/.")
	if err != nil {
		return fmt.Errorf("sandbox: docker: copying the workspace out of the sandbox: %w", err)
	}
	defer rc.Close()
	root, err := os.OpenRoot(d.mountSrc)
	if err != nil {
		return fmt.Errorf("sandbox: docker: workspace %q: %w", d.mountSrc, err)
	}
	defer root.Close()
	seen, err := applyTar(root, tar.NewReader(bufio.NewReaderSize(rc, 256<<10)), owned)
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (the copy-out is bounded by the agent step's timeout, and by %s after an interrupt)", err, apiTimeout)
		}
		return fmt.Errorf("sandbox: docker: copying the workspace out of the sandbox into %q stopped part way, so the host workspace may hold only some of the agent's changes: %w", d.mountSrc, err)
	}
	if err := removeUnseen(root, seen, owned); err != nil {
		return fmt.Errorf("sandbox: docker: removing files the sandbox deleted from %q: %w", d.mountSrc, err)
	}
	return nil
}

// copyOutOptions is how copyOut writes the sandbox's tree into the
// mounted folder: names may carry the workspace's own name
// (DockerRoot); .git paths and the host-owned ones (owned, nil: none) are
// the host's; temporary files carry this process's owner (copyTempOwner).
func copyOutOptions(owned ownedPaths) treecopy.Options {
	return treecopy.Options{
		RootName: path.Base(DockerRoot),
		Kept:     func(rel string) bool { return isGitPath(rel) || owned.covers(rel) },
		Holds:    owned.holds,
		Owner:    copyTempOwner(),
	}
}

// applyTar writes the sandbox's archive tr under root as copyOut does
// (treecopy.Apply with copyOutOptions) and returns the paths it holds.
func applyTar(root *os.Root, tr *tar.Reader, owned ownedPaths) (map[string]bool, error) {
	return treecopy.Apply(root, tr, copyOutOptions(owned))
}

// removeUnseen removes what the workspace holds but the sandbox's tree no
// longer does, except .git paths, what owned covers and the folders above
// it (treecopy.RemoveUnseen with copyOutOptions).
func removeUnseen(root *os.Root, seen map[string]bool, owned ownedPaths) error {
	return treecopy.RemoveUnseen(root, seen, copyOutOptions(owned))
}

// copyTempOwner is this process's "<pid>-<start>-<owner host>", the owner
// copy-out's temporary names carry (treecopy.TempName; see ownerLabel).
var copyTempOwner = sync.OnceValue(func() string {
	host, _ := os.Hostname()
	if h := os.Getenv("HOSTNAME"); h != "" {
		host = h
	}
	pid := os.Getpid()
	return fmt.Sprintf("%d-%d-%s", pid, procStart(pid), ownerHost(host))
})

// IsCopyTemp reports whether base is the name of a file copy-out writes
// before renaming it into place (any goalrun's, live or not).
func IsCopyTemp(base string) bool { return treecopy.IsTemp(base) }

// StaleCopyTemp reports whether base names a file copy-out was writing
// when its goalrun process (on this host, in this PID namespace) ended
// before renaming it: a part of a file nobody will finish.
func StaleCopyTemp(base string) bool {
	pid, start, owner, ok := treecopy.TempOwner(base)
	if !ok {
		return false
	}
	host, _ := os.Hostname()
	if h := os.Getenv("HOSTNAME"); h != "" {
		host = h
	}
	return ownerState(owner+"/"+pid+"/"+start, ownerHost(host)) == ownerDead
}

// specialBits are the mode bits that make a program run as its owner or
// group: setuid and setgid.
const specialBits = fs.ModeSetuid | fs.ModeSetgid

// fileKey identifies one version of a file: its inode, size and
// modification time. A file replaced, rewritten or touched gets another.
type fileKey struct {
	dev, ino uint64
	size     int64
	mtime    int64 // nanoseconds
}

// keyOf returns info's fileKey (zero where the platform has no inode).
func keyOf(info fs.FileInfo) fileKey {
	k := fileKey{size: info.Size(), mtime: info.ModTime().UnixNano()}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		k.dev, k.ino = uint64(st.Dev), st.Ino
	}
	return k
}

// specialBitFiles returns the regular files and folders under dir that
// carry a setuid or setgid bit, by path (slash-separated, relative) with
// their fileKey. Symlinks are not followed. With fix, a folder the owner
// cannot read or enter (the agent can make one mode 0111 to hide what is
// inside) gets the owner's read and search bits added and is walked; a
// folder that still cannot be read is an error. Without fix such folders
// are skipped. Errors come from reading dir.
func specialBitFiles(dir string, fix bool) (map[string]fileKey, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	found := map[string]fileKey{}
	fsys := root.FS()
	var walk fs.WalkDirFunc
	walk = func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if !errors.Is(err, fs.ErrPermission) {
				return err
			}
			if !fix || e == nil || !e.IsDir() {
				return nil
			}
			info, ierr := root.Lstat(filepath.FromSlash(p))
			if ierr != nil {
				return nil
			}
			if cerr := root.Chmod(filepath.FromSlash(p), info.Mode()&(fs.ModePerm|specialBits|fs.ModeSticky)|0o500); cerr != nil {
				return fmt.Errorf("folder %q cannot be read (%v) and its mode cannot be changed: %w", p, err, cerr)
			}
			if werr := fs.WalkDir(fsys, p, func(q string, e fs.DirEntry, err error) error {
				if q == p && err != nil {
					return fmt.Errorf("folder %q cannot be read even after adding the owner's read bit: %w", p, err)
				}
				return walk(q, e, err)
			}); werr != nil {
				return werr
			}
			return fs.SkipDir
		}
		if e.Type()&(fs.ModeSymlink|fs.ModeNamedPipe|fs.ModeSocket|fs.ModeDevice|fs.ModeCharDevice) != 0 {
			return nil
		}
		info, err := e.Info()
		if err == nil && info.Mode()&specialBits != 0 {
			found[p] = keyOf(info)
		}
		return nil
	}
	err = fs.WalkDir(fsys, ".", walk)
	return found, err
}

// specialKeys returns the set of fileKeys of found.
func specialKeys(found map[string]fileKey) map[fileKey]bool {
	keys := make(map[fileKey]bool, len(found))
	for _, k := range found {
		keys[k] = true
	}
	return keys
}

// bindSweep is the state of the setuid/setgid sweep (sweepSpecialBits).
type bindSweep struct {
	// mu makes sweeps one at a time (after an agent step, when the agent
	// stops).
	mu sync.Mutex
	// keep holds the files and folders (by fileKey) that had a setuid
	// or setgid bit before the agent ran; the sweep leaves them,
	// unchanged. Written once at start, before any step.
	keep map[fileKey]bool
}

// sweepSpecialBits removes, in bind mode, the setuid and setgid bits the
// agent set on files and folders of the host workspace: every such file
// or folder that is not, unchanged, one the workspace had before the agent
// ran (bindSweep.keep: same inode, size and modification time, under any
// name — a hard link to the host's own setuid program is that program). A
// file the agent replaced or rewrote under a kept name loses its bits. The
// agent runs as the workspace's owner, so a setuid program it leaves would
// run as that owner for any local user who can reach the tree; copy mode
// never brings the bits back (hostPerm). Folders the agent made unreadable
// are opened to their owner to be swept. Errors name the path that could
// not be read or changed.
func (d *Docker) sweepSpecialBits() error {
	if d.wsMode != WorkspaceBind || d.mountSrc == "" {
		return nil
	}
	d.sweep.mu.Lock()
	defer d.sweep.mu.Unlock()
	found, err := specialBitFiles(d.mountSrc, true)
	if err != nil {
		return fmt.Errorf("sandbox: docker: looking for setuid and setgid bits the agent set in %q: %w", d.mountSrc, err)
	}
	var strip []string
	for p, k := range found {
		if !d.sweep.keep[k] {
			strip = append(strip, p)
		}
	}
	if len(strip) == 0 {
		return nil
	}
	sort.Strings(strip)
	root, err := os.OpenRoot(d.mountSrc)
	if err != nil {
		return fmt.Errorf("sandbox: docker: workspace %q: %w", d.mountSrc, err)
	}
	defer root.Close()
	for _, p := range strip {
		name := filepath.FromSlash(p)
		st, err := root.Lstat(name)
		if err != nil || st.Mode()&fs.ModeSymlink != 0 {
			continue // gone, or replaced by a link: nothing to clear
		}
		if err := root.Chmod(name, st.Mode()&(fs.ModePerm|fs.ModeSticky)); err != nil {
			return fmt.Errorf("sandbox: docker: removing the setuid/setgid bit the agent set on %q in %q: %w", p, d.mountSrc, err)
		}
	}
	return nil
}

// writeGitConfig writes the git config file p (its header hdr) into tw
// sanitized (sanitizeGitConfig).
func writeGitConfig(tw *tar.Writer, hdr *tar.Header, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	b, err := io.ReadAll(io.LimitReader(f, gitConfigMax+1))
	f.Close()
	if err != nil {
		return err
	}
	if len(b) > gitConfigMax {
		return fmt.Errorf("the git config %s is larger than %d bytes", p, gitConfigMax)
	}
	b, _ = sanitizeGitConfig(b)
	hdr.Size = int64(len(b))
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err = tw.Write(b)
	return err
}
