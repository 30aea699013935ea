package bedrockmodel_test

import (
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/agentharness/harness/infra/wirefixture"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/bedrockmodel"
	"github.com/agentharness/harness/shared/model/modeltest"
	"github.com/google/go-cmp/cmp"
)

// claudeID is the model the reasoning fixtures were made for: Claude Sonnet 4 through its US
// inference profile, which thinks (Bedrock's extended thinking docs) and caches system, tools
// and messages (Bedrock's prompt caching docs).
const claudeID = "us.anthropic.claude-sonnet-4-20250514-v1:0"

// Signatures and redacted content as Claude sends them through Converse: opaque base64.
const (
	primeSignature   = "EmwKAhgBGirefS1aVsIDKWDjEGt8nDU26dTsZCKwcpccN5VZ0ZamXX5pG0I/0L9nP9aZD5Z96SWLEnS+1+8AP68xu9ykZN4ubN0AoVe9q1mKd9huOdJFYOWoi7F7F4dMvRFA/y4/"
	weatherSignature = "EmwKAhgBUaRUAFDnDjqRhMsseGB08wgFsAp/k6H1oqvqNxe2XtcwUlxIJe3ydBCWWlKXKsy9vYfD9BEw60RSWlZDe/lGHrPwyXIL1AaklXoTRV0tRIqrnTktjGeN752NWeEKoIBt"
	redactedThinking = "EmwKAhgB4MxPrMUUMaDupDUiBFkp/Nd/Erg8pmDpIq0ZhOQ2oi1UuvLZLbPOzbY8eQaOVAtGZDwZ0Kz2UPH8VGaQpVoVJ1I1bQ+KwNk3zkdP9HEmkEFCHA+U4aukufK1DK+AexF/5joxZ3DJG8N9oAjRgr8elOvUortxGBvS"
)

const weatherThought = "The user wants the current weather in Oslo. I should call the weather tool with city Oslo."

