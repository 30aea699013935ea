package mockopenai_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentharness/harness/infra/mockopenai"
)

// fixedNow pins "created" so whole responses can be compared.
func fixedNow() time.Time { return time.Unix(1700000000, 0) }

const (
	userOnly  = `[{"role":"user","content":"What time is it?"}]`
	afterTool = `[{"role":"user","content":"What time is it?"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"current_time","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"2025-01-02T03:04:05Z"}]`
	twoTools = `[{"type":"function","function":{"name":"current_time","parameters":{"type":"object","properties":{}}}},
		{"type":"function","function":{"name":"weather","parameters":{"type":"object"}}}]`
)

// turn is a streamed reply put back together the way a client accumulates it.
type turn struct {
	Text      string
	ToolCalls []mockopenai.ToolCall
	Finish    string
	Usage     map[string]int
}

func TestStream(t *testing.T) {
	tests := []struct {
		name   string
		script mockopenai.Script
		body   string
		want   turn
	}{
		{
			name: "tool call when tools are offered",
			body: `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":` + userOnly + `,"tools":` + twoTools + `}`,
			want: turn{
				ToolCalls: []mockopenai.ToolCall{{ID: "call_1", Type: "function", Function: mockopenai.FunctionCall{Name: "current_time", Arguments: "{}"}}},
				Finish:    "tool_calls",
				Usage:     map[string]int{"prompt_tokens": 4, "completion_tokens": 4, "total_tokens": 8},
			},
		},
		{
			name: "text quoting the tool result",
			body: `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":` + afterTool + `,"tools":` + twoTools + `}`,
			want: turn{
				Text:   "The tool returned: 2025-01-02T03:04:05Z",
				Finish: "stop",
				Usage:  map[string]int{"prompt_tokens": 9, "completion_tokens": 10, "total_tokens": 19},
			},
		},
		{
			name: "no usage chunk unless asked",
			body: `{"model":"m","stream":true,"messages":` + afterTool + `}`,
			want: turn{Text: "The tool returned: 2025-01-02T03:04:05Z", Finish: "stop"},
		},
		{
			name: "tool_choice none answers in text",
			body: `{"model":"m","stream":true,"tool_choice":"none","messages":` + userOnly + `,"tools":` + twoTools + `}`,
			want: turn{Text: "You said: What time is it?", Finish: "stop"},
		},
		{
			name: "forced tool_choice picks the named tool",
			body: `{"model":"m","stream":true,"tool_choice":{"type":"function","function":{"name":"weather"}},"messages":` + userOnly + `,"tools":` + twoTools + `}`,
			want: turn{
				ToolCalls: []mockopenai.ToolCall{{ID: "call_1", Type: "function", Function: mockopenai.FunctionCall{Name: "weather", Arguments: "{}"}}},
				Finish:    "tool_calls",
			},
		},
		{
			name: "scripted text then two calls with long arguments",
			script: func(*mockopenai.Request) mockopenai.Reply {
				return mockopenai.Reply{Text: "Checking both.", ToolCalls: []mockopenai.ToolCall{
					{Function: mockopenai.FunctionCall{Name: "weather", Arguments: `{"city":"Zürich","days":3}`}},
					{ID: "mine", Function: mockopenai.FunctionCall{Name: "current_time", Arguments: "{}"}},
				}}
			},
			body: `{"model":"m","stream":true,"messages":` + userOnly + `}`,
			want: turn{
				Text: "Checking both.",
				ToolCalls: []mockopenai.ToolCall{
					{ID: "call_1", Type: "function", Function: mockopenai.FunctionCall{Name: "weather", Arguments: `{"city":"Zürich","days":3}`}},
					{ID: "mine", Type: "function", Function: mockopenai.FunctionCall{Name: "current_time", Arguments: "{}"}},
				},
				Finish: "tool_calls",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(mockopenai.New(&mockopenai.Options{Script: tt.script, Now: fixedNow}))
			defer srv.Close()
			resp := post(t, srv.URL+"/v1/chat/completions", tt.body)
			if got := resp.Header.Get("Content-Type"); got != "text/event-stream" {
				t.Errorf("Content-Type = %q, want text/event-stream", got)
			}
			got := readStream(t, resp.Body, strings.Contains(tt.body, `"include_usage":true`))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("streamed reply (-want +got):\n%s", diff)
			}
		})
	}
}

