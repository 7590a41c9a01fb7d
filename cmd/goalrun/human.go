package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/goalrun/goalrun/goal"
	"github.com/goalrun/goalrun/goal/agent"
	"github.com/goalrun/goalrun/report"
)

// Layout of the human result on stdout.
const (
	// humanWidth is where prose is wrapped (terminals and CI logs show
	// 100 columns comfortably).
	humanWidth = 100
	// humanTailLines is how many lines of the last failing check's output
	// the result shows.
	humanTailLines = 12
	// humanQuote indents quoted text: the agent's words, check output.
	humanQuote = "    "
	// humanPaths is how many changed paths the result names; the rest
	// are counted ("and 3 more").
	humanPaths = 8
)

// writeHumanResult is the human result on stdout: the headline, then in
// plain words why the run stopped, the end of the failing check's output,
// the agent's last words labelled as its own, the claims nothing backs,
// what the agent changed and any risky paths, and where the document is.
// The caller adds the time line once the sandbox is torn down. Everything
// the agent or a check wrote goes through report.TerminalText; no line
// carries a truncation marker.
func writeHumanResult(w io.Writer, doc report.Document, cfg runConfig) {
	var b strings.Builder
	brief := doc
	brief.Message = "" // printed whole below
	fmt.Fprintf(&b, "goalrun: %s\n", terminalText(report.Headline(brief)))
	section := func(title, body string) {
		if strings.TrimSpace(body) == "" && title == "" {
			return
		}
		b.WriteString("\n")
		if title != "" {
			b.WriteString(report.Wrap(title, humanWidth, "") + "\n")
		}
		if body != "" {
			b.WriteString(body + "\n")
		}
	}
	failed := doc.Status != report.StatusSuccess
	if failed {
		section("", report.Wrap(terminalText(report.Unmarked(doc.Message)), humanWidth, ""))
	} else if g := doc.Goal; g != nil && !g.Passed && g.HaltReason != "" {
		section("", report.Wrap("Why it stopped: "+terminalText(report.Unmarked(g.HaltReason)), humanWidth, ""))
	}
	if title, lines := failingCheck(doc); len(lines) > 0 && !(failed && quotedAll(doc.Message, lines)) {
		section(title, quoteLines(lines))
	}
	if failed && len(doc.Suggestions) > 0 {
		var s []string
		for _, sug := range doc.Suggestions {
			s = append(s, bullet(terminalText(report.Unmarked(sug))))
		}
		section("What to do:", strings.Join(s, "\n"))
	}
	agentRan := doc.Goal != nil && doc.Goal.Iterations > 0
	if doc.Summary != nil && strings.TrimSpace(*doc.Summary) != "" {
		words := terminalText(report.Unmarked(strings.TrimSpace(*doc.Summary)))
		if agentRan {
			section("The agent's last words (its own account, not verified by goalrun):", report.Wrap(words, humanWidth, humanQuote))
		} else {
			section("", report.Wrap(words, humanWidth, "")) // goalrun's own sentence
		}
	}
	if len(doc.UngroundedClaims) > 0 {
		var s []string
		for _, c := range doc.UngroundedClaims {
			s = append(s, bullet(fmt.Sprintf("%q: %s", terminalText(report.Unmarked(c.Claim)), terminalText(report.Unmarked(c.Reason)))))
		}
		section("Ungrounded claims (the agent said so; nothing it did backs it):", strings.Join(s, "\n"))
	}
	if c := doc.Changes; c != nil {
		line := "Changes: none"
		if c.FilesChanged > 0 {
			line = fmt.Sprintf("Changes: %s (+%d −%d)", count(c.FilesChanged, "file"), c.Insertions, c.Deletions)
		}
		if c.CheckModified {
			line += "; the agent changed the check's own files: read the diff before you trust the pass (--allow-test-edits accepts it)"
		}
		section("", report.Wrap(line, humanWidth, ""))
		if len(c.Paths) > 0 {
			var s []string
			for _, p := range c.Paths[:min(len(c.Paths), humanPaths)] {
				s = append(s, bullet(terminalText(report.Unmarked(p))))
			}
			if more := len(c.Paths) - min(len(c.Paths), humanPaths) + c.PathsOmitted; more > 0 {
				s = append(s, bullet(fmt.Sprintf("and %d more", more)))
			}
			b.WriteString(strings.Join(s, "\n") + "\n")
		}
		if n := len(c.RiskyPaths) + c.RiskyPathsOmitted; n > 0 {
			var s []string
			for _, p := range c.RiskyPaths {
				s = append(s, bullet(terminalText(report.Unmarked(p))))
			}
			if c.RiskyPathsOmitted > 0 {
				s = append(s, bullet(fmt.Sprintf("and %d more (not listed)", c.RiskyPathsOmitted)))
			}
			b.WriteString("Risky paths (look at them before you trust the result):\n" + strings.Join(s, "\n") + "\n")
		}
	}
	if u := usageLine(doc); u != "" {
		b.WriteString(report.Wrap(u, humanWidth, "") + "\n")
	}
	if p := doc.Sandbox; p != nil && p.FallbackNotice != nil {
		section("", report.Wrap("NOTICE: "+terminalText(*p.FallbackNotice), humanWidth, ""))
	}
	if cfg.output != "" && outputHolds(cfg.output, doc) {
		section("", "document: "+cfg.output)
	}
	io.WriteString(w, b.String())
}

