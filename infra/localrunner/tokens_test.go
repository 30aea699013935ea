package localrunner_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/faketavily"
	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/wire/usertoken"
)

// mintWith mints an end-user token for the request body, with the account secret, as an
// application's backend does.
func mintWith(t *testing.T, srv *httptest.Server, secret, body string) string {
	t.Helper()
	res := call(t, srv, http.MethodPost, "/accounts/me/tokens", secret, body)
	if res.status != http.StatusCreated {
		t.Fatalf("POST /accounts/me/tokens %s = %d %s, want 201", body, res.status, res.body)
	}
	m := res.json(t)
	tok, _ := m["token"].(string)
	exp, err := time.Parse(time.RFC3339, fmt.Sprint(m["expiresAt"]))
	if tok == "" || err != nil || time.Until(exp) <= 0 {
		t.Fatalf("POST /accounts/me/tokens answered %s, want a token and its expiresAt", res.body)
	}
	return tok
}

// chat runs a turn with credential and returns its stream's chunks.
func chat(t *testing.T, srv *httptest.Server, credential, body string) []map[string]any {
	t.Helper()
	res := call(t, srv, http.MethodPost, "/chat", credential, body)
	if res.status != http.StatusOK {
		t.Fatalf("POST /chat %s = %d %s, want 200", body, res.status, res.body)
	}
	return testenv.Chunks(t, bytes.NewReader(res.body))
}

const tokenGreeter = `{"name":"greeter","description":"Says hello.","model":{"provider":"scripted","script":[{"text":"Hello, how can I help?"}]}}`

