package accounts_test

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
	f := newFixture(t, testAdminSecret, false)
	acc := f.createAccount(t, "ids")
	f.createAgent(t, acc.Secret, withID("helper", helperConfig))

	for name, id := range testenv.BadIDs {
		if strings.Contains(id, "/") {
			continue // a path segment cannot hold it: the router answers 404 for another route
		}
		b, _ := json.Marshal(id)
		q := string(b)
		seg := url.PathEscape(id)
		t.Run(name, func(t *testing.T) {
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
		})
	}
	all := decodeJSON[struct{ Agents []agentView }](t, f.must(t, http.StatusOK, "GET", "/accounts/me/agents", acc.Secret, ""))
	if len(all.Agents) != 1 || all.Agents[0].Version != 1 {
		t.Errorf("refused requests changed the agents: %+v", all.Agents)
	}
}

// The longest agent id the grammar allows is stored and read back unchanged.
func TestLongestAgentIDRoundTrips(t *testing.T) {
	f := newFixture(t, testAdminSecret, false)
	acc := f.createAccount(t, "ids")
	id := strings.Repeat("a", 120) + "-_.:Z019"
	if got := f.createAgent(t, acc.Secret, withID(id, helperConfig)); got.AgentID != id {
		t.Errorf("created agentId %q, want %q", got.AgentID, id)
	}
	if got := decodeJSON[agentView](t, f.must(t, http.StatusOK, "GET", "/accounts/me/agents/"+id, acc.Secret, "")); got.AgentID != id {
		t.Errorf("GET agentId %q, want %q", got.AgentID, id)
	}
}
