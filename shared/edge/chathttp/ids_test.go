package chathttp_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/agentharness/harness/infra/testenv"
)

// Every id a route reads is checked at the edge: a malformed one gets 400 naming its field,
// never a DynamoDB validation error (500), and nothing is written.
func TestMalformedIDsAreRefused(t *testing.T) {
	f := newManageFixture(t, testAdminSecret, false)
	acc := f.createAccount(t, "ids")
	f.createAgent(t, acc.Secret, withID("helper", helperConfig))

	for name, id := range testenv.BadIDs {
		b, _ := json.Marshal(id)
		q := string(b)
		turns := []struct{ body, field string }{
			{`{"agentId":"helper","id":` + q + `,"message":"hi"}`, "id"},
			{`{"agentId":` + q + `,"id":"c","message":"hi"}`, "agentId"},
			{`{"agentId":"helper","id":"c","eventId":` + q + `,"message":"hi"}`, "eventId"},
			{`{"agentId":"helper","id":"c","messageId":` + q + `,"message":"hi"}`, "messageId"},
			{`{"agentId":"helper","id":"c","messages":[{"id":` + q + `,"role":"user","parts":[{"type":"text","text":"hi"}]}]}`, "messages[0].id"},
			{`{"agentId":"helper","id":"c","approvals":[{"approvalId":` + q + `,"approved":true}]}`, "approvals[0].approvalId"},
			{`{"agentId":"helper","id":"c","messages":[{"id":"a","role":"assistant","parts":[{"type":"tool-x","state":"approval-responded","approval":{"id":` + q + `,"approved":true}}]}]}`,
				"messages[0].parts[0].approval.id"},
		}
		for _, tt := range turns {
			t.Run(name+" in turn "+tt.field, func(t *testing.T) {
				status, _, body := f.turn(t, acc.Secret, tt.body)
				testenv.WantFieldError(t, status, body, tt.field)
			})
		}
		if strings.Contains(id, "/") {
			continue // a path segment cannot hold it: the router answers 404 for another route
		}
		seg := url.PathEscape(id)
		t.Run(name+" in routes", func(t *testing.T) {
			for _, r := range []struct{ method, path, secret, body, field string }{
				{"GET", "/accounts/me/agents/" + seg, acc.Secret, "", "agentId"},
				{"PATCH", "/accounts/me/agents/" + seg, acc.Secret, `{"system":"x"}`, "agentId"},
				{"DELETE", "/accounts/me/agents/" + seg, acc.Secret, "", "agentId"},
				{"POST", "/accounts/me/agents", acc.Secret, `{"agentId":` + q + `,` + strings.TrimPrefix(helperConfig, "{"), "agentId"},
				{"GET", "/accounts/" + seg, testAdminSecret, "", "accountId"},
				{"PATCH", "/accounts/" + seg, testAdminSecret, `{"username":"x"}`, "accountId"},
				{"DELETE", "/accounts/" + seg, testAdminSecret, "", "accountId"},
				{"POST", "/accounts/" + seg + "/rotate-secret", testAdminSecret, "", "accountId"},
			} {
				status, body := f.do(t, r.method, r.path, r.secret, r.body)
				testenv.WantFieldError(t, status, body, r.field)
			}
			status, body := call(t, f.harness, "GET", "/status/"+seg, acc.Secret, "")
			testenv.WantFieldError(t, status, body, "eventId")
		})
	}
	if items := testenv.ConversationItems(t, f.db, f.tables.Conversations, acc.AccountID); len(items) != 0 {
		t.Errorf("refused requests wrote conversation items %v", items)
	}
	if keys := testenv.EventKeys(t, f.db, f.tables.Events, acc.AccountID); len(keys) != 0 {
		t.Errorf("refused requests wrote events %v", keys)
	}
	all := decodeJSON[struct{ Agents []agentView }](t, f.must(t, http.StatusOK, "GET", "/accounts/me/agents", acc.Secret, ""))
	if len(all.Agents) != 1 || all.Agents[0].Version != 1 {
		t.Errorf("refused requests changed the agents: %+v", all.Agents)
	}
}

// The longest id the grammar allows works end to end and comes back unchanged in
// X-Conversation-Id.
func TestLongestIDRoundTrips(t *testing.T) {
	f := newManageFixture(t, testAdminSecret, false)
	acc := f.createAccount(t, "ids")
	id := strings.Repeat("a", 120) + "-_.:Z019"
	f.createAgent(t, acc.Secret, withID(id, helperConfig))
	status, body := call(t, f.harness, "POST", "/", acc.Secret, `{"agentId":"`+id+`","id":"`+id+`","eventId":"`+id+`","message":"hi"}`)
	if status != http.StatusOK {
		t.Fatalf("turn with %d-character ids = %d %s", len(id), status, body)
	}
	req, _ := http.NewRequest("POST", f.harness.URL+"/", strings.NewReader(`{"agentId":"`+id+`","id":"`+id+`","message":"again"}`))
	req.Header.Set("Authorization", "Bearer "+acc.Secret)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got := res.Header.Get("X-Conversation-Id"); got != id {
		t.Errorf("X-Conversation-Id = %q, want %q", got, id)
	}
	if status, body := call(t, f.harness, "GET", "/status/"+id, acc.Secret, ""); status != http.StatusOK {
		t.Errorf("GET /status of a %d-character event id = %d %s", len(id), status, body)
	}
}