// An application's users reach the account's agents with end-user tokens its backend mints:
// each sees only their own conversations (another's is the same 404 as an unknown one, on
// every route), only the agents of their token, and nothing of the account; the account secret
// sees everything, end users shown.
func TestEndUserTokens(t *testing.T) {
	srv := runner(t, faketavily.New(nil))
	_, secret := createAccount(t, srv, "app")
	greeterID := createAgent(t, srv, secret, tokenGreeter)
	otherID := createAgent(t, srv, secret, `{"name":"other","model":{"provider":"scripted","script":[{"text":"Other."}]}}`)

	for body, field := range map[string]string{
		`{}`:                                     "endUser",
		`{"endUser":"alice","ttlSeconds":0}`:     "ttlSeconds",
		`{"endUser":"alice","ttlSeconds":86401}`: "ttlSeconds",
		`{"endUser":"alice","agents":["nope"]}`:  "agents[0]",
		`{"endUser":"a\nb"}`:                     "endUser",
		`{"endUser":"alice","extra":1}`:          "extra",
	} {
		res := call(t, srv, http.MethodPost, "/accounts/me/tokens", secret, body)
		if res.status != http.StatusBadRequest || res.json(t)["field"] != field {
			t.Errorf("POST /accounts/me/tokens %s = %d %s, want 400 naming %s", body, res.status, res.body, field)
		}
	}
	alice := mintWith(t, srv, secret, `{"endUser":"alice","agents":["`+greeterID+`"],"ttlSeconds":600}`)
	bob := mintWith(t, srv, secret, `{"endUser":"bob"}`)

	// A token opens nothing of the account's own routes, nor /mcp.
	for _, r := range [][2]string{{"GET", "/accounts/me"}, {"POST", "/accounts/me/tokens"}, {"GET", "/accounts/me/agents"}, {"POST", "/accounts/me/rotate-secret"}, {"POST", "/mcp"}, {"GET", "/accounts"}, {"PATCH", "/accounts/me"}, {"PUT", "/accounts/me/token-issuer"}} {
		if res := call(t, srv, r[0], r[1], alice, `{"endUser":"mallory"}`); res.status != http.StatusUnauthorized {
			t.Errorf("%s %s with a token = %d %s, want 401", r[0], r[1], res.status, res.body)
		}
	}

	chunks := chat(t, srv, alice, `{"agentId":"`+greeterID+`","id":"conv-alice","eventId":"evt-alice","message":"Hi there, I need help with my order"}`)
	if last := chunks[len(chunks)-1]; last["type"] != "finish" {
		t.Fatalf("alice's turn ended with %v", last)
	}
	// Its replay announces the message its stream did, which the conversation read back names.
	replay := testenv.Chunks(t, bytes.NewReader(call(t, srv, http.MethodGet, "/chat/conv-alice/stream", alice, "").body))
	if len(replay) == 0 || replay[0]["type"] != "start" || replay[0]["messageId"] != chunks[0]["messageId"] {
		t.Errorf("the replay starts %v, the turn's stream %v: want the same message", replay, chunks[0])
	}

	// Alice sees her conversation, titled by her first message; Bob sees none.
	list := call(t, srv, http.MethodGet, "/conversations", alice, "")
	var got struct {
		Conversations []map[string]any `json:"conversations"`
		NextCursor    string           `json:"nextCursor"`
	}
	if err := json.Unmarshal(list.body, &got); err != nil || list.status != http.StatusOK || len(got.Conversations) != 1 {
		t.Fatalf("GET /conversations for alice = %d %s, want her one conversation", list.status, list.body)
	}
	c := got.Conversations[0]
	if c["id"] != "conv-alice" || c["agentId"] != greeterID || c["endUser"] != "alice" || c["title"] != "Hi there, I need help with my order" ||
		c["lastMessagePreview"] != "Hello, how can I help?" || c["createdAt"] == nil || c["updatedAt"] == nil {
		t.Errorf("alice's conversation is listed as %v", c)
	}
	if res := call(t, srv, http.MethodGet, "/conversations", bob, ""); res.status != http.StatusOK || !strings.Contains(string(res.body), `"conversations":[]`) {
		t.Errorf("GET /conversations for bob = %d %s, want none", res.status, res.body)
	}

	// Bob gets the 404 of an unknown conversation on every route of Alice's, and changes nothing.
	for _, r := range [][3]string{
		{"GET", "/conversations/conv-alice/messages", ""},
		{"GET", "/chat/conv-alice/stream", ""},
		{"POST", "/chat/conv-alice/stop", ""},
		{"GET", "/chat/conv-alice/subagents", ""},
		{"GET", "/status/evt-alice", ""},
		{"PATCH", "/conversations/conv-alice", `{"title":"mine now"}`},
		{"POST", "/chat", `{"agentId":"` + greeterID + `","id":"conv-alice","message":"let me in"}`},
		{"POST", "/async", `{"agentId":"` + greeterID + `","id":"conv-alice","message":"let me in"}`},
	} {
		res := call(t, srv, r[0], r[1], bob, r[2])
		if res.status != http.StatusNotFound {
			t.Errorf("bob: %s %s = %d %s, want 404", r[0], r[1], res.status, res.body)
		}
		if r[0] != "GET" {
			continue // on an unknown conversation, a POST starts it
		}
		unknown := call(t, srv, r[0], strings.NewReplacer("conv-alice", "conv-nobody", "evt-alice", "evt-nobody").Replace(r[1]), bob, "")
		if unknown.status != res.status || strings.NewReplacer("conv-nobody", "conv-alice", "evt-nobody", "evt-alice").Replace(string(unknown.body)) != string(res.body) {
			t.Errorf("bob: %s %s = %d %s, but an unknown one = %d %s: they must not differ", r[0], r[1], res.status, res.body, unknown.status, unknown.body)
		}
	}
	// ...while Alice reads them all, and the secret too.
	for _, cred := range []string{alice, secret} {
		for _, path := range []string{"/conversations/conv-alice/messages", "/status/evt-alice", "/chat/conv-alice/stream"} {
			if res := call(t, srv, http.MethodGet, path, cred, ""); res.status != http.StatusOK {
				t.Errorf("GET %s = %d %s, want 200", path, res.status, res.body)
			}
		}
	}
	msgs := call(t, srv, http.MethodGet, "/conversations/conv-alice/messages", alice, "")
	if !strings.Contains(string(msgs.body), "Hi there, I need help with my order") || !strings.Contains(string(msgs.body), "Hello, how can I help?") {
		t.Errorf("alice's messages: %s", msgs.body)
	}
	all := call(t, srv, http.MethodGet, "/conversations", secret, "")
	if !strings.Contains(string(all.body), `"endUser":"alice"`) {
		t.Errorf("the secret's list %s, want alice's conversation with her shown", all.body)
	}

	// A token's agents: another agent is not found; the list shows only its own, name and
	// description alone.
	for _, path := range []string{"/chat", "/async"} {
		res := call(t, srv, http.MethodPost, path, alice, `{"agentId":"`+otherID+`","message":"hi"}`)
		if res.status != http.StatusNotFound || !strings.Contains(string(res.body), "agent "+otherID+" not found") {
			t.Errorf("alice on agent %s via %s = %d %s, want 404 like an unknown agent", otherID, path, res.status, res.body)
		}
	}
	agents := call(t, srv, http.MethodGet, "/agents", alice, "")
	if want := `{"agents":[{"agentId":"` + greeterID + `","name":"greeter","description":"Says hello."}]}`; strings.TrimSpace(string(agents.body)) != want {
		t.Errorf("GET /agents for alice = %s, want %s", agents.body, want)
	}
	if res := call(t, srv, http.MethodGet, "/agents", bob, ""); !strings.Contains(string(res.body), otherID) || !strings.Contains(string(res.body), greeterID) {
		t.Errorf("GET /agents for bob's token of every agent = %s", res.body)
	}

	// A token reads the model catalogue as the secret does: it shows where keys are, not keys.
	for _, cred := range []string{alice, secret} {
		res := call(t, srv, http.MethodGet, "/models", cred, "")
		if res.status != http.StatusOK || !strings.Contains(string(res.body), `"provider":"scripted","available":true,"keySource":"builtin"`) {
			t.Errorf("GET /models = %d %s, want the catalogue with scripted reachable", res.status, res.body)
		}
	}

	// A token may not lift the owner's approval rules.
	res := call(t, srv, http.MethodPost, "/chat", alice, `{"agentId":"`+greeterID+`","message":"hi","toolApproval":{"current_time":"approved"}}`)
	if res.status != http.StatusForbidden || res.json(t)["field"] != "toolApproval" {
		t.Errorf("toolApproval with a token = %d %s, want 403 naming the field", res.status, res.body)
	}

	// Renamed, newest first, paged.
	if res := call(t, srv, http.MethodPatch, "/conversations/conv-alice", alice, `{"title":"Order help"}`); res.status != http.StatusOK || res.json(t)["title"] != "Order help" {
		t.Errorf("PATCH title = %d %s", res.status, res.body)
	}
	for _, body := range []string{`{}`, `{"title":""}`, `{"title":"a\nb"}`, `{"title":5}`, `{"name":"x"}`} {
		if res := call(t, srv, http.MethodPatch, "/conversations/conv-alice", alice, body); res.status != http.StatusBadRequest {
			t.Errorf("PATCH %s = %d %s, want 400", body, res.status, res.body)
		}
	}
	chat(t, srv, alice, `{"agentId":"`+greeterID+`","id":"conv-alice-2","message":"second"}`)
	chat(t, srv, alice, `{"agentId":"`+greeterID+`","id":"conv-alice-3","message":"third"}`)
	var seen []string
	cursor := ""
	for range 5 {
		res := call(t, srv, http.MethodGet, "/conversations?limit=2&cursor="+cursor, alice, "")
		got.NextCursor = ""
		if err := json.Unmarshal(res.body, &got); err != nil || res.status != http.StatusOK {
			t.Fatalf("GET /conversations page = %d %s", res.status, res.body)
		}
		for _, c := range got.Conversations {
			seen = append(seen, c["id"].(string))
		}
		if cursor = got.NextCursor; cursor == "" {
			break
		}
	}
	if want := []string{"conv-alice-3", "conv-alice-2", "conv-alice"}; fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("alice's conversations page by page: %v, want newest first %v", seen, want)
	}
	for _, q := range []string{"limit=0", "limit=101", "cursor=bm9wZQ", "agentId=a%20b", "endUser=bob"} {
		if res := call(t, srv, http.MethodGet, "/conversations?"+q, alice, ""); res.status != http.StatusBadRequest && res.status != http.StatusForbidden {
			t.Errorf("GET /conversations?%s = %d %s, want a refusal", q, res.status, res.body)
		}
	}
	if res := call(t, srv, http.MethodGet, "/conversations?endUser=bob", secret, ""); res.status != http.StatusOK || !strings.Contains(string(res.body), `"conversations":[]`) {
		t.Errorf("the secret's list of bob's = %d %s, want none", res.status, res.body)
	}

	// An /async turn of a token's is its end user's too.
	queued := call(t, srv, http.MethodPost, "/async", alice, `{"agentId":"`+greeterID+`","id":"conv-alice-async","eventId":"evt-alice-async","message":"async please"}`)
	if queued.status != http.StatusAccepted {
		t.Fatalf("POST /async with a token = %d %s", queued.status, queued.body)
	}
	if res := call(t, srv, http.MethodGet, "/status/evt-alice-async", bob, ""); res.status != http.StatusNotFound {
		t.Errorf("bob reads alice's queued turn: %d %s", res.status, res.body)
	}
	waitStatus(t, srv, alice, "evt-alice-async", "completed")
	if res := call(t, srv, http.MethodGet, "/conversations/conv-alice-async/messages", bob, ""); res.status != http.StatusNotFound {
		t.Errorf("bob reads alice's async conversation: %d %s", res.status, res.body)
	}

	// Rotating the secret revokes every token the harness minted.
	rot := call(t, srv, http.MethodPost, "/accounts/me/rotate-secret", secret, "")
	if rot.status != http.StatusOK {
		t.Fatalf("rotate = %d %s", rot.status, rot.body)
	}
	if res := call(t, srv, http.MethodGet, "/conversations", alice, ""); res.status != http.StatusUnauthorized || res.json(t)["reason"] != "invalid" {
		t.Errorf("a token minted before the rotation = %d %s, want 401", res.status, res.body)
	}
}

