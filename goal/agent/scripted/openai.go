package scripted

import (
	"net/http"
	"strings"
	"time"
)

// OpenAIModel is the model name the OpenAI server reports when the request
// names none.
const OpenAIModel = "gpt-agenttest"

// NewOpenAI starts a scripted OpenAI Responses API server. Its URL ends in
// /v1 (a Codex provider's base_url):
//
//   - POST /v1/responses (also /responses) with "stream": true answers with
//     server-sent events response.created, then response.output_item.done
//     per output item (the sequence Codex 0.171.0 was seen to accept) — an assistant
//     "message" with an output_text part for Text, a "function_call" (name,
//     call_id, JSON arguments) per tool call — and response.completed with
//     the output and usage (input_tokens, output_tokens, their details,
//     total_tokens); without stream it answers the response object;
//   - GET /v1/models answers an empty list;
//   - a Reply with Status answers that HTTP status with the API's error
//     body {"error":{"message","type","code"}} (401 invalid_api_key, 429
//     rate_limit_exceeded, others server_error unless ErrorType says);
//   - anything else is 404 (and recorded, with Reply -1).
func NewOpenAI(script Script) *Server {
	s := &Server{script: script, model: OpenAIModel}
	s.URL = s.start(s.serveOpenAI) + "/v1"
	return s
}

func openAICount(m map[string]any, rec *Request) {
	items, _ := m["input"].([]any)
	prevCall := false
	for _, it := range items {
		im, _ := it.(map[string]any)
		switch im["type"] {
		case "function_call_output", "custom_tool_call_output":
			rec.ToolResults++
			prevCall = false
		case "function_call", "custom_tool_call":
			if !prevCall {
				rec.AssistantTurns++
			}
			prevCall = true
		default:
			if im["role"] == "assistant" {
				rec.AssistantTurns++
			}
			prevCall = false
		}
	}
}

var openAIErrors = map[int][2]string{ // status → type, code
	400: {"invalid_request_error", "invalid_request"},
	401: {"invalid_request_error", "invalid_api_key"},
	403: {"invalid_request_error", "unsupported_country_region_territory"},
	429: {"requests", "rate_limit_exceeded"},
}

func (s *Server) serveOpenAI(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	if r.Method == http.MethodGet && (path == "/v1/models" || path == "/models") {
		s.record(r, nil)
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{}})
		return
	}
	if r.Method != http.MethodPost || (path != "/v1/responses" && path != "/responses") {
		s.record(r, nil)
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{"message": "agenttest: no such endpoint " + r.URL.Path, "type": "invalid_request_error", "code": "not_found"}})
		return
	}
	rec := s.record(r, openAICount)
	reply, _ := s.pick(rec)
	if !wait(r, reply.Delay) {
		return
	}
	if reply.Status != 0 && reply.Status != http.StatusOK {
		typ, code := "server_error", "server_error"
		if e, ok := openAIErrors[reply.Status]; ok {
			typ, code = e[0], e[1]
		}
		if reply.ErrorType != "" {
			typ = reply.ErrorType
		}
		msg := reply.ErrorMessage
		if msg == "" {
			msg = "agenttest: scripted HTTP " + http.StatusText(reply.Status)
			if reply.Status == http.StatusUnauthorized {
				msg = "Incorrect API key provided"
			}
		}
		writeJSON(w, reply.Status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code}})
		return
	}
	model := rec.Model
	if model == "" {
		model = s.model
	}
	respID := s.genID("resp_agenttest_")
	var output []any
	if reply.Text != "" {
		output = append(output, map[string]any{
			"type": "message", "id": s.genID("msg_agenttest_"), "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": reply.Text, "annotations": []any{}}},
		})
	}
	for _, tc := range reply.Tools {
		id := tc.ID
		if id == "" {
			id = s.genID("call_agenttest_")
		}
		output = append(output, map[string]any{
			"type": "function_call", "id": s.genID("fc_agenttest_"), "call_id": id, "name": tc.Name,
			"arguments": string(marshalInput(tc.Input)), "status": "completed",
		})
	}
	in, out := tokens(reply.InputTokens, 10), tokens(reply.OutputTokens, 5)
	usage := map[string]any{
		"input_tokens": in, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": out, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens": in + out,
	}
	created := time.Now().Unix()
	response := func(status string, out []any) map[string]any {
		m := map[string]any{"id": respID, "object": "response", "created_at": created, "status": status, "model": model, "output": out}
		if status == "completed" {
			m["usage"] = usage
		}
		return m
	}
	if !rec.Stream {
		writeJSON(w, http.StatusOK, response("completed", output))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	seq := 0
	event := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		sse(w, typ, fields)
	}
	event("response.created", map[string]any{"response": response("in_progress", []any{})})
	for i, item := range output {
		event("response.output_item.done", map[string]any{"output_index": i, "item": item})
	}
	event("response.completed", map[string]any{"response": response("completed", output)})
}
