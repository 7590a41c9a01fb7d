package goal

import (
	"reflect"
	"testing"

	"github.com/goalrun/goalrun/grounding"
	"github.com/goalrun/goalrun/report"
)

// TestEvidenceReceipt: every field the claims analysis reads passes from a
// receipt of the document to grounding's, with the paths the call wrote.
func TestEvidenceReceipt(t *testing.T) {
	cases := []struct {
		name  string
		in    report.Receipt
		paths []string
		want  grounding.Receipt
	}{
		{"shell call that succeeded",
			report.Receipt{Tool: "Bash", OK: true, Brief: "go test ./..."}, nil,
			grounding.Receipt{Tool: "Bash", OK: true, Brief: "go test ./..."}},
		{"failed call",
			report.Receipt{Tool: "Bash", Brief: "git push"}, nil,
			grounding.Receipt{Tool: "Bash", Brief: "git push"}},
		{"outcome unknown",
			report.Receipt{Tool: "run_shell_command", Unknown: true, Brief: "rm a.go"}, nil,
			grounding.Receipt{Tool: "run_shell_command", Unknown: true, Brief: "rm a.go"}},
		{"file tool with paths, via dropped",
			report.Receipt{Tool: "Edit", OK: true, Brief: "/workspace/calc.go", Via: "sub-agent"}, []string{"/workspace/calc.go"},
			grounding.Receipt{Tool: "Edit", OK: true, Brief: "/workspace/calc.go", Paths: []string{"/workspace/calc.go"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := evidenceReceipt(c.in, c.paths); !reflect.DeepEqual(got, c.want) {
				t.Errorf("evidenceReceipt(%+v, %q) = %+v, want %+v", c.in, c.paths, got, c.want)
			}
		})
	}
}

// TestReportClaims: claims keep their order and fields in the document;
// nil (no analysis) and empty (nothing found) stay apart.
func TestReportClaims(t *testing.T) {
	cases := []struct {
		name string
		in   []grounding.Claim
		want []report.Claim
	}{
		{"no analysis", nil, nil},
		{"none found", []grounding.Claim{}, []report.Claim{}},
		{"two claims in order",
			[]grounding.Claim{
				{Claim: "All tests pass.", Kind: grounding.ClaimTestsPass, Reason: `"go test ./..." failed after the last turn (exit 1)`},
				{Claim: "I pushed the branch.", Kind: grounding.ClaimPushed, Reason: "no git push receipt"},
			},
			[]report.Claim{
				{Claim: "All tests pass.", Kind: grounding.ClaimTestsPass, Reason: `"go test ./..." failed after the last turn (exit 1)`},
				{Claim: "I pushed the branch.", Kind: grounding.ClaimPushed, Reason: "no git push receipt"},
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := reportClaims(c.in)
			if !reflect.DeepEqual(got, c.want) || (got == nil) != (c.want == nil) {
				t.Errorf("reportClaims(%+v) = %#v, want %#v", c.in, got, c.want)
			}
		})
	}
}

// TestGroundingCapsAreTheDocuments: grounding caps its claims as the
// goalrun/1 document caps "ungrounded_claims", so report's normalisation
// never cuts a claim grounding made (README.md, "Limits").
func TestGroundingCapsAreTheDocuments(t *testing.T) {
	cases := []struct {
		name           string
		grounding, doc int
	}{
		{"claim and reason text", grounding.ClaimTextCap, report.BriefCap},
		{"number of claims", grounding.ClaimsMax, report.ClaimsMax},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.grounding != c.doc {
				t.Errorf("grounding caps at %d, the document at %d", c.grounding, c.doc)
			}
		})
	}
}
