package main

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

// blockedWriter is a stream whose reader stopped reading: every Write
// waits until release is closed.
type blockedWriter struct {
	release chan struct{}
	mu      sync.Mutex
	got     bytes.Buffer
}

func (b *blockedWriter) Write(p []byte) (int, error) {
	<-b.release
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.got.Write(p)
}

// TestStreamWriterNeverBlocks: writes to a stream nobody reads return at
// once; past the queue's bound progress lines are dropped and counted,
// never the document; a flush gives up at its deadline, and once the
// reader reads again everything kept arrives in order.
func TestStreamWriterNeverBlocks(t *testing.T) {
	bw := &blockedWriter{release: make(chan struct{})}
	s := newStreamWriter(bw)
	line := bytes.Repeat([]byte("x"), 1023)
	line = append(line, '\n')
	done := make(chan struct{})
	go func() {
		for i := 0; i < 2*streamQueueBytes/len(line); i++ {
			s.Write(line)
		}
		writeWhole(s, []byte("{\"schema\":\"goalrun/1\"}\n"))
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(guard):
		t.Fatal("writes to a stream nobody reads blocked")
	}
	if n := droppedOf(s); n < streamQueueBytes/len(line)/2 {
		t.Errorf("%d writes dropped, want about half of them", n)
	}
	if s.flush(time.Now().Add(50 * time.Millisecond)) {
		t.Error("flush reported success while the stream was not read")
	}
	close(bw.release)
	if !s.flush(time.Time{}) {
		t.Fatal("flush failed once the stream was read again")
	}
	bw.mu.Lock()
	defer bw.mu.Unlock()
	if !bytes.HasSuffix(bw.got.Bytes(), []byte("{\"schema\":\"goalrun/1\"}\n")) {
		t.Error("the document did not arrive last")
	}
	if bw.got.Len() > streamQueueBytes+2*len(line)+64 {
		t.Errorf("%d bytes arrived, more than the queue holds", bw.got.Len())
	}
}
