package localrunner_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentharness/harness/infra/faketavily"
	"github.com/agentharness/harness/infra/localrunner"
	"github.com/agentharness/harness/infra/testenv"
)

// wsClient is a bare App Server client over a real WebSocket: it sends commands and waits for
// the frames a test expects.
type wsClient struct {
	t      *testing.T
	c      *websocket.Conn
	frames chan map[string]any
}

func dialWS(t *testing.T, srv *httptest.Server, secret, query string) (*wsClient, *http.Response, error) {
	t.Helper()
	h := http.Header{}
	if secret != "" {
		h.Set("Authorization", "Bearer "+secret)
	}
	return dialWSWith(t, srv, &websocket.DialOptions{HTTPHeader: h}, query)
}

// dialWSWith is dialWS with the upgrade's options as they are.
func dialWSWith(t *testing.T, srv *httptest.Server, opts *websocket.DialOptions, query string) (*wsClient, *http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws" + query
	c, res, err := websocket.Dial(ctx, url, opts)
	if err != nil {
		return nil, res, err
	}
	c.SetReadLimit(1 << 20)
	w := &wsClient{t: t, c: c, frames: make(chan map[string]any, 1000)}
	go func() {
		defer close(w.frames)
		for {
			_, b, err := c.Read(context.Background())
			if err != nil {
				return
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Errorf("frame is not a JSON object: %s", b)
				return
			}
			w.frames <- m
		}
	}()
	t.Cleanup(func() { _ = c.CloseNow() })
	return w, res, nil
}

func (w *wsClient) send(v any) {
	w.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		w.t.Fatal(err)
	}
	w.sendRaw(b)
}

func (w *wsClient) sendRaw(b []byte) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.c.Write(ctx, websocket.MessageText, b); err != nil {
		w.t.Fatalf("sending a frame: %v", err)
	}
}

// await returns the first frame that match accepts, failing the test after timeout; frames
// before it are returned too, in order.
func (w *wsClient) await(what string, timeout time.Duration, match func(map[string]any) bool) (map[string]any, []map[string]any) {
	w.t.Helper()
	var seen []map[string]any
	deadline := time.After(timeout)
	for {
		select {
		case m, ok := <-w.frames:
			if !ok {
				w.t.Fatalf("socket closed while waiting for %s; frames so far: %v", what, seen)
			}
			seen = append(seen, m)
			if match(m) {
				return m, seen
			}
		case <-deadline:
			w.t.Fatalf("no %s within %s; frames: %v", what, timeout, seen)
		}
	}
}

// drain returns the frames that arrive within d, and whether the server closed the socket
// meanwhile.
func (w *wsClient) drain(d time.Duration) (seen []map[string]any, closed bool) {
	deadline := time.After(d)
	for {
		select {
		case m, ok := <-w.frames:
			if !ok {
				return seen, true
			}
			seen = append(seen, m)
		case <-deadline:
			return seen, false
		}
	}
}

func typeIs(typ string) func(map[string]any) bool {
	return func(m map[string]any) bool { return m["type"] == typ }
}

func deltaIs(kind string) func(map[string]any) bool {
	return func(m map[string]any) bool {
		d, _ := m["delta"].(map[string]any)
		return m["type"] == "stream_delta" && d["message_type"] == kind
	}
}

// startRuntime creates the agent agentJSON for the account, connects, and starts a runtime of
// the agent in a new conversation; it returns the connection and the runtime.
func startRuntime(t *testing.T, srv *httptest.Server, secret, agentJSON string) (*wsClient, any) {
	t.Helper()
	res := call(t, srv, http.MethodPost, "/accounts/me/agents", secret, agentJSON)
	if res.status != http.StatusCreated {
		t.Fatalf("creating the agent = %d %s", res.status, res.body)
	}
	agentID := res.json(t)["agentId"].(string)
	c, _, err := dialWS(t, srv, secret, "")
	if err != nil {
		t.Fatal(err)
	}
	c.send(map[string]any{"type": "runtime_start", "request_id": "rs-1", "agent_id": agentID, "create_conversation": map[string]any{"body": map[string]any{}}})
	m, _ := c.await("runtime_start_response", 10*time.Second, typeIs("runtime_start_response"))
	return c, m["runtime"]
}

// ticketAgent calls the controller's lookup_ticket, then answers with what it returned.
const ticketAgent = `{
  "name": "tickets",
  "model": {"provider": "scripted", "script": [
    {"toolCalls": [{"name": "lookup_ticket", "input": {"id": "LET-123"}}]},
    {"text": "Ticket says: {{toolResults}}"}
  ]}
}`

