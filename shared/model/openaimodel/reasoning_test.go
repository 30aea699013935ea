// The reasoning fixtures are hand-written and replayed even under -record. reasoning_effort.json
// follows OpenAI's reasoning models docs: the request's reasoning_effort and
// max_completion_tokens, an answer whose reasoning stays hidden, and its reasoning tokens in
// completion_tokens_details. reasoning_content.json and reasoning_history.json follow DeepSeek's
// reasoning model docs (deepseek-reasoner through its OpenAI-compatible base URL): the
// reasoning streamed as delta.reasoning_content beside a null content, then the answer as
// content, and the next round's request without the reasoning of a plain answer.
package openaimodel_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentharness/harness/infra/mockopenai"
	"github.com/agentharness/harness/infra/wirefixture"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/modeltest"
	"github.com/agentharness/harness/shared/model/openaimodel"
	"github.com/google/go-cmp/cmp"
)

// replay serves testdata/name to a model built from cfg, with the fixture server's base URL
// and the test key.
func replay(t *testing.T, name string, cfg openaimodel.Config) (*openaimodel.Model, *wirefixture.Server) {
	t.Helper()
	srv := wirefixture.Replay(t, name)
	cfg.Provider, cfg.BaseURL, cfg.APIKey = "openai", srv.URL+"/v1", "test-key"
	m, err := openaimodel.New(cfg, "")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m, srv
}

// events is one event of typ per piece of text.
func events(typ model.EventType, pieces ...string) []model.Event {
	out := make([]model.Event, 0, len(pieces))
	for _, p := range pieces {
		out = append(out, model.Event{Type: typ, Text: p})
	}
	return out
}

// A budget is sent as the effort it stands for, with max_completion_tokens; OpenAI streams no
// reasoning text, only its token count in the usage.
func TestReasoningEffort(t *testing.T) {
	m, srv := replay(t, "reasoning_effort.json", openaimodel.Config{
		Model: "o4-mini", Reasoning: &model.Reasoning{BudgetTokens: 8192}, Settings: model.Settings{MaxTokens: ptr(int64(4096))},
	})

	got, err := modeltest.Collect(t.Context(), m, &model.Request{System: "Answer in one short sentence.", Messages: []model.Message{modeltest.User("How many r's are in the word strawberry?")}})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}

	want := events(model.EventTextDelta, "There", " are", " three", " r", "’s", " in", " “", "str", "awberry", "”.")
	want = append(want, model.Event{Type: model.EventFinish, Finish: model.FinishStop, Usage: model.Usage{
		InputTokens: 26, OutputTokens: 218, OutputTokenDetails: model.OutputTokenDetails{TextTokens: 26, ReasoningTokens: 192},
	}})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	checkSentTo(t, srv.Requests(), 1, "o4-mini")
}

// Each effort, or budget, becomes one of OpenAI's reasoning_effort levels; a block without
// reasoning sends none.
func TestReasoningEffortLevels(t *testing.T) {
	tests := []struct {
		reasoning *model.Reasoning
		want      string // empty: no reasoning_effort
	}{
		{nil, ""},
		{&model.Reasoning{Effort: model.EffortLow}, "low"},
		{&model.Reasoning{Effort: model.EffortMedium}, "medium"},
		{&model.Reasoning{Effort: model.EffortHigh}, "high"},
		{&model.Reasoning{BudgetTokens: 1024}, "low"},
		{&model.Reasoning{BudgetTokens: 16384}, "high"},
	}
	for _, tt := range tests {
		mock := mockopenai.New(nil)
		srv := httptest.NewServer(mock)
		m, err := openaimodel.New(openaimodel.Config{Model: "o4-mini", BaseURL: srv.URL + "/v1", Reasoning: tt.reasoning}, "")
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if _, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: []model.Message{modeltest.User("hi")}}); err != nil {
			t.Fatalf("Stream: %v", err)
		}
		srv.Close()
		var body struct {
			ReasoningEffort string `json:"reasoning_effort"`
		}
		if err := json.Unmarshal(mock.Requests()[0].Body, &body); err != nil {
			t.Fatalf("decoding the request body: %v", err)
		}
		if body.ReasoningEffort != tt.want {
			t.Errorf("reasoning %+v: reasoning_effort %q, want %q", tt.reasoning, body.ReasoningEffort, tt.want)
		}
	}
}

