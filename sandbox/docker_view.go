package sandbox

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/errdefs"

	"github.com/goalrun/goalrun/internal/treecopy"
)

// The check's view of the workspace (docs/check-view.md).
//
// Every check step runs on a copy-on-write view of the agent's frozen tree
// whose writes are discarded: a volume of the Engine's local driver with
// type overlay, lowerdir the tree as the Engine's host sees it (bind mode:
// the bind source; copy mode: the workspace volume's folder), below it the
// extra layers (the setup step's kept outputs), and upperdir/workdir fresh
// folders goalrun makes in a per-run folder of its cache folder (bind mode,
// docker_view_host.go) or in a per-check plain volume. The plain volumes are
// prepared in batches by a container that is created and never started: the
// Engine's archive API writes the folders into its volumes with the sandbox
// user as owner (a tar header's uid/gid is kept), so neither a program in the
// image nor a capability is needed. When the Engine cannot mount an overlay
// volume (rootless Engines, no overlayfs, volumes that live on overlayfs
// themselves) the view is a snapshot copy of the tree into the plain
// volume instead (mounted through a bind volume, so its root is the
// sandbox user's), filled before the check starts: slower, same
// guarantees. Posture.CheckView says which.

// Values of Posture.CheckView.
const (
	// CheckViewOverlay: checks run on an overlay of the tree; their writes
	// go to a per-check upper folder that is thrown away.
	CheckViewOverlay = "overlay"
	// CheckViewCopy: checks run on a per-check snapshot copy of the tree,
	// thrown away after the check (the Engine could not mount an overlay).
	CheckViewCopy = "copy"
	// CheckViewWorkspace: checks run in the workspace itself and what they
	// write stays (the local sandbox).
	CheckViewWorkspace = "workspace"
)

// viewBatch is how many views' folders one preparation makes; the next
// batch is prepared in the background when one prepared view is left. The
// first batch at start holds only what a run whose check already passes
// needs (firstViewBatch): the rest is prepared when the first agent step
// ends (viewsAhead), off the way to check #0.
const viewBatch = 4

// mountDataMax is the longest option string an overlay mount takes: the
// kernel copies a mount's data as one page (copy_mount_options, PAGE_SIZE:
// 4096 bytes on amd64 and arm64), terminator included. Longer (very deep
// workspace paths, many layers) means the copy view.
const mountDataMax = 4095

// overlayUnsafe are the characters overlayfs's option parser gives a
// meaning inside lowerdir/upperdir/workdir (":" separates layers, ","
// options, "\" escapes). A path holding one gets the copy view.
const overlayUnsafe = ":,\\"

// viewDirs is one prepared pair of folders: upper/ (owned by the sandbox
// user, with the tree root's mode) and work/ (the overlay's work folder),
// in a plain volume, or in a folder goalrun made on the host (local).
type viewDirs struct {
	n      int
	volume string // the plain volume ("" for a folder goalrun made)
	path   string // the folder on the Engine's host
	local  string // the folder as goalrun names it ("" in a volume)
}

func (v viewDirs) upper() string { return path.Join(v.path, "upper") }
func (v viewDirs) work() string  { return path.Join(v.path, "work") }

// viewLayer is a folder on the Engine's host that views show below the
// tree (the setup step's kept outputs), with the volume that holds it.
// base, for a layer made on a copy view, holds the paths the copy had
// before the step wrote (the tree then): a copy view shows only the
// layer's other paths, as an overlay shows only what the step wrote.
type viewLayer struct {
	volume string // "" for a folder goalrun made on the host
	path   string
	base   map[string]bool
}

// checkView is one view, mounted at DockerRoot by one container.
type checkView struct {
	dirs   viewDirs
	volume string // the view's own volume: overlay, or a bind of dirs.upper() (copy)
	copy   bool   // a snapshot copy: fill it before the container starts (fillCopyView)
	keep   bool   // dirs is kept until Close (its upper becomes a layer)
	layers []viewLayer
	base   map[string]bool // a kept copy view: the paths of the tree copied into it
}

