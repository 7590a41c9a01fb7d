package sandbox

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/errdefs"
)

// A folder the agent names "workspace" is copied out as that folder: it is
// not merged onto the workspace root (the check ran on the tree where
// a.txt is "good"; the host must get the same tree).
func TestApplyTarFolderNamedLikeTheRoot(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("bad\n"), 0o644)
	os.MkdirAll(filepath.Join(ws, "workspace"), 0o755)
	os.WriteFile(filepath.Join(ws, "workspace", "important.txt"), []byte("keep\n"), 0o644)
	tr := tarOf(t,
		entry{name: "./", typ: tar.TypeDir, mode: 0o755},
		entry{name: "./a.txt", typ: tar.TypeReg, body: "good\n"},
		entry{name: "./workspace/", typ: tar.TypeDir, mode: 0o755},
		entry{name: "./workspace/a.txt", typ: tar.TypeReg, body: "evil\n"},
		entry{name: "./workspace/important.txt", typ: tar.TypeReg, body: "keep\n"},
		entry{name: "./hl", typ: tar.TypeLink, link: "./a.txt"},
	)
	copyOutTar(t, ws, tr)
	for rel, want := range map[string]string{"a.txt": "good\n", "workspace/a.txt": "evil\n", "workspace/important.txt": "keep\n", "important.txt": "", "hl": "good\n"} {
		b, err := os.ReadFile(filepath.Join(ws, rel))
		if want == "" {
			if err == nil {
				t.Errorf("%s exists (%q); it must not", rel, b)
			}
			continue
		}
		if string(b) != want {
			t.Errorf("%s = %q, %v; want %q", rel, b, err, want)
		}
	}
}

// copyOutTar applies tr to the workspace ws as copyOut does (applyTar, then
// removeUnseen), failing the test on an error.
func copyOutTar(t *testing.T, ws string, tr *tar.Reader) {
	t.Helper()
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	seen, err := applyTar(root, tr, nil)
	if err != nil {
		t.Fatalf("applyTar: %v", err)
	}
	if err := removeUnseen(root, seen, nil); err != nil {
		t.Fatalf("removeUnseen: %v", err)
	}
}

// tarOf builds an archive the way the Engine returns /workspace/. contents.
type entry struct {
	name, body, link string
	typ              byte
	mode             int64
}

func tarOf(t *testing.T, entries ...entry) *tar.Reader {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: mode, Linkname: e.link, Size: int64(len(e.body)), ModTime: time.Unix(1700000000, 0)}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte(e.body))
		}
	}
	tw.Close()
	return tar.NewReader(&buf)
}