// DeepSeek streams its reasoning as reasoning_content before the answer: reasoning deltas,
// then an end attributed to this adapter (there is no signature) as the answer starts.
func TestReasoningContentStream(t *testing.T) {
	m, srv := replay(t, "reasoning_content.json", openaimodel.Config{Model: "deepseek-reasoner"})

	got, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: []model.Message{modeltest.User("9.11 and 9.8, which is greater?")}})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}

	want := events(model.EventReasoningDelta, "Okay", ",", " compare", " 9", ".", "11", " and", " 9", ".", "8", ":", " same", " whole", " part", ";", " 0", ".", "8", "0", " >", " 0", ".", "11", ".")
	want = append(want, model.Event{Type: model.EventReasoningEnd, Provider: "openai"})
	want = append(want, events(model.EventTextDelta, "9", ".", "8", " is", " greater", " than", " 9", ".", "11", ".")...)
	want = append(want, model.Event{Type: model.EventFinish, Finish: model.FinishStop, Usage: model.Usage{
		InputTokens: 18, OutputTokens: 36, OutputTokenDetails: model.OutputTokenDetails{TextTokens: 10, ReasoningTokens: 26},
	}})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	checkSentTo(t, srv.Requests(), 1, "deepseek-reasoner")
}

// No reasoning part of a history without tool calls of this adapter's is sent back: not this
// adapter's own on a plain answer (DeepSeek's reasoning model docs refuse reasoning_content
// there), nor those of
// fallbacks of other providers, with their signatures and redacted reasoning, nor a Gemini
// thought signature on a tool call. The fixture pins the request: text and tool calls only.
func TestReasoningHistoryIsNotSent(t *testing.T) {
	m, srv := replay(t, "reasoning_history.json", openaimodel.Config{Model: "deepseek-reasoner"})

	const call = "call_0_8f3a2c1e-6b4d-4e7a-9f20-1c5d8e7b3a64"
	got, err := modeltest.Collect(t.Context(), m, &model.Request{
		Messages: []model.Message{
			modeltest.User("What's the weather in Oslo tomorrow?"),
			{Role: model.RoleAssistant, Model: "google/gemini-2.5-flash", Parts: []model.Part{
				{Type: model.PartReasoning, Text: "The user wants tomorrow's forecast for Oslo.", Provider: "google"},
				{Type: model.PartToolCall, ToolCallID: call, ToolName: "weather", Input: json.RawMessage(`{"city":"Oslo","days":1}`),
					Signature: "CiQB0e2Kb7x4kQ2vXn9Lr3Hs8Tq1Wm5Zc6Yd0Fa2Gu7Pj4Ek", Provider: "google"},
			}},
			{Role: model.RoleTool, Parts: []model.Part{
				{Type: model.PartToolResult, ToolCallID: call, ToolName: "weather", Output: json.RawMessage(`{"forecast":["rain"]}`)},
			}},
			{Role: model.RoleAssistant, Model: "anthropic/claude-sonnet-4-5", Parts: []model.Part{
				{Type: model.PartReasoning, Text: "The forecast says rain.", Signature: "EqQBCkYIBxgCKkDr5Lq0Zt2Hb8Ny4Ps1Wm9Xe7Vn3Kc6Jd5Ga", Provider: "anthropic"},
				{Type: model.PartReasoning, Redacted: "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP", Provider: "anthropic"},
				{Type: model.PartText, Text: "Rain is expected in Oslo tomorrow."},
			}},
			modeltest.User("9.11 and 9.8, which is greater?"),
			{Role: model.RoleAssistant, Parts: []model.Part{
				{Type: model.PartReasoning, Text: "Okay, compare 9.11 and 9.8: same whole part; 0.80 > 0.11.", Provider: "openai"},
				{Type: model.PartText, Text: "9.8 is greater than 9.11."},
			}},
			modeltest.User("How many Rs are there in the word 'strawberry'?"),
		},
		Tools: []model.ToolSpec{weatherSpec},
	})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}

	want := events(model.EventReasoningDelta, "Spell", " it", ":", " s", "-", "t", "-", "r", "-", "a", "-", "w", "-", "b", "-", "e", "-", "r", "-", "r", "-", "y", ".", " Three", " r", "'s", ".")
	want = append(want, model.Event{Type: model.EventReasoningEnd, Provider: "openai"})
	want = append(want, events(model.EventTextDelta, "There", " are", " three", " Rs", " in", ` "`, "straw", "berry", `".`)...)
	// DeepSeek reports its cache hits in prompt_tokens_details.cached_tokens too.
	want = append(want, model.Event{Type: model.EventFinish, Finish: model.FinishStop, Usage: model.Cached(212, 48, 128, 0).WithReasoning(38)})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	reqs := srv.Requests()
	checkSentTo(t, reqs, 1, "deepseek-reasoner")
	if body := string(reqs[0].Body); strings.Contains(body, "reasoning") || strings.Contains(body, "signature") {
		t.Errorf("the request carries reasoning: %s", body)
	}
}

