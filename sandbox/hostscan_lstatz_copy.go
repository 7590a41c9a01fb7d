//go:build linux && !(amd64 || arm64)

package sandbox

import "syscall"

// lstatZ is lstat(2) of the NUL-ended path in p (through a copy: these
// architectures' stat structures differ, and syscall.Lstat knows them).
func lstatZ(p []byte, st *syscall.Stat_t) error {
	return syscall.Lstat(string(p[:len(p)-1]), st)
}
