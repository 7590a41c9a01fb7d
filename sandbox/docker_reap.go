package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/errdefs"
)

// ReapReport lists what Reap removed: container ids (12 characters), network
// and volume names, and egress socket folders.
type ReapReport struct {
	Containers, Networks, Volumes, Dirs []string
}

// Total is the number of objects removed.
func (r ReapReport) Total() int {
	return len(r.Containers) + len(r.Networks) + len(r.Volumes) + len(r.Dirs)
}

// Reap removes what dead goalrun runs left behind: containers (paused
// ones too), networks and volumes labelled goalrun.run (LabelRun), and
// goalrun's own folders in os.TempDir() — egress sockets, baseline copies
// (MkdirOwned) — whose owner file holds the same owner and expiry. An object is a leftover when the goalrun process
// that made it (LabelOwner) is known to be gone: it ran on this host and its
// pid no longer runs (or was reused), or it ran in a container of this
// Engine (a container-action run; its host name is the container's short
// id) that no longer runs. When the owner cannot be checked (another
// machine), the object is a leftover once its run expired (LabelExpires,
// set from Config.Lifetime) or, without that label, once it is older than
// olderThan (pass the run timeout). Objects of live goalrun processes are
// never touched, whatever their age. cmd calls it at start-up, so a run
// killed with SIGKILL is cleaned by the next one.
//
// With a nil cli it removes goalrun's folders only (a run without an
// Engine). It returns what it removed and the errors (listing or
// removing), having tried everything else.
func Reap(ctx context.Context, cli DockerAPI, olderThan time.Duration) (ReapReport, error) {
	cli = bounded(cli)
	host, _ := os.Hostname()
	if h := os.Getenv("HOSTNAME"); h != "" {
		host = h
	}
	return reap(ctx, cli, olderThan, ownerHost(host), time.Now(), os.TempDir(), reapViewsBase(os.LookupEnv))
}

// initPIDNamespace is /proc/self/ns/pid in Linux's initial PID namespace
// (PROC_PID_INIT_INO = 0xEFFFFFFC, include/linux/proc_ns.h).
const initPIDNamespace = "pid:[4026531836]"

// readPIDNamespace reads this process's PID namespace (tests replace it).
var readPIDNamespace = func() (string, error) { return os.Readlink("/proc/self/ns/pid") }

// ownerHost is the host part of this process's owner label: the host name,
// plus "+<PID namespace inode>" when goalrun runs in a PID namespace other
// than the host's (a container). A container on the host's network also
// has the host's name (docker run --network host) but its own pids: without
// the namespace, a Reap on one side would look the other side's pid up in
// the wrong /proc, find nothing and remove a live run. When the namespace
// cannot be read it is the host name alone.
func ownerHost(hostname string) string {
	ns, err := readPIDNamespace()
	if err != nil || ns == initPIDNamespace || !strings.HasPrefix(ns, "pid:[") {
		return hostname
	}
	return hostname + "+" + strings.TrimSuffix(strings.TrimPrefix(ns, "pid:["), "]")
}

// reap is Reap with the world passed in: host is this process's owner host
// (ownerHost), now the clock, dirs where goalrun's folders (egress sockets,
// baseline copies, check views) are looked for.
func reap(ctx context.Context, cli reapAPI, olderThan time.Duration, host string, now time.Time, dirs ...string) (ReapReport, error) {
	var rep ReapReport
	var errs []error
	containerOwners := map[string]ownerStatus{}
	leftover := func(labels map[string]string, created time.Time) bool {
		st := ownerState(labels[LabelOwner], host)
		if st == ownerUnknown && cli != nil {
			st = containerOwnerState(ctx, cli, labels[LabelOwner], containerOwners)
		}
		switch st {
		case ownerAlive:
			return false
		case ownerDead:
			return true
		}
		if exp, err := strconv.ParseInt(labels[LabelExpires], 10, 64); err == nil {
			return now.Unix() > exp
		}
		return !created.IsZero() && now.Sub(created) > olderThan
	}
	if cli != nil {
		errs = append(errs, reapEngine(ctx, cli, leftover, &rep)...)
	}
	// goalrun's own folders: egress sockets, baseline copies (MkdirOwned),
	// check views — this user's only, and only those whose owner file names a goalrun
	// (a goalrun-demo-* workspace has none and is the user's to keep).
	var found []string
	for _, d := range dirs {
		if d != "" {
			m, _ := filepath.Glob(filepath.Join(d, "goalrun-*"))
			found = append(found, m...)
		}
	}
	for _, dir := range found {
		st, err := os.Lstat(dir)
		if err != nil || !st.IsDir() {
			continue
		}
		b, err := readOwnerFile(dir)
		if err != nil && (!errors.Is(err, fs.ErrNotExist) || !strings.HasPrefix(filepath.Base(dir), "goalrun-egress-")) {
			continue // an egress folder of an older goalrun has none: judged by age
		}
		if !leftover(parseOwnerFile(b), st.ModTime()) {
			continue
		}
		if err := removeTree(dir); err != nil {
			errs = append(errs, fmt.Errorf("sandbox: reap: removing %s: %w", dir, err))
			continue
		}
		rep.Dirs = append(rep.Dirs, dir)
	}
	return rep, errors.Join(errs...)
}