// mount is the view as a container mounts it at DockerRoot (NoCopy: the
// image's own files at DockerRoot never enter it).
func (c *checkView) mount() mount.Mount {
	return mount.Mount{Type: mount.TypeVolume, Source: c.volume, Target: DockerRoot, VolumeOptions: &mount.VolumeOptions{NoCopy: true}}
}

// layer returns what the view's container wrote (overlay: its upper
// folder; copy: the whole copy), to be shown below the tree by later views
// (setViewLayer). Only a view opened with keep may be used so.
func (c *checkView) layer() viewLayer {
	return viewLayer{volume: c.dirs.volume, path: c.dirs.upper(), base: c.base}
}

// views prepares and hands out the run's check views.
type views struct {
	ready chan struct{} // closed when the first batch and the overlay probe are done
	git   chan struct{} // closed when the sanitized git configs are in place (or the first batch failed)
	err   error         // why the first batch failed; read after ready or git

	rootMode os.FileMode // the tree root's permission bits (the view root gets them)
	rootTime time.Time

	mu       sync.Mutex
	mode     string      // CheckViewOverlay or CheckViewCopy, after ready
	why      string      // why the copy view was chosen
	lower    string      // the tree on the Engine's host
	layers   []viewLayer // below the tree, topmost first
	free     []viewDirs
	next     int           // number of the next plain volume
	batch    chan struct{} // a running batch, closed when it ends
	batchErr error
	gitPath  string            // the folder of the sanitized git configs on the Engine's host
	holders  map[string]string // a layer's folder → a never-started container that mounts it at /l
	lazy     bool              // no batch ahead of need until the first agent step (viewsAhead)

	// The run's folder on the host for the views' folders and the git
	// configs (viewsHostBase), as goalrun and as the Engine's host name
	// it; "" when the Engine's volumes hold them. hostDirs is false once
	// the overlay would not mount on such folders (volumes then hold the
	// views' folders; the git configs stay).
	hostLocal, hostEngine string
	hostDirs              bool
}

// startViews starts preparing the views in the background: the first batch
// of plain volumes (and the sanitized git configs, files[i] at g/i), then
// the probe that decides between overlay and copy. lower is the tree on the
// Engine's host. Check steps (openView) and StartDocker wait for it.
func (d *Docker) startViews(ctx context.Context, lower string, files [][]byte) {
	v := &views{ready: make(chan struct{}), git: make(chan struct{}), lower: lower, rootMode: 0o755, lazy: true}
	if st, err := os.Stat(d.mountSrc); err == nil {
		v.rootMode, v.rootTime = st.Mode().Perm(), st.ModTime()
	}
	d.views = v
	if err := d.makeViewsHostDir(); err != nil {
		v.err = err
		close(v.git)
		close(v.ready)
		return
	}
	d.removals.Add(1)
	go func() {
		defer d.removals.Done()
		n := d.firstViewBatch()
		dirs, err := d.prepareViewDirs(ctx, n, files)
		v.mu.Lock()
		v.free = dirs
		v.mu.Unlock()
		if err != nil {
			v.err = err
			close(v.git)
			close(v.ready)
			return
		}
		close(v.git)
		mode, why := d.chooseView(ctx, dirs[0])
		if mode != CheckViewOverlay && v.hostDirs {
			// The overlay would not mount on goalrun's own folders: the
			// Engine's volumes hold the views' folders from now on.
			v.mu.Lock()
			v.hostDirs, v.free = false, nil
			v.mu.Unlock()
			for _, dv := range dirs {
				_ = removeTree(dv.local)
			}
			if dirs, err = d.prepareViewDirs(ctx, n, nil); err != nil {
				v.err = err
				close(v.ready)
				return
			}
			v.mu.Lock()
			v.free = dirs
			v.mu.Unlock()
			mode, why = d.chooseView(ctx, dirs[0])
		}
		v.mu.Lock()
		v.mode, v.why = mode, why
		v.mu.Unlock()
		close(v.ready)
	}()
}

