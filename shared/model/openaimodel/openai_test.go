// The wire fixtures in testdata were written by hand, without internet access, to follow
// OpenAI's documented Chat Completions streaming format exactly: `data: {chat.completion.chunk}`
// events with choices[].delta (content, tool_calls by index), finish_reason, a last chunk with
// no choices carrying usage (stream_options.include_usage), then `data: [DONE]`; JSON error
// bodies {"error": {message, type, param, code}}; and the content-type, x-request-id and
// retry-after headers. Each fixture's request body pins what the adapter sends.
//
// `OPENAI_API_KEY=... go test ./shared/model/openaimodel -record` re-records, from
// https://api.openai.com/v1, the fixtures the API produces on demand (text.json, tool_calls.json,
// conversation.json, bad_request.json); the model's words, ids, usage and request ids then
// change, so update the wanted events with them. A 429 cannot be ordered from the API:
// rate_limited.json and rate_limited_long.json stay hand-written and are replayed even under
// -record. So does context_length.json, the documented refusal of a conversation longer than
// the model's context window (code context_length_exceeded), whose short request stands in for
// one too long to keep in testdata.
package openaimodel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/mockopenai"
	"github.com/agentharness/harness/infra/wirefixture"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/modeltest"
	"github.com/agentharness/harness/shared/model/openaimodel"
	"github.com/agentharness/harness/shared/model/provider"
	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
)

const (
	// upstream is where -record sends the calls. An agent's base URL is the fixture server's
	// URL plus /v1, as https://api.openai.com/v1 is, so fixtures record the API's real path.
	upstream  = "https://api.openai.com"
	wirePath  = "/v1/chat/completions"
	testModel = "gpt-4o-mini"
)

const weatherSchema = `{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}`

var (
	weatherSpec = model.ToolSpec{Name: "weather", Description: "Forecast for a city.", InputSchema: json.RawMessage(weatherSchema)}
	timeSpec    = model.ToolSpec{Name: "current_time", Description: "The current time in Oslo.", InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)}
)

// serve replays testdata/name and returns a model that calls it with the configured key.
// Under -record a recordable fixture is recorded from the real API; the others are replayed.
func serve(t *testing.T, name string, recordable bool, settings model.Settings) (*openaimodel.Model, *wirefixture.Server) {
	t.Helper()
	var srv *wirefixture.Server
	key := "test-key"
	if recordable {
		key = modeltest.APIKey(t, "OPENAI_API_KEY")
		srv = wirefixture.Serve(t, name, upstream)
	} else {
		srv = wirefixture.Replay(t, name)
	}
	m, err := openaimodel.New(openaimodel.Config{Provider: "openai", Model: testModel, BaseURL: srv.URL + "/v1", APIKey: key, Settings: settings}, "")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m, srv
}

// checkSent asserts what every request of a fixture test carried besides its body, which the
// fixture pins: the path, the configured key as a bearer token, and a streamed call that asks
// for usage.
func checkSent(t *testing.T, reqs []wirefixture.Captured, want int) {
	t.Helper()
	checkSentTo(t, reqs, want, testModel)
}

// checkSentTo is checkSent of requests for the model named modelName.
func checkSentTo(t *testing.T, reqs []wirefixture.Captured, want int, modelName string) {
	t.Helper()
	if len(reqs) != want {
		t.Fatalf("server saw %d requests, want %d", len(reqs), want)
	}
	for i, r := range reqs {
		if r.Method != http.MethodPost || r.Path != wirePath {
			t.Errorf("request %d: %s %s, want POST %s", i, r.Method, r.Path, wirePath)
		}
		if got := r.Header.Get("Authorization"); !wirefixture.Recording() && got != "Bearer test-key" {
			t.Errorf("request %d: Authorization = %q, want the configured key as a bearer token", i, got)
		}
		var body struct {
			Model         string `json:"model"`
			Stream        bool   `json:"stream"`
			StreamOptions struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatalf("request %d: decoding the body: %v", i, err)
		}
		if body.Model != modelName || !body.Stream || !body.StreamOptions.IncludeUsage {
			t.Errorf("request %d: model %q stream %v include_usage %v; want %s, streamed, with usage", i, body.Model, body.Stream, body.StreamOptions.IncludeUsage, modelName)
		}
	}
}

