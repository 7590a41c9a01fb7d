package sandbox_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/sandbox"
)

func TestTailWriter(t *testing.T) {
	cases := []struct {
		name   string
		n      int
		writes []string
		want   string
	}{
		{"empty", 8, nil, ""},
		{"fits", 8, []string{"abc", "de"}, "abcde"},
		{"exactly full", 4, []string{"ab", "cd"}, "abcd"},
		{"wraps once", 4, []string{"abc", "def"}, "cdef"},
		{"one write larger than the ring", 4, []string{"ab", "0123456789"}, "6789"},
		{"many small writes wrap repeatedly", 5, strings.Split("the quick brown fox jumps", ""), "jumps"},
		{"keeps nothing", 0, []string{"abc"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var fwd bytes.Buffer
			w := sandbox.NewTailWriter(&fwd, tc.n)
			total := 0
			for _, s := range tc.writes {
				if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", s, n, err)
				}
				total += len(s)
			}
			out := w.Output()
			if string(out.Tail) != tc.want || out.Bytes != int64(total) || out.Truncated != (total > len(tc.want)) {
				t.Errorf("Output = %q %d %v, want %q %d %v", out.Tail, out.Bytes, out.Truncated, tc.want, total, total > len(tc.want))
			}
			if fwd.String() != strings.Join(tc.writes, "") {
				t.Errorf("forwarded %q", fwd.String())
			}
		})
	}
}

type failingWriter struct{ calls int }

func (f *failingWriter) Write(p []byte) (int, error) {
	f.calls++
	return 0, errors.New("sink gone")
}

func TestTailWriterDropsAFailingForward(t *testing.T) {
	f := &failingWriter{}
	w := sandbox.NewTailWriter(f, 16)
	for _, s := range []string{"one ", "two ", "three"} {
		if _, err := io.WriteString(w, s); err != nil {
			t.Fatalf("Write returned %v; it must never fail", err)
		}
	}
	if f.calls != 1 {
		t.Errorf("forward called %d times after failing, want 1", f.calls)
	}
	if w.ForwardErr() == nil {
		t.Errorf("ForwardErr is nil")
	}
	if got := string(w.Output().Tail); got != "one two three" {
		t.Errorf("tail %q", got)
	}
}

func BenchmarkTailWriter(b *testing.B) {
	w := sandbox.NewTailWriter(io.Discard, sandbox.TailBytes)
	chunk := bytes.Repeat([]byte("x"), 32<<10)
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		w.Write(chunk)
	}
}
