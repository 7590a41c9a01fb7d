package report

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/goalrun/goalrun/sandbox"
)

// ElidedPrefix starts every note Encode adds to "elided"; notes without it
// come from the caps Finish applies (e.g. "ungrounded_claims: 8 of 11 kept
// (cap)").
const ElidedPrefix = "to fit 32768 bytes, "

// Elision steps, in the fixed order Encode applies them when a document does
// not fit DocumentBytes. Each step that changes something appends one note to
// "elided": ElidedPrefix, the step's name, then what it did, e.g.
// "to fit 32768 bytes, iterations.check.tail: 6 tails cut to 0 bytes shown". Steps run only
// while the document is still too large, least useful detail first; required
// keys are never removed, only their text shortened (with Cap's marker) or
// their lists emptied (with the count kept and a note).
var ElisionSteps = []string{
	"iterations.check.tail",     // 1. output tails cut to the marker
	"iterations.check.failures", // 1a. failing tests' lines cut to the marker
	"receipts.by_tool",          // 2. at most 8 keys, the rest in "(other)"
	"receipts.sample.brief",     // 3. briefs cut to the marker
	"sandbox.egress_denials",    // 4. the denial sample dropped (the count stays)
	"failure.fields",            // 5. cause-specific fields dropped (cause stays)
	"reasons",                   // 6. halt_reason, judge.reason, fallback_notice cut to 64 bytes
	"suggestions",               // 7. the first suggestion, cut to 160 bytes
	"ungrounded_claims.text",    // 8. claim excerpts and reasons cut to 32 bytes
	"sandbox.lists",             // 9. posture lists: 8 items of 64 bytes
	"changes.paths",             // 9a. the changed paths dropped (counted in paths_omitted)
	"changes.risky_paths.text",  // 10. risky paths cut to 64 bytes
	"summary.1024",              // 11. summary / message cut to 1024 bytes
	"names",                     // 12. identifiers and posture strings cut to 48 bytes, 1 model served
	"receipts.sample",           // 13. the sample emptied (sample_omitted = total)
	"setup",                     // 13a. setup steps: only those that failed kept
	"iterations",                // 14. only the last iteration kept (the rest counted)
	"receipts.by_tool.all",      // 15. every tool counted under "(other)"
	"summary.0",                 // 16. summary / message cut to the marker
	"ungrounded_claims",         // 17. the claims list emptied (count in the note)
	"changes.risky_paths",       // 18. the risky paths emptied (count in the note)
	"sandbox.lists.all",         // 19. posture lists emptied
	"required_only",             // 20. last resort: only the shape's required keys
}

// Encode returns d as compact JSON (no HTML escaping, no trailing newline):
// valid UTF-8, valid JSON, at most DocumentBytes bytes, for any d.
//
// It first applies the caps Finish applies (idempotently, without
// redaction: Finish already redacted), so a hand-built Document is bounded
// too. When the result is still larger than DocumentBytes — a worst case
// such as control characters that JSON-escapes to six bytes each — it
// shrinks optional detail in the fixed order of ElisionSteps, re-encoding
// after each step that changed something and recording it in "elided",
// until the document fits. The last step keeps only the shape's required
// keys, which always fit. d itself is not modified.
func Encode(d Document) []byte {
	if d.Elided != nil {
		d.Elided = slices.Clone(d.Elided)
	}
	normalize(&d, nil)
	d.Schema = Cap(Fold(d.Schema), NameCap)
	d.Status = Cap(Fold(d.Status), NameCap)
	d.Conclusion = Cap(Fold(d.Conclusion), NameCap)
	if b, ok := encodeFits(d); ok {
		return b
	}
	for _, step := range elisions {
		note := step.apply(&d)
		if note == "" {
			continue
		}
		d.Elided = append(d.Elided, ElidedPrefix+step.name+": "+note)
		if b, ok := encodeFits(d); ok {
			return b
		}
	}
	// Unreachable by construction (required_only leaves a few hundred
	// bytes of capped text), kept so the guarantee holds even if a later
	// field breaks that reasoning.
	return []byte(`{"schema":"goalrun/1","status":"error","conclusion":"failure","error":"EncodeFailed","message":"the run document could not be encoded within 32768 bytes","suggestions":[],"elided":["everything"]}`)
}

// encodeFits marshals d and reports whether it fits DocumentBytes.
func encodeFits(d Document) ([]byte, bool) {
	var b bytes.Buffer
	if err := writeJSON(&b, d); err != nil {
		return nil, false
	}
	return b.Bytes(), b.Len() <= DocumentBytes
}

