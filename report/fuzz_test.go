package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/goalrun/goalrun/sandbox"
)

// FuzzEncode: arbitrary strings and counts in every free-text field and
// list, through Finish and Encode, always give valid UTF-8, valid JSON, at
// most DocumentBytes bytes, a schema-valid document, one terminal event, a
// markdown rendering within MarkdownBytes, and never the secret.
//
//	go test ./report -run '^$' -fuzz FuzzEncode -fuzztime 5m
func FuzzEncode(f *testing.F) {
	// The 10 MB seed runs in every go test; while fuzzing (-fuzz), where
	// each input is also run coverage-instrumented and minimized, it is
	// 256 KiB so the engine keeps its pace (a 10 MB input stalls it for
	// seconds per mutation).
	bigSize := 10 << 20
	if fl := flag.Lookup("test.fuzz"); fl != nil && fl.Value.String() != "" {
		bigSize = 256 << 10
	}
	tenMB := huge("é€😀", bigSize)
	for _, seed := range []struct {
		text, other, secret string
		items, tools        int
		flags               uint8
	}{
		{"Fixed the off-by-one in Sum.", "go test ./...", "abcdefgh", 3, 3, 0},
		{ctl(40_000), "\x00\x1b[31m\x7f", "K3yK3yK3y", 40, 3000, 1},
		{"\xff\xfe\xfd invalid", "\xc3\x28", "zzzzzzzzzz", 7, 33, 2},
		{tenMB, tenMB[:len(tenMB)/10], "Q9Q9Q9Q9Q9", 1, 1, 3},
		{strings.Repeat("s", SummaryCap-6) + "SECRETVALUE" + "tail", "x", "VALUE", 2, 2, 4},
		{"\u2028\u2029<script>alert(1)</script>&amp;|`@user", "| a | b |\n```", "passw0rd1", 9, 9, 5},
		{"", "", "", 0, 0, 6},
		{strings.Repeat(`"\`, 20_000), strings.Repeat("\t", 5000), "q1w2e3r4t5", 100, 500, 7},
		{"…[truncated: 5 of 9 bytes shown; 4 elided]…", "…[truncated: 0 of 1 bytes shown; 1 elided]…x", "truncated", 1, 1, 8},
	} {
		f.Add(seed.text, seed.other, seed.secret, seed.items, seed.tools, seed.flags)
	}
	f.Fuzz(func(t *testing.T, text, other, secretIn string, items, tools int, flags uint8) {
		// An alphanumeric secret of ≥ 8 bytes: it cannot appear by
		// accident in keys, markers or constants, so any hit is a leak.
		sec := secretMark + alnum(secretIn, 24)
		items = bounded(items, 60)
		tools = bounded(tools, 3000)
		if len(text)+len(other) > 64<<10 {
			// Long texts are copied into every field: fewer items keep one
			// input well under the engine's 10-second limit even
			// coverage-instrumented on a loaded machine.
			items, tools = min(items, 8), min(tools, 40)
		}
		mix := func(i int) string {
			switch i % 4 {
			case 0:
				return text
			case 1:
				return other
			case 2:
				return text + sec + other // a secret in the middle
			}
			return other + sec // a secret at the end, straddling cuts
		}
		// Identifiers get at most 8 KiB of the input, keeping a 10 MB
		// input's run short. The input texts are cut (anywhere, so invalid
		// UTF-8 is likely), never the secret: a piece of a secret in the
		// middle of a text would be this harness's making, not a leak (the
		// Redactor replaces whole secrets anywhere and pieces only at a
		// text's edges, where goalrun's own cuts leave them).
		cut := func(s string) string {
			if len(s) > 4<<10 {
				return s[:2<<10] + s[len(s)-2<<10:]
			}
			return s
		}
		small := func(i int) string {
			s := mix(i)
			if len(s) <= 8<<10 {
				return s
			}
			t, o := cut(text), cut(other)
			switch i % 4 {
			case 0:
				return t
			case 1:
				return o
			case 2:
				return t + sec + o
			}
			return o + sec
		}
		run := Run{
			Check:           mix(0),
			Passed:          flags&1 != 0,
			Grounded:        flags&2 != 0,
			IterationsTaken: items,
			HaltReason:      mix(2),
			Summary:         mix(3),
			Message:         mix(2),
			Cause:           small(1),
			CauseFields:     map[string]any{small(0): small(2), "n": items, "list": []any{small(3), items}},
			Turns:           items * 3,
			TurnsCompleted:  items,
			Delegations:     tools % 7,
			Agent:           &AgentInfo{Name: small(0), Version: small(1), SessionID: small(2)},
			ModelUsed:       small(3),
			Usage:           &Usage{InputTokens: int64(tools) * 1000, OutputTokens: int64(items), CostUSD: float64(tools) / 7},
			AllowTestEdits:  flags&64 != 0,
			Elapsed:         time.Duration(tools) * time.Second,
		}
		halts := []string{"", HaltMaxIterations, HaltTimeout, HaltBudget, HaltNoProgress, HaltAgentError}
		if !run.Passed {
			run.Halt = halts[int(flags>>2)%len(halts)]
		}
		switch (flags >> 4) % 4 {
		case 1:
			run.Error = []string{ErrAgentFailed, ErrSandboxFailed, ErrCheckNotRunnable, ErrGitHubUnavailable}[items%4]
		case 2:
			run.Error, run.AuthReason = ErrAuthRequired, []string{"", AuthInvalidKey, AuthExpired, AuthMissingKey}[items%4]
		case 3:
			run.Cancelled = true
		}
		if flags&128 != 0 {
			run.Suggestions = []string{}
			for i := 0; i < items; i++ {
				run.Suggestions = append(run.Suggestions, mix(i))
			}
		}
		for i := 0; i < items; i++ {
			it := Iteration{N: i, Check: &CheckResult{ExitCode: i - 1, Passed: i%5 == 4, Seconds: float64(i) / 3, Tail: mix(i + 3), OutputBytes: int64(tools * i)}}
			if i > 0 {
				it.Agent = &AgentStep{Status: small(i), Cause: small(i + 1), Turns: i, Seconds: float64(tools) / float64(i)}
			}
			run.Iterations = append(run.Iterations, it)
			run.UngroundedClaims = append(run.UngroundedClaims, Claim{Claim: mix(i), Kind: mix(i + 1), Reason: mix(i + 2)})
			run.ModelsServed = append(run.ModelsServed, ModelServed{ModelID: small(i), LocalLastResort: i%2 == 0})
		}
		red := NewRedactor(sec)
		u := NewRollup().SetRedactor(red)
		for i := 0; i < tools; i++ {
			u.Add(Receipt{Tool: small(i) + strconv.Itoa(i%50), OK: i%3 != 0, Brief: mix(i + 1), Via: small(i + 2)})
		}
		run.Receipts = u.Receipts()
		if flags&8 != 0 { // a hand-built roll-up with too many keys
			bt := map[string]int{}
			for i := 0; i < tools; i++ {
				bt[small(i)+strconv.Itoa(i)] = i
			}
			run.Receipts.ByTool = bt
		}
		if flags&32 != 0 {
			run.Changes = &Changes{FilesChanged: items, Insertions: tools, Deletions: -items, CheckModified: flags&1 != 0, PatchSHA256: small(1)}
			for i := 0; i < items; i++ {
				run.Changes.RiskyPaths = append(run.Changes.RiskyPaths, small(i))
			}
		}
		if flags&4 != 0 {
			run.Judge = &Judge{Met: flags&1 != 0, Reason: mix(2), By: small(1)}
		}
		if items%3 != 0 {
			p := dockerPosture()
			if items%3 == 2 {
				p = localPosture()
				n := mix(3)
				p.FallbackNotice = &n
			}
			p.Image, p.ImageDigest, p.Root, p.User, p.Seccomp, p.Runtime = small(0), small(1), small(2), small(3), small(0), small(1)
			m := small(2)
			p.Mount = &m
			for i := 0; i < items; i++ {
				p.EgressAllowlist = append(p.EgressAllowlist, small(i))
				p.EgressDenials = append(p.EgressDenials, small(i+1))
				p.SecretsInSandbox = append(p.SecretsInSandbox, small(i+2))
				p.CapDrop = append(p.CapDrop, small(i+3))
				p.ExtraMounts = append(p.ExtraMounts, small(i))
				p.HostMounts = append(p.HostMounts, small(i+1))
				p.HostLeftOut = append(p.HostLeftOut, small(i+2))
			}
			p.EgressDenied, p.PidsLimit = -items, int64(-tools)
			run.Sandbox = p
		}

		var events bytes.Buffer
		rec := &recorder{}
		e := NewEmitter(Tee(NewJSONLSink(&events), rec), red, fakeClock(time.Second))
		e.Emit(EventText, PhaseReasoning, mix(3), map[string]any{"x": mix(2)})
		d := Finish(run, e)
		doc := Encode(d)
		if len(doc) > DocumentBytes {
			t.Fatalf("document is %d bytes", len(doc))
		}
		if !utf8.Valid(doc) || !json.Valid(doc) {
			t.Fatalf("invalid UTF-8 or JSON:\n%.2000s", doc)
		}
		validate(t, doc)
		if bytes.Contains(doc, []byte(secretMark)) {
			i := bytes.Index(doc, []byte(secretMark))
			t.Fatalf("secret in the document at %d:\n%.300s", i, doc[max(0, i-200):])
		}
		if bytes.Contains(events.Bytes(), []byte(secretMark)) {
			t.Fatalf("secret in the events:\n%.3000s", events.Bytes())
		}
		if n := len(rec.terminals()); n != 1 {
			t.Fatalf("%d terminal events", n)
		}
		md := MarkdownWith(d, MarkdownOptions{Mermaid: true})
		if len(md) > MarkdownBytes || !utf8.ValidString(md) {
			t.Fatalf("markdown is %d bytes (valid UTF-8: %v)", len(md), utf8.ValidString(md))
		}
		if strings.Contains(md, secretMark) {
			t.Fatal("secret in the markdown")
		}
		if !strings.Contains(md, "</details>") {
			t.Fatal("markdown lost its details block")
		}
		_ = sandbox.Posture{}
	})
}

// secretMark starts every fuzzed secret; finding it anywhere is a leak.
const secretMark = "S3cr3tK3y"

// bounded maps any int into 0..max.
func bounded(n, max int) int {
	if n < 0 {
		n = -(n + 1)
	}
	return n % (max + 1)
}

// alnum keeps the ASCII letters and digits of s, at most n.
func alnum(s string, n int) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() == n {
			break
		}
		if ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			b.WriteRune(r)
		}
	}
	return b.String()
}
