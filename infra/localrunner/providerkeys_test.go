package localrunner_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/agentharness/harness/infra/mockopenai"
	"github.com/agentharness/harness/infra/testenv"
)

// An account's own provider key: stored sealed, answered redacted, used by the account's agents
// whose model block names no key (before the deployment's), never by another account's, and
// gone when deleted, when the deployment's is used again.
func TestAnAccountsProviderKeyIsUsedByItsAgentsOnly(t *testing.T) {
	var mu sync.Mutex
	var auths []string
	mock := mockopenai.New(nil)
	modelSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		mu.Unlock()
		mock.ServeHTTP(w, r)
	}))
	t.Cleanup(modelSrv.Close)
	calledWith := func() []string {
		mu.Lock()
		defer mu.Unlock()
		got := auths
		auths = nil
		return got
	}
	stack := testenv.Stack(t)
	srv := serve(t, stack, map[string]string{"OPENAI_BASE_URL": modelSrv.URL + "/v1", "OPENAI_API_KEY": "sk-operator"})
	_, ada := createAccount(t, srv, "keys-ada")
	_, bob := createAccount(t, srv, "keys-bob")
	const adaKey = "sk-ada-own-1234567890"
	block := `{"provider": "openai", "model": "mock", "baseURL": "` + modelSrv.URL + `/v1"}`
	adaAgent := createAgent(t, srv, ada, `{"name": "ada's", "model": `+block+`}`)
	bobAgent := createAgent(t, srv, bob, `{"name": "bob's", "model": `+block+`}`)
	turn := func(secret, agentID, conversation string) {
		t.Helper()
		res := call(t, srv, http.MethodPost, "/", secret, `{"agentId":"`+agentID+`","id":"`+conversation+`","message":"hello"}`)
		if res.status != http.StatusOK || !strings.Contains(string(res.body), `"finishReason":"stop"`) {
			t.Fatalf("turn of %s = %d %s, want the model's answer", agentID, res.status, res.body)
		}
	}

	for _, tt := range []struct{ method, path, body, want string }{
		{http.MethodPut, "/accounts/me/providers/bedrock", `{"apiKey":"x"}`, "IAM role"},
		{http.MethodPut, "/accounts/me/providers/mistral", `{"apiKey":"x"}`, "anthropic, google, openai"},
		{http.MethodPut, "/accounts/me/providers/openai", `{}`, "apiKey"},
		{http.MethodPut, "/accounts/me/providers/openai", `{"apiKey":"x","baseURL":"ftp://x"}`, "baseURL"},
		{http.MethodPut, "/accounts/me/providers/openai", `{"apiKey":"x","org":"y"}`, "org"},
	} {
		if res := call(t, srv, tt.method, tt.path, ada, tt.body); res.status != http.StatusBadRequest || !strings.Contains(string(res.body), tt.want) {
			t.Errorf("%s %s %s = %d %s, want 400 naming %q", tt.method, tt.path, tt.body, res.status, res.body, tt.want)
		}
	}
	res := call(t, srv, http.MethodPut, "/accounts/me/providers/openai", ada, `{"apiKey":"`+adaKey+`"}`)
	if m := res.json(t); res.status != http.StatusOK || m["provider"] != "openai" || m["apiKey"] != "[redacted]" || m["updatedAt"] == nil {
		t.Fatalf("PUT = %d %s, want 200 with the key redacted", res.status, res.body)
	}
	if res := call(t, srv, http.MethodGet, "/accounts/me/providers", ada, ""); res.status != http.StatusOK || !strings.Contains(string(res.body), `"provider":"openai","apiKey":"[redacted]"`) {
		t.Errorf("GET list = %d %s, want openai, redacted", res.status, res.body)
	}
	if res := call(t, srv, http.MethodGet, "/accounts/me/providers/openai", ada, ""); res.status != http.StatusOK || !strings.Contains(string(res.body), `"apiKey":"[redacted]"`) {
		t.Errorf("GET openai = %d %s, want it redacted", res.status, res.body)
	}
	if res := call(t, srv, http.MethodGet, "/accounts/me/providers", bob, ""); res.status != http.StatusOK || string(res.body) != `{"providers":[]}`+"\n" && string(res.body) != `{"providers":[]}` {
		t.Errorf("bob's list = %d %q, want none", res.status, res.body)
	}
	if res := call(t, srv, http.MethodGet, "/accounts/me/providers/openai", bob, ""); res.status != http.StatusNotFound {
		t.Errorf("bob's openai key = %d %s, want 404", res.status, res.body)
	}

	turn(ada, adaAgent, "keys-ada-1")
	turn(bob, bobAgent, "keys-bob-1")
	if got, want := calledWith(), []string{"Bearer " + adaKey, "Bearer sk-operator"}; !slices.Equal(got, want) {
		t.Errorf("the model was called with %q, want ada's key for ada's agent and the deployment's for bob's", got)
	}

	// A prompt tool's own model block without a key takes the account's key too.
	prompter := createAgent(t, srv, ada, `{"name": "prompter", "model": `+block+`, "prompts": {"ask": {"system": "Answer.",
		"inputSchema": {"type": "object", "properties": {}}, "model": `+block+`}}}`)
	turn(ada, prompter, "keys-ada-prompt")
	if got := calledWith(); len(got) != 3 || slices.ContainsFunc(got, func(a string) bool { return a != "Bearer "+adaKey }) {
		t.Errorf("the agent and its prompt called the model with %q, want ada's key thrice (the call, the prompt's loop, the answer)", got)
	}

	// The key is kept sealed: no item of the accounts table holds it.
	table := stack.Name("AccountsTable")
	out, err := stack.DB.Scan(context.Background(), &dynamodb.ScanInput{TableName: &table})
	if err != nil {
		t.Fatal(err)
	}
	for _, item := range out.Items {
		if strings.Contains(fmt.Sprint(item), adaKey) {
			t.Errorf("an account item holds the key in the clear: %v", item)
		}
	}

	if res := call(t, srv, http.MethodDelete, "/accounts/me/providers/openai", ada, ""); res.status != http.StatusNoContent {
		t.Fatalf("DELETE = %d %s, want 204", res.status, res.body)
	}
	if res := call(t, srv, http.MethodDelete, "/accounts/me/providers/openai", ada, ""); res.status != http.StatusNotFound {
		t.Errorf("DELETE again = %d %s, want 404", res.status, res.body)
	}
	turn(ada, adaAgent, "keys-ada-2")
	if got, want := calledWith(), []string{"Bearer sk-operator"}; !slices.Equal(got, want) {
		t.Errorf("after the delete the model was called with %q, want the deployment's key", got)
	}
}