// failingCheck returns the heading and the last lines of the run's last
// check when it failed (nil when the last check passed or none ran).
func failingCheck(doc report.Document) (string, []string) {
	if len(doc.Iterations) == 0 || doc.Goal == nil || doc.Goal.Check == "" {
		return "", nil
	}
	var it report.Iteration
	for i := len(doc.Iterations) - 1; i >= 0; i-- { // the last check that ran
		if doc.Iterations[i].Check != nil {
			it = doc.Iterations[i]
			break
		}
	}
	c := it.Check
	if c == nil || c.Passed {
		return "", nil
	}
	fail, lines := goal.CheckExcerpt(terminalText(c.Failures), terminalText(c.Tail), humanTailLines, humanTailLines)
	if len(fail) > 0 {
		lines = append(append(fail, report.Ellipsis), lines...)
	}
	when := "before any agent turn"
	if it.N > 0 {
		when = fmt.Sprintf("after agent turn %d", it.N)
	}
	how := fmt.Sprintf("exit %d", c.ExitCode)
	switch {
	case c.TimedOut:
		how = "timed out"
	case c.OOMKilled:
		how = "killed for using too much memory"
	}
	if c.Environment != "" {
		how += ": for its environment: " + report.Unmarked(c.Environment)
	} else if c.Failing != "" { // from the whole output, as the progress line
		how += ": " + terminalText(c.Failing)
	} else if d := goal.DescribeFailingOutput(report.Unmarked(c.Failures), report.Unmarked(c.Tail)); d != "" {
		how += ": " + d
	}
	title := fmt.Sprintf("The check `%s` failed %s (%s)", terminalText(report.Unmarked(doc.Goal.Check)), when, how)
	if len(lines) == 0 {
		return title + "; it printed nothing.", []string{"(no output)"}
	}
	if len(fail) > 0 {
		return title + "; its failing tests, then the end of its output:", lines
	}
	return title + "; the end of its output:", lines
}

// quoteLines indents lines as quoted output.
func quoteLines(lines []string) string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = humanQuote + l
	}
	return strings.Join(out, "\n")
}

// bullet is one wrapped list item.
func bullet(s string) string {
	w := report.Wrap(s, humanWidth-4, "    ")
	return "  - " + strings.TrimPrefix(w, "    ")
}

// count is "1 file", "3 files".
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// quotedAll reports whether msg already quotes every one of lines (a
// CheckNotRunnable message quotes a short output whole).
func quotedAll(msg string, lines []string) bool {
	for _, l := range lines {
		if !strings.Contains(msg, strings.TrimSpace(l)) {
			return false
		}
	}
	return true
}

// usageLine says which model answered and what the run used, as the agent
// reported it ("" when the agent never ran or reported nothing).
func usageLine(doc report.Document) string {
	if doc.Goal == nil || doc.Goal.Iterations == 0 {
		return ""
	}
	var parts []string
	switch m := doc.ModelUsed; {
	case m.Name != "":
		parts = append(parts, "model "+terminalText(report.Unmarked(m.Name)))
	case m.Unreported && (doc.Agent == nil || doc.Agent.Name != agent.CommandName):
		// model_used null: a model-backed agent ran and named none (a
		// plain command has no model to name)
		parts = append(parts, "model not reported by the agent")
	}
	if u := doc.Usage; u != nil {
		if u.InputTokens > 0 || u.OutputTokens > 0 {
			parts = append(parts, fmt.Sprintf("%d tokens in, %d out", u.InputTokens, u.OutputTokens))
		}
		switch {
		case u.CostUnknown && u.CostUSD > 0:
			parts = append(parts, fmt.Sprintf("$%.4f reported, the rest of the cost not reported by the agent", u.CostUSD))
		case u.CostUnknown:
			parts = append(parts, "cost not reported by the agent")
		case u.CostUSD > 0:
			parts = append(parts, fmt.Sprintf("$%.4f (as the agent reported it)", u.CostUSD))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "Usage: " + strings.Join(parts, " · ")
}