// chooseView decides between the overlay and the copy view on dirs: from a
// remembered fact, else by probing the Engine (an overlay answer is
// remembered).
func (d *Docker) chooseView(ctx context.Context, dirs viewDirs) (mode, why string) {
	mode, why = d.overlayFromFacts(dirs)
	if mode == "" {
		mode, why = d.probeOverlay(ctx, dirs)
		if mode == CheckViewOverlay {
			d.rememberOverlay(ctx)
		}
	}
	return mode, why
}

// rememberOverlay stores the fact that the Engine mounts this run's
// overlay views, under its info's identity once the live info confirmed
// that info (Docker.confirmed): the probe needs no container started, so
// it may run before the confirmation, on another Engine than the one
// remembered.
func (d *Docker) rememberOverlay(ctx context.Context) {
	if d.confirmed != nil && d.confirmed(ctx) != nil {
		return
	}
	_ = d.opts.facts.store(factOverlay, d.info, d.overlayFactKey(), true)
}

// factOverlay is the EngineFacts kind "this Engine mounts an overlay view
// of such a tree"; only that answer is remembered (a copy is probed
// again, the overlay being the better view).
const factOverlay = "overlay-view"

// overlayFactKey is what the overlay probe's answer depends on besides the
// Engine: the workspace mode (bind: the tree's own filesystem is the lower
// layer; copy: a volume in the Engine's data root) and, in bind mode, the
// type of the tree's filesystem (statfs f_type).
func (d *Docker) overlayFactKey() string {
	key := string(d.wsMode)
	if d.wsMode != WorkspaceCopy {
		key += "\x00" + fsTypeOf(d.mountSrc)
	}
	if v := d.views; v != nil && v.hostDirs {
		key += "\x00host\x00" + fsTypeOf(v.hostLocal)
	}
	return key
}

// overlayFromFacts returns CheckViewOverlay when a remembered fact says the
// Engine mounts this run's overlay views (the probe is then skipped), the
// copy view when the tree's path cannot go into overlay options at all
// (as the probe would), or "" when the probe must run.
func (d *Docker) overlayFromFacts(dirs viewDirs) (mode, why string) {
	var ok bool
	if !d.opts.facts.load(factOverlay, d.info, d.overlayFactKey(), &ok) || !ok {
		return "", ""
	}
	if _, err := overlayOptions(d.views.lower, nil, dirs); err != nil {
		return CheckViewCopy, "the Engine cannot mount an overlay view of the workspace: " + err.Error()
	}
	return CheckViewOverlay, ""
}

// errViewRemount is returned by runOnView when the Engine could not mount
// the overlay view and a new probe chose the copy view: the step never
// started and may run again on a new view.
var errViewRemount = errors.New("the Engine could not mount the overlay view; checks now run on the snapshot copy")

// isViewMountErr recognizes the Engine's failure to mount a local volume
// (moby's volume/local: "failed to mount local volume", wrapped in
// "error while mounting volume").
func isViewMountErr(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "failed to mount local volume") || strings.Contains(msg, "error while mounting volume")
}

// reprobeOverlay is called when a container on an overlay view failed to
// start with a volume mount error: the remembered fact (if any) is
// forgotten and the Engine probed again on fresh folders. It reports
// whether the views changed to the copy (then the step may run again on
// a new view).
func (d *Docker) reprobeOverlay(ctx context.Context) bool {
	d.opts.facts.forget(factOverlay, d.info, d.overlayFactKey())
	dirs, err := d.takeViewDirs(ctx)
	if err != nil {
		return false
	}
	mode, why := d.probeOverlay(ctx, dirs)
	d.closeView(ctx, &checkView{dirs: dirs, volume: fmt.Sprintf("goalrun-%s-view-%d-fs", d.cfg.RunID, dirs.n)})
	if mode == CheckViewOverlay {
		d.rememberOverlay(ctx)
		return false
	}
	v := d.views
	v.mu.Lock()
	v.mode, v.why = mode, why
	v.mu.Unlock()
	return true
}

