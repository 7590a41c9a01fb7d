package sandbox

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestResolveHostOwned checks how Config.HostOwned (workspace-relative)
// becomes paths relative to the mounted folder, for a workspace mounted
// itself and one whose mount was widened to a repository root.
func TestResolveHostOwned(t *testing.T) {
	tests := []struct {
		name          string
		ws, mount     string
		in            []string
		want          []string
		wantErrSubstr string
	}{
		{name: "none", ws: "/w", mount: "/w", want: nil},
		{name: "files in the workspace", ws: "/w", mount: "/w", in: []string{"events.jsonl", "out/doc.json"}, want: []string{"events.jsonl", "out/doc.json"}},
		{name: "unclean path is cleaned", ws: "/w", mount: "/w", in: []string{"./out//x/../doc.json"}, want: []string{"out/doc.json"}},
		{name: "outside the workspace mount is ignored", ws: "/w", mount: "/w", in: []string{"../doc.json", "events.jsonl"}, want: []string{"events.jsonl"}},
		{name: "wider mount: workspace file", ws: "/repo/sub", mount: "/repo", in: []string{"events.jsonl"}, want: []string{"sub/events.jsonl"}},
		{name: "wider mount: file above the workspace", ws: "/repo/sub", mount: "/repo", in: []string{"../doc.json"}, want: []string{"doc.json"}},
		{name: "wider mount: file outside the repository", ws: "/repo/sub", mount: "/repo", in: []string{"../../doc.json"}, want: nil},
		{name: "absolute path", ws: "/w", mount: "/w", in: []string{"/w/doc.json"}, wantErrSubstr: "relative to the workspace"},
		{name: "empty path", ws: "/w", mount: "/w", in: []string{""}, wantErrSubstr: "relative to the workspace"},
		{name: "the workspace itself", ws: "/w", mount: "/w", in: []string{"."}, wantErrSubstr: "names the workspace"},
		{name: "the mount root above the workspace", ws: "/repo/sub", mount: "/repo", in: []string{".."}, wantErrSubstr: "names the workspace"},
		{name: "a folder holding the workspace", ws: "/repo/a/b", mount: "/repo", in: []string{".."}, wantErrSubstr: "names the workspace"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolveHostOwned(tc.ws, tc.mount, tc.in)
			if tc.wantErrSubstr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrSubstr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErrSubstr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for k := range got {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			if !reflect.DeepEqual(keys, tc.want) {
				t.Errorf("resolved %q, want %q", keys, tc.want)
			}
		})
	}
}

// TestCopyOutLeavesHostOwned feeds copy-back an archive in which the agent
// rewrote goalrun's events file, made a folder at goalrun's document path,
// and replaced the folder holding it with a file: goalrun's files stay
// byte for byte, the holding folder stays a folder, and the agent's other
// changes (an edit, a deletion inside that folder) still come back.
func TestCopyOutLeavesHostOwned(t *testing.T) {
	ws := t.TempDir()
	write := func(rel, body string) {
		t.Helper()
		p := filepath.Join(ws, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("events.jsonl", "{\"type\":\"started\"}\n{\"type\":\"turn\"}\n")
	write("out/doc.json", "{\"schema\":\"goalrun/1\"}\n")
	write("out/stale.txt", "the agent deleted it\n")
	write("a.txt", "before\n")
	owned := ownedPaths{"events.jsonl": true, "out/doc.json": true}

	tr := tarOf(t,
		entry{name: "workspace/", typ: tar.TypeDir, mode: 0o755},
		entry{name: "workspace/a.txt", typ: tar.TypeReg, body: "after\n"},
		entry{name: "workspace/events.jsonl", typ: tar.TypeReg, body: ""},
		entry{name: "workspace/events.jsonl/planted", typ: tar.TypeReg, body: "x"},
		entry{name: "workspace/out", typ: tar.TypeReg, body: "a file where goalrun's folder was\n"},
	)
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	seen, err := applyTar(root, tr, owned)
	if err != nil {
		t.Fatalf("applyTar: %v", err)
	}
	if err := removeUnseen(root, seen, owned); err != nil {
		t.Fatalf("removeUnseen: %v", err)
	}
	for rel, want := range map[string]string{
		"events.jsonl": "{\"type\":\"started\"}\n{\"type\":\"turn\"}\n",
		"out/doc.json": "{\"schema\":\"goalrun/1\"}\n",
		"a.txt":        "after\n",
	} {
		if b, err := os.ReadFile(filepath.Join(ws, rel)); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", rel, b, err, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(ws, "out", "stale.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("out/stale.txt, deleted in the sandbox, is still on the host: %v", err)
	}

	// Copy-in leaves the same paths out.
	var buf bytes.Buffer
	if err := tarTree(ws, 0, 0, &buf, owned); err != nil {
		t.Fatal(err)
	}
	var names []string
	for r := tar.NewReader(&buf); ; {
		h, err := r.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
	}
	if want := []string{"./", "a.txt", "out/"}; !reflect.DeepEqual(names, want) {
		t.Errorf("copied in %q, want %q", names, want)
	}
}
