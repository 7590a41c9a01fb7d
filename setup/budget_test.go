package setup

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// bigGoMod is a go.mod of about size bytes that requires nothing: parsed,
// it is requireless.
func bigGoMod(module string, size int) string {
	line := "// " + strings.Repeat("a", 97) + "\n"
	return "module " + module + "\n" + strings.Repeat(line, size/len(line))
}

// bigRequirements is a requirements file of about size bytes naming
// distributions prefix0, prefix1, ….
func bigRequirements(prefix string, size int) string {
	var b strings.Builder
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "%s%d==1.0 # %s\n", prefix, i, strings.Repeat("p", 80))
	}
	return b.String()
}

// TestDetectParseBudget: Detect parses at most manifestsParsedMax bytes of
// manifests across the walk, so a tree of many large go.mod files (cheap
// to send: git compresses them to nothing) cannot stall it; a go.mod
// beyond the budget counts as requiring modules (its `go mod download`
// runs), and a Python manifest beyond it adds no names.
func TestDetectParseBudget(t *testing.T) {
	const big = 900 << 10 // just under manifestBytesMax
	fits := manifestsParsedMax / big
	cases := []struct {
		name            string
		files           map[string]string
		wantModules     int
		wantRequireless int
		wantDownloads   int // "go mod download" steps
		wantPyDeps      func(deps []string) bool
	}{
		{name: "small go.mod files are all parsed", files: func() map[string]string {
			m := map[string]string{}
			for i := range 10 {
				m[fmt.Sprintf("m%02d/go.mod", i)] = "module m\n"
			}
			return m
		}(), wantModules: 10, wantRequireless: 10, wantDownloads: 0},
		{name: "large go.mod files beyond the budget count as requiring modules", files: func() map[string]string {
			m := map[string]string{}
			for i := range 12 {
				m[fmt.Sprintf("m%02d/go.mod", i)] = bigGoMod("m", big)
			}
			m["z/go.mod"] = "module z\n" // small: still fits after the large ones
			return m
		}(), wantModules: 13, wantRequireless: fits + 1, wantDownloads: 12 - fits},
		{name: "a go.mod over the per-file bound is charged only what is read", files: func() map[string]string {
			m := map[string]string{"a/go.mod": bigGoMod("a", 3*manifestBytesMax)}
			for i := range 3 {
				m[fmt.Sprintf("m%02d/go.mod", i)] = "module m\n"
			}
			return m
		}(), wantModules: 4, wantRequireless: 3, wantDownloads: 1},
		{name: "Python manifests share the budget", files: func() map[string]string {
			m := map[string]string{}
			for i := range 8 {
				m[fmt.Sprintf("p%02d/requirements.txt", i)] = bigRequirements(fmt.Sprintf("early%d-", i), big)
			}
			m["zz/requirements.txt"] = "late\n"
			m["zz/go.mod"] = "module z\n"
			return m
		}(), wantModules: 1, wantRequireless: 1, wantDownloads: 0, wantPyDeps: func(deps []string) bool {
			read := map[string]bool{} // the files read, by their names' prefix
			for _, d := range deps {
				prefix, _, _ := strings.Cut(d, "-")
				read[prefix] = true
			}
			// the first ones fill the budget; the small ones after still fit
			return len(read) == fits+1 && read["early0"] && read["late"] && !read[fmt.Sprintf("early%d", fits)]
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Detect(tree(t, c.files))
			if err != nil {
				t.Fatal(err)
			}
			downloads := 0
			for _, s := range got.Steps() {
				if s.Command == "go mod download" {
					downloads++
				}
			}
			if len(got.GoModules) != c.wantModules || len(got.GoRequireless) != c.wantRequireless || downloads != c.wantDownloads || got.Truncated {
				t.Errorf("modules %d requireless %d downloads %d truncated %v, want %d %d %d false",
					len(got.GoModules), len(got.GoRequireless), downloads, got.Truncated, c.wantModules, c.wantRequireless, c.wantDownloads)
			}
			if c.wantPyDeps != nil && !c.wantPyDeps(got.PythonDeps) {
				t.Errorf("PythonDeps read beyond (or short of) the budget: %d names", len(got.PythonDeps))
			}
		})
	}
}

