package workspace

import (
	"fmt"
	"io"
	"strings"
	"testing"
)

// benchLines returns n distinct source-like lines of about 50 bytes.
func benchLines(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("\tx%06d := compute(x, %6d) // a line of code\n", i, i)
	}
	return out
}

// BenchmarkLineDiff measures writeTextDiff on a text-file pair: ordinary
// edits in a large file, a rewritten file, and two hostile reorderings (a
// file reversed line by line: few lines differ by count but the edit
// distance is the whole file).
func BenchmarkLineDiff(b *testing.B) {
	edited := func(n int) (string, string) {
		a := benchLines(n)
		c := append([]string(nil), a...)
		for i := 0; i < 10; i++ {
			c[i*n/10+n/20] = "\t// edited\n"
		}
		return strings.Join(a, ""), strings.Join(c, "")
	}
	rewritten := func(n int) (string, string) {
		a := benchLines(n)
		c := make([]string, n)
		for i := range c {
			c[i] = "\t" + a[i]
		}
		return strings.Join(a, ""), strings.Join(c, "")
	}
	reversed := func(n int) (string, string) {
		a := benchLines(n)
		c := make([]string, n)
		for i := range c {
			c[n-1-i] = a[i]
		}
		return strings.Join(a, ""), strings.Join(c, "")
	}
	for _, bc := range []struct {
		name string
		make func(int) (string, string)
		n    int
	}{
		{"edited-20000", edited, 20000},
		{"rewritten-20000", rewritten, 20000},
		{"reversed-1000", reversed, 1000},
		{"reversed-20000", reversed, 20000},
	} {
		old, new := bc.make(bc.n)
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(old) + len(new)))
			for b.Loop() {
				benchTextDiff(old, new)
			}
		})
	}
}

func benchTextDiff(old, new string) {
	writeTextDiff(io.Discard, "f", []byte(old), []byte(new))
}
