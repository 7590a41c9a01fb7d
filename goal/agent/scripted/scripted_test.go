package scripted

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

type sseEvent struct {
	name string
	data map[string]any
}

// post sends body to url with key and returns the status and the SSE events
// (or the JSON body as a single event named "json").
func post(t *testing.T, url, key, body string) (int, []sseEvent) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, []sseEvent{{"json", m}}
	}
	var evs []sseEvent
	sc := bufio.NewScanner(resp.Body)
	var name string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var m map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &m); err != nil {
				t.Fatalf("bad SSE data %q: %v", line, err)
			}
			if m["type"] != name {
				t.Errorf("event %q carries type %v", name, m["type"])
			}
			evs = append(evs, sseEvent{name, m})
		}
	}
	return resp.StatusCode, evs
}

func names(evs []sseEvent) string {
	var n []string
	for _, e := range evs {
		n = append(n, e.name)
	}
	return strings.Join(n, ",")
}

func TestAnthropicStreamsToolCallsThenText(t *testing.T) {
	srv := NewAnthropic(Script{Replies: []Reply{
		{Text: "Let me write it.", Tools: []ToolCall{{Name: "Write", Input: map[string]any{"file_path": "/w/a.txt", "content": "hi\n"}}}, InputTokens: 42, OutputTokens: 7},
		{Text: "Done."},
	}})
	defer srv.Close()
	first := `{"model":"claude-x","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"write a.txt"}]}`
	status, evs := post(t, srv.URL+"/v1/messages", "k1", first)
	if status != 200 {
		t.Fatalf("status %d", status)
	}
	want := "message_start,content_block_start,content_block_delta,content_block_delta,content_block_stop," +
		"content_block_start,content_block_delta,content_block_delta,content_block_stop,message_delta,message_stop"
	if names(evs) != want {
		t.Fatalf("events %s", names(evs))
	}
	// Reassemble the tool input from its input_json_delta chunks.
	var text, input strings.Builder
	for _, e := range evs {
		if e.name != "content_block_delta" {
			continue
		}
		d := e.data["delta"].(map[string]any)
		switch d["type"] {
		case "text_delta":
			text.WriteString(d["text"].(string))
		case "input_json_delta":
			input.WriteString(d["partial_json"].(string))
		}
	}
	var in map[string]any
	if err := json.Unmarshal([]byte(input.String()), &in); err != nil || in["file_path"] != "/w/a.txt" || text.String() != "Let me write it." {
		t.Errorf("text %q input %q (%v)", text.String(), input.String(), err)
	}
	tool := evs[5].data["content_block"].(map[string]any)
	if tool["type"] != "tool_use" || tool["name"] != "Write" || !strings.HasPrefix(tool["id"].(string), "toolu_agenttest_") {
		t.Errorf("tool block %v", tool)
	}
	md := evs[9].data
	if md["delta"].(map[string]any)["stop_reason"] != "tool_use" || md["usage"].(map[string]any)["output_tokens"] != float64(7) {
		t.Errorf("message_delta %v", md)
	}
	if evs[0].data["message"].(map[string]any)["model"] != "claude-x" {
		t.Errorf("message_start %v", evs[0].data)
	}

	second := `{"model":"claude-x","stream":true,"messages":[{"role":"user","content":"write a.txt"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Write","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}]}`
	_, evs = post(t, srv.URL+"/v1/messages", "k1", second)
	if names(evs) != "message_start,content_block_start,content_block_delta,content_block_delta,content_block_stop,message_delta,message_stop" {
		t.Fatalf("second reply events %s", names(evs))
	}
	if evs[5].data["delta"].(map[string]any)["stop_reason"] != "end_turn" {
		t.Errorf("second reply is not end_turn")
	}

	reqs := srv.ModelRequests()
	if len(reqs) != 2 || reqs[0].ToolResults != 0 || reqs[1].ToolResults != 1 || reqs[0].Reply != 0 || reqs[1].Reply != 1 {
		t.Fatalf("recorded %+v", reqs)
	}
	if reqs[1].AssistantTurns != 1 || reqs[0].Key() != "k1" || !reqs[0].Stream || reqs[0].Model != "claude-x" || !reqs[1].Contains("write a.txt") {
		t.Errorf("recorded %+v", reqs[1])
	}
}

