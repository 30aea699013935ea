package anthropicmodel_test

import (
	"encoding/json"
	"testing"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/anthropicmodel"
	"github.com/agentharness/harness/shared/model/modeltest"
	"github.com/google/go-cmp/cmp"
)

// The reasoning fixtures follow Anthropic's extended thinking docs: a thinking block streams
// its text in thinking_delta events and its signature in a signature_delta just before it
// stops, then the text and tool_use blocks follow.

// A tool loop with extended thinking: the first step streams the thinking with its signature,
// then text and a tool call; the second request (pinned by reasoning_tools.json) carries the
// thinking block with its signature, unmodified, before the text and the tool_use, then the
// tool_result, as Anthropic's extended thinking docs require. max_tokens is the budget plus
// the default answer.
func TestReasoningToolLoop(t *testing.T) {
	m, requests := serveConfig(t, "reasoning_tools.json", false, anthropicmodel.Config{Reasoning: &model.Reasoning{BudgetTokens: 2048}})
	req := &model.Request{
		System:   "You are a weather assistant.",
		Messages: []model.Message{modeltest.User("What's the weather in Oslo for the next 3 days?")},
		Tools:    []model.ToolSpec{weatherSpec},
	}

	first, err := modeltest.Collect(t.Context(), m, req)
	if err != nil {
		t.Fatalf("first step: %v", err)
	}
	const w = "toolu_01D7FLrfh4GYq7yT1ULFeyMV"
	const sig = "EqQBCkgIBxABGAIiQJ3Lw1lI0pW9nS8cVtq6yKZ2Yb0hU9mJ0sD4rE7pQ1fX2aR3tY5uI8oP6lK4jH2gF1dS0aZ9xC7vB5nM3qW1eRgSDGx2a1vT4p8h0k3LsRoMwFjK9dN2bV7cX4zQ1yH6uJ8iO0pA5sD3fG7hL2kE9rT4wY1uI6oP8aS0dF2gH4jK6lZ8xC0vB2nM4qW6eR8tY0uI2oP4aS6dF8gH0jK2lZ4xC6vB8nM0qW2eR4tY6uI8oPGAE="
	// Anthropic counts the thinking in output_tokens and reports no split of it, so the usage
	// has no output token details.
	want := []model.Event{
		{Type: model.EventReasoningDelta, Text: "The user wants a three-day forecast for Oslo. "},
		{Type: model.EventReasoningDelta, Text: "The weather tool takes a city and a number of days, so I'll call it with Oslo and 3."},
		{Type: model.EventReasoningEnd, Signature: sig, Provider: "anthropic"},
		{Type: model.EventTextDelta, Text: "I'll look up the forecast"},
		{Type: model.EventTextDelta, Text: " for Oslo."},
		{Type: model.EventToolInputStart, ToolCallID: w, ToolName: "weather"},
		{Type: model.EventToolInputDelta, ToolCallID: w, Text: `{"city": "Oslo"`},
		{Type: model.EventToolInputDelta, ToolCallID: w, Text: `, "days": 3}`},
		{Type: model.EventToolCall, ToolCallID: w, ToolName: "weather", Input: json.RawMessage(`{"city": "Oslo", "days": 3}`)},
		{Type: model.EventFinish, Finish: model.FinishToolCalls, Usage: model.Usage{InputTokens: 418, OutputTokens: 121}},
	}
	if diff := cmp.Diff(want, first); diff != "" {
		t.Errorf("first step's events (-want +got):\n%s", diff)
	}

	req.Messages = append(req.Messages, modeltest.Assistant(first), model.Message{Role: model.RoleTool, Parts: []model.Part{
		{Type: model.PartToolResult, ToolCallID: w, ToolName: "weather", Output: json.RawMessage(`{"forecast":["sun","rain","sun"]}`)},
	}})
	second, err := modeltest.Collect(t.Context(), m, req)
	if err != nil {
		t.Fatalf("second step: %v", err)
	}
	want = []model.Event{
		{Type: model.EventTextDelta, Text: "Oslo: sun, then rain,"},
		{Type: model.EventTextDelta, Text: " then sun again."},
		{Type: model.EventFinish, Finish: model.FinishStop, Usage: model.Usage{InputTokens: 602, OutputTokens: 17}},
	}
	if diff := cmp.Diff(want, second); diff != "" {
		t.Errorf("second step's events (-want +got):\n%s", diff)
	}
	if n := len(requests()); n != 2 {
		t.Errorf("server saw %d requests, want 2", n)
	}
}

