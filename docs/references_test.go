package docs

import (
	"bufio"
	"fmt"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// repoRoot is the module's root folder, seen from this package's folder
// (go test runs a package's tests in its source folder).
const repoRoot = ".."

// mdRef matches a path to a markdown file: at least one name character right
// before ".md", so a glob such as testdata/*.md is not one.
var mdRef = regexp.MustCompile(`(?:\.\./|\./)*[A-Za-z0-9_][A-Za-z0-9_./-]*\.md\b`)

// mdLink matches the target of a markdown link or image: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// outsideTree matches references to documents that live beside the
// repository instead of in it: the design folder "shared" (its spec,
// contracts, transcripts and hooks) by a relative or absolute path.
var outsideTree = regexp.MustCompile(`(?:\.\./)+shared/|/work/shared\b|(?:^|[\s("'` + "`" + `])shared/(?:spec|contracts|transcripts|hooks)\b`)

// urlLike matches a URL, whose paths are not the repository's.
var urlLike = regexp.MustCompile(`[a-z][a-z0-9+.-]*://\S+`)

// schemeLike matches a link target with a URI scheme (https:, mailto:, or
// the javascript: a hostile-prose fixture quotes): not a repository path.
var schemeLike = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// quoted matches a double-quoted span: in a comment, an example of what an
// agent or a user writes ("created docs/ARCH.md"), not a reference.
var quoted = regexp.MustCompile(`"[^"\n]*"`)

// sourceFiles returns the repository's .go and .md files (slash paths
// relative to the root), leaving out .git, other modules (a folder with its
// own go.mod) and, for .go files, testdata folders (fixtures, not code).
func sourceFiles(t *testing.T) (goFiles, mdFiles []string) {
	t.Helper()
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if d.Name() == ".git" || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			if rel != "." {
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			return nil
		}
		switch {
		case strings.HasSuffix(rel, ".go") && !inTestdata(rel):
			goFiles = append(goFiles, rel)
		case strings.HasSuffix(rel, ".md"):
			mdFiles = append(mdFiles, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(goFiles) == 0 || !slices.Contains(mdFiles, "README.md") {
		t.Fatalf("walking %s found %d .go files and no README.md: not the repository's root", repoRoot, len(goFiles))
	}
	return goFiles, mdFiles
}

func inTestdata(rel string) bool {
	return slices.Contains(strings.Split(rel, "/"), "testdata")
}

// goComments returns the comments of a Go file with the line each starts
// on. Scanning, not parsing: a file that does not compile still has its
// comments read.
func goComments(t *testing.T, rel string) (texts []string, lines []int) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(repoRoot, rel))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	file := fset.AddFile(rel, fset.Base(), len(src))
	var s scanner.Scanner
	s.Init(file, src, func(token.Position, string) {}, scanner.ScanComments)
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			return texts, lines
		}
		if tok == token.COMMENT {
			texts = append(texts, lit)
			lines = append(lines, fset.Position(pos).Line)
		}
	}
}

// exists reports whether ref, as written in the file at rel, names a file
// of the repository: relative to that file's folder, or to the root (a
// comment's "docs/x.md"). A markdown link is read as a browser reads it,
// relative to its file's folder only: see linkExists.
func exists(rel, ref string) bool { return resolves(ref, path.Dir(rel), ".") }

// linkExists reports whether a markdown link target in the file at rel
// names a file of the repository: relative to the file's folder, or to the
// root when it starts with "/".
func linkExists(rel, target string) bool {
	if strings.HasPrefix(target, "/") {
		return resolves(strings.TrimPrefix(target, "/"), ".")
	}
	return resolves(target, path.Dir(rel))
}

// resolves reports whether ref (an anchor after "#" ignored) names an
// existing file or folder below the root, from one of the bases.
func resolves(ref string, bases ...string) bool {
	ref, _, _ = strings.Cut(ref, "#")
	for _, base := range bases {
		p := path.Clean(path.Join(base, ref))
		if p == ".." || strings.HasPrefix(p, "../") {
			continue // outside the repository
		}
		if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(p))); err == nil {
			return true
		}
	}
	return false
}

// lineOf is the 1-based line of byte offset i in text, counted from first.
func lineOf(text string, i, first int) int { return first + strings.Count(text[:i], "\n") }

