package localrunner_test

import (
	"slices"
	"strings"
	"testing"
)

// Compaction over SSE: the turn that passes its budget streams a data-compaction part before its
// step, which the AI SDK's own stream reader keeps, and the conversation read back is the chat
// client's list, that part included, valid by the AI SDK.
func TestCompactionReachesTheChatClient(t *testing.T) {
	e := newAsyncEnv(t)
	answer := strings.Repeat("A long answer keeps the conversation growing turn after turn. ", 30)
	agentID := e.agent(t, `{"name":"compacting","model":{"provider":"scripted","script":[{"text":"`+answer+`"}]},"context":{"maxInputTokens":1500}}`)
	c := &chatClient{e: e, agentID: agentID, id: "compaction-chat"}
	compacted := -1
	for i := 0; i < 6 && compacted < 0; i++ {
		c.send(t, map[string]any{"type": "text", "text": "Tell me more."})
		if types := partTypes(c.list[len(c.list)-1]); slices.Contains(types, "data-compaction") {
			compacted = i
			if types[0] != "data-compaction" {
				t.Errorf("parts of the compacting turn %v, want the compaction before its step", types)
			}
		}
	}
	if compacted < 0 {
		t.Fatal("six turns of 350-token answers under a budget of 1500 tokens never compacted")
	}
	part := c.list[len(c.list)-1]["parts"].([]any)[0].(map[string]any)
	data, _ := part["data"].(map[string]any)
	if data["summary"] != "The conversation so far, summarized by the scripted model." || data["messages"].(float64) < 2 || part["id"] == "" {
		t.Errorf("the data-compaction part %v, want the scripted summary, what it covers and its id", part)
	}
	c.checkReadBack(t)
}
