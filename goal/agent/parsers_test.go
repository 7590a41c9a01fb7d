package agent

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// feed runs lines (stdout, and stderr for car) through a fresh parser of the
// named agent and returns the events, the receipts and the result.
type fed struct {
	events   []Event
	receipts []Tool
	res      TurnResult
	stopped  int // 1-based stdout line after which Stop was emitted (0 = never)
}

func feed(t *testing.T, agent string, stdout string, exit int, stderr ...string) fed {
	t.Helper()
	a, err := New(agent)
	if err != nil {
		t.Fatal(err)
	}
	p := a.NewParser()
	var f fed
	line := 0
	emit := func(ev Event) {
		f.events = append(f.events, ev)
		if ev.Kind == KindToolResult {
			f.receipts = append(f.receipts, *ev.Tool)
		}
		if ev.Stop && f.stopped == 0 {
			f.stopped = line
		}
	}
	s := NewStreams(p, emit)
	for _, l := range stderr {
		s.Stderr.Write([]byte(l + "\n"))
	}
	for _, l := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		line++
		s.Stdout.Write([]byte(l + "\n"))
	}
	s.Close()
	f.res = p.End(exit, emit)
	return f
}

func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }

const (
	claudeInit   = `{"type":"system","subtype":"init","cwd":"/workspace","session_id":"s-1","model":"claude-x","claude_code_version":"2.1.332"}`
	claudeOK     = `{"type":"result","subtype":"success","is_error":false,"session_id":"s-1","num_turns":3,"result":"done","usage":{"input_tokens":5,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":7},"total_cost_usd":0.5,"permission_denials":[]}`
	claudeNoCost = `{"type":"result","subtype":"success","is_error":false,"session_id":"s-1","num_turns":1,"result":"done","usage":{"input_tokens":1,"output_tokens":1}}`
)

