package scripted

import (
	"encoding/json"
	"net/http"
	"strings"
)

// AnthropicModel is the model name the Anthropic server reports when the
// request names none.
const AnthropicModel = "claude-agenttest"

// NewAnthropic starts a scripted Anthropic Messages API server:
//
//   - POST /v1/messages with "stream": true answers with server-sent
//     events message_start, then per content block content_block_start,
//     content_block_delta (text_delta, or input_json_delta with the tool
//     input split in two chunks) and content_block_stop, then message_delta
//     (stop_reason "tool_use" or "end_turn", usage) and message_stop;
//     without stream it answers one JSON message;
//   - POST /v1/messages/count_tokens answers {"input_tokens": …};
//   - a Reply with Status answers that HTTP status with the API's error
//     body {"type":"error","error":{"type","message"}} (401
//     authentication_error, 403 permission_error, 429 rate_limit_error,
//     529 overloaded_error, others api_error unless ErrorType says);
//   - anything else is 404 (and recorded, with Reply -1).
func NewAnthropic(script Script) *Server {
	s := &Server{script: script, model: AnthropicModel}
	s.URL = s.start(s.serveAnthropic)
	return s
}

func anthropicCount(m map[string]any, rec *Request) {
	msgs, _ := m["messages"].([]any)
	for _, mm := range msgs {
		msg, _ := mm.(map[string]any)
		if msg["role"] == "assistant" {
			rec.AssistantTurns++
		}
		blocks, _ := msg["content"].([]any)
		for _, b := range blocks {
			if bm, _ := b.(map[string]any); bm["type"] == "tool_result" {
				rec.ToolResults++
			}
		}
	}
}

var anthropicErrorTypes = map[int]string{
	400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
	413: "request_too_large", 429: "rate_limit_error", 500: "api_error", 529: "overloaded_error",
}

func (s *Server) serveAnthropic(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	if r.Method == http.MethodPost && path == "/v1/messages/count_tokens" {
		s.record(r, nil)
		writeJSON(w, http.StatusOK, map[string]any{"input_tokens": 10})
		return
	}
	if r.Method != http.MethodPost || path != "/v1/messages" {
		s.record(r, nil)
		writeJSON(w, http.StatusNotFound, map[string]any{"type": "error", "error": map[string]any{"type": "not_found_error", "message": "agenttest: no such endpoint " + r.URL.Path}})
		return
	}
	rec := s.record(r, anthropicCount)
	reply, _ := s.pick(rec)
	if !wait(r, reply.Delay) {
		return
	}
	if reply.Status != 0 && reply.Status != http.StatusOK {
		typ := reply.ErrorType
		if typ == "" {
			typ = anthropicErrorTypes[reply.Status]
			if typ == "" {
				typ = "api_error"
			}
		}
		msg := reply.ErrorMessage
		if msg == "" {
			msg = "agenttest: scripted HTTP " + http.StatusText(reply.Status)
			if reply.Status == http.StatusUnauthorized {
				msg = "invalid x-api-key"
			}
		}
		w.Header().Set("request-id", s.genID("req_agenttest_"))
		writeJSON(w, reply.Status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
		return
	}
	model := rec.Model
	if model == "" {
		model = s.model
	}
	msgID := s.genID("msg_agenttest_")
	type block struct {
		typ, text, id, name string
		input               []byte
	}
	var blocks []block
	if reply.Text != "" {
		blocks = append(blocks, block{typ: "text", text: reply.Text})
	}
	for _, tc := range reply.Tools {
		id := tc.ID
		if id == "" {
			id = s.genID("toolu_agenttest_")
		}
		blocks = append(blocks, block{typ: "tool_use", id: id, name: tc.Name, input: marshalInput(tc.Input)})
	}
	stop := "end_turn"
	if len(reply.Tools) > 0 {
		stop = "tool_use"
	}
	in, out := tokens(reply.InputTokens, 10), tokens(reply.OutputTokens, 5)

	if !rec.Stream {
		var content []any
		for _, b := range blocks {
			if b.typ == "text" {
				content = append(content, map[string]any{"type": "text", "text": b.text})
			} else {
				content = append(content, map[string]any{"type": "tool_use", "id": b.id, "name": b.name, "input": json.RawMessage(b.input)})
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"id": msgID, "type": "message", "role": "assistant", "model": model, "content": content,
			"stop_reason": stop, "stop_sequence": nil, "usage": map[string]any{"input_tokens": in, "output_tokens": out},
		})
		return
	}

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": msgID, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": in, "output_tokens": 1},
	}})
	for i, b := range blocks {
		if b.typ == "text" {
			sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			for _, part := range split(b.text) {
				sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": part}})
			}
		} else {
			sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "tool_use", "id": b.id, "name": b.name, "input": map[string]any{}}})
			for _, part := range split(string(b.input)) {
				sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
			}
		}
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": out}})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}