// viewsReady waits for the first batch and the probe; it returns the
// preparation's error.
func (d *Docker) viewsReady(ctx context.Context) error {
	select {
	case <-d.views.ready:
		return d.views.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// CheckView returns how check steps see the workspace (CheckViewOverlay or
// CheckViewCopy), and why the copy was chosen ("" for overlay). It is ""
// until StartDocker returned.
func (d *Docker) CheckView() (mode, why string) {
	if d.views == nil {
		return "", ""
	}
	d.views.mu.Lock()
	defer d.views.mu.Unlock()
	return d.views.mode, d.views.why
}

// setViewLayer adds l below the tree in every view opened from now on
// (after the layers added before it: the first added is the topmost). The
// setup step keeps its view's outputs so (checkView.layer). A path the
// tree has wins; a path only the layer has shows through. On the overlay
// view that includes a file of the tree the step changed and the agent
// later deleted (the step's version shows); the copy view never takes a
// path of the tree the step started from out of a layer.
func (d *Docker) setViewLayer(l viewLayer) {
	d.views.mu.Lock()
	d.views.layers = append(d.views.layers, l)
	d.views.mu.Unlock()
}

// firstViewBatch is the size of the batch prepared at start: check #0's
// view, and the setup step's when it may run.
func (d *Docker) firstViewBatch() int {
	if d.cfg.Setup.Enabled && d.cfg.Setup.Unavailable == "" {
		return 2
	}
	return 1
}

// viewsAhead lets views be prepared ahead of the checks that need them
// (the end of the first agent step calls it: more checks will follow).
func (d *Docker) viewsAhead() {
	v := d.views
	if v == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.lazy {
		return
	}
	v.lazy = false
	if len(v.free) <= 1 && v.batch == nil {
		d.startViewBatch()
	}
}

// prepareViewDirs prepares n views' folders and, when given, writes files
// (the sanitized git configs) as g/0, g/1…: in the run's folder on the
// host when there is one (views.hostLocal; the views' folders too while
// views.hostDirs), else in the Engine's volumes — n plain volumes and a git
// volume (read-only and root's), written through a container that is
// created and never started, and removed before it returns.
func (d *Docker) prepareViewDirs(ctx context.Context, n int, files [][]byte) ([]viewDirs, error) {
	v := d.views
	v.mu.Lock()
	first := v.next
	v.next += n
	hostDirs := v.hostDirs
	v.mu.Unlock()
	if v.hostLocal != "" && len(files) > 0 {
		if err := d.writeHostGitConfigs(files); err != nil {
			return nil, err
		}
		files = nil
	}
	if hostDirs {
		return d.prepareHostViewDirs(first, n)
	}

	dirs := make([]viewDirs, n)
	errs := make([]error, n+1)
	var wg sync.WaitGroup
	for i := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("goalrun-%s-view-%d", d.cfg.RunID, first+i)
			vol, err := d.createVolumeWith(ctx, name, "view", nil)
			if err == nil && vol.Mountpoint == "" {
				err = fmt.Errorf("the Engine did not say where volume %s lives (driver %q); goalrun needs the local volume driver", name, vol.Driver)
			}
			dirs[i], errs[i] = viewDirs{n: first + i, volume: name, path: vol.Mountpoint}, err
		}()
	}
	gitVolume := ""
	if len(files) > 0 {
		gitVolume = "goalrun-" + d.cfg.RunID + "-git"
		wg.Add(1)
		go func() {
			defer wg.Done()
			vol, err := d.createVolumeWith(ctx, gitVolume, "git", nil)
			if err == nil && vol.Mountpoint == "" {
				err = fmt.Errorf("the Engine did not say where volume %s lives", gitVolume)
			}
			d.views.mu.Lock()
			d.views.gitPath = vol.Mountpoint
			d.views.mu.Unlock()
			errs[n] = err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("sandbox: docker: creating the volumes of the check views: %w", err)
	}

	mounts := make([]mount.Mount, 0, len(dirs)+1)
	for i, dv := range dirs {
		mounts = append(mounts, mount.Mount{Type: mount.TypeVolume, Source: dv.volume, Target: fmt.Sprintf("/v%d", i), VolumeOptions: &mount.VolumeOptions{NoCopy: true}})
	}
	if gitVolume != "" {
		mounts = append(mounts, mount.Mount{Type: mount.TypeVolume, Source: gitVolume, Target: "/g", VolumeOptions: &mount.VolumeOptions{NoCopy: true}})
	}
	cfg := &container.Config{
		Image:      d.imageID,
		Entrypoint: []string{},
		Cmd:        []string{"/goalrun-never-started"},
		User:       "0:0",
		Labels:     d.labels("view-prep"),
	}
	// Never started: only the Engine's archive API writes through it.
	// The root is writable because the archive goes to "/" (each entry
	// lands in one of the volumes); nothing else is ever written.
	hc := &container.HostConfig{
		NetworkMode: network.NetworkNone,
		CapDrop:     []string{"ALL"},
		SecurityOpt: []string{"no-new-privileges"},
		LogConfig:   container.LogConfig{Type: "none"},
		Mounts:      mounts,
	}
	// The container is removed in the background: the views are ready
	// once the archive is in.
	var refs []string
	defer func() { d.removeLater(ctx, refs, nil) }()
	id, err := d.createContainer(ctx, cfg, hc, fmt.Sprintf("goalrun-%s-view-prep-%d", d.cfg.RunID, first), func(ref string) {
		refs = append(refs, ref)
		d.track(func(c *createdSet) { c.containers = append(c.containers, ref) })
	})
	if err != nil {
		return nil, fmt.Errorf("sandbox: docker: creating the container that prepares the check views: %w", err)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(d.viewDirsTar(pw, len(dirs), files)) }()
	err = d.cli.CopyToContainer(ctx, id, "/", pr, container.CopyToContainerOptions{})
	pr.CloseWithError(err)
	if err != nil {
		return nil, fmt.Errorf("sandbox: docker: preparing the folders of the check views: %w", err)
	}
	return dirs, nil
}

// viewDirsTar writes the archive prepareViewDirs extracts at "/": v<i>/upper
// (the sandbox user's, with the tree root's mode) and v<i>/work (root's)
// for n views, and g/<i> for each file (root's, mode 0444).
func (d *Docker) viewDirsTar(w io.Writer, n int, files [][]byte) error {
	tw := tar.NewWriter(w)
	mtime := d.views.rootTime
	if mtime.IsZero() {
		mtime = time.Now()
	}
	for i := range n {
		for _, h := range []*tar.Header{
			{Name: fmt.Sprintf("v%d/upper/", i), Typeflag: tar.TypeDir, Mode: int64(d.views.rootMode), Uid: d.uid, Gid: d.gid, ModTime: mtime},
			{Name: fmt.Sprintf("v%d/work/", i), Typeflag: tar.TypeDir, Mode: 0o700, ModTime: mtime},
		} {
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
		}
	}
	for i, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("g/%d", i), Typeflag: tar.TypeReg, Mode: 0o444, Size: int64(len(f)), ModTime: mtime}); err != nil {
			return err
		}
		if _, err := tw.Write(f); err != nil {
			return err
		}
	}
	return tw.Close()
}