const lookupTicket = `{"tools":[{"name":"lookup_ticket","description":"Fetch a support ticket by ID.","parameters":{"type":"object","properties":{"id":{"type":"string"}},"required":["id"],"additionalProperties":false}}]}`

func TestWebSocketRefusesBadSecretBeforeAnyFrame(t *testing.T) {
	srv := runner(t, faketavily.New(nil))
	for name, secret := range map[string]string{"missing": "", "wrong": "hsk_not-a-secret"} {
		_, res, err := dialWS(t, srv, secret, "")
		if err == nil {
			t.Fatalf("%s secret: the upgrade succeeded", name)
		}
		if res == nil || res.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s secret: upgrade answered %v, want 401", name, res)
		}
	}
	_, secret := createAccount(t, srv, "ws-channel")
	if _, res, err := dialWS(t, srv, secret, "?channel=sideways"); err == nil || res == nil || res.StatusCode != http.StatusBadRequest {
		t.Errorf("unknown channel: err %v, response %v; want 400", err, res)
	}
	for _, path := range []string{"/readyz", "/healthz"} {
		if res := call(t, srv, http.MethodGet, path, "", ""); res.status != http.StatusOK {
			t.Errorf("GET %s = %d, want 200", path, res.status)
		}
	}
}

func TestWebSocketBadInputKeepsTheSocket(t *testing.T) {
	srv := runner(t, faketavily.New(nil))
	_, secret := createAccount(t, srv, "ws-bad")
	c, _, err := dialWS(t, srv, secret, "")
	if err != nil {
		t.Fatal(err)
	}
	c.sendRaw([]byte(`{"type":`))
	m, _ := c.await("an error for malformed JSON", 10*time.Second, typeIs("error"))
	if !strings.Contains(m["error"].(string), "malformed JSON") {
		t.Errorf("malformed JSON answered %v", m)
	}
	c.send(map[string]any{"type": "teleport_everything", "request_id": "r-unknown", "extra": true})
	m, _ = c.await("an error for the unknown type", 10*time.Second, typeIs("error"))
	if m["request_id"] != "r-unknown" || !strings.Contains(m["error"].(string), `"teleport_everything"`) {
		t.Errorf("unknown type answered %v", m)
	}
	// A v1 listener command is refused, naming what to send instead.
	c.send(map[string]any{"type": "cancel_run", "request_id": "r-v1"})
	m, _ = c.await("an error for a v1 command", 10*time.Second, typeIs("error"))
	if m["request_id"] != "r-v1" || !strings.Contains(m["error"].(string), "v1 listener command: send abort_message instead") {
		t.Errorf("cancel_run answered %v", m)
	}
	// A frame naming a key twice would mean its last value to encoding/json: refused, naming it.
	c.sendRaw([]byte(`{"type":"runtime_start","request_id":"r-dup","payload":{"agent_id":"a","agent_id":"b"}}`))
	m, _ = c.await("an error for the duplicate key", 10*time.Second, typeIs("error"))
	if m["request_id"] != "r-dup" || !strings.Contains(m["error"].(string), "payload.agent_id") {
		t.Errorf("duplicate key answered %v", m)
	}
	c.sendRaw([]byte(`{"type":"app_server_info","request_id":"big","pad":"` + strings.Repeat("x", 200<<10) + `"}`))
	m, _ = c.await("an error for the oversized frame", 10*time.Second, typeIs("error"))
	if !strings.Contains(m["error"].(string), "larger than") {
		t.Errorf("oversized frame answered %v", m)
	}
	c.send(map[string]any{"type": "external_tool_call_response", "request_id": "ag_nothing.000000000000", "result": map[string]any{"content": []any{}}})
	m, _ = c.await("an error for the unknown request_id", 10*time.Second, typeIs("error"))
	if m["request_id"] != "ag_nothing.000000000000" || !strings.Contains(m["error"].(string), "unknown request_id") {
		t.Errorf("unknown request_id answered %v", m)
	}
	c.send(map[string]any{"type": "app_server_info", "request_id": "info-1"})
	m, _ = c.await("app_server_info_response", 10*time.Second, typeIs("app_server_info_response"))
	if m["request_id"] != "info-1" || m["success"] != true {
		t.Errorf("app_server_info answered %v", m)
	}
}

