// Package scripted provides scripted model API servers on loopback for
// testing goalrun against the real agent CLIs: an Anthropic Messages API
// server (Claude Code), an OpenAI Responses API server (Codex) and a Gemini
// API server (the Gemini CLI), streaming as the real APIs do.
//
// A Script says what the "model" answers: for each request the server picks
// one Reply — text, tool calls, or an HTTP error — by default from how many
// tool results (Anthropic tool_result blocks, OpenAI function_call_output
// items) the request already carries, so a CLI that retries, resumes or
// sends side requests gets consistent answers without the server keeping
// conversation state. Every request is recorded (method, path, headers with
// the key, body, tool-result count, the reply chosen) for assertions.
//
//	srv := scripted.NewAnthropic(scripted.Script{Replies: []scripted.Reply{
//		{Tools: []scripted.ToolCall{{Name: "Write", Input: map[string]any{"file_path": p, "content": "hi\n"}}}},
//		{Text: "Wrote the file."},
//	}})
//	defer srv.Close()
//	// ANTHROPIC_BASE_URL=srv.URL claude -p …
package scripted

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Reply is the scripted answer to one request.
type Reply struct {
	// Status, when non-zero and not 200, makes the server answer with this
	// HTTP status and the API's error body (ErrorType, ErrorMessage; a
	// default per status when empty) instead of a response.
	Status       int
	ErrorType    string
	ErrorMessage string
	// Text is the assistant's text ("" for none).
	Text string
	// Tools are the tool calls the model makes, in order, after Text.
	Tools []ToolCall
	// InputTokens and OutputTokens are the usage the response reports;
	// zero means 10 and 5.
	InputTokens, OutputTokens int
	// Delay is waited before answering (a slow model; the request's context
	// cuts it short).
	Delay time.Duration
}

// ToolCall is one tool call the model makes.
type ToolCall struct {
	// ID is the call id; "" means a generated one ("toolu_agenttest_N" /
	// "call_agenttest_N", N counting from 1 per server).
	ID string
	// Name is the tool: a Claude Code tool ("Write", "Bash", …) for the
	// Anthropic server, a Codex function ("exec_command", …) for the OpenAI
	// server.
	Name string
	// Input is the call's parameters, marshalled to JSON: the tool_use
	// input object (Anthropic) or the function_call arguments (OpenAI).
	Input any
}

// Script drives a server.
type Script struct {
	// Replies are the answers; Pick chooses one per request.
	Replies []Reply
	// Pick returns the index of the reply for a request (clamped to the
	// last reply); nil means ByToolResults.
	Pick func(r *Request) int
}

// ByToolResults picks the reply by the number of tool results the request
// carries: a fresh conversation gets Replies[0], the request after the
// first tool call Replies[1], and so on.
func ByToolResults(r *Request) int { return r.ToolResults }

// ByAssistantTurns picks the reply by the number of assistant messages in
// the request's history (Anthropic "assistant" messages; OpenAI assistant
// message and function_call items, consecutive calls counted once), so a
// resumed session continues with the next reply even when its new turn
// starts without a tool result.
func ByAssistantTurns(r *Request) int { return r.AssistantTurns }

// Request is one request a server received.
type Request struct {
	// N is the request's 0-based arrival number.
	N      int
	Time   time.Time
	Method string
	Path   string
	// Header holds the request headers, the API key included (x-api-key
	// or Authorization).
	Header http.Header
	// Body is the raw request body.
	Body []byte
	// Model and Stream are read from the body.
	Model  string
	Stream bool
	// ToolResults counts tool_result blocks (Anthropic) or
	// function_call_output items (OpenAI) in the request.
	ToolResults int
	// AssistantTurns counts the assistant turns in the request's history.
	AssistantTurns int
	// Reply is the index of the reply given, -1 for requests the script
	// did not answer (unknown paths, the Gemini CLI's utility calls).
	Reply int
}

