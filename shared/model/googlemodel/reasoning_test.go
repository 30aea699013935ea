package googlemodel_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentharness/harness/infra/wirefixture"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/googlemodel"
	"github.com/agentharness/harness/shared/model/modeltest"
	"github.com/google/go-cmp/cmp"
)

// gemini3 is the model of the reasoning fixtures: Gemini 3 takes a thinkingLevel and signs
// every answer (Gemini's thought signatures docs).
const gemini3 = "gemini-3-pro-preview"

// The thought signatures of the reasoning fixtures, base64 as Gemini sends them.
const (
	answerSignature  = "VA77BfXN6+jKSOAUAICgLT9EuqduXY9EihOTaNN9+2NYwc5l4z5kKh+Df7PDNIZLL320l1O24owrAJj/Yub8fiPB4Tdq5V/NNd5+7u26/8DwQZwJPKCBdqaBS3P8uhXYPE00kSotELk9/l9v8LaLBJ9hWX0riZDwukAVGaZ0NTmwuVr1JcUj6MouiqMVeefLRuNHSwCKTLCP8+UPTAh/uxRgrx5MaWAvRVLR4PozI0hzbRug"
	callSignature    = "wCzoHCB2rk9NjHMIkitiFKYNUz5+PlsYbFwkXFtOHHefa2qka2blFyiCh/Sc9qGUwrNa/OwqqgcTt5u/hEDvErmkrCWt7LUdchl9iYeTBQWCoGwQbWeQp6YrYxuTfjy7+dSparMBvTwGuC0sYLlw7GVHhCSgFL/nsYJoX9m0z/b16gNsk5ksg9zX8QGrUVIi37iDsbL3"
	finalSignature   = "MOkbwdV/2xVhOxW8TCXpBDgpv+pQS/HaV2TyRIG+Ak5kfGzHJmIVco+OuQ+7mVMHLSt1drjcNrHiyPqeVrYl0o0QJ4jlmpc3aqHbVMZlvq8ZoWC6Vy3cbkKPG+JyQE6GqKZeqh9fqwru0rHPkZMSFDO4qpHxfHlX"
	earlierSignature = "+FkbgEjBSsSvW13/pzgOcKwNuH8vvyofaT93Hnmq83wit6GBg/6f80mqwgrSPAXtWEAAyZczv8pnX/jDxk6p5hwQTBXQY3lBOn0Ay72dRCEbP4Cath2TKQF766hknZtX"
)

func reasoningModel(t *testing.T, baseURL, name string, r *model.Reasoning, cache *bool) *googlemodel.Model {
	t.Helper()
	m, err := googlemodel.New(context.Background(), googlemodel.Config{
		Provider: "google", Model: name, BaseURL: baseURL, APIKey: "test-key", Reasoning: r, Cache: cache,
	}, "")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

// A Gemini 3 answer with thought summaries: they stream as one reasoning piece, ended when the
// answer starts; the signature Gemini 3 puts on the answer's last (empty) part is a piece of its
// own; thoughtsTokenCount is reasoning output.
func TestReasoningAnswer(t *testing.T) {
	srv := wirefixture.Replay(t, "reasoning.json")
	m := reasoningModel(t, srv.URL, gemini3, &model.Reasoning{Effort: model.EffortHigh}, nil)

	got, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: []model.Message{modeltest.User(`How many r's are in "strawberry"?`)}})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	want := []model.Event{
		{Type: model.EventReasoningDelta, Text: "**Spelling it out**\n\nI'm going through \"strawberry\" letter by letter: s-t-r-a-w-b-e-r-r-y. There is one r after the t and two together before the y.\n\n\n"},
		{Type: model.EventReasoningDelta, Text: "**Checking the count**\n\nCounting the marked letters again gives three, so the answer is three.\n\n\n"},
		{Type: model.EventReasoningEnd, Provider: "google"},
		{Type: model.EventTextDelta, Text: `There are three r's in "strawberry".`},
		{Type: model.EventReasoningEnd, Signature: answerSignature, Provider: "google"},
		{Type: model.EventFinish, Finish: model.FinishStop, Usage: model.Usage{InputTokens: 12, OutputTokens: 9 + 212}.WithReasoning(212)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if d := got[len(got)-1].Usage.OutputTokenDetails; d != (model.OutputTokenDetails{TextTokens: 9, ReasoningTokens: 212}) {
		t.Errorf("output token details %+v, want 9 text and 212 reasoning", d)
	}
}

// Two steps of a turn with reasoning: the second request carries the first step's call with its
// thought signature on the functionCall part, as Gemini 3 requires, and not its thought summary
// (reasoning_tools.json pins both bodies).
func TestReasoningToolLoop(t *testing.T) {
	srv := wirefixture.Replay(t, "reasoning_tools.json")
	m := reasoningModel(t, srv.URL, gemini3, &model.Reasoning{Effort: model.EffortLow}, nil)
	tools := []model.ToolSpec{weatherSpec}
	msgs := []model.Message{modeltest.User("What's the weather in Oslo tomorrow, and what should I wear?")}

	first, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: msgs, Tools: tools})
	if err != nil {
		t.Fatalf("first step: %v", err)
	}
	const id = "gemini_1_0"
	input := json.RawMessage(`{"city":"Oslo","days":1}`)
	want := []model.Event{
		{Type: model.EventReasoningDelta, Text: "**Fetching the forecast**\n\nThe user wants tomorrow's weather in Oslo, so I'll ask the weather tool for one day before suggesting clothes.\n\n\n"},
		{Type: model.EventReasoningEnd, Provider: "google"},
		{Type: model.EventToolInputStart, ToolCallID: id, ToolName: "weather"},
		{Type: model.EventToolInputDelta, ToolCallID: id, Text: string(input)},
		{Type: model.EventToolCall, ToolCallID: id, ToolName: "weather", Input: input, Signature: callSignature, Provider: "google"},
		{Type: model.EventFinish, Finish: model.FinishToolCalls, Usage: model.Usage{InputTokens: 71, OutputTokens: 18 + 54}.WithReasoning(54)},
	}
	if diff := cmp.Diff(want, first); diff != "" {
		t.Errorf("first step (-want +got):\n%s", diff)
	}

	msgs = append(msgs, modeltest.Assistant(first), model.Message{Role: model.RoleTool, Parts: []model.Part{
		{Type: model.PartToolResult, ToolCallID: id, ToolName: "weather", Output: json.RawMessage(`{"sky":"rain","celsius":6}`)},
	}})
	second, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: msgs, Tools: tools})
	if err != nil {
		t.Fatalf("second step: %v", err)
	}
	want = []model.Event{
		{Type: model.EventReasoningDelta, Text: "**Suggesting clothes**\n\nRain at 6 °C calls for waterproof outer layers and something warm underneath.\n\n\n"},
		{Type: model.EventReasoningEnd, Provider: "google"},
		{Type: model.EventTextDelta, Text: "Tomorrow Oslo expects rain and about 6 °C. Wear a waterproof jacket over a warm layer,"},
		{Type: model.EventTextDelta, Text: " and shoes that can take puddles."},
		{Type: model.EventReasoningEnd, Signature: finalSignature, Provider: "google"},
		{Type: model.EventFinish, Finish: model.FinishStop, Usage: model.Usage{InputTokens: 117, OutputTokens: 27 + 41}.WithReasoning(41)},
	}
	if diff := cmp.Diff(want, second); diff != "" {
		t.Errorf("second step (-want +got):\n%s", diff)
	}
}