// reapAPI is what Reap asks of the Engine: dead runs' containers,
// networks and volumes, listed and removed.
type reapAPI interface {
	EngineContainers
	EngineNetworks
	EngineVolumes
}

// reapEngine removes the containers, networks and volumes of dead runs
// (leftover decides) and records them in rep; it returns the errors.
func reapEngine(ctx context.Context, cli reapAPI, leftover func(map[string]string, time.Time) bool, rep *ReapReport) []error {
	var errs []error
	f := filters.NewArgs(filters.Arg("label", LabelRun))

	cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		errs = append(errs, fmt.Errorf("sandbox: reap: listing containers: %w", err))
	}
	for _, c := range cs {
		if !leftover(c.Labels, time.Unix(c.Created, 0)) {
			continue
		}
		if err := cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("sandbox: reap: removing container %.12s: %w", c.ID, err))
			continue
		}
		rep.Containers = append(rep.Containers, c.ID[:min(12, len(c.ID))])
	}

	ns, err := cli.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		errs = append(errs, fmt.Errorf("sandbox: reap: listing networks: %w", err))
	}
	for _, n := range ns {
		if !leftover(n.Labels, n.Created) {
			continue
		}
		if err := cli.NetworkRemove(ctx, n.ID); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("sandbox: reap: removing network %s: %w", n.Name, err))
			continue
		}
		rep.Networks = append(rep.Networks, n.Name)
	}

	vs, err := cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		errs = append(errs, fmt.Errorf("sandbox: reap: listing volumes: %w", err))
	}
	for _, v := range vs.Volumes {
		created, _ := time.Parse(time.RFC3339, v.CreatedAt)
		if !leftover(v.Labels, created) {
			continue
		}
		if err := cli.VolumeRemove(ctx, v.Name, true); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("sandbox: reap: removing volume %s: %w", v.Name, err))
			continue
		}
		rep.Volumes = append(rep.Volumes, v.Name)
	}
	return errs
}

// readOwnerFile reads dir's owner file, never through a link and never
// more than a page. A file this user did not write (another user's folder
// named like goalrun's) is an error: such a folder is never removed on its
// owner's behalf. (The folder itself may belong to the egress relay's
// user; the owner file is goalrun's.)
func readOwnerFile(dir string) ([]byte, error) {
	f, err := os.OpenFile(filepath.Join(dir, ownerFile), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return nil, errors.New("written by another user")
	}
	return io.ReadAll(io.LimitReader(f, 4096))
}

// MkdirOwned makes a fresh folder in dir (os.TempDir() when "") named
// prefix and a random suffix (prefix must start with "goalrun-"), with an
// owner file naming this goalrun process, so that Reap removes it once the
// process is gone: a goalrun killed outright (SIGKILL) leaves no copy of a
// workspace behind for good. The folder is 0700.
func MkdirOwned(dir, prefix string) (string, error) {
	if !strings.HasPrefix(prefix, "goalrun-") {
		return "", fmt.Errorf("sandbox: MkdirOwned: prefix %q must start with goalrun- (Reap looks for those)", prefix)
	}
	if dir == "" {
		dir = os.TempDir()
	}
	d, err := os.MkdirTemp(dir, prefix)
	if err != nil {
		return "", err
	}
	host, _ := os.Hostname()
	if h := os.Getenv("HOSTNAME"); h != "" {
		host = h
	}
	if err := os.WriteFile(filepath.Join(d, ownerFile), ownerFileContent(ownerLabel(ownerHost(host)), ""), 0o600); err != nil {
		os.RemoveAll(d)
		return "", err
	}
	return d, nil
}

