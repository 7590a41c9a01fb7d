// Package workspace follows the tree the agent can write through a run:
// it snapshots the tree before the first agent turn and after each one,
// reading it only through os.Root and never running a program in it, and
// compares two snapshots — the changed files, their line diff and the hash
// of a canonical patch, git's executable configuration, and, by package
// grounding's rules, the risky paths and the check's own files. The loop
// (package goal) turns the result into the document's "changes" block.
package workspace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/goalrun/goalrun/grounding"
)

// DefaultConfigFile is the configuration file goalrun reads from the
// workdir when no --config names one: ".goalrun.yml".
const DefaultConfigFile = ".goalrun.yml"

// Bounds of the workspace tracker (Options' zero values).
const (
	// DefaultMaxFileBytes is the largest file the tracker reads to hash it:
	// 8 MiB. Larger files are compared by size, mode, inode and change
	// time only, and reported as changed without a line count.
	DefaultMaxFileBytes = 8 << 20
	// DefaultDiffFileBytes is the largest text file that is line-diffed for
	// insertions, deletions and the patch: 1 MiB.
	DefaultDiffFileBytes = 1 << 20
	// DefaultMaxFiles bounds the entries of one snapshot: 200000 files.
	// Beyond it the snapshot is marked truncated and the rest is not seen.
	DefaultMaxFiles = 200000
	// DefaultBaselineStoreBytes bounds the baseline copies of text files
	// kept (in a private temporary directory) to diff against: 1 GiB.
	DefaultBaselineStoreBytes = 1 << 30
	// riskyKeep bounds the risky paths the tracker keeps (the document
	// shows fewer of them and counts the rest).
	riskyKeep = 256
)

// Evidence receives the changed paths of each diff: a workspace-relative
// slash path → StatusAdded, StatusModified or StatusDeleted.
// *grounding.Evidence satisfies it (the claims analysis judges file claims
// against the real diff).
type Evidence interface {
	SetChanged(changed map[string]string)
}

// Options configures a Tracker.
type Options struct {
	// Check is the --until command; the workspace files it names (a script)
	// and the configuration its test runner reads are the check's files.
	Check string
	// JudgeCmd is the --judge-cmd command: its files count as the check's
	// too (an agent that rewrites the judge's script forges its opinion).
	JudgeCmd string
	// Evidence, when set, receives the changed paths each time Diff is
	// computed, so file claims are judged against the real diff.
	Evidence Evidence
	// MaxFileBytes, DiffFileBytes, MaxFiles and BaselineStoreBytes override
	// the Default* bounds (0 = default).
	MaxFileBytes, DiffFileBytes int64
	MaxFiles                    int
	BaselineStoreBytes          int64
	// TempDir is where the baseline copies are kept ("" = os.TempDir()).
	TempDir string
	// MkdirTemp makes the private folder of the baseline copies in TempDir
	// ("" = os.TempDir()), its name starting with prefix, as os.MkdirTemp
	// does; nil is os.MkdirTemp. The loop passes sandbox.MkdirOwned, so a
	// goalrun killed outright leaves the copies to its reaper.
	MkdirTemp func(dir, prefix string) (string, error)
	// Root, when set, is the host folder the sandbox let the agent write
	// when it is wider than the workspace: sandbox.Posture.Mount, the
	// repository root a subfolder workspace's mount was widened to. The
	// tracker then covers all of Root and its paths (FileChange.Path, the
	// risky paths, the patch) are relative to Root, not to the workspace;
	// the check's words are still resolved from the workspace ("../test.sh"
	// names Root's test.sh). "" or the workspace itself: the workspace
	// alone. Baseline fails when the workspace is not inside Root.
	Root string
	// Ignore are files goalrun itself writes during the run (its --output
	// document, its --events log): slash paths relative to the tracked root
	// (Root when it is wider than the workspace, else the workspace). They
	// are goalrun's, not the agent's changes, and are left out of every
	// snapshot (so they never count as changed nor defeat the no-progress
	// fingerprint). Only an entry at exactly such a path that is not a
	// folder is left out: an agent that makes a folder there still shows
	// everything in it. Baseline fails for a path that is absolute, empty,
	// the root itself or leaves it.
	Ignore []string
	// PatchBytes, when > 0, keeps the first PatchBytes bytes of the canonical
	// unified diff in Diff.Patch (for a report people read); the
	// hash always covers all of it.
	PatchBytes int
	// OwnFiles are goalrun's own files by identity, for files in a tree
	// the agent can write: like Ignore, but an entry at such a path is left
	// out only while it is the very file goalrun opened (its device and
	// inode). Anything else there — the agent deleted goalrun's document
	// and wrote its own, or put a link or a folder in its place — is the
	// agent's change like any other, and a risky one. Baseline fails for a
	// path Ignore would refuse.
	OwnFiles []OwnFile
	// ConfigFiles are goalrun configuration files in the tracked tree that a
	// later run reads (the --config file when it lies in the tree), as slash
	// paths relative to the tracked root; the workspace's .goalrun.yml,
	// which every goalrun run there reads by default, is always one. A new or
	// changed one is a change that makes a program run on the host (it can
	// name the agent command, the sandbox, where the model key goes): it is
	// listed with git's executable configuration (HostCode) and fails the
	// run closed. Paths outside the root are ignored.
	ConfigFiles []string
}