// History as a fallback left it: an earlier Gemini answer's signature comes back on its text,
// while the reasoning of the fallback (Claude) is dropped, signature and redacted content
// alike, and its call in the turn in progress takes the documented placeholder signature
// (foreign_reasoning.json pins the body).
func TestOtherProvidersReasoningIsNotSent(t *testing.T) {
	srv := wirefixture.Replay(t, "foreign_reasoning.json")
	m := reasoningModel(t, srv.URL, gemini3, &model.Reasoning{Effort: model.EffortHigh}, nil)
	const callID = "toolu_01FJ6vK2mQeJtP8cXr4WbZsN"
	req := &model.Request{
		Tools: []model.ToolSpec{weatherSpec},
		Messages: []model.Message{
			modeltest.User("Plan a morning in Bergen."),
			{Role: model.RoleAssistant, Parts: []model.Part{
				{Type: model.PartReasoning, Text: "**Sketching the route**\n\nBryggen first, then the funicular while the light is good.\n\n\n", Provider: "google"},
				{Type: model.PartReasoning, Signature: earlierSignature, Provider: "google"},
				{Type: model.PartText, Text: "Start at Bryggen's wharf, then take the Fløibanen funicular up Mount Fløyen for the view."},
			}},
			modeltest.User("And the weather there tomorrow?"),
			{Role: model.RoleAssistant, Model: "anthropic/claude-sonnet-4-5", Parts: []model.Part{
				{Type: model.PartReasoning, Text: "The user wants tomorrow's forecast for Bergen; one day from the weather tool.", Signature: "EqQBCkYIBxgCKkDxJ0wl2mN4pR8sT1uV3wY5zA7bC9dE1fG3hI5jK7lM9nO1pQ3rS5tU7vW9xY1zA3bC5dE7fG9hI1jK3lM5nO7pEgx", Provider: "anthropic"},
				{Type: model.PartReasoning, Redacted: "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB8=", Provider: "anthropic"},
				{Type: model.PartToolCall, ToolCallID: callID, ToolName: "weather", Input: json.RawMessage(`{"city":"Bergen","days":1}`)},
			}},
			{Role: model.RoleTool, Parts: []model.Part{
				{Type: model.PartToolResult, ToolCallID: callID, ToolName: "weather", Output: json.RawMessage(`{"sky":"showers","celsius":9}`)},
			}},
		},
	}
	got, err := modeltest.Collect(t.Context(), m, req)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	want := []model.Event{
		{Type: model.EventTextDelta, Text: "Expect showers and about 9 °C in Bergen tomorrow: bring a rain jacket for Fløyen."},
		{Type: model.EventReasoningEnd, Signature: answerSignature, Provider: "google"},
		{Type: model.EventFinish, Finish: model.FinishStop, Usage: model.Usage{InputTokens: 164, OutputTokens: 20 + 37}.WithReasoning(37)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// okAnswer is a one-chunk answer for tests that look only at the request.
const okAnswer = `data: {"candidates": [{"content": {"parts": [{"text": "OK"}],"role": "model"},"finishReason": "STOP","index": 0}]}` + "\r\n\r\n"

// sentBody makes one call of m with req and returns the JSON body the server got, decoded.
func sentBody(t *testing.T, name string, r *model.Reasoning, req *model.Request) map[string]any {
	t.Helper()
	srv := modeltest.NewServer(t, modeltest.SSE(okAnswer))
	if _, err := modeltest.Collect(t.Context(), reasoningModel(t, srv.URL, name, r, nil), req); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("server saw %d requests, want 1", len(reqs))
	}
	var body map[string]any
	if err := json.Unmarshal(reqs[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	return body
}

// A block's reasoning becomes thinkingConfig (Gemini's thinking docs): Gemini 2.5 a
// thinkingBudget (the effort's budget, or the one set), Gemini 3 a thinkingLevel (the effort, or
// the budget's); Gemini 3 Pro takes no medium level and gets high, its default.
func TestThinkingConfig(t *testing.T) {
	tests := []struct {
		model     string
		reasoning *model.Reasoning
		want      any // generationConfig.thinkingConfig; nil: none sent
	}{
		{"gemini-2.5-flash", nil, nil},
		{"gemini-2.5-flash", &model.Reasoning{Effort: model.EffortLow}, map[string]any{"includeThoughts": true, "thinkingBudget": 1024.0}},
		{"gemini-2.5-pro", &model.Reasoning{Effort: model.EffortHigh}, map[string]any{"includeThoughts": true, "thinkingBudget": 24576.0}},
		{"gemini-2.5-flash", &model.Reasoning{BudgetTokens: 3000}, map[string]any{"includeThoughts": true, "thinkingBudget": 3000.0}},
		{"models/gemini-2.5-flash-lite", &model.Reasoning{Effort: model.EffortMedium}, map[string]any{"includeThoughts": true, "thinkingBudget": 8192.0}},
		{"gemini-3-pro-preview", nil, nil},
		{"gemini-3-pro-preview", &model.Reasoning{Effort: model.EffortLow}, map[string]any{"includeThoughts": true, "thinkingLevel": "LOW"}},
		{"gemini-3-pro-preview", &model.Reasoning{Effort: model.EffortMedium}, map[string]any{"includeThoughts": true, "thinkingLevel": "HIGH"}},
		{"gemini-3-flash-preview", &model.Reasoning{Effort: model.EffortMedium}, map[string]any{"includeThoughts": true, "thinkingLevel": "MEDIUM"}},
		{"models/gemini-3-flash-preview", &model.Reasoning{BudgetTokens: 2048}, map[string]any{"includeThoughts": true, "thinkingLevel": "LOW"}},
		{"gemini-3-flash-preview", &model.Reasoning{BudgetTokens: 32768}, map[string]any{"includeThoughts": true, "thinkingLevel": "HIGH"}},
	}
	for _, tt := range tests {
		body := sentBody(t, tt.model, tt.reasoning, &model.Request{Messages: []model.Message{modeltest.User("hi")}})
		got := body["generationConfig"].(map[string]any)["thinkingConfig"]
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s with %+v: thinkingConfig (-want +got):\n%s", tt.model, tt.reasoning, diff)
		}
	}
}

// A signature Gemini sent on a part other than a call, in an answer of calls only, has no text
// to come back on and is dropped (a part of a signature alone, no data, Gemini refuses); the
// call keeps its own signature, and Gemini's reasoning text is not sent.
func TestSignatureWithoutText(t *testing.T) {
	body := sentBody(t, gemini3, nil, &model.Request{Messages: []model.Message{
		modeltest.User("Weather in Oslo?"),
		{Role: model.RoleAssistant, Parts: []model.Part{
			{Type: model.PartReasoning, Text: "**Checking**\n\nOne call.\n\n\n", Provider: "google"},
			{Type: model.PartReasoning, Signature: finalSignature, Provider: "google"},
			{Type: model.PartToolCall, ToolCallID: "gemini_1_0", ToolName: "weather", Input: json.RawMessage(`{"city":"Oslo"}`), Signature: callSignature, Provider: "google"},
		}},
		{Role: model.RoleTool, Parts: []model.Part{{Type: model.PartToolResult, ToolCallID: "gemini_1_0", ToolName: "weather", Output: json.RawMessage(`"rain"`)}}},
	}})
	want := modeltest.Decode(t, `{"parts": [{"functionCall": {"name": "weather", "args": {"city": "Oslo"}}, "thoughtSignature": "`+callSignature+`"}], "role": "model"}`)
	if diff := cmp.Diff(want, body["contents"].([]any)[1]); diff != "" {
		t.Errorf("model content (-want +got):\n%s", diff)
	}
}