// elision is one step of ElisionSteps: apply shrinks d and returns what it
// did ("" when it changed nothing).
type elision struct {
	name  string
	apply func(d *Document) string
}

// elisions implements ElisionSteps, in the same order.
var elisions = []elision{
	{"iterations.check.tail", func(d *Document) string {
		n := 0
		for i := range d.Iterations {
			if c := d.Iterations[i].Check; c != nil {
				if s, ok := shrink(c.Tail, 0, true); ok {
					c.Tail, n = s, n+1
				}
			}
		}
		return plural(n, "tail", "cut to 0 bytes shown")
	}},
	{"iterations.check.failures", func(d *Document) string {
		n := 0
		for i := range d.Iterations {
			if c := d.Iterations[i].Check; c != nil {
				if s, ok := shrink(c.Failures, 0, false); ok {
					c.Failures, n = s, n+1
				}
			}
		}
		return plural(n, "failures text", "cut to 0 bytes shown")
	}},
	{"receipts.by_tool", func(d *Document) string {
		return foldTools(d, 8)
	}},
	{"receipts.sample.brief", func(d *Document) string {
		if d.Receipts == nil {
			return ""
		}
		n := 0
		for i := range d.Receipts.Sample {
			if s, ok := shrink(d.Receipts.Sample[i].Brief, 0, false); ok {
				d.Receipts.Sample[i].Brief, n = s, n+1
			}
		}
		return plural(n, "brief", "cut to 0 bytes shown")
	}},
	{"sandbox.egress_denials", func(d *Document) string {
		if d.Sandbox == nil || len(d.Sandbox.EgressDenials)+len(d.Sandbox.SetupEgressDenials) == 0 {
			return ""
		}
		n := len(d.Sandbox.EgressDenials) + len(d.Sandbox.SetupEgressDenials)
		d.Sandbox.EgressDenials, d.Sandbox.SetupEgressDenials = nil, nil
		return plural(n, "denial", "dropped (egress_denied and setup_egress_denied keep the count)")
	}},
	{"failure.fields", func(d *Document) string {
		if d.Failure == nil || len(d.Failure.Detail) == 0 {
			return ""
		}
		n := len(d.Failure.Detail)
		d.Failure.Detail = nil
		return plural(n, "field", "dropped")
	}},
	{"reasons", func(d *Document) string {
		n := 0
		if d.Goal != nil {
			n += shrinkIn(&d.Goal.HaltReason, 64)
			n += shrinkIn(&d.Goal.TestedNothing, 64)
		}
		if d.Judge != nil {
			n += shrinkIn(&d.Judge.Reason, 64)
		}
		if d.Sandbox != nil && d.Sandbox.FallbackNotice != nil {
			n += shrinkIn(d.Sandbox.FallbackNotice, 64)
		}
		for i := range d.Iterations {
			if c := d.Iterations[i].Check; c != nil {
				n += shrinkIn(&c.Environment, 64)
				n += shrinkIn(&c.Failing, 64)
			}
		}
		return plural(n, "reason", "cut to 64 bytes")
	}},
	{"suggestions", func(d *Document) string {
		if len(d.Suggestions) == 0 {
			return ""
		}
		n := len(d.Suggestions)
		s := d.Suggestions[0]
		changed := shrinkIn(&s, BriefCap) > 0 || n > 1
		d.Suggestions = []string{s}
		if !changed {
			return ""
		}
		return fmt.Sprintf("1 of %d kept, cut to %d bytes", n, BriefCap)
	}},
	{"ungrounded_claims.text", func(d *Document) string {
		n := 0
		for i := range d.UngroundedClaims {
			c := &d.UngroundedClaims[i]
			n += shrinkIn(&c.Claim, 32) + shrinkIn(&c.Reason, 32) + shrinkIn(&c.Kind, 32)
		}
		return plural(n, "text", "cut to 32 bytes")
	}},
	{"sandbox.lists", func(d *Document) string {
		if d.Sandbox == nil {
			return ""
		}
		p := d.Sandbox
		n := shrinkList(&p.EgressAllowlist, 8, 64) + shrinkList(&p.CapDrop, 8, 64) + shrinkList(&p.SecretsInSandbox, 8, 64) + shrinkList(&p.ExtraMounts, 8, 64) + shrinkList(&p.HostMounts, 8, 64) +
			shrinkList(&p.SetupEgressAllowlist, 8, 64) + shrinkList(&p.EgressAllowNets, 8, 64) + shrinkList(&p.HostLeftOut, 8, 64)
		return plural(n, "item", "dropped or cut to 64 bytes (8 a list at most)")
	}},
	{"changes.paths", func(d *Document) string {
		if d.Changes == nil || len(d.Changes.Paths) == 0 {
			return ""
		}
		n := len(d.Changes.Paths)
		d.Changes.PathsOmitted += n
		d.Changes.Paths = nil
		return plural(n, "changed path", "dropped (counted in paths_omitted)")
	}},
	{"changes.risky_paths.text", func(d *Document) string {
		if d.Changes == nil {
			return ""
		}
		n := 0
		for i := range d.Changes.RiskyPaths {
			n += shrinkIn(&d.Changes.RiskyPaths[i], 64)
		}
		return plural(n, "path", "cut to 64 bytes")
	}},
	{"summary.1024", func(d *Document) string {
		return shrinkSummary(d, 1024)
	}},
	{"names", func(d *Document) string {
		n := 0
		const c = 48
		if d.Goal != nil {
			n += shrinkIn(&d.Goal.Check, c)
		}
		if d.Agent != nil {
			n += shrinkIn(&d.Agent.Name, c) + shrinkIn(&d.Agent.Version, c) + shrinkIn(&d.Agent.SessionID, c)
		}
		n += shrinkIn(&d.ModelUsed.Name, c) + shrinkIn(&d.Reason, c) + shrinkIn(&d.Error, c)
		if len(d.ModelsServed) > 1 {
			n += len(d.ModelsServed) - 1
			d.ModelsServed = d.ModelsServed[:1]
		}
		for i := range d.ModelsServed {
			n += shrinkIn(&d.ModelsServed[i].ModelID, c)
		}
		if d.Failure != nil {
			n += shrinkIn(&d.Failure.Cause, c)
		}
		if d.Judge != nil {
			n += shrinkIn(&d.Judge.By, c)
		}
		if d.Changes != nil {
			n += shrinkIn(&d.Changes.PatchSHA256, c)
		}
		for i := range d.Iterations {
			if a := d.Iterations[i].Agent; a != nil {
				n += shrinkIn(&a.Status, c) + shrinkIn(&a.Cause, c)
			}
		}
		if r := d.Receipts; r != nil {
			for i := range r.Sample {
				n += shrinkIn(&r.Sample[i].Tool, c) + shrinkIn(&r.Sample[i].Via, c)
			}
			if len(r.ByTool) > 0 {
				short := make(map[string]int, len(r.ByTool))
				for k, v := range r.ByTool {
					s := k
					n += shrinkIn(&s, c)
					short[s] += v
				}
				r.ByTool = short
			}
		}
		if p := d.Sandbox; p != nil {
			for _, s := range []*string{&p.Mode, &p.Image, &p.ImageDigest, &p.Tier, &p.Root, &p.User, &p.Seccomp, &p.Runtime} {
				n += shrinkIn(s, c)
			}
			nw, ws := string(p.Network), string(p.Workspace)
			n += shrinkIn(&nw, c) + shrinkIn(&ws, c)
			p.Network, p.Workspace = sandbox.Network(nw), sandbox.WorkspaceMode(ws)
			if p.Mount != nil {
				n += shrinkIn(p.Mount, c)
			}
		}
		for i := range d.Elided {
			n += shrinkIn(&d.Elided[i], 96)
		}
		return plural(n, "identifier", fmt.Sprintf("cut to %d bytes", c))
	}},
	{"receipts.sample", func(d *Document) string {
		r := d.Receipts
		if r == nil || len(r.Sample) == 0 {
			return ""
		}
		n := len(r.Sample)
		r.Sample = []Receipt{}
		r.SampleOmitted = r.Total
		return plural(n, "item", "dropped (sample_omitted counts them)")
	}},
	{"setup", func(d *Document) string {
		var kept []SetupStep
		for _, st := range d.Setup {
			if st.ExitCode != 0 || st.TimedOut {
				kept = append(kept, st)
			}
		}
		n := len(d.Setup) - len(kept)
		if n == 0 {
			return ""
		}
		d.Setup = kept
		return plural(n, "setup step", "that succeeded dropped")
	}},
	{"iterations", func(d *Document) string {
		if len(d.Iterations) <= 1 {
			return ""
		}
		n := len(d.Iterations) - 1
		d.Iterations = d.Iterations[n:]
		om := n
		if d.IterationsOmitted != nil {
			om += *d.IterationsOmitted
		}
		d.IterationsOmitted = &om
		return plural(n, "iteration", "dropped (iterations_omitted counts them)")
	}},
	{"receipts.by_tool.all", func(d *Document) string {
		return foldTools(d, 1)
	}},
	{"summary.0", func(d *Document) string {
		return shrinkSummary(d, 0)
	}},
	{"ungrounded_claims", func(d *Document) string {
		if len(d.UngroundedClaims) == 0 {
			return ""
		}
		n := len(d.UngroundedClaims)
		d.UngroundedClaims = []Claim{}
		return plural(n, "claim", "dropped: the list is NOT complete")
	}},
	{"changes.risky_paths", func(d *Document) string {
		if d.Changes == nil || len(d.Changes.RiskyPaths) == 0 {
			return ""
		}
		// Changes to git's executable configuration head the list and stay.
		keep := min(len(d.Changes.GitExecutable), len(d.Changes.RiskyPaths))
		n := len(d.Changes.RiskyPaths) - keep
		if n == 0 {
			return ""
		}
		d.Changes.RiskyPaths = slices.Clone(d.Changes.RiskyPaths[:keep])
		d.Changes.RiskyPathsOmitted += n
		return plural(n, "path", "dropped: the list is NOT complete")
	}},
	{"sandbox.lists.all", func(d *Document) string {
		p := d.Sandbox
		if p == nil {
			return ""
		}
		n := len(p.EgressAllowlist) + len(p.CapDrop) + len(p.SecretsInSandbox) + len(p.ExtraMounts) + len(p.HostMounts) + len(p.SetupEgressAllowlist) + len(p.EgressAllowNets) + len(p.HostLeftOut)
		if n == 0 {
			return ""
		}
		p.SetupEgressAllowlist, p.EgressAllowNets = nil, nil
		if p.EgressAllowlist != nil {
			p.EgressAllowlist = []string{}
		}
		if p.ExtraMounts != nil {
			p.ExtraMounts = []string{}
		}
		if p.HostMounts != nil {
			p.HostMounts = []string{}
		}
		if p.HostLeftOut != nil {
			p.HostLeftOut = []string{}
		}
		p.CapDrop, p.SecretsInSandbox = []string{}, []string{}
		return plural(n, "item", "dropped from egress_allowlist, cap_drop, secrets_in_sandbox, extra_mounts, host_mounts, host_left_out, setup_egress_allowlist, egress_allow_nets: the lists are NOT complete")
	}},
	{"required_only", func(d *Document) string {
		*d = requiredOnly(*d)
		return "every optional key dropped to fit 32768 bytes"
	}},
}

