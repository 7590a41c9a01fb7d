package sandbox

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
)

// EngineImages looks images up, imports the generated ones (BuildImage)
// and removes stale imports.
type EngineImages interface {
	ImageInspect(ctx context.Context, image string, _ ...client.ImageInspectOption) (image.InspectResponse, error)
	ImageList(ctx context.Context, options image.ListOptions) ([]image.Summary, error)
	ImageRemove(ctx context.Context, image string, options image.RemoveOptions) ([]image.DeleteResponse, error)
	ImageImport(ctx context.Context, source image.ImportSource, ref string, options image.ImportOptions) (io.ReadCloser, error)
}

// ImageRepository is the repository part of the tag BuildImage gives images
// when ImageSpec.Name is empty.
const ImageRepository = "goalrun-sandbox"

// ImagePath is the PATH of images BuildImage makes; /usr/local/go/bin comes
// first so a Go toolchain bind-mounted read-only at /usr/local/go (a
// Config.Mounts entry) needs no further setup.
const ImagePath = "/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// SystemPath is the usual system PATH (Debian's and most distributions'
// default for a login): the PATH of a Bare image, and the tail of the PATH
// HostTools gives steps.
const SystemPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// HostImageRepository is the repository of the tag BuildImage gives a Bare
// image when ImageSpec.Name is empty.
const HostImageRepository = "goalrun-host"

// ImageSpec describes a small sandbox image made only from files on this
// machine (nothing is pulled): a static busybox with its applets, optionally
// a real bash (Claude Code's Bash tool refuses busybox sh) and the shared
// libraries ldd lists for bash and for LibsFor (an agent CLI that is then
// bind-mounted, not copied), CA certificates, and /etc/passwd and
// /etc/group entries for root and the sandbox user.
type ImageSpec struct {
	// Name is the repository of the tag; "" means ImageRepository (or
	// HostImageRepository for a Bare image). The tag is a hash of
	// everything that goes into the image.
	Name string
	// Bare makes an image that holds no programs at all: the generated
	// /etc files (passwd, group, hosts, nsswitch.conf, mtab) and the
	// folders the sandbox needs (/tmp, /workspace, HOME's mount point…),
	// with PATH=SystemPath. The host's system folders are mounted over it
	// read-only (HostTools), so it is made from nothing on this machine
	// and works the same when goalrun itself runs in a container. Busybox,
	// Bash, LibsFor, Files and CACerts are then not used.
	Bare bool
	// Busybox is a statically linked busybox; "" means /usr/bin/busybox
	// (Debian's busybox-static).
	Busybox string
	// Bash is a bash binary copied to /bin/bash with its libraries; ""
	// means no bash.
	Bash string
	// LibsFor are binaries whose shared libraries (as ldd lists them) are
	// copied into the image; the binaries themselves are not.
	LibsFor []string
	// Files maps image paths to host files copied in (content and
	// permission bits; symlinks resolved).
	Files map[string]string
	// CACerts is a PEM bundle copied to /etc/ssl/certs/ca-certificates.crt;
	// "" means the host's bundle at that path when it exists.
	CACerts string
	// UID and GID are the sandbox user's ids in /etc/passwd; 0 means
	// DefaultUID/DefaultGID.
	UID, GID int
	// Labels are added to the image.
	Labels map[string]string
}

// DefaultImageSpec is the image goalrun demo and the tests use: busybox,
// bash (found on PATH, if any) and the libraries of the agent binaries
// named, CA certificates and a uid 1000 user.
func DefaultImageSpec(agentBinaries ...string) ImageSpec {
	spec := ImageSpec{LibsFor: agentBinaries}
	if b, err := exec.LookPath("bash"); err == nil {
		spec.Bash = b
	}
	return spec
}

// imageFile is one entry of the image's root filesystem.
type imageFile struct {
	name     string // absolute path in the image
	src      string // host file ("" for generated content or dirs/links)
	data     []byte // generated content
	mode     int64
	dir      bool
	linkname string // symlink target
}