// overlayOptions returns the local driver's options of an overlay view of
// lower (with layers below it) on dirs, or an error saying why the kernel
// could not take them.
func overlayOptions(lower string, layers []viewLayer, dirs viewDirs) (map[string]string, error) {
	lowers := []string{lower}
	for _, l := range layers {
		lowers = append(lowers, l.path)
	}
	for _, p := range append(lowers, dirs.upper(), dirs.work()) {
		if strings.ContainsAny(p, overlayUnsafe) {
			return nil, fmt.Errorf("the path %q holds one of %q, which overlay mount options cannot carry", p, overlayUnsafe)
		}
	}
	o := "lowerdir=" + strings.Join(lowers, ":") + ",upperdir=" + dirs.upper() + ",workdir=" + dirs.work()
	if len(o) > mountDataMax {
		return nil, fmt.Errorf("the overlay's options are %d bytes long, more than the kernel takes (%d)", len(o), mountDataMax)
	}
	return map[string]string{"type": "overlay", "device": "overlay", "o": o}, nil
}

// probeOverlay finds out whether the Engine can mount an overlay view:
// it creates one on dirs and has the Engine mount it for a container that
// is never started (ContainerStatPath mounts the container's volumes). It
// returns CheckViewOverlay, or CheckViewCopy and why. The probe's volume
// and container are removed; dirs stays usable.
func (d *Docker) probeOverlay(ctx context.Context, dirs viewDirs) (mode, why string) {
	copyView := func(err error) (string, string) {
		return CheckViewCopy, "the Engine cannot mount an overlay view of the workspace: " + err.Error()
	}
	opts, err := overlayOptions(d.views.lower, nil, dirs)
	if err != nil {
		return copyView(err)
	}
	name := fmt.Sprintf("goalrun-%s-view-probe-%d", d.cfg.RunID, dirs.n)
	if _, err := d.createVolumeWith(ctx, name, "view", opts); err != nil {
		return copyView(err)
	}
	// The probe's container and then its volume are removed in the
	// background: the answer is known once the Engine mounted it.
	var refs []string
	defer func() { d.removeLater(ctx, refs, []string{name}) }()
	cv := &checkView{dirs: dirs, volume: name}
	cfg := &container.Config{Image: d.imageID, Entrypoint: []string{}, Cmd: []string{"/goalrun-never-started"}, User: d.user, Labels: d.labels("view-probe")}
	hc := &container.HostConfig{NetworkMode: network.NetworkNone, CapDrop: []string{"ALL"}, SecurityOpt: []string{"no-new-privileges"}, ReadonlyRootfs: true, LogConfig: container.LogConfig{Type: "none"}, Mounts: []mount.Mount{cv.mount()}}
	id, err := d.createContainer(ctx, cfg, hc, name, func(ref string) {
		refs = append(refs, ref)
		d.track(func(c *createdSet) { c.containers = append(c.containers, ref) })
	})
	if err != nil {
		return copyView(err)
	}
	if _, err := d.cli.ContainerStatPath(ctx, id, DockerRoot); err != nil {
		return copyView(err)
	}
	return CheckViewOverlay, ""
}

