// Package safefile reads files of a tree that an agent may have written:
// through an os.Root (no path, link included, leaves the tree), regular
// files only, and bounded in size.
package safefile

import (
	"bytes"
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
	size, err := check(f, name, limit, false)
	if err != nil {
		return nil, err
	}
	return read(f, name, size, limit)
}

// ReadOwn reads the file at path p that this process's user wrote (a
// cache file, a remembered fact), as Read does, and only when p is not a
// link (a final link is not followed) and belongs to this user
// (os.Geteuid): else "P is another user's" (ErrNotOwn).
func ReadOwn(p string, limit int64) ([]byte, error) {
	f, size, err := OpenOwn(p, limit)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return read(f, p, size, limit)
}

// OpenOwn opens the file at path p as ReadOwn reads it (the same checks,
// on the opened file, and the same errors) for a caller that reads it in
// parts, and returns its size in bytes then. The caller closes it.
func OpenOwn(p string, limit int64) (*os.File, int64, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, err
	}
	size, err := check(f, p, limit, true)
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, size, nil
}

// check refuses the opened f (named name in errors) unless it is a regular
// file of at most limit bytes and, when own, this user's; it returns the
// file's size.
func check(f *os.File, name string, limit int64, own bool) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if !fi.Mode().IsRegular() {
		return 0, &limitError{fmt.Sprintf("%s is not a regular file", name), ErrNotRegular}
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); own && ok && int(st.Uid) != os.Geteuid() {
		return 0, &limitError{fmt.Sprintf("%s is another user's", name), ErrNotOwn}
	}
	if fi.Size() > limit {
		return 0, &limitError{fmt.Sprintf("%s is over %d bytes", name, limit), ErrTooLarge}
	}
	return fi.Size(), nil
}

// read reads the checked f (named name in errors) of size bytes, at most
// limit.
func read(f *os.File, name string, size, limit int64) ([]byte, error) {
	// One buffer of the size the file has (with room to see it grow):
	// growing a buffer from nothing copies and clears megabytes for a
	// large file.
	var buf bytes.Buffer
	buf.Grow(int(size) + bytes.MinRead)
	if _, err := buf.ReadFrom(io.LimitReader(f, limit+1)); err != nil {
		return nil, err
	}
	if int64(buf.Len()) > limit {
		return nil, &limitError{fmt.Sprintf("%s is over %d bytes", name, limit), ErrTooLarge}
	}
	return buf.Bytes(), nil
}

// limitError is a refusal with its own wording and its sentinel.
type limitError struct {
	msg string
	err error
}

func (e *limitError) Error() string { return e.msg }
func (e *limitError) Unwrap() error { return e.err }
