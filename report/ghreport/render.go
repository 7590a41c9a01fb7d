package ghreport

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"github.com/goalrun/goalrun/report"
)

// Limits of the report's own sections (on top of report.Markdown's).
const (
	// ReportFileRows bounds the changed-files table; the rest is counted.
	ReportFileRows = 50
	// ReportDiffBytes bounds the diff shown in a check run or a comment;
	// the job summary, which may hold 1 MiB, shows up to
	// ReportSummaryDiffBytes.
	ReportDiffBytes        = 20 << 10
	ReportSummaryDiffBytes = 256 << 10
)

// FileStat is one changed file for the report.
type FileStat struct {
	Path string
	// Status is "added", "modified" or "deleted".
	Status                string
	Insertions, Deletions int
	// Binary: no line counts (binary, too large, a symlink, unread).
	Binary bool
}

// Requester is who asked for a run by comment, and what.
type Requester struct {
	Login, Prompt, CommentURL string
}

// ReportContext is what the report says beyond the document: where the
// change went, who asked, the links.
type ReportContext struct {
	// RunURL is the workflow run's page ("" when unknown).
	RunURL string
	// Requester is set on comment runs.
	Requester *Requester
	// Files and Patch are the agent's changes (Patch: the start of the
	// unified diff; PatchCut: it was cut before this).
	Files    []FileStat
	Patch    string
	PatchCut bool
	// FixURL and FixNumber are the fix pull request; FixBranch and
	// FixBranchURL (the page that opens a pull request from it) the branch
	// that holds the fix when no pull request could be opened; FixSkipped
	// says why there is none
	// when open-pr was asked for. OpenPR says it was asked for.
	FixURL, FixBranch, FixBranchURL, FixSkipped string
	FixNumber                                   int
	OpenPR                                      bool
	// Fork says the change cannot be pushed to the pull request's branch.
	Fork bool
	// InFixPR says the report is the fix pull request's own body.
	InFixPR bool
}

// Render returns a Renderer for the check run (limit CheckSummaryBytes),
// the comment (CommentBodyBytes less the marker) or the job summary
// (summary: with the timing chart and a longer diff).
func (rc *ReportContext) Render(limit int, summary bool) Renderer {
	return func(doc report.Document) string { return RenderReport(doc, rc, limit, summary) }
}

// RenderReport is the report people act on: the headline, who asked for
// what (comment runs), one line saying what to do next, links to the job
// run and the fix pull request or branch, the changed files with their
// +/− counts and the diff (capped, collapsed), then report.Markdown's
// sections and the document. summary adds the timing chart (where it says
// something) and allows a longer diff. The result is at most limit bytes:
// the diff is cut first, then the files table; report.Markdown's own cut
// rules apply to the rest. Everything the agent chose (paths, the prompt,
// the diff) is escaped or fenced.
func RenderReport(doc report.Document, rc *ReportContext, limit int, summary bool) string {
	if rc == nil {
		rc = &ReportContext{}
	}
	var head strings.Builder
	if r := rc.Requester; r != nil {
		who := "@" + r.Login
		if r.CommentURL != "" {
			who = "[" + who + "](" + r.CommentURL + ")"
		}
		what := "run with the workflow's task"
		if strings.TrimSpace(r.Prompt) != "" {
			what = "“" + report.MarkdownText(report.Cap(report.Fold(r.Prompt), 300)) + "”"
		}
		fmt.Fprintf(&head, "Requested by %s: %s\n\n", who, what)
	}
	fmt.Fprintf(&head, "**Next step:** %s\n\n", NextStep(doc, rc))
	if links := rc.links(); links != "" {
		head.WriteString(links + "\n\n")
	}
	files := rc.filesTable()
	diffCap := ReportDiffBytes
	if summary {
		diffCap = ReportSummaryDiffBytes
	}
	diff := rc.diffBlock(diffCap)

	// The document's rendering gets what is left after the header and a
	// table, at least half the limit; the diff takes what remains.
	room := limit - head.Len() - len(files) - 2
	mdLimit := max(room-len(diff), limit/2)
	md := report.MarkdownWith(doc, report.MarkdownOptions{Mermaid: summary, MaxBytes: mdLimit})
	title, rest, _ := strings.Cut(md, "\n")
	left := limit - len(title) - 1 - head.Len() - len(rest)
	if len(files) > left {
		files = ""
	}
	left -= len(files)
	if len(diff) > left {
		diff = rc.diffBlock(left - 256)
		if len(diff) > left {
			diff = ""
		}
	}
	var b strings.Builder
	b.WriteString(title + "\n\n")
	b.WriteString(head.String())
	b.WriteString(files)
	b.WriteString(diff)
	b.WriteString(rest)
	return b.String()
}

// links is the line of links: the job run, the fix pull request or its
// branch.
func (rc *ReportContext) links() string {
	var parts []string
	if rc.RunURL != "" {
		parts = append(parts, "[job run]("+rc.RunURL+")")
	}
	switch {
	case rc.FixURL != "":
		label := "fix pull request"
		if rc.FixNumber != 0 {
			label += " #" + strconv.Itoa(rc.FixNumber)
		}
		parts = append(parts, "["+label+"]("+rc.FixURL+")")
	case rc.FixBranch != "" && rc.FixBranchURL != "":
		parts = append(parts, "[branch "+report.MarkdownText(rc.FixBranch)+"]("+rc.FixBranchURL+")")
	}
	return strings.Join(parts, " · ")
}

