// The wire fixtures in testdata were written by hand, without internet access, to follow
// Anthropic's documented Messages streaming format exactly: named SSE events (event: / data:
// lines) of the documented types and fields, JSON error bodies, and the content-type and
// request-id headers. Each fixture's request body pins what the adapter sends.
//
// `go test ./shared/model/anthropicmodel -record` with ANTHROPIC_API_KEY set re-records the fixtures
// the real API produces on demand (text.json, tool_calls.json, tool_results.json,
// bad_request.json); the model's words, usage and request ids then change, so update the wanted
// events with them. A 429 or an error part-way through a stream cannot be ordered from the API:
// rate_limited.json, rate_limited_long.json and overloaded.json stay hand-written and are
// replayed even under -record, as is context_length.json, Anthropic's refusal of a prompt
// longer than the model's context window, whose short request stands in for one too long to
// keep in testdata. The extended thinking and prompt caching fixtures
// (reasoning.json, reasoning_tools.json, cache_turns.json, cache_off.json) are hand-written
// after the streams and usage Anthropic's extended thinking and prompt caching docs show, and
// are always replayed.
package anthropicmodel_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/wirefixture"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/anthropicmodel"
	"github.com/agentharness/harness/shared/model/modeltest"
	"github.com/anthropics/anthropic-sdk-go"
	"github.com/google/go-cmp/cmp"
)

const testModel = "claude-haiku-4-5"

var (
	weatherSpec = model.ToolSpec{
		Name:        "weather",
		Description: "Forecast for a city.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"],"additionalProperties":false}`),
	}
	timeSpec = model.ToolSpec{
		Name:        "current_time",
		Description: "The current time in Oslo.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{}}`),
	}
)

// serve replays testdata/name and returns a model that calls it, and the requests it received.
// Under -record a recordable fixture is recorded from the real API with the real key; the
// others are replayed as always.
func serve(t *testing.T, name string, recordable bool, settings model.Settings) (*anthropicmodel.Model, func() []wirefixture.Captured) {
	t.Helper()
	return serveConfig(t, name, recordable, anthropicmodel.Config{Settings: settings})
}

// serveConfig is serve for a model block with more than settings (reasoning, cache).
func serveConfig(t *testing.T, name string, recordable bool, cfg anthropicmodel.Config) (*anthropicmodel.Model, func() []wirefixture.Captured) {
	t.Helper()
	key := "test-key"
	var srv *wirefixture.Server
	if !recordable {
		srv = wirefixture.Replay(t, name)
	} else {
		key = modeltest.APIKey(t, "ANTHROPIC_API_KEY")
		srv = wirefixture.Serve(t, name, "https://api.anthropic.com")
	}
	cfg.Provider, cfg.Model, cfg.BaseURL, cfg.APIKey = "anthropic", testModel, srv.URL, key
	m, err := anthropicmodel.New(cfg, "")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m, srv.Requests
}