// BuildImage makes the image spec describes and returns its reference
// "<name>:<hash>"; when an image with that reference already exists it is
// reused. The image is imported in one piece (the Engine's image import,
// POST /images/create?fromSrc=-) from a tar of its root filesystem, with
// its configuration (PATH, WORKDIR, CMD, labels) applied as import changes:
// nothing is pulled, no build container runs, and no intermediate image is
// ever committed, so an interrupted BuildImage leaves no dangling layer
// behind (the Engine registers the layer only once the whole stream
// arrived; an upload cut short is discarded). When ctx ends during the
// import the error wraps ctx.Err() (errors.Is(err, context.Canceled)).
// Errors name the host file or the Engine's complaint; a missing busybox
// suggests installing Debian's busybox-static.
func BuildImage(ctx context.Context, cli DockerAPI, spec ImageSpec) (string, error) {
	cli = bounded(cli)
	files, err := imageFiles(spec)
	if err != nil {
		return "", err
	}
	changes := imageChanges(spec)
	sum, err := hashImage(files, strings.Join(changes, "\n"))
	if err != nil {
		return "", err
	}
	name := spec.Name
	switch {
	case name != "":
	case spec.Bare:
		name = HostImageRepository
	default:
		name = ImageRepository
	}
	tag := sum[:16]
	ref := name + ":" + tag
	if _, err := cli.ImageInspect(ctx, ref); err == nil {
		// Reused: the tidying of stale imports is left to the run's
		// start-up reap (RemoveStaleImports), off the way to the first
		// check.
		return ref, nil
	} else if !errdefs.IsNotFound(err) {
		return "", fmt.Errorf("sandbox: image: inspecting %s: %w", ref, err)
	}
	interrupted := func(err error) error {
		if ctx.Err() != nil {
			return fmt.Errorf("sandbox: image: making %s was interrupted (nothing is left behind): %w (%v)", ref, ctx.Err(), err)
		}
		return fmt.Errorf("sandbox: image: importing %s: %w", ref, err)
	}

	labels := map[string]string{"goalrun.image": sum}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	changes = append(changes, labelChange(labels))
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeRootfs(pw, files)) }()
	body, err := cli.ImageImport(ctx, image.ImportSource{Source: pr, SourceName: "-"}, name, image.ImportOptions{Tag: tag, Changes: changes})
	if err != nil {
		pr.CloseWithError(err)
		return "", interrupted(err)
	}
	defer body.Close()
	err = readBuildOutput(body)
	pr.CloseWithError(io.ErrClosedPipe) // ends the writer if the Engine stopped reading early
	if err != nil {
		return "", interrupted(err)
	}
	if _, err := cli.ImageInspect(ctx, ref); err != nil {
		return "", interrupted(fmt.Errorf("%s was not there after the import: %w", ref, err))
	}
	RemoveStaleImports(ctx, cli)
	return ref, nil
}

// lookupImage finds ref on the Engine (engine is its address, for the
// error): its id, and its first repository digest or, without one, the id.
// goalrun never pulls, so a missing image is an error that says how to
// make it.
func lookupImage(ctx context.Context, cli EngineImages, ref, engine string) (id, digest string, err error) {
	img, err := cli.ImageInspect(ctx, ref)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return "", "", fmt.Errorf("sandbox: docker: image %q is not on the Engine at %s and goalrun never pulls; build it (sandbox.BuildImage, goalrun demo) or load it first", ref, engine)
		}
		return "", "", fmt.Errorf("sandbox: docker: inspecting image %q: %w", ref, err)
	}
	digest = img.ID
	for _, rd := range img.RepoDigests {
		if _, dg, ok := strings.Cut(rd, "@"); ok {
			digest = dg
			break
		}
	}
	return img.ID, digest, nil
}

// staleImportAge is how old an untagged image BuildImage made must be
// before RemoveStaleImports removes it: the Engine tags an import
// microseconds after creating it, so an older untagged one is a leftover.
var staleImportAge = time.Minute