// openView makes a fresh view of the tree as it is now (the agent is
// frozen) for one container: an overlay volume, or a bind of a plain
// volume to be filled with a copy (fillCopyView). With keep, its plain
// volume outlives closeView (until Close), so that what the container
// wrote can become a layer of later views (checkView.layer). Errors come
// from the Engine.
func (d *Docker) openView(ctx context.Context, keep bool) (*checkView, error) {
	if err := d.viewsReady(ctx); err != nil {
		return nil, err
	}
	dirs, err := d.takeViewDirs(ctx)
	if err != nil {
		return nil, err
	}
	v := d.views
	v.mu.Lock()
	mode, lower, layers := v.mode, v.lower, append([]viewLayer(nil), v.layers...)
	v.mu.Unlock()
	cv := &checkView{dirs: dirs, volume: fmt.Sprintf("goalrun-%s-view-%d-fs", d.cfg.RunID, dirs.n), keep: keep, layers: layers}
	var opts map[string]string
	if mode == CheckViewOverlay {
		if opts, err = overlayOptions(lower, layers, dirs); err != nil {
			// Only layers added since the probe can make it fail.
			mode = CheckViewCopy
		}
	}
	if mode != CheckViewOverlay {
		cv.copy = true
		opts = map[string]string{"type": "none", "device": dirs.upper(), "o": "bind"}
	}
	if _, err := d.createVolumeWith(ctx, cv.volume, "view", opts); err != nil {
		d.closeView(ctx, cv)
		return nil, fmt.Errorf("sandbox: docker: creating the check's view of the workspace: %w", err)
	}
	return cv, nil
}

// takeViewDirs hands out a prepared plain volume, preparing the next batch
// in the background when one is left and waiting for one when none is.
func (d *Docker) takeViewDirs(ctx context.Context) (viewDirs, error) {
	v := d.views
	for {
		v.mu.Lock()
		if len(v.free) > 0 {
			dirs := v.free[0]
			v.free = v.free[1:]
			if len(v.free) <= 1 && v.batch == nil && !v.lazy {
				d.startViewBatch()
			}
			v.mu.Unlock()
			return dirs, nil
		}
		if v.batch == nil {
			d.startViewBatch()
		}
		b := v.batch
		v.mu.Unlock()
		select {
		case <-b:
		case <-ctx.Done():
			return viewDirs{}, ctx.Err()
		}
		v.mu.Lock()
		err, empty := v.batchErr, len(v.free) == 0
		v.mu.Unlock()
		if err != nil && empty {
			return viewDirs{}, err
		}
	}
}