// A reasoning answer streams its thinking, then its signature, then its text. Before it, a
// fallback of another provider answered with reasoning of its own: the request (pinned by
// reasoning.json) leaves that reasoning out and keeps the fallback's text.
func TestReasoningOfAnotherProviderIsNotSent(t *testing.T) {
	m, _ := serveConfig(t, "reasoning.json", false, anthropicmodel.Config{Reasoning: &model.Reasoning{Effort: model.EffortLow}})

	got, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: []model.Message{
		modeltest.User("Which is larger, 9.11 or 9.9?"),
		{Role: model.RoleAssistant, Model: "openai/gpt-5", Parts: []model.Part{
			{Type: model.PartReasoning, Text: "Compare the decimals.", Redacted: "gAAAAABpK3xQ7vR2mN8cX4zL1kJ9hG6fD3sA0qW5eR7tY2uI4oP8aS1dF6gH3jK0lZ9xC2vB5nM7qW4eR1tY8uI3oP6aS9dF2gH5jK8lZ1xC4vB7nM0qW3eR6tY9uI2oP5aS8dF1gH4jK7lZ0xC3vB6nM9qW2e==", Provider: "openai"},
			{Type: model.PartText, Text: "9.9 is larger."},
		}},
		modeltest.User("And 9.11 or 9.109?"),
	}})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}

	const sig = "ErUBCkYIBxgCIkBc6uQ3Rx0wV8pN2tL5kJ9hG3fD1sA7zX4cV6bN8mQ0wE2rT4yU6iO8pA1sD3fG5hJ7kL9zX1cV3bN5mQ7wE9rEgwKq3rT5yU7iO9pA1sYDGv2bN4mQ6wE8rT0yU2iIjD4fG6hJ8kL0zX2cV4bN6mQ8wE0rT2yU4iO6pA8sD0fG2hJ4kL6zX8cV0bN2mQ4wE6rT8yU0iO2pA4sD6fGAE="
	want := []model.Event{
		{Type: model.EventReasoningDelta, Text: "Compare 9.11 and 9.109 digit by digit. "},
		{Type: model.EventReasoningDelta, Text: "The tenths are 1 and 1, the hundredths 1 and 0, so 9.11 is larger."},
		{Type: model.EventReasoningEnd, Signature: sig, Provider: "anthropic"},
		{Type: model.EventTextDelta, Text: "9.11 is larger"},
		{Type: model.EventTextDelta, Text: " than 9.109."},
		{Type: model.EventFinish, Finish: model.FinishStop, Usage: model.Usage{InputTokens: 58, OutputTokens: 86}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// Anthropic does not report how many of output_tokens were thinking: the usage of a reasoning
// answer has its output tokens whole, with no split into text and reasoning.
func TestReasoningTokensAreNotSplit(t *testing.T) {
	m, _ := serveConfig(t, "reasoning.json", false, anthropicmodel.Config{Reasoning: &model.Reasoning{Effort: model.EffortLow}})
	got, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: []model.Message{
		modeltest.User("Which is larger, 9.11 or 9.9?"),
		{Role: model.RoleAssistant, Parts: []model.Part{{Type: model.PartText, Text: "9.9 is larger."}}},
		modeltest.User("And 9.11 or 9.109?"),
	}})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	last := got[len(got)-1]
	if last.Type != model.EventFinish || last.Usage.OutputTokens != 86 || last.Usage.OutputTokenDetails != (model.OutputTokenDetails{}) {
		t.Errorf("usage %+v, want 86 output tokens and no output token details", last.Usage)
	}
}