// readStream checks the stream's framing and chunk shape, then accumulates it.
func readStream(t *testing.T, body io.Reader, includeUsage bool) turn {
	t.Helper()
	var got turn
	var frames []string
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("line %q is not a data line", line)
		}
		frames = append(frames, data)
	}
	if len(frames) == 0 || frames[len(frames)-1] != "[DONE]" {
		t.Fatalf("stream does not end with data: [DONE]: %q", frames)
	}
	frames = frames[:len(frames)-1]
	for i, frame := range frames {
		var c struct {
			ID      string          `json:"id"`
			Object  string          `json:"object"`
			Created int64           `json:"created"`
			Model   string          `json:"model"`
			Usage   json.RawMessage `json:"usage"`
			Choices []struct {
				Index        int             `json:"index"`
				FinishReason *string         `json:"finish_reason"`
				Logprobs     json.RawMessage `json:"logprobs"`
				Delta        struct {
					Role      string  `json:"role"`
					Content   *string `json:"content"`
					ToolCalls []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Type     string `json:"type"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(frame), &c); err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		if c.ID != "chatcmpl-mock-1" || c.Object != "chat.completion.chunk" || c.Created != 1700000000 || c.Model != "m" {
			t.Errorf("chunk %d header = %q %q %d %q", i, c.ID, c.Object, c.Created, c.Model)
		}
		if i == 0 && (len(c.Choices) != 1 || c.Choices[0].Delta.Role != "assistant") {
			t.Errorf("chunk 0 does not carry role assistant: %s", frame)
		}
		isUsage := includeUsage && i == len(frames)-1
		switch {
		case isUsage && len(c.Choices) != 0:
			t.Errorf("usage chunk has choices: %s", frame)
		case !isUsage && (len(c.Choices) != 1 || string(c.Choices[0].Logprobs) != "null"):
			t.Errorf("chunk %d: want one choice with logprobs null: %s", i, frame)
		case !includeUsage && c.Usage != nil:
			t.Errorf("chunk %d has usage without include_usage: %s", i, frame)
		case includeUsage && !isUsage && string(c.Usage) != "null":
			t.Errorf("chunk %d: want usage null: %s", i, frame)
		}
		if isUsage {
			if err := json.Unmarshal(c.Usage, &got.Usage); err != nil {
				t.Fatalf("usage: %v", err)
			}
			continue
		}
		ch := c.Choices[0]
		if ch.FinishReason != nil {
			if i != len(frames)-1-btoi(includeUsage) {
				t.Errorf("finish_reason on chunk %d, before the end", i)
			}
			got.Finish = *ch.FinishReason
		}
		if ch.Delta.Content != nil {
			got.Text += *ch.Delta.Content
		}
		for _, d := range ch.Delta.ToolCalls {
			if d.Index == len(got.ToolCalls) {
				got.ToolCalls = append(got.ToolCalls, mockopenai.ToolCall{ID: d.ID, Type: d.Type})
			}
			tc := &got.ToolCalls[d.Index]
			tc.Function.Name += d.Function.Name
			tc.Function.Arguments += d.Function.Arguments
		}
	}
	return got
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestNonStreaming(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string
	}{
		{
			name: "tool call",
			body: `{"model":"m","messages":` + userOnly + `,"tools":` + twoTools + `}`,
			want: `{"id":"chatcmpl-mock-1","object":"chat.completion","created":1700000000,"model":"m",
				"choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":null,
				"tool_calls":[{"id":"call_1","type":"function","function":{"name":"current_time","arguments":"{}"}}]},
				"logprobs":null,"finish_reason":"tool_calls"}],
				"usage":{"prompt_tokens":4,"completion_tokens":4,"total_tokens":8}}`,
		},
		{
			name: "text after the tool result",
			body: `{"model":"m","messages":` + afterTool + `}`,
			want: `{"id":"chatcmpl-mock-1","object":"chat.completion","created":1700000000,"model":"m",
				"choices":[{"index":0,"message":{"role":"assistant","content":"The tool returned: 2025-01-02T03:04:05Z","refusal":null},
				"logprobs":null,"finish_reason":"stop"}],
				"usage":{"prompt_tokens":9,"completion_tokens":10,"total_tokens":19}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(mockopenai.New(&mockopenai.Options{Now: fixedNow}))
			defer srv.Close()
			resp := post(t, srv.URL+"/chat/completions", tt.body)
			var got, want any
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tt.want), &want); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOfficialClient runs a whole tool turn through OpenAI's own Go SDK, which is the best
// evidence that the wire shape is the documented one.
func TestOfficialClient(t *testing.T) {
	srv := httptest.NewServer(mockopenai.New(nil))
	defer srv.Close()
	ctx := context.Background()
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("test"), option.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{
		Model:         "m",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What time is it?")},
		Tools:         []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "current_time"})},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}

	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		if !acc.AddChunk(stream.Current()) {
			t.Fatalf("accumulator rejected chunk %s", stream.Current().RawJSON())
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("streaming: %v", err)
	}
	calls := acc.Choices[0].Message.ToolCalls
	if len(calls) != 1 || calls[0].ID != "call_1" || calls[0].Function.Name != "current_time" || calls[0].Function.Arguments != "{}" {
		t.Fatalf("tool calls = %+v, want one call_1 of current_time with {}", calls)
	}
	if acc.Choices[0].FinishReason != "tool_calls" || acc.Usage.TotalTokens == 0 {
		t.Errorf("finish_reason %q, usage %+v; want tool_calls and a usage", acc.Choices[0].FinishReason, acc.Usage)
	}

	params.Messages = append(params.Messages, acc.Choices[0].Message.ToParam(), openai.ToolMessage("noon", calls[0].ID))
	done, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatalf("second round trip: %v", err)
	}
	if got, want := done.Choices[0].Message.Content, "The tool returned: noon"; got != want {
		t.Errorf("content = %q, want %q", got, want)
	}
}

