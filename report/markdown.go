package report

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/goalrun/goalrun/sandbox"
)

// MarkdownBytes bounds Markdown's output: 65535 bytes, the limit of a check
// run's output.summary (GitHub Checks API; GitHub enforces it in bytes,
// answering 422 "summary exceeds a maximum bytesize of 65535" — see
// README.md, "Limits"). It also fits a PR comment body (65536
// characters) and a job summary (1 MiB).
const MarkdownBytes = 65535

// MarkdownOptions select optional parts of the markdown rendering.
type MarkdownOptions struct {
	// Mermaid adds a mermaid chart of the iteration timings (agent and
	// check seconds per iteration) where it says something: at least two
	// agent turns, and a step of a second or more (a shorter run would be a
	// tall, empty frame). GitHub renders it in job summaries, comments and
	// check runs.
	Mermaid bool
	// MaxBytes bounds the rendering (0 means MarkdownBytes), for callers
	// that put more around it; sections are cut as under MarkdownBytes.
	MaxBytes int
}

// Markdown renders d for a check run's output.summary, a PR comment or the
// job summary: a title line that says whether the goal was met and whether
// the verdict is grounded (for failures, the error), the summary or the
// error with its suggestions, a table of iterations, failed tool calls,
// ungrounded claims, changes (risky paths and a modified check shown
// prominently), the sandbox posture, and the encoded document (Encode) in a
// collapsed <details> block. Agent text is escaped so prose cannot break the
// tables or the details block, mention people or inject HTML. The result is
// at most MarkdownBytes bytes: sections that do not fit are cut (saying so),
// the title and the JSON document always stay.
func Markdown(d Document) string { return MarkdownWith(d, MarkdownOptions{}) }

// MarkdownWith is Markdown with options (the job summary adds the mermaid
// chart).
func MarkdownWith(d Document, o MarkdownOptions) string {
	doc := Encode(d)
	// Render from the encoded form (capped, elided), so the markdown and the
	// JSON below it agree and every section is bounded.
	var decoded Document
	if err := json.Unmarshal(doc, &decoded); err == nil {
		d = decoded
	}
	title := "### " + titleEmoji(d) + " " + mdText(Cap(Headline(d), TitleBytes)) + "\n"
	details := fmt.Sprintf("<details><summary>goalrun/1 document (%d bytes)</summary>\n\n````json\n%s\n````\n\n</details>\n", len(doc), doc)

	var sections []string
	sections = append(sections, mdLead(d))
	sections = append(sections, mdFacts(d))
	sections = append(sections, mdWarnings(d))
	sections = append(sections, mdIterations(d))
	if o.Mermaid {
		sections = append(sections, mdMermaid(d))
	}
	sections = append(sections, mdReceipts(d), mdClaims(d), mdChanges(d), mdSandbox(d))

	var b strings.Builder
	b.WriteString(title)
	limit := MarkdownBytes
	if o.MaxBytes > 0 && o.MaxBytes < limit {
		limit = o.MaxBytes
	}
	budget := limit - len(title) - len(details) - 1
	const cutNote = "\n_(section cut to fit the 65535-byte limit; the JSON document below has the details.)_\n"
	for _, s := range sections {
		if s == "" {
			continue
		}
		s = "\n" + s
		if len(s) <= budget {
			b.WriteString(s)
			budget -= len(s)
			continue
		}
		if budget > len(cutNote)+64 {
			cut := cutAtLine(s, budget-len(cutNote))
			b.WriteString(cut)
			b.WriteString(cutNote)
		}
		budget = 0
		break
	}
	b.WriteString("\n")
	b.WriteString(details)
	out := b.String()
	if len(out) > limit { // the document alone is over a caller's bound
		out = title + "\n" + details
	}
	return out
}

