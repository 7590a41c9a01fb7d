package sandbox

import (
	"io"
	"sync"
)

// TailWriter is the io.Writer a step's output stream goes to: it forwards
// every byte to a caller-supplied writer as it arrives and keeps only the
// last n bytes (a ring buffer) plus the stream's total length, so a step that
// prints gigabytes costs n bytes of memory. Both sandboxes use it.
//
// A forward writer that fails is dropped: later bytes are still counted and
// kept in the tail, the step is not disturbed, and ForwardErr reports the
// first failure. TailWriter is safe for concurrent use.
type TailWriter struct {
	mu      sync.Mutex
	forward io.Writer // nil after a failure, or when nothing is forwarded
	fwdErr  error
	size    int    // how many bytes to keep
	ring    []byte // grows to size, then is used as a ring
	start   int    // index of the oldest byte once the ring is full
	total   int64
}

// NewTailWriter returns a TailWriter that keeps the last n bytes (n ≤ 0 keeps
// nothing) and forwards to forward (nil forwards nothing). The ring is
// allocated lazily, growing up to n, so an idle stream costs nothing.
func NewTailWriter(forward io.Writer, n int) *TailWriter {
	if n < 0 {
		n = 0
	}
	return &TailWriter{forward: forward, size: n}
}

// Write keeps p's bytes and forwards them. It never returns an error, so the
// copy from the step's pipe never stops early.
func (w *TailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.forward != nil {
		if _, err := w.forward.Write(p); err != nil {
			w.fwdErr = err
			w.forward = nil
		}
	}
	w.total += int64(len(p))
	w.keep(p)
	return len(p), nil
}

// keep appends p to the ring, overwriting the oldest bytes.
func (w *TailWriter) keep(p []byte) {
	size := w.size
	if size == 0 {
		return
	}
	if len(p) >= size { // only the end of p survives
		if cap(w.ring) < size {
			w.ring = make([]byte, size)
		}
		w.ring = w.ring[:size]
		copy(w.ring, p[len(p)-size:])
		w.start = 0
		return
	}
	if len(w.ring) < size { // still growing: append while there is room
		k := min(size-len(w.ring), len(p))
		w.ring = append(w.ring, p[:k]...)
		p = p[k:]
		if len(p) == 0 {
			return
		}
	}
	// Full ring: overwrite from the oldest byte on.
	for len(p) > 0 {
		k := copy(w.ring[w.start:], p)
		w.start = (w.start + k) % size
		p = p[k:]
	}
}

// Output returns a copy of the kept tail with the stream's totals.
func (w *TailWriter) Output() Output {
	w.mu.Lock()
	defer w.mu.Unlock()
	tail := make([]byte, 0, len(w.ring))
	tail = append(tail, w.ring[w.start:]...) // start is 0 until the ring is full
	tail = append(tail, w.ring[:w.start]...)
	return Output{Tail: tail, Bytes: w.total, Truncated: w.total > int64(len(tail))}
}

// ForwardErr returns the first error the forward writer returned, or nil.
func (w *TailWriter) ForwardErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fwdErr
}

// SyncWriter serializes writes to one io.Writer shared by several streams
// (a step's stdout and stderr sent to the same place).
type SyncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// NewSyncWriter wraps w so concurrent Writes do not interleave mid-call.
func NewSyncWriter(w io.Writer) *SyncWriter { return &SyncWriter{w: w} }

// Write writes p to the wrapped writer under a lock.
func (s *SyncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// StepWriters returns the forward writers for a step's stdout and stderr:
// when both are the same writer (compared as interface values; an
// incomparable value counts as different) they are wrapped in one SyncWriter
// so the two copy loops never write to it at the same time.
func StepWriters(stdout, stderr io.Writer) (io.Writer, io.Writer) {
	if stdout == nil || stderr == nil || !sameWriter(stdout, stderr) {
		return stdout, stderr
	}
	s := NewSyncWriter(stdout)
	return s, s
}

func sameWriter(a, b io.Writer) (same bool) {
	defer func() {
		if recover() != nil { // incomparable dynamic types (a func-backed writer)
			same = false
		}
	}()
	return a == b
}
