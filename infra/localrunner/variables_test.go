package localrunner_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentharness/harness/infra/faketavily"
	"github.com/agentharness/harness/infra/localrunner"
	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/store"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// threadKey is the Tavily key only the conversation's variables hold: neither the agents'
// configs nor the harness environment have one.
const threadKey = "tvly-thread-only-9f3c"

// searcher searches with Tavily, whose key it does not configure, and answers with what it found.
const searcher = `{"name": "searcher", "model": {"provider": "scripted", "script": [
	{"toolCalls": [{"name": "tavilySearch", "input": {"query": "harness"}}]},
	{"text": "Found: {{toolResults}}"}]},
	"tools": {"tavilySearch": {}}}`

// newVarsEnv is newAsyncEnv with a Tavily that accepts threadKey alone.
func newVarsEnv(t *testing.T) *asyncEnv {
	t.Helper()
	tavily := httptest.NewServer(faketavily.New(&faketavily.Options{APIKey: threadKey, Documents: []faketavily.Document{
		{URL: "https://example.com/harness", Title: "Harness", Content: "A harness for agents."},
	}}))
	t.Cleanup(tavily.Close)
	return newAsyncEnvOn(t, testenv.Stack(t), func(o *localrunner.Options) {
		base := o.Getenv
		o.Getenv = func(k string) string {
			if k == "TAVILY_BASE_URL" {
				return tavily.URL
			}
			return base(k)
		}
	})
}

// A request's variables are its conversation's: the tools of that turn and of later ones
// resolve their variables from them, and a subagent's thread starts with a copy of them, less
// those the subagent's agent declares scoped. No value is written anywhere in the clear.
func TestThreadVariablesReachToolsAndSubagents(t *testing.T) {
	e := newVarsEnv(t)
	search := e.agent(t, searcher)

	res := call(t, e.srv, http.MethodPost, "/", e.secret, `{"agentId":"`+search+`","id":"vars-1","message":"search"}`)
	if res.status != http.StatusBadRequest || !strings.Contains(string(res.body), "TAVILY_API_KEY") {
		t.Fatalf("a turn without the key = %d %s, want 400 naming TAVILY_API_KEY", res.status, res.body)
	}
	first := e.stream(t, `{"agentId":"`+search+`","id":"vars-1","message":"search","variables":{"TAVILY_API_KEY":"`+threadKey+`"}}`)
	if text := streamText(first); !strings.Contains(text, "A harness for agents.") {
		t.Fatalf("the turn with the key answered %q, want the search's result", text)
	}
	// The next turn finds the key on the conversation.
	if text := streamText(e.stream(t, `{"agentId":"`+search+`","id":"vars-1","message":"again"}`)); !strings.Contains(text, "A harness for agents.") {
		t.Errorf("the next turn answered %q, want the search's result with the stored key", text)
	}

	// A blocking child inherits the caller's key; one whose agent declares it scoped does not.
	scoped := e.agent(t, strings.Replace(searcher, `"tools":`, `"variables": [{"name": "TAVILY_API_KEY", "type": "secret", "scoped": true}], "tools":`, 1))
	caller := e.agent(t, planner(`{"agents": [{"name": "inherits", "agentId": "`+search+`"}, {"name": "scoped", "agentId": "`+scoped+`"}]}`,
		ask("inherits", "search"), ask("scoped", "search")))
	cs := e.stream(t, `{"agentId":"`+caller+`","id":"vars-2","message":"plan it","variables":{"TAVILY_API_KEY":"`+threadKey+`"}}`)
	var inherited, refused bool
	for _, c := range chunksOf(cs, "tool-output-available") {
		inherited = inherited || strings.Contains(c["output"].(map[string]any)["text"].(string), "A harness for agents.")
	}
	for _, c := range chunksOf(cs, "tool-output-error") {
		refused = refused || strings.Contains(c["errorText"].(string), "cannot call scoped") && strings.Contains(c["errorText"].(string), "TAVILY_API_KEY")
	}
	if !inherited || !refused {
		t.Errorf("inherited %v, scoped refused %v, want both: outputs %v, errors %v", inherited, refused, chunksOf(cs, "tool-output-available"), chunksOf(cs, "tool-output-error"))
	}

	// An /async turn carries its variables sealed to async-worker.
	ev := e.async(t, `{"agentId":"`+search+`","message":"search","variables":{"TAVILY_API_KEY":"`+threadKey+`"}}`)
	if final, _ := e.waitStatus(t, ev.EventID, store.EventCompleted); final.Text == nil || !strings.Contains(*final.Text, "A harness for agents.") {
		t.Errorf("the /async turn answered %v, want the search's result", final.Text)
	}

	// Nowhere in the clear: not in a stored item of any table, a log line or a stream.
	for _, id := range []string{"ConnectionsTable", "AccountsTable", "AgentsTable", "ConversationsTable", "EventsTable", "StreamsTable", "ApprovalsTable", "AsyncToolResultsTable"} {
		table := e.stack.Name(id)
		out, err := e.stack.DB.Scan(context.Background(), &dynamodb.ScanInput{TableName: &table})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Items) == 0 && (id == "ConversationsTable" || id == "StreamsTable") {
			t.Errorf("table %s is empty: the scan looked in the wrong place", id)
		}
		for _, item := range out.Items {
			if strings.Contains(fmt.Sprint(item), threadKey) {
				t.Errorf("table %s holds the key in the clear: %v", id, item)
			}
		}
	}
	if strings.Contains(e.logs.dump(-10), threadKey) {
		t.Error("a log line holds the key")
	}
	for _, body := range [][]byte{res.body, call(t, e.srv, http.MethodGet, "/chat/vars-1/stream", e.secret, "").body, call(t, e.srv, http.MethodGet, "/status/"+ev.EventID, e.secret, "").body} {
		if strings.Contains(string(body), threadKey) {
			t.Errorf("an answer holds the key: %s", body)
		}
	}
}

// An agent's required variables must resolve before its turn starts: a request without them is
// refused, naming the variable; badly formed variables are refused naming theirs.
func TestRequiredAndMalformedVariables(t *testing.T) {
	e := newVarsEnv(t)
	regional := e.agent(t, `{"name": "regional", "model": {"provider": "scripted", "script": [{"text": "ok"}]},
		"variables": [{"name": "REGION", "required": true, "description": "where the user is"}]}`)
	for _, tc := range []struct{ body, field string }{
		{`{"agentId":"` + regional + `","message":"hi"}`, "variables.REGION"},
		{`{"agentId":"` + regional + `","message":"hi","variables":{"1BAD":"x"}}`, "variables.1BAD"},
		{`{"agentId":"` + regional + `","message":"hi","variables":{"REGION":""}}`, "variables.REGION"},
	} {
		res := call(t, e.srv, http.MethodPost, "/", e.secret, tc.body)
		if res.status != http.StatusBadRequest || res.json(t)["field"] != tc.field {
			t.Errorf("POST / %s = %d %s, want 400 naming %s", tc.body, res.status, res.body, tc.field)
		}
	}
	if text := streamText(e.stream(t, `{"agentId":"`+regional+`","message":"hi","variables":{"REGION":"eu"}}`)); text != "ok" {
		t.Errorf("with REGION the turn answered %q, want ok", text)
	}
}
