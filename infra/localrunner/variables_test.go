package localrunner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/agentharness/harness/infra/faketavily"
	"github.com/agentharness/harness/infra/localrunner"
	"github.com/agentharness/harness/infra/mockopenai"
	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/state/store"
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

// newVarsEnv is newAsyncEnv with a Tavily that accepts threadKey alone, and env (name, value
// pairs) set for the functions.
func newVarsEnv(t *testing.T, env ...string) *asyncEnv {
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
			for i := 0; i+1 < len(env); i += 2 {
				if env[i] == k {
					return env[i+1]
				}
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

// subagent_create of an instance whose agent needs a variable the caller's thread does not give
// it (here a scoped one, which no thread inherits) answers subagent_env_required with a request
// id; GET /threads/{thread}/variables/{id} shows what is needed, to the account only, and POST
// stores the value on the instance's thread and boots it at once, once.
func TestSubagentEnvRequiredAnsweredThroughTheVariablesEndpoint(t *testing.T) {
	e := newVarsEnv(t)
	scout := e.agent(t, strings.Replace(searcher, `"tools":`, `"variables": [{"name": "TAVILY_API_KEY", "type": "secret", "scoped": true, "required": true, "description": "the scout's own Tavily key"}], "tools":`, 1))
	caller := e.agent(t, boss(scout, `{"receives_messages": "side_a"}`, `{"name": "subagent_create", "input": {"agent": "scout", "name": "alpha", "message": "search"}}`))
	ev := e.async(t, `{"agentId":"`+caller+`","message":"scout it","variables":{"TAVILY_API_KEY":"`+threadKey+`"}}`)
	final, _ := e.waitStatus(t, ev.EventID, store.EventCompleted)
	var answer string
	for _, m := range final.Messages {
		for _, p := range m.Parts {
			if p.IsError {
				answer += string(p.Output)
			}
		}
	}
	found := regexp.MustCompile(`\\"requestId\\":\\"(vrq_[^\\"]+)\\",\\"variablesUrl\\":\\"([^\\"]+)\\"`).FindStringSubmatch(answer)
	if !strings.Contains(answer, "subagent_env_required") || found == nil {
		t.Fatalf("subagent_create answered %s, want subagent_env_required with a request id and the variables endpoint", answer)
	}
	id, url := found[1], found[2]
	if url != "/threads/"+ev.ConversationID+"/variables/"+id {
		t.Errorf("variablesUrl %s, want the caller's thread's", url)
	}

	res := call(t, e.srv, http.MethodGet, url, e.secret, "")
	var view struct {
		Status, Agent, Name string
		Missing             []struct {
			Name, Type string
			Scoped     bool
		}
	}
	if res.status != http.StatusOK || json.Unmarshal(res.body, &view) != nil || view.Status != "pending" || view.Agent != "scout" || view.Name != "alpha" ||
		len(view.Missing) != 1 || view.Missing[0].Name != "TAVILY_API_KEY" || view.Missing[0].Type != "secret" || !view.Missing[0].Scoped {
		t.Fatalf("GET %s = %d %s, want the pending request for TAVILY_API_KEY", url, res.status, res.body)
	}
	_, other := createAccount(t, e.srv, "vars-other")
	for _, tc := range []struct{ secret, path string }{{other, url}, {e.secret, "/threads/" + ev.ConversationID + "/variables/vrq_unknown"}} {
		if res := call(t, e.srv, http.MethodGet, tc.path, tc.secret, ""); res.status != http.StatusNotFound {
			t.Errorf("GET %s = %d %s, want 404", tc.path, res.status, res.body)
		}
		if res := call(t, e.srv, http.MethodPost, tc.path, tc.secret, `{"variables":{"TAVILY_API_KEY":"`+threadKey+`"}}`); res.status != http.StatusNotFound {
			t.Errorf("POST %s = %d %s, want 404", tc.path, res.status, res.body)
		}
	}
	for _, tc := range []struct{ body, field string }{
		{`{"variables":{"OTHER":"x"}}`, "variables.OTHER"},
		{`{"variables":{}}`, "variables"},
		{`{"values":{}}`, "values"},
	} {
		if res := call(t, e.srv, http.MethodPost, url, e.secret, tc.body); res.status != http.StatusBadRequest || res.json(t)["field"] != tc.field {
			t.Errorf("POST %s = %d %s, want 400 naming %s", tc.body, res.status, res.body, tc.field)
		}
	}

	res = call(t, e.srv, http.MethodPost, url, e.secret, `{"variables":{"TAVILY_API_KEY":"`+threadKey+`"}}`)
	booted := res.json(t)
	threadID, _ := booted["threadId"].(string)
	eventID, _ := booted["eventId"].(string)
	if res.status != http.StatusAccepted || threadID == "" || eventID == "" {
		t.Fatalf("POST %s = %d %s, want 202 with the instance's thread and event", url, res.status, res.body)
	}
	if child, _ := e.waitStatus(t, eventID, store.EventCompleted); child.Text == nil || !strings.Contains(*child.Text, "A harness for agents.") {
		t.Errorf("the booted instance answered %v, want its search's result with the key given", child.Text)
	}
	if res := call(t, e.srv, http.MethodPost, url, e.secret, `{"variables":{"TAVILY_API_KEY":"`+threadKey+`"}}`); res.status != http.StatusConflict {
		t.Errorf("a second POST = %d %s, want 409: a request boots once", res.status, res.body)
	}
	if res := call(t, e.srv, http.MethodGet, url, e.secret, ""); !strings.Contains(string(res.body), `"status":"booted"`) || !strings.Contains(string(res.body), threadID) {
		t.Errorf("GET after the boot = %s, want it booted, naming the instance's thread", res.body)
	}
	if res := call(t, e.srv, http.MethodGet, "/chat/"+ev.ConversationID+"/subagents", e.secret, ""); !strings.Contains(string(res.body), `"name":"alpha"`) {
		t.Errorf("the caller's instances %s, want alpha", res.body)
	}
	if strings.Contains(e.logs.dump(-10), threadKey) {
		t.Error("a log line holds the key")
	}
}

// immediate's per-instance variables (001 section 5): scopedEnv copies the caller's value into
// the child's thread, where its tools use it although the child declares it scoped; nameEnv
// names the child and descriptionEnv comes before its message. The security rule holds: the
// scopedEnv value reaches no model, message, stream, stored item or log line.
func TestImmediateInstanceVariables(t *testing.T) {
	// Both models are a local OpenAI-compatible server that records every request they get: the
	// scout searches, then answers with what it found; the caller answers with the scout's answer.
	mock := mockopenai.New(&mockopenai.Options{Script: func(r *mockopenai.Request) mockopenai.Reply {
		if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == "tool" {
			return mockopenai.Reply{Text: "Found: " + r.Messages[n-1].Text()}
		}
		return mockopenai.Reply{ToolCalls: []mockopenai.ToolCall{{Function: mockopenai.FunctionCall{Name: "tavilySearch", Arguments: `{"query":"harness"}`}}}}
	}})
	modelSrv := httptest.NewServer(mock)
	t.Cleanup(modelSrv.Close)
	e := newVarsEnv(t, "OPENAI_BASE_URL", modelSrv.URL+"/v1")
	block := `{"provider": "openai", "model": "mock", "apiKey": "k", "baseURL": "` + modelSrv.URL + `/v1"}`
	scout := e.agent(t, `{"name": "scout", "model": `+block+`, "tools": {"tavilySearch": {}},
		"variables": [{"name": "TAVILY_API_KEY", "type": "secret", "scoped": true, "required": true}]}`)
	caller := e.agent(t, `{"name": "briefed", "model": `+block+`,
		"subagent": {"agents": [{"name": "scout", "agentId": "`+scout+`",
			"immediate": {"nameEnv": "SCOUT_NAME", "descriptionEnv": "SCOUT_TASK", "scopedEnv": ["TAVILY_API_KEY"]}}]}}`)
	res := call(t, e.srv, http.MethodPost, "/", e.secret, `{"agentId":"`+caller+`","id":"immediate-vars","message":"find harnesses",
		"variables":{"TAVILY_API_KEY":"`+threadKey+`","SCOUT_NAME":"Scout Alpha","SCOUT_TASK":"Search the web for it."}}`)
	if res.status != http.StatusOK {
		t.Fatalf("POST / = %d %s", res.status, res.body)
	}
	cs := testenv.Chunks(t, bytes.NewReader(res.body))
	if text := streamText(cs); !strings.Contains(text, "A harness for agents.") {
		t.Fatalf("the caller answered %q, want the scout's search result: its thread had the key", text)
	}
	subs := chunksOf(cs, "data-subagent")
	if len(subs) == 0 {
		t.Fatal("no data-subagent part")
	}
	first, _ := subs[0]["data"].(map[string]any)
	thread, _ := first["threadId"].(string)
	if first["agent"] != "Scout Alpha" || first["text"] != "Search the web for it.\n\nfind harnesses" {
		t.Errorf("the scout started as %v with %q, want Scout Alpha with its task before the message", first["agent"], first["text"])
	}
	msgs := e.conversation(t, thread)
	if len(msgs) == 0 || !strings.HasPrefix(msgs[0].Text(), "Search the web for it.") {
		t.Errorf("the scout's first message %v, want its task first", msgs)
	}

	// No model request holds the key, nor does either conversation; the task, which
	// descriptionEnv designates, reached the scout's model.
	reqs := mock.Requests()
	task := false
	for _, r := range reqs {
		if bytes.Contains(r.Body, []byte(threadKey)) {
			t.Errorf("a model request holds the key: %s", r.Body)
		}
		task = task || bytes.Contains(r.Body, []byte("Search the web for it."))
	}
	if len(reqs) != 3 || !task {
		t.Errorf("the models got %d requests (want the scout's two and the caller's), the task in one: %v", len(reqs), task)
	}
	for _, conv := range []string{"immediate-vars", thread} {
		b, _ := json.Marshal(e.conversation(t, conv))
		if strings.Contains(string(b), threadKey) {
			t.Errorf("conversation %s holds the key: %s", conv, b)
		}
	}
	if strings.Contains(string(res.body), threadKey) || strings.Contains(e.logs.dump(-10), threadKey) {
		t.Error("the stream or a log line holds the key")
	}
	table := e.stack.Name("ConversationsTable")
	out, err := e.stack.DB.Scan(context.Background(), &dynamodb.ScanInput{TableName: &table})
	if err != nil {
		t.Fatal(err)
	}
	for _, item := range out.Items {
		if strings.Contains(fmt.Sprint(item), threadKey) {
			t.Errorf("a conversation item holds the key in the clear: %v", item)
		}
	}
}