// waitStatus polls /status until the event reaches want.
func waitStatus(t *testing.T, srv *httptest.Server, credential, eventID, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		res := call(t, srv, http.MethodGet, "/status/"+eventID, credential, "")
		if res.status == http.StatusOK && res.json(t)["status"] == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("event %s: %d %s, want status %s", eventID, res.status, res.body, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ownKey is a key pair an account's backend mints its own tokens with.
type ownKey struct {
	kid  string
	priv ed25519.PrivateKey
}

func newOwnKey(t *testing.T, kid string) ownKey {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return ownKey{kid, priv}
}

func (k ownKey) jwks() string {
	x := base64.RawURLEncoding.EncodeToString(k.priv.Public().(ed25519.PublicKey))
	return fmt.Sprintf(`{"keys":[{"kty":"OKP","crv":"Ed25519","kid":%q,"x":%q}]}`, k.kid, x)
}

func (k ownKey) mint(t *testing.T, accountID, endUser string, iat time.Time, ttl time.Duration) string {
	t.Helper()
	tok, err := usertoken.Mint(usertoken.Claims{Account: accountID, EndUser: endUser, Audience: usertoken.Audience, IssuedAt: iat.Unix(), Expires: iat.Add(ttl).Unix()}, k.kid, k.priv)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// An account may mint tokens in its own backend, with no call to the harness: it registers
// the public key (inline, or as a JWKS URL the harness fetches); a token of a key it removes
// stops working, and so does an expired one, saying so.
func TestSelfSignedTokens(t *testing.T) {
	key, urlKey := newOwnKey(t, "backend-1"), newOwnKey(t, "backend-url")
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(urlKey.jwks()))
	}))
	defer jwks.Close()
	// JWKS URLs are fetched through the egress guard; this one is on loopback, which the
	// operator's switch allows (as for MCP servers).
	srv := serve(t, testenv.Stack(t), map[string]string{"MCP_PRIVATE_ENDPOINTS": "allow"})
	accountID, secret := createAccount(t, srv, "selfsigned")
	agentID := createAgent(t, srv, secret, tokenGreeter)
	turn := `{"agentId":"` + agentID + `","message":"hi"}`
	now := time.Now()

	if res := call(t, srv, http.MethodPost, "/chat", key.mint(t, accountID, "carol", now, time.Hour), turn); res.status != http.StatusUnauthorized {
		t.Errorf("a token of an unregistered key = %d %s, want 401", res.status, res.body)
	}
	for body, field := range map[string]string{
		`{}`:                                "jwks",
		`{"jwks":{"keys":[]}}`:              "jwks",
		`{"jwksUrl":"ftp://example.com/k"}`: "jwksUrl",
		`{"jwks":` + key.jwks() + `,"jwksUrl":"https://example.com"}`: "jwks",
	} {
		if res := call(t, srv, http.MethodPut, "/accounts/me/token-issuer", secret, body); res.status != http.StatusBadRequest || res.json(t)["field"] != field {
			t.Errorf("PUT token-issuer %s = %d %s, want 400 naming %s", body, res.status, res.body, field)
		}
	}
	if res := call(t, srv, http.MethodPut, "/accounts/me/token-issuer", secret, `{"jwks":`+key.jwks()+`}`); res.status != http.StatusOK {
		t.Fatalf("PUT token-issuer = %d %s", res.status, res.body)
	}
	carol := key.mint(t, accountID, "carol", now, time.Hour)
	chat(t, srv, carol, turn)
	if res := call(t, srv, http.MethodGet, "/conversations", carol, ""); !strings.Contains(string(res.body), `"endUser":"carol"`) {
		t.Errorf("carol's list: %d %s", res.status, res.body)
	}
	expired := key.mint(t, accountID, "carol", now.Add(-2*time.Hour), time.Hour)
	if res := call(t, srv, http.MethodPost, "/chat", expired, turn); res.status != http.StatusUnauthorized || res.json(t)["reason"] != "expired" || !strings.Contains(string(res.body), "expired") {
		t.Errorf("an expired token = %d %s, want 401 saying it expired", res.status, res.body)
	}
	if res := call(t, srv, http.MethodGet, "/conversations", key.mint(t, "acc_someoneelse", "carol", now, time.Hour), ""); res.status != http.StatusUnauthorized {
		t.Errorf("a token naming another account, signed by this one's key = %d %s, want 401", res.status, res.body)
	}

	// Replaced by a JWKS URL: the inline key's tokens stop working at once.
	if res := call(t, srv, http.MethodPut, "/accounts/me/token-issuer", secret, `{"jwksUrl":"`+jwks.URL+`"}`); res.status != http.StatusOK {
		t.Fatalf("PUT token-issuer URL = %d %s", res.status, res.body)
	}
	if res := call(t, srv, http.MethodGet, "/conversations", carol, ""); res.status != http.StatusUnauthorized {
		t.Errorf("a token of a replaced key = %d %s, want 401", res.status, res.body)
	}
	dave := urlKey.mint(t, accountID, "dave", now, time.Hour)
	chat(t, srv, dave, turn)
	if res := call(t, srv, http.MethodGet, "/accounts/me/token-issuer", secret, ""); res.status != http.StatusOK || res.json(t)["jwksUrl"] != jwks.URL {
		t.Errorf("GET token-issuer = %d %s", res.status, res.body)
	}
	if res := call(t, srv, http.MethodDelete, "/accounts/me/token-issuer", secret, ""); res.status != http.StatusNoContent {
		t.Errorf("DELETE token-issuer = %d %s", res.status, res.body)
	}
	if res := call(t, srv, http.MethodGet, "/accounts/me/token-issuer", secret, ""); res.status != http.StatusNotFound {
		t.Errorf("GET token-issuer after DELETE = %d %s, want 404", res.status, res.body)
	}
	if res := call(t, srv, http.MethodGet, "/conversations", dave, ""); res.status != http.StatusUnauthorized {
		t.Errorf("a token of a removed JWKS URL = %d %s, want 401", res.status, res.body)
	}
}

