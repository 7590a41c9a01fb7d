package githubtest

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Git modes as the Git Data API spells them.
const (
	ModeFile       = "100644"
	ModeExecutable = "100755"
	ModeSymlink    = "120000"
	ModeSubmodule  = "160000"
	modeTree       = "040000"
)

// File is one file of a commit: its content and mode (ModeFile when "").
type File struct {
	Content []byte
	Mode    string
}

type treeEntry struct {
	Name string
	Mode string // ModeFile, ModeExecutable, ModeSymlink, ModeSubmodule or modeTree
	SHA  string
}

func (e treeEntry) typ() string {
	switch e.Mode {
	case modeTree:
		return "tree"
	case ModeSubmodule:
		return "commit"
	}
	return "blob"
}

type commitObject struct {
	Tree    string
	Parents []string
	Message string
}

// objects is a content-addressed Git object store hashed exactly as Git
// hashes objects.
type objects struct {
	blobs   map[string][]byte
	trees   map[string][]treeEntry
	commits map[string]commitObject
}

func newObjects() *objects {
	return &objects{blobs: map[string][]byte{}, trees: map[string][]treeEntry{}, commits: map[string]commitObject{}}
}

// BlobSHA returns Git's object name for a blob with content b:
// SHA-1 over "blob <len>\x00" + b.
func BlobSHA(b []byte) string { return hashObject("blob", b) }

func hashObject(typ string, b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "%s %d\x00", typ, len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

func (o *objects) putBlob(b []byte) string {
	sha := BlobSHA(b)
	o.blobs[sha] = append([]byte(nil), b...)
	return sha
}

// putTree stores a tree built from a flat path → entry map and returns its
// SHA (subtrees are stored too).
func (o *objects) putTree(flat map[string]treeEntry) string {
	type dir struct {
		files map[string]treeEntry
		dirs  map[string]map[string]treeEntry
	}
	d := dir{files: map[string]treeEntry{}, dirs: map[string]map[string]treeEntry{}}
	for p, e := range flat {
		first, rest, nested := strings.Cut(p, "/")
		if !nested {
			e.Name = first
			d.files[first] = e
			continue
		}
		if d.dirs[first] == nil {
			d.dirs[first] = map[string]treeEntry{}
		}
		d.dirs[first][rest] = e
	}
	var entries []treeEntry
	for name, e := range d.files {
		entries = append(entries, treeEntry{Name: name, Mode: e.Mode, SHA: e.SHA})
	}
	for name, sub := range d.dirs {
		entries = append(entries, treeEntry{Name: name, Mode: modeTree, SHA: o.putTree(sub)})
	}
	// Git sorts tree entries by name, comparing a tree's name as name+"/".
	key := func(e treeEntry) string {
		if e.Mode == modeTree {
			return e.Name + "/"
		}
		return e.Name
	}
	sort.Slice(entries, func(i, j int) bool { return key(entries[i]) < key(entries[j]) })
	var buf bytes.Buffer
	for _, e := range entries {
		mode := e.Mode
		if mode == modeTree {
			mode = "40000" // Git writes tree modes without the leading zero
		}
		raw, _ := hex.DecodeString(e.SHA)
		fmt.Fprintf(&buf, "%s %s\x00", mode, e.Name)
		buf.Write(raw)
	}
	sha := hashObject("tree", buf.Bytes())
	o.trees[sha] = entries
	return sha
}

// flatten returns the blobs (and submodules) under tree sha as a flat
// path → entry map; ok is false when the tree is unknown.
func (o *objects) flatten(sha string) (map[string]treeEntry, bool) {
	out := map[string]treeEntry{}
	var walk func(prefix, sha string) bool
	walk = func(prefix, sha string) bool {
		entries, ok := o.trees[sha]
		if !ok {
			return false
		}
		for _, e := range entries {
			p := path.Join(prefix, e.Name)
			if e.Mode == modeTree {
				if !walk(p, e.SHA) {
					return false
				}
				continue
			}
			out[p] = e
		}
		return true
	}
	return out, walk("", sha)
}

func (o *objects) putCommit(c commitObject) string {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "tree %s\n", c.Tree)
	for _, p := range c.Parents {
		fmt.Fprintf(&buf, "parent %s\n", p)
	}
	// A fixed identity and time keep the fake deterministic.
	buf.WriteString("author githubtest <githubtest@example.invalid> 0 +0000\n")
	buf.WriteString("committer githubtest <githubtest@example.invalid> 0 +0000\n\n")
	buf.WriteString(c.Message)
	sha := hashObject("commit", buf.Bytes())
	o.commits[sha] = c
	return sha
}

