package workspace

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestChangesIgnore: Options.Ignore leaves goalrun's own files (its
// --events log, its --output document) out of the changes and of the state
// fingerprint, relative to the tracked root, and only at exactly those
// paths: an agent that makes a folder there, or writes beside them, is
// still seen.
func TestChangesIgnore(t *testing.T) {
	cases := []struct {
		name    string
		workdir string // the workspace below the tracked folder ("" = the same)
		root    bool   // track the wider folder (Options.Root)
		files   map[string]string
		ignore  []string
		edit    map[string]string
		remove  []string
		link    map[string]string // path → symlink target, made after the baseline
		want    []string          // changed paths
		// sameState: the fingerprint after the edits equals the
		// baseline's (only ignored paths changed).
		sameState bool
		baseError string
	}{
		{name: "events appended and document written: no change",
			files: map[string]string{"events.jsonl": "{}\n", "a.txt": "a\n"}, ignore: []string{"events.jsonl", "doc.json"},
			edit: map[string]string{"events.jsonl": "{}\n{}\n", "doc.json": "{\"schema\":\"goalrun/1\"}\n"}, sameState: true},
		{name: "the agent's change still counts, goalrun's do not",
			files: map[string]string{"events.jsonl": "", "a.txt": "a\n"}, ignore: []string{"events.jsonl", "doc.json"},
			edit: map[string]string{"events.jsonl": "{}\n", "doc.json": "{}\n", "a.txt": "b\n"}, want: []string{"a.txt"}},
		{name: "a nested path, given unclean",
			files: map[string]string{"out/doc.json": "old\n"}, ignore: []string{"./out//doc.json"},
			edit: map[string]string{"out/doc.json": "new\n", "out/other.txt": "agent\n"}, want: []string{"out/other.txt"}},
		{name: "a name that only starts like an ignored one is seen",
			files: map[string]string{"events.jsonl": ""}, ignore: []string{"events.jsonl"},
			edit: map[string]string{"events.jsonl.bak": "x\n", "events.jsonl~": "y\n"}, want: []string{"events.jsonl.bak", "events.jsonl~"}},
		{name: "tampering: a folder at the ignored path still shows what it holds",
			files: map[string]string{"a.txt": "a\n"}, ignore: []string{"events.jsonl"},
			edit: map[string]string{"events.jsonl/hidden.go": "package evil\n"}, want: []string{"events.jsonl/hidden.go"}},
		{name: "tampering: a folder above an ignored path is not ignored",
			files: map[string]string{"out/doc.json": ""}, ignore: []string{"out/doc.json"},
			edit: map[string]string{"out/doc.json": "x\n", "out/sneaky.sh": "rm -rf /\n"}, want: []string{"out/sneaky.sh"}},
		{name: "the ignored file deleted by the agent",
			files: map[string]string{"events.jsonl": "{}\n", "a.txt": "a\n"}, ignore: []string{"events.jsonl"},
			remove: []string{"events.jsonl"}, sameState: true},
		{name: "a symlink planted at the ignored path is goalrun's path too",
			files: map[string]string{"a.txt": "a\n"}, ignore: []string{"events.jsonl"},
			link: map[string]string{"events.jsonl": "/etc/passwd", "b": "a.txt"}, want: []string{"b"}},
		{name: "wider root: paths are relative to it, above and inside the workspace",
			workdir: "app", root: true,
			files:  map[string]string{"doc.json": "", "app/events.jsonl": "", "app/a.txt": "a\n"},
			ignore: []string{"doc.json", "app/events.jsonl"},
			edit:   map[string]string{"doc.json": "{}\n", "app/events.jsonl": "{}\n", "app/a.txt": "b\n"}, want: []string{"app/a.txt"}},
		{name: "wider root: a workspace-relative path names another file",
			workdir: "app", root: true,
			files:  map[string]string{"events.jsonl": "", "app/events.jsonl": ""},
			ignore: []string{"events.jsonl"},
			edit:   map[string]string{"events.jsonl": "{}\n", "app/events.jsonl": "{}\n"}, want: []string{"app/events.jsonl"}},
		{name: "absolute path", ignore: []string{"/tmp/events.jsonl"}, baseError: "Options.Ignore"},
		{name: "empty path", ignore: []string{""}, baseError: "Options.Ignore"},
		{name: "the root itself", ignore: []string{"."}, baseError: "Options.Ignore"},
		{name: "a path leaving the root", ignore: []string{"../doc.json"}, baseError: "Options.Ignore"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			top := t.TempDir()
			chWrite(t, top, tc.files)
			ws := filepath.Join(top, tc.workdir)
			if err := os.MkdirAll(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			opt := Options{Check: "false", TempDir: t.TempDir(), Ignore: tc.ignore}
			if tc.root {
				opt.Root = top
			}
			tr := New(ws, opt)
			defer tr.Close()
			err := tr.Baseline(context.Background())
			if tc.baseError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.baseError) {
					t.Fatalf("Baseline error %v, want one containing %q", err, tc.baseError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			chWrite(t, top, tc.edit)
			for _, p := range tc.remove {
				if err := os.Remove(filepath.Join(top, p)); err != nil {
					t.Fatal(err)
				}
			}
			for p, target := range tc.link {
				if err := os.Symlink(target, filepath.Join(top, p)); err != nil {
					t.Fatal(err)
				}
			}
			state, err := tr.AfterTurn(context.Background(), 1)
			if err != nil {
				t.Fatal(err)
			}
			if same := state == tr.base.state; same != tc.sameState {
				t.Errorf("fingerprint unchanged = %v, want %v", same, tc.sameState)
			}
			d := chDiff(t, tr)
			var got []string
			for _, f := range d.Files {
				got = append(got, f.Path)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("changed %q, want %q", got, tc.want)
			}
			if len(d.Files) != len(tc.want) {
				t.Errorf("files changed %d, want %d", len(d.Files), len(tc.want))
			}
		})
	}
}