// requiredOnly keeps the keys the schema requires for d's shape, with
// their text cut to Cap's marker (numbers kept), and notes of earlier
// elisions cut short.
func requiredOnly(d Document) Document {
	out := Document{Schema: d.Schema, Status: d.Status, Conclusion: d.Conclusion}
	zero := func(s string) string { t, _ := shrink(s, 0, false); return t }
	if d.Summary != nil {
		s := zero(*d.Summary)
		out.Summary = &s
	}
	out.Error = Cap(d.Error, 48)
	if d.Message != "" || d.Status != StatusSuccess {
		out.Message = zero(d.Message)
	}
	if d.Suggestions != nil {
		out.Suggestions = []string{}
	}
	if d.Failure != nil {
		out.Failure = &Failure{Cause: Cap(d.Failure.Cause, 48)}
	}
	out.Reason = Cap(d.Reason, 48)
	if d.Goal != nil {
		g := Goal{Check: zero(d.Goal.Check), Passed: d.Goal.Passed, Grounded: d.Goal.Grounded, Iterations: d.Goal.Iterations,
			TestedNothing: Cap(d.Goal.TestedNothing, 48)}
		if d.Goal.Halt != nil {
			h := Cap(*d.Goal.Halt, 48)
			g.Halt = &h
		}
		out.Goal = &g
	}
	if d.Iterations != nil || d.IterationsOmitted != nil {
		om := len(d.Iterations)
		if d.IterationsOmitted != nil {
			om += *d.IterationsOmitted
		}
		out.Iterations = []Iteration{}
		out.IterationsOmitted = &om
	}
	out.Turns, out.TurnsCompleted, out.Delegations = d.Turns, d.TurnsCompleted, d.Delegations
	if r := d.Receipts; r != nil {
		sum := 0
		for _, v := range r.ByTool {
			sum += v
		}
		bt := map[string]int{}
		if sum > 0 {
			bt[OtherTool] = sum
		}
		out.Receipts = &Receipts{Total: r.Total, Failed: r.Failed, Unknown: r.Unknown, ByTool: bt, Sample: []Receipt{}, SampleOmitted: r.Total}
	}
	if d.UngroundedClaims != nil {
		out.UngroundedClaims = []Claim{}
	}
	if c := d.Changes; c != nil { // the counts, check_modified and git_executable survive
		out.Changes = &Changes{FilesChanged: c.FilesChanged, Insertions: c.Insertions, Deletions: c.Deletions,
			RiskyPaths: []string{}, RiskyPathsOmitted: len(c.RiskyPaths) + c.RiskyPathsOmitted,
			CheckModified: c.CheckModified, RelativeTo: Cap(c.RelativeTo, 48), PathsOmitted: len(c.Paths) + c.PathsOmitted}
		for _, g := range c.GitExecutable {
			out.Changes.GitExecutable = append(out.Changes.GitExecutable, Cap(g, 64))
		}
		out.Changes.RiskyPaths = append(out.Changes.RiskyPaths, out.Changes.GitExecutable...)
		out.Changes.RiskyPathsOmitted = max(out.Changes.RiskyPathsOmitted-len(out.Changes.GitExecutable), 0)
	}
	if d.ModelsServed != nil && d.Status == StatusSuccess {
		out.ModelsServed = []ModelServed{}
	}
	out.ElapsedSeconds = d.ElapsedSeconds
	if t := d.Timings; t != nil { // a few numbers: kept, one-time work summed
		kept := Timings{SandboxStart: t.SandboxStart, Checks: t.Checks, AgentTurns: t.AgentTurns, Other: t.Other}
		var prep float64
		for _, v := range t.Prepare {
			prep += v
		}
		if prep > 0 {
			kept.Prepare = map[string]float64{"all": seconds(prep)}
		}
		out.Timings = &kept
	}
	out.Elided = make([]string, 0, len(d.Elided)+1)
	for _, s := range d.Elided {
		out.Elided = append(out.Elided, Cap(s, 64))
	}
	return out
}

