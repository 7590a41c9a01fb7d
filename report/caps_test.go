package report

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/goalrun/goalrun/internal/textcap"
)

// TestTenMegabyteSummary is the must-show: a 10 MB multi-byte
// summary comes out as at most 4096 bytes plus the marker with the right
// numbers, valid UTF-8, in a schema-valid document.
func TestTenMegabyteSummary(t *testing.T) {
	for _, unit := range []string{"日本語のテキスト", "é", "😀x", "a€"} {
		t.Run(unit, func(t *testing.T) {
			summary := huge(unit, 10<<20)
			run := passedRun()
			run.Summary = summary
			d := Finish(run, nil)
			s := *d.Summary
			content, total, marked := textcap.SplitMarker(s, false)
			if !marked {
				t.Fatalf("no marker at the end: ...%q", s[max(0, len(s)-120):])
			}
			if len(content) > SummaryCap || len(content) < SummaryCap-3 {
				t.Errorf("kept %d bytes, want 4093..4096", len(content))
			}
			if total != len(summary) {
				t.Errorf("marker total %d, want %d", total, len(summary))
			}
			want := fmt.Sprintf("…[truncated: %d of %d bytes shown; %d elided]…", len(content), len(summary), len(summary)-len(content))
			if !strings.HasSuffix(s, want) {
				t.Errorf("marker = %q, want %q", s[len(content):], want)
			}
			if !strings.HasPrefix(summary, content) {
				t.Error("kept text is not the summary's start")
			}
			if !utf8.ValidString(s) {
				t.Error("invalid UTF-8")
			}
			doc := Encode(d)
			validate(t, doc)
		})
	}
}

func TestBrief(t *testing.T) {
	r := NewRedactor("sk-ant-api03-SECRETSECRET")
	for _, tc := range []struct{ name, in, want string }{
		{"command", "go test ./...", "go test ./..."},
		{"multi-line script folded", "set -e\ngo vet ./...\ngo test ./...", "set -e go vet ./... go test ./..."},
		{"secret redacted", "curl -H 'x-api-key: sk-ant-api03-SECRETSECRET' https://api.anthropic.com", "curl -H 'x-api-key: ***' https://api.anthropic.com"},
		{"long capped", huge("x", 300), huge("x", 160) + "…[truncated: 160 of 300 bytes shown; 140 elided]…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Brief(r, tc.in); got != tc.want {
				t.Errorf("Brief = %q, want %q", got, tc.want)
			}
		})
	}
}
