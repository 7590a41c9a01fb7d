package report

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/goalrun/goalrun/internal/textcap"
	"github.com/goalrun/goalrun/sandbox"
)

// normalize redacts (with red; nil: none), repairs and caps every string of
// d and bounds its lists, naming what a list cap dropped in d.Elided. It
// never adds or removes keys otherwise, and it is idempotent: Finish runs it
// with the run's Redactor, Encode again without one, and the second pass
// changes nothing in a document the first produced.
func normalize(d *Document, red *Redactor) {
	// text caps free text; a text that arrives as a tail (it starts with
	// CapTail's marker, like the command agent's summary) keeps its end.
	text := func(s string, n int) string {
		s = red.Redact(s)
		if _, _, tail := textcap.SplitMarker(s, true); tail {
			return CapTail(s, 0, n)
		}
		return Cap(s, n)
	}
	line := func(s string, n int) string { return Cap(Fold(red.Redact(s)), n) }
	note := func(format string, args ...any) {
		d.Elided = append(d.Elided, fmt.Sprintf(format, args...))
	}

	if d.Elided != nil {
		d.Elided = slices.Clone(d.Elided)
	}
	if d.Summary != nil {
		s := text(*d.Summary, SummaryCap)
		d.Summary = &s
	}
	d.Error = line(d.Error, NameCap)
	d.Message = text(d.Message, SummaryCap)
	d.Reason = line(d.Reason, NameCap)
	if d.Suggestions != nil {
		out := make([]string, 0, min(len(d.Suggestions), SuggestionsMax))
		for _, s := range d.Suggestions {
			if s = line(s, ReasonCap); s != "" {
				out = append(out, s)
			}
		}
		if len(out) > SuggestionsMax {
			note("suggestions: %d of %d kept (cap)", SuggestionsMax, len(out))
			out = out[:SuggestionsMax]
		}
		d.Suggestions = out
	}
	if d.Failure != nil {
		f := Failure{Cause: line(d.Failure.Cause, NameCap)}
		if f.Cause == "" {
			f.Cause = "error"
		}
		f.Detail = boundFields(d.Failure.Detail, red, FailureFieldsMax, 0, func(n int) {
			note("failure: %d of %d cause-specific fields kept (cap)", FailureFieldsMax, n)
		})
		d.Failure = &f
	}
	if d.Goal != nil {
		g := *d.Goal
		g.Check = line(g.Check, BriefCap)
		g.Iterations = max(g.Iterations, 0)
		g.HaltReason = line(g.HaltReason, ReasonCap)
		g.TestedNothing = line(g.TestedNothing, ReasonCap)
		if g.Halt != nil {
			h := line(*g.Halt, NameCap)
			g.Halt = &h
		}
		d.Goal = &g
	}
	if d.Setup != nil {
		if n := len(d.Setup); n > SetupMax {
			note("setup: %d of %d steps kept (cap)", SetupMax, n)
			d.Setup = d.Setup[:SetupMax]
		}
		steps := make([]SetupStep, len(d.Setup))
		for i, st := range d.Setup {
			st.Command = line(st.Command, BriefCap)
			st.Dir = line(st.Dir, NameCap)
			st.NotStarted = line(st.NotStarted, ReasonCap)
			st.Seconds = seconds(st.Seconds)
			steps[i] = st
		}
		d.Setup = steps
	}
	if d.Iterations != nil {
		its := make([]Iteration, len(d.Iterations))
		for i, it := range d.Iterations {
			it.N = max(it.N, 0)
			if it.Agent != nil {
				a := *it.Agent
				a.Status = line(a.Status, NameCap)
				a.Cause = line(a.Cause, NameCap)
				a.Turns = max(a.Turns, 0)
				a.Seconds = seconds(a.Seconds)
				it.Agent = &a
			}
			if it.Check != nil {
				c := *it.Check
				c.Seconds = seconds(c.Seconds)
				raw := c.Tail
				c.Tail = red.Redact(raw)
				total := int64(len(c.Tail))
				if c.OutputBytes > int64(len(raw)) {
					total = c.OutputBytes - int64(len(raw)) + int64(len(c.Tail))
				}
				c.Tail = CapTail(c.Tail, total, TailCap)
				c.OutputBytes = max(c.OutputBytes, 0)
				c.Failures = Cap(red.Redact(c.Failures), FailuresCap)
				c.Failing = line(red.Redact(c.Failing), ReasonCap)
				c.Environment = line(c.Environment, ReasonCap)
				it.Check = &c
			}
			its[i] = it
		}
		d.Iterations = its
	}
	clampPtr(d.IterationsOmitted)
	clampPtr(d.Turns)
	clampPtr(d.TurnsCompleted)
	clampPtr(d.Delegations)
	if d.Agent != nil {
		a := AgentInfo{
			Name:      line(d.Agent.Name, NameCap),
			Version:   line(d.Agent.Version, NameCap),
			SessionID: line(d.Agent.SessionID, NameCap),
		}
		d.Agent = &a
	}
	d.ModelUsed.Name = line(d.ModelUsed.Name, NameCap)
	if d.ModelsServed != nil {
		ms := make([]ModelServed, 0, min(len(d.ModelsServed), ModelsServedMax))
		for _, m := range d.ModelsServed {
			m.ModelID = line(m.ModelID, NameCap)
			ms = append(ms, m)
		}
		if len(ms) > ModelsServedMax {
			note("models_served: %d of %d kept (cap)", ModelsServedMax, len(ms))
			ms = ms[:ModelsServedMax]
		}
		d.ModelsServed = ms
	}
	if d.Usage != nil {
		u := *d.Usage
		u.InputTokens = max(u.InputTokens, 0)
		u.OutputTokens = max(u.OutputTokens, 0)
		if math.IsNaN(u.CostUSD) || math.IsInf(u.CostUSD, 0) || u.CostUSD < 0 {
			u.CostUSD = 0
		}
		d.Usage = &u
	}
	if d.Receipts != nil {
		d.Receipts = normalizeReceipts(*d.Receipts, red)
	}
	if d.UngroundedClaims != nil {
		cs := make([]Claim, 0, min(len(d.UngroundedClaims), ClaimsMax))
		for _, c := range d.UngroundedClaims {
			cs = append(cs, Claim{
				Claim:  line(c.Claim, BriefCap),
				Kind:   line(c.Kind, NameCap),
				Reason: line(c.Reason, BriefCap),
			})
		}
		if len(cs) > ClaimsMax {
			note("ungrounded_claims: %d of %d kept (cap)", ClaimsMax, len(cs))
			cs = cs[:ClaimsMax]
		}
		d.UngroundedClaims = cs
	}
	if d.Judge != nil {
		j := Judge{Met: d.Judge.Met, Reason: line(d.Judge.Reason, ReasonCap), By: line(d.Judge.By, NameCap)}
		d.Judge = &j
	}
	if d.Changes != nil {
		c := *d.Changes
		c.FilesChanged = max(c.FilesChanged, 0)
		c.Insertions = max(c.Insertions, 0)
		c.Deletions = max(c.Deletions, 0)
		c.PatchSHA256 = line(c.PatchSHA256, NameCap)
		c.RelativeTo = line(c.RelativeTo, NameCap)
		c.CheckModifiedReason = line(c.CheckModifiedReason, ReasonCap)
		c.RiskyPathsOmitted = max(c.RiskyPathsOmitted, 0)
		c.GitExecutable = boundList(c.GitExecutable, red, GitExecutableMax, func(n int) {
			note("changes.git_executable: %d of %d kept (cap)", GitExecutableMax, n)
		})
		c.RiskyPaths = gitExecutableFirst(c.GitExecutable, c.RiskyPaths, red)
		total := len(c.RiskyPaths) + c.RiskyPathsOmitted
		c.RiskyPaths = boundList(c.RiskyPaths, red, RiskyPathsMax, func(n int) {
			note("changes.risky_paths: %d of %d kept (cap)", RiskyPathsMax, total)
		})
		c.RiskyPathsOmitted = total - len(c.RiskyPaths)
		if c.RiskyPaths == nil {
			c.RiskyPaths = []string{}
		}
		c.PathsOmitted = max(c.PathsOmitted, 0)
		paths := len(c.Paths) + c.PathsOmitted
		c.Paths = boundList(c.Paths, red, ChangedPathsMax, func(int) {
			note("changes.paths: %d of %d kept (cap)", ChangedPathsMax, paths)
		})
		c.PathsOmitted = paths - len(c.Paths)
		d.Changes = &c
	}
	if d.Sandbox != nil {
		p := normalizePosture(*d.Sandbox, red, note)
		d.Sandbox = &p
	}
	if d.ElapsedSeconds != nil {
		d.ElapsedSeconds = ptr(seconds(*d.ElapsedSeconds))
	}
	if d.Timings != nil {
		t := Timings{SandboxStart: seconds(d.Timings.SandboxStart), Checks: seconds(d.Timings.Checks),
			AgentTurns: seconds(d.Timings.AgentTurns), Other: seconds(d.Timings.Other)}
		if len(d.Timings.Prepare) > 0 {
			keys := make([]string, 0, len(d.Timings.Prepare))
			for k := range d.Timings.Prepare {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			t.Prepare = map[string]float64{}
			for _, k := range keys {
				if len(t.Prepare) == TimingsPrepareMax {
					note("timings.prepare: %d of %d kinds kept (cap)", TimingsPrepareMax, len(keys))
					break
				}
				t.Prepare[Cap(Fold(red.Redact(k)), NameCap)] += seconds(d.Timings.Prepare[k])
			}
		}
		d.Timings = &t
	}
	if d.Elided != nil {
		el := make([]string, 0, len(d.Elided))
		for _, s := range d.Elided {
			el = append(el, line(s, NameCap))
		}
		if len(el) > elidedMax {
			el = append(el[:elidedMax-1], fmt.Sprintf("elided: %d more notes dropped", len(el)-elidedMax+1))
		}
		d.Elided = el
	}
}

// elidedMax bounds the notes in "elided".
const elidedMax = 32

// normalizeReceipts caps a receipts block (see Rollup.Receipts for the
// shape it guarantees).
func normalizeReceipts(r Receipts, red *Redactor) *Receipts {
	out := Receipts{Total: max(r.Total, 0), Failed: max(r.Failed, 0), Unknown: max(r.Unknown, 0)}
	counts := make(map[string]int, min(len(r.ByTool), ByToolMax))
	other := 0
	// Iterate in key order so which names survive is deterministic.
	keys := make([]string, 0, len(r.ByTool))
	for k := range r.ByTool {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := max(r.ByTool[k], 0)
		name := toolName(red, k)
		if name == OtherTool {
			other += v
			continue
		}
		counts[name] += v
	}
	out.ByTool = foldByTool(counts, other, ByToolMax)
	out.Sample = make([]Receipt, 0, min(len(r.Sample), SampleMax))
	fails, unknowns := 0, 0
	for pass := 0; pass < 2; pass++ { // failures (and unknowns) first, then successes
		for _, s := range r.Sample {
			ok := s.OK && !s.Unknown
			if ok != (pass == 1) || len(out.Sample) == SampleMax {
				continue
			}
			switch {
			case s.Unknown:
				unknowns++
			case !ok:
				fails++
			}
			out.Sample = append(out.Sample, Receipt{
				Tool:    toolName(red, s.Tool),
				OK:      ok,
				Unknown: s.Unknown,
				Brief:   Brief(red, s.Brief),
				Via:     Cap(Fold(red.Redact(s.Via)), NameCap),
			})
		}
	}
	out.Total = max(out.Total, len(out.Sample))
	out.Unknown = min(max(out.Unknown, unknowns), out.Total)
	out.Failed = min(max(out.Failed, fails), out.Total-out.Unknown)
	out.SampleOmitted = out.Total - len(out.Sample)
	return &out
}

// normalizePosture caps the posture's strings and bounds its lists.
func normalizePosture(p sandbox.Posture, red *Redactor, note func(string, ...any)) sandbox.Posture {
	line := func(s string) string { return Cap(Fold(red.Redact(s)), NameCap) }
	p.Mode = line(p.Mode)
	p.Image = line(p.Image)
	p.ImageDigest = line(p.ImageDigest)
	p.Network = sandbox.Network(line(string(p.Network)))
	p.Tier = line(p.Tier)
	p.Root = line(p.Root)
	p.User = line(p.User)
	p.Workspace = sandbox.WorkspaceMode(line(string(p.Workspace)))
	p.Seccomp = line(p.Seccomp)
	p.Runtime = line(p.Runtime)
	p.ModelGateway = line(p.ModelGateway)
	p.EgressOutboundProxy = line(p.EgressOutboundProxy)
	p.SetupDepsVolume = line(p.SetupDepsVolume)
	p.EgressAllowed = max(p.EgressAllowed, 0)
	p.EgressDenied = max(p.EgressDenied, 0)
	p.SetupEgressAllowed = max(p.SetupEgressAllowed, 0)
	p.SetupEgressDenied = max(p.SetupEgressDenied, 0)
	p.SetupEgressAllowlist = boundList(p.SetupEgressAllowlist, red, ListMax, func(n int) {
		note("sandbox.setup_egress_allowlist: %d of %d kept (cap)", ListMax, n)
	})
	p.SetupEgressDenials = boundList(p.SetupEgressDenials, red, sandbox.EgressDenialsKept, func(n int) {
		note("sandbox.setup_egress_denials: %d of %d kept (cap)", sandbox.EgressDenialsKept, n)
	})
	p.EgressAllowNets = boundList(p.EgressAllowNets, red, ListMax, func(n int) {
		note("sandbox.egress_allow_nets: %d of %d kept (cap)", ListMax, n)
	})
	p.PidsLimit = max(p.PidsLimit, 0)
	p.MemoryBytes = max(p.MemoryBytes, 0)
	p.NanoCPUs = max(p.NanoCPUs, 0)
	if p.Mount != nil {
		m := line(*p.Mount)
		p.Mount = &m
	}
	if p.FallbackNotice != nil {
		f := Cap(Fold(red.Redact(*p.FallbackNotice)), ReasonCap)
		p.FallbackNotice = &f
	}
	p.EgressAllowlist = boundList(p.EgressAllowlist, red, ListMax, func(n int) {
		note("sandbox.egress_allowlist: %d of %d kept (cap)", ListMax, n)
	})
	p.EgressDenials = boundList(p.EgressDenials, red, sandbox.EgressDenialsKept, func(n int) {
		note("sandbox.egress_denials: %d of %d kept (cap)", sandbox.EgressDenialsKept, n)
	})
	p.CapDrop = boundList(p.CapDrop, red, ListMax, func(n int) {
		note("sandbox.cap_drop: %d of %d kept (cap)", ListMax, n)
	})
	if p.CapDrop == nil {
		p.CapDrop = []string{}
	}
	p.ExtraMounts = boundList(p.ExtraMounts, red, ListMax, func(n int) {
		note("sandbox.extra_mounts: %d of %d kept (cap)", ListMax, n)
	})
	p.HostMounts = boundList(p.HostMounts, red, ListMax, func(n int) {
		note("sandbox.host_mounts: %d of %d kept (cap)", ListMax, n)
	})
	p.HostLeftOut = boundList(p.HostLeftOut, red, ListMax, func(n int) {
		note("sandbox.host_left_out: %d of %d kept (cap)", ListMax, n)
	})
	p.SecretsInSandbox = boundList(p.SecretsInSandbox, red, ListMax, func(n int) {
		note("sandbox.secrets_in_sandbox: %d of %d kept (cap)", ListMax, n)
	})
	if p.SecretsInSandbox == nil {
		p.SecretsInSandbox = []string{}
	}
	return p
}

// boundList returns a fresh copy of l with every item folded and capped at
// NameCap and at most max items, calling dropped(len) when it cut the list.
// nil stays nil.
func boundList(l []string, red *Redactor, max int, dropped func(n int)) []string {
	if l == nil {
		return nil
	}
	out := make([]string, 0, min(len(l), max))
	for i, s := range l {
		if i == max {
			dropped(len(l))
			break
		}
		out = append(out, Cap(Fold(red.Redact(s)), NameCap))
	}
	return out
}

// boundFields returns the cause-specific fields of a failure made safe for
// JSON: keys folded and capped, at most max keys (in key order; dropped is
// called with the count otherwise), values redacted with strings capped at
// ReasonCap, nested lists and objects bounded the same way to a depth of 3,
// unencodable values dropped.
func boundFields(m map[string]any, red *Redactor, max, depth int, dropped func(n int)) map[string]any {
	if m == nil {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		if k != "cause" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if len(keys) > max {
		if dropped != nil {
			dropped(len(keys))
		}
		keys = keys[:max]
	}
	out := make(map[string]any, len(keys))
	for _, k := range keys {
		v := boundValue(red.RedactValue(m[k]), red, depth+1)
		if v == nil && m[k] != nil {
			continue
		}
		name := Cap(Fold(k), NameCap)
		if name == "" || name == "cause" {
			continue
		}
		out[name] = v
	}
	return out
}

// boundValue bounds an already redacted value (see boundFields).
func boundValue(v any, red *Redactor, depth int) any {
	if depth > 3 {
		return nil
	}
	switch x := v.(type) {
	case string:
		return Cap(x, ReasonCap)
	case []string:
		out := make([]any, 0, min(len(x), FailureFieldsMax))
		for _, s := range x[:min(len(x), FailureFieldsMax)] {
			out = append(out, Cap(s, ReasonCap))
		}
		return out
	case []any:
		out := make([]any, 0, min(len(x), FailureFieldsMax))
		for _, e := range x[:min(len(x), FailureFieldsMax)] {
			out = append(out, boundValue(e, red, depth+1))
		}
		return out
	case map[string]any:
		return boundFields(x, nil, FailureFieldsMax, depth, nil)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil
		}
	}
	return v
}

func clampPtr(p *int) {
	if p != nil && *p < 0 {
		*p = 0
	}
}

// gitExecutableFirst returns the risky paths with the changes to git's
// executable configuration (already bounded and redacted) first, whether
// or not the producer put them there, so the cap never cuts them.
func gitExecutableFirst(git, risky []string, red *Redactor) []string {
	if len(git) == 0 {
		return risky
	}
	in := make(map[string]bool, len(git))
	for _, g := range git {
		in[g] = true
	}
	out := append(make([]string, 0, len(git)+len(risky)), git...)
	for _, p := range risky {
		if !in[Cap(Fold(red.Redact(p)), NameCap)] {
			out = append(out, p)
		}
	}
	return out
}
