package report

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestChangedPathsAreCapped: changes.paths keeps ChangedPathsMax paths and
// counts the rest in paths_omitted, whatever the producer sent, and the
// encoder under pressure drops the list but keeps its count.
func TestChangedPathsAreCapped(t *testing.T) {
	var paths []string
	for i := range 40 {
		paths = append(paths, fmt.Sprintf("pkg/file%02d.go", i))
	}
	for _, tc := range []struct {
		name      string
		paths     []string
		omitted   int
		wantPaths int
		wantOmit  int
	}{
		{"none", nil, 0, 0, 0},
		{"under the cap", paths[:3], 0, 3, 0},
		{"over the cap", paths, 0, ChangedPathsMax, 40 - ChangedPathsMax},
		{"over the cap with a producer's count", paths[:20], 7, ChangedPathsMax, 27 - ChangedPathsMax},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d Document
			if err := json.Unmarshal(Encode(Document{Schema: Schema, Status: StatusSuccess, Changes: &Changes{FilesChanged: len(tc.paths) + tc.omitted, Paths: tc.paths, PathsOmitted: tc.omitted}}), &d); err != nil {
				t.Fatal(err)
			}
			c := d.Changes
			if len(c.Paths) != tc.wantPaths || c.PathsOmitted != tc.wantOmit {
				t.Errorf("%d paths, %d omitted; want %d, %d", len(c.Paths), c.PathsOmitted, tc.wantPaths, tc.wantOmit)
			}
			b, err := json.Marshal(d.Changes)
			if err != nil {
				t.Fatal(err)
			}
			if tc.paths == nil && strings.Contains(string(b), `"paths`) {
				t.Errorf("an empty list is written: %s", b)
			}
		})
	}
	// A document far over the size bound keeps the count of changed paths.
	big := Document{Schema: Schema, Status: StatusSuccess, Summary: ptr(strings.Repeat("x", 3*DocumentBytes)),
		Changes: &Changes{FilesChanged: 40, Paths: paths}}
	for i := range 64 {
		big.UngroundedClaims = append(big.UngroundedClaims, Claim{Claim: strings.Repeat("c", 150) + fmt.Sprint(i), Reason: strings.Repeat("r", 400)})
	}
	var got Document
	if err := json.Unmarshal(Encode(big), &got); err != nil {
		t.Fatal(err)
	}
	if got.Changes == nil || len(got.Changes.Paths)+got.Changes.PathsOmitted != 40 {
		t.Errorf("changes after encoding: %+v, want 40 paths listed or counted", got.Changes)
	}
}
