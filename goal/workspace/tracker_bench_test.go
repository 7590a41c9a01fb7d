package workspace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// benchWorkspace writes n source-like files of about 4 KiB in 50 folders.
func benchWorkspace(b *testing.B, n int) string {
	b.Helper()
	dir := b.TempDir()
	body := strings.Repeat("func f() { return x + y } // some code on a line\n", 80)
	for i := 0; i < n; i++ {
		p := filepath.Join(dir, fmt.Sprintf("pkg%02d", i%50), fmt.Sprintf("file%05d.go", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

// BenchmarkBaseline measures the snapshot before the first turn: every file
// read, hashed and its text kept for the diff (5000 files, ~19 MiB).
func BenchmarkBaseline(b *testing.B) {
	dir := benchWorkspace(b, 5000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tr := New(dir, Options{TempDir: b.TempDir()})
		if err := tr.Baseline(context.Background()); err != nil {
			b.Fatal(err)
		}
		tr.Close()
	}
}

// BenchmarkAfterTurnUnchanged measures the snapshot after a turn that
// changed nothing: lstat only, hashes reused (5000 files).
func BenchmarkAfterTurnUnchanged(b *testing.B) {
	dir := benchWorkspace(b, 5000)
	tr := New(dir, Options{TempDir: b.TempDir()})
	defer tr.Close()
	if err := tr.Baseline(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := tr.AfterTurn(context.Background(), i+1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDiff measures the final changes with 50 of 5000 files edited.
func BenchmarkDiff(b *testing.B) {
	dir := benchWorkspace(b, 5000)
	tr := New(dir, Options{TempDir: b.TempDir()})
	defer tr.Close()
	if err := tr.Baseline(context.Background()); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		p := filepath.Join(dir, fmt.Sprintf("pkg%02d", i%50), fmt.Sprintf("file%05d.go", i))
		data, _ := os.ReadFile(p)
		os.WriteFile(p, append([]byte("// edited\n"), data[:len(data)/2]...), 0o644)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d, err := tr.Diff(context.Background())
		if err != nil || len(d.Files) != 50 {
			b.Fatalf("%v, %d files", err, len(d.Files))
		}
	}
}
