package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/sandbox"
)

// TestRemembersEngineFacts: an already-green run remembers what it probed
// on the Engine (which host folders exist, that overlay views mount) in
// the user's cache folder, and the next run uses it. A remembered host
// folder that is not there (the fact went stale, or was planted) is never
// mounted: the Engine refuses the bind source, goalrun asks the Engine
// again, starts once more and passes, and the fact is corrected.
func TestRemembersEngineFacts(t *testing.T) {
	dockerEngine(t)
	dir := filepath.Join(t.TempDir(), "engines")
	env := []string{"GOALRUN_ENGINE_FACTS=" + dir}
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "go.mod"), []byte("module example.com/green\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	chownTree(t, ws, 1000)
	green := func(t *testing.T) map[string]any {
		t.Helper()
		r := goalrun(t, ws, env, "run", "--json", "--agent", "command", "--agent-bin", "true", "--until", "test -s go.mod")
		d := r.doc(t)
		if r.code != 0 || get(d, "goal", "passed") != true || get(d, "sandbox", "check_view") != "overlay" {
			t.Fatalf("exit %d, document %v\n%s", r.code, d, r.stderr)
		}
		return d
	}
	hostFact := func(t *testing.T) (string, map[string]any, []string) {
		t.Helper()
		file, f := oneFact(t, dir, "host-paths")
		var there []string
		vb, _ := json.Marshal(f["value"])
		if err := json.Unmarshal(vb, &there); err != nil || len(there) == 0 {
			t.Fatalf("host-folder fact %s: %v", vb, err)
		}
		return file, f, there
	}

	green(t)
	if files, _ := filepath.Glob(filepath.Join(dir, "overlay-view-*.json")); len(files) != 1 {
		t.Errorf("overlay facts %q, want one", files)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("facts folder: %v %v, want mode 0700", st, err)
	}
	file, f, there := hostFact(t)

	// A candidate folder this host does not have, planted as present.
	var absent string
	for _, p := range append(slices.Clone(sandbox.HostSystemFolders), sandbox.HostEtcEntries...) {
		if _, err := os.Lstat(p); os.IsNotExist(err) {
			absent = p
			break
		}
	}
	if absent == "" {
		t.Fatal("every host-folder candidate exists here: nothing to plant")
	}
	f["value"] = append(there, absent)
	b, _ := json.Marshal(f)
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}

	d := green(t)
	for _, m := range get(d, "sandbox", "host_mounts").([]any) {
		if s, _ := m.(string); filepath.Dir(s) == absent || len(s) > len(absent) && s[:len(absent)+1] == absent+":" {
			t.Errorf("the planted folder %s is mounted: %v", absent, m)
		}
	}
	if _, _, now := hostFact(t); slices.Contains(now, absent) {
		t.Errorf("the fact still names %s after the Engine said it is missing: %q", absent, now)
	}
	// The corrected fact is used again.
	green(t)
}

// TestEngineFactsSetting: GOALRUN_ENGINE_FACTS names the facts folder,
// "off" keeps none, anything else is bad input naming the variable.
func TestEngineFactsSetting(t *testing.T) {
	def, err := sandbox.DefaultEngineFactsDir()
	if err != nil {
		def = ""
	}
	for _, tc := range []struct {
		name, value, want string
		bad               bool
	}{
		{"unset", "", def, false},
		{"off", "off", "", false},
		{"a folder", "/var/cache/goalrun-engines/", "/var/cache/goalrun-engines", false},
		{"a relative folder", "engines", "", true},
		{"a typo", "of", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := engineFacts(tc.value)
			if tc.bad {
				if err == nil || !strings.Contains(err.Error(), engineFactsEnv) {
					t.Errorf("error %v, want one naming %s", err, engineFactsEnv)
				}
				return
			}
			if err != nil || f.Dir != tc.want {
				t.Errorf("Dir %q, %v; want %q", f.Dir, err, tc.want)
			}
		})
	}
}

// TestRemembersEngineInfo: a run remembers the Engine's info, and the next
// one starts from it while the live info is read beside it. A remembered
// info that is wrong never decides the run: with another Engine's ID the
// live info disagrees, the start is done again on it and the run passes;
// with a data root elsewhere, a workspace inside the live data root is
// still refused before anything is created. Either way the remembered
// info is corrected.
func TestRemembersEngineInfo(t *testing.T) {
	dockerEngine(t)
	dir := filepath.Join(t.TempDir(), "engines")
	env := []string{"GOALRUN_ENGINE_FACTS=" + dir}
	newWorkspace := func(t *testing.T, ws string) string {
		t.Helper()
		if err := os.MkdirAll(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, "go.mod"), []byte("module example.com/green\n\ngo 1.22\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		chownTree(t, ws, 1000)
		return ws
	}
	run := func(t *testing.T, ws string) result {
		t.Helper()
		return goalrun(t, ws, env, "run", "--json", "--agent", "command", "--agent-bin", "true", "--until", "test -s go.mod")
	}
	infoFact := func(t *testing.T) (string, map[string]any) {
		t.Helper()
		return oneFact(t, dir, "engine-info")
	}
	ws := newWorkspace(t, t.TempDir())
	if r := run(t, ws); r.code != 0 {
		t.Fatalf("first run: exit %d\n%s", r.code, r.stderr)
	}
	file, f := infoFact(t)
	value, _ := f["value"].(map[string]any)
	liveID, _ := value["ID"].(string)
	liveRoot, _ := value["DockerRootDir"].(string)
	if liveID == "" || !filepath.IsAbs(liveRoot) {
		t.Fatalf("remembered info %v holds no ID or data root", value)
	}
	inRoot := filepath.Join(liveRoot, "goalrun-test-"+filepath.Base(t.TempDir()))
	t.Cleanup(func() { os.RemoveAll(inRoot) })

	for _, tc := range []struct {
		name    string
		plant   map[string]any
		ws      string
		refused bool
	}{
		{"another Engine", map[string]any{"ID": "PLANTED:ENGINE:ID"}, ws, false},
		{"the data root elsewhere", map[string]any{"DockerRootDir": filepath.Join(t.TempDir(), "elsewhere")}, newWorkspace(t, inRoot), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			planted := map[string]any{}
			for k, v := range value {
				planted[k] = v
			}
			for k, v := range tc.plant {
				planted[k] = v
			}
			f["value"] = planted
			b, _ := json.Marshal(f)
			if err := os.WriteFile(file, b, 0o600); err != nil {
				t.Fatal(err)
			}
			r := run(t, tc.ws)
			switch {
			case tc.refused:
				msg, _ := r.doc(t)["message"].(string)
				if r.code == 0 || !strings.Contains(msg, "Docker Root Dir") {
					t.Fatalf("a workspace in the Engine's data root: exit %d, error %q, want a refusal naming the data root\n%s", r.code, msg, r.stderr)
				}
			case !tc.refused && r.code != 0:
				t.Fatalf("exit %d\n%s", r.code, r.stderr)
			}
			_, now := infoFact(t)
			if v := now["value"].(map[string]any); v["ID"] != liveID || v["DockerRootDir"] != liveRoot {
				t.Errorf("the remembered info was not corrected: %v", v)
			}
		})
	}
}

// oneFact reads the one fact of kind in the facts folder dir (its file and
// its JSON: saved, value).
func oneFact(t *testing.T, dir, kind string) (string, map[string]any) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, kind+"-*.json"))
	if len(files) != 1 {
		t.Fatalf("%s facts %q, want one", kind, files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var f map[string]any
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return files[0], f
}