// cutAtLine returns s cut to at most n bytes, at the last line break when
// there is one in the second half, else on a rune boundary.
func cutAtLine(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := strings.LastIndexByte(s[:n], '\n')
	if i > n/2 {
		return s[:i+1]
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "\n"
}

// Headline is one line that says how the run ended: for the result shape
// whether the goal was met and whether the verdict is grounded, the halt,
// the iterations and the conclusion ("goal met · grounded · 2 iterations ·
// conclusion success"); for the failure shapes the error (and auth reason)
// first. The terminal event's message and the markdown title use it.
func Headline(d Document) string {
	var parts []string
	switch d.Status {
	case StatusSuccess:
	case StatusAuthRequired:
		parts = append(parts, "authentication required ("+d.Reason+")")
	case StatusCancelled:
		parts = append(parts, "cancelled")
	default:
		parts = append(parts, "error "+d.Error)
	}
	if g := d.Goal; g != nil {
		// The title always says whether the verdict is grounded, and why
		// not: a bare "ungrounded" beside a failing check reads as if the
		// failure itself were unverified.
		switch {
		case g.Passed && g.Grounded && g.TestedNothing != "":
			parts = append(parts, "goal met", "grounded", "but the check tested nothing")
		case g.Passed && g.Grounded:
			parts = append(parts, "goal met", "grounded")
		case g.Passed && g.Check == "":
			parts = append(parts, "goal met", "ungrounded (a judge's word)")
		case g.Passed:
			parts = append(parts, "goal met", "ungrounded")
		case g.Check == "":
			parts = append(parts, "goal not met", "ungrounded (a judge's word)")
		case d.Error == ErrCheckNotRunnable:
			parts = append(parts, "goal not met", "ungrounded: the check could not run")
		case g.Halt != nil && *g.Halt == HaltUnsafeChange:
			parts = append(parts, "goal not met", "failed closed: git's executable configuration changed")
		case d.Error == ErrEnvironmentFailed:
			parts = append(parts, "goal not met", "ungrounded: the check's environment failed")
		case !checkRan(d):
			parts = append(parts, "goal not met", "ungrounded: check not run")
		default:
			parts = append(parts, "goal not met", "ungrounded: check failing")
		}
		if d.Changes != nil && d.Changes.CheckModified {
			parts = append(parts, "check modified by the agent")
		}
		if g.Halt != nil && *g.Halt != "" && d.Status == StatusSuccess {
			parts = append(parts, "halted: "+*g.Halt)
		}
		if g.Iterations == 1 {
			parts = append(parts, "1 iteration")
		} else {
			parts = append(parts, strconv.Itoa(g.Iterations)+" iterations")
		}
	}
	if d.Conclusion != "" {
		parts = append(parts, "conclusion "+d.Conclusion)
	}
	// The failure's message comes last and whole (folded onto one line):
	// whoever shows the headline cuts it once at its own bound (the
	// terminal event at BriefCap, the markdown title at TitleBytes), so a
	// cut never runs through an earlier cut's marker.
	if d.Status != StatusSuccess && d.Message != "" {
		parts = append(parts, Fold(d.Message))
	}
	return strings.Join(parts, " · ")
}

// TitleBytes bounds the markdown title's headline (GitHub shows the title
// on one line; the message is quoted in full below it).
const TitleBytes = 300

// titleEmoji is the title's status sign.
func titleEmoji(d Document) string {
	switch d.Conclusion {
	case ConclusionSuccess:
		return "✅"
	case ConclusionNeutral:
		return "⚠️"
	case ConclusionTimedOut:
		return "⏱️"
	case ConclusionCancelled:
		return "⏹️"
	case ConclusionActionRequired:
		return "🔑"
	}
	return "❌"
}

// mdLead is the agent's summary (result) or the error with suggestions.
func mdLead(d Document) string {
	var b strings.Builder
	if d.Summary != nil {
		if strings.TrimSpace(*d.Summary) == "" {
			return "_The agent gave no summary._\n"
		}
		b.WriteString("**Agent's summary** (its own words, not verified):\n\n")
		b.WriteString(mdQuote(*d.Summary))
		return b.String()
	}
	if d.Status == StatusSuccess {
		return ""
	}
	fmt.Fprintf(&b, "**Error `%s`**", mdCode(d.Error))
	if d.Failure != nil {
		fmt.Fprintf(&b, " (cause: %s", mdText(d.Failure.Cause))
		keys := make([]string, 0, len(d.Failure.Detail))
		for k := range d.Failure.Detail {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, ", %s: %s", mdText(k), mdText(Cap(Fold(fmt.Sprint(d.Failure.Detail[k])), BriefCap)))
		}
		b.WriteString(")")
	}
	b.WriteString("\n\n")
	b.WriteString(mdQuote(d.Message))
	if len(d.Suggestions) > 0 {
		b.WriteString("\n**What to do:**\n\n")
		for _, s := range d.Suggestions {
			b.WriteString("- " + mdText(s) + "\n")
		}
	}
	return b.String()
}