func TestClaudeParser(t *testing.T) {
	cases := []struct {
		name     string
		stdout   string
		exit     int
		receipts []Tool
		check    func(t *testing.T, f fed)
	}{
		{
			name: "sub-agent calls carry the sub-agent in Via",
			stdout: lines(claudeInit,
				`{"type":"assistant","message":{"model":"claude-x","content":[{"type":"tool_use","id":"toolu_t","name":"Task","input":{"description":"find the bug","prompt":"look at calc","subagent_type":"Explore"}}]},"parent_tool_use_id":null,"session_id":"s-1"}`,
				`{"type":"assistant","message":{"model":"claude-haiku","content":[{"type":"text","text":"sub-agent prose"},{"type":"tool_use","id":"toolu_r","name":"Read","input":{"file_path":"/workspace/calc/sum.go"}}]},"parent_tool_use_id":"toolu_t","session_id":"s-1"}`,
				`{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_r","type":"tool_result","content":"package calc","is_error":false}]},"parent_tool_use_id":"toolu_t","session_id":"s-1"}`,
				`{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_t","type":"tool_result","content":[{"type":"text","text":"found it"}]}]},"parent_tool_use_id":null,"session_id":"s-1"}`,
				claudeOK),
			receipts: []Tool{
				{ID: "toolu_r", Name: "Read", Brief: "/workspace/calc/sum.go", OK: true, Via: "Explore"},
				{ID: "toolu_t", Name: "Task", Brief: "look at calc", OK: true},
			},
			check: func(t *testing.T, f fed) {
				if f.res.Delegations != 1 {
					t.Errorf("delegations %d, want 1", f.res.Delegations)
				}
				if f.res.Model != "claude-x" {
					t.Errorf("model %q: a sub-agent's model must not replace the main one", f.res.Model)
				}
				for _, ev := range f.events {
					if ev.Kind == KindText {
						t.Errorf("a sub-agent's prose became a text event: %q", ev.Text)
					}
				}
			},
		},
		{
			name: "write tools name their paths relative to the working directory",
			stdout: lines(claudeInit,
				`{"type":"assistant","message":{"content":[`+
					`{"type":"tool_use","id":"a","name":"Edit","input":{"file_path":"/workspace/calc/sum.go","old_string":"x","new_string":"y"}},`+
					`{"type":"tool_use","id":"b","name":"Write","input":{"file_path":"/tmp/outside.txt","content":"secret\nfile"}},`+
					`{"type":"tool_use","id":"c","name":"NotebookEdit","input":{"notebook_path":"/workspace/nb.ipynb","new_source":"1"}},`+
					`{"type":"tool_use","id":"d","name":"MultiEdit","input":{"file_path":"/workspace/./a/../b.go","edits":[]}},`+
					`{"type":"tool_use","id":"e","name":"Bash","input":{"command":"go test \\\n  ./...","description":"run"}}]},"session_id":"s-1"}`,
				`{"type":"user","message":{"content":[`+
					`{"tool_use_id":"a","type":"tool_result","content":"ok"},{"tool_use_id":"b","type":"tool_result","content":"ok"},`+
					`{"tool_use_id":"c","type":"tool_result","content":"ok"},{"tool_use_id":"d","type":"tool_result","content":"ok"},`+
					`{"tool_use_id":"e","type":"tool_result","content":"FAIL","is_error":true}]},"session_id":"s-1"}`,
				claudeOK),
			receipts: []Tool{
				{ID: "a", Name: "Edit", Brief: "/workspace/calc/sum.go", Paths: []string{"calc/sum.go"}, OK: true},
				{ID: "b", Name: "Write", Brief: "/tmp/outside.txt", Paths: []string{"/tmp/outside.txt"}, OK: true},
				{ID: "c", Name: "NotebookEdit", Brief: "", Paths: []string{"nb.ipynb"}, OK: true},
				{ID: "d", Name: "MultiEdit", Brief: "/workspace/./a/../b.go", Paths: []string{"b.go"}, OK: true},
				{ID: "e", Name: "Bash", Brief: `go test \ ./...`, OK: false},
			},
		},
		{
			name:   "is_error true fails the turn whatever the subtype says",
			stdout: lines(claudeInit, `{"type":"result","subtype":"success","is_error":true,"session_id":"s-1","num_turns":1,"result":"API Error: 500 internal","usage":{"input_tokens":1,"output_tokens":0},"total_cost_usd":0}`),
			check: func(t *testing.T, f fed) {
				if f.res.Status != StatusFailed || f.res.Cause != CauseResultError || f.res.Message != "API Error: 500 internal" || f.res.Summary != "" {
					t.Errorf("got %+v", f.res)
				}
			},
		},
		{
			name:   "error_max_turns is a max_turns failure",
			stdout: lines(claudeInit, `{"type":"result","subtype":"error_max_turns","is_error":true,"session_id":"s-1","num_turns":4,"usage":{"input_tokens":1,"output_tokens":0}}`),
			check: func(t *testing.T, f fed) {
				if f.res.Status != StatusFailed || f.res.Cause != CauseMaxTurns || f.res.Turns != 4 || f.res.Message != "error_max_turns" {
					t.Errorf("got %+v", f.res)
				}
			},
		},
		{
			name:   "an error subtype without is_error is still a failure",
			stdout: lines(claudeInit, `{"type":"result","subtype":"error_during_execution","session_id":"s-1","errors":["tool crashed"],"usage":{}}`),
			check: func(t *testing.T, f fed) {
				if f.res.Status != StatusFailed || f.res.Message != "error_during_execution: tool crashed" {
					t.Errorf("got %+v", f.res)
				}
			},
		},
		{
			name:   "a result with API status 401 is auth_required",
			stdout: lines(claudeInit, `{"type":"result","subtype":"success","is_error":true,"api_error_status":401,"session_id":"s-1","result":"Invalid API key · Please run /login","usage":{}}`),
			check: func(t *testing.T, f fed) {
				if f.res.Status != StatusAuthRequired || f.res.AuthReason != AuthInvalidKey {
					t.Errorf("got %+v", f.res)
				}
			},
		},
		{
			name:   "not logged in is a missing key",
			stdout: lines(claudeInit, `{"type":"result","subtype":"success","is_error":true,"session_id":"s-1","result":"Not logged in · Please run /login","usage":{}}`),
			check: func(t *testing.T, f fed) {
				if f.res.Status != StatusAuthRequired || f.res.AuthReason != AuthMissingKey {
					t.Errorf("got %+v", f.res)
				}
			},
		},
		{
			name:   "an expired OAuth token is expired",
			stdout: lines(claudeInit, `{"type":"result","subtype":"success","is_error":true,"api_error_status":401,"session_id":"s-1","result":"API Error: 401 {\"type\":\"error\",\"error\":{\"type\":\"authentication_error\",\"message\":\"OAuth token has expired.\"}}","usage":{}}`),
			check: func(t *testing.T, f fed) {
				if f.res.Status != StatusAuthRequired || f.res.AuthReason != AuthExpired {
					t.Errorf("got %+v", f.res)
				}
			},
		},
		{
			name: "permission denials are counted",
			stdout: lines(claudeInit, `{"type":"result","subtype":"success","is_error":false,"session_id":"s-1","result":"ok","usage":{},`+
				`"permission_denials":[{"tool_name":"Bash","tool_use_id":"x","tool_input":{"command":"rm -rf /"}},{"tool_name":"Write","tool_use_id":"y","tool_input":{}}]}`),
			check: func(t *testing.T, f fed) {
				if f.res.PermissionDenials != 2 || f.res.Status != StatusSuccess {
					t.Errorf("got %+v", f.res)
				}
			},
		},
		{
			name: "usage is this invocation's, cache tokens included, cost from since-last-result",
			stdout: lines(claudeInit, `{"type":"result","subtype":"success","is_error":false,"session_id":"s-1","result":"ok","total_cost_usd":9.5,`+
				`"usage":{"input_tokens":5,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":7},`+
				`"model_usage_since_last_result":{"claude-x":{"costUSD":0.25},"claude-haiku":{"costUSD":0.125}}}`),
			check: func(t *testing.T, f fed) {
				if want := (Usage{InputTokens: 1105, OutputTokens: 7, CostUSD: 0.375}); f.res.Usage != want {
					t.Errorf("usage %+v, want %+v", f.res.Usage, want)
				}
			},
		},
		{
			name:   "without model_usage_since_last_result the cost is total_cost_usd",
			stdout: lines(claudeInit, claudeOK),
			check: func(t *testing.T, f fed) {
				if want := (Usage{InputTokens: 1105, OutputTokens: 7, CostUSD: 0.5}); f.res.Usage != want {
					t.Errorf("usage %+v, want %+v", f.res.Usage, want)
				}
			},
		},
		{
			name: "429 and 529 retries are retry events, not a stop",
			stdout: lines(claudeInit,
				`{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":500,"error_status":429,"error":"rate_limit","session_id":"s-1"}`,
				`{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,"retry_delay_ms":1000,"error_status":529,"error":"overloaded","session_id":"s-1"}`,
				`{"type":"system","subtype":"api_retry","attempt":3,"max_retries":10,"retry_delay_ms":2000,"error_status":null,"error":"unknown","session_id":"s-1"}`,
				claudeNoCost),
			check: func(t *testing.T, f fed) {
				if f.stopped != 0 || f.res.Status != StatusSuccess || f.res.Retries != 3 {
					t.Errorf("stopped at %d, %+v", f.stopped, f.res)
				}
				var got []Retry
				for _, ev := range f.events {
					if ev.Kind == KindRetry {
						got = append(got, *ev.Retry)
					}
				}
				want := []Retry{{1, 429, 500, "rate_limit"}, {2, 529, 1000, "overloaded"}, {3, 0, 2000, "unknown"}}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("retries %+v, want %+v", got, want)
				}
			},
		},
		{
			name: "only consecutive auth retries stop the process",
			stdout: lines(claudeInit,
				`{"type":"system","subtype":"api_retry","attempt":1,"retry_delay_ms":500,"error_status":401,"error":"authentication_failed","session_id":"s-1"}`,
				`{"type":"system","subtype":"api_retry","attempt":2,"retry_delay_ms":500,"error_status":529,"error":"overloaded","session_id":"s-1"}`,
				`{"type":"system","subtype":"api_retry","attempt":3,"retry_delay_ms":500,"error_status":403,"error":"permission_error","session_id":"s-1"}`,
				`{"type":"system","subtype":"api_retry","attempt":4,"retry_delay_ms":500,"error_status":401,"error":"authentication_failed","session_id":"s-1"}`,
				`{"type":"system","subtype":"api_retry","attempt":5,"retry_delay_ms":500,"error_status":401,"error":"authentication_failed","session_id":"s-1"}`),
			exit: 143,
			check: func(t *testing.T, f fed) {
				if f.stopped != 5 {
					t.Errorf("stop asked after line %d, want 5 (the second consecutive auth retry)", f.stopped)
				}
				n := 0
				for _, ev := range f.events {
					if ev.Stop {
						n++
						if ev.Kind != KindError || !ev.Error.Fatal || !ev.Error.Auth {
							t.Errorf("the stop event is %+v", ev)
						}
					}
				}
				if n != 1 {
					t.Errorf("%d stop events, want exactly 1", n)
				}
				if f.res.Status != StatusAuthRequired || f.res.Cause != CauseAuthRequired {
					t.Errorf("got %+v", f.res)
				}
			},
		},
		{
			name: "non-JSON lines are counted, unknown types ignored",
			stdout: lines("Warning: something on stdout", claudeInit, `{"type":"stream_event","event":{}}`, `{"type":"mystery","x":1}`,
				`{"type":"system","subtype":"compact_boundary","session_id":"s-1"}`, `{"type":"assistant"`, claudeNoCost),
			check: func(t *testing.T, f fed) {
				if f.res.SkippedLines != 2 || f.res.Status != StatusSuccess {
					t.Errorf("got %+v", f.res)
				}
			},
		},
		{
			name:   "exit 0 without a result event is no_result_event",
			stdout: lines(claudeInit, `{"type":"assistant","message":{"content":[{"type":"text","text":"working"}]},"session_id":"s-1"}`),
			check: func(t *testing.T, f fed) {
				if f.res.Status != StatusFailed || f.res.Cause != CauseNoResultEvent {
					t.Errorf("got %+v", f.res)
				}
			},
		},
		{
			name: "a server tool's error result fails its receipt",
			stdout: lines(claudeInit,
				`{"type":"assistant","message":{"content":[{"type":"server_tool_use","id":"srv_1","name":"web_search","input":{"query":"go 1.26 release notes"}},`+
					`{"type":"web_search_tool_result","tool_use_id":"srv_1","content":{"type":"web_search_tool_result_error","error_code":"unavailable"}},`+
					`{"type":"server_tool_use","id":"srv_2","name":"web_search","input":{"query":"second"}},`+
					`{"type":"web_search_tool_result","tool_use_id":"srv_2","content":[{"type":"web_search_result","url":"https://go.dev"}]}]},"session_id":"s-1"}`,
				claudeNoCost),
			receipts: []Tool{
				{ID: "srv_1", Name: "web_search", Brief: "go 1.26 release notes", OK: false},
				{ID: "srv_2", Name: "web_search", Brief: "second", OK: true},
			},
		},
		{
			name: "the latest session id wins",
			stdout: lines(claudeInit,
				`{"type":"assistant","message":{"content":[{"type":"text","text":"hi"}]},"session_id":"s-2"}`,
				`{"type":"result","subtype":"success","is_error":false,"session_id":"s-3","result":"ok","usage":{}}`),
			check: func(t *testing.T, f fed) {
				if f.res.SessionID != "s-3" {
					t.Errorf("session %q, want s-3", f.res.SessionID)
				}
				var ids []string
				for _, ev := range f.events {
					if ev.Kind == KindSession {
						ids = append(ids, ev.SessionID)
					}
				}
				if !reflect.DeepEqual(ids, []string{"s-1", "s-2", "s-3"}) {
					t.Errorf("session events %v", ids)
				}
			},
		},
		{
			name: "calls without results fail at the end, in order",
			stdout: lines(claudeInit,
				`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"x2","name":"Bash","input":{"command":"sleep 1000"}},{"type":"tool_use","id":"x1","name":"Read","input":{"file_path":"a"}}]},"session_id":"s-1"}`),
			exit: 137,
			receipts: []Tool{
				{ID: "x2", Name: "Bash", Brief: "sleep 1000", OK: false},
				{ID: "x1", Name: "Read", Brief: "a", OK: false},
			},
		},
		{
			name: "a result for an unknown call is ignored; a repeated call is announced once",
			stdout: lines(claudeInit,
				`{"type":"user","message":{"content":[{"tool_use_id":"from-before-resume","type":"tool_result","content":"x"}]},"session_id":"s-1"}`,
				`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"a","name":"Bash","input":{"command":"true"}}]},"session_id":"s-1"}`,
				`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"a","name":"Bash","input":{"command":"true"}}]},"session_id":"s-1"}`,
				`{"type":"user","message":{"content":[{"tool_use_id":"a","type":"tool_result","content":"","is_error":false}]},"session_id":"s-1"}`,
				claudeNoCost),
			receipts: []Tool{{ID: "a", Name: "Bash", Brief: "true", OK: true}},
			check: func(t *testing.T, f fed) {
				calls := 0
				for _, ev := range f.events {
					if ev.Kind == KindToolCall {
						calls++
					}
				}
				if calls != 1 {
					t.Errorf("%d tool_call events, want 1", calls)
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := feed(t, "claude", c.stdout, c.exit)
			if c.receipts != nil && !reflect.DeepEqual(f.receipts, c.receipts) {
				t.Errorf("receipts\n got %+v\nwant %+v", f.receipts, c.receipts)
			}
			if c.check != nil {
				c.check(t, f)
			}
		})
	}
}

