package main

import (
	"io"
	"os"
	"sync"
	"time"

	"github.com/goalrun/goalrun/report"
)

// goalrun's stdout and stderr are someone else's: a terminal that can be
// paused (Ctrl-S, a pager), a pipe whose reader stops reading, a CI log
// shipper that stalls. A write to them must never stop the run, so goalrun
// writes them through a streamWriter: a bounded queue drained by a
// goroutine of its own. What does not fit is dropped whole and counted;
// at exit goalrun waits for the queue to drain, within a bound
// (flushStreams).

// streamQueueBytes bounds what a streamWriter holds for a stream that is
// not being read: beyond it, writes are dropped whole (a JSONL event line
// or a progress line is one write) and counted.
const streamQueueBytes = 1 << 20

// stderrFlushLimit is how long goalrun waits at exit for stderr to take
// what is queued (progress lines, events) before it drops the rest; stdout,
// which carries the document, is waited for until it takes it (a signal
// cuts that wait to the stop's bound).
const stderrFlushLimit = 5 * time.Second

// streamWriter writes to w from a goroutine of its own; Write never
// blocks. Safe for concurrent use.
type streamWriter struct {
	w    io.Writer
	file *os.File // w when it is one (identity checks: streamsTaken)

	mu           sync.Mutex
	cond         *sync.Cond
	queue        [][]byte
	queued       int
	busy         bool // a write to w is under way
	err          error
	dropped      int // writes dropped because the queue was full
	droppedBytes int
}

// newStreamWriter starts a streamWriter in front of w.
func newStreamWriter(w io.Writer) *streamWriter {
	s := &streamWriter{w: w}
	s.file, _ = w.(*os.File)
	s.cond = sync.NewCond(&s.mu)
	go s.drain()
	return s
}

// Write queues a copy of p and returns len(p), nil: a full queue drops p
// (counted) and a failed stream (EPIPE: its reader is gone) drops it
// quietly, so no writer ever stops or fails because of the stream.
func (s *streamWriter) Write(p []byte) (int, error) {
	return s.put(p, false)
}

// writeAll queues p even over the bound: the one document (at most 32 KiB)
// is never dropped for the progress lines queued before it.
func (s *streamWriter) writeAll(p []byte) (int, error) {
	return s.put(p, true)
}

func (s *streamWriter) put(p []byte, always bool) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.err != nil:
	case !always && s.queued+len(p) > streamQueueBytes:
		s.dropped++
		s.droppedBytes += len(p)
	case len(p) > 0:
		s.queue = append(s.queue, append([]byte(nil), p...))
		s.queued += len(p)
		s.cond.Broadcast()
	}
	return len(p), nil
}

// drain writes the queue to w, one write at a time, without the lock.
func (s *streamWriter) drain() {
	s.mu.Lock()
	for {
		for len(s.queue) == 0 {
			s.cond.Wait()
		}
		b := s.queue[0]
		s.queue = s.queue[1:]
		s.busy = true
		s.mu.Unlock()
		_, err := s.w.Write(b)
		s.mu.Lock()
		s.busy = false
		s.queued -= len(b)
		if err != nil && s.err == nil {
			s.err = err
			s.queue, s.queued = nil, 0
		}
		s.cond.Broadcast()
	}
}

// flush waits until everything queued was written (true) or until
// deadline (false; a zero deadline waits as long as it takes).
func (s *streamWriter) flush(deadline time.Time) bool {
	if !deadline.IsZero() {
		t := time.AfterFunc(time.Until(deadline), func() {
			s.mu.Lock()
			s.cond.Broadcast()
			s.mu.Unlock()
		})
		defer t.Stop()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.queue) > 0 || s.busy {
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return false
		}
		s.cond.Wait()
	}
	return true
}

// drops returns how many writes (and bytes) were dropped for a full queue.
func (s *streamWriter) drops() (writes, bytes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped, s.droppedBytes
}

// fileOf returns the file behind w (an *os.File or a streamWriter in front
// of one), nil when there is none.
func fileOf(w io.Writer) *os.File {
	switch x := w.(type) {
	case *os.File:
		return x
	case *streamWriter:
		return x.file
	}
	return nil
}

// writeWhole writes b to w, never dropped when w is a streamWriter.
func writeWhole(w io.Writer, b []byte) {
	if s, ok := w.(*streamWriter); ok {
		s.writeAll(b)
		return
	}
	w.Write(b)
}

// droppedOf is how many writes a streamWriter w dropped (0 for any other
// writer).
func droppedOf(w io.Writer) int {
	if s, ok := w.(*streamWriter); ok {
		n, _ := s.drops()
		return n
	}
	return 0
}

// dropsNoted returns s, whose terminal event (completed, failed) carries
// data.events_dropped — how many events before it w dropped because its
// reader had stopped reading — when there were any.
func dropsNoted(s report.Sink, w io.Writer) report.Sink {
	if _, ok := w.(*streamWriter); !ok {
		return s
	}
	return &dropNoter{Sink: s, w: w}
}

type dropNoter struct {
	report.Sink
	w io.Writer
}

func (d *dropNoter) Emit(ev report.Event) {
	if ev.Type == report.EventCompleted || ev.Type == report.EventFailed {
		if n := droppedOf(d.w); n > 0 {
			data := make(map[string]any, len(ev.Data)+1)
			for k, v := range ev.Data {
				data[k] = v
			}
			data["events_dropped"] = n
			ev.Data = data
		}
	}
	d.Sink.Emit(ev)
}
