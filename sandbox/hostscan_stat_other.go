//go:build !linux

package sandbox

import "io/fs"

// statMarkOf: outside Linux the scan is not remembered (scanCache), so
// every run looks through the host folders again.
func statMarkOf(string, fs.FileInfo) (statMark, bool) { return statMark{}, false }

// lstatMarkZ: never a mark outside Linux (see statMarkOf).
func lstatMarkZ([]byte) (statMark, bool) { return statMark{}, false }
