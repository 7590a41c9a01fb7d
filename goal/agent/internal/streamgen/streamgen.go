// Package streamgen writes synthetic Claude Code stream-json transcripts of
// any size for goalrun's parser benchmark (docs/benchmarks.md, "agents").
//
// The shape follows the real transcripts in goal/agent/testdata/transcripts:
// one system/init line, then rounds of an assistant line with tool_use
// blocks (Bash, Read, Edit, Write — inputs with file paths, commands and,
// for Write, whole file contents), the user line with their tool_result
// blocks and a tool_use_result echo (command output or file contents of
// 100 B to 64 KiB, with newlines, quotes, backslashes, tabs and non-ASCII
// text to escape), now and then assistant prose, a sub-agent's lines
// (parent_tool_use_id), an api_retry notice, and one result line at the
// end. The output is deterministic for a seed.
package streamgen

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
)

const session = "91675b0c-ac00-42fd-9a67-0e10380d24be"

// words make up the generated text: code-like, with characters JSON must
// escape and some multi-byte runes.
var words = []string{
	"func", "return", "err", "nil", "if", "for", "range", ":=", "{", "}", "(", ")", "\"quoted\"", "back\\slash",
	"\ttab", "ctx", "context.Context", "t.Fatalf", "// comment", "ünïcödé", "日本語", "→", "x", "y", "len(xs)",
	"--- FAIL: TestSum (0.00s)", "ok  \texample/calc\t0.01s", "PASS", "panic:", "goroutine 1 [running]:",
}

// HugeOutput is the size of the tool outputs ClaudeHuge adds: 12 MiB, over
// agent.MaxLineBytes, so the line carrying one is cut and counted oversize.
const HugeOutput = 12 << 20

// Claude writes a transcript of at least size bytes (it stops after the
// first round past size, then adds the result line) to w.
func Claude(w io.Writer, size int64, seed uint64) (written int64, err error) {
	return ClaudeHuge(w, size, seed, 0)
}

// ClaudeHuge is Claude with, every hugeEvery rounds (0 = never), one tool
// output of HugeOutput bytes.
func ClaudeHuge(w io.Writer, size int64, seed uint64, hugeEvery int) (written int64, err error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	cw := &countWriter{w: bw}
	enc := json.NewEncoder(cw)
	enc.SetEscapeHTML(false)
	emit := func(v any) {
		if err == nil {
			err = enc.Encode(v)
		}
	}
	emit(map[string]any{
		"type": "system", "subtype": "init", "cwd": "/workspace", "session_id": session, "model": "claude-opus-5-5",
		"tools": []string{"Task", "Bash", "Edit", "Read", "Write", "Grep", "Glob"}, "permissionMode": "bypassPermissions",
		"apiKeySource": "ANTHROPIC_API_KEY", "claude_code_version": "2.1.332", "uuid": "fcc63281-70e0-4c24-8796-9ea131584d39",
	})
	round := 0
	for cw.n < size && err == nil {
		round++
		parent := any(nil)
		if round%17 == 0 { // a sub-agent's round
			parent = fmt.Sprintf("toolu_task_%d", round/17)
		}
		if round%5 == 0 {
			emit(assistant(parent, []any{map[string]any{"type": "text", "text": text(rng, 40+rng.IntN(400))}}))
		}
		if round%97 == 0 {
			emit(map[string]any{"type": "system", "subtype": "api_retry", "attempt": 1, "max_retries": 10, "retry_delay_ms": 512,
				"error_status": 529, "error": "overloaded", "session_id": session, "uuid": "402467ed-c8db-4b6a-8f59-94ac2711e46f"})
		}
		n := 1 + rng.IntN(3)
		var uses, results []any
		var echo string
		for i := 0; i < n; i++ {
			id := fmt.Sprintf("toolu_%08d_%d", round, i)
			name, input := tool(rng, round, i)
			uses = append(uses, map[string]any{"type": "tool_use", "id": id, "name": name, "input": input})
			n := outputSize(rng)
			if hugeEvery > 0 && round%hugeEvery == 0 && i == 0 {
				n = HugeOutput
			}
			out := text(rng, n)
			echo = out
			results = append(results, map[string]any{"tool_use_id": id, "type": "tool_result", "content": out, "is_error": rng.IntN(10) == 0})
		}
		emit(assistant(parent, uses))
		emit(map[string]any{
			"type": "user", "message": map[string]any{"role": "user", "content": results},
			"parent_tool_use_id": parent, "session_id": session, "uuid": "b96f633d-6625-4150-afe5-c1722506445a",
			"timestamp":       "2026-11-29T18:03:16.547Z",
			"tool_use_result": map[string]any{"stdout": echo, "stderr": "", "interrupted": false, "isImage": false},
		})
	}
	emit(map[string]any{
		"type": "result", "subtype": "success", "is_error": false, "duration_ms": 281000, "num_turns": round,
		"result": "Done.", "session_id": session, "total_cost_usd": 12.5,
		"usage":              map[string]any{"input_tokens": 20 * round, "cache_read_input_tokens": 1000 * round, "output_tokens": 10 * round},
		"permission_denials": []any{}, "uuid": "7dbbac0c-b87f-48c9-b173-32a63d1f0e57",
	})
	if err == nil {
		err = bw.Flush()
	}
	return cw.n, err
}

func assistant(parent any, content []any) map[string]any {
	return map[string]any{
		"type": "assistant",
		"message": map[string]any{"id": "msg_x", "type": "message", "role": "assistant", "model": "claude-opus-5-5",
			"content": content, "stop_reason": nil, "usage": map[string]any{"input_tokens": 10, "output_tokens": 1}},
		"parent_tool_use_id": parent, "session_id": session, "uuid": "f1c0e09d-f87a-40a4-969a-90ff621013bf",
	}
}

func tool(rng *rand.Rand, round, i int) (string, map[string]any) {
	path := fmt.Sprintf("/workspace/pkg%d/file_%d.go", round%13, (round+i)%29)
	switch rng.IntN(5) {
	case 0:
		return "Read", map[string]any{"file_path": path}
	case 1:
		return "Edit", map[string]any{"file_path": path, "old_string": text(rng, 80), "new_string": text(rng, 120)}
	case 2:
		return "Write", map[string]any{"file_path": path, "content": text(rng, 200+rng.IntN(8000))}
	default:
		return "Bash", map[string]any{"command": fmt.Sprintf("go test ./pkg%d/... -run 'Test%d' 2>&1 | tail -n 40", round%13, round), "description": "Run the tests"}
	}
}

// outputSize draws a tool output size: mostly small, sometimes large.
func outputSize(rng *rand.Rand) int {
	switch r := rng.IntN(100); {
	case r < 60:
		return 100 + rng.IntN(2000)
	case r < 95:
		return 2000 + rng.IntN(16000)
	default:
		return 16000 + rng.IntN(48000)
	}
}

func text(rng *rand.Rand, n int) string {
	var b strings.Builder
	b.Grow(n + 32)
	for b.Len() < n {
		b.WriteString(words[rng.IntN(len(words))])
		if rng.IntN(8) == 0 {
			b.WriteByte('\n')
		} else {
			b.WriteByte(' ')
		}
	}
	return b.String()
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
