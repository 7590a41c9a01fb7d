package grounding

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// claimsCase is one file of testdata/claims/cases (see its README).
type claimsCase struct {
	Message  string `yaml:"message"`
	Receipts []struct {
		Tool  string   `yaml:"tool"`
		OK    bool     `yaml:"ok"`
		Brief string   `yaml:"brief"`
		Paths []string `yaml:"paths"`
	} `yaml:"receipts"`
	Check struct {
		Command  string `yaml:"command"`
		Ran      bool   `yaml:"ran"`
		Passed   bool   `yaml:"passed"`
		ExitCode int    `yaml:"exit_code"`
	} `yaml:"check"`
	Changed []struct {
		Path   string `yaml:"path"`
		Change string `yaml:"change"`
	} `yaml:"changed"`
	Expect []struct {
		Kind    string `yaml:"kind"`
		Subject string `yaml:"subject"`
	} `yaml:"expect"`
}

// loadClaimsCases reads every case of one corpus directory
// (testdata/claims/<dir>), sorted by file name.
func loadClaimsCases(t *testing.T, dir string) (names []string, cases []claimsCase) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "claims", dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var c claimsCase
		dec := yaml.NewDecoder(strings.NewReader(string(b)))
		dec.KnownFields(true)
		if err := dec.Decode(&c); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if strings.TrimSpace(c.Message) == "" {
			t.Fatalf("%s: empty message", f)
		}
		for _, e := range c.Expect {
			if !validKind(e.Kind) {
				t.Fatalf("%s: unknown kind %q", f, e.Kind)
			}
		}
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".yaml"))
		cases = append(cases, c)
	}
	return names, cases
}

func validKind(k string) bool {
	switch k {
	case ClaimRanTests, ClaimTestsPass, ClaimCommitted, ClaimPushed, ClaimOpenedPR, ClaimEditedFile,
		ClaimCreatedFile, ClaimDeletedFile, ClaimInstalled, ClaimDeployed:
		return true
	}
	return false
}

// evidenceOf builds the Evidence a case describes, the way the loop does.
func (c claimsCase) evidence() *Evidence {
	ev := NewEvidence()
	for _, r := range c.Receipts {
		ev.AddReceipt(Receipt{Tool: r.Tool, OK: r.OK, Brief: r.Brief, Paths: r.Paths})
	}
	ev.SetCheck(c.Check.Command, c.Check.Ran, c.Check.Passed, c.Check.ExitCode)
	changed := map[string]string{}
	for _, ch := range c.Changed {
		changed[ch.Path] = ch.Change
	}
	ev.SetChanged(changed)
	return ev
}

// claimKey identifies a claim for scoring: kind and the named file's base
// name, lower-cased.
func claimKey(kind, file string) string {
	file = strings.ToLower(file)
	if i := strings.LastIndex(file, "/"); i >= 0 {
		file = file[i+1:]
	}
	return kind + ":" + file
}

// TestClaimsCorpus scores the extractor against the hand-labeled corpus
// (testdata/claims/cases, written before the extractor) and the held-out set
// (testdata/claims/holdout and holdout2, each written without running the
// extractor on it), and
// requires precision and recall of at least 0.9 each on both (issue 5).
func TestClaimsCorpus(t *testing.T) {
	for _, set := range []struct {
		dir string
		min int
	}{{"cases", 60}, {"holdout", 30}, {"holdout2", 20}} {
		t.Run(set.dir, func(t *testing.T) {
			names, cases := loadClaimsCases(t, set.dir)
			if len(cases) < set.min {
				t.Fatalf("%s has %d cases, want at least %d", set.dir, len(cases), set.min)
			}
			scoreClaims(t, set.dir, names, cases)
		})
	}
}

// scoreClaims computes and prints precision and recall over cases.
func scoreClaims(t *testing.T, set string, names []string, cases []claimsCase) {
	var tp, fp, fn, expected int
	perKind := map[string]*[3]int{} // tp, fp, fn
	bump := func(kind string, i int) {
		if perKind[kind] == nil {
			perKind[kind] = &[3]int{}
		}
		perKind[kind][i]++
	}
	for i, c := range cases {
		want := map[string]bool{}
		for _, e := range c.Expect {
			want[claimKey(e.Kind, e.Subject)] = true
		}
		expected += len(want)
		got := map[string]finding{}
		for _, f := range c.evidence().findings(c.Message) {
			got[claimKey(f.kind, f.file)] = f
		}
		var miss, extra []string
		for k := range want {
			if _, ok := got[k]; ok {
				tp++
				bump(strings.SplitN(k, ":", 2)[0], 0)
			} else {
				fn++
				miss = append(miss, k)
				bump(strings.SplitN(k, ":", 2)[0], 2)
			}
		}
		for k, f := range got {
			if !want[k] {
				fp++
				extra = append(extra, fmt.Sprintf("%s (%q: %s)", k, f.excerpt, f.reason))
				bump(f.kind, 1)
			}
		}
		sort.Strings(miss)
		sort.Strings(extra)
		if len(miss) > 0 || len(extra) > 0 {
			t.Logf("%s: missed %v, extra %v", names[i], miss, extra)
		}
	}
	precision := ratio(tp, tp+fp)
	recall := ratio(tp, tp+fn)
	kinds := make([]string, 0, len(perKind))
	for k := range perKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		v := perKind[k]
		t.Logf("  %-13s tp=%d fp=%d fn=%d", k, v[0], v[1], v[2])
	}
	summary := fmt.Sprintf("claims %s: %d cases, %d expected claims, tp=%d fp=%d fn=%d, precision=%.3f recall=%.3f",
		set, len(cases), expected, tp, fp, fn, precision, recall)
	t.Log(summary)
	if testing.Verbose() {
		fmt.Println(summary)
	}
	if precision < 0.9 || recall < 0.9 {
		t.Errorf("precision %.3f and recall %.3f must both be at least 0.9", precision, recall)
	}
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 1
	}
	return float64(a) / float64(b)
}
