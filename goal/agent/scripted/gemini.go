package scripted

import (
	"encoding/json"
	"net/http"
	"strings"
)

// GeminiModel is the model name the Gemini server reports when the request
// path names none.
const GeminiModel = "gemini-agenttest"

// NewGemini starts a scripted Gemini API server (the API the Gemini CLI's
// SDK, @google/genai, speaks; its base URL is GOOGLE_GEMINI_BASE_URL):
//
//   - POST /{version}/models/{model}:streamGenerateContent (with ?alt=sse)
//     answers with server-sent events ("data: {…}" lines, no event names):
//     the text split in two chunks, then one chunk per function call, the
//     last chunk carrying finishReason STOP and usageMetadata;
//     :generateContent answers the same GenerateContentResponse as one
//     JSON object;
//   - a request asking for JSON (generationConfig.responseMimeType
//     "application/json": the CLI's own utility calls, such as its model
//     router's complexity classifier) is answered with an object that
//     fills the request's response schema (required properties, first
//     enum value, numbers at the middle of their range) and is not a
//     scripted model request: it is recorded with Reply -1 and never
//     consumes a reply;
//   - :countTokens answers {"totalTokens": …};
//   - a Reply with Status answers that HTTP status with the API's error
//     body {"error":{"code","message","status"}} (400 INVALID_ARGUMENT,
//     401 UNAUTHENTICATED, 403 PERMISSION_DENIED, 429 RESOURCE_EXHAUSTED,
//     500 INTERNAL, 503 UNAVAILABLE; ErrorType replaces the status word,
//     ErrorMessage the message);
//   - anything else is 404 (and recorded, with Reply -1).
//
// Tool calls are Gemini function calls (Name: a Gemini CLI tool such as
// "write_file" or "run_shell_command"; Input: the args object); a request's
// ToolResults counts its functionResponse parts, AssistantTurns its
// contents with role "model".
func NewGemini(script Script) *Server {
	s := &Server{script: script, model: GeminiModel}
	s.URL = s.start(s.serveGemini)
	return s
}

func geminiCount(m map[string]any, rec *Request) {
	contents, _ := m["contents"].([]any)
	for _, c := range contents {
		cm, _ := c.(map[string]any)
		if cm["role"] == "model" {
			rec.AssistantTurns++
		}
		parts, _ := cm["parts"].([]any)
		for _, p := range parts {
			if pm, _ := p.(map[string]any); pm["functionResponse"] != nil {
				rec.ToolResults++
			}
		}
	}
}

// geminiStatus is the google.rpc status word the Gemini API gives an HTTP
// status in its error body.
var geminiStatus = map[int]string{
	400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
	429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED",
}

// geminiMessages are the messages the real API gives (401 and 400 are the
// words it uses for a bad key).
var geminiMessages = map[int]string{
	400: "API key not valid. Please pass a valid API key.",
	401: "API key not valid. Please pass a valid API key.",
	429: "Resource has been exhausted (e.g. check quota).",
	500: "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting",
	503: "The model is overloaded. Please try again later.",
}

// geminiModelPath splits "/v1beta/models/gemini-x:streamGenerateContent"
// into the model and the method.
func geminiModelPath(p string) (model, method string, ok bool) {
	i := strings.Index(p, "/models/")
	if i < 0 {
		return "", "", false
	}
	rest := p[i+len("/models/"):]
	model, method, ok = strings.Cut(rest, ":")
	return model, method, ok && model != "" && !strings.Contains(model, "/")
}

func (s *Server) serveGemini(w http.ResponseWriter, r *http.Request) {
	model, method, ok := geminiModelPath(strings.TrimSuffix(r.URL.Path, "/"))
	if !ok || r.Method != http.MethodPost {
		s.record(r, nil)
		geminiError(w, http.StatusNotFound, "NOT_FOUND", "agenttest: no such endpoint "+r.URL.Path)
		return
	}
	switch method {
	case "countTokens":
		s.record(r, nil)
		writeJSON(w, http.StatusOK, map[string]any{"totalTokens": 10})
		return
	case "generateContent", "streamGenerateContent":
	default:
		s.record(r, nil)
		geminiError(w, http.StatusNotFound, "NOT_FOUND", "agenttest: no such method "+method)
		return
	}
	stream := method == "streamGenerateContent"
	var body map[string]any
	rec := s.record(r, func(m map[string]any, rec *Request) {
		body = m
		geminiCount(m, rec)
	})
	rec.Model, rec.Stream = model, stream
	s.mu.Lock()
	s.requests[rec.N].Model, s.requests[rec.N].Stream = model, stream
	s.mu.Unlock()
	if schema, isJSON := geminiJSONRequest(body); isJSON {
		// The CLI's own utility call (router, next-speaker check): answer
		// it without spending a scripted reply. A scripted error still
		// applies, so an auth or quota failure fails it too.
		if len(s.script.Replies) > 0 {
			if rp := s.script.Replies[0]; rp.Status != 0 && rp.Status != http.StatusOK {
				s.geminiReplyError(w, rp)
				return
			}
		}
		b, _ := json.Marshal(fillSchema(schema, 0))
		resp := geminiResponse(model, []any{map[string]any{"text": string(b)}}, 10, 5)
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			sseData(w, resp)
			return
		}
		writeJSON(w, http.StatusOK, resp)
		return
	}
	reply, _ := s.pick(rec)
	if !wait(r, reply.Delay) {
		return
	}
	if reply.Status != 0 && reply.Status != http.StatusOK {
		s.geminiReplyError(w, reply)
		return
	}
	in, out := tokens(reply.InputTokens, 10), tokens(reply.OutputTokens, 5)
	var calls []any
	for _, tc := range reply.Tools {
		fc := map[string]any{"name": tc.Name, "args": json.RawMessage(marshalInput(tc.Input))}
		if tc.ID != "" {
			fc["id"] = tc.ID
		}
		calls = append(calls, map[string]any{"functionCall": fc})
	}
	if !stream {
		var parts []any
		if reply.Text != "" {
			parts = append(parts, map[string]any{"text": reply.Text})
		}
		writeJSON(w, http.StatusOK, geminiResponse(model, append(parts, calls...), in, out))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	var chunks [][]any
	if reply.Text != "" {
		for _, part := range split(reply.Text) {
			chunks = append(chunks, []any{map[string]any{"text": part}})
		}
	}
	for _, c := range calls {
		chunks = append(chunks, []any{c})
	}
	if len(chunks) == 0 {
		chunks = append(chunks, []any{map[string]any{"text": ""}})
	}
	for i, parts := range chunks {
		c := geminiCandidate(parts)
		if i < len(chunks)-1 {
			delete(c, "finishReason")
			sseData(w, map[string]any{"candidates": []any{c}, "modelVersion": model})
			continue
		}
		resp := geminiResponse(model, parts, in, out)
		sseData(w, resp)
	}
}

