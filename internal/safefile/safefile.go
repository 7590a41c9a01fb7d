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
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &limitError{fmt.Sprintf("%s is not a regular file", name), ErrNotRegular}
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