func TestClaudeOversizeLineSalvage(t *testing.T) {
	p := newClaudeParser()
	var receipts []Tool
	var calls []Tool
	emit := func(ev Event) {
		switch ev.Kind {
		case KindToolResult:
			receipts = append(receipts, *ev.Tool)
		case KindToolCall:
			calls = append(calls, *ev.Tool)
		}
	}
	p.Line([]byte(claudeInit), false, emit)
	// A Write whose input carries a file bigger than MaxLineBytes: only the
	// prefix arrives, flagged oversize.
	p.Line([]byte(`{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","id":"toolu_big","name":"Write","input":{"file_path":"/workspace/big.bin","content":"AAAAAAAA`), true, emit)
	// The tool_result echoing a huge output, cut before its is_error.
	p.Line([]byte(`{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_big","type":"tool_result","content":"BBBBBBBBBBBB`), true, emit)
	p.Line([]byte(claudeNoCost), false, emit)
	res := p.End(0, emit)
	if len(calls) != 1 || calls[0].ID != "toolu_big" || calls[0].Name != "Write" || !reflect.DeepEqual(calls[0].Paths, []string{"big.bin"}) {
		t.Errorf("salvaged calls %+v", calls)
	}
	if len(receipts) != 1 || !receipts[0].OK {
		t.Errorf("salvaged receipts %+v", receipts)
	}
	if res.OversizeLines != 2 || res.SkippedLines != 0 || res.Status != StatusSuccess {
		t.Errorf("result %+v", res)
	}
}