// count is "1 thing" or "n things".
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return strconv.Itoa(n) + " " + thing + "s"
}

// mdFacts is one line of key facts.
func mdFacts(d Document) string {
	var parts []string
	if g := d.Goal; g != nil && g.Check != "" {
		parts = append(parts, "check `"+mdCode(g.Check)+"`")
	}
	if g := d.Goal; g != nil && g.HaltReason != "" {
		parts = append(parts, "halt reason: "+mdText(g.HaltReason))
	}
	if d.Turns != nil && (d.Agent == nil || d.Agent.Name != "command") { // the command agent has no model turns
		// turns are the agent's own model round trips, summed over its
		// invocations (an iteration is one invocation).
		parts = append(parts, count(*d.Turns, "model turn"))
	}
	if d.Delegations != nil && *d.Delegations > 0 {
		parts = append(parts, count(*d.Delegations, "delegation"))
	}
	if a := d.Agent; a != nil {
		s := "agent " + mdText(a.Name)
		if a.Version != "" {
			s += " " + mdText(a.Version)
		}
		parts = append(parts, s)
	}
	switch {
	case d.ModelUsed.Name != "":
		parts = append(parts, "model "+mdText(d.ModelUsed.Name))
	case d.ModelUsed.Unreported && (d.Agent == nil || d.Agent.Name != "command"):
		// a plain command (agent.CommandName) has no model to name
		parts = append(parts, "model not reported by the agent")
	}
	for _, m := range d.ModelsServed {
		if m.LocalLastResort {
			parts = append(parts, "⚠️ served by local last-resort model "+mdText(m.ModelID))
		}
	}
	if u := d.Usage; u != nil {
		parts = append(parts, fmt.Sprintf("%d in / %d out tokens", u.InputTokens, u.OutputTokens))
		switch {
		case u.CostUnknown:
			parts = append(parts, "cost not reported by the agent")
		case u.CostUSD > 0:
			parts = append(parts, fmt.Sprintf("$%.2f", u.CostUSD))
		}
	}
	if d.ElapsedSeconds != nil {
		parts = append(parts, fmt.Sprintf("%.1f s", *d.ElapsedSeconds))
	}
	if j := d.Judge; j != nil {
		verdict := "not met"
		if j.Met {
			verdict = "met"
		}
		parts = append(parts, fmt.Sprintf("judge (%s, ungrounded): %s — %s", mdText(j.By), verdict, mdText(j.Reason)))
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, " · ") + "\n"
}

// mdWarnings are the things a reviewer must not miss.
func mdWarnings(d Document) string {
	var b strings.Builder
	if c := d.Changes; c != nil && len(c.GitExecutable) > 0 {
		b.WriteString("> **❌ The agent changed git's executable configuration** (`git_executable`: " + mdText(strings.Join(c.GitExecutable, ", ")) +
			"). Running git in this tree would run programs the agent wrote, so the run failed closed. Restore these paths from a trusted copy before running git there.\n\n")
	}
	if g := d.Goal; g != nil && g.Passed && !g.Grounded {
		b.WriteString("> **⚠️ Ungrounded:** the goal was judged met without goalrun's own check passing in the sandbox; treat it as unverified.\n\n")
	}
	if g := d.Goal; g != nil && g.TestedNothing != "" {
		b.WriteString("> **⚠️ Tested nothing** (`tested_nothing`): " + mdText(g.TestedNothing) + " A pass that tests nothing is not verified.\n\n")
	}
	if c := d.Changes; c != nil && c.CheckModified {
		b.WriteString("> **⚠️ The agent modified the check's own files** (`check_modified`): a passing check may have been weakened. Review the risky paths below.")
		if c.CheckModifiedReason != "" {
			b.WriteString(" First: " + mdText(c.CheckModifiedReason) + ".")
		}
		b.WriteString("\n\n")
	}
	if p := d.Sandbox; p != nil && p.FallbackNotice != nil {
		b.WriteString("> **⚠️ No container:** " + mdText(*p.FallbackNotice) + "\n\n")
	}
	if len(d.Elided) > 0 {
		b.WriteString("_Left out of this report: " + mdText(strings.Join(d.Elided, "; ")) + "._\n")
	}
	return b.String()
}

