package agent

import (
	"bytes"
	"sync"
)

// LineWriter is the io.Writer a step's stdout goes to: it splits the stream
// into lines and hands each to a Parser, in memory bounded by MaxLineBytes
// (one line buffer, allocated at that size the first time a line split
// across writes outgrows 1 MiB, then reused) however long a line or the
// stream is. A line longer than MaxLineBytes is
// passed cut to MaxLineBytes with oversize=true; the rest of it is dropped.
// A trailing "\r" is removed; empty lines are not passed.
//
// A line that arrives whole inside one Write is passed as a slice of the
// caller's buffer, without a copy; only a line split across Writes is
// assembled in the writer's own buffer. Either way the slice is valid only
// during the parser's call.
//
// LineWriter is not safe for concurrent use; a step's stdout has one writer.
// Use Streams when a parser also reads stderr.
type LineWriter struct {
	line     func(line []byte, oversize bool)
	buf      []byte
	oversize bool // the current line already overflowed
	max      int
	lines    int64
	bytes    int64
}

// NewLineWriter returns a LineWriter feeding p's Line; events go to emit
// (nil discards them).
func NewLineWriter(p Parser, emit func(Event)) *LineWriter {
	if emit == nil {
		emit = func(Event) {}
	}
	return newLineWriter(func(l []byte, o bool) { p.Line(l, o, emit) }, MaxLineBytes)
}

func newLineWriter(line func([]byte, bool), max int) *LineWriter {
	return &LineWriter{line: line, max: max}
}

// Write consumes b; it never fails.
func (w *LineWriter) Write(b []byte) (int, error) {
	n := len(b)
	w.bytes += int64(n)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			w.add(b)
			break
		}
		if len(w.buf) == 0 && !w.oversize {
			// The whole line is in b: pass it without copying.
			if i > w.max {
				w.pass(b[:w.max], true)
			} else {
				w.pass(b[:i], false)
			}
		} else {
			w.add(b[:i])
			w.flush()
		}
		b = b[i+1:]
	}
	return n, nil
}

func (w *LineWriter) add(b []byte) {
	if room := w.max - len(w.buf); len(b) > room {
		b = b[:max(room, 0)]
		w.oversize = true
	}
	if len(w.buf)+len(b) > cap(w.buf) && len(w.buf)+len(b) > 1<<20 {
		// A long line: grow straight to the cap once instead of doubling
		// through a chain of garbage buffers. The buffer is kept for the
		// next long line, so one stream holds at most MaxLineBytes.
		nb := make([]byte, len(w.buf), w.max)
		copy(nb, w.buf)
		w.buf = nb
	}
	w.buf = append(w.buf, b...)
}

func (w *LineWriter) pass(line []byte, oversize bool) {
	if !oversize {
		line = bytes.TrimSuffix(line, []byte{'\r'})
	}
	if len(line) > 0 || oversize {
		w.lines++
		w.line(line, oversize)
	}
}

func (w *LineWriter) flush() {
	w.pass(w.buf, w.oversize)
	w.buf = w.buf[:0]
	w.oversize = false
}

// Close passes a final unterminated line, if any, to the parser. It does not
// call Parser.End.
func (w *LineWriter) Close() error {
	if len(w.buf) > 0 || w.oversize {
		w.flush()
	}
	return nil
}

// Lines returns how many lines were passed on so far, and Bytes how many
// bytes were written.
func (w *LineWriter) Lines() int64 { return w.lines }

// Bytes returns how many bytes were written so far.
func (w *LineWriter) Bytes() int64 { return w.bytes }

// Streams are the writers for one agent step's stdout and stderr. Stdout
// feeds the parser's Line; Stderr feeds its StderrLine when the parser
// implements StderrParser and discards the lines otherwise (keep stderr's
// tail separately, e.g. with sandbox.NewTailWriter(streams.Stderr, n)).
// The two may be written from different goroutines: Streams serializes the
// parser's calls (and so the emit callback) with one mutex.
type Streams struct {
	Stdout, Stderr *LineWriter
	mu             sync.Mutex
}

// NewStreams returns the writers feeding p; events go to emit (nil discards
// them). Call Close after the step ended and before p.End.
func NewStreams(p Parser, emit func(Event)) *Streams {
	if emit == nil {
		emit = func(Event) {}
	}
	s := &Streams{}
	s.Stdout = newLineWriter(func(l []byte, o bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		p.Line(l, o, emit)
	}, MaxLineBytes)
	sp, ok := p.(StderrParser)
	s.Stderr = newLineWriter(func(l []byte, o bool) {
		if !ok {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		sp.StderrLine(l, o, emit)
	}, MaxLineBytes)
	return s
}

// Close passes both streams' final unterminated lines to the parser.
func (s *Streams) Close() error {
	s.Stdout.Close()
	s.Stderr.Close()
	return nil
}