// OpenRouter and Ollama name the field reasoning; a piece of reasoning that the answer's tool
// call follows ends before the call starts, and one the stream stops in ends before the finish.
func TestReasoningField(t *testing.T) {
	chunk := func(delta, finish string) string {
		return `data: {"id":"gen-1767226500-Xq3Lm8Zt","object":"chat.completion.chunk","created":1767226500,"model":"qwen/qwen3-32b","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}` + "\n\n"
	}
	tests := []struct {
		name string
		body string
		want []model.Event
	}{
		{
			name: "before a tool call",
			body: chunk(`{"role":"assistant","content":"","reasoning":"Need the"}`, "null") +
				chunk(`{"content":"","reasoning":" forecast."}`, "null") +
				chunk(`{"content":"","tool_calls":[{"index":0,"id":"call_9c1e","type":"function","function":{"name":"weather","arguments":"{}"}}]}`, "null") +
				chunk(`{}`, `"tool_calls"`) + "data: [DONE]\n\n",
			want: []model.Event{
				{Type: model.EventReasoningDelta, Text: "Need the"},
				{Type: model.EventReasoningDelta, Text: " forecast."},
				{Type: model.EventReasoningEnd, Provider: "openai"},
				{Type: model.EventToolInputStart, ToolCallID: "call_9c1e", ToolName: "weather"},
				{Type: model.EventToolInputDelta, ToolCallID: "call_9c1e", Text: "{}"},
				{Type: model.EventToolCall, ToolCallID: "call_9c1e", ToolName: "weather", Input: json.RawMessage(`{}`)},
				{Type: model.EventFinish, Finish: model.FinishToolCalls},
			},
		},
		{
			name: "cut by the token limit",
			body: chunk(`{"role":"assistant","content":null,"reasoning":"Hmm"}`, "null") + chunk(`{}`, `"length"`) + "data: [DONE]\n\n",
			want: []model.Event{
				{Type: model.EventReasoningDelta, Text: "Hmm"},
				{Type: model.EventReasoningEnd, Provider: "openai"},
				{Type: model.EventFinish, Finish: model.FinishLength},
			},
		},
		{
			name: "sent under both names",
			body: chunk(`{"role":"assistant","content":"","reasoning_content":"Once","reasoning":"Once"}`, "null") + chunk(`{"content":"Hi"}`, `"stop"`) + "data: [DONE]\n\n",
			want: []model.Event{
				{Type: model.EventReasoningDelta, Text: "Once"},
				{Type: model.EventReasoningEnd, Provider: "openai"},
				{Type: model.EventTextDelta, Text: "Hi"},
				{Type: model.EventFinish, Finish: model.FinishStop},
			},
		},
		{
			name: "not text",
			body: chunk(`{"role":"assistant","content":"Hi","reasoning":{"effort":"low"}}`, `"stop"`) + "data: [DONE]\n\n",
			want: []model.Event{
				{Type: model.EventTextDelta, Text: "Hi"},
				{Type: model.EventFinish, Finish: model.FinishStop},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := modeltest.Collect(t.Context(), sseServer(t, tt.body), &model.Request{Messages: []model.Message{modeltest.User("hi")}})
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// A compatible server's reasoning goes back on the message that made tool calls with it, as
// reasoning_content (DeepSeek's thinking mode guide refuses the next request of a tool loop
// without it); not on a plain answer, not another provider's, and never to OpenAI's own API.
func TestReasoningContentGoesBackWithToolCalls(t *testing.T) {
	history := []model.Message{
		modeltest.User("What's the weather in Oslo?"),
		{Role: model.RoleAssistant, Parts: []model.Part{
			{Type: model.PartReasoning, Text: "Look the weather up.", Provider: "openai"},
			{Type: model.PartReasoning, Text: "Claude's own thought.", Signature: "sig", Provider: "anthropic"},
			{Type: model.PartToolCall, ToolCallID: "call_1", ToolName: "weather", Input: json.RawMessage(`{"city":"Oslo"}`)},
		}},
		{Role: model.RoleTool, Parts: []model.Part{{Type: model.PartToolResult, ToolCallID: "call_1", ToolName: "weather", Output: json.RawMessage(`"rain"`)}}},
		{Role: model.RoleAssistant, Parts: []model.Part{
			{Type: model.PartReasoning, Text: "Say it rains.", Provider: "openai"},
			{Type: model.PartText, Text: "Rain."},
		}},
		modeltest.User("And tomorrow?"),
	}
	sent := func(t *testing.T, cfg openaimodel.Config, dial bool) []map[string]any {
		t.Helper()
		mock := mockopenai.New(nil)
		srv := httptest.NewServer(mock)
		defer srv.Close()
		cfg.Provider, cfg.Model, cfg.APIKey = "openai", "deepseek-chat", "test-key"
		if dial {
			cfg.Transport = &http.Transport{DialTLSContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "tcp", strings.TrimPrefix(srv.URL, "http://"))
			}}
		} else {
			cfg.BaseURL = srv.URL + "/v1"
		}
		m, err := openaimodel.New(cfg, "")
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if _, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: history, Tools: []model.ToolSpec{weatherSpec}}); err != nil {
			t.Fatalf("Stream: %v", err)
		}
		var body struct {
			Messages []map[string]any `json:"messages"`
		}
		if err := json.Unmarshal(mock.Requests()[0].Body, &body); err != nil {
			t.Fatal(err)
		}
		return body.Messages
	}

	msgs := sent(t, openaimodel.Config{}, false)
	if got := msgs[1]["reasoning_content"]; got != "Look the weather up." {
		t.Errorf("the tool call's message carries reasoning_content %v, want its own reasoning alone: %v", got, msgs[1])
	}
	if _, ok := msgs[3]["reasoning_content"]; ok {
		t.Errorf("the plain answer carries reasoning_content: %v", msgs[3])
	}
	for i, m := range sent(t, openaimodel.Config{}, true) {
		if _, ok := m["reasoning_content"]; ok {
			t.Errorf("message %d to OpenAI's own API carries reasoning_content: %v", i, m)
		}
	}
}
