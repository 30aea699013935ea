package localrunner_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentharness/harness/infra/testenv"
)

// An agent whose model is overloaded answers from its fallback: the stream says which model
// answered (a transient data-model part the AI SDK's parser takes), the stored answer names it
// (so /status does), and the fallback's own key is a secret like the model's.
func TestFallbackModelAnswers(t *testing.T) {
	var calls atomic.Int32
	overloaded := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"message":"overloaded","type":"server_error"}}`))
	}))
	defer overloaded.Close()
	srv := serve(t, testenv.Stack(t), map[string]string{"MODEL_PRIVATE_ENDPOINTS": "allow"})
	_, secret := createAccount(t, srv, "fallbacks")
	agentID := createAgent(t, srv, secret, `{"name":"resilient","model":{"provider":"openai","model":"gpt-x","baseURL":"`+overloaded.URL+`","apiKey":"sk-primary",
		"fallbacks":[{"provider":"scripted","script":[{"text":"Answered by the fallback."}]},{"provider":"openai","model":"gpt-y","apiKey":"sk-fallback"}]}}`)

	res := call(t, srv, http.MethodPost, "/chat", secret, `{"agentId":"`+agentID+`","id":"conv-fb","eventId":"evt-fb","message":"hello"}`)
	if res.status != http.StatusOK {
		t.Fatalf("POST /chat = %d %s", res.status, res.body)
	}
	if calls.Load() == 0 {
		t.Fatal("the overloaded primary was never called")
	}
	if _, stderr, err := testenv.CheckUIStream(t, res.body); err != nil {
		t.Fatalf("the AI SDK's parser refused the stream: %v %s\n%s", err, stderr, res.body)
	}
	chunks := testenv.Chunks(t, bytes.NewReader(res.body))
	var named bool
	for _, c := range chunks {
		if c["type"] == "data-model" && c["transient"] == true {
			data, _ := c["data"].(map[string]any)
			named = data["model"] == "scripted"
		}
	}
	if !named || !strings.Contains(string(res.body), "fallback.") {
		t.Errorf("the stream %s does not say the fallback answered", res.body)
	}
	status := call(t, srv, http.MethodGet, "/status/evt-fb", secret, "")
	if !strings.Contains(string(status.body), `"model":"scripted"`) || !strings.Contains(string(status.body), "Answered by the fallback.") {
		t.Errorf("/status = %s, want the answer and the model that wrote it", status.body)
	}
	got := call(t, srv, http.MethodGet, "/accounts/me/agents/"+agentID, secret, "")
	if strings.Contains(string(got.body), "sk-primary") || strings.Contains(string(got.body), "sk-fallback") || strings.Count(string(got.body), `"[redacted]"`) != 2 {
		t.Errorf("GET agent shows %s, want its keys redacted, the fallback's too", got.body)
	}
}
