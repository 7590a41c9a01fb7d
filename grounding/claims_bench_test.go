package grounding

import (
	"strings"
	"testing"
)

// BenchmarkClaims measures claim extraction and judging over a long final
// message (the 85 corpus messages concatenated, ~25 KB).
func BenchmarkClaims(b *testing.B) {
	var t testing.T
	_, cases := loadClaimsCases(&t, "cases")
	var msg strings.Builder
	ev := NewEvidence()
	for _, c := range cases {
		msg.WriteString(c.Message)
		msg.WriteString("\n\n")
		for _, r := range c.Receipts {
			ev.AddReceipt(Receipt{Tool: r.Tool, OK: r.OK, Brief: r.Brief, Paths: r.Paths})
		}
	}
	text := msg.String()
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ev.Claims(text)
	}
}

// BenchmarkEvidenceAddReceipt measures the per-tool-call cost the loop pays.
func BenchmarkEvidenceAddReceipt(b *testing.B) {
	ev := NewEvidence()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		ev.AddReceipt(Receipt{Tool: "Bash", OK: i%3 != 0, Brief: "go test ./... && git commit -am fix"})
	}
}