// A reasoning answer streams its thinking, then a reasoningContent signature ending the block,
// then a redacted block of its own, then the answer. Effort low is a budget of 1024 tokens, and
// maxTokens, unset, is that budget plus the answer's 4096 (the fixture's request pins both).
// Converse's usage has no reasoning count: the output tokens stay unsplit.
func TestReasoningAnswer(t *testing.T) {
	f := serve(t, "reasoning.json", false)
	m := f.model(t, bedrockmodel.Config{Provider: "bedrock", Model: claudeID, Reasoning: &model.Reasoning{Effort: model.EffortLow}})

	got, err := modeltest.Collect(t.Context(), m, &model.Request{System: "You are terse.", Messages: []model.Message{modeltest.User("Is 391 prime?")}})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	want := []model.Event{
		{Type: model.EventReasoningDelta, Text: "391 is odd and its digits sum to 13, so try 7, 11, 13, 17. "},
		{Type: model.EventReasoningDelta, Text: "17 × 23 = 391, so it is not prime."},
		{Type: model.EventReasoningEnd, Signature: primeSignature, Provider: "bedrock"},
		{Type: model.EventReasoningEnd, Redacted: redactedThinking, Provider: "bedrock"},
		{Type: model.EventTextDelta, Text: "No: 391 = 17 × 23."},
		{Type: model.EventFinish, Finish: model.FinishStop, Usage: model.Usage{InputTokens: 44, OutputTokens: 212}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// A tool-use loop with thinking: the second call sends the first step's assistant turn back
// with its reasoning first, as a reasoningText block with its signature, then its toolUse, as
// Bedrock's extended thinking docs require (the fixture's second request pins it). The tools
// carry a cache point on Claude.
func TestReasoningToolLoop(t *testing.T) {
	f := serve(t, "reasoning_tools.json", false)
	m := f.model(t, bedrockmodel.Config{Provider: "bedrock", Model: claudeID, Reasoning: &model.Reasoning{BudgetTokens: 2048}})
	req := &model.Request{Messages: []model.Message{modeltest.User("What's the weather in Oslo?")}, Tools: []model.ToolSpec{weatherSpec}}

	first, err := modeltest.Collect(t.Context(), m, req)
	if err != nil {
		t.Fatalf("first Stream: %v", err)
	}
	step := modeltest.Assistant(first)
	wantStep := model.Message{Role: model.RoleAssistant, Parts: []model.Part{
		{Type: model.PartReasoning, Text: weatherThought, Signature: weatherSignature, Provider: "bedrock"},
		{Type: model.PartToolCall, ToolCallID: "tooluse_Wq3xKf9RTbyV2hQpLm0aZg", ToolName: "weather", Input: json.RawMessage(`{"city": "Oslo"}`)},
	}}
	if diff := cmp.Diff(wantStep, step); diff != "" {
		t.Fatalf("first step (-want +got):\n%s", diff)
	}

	req.Messages = append(req.Messages, step, model.Message{Role: model.RoleTool, Parts: []model.Part{
		{Type: model.PartToolResult, ToolCallID: "tooluse_Wq3xKf9RTbyV2hQpLm0aZg", ToolName: "weather", Output: json.RawMessage(`{"sky":"sunny","high":21}`)},
	}})
	got, err := modeltest.Collect(t.Context(), m, req)
	if err != nil {
		t.Fatalf("second Stream: %v", err)
	}
	want := []model.Event{
		{Type: model.EventTextDelta, Text: "It's sunny in Oslo, with a high of 21 °C."},
		{Type: model.EventFinish, Finish: model.FinishStop, Usage: model.Usage{InputTokens: 689, OutputTokens: 19}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("second call's events (-want +got):\n%s", diff)
	}
}

// Reasoning another provider wrote (a fallback's) is not sent; this provider's redacted
// reasoning goes back as the bytes it came as, ahead of the turn's text.
func TestForeignReasoningIsNotSent(t *testing.T) {
	f := serve(t, "reasoning_history.json", false)
	m := f.model(t, bedrockmodel.Config{Provider: "bedrock", Model: claudeID, Reasoning: &model.Reasoning{Effort: model.EffortLow}})

	got, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: []model.Message{
		modeltest.User("Is 391 prime?"),
		{Role: model.RoleAssistant, Model: "anthropic/claude-sonnet-4-5", Parts: []model.Part{
			{Type: model.PartReasoning, Text: "Try small primes.", Signature: "c2lnbmVkIGJ5IGFudGhyb3BpYw==", Provider: "anthropic"},
			{Type: model.PartText, Text: "No: 391 = 17 × 23."},
		}},
		modeltest.User("And 397?"),
		{Role: model.RoleAssistant, Parts: []model.Part{
			{Type: model.PartReasoning, Redacted: redactedThinking, Provider: "bedrock"},
			{Type: model.PartReasoning, Text: "openai's summary", Provider: "openai"},
			{Type: model.PartText, Text: "Yes, 397 is prime."},
		}},
		modeltest.User("Thanks."),
	}})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	want := []model.Event{
		{Type: model.EventReasoningDelta, Text: "The user is thanking me; a short reply will do."},
		{Type: model.EventReasoningEnd, Signature: primeSignature, Provider: "bedrock"},
		{Type: model.EventTextDelta, Text: "You're welcome."},
		{Type: model.EventFinish, Finish: model.FinishStop, Usage: model.Usage{InputTokens: 131, OutputTokens: 38}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// reasoningDelta is a contentBlockDelta of a reasoning block: delta is the reasoningContent
// member's JSON ({"text":...}, {"signature":...} or {"redactedContent":...}).
func reasoningDelta(index, delta string) streamMessage {
	return event("contentBlockDelta", `{"contentBlockIndex":`+index+`,"delta":{"reasoningContent":`+delta+`}}`)
}

func reasoningFixtures() map[string][]wirefixture.Exchange {
	thinking := func(budget, maxTokens string) string {
		return `"additionalModelRequestFields":{"thinking":{"type":"enabled","budget_tokens":` + budget + `}},
			"inferenceConfig":{"maxTokens":` + maxTokens + `}`
	}
	// redacted is the redacted block's content as the stream carries it: base64 in JSON.
	raw, err := base64.StdEncoding.DecodeString(redactedThinking)
	if err != nil {
		panic(err)
	}
	redacted := mustJSON(base64.StdEncoding.EncodeToString(raw))
	return map[string][]wirefixture.Exchange{
		"reasoning.json": {{
			Request: converseStream(claudeID, `{
				`+thinking("1024", "5120")+`,
				"system":[{"text":"You are terse."},`+cachePoint+`],
				"messages":[{"role":"user","content":[{"text":"Is 391 prime?"},`+cachePoint+`]}]
			}`),
			Response: eventStream("3b9d6f2a-8c41-4e07-9a5d-1f2e3c4b5a69",
				event("messageStart", `{"role":"assistant"}`),
				reasoningDelta("0", `{"text":"391 is odd and its digits sum to 13, so try 7, 11, 13, 17. "}`),
				reasoningDelta("0", `{"text":"17 × 23 = 391, so it is not prime."}`),
				reasoningDelta("0", `{"signature":"`+primeSignature+`"}`),
				event("contentBlockStop", `{"contentBlockIndex":0}`),
				reasoningDelta("1", `{"redactedContent":`+redacted+`}`),
				event("contentBlockStop", `{"contentBlockIndex":1}`),
				event("contentBlockDelta", `{"contentBlockIndex":2,"delta":{"text":"No: 391 = 17 × 23."}}`),
				event("contentBlockStop", `{"contentBlockIndex":2}`),
				event("messageStop", `{"stopReason":"end_turn"}`),
				event("metadata", `{"usage":{"inputTokens":44,"outputTokens":212,"totalTokens":256},"metrics":{"latencyMs":3120}}`),
			),
		}},
		"reasoning_tools.json": {
			{
				Request: converseStream(claudeID, `{
					`+thinking("2048", "6144")+`,
					"messages":[{"role":"user","content":[{"text":"What's the weather in Oslo?"},`+cachePoint+`]}],
					"toolConfig":{"tools":[`+weatherTool+`,`+cachePoint+`]}
				}`),
				Response: eventStream("6a1c0e84-2f7b-4d39-b5e6-0c9d8a7b6f51",
					event("messageStart", `{"role":"assistant"}`),
					reasoningDelta("0", `{"text":"The user wants the current weather in Oslo. "}`),
					reasoningDelta("0", `{"text":"I should call the weather tool with city Oslo."}`),
					reasoningDelta("0", `{"signature":"`+weatherSignature+`"}`),
					event("contentBlockStop", `{"contentBlockIndex":0}`),
					event("contentBlockStart", `{"contentBlockIndex":1,"start":{"toolUse":{"toolUseId":"tooluse_Wq3xKf9RTbyV2hQpLm0aZg","name":"weather"}}}`),
					event("contentBlockDelta", `{"contentBlockIndex":1,"delta":{"toolUse":{"input":"{\"city\": \"Oslo\"}"}}}`),
					event("contentBlockStop", `{"contentBlockIndex":1}`),
					event("messageStop", `{"stopReason":"tool_use"}`),
					event("metadata", `{"usage":{"inputTokens":583,"outputTokens":94,"totalTokens":677},"metrics":{"latencyMs":2408}}`),
				),
			},
			{
				Request: converseStream(claudeID, `{
					`+thinking("2048", "6144")+`,
					"messages":[
						{"role":"user","content":[{"text":"What's the weather in Oslo?"}]},
						{"role":"assistant","content":[
							{"reasoningContent":{"reasoningText":{"text":`+mustJSON(weatherThought)+`,"signature":"`+weatherSignature+`"}}},
							{"toolUse":{"toolUseId":"tooluse_Wq3xKf9RTbyV2hQpLm0aZg","name":"weather","input":{"city":"Oslo"}}}
						]},
						{"role":"user","content":[
							{"toolResult":{"toolUseId":"tooluse_Wq3xKf9RTbyV2hQpLm0aZg","content":[{"json":{"sky":"sunny","high":21}}]}},
							`+cachePoint+`
						]}
					],
					"toolConfig":{"tools":[`+weatherTool+`,`+cachePoint+`]}
				}`),
				Response: textStream("6a1c0e84-2f7b-4d39-b5e6-0c9d8a7b6f52",
					`{"usage":{"inputTokens":689,"outputTokens":19,"totalTokens":708},"metrics":{"latencyMs":980}}`,
					"It's sunny in Oslo, with a high of 21 °C."),
			},
		},
		"reasoning_history.json": {{
			Request: converseStream(claudeID, `{
				`+thinking("1024", "5120")+`,
				"messages":[
					{"role":"user","content":[{"text":"Is 391 prime?"}]},
					{"role":"assistant","content":[{"text":"No: 391 = 17 × 23."}]},
					{"role":"user","content":[{"text":"And 397?"}]},
					{"role":"assistant","content":[
						{"reasoningContent":{"redactedContent":`+redacted+`}},
						{"text":"Yes, 397 is prime."}
					]},
					{"role":"user","content":[{"text":"Thanks."},`+cachePoint+`]}
				]
			}`),
			Response: eventStream("9e8d7c6b-5a49-4382-a1b0-c9d8e7f6a5b4",
				event("messageStart", `{"role":"assistant"}`),
				reasoningDelta("0", `{"text":"The user is thanking me; a short reply will do."}`),
				reasoningDelta("0", `{"signature":"`+primeSignature+`"}`),
				event("contentBlockStop", `{"contentBlockIndex":0}`),
				event("contentBlockDelta", `{"contentBlockIndex":1,"delta":{"text":"You're welcome."}}`),
				event("contentBlockStop", `{"contentBlockIndex":1}`),
				event("messageStop", `{"stopReason":"end_turn"}`),
				event("metadata", `{"usage":{"inputTokens":131,"outputTokens":38,"totalTokens":169},"metrics":{"latencyMs":1530}}`),
			),
		}},
	}
}
