package localrunner_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/agentharness/harness/infra/faketavily"
	"github.com/agentharness/harness/infra/testenv"
)

// The chat API at /chat and its resume route, as the AI SDK's DefaultChatTransport calls them
// with api: '/chat': the resume stream replays the conversation's latest turn from its stream
// log, chunk for chunk as it was streamed (only the start chunk's message id differs).
func TestResumeReplaysTheLatestTurn(t *testing.T) {
	srv := runner(t, faketavily.New(nil))
	_, secret := createAccount(t, srv, "resumer")
	agentID := createAgent(t, srv, secret, `{"name":"clock","model":{"provider":"scripted","script":[
		{"toolCalls":[{"name":"current_time","input":{}}]},{"text":"It is {{toolResults}}"}]},
		"tools":{"current_time":{}}}`)

	if res := call(t, srv, http.MethodGet, "/chat/conv-none/stream", secret, ""); res.status != http.StatusNoContent {
		t.Fatalf("resume of a conversation without turns = %d %s, want 204", res.status, res.body)
	}
	if res := call(t, srv, http.MethodGet, "/chat/conv-1/stream", "", ""); res.status != http.StatusUnauthorized {
		t.Fatalf("resume without a secret = %d %s, want 401", res.status, res.body)
	}

	live := call(t, srv, http.MethodPost, "/chat", secret, `{"agentId":"`+agentID+`","id":"conv-1","message":"What time is it?"}`)
	if live.status != http.StatusOK {
		t.Fatalf("POST /chat = %d %s, want 200", live.status, live.body)
	}
	resumed := call(t, srv, http.MethodGet, "/chat/conv-1/stream", secret, "")
	if resumed.status != http.StatusOK {
		t.Fatalf("resume = %d %s, want 200", resumed.status, resumed.body)
	}
	want, got := testenv.Chunks(t, bytes.NewReader(live.body)), testenv.Chunks(t, bytes.NewReader(resumed.body))
	if len(want) < 6 || len(got) != len(want) {
		t.Fatalf("resume streamed %d chunks, the turn %d:\nlive:    %s\nresumed: %s", len(got), len(want), live.body, resumed.body)
	}
	for i := range want {
		if want[i]["type"] == "start" {
			continue // a new message id: the resumed stream rebuilds the message whole
		}
		w, _ := json.Marshal(want[i])
		g, _ := json.Marshal(got[i])
		if !bytes.Equal(w, g) {
			t.Errorf("chunk %d: resumed %s, streamed %s", i, g, w)
		}
	}

	// Another account cannot read it: the log is keyed by account.
	_, other := createAccount(t, srv, "someone-else")
	if res := call(t, srv, http.MethodGet, "/chat/conv-1/stream", other, ""); res.status != http.StatusNoContent {
		t.Fatalf("another account's resume = %d %s, want 204", res.status, res.body)
	}
}
