package report

import "github.com/goalrun/goalrun/internal/textcap"

// Caps of the goalrun/1 document (README.md, "Limits";
// docs/goalrun-1.schema.json). Text caps are in bytes of UTF-8 and bound the
// text that is kept; a cut text also carries the truncation marker (see Cap),
// which is not counted in the cap and is at most MarkerMaxBytes long.
const (
	// SummaryCap bounds "summary" (result shape) and "message" (failure and
	// startup-error shapes): 4096 bytes.
	SummaryCap = 4096
	// BriefCap bounds a receipt "brief", a claim excerpt, "goal.check" and
	// the "message" of a non-text event: 160 bytes.
	BriefCap = 160
	// TextEventCap bounds the "message" of a "text" event: 640 bytes.
	TextEventCap = 640
	// TailCap bounds a check-output tail in "iterations[].check.tail": 512
	// bytes, the end of the output.
	TailCap = 512
	// SetupMax bounds "setup": 16 steps, the first ones.
	SetupMax = 16
	// FailuresCap bounds "iterations[].check.failures": 512 bytes, the
	// start of the failing tests' lines.
	FailuresCap = 512
	// SampleMax bounds "receipts.sample": 8 items, failures first.
	SampleMax = 8
	// ByToolMax bounds the keys of "receipts.by_tool": 32 keys, the
	// "(other)" key included.
	ByToolMax = 32
	// ClaimsMax bounds "ungrounded_claims": 8 items.
	ClaimsMax = 8
	// IterHead and IterTail bound "iterations": the first 1 and the last 5
	// are kept, the rest counted in "iterations_omitted".
	IterHead = 1
	IterTail = 5
	// ModelsServedMax bounds "models_served": 8 items.
	ModelsServedMax = 8
	// RiskyPathsMax bounds "changes.risky_paths": 16 paths.
	RiskyPathsMax = 16
	// ChangedPathsMax bounds "changes.paths": 16 paths.
	ChangedPathsMax = 16
	// DocumentBytes bounds the whole encoded document: 32768 bytes, a hard
	// guarantee of Encode for any input.
	DocumentBytes = 32768
)

// goalrun's own caps for fields the outside limits leave open. They are
// goalrun/1 limits too (the schema states them), chosen to keep the document
// small; they are not outside limits.
const (
	// ReasonCap bounds "goal.halt_reason", "judge.reason",
	// "sandbox.fallback_notice" and each suggestion: 640 bytes.
	ReasonCap = 640
	// NameCap bounds identifiers: a tool name (a "by_tool" key or a sample's
	// "tool"), "via", agent name/version/session id, model ids, a posture
	// string, an allowlist entry, a risky path, a secret's name, a
	// cause-specific field's name: 160 bytes.
	NameCap = 160
	// SuggestionsMax bounds "suggestions": 8 sentences.
	SuggestionsMax = 8
	// GitExecutableMax bounds "changes.git_executable": 8 entries (the
	// tracker collapses them per folder and counts the rest in the last).
	// They head "changes.risky_paths" and are never cut from it: 8 < 16.
	GitExecutableMax = 8
	// FailureFieldsMax bounds the cause-specific fields of "failure": 16.
	FailureFieldsMax = 16
	// TimingsPrepareMax bounds the kinds of one-time work in
	// "timings.prepare": 8.
	TimingsPrepareMax = 8
	// ListMax bounds the posture lists that no outside limit bounds
	// ("egress_allowlist", "cap_drop", "secrets_in_sandbox"): 64 items; the
	// encoder shrinks them further only under DocumentBytes pressure.
	ListMax = 64
)

// OtherTool is the "receipts.by_tool" key that counts every tool beyond the
// first ByToolMax-1.
const OtherTool = "(other)"

// MarkerMaxBytes is the longest truncation marker Cap can append (see
// internal/textcap). A capped text is at most its cap plus MarkerMaxBytes
// bytes.
const MarkerMaxBytes = textcap.MarkerMaxBytes

// Cap returns s cut to at most n bytes of UTF-8 with a truncation marker
// that states the numbers; see internal/textcap's Cap, which it is.
func Cap(s string, n int) string { return textcap.Cap(s, n) }

// CapTail is Cap keeping the end of s, for output tails; see
// internal/textcap's CapTail, which it is.
func CapTail(s string, total int64, n int) string { return textcap.CapTail(s, total, n) }

// Fold returns s on one line; see internal/textcap's Fold, which it is.
func Fold(s string) string { return textcap.Fold(s) }

// Printable returns s for a terminal or a CI log, line structure kept; see
// internal/textcap's Printable, which it is.
func Printable(s string) string { return textcap.Printable(s) }

// Brief returns the one-line gist of a tool call's identifying parameter:
// redacted with r (nil: no redaction), folded onto one line (Fold) and
// capped at BriefCap (docs/goalrun-1.md: "a brief … folded onto one line and
// capped").
func Brief(r *Redactor, s string) string {
	return Cap(Fold(r.Redact(s)), BriefCap)
}