// Pages of other origins: a preflight is answered for any origin (it carries no credential),
// and the request itself is refused before it does anything unless the account allows its
// origin, which then gets the CORS headers. The browser's side is TestCORSInChromium.
func TestCORS(t *testing.T) {
	srv := runner(t, faketavily.New(nil))
	_, secret := createAccount(t, srv, "cors")
	agentID := createAgent(t, srv, secret, tokenGreeter)
	tok := mintWith(t, srv, secret, `{"endUser":"erin"}`)
	origin := http.Header{"Origin": {"https://app.example.com"}, "Access-Control-Request-Method": {"POST"}, "Access-Control-Request-Headers": {"authorization,content-type"}}

	pre, h := requestWith(t, srv, http.MethodOptions, "/chat", "", origin.Clone(), nil)
	if pre.status != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
		!strings.Contains(h.Get("Access-Control-Allow-Headers"), "Authorization") || !strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") {
		t.Errorf("preflight = %d %v", pre.status, h)
	}
	get := http.Header{"Origin": {"https://app.example.com"}, "Access-Control-Request-Method": {"GET"}, "Access-Control-Request-Headers": {"authorization"}}
	if pre, h := requestWith(t, srv, http.MethodOptions, "/models", "", get, nil); pre.status != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != "https://app.example.com" {
		t.Errorf("preflight of GET /models = %d %v, want 204 with CORS headers", pre.status, h)
	}
	if pre, _ := requestWith(t, srv, http.MethodOptions, "/mcp", "", origin.Clone(), nil); pre.status == http.StatusNoContent {
		t.Errorf("a preflight of /mcp, which no page calls, = %d", pre.status)
	}
	post := http.Header{"Origin": {"https://app.example.com"}, "Content-Type": {"application/json"}}
	body := []byte(`{"agentId":"` + agentID + `","id":"conv-cors","message":"hi"}`)
	res, h := requestWith(t, srv, http.MethodPost, "/chat", tok, post.Clone(), body)
	if res.status != http.StatusForbidden || h.Get("Access-Control-Allow-Origin") != "" || !strings.Contains(string(res.body), "allowedOrigins") {
		t.Errorf("a request from an origin the account does not allow = %d %s %v, want 403 without CORS headers", res.status, res.body, h)
	}
	if res := call(t, srv, http.MethodGet, "/conversations/conv-cors/messages", tok, ""); res.status != http.StatusNotFound {
		t.Errorf("the refused request started conversation conv-cors: %d %s", res.status, res.body)
	}
	for _, bad := range []string{`["https://app.example.com/"]`, `["app.example.com"]`, `["https://app.example.com/path"]`, `["*"]`} {
		if res := call(t, srv, http.MethodPatch, "/accounts/me", secret, `{"allowedOrigins":`+bad+`}`); res.status != http.StatusBadRequest {
			t.Errorf("allowedOrigins %s = %d %s, want 400", bad, res.status, res.body)
		}
	}
	if res := call(t, srv, http.MethodPatch, "/accounts/me", secret, `{"allowedOrigins":["https://app.example.com"]}`); res.status != http.StatusOK || !strings.Contains(string(res.body), `"allowedOrigins":["https://app.example.com"]`) {
		t.Fatalf("PATCH allowedOrigins = %d %s", res.status, res.body)
	}
	res, h = requestWith(t, srv, http.MethodPost, "/chat", tok, post.Clone(), body)
	if res.status != http.StatusOK || h.Get("Access-Control-Allow-Origin") != "https://app.example.com" || !strings.Contains(h.Get("Access-Control-Expose-Headers"), "X-Conversation-Id") {
		t.Errorf("a request from an allowed origin = %d %v", res.status, h)
	}
	// The harness's own origin (the playground's) needs no listing.
	own := http.Header{"Origin": {srv.URL}}
	if res, _ := requestWith(t, srv, http.MethodGet, "/conversations", tok, own, nil); res.status != http.StatusOK {
		t.Errorf("a request from the harness's own origin = %d %s", res.status, res.body)
	}
}