// ownerFileContent is what an egress socket folder's owner file holds: the
// owner label's value on the first line and, when the run's lifetime is
// known, the expiry (LabelExpires's value) on the second.
func ownerFileContent(owner, expires string) []byte {
	if expires == "" {
		return []byte(owner + "\n")
	}
	return []byte(owner + "\n" + expires + "\n")
}

// parseOwnerFile reads an owner file back as labels (LabelOwner and, when
// present, LabelExpires); a missing or empty file gives an empty owner.
func parseOwnerFile(b []byte) map[string]string {
	owner, rest, _ := strings.Cut(string(b), "\n")
	labels := map[string]string{LabelOwner: strings.TrimSpace(owner)}
	if exp, _, _ := strings.Cut(rest, "\n"); strings.TrimSpace(exp) != "" {
		labels[LabelExpires] = strings.TrimSpace(exp)
	}
	return labels
}

// containerID12 matches the host name Docker gives a container: the first
// 12 hex digits of its id.
var containerID12 = regexp.MustCompile(`^[0-9a-f]{12}$`)

// containerOwnerState checks an owner whose host name is a container's short
// id on this Engine: stopped means dead; running means alive (its pid
// cannot be checked from here). No such container is unknown, never dead:
// the owner may be a goalrun in a container of another Engine, or on a
// host whose name merely looks like an id, sharing this Engine through
// DOCKER_HOST (then the expiry label decides). Results are cached per host
// in seen.
func containerOwnerState(ctx context.Context, cli EngineContainers, owner string, seen map[string]ownerStatus) ownerStatus {
	host, _, _ := strings.Cut(owner, "/")
	host, _, _ = strings.Cut(host, "+") // the PID namespace (ownerHost)
	if !containerID12.MatchString(host) {
		return ownerUnknown
	}
	if st, ok := seen[host]; ok {
		return st
	}
	st := ownerUnknown
	c, err := cli.ContainerInspect(ctx, host)
	switch {
	case err == nil && c.ContainerJSONBase != nil && strings.HasPrefix(c.ID, host) && c.State != nil:
		st = ownerDead
		if c.State.Running {
			st = ownerAlive
		}
	}
	seen[host] = st
	return st
}

// ownerLabel is the LabelOwner value of this process:
// "<hostname>/<pid>/<start time in clock ticks since boot>".
func ownerLabel(hostname string) string {
	pid := os.Getpid()
	return fmt.Sprintf("%s/%d/%d", hostname, pid, procStart(pid))
}

type ownerStatus int

const (
	ownerUnknown ownerStatus = iota // elsewhere, or unreadable: decide by age
	ownerAlive
	ownerDead
)

// ownerState tells whether the goalrun process named by an owner label still
// runs; only a process on this host can be checked. A reused pid is told
// apart by its start time.
func ownerState(owner, host string) ownerStatus {
	parts := strings.Split(owner, "/")
	if len(parts) != 3 || parts[0] == "" || parts[0] != host {
		return ownerUnknown
	}
	pid, err1 := strconv.Atoi(parts[1])
	start, err2 := strconv.ParseUint(parts[2], 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 {
		return ownerUnknown
	}
	now := procStart(pid)
	if now == 0 {
		if _, err := os.Stat("/proc/self/stat"); err != nil {
			return ownerUnknown // no /proc here: cannot tell
		}
		return ownerDead
	}
	if start != 0 && now != start {
		return ownerDead // the pid was reused
	}
	return ownerAlive
}

// procStart returns the start time of pid in clock ticks since boot
// (/proc/<pid>/stat, field 22), or 0 when the process does not exist or
// /proc is unavailable.
func procStart(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(s[i+1:])
	// fields[0] is field 3 (state); field 22 is fields[19].
	if len(fields) < 20 {
		return 0
	}
	v, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return 0
	}
	// A zombie still has its entry; it is dead for our purposes.
	if fields[0] == "Z" {
		return 0
	}
	return v
}

// reapViewsBase is the folder of the check views' folders that Reap looks
// in, links resolved, or "" when there is none or another user could
// change it (privateFolder): goalrun made no views there (viewsHostBase),
// and what is there is not its to remove.
func reapViewsBase(lookup func(string) (string, bool)) string {
	base := viewsBase(lookup)
	if base == "" {
		return ""
	}
	real, err := filepath.EvalSymlinks(base)
	if err != nil || privateFolder(real) != nil {
		return ""
	}
	return real
}