// OwnFile is one of goalrun's own files (Options.OwnFiles): its slash
// path relative to the tracked root and the identity of the file goalrun
// opened there.
type OwnFile struct {
	Path     string
	Dev, Ino uint64
}

// Tracker follows the workspace through a run without ever running
// a program in it (never the host's git): it snapshots the tree before the
// first agent turn and after each turn, reading it only through os.Root,
// regular files only, size-capped, never following a symlink and never
// opening a special file or a new hard link, and computes the run's changes
// — files changed, insertions, deletions, risky paths, whether the check's
// own files were modified, and the SHA-256 of a canonical unified diff.
//
// It is safe for concurrent use; Close removes its baseline copies.
type Tracker struct {
	dir string // the workspace, as given
	opt Options
	// top is the folder scanned (the workspace, or Options.Root) and
	// sub the workspace's slash path inside it ("" when they are the same);
	// both are set by Baseline.
	top, sub string
	// open is how a file is opened for reading; tests wrap it to prove what
	// is never opened.
	open func(r *os.Root, name string) (*os.File, error)
	// patchTee, when set (tests), also receives the canonical patch.
	patchTee io.Writer

	mu         sync.Mutex
	base, last *snapshot
	store      *blobStore
	check      *grounding.Check // the check's files and runners; set by Baseline
	diff       *Diff
	ignore     map[string]bool    // Options.Ignore, cleaned; set by Baseline
	own        map[string]OwnFile // Options.OwnFiles by cleaned path; set by Baseline
	host       *hostIndex         // git's executable configuration at the baseline
	configs    map[string]bool    // goalrun configuration files (Options.ConfigFiles); set by Baseline
	hostFound  []RiskyPath        // changes to it the last snapshot found
}

// New returns a tracker for the workspace at dir (a host path). Nothing is
// read until Baseline.
func New(dir string, opt Options) *Tracker {
	if opt.MaxFileBytes <= 0 {
		opt.MaxFileBytes = DefaultMaxFileBytes
	}
	if opt.DiffFileBytes <= 0 {
		opt.DiffFileBytes = DefaultDiffFileBytes
	}
	opt.DiffFileBytes = min(opt.DiffFileBytes, opt.MaxFileBytes)
	if opt.MaxFiles <= 0 {
		opt.MaxFiles = DefaultMaxFiles
	}
	if opt.BaselineStoreBytes <= 0 {
		opt.BaselineStoreBytes = DefaultBaselineStoreBytes
	}
	if opt.MkdirTemp == nil {
		opt.MkdirTemp = os.MkdirTemp
	}
	return &Tracker{dir: dir, opt: opt, open: openNoFollow}
}

// openNoFollow opens name read-only inside r without blocking on a FIFO
// and without following a symlink in its last component.
func openNoFollow(r *os.Root, name string) (*os.File, error) {
	return r.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
}