// startViewBatch prepares the next batch in the background (views.mu held).
func (d *Docker) startViewBatch() {
	v := d.views
	done := make(chan struct{})
	v.batch = done
	d.mu.Lock()
	closed := d.closed
	if !closed {
		d.removals.Add(1)
	}
	d.mu.Unlock()
	if closed {
		v.batch, v.batchErr = nil, ErrClosed
		close(done)
		return
	}
	go func() {
		defer d.removals.Done()
		ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
		defer cancel()
		dirs, err := d.prepareViewDirs(ctx, viewBatch, nil)
		v.mu.Lock()
		v.free = append(v.free, dirs...)
		v.batchErr = err
		v.batch = nil
		v.mu.Unlock()
		close(done)
	}()
}

// closeView removes the view's volume and, unless it is kept, its plain
// volume (after the container that mounted it is gone). Close removes
// whatever this could not.
func (d *Docker) closeView(ctx context.Context, cv *checkView) {
	cctx, cancel := bg(ctx)
	defer cancel()
	vols := []string{cv.volume}
	if !cv.keep && cv.dirs.volume != "" {
		vols = append(vols, cv.dirs.volume)
	}
	// Side by side: neither is mounted once the container is gone (the
	// overlay volume only names the plain one's folders).
	removed := make([]bool, len(vols))
	var wg sync.WaitGroup
	for i, v := range vols {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := d.cli.VolumeRemove(cctx, v, true)
			removed[i] = err == nil || errdefs.IsNotFound(err)
		}()
	}
	wg.Wait()
	var gone []string
	for i, v := range vols {
		if removed[i] {
			gone = append(gone, v)
		}
	}
	d.track(func(c *createdSet) { c.volumes = without(c.volumes, gone) })
	// A folder goalrun made goes once the view's volume is gone (it is no
	// longer mounted); Close removes what is left.
	if !cv.keep && cv.dirs.local != "" && removed[0] {
		_ = removeTree(cv.dirs.local)
	}
}

// fillCopyView puts the tree as it is now (the layers first, bottom one
// first, then the tree over them) into a copy view through the created,
// not yet started container id that mounts it at DockerRoot. The tree
// comes from the host (bind mode, git configs sanitized as in copy mode)
// or from the agent container's workspace volume (copy mode, which holds
// no credentials). A kept view records the tree's paths (checkView.base).
func (d *Docker) fillCopyView(ctx context.Context, id string, cv *checkView) error {
	for i := len(cv.layers) - 1; i >= 0; i-- {
		if err := d.copyLayer(ctx, id, cv.layers[i]); err != nil {
			return err
		}
	}
	var src io.ReadCloser
	if d.wsMode == WorkspaceCopy {
		rc, _, err := d.cli.CopyFromContainer(ctx, d.agentID, DockerRoot+"/.")
		if err != nil {
			return fmt.Errorf("sandbox: docker: copying the workspace for the check's view: %w", err)
		}
		src = rc
	} else {
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(tarTree(d.mountSrc, d.uid, d.gid, pw, nil)) }()
		src = pr
	}
	defer src.Close()
	var in io.Reader = src
	if cv.keep {
		cv.base = map[string]bool{}
		in = filterTar(src, func(rel string, _ *tar.Header) bool { cv.base[rel] = true; return true })
	}
	if err := d.cli.CopyToContainer(ctx, id, DockerRoot, in, container.CopyToContainerOptions{}); err != nil {
		return fmt.Errorf("sandbox: docker: filling the check's copy of the workspace: %w", err)
	}
	return nil
}

