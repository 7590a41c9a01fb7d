package grounding

import (
	"strings"
	"testing"
)

// TestClaimsBackedOnlyByUnknownReceipts: a claim that only receipts of
// unknown outcome back is listed, and its reason says the tool's outcome
// could not be checked; a claim the workspace diff backs is not listed.
func TestClaimsBackedOnlyByUnknownReceipts(t *testing.T) {
	cases := []struct {
		name, text, kind, reason string
		receipts                 []Receipt
		changed                  map[string]string
	}{
		{name: "commit", text: "I committed the fix.", kind: ClaimCommitted,
			receipts: []Receipt{{Tool: "run_shell_command", Unknown: true, Brief: `git commit -am "fix"`}},
			reason:   "could not be checked"},
		{name: "tests pass without a check", text: "All tests pass now.", kind: ClaimTestsPass,
			receipts: []Receipt{{Tool: "run_shell_command", Unknown: true, Brief: "go test ./..."}},
			reason:   "could not be checked"},
		{name: "file written by an unknown shell command", text: "I created `b.txt`.", kind: ClaimCreatedFile,
			receipts: []Receipt{{Tool: "run_shell_command", Unknown: true, Brief: "echo ok > b.txt"}},
			reason:   "the call that wrote it has an outcome that could not be checked"},
		{name: "edit with no file named", text: "I fixed the bug.", kind: ClaimEditedFile,
			receipts: []Receipt{{Tool: "run_shell_command", Unknown: true, Brief: "sed -i s/a/b/ x.go"}},
			reason:   "could not be checked"},
		{name: "the diff backs it", text: "I created `b.txt`.",
			receipts: []Receipt{{Tool: "run_shell_command", Unknown: true, Brief: "echo ok > b.txt"}},
			changed:  map[string]string{"b.txt": ChangeAdded}},
		{name: "a known success backs it", text: "I committed the fix.",
			receipts: []Receipt{{Tool: "run_shell_command", Unknown: true, Brief: "git commit -m a"}, {Tool: "Bash", OK: true, Brief: "git commit -m b"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev := NewEvidence()
			for _, r := range c.receipts {
				ev.AddReceipt(r)
			}
			if c.changed != nil {
				ev.SetChanged(c.changed)
			}
			claims := ev.Claims(c.text)
			if c.kind == "" {
				if len(claims) != 0 {
					t.Fatalf("listed %+v", claims)
				}
				return
			}
			if len(claims) != 1 || claims[0].Kind != c.kind || !strings.Contains(claims[0].Reason, c.reason) {
				t.Fatalf("claims %+v, want one %s whose reason says %q", claims, c.kind, c.reason)
			}
		})
	}
}
