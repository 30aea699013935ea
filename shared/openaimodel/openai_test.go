package openaimodel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/agentharness/harness/infra/mockopenai"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/openaimodel"
	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
)

const weatherSchema = `{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}`

var weatherSpec = model.ToolSpec{Name: "weather", Description: "Forecast for a city.", InputSchema: json.RawMessage(weatherSchema)}

func newModel(t *testing.T, baseURL string) *openaimodel.Model {
	t.Helper()
	m, err := openaimodel.New(openaimodel.Config{Provider: "openai", Model: "m", BaseURL: baseURL, APIKey: "test-key"}, "")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

func collect(m *openaimodel.Model, req *model.Request) ([]model.Event, error) {
	var events []model.Event
	for ev, err := range m.Stream(context.Background(), req) {
		if err != nil {
			return events, err
		}
		events = append(events, ev)
	}
	return events, nil
}

func user(text string) model.Message {
	return model.Message{Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: text}}}
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

	req := &model.Request{System: "Be brief.", Messages: []model.Message{user("Weather in Oslo?")}, Tools: []model.ToolSpec{weatherSpec}}
	got, err := collect(m, req)
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
	got, err = collect(m, req)
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
	wantTools := []wireTool{{Type: "function", Name: "weather", Description: "Forecast for a city.", Parameters: decode(t, weatherSchema)}}
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
		out = append(out, wireTool{Type: tl.Type, Name: tl.Function.Name, Description: tl.Function.Description, Parameters: decode(t, string(tl.Function.Parameters))})
	}
	return out
}

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decoding %s: %v", s, err)
	}
	return v
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
			req:  model.Request{Messages: []model.Message{user("hi")}},
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
				user("go"),
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
				user("thanks"),
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
			if _, err := collect(newModel(t, srv.URL+"/v1"), &tt.req); err != nil {
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
	if _, err := collect(m, &model.Request{Messages: []model.Message{user("hi")}}); err != nil {
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
			req:  model.Request{Messages: []model.Message{user("hi")}, Tools: []model.ToolSpec{{Name: "broken", InputSchema: json.RawMessage(`{`)}}},
			want: "tool broken",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mock := mockopenai.New(nil)
			srv := httptest.NewServer(mock)
			defer srv.Close()
			events, err := collect(newModel(t, srv.URL+"/v1"), &tt.req)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Stream error = %v, want one containing %q", err, tt.want)
			}
			if len(events) != 0 {
				t.Errorf("events = %v, want none", events)
			}
			if n := len(mock.Requests()); n != 0 {
				t.Errorf("mock received %d requests, want none", n)
			}
		})
	}
}

func TestServerErrorAfterRetries(t *testing.T) {
	var mu sync.Mutex
	attempts := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		attempts++
		mu.Unlock()
		io.Copy(io.Discard, r.Body)
		// Retry at once: the test is about the outcome, not the SDK's backoff.
		w.Header().Set("Retry-After-Ms", "0")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`)
	}))
	defer srv.Close()

	events, err := collect(newModel(t, srv.URL), &model.Request{Messages: []model.Message{user("hi")}})

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
	mu.Lock()
	defer mu.Unlock()
	if attempts != 3 {
		t.Errorf("server saw %d attempts, want 3 (one call and two retries)", attempts)
	}
}

// sseServer answers every chat completion with body as an event stream, and keeps the last
// request body.
func sseServer(t *testing.T, body string) (*httptest.Server, *[]byte) {
	t.Helper()
	var got []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/chat/completions" {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		got, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, &got
}

// The fixture is hand-written in the documented Chat Completions streaming shape: two
// parallel tool calls whose arguments arrive in pieces, a finish chunk, a usage chunk with no
// choices, then [DONE].
func TestFixtureParallelToolCalls(t *testing.T) {
	body, err := os.ReadFile("testdata/parallel_tool_calls.sse")
	if err != nil {
		t.Fatal(err)
	}
	srv, sent := sseServer(t, string(body))

	got, err := collect(newModel(t, srv.URL), &model.Request{Messages: []model.Message{user("Weather in Oslo, and the time?")}, Tools: []model.ToolSpec{weatherSpec}})
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

	var req struct {
		Model         string `json:"model"`
		Stream        bool   `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(*sent, &req); err != nil {
		t.Fatalf("decoding the request: %v", err)
	}
	if req.Model != "m" || !req.Stream || !req.StreamOptions.IncludeUsage {
		t.Errorf("request model %q stream %v include_usage %v, want m, true, true", req.Model, req.Stream, req.StreamOptions.IncludeUsage)
	}
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
			srv, _ := sseServer(t, body)
			got, err := collect(newModel(t, srv.URL), &model.Request{Messages: []model.Message{user("hi")}})
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
	body, err := os.ReadFile("testdata/parallel_tool_calls.sse")
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := sseServer(t, string(body))
	m := newModel(t, srv.URL)
	for stop := 1; stop <= 16; stop++ {
		n := 0
		for _, err := range m.Stream(context.Background(), &model.Request{Messages: []model.Message{user("hi")}}) {
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			n++
			if n == stop {
				break
			}
		}
		if n != stop {
			t.Errorf("consumer breaking after %d events saw %d", stop, n)
		}
	}
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
			if tt.wantErr == "" {
				if err != nil || m == nil {
					t.Errorf("New() = %v, %v; want a model", m, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("New() error = %v, want one containing %q", err, tt.wantErr)
			}
			if m != nil {
				t.Errorf("New() model = %v, want nil on error", m)
			}
		})
	}
}