func TestWebSocketControllerTool(t *testing.T) {
	srv := runner(t, faketavily.New(nil))
	_, secret := createAccount(t, srv, "ws-tools")
	agentID := createAgent(t, srv, secret, ticketAgent)
	c, _, err := dialWS(t, srv, secret, "")
	if err != nil {
		t.Fatal(err)
	}
	var tools any
	_ = json.Unmarshal([]byte(lookupTicket), &tools)
	c.send(map[string]any{"type": "runtime_start", "request_id": "rs-1", "agent_id": agentID, "create_conversation": map[string]any{"body": map[string]any{}}, "external_tools": []any{tools}})
	m, _ := c.await("runtime_start_response", 10*time.Second, typeIs("runtime_start_response"))
	if m["success"] != true {
		t.Fatalf("runtime_start answered %v", m)
	}
	rt := m["runtime"]
	c.send(map[string]any{"type": "input", "request_id": "in-1", "runtime": rt, "payload": map[string]any{
		"kind": "create_message", "messages": []any{map[string]any{"role": "user", "content": "Look up LET-123"}},
	}})
	m, _ = c.await("input_accepted", 10*time.Second, typeIs("input_accepted"))
	if m["accepted"] != true {
		t.Fatalf("input answered %v", m)
	}
	runID, _ := m["run_id"].(string)
	req, _ := c.await("external_tool_call_request", 30*time.Second, typeIs("external_tool_call_request"))
	input, _ := req["input"].(map[string]any)
	if req["tool_name"] != "lookup_ticket" || input["id"] != "LET-123" || req["tool_call_id"] == "" {
		t.Fatalf("tool call request %v", req)
	}
	c.send(map[string]any{"type": "external_tool_call_response", "request_id": req["request_id"], "result": map[string]any{
		"content": []any{map[string]any{"type": "text", "text": "LET-123 is assigned to Support."}},
	}})
	stop, seen := c.await("stop_reason", 30*time.Second, deltaIs("stop_reason"))
	if d := stop["delta"].(map[string]any); d["stop_reason"] != "end_turn" {
		t.Errorf("stop_reason %v", d)
	}
	// The turn's bookkeeping lands before the runtime hears it ended: its event already says so.
	if st := call(t, srv, http.MethodGet, "/status/"+runID, secret, ""); st.status != http.StatusOK || st.json(t)["status"] != "completed" {
		t.Errorf("GET /status/%s right after stop_reason = %d %s, want completed", runID, st.status, st.body)
	}
	var text strings.Builder
	var returned bool
	for _, f := range seen {
		d, _ := f["delta"].(map[string]any)
		switch d["message_type"] {
		case "assistant_message":
			text.WriteString(d["content"].(string))
		case "tool_return_message":
			returned = d["status"] == "success" && d["tool_return"] == "LET-123 is assigned to Support."
		}
	}
	if !returned || !strings.Contains(text.String(), "LET-123 is assigned to Support.") {
		t.Errorf("tool returned %v, text %q; frames %v", returned, text.String(), seen)
	}
}

// An abort_message that arrives while the turn is still queued (no worker has picked it up)
// stops it before it writes anything; the runtime's next turn runs as usual.
func TestWebSocketAbortBeforeTheTurnStarts(t *testing.T) {
	stack := testenv.Stack(t)
	env := map[string]string{"ADMIN_SECRET": adminSecret}
	opts := stack.Options(func(k string) string { return env[k] })
	srv := httptest.NewUnstartedServer(nil)
	opts.BaseURL = "http://" + srv.Listener.Addr().String()
	r, err := localrunner.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = r
	srv.Start()
	t.Cleanup(srv.Close)

	_, secret := createAccount(t, srv, "ws-abort")
	c, rt := startRuntime(t, srv, secret, `{"name":"echo","model":{"provider":"scripted","script":[{"text":"Hello there."}]}}`)
	input := func(id, text string) {
		c.send(map[string]any{"type": "input", "request_id": id, "runtime": rt, "payload": map[string]any{
			"kind": "create_message", "messages": []any{map[string]any{"role": "user", "content": text}},
		}})
		if m, _ := c.await("input_accepted", 10*time.Second, typeIs("input_accepted")); m["disposition"] != "started" {
			t.Fatalf("input answered %v", m)
		}
	}
	input("in-1", "never mind")
	c.send(map[string]any{"type": "abort_message", "request_id": "ab-1", "runtime": rt})
	if m, _ := c.await("abort_message_response", 10*time.Second, typeIs("abort_message_response")); m["aborted"] != true {
		t.Fatalf("abort of the queued turn answered %v", m)
	}

	// Only now does the worker poll its queue.
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	stop, seen := c.await("stop_reason", 30*time.Second, deltaIs("stop_reason"))
	if d := stop["delta"].(map[string]any); d["stop_reason"] != "cancelled" {
		t.Fatalf("stop_reason %v, want cancelled; frames %v", d, seen)
	}
	for _, f := range seen {
		if d, _ := f["delta"].(map[string]any); d["message_type"] == "assistant_message" {
			t.Errorf("the aborted turn ran the model: %v", f)
		}
	}
	conv := rt.(map[string]any)["conversation_id"].(string)

	// The abort belongs to that turn only.
	input("in-2", "hello")
	stop, seen = c.await("stop_reason", 30*time.Second, deltaIs("stop_reason"))
	var text strings.Builder
	for _, f := range seen {
		if d, _ := f["delta"].(map[string]any); d["message_type"] == "assistant_message" {
			text.WriteString(d["content"].(string))
		}
	}
	if d := stop["delta"].(map[string]any); d["stop_reason"] != "end_turn" || text.String() != "Hello there." {
		t.Errorf("next turn on %s: stop_reason %v, text %q", conv, d, text.String())
	}
}