func TestAnthropicErrorsAndOtherEndpoints(t *testing.T) {
	srv := NewAnthropic(Script{Replies: []Reply{{Status: 401}}})
	defer srv.Close()
	status, evs := post(t, srv.URL+"/v1/messages", "bad", `{"stream":true,"messages":[]}`)
	e := evs[0].data["error"].(map[string]any)
	if status != 401 || evs[0].data["type"] != "error" || e["type"] != "authentication_error" || e["message"] != "invalid x-api-key" {
		t.Errorf("401 answer %d %v", status, evs[0].data)
	}
	status, evs = post(t, srv.URL+"/v1/messages/count_tokens", "bad", `{"messages":[]}`)
	if status != 200 || evs[0].data["input_tokens"] != float64(10) {
		t.Errorf("count_tokens %d %v", status, evs[0].data)
	}
	status, _ = post(t, srv.URL+"/v1/complete", "bad", `{}`)
	if status != 404 {
		t.Errorf("unknown endpoint %d", status)
	}
	if all, model := srv.Requests(), srv.ModelRequests(); len(all) != 3 || len(model) != 1 || all[2].Reply != -1 {
		t.Errorf("recorded %d requests, %d to the model", len(all), len(model))
	}

	srv529 := NewAnthropic(Script{Replies: []Reply{{Status: 529}}})
	defer srv529.Close()
	if _, evs := post(t, srv529.URL+"/v1/messages", "k", `{}`); evs[0].data["error"].(map[string]any)["type"] != "overloaded_error" {
		t.Errorf("529 answer %v", evs[0].data)
	}
}

func TestAnthropicNonStreaming(t *testing.T) {
	srv := NewAnthropic(Script{Replies: []Reply{{Text: "hi", Tools: []ToolCall{{ID: "t-9", Name: "Bash", Input: map[string]any{"command": "ls"}}}}}})
	defer srv.Close()
	status, evs := post(t, srv.URL+"/v1/messages", "k", `{"model":"m","messages":[]}`)
	m := evs[0].data
	content := m["content"].([]any)
	if status != 200 || m["stop_reason"] != "tool_use" || len(content) != 2 || content[1].(map[string]any)["id"] != "t-9" ||
		content[1].(map[string]any)["input"].(map[string]any)["command"] != "ls" {
		t.Errorf("non-streaming answer %v", m)
	}
}

func TestOpenAIStreamsFunctionCalls(t *testing.T) {
	srv := NewOpenAI(Script{Replies: []Reply{
		{Tools: []ToolCall{{Name: "exec_command", Input: map[string]any{"cmd": "echo hi > out.txt"}}}, InputTokens: 20, OutputTokens: 10},
		{Text: "Done: wrote out.txt"},
	}})
	defer srv.Close()
	if !strings.HasSuffix(srv.URL, "/v1") {
		t.Fatalf("URL %s", srv.URL)
	}
	status, evs := post(t, srv.URL+"/responses", "k", `{"model":"gpt-x","stream":true,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]}]}`)
	if status != 200 || names(evs) != "response.created,response.output_item.done,response.completed" {
		t.Fatalf("%d %s", status, names(evs))
	}
	item := evs[1].data["item"].(map[string]any)
	var args map[string]any
	if item["type"] != "function_call" || item["name"] != "exec_command" || json.Unmarshal([]byte(item["arguments"].(string)), &args) != nil || args["cmd"] != "echo hi > out.txt" {
		t.Errorf("item %v", item)
	}
	resp := evs[2].data["response"].(map[string]any)
	usage := resp["usage"].(map[string]any)
	if resp["status"] != "completed" || usage["input_tokens"] != float64(20) || usage["total_tokens"] != float64(30) || resp["model"] != "gpt-x" {
		t.Errorf("completed %v", resp)
	}
	for i, e := range evs {
		if e.data["sequence_number"] != float64(i) {
			t.Errorf("event %d sequence_number %v", i, e.data["sequence_number"])
		}
	}

	body := `{"stream":true,"input":[{"type":"message","role":"user","content":[]},` +
		`{"type":"function_call","call_id":"c1","name":"exec_command","arguments":"{}"},{"type":"function_call","call_id":"c2","name":"exec_command","arguments":"{}"},` +
		`{"type":"function_call_output","call_id":"c1","output":"hi"},{"type":"function_call_output","call_id":"c2","output":"hi"}]}`
	_, evs = post(t, srv.URL+"/responses", "k", body)
	msg := evs[1].data["item"].(map[string]any)
	if msg["type"] != "message" || msg["content"].([]any)[0].(map[string]any)["text"] != "Done: wrote out.txt" {
		t.Errorf("message item %v", msg)
	}
	reqs := srv.ModelRequests()
	if len(reqs) != 2 || reqs[1].ToolResults != 2 || reqs[1].AssistantTurns != 1 || reqs[1].Reply != 1 {
		t.Errorf("recorded %+v", reqs)
	}
}

func TestOpenAIErrors(t *testing.T) {
	srv := NewOpenAI(Script{Replies: []Reply{{Status: 401}}})
	defer srv.Close()
	status, evs := post(t, srv.URL+"/responses", "k", `{"stream":true,"input":[]}`)
	e := evs[0].data["error"].(map[string]any)
	if status != 401 || e["code"] != "invalid_api_key" || e["message"] != "Incorrect API key provided" {
		t.Errorf("%d %v", status, evs[0].data)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/models", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("models: %v %v", resp, err)
	}
	resp.Body.Close()
}

