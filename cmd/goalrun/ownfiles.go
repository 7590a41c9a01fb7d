package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/goalrun/goalrun/goal/workspace"
	"github.com/goalrun/goalrun/report"
)

// ownFilesRel returns the files goalrun itself writes during a run
// (--output, --events: absolute paths, "" skipped) as slash paths relative
// to base, with symlinks resolved in base and in each file's folder (the
// sandbox and the tracker compare resolved paths). With inside, a file
// outside base is left out; without, it is given as "../…". A file whose
// folder cannot be resolved is left out.
func ownFilesRel(base string, inside bool, files ...string) []string {
	b, err := filepath.EvalSymlinks(base)
	if err != nil {
		return nil
	}
	var out []string
	for _, f := range files {
		if f == "" {
			continue
		}
		dir, err := filepath.EvalSymlinks(filepath.Dir(f))
		if err != nil {
			continue
		}
		rel, err := filepath.Rel(b, filepath.Join(dir, filepath.Base(f)))
		if err != nil || rel == "." || (inside && !filepath.IsLocal(rel)) {
			continue
		}
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

// ownFile is a file goalrun writes during a run: the --output document or
// the --events log. It is opened before the agent runs, never through a
// symbolic link (openResultFile), and written through that descriptor.
//
// A workspace the sandbox can write may hold it, and the agent can delete
// it and write a forged document at its path: the descriptor would then
// write into an unlinked file. So when the run ends (the agent stopped),
// finish checks the path still names the file opened at the start and holds
// exactly what goalrun wrote; when it does not, goalrun's content is
// written to a new file in that folder (through an os.Root of the
// writable tree, so no link planted there leads out) and renamed over the
// path. The agent's replacement is the agent's change in the change report
// (workspace.OwnFile), never hidden.
type ownFile struct {
	flag string // "--output" or "--events"
	path string // absolute, as given
	f    *os.File
	// stream is goalrun's own stdout or stderr when the path names it
	// (/dev/stdout, /dev/fd/2, a file stdout is redirected to): written
	// through it, in order with what goalrun writes there (f is nil).
	stream io.Writer

	regular  bool
	dev, ino uint64

	// spool is goalrun's private copy of what it wrote (regular --events
	// files only: an unlinked temporary file, gone when goalrun exits
	// however it exits), the content finish restores.
	spool *os.File

	mu   sync.Mutex
	werr error // the first write error
}

// openOwnFile opens --output or --events (flag names which) for writing,
// refusing what openResultFile refuses. A regular --events file gets its
// spool.
func openOwnFile(flag, path, workspace string) (*ownFile, error) {
	f, err := openResultFile(path, workspace)
	if err != nil {
		return nil, err
	}
	o := &ownFile{flag: flag, path: path, f: f}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && fi.Mode().IsRegular() {
		o.regular, o.dev, o.ino = true, uint64(st.Dev), st.Ino
	}
	if o.regular && flag == "--output" {
		// Reserve the document's room now (blocks beyond the end, the size
		// unchanged): an agent that fills the disk cannot keep goalrun
		// from writing it at the end. Best effort: some file systems
		// cannot.
		_ = unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, report.DocumentBytes+1)
	}
	if o.regular && flag == "--events" {
		sp, err := os.CreateTemp("", "goalrun-events-")
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("a private copy of the events: %w", err)
		}
		os.Remove(sp.Name()) // unlinked: nothing is left behind, whatever ends goalrun
		o.spool = sp
	}
	return o, nil
}

// streamFile is --output or --events naming goalrun's own stdout or
// stderr (w): written through w, never reopened (another descriptor
// would write over what goalrun writes there).
func streamFile(flag, path string, w io.Writer) *ownFile {
	return &ownFile{flag: flag, path: path, stream: w}
}

// identity is the file as the change tracker knows it (workspace.OwnFile), rel
// being its slash path relative to the tracked root.
func (o *ownFile) identity(rel string) workspace.OwnFile {
	return workspace.OwnFile{Path: rel, Dev: o.dev, Ino: o.ino}
}