// shrink caps s at n (from the end for tails) and reports whether that made
// it shorter; a text already that short (or shorter with its marker) is
// left alone, so the marker never makes a text longer.
func shrink(s string, n int, tail bool) (string, bool) {
	var t string
	if tail {
		t = CapTail(s, 0, n)
	} else {
		t = Cap(s, n)
	}
	if len(t) < len(s) {
		return t, true
	}
	return s, false
}

// shrinkIn caps *s at n in place; it returns 1 when that changed it.
func shrinkIn(s *string, n int) int {
	if t, ok := shrink(*s, n, false); ok {
		*s = t
		return 1
	}
	return 0
}

// shrinkList keeps at most max items of *l, each cut to n bytes, and
// returns how many items were dropped or cut.
func shrinkList(l *[]string, max, n int) int {
	c := 0
	if len(*l) > max {
		c += len(*l) - max
		*l = (*l)[:max]
	}
	for i := range *l {
		c += shrinkIn(&(*l)[i], n)
	}
	return c
}

// shrinkSummary cuts summary and message to n bytes.
func shrinkSummary(d *Document, n int) string {
	c := shrinkIn(&d.Message, n)
	if d.Summary != nil {
		s := *d.Summary
		c += shrinkIn(&s, n)
		d.Summary = &s
	}
	if c == 0 {
		return ""
	}
	return fmt.Sprintf("cut to %d bytes shown", n)
}

// foldTools folds receipts.by_tool into at most keep keys.
func foldTools(d *Document, keep int) string {
	r := d.Receipts
	if r == nil || len(r.ByTool) <= keep {
		return ""
	}
	n := len(r.ByTool)
	counts := make(map[string]int, n)
	other := 0
	for k, v := range r.ByTool {
		if k == OtherTool {
			other += v
		} else {
			counts[k] = v
		}
	}
	r.ByTool = foldByTool(counts, other, keep)
	return fmt.Sprintf("%d keys folded into %d (the rest counted under %q)", n, len(r.ByTool), OtherTool)
}

// plural formats "6 tails cut to …" ("" for n == 0).
func plural(n int, what, did string) string {
	switch n {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("1 %s %s", what, did)
	}
	return fmt.Sprintf("%d %ss %s", n, what, did)
}