func newModel(t *testing.T, baseURL string) *openaimodel.Model {
	t.Helper()
	m, err := openaimodel.New(openaimodel.Config{Provider: "openai", Model: "m", BaseURL: baseURL, APIKey: "test-key"}, "")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

func ptr[T any](v T) *T { return &v }

func TestTextAnswer(t *testing.T) {
	m, srv := serve(t, "text.json", true, model.Settings{})

	got, err := modeltest.Collect(t.Context(), m, &model.Request{System: "Answer in one short sentence.", Messages: []model.Message{modeltest.User("What is the capital of Norway?")}})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}

	// The empty content OpenAI opens with is not an event.
	want := []model.Event{
		{Type: model.EventTextDelta, Text: "The"},
		{Type: model.EventTextDelta, Text: " capital"},
		{Type: model.EventTextDelta, Text: " of"},
		{Type: model.EventTextDelta, Text: " Norway"},
		{Type: model.EventTextDelta, Text: " is"},
		{Type: model.EventTextDelta, Text: " Oslo"},
		{Type: model.EventTextDelta, Text: "."},
		{Type: model.EventFinish, Finish: model.FinishStop, Usage: model.Usage{InputTokens: 24, OutputTokens: 7}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	checkSent(t, srv.Requests(), 1)
}

// Two parallel tool calls whose arguments arrive in pieces, told apart by their index; a
// finish chunk with finish_reason tool_calls; then the usage chunk, which has no choices.
func TestParallelToolCalls(t *testing.T) {
	m, srv := serve(t, "tool_calls.json", true, model.Settings{})

	got, err := modeltest.Collect(t.Context(), m, &model.Request{
		Messages: []model.Message{modeltest.User("What's the weather in Oslo for the next 3 days, and what time is it there?")},
		Tools:    []model.ToolSpec{weatherSpec, timeSpec},
	})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}

	const w, c = "call_Wx4bH2kQe9", "call_P7mZc1rYt3"
	want := []model.Event{
		{Type: model.EventToolInputStart, ToolCallID: w, ToolName: "weather"},
		{Type: model.EventToolInputDelta, ToolCallID: w, Text: `{"`},
		{Type: model.EventToolInputDelta, ToolCallID: w, Text: `city`},
		{Type: model.EventToolInputDelta, ToolCallID: w, Text: `":"`},
		{Type: model.EventToolInputDelta, ToolCallID: w, Text: `Oslo`},
		{Type: model.EventToolInputDelta, ToolCallID: w, Text: `","`},
		{Type: model.EventToolInputDelta, ToolCallID: w, Text: `days`},
		{Type: model.EventToolInputDelta, ToolCallID: w, Text: `":`},
		{Type: model.EventToolInputDelta, ToolCallID: w, Text: `3`},
		{Type: model.EventToolInputDelta, ToolCallID: w, Text: `}`},
		{Type: model.EventToolInputStart, ToolCallID: c, ToolName: "current_time"},
		{Type: model.EventToolInputDelta, ToolCallID: c, Text: `{`},
		{Type: model.EventToolInputDelta, ToolCallID: c, Text: `}`},
		{Type: model.EventToolCall, ToolCallID: w, ToolName: "weather", Input: json.RawMessage(`{"city":"Oslo","days":3}`)},
		{Type: model.EventToolCall, ToolCallID: c, ToolName: "current_time", Input: json.RawMessage(`{}`)},
		{Type: model.EventFinish, Finish: model.FinishToolCalls, Usage: model.Usage{InputTokens: 87, OutputTokens: 41}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	checkSent(t, srv.Requests(), 1)
}

// The fixture's request body pins the conversion of a conversation: the assistant's text and
// tool calls in one message, one tool message per result (OpenAI has no error flag: the failed
// one is told by its content), the user's next message, the tools, and the settings.
func TestConversationWithToolResults(t *testing.T) {
	m, srv := serve(t, "conversation.json", true, model.Settings{Temperature: ptr(0.2), TopP: ptr(0.9), MaxTokens: ptr(int64(512))})

	const w, c = "call_Wx4bH2kQe9", "call_P7mZc1rYt3"
	got, err := modeltest.Collect(t.Context(), m, &model.Request{
		System: "Be brief.",
		Messages: []model.Message{
			modeltest.User("What's the weather in Oslo for the next 3 days, and what time is it there?"),
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
		{Type: model.EventTextDelta, Text: "Sun"},
		{Type: model.EventTextDelta, Text: ","},
		{Type: model.EventTextDelta, Text: " rain"},
		{Type: model.EventTextDelta, Text: ","},
		{Type: model.EventTextDelta, Text: " then"},
		{Type: model.EventTextDelta, Text: " sun"},
		{Type: model.EventTextDelta, Text: "."},
		{Type: model.EventFinish, Finish: model.FinishStop, Usage: model.Usage{InputTokens: 161, OutputTokens: 7}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	checkSent(t, srv.Requests(), 1)
}

// A 429 is retried after the wait its Retry-After asks for (1s in the fixture).
func TestRateLimitIsRetried(t *testing.T) {
	m, srv := serve(t, "rate_limited.json", false, model.Settings{})

	start := time.Now()
	got, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: []model.Message{modeltest.User("Say hello.")}})
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}

	want := []model.Event{
		{Type: model.EventTextDelta, Text: "Hello"},
		{Type: model.EventTextDelta, Text: "!"},
		{Type: model.EventFinish, Finish: model.FinishStop, Usage: model.Usage{InputTokens: 10, OutputTokens: 2}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	reqs := srv.Requests()
	checkSent(t, reqs, 2)
	if got := reqs[1].Header.Get("X-Stainless-Retry-Count"); got != "1" {
		t.Errorf("second request X-Stainless-Retry-Count = %q, want 1: it is the SDK's retry", got)
	}
	if elapsed < time.Second {
		t.Errorf("Stream took %v; the retry must wait the 1s Retry-After asks for", elapsed)
	}
}

// A 429 whose Retry-After outlasts the context's deadline is not waited for: the 429 comes
// back at once, as a ProviderError, leaving the caller its remaining time, and is not retried.
func TestRateLimitWaitPastDeadlineIsNotTaken(t *testing.T) {
	m, srv := serve(t, "rate_limited_long.json", false, model.Settings{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()

	start := time.Now()
	events, err := modeltest.Collect(ctx, m, &model.Request{Messages: []model.Message{modeltest.User("Say hello.")}})
	elapsed := time.Since(start)

	if len(events) != 0 {
		t.Errorf("events = %v, want none", events)
	}
	pe := modeltest.ProviderError(t, err, "openai")
	// A context error here would mean the SDK slept into the deadline instead.
	if pe.Status != http.StatusTooManyRequests || pe.RequestID != "req_f3c1d0e25b6a4c7d8e9f0a1b2c3d4e53" {
		t.Errorf("Status, RequestID = %d, %q; want 429, req_f3c1d0e25b6a4c7d8e9f0a1b2c3d4e53 (error: %v)", pe.Status, pe.RequestID, err)
	}
	if elapsed > 5*time.Second {
		t.Errorf("Stream took %v; it must not wait for a retry the deadline does not leave time for", elapsed)
	}
	checkSent(t, srv.Requests(), 1)
}

func TestBadRequestIsNotRetried(t *testing.T) {
	m, srv := serve(t, "bad_request.json", true, model.Settings{Temperature: ptr(5.0)})

	events, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: []model.Message{modeltest.User("Say hello.")}})

	if len(events) != 0 {
		t.Errorf("events = %v, want none", events)
	}
	pe := modeltest.ProviderError(t, err, "openai")
	if pe.Status != http.StatusBadRequest || pe.RequestID != "req_9b2f7c1e3d4a4e5b8c6d7e8f9a0b1c2d" {
		t.Errorf("Status, RequestID = %d, %q; want 400, req_9b2f7c1e3d4a4e5b8c6d7e8f9a0b1c2d", pe.Status, pe.RequestID)
	}
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.Type != "invalid_request_error" || apiErr.Param != "temperature" {
		t.Errorf("cause = %v, want the SDK's invalid_request_error about temperature", pe.Err)
	}
	if errors.Is(err, model.ErrContextLength) {
		t.Errorf("errors.Is(%v, model.ErrContextLength) = true, want false: the request is not too long", err)
	}
	checkSent(t, srv.Requests(), 1)
}

func TestContextLengthExceeded(t *testing.T) {
	m, srv := serve(t, "context_length.json", false, model.Settings{})

	events, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: []model.Message{modeltest.User("Summarise the build log above.")}})

	if len(events) != 0 {
		t.Errorf("events = %v, want none", events)
	}
	if pe := modeltest.ContextLengthError(t, err, "openai"); pe.RequestID != "req_4c1d8e2f6a7b4c3d9e0f1a2b3c4d5e6f" {
		t.Errorf("RequestID = %q, want req_4c1d8e2f6a7b4c3d9e0f1a2b3c4d5e6f", pe.RequestID)
	}
	checkSent(t, srv.Requests(), 1)
}

// TestContextLengthWording pins which 400s read as model.ErrContextLength: OpenAI's by their
// code whatever their words, an OpenAI-compatible server's (which sends no such code) by
// OpenAI's old words.
func TestContextLengthWording(t *testing.T) {
	tests := []struct {
		name string
		body string
		want bool
	}{
		{
			name: "OpenAI's code with its newer words",
			body: `{"error":{"message":"Input tokens exceed the configured limit of 272000 tokens. Your messages resulted in 533603 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			want: true,
		},
		{
			name: "vLLM, its status as the code",
			body: `{"error":{"message":"This model's maximum context length is 32768 tokens. However, you requested 40960 tokens (36864 in the messages, 4096 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}}`,
			want: true,
		},
		{
			name: "no code",
			body: `{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9216 tokens. Please reduce the length of the messages.","type":"invalid_request_error"}}`,
			want: true,
		},
		{
			name: "another code, though the words match",
			body: `{"error":{"message":"max_tokens is too large: with the messages it exceeds the maximum context length of 128000 tokens.","type":"invalid_request_error","param":"max_tokens","code":"invalid_value"}}`,
			want: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := modeltest.NewServer(t, wirefixture.Response{Status: http.StatusBadRequest, Headers: map[string]string{"Content-Type": "application/json"}, Body: tt.body})

			_, err := modeltest.Collect(t.Context(), newModel(t, srv.URL+"/v1"), &model.Request{Messages: []model.Message{modeltest.User("hi")}})

			modeltest.ProviderError(t, err, "openai")
			if got := errors.Is(err, model.ErrContextLength); got != tt.want {
				t.Errorf("errors.Is(%v, model.ErrContextLength) = %v, want %v", err, got, tt.want)
			}
		})
	}
}

// TestAPIKeyOnTheWire follows the key from where the service finds it, through provider.New
// (the block's apiKey, else the config's OPENAI_API_KEY), to the Authorization header.
func TestAPIKeyOnTheWire(t *testing.T) {
	// The process environment holds yet another key, which must never be the one sent: only
	// the config speaks for the operator.
	t.Setenv("OPENAI_API_KEY", "sk-process")
	// The fixture server is on 127.0.0.1: an agent's own base URL reaches it only because the
	// operator allows private endpoints (MODEL_PRIVATE_ENDPOINTS=allow).
	tests := []struct {
		name  string
		block string            // %s is the fixture server's base URL
		env   map[string]string // %s is the fixture server's base URL
		want  string
	}{
		{
			name:  "the service key goes to the operator's base URL",
			block: `{"provider":"openai","model":"gpt-4o-mini","baseURL":"%s"}`,
			env:   map[string]string{"OPENAI_API_KEY": "sk-env", "OPENAI_BASE_URL": "%s/"},
			want:  "Bearer sk-env",
		},
		{
			name:  "the service key never goes to an agent's own base URL",
			block: `{"provider":"openai","model":"gpt-4o-mini","baseURL":"%s"}`,
			env:   map[string]string{"OPENAI_API_KEY": "sk-env", "OPENAI_BASE_URL": "https://llm.internal.example/v1", "MODEL_PRIVATE_ENDPOINTS": "allow"},
			want:  "",
		},
		{
			name:  "nor to any base URL when the operator set none",
			block: `{"provider":"openai","model":"gpt-4o-mini","baseURL":"%s"}`,
			env:   map[string]string{"OPENAI_API_KEY": "sk-env", "MODEL_PRIVATE_ENDPOINTS": "allow"},
			want:  "",
		},
		{
			name:  "the agent's key beats the service's",
			block: `{"provider":"openai","model":"gpt-4o-mini","baseURL":"%s","apiKey":"sk-config"}`,
			env:   map[string]string{"OPENAI_API_KEY": "sk-env", "OPENAI_BASE_URL": "%s"},
			want:  "Bearer sk-config",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := wirefixture.Replay(t, "text.json")
			base := srv.URL + "/v1"
			env := func(k string) string { return strings.ReplaceAll(tt.env[k], "%s", base) }
			c := provider.Config{OpenAIKey: env("OPENAI_API_KEY"), OpenAIBaseURL: env("OPENAI_BASE_URL"), PrivateEndpoints: env("MODEL_PRIVATE_ENDPOINTS")}
			m, err := provider.New(json.RawMessage(fmt.Sprintf(tt.block, base)), c)
			if err != nil {
				t.Fatalf("provider.New: %v", err)
			}
			if _, err := modeltest.Collect(t.Context(), m, &model.Request{System: "Answer in one short sentence.", Messages: []model.Message{modeltest.User("What is the capital of Norway?")}}); err != nil {
				t.Fatalf("Stream: %v", err)
			}
			reqs := srv.Requests()
			if len(reqs) != 1 {
				t.Fatalf("server saw %d requests, want 1", len(reqs))
			}
			if got := reqs[0].Header.Get("Authorization"); got != tt.want {
				t.Errorf("Authorization = %q, want %q", got, tt.want)
			}
		})
	}
}

// openAIEnv sets the variables openai.NewClient reads from the process environment, with
// OPENAI_BASE_URL pointing at a server that fails the test if it is ever called.
func openAIEnv(t *testing.T) {
	t.Helper()
	trap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("a call went to OPENAI_BASE_URL: %s %s (Authorization %q)", r.Method, r.URL.Path, r.Header.Get("Authorization"))
		http.Error(w, "not here", http.StatusTeapot)
	}))
	t.Cleanup(trap.Close)
	t.Setenv("OPENAI_BASE_URL", trap.URL+"/v1")
	t.Setenv("OPENAI_API_KEY", "sk-process")
	t.Setenv("OPENAI_ORG_ID", "org-process")
	t.Setenv("OPENAI_PROJECT_ID", "proj_process")
	t.Setenv("OPENAI_CUSTOM_HEADERS", "X-Process-Header: leaked")
}

// checkNoEnvironment asserts a request carries nothing from the process environment.
func checkNoEnvironment(t *testing.T, h http.Header) {
	t.Helper()
	for _, k := range []string{"OpenAI-Organization", "OpenAI-Project", "X-Process-Header"} {
		if v := h.Get(k); v != "" {
			t.Errorf("%s = %q: the process environment reached the request", k, v)
		}
	}
}

// The SDK's own client would apply OPENAI_BASE_URL, OPENAI_ORG_ID, OPENAI_PROJECT_ID and
// OPENAI_CUSTOM_HEADERS from the process environment to every call; the adapter's must not.
func TestProcessEnvironmentIsIgnored(t *testing.T) {
	openAIEnv(t)
	ask := &model.Request{System: "Answer in one short sentence.", Messages: []model.Message{modeltest.User("What is the capital of Norway?")}}

	t.Run("explicit base URL", func(t *testing.T) {
		m, srv := serve(t, "text.json", false, model.Settings{})
		if _, err := modeltest.Collect(t.Context(), m, ask); err != nil {
			t.Fatalf("Stream: %v", err)
		}
		reqs := srv.Requests()
		checkSent(t, reqs, 1)
		checkNoEnvironment(t, reqs[0].Header)
	})

	t.Run("keyless server", func(t *testing.T) {
		srv := wirefixture.Replay(t, "text.json")
		m, err := openaimodel.New(openaimodel.Config{Model: testModel, BaseURL: srv.URL + "/v1"}, "")
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if _, err := modeltest.Collect(t.Context(), m, ask); err != nil {
			t.Fatalf("Stream: %v", err)
		}
		reqs := srv.Requests()
		if len(reqs) != 1 {
			t.Fatalf("server saw %d requests, want 1", len(reqs))
		}
		if got := reqs[0].Header.Get("Authorization"); got != "" {
			t.Errorf("Authorization = %q; an agent with no key must not send the process's", got)
		}
		checkNoEnvironment(t, reqs[0].Header)
	})

	t.Run("no base URL", func(t *testing.T) {
		// Calls without a base URL go to the internet: a transport standing in for it takes
		// them, answering as text.json does.
		tr := &offline{t: t, answer: wirefixture.Load(t, "text.json")[0].Response}
		saved := http.DefaultTransport
		http.DefaultTransport = tr
		t.Cleanup(func() { http.DefaultTransport = saved })
		m, err := openaimodel.New(openaimodel.Config{Model: testModel, APIKey: "test-key"}, "")
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		got, err := modeltest.Collect(t.Context(), m, ask)
		if err != nil {
			t.Fatalf("Stream: %v", err)
		}
		if n := len(got); n == 0 || got[n-1].Type != model.EventFinish {
			t.Errorf("events = %v, want the answer through its finish", got)
		}
		reqs := tr.requests()
		if len(reqs) != 1 {
			t.Fatalf("%d requests left the process, want 1", len(reqs))
		}
		if u := reqs[0].URL.String(); u != "https://api.openai.com/v1/chat/completions" {
			t.Errorf("request URL = %s, want https://api.openai.com/v1/chat/completions", u)
		}
		if got := reqs[0].Header.Get("Authorization"); got != "Bearer test-key" {
			t.Errorf("Authorization = %q, want the configured key", got)
		}
		checkNoEnvironment(t, reqs[0].Header)
	})
}

// offline is an http.RoundTripper that answers every request for api.openai.com with a
// recorded response, and fails the test on any other host.
type offline struct {
	t      *testing.T
	answer wirefixture.Response
	mu     sync.Mutex
	seen   []*http.Request
}

func (o *offline) RoundTrip(r *http.Request) (*http.Response, error) {
	o.mu.Lock()
	o.seen = append(o.seen, r)
	o.mu.Unlock()
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	if r.URL.Host != "api.openai.com" {
		o.t.Errorf("request to %s, want api.openai.com", r.URL)
		return nil, fmt.Errorf("offline: no route to %s", r.URL.Host)
	}
	h := http.Header{}
	for k, v := range o.answer.Headers {
		h.Set(k, v)
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", o.answer.Status, http.StatusText(o.answer.Status)), StatusCode: o.answer.Status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(strings.NewReader(o.answer.Body)), ContentLength: -1, Request: r,
	}, nil
}

func (o *offline) requests() []*http.Request {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]*http.Request(nil), o.seen...)
}

