package localrunner_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/state/connections"
	"github.com/google/go-cmp/cmp"
)

// A controller tool whose parameters refer outside the schema is refused by runtime_start and
// runtime_external_tools_update, naming the field down to the reference: no agent, conversation
// or tool registration is stored, and what the reference points at is never read (the loopback
// listener it names takes no connection).
func TestWebSocketControllerToolRemoteRefsAreRefused(t *testing.T) {
	addr, accepted := testenv.Listener(t)
	stack := testenv.Stack(t)
	srv := serve(t, stack, nil)
	accountID, secret := createAccount(t, srv, "ws-refs")
	agentID := createAgent(t, srv, secret, ticketAgent)
	c, _, err := dialWS(t, srv, secret, "")
	if err != nil {
		t.Fatal(err)
	}
	response := func(typ, requestID string) map[string]any {
		t.Helper()
		m, _ := c.await(typ+" "+requestID, 10*time.Second, func(m map[string]any) bool {
			return m["type"] == typ && m["request_id"] == requestID
		})
		return m
	}

	// A runtime whose tools are fine, for the updates to be refused on.
	var good any
	_ = json.Unmarshal([]byte(lookupTicket), &good)
	c.send(map[string]any{"type": "runtime_start", "request_id": "rs-good", "agent_id": agentID, "create_conversation": map[string]any{"body": map[string]any{}}, "external_tools": []any{good}})
	m := response("runtime_start_response", "rs-good")
	if m["success"] != true {
		t.Fatalf("runtime_start answered %v", m)
	}
	rt := m["runtime"]
	conversationID, _ := rt.(map[string]any)["conversation_id"].(string)
	ctx := context.Background()
	reg := connections.New(stack.DB, stack.Name("ConnectionsTable"))
	subsBefore, err := reg.Subscribers(ctx, accountID, conversationID)
	if err != nil {
		t.Fatal(err)
	}
	if len(subsBefore) != 1 || len(subsBefore[0].Tools) != 1 {
		t.Fatalf("the runtime's subscribers are %+v, want this connection with lookup_ticket", subsBefore)
	}
	itemsBefore := testenv.ConversationItems(t, stack.DB, stack.Tables.Conversations, accountID)

	const at = "external_tools[0].tools[0].parameters."
	tests := []struct{ name, parameters, field string }{
		{"loopback listener", `{"$ref":"http://` + addr + `/x"}`, at + "$ref"},
		{"file", `{"$ref":"file:///etc/passwd"}`, at + "$ref"},
		{"nested in properties", `{"type":"object","properties":{"a":{"$ref":"http://` + addr + `/x"}}}`, at + "properties.a.$ref"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tools := map[string]any{"tools": []any{map[string]any{
				"name": "lookup_ticket", "description": "Fetch a support ticket by ID.", "parameters": json.RawMessage(tt.parameters),
			}}}
			id := strconv.Itoa(i)
			c.send(map[string]any{
				"type": "runtime_start", "request_id": "rs-" + id,
				"create_agent":        map[string]any{"body": json.RawMessage(ticketAgent)},
				"create_conversation": map[string]any{"body": map[string]any{}},
				"external_tools":      []any{tools},
			})
			m := response("runtime_start_response", "rs-"+id)
			if msg, _ := m["error"].(string); m["success"] != false || !strings.HasPrefix(msg, tt.field+" ") {
				t.Errorf("runtime_start answered %v, want success false and an error naming %s", m, tt.field)
			}
			c.send(map[string]any{
				"type": "runtime_external_tools_update", "request_id": "up-" + id,
				"updates": []any{map[string]any{"runtimes": []any{rt}, "external_tools": []any{tools}}},
			})
			m = response("runtime_external_tools_update_response", "up-"+id)
			if msg, _ := m["error"].(string); m["success"] != false || !strings.HasPrefix(msg, "updates[0]: "+tt.field+" ") {
				t.Errorf("runtime_external_tools_update answered %v, want success false and an error naming updates[0]: %s", m, tt.field)
			}
		})
	}

	list := call(t, srv, http.MethodGet, "/accounts/me/agents", secret, "").json(t)
	if agents, _ := list["agents"].([]any); len(agents) != 1 {
		t.Errorf("agents after the refusals: %v, want only %s", list["agents"], agentID)
	}
	if diff := cmp.Diff(itemsBefore, testenv.ConversationItems(t, stack.DB, stack.Tables.Conversations, accountID)); diff != "" {
		t.Errorf("the refusals wrote conversation items (-before +after):\n%s", diff)
	}
	subsAfter, err := reg.Subscribers(ctx, accountID, conversationID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(subsBefore, subsAfter); diff != "" {
		t.Errorf("a refused update changed the runtime's tools (-before +after):\n%s", diff)
	}
	if n := accepted(); n != 0 {
		t.Errorf("the listener named by a $ref took %d connections, want 0", n)
	}
}