func TestCodexParser(t *testing.T) {
	thread := `{"type":"thread.started","thread_id":"th-1"}`
	done := `{"type":"turn.completed","usage":{"input_tokens":100,"cached_input_tokens":40,"output_tokens":9}}`
	cases := []struct {
		name     string
		stdout   string
		exit     int
		receipts []Tool
		check    func(t *testing.T, f fed)
	}{
		{
			name: "every tool item becomes a receipt",
			stdout: lines(thread, `{"type":"turn.started"}`,
				`{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"/bin/bash -lc 'go test ./... 2>&1 | tail -5'","aggregated_output":"","exit_code":null,"status":"in_progress"}}`,
				`{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"/bin/bash -lc 'go test ./... 2>&1 | tail -5'","aggregated_output":"FAIL","exit_code":1,"status":"failed"}}`,
				`{"type":"item.completed","item":{"id":"item_2","type":"file_change","changes":[{"path":"/w/calc/sum.go","kind":"update"},{"path":"/w/calc/new.go","kind":"add"}],"status":"completed"}}`,
				`{"type":"item.started","item":{"id":"item_3","type":"mcp_tool_call","server":"github","tool":"create_issue","arguments":{"title":"x","subject":"bug"},"result":null,"error":null,"status":"in_progress"}}`,
				`{"type":"item.completed","item":{"id":"item_3","type":"mcp_tool_call","server":"github","tool":"create_issue","arguments":{"title":"x","subject":"bug"},"result":null,"error":{"message":"denied"},"status":"failed"}}`,
				`{"type":"item.started","item":{"id":"item_4","type":"collab_tool_call","tool":"spawn_agent","sender_thread_id":"th-1","receiver_thread_ids":[],"prompt":"write tests","agents_states":{},"status":"in_progress"}}`,
				`{"type":"item.completed","item":{"id":"item_4","type":"collab_tool_call","tool":"spawn_agent","sender_thread_id":"th-1","receiver_thread_ids":["th-2"],"prompt":"write tests","agents_states":{},"status":"completed"}}`,
				`{"type":"item.completed","item":{"id":"item_5","type":"web_search","query":"codex exec json","action":{"type":"search"}}}`,
				`{"type":"item.completed","item":{"id":"item_6","type":"reasoning","text":"thinking"}}`,
				`{"type":"item.updated","item":{"id":"item_7","type":"todo_list","items":[{"text":"a","completed":false}]}}`,
				`{"type":"item.completed","item":{"id":"item_8","type":"agent_message","text":"first"}}`,
				`{"type":"item.completed","item":{"id":"item_9","type":"agent_message","text":"final answer"}}`,
				done),
			receipts: []Tool{
				{ID: "item_1", Name: "command_execution", Brief: "go test ./... 2>&1 | tail -5", OK: false},
				{ID: "item_2", Name: "file_change", Brief: "/w/calc/sum.go, /w/calc/new.go", Paths: []string{"/w/calc/sum.go", "/w/calc/new.go"}, OK: true},
				{ID: "item_3", Name: "mcp__github__create_issue", Brief: "bug", OK: false},
				{ID: "item_4", Name: "collab_spawn_agent", Brief: "write tests", OK: true},
				{ID: "item_5", Name: "web_search", Brief: "codex exec json", OK: true},
			},
			check: func(t *testing.T, f fed) {
				if f.res.Summary != "final answer" || f.res.Delegations != 1 || f.res.Status != StatusSuccess {
					t.Errorf("got %+v", f.res)
				}
				if want := (Usage{InputTokens: 100, OutputTokens: 9, Cumulative: true, NoCost: true}); f.res.Usage != want {
					t.Errorf("usage %+v", f.res.Usage)
				}
			},
		},
		{
			name: "reconnects for 429 are retries; the turn still completes",
			stdout: lines(thread, `{"type":"turn.started"}`,
				`{"type":"error","message":"Reconnecting... 1/5 (unexpected status 429 Too Many Requests: slow down, url: http://x/v1/responses)"}`,
				`{"type":"error","message":"Reconnecting... 2/5 (stream disconnected before completion: eof)"}`,
				done),
			check: func(t *testing.T, f fed) {
				var got []Retry
				for _, ev := range f.events {
					if ev.Kind == KindRetry {
						got = append(got, *ev.Retry)
					}
				}
				want := []Retry{
					{Attempt: 1, Status: 429, Message: "unexpected status 429 Too Many Requests: slow down, url: http://x/v1/responses"},
					{Attempt: 2, Status: 0, Message: "stream disconnected before completion: eof"},
				}
				if !reflect.DeepEqual(got, want) || f.stopped != 0 || f.res.Status != StatusSuccess {
					t.Errorf("retries %+v stop %d res %+v", got, f.stopped, f.res)
				}
			},
		},
		{
			name:   "a missing key is auth_required, missing_key",
			stdout: lines(thread, `{"type":"turn.started"}`, `{"type":"error","message":"Missing environment variable: `+"`OPENAI_API_KEY`"+`."}`, `{"type":"turn.failed","error":{"message":"Missing environment variable: `+"`OPENAI_API_KEY`"+`."}}`),
			exit:   1,
			check: func(t *testing.T, f fed) {
				if f.res.Status != StatusAuthRequired || f.res.AuthReason != AuthMissingKey {
					t.Errorf("got %+v", f.res)
				}
			},
		},
		{
			name:   "turn.failed is a failure",
			stdout: lines(thread, `{"type":"turn.started"}`, `{"type":"turn.failed","error":{"message":"context window exceeded"}}`),
			exit:   1,
			check: func(t *testing.T, f fed) {
				if f.res.Status != StatusFailed || f.res.Cause != CauseTurnFailed || f.res.Message != "context window exceeded" {
					t.Errorf("got %+v", f.res)
				}
			},
		},
		{
			name:   "an error and exit without a terminal event is no_result_event with the error's words",
			stdout: lines(`{"type":"error","message":"failed to load config: bad toml"}`),
			exit:   1,
			check: func(t *testing.T, f fed) {
				if f.res.Status != StatusFailed || f.res.Cause != CauseNoResultEvent || !strings.Contains(f.res.Message, "bad toml") {
					t.Errorf("got %+v", f.res)
				}
			},
		},
		{
			name:   "a command still running when the process dies is a failed receipt",
			stdout: lines(thread, `{"type":"turn.started"}`, `{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"sleep 100","aggregated_output":"","exit_code":null,"status":"in_progress"}}`),
			exit:   137,
			receipts: []Tool{
				{ID: "item_1", Name: "command_execution", Brief: "sleep 100", OK: false},
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := feed(t, "codex", c.stdout, c.exit)
			if c.receipts != nil && !reflect.DeepEqual(f.receipts, c.receipts) {
				t.Errorf("receipts\n got %+v\nwant %+v", f.receipts, c.receipts)
			}
			if c.check != nil {
				c.check(t, f)
			}
		})
	}
}