func TestPickAndDelay(t *testing.T) {
	srv := NewAnthropic(Script{
		Replies: []Reply{{Text: "a"}, {Text: "b", Delay: 50 * time.Millisecond}},
		Pick:    func(r *Request) int { return 99 }, // clamped to the last reply
	})
	defer srv.Close()
	start := time.Now()
	_, evs := post(t, srv.URL+"/v1/messages", "k", `{"messages":[]}`)
	if time.Since(start) < 50*time.Millisecond || evs[0].data["content"].([]any)[0].(map[string]any)["text"] != "b" {
		t.Errorf("got %v after %v", evs[0].data, time.Since(start))
	}
	empty := NewOpenAI(Script{})
	defer empty.Close()
	if status, _ := post(t, empty.URL+"/responses", "k", `{}`); status != 500 {
		t.Errorf("a script without replies answered %d", status)
	}
}

func TestGeminiStreamsAndUtilityCalls(t *testing.T) {
	srv := NewGemini(Script{Replies: []Reply{
		{Text: "Let me write it.", Tools: []ToolCall{{Name: "write_file", Input: map[string]any{"file_path": "/w/a.txt", "content": "hi\n"}}}, InputTokens: 42, OutputTokens: 7},
		{Status: 400},
	}})
	defer srv.Close()
	// A utility call (the router's classifier) asks for JSON: answered from
	// its schema, no scripted reply spent.
	router := `{"contents":[{"role":"user","parts":[{"text":"route"}]}],"generationConfig":{"responseMimeType":"application/json","responseJsonSchema":{"type":"object","properties":{"complexity_reasoning":{"type":"string"},"complexity_score":{"type":"integer","minimum":1,"maximum":100}},"required":["complexity_reasoning","complexity_score"]}}}`
	status, evs := post(t, srv.URL+"/v1beta/models/gemini-flash-lite:generateContent", "k", router)
	if status != 200 || len(evs) != 1 {
		t.Fatalf("router: status %d, %v", status, evs)
	}
	text := evs[0].data["candidates"].([]any)[0].(map[string]any)["content"].(map[string]any)["parts"].([]any)[0].(map[string]any)["text"].(string)
	if text != `{"complexity_reasoning":"agenttest","complexity_score":50}` {
		t.Errorf("router answer %s", text)
	}
	resp, err := http.Post(srv.URL+"/v1beta/models/gemini-pro:streamGenerateContent?alt=sse", "application/json",
		strings.NewReader(`{"contents":[{"role":"user","parts":[{"text":"write a.txt"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var chunks []map[string]any
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(d), &m); err != nil {
				t.Fatal(err)
			}
			chunks = append(chunks, m)
		}
	}
	resp.Body.Close()
	if len(chunks) != 3 { // two text halves, the function call
		t.Fatalf("%d chunks: %v", len(chunks), chunks)
	}
	last := chunks[2]
	if u := last["usageMetadata"].(map[string]any); u["promptTokenCount"] != float64(42) || u["candidatesTokenCount"] != float64(7) {
		t.Errorf("usage %v", u)
	}
	fc := last["candidates"].([]any)[0].(map[string]any)["content"].(map[string]any)["parts"].([]any)[0].(map[string]any)["functionCall"].(map[string]any)
	if fc["name"] != "write_file" || fc["args"].(map[string]any)["file_path"] != "/w/a.txt" {
		t.Errorf("function call %v", fc)
	}
	// The next request carries a function response: the second reply, a
	// 400 with the API's words for a bad key.
	next := `{"contents":[{"role":"user","parts":[{"text":"write a.txt"}]},{"role":"model","parts":[{"functionCall":{"name":"write_file","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"name":"write_file","response":{}}}]}]}`
	status, evs = post(t, srv.URL+"/v1beta/models/gemini-pro:generateContent", "k", next)
	if e := evs[0].data["error"].(map[string]any); status != 400 || e["status"] != "INVALID_ARGUMENT" || !strings.Contains(e["message"].(string), "API key not valid") {
		t.Errorf("status %d, body %v", status, evs[0].data)
	}
	reqs := srv.ModelRequests()
	if len(reqs) != 2 || reqs[0].Model != "gemini-pro" || !reqs[0].Stream || reqs[1].ToolResults != 1 || reqs[1].AssistantTurns != 1 {
		t.Errorf("model requests %+v", reqs)
	}
	if all := srv.Requests(); len(all) != 3 || all[0].Reply != -1 {
		t.Errorf("the utility call was not recorded apart: %+v", all)
	}
}
