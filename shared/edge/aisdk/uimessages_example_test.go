package aisdk_test

import (
	"encoding/json"
	"fmt"

	"github.com/agentharness/harness/shared/edge/aisdk"
	"github.com/agentharness/harness/shared/model"
)

// A turn read back: the user's message as sent, then the assistant's, named as its stream's
// start chunk named it, one step-start per model step, the call settled by its result.
func ExampleUIMessages() {
	usage := &model.Usage{InputTokens: 3, OutputTokens: 2}
	msgs := aisdk.UIMessages(aisdk.History{ConversationID: "conv_1", First: 1, Messages: []model.Message{
		{ID: "u1", Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: "What time is it?"}}},
		{ID: "m1", Role: model.RoleAssistant, Usage: usage, Parts: []model.Part{{Type: model.PartToolCall, ToolCallID: "call_1", ToolName: "current_time", Input: json.RawMessage(`{}`)}}},
		{ID: "m2", Role: model.RoleTool, Parts: []model.Part{{Type: model.PartToolResult, ToolCallID: "call_1", ToolName: "current_time", Output: json.RawMessage(`"12:00"`)}}},
		{ID: "m3", Role: model.RoleAssistant, Usage: usage, Parts: []model.Part{{Type: model.PartText, Text: "Noon."}}},
	}})
	for _, m := range msgs {
		b, _ := json.Marshal(m)
		fmt.Println(string(b))
	}
	fmt.Println(msgs[1].ID == aisdk.AssistantMessageID("conv_1", "u1"), msgs[1].From)
	// Output:
	// {"id":"u1","role":"user","parts":[{"type":"text","text":"What time is it?"}]}
	// {"id":"msg_QVDDbJVq53ZNB92DePMpbg","role":"assistant","metadata":{"conversationId":"conv_1","usage":{"inputTokens":6,"outputTokens":4}},"parts":[{"type":"step-start"},{"type":"tool-current_time","toolCallId":"call_1","state":"output-available","input":{},"output":"12:00"},{"type":"step-start"},{"type":"text","text":"Noon.","state":"done"}]}
	// true 2
}
