package accounts_test

import (
	"net/http"
	"testing"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/google/go-cmp/cmp"
)

// A needsApproval rule whose schema refers outside itself is refused, naming the field down to
// the reference, before anything is stored, and what it points at is never read: the loopback
// listener it names takes no connection. So is one that refers back to itself for the same
// value.
func TestAgentApprovalRuleRemoteRefsAreRefused(t *testing.T) {
	addr, accepted := testenv.Listener(t)
	f := newFixture(t, testAdminSecret, false)
	acc := f.createAccount(t, "ada")
	f.createAgent(t, acc.Secret, withID("steady", helperConfig))
	before := f.must(t, http.StatusOK, "GET", "/accounts/me/agents/steady", acc.Secret, "")
	const rule = "tools.test_async.needsApproval.rules.0.if."
	tests := []struct{ name, schema, field string }{
		{"loopback listener", `{"$ref":"http://` + addr + `/x"}`, rule + "$ref"},
		{"file", `{"$ref":"file:///etc/passwd"}`, rule + "$ref"},
		{"nested in properties", `{"type":"object","properties":{"a":{"$ref":"http://` + addr + `/x"}}}`, rule + "properties.a.$ref"},
		// Compiled, it would recurse until the stack overflows and take the server down.
		{"back to itself", `{"allOf":[{"$ref":"#"}]}`, rule + "allOf[0].$ref"},
	}
	for _, tt := range tests {
		tools := `{"test_async":{"needsApproval":{"rules":[{"if":` + tt.schema + `,"then":"approved"}]}}}`
		t.Run(tt.name+"/POST", func(t *testing.T) {
			status, body := f.do(t, "POST", "/accounts/me/agents", acc.Secret, `{"name":"a","model":`+scriptedHi+`,"tools":`+tools+`}`)
			testenv.WantFieldError(t, status, body, tt.field)
		})
		t.Run(tt.name+"/PATCH", func(t *testing.T) {
			status, body := f.do(t, "PATCH", "/accounts/me/agents/steady", acc.Secret, `{"tools":`+tools+`}`)
			testenv.WantFieldError(t, status, body, tt.field)
			after := f.must(t, http.StatusOK, "GET", "/accounts/me/agents/steady", acc.Secret, "")
			if diff := cmp.Diff(string(before), string(after)); diff != "" {
				t.Errorf("a refused PATCH changed the agent (-before +after):\n%s", diff)
			}
		})
	}
	list := decodeJSON[struct{ Agents []agentView }](t, f.must(t, http.StatusOK, "GET", "/accounts/me/agents", acc.Secret, ""))
	if len(list.Agents) != 1 {
		t.Errorf("refused configs left %d agents, want only steady", len(list.Agents))
	}
	if n := accepted(); n != 0 {
		t.Errorf("the listener named by a $ref took %d connections, want 0", n)
	}
}