// TestDocReferencesResolve: every markdown file a Go comment or a markdown
// file names exists in the repository, and nothing cites the design
// documents kept beside it (a clone has none of them). Go comments are
// read for paths ending in .md, outside URLs and double-quoted examples;
// markdown files for their relative link targets and any docs/….md path.
func TestDocReferencesResolve(t *testing.T) {
	goFiles, mdFiles := sourceFiles(t)
	var problems []string
	report := func(rel string, line int, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s:%d: %s", rel, line, fmt.Sprintf(format, args...)))
	}
	checkOutside := func(rel, text string, first int) {
		for _, m := range outsideTree.FindAllStringIndex(text, -1) {
			report(rel, lineOf(text, m[0], first), "cites %q, which is not in the repository: cite the in-repo doc (docs/…) or a public URL that says it",
				strings.Trim(text[m[0]:m[1]], " \t\n(\"'`"))
		}
	}
	for _, rel := range goFiles {
		texts, lines := goComments(t, rel)
		for k, c := range texts {
			checkOutside(rel, c, lines[k])
			blank := func(s string) string { return strings.Repeat(" ", len(s)) }
			plain := urlLike.ReplaceAllStringFunc(c, blank)
			plain = quoted.ReplaceAllStringFunc(plain, blank)
			for _, m := range mdRef.FindAllStringIndex(plain, -1) {
				if ref := plain[m[0]:m[1]]; !exists(rel, ref) {
					report(rel, lineOf(plain, m[0], lines[k]), "cites %s, which does not exist (paths are relative to the file's folder or the repository's root)", ref)
				}
			}
		}
	}
	for _, rel := range mdFiles {
		b, err := os.ReadFile(filepath.Join(repoRoot, rel))
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		checkOutside(rel, text, 1)
		for _, m := range mdLink.FindAllStringSubmatchIndex(text, -1) {
			target := text[m[2]:m[3]]
			if schemeLike.MatchString(target) || strings.HasPrefix(target, "#") {
				continue
			}
			if !linkExists(rel, target) {
				report(rel, lineOf(text, m[2], 1), "links to %s, which does not exist (a link is relative to its file's folder)", target)
			}
		}
		if inTestdata(rel) {
			continue // fixtures quote agents' prose; only their links are checked
		}
		plain := urlLike.ReplaceAllStringFunc(text, func(s string) string { return strings.Repeat(" ", len(s)) })
		for _, m := range mdRef.FindAllStringIndex(plain, -1) {
			ref := plain[m[0]:m[1]]
			if strings.HasPrefix(ref, "docs/") && !exists(rel, ref) {
				report(rel, lineOf(plain, m[0], 1), "names %s, which does not exist", ref)
			}
		}
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestDocReferenceRules shows the rules of TestDocReferencesResolve on
// made-up comments, so a rule that stops matching is caught here and not
// by a dangling reference going unseen.
func TestDocReferenceRules(t *testing.T) {
	// The bad examples are spelled in pieces, so that no line of this file
	// is itself a reference to a doc outside the tree.
	spec, design := "sandbox"+".md", "sha"+"red/"
	cases := []struct {
		name, comment string
		refs          []string // what mdRef finds after URLs and quotes are blanked
		outside       bool
	}{
		{"in-repo doc", "// See docs/grounding.md, \"Changes\".", []string{"docs/grounding.md"}, false},
		{"bare spec name", "// (" + spec + ", \"Steps\")", []string{spec}, false},
		{"relative path", "// see ../README.md#limits", []string{"../README.md"}, false},
		{"glob is no reference", "// rewrite testdata/report/*.md from the renderer", nil, false},
		{"quoted example", `// "created docs/ARCH.md"`, nil, false},
		{"URL", "// https://github.com/openai/codex/blob/main/docs/config.md", nil, false},
		{"design folder, relative", "// ../" + design + "spec/" + spec, []string{"../" + design + "spec/" + spec}, true},
		{"design folder, absolute", "// from /work/" + design + "transcripts/claude", nil, true},
		{"design folder, named", "// Limits (" + design + "contracts/README.md).", []string{design + "contracts/README.md"}, true},
		{"a file named like it", `// include.path = ../shared.gitconfig`, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			blank := func(s string) string { return strings.Repeat(" ", len(s)) }
			plain := quoted.ReplaceAllStringFunc(urlLike.ReplaceAllStringFunc(tc.comment, blank), blank)
			if got := mdRef.FindAllString(plain, -1); !slices.Equal(got, tc.refs) {
				t.Errorf("references %q, want %q", got, tc.refs)
			}
			if got := outsideTree.MatchString(tc.comment); got != tc.outside {
				t.Errorf("outside the tree: %v, want %v", got, tc.outside)
			}
		})
	}
	if !exists("sandbox/x.go", "docs/security.md") || exists("sandbox/x.go", spec) || exists("docs/x.md", "../../outside.md") {
		t.Error("exists resolves against the wrong folders")
	}
	if !linkExists("docs/x.md", "security.md") || !linkExists("README.md", "docs/security.md#tier") ||
		linkExists("docs/x.md", "docs/security.md") || !linkExists("docs/x.md", "/README.md") {
		t.Error("linkExists resolves against the wrong folders")
	}
}

// packageMapRow matches a row of the package map in architecture.md:
// | `path` | owns | may import |
var packageMapRow = regexp.MustCompile("^\\| `([a-z0-9_/.-]+)` \\|")

// TestPackageMapMatchesTree: the package map in architecture.md has one row
// for every package folder of the module (a folder holding non-test .go
// files, testdata and other modules left out), and no row for a folder
// that is not one.
func TestPackageMapMatchesTree(t *testing.T) {
	goFiles, _ := sourceFiles(t)
	tree := map[string]bool{}
	for _, f := range goFiles {
		if !strings.HasSuffix(f, "_test.go") {
			tree[path.Dir(f)] = true
		}
	}
	f, err := os.Open("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	listed := map[string]bool{}
	inMap := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			inMap = line == "## Package map"
			continue
		}
		if m := packageMapRow.FindStringSubmatch(line); inMap && m != nil {
			if listed[m[1]] {
				t.Errorf("architecture.md lists %s twice", m[1])
			}
			listed[m[1]] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(listed) == 0 {
		t.Fatal(`architecture.md has no "## Package map" table`)
	}
	for p := range tree {
		if p != "." && !listed[p] {
			t.Errorf("package %s is not in architecture.md's package map: add a row (what it owns, what it may import)", p)
		}
	}
	for p := range listed {
		if !tree[p] {
			t.Errorf("architecture.md's package map lists %s, which is not a package folder of the module", p)
		}
	}
}
