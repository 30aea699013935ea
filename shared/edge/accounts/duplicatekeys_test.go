package accounts_test

import (
	"net/http"
	"testing"

	"github.com/agentharness/harness/infra/testenv"
)

// A body that names a key twice is refused with 400 naming the key's path, on every route
// that reads JSON, and nothing is written: encoding/json would keep the last value.
func TestDuplicateKeysAreRefused(t *testing.T) {
	f := newFixture(t, testAdminSecret, false)
	acc := f.createAccount(t, "dup")
	f.createAgent(t, acc.Secret, withID("helper", helperConfig))

	tests := []struct {
		name, method, path, secret, body, field string
	}{
		{"new account", "POST", "/accounts", testAdminSecret, `{"username":"a","username":"b"}`, "username"},
		{"rename", "PATCH", "/accounts/me", acc.Secret, `{"username":"a","username":"b"}`, "username"},
		{"new agent", "POST", "/accounts/me/agents", acc.Secret,
			`{"agentId":"twice","model":` + scriptedHi + `,"tools":{"current_time":{"enabled":true,"enabled":false}}}`, "tools.current_time.enabled"},
		{"admin rename", "PATCH", "/accounts/" + acc.AccountID, testAdminSecret, `{"username":"a","username":"b"}`, "username"},
		{"agent patched twice", "PATCH", "/accounts/me/agents/helper", acc.Secret, `{"system":"a","system":"b"}`, "system"},
		{"agent patched", "PATCH", "/accounts/me/agents/helper", acc.Secret,
			`{"tools":{"current_time":null,"current_time":{}}}`, "tools.current_time"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := f.do(t, tt.method, tt.path, tt.secret, tt.body)
			testenv.WantFieldError(t, status, body, tt.field)
		})
	}
	if status, _ := f.do(t, "GET", "/accounts/me/agents/twice", acc.Secret, ""); status != http.StatusNotFound {
		t.Errorf("the refused agent was stored: GET answered %d", status)
	}
	view := decodeJSON[agentView](t, f.must(t, http.StatusOK, "GET", "/accounts/me/agents/helper", acc.Secret, ""))
	if view.Version != 1 || view.Config["system"] != "You help." {
		t.Errorf("the refused writes changed the agent: version %d, system %v", view.Version, view.Config["system"])
	}
	me := decodeJSON[accountBody](t, f.must(t, http.StatusOK, "GET", "/accounts/me", acc.Secret, ""))
	if me.Username != "dup" {
		t.Errorf("the refused rename changed the username to %q", me.Username)
	}
}
