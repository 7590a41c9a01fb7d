package agent

import "bytes"

// LineWriter is the io.Writer a step's stdout goes to: it splits the stream
// into lines and hands each to a Parser, in memory bounded by MaxLineBytes
// however long a line or the stream is. A line longer than MaxLineBytes is
// passed cut to MaxLineBytes with oversize=true; the rest of it is dropped.
//
// LineWriter is not safe for concurrent use; a step's stdout has one writer.
type LineWriter struct {
	p        Parser
	emit     func(Event)
	buf      []byte
	oversize bool // the current line already overflowed
	max      int
}

// NewLineWriter returns a LineWriter feeding p; events go to emit (nil
// discards them).
func NewLineWriter(p Parser, emit func(Event)) *LineWriter {
	if emit == nil {
		emit = func(Event) {}
	}
	return &LineWriter{p: p, emit: emit, max: MaxLineBytes}
}

// Write consumes b; it never fails.
func (w *LineWriter) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			w.add(b)
			break
		}
		w.add(b[:i])
		w.flush()
		b = b[i+1:]
	}
	return n, nil
}

func (w *LineWriter) add(b []byte) {
	if room := w.max - len(w.buf); len(b) > room {
		b = b[:max(room, 0)]
		w.oversize = true
	}
	w.buf = append(w.buf, b...)
}

func (w *LineWriter) flush() {
	line := bytes.TrimSuffix(w.buf, []byte{'\r'})
	if len(line) > 0 || w.oversize {
		w.p.Line(line, w.oversize, w.emit)
	}
	w.buf = w.buf[:0]
	w.oversize = false
	if cap(w.buf) > 1<<20 { // do not keep a huge buffer after one huge line
		w.buf = nil
	}
}

// Close passes a final unterminated line, if any, to the parser. It does not
// call Parser.End.
func (w *LineWriter) Close() error {
	if len(w.buf) > 0 || w.oversize {
		w.flush()
	}
	return nil
}
