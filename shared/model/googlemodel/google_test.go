// The wire fixtures in testdata were written by hand, not recorded: this machine has no internet.
// They follow the documented Gemini API streamGenerateContent?alt=sse format exactly: one
// `data: {GenerateContentResponse}` event per chunk, with candidates[].content.parts,
// finishReason, usageMetadata (running totals) and groundingMetadata, and Google's error body
// {"error": {code, message, status, details}}. Each fixture's request body pins what the adapter
// sends. To re-record them from the real API, run
//
//	GOOGLE_API_KEY=... go test ./shared/model/googlemodel -record
//
// and then update the expected events to the answers Gemini gave. Rate limits and server errors
// cannot be asked of the real API, so the retry tests inject them in front of the fixture.
package googlemodel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/wirefixture"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/googlemodel"
	"github.com/agentharness/harness/shared/model/modeltest"
	"github.com/google/go-cmp/cmp"
)

const (
	upstream  = "https://generativelanguage.googleapis.com"
	modelName = "gemini-2.5-flash"
	wirePath  = "/v1beta/models/" + modelName + ":streamGenerateContent"
)

var (
	weatherSpec = model.ToolSpec{
		Name: "weather", Description: "Forecast for a city.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}`),
	}
	timeSpec = model.ToolSpec{
		Name: "current_time", Description: "The local time in a city.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
	}
	searchSpec = model.ToolSpec{Name: "google_search", ProviderTool: model.ProviderGoogleSearch}
)

// toolCallsSignature is the thought signature on the first call of tool_calls.json.
const toolCallsSignature = "CpUCcTjuF9Ankb3KRkSS1w8CkuKgFle/Azi+V5jUQiT8HfJxOO4X0CeRvcpGRJLXDwKS4qAWV78DOL5XmNRCJPwd8nE47hfQJ5G9ykZEktcPApLioBZXvwM4vleY1EIk/B3y"

// apiKey is the real key when recording and a placeholder when replaying. Tests call it before
// wirefixture.Serve, so a recording without a key stops before it can rewrite a fixture.
func apiKey(t *testing.T) string { return modeltest.APIKey(t, "GOOGLE_API_KEY") }