func TestGeminiAuthErrorEventStops(t *testing.T) {
	f := feed(t, "gemini", lines(
		`{"type":"init","session_id":"g-1","model":"gemini-2.5-pro"}`,
		`{"type":"error","severity":"error","message":"[API Error: got status: 403 Forbidden. Permission denied on resource]"}`,
		`{"type":"result","status":"error","error":{"type":"Error","message":"403"}}`), 1)
	if f.stopped != 2 || f.res.Status != StatusAuthRequired {
		t.Errorf("stop %d res %+v", f.stopped, f.res)
	}
}

func TestCarDocument(t *testing.T) {
	cases := []struct {
		name   string
		stdout string
		status string
		cause  string
		check  func(t *testing.T, r TurnResult)
	}{
		{"one-line success", `{"schema":"car.do/1","status":"success","summary":"ok","turns":2,"delegations":0,"model_used":"m","usage":{"input_tokens":10,"output_tokens":2,"cost_usd":0.01}}`,
			StatusSuccess, "", func(t *testing.T, r TurnResult) {
				if r.Summary != "ok" || r.Turns != 2 || r.Usage != (Usage{InputTokens: 10, OutputTokens: 2, CostUSD: 0.01}) {
					t.Errorf("%+v", r)
				}
			}},
		{"max_turns keeps the summary", `{"schema":"car.do/1","status":"max_turns","summary":"partial","turns":50}`, StatusFailed, CauseMaxTurns,
			func(t *testing.T, r TurnResult) {
				if r.Summary != "partial" {
					t.Errorf("%+v", r)
				}
			}},
		{"AuthRequired error", `{"schema":"car.do/1","status":"error","error":"AuthRequired","message":"the provider refused the key"}`, StatusAuthRequired, CauseAuthRequired, nil},
		{"401 in the message", `{"schema":"car.do/1","status":"error","error":"AssistantLoopFailed","message":"inference failed: HTTP 401 Unauthorized"}`, StatusAuthRequired, CauseAuthRequired, nil},
		{"another schema", `{"schema":"other/1","status":"success","summary":"x"}`, StatusFailed, CauseResultError,
			func(t *testing.T, r TurnResult) {
				if !strings.Contains(r.Message, `"other/1"`) {
					t.Errorf("%+v", r)
				}
			}},
		{"a truncated document", "{\n  \"schema\": \"car.do/1\",\n  \"status\": \"success\",\n", StatusFailed, CauseNoResultEvent,
			func(t *testing.T, r TurnResult) {
				if r.SkippedLines != 1 {
					t.Errorf("%+v", r)
				}
			}},
		{"noise before the document", "car: warning\n{\"schema\":\"car.do/1\",\"status\":\"success\",\"summary\":\"x\"}", StatusSuccess, "",
			func(t *testing.T, r TurnResult) {
				if r.SkippedLines != 1 {
					t.Errorf("%+v", r)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := feed(t, "car", c.stdout, 0)
			if f.res.Status != c.status || f.res.Cause != c.cause {
				t.Errorf("ended %s/%s, want %s/%s (%+v)", f.res.Status, f.res.Cause, c.status, c.cause, f.res)
			}
			if c.check != nil {
				c.check(t, f.res)
			}
		})
	}
}

func TestCarAuthRetriesFromStderrStop(t *testing.T) {
	f := feed(t, "car", "", 0,
		`{"type":"inference_retry","phase":"inference","message":"retry","data":{"attempt":1,"status":401,"backoff_ms":100}}`,
		`{"type":"inference_retry","phase":"inference","message":"retry","data":{"attempt":2,"status":401,"backoff_ms":200}}`)
	stops := 0
	for _, ev := range f.events {
		if ev.Stop {
			stops++
		}
	}
	if stops != 1 || f.res.Status != StatusAuthRequired {
		t.Errorf("stops %d res %+v", stops, f.res)
	}
}

// FuzzParsers feeds arbitrary output (stdout and stderr) to every parser:
// none may panic, every turn ends in a known status, a failed turn names a
// cause, and every receipt answers a call announced before it, once.
func FuzzParsers(f *testing.F) {
	for _, c := range goldenCases {
		b, err := os.ReadFile(filepath.Join("testdata", filepath.FromSlash(c.stdout)))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(c.agent, b, []byte(nil))
	}
	f.Add("car", []byte(`{"schema":"car.do/1","status":"success"}`), []byte(`{"type":"tool_failed","data":{}}`+"\n"+`{"type":"tool_called","data":{"tool":"x"}}`))
	f.Add("claude", []byte(`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"a"}]}}`), []byte(nil))
	f.Fuzz(func(t *testing.T, agent string, stdout, stderr []byte) {
		a, err := New(agent)
		if err != nil || agent == CommandName {
			return
		}
		p := a.NewParser()
		open := map[string]bool{}
		emit := func(ev Event) {
			switch ev.Kind {
			case KindToolCall:
				if ev.Tool.ID != "" {
					open[ev.Tool.ID] = true
				}
			case KindToolResult:
				if ev.Tool.ID != "" && !open[ev.Tool.ID] {
					t.Fatalf("%s: a result for %q without its call (or twice)", agent, ev.Tool.ID)
				}
				delete(open, ev.Tool.ID)
			}
		}
		s := NewStreams(p, emit)
		s.Stderr.Write(stderr)
		s.Stdout.Write(stdout)
		s.Close()
		res := p.End(1, emit)
		switch res.Status {
		case StatusSuccess:
		case StatusFailed, StatusAuthRequired:
			if res.Cause == "" {
				t.Fatalf("%s: %s without a cause: %+v", agent, res.Status, res)
			}
		default:
			t.Fatalf("%s: status %q", agent, res.Status)
		}
		if len(open) != 0 {
			t.Fatalf("%s: calls left without a receipt: %v", agent, open)
		}
	})
}

// TestEgressRefusalIsNotAnAuthFailure: a 401/403 that goalrun's own egress
// proxy wrote ("goalrun egress: …") never reached the model API, so it says
// nothing about the key: the turn fails with CauseEgressRefused, never
// auth_required/invalid_key. Real auth failures and missing keys keep their
// reasons.
func TestEgressRefusalIsNotAnAuthFailure(t *testing.T) {
	const codexThread = `{"type":"thread.started","thread_id":"t-1"}`
	cases := []struct {
		name       string
		agent      string
		stdout     string
		exit       int
		wantStatus string
		wantCause  string
		wantReason string
	}{
		{"claude: 403 from the proxy (DNS refused)", "claude",
			lines(claudeInit, `{"type":"result","subtype":"success","is_error":true,"api_error_status":403,"session_id":"s-1","result":"API Error: 403 goalrun egress: refused api.anthropic.com:443: DNS lookup failed: no such host","usage":{}}`),
			1, StatusFailed, CauseEgressRefused, ""},
		{"claude: 502 from the proxy", "claude",
			lines(claudeInit, `{"type":"result","subtype":"success","is_error":true,"api_error_status":502,"session_id":"s-1","result":"API Error: 502 goalrun egress: cannot reach api.anthropic.com:443: DNS lookup failed: no such host","usage":{}}`),
			1, StatusFailed, CauseEgressRefused, ""},
		{"claude: 403 from the proxy's path allowlist", "claude",
			lines(claudeInit, `{"type":"result","subtype":"success","is_error":true,"api_error_status":403,"session_id":"s-1","result":"API Error: 403 goalrun egress: refused api.anthropic.com:443/v1/files: path not on the API's path allowlist","usage":{}}`),
			1, StatusFailed, CauseEgressRefused, ""},
		{"claude: a real 401 stays invalid_key", "claude",
			lines(claudeInit, `{"type":"result","subtype":"success","is_error":true,"api_error_status":401,"session_id":"s-1","result":"Invalid API key · Please run /login","usage":{}}`),
			1, StatusAuthRequired, CauseAuthRequired, AuthInvalidKey},
		{"claude: not logged in is missing_key", "claude",
			lines(claudeInit, `{"type":"result","subtype":"success","is_error":true,"session_id":"s-1","result":"Not logged in · Please run /login","usage":{}}`),
			1, StatusAuthRequired, CauseAuthRequired, AuthMissingKey},
		{"codex: 403 from the proxy", "codex",
			lines(codexThread, `{"type":"turn.started"}`, `{"type":"turn.failed","error":{"message":"unexpected status 403 Forbidden: goalrun egress: refused api.openai.com:443: not on the allowlist"}}`),
			1, StatusFailed, CauseEgressRefused, ""},
		{"codex: a real 401 stays invalid_key", "codex",
			lines(codexThread, `{"type":"turn.started"}`, `{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized: Incorrect API key provided"}}`),
			1, StatusAuthRequired, CauseAuthRequired, AuthInvalidKey},
		{"codex: no bearer is missing_key", "codex",
			lines(codexThread, `{"type":"turn.started"}`, `{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized: Missing bearer or basic authentication in header"}}`),
			1, StatusAuthRequired, CauseAuthRequired, AuthMissingKey},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := feed(t, tc.agent, tc.stdout, tc.exit)
			if f.res.Status != tc.wantStatus || f.res.Cause != tc.wantCause || f.res.AuthReason != tc.wantReason {
				t.Errorf("status %q cause %q reason %q (message %q), want %q %q %q",
					f.res.Status, f.res.Cause, f.res.AuthReason, f.res.Message, tc.wantStatus, tc.wantCause, tc.wantReason)
			}
		})
	}
}

// TestEgressRefusalRetriesDoNotStopAsAuth: consecutive 403 retries quoting
// goalrun's egress proxy do not end the turn as auth_required.
func TestEgressRefusalRetriesDoNotStopAsAuth(t *testing.T) {
	st := newTurnState()
	var stops int
	emit := func(ev Event) {
		if ev.Stop {
			stops++
		}
	}
	for i := 1; i <= 2*AuthRetryLimit; i++ {
		st.retry(Retry{Attempt: i, Status: 403, Message: "goalrun egress: refused api.anthropic.com:443: not on the allowlist"}, emit)
	}
	if st.res.Status == StatusAuthRequired || stops != 0 {
		t.Errorf("status %q stops %d, want no auth_required and no stop", st.res.Status, stops)
	}
	for i := 1; i <= AuthRetryLimit; i++ {
		st.retry(Retry{Attempt: i, Status: 401, Message: "authentication_error"}, emit)
	}
	if st.res.Status != StatusAuthRequired || stops != 1 {
		t.Errorf("status %q stops %d, want auth_required after %d real 401s", st.res.Status, stops, AuthRetryLimit)
	}
}
