package ghreport

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/internal/goldentest"
	"github.com/goalrun/goalrun/report"
)

// reportPatch is the agent's change of the demo, as goal's tracker writes
// its canonical diff.
const reportPatch = "diff --git a/calc.go b/calc.go\n--- a/calc.go\n+++ b/calc.go\n@@ -3,5 +3,5 @@\n // Sum adds xs.\n func Sum(xs []int) int {\n \ts := 0\n-\tfor i := 1; i < len(xs); i++ {\n+\tfor i := 0; i < len(xs); i++ {\n \t\ts += xs[i]\n"

// TestReportGolden renders the report people read — the comment of a
// /goalrun trigger and the job summary — for the outcomes that need
// different next steps, and compares it with testdata/report/*.md
// (regenerate with -update). Each must hold the headline, who asked, one
// next-step line, the links, the files with +/− counts and the collapsed
// diff where there is a change, and fit its limit.
func TestReportGolden(t *testing.T) {
	notMet := failedDoc()
	notMet.Iterations[2].Check = &report.CheckResult{ExitCode: 1, Seconds: 2.2, Tail: "--- FAIL: TestSum (0.00s)\n    calc_test.go:9: Sum([1 2 3]) = 5, want 6\nFAIL\n"}
	green := passedDoc()
	green.Goal.Iterations = 0
	green.Iterations = green.Iterations[:1]
	green.Iterations[0].Check = &report.CheckResult{Passed: true, Seconds: 1.4}
	green.Changes = &report.Changes{}
	files := []FileStat{{Path: "calc.go", Status: "modified", Insertions: 1, Deletions: 1}}
	asker := &Requester{Login: "maintainer-max", Prompt: "make the tests in ./calc pass", CommentURL: "https://github.com/octo-org/demo/pull/17#issuecomment-2"}
	runURL := "https://github.com/octo-org/demo/actions/runs/4242"
	for _, tc := range []struct {
		name    string
		doc     report.Document
		rc      ReportContext
		summary bool
		limit   int
		want    []string
	}{
		{name: "comment-met-fix-pr", doc: passedDoc(), limit: CommentBodyBytes - 256,
			rc: ReportContext{RunURL: runURL, Requester: asker, Files: files, Patch: reportPatch, OpenPR: true,
				FixURL: "https://github.com/octo-org/demo/pull/18", FixNumber: 18},
			want: []string{"Requested by [@maintainer-max]", "**Next step:** Review and merge the fix pull request #18.", "[fix pull request #18](", "| calc.go | modified | 1 | 1 |", "<details><summary>Diff (10 lines)</summary>"}},
		{name: "comment-met-thrown-away", doc: passedDoc(), limit: CommentBodyBytes - 256,
			rc:   ReportContext{RunURL: runURL, Requester: asker, Files: files, Patch: reportPatch},
			want: []string{"The change is not kept", "open-pr: true", "[job run]("}},
		{name: "comment-not-met", doc: notMet, limit: CommentBodyBytes - 256,
			rc:   ReportContext{RunURL: runURL, Requester: asker, Files: files, Patch: reportPatch},
			want: []string{"The check still fails after 5 agent turns", "--- FAIL: TestSum"}},
		{name: "summary-met-chart", doc: passedDoc(), summary: true, limit: StepSummaryBytes / 2,
			rc:   ReportContext{RunURL: runURL, Files: files, Patch: reportPatch, OpenPR: true, FixURL: "https://github.com/octo-org/demo/pull/18", FixNumber: 18},
			want: []string{"```mermaid", "Review and merge"}},
		{name: "summary-already-green", doc: green, summary: true, limit: StepSummaryBytes / 2,
			rc:   ReportContext{RunURL: runURL},
			want: []string{"Nothing to do: the check already passes."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := RenderReport(tc.doc, &tc.rc, tc.limit, tc.summary)
			if len(got) > tc.limit {
				t.Errorf("%d bytes, over the limit %d", len(got), tc.limit)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("lacks %q", w)
				}
			}
			if n := strings.Count(got, "**Next step:**"); n != 1 {
				t.Errorf("%d next-step lines, want 1", n)
			}
			if !tc.summary && strings.Contains(got, "```mermaid") {
				t.Error("a chart outside the job summary")
			}
			goldentest.Check(t, filepath.Join("testdata", "report", tc.name+".md"), []byte(got))
		})
	}
}

