package goal

import (
	"github.com/goalrun/goalrun/goal/agent"
	"github.com/goalrun/goalrun/report"
)

// usageBook adds up token use and cost over a run whose agents report it in
// two ways: per invocation (Claude Code's result event) or as a session's
// running total (Codex thread usage, agent.Usage.Cumulative). It keeps the
// finished invocations' sum, the latest running total per session, and the
// running turn's live figure, so a mid-turn budget check sees the truth
// without counting anything twice.
type usageBook struct {
	done     report.Usage            // finished per-invocation usage, judge included
	sessions map[string]report.Usage // latest cumulative figure per session
	turn     report.Usage            // the running turn's latest per-invocation figure
	session  string                  // the running turn's session, as far as known
}

func newUsageBook() usageBook { return usageBook{sessions: map[string]report.Usage{}} }

func toReport(u agent.Usage) report.Usage {
	return report.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CostUSD: u.CostUSD, CostUnknown: u.NoCost}
}

func add(a, b report.Usage) report.Usage {
	return report.Usage{InputTokens: a.InputTokens + b.InputTokens, OutputTokens: a.OutputTokens + b.OutputTokens, CostUSD: a.CostUSD + b.CostUSD,
		CostUnknown: a.CostUnknown || b.CostUnknown}
}

// setSession names the running turn's session; a running total recorded
// before the name was known moves to it.
func (b *usageBook) setSession(id string) {
	if u, ok := b.sessions[""]; ok && id != "" {
		delete(b.sessions, "")
		b.sessions[id] = u
	}
	b.session = id
}

// startTurn forgets the previous turn's live figure.
func (b *usageBook) startTurn() { b.turn = report.Usage{} }

// live records a usage event seen mid-turn.
func (b *usageBook) live(u agent.Usage) {
	if u.Cumulative {
		b.sessions[b.session] = toReport(u)
		return
	}
	b.turn = toReport(u) // the invocation's figure so far, not an increment
}

// endTurn records the invocation's final usage (authoritative).
func (b *usageBook) endTurn(session string, u agent.Usage) {
	if session == "" {
		session = b.session
	}
	switch {
	case u.Cumulative:
		b.sessions[session] = toReport(u)
	case u != (agent.Usage{}):
		b.done = add(b.done, toReport(u))
	default: // the parser's result said nothing: keep what the events said
		b.done = add(b.done, b.turn)
	}
	b.turn = report.Usage{}
}

// addJudge counts what a judge call cost.
func (b *usageBook) addJudge(u agent.Usage) { b.done = add(b.done, toReport(u)) }

// total is the run's usage so far.
func (b *usageBook) total() report.Usage {
	t := add(b.done, b.turn)
	for _, s := range b.sessions {
		t = add(t, s)
	}
	return t
}
