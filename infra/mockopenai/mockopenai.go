// Package mockopenai provides a scripted, OpenAI-compatible Chat Completions server for tests and
// benchmarks. It speaks the documented wire shape (streaming and not), answers deterministically
// from a Script, and records the requests it received.
package mockopenai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Reply is what the model answers to one request: text, tool calls, or both (text first).
type Reply struct {
	Text string
	// ToolCalls with an empty ID get call_<n>, n counting the server's tool calls from 1;
	// an empty Type becomes "function".
	ToolCalls []ToolCall
}

// Script decides the reply to a request. Concurrent requests call it concurrently.
type Script func(*Request) Reply

// Options configure a Server; the zero value gives the defaults.
type Options struct {
	// Script answers each request; nil means DefaultScript.
	Script Script
	// ChunkDelay is waited before each streamed chunk, to imitate token pacing.
	ChunkDelay time.Duration
	// Now stamps the "created" field; nil means time.Now.
	Now func() time.Time
	// NoRecord turns request recording off, for long-running servers nobody asks.
	NoRecord bool
}

// Server is an http.Handler serving POST /v1/chat/completions and POST /chat/completions.
type Server struct {
	opts Options
	mux  *http.ServeMux

	mu          sync.Mutex
	requests    []Request
	completions int
	toolCalls   int
}

// New returns a Server; opts may be nil.
func New(opts *Options) *Server {
	s := &Server{mux: http.NewServeMux()}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.Script == nil {
		s.opts.Script = DefaultScript
	}
	if s.opts.Now == nil {
		s.opts.Now = time.Now
	}
	s.mux.HandleFunc("POST /v1/chat/completions", s.complete)
	s.mux.HandleFunc("POST /chat/completions", s.complete)
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mux.ServeHTTP(w, r)
}

// Requests returns a copy of the requests received so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// DefaultScript answers a trailing run of tool results with a text quoting their content;
// otherwise it calls the offered tool (the first, or the one tool_choice forces) with {}
// arguments; with no tool on offer it echoes the last message.
func DefaultScript(r *Request) Reply {
	var results []string
	for i := len(r.Messages) - 1; i >= 0 && r.Messages[i].Role == "tool"; i-- {
		results = append([]string{r.Messages[i].Text()}, results...)
	}
	if len(results) > 0 {
		return Reply{Text: "The tool returned: " + strings.Join(results, "; ")}
	}
	if name := r.offeredTool(); name != "" {
		return Reply{ToolCalls: []ToolCall{{Function: FunctionCall{Name: name, Arguments: "{}"}}}}
	}
	var last string
	if n := len(r.Messages); n > 0 {
		last = r.Messages[n-1].Text()
	}
	return Reply{Text: "You said: " + last}
}

// offeredTool is the tool the model may call: none under tool_choice "none", the named one
// when tool_choice forces a function, else the first offered.
func (r *Request) offeredTool() string {
	var choice struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	switch {
	case len(r.Tools) == 0 || bytes.Equal(r.ToolChoice, []byte(`"none"`)):
		return ""
	case json.Unmarshal(r.ToolChoice, &choice) == nil && choice.Function.Name != "":
		return choice.Function.Name
	}
	return r.Tools[0].Function.Name
}

func (s *Server) complete(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("reading body: %v", err))
		return
	}
	var req Request
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("decoding body: %v", err))
		return
	}
	if req.Model == "" || len(req.Messages) == 0 {
		writeError(w, http.StatusBadRequest, "model and messages are required")
		return
	}
	req.Path, req.Body = r.URL.Path, body

	reply := s.opts.Script(&req)
	id := s.record(req, &reply)
	created := s.opts.Now().Unix()
	u := countUsage(&req, &reply)
	if req.Stream {
		s.stream(r.Context(), w, &req, reply, id, created, u)
		return
	}
	writeCompletion(w, &req, reply, id, created, u)
}

// record stores the request and numbers the completion and its tool calls under one lock, so
// ids stay unique and ordered under concurrent requests.
func (s *Server) record(req Request, reply *Reply) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.opts.NoRecord {
		s.requests = append(s.requests, req)
	}
	s.completions++
	calls := make([]ToolCall, len(reply.ToolCalls))
	for i, c := range reply.ToolCalls {
		s.toolCalls++
		if c.ID == "" {
			c.ID = fmt.Sprintf("call_%d", s.toolCalls)
		}
		if c.Type == "" {
			c.Type = "function"
		}
		calls[i] = c
	}
	reply.ToolCalls = calls
	return fmt.Sprintf("chatcmpl-mock-%d", s.completions)
}