// Redacted thinking arrives whole in its content_block_start and is a reasoning piece of its
// own; sent back, each piece of Claude's reasoning goes first in its message as it came (a
// thinking block with its signature, a redacted_thinking block with its data), while
// reasoning another provider wrote and thinking without a signature are left out. A maxTokens
// set is sent as it is.
func TestRedactedThinking(t *testing.T) {
	srv := modeltest.NewServer(t, modeltest.SSE(sse(
		`{"type":"message_start","message":{"id":"msg_01Rd7kQ2wE5rT8yU1iO4pA6s","type":"message","role":"assistant","model":"claude-haiku-4-5-20251001","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":92,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":3}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB5URj2pzmN1E2kr8M2iaBX9"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Done."}}`,
		`{"type":"content_block_stop","index":1}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":41}}`,
		`{"type":"message_stop"}`,
	)))
	m, err := anthropicmodel.New(anthropicmodel.Config{Model: testModel, BaseURL: srv.URL, APIKey: "test-key", Reasoning: &model.Reasoning{BudgetTokens: 1024}, Settings: model.Settings{MaxTokens: ptr(int64(3000))}}, "")
	if err != nil {
		t.Fatal(err)
	}

	got, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: []model.Message{
		modeltest.User("Check the weather."),
		{Role: model.RoleAssistant, Parts: []model.Part{
			{Type: model.PartReasoning, Redacted: "EmwKAhgBEgy3va3pzix", Provider: "anthropic"},
			{Type: model.PartReasoning, Text: "I should call the tool.", Signature: "EqQBCkgIBxABGAIiQ", Provider: "anthropic"},
			{Type: model.PartReasoning, Text: "Thinking cut short.", Provider: "anthropic"},
			{Type: model.PartReasoning, Text: "A thought of Gemini's.", Signature: "CiQB0e2Kb", Provider: "google"},
			{Type: model.PartText, Text: "Checking."},
			{Type: model.PartToolCall, ToolCallID: "toolu_01", ToolName: "weather", Input: json.RawMessage(`{"city":"Oslo"}`), Signature: "CiQB0e2Kb", Provider: "google"},
		}},
		{Role: model.RoleTool, Parts: []model.Part{{Type: model.PartToolResult, ToolCallID: "toolu_01", ToolName: "weather", Output: json.RawMessage(`"sun"`)}}},
	}})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	want := []model.Event{
		{Type: model.EventReasoningEnd, Redacted: "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB5URj2pzmN1E2kr8M2iaBX9", Provider: "anthropic"},
		{Type: model.EventTextDelta, Text: "Done."},
		{Type: model.EventFinish, Finish: model.FinishStop, Usage: model.Usage{InputTokens: 92, OutputTokens: 41}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("server saw %d requests, want 1", len(reqs))
	}
	var body struct {
		Messages  any   `json:"messages"`
		MaxTokens int64 `json:"max_tokens"`
		Thinking  any   `json:"thinking"`
	}
	if err := json.Unmarshal(reqs[0].Body, &body); err != nil {
		t.Fatalf("decoding the request body: %v", err)
	}
	if body.MaxTokens != 3000 {
		t.Errorf("max_tokens = %d, want the 3000 set", body.MaxTokens)
	}
	if diff := cmp.Diff(modeltest.Decode(t, `{"type":"enabled","budget_tokens":1024}`), body.Thinking); diff != "" {
		t.Errorf("thinking (-want +got):\n%s", diff)
	}
	wantMsgs := modeltest.Decode(t, `[
		{"role":"user","content":[{"type":"text","text":"Check the weather."}]},
		{"role":"assistant","content":[
			{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix"},
			{"type":"thinking","thinking":"I should call the tool.","signature":"EqQBCkgIBxABGAIiQ"},
			{"type":"text","text":"Checking."},
			{"type":"tool_use","id":"toolu_01","name":"weather","input":{"city":"Oslo"}}]},
		{"role":"user","content":[
			{"type":"tool_result","tool_use_id":"toolu_01","content":[{"type":"text","text":"\"sun\""}],"cache_control":{"type":"ephemeral"}}]}
	]`)
	if diff := cmp.Diff(wantMsgs, body.Messages); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}
