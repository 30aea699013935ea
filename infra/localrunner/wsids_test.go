package localrunner_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/testenv"
)

// Every id a WebSocket command carries is checked before it reaches a table: a malformed one
// gets a failed response naming the field (never an internal error), the socket stays open,
// and nothing is subscribed or written.
func TestWebSocketMalformedIDsAreRefused(t *testing.T) {
	stack := testenv.Stack(t)
	srv := serve(t, stack, nil)
	accountID, secret := createAccount(t, srv, "ws-ids")
	agentID := createAgent(t, srv, secret, ticketAgent)
	c, _, err := dialWS(t, srv, secret, "")
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("c", 3000)
	tests := []struct {
		name, answer, field string
		frame               map[string]any
	}{
		{"runtime_start with a control character", "runtime_start_response", "conversation_id",
			map[string]any{"type": "runtime_start", "agent_id": agentID, "conversation_id": "conv\r\nx"}},
		{"runtime_start with a non-ASCII conversation", "runtime_start_response", "conversation_id",
			map[string]any{"type": "runtime_start", "agent_id": agentID, "conversation_id": "café"}},
		{"runtime_start with a 129-character agent", "runtime_start_response", "agent_id",
			map[string]any{"type": "runtime_start", "agent_id": strings.Repeat("a", 129), "create_conversation": map[string]any{}}},
		{"tools update with a 3000-character conversation", "runtime_external_tools_update_response", "updates[0].runtimes[0].conversation_id",
			map[string]any{"type": "runtime_external_tools_update", "updates": []any{map[string]any{
				"runtimes": []any{map[string]any{"agent_id": agentID, "conversation_id": long}}, "external_tools": []any{}}}}},
		{"input with a 3000-character conversation", "input_accepted", "runtime.conversation_id",
			map[string]any{"type": "input", "runtime": map[string]any{"agent_id": agentID, "conversation_id": long},
				"payload": map[string]any{"kind": "create_message", "messages": []any{map[string]any{"role": "user", "content": "hi"}}}}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.frame["request_id"] = "ids-" + string(rune('a'+i))
			c.send(tt.frame)
			m, _ := c.await(tt.answer, 10*time.Second, typeIs(tt.answer))
			msg, _ := m["error"].(string)
			if m["success"] == true || m["accepted"] == true || !strings.HasPrefix(msg, tt.field+": ") {
				t.Errorf("answered %v, want a refusal naming %s", m, tt.field)
			}
		})
	}
	c.send(map[string]any{"type": "app_server_info", "request_id": "still-open"})
	if m, _ := c.await("app_server_info_response", 10*time.Second, typeIs("app_server_info_response")); m["success"] != true {
		t.Errorf("after the refusals app_server_info answered %v", m)
	}
	if items := testenv.ConversationItems(t, stack.DB, stack.Tables.Conversations, accountID); len(items) != 0 {
		t.Errorf("refused commands wrote conversation items %v", items)
	}
}