// corsOutcome is what infra/node/cors-browser.mjs saw from its page.
type corsOutcome struct {
	Origin string `json:"origin"`
	Chat   struct {
		OK             bool   `json:"ok"`
		Status         int    `json:"status"`
		ConversationID string `json:"conversationId"`
		Body           string `json:"body"`
		Error          string `json:"error"`
	} `json:"chat"`
	List struct {
		OK     bool   `json:"ok"`
		Status int    `json:"status"`
		Body   string `json:"body"`
		Error  string `json:"error"`
	} `json:"list"`
}

// TestCORSInChromium has a page of another origin call the harness with an end-user token in
// Chromium: the browser preflights the JSON POST; while the account does not list the page's
// origin the browser lets the page read nothing and the turn never runs; once it does, the
// page chats and lists its conversations.
func TestCORSInChromium(t *testing.T) {
	if os.Getenv("HARNESS_CHROMIUM") == "" {
		t.Fatal("HARNESS_CHROMIUM is not set: run the tests with `make test`, whose stack finds or installs Chromium")
	}
	node, script := testenv.Node(t), filepath.Join(testenv.Root(t), "infra", "node", "cors-browser.mjs")
	srv := runner(t, faketavily.New(nil))
	_, secret := createAccount(t, srv, "browser")
	agentID := createAgent(t, srv, secret, tokenGreeter)
	tok := mintWith(t, srv, secret, `{"endUser":"frank"}`)
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(`<!doctype html><title>an application</title>`))
	}))
	defer page.Close()
	// The page calls the harness through a proxy that counts the preflights its browser sends
	// (a page never sees them).
	target, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var preflights atomic.Int32
	proxy := httputil.NewSingleHostReverseProxy(target)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") == "POST" {
			preflights.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	defer api.Close()
	run := func() corsOutcome {
		t.Helper()
		out, err := exec.CommandContext(t.Context(), node, script, page.URL, api.URL, tok, agentID).Output()
		if err != nil {
			t.Fatalf("cors-browser: %v\n%s", err, out)
		}
		var o corsOutcome
		if err := json.Unmarshal(out, &o); err != nil {
			t.Fatalf("cors-browser printed %s", out)
		}
		return o
	}

	refused := run()
	if preflights.Load() == 0 {
		t.Error("the browser sent no preflight for a JSON POST with Authorization")
	}
	if refused.Chat.OK || refused.List.OK || !strings.Contains(refused.Chat.Error, "Failed to fetch") {
		t.Errorf("a page of an origin the account does not list read %+v, want the browser to refuse it", refused)
	}
	if res := call(t, srv, http.MethodGet, "/conversations/conv-browser/messages", tok, ""); res.status != http.StatusNotFound {
		t.Errorf("the refused page's turn ran: %d %s", res.status, res.body)
	}

	if res := call(t, srv, http.MethodPatch, "/accounts/me", secret, `{"allowedOrigins":["`+refused.Origin+`"]}`); res.status != http.StatusOK {
		t.Fatalf("PATCH allowedOrigins = %d %s", res.status, res.body)
	}
	allowed := run()
	if !allowed.Chat.OK || allowed.Chat.Status != http.StatusOK || allowed.Chat.ConversationID != "conv-browser" || !strings.Contains(allowed.Chat.Body, `"type":"finish"`) {
		t.Errorf("a page of an allowed origin chatting: %+v", allowed.Chat)
	}
	if !allowed.List.OK || !strings.Contains(allowed.List.Body, `"id":"conv-browser"`) {
		t.Errorf("a page of an allowed origin listing: %+v", allowed.List)
	}
}