// sync's options are honoured or refused: recover_approvals false replays a held turn's status
// without putting its approvals to the controller again, the default puts them again, and
// force_device_status true is refused (the harness has no device) without subscribing anything.
func TestWebSocketSyncOptions(t *testing.T) {
	srv := runner(t, faketavily.New(nil))
	_, secret := createAccount(t, srv, "ws-sync-options")
	c, rt := startRuntime(t, srv, secret, `{"name":"approver","model":{"provider":"scripted","script":[
		{"toolCalls":[{"name":"test_async","input":{"delayMs":0,"echo":"deployed"}}]},{"text":"done"}]},
		"tools":{"test_async":{"needsApproval":true}}}`)
	c.send(map[string]any{"type": "input", "request_id": "in-1", "runtime": rt, "payload": map[string]any{
		"kind": "create_message", "messages": []any{map[string]any{"role": "user", "content": "deploy"}},
	}})
	if stop, seen := c.await("stop_reason", 30*time.Second, deltaIs("stop_reason")); stop["delta"].(map[string]any)["stop_reason"] != "requires_approval" {
		t.Fatalf("the turn ended with %v, want requires_approval; frames %v", stop, seen)
	}

	syncFrames := func(id string, extra map[string]any) (map[string]any, []map[string]any) {
		cmd := map[string]any{"type": "sync", "request_id": id, "runtime": rt}
		for k, v := range extra {
			cmd[k] = v
		}
		c.send(cmd)
		return c.await("sync_response", 10*time.Second, func(m map[string]any) bool { return m["type"] == "sync_response" && m["request_id"] == id })
	}
	count := func(fs []map[string]any, typ string) int {
		n := 0
		for _, f := range fs {
			if f["type"] == typ {
				n++
			}
		}
		return n
	}
	resp, seen := syncFrames("sync-keep", map[string]any{"recover_approvals": false})
	if resp["success"] != true || count(seen, "control_request") != 0 || count(seen, "update_loop_status") != 1 || count(seen, "update_queue") != 1 {
		t.Errorf("sync with recover_approvals false: %v after [%v], want success, the loop status and the queue, and no control_request", resp, seen)
	}
	resp, seen = syncFrames("sync-recover", nil)
	if resp["success"] != true || count(seen, "control_request") != 1 {
		t.Errorf("sync by default: %v after %v, want the held approval put to the controller again", resp, seen)
	}
	resp, seen = syncFrames("sync-device", map[string]any{"force_device_status": true})
	if resp["success"] != false || !strings.Contains(resp["error"].(string), "force_device_status") || len(seen) != 1 {
		t.Errorf("sync with force_device_status: %v after %v, want a refusal naming it and nothing replayed", resp, seen)
	}
	resp, _ = syncFrames("sync-bad", map[string]any{"recover_approvals": "yes"})
	if resp["success"] != false || !strings.Contains(resp["error"].(string), "recover_approvals") {
		t.Errorf("sync with a string recover_approvals: %v, want a refusal naming it", resp)
	}

	// runtime_start replays the same state, and takes recover_approvals as sync does.
	started := func(id string, extra map[string]any) []map[string]any {
		scope := rt.(map[string]any)
		cmd := map[string]any{"type": "runtime_start", "request_id": id, "agent_id": scope["agent_id"], "conversation_id": scope["conversation_id"]}
		for k, v := range extra {
			cmd[k] = v
		}
		c.send(cmd)
		_, seen := c.await("update_queue after runtime_start", 10*time.Second, typeIs("update_queue"))
		more, _ := c.drain(300 * time.Millisecond)
		return append(seen, more...)
	}
	if seen := started("start-keep", map[string]any{"recover_approvals": false}); count(seen, "control_request") != 0 {
		t.Errorf("runtime_start with recover_approvals false put the held approval again: %v", seen)
	}
	if seen := started("start-recover", nil); count(seen, "control_request") != 1 {
		t.Errorf("runtime_start by default: %v, want the held approval put to the controller again", seen)
	}
}