// TestApplyTarHostileTree feeds copy-out archives an agent could shape and
// checks that nothing lands outside the workspace, no symlink is followed,
// special bits are dropped and deleted files disappear.
func TestApplyTarHostileTree(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("host secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(ws, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("keep.txt", "unchanged\n")
	write("edit.txt", "old\n")
	write("deleted.txt", "bye\n")
	write("gone/dir/file", "bye\n")
	write("was-file-now-dir", "x")
	// A host hardlink sharing an inode with a file outside the workspace:
	// rewriting it must not write through to the outside file.
	shared := filepath.Join(outside, "shared")
	os.WriteFile(shared, []byte("outside original\n"), 0o644)
	if err := os.Link(shared, filepath.Join(ws, "hardlinked")); err != nil {
		t.Fatal(err)
	}
	keepInfo, _ := os.Stat(filepath.Join(ws, "keep.txt"))

	tr := tarOf(t,
		entry{name: "workspace/", typ: tar.TypeDir, mode: 0o755},
		entry{name: "workspace/keep.txt", typ: tar.TypeReg, body: "unchanged\n"},
		entry{name: "workspace/edit.txt", typ: tar.TypeReg, body: "new\n"},
		entry{name: "workspace/setuid", typ: tar.TypeReg, body: "#!/bin/sh\n", mode: 0o4755},
		entry{name: "workspace/hardlinked", typ: tar.TypeReg, body: "agent wrote\n"},
		// A symlink to a host file, then a regular entry with the same
		// name: the write must replace the link, not follow it.
		entry{name: "workspace/escape", typ: tar.TypeSymlink, link: secret},
		entry{name: "workspace/escape", typ: tar.TypeReg, body: "pwned\n"},
		// A symlinked folder pointing out, then a file "inside" it.
		entry{name: "workspace/outdir", typ: tar.TypeSymlink, link: outside},
		entry{name: "workspace/outdir/planted", typ: tar.TypeReg, body: "pwned\n"},
		// A symlink kept as a symlink (goalrun never follows it later).
		entry{name: "workspace/passwd-link", typ: tar.TypeSymlink, link: "/etc/passwd"},
		// Names that try to climb out.
		entry{name: "workspace/../../../../" + strings.TrimPrefix(outside, "/") + "/climbed", typ: tar.TypeReg, body: "pwned\n"},
		// A hardlink to a path outside the archive's tree.
		entry{name: "workspace/hl", typ: tar.TypeLink, link: "/etc/passwd"},
		entry{name: "workspace/was-file-now-dir/", typ: tar.TypeDir, mode: 0o755},
		entry{name: "workspace/fifo", typ: tar.TypeFifo},
		entry{name: "workspace/dev", typ: tar.TypeChar},
	)
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	seen, err := applyTar(root, tr, nil)
	if err != nil {
		// An error is acceptable for the hostile entries as long as
		// nothing escaped; report it for visibility.
		t.Logf("applyTar: %v", err)
	}
	if err := removeUnseen(root, seen, nil); err != nil {
		t.Logf("removeUnseen: %v", err)
	}

	if b, _ := os.ReadFile(secret); string(b) != "host secret\n" {
		t.Errorf("the host file behind a symlink was written: %q", b)
	}
	if b, _ := os.ReadFile(shared); string(b) != "outside original\n" {
		t.Errorf("a hardlinked outside file was written through: %q", b)
	}
	for _, p := range []string{filepath.Join(outside, "planted"), filepath.Join(outside, "climbed")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was created outside the workspace", p)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "edit.txt")); string(b) != "new\n" {
		t.Errorf("edit.txt = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "hardlinked")); string(b) != "agent wrote\n" {
		t.Errorf("hardlinked = %q", b)
	}
	if st, err := os.Stat(filepath.Join(ws, "setuid")); err != nil || st.Mode()&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky) != 0 {
		t.Errorf("setuid file: %v %v (special bits must be dropped)", st, err)
	}
	if target, err := os.Readlink(filepath.Join(ws, "passwd-link")); err != nil || target != "/etc/passwd" {
		t.Errorf("passwd-link = %q, %v; want the symlink kept as is", target, err)
	}
	if st, err := os.Lstat(filepath.Join(ws, "escape")); err != nil || !st.Mode().IsRegular() {
		t.Errorf("escape should be a regular file now: %v %v", st, err)
	}
	for _, p := range []string{"deleted.txt", "gone", "fifo", "dev", "hl"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s should not exist after copy-out: %v", p, err)
		}
	}
	if st, err := os.Stat(filepath.Join(ws, "was-file-now-dir")); err != nil || !st.IsDir() {
		t.Errorf("was-file-now-dir should be a folder: %v %v", st, err)
	}
	if st, _ := os.Stat(filepath.Join(ws, "keep.txt")); !os.SameFile(st, keepInfo) {
		t.Errorf("an unchanged file was rewritten")
	}
}

func TestTarTreeRoundTrip(t *testing.T) {
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "a", "b"), 0o750)
	os.WriteFile(filepath.Join(src, "a", "b", "f"), []byte("hello"), 0o640)
	os.WriteFile(filepath.Join(src, "x.sh"), []byte("#!/bin/sh\n"), 0o755)
	os.Symlink("a/b/f", filepath.Join(src, "link"))
	var buf bytes.Buffer
	if err := tarTree(src, 1234, 5678, &buf, nil); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&buf)
	var got []string
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if h.Uid != 1234 || h.Gid != 5678 {
			t.Errorf("%s owned by %d:%d, want 1234:5678", h.Name, h.Uid, h.Gid)
		}
		got = append(got, fmt.Sprintf("%s %c %o %s", h.Name, h.Typeflag, h.Mode, h.Linkname))
	}
	want := []string{"./ 5 755 ", "a/ 5 750 ", "a/b/ 5 750 ", "a/b/f 0 640 ", "link 2 777 a/b/f", "x.sh 0 755 "}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("entries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	dst := t.TempDir()
	root, _ := os.OpenRoot(dst)
	defer root.Close()
	tarTree(src, 0, 0, &buf, nil)
	if _, err := applyTar(root, tar.NewReader(&buf), nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "link")); string(b) != "hello" {
		t.Errorf("round trip lost content through the link: %q", b)
	}
}

func TestParseLdd(t *testing.T) {
	out := "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibtinfo.so.6 => /lib/x86_64-linux-gnu/libtinfo.so.6 (0x00007f79)\n" +
		"\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f79)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007f79)\n"
	got, err := parseLdd(out)
	want := []string{"/lib/x86_64-linux-gnu/libtinfo.so.6", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("parseLdd = %q, %v; want %q", got, err, want)
	}
	if _, err := parseLdd("\tlibfoo.so.1 => not found\n"); err == nil || !strings.Contains(err.Error(), "libfoo") {
		t.Errorf("a missing library must be an error naming it, got %v", err)
	}
}