// TestDetectRootFirst: the root folder's own manifests are seen even when
// the walk stops at its bound inside a large folder that sorts before
// them, so the root module is always detected.
func TestDetectRootFirst(t *testing.T) {
	defer func(n int) { walkEntriesLimit = n }(walkEntriesLimit)
	walkEntriesLimit = 50
	cases := []struct {
		name      string
		files     map[string]string
		want      []string // GoModules
		truncated bool
	}{
		{name: "a large folder sorts before go.mod", files: map[string]string{"go.mod": "module r\n", "r.go": "package r\n"}, want: []string{"."}, truncated: true},
		{name: "a large folder and a nested module", files: map[string]string{"go.mod": "module r\n", "zz/go.mod": "module zz\n"}, want: []string{"."}, truncated: true},
		{name: "many root files past the bound", files: func() map[string]string {
			m := map[string]string{"requirements.txt": "late\n"}
			for i := range 80 {
				m[fmt.Sprintf("a%03d.txt", i)] = ""
			}
			m["go.mod"] = "module r\n"
			return m
		}(), want: []string{"."}, truncated: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			files := map[string]string{}
			for k, v := range c.files {
				files[k] = v
			}
			for i := range 2 * walkEntriesLimit {
				files[fmt.Sprintf("d/f%03d.txt", i)] = ""
			}
			got, err := Detect(tree(t, files))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got.GoModules, ",") != strings.Join(c.want, ",") || got.Truncated != c.truncated || len(got.Ecosystems) == 0 || got.Ecosystems[0] != Go {
				t.Errorf("GoModules %q Ecosystems %q Truncated %v, want %q, go, %v", got.GoModules, got.Ecosystems, got.Truncated, c.want, c.truncated)
			}
		})
	}
}

// TestDepsKeyBytesBound: DepsKey hashes at most depsKeyBytesMax bytes in
// all; a module graph beyond it keeps the deps per run ("").
func TestDepsKeyBytesBound(t *testing.T) {
	defer func(n int) { depsKeyBytesLimit = n }(depsKeyBytesLimit)
	depsKeyBytesLimit = 64 << 10
	cases := []struct {
		name  string
		sum   int // bytes of each of the two go.sum files
		empty bool
	}{
		{name: "within the bound", sum: 16 << 10},
		{name: "each file within its bound, together beyond", sum: 40 << 10, empty: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sum := strings.Repeat("x.test/y v1.0.0 h1:z=\n", c.sum/22)
			dir := tree(t, map[string]string{
				"go.mod": "module a\n\nrequire x.test/y v1.0.0\n", "go.sum": sum, "a.go": "package a\n",
				"b/go.mod": "module b\n\nrequire x.test/y v1.0.0\n", "b/go.sum": sum, "b/b.go": "package b\n",
			})
			p, err := Detect(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got := DepsKey(dir, p, p.Steps(), "go1.26"); (got == "") != c.empty {
				t.Errorf("key %q, want empty %v", got, c.empty)
			}
		})
	}
}

// BenchmarkDetectLargeGoMods: 150 go.mod files of 1 MiB each took 39 s
// before the parse budget.
func BenchmarkDetectLargeGoMods(b *testing.B) {
	dir := b.TempDir()
	body := []byte(strings.Repeat("require a a a\n", (manifestBytesMax-16)/14))
	for i := range 150 {
		p := filepath.Join(dir, fmt.Sprintf("m%03d", i), "go.mod")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, body, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		if _, err := Detect(dir); err != nil {
			b.Fatal(err)
		}
	}
}
