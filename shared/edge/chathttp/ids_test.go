package chathttp_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/edge/chathttp"
)

// Every id a route reads is checked at the edge: a malformed one gets 400 naming its field,
// never a DynamoDB validation error (500), and nothing is written.
func TestMalformedIDsAreRefused(t *testing.T) {
	f := newFixtureWith(t, fixtureOptions{maxBodyBytes: chathttp.DefaultMaxBodyBytes})
	f.agent(t, f.acc.ID, "helper", helperConfig)

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
				status, _, body := f.turn(t, f.secret, tt.body)
				testenv.WantFieldError(t, status, body, tt.field)
			})
		}
		if strings.Contains(id, "/") {
			continue // a path segment cannot hold it: the router answers 404 for another route
		}
		t.Run(name+" in /status", func(t *testing.T) {
			status, body := f.call(t, "GET", "/status/"+url.PathEscape(id), f.secret, "")
			testenv.WantFieldError(t, status, body, "eventId")
		})
	}
	if items := testenv.ConversationItems(t, f.db, f.tables.Conversations, f.acc.ID); len(items) != 0 {
		t.Errorf("refused requests wrote conversation items %v", items)
	}
	if keys := testenv.EventKeys(t, f.db, f.tables.Events, f.acc.ID); len(keys) != 0 {
		t.Errorf("refused requests wrote events %v", keys)
	}
}

// The longest id the grammar allows works end to end and comes back unchanged in
// X-Conversation-Id.
func TestLongestIDRoundTrips(t *testing.T) {
	f := newFixture(t, nil)
	id := strings.Repeat("a", 120) + "-_.:Z019"
	f.agent(t, f.acc.ID, id, helperConfig)
	status, body := f.call(t, "POST", "/", f.secret, `{"agentId":"`+id+`","id":"`+id+`","eventId":"`+id+`","message":"hi"}`)
	if status != http.StatusOK {
		t.Fatalf("turn with %d-character ids = %d %s", len(id), status, body)
	}
	res := f.post(t, f.secret, `{"agentId":"`+id+`","id":"`+id+`","message":"again"}`)
	res.Body.Close()
	if got := res.Header.Get("X-Conversation-Id"); got != id {
		t.Errorf("X-Conversation-Id = %q, want %q", got, id)
	}
	if status, body := f.call(t, "GET", "/status/"+id, f.secret, ""); status != http.StatusOK {
		t.Errorf("GET /status of a %d-character event id = %d %s", len(id), status, body)
	}
}