// Write appends p (the events sink writes through it): to the spool first,
// then to the file. It returns the file's error; the first one is kept
// (err).
func (o *ownFile) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stream != nil {
		return o.stream.Write(p)
	}
	if o.spool != nil {
		if _, err := o.spool.Write(p); err != nil && o.werr == nil {
			o.werr = fmt.Errorf("keeping a private copy: %w", err)
		}
	}
	n, err := o.f.Write(p)
	if err != nil && o.werr == nil {
		o.werr = err
	}
	return n, err
}

// err returns the first write error.
func (o *ownFile) err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.werr
}

// Close closes the file and the spool.
func (o *ownFile) Close() error {
	if o.stream != nil {
		return nil // goalrun's own stream, closed by no one
	}
	if o.spool != nil {
		o.spool.Close()
	}
	return o.f.Close()
}

// errReplacedOutside is returned by settle for a file outside every tree
// the sandbox could write that was replaced all the same (by something
// else on the host): goalrun does not write through a path it did not
// open.
var errReplacedOutside = errors.New("the path was replaced during the run; goalrun did not write through it")

// settle makes the path hold exactly goalrun's content: want for --output
// (nil: the events written so far, from the spool). roots are the trees
// the sandbox could write (the workspace, a wider mount); when the file
// lies in one and the path no longer names the file opened at the start,
// or holds other bytes, the content goes to a new file in its folder,
// renamed over the path, and later writes go there. replaced says so.
// Errors say why the file does not hold the content.
func (o *ownFile) settle(want []byte, roots ...string) (replaced bool, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stream != nil {
		if want != nil {
			writeWhole(o.stream, want)
		}
		return false, nil
	}
	if !o.regular { // a terminal, a pipe, /dev/null: written as they are
		if want == nil {
			return false, o.werr
		}
		if _, err := o.f.Write(want); err != nil {
			return false, err
		}
		return false, nil
	}
	if want == nil {
		b, err := readAll(o.spool)
		if err != nil {
			return false, fmt.Errorf("reading goalrun's private copy: %w", err)
		}
		want = b
	}
	root, rel := reachOf(o.path, roots)
	if o.holds(want) {
		return false, nil
	}
	if o.sameInode() {
		// Still goalrun's file: rewrite it in place (--output's normal end;
		// an events file the agent wrote into). Written first, cut after,
		// so the document lands in the room reserved at the start.
		if _, err := o.f.WriteAt(want, 0); err != nil {
			return false, err
		}
		if err := o.f.Truncate(int64(len(want))); err != nil {
			return false, err
		}
		if _, err := o.f.Seek(int64(len(want)), io.SeekStart); err != nil {
			return false, err
		}
		return false, nil
	}
	if root == "" {
		return false, errReplacedOutside
	}
	nf, err := replaceIn(root, rel, want)
	if err != nil {
		// The agent's file must not stay as if it were goalrun's. Room or
		// permission are what an agent can take away: free the room
		// goalrun's own (unlinked) file held, give goalrun's folder its
		// permission back, then take the agent's file away and try again.
		nf, err = o.replaceHard(root, rel, want, err)
		if err != nil {
			return false, err
		}
	}
	o.f.Close()
	o.f = nf
	if fi, err := nf.Stat(); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			o.dev, o.ino = uint64(st.Dev), st.Ino
		}
	}
	return true, nil
}

