package localrunner_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentharness/harness/infra/faketavily"
	"github.com/agentharness/harness/shared/edge/appserver"
)

// mintToken mints an end-user token for endUser on agents (nil: all) that lives ttl seconds,
// through POST /accounts/me/tokens, and returns it with its expiry.
func mintToken(t *testing.T, srv *httptest.Server, secret, endUser string, agents []string, ttl int) (string, time.Time) {
	t.Helper()
	body := fmt.Sprintf(`{"endUser":%q,"ttlSeconds":%d`, endUser, ttl)
	if agents != nil {
		body += `,"agents":["` + strings.Join(agents, `","`) + `"]`
	}
	res := call(t, srv, http.MethodPost, "/accounts/me/tokens", secret, body+"}")
	if res.status != http.StatusCreated {
		t.Fatalf("minting a token = %d %s, want 201", res.status, res.body)
	}
	m := res.json(t)
	exp, err := time.Parse(time.RFC3339, m["expiresAt"].(string))
	if err != nil {
		t.Fatal(err)
	}
	return m["token"].(string), exp
}

// tokenProtocols are the subprotocols a page offers to open a socket with an end-user token.
func tokenProtocols(token string) []string {
	return []string{appserver.Subprotocol, appserver.BearerPrefix + token}
}

// dialToken opens a socket as a browser does with an end-user token: no Authorization, the
// token as a subprotocol. The upgrade must answer with the harness's subprotocol.
func dialToken(t *testing.T, srv *httptest.Server, token string) *wsClient {
	t.Helper()
	c, res, err := dialWSWith(t, srv, &websocket.DialOptions{Subprotocols: tokenProtocols(token)}, "")
	if err != nil {
		t.Fatalf("opening a socket with a token: %v (%v)", err, res)
	}
	if got := c.c.Subprotocol(); got != appserver.Subprotocol {
		t.Fatalf("the upgrade answered subprotocol %q, want %q", got, appserver.Subprotocol)
	}
	return c
}

// request sends cmd with a fresh request_id and returns the frame of type resp that answers it.
func (w *wsClient) request(cmd map[string]any, resp string) map[string]any {
	w.t.Helper()
	id := fmt.Sprintf("req-%d", time.Now().UnixNano())
	cmd["request_id"] = id
	w.send(cmd)
	m, _ := w.await(resp, 20*time.Second, func(m map[string]any) bool { return m["type"] == resp && m["request_id"] == id })
	return m
}

// start starts a runtime of agentID in a new conversation and returns it.
func (w *wsClient) start(agentID string) map[string]any {
	w.t.Helper()
	m := w.request(map[string]any{"type": "runtime_start", "agent_id": agentID, "create_conversation": map[string]any{"body": map[string]any{}}}, "runtime_start_response")
	if m["success"] != true {
		w.t.Fatalf("runtime_start of %s answered %v", agentID, m)
	}
	return m["runtime"].(map[string]any)
}

// ask sends a user message to the runtime and waits for the turn's stop_reason, which must be
// end_turn.
func (w *wsClient) ask(rt map[string]any, text string) {
	w.t.Helper()
	if m := w.request(map[string]any{"type": "input", "runtime": rt, "payload": map[string]any{
		"kind": "create_message", "messages": []any{map[string]any{"role": "user", "content": text}},
	}}, "input_accepted"); m["accepted"] != true {
		w.t.Fatalf("input answered %v", m)
	}
	stop, _ := w.await("stop_reason", 20*time.Second, func(m map[string]any) bool {
		return deltaIs("stop_reason")(m) && m["runtime"].(map[string]any)["conversation_id"] == rt["conversation_id"]
	})
	if d := stop["delta"].(map[string]any); d["stop_reason"] != "end_turn" {
		w.t.Fatalf("the turn stopped with %v", d)
	}
}

// listed is what a conversation_list answered: the conversations' ids in order, and each one
// by id.
func listed(t *testing.T, m map[string]any) ([]string, map[string]map[string]any) {
	t.Helper()
	if m["success"] != true {
		t.Fatalf("conversation_list answered %v", m)
	}
	var ids []string
	byID := map[string]map[string]any{}
	for _, c := range m["conversations"].([]any) {
		conv := c.(map[string]any)
		ids = append(ids, conv["id"].(string))
		byID[conv["id"].(string)] = conv
	}
	return ids, byID
}

