package ghreport

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/goalrun/goalrun/report"
)

// StepSummaryBytes bounds what one step may write to GITHUB_STEP_SUMMARY:
// 1 MiB (GitHub Actions, "Adding a job summary"; over it the upload fails
// with an error annotation).
const StepSummaryBytes = 1 << 20

// StepSummary appends the report to the job summary file
// (GITHUB_STEP_SUMMARY): a short notice when another sink failed (Notes),
// then the markdown rendering with report's mermaid chart of the iteration
// timings (report.MarkdownWith, Mermaid on).
// What it writes, together with what the file already holds, stays within
// StepSummaryBytes.
type StepSummary struct {
	// Path is the file (GITHUB_STEP_SUMMARY).
	Path string
	// Render renders the document (nil means report.MarkdownWith with the
	// mermaid chart).
	Render Renderer
	// Notes are shown above the report, one warning each (for example
	// "the check run could not be created: …"), escaped as plain text:
	// they may quote names the agent chose.
	Notes []string
	// Notices are shown above the report as GitHub "[!NOTE]" alerts (for
	// example why goalrun made no check run on a fork's pull request),
	// escaped like Notes.
	Notices []string
}

var _ Publisher = (*StepSummary)(nil)

// Publish appends the summary. It returns an error when the file cannot be
// opened or written.
func (s *StepSummary) Publish(ctx context.Context, doc report.Document) error {
	if s.Path == "" {
		return fmt.Errorf("GITHUB_STEP_SUMMARY is not set: no job summary written")
	}
	md := func(d report.Document) string { return report.MarkdownWith(d, report.MarkdownOptions{Mermaid: true}) }
	if s.Render != nil {
		md = s.Render
	}
	var b strings.Builder
	for _, n := range s.Notices {
		fmt.Fprintf(&b, "> [!NOTE]\n> %s\n\n", report.MarkdownText(n))
	}
	for _, n := range s.Notes {
		fmt.Fprintf(&b, "> [!WARNING]\n> %s\n\n", report.MarkdownText(n))
	}
	b.WriteString(md(doc))
	b.WriteString("\n")
	return s.appendFitted("report", b.String())
}

// Notice appends one escaped note (a GitHub "[!NOTE]" alert) to the job
// summary, for a run that ends without a report (a refused `/goalrun`
// comment). It returns an error when Path is unset, the file cannot be
// written, or it already holds StepSummaryBytes.
func (s *StepSummary) Notice(text string) error {
	if s.Path == "" {
		return fmt.Errorf("GITHUB_STEP_SUMMARY is not set: no job summary written")
	}
	return s.appendFitted("note", "> [!NOTE]\n> "+report.MarkdownText(text)+"\n\n")
}

// appendFitted appends markdown to the job summary file, cut (fit) to the
// room left under StepSummaryBytes; what names it in the error when there
// is no room ("report", "note").
func (s *StepSummary) appendFitted(what, markdown string) error {
	f, err := os.OpenFile(s.Path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("could not open the job summary %s: %w", s.Path, err)
	}
	defer f.Close()
	room := StepSummaryBytes
	if fi, err := f.Stat(); err == nil {
		room -= int(fi.Size())
	}
	if room <= 0 {
		return fmt.Errorf("the job summary %s already holds %d bytes or more: the %s was not added", s.Path, StepSummaryBytes, what)
	}
	if _, err := f.WriteString(fit(markdown, room)); err != nil {
		return fmt.Errorf("could not write the job summary %s: %w", s.Path, err)
	}
	return f.Close()
}
