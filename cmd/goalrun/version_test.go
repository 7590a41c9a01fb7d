package main

import (
	"bytes"
	"os/exec"
	"runtime/debug"
	"strings"
	"testing"
)

func TestDescribeVersion(t *testing.T) {
	stamped := &debug.BuildInfo{
		Main: debug.Module{Path: "github.com/goalrun/goalrun", Version: "v0.0.0-20261130023102-91447964f295"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "91447964f295bbd3e19309d11d18e63c801cad05"},
			{Key: "vcs.time", Value: "2026-11-30T02:31:02Z"},
			{Key: "vcs.modified", Value: "false"},
		},
	}
	modified := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "true"}}}
	for _, tc := range []struct {
		name                string
		ldVersion, ldCommit string
		bi                  *debug.BuildInfo
		want                string
	}{
		{"stamped by go build in a clone", "", "", stamped,
			"goalrun v0.0.0-20261130023102-91447964f295 (commit 91447964f295bbd3e19309d11d18e63c801cad05 of 2026-11-30T02:31:02Z; go1.26.8 linux/amd64)"},
		{"local changes", "", "", modified,
			"goalrun devel (commit abc, with local changes; go1.26.8 linux/amd64)"},
		{"go run: no version control information", "", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}},
			"goalrun devel (commit unknown: built without version control information (go run, -buildvcs=false, or outside a git clone); go1.26.8 linux/amd64)"},
		{"no build information at all", "", "", nil,
			"goalrun devel (commit unknown: built without version control information (go run, -buildvcs=false, or outside a git clone); go1.26.8 linux/amd64)"},
		{"the action image: -X flags win", "v1.2.3", "0123456789abcdef0123456789abcdef01234567", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}},
			"goalrun v1.2.3 (commit 0123456789abcdef0123456789abcdef01234567; go1.26.8 linux/amd64)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := describeVersion(tc.ldVersion, tc.ldCommit, tc.bi, "go1.26.8", "linux/amd64"); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestVersionMatchesBuildInfo: `goalrun version` of the built binary names
// the module version and commit `go version -m` reads from it.
func TestVersionMatchesBuildInfo(t *testing.T) {
	r := goalrun(t, t.TempDir(), nil, "version")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	out, err := exec.Command("go", "version", "-m", goalrunBin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	var mod, rev string
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) >= 3 && f[0] == "mod":
			mod = f[2]
		case len(f) >= 2 && f[0] == "build" && strings.HasPrefix(f[1], "vcs.revision="):
			rev = strings.TrimPrefix(f[1], "vcs.revision=")
		}
	}
	if mod != "" && mod != "(devel)" && !bytes.Contains(r.stdout, []byte("goalrun "+mod+" ")) {
		t.Errorf("version %q does not name the module version %s", r.stdout, mod)
	}
	want := "commit unknown"
	if rev != "" {
		want = "commit " + rev
	}
	if !bytes.Contains(r.stdout, []byte(want)) {
		t.Errorf("version %q does not say %q (go version -m:\n%s)", r.stdout, want, out)
	}
}
