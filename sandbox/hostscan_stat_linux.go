package sandbox

import (
	"io/fs"
	"syscall"
)

// statMarkOf returns what scanCache compares of fi (from Lstat or Stat)
// at path p; ok is false when the file system does not say.
func statMarkOf(p string, fi fs.FileInfo) (statMark, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return statMark{}, false
	}
	return statMark{Path: p, Dev: uint64(st.Dev), Ino: st.Ino, Ctime: st.Ctim.Nano(), Size: st.Size, Mode: uint32(fi.Mode().Type())}, true
}