func TestRequestsAreRecorded(t *testing.T) {
	s := mockopenai.New(nil)
	srv := httptest.NewServer(s)
	defer srv.Close()
	body := `{"model":"m","stream":true,"messages":` + afterTool + `,"tools":` + twoTools + `}`
	io.Copy(io.Discard, post(t, srv.URL+"/v1/chat/completions", body).Body)

	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("recorded %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	got := []string{r.Path, r.Model, r.Messages[2].Role, r.Messages[2].ToolCallID, r.Messages[2].Text(), r.Messages[1].ToolCalls[0].Function.Name, r.Tools[1].Function.Name}
	want := []string{"/v1/chat/completions", "m", "tool", "call_1", "2025-01-02T03:04:05Z", "current_time", "weather"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("recorded request (-want +got):\n%s", diff)
	}
	if string(r.Body) != body || !r.Stream {
		t.Errorf("recorded body %q stream %v, want the body as sent and stream true", r.Body, r.Stream)
	}
}

func TestMessageText(t *testing.T) {
	tests := []struct {
		content string
		want    string
	}{
		{`"plain"`, "plain"},
		{`[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"b"}]`, "ab"},
		{`null`, ""},
	}
	for _, tt := range tests {
		if got := (mockopenai.Message{Content: json.RawMessage(tt.content)}).Text(); got != tt.want {
			t.Errorf("Text(%s) = %q, want %q", tt.content, got, tt.want)
		}
	}
}

func TestBadRequests(t *testing.T) {
	tests := []struct {
		name, method, path, body string
		wantStatus               int
		wantType                 string
	}{
		{"invalid JSON", http.MethodPost, "/v1/chat/completions", `{`, http.StatusBadRequest, "invalid_request_error"},
		{"no messages", http.MethodPost, "/v1/chat/completions", `{"model":"m","messages":[]}`, http.StatusBadRequest, "invalid_request_error"},
		{"wrong method", http.MethodGet, "/v1/chat/completions", "", http.StatusMethodNotAllowed, ""},
		{"unknown path", http.MethodPost, "/v1/completions", `{}`, http.StatusNotFound, ""},
	}
	srv := httptest.NewServer(mockopenai.New(nil))
	defer srv.Close()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status = %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			if tt.wantType == "" {
				return
			}
			var e struct {
				Error struct{ Message, Type string }
			}
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || e.Error.Type != tt.wantType || e.Error.Message == "" {
				t.Errorf("error body = %+v (%v), want type %q and a message", e, err, tt.wantType)
			}
		})
	}
}

func TestChunkDelayStopsWithTheClient(t *testing.T) {
	srv := httptest.NewServer(mockopenai.New(&mockopenai.Options{ChunkDelay: time.Hour}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","stream":true,"messages":`+userOnly+`}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err == nil {
		t.Fatal("stream finished despite an hour's delay per chunk")
	}
	// srv.Close waits for the handler, so the test hangs if the delay ignores the cancellation.
}

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	return resp
}