// Baseline snapshots the workspace before the first agent turn, keeping
// copies of its text files to diff against. It returns an error when the
// workspace cannot be read at all.
func (t *Tracker) Baseline(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	top, sub, err := scanRoot(t.dir, t.opt.Root)
	if err != nil {
		return err
	}
	t.top, t.sub = top, sub
	if t.ignore, err = ignoreSet(t.opt.Ignore); err != nil {
		return err
	}
	t.own = map[string]OwnFile{}
	for _, o := range t.opt.OwnFiles {
		set, err := ignoreSet([]string{o.Path})
		if err != nil {
			return err
		}
		for p := range set {
			t.own[p] = o
		}
	}
	t.configs = map[string]bool{joinRel(sub, DefaultConfigFile): true}
	for _, c := range t.opt.ConfigFiles {
		if p := cleanRel(filepath.ToSlash(c)); p != "" {
			t.configs[p] = true
		}
	}
	if t.store == nil {
		st, err := newBlobStore(t.opt.MkdirTemp, t.opt.TempDir, t.opt.BaselineStoreBytes)
		if err != nil {
			return err
		}
		t.store = st
	}
	s, err := t.scan(ctx, nil, true)
	if err != nil {
		return err
	}
	t.base, t.last, t.diff, t.hostFound = s, s, nil, nil
	t.check = grounding.NewCheck(strings.TrimSpace(t.opt.Check+"\n"+t.opt.JudgeCmd), t.sub, s.paths, func(p string) bool {
		e := s.entries[p]
		return e != nil && !e.mode.IsDir()
	})
	root, err := os.OpenRoot(t.top)
	if err != nil {
		return fmt.Errorf("open workspace %s: %w", t.top, err)
	}
	defer root.Close()
	topAbs, err := filepath.Abs(t.top)
	if err == nil {
		if real, rerr := filepath.EvalSymlinks(topAbs); rerr == nil {
			topAbs = real
		}
	}
	t.host = t.indexHost(root, s, topAbs)
	return nil
}

// ignoreSet validates and cleans Options.Ignore.
func ignoreSet(paths []string) (map[string]bool, error) {
	set := make(map[string]bool, len(paths))
	for _, p := range paths {
		c := path.Clean(filepath.ToSlash(p))
		if p == "" || c == "." || !filepath.IsLocal(filepath.FromSlash(c)) {
			return nil, fmt.Errorf("goal: workspace tracker: ignored path %q (Options.Ignore) must name a file inside the tracked root, relative to it", p)
		}
		set[c] = true
	}
	return set, nil
}

// scanRoot returns the folder to scan for the workspace dir and the
// optional wider root (Options.Root), and the workspace's slash path
// inside it ("" when the workspace is scanned itself). Both are compared
// with symlinks resolved, as the sandbox resolves them.
func scanRoot(dir, root string) (top, sub string, err error) {
	if root == "" {
		return dir, "", nil
	}
	real := func(p string) (string, error) {
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", err
		}
		return filepath.EvalSymlinks(abs)
	}
	ws, err := real(dir)
	if err != nil {
		return "", "", fmt.Errorf("goal: workspace tracker: workspace %s: %w", dir, err)
	}
	r, err := real(root)
	if err != nil {
		return "", "", fmt.Errorf("goal: workspace tracker: mount root %s: %w", root, err)
	}
	rel, err := filepath.Rel(r, ws)
	if err != nil || (rel != "." && !filepath.IsLocal(rel)) {
		return "", "", fmt.Errorf("goal: workspace tracker: the workspace %s is not inside the mount root %s; pass the sandbox's mount (sandbox.Posture.Mount) or leave Options.Root empty", dir, root)
	}
	if rel == "." {
		return dir, "", nil
	}
	return r, filepath.ToSlash(rel), nil
}

// AfterTurn snapshots the workspace after agent turn iteration and returns
// its state fingerprint (hex SHA-256 over every path, mode, content hash
// and symlink target): equal fingerprints mean nothing changed.
func (t *Tracker) AfterTurn(ctx context.Context, iteration int) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.base == nil {
		return "", errors.New("goal: workspace tracker: AfterTurn before Baseline")
	}
	s, err := t.scan(ctx, t.last, false)
	if err != nil {
		return "", fmt.Errorf("workspace snapshot after turn %d: %w", iteration, err)
	}
	t.last, t.diff = s, nil
	root, err := os.OpenRoot(t.top)
	if err != nil {
		return "", fmt.Errorf("workspace snapshot after turn %d: %w", iteration, err)
	}
	defer root.Close()
	t.hostFound, _ = t.hostCode(root, t.base, s)
	return s.state, nil
}

// HostCode returns the changes to git's executable configuration that the
// latest snapshot (AfterTurn or Diff) found against the baseline, collapsed
// per folder, at most HostCodeMax, each with why (see hostCode): changes
// that would make git, run later on the host in this tree, run a program
// the agent wrote. Empty when there are none.
func (t *Tracker) HostCode() []RiskyPath {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]RiskyPath(nil), t.hostFound...)
}