// newModel returns a model that calls baseURL with a placeholder key.
func newModel(t *testing.T, baseURL string) *anthropicmodel.Model {
	t.Helper()
	m, err := anthropicmodel.New(anthropicmodel.Config{Model: testModel, BaseURL: baseURL, APIKey: "test-key"}, "")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

func ptr[T any](v T) *T { return &v }

func TestTextAnswer(t *testing.T) {
	m, requests := serve(t, "text.json", true, model.Settings{TopP: ptr(0.9)})

	got, err := modeltest.Collect(t.Context(), m, &model.Request{System: "Answer in one short sentence.", Messages: []model.Message{modeltest.User("What is the capital of Norway?")}})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}

	want := []model.Event{
		{Type: model.EventTextDelta, Text: "The capital"},
		{Type: model.EventTextDelta, Text: " of Norway is"},
		{Type: model.EventTextDelta, Text: " Oslo."},
		{Type: model.EventFinish, Finish: model.FinishStop, Usage: model.Usage{InputTokens: 21, OutputTokens: 10}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	reqs := requests()
	if len(reqs) != 1 {
		t.Fatalf("server saw %d requests, want 1", len(reqs))
	}
	if v := reqs[0].Header.Get("anthropic-version"); v != "2023-06-01" {
		t.Errorf("anthropic-version = %q, want 2023-06-01", v)
	}
	if k := reqs[0].Header.Get("x-api-key"); !wirefixture.Recording() && k != "test-key" {
		t.Errorf("x-api-key = %q, want the configured key", k)
	}
}

func TestTwoToolCalls(t *testing.T) {
	m, _ := serve(t, "tool_calls.json", true, model.Settings{})

	got, err := modeltest.Collect(t.Context(), m, &model.Request{
		Messages: []model.Message{modeltest.User("What's the weather in Oslo for the next 3 days, and what time is it there?")},
		Tools:    []model.ToolSpec{weatherSpec, timeSpec},
	})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}

	// The empty partial_json pieces Anthropic opens each input with are not events; a call
	// whose input never streams gets {}.
	const w, c = "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "toolu_01PbRq4bX6sUzQz8WdM2aYkC"
	want := []model.Event{
		{Type: model.EventTextDelta, Text: "I'll check"},
		{Type: model.EventTextDelta, Text: " both."},
		{Type: model.EventToolInputStart, ToolCallID: w, ToolName: "weather"},
		{Type: model.EventToolInputDelta, ToolCallID: w, Text: `{"city": "Os`},
		{Type: model.EventToolInputDelta, ToolCallID: w, Text: `lo", "da`},
		{Type: model.EventToolInputDelta, ToolCallID: w, Text: `ys": 3}`},
		{Type: model.EventToolCall, ToolCallID: w, ToolName: "weather", Input: json.RawMessage(`{"city": "Oslo", "days": 3}`)},
		{Type: model.EventToolInputStart, ToolCallID: c, ToolName: "current_time"},
		{Type: model.EventToolCall, ToolCallID: c, ToolName: "current_time", Input: json.RawMessage(`{}`)},
		{Type: model.EventFinish, Finish: model.FinishToolCalls, Usage: model.Usage{InputTokens: 654, OutputTokens: 97}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// The fixture's request body pins the conversion: the tool results travel as tool_result blocks
// of a user turn, the failed one with is_error, and the user's next message joins that turn so
// the roles alternate. It also pins temperature and max_tokens; top_p is pinned by text.json,
// since current models refuse temperature and top_p together.
func TestConversationWithToolResults(t *testing.T) {
	m, _ := serve(t, "tool_results.json", true, model.Settings{Temperature: ptr(0.2), MaxTokens: ptr(int64(512))})

	const w, c = "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "toolu_01PbRq4bX6sUzQz8WdM2aYkC"
	got, err := modeltest.Collect(t.Context(), m, &model.Request{
		System: "Be brief.",
		Messages: []model.Message{
			modeltest.User("What's the weather in Oslo, and the time?"),
			{Role: model.RoleAssistant, Parts: []model.Part{
				{Type: model.PartText, Text: "Checking both."},
				{Type: model.PartToolCall, ToolCallID: w, ToolName: "weather", Input: json.RawMessage(`{"city":"Oslo","days":3}`)},
				{Type: model.PartToolCall, ToolCallID: c, ToolName: "current_time", Input: json.RawMessage(`{}`)},
			}},
			{Role: model.RoleTool, Parts: []model.Part{
				{Type: model.PartToolResult, ToolCallID: w, ToolName: "weather", Output: json.RawMessage(`{"forecast":["sun","rain","sun"]}`)},
				{Type: model.PartToolResult, ToolCallID: c, ToolName: "current_time", Output: json.RawMessage(`{"error":"clock unavailable"}`), IsError: true},
			}},
			modeltest.User("Never mind the time."),
		},
		Tools: []model.ToolSpec{weatherSpec, timeSpec},
	})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}

	want := []model.Event{
		{Type: model.EventTextDelta, Text: "Sun, rain,"},
		{Type: model.EventTextDelta, Text: " then sun."},
		{Type: model.EventFinish, Finish: model.FinishStop, Usage: model.Usage{InputTokens: 731, OutputTokens: 9}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestRateLimitIsRetried(t *testing.T) {
	m, requests := serve(t, "rate_limited.json", false, model.Settings{})

	got, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: []model.Message{modeltest.User("Say hello.")}})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}

	want := []model.Event{
		{Type: model.EventTextDelta, Text: "Hello!"},
		{Type: model.EventFinish, Finish: model.FinishStop, Usage: model.Usage{InputTokens: 10, OutputTokens: 5}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if n := len(requests()); n != 2 {
		t.Errorf("server saw %d requests, want 2 (the 429 and its retry)", n)
	}
}

// A 429 whose retry-after outlasts the context's deadline is not waited for: the 429 comes
// back at once, as a ProviderError, leaving the caller its remaining time, and is not retried.
func TestRateLimitWaitPastDeadlineIsNotTaken(t *testing.T) {
	m, requests := serve(t, "rate_limited_long.json", false, model.Settings{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()

	start := time.Now()
	events, err := modeltest.Collect(ctx, m, &model.Request{Messages: []model.Message{modeltest.User("Say hello.")}})
	elapsed := time.Since(start)

	if len(events) != 0 {
		t.Errorf("events = %v, want none", events)
	}
	pe := modeltest.ProviderError(t, err, "anthropic")
	// A context error here would mean the SDK slept into the deadline instead.
	if pe.Status != http.StatusTooManyRequests || pe.RequestID != "req_011CVxE7mN2bV5cX8zL1kJ4H" {
		t.Errorf("Status, RequestID = %d, %q; want 429, req_011CVxE7mN2bV5cX8zL1kJ4H (error: %v)", pe.Status, pe.RequestID, err)
	}
	if elapsed > 5*time.Second {
		t.Errorf("Stream took %v; it must not wait for a retry the deadline does not leave time for", elapsed)
	}
	if n := len(requests()); n != 1 {
		t.Errorf("server saw %d requests, want 1: no retry past the deadline", n)
	}
}

// Without a wait named by the server, the SDK's backoff (about 0.5s before the first retry) is
// what must fit the deadline: with 300ms left the 529 comes back at once.
func TestOverloadedBackoffPastDeadlineIsNotTaken(t *testing.T) {
	srv := modeltest.NewServer(t, wirefixture.Response{
		Status:  529,
		Headers: map[string]string{"Content-Type": "application/json", "Request-Id": "req_529"},
		Body:    `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_529"}`,
	})
	m := newModel(t, srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()

	_, err := modeltest.Collect(ctx, m, &model.Request{Messages: []model.Message{modeltest.User("hi")}})

	pe := modeltest.ProviderError(t, err, "anthropic")
	if pe.Status != 529 || pe.RequestID != "req_529" {
		t.Errorf("Status, RequestID = %d, %q; want 529, req_529 (error: %v)", pe.Status, pe.RequestID, err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("server saw %d calls, want 1", n)
	}
}

func TestBadRequestIsNotRetried(t *testing.T) {
	m, requests := serve(t, "bad_request.json", true, model.Settings{Temperature: ptr(1.5)})

	events, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: []model.Message{modeltest.User("Say hello.")}})

	if len(events) != 0 {
		t.Errorf("events = %v, want none", events)
	}
	pe := modeltest.ProviderError(t, err, "anthropic")
	if pe.Status != http.StatusBadRequest || pe.RequestID != "req_011CVxC9wQ3eR5tY7uI2oP4A" {
		t.Errorf("Status, RequestID = %d, %q; want 400, req_011CVxC9wQ3eR5tY7uI2oP4A", pe.Status, pe.RequestID)
	}
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.Type() != anthropic.ErrorTypeInvalidRequestError {
		t.Errorf("cause = %v, want the SDK's invalid_request_error", pe.Err)
	}
	if errors.Is(err, model.ErrContextLength) {
		t.Errorf("errors.Is(%v, model.ErrContextLength) = true, want false: the request is not too long", err)
	}
	if n := len(requests()); n != 1 {
		t.Errorf("server saw %d requests, want 1: a 400 is not retried", n)
	}
}

func TestContextLengthExceeded(t *testing.T) {
	m, requests := serve(t, "context_length.json", false, model.Settings{})

	events, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: []model.Message{modeltest.User("Summarise the build log above.")}})

	if len(events) != 0 {
		t.Errorf("events = %v, want none", events)
	}
	if pe := modeltest.ContextLengthError(t, err, "anthropic"); pe.RequestID != "req_011CVxE7kP2mN4bV6cX8zL1Q" {
		t.Errorf("RequestID = %q, want req_011CVxE7kP2mN4bV6cX8zL1Q", pe.RequestID)
	}
	if n := len(requests()); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
}

// A request over Anthropic's size limit in bytes is refused with its own error type; it says
// nothing of the context window, and compacting is not its remedy.
func TestRequestTooLargeIsNotContextLength(t *testing.T) {
	srv := modeltest.NewServer(t, wirefixture.Response{
		Status:  http.StatusRequestEntityTooLarge,
		Headers: map[string]string{"Content-Type": "application/json"},
		Body:    `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}`,
	})

	_, err := modeltest.Collect(t.Context(), newModel(t, srv.URL), &model.Request{Messages: []model.Message{modeltest.User("Say hello.")}})

	if pe := modeltest.ProviderError(t, err, "anthropic"); pe.Status != http.StatusRequestEntityTooLarge || errors.Is(err, model.ErrContextLength) {
		t.Errorf("Status, ContextLength = %d, %v; want 413, false", pe.Status, pe.ContextLength)
	}
}

func TestErrorEventMidStream(t *testing.T) {
	m, _ := serve(t, "overloaded.json", false, model.Settings{})

	events, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: []model.Message{modeltest.User("Say hello.")}})

	if diff := cmp.Diff([]model.Event{{Type: model.EventTextDelta, Text: "Hel"}}, events); diff != "" {
		t.Errorf("events before the error (-want +got):\n%s", diff)
	}
	pe := modeltest.ProviderError(t, err, "anthropic")
	// Anthropic documents overloaded_error as the 529 a call gets before it streams.
	if pe.Status != 529 || pe.RequestID != "req_011CVxD4sA6dF8gH1jK3lZ5X" {
		t.Errorf("Status, RequestID = %d, %q; want 529, req_011CVxD4sA6dF8gH1jK3lZ5X", pe.Status, pe.RequestID)
	}
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.Type() != anthropic.ErrorTypeOverloadedError {
		t.Errorf("cause = %v, want the SDK's overloaded_error", pe.Err)
	}
}

// sseServer returns a model whose every call is answered with body as an event stream, and the
// server.
func sseServer(t *testing.T, body string) (*anthropicmodel.Model, *modeltest.Server) {
	t.Helper()
	answer := modeltest.SSE(body)
	answer.Headers["Request-Id"] = "req_sse"
	srv := modeltest.NewServer(t, answer)
	return newModel(t, srv.URL), srv
}

func sse(events ...string) string {
	var b strings.Builder
	for _, data := range events {
		var head struct{ Type string }
		if err := json.Unmarshal([]byte(data), &head); err != nil {
			panic(err)
		}
		b.WriteString("event: " + head.Type + "\ndata: " + data + "\n\n")
	}
	return b.String()
}

func TestFinishReasons(t *testing.T) {
	tests := []struct {
		stopReason string
		want       model.FinishReason
	}{
		{"end_turn", model.FinishStop},
		{"stop_sequence", model.FinishStop},
		{"max_tokens", model.FinishLength},
		{"tool_use", model.FinishToolCalls},
		{"refusal", model.FinishFilter},
		{"pause_turn", model.FinishOther},
		{"model_context_window_exceeded", model.FinishOther},
	}
	for _, tt := range tests {
		t.Run(tt.stopReason, func(t *testing.T) {
			m, _ := sseServer(t, sse(
				`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-4-5-20251001","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}}`,
				`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`,
				`{"type":"content_block_stop","index":0}`,
				`{"type":"message_delta","delta":{"stop_reason":"`+tt.stopReason+`","stop_sequence":null},"usage":{"output_tokens":2}}`,
				`{"type":"message_stop"}`,
			))
			got, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: []model.Message{modeltest.User("hi")}})
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			want := []model.Event{
				{Type: model.EventTextDelta, Text: "Hi"},
				{Type: model.EventFinish, Finish: tt.want, Usage: model.Usage{InputTokens: 3, OutputTokens: 2}},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStreamCutBeforeMessageStop(t *testing.T) {
	m, _ := sseServer(t, sse(
		`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-4-5-20251001","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`,
	))

	_, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: []model.Message{modeltest.User("hi")}})

	pe := modeltest.ProviderError(t, err, "anthropic")
	if pe.RequestID != "req_sse" || !strings.Contains(pe.Error(), "before message_stop") {
		t.Errorf("error = %v (request %q), want a cut stream of request req_sse", pe, pe.RequestID)
	}
}

func TestStreamStopsWhenTheConsumerBreaks(t *testing.T) {
	m, _ := sseServer(t, wirefixture.Load(t, "tool_calls.json")[0].Response.Body)
	modeltest.CheckBreaks(t, m, &model.Request{Messages: []model.Message{modeltest.User("hi")}}, 10)
}

// TestMessageEdgeCases pins conversions the fixtures do not reach, from the body sent.
func TestMessageEdgeCases(t *testing.T) {
	m, srv := sseServer(t, sse(`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}}`, `{"type":"message_stop"}`))

	got, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: []model.Message{
		{Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: "Hello, "}, {Type: model.PartText, Text: ""}, {Type: model.PartText, Text: "world"}}},
		modeltest.User("and again"),
		{Role: model.RoleAssistant, Parts: []model.Part{
			// The loop stores arguments that were not JSON as a JSON string, and a call
			// without arguments may have none; Anthropic takes only objects.
			{Type: model.PartToolCall, ToolCallID: "a", ToolName: "weather", Input: json.RawMessage(`"{\"city\": "`)},
			{Type: model.PartToolCall, ToolCallID: "b", ToolName: "current_time"},
		}},
		{Role: model.RoleTool, Parts: []model.Part{
			{Type: model.PartToolResult, ToolCallID: "a", ToolName: "weather", Output: json.RawMessage(`{"error":"arguments are not JSON"}`), IsError: true},
			{Type: model.PartToolResult, ToolCallID: "b", ToolName: "current_time"},
		}},
		{Role: model.RoleAssistant, Parts: []model.Part{{Type: model.PartText, Text: ""}}},
	}})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if diff := cmp.Diff([]model.Event{{Type: model.EventFinish, Finish: model.FinishOther, Usage: model.Usage{InputTokens: 1}}}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	var body struct {
		Messages  any   `json:"messages"`
		MaxTokens int64 `json:"max_tokens"`
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("server saw %d requests, want 1", len(reqs))
	}
	if err := json.Unmarshal(reqs[0].Body, &body); err != nil {
		t.Fatalf("decoding the request body: %v", err)
	}
	if body.MaxTokens != anthropicmodel.DefaultMaxTokens {
		t.Errorf("max_tokens = %d, want the default %d", body.MaxTokens, anthropicmodel.DefaultMaxTokens)
	}
	// Empty text is dropped (Anthropic rejects empty text blocks), so is a message left empty;
	// consecutive user messages form one turn; a result without output has no content; the
	// conversation's last block carries the cache breakpoint.
	want := modeltest.Decode(t, `[
		{"role":"user","content":[{"type":"text","text":"Hello, "},{"type":"text","text":"world"},{"type":"text","text":"and again"}]},
		{"role":"assistant","content":[
			{"type":"tool_use","id":"a","name":"weather","input":{}},
			{"type":"tool_use","id":"b","name":"current_time","input":{}}]},
		{"role":"user","content":[
			{"type":"tool_result","tool_use_id":"a","content":[{"type":"text","text":"{\"error\":\"arguments are not JSON\"}"}],"is_error":true},
			{"type":"tool_result","tool_use_id":"b","cache_control":{"type":"ephemeral"}}]}
	]`)
	if diff := cmp.Diff(want, body.Messages); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}

// Requests the adapter cannot express fail before anything is sent.
func TestStreamRejectsBadRequests(t *testing.T) {
	tests := []struct {
		name string
		req  model.Request
		want string
	}{
		{
			name: "provider tool",
			req: model.Request{Messages: []model.Message{modeltest.User("news?")}, Tools: []model.ToolSpec{
				weatherSpec, {Name: "search", ProviderTool: model.ProviderGoogleSearch},
			}},
			want: `tool search: the anthropic provider does not support the provider tool "google.google_search"`,
		},
		{
			name: "unknown role",
			req:  model.Request{Messages: []model.Message{{Role: "narrator", Parts: []model.Part{{Type: model.PartText, Text: "Once"}}}}},
			want: `unknown role "narrator"`,
		},
		{
			name: "tool schema that is not JSON",
			req:  model.Request{Messages: []model.Message{modeltest.User("hi")}, Tools: []model.ToolSpec{{Name: "broken", InputSchema: json.RawMessage(`{`)}}},
			want: "tool broken",
		},
		{
			name: "tool schema that is not an object",
			req:  model.Request{Messages: []model.Message{modeltest.User("hi")}, Tools: []model.ToolSpec{{Name: "list", InputSchema: json.RawMessage(`{"type":"array"}`)}}},
			want: `tool list: its input schema has type "array"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := modeltest.NewServer(t, modeltest.Unexpected)
			modeltest.CheckRefused(t, newModel(t, srv.URL), srv, &tt.req, tt.want)
		})
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		cfg     anthropicmodel.Config
		envKey  string
		wantErr string // empty: New must succeed
	}{
		{name: "missing model", cfg: anthropicmodel.Config{APIKey: "k"}, wantErr: "model.model is required"},
		{name: "no key", cfg: anthropicmodel.Config{Model: testModel}, wantErr: "model.apiKey or ANTHROPIC_API_KEY"},
		{name: "no key even with a base URL", cfg: anthropicmodel.Config{Model: testModel, BaseURL: "http://localhost:1"}, wantErr: "model.apiKey or ANTHROPIC_API_KEY"},
		{name: "key in the config", cfg: anthropicmodel.Config{Model: testModel, APIKey: "k"}},
		{name: "key from the environment", cfg: anthropicmodel.Config{Model: testModel}, envKey: "k"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := anthropicmodel.New(tt.cfg, tt.envKey)
			modeltest.CheckNew(t, m, err, tt.wantErr)
		})
	}
}

// A structured output is asked for as JSON outputs (output_config.format json_schema), the
// retry's note sent as a user message; the answer is the object's JSON as text.
func TestStructuredOutput(t *testing.T) {
	m, requests := serve(t, "output.json", false, model.Settings{})
	modeltest.CheckOutput(t, m, model.Usage{InputTokens: 142, OutputTokens: 12})
	if n := len(requests()); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
}
