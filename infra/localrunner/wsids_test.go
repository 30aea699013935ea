package localrunner_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

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
	sync := func(agent, conversation string) map[string]any {
		return map[string]any{"type": "sync", "runtime": map[string]any{"agent_id": agent, "conversation_id": conversation}}
	}
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
		{"sync with a 1000-character conversation", "sync_response", "runtime.conversation_id", sync(agentID, strings.Repeat("c", 1000))},
		{"sync with a 1000-character agent", "sync_response", "runtime.agent_id", sync(strings.Repeat("a", 1000), "conv-ok")},
		{"sync with a space", "sync_response", "runtime.conversation_id", sync(agentID, "conv one")},
		{"sync with a slash", "sync_response", "runtime.conversation_id", sync(agentID, "conv/one")},
		{"sync with control characters", "sync_response", "runtime.conversation_id", sync(agentID, "conv\x00\t\x1b")},
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

	// A command's own request_id follows the grammar too: a bad one is refused in an error frame
	// naming it, which does not echo it, and the command does nothing.
	for _, id := range []string{strings.Repeat("r", 1000), "req one/two\x07"} {
		frame := sync(agentID, "conv-ok")
		frame["request_id"] = id
		c.send(frame)
		m, _ := c.await("an answer to the sync", 10*time.Second, func(m map[string]any) bool {
			return m["type"] == "error" || m["type"] == "sync_response"
		})
		msg, _ := m["error"].(string)
		if m["type"] != "error" || !strings.HasPrefix(msg, "request_id: ") || m["request_id"] != nil {
			t.Errorf("sync with request_id %q answered %v, want an error frame naming request_id", id[:min(len(id), 20)], m)
		}
	}

	c.send(map[string]any{"type": "app_server_info", "request_id": "still-open"})
	if m, _ := c.await("app_server_info_response", 10*time.Second, typeIs("app_server_info_response")); m["success"] != true {
		t.Errorf("after the refusals app_server_info answered %v", m)
	}
	if items := testenv.ConversationItems(t, stack.DB, stack.Tables.Conversations, accountID); len(items) != 0 {
		t.Errorf("refused commands wrote conversation items %v", items)
	}
	if subs := runtimeItems(t, stack, accountID); len(subs) != 0 {
		t.Errorf("refused commands subscribed the socket: %v", subs)
	}
}

// runtimeItems lists the keys of the connections table's items of an account's runtimes
// (subscriptions, runs, queued inputs), read with a consistent scan.
func runtimeItems(t *testing.T, stack *testenv.Resources, accountID string) []string {
	t.Helper()
	var keys []string
	p := dynamodb.NewScanPaginator(stack.DB, &dynamodb.ScanInput{
		TableName:                 aws.String(stack.Name("ConnectionsTable")),
		FilterExpression:          aws.String("begins_with(pk, :p)"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":p": &ddbtypes.AttributeValueMemberS{Value: "rt#" + accountID + "#"}},
		ConsistentRead:            aws.Bool(true),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			pk, _ := it["pk"].(*ddbtypes.AttributeValueMemberS)
			sk, _ := it["sk"].(*ddbtypes.AttributeValueMemberS)
			if pk != nil && sk != nil {
				keys = append(keys, pk.Value+" "+sk.Value)
			}
		}
	}
	return keys
}