// Diff computes the detailed diff between the baseline and the workspace
// now (and hands the changed paths to Options.Evidence).
func (t *Tracker) Diff(ctx context.Context) (*Diff, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.base == nil {
		return nil, errors.New("goal: workspace tracker: no baseline")
	}
	s, err := t.scan(ctx, t.last, false)
	if err != nil {
		return nil, err
	}
	t.last = s
	root, err := os.OpenRoot(t.top)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", t.top, err)
	}
	defer root.Close()
	d := t.compare(ctx, root, t.base, s)
	t.hostFound = d.HostCode
	if t.sub != "" {
		d.Root, d.Workdir = t.top, t.sub
	}
	t.diff = d
	if t.opt.Evidence != nil {
		changed := make(map[string]string, len(d.Files))
		for _, f := range d.Files {
			changed[f.Path] = f.Status
		}
		t.opt.Evidence.SetChanged(changed)
	}
	return d, nil
}

// LastDiff returns the diff the last Changes or Diff computed (nil before
// any): after a run, the run's changes as its document reports them.
func (t *Tracker) LastDiff() *Diff {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.diff
}

// Close removes the baseline copies. It is idempotent.
func (t *Tracker) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.store == nil {
		return nil
	}
	err := t.store.close()
	t.store = nil
	return err
}

// entry is one non-directory in a snapshot.
type entry struct {
	mode   fs.FileMode // type bits and permissions
	size   int64
	hashed bool
	hash   [32]byte
	target string // symlink target
	// unread says why a regular file's content was not read: "too large",
	// "hard link", "unreadable", "changed while read"; "" when it was.
	unread string
	dev    uint64
	ino    uint64
	nlink  uint64
	mtime  int64
	ctime  int64
	stored bool // its content is in the baseline store
	// internal marks git's own database: a path inside a .git directory
	// that gitKeep does not keep (objects, refs, logs, the index, HEAD).
	internal bool
}

// snapshot is the workspace at one moment.
type snapshot struct {
	entries   map[string]*entry
	paths     []string // sorted
	truncated bool
	state     string
}

// gitKeep says which paths inside a .git directory are watched as files of
// the change set (counted, diffed): its config, hooks and info (attributes,
// exclude) — the files that make git run programs or hide files — and the
// same inside each submodule's git directory (modules/NAME/). The rest —
// objects, refs, logs, the index, HEAD — is git's database: watched too,
// but as internal entries, reported only as risky paths (see gitInternal).
func gitKeep(rel string) (keep, descend bool) {
	switch {
	case rel == "config", rel == "hooks", rel == "info", rel == "modules":
		return true, true
	case strings.HasPrefix(rel, "hooks/"), strings.HasPrefix(rel, "info/"):
		return true, true
	case strings.HasPrefix(rel, "modules/"):
		rest := rel[len("modules/"):]
		i := strings.IndexByte(rest, '/')
		if i < 0 {
			return true, true // a submodule's git directory
		}
		return gitKeep(rest[i+1:])
	}
	return false, false
}

// gitInternal reports whether p lies in git's database: inside a .git
// directory but not among what gitKeep keeps.
func gitInternal(p string) bool {
	rel, in := insideGit(p)
	if !in {
		return false
	}
	keep, _ := gitKeep(rel)
	return !keep
}

// insideGit returns the part of p below its innermost ".git" directory
// component and whether there is one.
func insideGit(p string) (string, bool) {
	if strings.HasPrefix(p, ".git/") {
		return p[len(".git/"):], true
	}
	if i := strings.LastIndex(p, "/.git/"); i >= 0 {
		return p[i+len("/.git/"):], true
	}
	return "", false
}

// scan walks the workspace. prev (may be nil) lends content hashes of files
// whose inode, size, mode and change times are unchanged; store keeps
// baseline copies of text files.
func (t *Tracker) scan(ctx context.Context, prev *snapshot, store bool) (*snapshot, error) {
	root, err := os.OpenRoot(t.top)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", t.top, err)
	}
	defer root.Close()
	s := &snapshot{entries: map[string]*entry{}}
	if err := t.walk(ctx, root, s, prev, store); err != nil {
		return nil, fmt.Errorf("walk workspace %s: %w", t.top, err)
	}
	sort.Strings(s.paths)
	s.state = s.fingerprint()
	return s, nil
}

// readDirBatch is how many directory entries are read at a time, so a
// directory with millions of entries never sits in memory at once.
const readDirBatch = 1024