// RemoveStaleImports removes untagged images carrying the goalrun.image
// label that are older than staleImportAge. They are what an import
// interrupted after its whole stream reached the Engine leaves when a
// second import of the same image ran meanwhile (the later tag wins).
// BuildImage calls it after an import; cmd's start-up reap calls it too.
// Failures are ignored: this is tidying, and the next call tries again.
func RemoveStaleImports(ctx context.Context, cli EngineImages) {
	f := filters.NewArgs(filters.Arg("dangling", "true"), filters.Arg("label", "goalrun.image"))
	imgs, err := cli.ImageList(ctx, image.ListOptions{Filters: f})
	if err != nil {
		return
	}
	for _, img := range imgs {
		if len(img.RepoTags) > 0 && !slices.Equal(img.RepoTags, []string{"<none>:<none>"}) {
			continue
		}
		if time.Since(time.Unix(img.Created, 0)) < staleImportAge {
			continue
		}
		_, _ = cli.ImageRemove(ctx, img.ID, image.RemoveOptions{PruneChildren: true})
	}
}

// imageChanges is the configuration BuildImage gives its images, as
// Dockerfile instructions the Engine applies on import (labels apart).
func imageChanges(spec ImageSpec) []string {
	p := ImagePath
	if spec.Bare {
		p = SystemPath
	}
	return []string{"ENV PATH=" + p, "WORKDIR " + DockerRoot, `CMD ["sh"]`}
}

// labelChange is one LABEL instruction setting labels, keys sorted, keys and
// values double-quoted as the Dockerfile syntax reads them.
func labelChange(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("LABEL")
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%s", strconv.Quote(k), strconv.Quote(labels[k]))
	}
	return b.String()
}

// readBuildOutput reads the Engine's JSON message stream (of an import or
// a build) and returns the first error it reports.
func readBuildOutput(r io.Reader) error {
	dec := json.NewDecoder(r)
	var tail []string
	for {
		var m struct {
			Stream      string `json:"stream"`
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&m); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("reading the build output: %w", err)
		}
		if m.Stream != "" {
			tail = append(tail, strings.TrimSpace(m.Stream))
			if len(tail) > 5 {
				tail = tail[1:]
			}
		}
		if m.Error != "" {
			return fmt.Errorf("%s (last steps: %s)", m.Error, strings.Join(tail, " | "))
		}
	}
}

