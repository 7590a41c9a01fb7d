// Package treecopy writes a tar archive of a tree goalrun does not trust
// (the agent's, copied out of a sandbox) into a folder of the host.
//
// It is written by hand on purpose, against the archive an agent can shape:
// every write goes through an [os.Root] on the destination, so no entry
// lands outside it and no symlink is followed; names that climb out (".."),
// absolute names and names with empty or "." elements are dropped;
// symlinks are recreated as symlinks, never followed; hard links are made
// only to a regular file the same archive wrote; devices, FIFOs and
// sockets never reach the host; a file gets its permission bits only (no
// setuid, setgid or sticky bit), always readable by its owner; a file that
// did not change is left alone (same inode), and one that did is written
// under a temporary name (TempName) renamed over it once whole, so an
// archive cut short never leaves a part of a file. Entry headers are
// bounded by archive/tar itself: a PAX or GNU long-name record above
// 1 MiB is an error (tar.ErrFieldTooLong; maxSpecialFileSize in
// https://go.dev/src/archive/tar/common.go).
package treecopy

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// Options say how Apply and RemoveUnseen read an archive and which paths
// of the destination are the host's own.
type Options struct {
	// RootName is the base name of the archived folder ("workspace" for
	// an archive of /workspace/.): an Engine may put it before every
	// entry name (Prefix).
	RootName string
	// Kept reports whether rel (a slash path relative to the
	// destination) is the host's: nothing at or under it is written or
	// removed. nil: no path is.
	Kept func(rel string) bool
	// Holds reports whether rel is a folder above a kept path: it stays
	// a folder (an entry that would turn it into something else is
	// skipped, and RemoveUnseen never removes it whole). nil: none.
	Holds func(rel string) bool
	// Owner is the owner label the temporary names carry (TempName),
	// which tells a live copy's temporary files from a dead one's.
	Owner string
}

// kept is Options.Kept, false when it is nil.
func (o Options) kept(rel string) bool { return o.Kept != nil && o.Kept(rel) }

// holds is Options.Holds, false when it is nil.
func (o Options) holds(rel string) bool { return o.Holds != nil && o.Holds(rel) }

// Prefix returns what an archive of a folder named rootName (its base
// name, "workspace") puts before every entry name, read from the archive's
// first entry, which is the folder itself: "./" (Docker: "./", "./a/b.go"),
// the folder's own name ("workspace/", for an Engine that names it), or ""
// (bare relative names).
func Prefix(first, rootName string) string {
	switch {
	case first == "." || first == "./":
		return "./"
	case rootName != "" && strings.TrimSuffix(first, "/") == rootName:
		return rootName + "/"
	}
	return ""
}

// Rel turns an archive entry name into a path relative to the archived
// folder, removing the archive's prefix (Prefix) once; "" is the
// root itself. Names map one to one onto the sandbox's tree: a folder the
// agent named "workspace" stays "workspace/…", never the root. ok is false
// for a name without a folder prefix ("./" is optional: goalrun's own
// archives write "./" and then bare names), an absolute name, or one with an empty,
// "." or ".." element (the Engine writes none of them; they could only
// climb out or map two entries onto one path).
func Rel(name, prefix string) (rel string, ok bool) {
	if prefix != "" {
		if strings.TrimSuffix(name, "/")+"/" == prefix {
			return "", true
		}
		rest, found := strings.CutPrefix(name, prefix)
		if !found && prefix != "./" {
			return "", false
		}
		name = rest
	}
	name = strings.TrimSuffix(name, "/")
	if name == "" {
		return "", false
	}
	for _, el := range strings.Split(name, "/") {
		if el == "" || el == "." || el == ".." {
			return "", false
		}
	}
	if !filepath.IsLocal(filepath.FromSlash(name)) {
		return "", false
	}
	return name, true
}