// weatherScript calls weather once, then answers the tool result with text.
func weatherScript(r *mockopenai.Request) mockopenai.Reply {
	if last := r.Messages[len(r.Messages)-1]; last.Role == "tool" {
		return mockopenai.Reply{Text: "Sunny in Oslo."}
	}
	return mockopenai.Reply{ToolCalls: []mockopenai.ToolCall{{Function: mockopenai.FunctionCall{Name: "weather", Arguments: `{"city":"Oslo","days":3}`}}}}
}

func TestStreamToolCallThenText(t *testing.T) {
	mock := mockopenai.New(&mockopenai.Options{Script: weatherScript})
	srv := httptest.NewServer(mock)
	defer srv.Close()
	m := newModel(t, srv.URL+"/v1")

	req := &model.Request{System: "Be brief.", Messages: []model.Message{modeltest.User("Weather in Oslo?")}, Tools: []model.ToolSpec{weatherSpec}}
	got, err := modeltest.Collect(t.Context(), m, req)
	if err != nil {
		t.Fatalf("first call: %v", err)
	}
	// The mock cuts arguments into 8-byte pieces; its usage counts four bytes a token:
	// prompt "Be brief." + "Weather in Oslo?" is 25 bytes, the call "weather" + arguments 31.
	want := []model.Event{
		{Type: model.EventToolInputStart, ToolCallID: "call_1", ToolName: "weather"},
		{Type: model.EventToolInputDelta, ToolCallID: "call_1", Text: `{"city":`},
		{Type: model.EventToolInputDelta, ToolCallID: "call_1", Text: `"Oslo","`},
		{Type: model.EventToolInputDelta, ToolCallID: "call_1", Text: `days":3}`},
		{Type: model.EventToolCall, ToolCallID: "call_1", ToolName: "weather", Input: json.RawMessage(`{"city":"Oslo","days":3}`)},
		{Type: model.EventFinish, Finish: model.FinishToolCalls, Usage: model.Usage{InputTokens: 7, OutputTokens: 8}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("first call events (-want +got):\n%s", diff)
	}

	req.Messages = append(req.Messages,
		model.Message{Role: model.RoleAssistant, Parts: []model.Part{
			{Type: model.PartToolCall, ToolCallID: "call_1", ToolName: "weather", Input: json.RawMessage(`{"city":"Oslo","days":3}`)},
		}},
		model.Message{Role: model.RoleTool, Parts: []model.Part{
			{Type: model.PartToolResult, ToolCallID: "call_1", ToolName: "weather", Output: json.RawMessage(`{"sky":"sunny"}`)},
		}},
	)
	got, err = modeltest.Collect(t.Context(), m, req)
	if err != nil {
		t.Fatalf("second call: %v", err)
	}
	// Prompt: 25 bytes as before plus the tool content's 15; completion: 14 bytes.
	want = []model.Event{
		{Type: model.EventTextDelta, Text: "Sunny "},
		{Type: model.EventTextDelta, Text: "in "},
		{Type: model.EventTextDelta, Text: "Oslo."},
		{Type: model.EventFinish, Finish: model.FinishStop, Usage: model.Usage{InputTokens: 10, OutputTokens: 4}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("second call events (-want +got):\n%s", diff)
	}

	reqs := mock.Requests()
	if len(reqs) != 2 {
		t.Fatalf("mock recorded %d requests, want 2", len(reqs))
	}
	r := reqs[1]
	if r.Path != "/v1/chat/completions" || r.Model != "m" || !r.Stream || r.StreamOptions == nil || !r.StreamOptions.IncludeUsage {
		t.Errorf("request path %q model %q stream %v stream_options %+v; want /v1/chat/completions, m, streamed with usage",
			r.Path, r.Model, r.Stream, r.StreamOptions)
	}
	wantMessages := []wireMessage{
		{Role: "system", Text: "Be brief."},
		{Role: "user", Text: "Weather in Oslo?"},
		{Role: "assistant", ToolCalls: []mockopenai.ToolCall{{ID: "call_1", Type: "function", Function: mockopenai.FunctionCall{Name: "weather", Arguments: `{"city":"Oslo","days":3}`}}}},
		{Role: "tool", Text: `{"sky":"sunny"}`, ToolCallID: "call_1"},
	}
	if diff := cmp.Diff(wantMessages, wireMessages(r)); diff != "" {
		t.Errorf("request messages (-want +got):\n%s", diff)
	}
	wantTools := []wireTool{{Type: "function", Name: "weather", Description: "Forecast for a city.", Parameters: modeltest.Decode(t, weatherSchema)}}
	if diff := cmp.Diff(wantTools, wireTools(t, r)); diff != "" {
		t.Errorf("request tools (-want +got):\n%s", diff)
	}
}

// wireMessage is a recorded request message reduced to what the adapter controls.
type wireMessage struct {
	Role       string
	Text       string
	ToolCalls  []mockopenai.ToolCall
	ToolCallID string
}

func wireMessages(r mockopenai.Request) []wireMessage {
	var out []wireMessage
	for _, m := range r.Messages {
		out = append(out, wireMessage{Role: m.Role, Text: m.Text(), ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID})
	}
	return out
}

type wireTool struct {
	Type        string
	Name        string
	Description string
	Parameters  any
}

func wireTools(t *testing.T, r mockopenai.Request) []wireTool {
	var out []wireTool
	for _, tl := range r.Tools {
		out = append(out, wireTool{Type: tl.Type, Name: tl.Function.Name, Description: tl.Function.Description, Parameters: modeltest.Decode(t, string(tl.Function.Parameters))})
	}
	return out
}

// TestRequestShape pins how conversations are translated to OpenAI messages.
func TestRequestShape(t *testing.T) {
	tests := []struct {
		name string
		req  model.Request
		want []wireMessage
	}{
		{
			name: "no system prompt",
			req:  model.Request{Messages: []model.Message{modeltest.User("hi")}},
			want: []wireMessage{{Role: "user", Text: "hi"}},
		},
		{
			name: "user text parts are joined",
			req: model.Request{Messages: []model.Message{{Role: model.RoleUser, Parts: []model.Part{
				{Type: model.PartText, Text: "Hello, "}, {Type: model.PartText, Text: "world"},
			}}}},
			want: []wireMessage{{Role: "user", Text: "Hello, world"}},
		},
		{
			name: "assistant text with two tool calls and their results",
			req: model.Request{System: "sys", Messages: []model.Message{
				modeltest.User("go"),
				{Role: model.RoleAssistant, Parts: []model.Part{
					{Type: model.PartText, Text: "Checking."},
					{Type: model.PartToolCall, ToolCallID: "a", ToolName: "weather", Input: json.RawMessage(`{"city":"Oslo"}`)},
					{Type: model.PartToolCall, ToolCallID: "b", ToolName: "current_time", Input: json.RawMessage(`{}`)},
				}},
				{Role: model.RoleTool, Parts: []model.Part{
					{Type: model.PartToolResult, ToolCallID: "a", ToolName: "weather", Output: json.RawMessage(`"rain"`)},
					{Type: model.PartToolResult, ToolCallID: "b", ToolName: "current_time", Output: json.RawMessage(`{"error":"clock broken"}`), IsError: true},
				}},
				{Role: model.RoleAssistant, Parts: []model.Part{{Type: model.PartText, Text: "Rain."}}},
				modeltest.User("thanks"),
			}},
			want: []wireMessage{
				{Role: "system", Text: "sys"},
				{Role: "user", Text: "go"},
				{Role: "assistant", Text: "Checking.", ToolCalls: []mockopenai.ToolCall{
					{ID: "a", Type: "function", Function: mockopenai.FunctionCall{Name: "weather", Arguments: `{"city":"Oslo"}`}},
					{ID: "b", Type: "function", Function: mockopenai.FunctionCall{Name: "current_time", Arguments: `{}`}},
				}},
				{Role: "tool", Text: `"rain"`, ToolCallID: "a"},
				{Role: "tool", Text: `{"error":"clock broken"}`, ToolCallID: "b"},
				{Role: "assistant", Text: "Rain."},
				{Role: "user", Text: "thanks"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mock := mockopenai.New(&mockopenai.Options{Script: func(*mockopenai.Request) mockopenai.Reply { return mockopenai.Reply{Text: "ok"} }})
			srv := httptest.NewServer(mock)
			defer srv.Close()
			if _, err := modeltest.Collect(t.Context(), newModel(t, srv.URL+"/v1"), &tt.req); err != nil {
				t.Fatalf("Stream: %v", err)
			}
			reqs := mock.Requests()
			if len(reqs) != 1 {
				t.Fatalf("mock recorded %d requests, want 1", len(reqs))
			}
			if diff := cmp.Diff(tt.want, wireMessages(reqs[0])); diff != "" {
				t.Errorf("request messages (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSettingsAreSent(t *testing.T) {
	mock := mockopenai.New(nil)
	srv := httptest.NewServer(mock)
	defer srv.Close()
	temp, topP, maxTokens := 0.25, 0.5, int64(64)
	m, err := openaimodel.New(openaimodel.Config{
		Model: "m", BaseURL: srv.URL + "/v1/",
		Settings: model.Settings{Temperature: &temp, TopP: &topP, MaxTokens: &maxTokens},
	}, "")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if _, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: []model.Message{modeltest.User("hi")}}); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	reqs := mock.Requests()
	if len(reqs) != 1 {
		t.Fatalf("mock recorded %d requests, want 1", len(reqs))
	}
	var body struct {
		Temperature         *float64 `json:"temperature"`
		TopP                *float64 `json:"top_p"`
		MaxCompletionTokens *int64   `json:"max_completion_tokens"`
	}
	if err := json.Unmarshal(reqs[0].Body, &body); err != nil {
		t.Fatalf("decoding the request body: %v", err)
	}
	got := []any{body.Temperature, body.TopP, body.MaxCompletionTokens}
	want := []any{&temp, &topP, &maxTokens}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("temperature, top_p, max_completion_tokens (-want +got):\n%s", diff)
	}
}

func TestStreamRejectsBadRequests(t *testing.T) {
	tests := []struct {
		name string
		req  model.Request
		want string
	}{
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := modeltest.NewServer(t, mockopenai.New(nil))
			modeltest.CheckRefused(t, newModel(t, srv.URL+"/v1"), srv, &tt.req, tt.want)
		})
	}
}

func TestServerErrorAfterRetries(t *testing.T) {
	srv := modeltest.NewServer(t, wirefixture.Response{
		Status: http.StatusInternalServerError,
		// Retry at once: the test is about the outcome, not the SDK's backoff.
		Headers: map[string]string{"Retry-After-Ms": "0", "Content-Type": "application/json"},
		Body:    `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`,
	})

	events, err := modeltest.Collect(t.Context(), newModel(t, srv.URL), &model.Request{Messages: []model.Message{modeltest.User("hi")}})

	if len(events) != 0 {
		t.Errorf("events = %v, want none", events)
	}
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("Stream error = %v (%T), want an *openai.Error", err, err)
	}
	if apiErr.StatusCode != http.StatusInternalServerError {
		t.Errorf("status = %d, want %d", apiErr.StatusCode, http.StatusInternalServerError)
	}
	var pe *model.ProviderError
	if !errors.As(err, &pe) || pe.Provider != "openai" || pe.Status != http.StatusInternalServerError {
		t.Errorf("error = %#v, want a *model.ProviderError from openai with status 500", err)
	}
	if attempts := len(srv.Requests()); attempts != 3 {
		t.Errorf("server saw %d attempts, want 3 (one call and two retries)", attempts)
	}
}

// Without a wait named by the server, the SDK's backoff (about 0.5s before the first retry) is
// what must fit the deadline: with 300ms left the 503 comes back at once.
func TestServerErrorBackoffPastDeadlineIsNotTaken(t *testing.T) {
	srv := modeltest.NewServer(t, wirefixture.Response{
		Status:  http.StatusServiceUnavailable,
		Headers: map[string]string{"Content-Type": "application/json", "X-Request-Id": "req_503"},
		Body:    `{"error":{"message":"The engine is currently overloaded, please try again later.","type":"server_error","param":null,"code":null}}`,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()

	_, err := modeltest.Collect(ctx, newModel(t, srv.URL), &model.Request{Messages: []model.Message{modeltest.User("hi")}})

	pe := modeltest.ProviderError(t, err, "openai")
	if pe.Status != http.StatusServiceUnavailable || pe.RequestID != "req_503" {
		t.Errorf("Status, RequestID = %d, %q; want 503, req_503 (error: %v)", pe.Status, pe.RequestID, err)
	}
	if attempts := len(srv.Requests()); attempts != 1 {
		t.Errorf("server saw %d attempts, want 1", attempts)
	}
}

// sseServer returns a model whose every chat completion is answered with body as an event
// stream; any other route is not found.
func sseServer(t *testing.T, body string) *openaimodel.Model {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("POST /chat/completions", modeltest.SSE(body))
	return newModel(t, modeltest.NewServer(t, mux).URL)
}

func TestFinishReasons(t *testing.T) {
	tests := []struct {
		wire string // finish_reason as sent; empty sends none
		want model.FinishReason
	}{
		{"stop", model.FinishStop},
		{"length", model.FinishLength},
		{"tool_calls", model.FinishToolCalls},
		{"function_call", model.FinishToolCalls},
		{"content_filter", model.FinishFilter},
		{"something_new", model.FinishOther},
		{"", model.FinishOther},
	}
	for _, tt := range tests {
		name, finish := "none", "null"
		if tt.wire != "" {
			name, finish = tt.wire, `"`+tt.wire+`"`
		}
		t.Run(name, func(t *testing.T) {
			body := fmt.Sprintf(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"logprobs":null,"finish_reason":%s}]}`+"\n\n"+
				"data: [DONE]\n\n", finish)
			got, err := modeltest.Collect(t.Context(), sseServer(t, body), &model.Request{Messages: []model.Message{modeltest.User("hi")}})
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			want := []model.Event{
				{Type: model.EventTextDelta, Text: "Hi"},
				{Type: model.EventFinish, Finish: tt.want},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStreamStopsWhenTheConsumerBreaks(t *testing.T) {
	m := sseServer(t, wirefixture.Load(t, "tool_calls.json")[0].Response.Body)
	modeltest.CheckBreaks(t, m, &model.Request{Messages: []model.Message{modeltest.User("hi")}}, 16)
}

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		cfg     openaimodel.Config
		envKey  string
		wantErr string // empty: New must succeed
	}{
		{name: "missing model", cfg: openaimodel.Config{APIKey: "k"}, wantErr: "model.model is required"},
		{name: "missing model with a base URL", cfg: openaimodel.Config{BaseURL: "http://localhost:1"}, wantErr: "model.model is required"},
		{name: "no key and no base URL", cfg: openaimodel.Config{Model: "gpt-4o-mini"}, wantErr: "needs model.apiKey or OPENAI_API_KEY"},
		{name: "key in the config", cfg: openaimodel.Config{Model: "gpt-4o-mini", APIKey: "k"}},
		{name: "key from the environment", cfg: openaimodel.Config{Model: "gpt-4o-mini"}, envKey: "k"},
		{name: "keyless local server", cfg: openaimodel.Config{Model: "llama", BaseURL: "http://localhost:11434/v1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := openaimodel.New(tt.cfg, tt.envKey)
			modeltest.CheckNew(t, m, err, tt.wantErr)
		})
	}
}

// A structured output is asked for as response_format json_schema, not strict, the retry's note
// sent as a user message; the answer is the object's JSON as content.
func TestStructuredOutput(t *testing.T) {
	m, srv := serve(t, "output.json", false, model.Settings{})
	modeltest.CheckOutput(t, m, model.Usage{InputTokens: 88, OutputTokens: 9})
	checkSent(t, srv.Requests(), 1)
}
