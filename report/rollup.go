package report

import (
	"sort"
	"strings"
	"sync"
)

// UnnamedTool is the "receipts.by_tool" key and sample "tool" of a receipt
// whose tool has no name.
const UnnamedTool = "(unnamed)"

// Rollup rolls receipts (tool calls) up into the document's "receipts"
// block, in memory that does not grow with the number of receipts: three
// counters (total, failed, unknown), at most ByToolMax named counts, and at
// most SampleMax receipts that are not ok (failed or unknown) plus
// SampleMax successes (the first distinct ones seen: a call identical in
// tool, brief and via to one already kept is not kept again) from which the
// failure-first sample is drawn. Every string it keeps is redacted (see SetRedactor),
// folded and capped when it is added, and copied, so it never holds on to a
// caller's large buffer.
//
// A Rollup is safe for concurrent use. The zero value is not ready; use
// NewRollup.
type Rollup struct {
	mu      sync.Mutex
	red     *Redactor
	total   int
	failed  int
	unknown int
	byTool  map[string]int // at most ByToolMax keys, OtherTool not among them
	other   int
	fails   []Receipt // the first SampleMax failures
	oks     []Receipt // the first SampleMax successes
}

// NewRollup returns an empty roll-up that does not redact; call SetRedactor
// before adding receipts that may carry secrets.
func NewRollup() *Rollup {
	return &Rollup{byTool: make(map[string]int, ByToolMax)}
}

// SetRedactor makes Add redact tool names, briefs and "via" with r (before
// capping them). It returns u for chaining.
func (u *Rollup) SetRedactor(r *Redactor) *Rollup {
	u.mu.Lock()
	u.red = r
	u.mu.Unlock()
	return u
}

// Add counts one receipt. The brief is redacted, folded onto one line and
// capped at BriefCap (Brief); the tool name and via at NameCap.
func (u *Rollup) Add(r Receipt) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.total++
	switch {
	case r.Unknown:
		r.OK = false
		u.unknown++
	case !r.OK:
		u.failed++
	}
	tool := toolName(u.red, r.Tool)
	if _, ok := u.byTool[tool]; ok || len(u.byTool) < ByToolMax {
		if !ok {
			tool = strings.Clone(tool)
		}
		u.byTool[tool]++
	} else {
		u.other++
	}
	keep := &u.oks
	if !r.OK {
		keep = &u.fails
	}
	if len(*keep) < SampleMax {
		rc := Receipt{
			Tool:    tool,
			OK:      r.OK,
			Unknown: r.Unknown,
			Brief:   Brief(u.red, r.Brief),
			Via:     Cap(Fold(u.red.Redact(r.Via)), NameCap),
		}
		// The sample shows distinct calls: a repeat of one already kept
		// says nothing by_tool does not.
		for _, k := range *keep {
			if k == rc {
				return
			}
		}
		rc.Tool, rc.Brief, rc.Via = strings.Clone(rc.Tool), strings.Clone(rc.Brief), strings.Clone(rc.Via)
		*keep = append(*keep, rc)
	}
}

// Total returns the number of receipts added.
func (u *Rollup) Total() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.total
}

// Receipts returns the "receipts" block: total, failed, by_tool (at most
// ByToolMax keys; when more tools were seen, the ByToolMax-1 most used keep
// their names, ties broken by name, and the rest are summed under
// OtherTool), the sample (failures first, then successes, at most SampleMax,
// each group in the order seen) and sample_omitted = total − len(sample).
// The result is a fresh value the caller may keep.
func (u *Rollup) Receipts() *Receipts {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := &Receipts{Total: u.total, Failed: u.failed, Unknown: u.unknown}
	out.ByTool = foldByTool(u.byTool, u.other, ByToolMax)
	out.Sample = make([]Receipt, 0, SampleMax)
	out.Sample = append(out.Sample, u.fails...)
	for _, r := range u.oks {
		if len(out.Sample) == SampleMax {
			break
		}
		out.Sample = append(out.Sample, r)
	}
	out.SampleOmitted = u.total - len(out.Sample)
	return out
}

// foldByTool returns a copy of counts with at most max keys: when there are
// more (other > 0 counts as one more key), the max-1 largest counts keep
// their names (ties broken by name) and the rest are added to OtherTool.
func foldByTool(counts map[string]int, other, max int) map[string]int {
	if max < 1 {
		max = 1
	}
	keys := len(counts)
	if other > 0 {
		keys++
	}
	out := make(map[string]int, min(keys, max))
	if keys <= max {
		for k, v := range counts {
			out[k] += v
		}
		if other > 0 {
			out[OtherTool] += other
		}
		return out
	}
	type kv struct {
		k string
		v int
	}
	all := make([]kv, 0, len(counts))
	for k, v := range counts {
		if k == OtherTool {
			other += v
			continue
		}
		all = append(all, kv{k, v})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].v != all[j].v {
			return all[i].v > all[j].v
		}
		return all[i].k < all[j].k
	})
	for i, e := range all {
		if i < max-1 {
			out[e.k] = e.v
		} else {
			other += e.v
		}
	}
	out[OtherTool] = other
	return out
}

// toolName is the redacted, folded, capped name of a tool.
func toolName(r *Redactor, name string) string {
	t := Cap(Fold(r.Redact(name)), NameCap)
	if t == "" {
		return UnnamedTool
	}
	return t
}

// IterationLog keeps the iterations the document reports — the first
// IterHead and the last IterTail — and counts the rest, in memory that does
// not grow with the number of iterations. The zero value is ready to use; it
// is not safe for concurrent use (the loop owns it).
type IterationLog struct {
	head []Iteration
	ring [IterTail]Iteration
	next int // the ring slot the next tail iteration goes to
	n    int // iterations added in all
}

// Add records one iteration (as built by the loop; Finish redacts and caps
// its text).
func (l *IterationLog) Add(it Iteration) {
	l.n++
	if len(l.head) < IterHead {
		l.head = append(l.head, it)
		return
	}
	l.ring[l.next] = it
	l.next = (l.next + 1) % IterTail
}

// Len returns the number of iterations added.
func (l *IterationLog) Len() int { return l.n }

// Omitted returns how many iterations Iterations leaves out.
func (l *IterationLog) Omitted() int {
	if kept := IterHead + IterTail; l.n > kept {
		return l.n - kept
	}
	return 0
}

// Iterations returns the kept iterations in order: the first IterHead, then
// the last IterTail. The slice is fresh.
func (l *IterationLog) Iterations() []Iteration {
	out := make([]Iteration, 0, len(l.head)+IterTail)
	out = append(out, l.head...)
	inTail := min(l.n-len(l.head), IterTail)
	start := (l.next - inTail + IterTail) % IterTail
	for i := 0; i < inTail; i++ {
		out = append(out, l.ring[(start+i)%IterTail])
	}
	return out
}
