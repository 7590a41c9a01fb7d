package main

import "path/filepath"

// ownFilesRel returns the files goalrun itself writes during a run
// (--output, --events: absolute paths, "" skipped) as slash paths relative
// to base, with symlinks resolved in base and in each file's folder (the
// sandbox and the tracker compare resolved paths). With inside, a file
// outside base is left out; without, it is given as "../…". A file whose
// folder cannot be resolved is left out.
func ownFilesRel(base string, inside bool, files ...string) []string {
	b, err := filepath.EvalSymlinks(base)
	if err != nil {
		return nil
	}
	var out []string
	for _, f := range files {
		if f == "" {
			continue
		}
		dir, err := filepath.EvalSymlinks(filepath.Dir(f))
		if err != nil {
			continue
		}
		rel, err := filepath.Rel(b, filepath.Join(dir, filepath.Base(f)))
		if err != nil || rel == "." || (inside && !filepath.IsLocal(rel)) {
			continue
		}
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}