// walk visits the workspace depth first through root: directories are
// read in batches, every entry is lstat'ed through its directory's
// descriptor (never by a host path), and the walk stops at MaxFiles entries (directories count too),
// marking the snapshot truncated. Git's database (gitInternal) has a
// MaxFiles budget of its own, so a large .git never hides the work tree;
// beyond it its entries are left out and the snapshot is marked truncated.
func (t *Tracker) walk(ctx context.Context, root *os.Root, s *snapshot, prev *snapshot, store bool) error {
	stack := []string{"."}
	seen, seenGit := 0, 0
	for len(stack) > 0 {
		dir := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		// The directory as a root of its own: one fstatat per entry below.
		sub, err := root.OpenRoot(dir)
		if err != nil {
			if dir == "." {
				return err
			}
			s.add(dir, &entry{mode: fs.ModeDir, unread: "unreadable"})
			continue
		}
		f, err := sub.Open(".")
		if err != nil {
			sub.Close()
			if dir == "." {
				return err
			}
			s.add(dir, &entry{mode: fs.ModeDir, unread: "unreadable"})
			continue
		}
		closeDir := func() { f.Close(); sub.Close() }
		for {
			ents, rerr := f.ReadDir(readDirBatch)
			for _, d := range ents {
				name := d.Name()
				p := name
				if dir != "." {
					p = dir + "/" + name
				}
				if !d.IsDir() && t.ignore[p] {
					continue // goalrun's own file (Options.Ignore)
				}
				internal := gitInternal(p)
				if internal {
					if seenGit++; seenGit > t.opt.MaxFiles {
						s.truncated = true
						continue
					}
				} else if seen++; seen > t.opt.MaxFiles {
					s.truncated = true
					closeDir()
					return nil
				}
				if (seen+seenGit)%256 == 0 && ctx.Err() != nil {
					closeDir()
					return ctx.Err()
				}
				// A directory opened in a Root lstats its entries through its
				// own descriptor (fstatat) while reading them; Info returns
				// that, never a host-path lstat.
				info, err := d.Info()
				if err != nil {
					continue // vanished meanwhile
				}
				if o, own := t.own[p]; own && !info.IsDir() {
					if st, ok := info.Sys().(*syscall.Stat_t); ok && uint64(st.Dev) == o.Dev && st.Ino == o.Ino {
						continue // goalrun's own file, as opened (Options.OwnFiles)
					}
				}
				if info.IsDir() {
					stack = append(stack, p)
					continue
				}
				e := statEntry(info)
				e.internal = internal
				switch {
				case info.Mode()&fs.ModeSymlink != 0:
					if tgt, err := sub.Readlink(name); err == nil {
						e.target = tgt
					} else {
						e.unread = "unreadable"
					}
				case info.Mode().IsRegular():
					// git's database is hashed (to tell a rewrite with the
					// same content from a change) but never kept to diff.
					t.hashEntry(sub, name, p, e, prev, store && !internal)
				}
				s.add(p, e)
			}
			if rerr != nil {
				if rerr != io.EOF && len(ents) == 0 {
					s.add(dir, &entry{mode: fs.ModeDir, unread: "unreadable"})
				}
				break
			}
		}
		closeDir()
	}
	return nil
}

func (s *snapshot) add(p string, e *entry) {
	s.entries[p] = e
	s.paths = append(s.paths, p)
}