// replaceHard is settle's second try after replaceIn failed with first:
// it closes goalrun's original file when nothing names it any more (the
// agent unlinked it: its blocks, the room reserved for the document,
// return to the file system), makes the path's folder writable again for
// its owner when that is goalrun (an agent running as goalrun's user may
// have taken the permission away), removes whatever the agent put at the
// path (an unlink needs no room), and writes goalrun's content anew. When
// that fails too, the path is left empty rather than holding the agent's
// file, and the error says so.
func (o *ownFile) replaceHard(root, rel string, want []byte, first error) (*os.File, error) {
	if fi, err := o.f.Stat(); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink == 0 {
			o.f.Close()
			o.f = nil // (*os.File)(nil): later writes fail with os.ErrInvalid
		}
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("%w (and the workspace could not be opened: %v)", first, err)
	}
	defer r.Close()
	dir := filepath.Dir(rel)
	if fi, err := r.Lstat(dir); err == nil && fi.IsDir() {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == os.Geteuid() && fi.Mode().Perm()&0o300 != 0o300 {
			_ = r.Chmod(dir, fi.Mode().Perm()|0o700)
		}
	}
	removed := ""
	if fi, err := r.Lstat(rel); err == nil && !fi.IsDir() {
		if err := r.Remove(rel); err == nil {
			removed = "; the file the agent put there was removed"
		}
	}
	nf, err := replaceIn(root, rel, want)
	if err != nil {
		if removed == "" {
			return nil, fmt.Errorf("%w; the path still holds a file goalrun did not write", first)
		}
		return nil, fmt.Errorf("%w%s, and goalrun's own could not be written in its place: %v", first, removed, err)
	}
	return nf, nil
}

// sameInode reports whether the path still names o's file: not
// followed, except a /dev/ name (/dev/fd/3 is a link to the descriptor's
// file, which no agent can plant).
func (o *ownFile) sameInode() bool {
	stat := os.Lstat
	if isDevPath(o.path) {
		stat = os.Stat
	}
	fi, err := stat(o.path)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && uint64(st.Dev) == o.dev && st.Ino == o.ino
}

// holds reports whether the path names o's file and it holds exactly want.
func (o *ownFile) holds(want []byte) bool {
	if !o.sameInode() {
		return false
	}
	fi, err := o.f.Stat()
	if err != nil || fi.Size() != int64(len(want)) {
		return false
	}
	got := make([]byte, len(want))
	if _, err := o.f.ReadAt(got, 0); err != nil && !errors.Is(err, io.EOF) {
		return false // opened write-only (--output): rewritten anyway
	}
	return bytes.Equal(got, want)
}

// reachOf returns the root among roots that holds path (symlinks in both
// resolved, as the sandbox mounts them) and path relative to it; "" when
// none does.
func reachOf(path string, roots []string) (root, rel string) {
	dir, err := filepath.EvalSymlinks(filepath.Dir(path))
	if err != nil {
		return "", ""
	}
	p := filepath.Join(dir, filepath.Base(path))
	for _, r := range roots {
		if r == "" {
			continue
		}
		rr, err := filepath.EvalSymlinks(r)
		if err != nil {
			continue
		}
		if rel, err := filepath.Rel(rr, p); err == nil && filepath.IsLocal(rel) {
			return rr, rel
		}
	}
	return "", ""
}

// replaceIn writes data to a new file next to rel inside root and renames
// it over rel, all through an os.Root (no symbolic link leads out of root,
// whatever the agent planted in rel's folders); it returns the new file,
// open for writing at its end.
func replaceIn(root, rel string, data []byte) (*os.File, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(filepath.Dir(rel), ".goalrun-"+hex.EncodeToString(rnd[:])+".tmp")
	f, err := r.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, leadsOut(err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		r.Remove(tmp)
		return nil, err
	}
	if err := r.Rename(tmp, rel); err != nil {
		f.Close()
		r.Remove(tmp)
		return nil, leadsOut(err)
	}
	return f, nil
}

// leadsOut rewrites os.Root's escape error in the words of the README.
func leadsOut(err error) error {
	if err != nil && strings.Contains(err.Error(), "path escapes from parent") {
		return fmt.Errorf("a symbolic link in its path leads out of the workspace; goalrun does not write through links: %w", err)
	}
	return err
}

// readAll reads f from its start.
func readAll(f *os.File) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, fi.Size())
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b, nil
}

// isDevPath reports whether path lies in /dev (/dev/stdout, /dev/fd/N).
func isDevPath(path string) bool {
	return strings.HasPrefix(filepath.Clean(path), "/dev/")
}