func newModel(t *testing.T, baseURL, key string, settings model.Settings) *googlemodel.Model {
	t.Helper()
	m, err := googlemodel.New(context.Background(), googlemodel.Config{
		Provider: "google", Model: modelName, BaseURL: baseURL, APIKey: key, Settings: settings,
	}, "")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

func TestTextAnswer(t *testing.T) {
	key := apiKey(t)
	srv := wirefixture.Serve(t, "text.json", upstream)
	m := newModel(t, srv.URL, key, model.Settings{})

	got, err := modeltest.Collect(t.Context(), m, &model.Request{System: "Answer in one sentence.", Messages: []model.Message{modeltest.User("What is the capital of Norway?")}})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}

	// Usage is the last chunk's: the output is candidatesTokenCount and thoughtsTokenCount, which
	// it leaves out, together.
	want := []model.Event{
		{Type: model.EventTextDelta, Text: "The capital of Norway"},
		{Type: model.EventTextDelta, Text: " is Oslo, which sits at the head of"},
		{Type: model.EventTextDelta, Text: " the Oslofjord."},
		{Type: model.EventFinish, Finish: model.FinishStop, Usage: model.Usage{InputTokens: 14, OutputTokens: 16 + 187}.WithReasoning(187)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("server saw %d requests, want 1", len(reqs))
	}
	if got := reqs[0].Header.Get("X-Goog-Api-Key"); got != key {
		t.Errorf("x-goog-api-key = %q, want the configured key", got)
	}
}

func TestTwoFunctionCalls(t *testing.T) {
	key := apiKey(t)
	srv := wirefixture.Serve(t, "tool_calls.json", upstream)
	m := newModel(t, srv.URL, key, model.Settings{})

	got, err := modeltest.Collect(t.Context(), m, &model.Request{
		Messages: []model.Message{modeltest.User("What's the weather in Oslo for three days, and the time there?")},
		Tools:    []model.ToolSpec{weatherSpec, timeSpec},
	})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}

	// Gemini sent no ids: the answer will be message 1 of the conversation, and the calls are
	// its first and second. Only the first of parallel calls carries a thought signature.
	const w, c = "gemini_1_0", "gemini_1_1"
	want := []model.Event{
		{Type: model.EventToolInputStart, ToolCallID: w, ToolName: "weather"},
		{Type: model.EventToolInputDelta, ToolCallID: w, Text: `{"city":"Oslo","days":3}`},
		{Type: model.EventToolCall, ToolCallID: w, ToolName: "weather", Input: json.RawMessage(`{"city":"Oslo","days":3}`), Signature: toolCallsSignature, Provider: "google"},
		{Type: model.EventToolInputStart, ToolCallID: c, ToolName: "current_time"},
		{Type: model.EventToolInputDelta, ToolCallID: c, Text: `{"city":"Oslo"}`},
		{Type: model.EventToolCall, ToolCallID: c, ToolName: "current_time", Input: json.RawMessage(`{"city":"Oslo"}`)},
		{Type: model.EventFinish, Finish: model.FinishToolCalls, Usage: model.Usage{InputTokens: 96, OutputTokens: 37 + 118}.WithReasoning(118)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// The fixture's request body is the assertion: system instruction, settings, the earlier turn's
// call without a thought signature, the current turn's first call with the documented
// placeholder, no made-up ids, and tool results as functionResponse parts in call order.
func TestConversationWithToolResults(t *testing.T) {
	key := apiKey(t)
	srv := wirefixture.Serve(t, "conversation.json", upstream)
	temp, topP, maxTokens := 0.2, 0.9, int64(512)
	m := newModel(t, srv.URL, key, model.Settings{Temperature: &temp, TopP: &topP, MaxTokens: &maxTokens})

	req := &model.Request{
		System: "You are a concise travel assistant.",
		Tools:  []model.ToolSpec{weatherSpec, timeSpec},
		Messages: []model.Message{
			modeltest.User("What time is it in Oslo?"),
			{Role: model.RoleAssistant, Parts: []model.Part{
				{Type: model.PartToolCall, ToolCallID: "gemini_1_0", ToolName: "current_time", Input: json.RawMessage(`{"city":"Oslo"}`)},
			}},
			{Role: model.RoleTool, Parts: []model.Part{
				{Type: model.PartToolResult, ToolCallID: "gemini_1_0", ToolName: "current_time", Output: json.RawMessage(`"09:12"`)},
			}},
			{Role: model.RoleAssistant, Parts: []model.Part{{Type: model.PartText, Text: "It is 09:12 in Oslo."}}},
			modeltest.User("And the weather in Oslo and Bergen?"),
			{Role: model.RoleAssistant, Parts: []model.Part{
				{Type: model.PartText, Text: "Checking both cities."},
				{Type: model.PartToolCall, ToolCallID: "gemini_5_0", ToolName: "weather", Input: json.RawMessage(`{"city":"Oslo","days":1}`)},
				{Type: model.PartToolCall, ToolCallID: "gemini_5_1", ToolName: "weather", Input: json.RawMessage(`{"city":"Bergen","days":1}`)},
			}},
			{Role: model.RoleTool, Parts: []model.Part{
				{Type: model.PartToolResult, ToolCallID: "gemini_5_0", ToolName: "weather", Output: json.RawMessage(`{"sky":"rain","celsius":4}`)},
				{Type: model.PartToolResult, ToolCallID: "gemini_5_1", ToolName: "weather", Output: json.RawMessage(`{"error":"weather service timed out"}`), IsError: true},
			}},
		},
	}
	got, err := modeltest.Collect(t.Context(), m, req)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	want := []model.Event{
		{Type: model.EventTextDelta, Text: "Oslo: rain, 4 °C. I couldn't get Bergen's forecast"},
		{Type: model.EventTextDelta, Text: "; the weather service timed out."},
		{Type: model.EventFinish, Finish: model.FinishStop, Usage: model.Usage{InputTokens: 241, OutputTokens: 21 + 64}.WithReasoning(64)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestGoogleSearchSources(t *testing.T) {
	key := apiKey(t)
	srv := wirefixture.Serve(t, "google_search.json", upstream)
	m := newModel(t, srv.URL, key, model.Settings{})

	got, err := modeltest.Collect(t.Context(), m, &model.Request{
		Messages: []model.Message{modeltest.User("Who won the 2024 Nobel Prize in Literature?")},
		Tools:    []model.ToolSpec{searchSpec},
	})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	const redirect = "https://vertexaisearch.cloud.google.com/grounding-api-redirect/"
	want := []model.Event{
		{Type: model.EventTextDelta, Text: "Han Kang won the 2024 Nobel Prize in Literature"},
		{Type: model.EventTextDelta, Text: ` "for her intense poetic prose that confronts historical traumas and exposes the fragility of human life".`},
		{Type: model.EventSource, Source: &model.Source{ID: "src-1", URL: redirect + "AUZIYQGm0xJ7q3kXoQ0mA8vR1sYwZ2cT5uE9bN4dF6hK3jL", Title: "nobelprize.org"}},
		{Type: model.EventSource, Source: &model.Source{ID: "src-2", URL: redirect + "AUZIYQHt2pW8nV5cX1zB7yM4aS6dG3fJ9kL0qR2eT8uI5oP", Title: "wikipedia.org"}},
		{Type: model.EventFinish, Finish: model.FinishStop, Usage: model.Usage{InputTokens: 11, OutputTokens: 33 + 91}.WithReasoning(91)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// rateLimited429 is Gemini's answer to a request over quota, asking for a retry in 100ms.
const rateLimited429 = `{
  "error": {
    "code": 429,
    "message": "You exceeded your current quota, please check your plan and billing details.",
    "status": "RESOURCE_EXHAUSTED",
    "details": [
      {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests", "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier", "quotaDimensions": {"location": "global", "model": "gemini-2.5-flash"}, "quotaValue": "10"}]},
      {"@type": "type.googleapis.com/google.rpc.Help", "links": [{"description": "Learn more about Gemini API quotas", "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}]},
      {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "%s"}
    ]
  }
}
`

const overloaded503 = `{
  "error": {
    "code": 503,
    "message": "The model is overloaded. Please try again later.",
    "status": "UNAVAILABLE"
  }
}
`

// inject answers the first n requests with status and body (and header, when given) itself,
// and passes the rest to next (a fixture server).
func inject(n, status int, body string, header map[string]string, next http.Handler) http.Handler {
	var seen atomic.Int32
	answer := wirefixture.Response{Status: status, Headers: map[string]string{"Content-Type": "application/json; charset=UTF-8"}, Body: body}
	maps.Copy(answer.Headers, header)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if int(seen.Add(1)) > n {
			next.ServeHTTP(w, r)
			return
		}
		answer.ServeHTTP(w, r)
	})
}

func proxyTo(t *testing.T, rawURL string) http.Handler {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return httputil.NewSingleHostReverseProxy(u)
}

func TestRateLimitIsRetried(t *testing.T) {
	key := apiKey(t)
	fixture := wirefixture.Serve(t, "retry.json", upstream)
	srv := modeltest.NewServer(t, inject(1, http.StatusTooManyRequests, fmt.Sprintf(rateLimited429, "0.100s"), nil, proxyTo(t, fixture.URL)))
	m := newModel(t, srv.URL, key, model.Settings{})

	start := time.Now()
	got, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: []model.Message{modeltest.User("Say hello.")}})
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	want := []model.Event{
		{Type: model.EventTextDelta, Text: "Hello!"},
		{Type: model.EventFinish, Finish: model.FinishStop, Usage: model.Usage{InputTokens: 3, OutputTokens: 2 + 24}.WithReasoning(24)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// The wait is the 100ms RetryInfo asked for, not the default backoff.
	if elapsed < 100*time.Millisecond || elapsed > time.Second {
		t.Errorf("Stream took %v, want the 100ms the 429 asked for and little more", elapsed)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("server saw %d requests, want 2 (the 429 and its retry)", len(reqs))
	}
	if len(reqs[0].Body) == 0 || string(reqs[1].Body) != string(reqs[0].Body) {
		t.Errorf("retried body %q, want the first body %q again", reqs[1].Body, reqs[0].Body)
	}
	for i, r := range reqs {
		if r.Query != "alt=sse" {
			t.Errorf("request %d query %q, want alt=sse", i+1, r.Query)
		}
	}
}

// A 429 whose retry delay would outlast the context's deadline comes back at once, with the
// request id a gateway in front of Gemini added.
func TestRateLimitWaitPastDeadlineIsNotTaken(t *testing.T) {
	srv := modeltest.NewServer(t, inject(1, http.StatusTooManyRequests, fmt.Sprintf(rateLimited429, "5s"), map[string]string{"X-Request-Id": "req-7f3a"}, nil))
	m := newModel(t, srv.URL, "test-key", model.Settings{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()

	start := time.Now()
	events, err := modeltest.Collect(ctx, m, &model.Request{Messages: []model.Message{modeltest.User("Say hello.")}})
	elapsed := time.Since(start)

	pe := modeltest.ProviderError(t, err, "google")
	if pe.Status != http.StatusTooManyRequests || pe.RequestID != "req-7f3a" {
		t.Errorf("ProviderError{Status: %d, RequestID: %q}, want 429, req-7f3a", pe.Status, pe.RequestID)
	}
	if len(events) != 0 {
		t.Errorf("events = %v, want none", events)
	}
	if elapsed > 500*time.Millisecond {
		t.Errorf("Stream took %v; it must not wait for a retry the deadline does not leave time for", elapsed)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
}

func TestServerErrorsExhaustTheRetries(t *testing.T) {
	srv := modeltest.NewServer(t, inject(3, http.StatusServiceUnavailable, overloaded503, nil, nil))
	m := newModel(t, srv.URL, "test-key", model.Settings{})

	_, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: []model.Message{modeltest.User("Say hello.")}})

	if pe := modeltest.ProviderError(t, err, "google"); pe.Status != http.StatusServiceUnavailable {
		t.Fatalf("Stream error = %v, want a ProviderError with status 503", err)
	}
	if !strings.Contains(err.Error(), "The model is overloaded") {
		t.Errorf("error %q, want Gemini's message kept for the log", err)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("server saw %d requests, want 3 (one call and two retries)", n)
	}
}

func TestInvalidArgumentIsNotRetried(t *testing.T) {
	// Recording stops here without a key like the others, though this test sends a wrong one on
	// purpose so that Gemini answers 400.
	_ = apiKey(t)
	srv := wirefixture.Serve(t, "bad_key.json", upstream)
	m := newModel(t, srv.URL, "not-a-valid-key", model.Settings{})

	events, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: []model.Message{modeltest.User("Say hello.")}})

	if pe := modeltest.ProviderError(t, err, "google"); pe.Status != http.StatusBadRequest {
		t.Errorf("ProviderError{Status: %d}, want 400", pe.Status)
	}
	if !strings.Contains(err.Error(), "API key not valid") || !strings.Contains(err.Error(), "INVALID_ARGUMENT") {
		t.Errorf("error %q, want Gemini's message and status kept for the log", err)
	}
	if errors.Is(err, model.ErrContextLength) {
		t.Errorf("errors.Is(%v, model.ErrContextLength) = true, want false: the request is not too long", err)
	}
	if len(events) != 0 {
		t.Errorf("events = %v, want none", events)
	}
	// The fixture holds one exchange; a retry would be an unexpected request.
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
}

// TestContextLengthExceeded: Gemini's refusal of input longer than the model's context window,
// a 400 INVALID_ARGUMENT told apart by its words, with and without the count, is
// model.ErrContextLength and is not retried.
func TestContextLengthExceeded(t *testing.T) {
	for _, message := range []string{
		"The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).",
		"The input token count exceeds the maximum number of tokens allowed (1048576).",
	} {
		t.Run(message, func(t *testing.T) {
			body := `{"error": {"code": 400, "message": "` + message + `", "status": "INVALID_ARGUMENT"}}`
			srv := modeltest.NewServer(t, inject(1, http.StatusBadRequest, body, nil, modeltest.Unexpected))
			m := newModel(t, srv.URL, "test-key", model.Settings{})

			events, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: []model.Message{modeltest.User("Summarise the build log above.")}})

			if len(events) != 0 {
				t.Errorf("events = %v, want none", events)
			}
			modeltest.ContextLengthError(t, err, "google")
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("server saw %d requests, want 1", n)
			}
		})
	}
}

func TestStreamRejectsBadRequests(t *testing.T) {
	tests := []struct {
		name string
		req  model.Request
		want string
	}{
		{
			name: "unknown provider tool",
			req:  model.Request{Messages: []model.Message{modeltest.User("hi")}, Tools: []model.ToolSpec{{Name: "web_search", ProviderTool: "openai.web_search"}}},
			want: `provider tool "openai.web_search"`,
		},
		{
			name: "tool schema that is not JSON",
			req:  model.Request{Messages: []model.Message{modeltest.User("hi")}, Tools: []model.ToolSpec{{Name: "broken", InputSchema: json.RawMessage(`{`)}}},
			want: "tool broken",
		},
		{
			name: "call arguments that are not an object",
			req: model.Request{Messages: []model.Message{modeltest.User("hi"), {Role: model.RoleAssistant, Parts: []model.Part{
				{Type: model.PartToolCall, ToolCallID: "gemini_1_0", ToolName: "weather", Input: json.RawMessage(`[1]`)},
			}}}},
			want: "the arguments of the weather call",
		},
		{
			name: "unknown role",
			req:  model.Request{Messages: []model.Message{{Role: "narrator", Parts: []model.Part{{Type: model.PartText, Text: "Once"}}}}},
			want: `unknown role "narrator"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := modeltest.NewServer(t, modeltest.Unexpected)
			modeltest.CheckRefused(t, newModel(t, srv.URL, "test-key", model.Settings{}), srv, &tt.req, tt.want)
		})
	}
}

// sseServer returns a model whose every call is answered with body as an event stream.
func sseServer(t *testing.T, body string) *googlemodel.Model {
	t.Helper()
	return newModel(t, modeltest.NewServer(t, modeltest.SSE(body)).URL, "test-key", model.Settings{})
}

func TestFinishReasons(t *testing.T) {
	const text = `{"content": {"parts": [{"text": "Hi"}],"role": "model"},"index": 0`
	const call = `{"content": {"parts": [{"functionCall": {"name": "weather","args": {"city": "Oslo"}}}],"role": "model"},"index": 0`
	tests := []struct {
		name  string
		chunk string // one GenerateContentResponse
		want  model.FinishReason
	}{
		{"STOP", `{"candidates": [` + text + `,"finishReason": "STOP"}]}`, model.FinishStop},
		{"STOP after a call", `{"candidates": [` + call + `,"finishReason": "STOP"}]}`, model.FinishToolCalls},
		{"MAX_TOKENS", `{"candidates": [` + text + `,"finishReason": "MAX_TOKENS"}]}`, model.FinishLength},
		{"SAFETY", `{"candidates": [` + text + `,"finishReason": "SAFETY"}]}`, model.FinishFilter},
		{"RECITATION", `{"candidates": [` + text + `,"finishReason": "RECITATION"}]}`, model.FinishFilter},
		{"BLOCKLIST", `{"candidates": [` + text + `,"finishReason": "BLOCKLIST"}]}`, model.FinishFilter},
		{"PROHIBITED_CONTENT", `{"candidates": [` + text + `,"finishReason": "PROHIBITED_CONTENT"}]}`, model.FinishFilter},
		{"SPII", `{"candidates": [` + text + `,"finishReason": "SPII"}]}`, model.FinishFilter},
		{"MALFORMED_FUNCTION_CALL", `{"candidates": [` + text + `,"finishReason": "MALFORMED_FUNCTION_CALL"}]}`, model.FinishOther},
		{"none", `{"candidates": [` + text + `}]}`, model.FinishOther},
		{"blocked prompt", `{"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},"usageMetadata": {"promptTokenCount": 7,"totalTokenCount": 7}}`, model.FinishFilter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events, err := modeltest.Collect(t.Context(), sseServer(t, "data: "+tt.chunk+"\r\n\r\n"), &model.Request{Messages: []model.Message{modeltest.User("hi")}})
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if len(events) == 0 || events[len(events)-1].Type != model.EventFinish {
				t.Fatalf("events = %v, want them to end with a finish", events)
			}
			if got := events[len(events)-1].Finish; got != tt.want {
				t.Errorf("finish = %q, want %q", got, tt.want)
			}
		})
	}
}

