package localrunner_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/store"
)

// awaitClosed fails unless the server closes the socket, returning the frames before that.
func (w *wsClient) awaitClosed(timeout time.Duration) []map[string]any {
	w.t.Helper()
	var seen []map[string]any
	deadline := time.After(timeout)
	for {
		select {
		case m, ok := <-w.frames:
			if !ok {
				return seen
			}
			seen = append(seen, m)
		case <-deadline:
			w.t.Fatalf("the socket is still open after %s; frames: %v", timeout, seen)
		}
	}
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

// A socket's authority is the account as it is now: once the account is deleted or its secret
// rotated, the next command gets an error frame and the socket is closed, and nothing the
// command asked for happens. A turn the worker drops because the account is gone is reported
// to its runtime with stop_reason error, never left silent.
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
		_, secret := createAccount(t, srv, "ws-rotated")
		c, _, err := dialWS(t, srv, secret, "")
		if err != nil {
			t.Fatal(err)
		}
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