// filesTable is the changed files with +/− counts ("" when none).
func (rc *ReportContext) filesTable() string {
	if len(rc.Files) == 0 {
		return ""
	}
	ins, del := 0, 0
	for _, f := range rc.Files {
		ins += f.Insertions
		del += f.Deletions
	}
	var b strings.Builder
	fmt.Fprintf(&b, "#### Changed files (%d, +%d −%d)\n\n| file | change | + | − |\n|---|---|---:|---:|\n", len(rc.Files), ins, del)
	for i, f := range rc.Files {
		if i == ReportFileRows {
			fmt.Fprintf(&b, "| _… and %d more_ | | | |\n", len(rc.Files)-i)
			break
		}
		plus, minus := strconv.Itoa(f.Insertions), strconv.Itoa(f.Deletions)
		if f.Binary {
			plus, minus = "bin", "bin"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", report.MarkdownText(f.Path), report.MarkdownText(f.Status), plus, minus)
	}
	b.WriteString("\n")
	return b.String()
}

// diffBlock is the diff, collapsed, cut to about limit bytes ("" when there
// is none or no room).
func (rc *ReportContext) diffBlock(limit int) string {
	if rc.Patch == "" || limit < 512 {
		return ""
	}
	patch, cut := rc.Patch, rc.PatchCut
	body := limit - 256
	if len(patch) > body {
		patch, cut = cutAtLine(patch, body), true
	}
	lines := strings.Count(patch, "\n")
	note := ""
	if cut {
		note = ", cut"
	}
	fence := strings.Repeat("`", max(3, longestRun(patch, '`')+1))
	return fmt.Sprintf("<details><summary>Diff (%d lines%s)</summary>\n\n%sdiff\n%s\n%s\n\n</details>\n\n",
		lines, note, fence, strings.TrimRight(strings.ToValidUTF8(patch, "\uFFFD"), "\n"), fence)
}

// cutAtLine cuts s to at most n bytes at a line end.
func cutAtLine(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if i := strings.LastIndexByte(s[:n], '\n'); i > 0 {
		return s[:i+1]
	}
	return fit(s, n)
}

func longestRun(s string, c byte) int {
	best, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			run++
			best = max(best, run)
		} else {
			run = 0
		}
	}
	return best
}

// NextStep is the one line that says what to do after this run.
func NextStep(doc report.Document, rc *ReportContext) string {
	g := doc.Goal
	switch {
	case g == nil || doc.Status != report.StatusSuccess && doc.Status != "":
		if doc.Status == report.StatusAuthRequired {
			return "Give the agent a working model key (the step's env), then re-run the job."
		}
		if doc.Status == report.StatusCancelled {
			return "The run was cancelled before it finished; re-run the job."
		}
		if len(doc.Suggestions) > 0 {
			return report.MarkdownText(report.Cap(doc.Suggestions[0], 400))
		}
		return "Fix the error above, then re-run the job."
	case g.Passed && doc.Conclusion == report.ConclusionSuccess:
		changed := len(rc.Files)
		if doc.Changes != nil {
			changed = max(changed, doc.Changes.FilesChanged)
		}
		switch {
		case changed == 0 && g.Iterations == 0:
			return "Nothing to do: the check already passes."
		case changed == 0:
			return "Nothing to merge: the check passes and the agent left no changes."
		case rc.InFixPR:
			return "Review this pull request like any contribution: it holds only the agent's change, on which the check passed in goalrun's sandbox."
		case rc.FixURL != "":
			n := ""
			if rc.FixNumber != 0 {
				n = " #" + strconv.Itoa(rc.FixNumber)
			}
			return "Review and merge the fix pull request" + n + "."
		case rc.FixBranch != "":
			return "The fix is on the branch " + report.MarkdownText(rc.FixBranch) + ", but no pull request could be opened (see the warnings): open one from it (the branch link)."
		case rc.Fork:
			return "The change is not kept (this runner's workspace is discarded, and a fork's branch cannot be pushed to): apply the diff below to the pull request's branch."
		case rc.OpenPR:
			return "The change is not kept (" + report.MarkdownText(cmp.Or(rc.FixSkipped, "no pull request was made")) + "): apply the diff below, or fix that and re-run."
		default:
			return "The change is not kept: this runner's workspace is discarded when the job ends. Set open-pr: true to get it as a pull request, or apply the diff below."
		}
	case g.Passed && doc.Changes != nil && doc.Changes.CheckModified:
		return "Not verified: the agent changed the check's own files (listed as risky). Review the diff before trusting this pass."
	case g.Passed:
		return "Not verified: a judge, not your check, decided. Verify the change yourself before merging."
	}
	halt := ""
	if g.Halt != nil {
		halt = *g.Halt
	}
	switch halt {
	case report.HaltTimeout:
		return "The time ran out: raise timeout-minutes, or give the agent a narrower task."
	case report.HaltMaxIterations:
		return fmt.Sprintf("The check still fails after %d agent turns: read its output below, then raise max-iterations or give the agent a narrower task.", g.Iterations)
	case report.HaltNoProgress:
		return "The agent stopped making progress (the same failure, no new changes): read the check's output below and give it a more precise task."
	case report.HaltBudget:
		return "The budget ran out: raise max-cost-usd, or give the agent a narrower task."
	case report.HaltAuthRequired:
		return "Give the agent a working model key (the step's env), then re-run the job."
	case report.HaltAgentError:
		return "The agent failed (see above); re-run the job, or try another agent or model."
	}
	return "The check still fails: read its output below."
}