func writeCompletion(w http.ResponseWriter, req *Request, reply Reply, id string, created int64, u usage) {
	msg := responseMessage{Role: "assistant", ToolCalls: reply.ToolCalls}
	if reply.Text != "" || len(reply.ToolCalls) == 0 {
		msg.Content = &reply.Text
	}
	body, err := json.Marshal(completion{
		ID: id, Object: "chat.completion", Created: created, Model: req.Model,
		Choices: []choice{{Message: msg, FinishReason: finishReason(reply)}},
		Usage:   u,
	})
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

// stream writes the reply the way OpenAI streams it: a role chunk, content deltas, per tool
// call a header chunk (id, name, empty arguments) then argument pieces, a finish chunk, an
// optional usage chunk with no choices, and data: [DONE].
func (s *Server) stream(ctx context.Context, w http.ResponseWriter, req *Request, reply Reply, id string, created int64, u usage) {
	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	base := chunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: req.Model}
	if includeUsage {
		base.Usage = json.RawMessage("null")
	}
	var deltas []delta
	if reply.Text != "" || len(reply.ToolCalls) == 0 {
		empty := ""
		deltas = append(deltas, delta{Role: "assistant", Content: &empty})
		for _, word := range strings.SplitAfter(reply.Text, " ") {
			if word != "" {
				deltas = append(deltas, delta{Content: &word})
			}
		}
	}
	for i, c := range reply.ToolCalls {
		deltas = append(deltas, delta{ToolCalls: []toolCallDelta{{
			Index: i, ID: c.ID, Type: c.Type, Function: functionDelta{Name: c.Function.Name},
		}}})
		for _, piece := range pieces(c.Function.Arguments, 8) {
			deltas = append(deltas, delta{ToolCalls: []toolCallDelta{{Index: i, Function: functionDelta{Arguments: piece}}}})
		}
	}
	deltas[0].Role = "assistant"

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	finish := finishReason(reply)
	chunks := make([]chunk, 0, len(deltas)+2)
	for _, d := range deltas {
		c := base
		c.Choices = []chunkChoice{{Delta: d}}
		chunks = append(chunks, c)
	}
	last := base
	last.Choices = []chunkChoice{{FinishReason: &finish}}
	chunks = append(chunks, last)
	if includeUsage {
		c := base
		c.Choices, c.Usage = []chunkChoice{}, u
		chunks = append(chunks, c)
	}
	for _, c := range chunks {
		data, err := json.Marshal(c)
		if err != nil {
			return // headers are sent; the missing [DONE] tells the client
		}
		if s.writeEvent(ctx, w, rc, data) != nil {
			return
		}
	}
	s.writeEvent(ctx, w, rc, []byte("[DONE]"))
}

// writeEvent waits the chunk delay, then writes one SSE event in a single Write and flushes
// it; flushing is best effort, since an unflushable writer still delivers the whole body.
func (s *Server) writeEvent(ctx context.Context, w io.Writer, rc *http.ResponseController, data []byte) error {
	if s.opts.ChunkDelay > 0 {
		t := time.NewTimer(s.opts.ChunkDelay)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	buf := make([]byte, 0, len(data)+8)
	buf = append(buf, "data: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("writing event: %w", err)
	}
	rc.Flush()
	return nil
}

func finishReason(reply Reply) string {
	if len(reply.ToolCalls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

// pieces cuts s into pieces of about n bytes on rune boundaries, so that clients have to
// accumulate streamed arguments; an empty s gives no pieces.
func pieces(s string, n int) []string {
	var out []string
	for len(s) > n {
		cut := n
		for cut < len(s) && !utf8.RuneStart(s[cut]) {
			cut++
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

// countUsage estimates tokens at four bytes each, which is deterministic and close enough.
func countUsage(req *Request, reply *Reply) usage {
	tokens := func(n int) int { return max(1, (n+3)/4) }
	var in, out int
	for _, m := range req.Messages {
		in += len(m.Text())
	}
	out = len(reply.Text)
	for _, c := range reply.ToolCalls {
		out += len(c.Function.Name) + len(c.Function.Arguments)
	}
	u := usage{PromptTokens: tokens(in), CompletionTokens: tokens(out)}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

func writeError(w http.ResponseWriter, status int, msg string) {
	var e errorBody
	e.Error.Message, e.Error.Type = msg, "invalid_request_error"
	if status >= 500 {
		e.Error.Type = "server_error"
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(e)
}