func TestSecurityOpts(t *testing.T) {
	engineDefault := []string{"name=seccomp,profile=default"}
	tests := []struct {
		name    string
		opts    []string
		engine  []string
		nnp     bool
		seccomp string
	}{
		{"our defaults", []string{"no-new-privileges"}, engineDefault, true, "default"},
		{"colon form", []string{"no-new-privileges:true"}, engineDefault, true, "default"},
		{"explicit false", []string{"no-new-privileges=false"}, engineDefault, false, "default"},
		{"unconfined", []string{"seccomp=unconfined"}, engineDefault, false, "unconfined"},
		{"custom profile", []string{`seccomp={"defaultAction":"SCMP_ACT_ERRNO"}`}, engineDefault, false, "custom"},
		{"engine without seccomp", nil, []string{"name=apparmor"}, false, ""},
		{"engine builtin", nil, []string{"name=seccomp,profile=builtin"}, false, "default"},
		{"engine unconfined by default", nil, []string{"name=seccomp,profile=unconfined"}, false, "unconfined"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nnp, sc := securityOpts(tc.opts, tc.engine)
			if nnp != tc.nnp || sc != tc.seccomp {
				t.Errorf("securityOpts = %v, %q; want %v, %q", nnp, sc, tc.nnp, tc.seccomp)
			}
		})
	}
}

func TestOwnerState(t *testing.T) {
	me := ownerLabel("thishost")
	parts := strings.Split(me, "/")
	tests := []struct {
		name, owner string
		want        ownerStatus
	}{
		{"this process", me, ownerAlive},
		{"another host", "otherhost/" + parts[1] + "/" + parts[2], ownerUnknown},
		{"reused pid", "thishost/" + parts[1] + "/1", ownerDead},
		{"gone pid", "thishost/2147483646/12345", ownerDead},
		{"malformed", "thishost/x/y", ownerUnknown},
		{"empty", "", ownerUnknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ownerState(tc.owner, "thishost"); got != tc.want {
				t.Errorf("ownerState(%q) = %v, want %v", tc.owner, got, tc.want)
			}
		})
	}
}

// TestOwnerHostSeparatesPIDNamespaces: a goalrun in a container on the
// host's network has the host's name but its own pids; neither side may
// judge the other's pid (that removed live runs).
func TestOwnerHostSeparatesPIDNamespaces(t *testing.T) {
	orig := readPIDNamespace
	t.Cleanup(func() { readPIDNamespace = orig })
	for _, tc := range []struct {
		name, ns string
		err      error
		want     string
	}{
		{"the host's namespace", initPIDNamespace, nil, "vm"},
		{"a container's namespace", "pid:[4026532179]", nil, "vm+4026532179"},
		{"unreadable", "", errors.New("no /proc"), "vm"},
		{"unexpected form", "weird", nil, "vm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			readPIDNamespace = func() (string, error) { return tc.ns, tc.err }
			if got := ownerHost("vm"); got != tc.want {
				t.Errorf("ownerHost = %q, want %q", got, tc.want)
			}
		})
	}
	readPIDNamespace = orig
	parts := strings.Split(ownerLabel("vm"), "/")
	if got := ownerState(strings.Join(parts, "/"), "vm+4026532179"); got != ownerUnknown {
		t.Errorf("a host process judged from a host-network container: %v, want unknown", got)
	}
	if got := ownerState("vm+4026532179/1/1", "vm"); got != ownerUnknown {
		t.Errorf("a host-network container's process judged from the host: %v, want unknown", got)
	}
	f := &fakeEngine{running: map[string]bool{"aaaaaaaaaaaaffff": true, "bbbbbbbbbbbbffff": false}}
	seen := map[string]ownerStatus{}
	if got := containerOwnerState(context.Background(), f, "aaaaaaaaaaaa+4026532179/1/5", seen); got != ownerAlive {
		t.Errorf("a running container's goalrun: %v, want alive", got)
	}
	if got := containerOwnerState(context.Background(), f, "bbbbbbbbbbbb+4026532179/1/5", seen); got != ownerDead {
		t.Errorf("a stopped container's goalrun: %v, want dead", got)
	}
}

