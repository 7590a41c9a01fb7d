package setup

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDepsKey: the kept deps volume's key follows the module graph and the
// steps, not the sources — including a go.work in a module's folder or
// between it and the root, which governs that module's steps; steps that
// may write into the tree, a truncated walk or a go.sum or go.work that is
// not a regular file keep the deps per run ("").
func TestDepsKey(t *testing.T) {
	base := map[string]string{
		"go.mod":           "module example.test/a\n\ngo 1.22\n\nrequire github.com/google/uuid v1.6.0\n",
		"go.sum":           "github.com/google/uuid v1.6.0 h1:x=\n",
		"a.go":             "package a\n",
		"sub/go.mod":       "module example.test/a/sub\n",
		"sub/main.go":      "package main\n",
		"lib/inner/go.mod": "module example.test/inner\n",
		"lib/inner/i.go":   "package inner\n",
		"docs/README.md":   "docs\n",
	}
	key := func(t *testing.T, files map[string]string, edit func(dir string), extra ...string) (string, []Step) {
		t.Helper()
		dir := t.TempDir()
		for name, body := range files {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if edit != nil {
			edit(dir)
		}
		p, err := Detect(dir)
		if err != nil {
			t.Fatal(err)
		}
		return DepsKey(dir, p, p.Steps(), extra...), p.Steps()
	}
	want, _ := key(t, base, nil, "go1.26")
	if len(want) != 64 {
		t.Fatalf("key %q", want)
	}
	write := func(name, body string) func(string) {
		return func(dir string) {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name  string
		edit  func(string)
		extra string
		same  bool
		empty bool
	}{
		{name: "a source file changed", edit: write("a.go", "package a\n\nfunc F() {}\n"), same: true},
		{name: "a new source file", edit: write("b.go", "package a\n"), same: true},
		{name: "go.sum changed", edit: write("go.sum", "github.com/google/uuid v1.6.0 h1:y=\n")},
		{name: "a nested module's go.mod changed", edit: write("sub/go.mod", "module example.test/a/sub\n\nrequire x.test/y v1.0.0\n")},
		{name: "a nested module's go.sum appeared", edit: write("sub/go.sum", "x.test/y v1.0.0 h1:z=\n")},
		{name: "go.work appeared", edit: write("go.work", "go 1.22\n\nuse .\n")},
		{name: "a nested module's go.work appeared", edit: func(dir string) {
			write("sub/go.work", "go 1.22\n\nuse .\n\nreplace golang.org/x/sync v0.7.0 => ./.fake\n")(dir)
			write("sub/.fake/go.mod", "module golang.org/x/sync\n")(dir)
		}},
		{name: "a nested module's go.work.sum appeared", edit: write("sub/go.work.sum", "x.test/y v1.0.0 h1:z=\n")},
		{name: "a go.work between a module and the root appeared", edit: write("lib/go.work", "go 1.22\n\nuse ./inner\n")},
		{name: "a go.work above no module appeared", edit: write("docs/go.work", "go 1.22\n"), same: true},
		{name: "a go.work below a module's folder appeared", edit: write("sub/cmd/go.work", "go 1.22\n"), same: true},
		{name: "a nested go.work is a link", edit: func(dir string) {
			if err := os.Symlink("/etc/hostname", filepath.Join(dir, "lib", "go.work")); err != nil {
				t.Fatal(err)
			}
		}, empty: true},
		{name: "a nested go.work is a folder", edit: func(dir string) {
			if err := os.Mkdir(filepath.Join(dir, "sub", "go.work"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, empty: true},
		{name: "another toolchain", extra: "go1.27"},
		{name: "go.sum is a link", edit: func(dir string) {
			os.Remove(filepath.Join(dir, "go.sum"))
			if err := os.Symlink("/etc/hostname", filepath.Join(dir, "go.sum")); err != nil {
				t.Fatal(err)
			}
		}, empty: true},
		{name: "npm ci may write the tree", edit: func(dir string) {
			write("package.json", "{}")(dir)
			write("package-lock.json", "{}")(dir)
		}, empty: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			extra := "go1.26"
			if tc.extra != "" {
				extra = tc.extra
			}
			got, _ := key(t, base, tc.edit, extra)
			switch {
			case tc.empty && got != "":
				t.Errorf("key %q, want none (per-run deps)", got)
			case !tc.empty && tc.same && got != want:
				t.Errorf("key changed: %q, want %q", got, want)
			case !tc.empty && !tc.same && (got == want || got == ""):
				t.Errorf("key %q did not change", got)
			}
		})
	}
	t.Run("a --setup command", func(t *testing.T) {
		_, steps := key(t, base, nil)
		dir := t.TempDir()
		p := Project{GoModules: []string{"."}}
		if got := DepsKey(dir, p, append(steps, Step{Command: "go mod download"})); got != "" {
			t.Errorf("key %q with a step the user gave", got)
		}
		if got := DepsKey(dir, p, nil); got != "" {
			t.Errorf("key %q without steps", got)
		}
	})
}

// TestDepsKeyLocalTargets: the local folders a go.mod replaces a module
// with and a go.work uses are in the key, followed transitively, even
// where Detect does not walk (hidden folders, build/); a target that is
// absolute, leaves the workspace, or whose go.mod is missing, a link or
// does not parse keeps the deps per run ("").
func TestDepsKeyLocalTargets(t *testing.T) {
	base := map[string]string{
		"go.mod":              "module example.test/a\n\ngo 1.22\n\nrequire example.com/x v1.0.0\n\nreplace example.com/x => ./.fake\n",
		"go.sum":              "",
		"go.work":             "go 1.22\n\nuse (\n\t.\n\t./build/tool\n)\n",
		"a.go":                "package a\n",
		".fake/go.mod":        "module example.com/x\n\nrequire example.com/y v1.0.0\n\nreplace example.com/y => ./inner\n",
		".fake/x.go":          "package x\n",
		".fake/inner/go.mod":  "module example.com/y\n",
		"build/tool/go.mod":   "module example.test/tool\n",
		"build/tool/main.go":  "package main\n",
		".other/settings.txt": "one\n",
	}
	key := func(t *testing.T, edit func(dir string)) string {
		t.Helper()
		dir := tree(t, base)
		if edit != nil {
			edit(dir)
		}
		p, err := Detect(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.GoModules) != 1 {
			t.Fatalf("GoModules %q, want the root alone (the targets are not walked)", p.GoModules)
		}
		return DepsKey(dir, p, p.Steps(), "go1.26")
	}
	want := key(t, nil)
	if len(want) != 64 {
		t.Fatalf("key %q", want)
	}
	write := func(name, body string) func(string) {
		return func(dir string) {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// replaces writes n replace targets, each with a go.mod.
	replaces := func(n int) func(string) {
		return func(dir string) {
			var b strings.Builder
			b.WriteString("module example.test/a\n\ngo 1.22\n")
			for i := range n {
				fmt.Fprintf(&b, "replace example.com/t%d => ./.t/%d\n", i, i)
				write(fmt.Sprintf(".t/%d/go.mod", i), fmt.Sprintf("module example.com/t%d\n", i))(dir)
			}
			write("go.mod", b.String())(dir)
		}
	}
	for _, tc := range []struct {
		name  string
		edit  func(string)
		same  bool
		empty bool
	}{
		{name: "an unrelated hidden file changed", edit: write(".other/settings.txt", "two\n"), same: true},
		{name: "a replace target's source changed", edit: write(".fake/x.go", "package x\n\nfunc F() {}\n"), same: true},
		{name: "a hidden replace target's go.mod changed", edit: write(".fake/go.mod", "module example.com/x\n\nrequire example.com/z v1.0.0\n\nreplace example.com/y => ./inner\n")},
		{name: "a hidden replace target's go.sum appeared", edit: write(".fake/go.sum", "example.com/y v1.0.0 h1:z=\n")},
		{name: "a go.work use folder's go.mod changed", edit: write("build/tool/go.mod", "module example.test/tool\n\nrequire example.com/z v1.0.0\n")},
		{name: "a replace target's own replace target changed", edit: write(".fake/inner/go.mod", "module example.com/y\n\nrequire example.com/z v1.0.0\n")},
		{name: "a go.work replace target changed", edit: func(dir string) {
			write("go.work", "go 1.22\n\nuse (\n\t.\n\t./build/tool\n)\n\nreplace example.com/w => ./testdata/w\n")(dir)
			write("testdata/w/go.mod", "module example.com/w\n")(dir)
		}},
		{name: "local targets at the bound", edit: replaces(depsKeyTargetsMax - 1)}, // and build/tool
		{name: "local targets beyond the bound", edit: replaces(depsKeyTargetsMax), empty: true},
		{name: "a target outside the workspace", edit: write(".fake/go.mod", "module example.com/x\n\nreplace example.com/y => ../../outside\n"), empty: true},
		{name: "an absolute target", edit: write("go.mod", "module example.test/a\n\nreplace example.com/x => /tmp/x\n"), empty: true},
		{name: "a go.work use folder outside the workspace", edit: write("go.work", "go 1.22\n\nuse ../outside\n"), empty: true},
		{name: "a target's go.mod is a link", edit: func(dir string) {
			os.Remove(filepath.Join(dir, ".fake", "go.mod"))
			if err := os.Symlink("../go.mod", filepath.Join(dir, ".fake", "go.mod")); err != nil {
				t.Fatal(err)
			}
		}, empty: true},
		{name: "a target is a link to a folder outside the workspace", edit: func(dir string) {
			out := t.TempDir()
			write("go.mod", "module example.com/x\n")(out)
			if err := os.Symlink(out, filepath.Join(dir, "outlink")); err != nil {
				t.Fatal(err)
			}
			write("go.mod", "module example.test/a\n\nreplace example.com/x => ./outlink\n")(dir)
		}, empty: true},
		{name: "a target's go.mod is missing", edit: func(dir string) {
			if err := os.Remove(filepath.Join(dir, ".fake", "inner", "go.mod")); err != nil {
				t.Fatal(err)
			}
		}, empty: true},
		{name: "a target's go.mod does not parse", edit: write(".fake/go.mod", "module example.com/x\n\nbogus directive\n"), empty: true},
		{name: "the root go.mod does not parse", edit: write("go.mod", "module example.test/a\n\nrequire (\n"), empty: true},
		{name: "the go.work does not parse", edit: write("go.work", "go 1.22\n\nuse (\n"), empty: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := key(t, tc.edit)
			switch {
			case tc.empty && got != "":
				t.Errorf("key %q, want none (per-run deps)", got)
			case !tc.empty && tc.same && got != want:
				t.Errorf("key changed: %q, want %q", got, want)
			case !tc.empty && !tc.same && (got == want || got == ""):
				t.Errorf("key %q did not change", got)
			}
		})
	}
}