// Apply writes the archive's entries under root and returns the set of
// relative paths (slash-separated) it holds, for RemoveUnseen. Entries at
// or under a kept path (Options.Kept) are skipped, and so is an entry that
// would turn a folder above one (Options.Holds) into something else, an
// entry with an unsafe name (Rel), one inside a symlinked folder or a
// folder the archive never made, and devices, FIFOs and sockets. The
// error is the archive's (a cut stream, a header above archive/tar's
// bounds) or the destination's; the entries before it are written, none
// of them in part.
func Apply(root *os.Root, tr *tar.Reader, opt Options) (map[string]bool, error) {
	seen := map[string]bool{}
	prefix, first := "", true
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return seen, nil
		}
		if err != nil {
			return seen, err
		}
		if first {
			prefix, first = Prefix(hdr.Name, opt.RootName), false
		}
		rel, ok := Rel(hdr.Name, prefix)
		if !ok || rel == "" {
			continue
		}
		if opt.kept(rel) || (hdr.Typeflag != tar.TypeDir && opt.holds(rel)) {
			continue // the host's own path, or the folder holding it
		}
		name := filepath.FromSlash(rel)
		if !parentsAreFolders(root, rel) {
			// An entry "inside" a symlinked folder (which may point
			// anywhere) is never written through; the link itself was.
			// An entry whose folder the archive never made is malformed.
			continue
		}
		perm := hostPerm(hdr)
		raw := fs.FileMode(hdr.Mode).Perm() // what the sandbox's tree says
		existing, lerr := root.Lstat(name)
		exists := lerr == nil
		switch hdr.Typeflag {
		case tar.TypeDir:
			seen[rel] = true
			if exists && existing.IsDir() {
				if existing.Mode().Perm() != raw {
					_ = root.Chmod(name, perm)
				}
				continue
			}
			if exists {
				if err := root.RemoveAll(name); err != nil {
					return seen, err
				}
			}
			if err := root.Mkdir(name, perm); err != nil {
				return seen, err
			}
			_ = root.Chmod(name, perm) // the umask narrowed Mkdir's mode
			adoptOwner(root, name, nil)
		case tar.TypeReg:
			seen[rel] = true
			if exists && existing.Mode().IsRegular() && existing.Size() == hdr.Size {
				if err := syncFile(root, name, existing, raw, perm, tr, hdr, opt.Owner); err != nil {
					return seen, err
				}
				continue
			}
			if exists && !existing.Mode().IsRegular() {
				// A regular file is replaced by the rename, so an
				// archive cut short leaves it as it was.
				if err := root.RemoveAll(name); err != nil {
					return seen, err
				}
			}
			if err := writeFileIn(root, name, perm, tr, hdr, opt.Owner); err != nil {
				return seen, err
			}
			adoptOwner(root, name, nil)
		case tar.TypeSymlink:
			seen[rel] = true
			if exists && existing.Mode()&fs.ModeSymlink != 0 {
				if old, err := root.Readlink(name); err == nil && old == hdr.Linkname {
					continue
				}
			}
			if exists {
				if err := root.RemoveAll(name); err != nil {
					return seen, err
				}
			}
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return seen, err
			}
			adoptOwner(root, name, nil)
		case tar.TypeLink:
			target, ok := Rel(hdr.Linkname, prefix)
			if !ok || target == "" || !seen[target] {
				continue // only to a file this archive already wrote
			}
			if st, err := root.Lstat(filepath.FromSlash(target)); err != nil || !st.Mode().IsRegular() {
				continue
			}
			seen[rel] = true
			if exists {
				if err := root.RemoveAll(name); err != nil {
					return seen, err
				}
			}
			if err := root.Link(filepath.FromSlash(target), name); err != nil {
				return seen, err
			}
		default:
			// Devices, fifos and sockets never come back to the host.
		}
	}
}

// hostPerm is the permission an entry gets on the host: its permission
// bits only (no setuid, setgid or sticky bit), with the owner always able
// to read a file and to list, enter and change a folder. A folder the agent
// made mode 000 would otherwise stop goalrun (not root) from removing what
// is inside it now and from copying the workspace in on the next run.
func hostPerm(hdr *tar.Header) fs.FileMode {
	perm := fs.FileMode(hdr.Mode).Perm()
	if hdr.Typeflag == tar.TypeDir {
		return perm | 0o700
	}
	return perm | 0o400
}

// parentsAreFolders reports whether every folder above rel (inside root)
// exists and is a real folder, not a symlink.
func parentsAreFolders(root *os.Root, rel string) bool {
	parts := strings.Split(rel, "/")
	for i := 1; i < len(parts); i++ {
		st, err := root.Lstat(filepath.FromSlash(strings.Join(parts[:i], "/")))
		if err != nil || !st.IsDir() {
			return false
		}
	}
	return true
}

// writeFileIn creates name afresh (a new inode: a host hardlink sharing the
// old one is never written through) with r's content, written under a
// temporary name renamed over name once whole: a copy cut short (a signal,
// the Engine failing mid-archive) never leaves a part of a file at name.
func writeFileIn(root *os.Root, name string, perm fs.FileMode, r io.Reader, hdr *tar.Header, owner string) error {
	return replaceFile(root, name, nil, perm, bytes.NewReader(nil), r, hdr, owner)
}

