package github

import (
	"context"
	"fmt"
	"math"
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
// the markdown rendering, and a mermaid chart of the iteration timings.
// What it writes, together with what the file already holds, stays within
// StepSummaryBytes.
type StepSummary struct {
	// Path is the file (GITHUB_STEP_SUMMARY).
	Path string
	// Render renders the document (nil means report.Markdown).
	Render Renderer
	// Notes are shown above the report, one line each (for example "the
	// check run could not be created: …").
	Notes []string
}

var _ Publisher = (*StepSummary)(nil)

// Publish appends the summary. It returns an error when the file cannot be
// opened or written.
func (s *StepSummary) Publish(ctx context.Context, doc report.Document) error {
	if s.Path == "" {
		return fmt.Errorf("GITHUB_STEP_SUMMARY is not set: no job summary written")
	}
	md := report.Markdown
	if s.Render != nil {
		md = s.Render
	}
	var b strings.Builder
	for _, n := range s.Notes {
		fmt.Fprintf(&b, "> [!WARNING]\n> %s\n\n", strings.ReplaceAll(n, "\n", " "))
	}
	b.WriteString(md(doc))
	if chart := MermaidTimings(doc); chart != "" {
		b.WriteString("\n\n### Iteration timings\n\n")
		b.WriteString(chart)
	}
	b.WriteString("\n")
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
		return fmt.Errorf("the job summary %s already holds %d bytes or more: the report was not added", s.Path, StepSummaryBytes)
	}
	if _, err := f.WriteString(report.Cap(b.String(), room)); err != nil {
		return fmt.Errorf("could not write the job summary %s: %w", s.Path, err)
	}
	return f.Close()
}

// MermaidTimings returns a mermaid gantt chart (in a ```mermaid block) of
// the document's iterations: per iteration an "agent" bar and a "check"
// bar, laid end to end in run order, durations in seconds. It returns ""
// when the document has no iterations. Omitted middle iterations
// (iterations_omitted) are not drawn; the chart says how many.
func MermaidTimings(doc report.Document) string {
	if len(doc.Iterations) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("```mermaid\ngantt\n")
	title := "Iteration timings (seconds)"
	if doc.IterationsOmitted != nil && *doc.IterationsOmitted > 0 {
		title += fmt.Sprintf(", %d middle iterations not shown", *doc.IterationsOmitted)
	}
	fmt.Fprintf(&b, "    title %s\n", title)
	// dateFormat x: milliseconds since the epoch; bars start at 0.
	b.WriteString("    dateFormat x\n    axisFormat %M:%S\n")
	var at int64
	bar := func(name string, seconds float64, crit bool) {
		ms := int64(math.Round(seconds * 1000))
		if ms < 1 {
			ms = 1 // mermaid drops zero-length bars
		}
		tag := ""
		if crit {
			tag = "crit, "
		}
		fmt.Fprintf(&b, "    %s %.1fs :%s%d, %d\n", name, seconds, tag, at, at+ms)
		at += ms
	}
	for _, it := range doc.Iterations {
		fmt.Fprintf(&b, "    section iteration %d\n", it.N)
		if it.Agent != nil {
			bar("agent", it.Agent.Seconds, it.Agent.Status != "success")
		}
		if it.Check != nil {
			bar("check", it.Check.Seconds, !it.Check.Passed)
		}
	}
	b.WriteString("```\n")
	return b.String()
}