// imageFiles lists the root filesystem.
func imageFiles(spec ImageSpec) ([]imageFile, error) {
	uid, gid := spec.UID, spec.GID
	if uid == 0 {
		uid = DefaultUID
	}
	if gid == 0 {
		gid = DefaultGID
	}
	if spec.Bare {
		return bareFiles(uid, gid), nil
	}
	busybox := spec.Busybox
	if busybox == "" {
		busybox = "/usr/bin/busybox"
	}
	if _, err := os.Stat(busybox); err != nil {
		return nil, fmt.Errorf("sandbox: image: busybox %s: %w; install a static busybox (Debian: apt-get install busybox-static)", busybox, err)
	}
	applets, err := busyboxApplets(busybox)
	if err != nil {
		return nil, err
	}
	fs := map[string]imageFile{}
	add := func(f imageFile) { fs[f.name] = f }
	for _, d := range []string{"/bin", "/sbin", "/usr", "/usr/bin", "/usr/sbin", "/usr/local", "/usr/local/bin", "/etc", "/etc/ssl", "/etc/ssl/certs", "/home", "/root", "/run", "/var", DockerRoot, DockerHome} {
		add(imageFile{name: d, dir: true, mode: 0o755})
	}
	add(imageFile{name: "/tmp", dir: true, mode: 0o1777})
	add(imageFile{name: "/var/tmp", dir: true, mode: 0o1777})
	add(imageFile{name: "/bin/busybox", src: busybox, mode: 0o755})
	for _, a := range applets {
		if a == "busybox" || (a == "bash" && spec.Bash != "") {
			continue
		}
		add(imageFile{name: "/bin/" + a, linkname: "busybox"})
	}
	add(imageFile{name: "/usr/bin/env", linkname: "/bin/busybox"})
	libsOf := append([]string(nil), spec.LibsFor...)
	if spec.Bash != "" {
		add(imageFile{name: "/bin/bash", src: spec.Bash, mode: 0o755})
		libsOf = append(libsOf, spec.Bash)
	}
	for _, bin := range libsOf {
		libs, err := sharedLibs(bin)
		if err != nil {
			return nil, err
		}
		for _, l := range libs {
			for _, d := range parents(l) {
				if _, ok := fs[d]; !ok {
					add(imageFile{name: d, dir: true, mode: 0o755})
				}
			}
			add(imageFile{name: l, src: l, mode: 0o755})
		}
	}
	ca := spec.CACerts
	if ca == "" {
		if _, err := os.Stat("/etc/ssl/certs/ca-certificates.crt"); err == nil {
			ca = "/etc/ssl/certs/ca-certificates.crt"
		}
	}
	if ca != "" {
		add(imageFile{name: "/etc/ssl/certs/ca-certificates.crt", src: ca, mode: 0o644})
	}
	for _, f := range generatedEtc(uid, gid) {
		add(f)
	}
	for dst, src := range spec.Files {
		if !path.IsAbs(dst) {
			return nil, fmt.Errorf("sandbox: image: file destination %q must be absolute", dst)
		}
		st, err := os.Stat(src)
		if err != nil {
			return nil, fmt.Errorf("sandbox: image: file %s: %w", src, err)
		}
		for _, d := range parents(dst) {
			if _, ok := fs[d]; !ok {
				add(imageFile{name: d, dir: true, mode: 0o755})
			}
		}
		add(imageFile{name: path.Clean(dst), src: src, mode: int64(st.Mode().Perm())})
	}
	out := make([]imageFile, 0, len(fs))
	for _, f := range fs {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// generatedEtc are the /etc files every image gets: users root, the sandbox
// user (uid:gid, HOME DockerHome) and nobody, their groups, a files-only
// nsswitch.conf and a loopback-only hosts file.
func generatedEtc(uid, gid int) []imageFile {
	return []imageFile{
		{name: "/etc/passwd", mode: 0o644, data: []byte(fmt.Sprintf(
			"root:x:0:0:root:/root:/bin/sh\nsandbox:x:%d:%d:goalrun sandbox:%s:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n", uid, gid, DockerHome))},
		{name: "/etc/group", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:\nsandbox:x:%d:\nnogroup:x:65534:\n", gid))},
		{name: "/etc/nsswitch.conf", mode: 0o644, data: []byte("passwd: files\ngroup: files\nhosts: files\n")},
		{name: "/etc/hosts", mode: 0o644, data: []byte("127.0.0.1 localhost\n::1 localhost\n")},
	}
}

// bareFiles is a Bare image's root filesystem: folders and generated /etc
// files, no program. /etc/mtab points at the kernel's mount table as on
// every distribution (df, mount and Python's shutil read it).
func bareFiles(uid, gid int) []imageFile {
	var out []imageFile
	for _, d := range []string{"/etc", "/home", "/run", "/sbin", "/var", "/proc", "/sys", "/dev", MountRoot, DockerRoot, DockerHome} {
		out = append(out, imageFile{name: d, dir: true, mode: 0o755})
	}
	out = append(out,
		imageFile{name: "/root", dir: true, mode: 0o700},
		imageFile{name: "/tmp", dir: true, mode: 0o1777},
		imageFile{name: "/var/tmp", dir: true, mode: 0o1777},
		imageFile{name: "/etc/mtab", linkname: "../proc/self/mounts"})
	out = append(out, generatedEtc(uid, gid)...)
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// parents lists the folders above an absolute path, outermost first
// (without "/").
func parents(p string) []string {
	var out []string
	for d := path.Dir(p); d != "/" && d != "."; d = path.Dir(d) {
		out = append([]string{d}, out...)
	}
	return out
}

// busyboxApplets runs busybox --list.
func busyboxApplets(busybox string) ([]string, error) {
	out, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("sandbox: image: %s --list: %w", busybox, err)
	}
	var applets []string
	for _, l := range strings.Fields(string(out)) {
		if !strings.ContainsAny(l, "/\x00") {
			applets = append(applets, l)
		}
	}
	if len(applets) == 0 {
		return nil, fmt.Errorf("sandbox: image: %s lists no applets", busybox)
	}
	return applets, nil
}

// sharedLibs returns the absolute paths of the shared libraries ldd lists
// for bin, the dynamic loader included. A static binary has none.
func sharedLibs(bin string) ([]string, error) {
	out, err := exec.Command("ldd", bin).CombinedOutput()
	if err != nil {
		if bytes.Contains(out, []byte("not a dynamic executable")) || bytes.Contains(out, []byte("statically linked")) {
			return nil, nil
		}
		return nil, fmt.Errorf("sandbox: image: ldd %s: %v: %s", bin, err, bytes.TrimSpace(out))
	}
	return parseLdd(string(out))
}

// parseLdd reads ldd's output: "name => /path (0x…)", "/path (0x…)" and
// "linux-vdso.so.1 (0x…)" (no file, skipped). "name => not found" is an
// error naming the library.
func parseLdd(out string) ([]string, error) {
	var libs []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if _, rest, ok := strings.Cut(line, "=>"); ok {
			rest = strings.TrimSpace(rest)
			if strings.HasPrefix(rest, "not found") {
				return nil, fmt.Errorf("sandbox: image: ldd: a library is missing on this machine: %s", line)
			}
			if f := strings.Fields(rest); len(f) > 0 && strings.HasPrefix(f[0], "/") {
				libs = append(libs, f[0])
			}
			continue
		}
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "/") {
			libs = append(libs, f[0])
		}
	}
	return libs, sc.Err()
}

// hashImage hashes every entry (name, kind, mode, link target, content) and
// the image's configuration.
func hashImage(files []imageFile, config string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "goalrun image v2\n%s\n", config)
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00%v\x00%o\x00%s\x00", f.name, f.dir, f.mode, f.linkname)
		switch {
		case f.src != "":
			r, err := os.Open(f.src)
			if err != nil {
				return "", fmt.Errorf("sandbox: image: %s: %w", f.src, err)
			}
			_, err = io.Copy(h, r)
			r.Close()
			if err != nil {
				return "", fmt.Errorf("sandbox: image: %s: %w", f.src, err)
			}
		default:
			h.Write(f.data)
		}
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeRootfs writes the image's root filesystem as a tar stream, names
// relative to "/".
func writeRootfs(w io.Writer, files []imageFile) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	tw := tar.NewWriter(bw)
	for _, f := range files {
		name := strings.TrimPrefix(f.name, "/")
		hdr := &tar.Header{Name: name, Mode: f.mode}
		switch {
		case f.dir:
			hdr.Typeflag, hdr.Name = tar.TypeDir, name+"/"
		case f.linkname != "":
			hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, f.linkname, 0o777
		case f.src != "":
			st, err := os.Stat(f.src)
			if err != nil {
				return fmt.Errorf("sandbox: image: %s: %w", f.src, err)
			}
			hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size()
		default:
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		if f.src == "" {
			if _, err := tw.Write(f.data); err != nil {
				return err
			}
			continue
		}
		r, err := os.Open(f.src)
		if err != nil {
			return fmt.Errorf("sandbox: image: %s: %w", f.src, err)
		}
		n, err := io.Copy(tw, io.LimitReader(r, hdr.Size))
		r.Close()
		if err != nil {
			return err
		}
		if n != hdr.Size {
			return fmt.Errorf("sandbox: image: %s changed while the image was built", f.src)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}
