// Package goldentest compares what a test produced with a golden file, or
// rewrites the file when the tests run with -update:
//
//	go test ./report -update
//
// Every package with golden files uses it, so -update means the same
// everywhere and is defined once per test binary.
package goldentest

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files the tests compare with")

// Updating reports whether the tests run with -update.
func Updating() bool { return *update }

// maxDiffLines bounds the differing lines a failure shows: 12.
const maxDiffLines = 12

// Check compares got with the golden file at path (relative to the test's
// package folder, e.g. testdata/golden/x.json). With -update it writes got
// there instead, creating the folders, and the comparison passes. A missing
// file or a difference fails t (Errorf: the test goes on) with the path and
// the first maxDiffLines lines that differ.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("reading the golden file (go test -update creates it): %v", err)
		return
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from what the test produced (go test -update rewrites it, after checking the change):\n%s", path, LineDiff(string(want), string(got)))
	}
}

// LineDiff returns the lines of want and got that differ, position by
// position (line N: want, got), at most maxDiffLines of them; "" when the
// texts are equal.
func LineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < maxDiffLines; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			b.WriteString("line " + strconv.Itoa(i+1) + ":\n  want: " + wl + "\n  got:  " + gl + "\n")
			shown++
		}
	}
	return b.String()
}