// GET /models says which providers the caller reaches through the account's own key: one the
// account stored with PUT /accounts/me/providers/{provider}, for its tokens too.
func TestModelsShowTheAccountsOwnKeys(t *testing.T) {
	srv := runner(t, faketavily.New(nil))
	_, secret := createAccount(t, srv, "ownkeys")
	tok := mintWith(t, srv, secret, `{"endUser":"gina"}`)
	own := `{"provider":"anthropic","available":true,"keySource":"account"}`
	if res := call(t, srv, http.MethodGet, "/models", tok, ""); strings.Contains(string(res.body), own) {
		t.Fatalf("GET /models before the account keeps a key: %s", res.body)
	}
	if res := call(t, srv, http.MethodPut, "/accounts/me/providers/anthropic", secret, `{"apiKey":"sk-ant-own"}`); res.status != http.StatusOK {
		t.Fatalf("PUT provider key = %d %s", res.status, res.body)
	}
	for _, cred := range []string{secret, tok} {
		if res := call(t, srv, http.MethodGet, "/models", cred, ""); res.status != http.StatusOK || !strings.Contains(string(res.body), own) || strings.Contains(string(res.body), "sk-ant-own") {
			t.Errorf("GET /models after the account keeps an anthropic key = %d %s", res.status, res.body)
		}
	}
}
