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
	return markOf(p, st), true
}

// lstatMarkZ is the mark of the path in p, which ends with a NUL (its last
// byte), as statMarkOf(path, os.Lstat(path)) gives it but with an empty
// Path: one system call and no allocation, for the tens of thousands of
// marks every start checks (scanFile.unchanged).
func lstatMarkZ(p []byte) (statMark, bool) {
	if len(p) == 0 || p[len(p)-1] != 0 {
		return statMark{}, false
	}
	var st syscall.Stat_t
	for {
		err := lstatZ(p, &st)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return statMark{}, false
		}
		break
	}
	return markOf("", &st), true
}

// markOf is the mark of p from its stat; the type bits are fs.FileMode's,
// as os derives them from st_mode.
func markOf(p string, st *syscall.Stat_t) statMark {
	var t fs.FileMode
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		t = fs.ModeDir
	case syscall.S_IFLNK:
		t = fs.ModeSymlink
	case syscall.S_IFIFO:
		t = fs.ModeNamedPipe
	case syscall.S_IFSOCK:
		t = fs.ModeSocket
	case syscall.S_IFBLK:
		t = fs.ModeDevice
	case syscall.S_IFCHR:
		t = fs.ModeDevice | fs.ModeCharDevice
	}
	return statMark{Path: p, Dev: uint64(st.Dev), Ino: st.Ino, Ctime: st.Ctim.Nano(), Size: st.Size, Mode: uint32(t)}
}