func TestEngineViewHostPath(t *testing.T) {
	self := &container.InspectResponse{Mounts: []container.MountPoint{
		{Type: mount.TypeBind, Source: "/home/runner/work/repo/repo", Destination: "/github/workspace", RW: true},
		{Type: mount.TypeBind, Source: "/home/runner/work/_temp/_github_home", Destination: "/github/home", RW: true},
		{Type: mount.TypeBind, Source: "/opt/ro", Destination: "/ro", RW: false},
		{Type: mount.TypeVolume, Name: "cache", Source: "/var/lib/docker/volumes/cache/_data", Destination: "/cache", RW: true},
		{Type: mount.TypeTmpfs, Destination: "/tmp", RW: true},
		{Type: mount.TypeBind, Source: "/var/run/docker.sock", Destination: "/var/run/docker.sock", RW: true},
	}}
	tests := []struct {
		name     string
		view     engineView
		path     string
		writable bool
		want     string
		ok       bool
	}{
		{"local engine", engineView{local: true}, "/src/ws", true, "/src/ws", true},
		{"remote engine", engineView{}, "/src/ws", false, "", false},
		{"workspace of a container action", engineView{self: self}, "/github/workspace", true, "/home/runner/work/repo/repo", true},
		{"below a mount", engineView{self: self}, "/github/workspace/sub/dir", true, "/home/runner/work/repo/repo/sub/dir", true},
		{"prefix is not a parent", engineView{self: self}, "/github/workspace2", true, "", false},
		{"read-only mount for reading", engineView{self: self}, "/ro/go", false, "/opt/ro/go", true},
		{"read-only mount refused for writing", engineView{self: self}, "/ro/go", true, "", false},
		{"volume translates to its data path", engineView{self: self}, "/cache/x", true, "/var/lib/docker/volumes/cache/_data/x", true},
		{"tmpfs cannot be shared", engineView{self: self}, "/tmp/goalrun-egress-1", true, "", false},
		{"the image's own files", engineView{self: self}, "/usr/local/bin/goalrun", false, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.view.hostPath(tc.path, tc.writable)
			if got != tc.want || ok != tc.ok {
				t.Errorf("hostPath(%q) = %q, %v; want %q, %v", tc.path, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestStepWorkDirAndNotStarted(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		bad      bool
	}{
		{"", DockerRoot, false}, {".", DockerRoot, false}, {"a/b", DockerRoot + "/a/b", false},
		{"..", "", true}, {"/etc", "", true}, {"a/../../b", "", true},
	} {
		got, err := stepWorkDir(DockerRoot, tc.in)
		if (err != nil) != tc.bad || got != tc.want || (tc.bad && !errors.Is(err, ErrNotStarted)) {
			t.Errorf("stepWorkDir(%q) = %q, %v", tc.in, got, err)
		}
	}
	out := func(s string) Output { return Output{Tail: []byte(s), Bytes: int64(len(s))} }
	for _, tc := range []struct {
		name string
		res  Result
		want bool
	}{
		{"sentinel", Result{ExitCode: 127, Stderr: out(notStartedPrefix + "nope\n")}, true},
		{"program printed the same and more", Result{ExitCode: 127, Stderr: out("x\n" + notStartedPrefix + "nope\n")}, false},
		{"sh: not found inside a script", Result{ExitCode: 127, Stderr: out("sh: foo: not found\n")}, false},
		{"runtime refused", Result{ExitCode: 126, Stdout: out("OCI runtime exec failed: exec failed: exec: \"sh\": executable file not found in $PATH: unknown\r\n")}, true},
		{"missing working directory", Result{ExitCode: 126, Stdout: out("OCI runtime exec failed: exec failed: unable to start container process: chdir to cwd (\"/workspace/x\") set in config.json failed: no such file or directory: unknown\r\n")}, true},
		{"ordinary failure", Result{ExitCode: 1, Stderr: out(notStartedPrefix + "x\n")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := errors.Is(notStarted(tc.res, "prog"), ErrNotStarted); got != tc.want {
				t.Errorf("notStarted = %v, want %v", got, tc.want)
			}
		})
	}
	// runc's init dying (out of memory or pids) is a failure of the
	// machinery, not a missing program: the loop must not report the
	// agent as not found.
	initDied := Result{ExitCode: 126, Stdout: out("OCI runtime exec failed: exec failed: unable to start container process: read init-p: connection reset by peer: unknown\r\n")}
	err := notStarted(initDied, "claude")
	var se *startError
	if err == nil || errors.Is(err, ErrNotStarted) || !errors.As(err, &se) {
		t.Errorf("init-p failure: %v, want a startError that is not ErrNotStarted", err)
	}
}

func TestImageFilesAndHash(t *testing.T) {
	if _, err := os.Stat("/usr/bin/busybox"); err != nil {
		t.Skip("busybox-static not installed (/usr/bin/busybox): the image builder needs it")
	}
	spec := ImageSpec{Files: map[string]string{"/opt/x/hello": writeTemp(t, "hello")}}
	files, err := imageFiles(spec)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]imageFile{}
	for _, f := range files {
		names[f.name] = f
	}
	for _, want := range []string{"/bin/busybox", "/bin/sh", "/bin/ls", "/usr/bin/env", "/etc/passwd", "/etc/group", "/tmp", "/opt", "/opt/x", "/opt/x/hello", DockerRoot, DockerHome} {
		if _, ok := names[want]; !ok {
			t.Errorf("image lacks %s", want)
		}
	}
	if !strings.Contains(string(names["/etc/passwd"].data), "sandbox:x:1000:1000:") {
		t.Errorf("passwd lacks the uid 1000 user: %q", names["/etc/passwd"].data)
	}
	if names["/tmp"].mode != 0o1777 {
		t.Errorf("/tmp mode %o", names["/tmp"].mode)
	}
	if !sort.SliceIsSorted(files, func(i, j int) bool { return files[i].name < files[j].name }) {
		t.Error("files are not in a stable order")
	}
	h1, _ := hashImage(files, strings.Join(imageChanges(ImageSpec{}), "\n"))
	h2, _ := hashImage(files, strings.Join(imageChanges(ImageSpec{}), "\n"))
	spec.UID = 1001
	files2, _ := imageFiles(spec)
	h3, _ := hashImage(files2, strings.Join(imageChanges(ImageSpec{}), "\n"))
	if h1 != h2 || h1 == h3 {
		t.Errorf("hash must be stable and follow the content: %s %s %s", h1, h2, h3)
	}
	if _, err := imageFiles(ImageSpec{Busybox: "/nonexistent/busybox"}); err == nil || !strings.Contains(err.Error(), "busybox-static") {
		t.Errorf("a missing busybox must suggest busybox-static: %v", err)
	}
}

func writeTemp(t *testing.T, body string) string {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// fakeEngine implements the few DockerAPI calls reap makes; any other call
// panics (the embedded interface is nil).
type fakeEngine struct {
	DockerAPI
	containers []container.Summary
	networks   []network.Summary
	volumes    []*volume.Volume
	running    map[string]bool // container id → running, for owner checks
	removed    []string
}

func (f *fakeEngine) ContainerList(context.Context, container.ListOptions) ([]container.Summary, error) {
	return f.containers, nil
}
func (f *fakeEngine) ContainerRemove(_ context.Context, id string, _ container.RemoveOptions) error {
	f.removed = append(f.removed, "container "+id)
	return nil
}
func (f *fakeEngine) NetworkList(context.Context, network.ListOptions) ([]network.Summary, error) {
	return f.networks, nil
}
func (f *fakeEngine) NetworkRemove(_ context.Context, id string) error {
	f.removed = append(f.removed, "network "+id)
	return nil
}
func (f *fakeEngine) VolumeList(context.Context, volume.ListOptions) (volume.ListResponse, error) {
	return volume.ListResponse{Volumes: f.volumes}, nil
}
func (f *fakeEngine) VolumeRemove(_ context.Context, id string, _ bool) error {
	f.removed = append(f.removed, "volume "+id)
	return nil
}
func (f *fakeEngine) ContainerInspect(_ context.Context, id string) (container.InspectResponse, error) {
	for full, run := range f.running {
		if strings.HasPrefix(full, id) {
			return container.InspectResponse{ContainerJSONBase: &container.ContainerJSONBase{ID: full, State: &container.State{Running: run}}}, nil
		}
	}
	return container.InspectResponse{}, errdefs.NotFound(errors.New("no such container"))
}

func TestReapDecisions(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	me := ownerLabel("thishost")
	parts := strings.Split(me, "/")
	deadHere := "thishost/2147483646/1"
	reusedPid := "thishost/" + parts[1] + "/1"
	liveCtr, deadCtr, goneCtr := "aaaaaaaaaaaa", "bbbbbbbbbbbb", "cccccccccccc"
	old := now.Add(-2 * time.Hour)
	fresh := now.Add(-time.Minute)
	c := func(id, owner string, created time.Time, extra ...string) container.Summary {
		l := map[string]string{LabelRun: "r-" + id, LabelOwner: owner}
		if len(extra) == 2 {
			l[extra[0]] = extra[1]
		}
		return container.Summary{ID: id + "0000000000000000", Labels: l, Created: created.Unix()}
	}
	f := &fakeEngine{
		running: map[string]bool{liveCtr + "ffff": true, deadCtr + "ffff": false},
		containers: []container.Summary{
			c("live-mine-old", me, old),
			c("dead-here-fresh", deadHere, fresh),
			c("reused-pid", reusedPid, fresh),
			c("elsewhere-old", "otherhost/1/1", old),
			c("elsewhere-fresh", "otherhost/1/1", fresh),
			c("elsewhere-old-not-expired", "otherhost/1/1", old, LabelExpires, fmt.Sprint(now.Add(time.Hour).Unix())),
			c("elsewhere-fresh-expired", "otherhost/1/1", fresh, LabelExpires, fmt.Sprint(now.Add(-time.Second).Unix())),
			c("in-live-container", liveCtr+"/7/1", old),
			c("in-stopped-container", deadCtr+"/7/1", fresh),
			// A 12-hex host name that is no container here: goalrun in a
			// container of another Engine (DOCKER_HOST pointing at a shared
			// one) — unknown, judged by age, never taken for dead.
			c("in-gone-container", goneCtr+"/7/1", fresh),
			c("gone-container-old", goneCtr+"/8/1", old),
			c("no-owner-old", "", old),
		},
		networks: []network.Summary{
			{ID: "n1", Name: "net-dead", Labels: map[string]string{LabelRun: "r", LabelOwner: deadHere}, Created: fresh},
			{ID: "n2", Name: "net-live", Labels: map[string]string{LabelRun: "r", LabelOwner: me}, Created: old},
		},
		volumes: []*volume.Volume{
			{Name: "vol-old", Labels: map[string]string{LabelRun: "r", LabelOwner: "otherhost/1/1"}, CreatedAt: old.Format(time.RFC3339)},
			{Name: "vol-fresh", Labels: map[string]string{LabelRun: "r", LabelOwner: "otherhost/1/1"}, CreatedAt: fresh.Format(time.RFC3339)},
		},
	}
	// Egress socket folders, in a folder of the test's own: reap must
	// never look at the real temporary folder, where live runs of other
	// goalrun processes keep theirs. Their modification time is the real
	// now, two years before the fake one: old.
	tmp := t.TempDir()
	dir := func(name string, content []byte) string {
		p := filepath.Join(tmp, "goalrun-egress-"+name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if content != nil {
			if err := os.WriteFile(filepath.Join(p, ownerFile), content, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	dir("mine", ownerFileContent(me, ""))
	deadDir := dir("dead-here", ownerFileContent(deadHere, ""))
	dir("elsewhere-not-expired", ownerFileContent("otherhost/1/1", fmt.Sprint(now.Add(time.Hour).Unix())))
	expiredDir := dir("elsewhere-expired", ownerFileContent("otherhost/1/1", fmt.Sprint(now.Add(-time.Second).Unix())))
	oldDir := dir("elsewhere-old-no-expiry", ownerFileContent("otherhost/1/1", ""))
	noOwnerDir := dir("no-owner-file", nil)
	// goalrun's other folders (MkdirOwned): a baseline copy of a dead run
	// goes, a live one stays; a folder without an owner file (a demo's
	// workspace) stays; so does one whose owner file another user wrote.
	other := func(name string, content []byte, uid int) string {
		p := filepath.Join(tmp, name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if content != nil {
			if err := os.WriteFile(filepath.Join(p, ownerFile), content, 0o600); err != nil {
				t.Fatal(err)
			}
			if uid != os.Getuid() {
				if err := os.Chown(filepath.Join(p, ownerFile), uid, uid); err != nil {
					t.Fatal(err)
				}
			}
		}
		return p
	}
	deadBaseline := other("goalrun-baseline-dead", ownerFileContent(deadHere, ""), os.Getuid())
	other("goalrun-baseline-mine", ownerFileContent(me, ""), os.Getuid())
	other("goalrun-demo-kept", nil, os.Getuid())
	if os.Getuid() == 0 {
		other("goalrun-baseline-not-mine", ownerFileContent(deadHere, ""), 4242)
	}
	// The check views' folders, in goalrun's cache folder: a dead run's
	// goes, with what a check left unreadable and unwritable in it; a live
	// run's stays.
	views := t.TempDir()
	viewDir := func(name, owner string) string {
		p := filepath.Join(views, name)
		locked := filepath.Join(p, "v0", "upper", "locked")
		if err := os.MkdirAll(filepath.Join(locked, "inner"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(locked, "inner", "f"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{filepath.Join(locked, "inner"), locked} {
			if err := os.Chmod(d, 0); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(p, ownerFile), ownerFileContent(owner, ""), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	deadViews := viewDir("goalrun-views-dead", deadHere)
	liveViews := viewDir("goalrun-views-mine", me)
	t.Cleanup(func() { _ = removeTree(liveViews) })
	rep, err := reap(context.Background(), f, 30*time.Minute, "thishost", now, tmp, views)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(liveViews); err != nil {
		t.Errorf("a live run's views folder was removed: %v", err)
	}
	want := []string{
		"container dead-here-fr", "container reused-pid00", "container elsewhere-ol", "container elsewhere-fr",
		"container in-stopped-c", "container gone-contain", "container no-owner-old",
		"network n1", "volume vol-old",
	}
	wantDirs := []string{deadDir, expiredDir, oldDir, noOwnerDir, deadBaseline, deadViews}
	sort.Strings(wantDirs)
	gotDirs := append([]string(nil), rep.Dirs...)
	sort.Strings(gotDirs)
	if !reflect.DeepEqual(gotDirs, wantDirs) {
		t.Errorf("removed folders:\n%s\nwant:\n%s", strings.Join(gotDirs, "\n"), strings.Join(wantDirs, "\n"))
	}
	for _, d := range wantDirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there: %v", filepath.Base(d), err)
		}
	}
	var got []string
	for _, r := range f.removed {
		kind, id, _ := strings.Cut(r, " ")
		if kind == "container" {
			id = id[:12]
		}
		got = append(got, kind+" "+id)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("removed:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if rep.Total() != len(want)+len(wantDirs) {
		t.Errorf("report total %d, want %d", rep.Total(), len(want)+len(wantDirs))
	}
}

func TestRepoRootAbove(t *testing.T) {
	base := t.TempDir()
	mk := func(p string) string {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(base, p), 0o755); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(base, p)
	}
	mk("repo/.git")
	mk("repo/services/api")
	mk("plain/dir")
	mk("wt/sub")
	os.WriteFile(filepath.Join(base, "wt", ".git"), []byte("gitdir: /elsewhere\n"), 0o644)
	mk("nested/.git")
	mk("nested/inner/.git")
	mk("nested/inner/pkg")
	for _, tc := range []struct{ ws, want string }{
		{"repo/services/api", "repo"},
		{"repo/services", "repo"},
		{"repo", ""},
		{"plain/dir", ""},
		{"wt/sub", "wt"},
		{"nested/inner/pkg", "nested/inner"},
		{"nested/inner", ""},
	} {
		want := ""
		if tc.want != "" {
			want = filepath.Join(base, tc.want)
		}
		if got := repoRootAbove(filepath.Join(base, tc.ws)); got != want {
			t.Errorf("repoRootAbove(%s) = %q, want %q", tc.ws, got, want)
		}
	}
}

// A folder or file the agent made mode 000 reaches the host with the
// owner's access kept (goalrun is often not root there: it must still
// remove what is inside and copy the tree in next run).
func TestApplyTarKeepsOwnerAccess(t *testing.T) {
	ws := t.TempDir()
	tr := tarOf(t,
		entry{name: "./", typ: tar.TypeDir, mode: 0o755},
		entry{name: "./zdir/", typ: tar.TypeDir, mode: 0o1000},
		entry{name: "./zdir/q", typ: tar.TypeReg, body: "q\n", mode: 0o6000},
		entry{name: "./ro", typ: tar.TypeReg, body: "r\n", mode: 0o444},
	)
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := applyTar(root, tr, nil); err != nil {
		t.Fatalf("applyTar: %v", err)
	}
	for rel, want := range map[string]os.FileMode{"zdir": os.ModeDir | 0o700, "zdir/q": 0o400, "ro": 0o444} {
		st, err := os.Lstat(filepath.Join(ws, rel))
		if err != nil || st.Mode() != want {
			t.Errorf("%s: mode %v, %v; want %v", rel, st.Mode(), err, want)
		}
	}
}

// copyOutContext outlives the caller's cancellation by apiTimeout at most,
// and without one lasts the step's timeout.
func TestCopyOutContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	octx, ocancel := copyOutContext(ctx, time.Hour)
	defer ocancel()
	dl, ok := octx.Deadline()
	if !ok || time.Until(dl) < 59*time.Minute {
		t.Fatalf("deadline %v, %v; want the step's hour", dl, ok)
	}
	cancel()
	if octx.Err() != nil {
		t.Fatal("the copy-out was cut by the interrupt itself; it must get apiTimeout more")
	}
	ocancel()
	if octx.Err() == nil {
		t.Fatal("cancel did not end the copy-out context")
	}
}

func TestExtraMounts(t *testing.T) {
	ms := []container.MountPoint{
		{Type: mount.TypeBind, Source: "/home/u/proj", Destination: "/workspace", RW: true},
		{Type: mount.TypeBind, Source: "/usr/local/go", Destination: "/usr/local/go", RW: false},
		{Type: mount.TypeVolume, Name: "goalrun-x-relay", Destination: "/.goalrun", RW: false},
		{Type: mount.TypeBind, Source: "/srv/data", Destination: "/data", RW: true},
		{Type: mount.TypeTmpfs, Destination: "/tmp", RW: true},
	}
	got := extraMounts(ms, "/workspace")
	want := []string{"/.goalrun:ro", "/data:rw", "/usr/local/go:ro"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("extraMounts = %q, want %q", got, want)
	}
	if got := extraMounts(ms[:1], "/workspace"); got != nil {
		t.Errorf("only the workspace: %q, want none", got)
	}
}

// BenchmarkSpecialBitFiles measures the walk the setuid/setgid sweep does
// after each agent step (bind mode), over the Go toolchain's tree as a
// stand-in for a large workspace (docs/benchmarks.md):
//
//	go test -run '^$' -bench BenchmarkSpecialBitFiles ./sandbox
func BenchmarkSpecialBitFiles(b *testing.B) {
	root := runtime.GOROOT()
	files := 0
	filepath.WalkDir(root, func(string, fs.DirEntry, error) error { files++; return nil })
	for b.Loop() {
		if _, err := specialBitFiles(root, false); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(files), "entries")
}

// Copy-out changes only what the sandbox changed: an untouched file (of
// any size) keeps its inode, links, owner and mode; a chmod of a file with
// other hard links (one outside the workspace) never reaches them; the
// host's FIFOs and sockets, never copied in, are not "deleted"; a large
// file changed at its end comes back whole.
func TestApplyTarTouchesOnlyChanges(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	big := bytes.Repeat([]byte("0123456789abcdef"), (6<<20)/16) // 6 MiB
	write := func(rel string, body []byte, mode os.FileMode) {
		p := filepath.Join(ws, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, body, mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
	}
	write("big.bin", big, 0o644)
	write("big-changed.bin", big, 0o644)
	write("wonly", []byte("w"), 0o200)
	write("ro/f", []byte("f"), 0o444)
	os.Chmod(filepath.Join(ws, "ro"), 0o555)
	defer os.Chmod(filepath.Join(ws, "ro"), 0o755)
	if err := os.Link(filepath.Join(ws, "big.bin"), filepath.Join(ws, "big-link")); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(outside, "private.key")
	os.WriteFile(key, []byte("secret"), 0o600)
	if err := os.Link(key, filepath.Join(ws, "linked.key")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(ws, "mypipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	bigInfo, _ := os.Stat(filepath.Join(ws, "big.bin"))
	changed := append(bytes.Clone(big[:len(big)-4]), []byte("END!")...)

	tr := tarOf(t,
		entry{name: "./", typ: tar.TypeDir, mode: 0o755},
		entry{name: "./big.bin", typ: tar.TypeReg, body: string(big)},
		entry{name: "./big-link", typ: tar.TypeLink, link: "./big.bin"},
		entry{name: "./big-changed.bin", typ: tar.TypeReg, body: string(changed)},
		entry{name: "./wonly", typ: tar.TypeReg, body: "w", mode: 0o200},
		entry{name: "./ro/", typ: tar.TypeDir, mode: 0o555},
		entry{name: "./ro/f", typ: tar.TypeReg, body: "f", mode: 0o444},
		entry{name: "./linked.key", typ: tar.TypeReg, body: "secret", mode: 0o666},
	)
	copyOutTar(t, ws, tr)
	if st, err := os.Stat(filepath.Join(ws, "big.bin")); err != nil || !os.SameFile(st, bigInfo) {
		t.Errorf("an untouched 6 MiB file was rewritten (%v)", err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "big-changed.bin")); !bytes.Equal(b, changed) {
		t.Errorf("a 6 MiB file changed at its end came back as %d bytes, not the sandbox's", len(b))
	}
	for rel, want := range map[string]os.FileMode{"wonly": 0o200, "ro": os.ModeDir | 0o555, "ro/f": 0o444, "linked.key": 0o666} {
		if st, err := os.Lstat(filepath.Join(ws, rel)); err != nil || st.Mode() != want {
			t.Errorf("%s: %v, %v; want %v", rel, st.Mode(), err, want)
		}
	}
	if st, err := os.Stat(key); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the chmod reached a hard-linked file outside the workspace: %v %v", st.Mode(), err)
	}
	if st, err := os.Lstat(filepath.Join(ws, "mypipe")); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the host's FIFO was removed: %v", err)
	}
}