const greeterAgent = `{"name":"greeter","model":{"provider":"scripted","script":[{"text":"Hello there."}]}}`

// An end-user token opens a socket the way a browser can (the Sec-WebSocket-Protocol header,
// answered with the harness's subprotocol) and is limited there as on the HTTP routes: no
// create_agent, only its agents (another is not found, like an unknown one), only its end
// user's conversations (another's, or the account's own, is not found, like an unknown one),
// and conversation_list lists its end user's; the account secret lists everyone's, and the
// token's turns are stamped as its end user's.
func TestWebSocketEndUserToken(t *testing.T) {
	srv := runner(t, faketavily.New(nil))
	_, secret := createAccount(t, srv, "wstoken")
	greeter := createAgent(t, srv, secret, greeterAgent)
	other := createAgent(t, srv, secret, ticketAgent)
	alice, _ := mintToken(t, srv, secret, "alice", []string{greeter}, 3600)
	bob, _ := mintToken(t, srv, secret, "bob", nil, 3600)

	sig := strings.Split(alice, ".")
	forged := []byte(sig[2])
	forged[10] = map[bool]byte{true: 'B', false: 'A'}[forged[10] == 'A']
	for name, tt := range map[string]struct {
		opts   websocket.DialOptions
		query  string
		status int
	}{
		"the token without the harness subprotocol": {websocket.DialOptions{Subprotocols: []string{appserver.BearerPrefix + alice}}, "", http.StatusBadRequest},
		"the account secret as a subprotocol":       {websocket.DialOptions{Subprotocols: tokenProtocols(secret)}, "", http.StatusUnauthorized},
		"a token beside Authorization": {websocket.DialOptions{Subprotocols: tokenProtocols(alice),
			HTTPHeader: http.Header{"Authorization": {"Bearer " + secret}}}, "", http.StatusBadRequest},
		"a token whose signature does not verify": {websocket.DialOptions{Subprotocols: tokenProtocols(sig[0] + "." + sig[1] + "." + string(forged))}, "", http.StatusUnauthorized},
		"a token on the stream channel":           {websocket.DialOptions{Subprotocols: tokenProtocols(alice)}, "?channel=stream", http.StatusBadRequest},
		"a page of an origin the account does not list": {websocket.DialOptions{Subprotocols: tokenProtocols(alice),
			HTTPHeader: http.Header{"Origin": {"https://elsewhere.example"}}}, "", http.StatusForbidden},
	} {
		if _, res, err := dialWSWith(t, srv, &tt.opts, tt.query); err == nil || res == nil || res.StatusCode != tt.status {
			t.Errorf("%s: upgrade %v (%v), want it refused with %d", name, res, err, tt.status)
		}
	}

	a := dialToken(t, srv, alice)
	m := a.request(map[string]any{"type": "runtime_start", "create_agent": map[string]any{"body": map[string]any{"name": "mine", "model": "scripted/x"}},
		"create_conversation": map[string]any{"body": map[string]any{}}}, "runtime_start_response")
	if msg, _ := m["error"].(string); m["success"] != false || !strings.Contains(msg, "create_agent") {
		t.Errorf("create_agent with a token answered %v, want it refused naming create_agent", m)
	}
	startOf := func(c *wsClient, agentID, conv string) map[string]any {
		return c.request(map[string]any{"type": "runtime_start", "agent_id": agentID, "conversation_id": conv}, "runtime_start_response")
	}
	notMine, unknown := startOf(a, other, "conv-x"), startOf(a, "agt_unknown", "conv-x")
	if notMine["success"] != false || unknown["success"] != false ||
		strings.ReplaceAll(notMine["error"].(string), other, "ID") != strings.ReplaceAll(unknown["error"].(string), "agt_unknown", "ID") {
		t.Errorf("another agent answered %v, an unknown one %v: want the same refusal", notMine, unknown)
	}

	rtA := a.start(greeter)
	a.ask(rtA, "Hi, I am Alice")
	s, _, err := dialWS(t, srv, secret, "")
	if err != nil {
		t.Fatal(err)
	}
	rtS := s.start(greeter)
	s.ask(rtS, "Hi from the account")
	b := dialToken(t, srv, bob)
	rtB := b.start(greeter)
	b.ask(rtB, "Hi, I am Bob")
	convA, convS, convB := rtA["conversation_id"].(string), rtS["conversation_id"].(string), rtB["conversation_id"].(string)

	for _, conv := range []string{convB, convS, "conv_unknown"} {
		want := "conversation " + conv + " not found"
		if m := startOf(a, greeter, conv); m["success"] != false || m["error"] != want {
			t.Errorf("runtime_start of %s with Alice's token answered %v, want %q", conv, m, want)
		}
		if m := a.request(map[string]any{"type": "sync", "runtime": map[string]any{"agent_id": greeter, "conversation_id": conv}}, "sync_response"); m["success"] != false || m["error"] != want {
			t.Errorf("sync of %s with Alice's token answered %v, want %q", conv, m, want)
		}
	}
	if m := startOf(a, greeter, convA); m["success"] != true {
		t.Errorf("runtime_start of Alice's own conversation answered %v", m)
	}

	list := map[string]any{"type": "conversation_list"}
	if ids, byID := listed(t, a.request(list, "conversation_list_response")); !slices.Equal(ids, []string{convA}) ||
		byID[convA]["agent_id"] != greeter || byID[convA]["summary"] != "Hi, I am Alice" || byID[convA]["created_by_id"] != "alice" {
		t.Errorf("Alice's conversation_list: %v, want her conversation alone, titled by her message", byID)
	}
	if ids, _ := listed(t, b.request(list, "conversation_list_response")); !slices.Equal(ids, []string{convB}) {
		t.Errorf("Bob's conversation_list: %v, want [%s]", ids, convB)
	}
	ids, byID := listed(t, s.request(map[string]any{"type": "conversation_list", "query": map[string]any{"agent_id": greeter}}, "conversation_list_response"))
	if !slices.Equal(ids, []string{convB, convS, convA}) || byID[convB]["created_by_id"] != "bob" || byID[convS]["created_by_id"] != nil {
		t.Errorf("the secret's conversation_list: %v, want Bob's, the account's and Alice's, newest first, each with its end user", byID)
	}
	page := s.request(map[string]any{"type": "conversation_list", "query": map[string]any{"agent_id": greeter, "limit": 1, "after": convB}}, "conversation_list_response")
	if ids, _ := listed(t, page); !slices.Equal(ids, []string{convS}) {
		t.Errorf("the page after %s: %v, want [%s]", convB, ids, convS)
	}
	for what, query := range map[string]map[string]any{
		"another agent":                   {"agent_id": other},
		"another's conversation":          {"after": convB},
		"an order it cannot list":         {"order": "asc"},
		"a key the harness does not take": {"summary_search": "Bob"},
	} {
		if m := a.request(map[string]any{"type": "conversation_list", "query": query}, "conversation_list_response"); m["success"] != false || len(m["conversations"].([]any)) != 0 {
			t.Errorf("Alice's conversation_list of %s answered %v, want it refused", what, m)
		}
	}
}

// A token's socket is closed when the token expires, by the runner's timer, with an error
// frame saying why, though it sends nothing.
func TestWebSocketTokenExpiry(t *testing.T) {
	srv := runner(t, faketavily.New(nil))
	_, secret := createAccount(t, srv, "wsexpiry")
	greeter := createAgent(t, srv, secret, greeterAgent)
	tok, exp := mintToken(t, srv, secret, "carol", nil, 3)
	c := dialToken(t, srv, tok)
	c.start(greeter)
	frames := c.awaitClosed(time.Until(exp) + 5*time.Second)
	if time.Now().Before(exp) {
		t.Errorf("the socket closed before its token expired at %s", exp)
	}
	if len(frames) == 0 || !strings.Contains(fmt.Sprint(frames[len(frames)-1]["error"]), "token expired") {
		t.Errorf("the socket got %v before it closed, want an error saying its token expired last", frames)
	}
}
