package agent

import (
	"bytes"
	"testing"

	"github.com/goalrun/goalrun/goal/agent/internal/streamgen"
)

// TestStreamgenTranscriptParses checks the benchmark's synthetic transcript
// is what it claims: every line parses, every call gets its result, the
// turn ends as a success, and the output is deterministic.
func TestStreamgenTranscriptParses(t *testing.T) {
	var a, b bytes.Buffer
	n, err := streamgen.Claude(&a, 4<<20, 7)
	if err != nil || n != int64(a.Len()) || n < 4<<20 {
		t.Fatalf("wrote %d (buffer %d), %v", n, a.Len(), err)
	}
	streamgen.Claude(&b, 4<<20, 7)
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("streamgen is not deterministic")
	}
	p := newClaudeParser()
	calls, results, failed := 0, 0, 0
	w := NewLineWriter(p, func(ev Event) {
		switch ev.Kind {
		case KindToolCall:
			calls++
		case KindToolResult:
			results++
			if !ev.Tool.OK {
				failed++
			}
		}
	})
	w.Write(a.Bytes())
	w.Close()
	res := p.End(0, func(Event) {})
	if res.Status != StatusSuccess || res.SkippedLines != 0 || res.OversizeLines != 0 || res.SessionID == "" {
		t.Fatalf("result %+v", res)
	}
	if calls == 0 || calls != results || failed == 0 || failed == results || res.Delegations != 0 {
		t.Fatalf("%d calls, %d results, %d failed", calls, results, failed)
	}
}

// BenchmarkClaudeParser measures the Claude stream-json parser behind a
// LineWriter fed 256 KiB writes, in MB/s of transcript. docs/bench-agents.sh
// runs the same code on a 1 GiB file against jq.
func BenchmarkClaudeParser(b *testing.B) {
	var buf bytes.Buffer
	if _, err := streamgen.Claude(&buf, 64<<20, 1); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := newClaudeParser()
		w := NewLineWriter(p, func(Event) {})
		for off := 0; off < len(data); off += 256 << 10 {
			w.Write(data[off:min(off+256<<10, len(data))])
		}
		w.Close()
		if res := p.End(0, func(Event) {}); res.Status != StatusSuccess {
			b.Fatalf("%+v", res)
		}
	}
}