func (s *Server) geminiReplyError(w http.ResponseWriter, reply Reply) {
	status := reply.ErrorType
	if status == "" {
		status = geminiStatus[reply.Status]
		if status == "" {
			status = "UNKNOWN"
		}
	}
	msg := reply.ErrorMessage
	if msg == "" {
		msg = geminiMessages[reply.Status]
		if msg == "" {
			msg = "agenttest: scripted HTTP " + http.StatusText(reply.Status)
		}
	}
	geminiError(w, reply.Status, status, msg)
}

func geminiError(w http.ResponseWriter, code int, status, msg string) {
	writeJSON(w, code, map[string]any{"error": map[string]any{"code": code, "message": msg, "status": status}})
}

func geminiCandidate(parts []any) map[string]any {
	return map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
}

func geminiResponse(model string, parts []any, in, out int) map[string]any {
	return map[string]any{
		"candidates":    []any{geminiCandidate(parts)},
		"usageMetadata": map[string]any{"promptTokenCount": in, "candidatesTokenCount": out, "totalTokenCount": in + out},
		"modelVersion":  model,
	}
}

// sseData writes one server-sent event of the Gemini API (a data line
// only) and flushes it.
func sseData(w http.ResponseWriter, data any) {
	b, _ := json.Marshal(data)
	w.Write([]byte("data: "))
	w.Write(b)
	w.Write([]byte("\r\n\r\n"))
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// geminiJSONRequest reports whether the request asks for a JSON answer
// (generationConfig.responseMimeType "application/json") and returns its
// response schema (responseJsonSchema or responseSchema; nil when none).
func geminiJSONRequest(body map[string]any) (map[string]any, bool) {
	gc, _ := body["generationConfig"].(map[string]any)
	if gc == nil {
		return nil, false
	}
	if mt, _ := gc["responseMimeType"].(string); mt != "application/json" {
		return nil, false
	}
	for _, k := range []string{"responseJsonSchema", "responseSchema"} {
		if s, ok := gc[k].(map[string]any); ok {
			return s, true
		}
	}
	return nil, true
}

// fillSchema makes a value that satisfies a JSON or OpenAPI schema well
// enough for the CLI to parse: objects with their required (else all)
// properties, the first enum value, strings "agenttest", numbers at the
// middle of their range (50 when unbounded), booleans false.
func fillSchema(schema map[string]any, depth int) any {
	if schema == nil || depth > 8 {
		return map[string]any{}
	}
	if e, ok := schema["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	typ, _ := schema["type"].(string)
	switch strings.ToLower(typ) {
	case "object", "":
		props, _ := schema["properties"].(map[string]any)
		keys := map[string]bool{}
		if req, ok := schema["required"].([]any); ok && len(req) > 0 {
			for _, k := range req {
				if ks, ok := k.(string); ok {
					keys[ks] = true
				}
			}
		} else {
			for k := range props {
				keys[k] = true
			}
		}
		out := map[string]any{}
		for k := range keys {
			ps, _ := props[k].(map[string]any)
			out[k] = fillSchema(ps, depth+1)
		}
		return out
	case "array":
		return []any{}
	case "string":
		return "agenttest"
	case "integer", "number":
		lo, hasLo := schema["minimum"].(float64)
		hi, hasHi := schema["maximum"].(float64)
		switch {
		case hasLo && hasHi:
			return int((lo + hi) / 2)
		case hasLo:
			return int(lo)
		case hasHi:
			return int(hi)
		}
		return 50
	case "boolean":
		return false
	}
	return nil
}
