package report

import (
	"reflect"
	"testing"
)

// TestProgressSetupNotes: a failed setup step's notes (why goalrun's setup
// proxy refused a host, and the fix) follow its line on lines of their
// own, so the line's cap never cuts them; a step without notes is one line;
// a step an earlier run prepared says so rather than "done (0.0s)".
func TestProgressSetupNotes(t *testing.T) {
	note := "goalrun's setup proxy refused proxy.golang.org:443: it resolves to 203.0.113.80 (reserved); if the registry really answers there, set GOALRUN_EGRESS_ALLOW_NETS=203.0.113.80 for goalrun (README, setup step)"
	cases := []struct {
		name string
		data map[string]any
		want []string
	}{
		{"refused by the setup proxy",
			map[string]any{"work": WorkSetup, "command": "go mod download", "seconds": 2.7, "notes": []string{note},
				"error": "`go mod download` exited 1: go: github.com/mattn/go-colorable@v0.1.15: Get \"https://proxy.golang.org/github.com/mattn/go-colorable/@v/v0.1.15.mod\": Forbidden"},
			[]string{"prepare   setup `go mod download` failed: `go mod download` exited 1: go: github.com/mattn/go-colorable@v0.1.15: Get \"https://proxy.golang.org/github.com/mattn/go-colorable/@v/v0.1.15.mod\": Forbidden (2.7s)", note}},
		{"notes after a JSON round trip",
			map[string]any{"work": WorkSetup, "command": "npm ci", "error": "`npm ci` exited 1", "notes": []any{"goalrun's setup proxy refused a:443: x"}},
			[]string{"prepare   setup `npm ci` failed: `npm ci` exited 1", "goalrun's setup proxy refused a:443: x"}},
		{"no notes", map[string]any{"work": WorkSetup, "command": "go mod download", "seconds": 3.0},
			[]string{"prepare   setup `go mod download` done (3.0s)"}},
		{"reused from an earlier run's kept volume", map[string]any{"work": WorkSetup, "command": "go mod download", "seconds": 0.0, "reused": true},
			[]string{"prepare   setup `go mod download` reused: an earlier run prepared the same dependencies"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := progressLines(Event{Type: EventPrepareFinished, Data: c.data}, false)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got\n%q\nwant\n%q", got, c.want)
			}
			for _, l := range got {
				if len(l) > ProgressLineBytes {
					t.Errorf("line of %d bytes is cut at %d: %q", len(l), ProgressLineBytes, l)
				}
			}
		})
	}
}
