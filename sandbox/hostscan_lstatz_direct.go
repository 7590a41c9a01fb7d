//go:build linux && (amd64 || arm64)

package sandbox

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// lstatZ is lstat(2) of the NUL-ended path in p (fstatat with
// AT_SYMLINK_NOFOLLOW, from the working folder), without copying it.
func lstatZ(p []byte, st *syscall.Stat_t) error {
	dirfd := unix.AT_FDCWD
	_, _, e := syscall.Syscall6(unix.SYS_NEWFSTATAT, uintptr(dirfd), uintptr(unsafe.Pointer(&p[0])), uintptr(unsafe.Pointer(st)), unix.AT_SYMLINK_NOFOLLOW, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}