// copyLayer copies what layer l holds into the copy view of the created
// container id: its paths that are not in l.base (the tree the layer's
// step started from), without devices (an overlay upper's whiteouts) or
// fifos.
func (d *Docker) copyLayer(ctx context.Context, id string, l viewLayer) error {
	holder, err := d.layerHolder(ctx, l)
	if err != nil {
		return err
	}
	rc, _, err := d.cli.CopyFromContainer(ctx, holder, "/l/"+path.Base(l.path)+"/.")
	if err != nil {
		return fmt.Errorf("sandbox: docker: reading a layer of the check's view: %w", err)
	}
	defer rc.Close()
	in := filterTar(rc, func(rel string, h *tar.Header) bool {
		switch h.Typeflag {
		case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
			return false
		case tar.TypeDir:
			return true
		}
		return !l.base[rel]
	})
	if err := d.cli.CopyToContainer(ctx, id, DockerRoot, in, container.CopyToContainerOptions{}); err != nil {
		return fmt.Errorf("sandbox: docker: copying a layer into the check's view: %w", err)
	}
	return nil
}

// layerHolder returns a container, created once per layer and never
// started, that mounts the folder holding the layer (its volume, or the
// folder goalrun made) at /l (for CopyFromContainer); Close removes it.
func (d *Docker) layerHolder(ctx context.Context, l viewLayer) (string, error) {
	v := d.views
	v.mu.Lock()
	id, ok := v.holders[l.path]
	v.mu.Unlock()
	if ok {
		return id, nil
	}
	// The layer's folder (its upper/) is at /l/upper either way.
	m := mount.Mount{Type: mount.TypeVolume, Source: l.volume, Target: "/l", ReadOnly: true, VolumeOptions: &mount.VolumeOptions{NoCopy: true}}
	name := strings.TrimPrefix(l.volume, "goalrun-"+d.cfg.RunID+"-")
	if l.volume == "" {
		m = mount.Mount{Type: mount.TypeBind, Source: path.Dir(l.path), Target: "/l", ReadOnly: true}
		name = path.Base(path.Dir(l.path))
	}
	cfg := &container.Config{Image: d.imageID, Entrypoint: []string{}, Cmd: []string{"/goalrun-never-started"}, User: "0:0", Labels: d.labels("view-layer")}
	hc := &container.HostConfig{NetworkMode: network.NetworkNone, CapDrop: []string{"ALL"}, SecurityOpt: []string{"no-new-privileges"}, ReadonlyRootfs: true, LogConfig: container.LogConfig{Type: "none"},
		Mounts: []mount.Mount{m}}
	id, err := d.createContainer(ctx, cfg, hc, "goalrun-"+d.cfg.RunID+"-layer-"+name, func(ref string) {
		d.track(func(c *createdSet) { c.containers = append(c.containers, ref) })
	})
	if err != nil {
		return "", fmt.Errorf("sandbox: docker: creating the container that reads a layer of the check's view: %w", err)
	}
	v.mu.Lock()
	if v.holders == nil {
		v.holders = map[string]string{}
	}
	v.holders[l.path] = id
	v.mu.Unlock()
	return id, nil
}

// filterTar re-writes the archive r, keeping the entries keep accepts;
// keep gets each entry's path relative to the archive's root ("" for the
// root itself, always kept, never asked about). An entry with an unsafe
// name (treecopy.Rel) is dropped.
func filterTar(r io.Reader, keep func(rel string, h *tar.Header) bool) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		tr, tw := tar.NewReader(r), tar.NewWriter(pw)
		prefix, first := "", true
		err := func() error {
			for {
				h, err := tr.Next()
				if err == io.EOF {
					return tw.Close()
				}
				if err != nil {
					return err
				}
				if first {
					prefix, first = treecopy.Prefix(h.Name, path.Base(DockerRoot)), false
				}
				rel, ok := treecopy.Rel(h.Name, prefix)
				if !ok || (rel != "" && !keep(rel, h)) {
					continue
				}
				if err := tw.WriteHeader(h); err != nil {
					return err
				}
				if _, err := io.Copy(tw, tr); err != nil {
					return err
				}
			}
		}()
		pw.CloseWithError(err)
	}()
	return pr
}
