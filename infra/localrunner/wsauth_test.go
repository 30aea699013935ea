package localrunner_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/state/store"
)

// awaitClosed fails unless the server closes the socket, returning the frames before that.
func (w *wsClient) awaitClosed(timeout time.Duration) []map[string]any {
	w.t.Helper()
	seen, closed := w.drain(timeout)
	if !closed {
		w.t.Fatalf("the socket is still open after %s; frames: %v", timeout, seen)
	}
	return seen
}

// revoked reports whether frames hold the error that ends a socket's authority.
func revoked(frames []map[string]any) bool {
	for _, f := range frames {
		if msg, _ := f["error"].(string); f["type"] == "error" && strings.Contains(msg, "deleted or its secret rotated") {
			return true
		}
	}
	return false
}

// unlist takes the account's connections off its listing in the connections table, as a socket
// opened before every connection was listed under its account is: rotation and deletion do
// not find it to close it.
func unlist(t *testing.T, stack *testenv.Resources, accountID string) {
	t.Helper()
	table := stack.Name("ConnectionsTable")
	out, err := stack.DB.Query(context.Background(), &dynamodb.QueryInput{
		TableName: &table, KeyConditionExpression: aws.String("pk = :pk"), ConsistentRead: aws.Bool(true),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":pk": &ddbtypes.AttributeValueMemberS{Value: "acct#" + accountID}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Items) == 0 {
		t.Fatal("the account's connections are not listed under it")
	}
	for _, it := range out.Items {
		if _, err := stack.DB.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{
			TableName: &table, Key: map[string]ddbtypes.AttributeValue{"pk": it["pk"], "sk": it["sk"]},
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// A socket's authority is the account as it is now, checked at every command too: a socket
// that rotation or deletion did not close (unlist) gets an error frame at its next command and
// is closed, and nothing the command asked for happens. A turn the worker drops because the
// account is gone is reported to its runtime with stop_reason error, never left silent.
func TestWebSocketAuthorityEndsWithTheAccount(t *testing.T) {
	stack := testenv.Stack(t)
	srv, worker, held := serveHoldingTurns(t, stack)
	st := store.New(stack.DB, stack.Tables)

	t.Run("deleted account", func(t *testing.T) {
		id, secret := createAccount(t, srv, "ws-deleted")
		createAgent(t, srv, secret, `{"agentId":"chatty",`+chatty[1:])
		c, _, err := dialWS(t, srv, secret, "")
		if err != nil {
			t.Fatal(err)
		}
		unlist(t, stack, id)
		c.send(map[string]any{"type": "runtime_start", "request_id": "rs", "agent_id": "chatty", "create_conversation": map[string]any{}})
		m, _ := c.await("runtime_start_response", 10*time.Second, typeIs("runtime_start_response"))
		if m["success"] != true {
			t.Fatalf("runtime_start answered %v", m)
		}
		rt := m["runtime"]
		c.send(map[string]any{"type": "input", "request_id": "in", "runtime": rt, "payload": map[string]any{
			"kind": "create_message", "messages": []any{map[string]any{"role": "user", "content": "hello"}}}})
		if m, _ := c.await("input_accepted", 10*time.Second, typeIs("input_accepted")); m["accepted"] != true {
			t.Fatalf("input answered %v", m)
		}
		var turn events.SQSMessage
		select {
		case turn = <-held:
		case <-time.After(20 * time.Second):
			t.Fatal("the turn never reached the worker")
		}
		if res := call(t, srv, http.MethodDelete, "/accounts/me", secret, ""); res.status != http.StatusNoContent {
			t.Fatalf("DELETE /accounts/me = %d %s", res.status, res.body)
		}

		// The worker drops the deleted account's turn and says so to the runtime.
		if out, err := worker.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{turn}}); err != nil || len(out.BatchItemFailures) != 0 {
			t.Fatalf("the dropped turn: %+v, %v", out, err)
		}
		stop, seen := c.await("stop_reason", 10*time.Second, deltaIs("stop_reason"))
		if d := stop["delta"].(map[string]any); d["stop_reason"] != "error" {
			t.Errorf("stop_reason %v, want error", d)
		}
		reason := ""
		for _, f := range seen {
			if d, _ := f["delta"].(map[string]any); d["message_type"] == "loop_error" {
				reason, _ = d["message"].(string)
			}
		}
		if !strings.Contains(reason, "account was deleted") {
			t.Errorf("the runtime was not told why: loop_error %q; frames %v", reason, seen)
		}

		// The next command on the socket ends it, and does nothing.
		var body any
		_ = json.Unmarshal([]byte(`{"name":"late","model":{"provider":"scripted","script":[{"text":"hi"}]}}`), &body)
		c.send(map[string]any{"type": "runtime_start", "request_id": "late", "create_agent": map[string]any{"body": body}, "create_conversation": map[string]any{}})
		if frames := c.awaitClosed(10 * time.Second); !revoked(frames) {
			t.Errorf("frames before the close %v, want the revocation error", frames)
		}
		agents, err := st.ListAgents(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range agents {
			if a.ID != "chatty" {
				t.Errorf("the deleted account's socket stored agent %s", a.ID)
			}
		}
	})

	t.Run("rotated secret", func(t *testing.T) {
		id, secret := createAccount(t, srv, "ws-rotated")
		c, _, err := dialWS(t, srv, secret, "")
		if err != nil {
			t.Fatal(err)
		}
		unlist(t, stack, id)
		c.send(map[string]any{"type": "app_server_info", "request_id": "before"})
		if m, _ := c.await("app_server_info_response", 10*time.Second, typeIs("app_server_info_response")); m["success"] != true {
			t.Fatalf("app_server_info answered %v", m)
		}
		res := call(t, srv, http.MethodPost, "/accounts/me/rotate-secret", secret, "")
		if res.status != http.StatusOK {
			t.Fatalf("rotating the secret = %d %s", res.status, res.body)
		}
		c.send(map[string]any{"type": "app_server_info", "request_id": "after"})
		if frames := c.awaitClosed(10 * time.Second); !revoked(frames) || len(frames) != 1 {
			t.Errorf("frames before the close %v, want only the revocation error", frames)
		}
		fresh, _, err := dialWS(t, srv, res.json(t)["secret"].(string), "")
		if err != nil {
			t.Fatalf("the new secret cannot connect: %v", err)
		}
		fresh.send(map[string]any{"type": "app_server_info", "request_id": "new"})
		if m, _ := fresh.await("app_server_info_response", 10*time.Second, typeIs("app_server_info_response")); m["success"] != true {
			t.Errorf("app_server_info on the new secret answered %v", m)
		}
	})
}

// Rotating the secret or deleting the account ends every socket opened with the old secret, not
// only those that send a frame: a ?channel=stream socket and a runtime's socket that stay silent
// are told and closed, and get none of the turns that follow; the new secret's sockets keep
// working, a split pair's stream socket getting the account's turn, until the account is deleted.
func TestWebSocketRevocationEndsPassiveSockets(t *testing.T) {
	stack := testenv.Stack(t)
	srv := serve(t, stack, nil)
	_, secret := createAccount(t, srv, "ws-passive")
	agentID := createAgent(t, srv, secret, chatty)
	dial := func(secret, query string) *wsClient {
		t.Helper()
		c, _, err := dialWS(t, srv, secret, query)
		if err != nil {
			t.Fatalf("dialing %s: %v", query, err)
		}
		return c
	}
	start := func(c *wsClient) any {
		t.Helper()
		c.send(map[string]any{"type": "runtime_start", "request_id": "rs", "agent_id": agentID, "create_conversation": map[string]any{}})
		m, _ := c.await("runtime_start_response", 10*time.Second, typeIs("runtime_start_response"))
		if m["success"] != true {
			t.Fatalf("runtime_start answered %v", m)
		}
		return m["runtime"]
	}
	endedAndTold := func(what string, c *wsClient) {
		t.Helper()
		frames := c.awaitClosed(10 * time.Second)
		if !revoked(frames) {
			t.Errorf("%s: frames before the close %v, want the revocation error", what, frames)
		}
		for _, f := range frames {
			if f["type"] == "stream_delta" {
				t.Errorf("%s got a turn's output after its authority ended: %v", what, f)
			}
		}
	}

	oldStream := dial(secret, "?channel=stream")
	oldRuntime := dial(secret, "")
	rt := start(oldRuntime)
	res := call(t, srv, http.MethodPost, "/accounts/me/rotate-secret", secret, "")
	if res.status != http.StatusOK {
		t.Fatalf("rotating the secret = %d %s", res.status, res.body)
	}
	fresh := res.json(t)["secret"].(string)

	// The new secret's split pair runs a turn on the old socket's conversation; the stream half
	// gets it, the old sockets nothing.
	stream := dial(fresh, "?channel=stream")
	control := dial(fresh, "?channel=control")
	control.send(map[string]any{"type": "runtime_start", "request_id": "rs", "agent_id": agentID,
		"conversation_id": rt.(map[string]any)["conversation_id"]})
	if m, _ := control.await("runtime_start_response", 10*time.Second, typeIs("runtime_start_response")); m["success"] != true {
		t.Fatalf("runtime_start on the new secret answered %v", m)
	}
	control.send(map[string]any{"type": "input", "request_id": "in", "runtime": rt, "payload": map[string]any{
		"kind": "create_message", "messages": []any{map[string]any{"role": "user", "content": "hello"}}}})
	if m, _ := control.await("input_accepted", 10*time.Second, typeIs("input_accepted")); m["accepted"] != true {
		t.Fatalf("input on the new secret answered %v", m)
	}
	stop, streamed := stream.await("stop_reason", 20*time.Second, deltaIs("stop_reason"))
	if stop["delta"].(map[string]any)["stop_reason"] != "end_turn" {
		t.Errorf("the new stream socket got stop_reason %v, want end_turn", stop["delta"])
	}
	// A split pair splits: the command answers reach the control half alone, the turn's output
	// the stream half alone.
	for _, f := range streamed {
		if f["type"] == "runtime_start_response" || f["type"] == "input_accepted" {
			t.Errorf("the stream socket got the control socket's answer %v", f)
		}
	}
	afterTurn, _ := control.drain(time.Second)
	for _, f := range afterTurn {
		if f["type"] == "stream_delta" {
			t.Errorf("the control socket got the turn's output %v", f)
		}
	}
	endedAndTold("the old stream socket", oldStream)
	endedAndTold("the old runtime's socket", oldRuntime)

	if res := call(t, srv, http.MethodDelete, "/accounts/me", fresh, ""); res.status != http.StatusNoContent {
		t.Fatalf("DELETE /accounts/me = %d %s", res.status, res.body)
	}
	endedAndTold("the stream socket of a deleted account", stream)
	endedAndTold("the control socket of a deleted account", control)
}
