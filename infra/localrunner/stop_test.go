package localrunner_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agentharness/harness/infra/faketavily"
	"github.com/agentharness/harness/infra/testenv"
)

// POST /chat/{conversationId}/stop ends a running turn: the model is cut off mid-answer, the
// answer so far is kept in the conversation, and the turn's stream ends with an abort, live and
// resumed alike; the stream passes the AI SDK's own checks.
func TestStopEndsTheTurnAndKeepsTheAnswerSoFar(t *testing.T) {
	srv := runner(t, faketavily.New(nil))
	_, secret := createAccount(t, srv, "stopper")
	// The model says something, then stalls for a minute: only a stop ends the turn soon.
	agentID := createAgent(t, srv, secret, `{"name":"staller","model":{"provider":"scripted","script":[
		{"text":"Here is the answer so far","stallMs":60000}]}}`)

	if res := call(t, srv, http.MethodPost, "/chat/conv-stop/stop", "", ""); res.status != http.StatusUnauthorized {
		t.Fatalf("stop without a secret = %d %s, want 401", res.status, res.body)
	}
	if res := call(t, srv, http.MethodPost, "/chat/conv-stop/stop", secret, ""); res.status != http.StatusOK || !strings.Contains(string(res.body), `"stopped":false`) {
		t.Fatalf("stop with no turn = %d %s, want 200 with stopped false", res.status, res.body)
	}

	req, err := http.NewRequest(http.MethodPost, srv.URL+"/chat", strings.NewReader(`{"agentId":"`+agentID+`","id":"conv-stop","eventId":"evt-stop","message":"Tell me"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("POST /chat = %d, want 200", res.StatusCode)
	}
	// Read the live stream until the model's text has come.
	var live bytes.Buffer
	var said strings.Builder
	r := bufio.NewReader(res.Body)
	for said.String() != "Here is the answer so far" {
		line, err := r.ReadString('\n')
		live.WriteString(line)
		if err != nil {
			t.Fatalf("the live stream ended before the model's text: %v\n%s", err, live.String())
		}
		var c map[string]any
		if data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok && json.Unmarshal([]byte(data), &c) == nil && c["type"] == "text-delta" {
			s, _ := c["delta"].(string)
			said.WriteString(s)
		}
	}

	stop := call(t, srv, http.MethodPost, "/chat/conv-stop/stop", secret, "")
	if stop.status != http.StatusOK {
		t.Fatalf("stop = %d %s, want 200", stop.status, stop.body)
	}
	var stopped map[string]any
	if err := json.Unmarshal(stop.body, &stopped); err != nil || stopped["stopped"] != true || stopped["conversationId"] != "conv-stop" {
		t.Fatalf("stop answered %s, want stopped true for conv-stop", stop.body)
	}
	rest := new(bytes.Buffer)
	if _, err := rest.ReadFrom(r); err != nil {
		t.Fatal(err)
	}
	live.Write(rest.Bytes())

	for name, body := range map[string][]byte{"live": live.Bytes(), "resumed": call(t, srv, http.MethodGet, "/chat/conv-stop/stream", secret, "").body} {
		chunks := testenv.Chunks(t, bytes.NewReader(body))
		if len(chunks) == 0 || chunks[len(chunks)-1]["type"] != "abort" {
			t.Errorf("%s stream: %s, want it to end with an abort", name, body)
		}
		for _, c := range chunks {
			if c["type"] == "finish" {
				t.Errorf("%s stream has a finish %v; a stopped turn ends with abort alone", name, c)
			}
		}
		out, stderr, err := testenv.CheckUIStream(t, body)
		if err != nil {
			t.Errorf("%s stream fails the AI SDK's checks: %v: %s", name, err, stderr)
			continue
		}
		var checked struct {
			Message struct {
				Parts []map[string]any `json:"parts"`
			} `json:"message"`
		}
		_ = json.Unmarshal(out, &checked)
		if text := partsText(checked.Message.Parts); text != "Here is the answer so far" {
			t.Errorf("%s stream builds the message %q, want the answer so far", name, text)
		}
	}

	// The turn is over: it was cancelled, and the conversation kept the answer so far.
	status := call(t, srv, http.MethodGet, "/status/evt-stop", secret, "").json(t)
	if status["status"] != "cancelled" {
		t.Errorf("status of the stopped turn: %v, want cancelled", status)
	}
	msgs, _ := status["messages"].([]any)
	var kept string
	for _, m := range msgs {
		if m, _ := m.(map[string]any); m["role"] == "assistant" {
			parts, _ := m["parts"].([]any)
			for _, p := range parts {
				if p, _ := p.(map[string]any); p["type"] == "text" {
					kept += p["text"].(string)
				}
			}
		}
	}
	if kept != "Here is the answer so far" {
		t.Errorf("the conversation kept the assistant text %q, want the answer so far; status %v", kept, status)
	}
	if res := call(t, srv, http.MethodPost, "/chat/conv-stop/stop", secret, ""); !strings.Contains(string(res.body), `"stopped":false`) {
		t.Errorf("a second stop = %d %s, want stopped false", res.status, res.body)
	}
}

// partsText joins the text parts of a UI message.
func partsText(parts []map[string]any) string {
	var b strings.Builder
	for _, p := range parts {
		if p["type"] == "text" {
			s, _ := p["text"].(string)
			b.WriteString(s)
		}
	}
	return b.String()
}