// Key returns the API key the request carried: x-api-key, else the bearer
// token of Authorization.
func (r Request) Key() string {
	if k := r.Header.Get("x-api-key"); k != "" {
		return k
	}
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

// Contains reports whether the raw body contains s (JSON-escaped as the
// client sent it, so prefer plain words).
func (r Request) Contains(s string) bool { return bytes.Contains(r.Body, []byte(s)) }

// Server is a scripted model API server on 127.0.0.1.
type Server struct {
	// URL is the base URL to give the CLI: "http://127.0.0.1:PORT" for the
	// Anthropic server (ANTHROPIC_BASE_URL), "http://127.0.0.1:PORT/v1" for
	// the OpenAI server (a Codex provider's base_url).
	URL string

	srv      *http.Server
	closeMu  sync.Mutex     // guards closed and handlers.Add
	closed   bool           // Close has begun: no request is answered
	handlers sync.WaitGroup // requests being answered
	script   Script
	model    string

	mu       sync.Mutex
	requests []Request
	nextID   int
}

// Requests returns a copy of the requests received so far, in arrival
// order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// ModelRequests returns the requests to the model endpoint only
// (POST …/messages or …/responses), in arrival order.
func (s *Server) ModelRequests() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Reply >= 0 {
			out = append(out, r)
		}
	}
	return out
}

// start serves h on a new listener on 127.0.0.1 (a port the kernel picks)
// and returns its base URL, "http://127.0.0.1:PORT". It panics when no
// loopback port can be had, as net/http/httptest's NewServer does; the
// package uses no httptest so that the goalrun binary, whose demo serves a
// script, links no test helper.
func (s *Server) start(h http.HandlerFunc) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("scripted: listening on 127.0.0.1: %v", err))
	}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.closeMu.Lock()
		if s.closed {
			s.closeMu.Unlock()
			http.Error(w, "scripted: server closed", http.StatusServiceUnavailable)
			return
		}
		s.handlers.Add(1)
		s.closeMu.Unlock()
		defer s.handlers.Done()
		h(w, r)
	})}
	go func() { _ = s.srv.Serve(ln) }() // http.ErrServerClosed once Close runs
	return "http://" + ln.Addr().String()
}

// Close shuts the server down, cutting open connections, and returns once
// every request being answered has ended.
func (s *Server) Close() {
	s.closeMu.Lock()
	s.closed = true
	s.closeMu.Unlock()
	_ = s.srv.Close()
	s.handlers.Wait()
}

func (s *Server) genID(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	return fmt.Sprintf("%s%d", prefix, s.nextID)
}

// record reads the request and stores it; count fills the protocol's
// counters from the decoded body.
func (s *Server) record(r *http.Request, count func(body map[string]any, rec *Request)) *Request {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	rec := Request{Time: time.Now(), Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Reply: -1}
	var m map[string]any
	if json.Unmarshal(body, &m) == nil {
		rec.Model, _ = m["model"].(string)
		rec.Stream, _ = m["stream"].(bool)
		if count != nil {
			count(m, &rec)
		}
	}
	s.mu.Lock()
	rec.N = len(s.requests)
	s.requests = append(s.requests, rec)
	s.mu.Unlock()
	return &rec
}

// pick chooses the reply for rec and stores the choice.
func (s *Server) pick(rec *Request) (Reply, int) {
	if len(s.script.Replies) == 0 {
		return Reply{Status: http.StatusInternalServerError, ErrorMessage: "agenttest: the script has no replies"}, 0
	}
	pick := s.script.Pick
	if pick == nil {
		pick = ByToolResults
	}
	i := min(max(pick(rec), 0), len(s.script.Replies)-1)
	s.mu.Lock()
	s.requests[rec.N].Reply = i
	s.mu.Unlock()
	rec.Reply = i
	return s.script.Replies[i], i
}

func wait(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

func tokens(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}

// sse writes one server-sent event and flushes it.
func sse(w http.ResponseWriter, event string, data any) {
	b, _ := json.Marshal(data)
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func marshalInput(v any) []byte {
	if v == nil {
		return []byte("{}")
	}
	if raw, ok := v.(json.RawMessage); ok {
		return raw
	}
	b, err := json.Marshal(v)
	if err != nil {
		return []byte("{}")
	}
	return b
}

// split cuts s into two halves, so clients must join streamed deltas.
func split(s string) []string {
	if len(s) < 2 {
		return []string{s}
	}
	return []string{s[:len(s)/2], s[len(s)/2:]}
}