// syncFile brings the sandbox's version of a file (r, size equal to the
// host's existing one) to the host: it compares the two block by block
// without holding either in memory. An identical file is left as it is —
// same inode, owner, links and times — and only gets the sandbox's
// permission bits when they differ (raw; perm is what the host gets). A
// file that differs, or whose mode changes while it has other hard links
// (chmod in place would change the other names too, possibly outside the
// workspace), is written as a new inode: the host's equal first part, then
// the rest from r, into a temporary name in the same folder renamed over
// it, keeping the host file's owner when goalrun runs as root.
func syncFile(root *os.Root, name string, existing fs.FileInfo, raw, perm fs.FileMode, r io.Reader, hdr *tar.Header, owner string) error {
	host, err := root.Open(name)
	if err != nil {
		// Unreadable (mode 000, goalrun not root): rewrite it.
		if rerr := root.Remove(name); rerr != nil {
			return rerr
		}
		return writeFileIn(root, name, perm, r, hdr, owner)
	}
	defer host.Close()
	a, b := make([]byte, sparseBlock), make([]byte, sparseBlock)
	var off int64
	for {
		n, rerr := io.ReadFull(r, a)
		if n > 0 {
			m, _ := io.ReadFull(host, b[:n])
			if m != n || !bytes.Equal(a[:n], b[:n]) {
				return replaceFile(root, name, existing, perm, io.NewSectionReader(host, 0, off), io.MultiReader(bytes.NewReader(a[:n]), r), hdr, owner)
			}
			off += int64(n)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	if existing.Mode().Perm() == raw {
		return nil
	}
	if st, ok := existing.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		return replaceFile(root, name, existing, perm, io.NewSectionReader(host, 0, off), bytes.NewReader(nil), hdr, owner)
	}
	return root.Chmod(name, perm)
}

// replaceFile writes head then tail (hdr.Size bytes in all: fewer is an
// error) into a new file next to name
// (TempName, with owner) and renames it over name (a new inode), with perm, hdr's
// modification time, and existing's owner when goalrun runs as root
// (existing nil: the folder's owner). On error the temporary file is
// removed.
func replaceFile(root *os.Root, name string, existing fs.FileInfo, perm fs.FileMode, head, tail io.Reader, hdr *tar.Header, owner string) error {
	tmp := TempName(name, owner)
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	err = copySparse(f, head)
	if err == nil {
		err = copySparse(f, tail)
	}
	if err == nil {
		// A stream that ends inside the entry reads as a short file
		// (archive/tar's io.ErrUnexpectedEOF, which copySparse cannot
		// tell from the end of its reader): never a whole file.
		var end int64
		if end, err = f.Seek(0, io.SeekCurrent); err == nil && end != hdr.Size {
			err = fmt.Errorf("%s: the archive ended after %d of its %d bytes: %w", name, end, hdr.Size, io.ErrUnexpectedEOF)
		}
	}
	if err == nil {
		err = f.Chmod(perm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Chtimes(tmp, hdr.ModTime, hdr.ModTime)
	}
	if err == nil {
		adoptOwner(root, tmp, existing)
		err = root.Rename(tmp, name)
	}
	if err != nil {
		_ = root.Remove(tmp)
	}
	return err
}

// runs as root (otherwise new files are goalrun's, which is the
// workspace's owner or could not write there). Without it a root goalrun
// would leave root-owned files in a user's workspace.
func adoptOwner(root *os.Root, name string, like fs.FileInfo) {
	if os.Geteuid() != 0 {
		return
	}
	if like == nil {
		var err error
		if like, err = root.Lstat(filepath.Dir(name)); err != nil {
			return
		}
	}
	if st, ok := like.Sys().(*syscall.Stat_t); ok {
		_ = root.Lchown(name, int(st.Uid), int(st.Gid))
	}
}

// sparseBlock is the unit copySparse checks for zeros: 64 KiB.
const sparseBlock = 64 << 10

// copySparse copies r into f, leaving a hole for each sparseBlock of zeros
// instead of writing it, so a file that is sparse in the sandbox (a "1 GB"
// file made with truncate) does not fill the host's disk with zeros.
func copySparse(f *os.File, r io.Reader) error {
	buf := make([]byte, sparseBlock)
	hole := false
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			if isZero(buf[:n]) {
				if _, serr := f.Seek(int64(n), io.SeekCurrent); serr != nil {
					return serr
				}
				hole = true
			} else {
				if _, werr := f.Write(buf[:n]); werr != nil {
					return werr
				}
				hole = false
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return err
		}
	}
	if hole {
		// A trailing hole: set the length (where the file's offset is, as
		// f may already hold bytes written before this call).
		end, err := f.Seek(0, io.SeekCurrent)
		if err != nil {
			return err
		}
		return f.Truncate(end)
	}
	return nil
}

// isZero reports whether b holds only zero bytes.
func isZero(b []byte) bool {
	for len(b) >= 8 {
		if b[0]|b[1]|b[2]|b[3]|b[4]|b[5]|b[6]|b[7] != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// RemoveUnseen removes what root holds but the archive Apply wrote did not
// (seen, as Apply returned it), except the kept paths (Options.Kept) and
// the folders above them (Options.Holds; their other entries are still
// removed when unseen). Devices, FIFOs and sockets of root are left: an
// archive of the tree never held them. The error is the first removal's
// or reading root's.
func RemoveUnseen(root *os.Root, seen map[string]bool, opt Options) error {
	var gone []string
	err := fs.WalkDir(root.FS(), ".", func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if p == "." {
			return nil
		}
		if e.Type()&(fs.ModeNamedPipe|fs.ModeSocket|fs.ModeDevice|fs.ModeCharDevice|fs.ModeIrregular) != 0 {
			return nil // never copied into the archived tree, so never "deleted"
		}
		if opt.kept(p) {
			if e.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !seen[p] && !(e.IsDir() && opt.holds(p)) {
			gone = append(gone, p)
			if e.IsDir() {
				return fs.SkipDir
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(gone)
	for _, p := range gone {
		if err := root.RemoveAll(filepath.FromSlash(p)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}
