package agent

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

// recorder is a Parser (and StderrParser) that records what it is given.
type recorder struct {
	lines    []string
	oversize []bool
	stderr   []string
}

func (r *recorder) Line(l []byte, o bool, emit func(Event)) {
	r.lines = append(r.lines, string(l))
	r.oversize = append(r.oversize, o)
}
func (r *recorder) End(int, func(Event)) TurnResult { return TurnResult{} }
func (r *recorder) StderrLine(l []byte, o bool, emit func(Event)) {
	r.stderr = append(r.stderr, string(l))
}

// lineOnly is a Parser without StderrLine.
type lineOnly struct{ recorder }

func (lineOnly) StderrLine() {} // not the StderrParser signature

func TestLineWriter(t *testing.T) {
	cases := []struct {
		name     string
		writes   []string
		lines    []string
		oversize []bool
	}{
		{"one write, many lines", []string{"a\nbb\nccc\n"}, []string{"a", "bb", "ccc"}, []bool{false, false, false}},
		{"split across writes", []string{"ab", "c\nd", "e\n"}, []string{"abc", "de"}, []bool{false, false}},
		{"CRLF endings", []string{"a\r\nb\r", "\n"}, []string{"a", "b"}, []bool{false, false}},
		{"empty lines are dropped", []string{"\n\n\r\na\n\n"}, []string{"a"}, []bool{false}},
		{"final line without newline on Close", []string{"a\nlast"}, []string{"a", "last"}, []bool{false, false}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &recorder{}
			w := NewLineWriter(r, nil)
			for _, s := range c.writes {
				if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			w.Close()
			if strings.Join(r.lines, "|") != strings.Join(c.lines, "|") {
				t.Errorf("lines %q, want %q", r.lines, c.lines)
			}
			for i := range c.oversize {
				if i < len(r.oversize) && r.oversize[i] != c.oversize[i] {
					t.Errorf("oversize[%d] = %v", i, r.oversize[i])
				}
			}
		})
	}
}

// TestLineWriterLongLines checks lines over 1 MiB pass whole (no
// bufio.Scanner limit) and lines over MaxLineBytes are cut with oversize
// set and their rest dropped, whether they arrive in one write or many.
func TestLineWriterLongLines(t *testing.T) {
	mib := strings.Repeat("m", 3<<20)
	huge := strings.Repeat("h", MaxLineBytes+12345)
	for _, chunk := range []int{0, 1 << 16, 999_983} {
		r := &recorder{}
		w := NewLineWriter(r, nil)
		in := "first\n" + mib + "\n" + huge + "\nafter\n"
		if chunk == 0 {
			w.Write([]byte(in))
		} else {
			for b := []byte(in); len(b) > 0; {
				n := min(chunk, len(b))
				w.Write(b[:n])
				b = b[n:]
			}
		}
		w.Close()
		if len(r.lines) != 4 {
			t.Fatalf("chunk %d: %d lines", chunk, len(r.lines))
		}
		if r.lines[1] != mib || r.oversize[1] {
			t.Errorf("chunk %d: the 3 MiB line was not passed whole", chunk)
		}
		if len(r.lines[2]) != MaxLineBytes || !r.oversize[2] {
			t.Errorf("chunk %d: the huge line is %d bytes, oversize %v", chunk, len(r.lines[2]), r.oversize[2])
		}
		if r.lines[3] != "after" || r.oversize[3] {
			t.Errorf("chunk %d: the line after the huge one is %q", chunk, r.lines[3])
		}
		if w.Lines() != 4 || w.Bytes() != int64(len(in)) {
			t.Errorf("chunk %d: Lines %d Bytes %d", chunk, w.Lines(), w.Bytes())
		}
		if cap(w.buf) > MaxLineBytes {
			t.Errorf("chunk %d: the line buffer grew to %d bytes, over MaxLineBytes", chunk, cap(w.buf))
		}
	}
}

func TestLineWriterUnterminatedHugeLineOnClose(t *testing.T) {
	r := &recorder{}
	w := NewLineWriter(r, nil)
	w.Write(bytes.Repeat([]byte("z"), MaxLineBytes+1))
	w.Close()
	if len(r.lines) != 1 || len(r.lines[0]) != MaxLineBytes || !r.oversize[0] {
		t.Fatalf("got %d lines", len(r.lines))
	}
}

func TestStreams(t *testing.T) {
	r := &recorder{}
	s := NewStreams(r, nil)
	var wg sync.WaitGroup
	for _, w := range []*LineWriter{s.Stdout, s.Stderr} {
		wg.Add(1)
		go func(w *LineWriter) { // the race detector checks the serialization
			defer wg.Done()
			for i := 0; i < 200; i++ {
				w.Write([]byte("line\n"))
			}
			w.Write([]byte("tail"))
		}(w)
	}
	wg.Wait()
	s.Close()
	if len(r.lines) != 201 || len(r.stderr) != 201 || r.stderr[200] != "tail" {
		t.Errorf("stdout %d lines, stderr %d lines", len(r.lines), len(r.stderr))
	}

	// A parser without StderrLine never sees stderr.
	lo := &lineOnly{}
	s = NewStreams(lo, nil)
	s.Stderr.Write([]byte("secret\n"))
	s.Stdout.Write([]byte("out\n"))
	s.Close()
	if len(lo.stderr) != 0 || len(lo.lines) != 1 {
		t.Errorf("stderr reached a parser that does not read it: %v", lo.stderr)
	}
}
