package goldentest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a testing.TB that records Errorf instead of failing.
type recorder struct {
	testing.TB
	failed bool
	msg    string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.failed = true
	r.msg = format
	for range args {
		r.msg += " %v"
	}
}

func TestCheck(t *testing.T) {
	defer func(u bool) { *update = u }(*update)
	*update = false // the cases compare, even under go test -update
	dir := t.TempDir()
	same := filepath.Join(dir, "same.txt")
	if err := os.WriteFile(same, []byte("a\nb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		path     string
		got      string
		wantFail bool
	}{
		{"equal", same, "a\nb\n", false},
		{"differs", same, "a\nc\n", true},
		{"missing file", filepath.Join(dir, "none.txt"), "x", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{TB: t}
			Check(rec, tc.path, []byte(tc.got))
			if rec.failed != tc.wantFail {
				t.Errorf("failed = %v, want %v (%s)", rec.failed, tc.wantFail, rec.msg)
			}
		})
	}
}

func TestLineDiff(t *testing.T) {
	for _, tc := range []struct{ name, want, got, diff string }{
		{"equal", "a\nb", "a\nb", ""},
		{"one line", "a\nb", "a\nc", "line 2:\n  want: b\n  got:  c\n"},
		{"got longer", "a", "a\nz", "line 2:\n  want: \n  got:  z\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := LineDiff(tc.want, tc.got); d != tc.diff {
				t.Errorf("LineDiff = %q, want %q", d, tc.diff)
			}
		})
	}
	long := strings.Repeat("x\n", 50)
	if n := strings.Count(LineDiff(long, strings.Repeat("y\n", 50)), "line "); n != maxDiffLines {
		t.Errorf("LineDiff shows %d lines, want %d", n, maxDiffLines)
	}
}