// fingerprint hashes the whole snapshot.
func (s *snapshot) fingerprint() string {
	h := sha256.New()
	for _, p := range s.paths {
		e := s.entries[p]
		fmt.Fprintf(h, "%s\x00%o\x00%d\x00%x\x00%s\x00%s", p, uint32(e.mode), e.size, e.hash, e.target, e.unread)
		if !e.hashed { // content unknown: its identity and times stand in
			fmt.Fprintf(h, "\x00%d/%d/%d/%d", e.dev, e.ino, e.mtime, e.ctime)
		}
		h.Write([]byte{'\n'})
	}
	if s.truncated {
		h.Write([]byte("truncated"))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// statEntry records what lstat said.
func statEntry(info fs.FileInfo) *entry {
	e := &entry{mode: info.Mode(), size: info.Size(), mtime: info.ModTime().UnixNano()}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		e.dev, e.ino, e.nlink = uint64(st.Dev), st.Ino, uint64(st.Nlink)
		e.ctime = st.Ctim.Sec*1e9 + st.Ctim.Nsec
	}
	return e
}

// sameFile reports whether e and o are the same unchanged inode: a hash of
// o may be reused for e.
func sameFile(e, o *entry) bool {
	return o != nil && e.ino != 0 && e.dev == o.dev && e.ino == o.ino && e.size == o.size &&
		e.mode == o.mode && e.mtime == o.mtime && e.ctime == o.ctime
}

// hashEntry fills e's content hash (and the baseline copy) of the file
// name in dir (workspace path p), unless the file
// is too large, a hard link that did not exist at the baseline, or changed
// while it was read.
func (t *Tracker) hashEntry(dir *os.Root, name, p string, e *entry, prev *snapshot, store bool) {
	if prev != nil {
		if o := prev.entries[p]; sameFile(e, o) {
			e.hashed, e.hash, e.unread, e.stored = o.hashed, o.hash, o.unread, o.stored
			return
		}
	}
	if e.nlink > 1 && t.base != nil {
		// A new hard link can point at a host file the agent could not
		// read itself; never open it. A baseline file keeps its identity.
		if o := t.base.entries[p]; o == nil || o.ino != e.ino || o.dev != e.dev {
			e.unread = "hard link"
			return
		}
	}
	if e.size > t.opt.MaxFileBytes {
		e.unread = "too large"
		return
	}
	b, err := t.readRegular(dir, name, e)
	if err != nil {
		e.unread = err.Error()
		return
	}
	e.hash, e.hashed = sha256.Sum256(b), true
	if store && int64(len(b)) <= t.opt.DiffFileBytes && isText(b) && t.store != nil {
		e.stored = t.store.put(e.hash, b) == nil
	}
}

// errRaced and errUnreadable are the reasons a regular file was not read.
var (
	errRaced      = errors.New("changed while read")
	errUnreadable = errors.New("unreadable")
	errTooLarge   = errors.New("too large")
)

// readRegular reads the regular file name inside r that lstat described as
// e: opened
// without following a symlink and without blocking on a FIFO, then checked
// (fstat) to be the very same regular inode, read at most MaxFileBytes.
func (t *Tracker) readRegular(r *os.Root, name string, e *entry) ([]byte, error) {
	f, err := t.open(r, name)
	if err != nil {
		return nil, errUnreadable
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		return nil, errRaced
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && (uint64(st.Dev) != e.dev || st.Ino != e.ino) {
		return nil, errRaced
	}
	b, err := io.ReadAll(io.LimitReader(f, t.opt.MaxFileBytes+1))
	if err != nil {
		return nil, errUnreadable
	}
	if int64(len(b)) > t.opt.MaxFileBytes {
		return nil, errTooLarge
	}
	return b, nil
}

// isText applies git's heuristic: no NUL byte in the first 8000 bytes.
func isText(b []byte) bool {
	n := min(len(b), 8000)
	for _, c := range b[:n] {
		if c == 0 {
			return false
		}
	}
	return true
}

// blobStore keeps baseline file contents in a private directory, by hash.
type blobStore struct {
	dir   string
	limit int64
	used  int64
	have  map[[32]byte]bool
}

func newBlobStore(mkdir func(dir, prefix string) (string, error), tmp string, limit int64) (*blobStore, error) {
	// Owned (Options.MkdirTemp): a goalrun killed outright leaves the
	// copies to its reaper, which looks for the goalrun- prefix.
	dir, err := mkdir(tmp, "goalrun-baseline-")
	if err != nil {
		return nil, fmt.Errorf("create the baseline store: %w", err)
	}
	return &blobStore{dir: dir, limit: limit, have: map[[32]byte]bool{}}, nil
}

func (b *blobStore) put(h [32]byte, data []byte) error {
	if b.have[h] {
		return nil
	}
	if b.used+int64(len(data)) > b.limit {
		return errors.New("baseline store full")
	}
	if err := os.WriteFile(filepath.Join(b.dir, hex.EncodeToString(h[:])), data, 0o600); err != nil {
		return err
	}
	b.have[h] = true
	b.used += int64(len(data))
	return nil
}

func (b *blobStore) get(h [32]byte) ([]byte, bool) {
	if b == nil || !b.have[h] {
		return nil, false
	}
	data, err := os.ReadFile(filepath.Join(b.dir, hex.EncodeToString(h[:])))
	return data, err == nil
}

func (b *blobStore) close() error { return os.RemoveAll(b.dir) }

// cleanRel is p cleaned as a workspace-relative slash path ("" outside).
func cleanRel(p string) string {
	p = path.Clean(strings.TrimPrefix(p, "./"))
	if p == "." || p == ".." || strings.HasPrefix(p, "../") || strings.HasPrefix(p, "/") {
		return ""
	}
	return p
}
