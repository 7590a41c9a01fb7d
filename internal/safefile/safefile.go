// Package safefile reads files of a tree that an agent may have written:
// through an os.Root (no path, link included, leaves the tree), regular
// files only, and bounded in size.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// ErrNotRegular says the file is a folder, a device, a FIFO or a socket.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge says the file holds more bytes than the reader's limit.
var ErrTooLarge = errors.New("over the size limit")

// ErrNotOwn says the file belongs to another user.
var ErrNotOwn = errors.New("another user's file")

// Read reads the file name inside root, at most limit bytes. It refuses
// anything but a regular file, checked on the opened file (a swap after a
// walk is caught) and opened without blocking (a FIFO cannot hang the
// reader), and a file over limit bytes. Errors name the file: "NAME is not
// a regular file" (ErrNotRegular), "NAME is over LIMIT bytes"
// (ErrTooLarge), or the open's or read's own error.
func Read(root *os.Root, name string, limit int64) ([]byte, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return read(f, name, limit, false)
}

// ReadOwn reads the file at path p that this process's user wrote (a
// cache file, a remembered fact), as Read does, and only when p is not a
// link (a final link is not followed) and belongs to this user
// (os.Geteuid): else "P is another user's" (ErrNotOwn).
func ReadOwn(p string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return read(f, p, limit, true)
}

// read reads the opened f (named name in errors) for Read and ReadOwn.
func read(f *os.File, name string, limit int64, own bool) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &limitError{fmt.Sprintf("%s is not a regular file", name), ErrNotRegular}
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); own && ok && int(st.Uid) != os.Geteuid() {
		return nil, &limitError{fmt.Sprintf("%s is another user's", name), ErrNotOwn}
	}
	if fi.Size() > limit {
		return nil, &limitError{fmt.Sprintf("%s is over %d bytes", name, limit), ErrTooLarge}
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, &limitError{fmt.Sprintf("%s is over %d bytes", name, limit), ErrTooLarge}
	}
	return b, nil
}

// limitError is a refusal with its own wording and its sentinel.
type limitError struct {
	msg string
	err error
}

func (e *limitError) Error() string { return e.msg }
func (e *limitError) Unwrap() error { return e.err }