// Thought summaries stream as reasoning, not answer text, and grounding metadata repeated in
// later chunks cites each page once.
func TestThoughtsAsReasoningAndSourcesCitedOnce(t *testing.T) {
	const page = `{"web": {"uri": "https://example.org/a","title": "example.org"}}`
	body := `data: {"candidates": [{"content": {"parts": [{"text": "Weighing the sources...","thought": true}],"role": "model"},"index": 0}]}` + "\r\n\r\n" +
		`data: {"candidates": [{"content": {"parts": [{"text": "A."}],"role": "model"},"groundingMetadata": {"groundingChunks": [` + page + `]},"index": 0}]}` + "\r\n\r\n" +
		`data: {"candidates": [{"content": {"parts": [{"text": " B."}],"role": "model"},"finishReason": "STOP","groundingMetadata": {"groundingChunks": [` + page + `,{"web": {"uri": "https://example.org/b","title": "example.org"}}]},"index": 0}],"usageMetadata": {"promptTokenCount": 5,"candidatesTokenCount": 2,"thoughtsTokenCount": 9,"totalTokenCount": 16}}` + "\r\n\r\n"
	got, err := modeltest.Collect(t.Context(), sseServer(t, body), &model.Request{Messages: []model.Message{modeltest.User("hi")}, Tools: []model.ToolSpec{searchSpec}})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	want := []model.Event{
		{Type: model.EventReasoningDelta, Text: "Weighing the sources..."},
		{Type: model.EventReasoningEnd, Provider: "google"},
		{Type: model.EventTextDelta, Text: "A."},
		{Type: model.EventSource, Source: &model.Source{ID: "src-1", URL: "https://example.org/a", Title: "example.org"}},
		{Type: model.EventTextDelta, Text: " B."},
		{Type: model.EventSource, Source: &model.Source{ID: "src-2", URL: "https://example.org/b", Title: "example.org"}},
		{Type: model.EventFinish, Finish: model.FinishStop, Usage: model.Usage{InputTokens: 5, OutputTokens: 11}.WithReasoning(9)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestStreamStopsWhenTheConsumerBreaks(t *testing.T) {
	body := `data: {"candidates": [{"content": {"parts": [{"text": "Checking."},{"functionCall": {"name": "weather","args": {"city": "Oslo"}}}],"role": "model"},"finishReason": "STOP","groundingMetadata": {"groundingChunks": [{"web": {"uri": "https://example.org/a","title": "example.org"}}]},"index": 0}]}` + "\r\n\r\n"
	// Text, three tool events, a source and the finish.
	modeltest.CheckBreaks(t, sseServer(t, body), &model.Request{Messages: []model.Message{modeltest.User("hi")}}, 6)
}

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		cfg     googlemodel.Config
		envKey  string
		wantErr string // empty: New must succeed
	}{
		{name: "missing model", cfg: googlemodel.Config{APIKey: "k"}, wantErr: "model.model is required"},
		{name: "no key", cfg: googlemodel.Config{Model: modelName}, wantErr: "model.apiKey or GOOGLE_API_KEY"},
		{name: "no key despite a base URL", cfg: googlemodel.Config{Model: modelName, BaseURL: "http://localhost:1"}, wantErr: "model.apiKey or GOOGLE_API_KEY"},
		{name: "key in the config", cfg: googlemodel.Config{Model: modelName, APIKey: "k"}},
		{name: "key from the environment", cfg: googlemodel.Config{Model: modelName}, envKey: "k"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := googlemodel.New(context.Background(), tt.cfg, tt.envKey)
			modeltest.CheckNew(t, m, err, tt.wantErr)
		})
	}
}

// A structured output is asked for as JSON mode under the schema (responseMimeType
// application/json and responseJsonSchema), the retry's note sent as a user turn; the answer is
// the object's JSON as text.
func TestStructuredOutput(t *testing.T) {
	srv := wirefixture.Replay(t, "output.json")
	modeltest.CheckOutput(t, newModel(t, srv.URL, "test-key", model.Settings{}), model.Usage{InputTokens: 61, OutputTokens: 11})
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
}