// mdIterations is the table of iterations.
func mdIterations(d Document) string {
	if len(d.Iterations) == 0 {
		return ""
	}
	var b strings.Builder
	if len(d.Setup) > 0 {
		parts := make([]string, 0, len(d.Setup))
		for _, st := range d.Setup {
			p := "`" + mdCode(st.Command) + "`"
			if st.Dir != "" {
				p += " in `" + mdCode(st.Dir) + "`"
			}
			switch {
			case st.Reused:
				p += " (prepared by an earlier run)"
			case st.Skipped:
				p += " (skipped)"
			case st.TimedOut:
				p += " (timed out)"
			default:
				p += fmt.Sprintf(" (exit %d, %.1f s)", st.ExitCode, st.Seconds)
			}
			parts = append(parts, p)
		}
		b.WriteString("Setup before the first check: " + strings.Join(parts, " · ") + "\n\n")
	}
	b.WriteString("#### Iterations\n\n| # | agent | turns | agent s | check exit | check s |\n|---:|---|---:|---:|---:|---:|\n")
	for i, it := range d.Iterations {
		if i == IterHead && d.IterationsOmitted != nil && *d.IterationsOmitted > 0 {
			fmt.Fprintf(&b, "| … | _%d iterations omitted_ | | | | |\n", *d.IterationsOmitted)
		}
		agent, turns, asec := "—", "—", "—"
		if a := it.Agent; a != nil {
			agent = mdCell(a.Status)
			if a.Cause != "" {
				agent += " (" + mdCell(a.Cause) + ")"
			}
			turns = strconv.Itoa(a.Turns)
			asec = fmt.Sprintf("%.1f", a.Seconds)
		}
		exit, csec := "—", "—"
		if c := it.Check; c != nil {
			exit = strconv.Itoa(c.ExitCode)
			if c.Passed {
				exit += " ✅"
			}
			if c.TimedOut {
				exit += " (timed out)"
			}
			if c.OOMKilled {
				exit += " (OOM)"
			}
			csec = fmt.Sprintf("%.1f", c.Seconds)
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s |\n", it.N, agent, turns, asec, exit, csec)
	}
	if last := d.Iterations[len(d.Iterations)-1].Check; last != nil && !last.Passed {
		if last.Environment != "" {
			b.WriteString("\nThe last check failed for its environment, not a test: " + mdText(last.Environment) + ".\n")
		}
		if last.Failures != "" {
			b.WriteString("\nFailing tests in the last check:\n\n")
			b.WriteString(mdFence(last.Failures))
		}
		if last.Tail != "" {
			b.WriteString("\nLast check output (tail):\n\n")
			b.WriteString(mdFence(last.Tail))
		}
	}
	return b.String()
}

// mdMermaid is the chart of iteration timings, or "" where it would say
// nothing: fewer than two agent turns, or no step of a second or more.
func mdMermaid(d Document) string {
	turns, longest := 0, 0.0
	for _, it := range d.Iterations {
		if it.Agent != nil {
			turns++
			longest = max(longest, it.Agent.Seconds)
		}
		if it.Check != nil {
			longest = max(longest, it.Check.Seconds)
		}
	}
	if turns < 2 || longest < 1 {
		return ""
	}
	labels := make([]string, 0, len(d.Iterations))
	agent := make([]string, 0, len(d.Iterations))
	check := make([]string, 0, len(d.Iterations))
	for _, it := range d.Iterations {
		labels = append(labels, strconv.Quote("#"+strconv.Itoa(it.N)))
		a, c := 0.0, 0.0
		if it.Agent != nil {
			a = it.Agent.Seconds
		}
		if it.Check != nil {
			c = it.Check.Seconds
		}
		agent = append(agent, strconv.FormatFloat(a, 'f', 1, 64))
		check = append(check, strconv.FormatFloat(c, 'f', 1, 64))
	}
	return "#### Timings (bars: agent seconds, line: check seconds)\n\n```mermaid\nxychart-beta\n" +
		"    x-axis [" + strings.Join(labels, ", ") + "]\n" +
		"    y-axis \"seconds\"\n" +
		"    bar [" + strings.Join(agent, ", ") + "]\n" +
		"    line [" + strings.Join(check, ", ") + "]\n```\n"
}

// mdReceipts lists the failed tool calls of the sample.
func mdReceipts(d Document) string {
	r := d.Receipts
	if r == nil || r.Total == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "#### Tool calls: %d, %d failed\n\n", r.Total, r.Failed)
	keys := make([]string, 0, len(r.ByTool))
	for k := range r.ByTool {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if r.ByTool[keys[i]] != r.ByTool[keys[j]] {
			return r.ByTool[keys[i]] > r.ByTool[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", mdText(k), r.ByTool[k]))
	}
	b.WriteString("By tool: " + strings.Join(parts, " · ") + "\n")
	shown := 0
	for _, s := range r.Sample {
		if s.OK {
			continue
		}
		if shown == 0 {
			b.WriteString("\nFailed calls:\n\n")
		}
		shown++
		line := "- " + mdText(s.Tool) + ": " + mdText(s.Brief)
		if s.Via != "" {
			line += " (via " + mdText(s.Via) + ")"
		}
		b.WriteString(line + "\n")
	}
	if more := r.Failed - shown; shown > 0 && more > 0 {
		fmt.Fprintf(&b, "- _%d more failed calls not in the sample_\n", more)
	}
	return b.String()
}

// mdClaims lists the ungrounded claims.
func mdClaims(d Document) string {
	if len(d.UngroundedClaims) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("#### Ungrounded claims (the agent said so; no tool call backs it)\n\n")
	for _, c := range d.UngroundedClaims {
		fmt.Fprintf(&b, "- **%s**: “%s” — %s\n", mdText(c.Kind), mdText(c.Claim), mdText(c.Reason))
	}
	return b.String()
}

// mdChanges summarizes the workspace changes.
func mdChanges(d Document) string {
	c := d.Changes
	if c == nil {
		return ""
	}
	var b strings.Builder
	files := "files"
	if c.FilesChanged == 1 {
		files = "file"
	}
	fmt.Fprintf(&b, "#### Changes\n\n%d %s changed, +%d −%d", c.FilesChanged, files, c.Insertions, c.Deletions)
	if c.PatchSHA256 != "" {
		b.WriteString(" · patch sha256 `" + mdCode(c.PatchSHA256) + "`")
	}
	b.WriteString("\n")
	if c.CheckModified {
		b.WriteString("\n**⚠️ check_modified: true**\n")
	}
	if len(c.RiskyPaths) > 0 {
		b.WriteString("\n**⚠️ Risky paths:**\n\n")
		for _, p := range c.RiskyPaths {
			b.WriteString("- " + mdText(p) + "\n")
		}
	}
	if c.RiskyPathsOmitted > 0 {
		if len(c.RiskyPaths) == 0 {
			b.WriteString("\n**⚠️ Risky paths:**\n\n")
		}
		noun := "paths"
		if c.RiskyPathsOmitted == 1 {
			noun = "path"
		}
		fmt.Fprintf(&b, "- … and %d more risky %s, not listed\n", c.RiskyPathsOmitted, noun)
	}
	if c.RelativeTo == RelativeToMount {
		b.WriteString("\n_Paths are relative to the sandbox's mount (wider than the workspace), not to the workspace._\n")
	}
	return b.String()
}

// mdSandbox is the posture in one line.
func mdSandbox(d Document) string {
	p := d.Sandbox
	if p == nil {
		return ""
	}
	parts := []string{"mode " + mdText(p.Mode)}
	if p.Image != "" {
		parts = append(parts, "image "+mdText(p.Image))
	}
	net := "network " + mdText(string(p.Network))
	if len(p.EgressAllowlist) > 0 {
		net += " (" + mdText(strings.Join(p.EgressAllowlist, ", ")) + ")"
	}
	parts = append(parts, net)
	if p.Network == sandbox.NetworkEgress || p.EgressDenied > 0 {
		parts = append(parts, fmt.Sprintf("egress denied %d", p.EgressDenied))
	}
	if p.Tier != "" {
		parts = append(parts, "tier "+mdText(p.Tier))
	}
	parts = append(parts, "workspace "+mdText(string(p.Workspace))+" at "+mdText(p.Root))
	switch p.CheckView {
	case "":
	case sandbox.CheckViewWorkspace:
		parts = append(parts, "checks in the workspace itself")
	default:
		parts = append(parts, "checks on a throwaway "+mdText(p.CheckView)+" view")
	}
	if p.Mount != nil {
		parts = append(parts, "⚠️ mount widened to "+mdText(*p.Mount))
	}
	if p.User != "" {
		parts = append(parts, "user "+mdText(p.User))
	}
	if p.ReadOnlyRootfs {
		parts = append(parts, "read-only rootfs")
	}
	if len(p.CapDrop) > 0 {
		parts = append(parts, "cap_drop "+mdText(strings.Join(p.CapDrop, ",")))
	}
	if p.NoNewPrivileges {
		parts = append(parts, "no-new-privileges")
	}
	if p.PidsLimit > 0 {
		parts = append(parts, fmt.Sprintf("pids %d", p.PidsLimit))
	}
	if p.MemoryBytes > 0 {
		parts = append(parts, fmt.Sprintf("memory %d MiB", p.MemoryBytes>>20))
	}
	if len(p.ExtraMounts) > 0 {
		parts = append(parts, "also mounted: "+mdText(strings.Join(p.ExtraMounts, ", ")))
	}
	if len(p.SecretsInSandbox) > 0 {
		parts = append(parts, "⚠️ secrets in sandbox: "+mdText(strings.Join(p.SecretsInSandbox, ", ")))
	} else {
		parts = append(parts, "secrets in sandbox: none")
	}
	return "#### Sandbox\n\n" + strings.Join(parts, " · ") + "\n"
}

// MarkdownText escapes text goalrun does not control (agent prose, file
// names the agent chose) for inline GitHub markdown: markdown punctuation
// that could start emphasis, code, links, tables or strikethrough is
// backslash-escaped, HTML's <, > and & become entities, line breaks fold to
// spaces, and an @mention gets a zero-width space after its "@" so it
// notifies no one. Plain words stay readable: an underscore inside a word
// is left alone. It does not cap; the caller caps the result.
func MarkdownText(s string) string { return mdText(s) }

// mdText is MarkdownText.
func mdText(s string) string {
	return mdEscape(Fold(s))
}

// mdCell is mdText for a table cell.
func mdCell(s string) string { return mdText(s) }

// mdEscape escapes one line of text (see mdText).
func mdEscape(s string) string {
	var b strings.Builder
	b.Grow(len(s) + len(s)/8)
	rs := []rune(s)
	word := func(i int) bool {
		if i < 0 || i >= len(rs) {
			return false
		}
		r := rs[i]
		return ('0' <= r && r <= '9') || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || r >= 0x80
	}
	for i, r := range rs {
		switch r {
		case '\\', '`', '*', '[', ']', '|', '~':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '_':
			if !word(i-1) || !word(i+1) {
				b.WriteByte('\\')
			}
			b.WriteRune(r)
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '@':
			b.WriteRune('@')
			if !word(i - 1) {
				b.WriteString("\u200b")
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// mdQuote renders multi-line agent prose as an escaped blockquote.
func mdQuote(s string) string {
	s = strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimRight(line, " \t")
		if line == "" {
			b.WriteString(">\n")
			continue
		}
		b.WriteString("> " + mdEscape(strings.TrimLeft(Fold(line), " ")) + "\n")
	}
	return b.String()
}

// mdCode makes s safe inside a single-backtick code span: one line, no
// backticks (replaced by ʼ) and no pipes escaped away (a code span in a table
// cell still ends the cell at "|").
func mdCode(s string) string {
	s = Fold(s)
	s = strings.ReplaceAll(s, "`", "ʼ")
	return strings.ReplaceAll(s, "|", "¦")
}

// mdFence wraps raw output in a fenced code block whose fence is longer than
// any backtick run inside it.
func mdFence(s string) string {
	longest, run := 0, 0
	for _, r := range s {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", max(3, longest+1))
	s = strings.TrimRight(strings.ToValidUTF8(s, "\uFFFD"), "\n")
	return fence + "text\n" + s + "\n" + fence + "\n"
}

// checkRan reports whether the document shows that a check ran: an
// iteration with a check, iterations left out, or detail the encoder
// dropped (it cannot tell then, so it assumes one ran).
func checkRan(d Document) bool {
	if (d.IterationsOmitted != nil && *d.IterationsOmitted > 0) || len(d.Elided) > 0 {
		return true
	}
	for _, it := range d.Iterations {
		if it.Check != nil {
			return true
		}
	}
	return false
}
