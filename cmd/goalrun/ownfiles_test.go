package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/goalrun/goalrun/report"
)

// TestOwnFilesRel: goalrun's --output and --events, relative to the
// workspace or the mount root, symlinks resolved, outside paths left out
// for the tracker and kept as "../…" for the sandbox (which drops what lies
// outside its mount).
func TestOwnFilesRel(t *testing.T) {
	top := t.TempDir()
	ws := filepath.Join(top, "ws")
	if err := os.MkdirAll(filepath.Join(ws, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(top, "link")
	if err := os.Symlink(ws, link); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		base   string
		inside bool
		files  []string
		want   []string
	}{
		{name: "both in the workspace", base: ws, inside: true, files: []string{filepath.Join(ws, "doc.json"), filepath.Join(ws, "out", "events.jsonl")}, want: []string{"doc.json", "out/events.jsonl"}},
		{name: "unset flags are skipped", base: ws, inside: true, files: []string{"", ""}, want: nil},
		{name: "a file reached through a symlinked folder", base: ws, inside: true, files: []string{filepath.Join(link, "doc.json")}, want: []string{"doc.json"}},
		{name: "the workspace given through a symlink", base: link, inside: true, files: []string{filepath.Join(ws, "doc.json")}, want: []string{"doc.json"}},
		{name: "outside the tracked root: left out", base: ws, inside: true, files: []string{filepath.Join(top, "doc.json"), "/dev/null"}, want: nil},
		{name: "outside the workspace for the sandbox: relative", base: ws, inside: false, files: []string{filepath.Join(top, "doc.json")}, want: []string{"../doc.json"}},
		{name: "a folder that does not exist", base: ws, inside: false, files: []string{filepath.Join(ws, "missing", "doc.json")}, want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ownFilesRel(tc.base, tc.inside, tc.files...); !slices.Equal(got, tc.want) {
				t.Errorf("ownFilesRel = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestOwnFilesAreNotTheAgents is the newcomer's bug through the real
// binary: --output and --events inside the workspace, a command agent that
// changes one file. The events file is complete (the same events as the
// --json stream on stderr, one terminal event last), --output holds the
// document, and the changes count the agent's one file only — on the local
// host, in a bind-mounted Docker workspace and in a copied one (where
// copy-back had truncated the events file to the container's stale copy).
func TestOwnFilesAreNotTheAgents(t *testing.T) {
	tests := []struct {
		name   string
		docker bool
		args   []string
	}{
		{name: "local", args: []string{"--sandbox", "local"}},
		{name: "docker bind", docker: true, args: []string{"--workspace", "bind"}},
		{name: "docker copy", docker: true, args: []string{"--workspace", "copy"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.docker {
				dockerEngine(t)
			}
			ws := t.TempDir()
			for name, body := range map[string]string{
				"fix.sh":    "#!/bin/sh\necho fixed > state.txt\n",
				"state.txt": "broken\n",
			} {
				if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if tc.docker && slices.Contains(tc.args, "bind") && os.Getuid() == 0 {
				// A bind workspace belongs to a user, as a checkout does.
				for _, p := range []string{ws, filepath.Join(ws, "fix.sh"), filepath.Join(ws, "state.txt")} {
					if err := os.Lchown(p, 1000, 1000); err != nil {
						t.Fatal(err)
					}
				}
			}
			args := append([]string{"run", "--json", "--agent", "command", "--agent-bin", "./fix.sh",
				"--until", "grep -q fixed state.txt", "--output", "doc.json", "--events", "events.jsonl"}, tc.args...)
			r := goalrun(t, ws, nil, args...)
			d := r.doc(t)
			stderrEvents := r.events(t)
			if r.code != 0 || get(d, "goal", "passed") != true {
				t.Fatalf("exit %d goal %v, want the goal met\n%s", r.code, d["goal"], r.stderr)
			}
			if tc.docker {
				if want := tc.args[1]; get(d, "sandbox", "workspace") != want {
					t.Errorf("sandbox.workspace = %v, want %s", get(d, "sandbox", "workspace"), want)
				}
			}
			if get(d, "changes", "files_changed") != 1.0 || get(d, "changes", "insertions") != 1.0 || get(d, "changes", "deletions") != 1.0 {
				t.Errorf("changes = %v, want state.txt alone (1 file, +1 -1)", d["changes"])
			}
			if b, err := os.ReadFile(filepath.Join(ws, "state.txt")); err != nil || string(b) != "fixed\n" {
				t.Errorf("state.txt = %q, %v; want the agent's fix", b, err)
			}

			doc, err := os.ReadFile(filepath.Join(ws, "doc.json"))
			if err != nil || !bytes.Equal(bytes.TrimSpace(doc), bytes.TrimSpace(r.stdout)) {
				t.Errorf("--output holds %d bytes (%v), want the document on stdout", len(doc), err)
			}
			evb, err := os.ReadFile(filepath.Join(ws, "events.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			var evs []report.Event
			sc := bufio.NewScanner(bytes.NewReader(evb))
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var e report.Event
				if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
					t.Fatalf("events.jsonl line is not an event: %v\n%s", err, sc.Text())
				}
				evs = append(evs, e)
			}
			if len(evs) != len(stderrEvents) || len(evs) == 0 || evs[len(evs)-1].Type != report.EventCompleted {
				t.Fatalf("events.jsonl holds %d events (%d bytes), want all %d of the run ending with %s:\n%s",
					len(evs), len(evb), len(stderrEvents), report.EventCompleted, evb)
			}
			for i := range evs {
				if evs[i].Type != stderrEvents[i].Type || evs[i].Message != stderrEvents[i].Message {
					t.Errorf("event %d: %s %q in events.jsonl, %s %q on stderr", i, evs[i].Type, evs[i].Message, stderrEvents[i].Type, stderrEvents[i].Message)
				}
			}
		})
	}
}

// TestOwnFileSettle: at the end of a run the path of --output or --events
// holds exactly goalrun's content, whatever was done to it meanwhile inside
// a tree the sandbox could write; outside every such tree a replaced path
// is an error, never written through.
func TestOwnFileSettle(t *testing.T) {
	doc := []byte(`{"schema":"goalrun/1","status":"success"}` + "\n")
	for _, tc := range []struct {
		name     string
		outside  bool // the file lies outside the writable trees
		tamper   func(t *testing.T, p string)
		replaced bool
		wantErr  string
	}{
		{"untouched", false, func(*testing.T, string) {}, false, ""},
		{"written in place", false, func(t *testing.T, p string) { os.WriteFile(p, []byte("forged\n"), 0o644) }, false, ""},
		{"deleted and forged", false, func(t *testing.T, p string) {
			os.Remove(p)
			os.WriteFile(p, []byte("forged\n"), 0o644)
		}, true, ""},
		{"deleted", false, func(t *testing.T, p string) { os.Remove(p) }, true, ""},
		{"a link to a host file in its place", false, func(t *testing.T, p string) {
			os.Remove(p)
			os.Symlink("/etc/hostname", p)
		}, true, ""},
		{"a folder in its place", false, func(t *testing.T, p string) {
			os.Remove(p)
			os.Mkdir(p, 0o755)
			os.WriteFile(filepath.Join(p, "x"), nil, 0o644)
		}, false, "file exists"},
		{"its folder a link out of the workspace", false, func(t *testing.T, p string) {
			dir := filepath.Dir(p)
			os.RemoveAll(dir)
			os.Symlink(t.TempDir(), dir)
		}, false, "did not write through it"},
		{"replaced outside the writable trees", true, func(t *testing.T, p string) {
			os.Remove(p)
			os.WriteFile(p, []byte("other\n"), 0o644)
		}, false, "replaced during the run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			root := ws
			if tc.outside {
				root = t.TempDir()
			}
			p := filepath.Join(ws, "out", "doc.json")
			os.Mkdir(filepath.Dir(p), 0o755)
			o, err := openOwnFile("--output", p, ws)
			if err != nil {
				t.Fatal(err)
			}
			defer o.Close()
			tc.tamper(t, p)
			replaced, err := o.settle(doc, root)
			if tc.wantErr != "" {
				if err == nil || !bytes.Contains([]byte(err.Error()), []byte(tc.wantErr)) {
					t.Fatalf("err %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || replaced != tc.replaced {
				t.Fatalf("replaced %v err %v, want %v and no error", replaced, err, tc.replaced)
			}
			if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("the path is not a regular file: %v %v", fi, err)
			}
			if b, _ := os.ReadFile(p); !bytes.Equal(b, doc) {
				t.Errorf("the path holds %q", b)
			}
			if b, _ := os.ReadFile("/etc/hostname"); bytes.Equal(b, doc) {
				t.Error("written through the link")
			}
		})
	}
	t.Run("events: later lines follow the restored file", func(t *testing.T) {
		ws := t.TempDir()
		p := filepath.Join(ws, "events.jsonl")
		o, err := openOwnFile("--events", p, ws)
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		o.Write([]byte("one\n"))
		os.Remove(p)
		os.WriteFile(p, []byte("forged\n"), 0o644)
		o.Write([]byte("two\n"))
		if replaced, err := o.settle(nil, ws); err != nil || !replaced {
			t.Fatalf("replaced %v err %v", replaced, err)
		}
		o.Write([]byte("terminal\n"))
		if b, _ := os.ReadFile(p); string(b) != "one\ntwo\nterminal\n" {
			t.Errorf("events file %q", b)
		}
	})
}