// TestReportLimits: a huge diff and thousands of files still fit the
// comment's and the check run's limits, the diff cut and saying so, the
// table capped.
func TestReportLimits(t *testing.T) {
	var files []FileStat
	for i := 0; i < 3000; i++ {
		files = append(files, FileStat{Path: strings.Repeat("d/", 20) + "f" + strings.Repeat("x", i%50) + ".go", Status: "added", Insertions: i})
	}
	patch := strings.Repeat("+"+strings.Repeat("a", 100)+"\n", 20000) + "```` fence\n"
	for _, limit := range []int{CheckSummaryBytes, CommentBodyBytes - 256} {
		got := RenderReport(passedDoc(), &ReportContext{Files: files, Patch: patch, PatchCut: true}, limit, false)
		if len(got) > limit {
			t.Errorf("%d bytes, over %d", len(got), limit)
		}
		if !strings.Contains(got, "goalrun/1 document") || !strings.Contains(got, "_… and 2950 more_") {
			t.Errorf("the document or the capped table is missing (%d bytes)", len(got))
		}
		if strings.Contains(got, "<summary>Diff") && !strings.Contains(got, ", cut)</summary>") {
			t.Error("a cut diff does not say so")
		}
		if strings.Contains(got, "\n````diff\n") {
			t.Error("the diff's fence is not longer than the longest backtick run inside it")
		}
	}
}

// TestNextStep: one line for each outcome that asks something different
// of the reader.
func TestNextStep(t *testing.T) {
	changed := []FileStat{{Path: "a.go", Status: "modified"}}
	modified := passedDoc()
	modified.Conclusion = report.ConclusionNeutral
	modified.Changes.CheckModified = true
	judged := passedDoc()
	judged.Conclusion = report.ConclusionNeutral
	judged.Goal.Grounded = false
	timeout := failedDoc()
	timeout.Goal.Halt = ptr(report.HaltTimeout)
	startup := report.StartupError(report.ErrBadInput, "bad", "Set until: to the check.")
	for _, tc := range []struct {
		name string
		doc  report.Document
		rc   ReportContext
		want string
	}{
		{"fix pull request", passedDoc(), ReportContext{Files: changed, FixURL: "u", FixNumber: 9}, "Review and merge the fix pull request #9."},
		{"the fix pull request's own body", passedDoc(), ReportContext{Files: changed, OpenPR: true, InFixPR: true}, "Review this pull request like any contribution"},
		{"thrown away", passedDoc(), ReportContext{Files: changed}, "The change is not kept: this runner's workspace is discarded"},
		{"open-pr refused", passedDoc(), ReportContext{Files: changed, OpenPR: true, FixSkipped: "only workflow files changed"}, "The change is not kept (only workflow files changed)"},
		{"fork", passedDoc(), ReportContext{Files: changed, Fork: true}, "The change is not kept (this runner's workspace is discarded, and a fork's branch"},
		{"check modified", modified, ReportContext{Files: changed}, "Not verified: the agent changed the check's own files"},
		{"judge", judged, ReportContext{}, "Not verified: a judge"},
		{"not met", failedDoc(), ReportContext{}, "The check still fails after 5 agent turns"},
		{"timeout", timeout, ReportContext{}, "The time ran out"},
		{"bad input", startup, ReportContext{}, "Set until: to the check."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NextStep(tc.doc, &tc.rc); !strings.HasPrefix(got, tc.want) {
				t.Errorf("NextStep = %q, want %q…", got, tc.want)
			}
		})
	}
}
