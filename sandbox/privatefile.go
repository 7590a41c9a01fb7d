package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// errNotPrivate is readPrivateFile's and privateFolder's error for a path
// that is not goalrun's own: a link, a fifo or device, another user's, or
// (a folder) one another user could rename or fill.
var errNotPrivate = errors.New("not goalrun's own")

// readPrivateFile reads the file p that goalrun itself wrote (a cache file,
// a remembered fact): at most max bytes, and only when p is a regular file
// owned by this process's user. It opens p without following a final link
// and without waiting (O_NONBLOCK), so a fifo planted in its place fails at
// once instead of holding the run, and a link to /dev/zero or a huge file
// is not read.
func readPrivateFile(p string, max int64) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w (not a regular file)", p, errNotPrivate)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("%s: %w (another user's)", p, errNotPrivate)
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%s: %w (larger than %d bytes)", p, errNotPrivate, max)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(b)) > max {
		return nil, fmt.Errorf("%s: %w (larger than %d bytes)", p, errNotPrivate, max)
	}
	return b, err
}
