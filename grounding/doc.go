// Package grounding holds the rules by which goalrun tells a verified
// result from an agent's say-so: what a run did that can back or
// contradict the agent's own account, and what in that account nothing
// backs. A run's verdict is grounded only when goalrun's own check passes;
// these rules show a reviewer where the agent's words and the evidence
// part ways (docs/grounding.md).
//
// # Claims
//
// Evidence collects, in memory bounded whatever the number of tool calls,
// what backs the operational claims of the agent's final message: the
// receipts of its tool calls (test commands, commits, pushes, pull
// requests, installs, deploys, files written or removed), the latest check
// and the workspace diff. Evidence.Claims then reads the final message
// with a small deterministic rule system (no model call; claims_text.go
// says how, step by step) and returns the claims nothing backs, each with
// its sentence and the reason: the document's "ungrounded_claims"
// entries.
//
// # Check files and risky paths
//
// A pass proves little when the agent changed what the check runs. Check
// (NewCheck, checkfiles*.go) knows the check command's own files — the
// files its shell words name, read with a real shell parser, and its test
// runners' configuration — and Check.Classify says of each changed path
// whether it changes what the check runs (its files, test files, the Go
// and Python rules: code run before the tests, shadowed modules, …) and
// why it is risky (risk.go: workflows, git's configuration, links out of
// the tree, agent configuration, build scripts, …). The workspace tracker
// (goal/workspace) applies them to every changed path.
//
// # Layering
//
// grounding works on plain values and is a leaf: it imports nothing of
// goalrun but internal/markdown, internal/redact and internal/textcap, so
// the workspace tracker that applies its rules builds without the sandbox
// or the Docker client. It owns what it takes and gives (Receipt in, Claim
// out, capped at ClaimTextCap and ClaimsMax, the document's caps on
// "ungrounded_claims"): package goal feeds it during a run and turns its
// claims into the document's, goal/workspace applies its check-file and
// risk rules, and cmd/goalrun builds it. report never imports it
// (docs/architecture.md, docs/deps_test.go).
package grounding