// Seed creates a commit holding files on branch (its parent is the branch's
// current head, if any), moves the branch to it and returns the commit SHA.
// Paths use "/" and are relative to the repository root.
func (s *Server) Seed(branch string, files map[string]File, message string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	flat := map[string]treeEntry{}
	for p, f := range files {
		mode := f.Mode
		if mode == "" {
			mode = ModeFile
		}
		flat[p] = treeEntry{Mode: mode, SHA: s.git.putBlob(f.Content)}
	}
	var parents []string
	if head, ok := s.refs["refs/heads/"+branch]; ok {
		parents = []string{head}
	}
	sha := s.git.putCommit(commitObject{Tree: s.git.putTree(flat), Parents: parents, Message: message})
	s.refs["refs/heads/"+branch] = sha
	return sha
}

// SeedDir is Seed with the regular files under dir (recursively; .git is
// skipped; executable files get ModeExecutable). It is for trusted test
// fixtures such as examples/demo.
func (s *Server) SeedDir(branch, dir, message string) (string, error) {
	files := map[string]File{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := ModeFile
		if info.Mode().Perm()&0o111 != 0 {
			mode = ModeExecutable
		}
		files[filepath.ToSlash(rel)] = File{Content: b, Mode: mode}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("githubtest: seed from %s: %w", dir, err)
	}
	return s.Seed(branch, files, message), nil
}

// Ref returns the commit SHA ref points at ("refs/heads/main" or
// "heads/main"), or "" when it does not exist.
func (s *Server) Ref(ref string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refs[fullRef(ref)]
}

// Files returns the files of commit sha (nil when unknown).
func (s *Server) Files(sha string) map[string]File {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.git.commits[sha]
	if !ok {
		return nil
	}
	flat, _ := s.git.flatten(c.Tree)
	out := map[string]File{}
	for p, e := range flat {
		out[p] = File{Content: s.git.blobs[e.SHA], Mode: e.Mode}
	}
	return out
}

// CommitParents returns the parents of commit sha.
func (s *Server) CommitParents(sha string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.git.commits[sha].Parents...)
}

// CommitMessage returns the message of commit sha.
func (s *Server) CommitMessage(sha string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.git.commits[sha].Message
}

func fullRef(ref string) string {
	if strings.HasPrefix(ref, "refs/") {
		return ref
	}
	return "refs/" + ref
}

// changesWorkflows reports whether commit sha changes a path under
// .github/workflows/ compared with its first parent (or adds any there when
// it has none).
func (o *objects) changesWorkflows(sha string) (string, bool) {
	c, ok := o.commits[sha]
	if !ok {
		return "", false
	}
	now, _ := o.flatten(c.Tree)
	before := map[string]treeEntry{}
	if len(c.Parents) > 0 {
		if p, ok := o.commits[c.Parents[0]]; ok {
			before, _ = o.flatten(p.Tree)
		}
	}
	var changed []string
	for p, e := range now {
		if strings.HasPrefix(p, ".github/workflows/") && before[p] != e {
			changed = append(changed, p)
		}
	}
	for p := range before {
		if _, ok := now[p]; !ok && strings.HasPrefix(p, ".github/workflows/") {
			changed = append(changed, p)
		}
	}
	sort.Strings(changed)
	if len(changed) == 0 {
		return "", false
	}
	return changed[0], true
}

// Branch makes branch point where from points (a new branch off from, as
// `git branch NAME FROM` does); later Seeds on it build on that commit.
func (s *Server) Branch(branch, from string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	sha := s.refs["refs/heads/"+from]
	s.refs["refs/heads/"+branch] = sha
	return sha
}
