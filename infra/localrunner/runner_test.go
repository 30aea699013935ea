package localrunner_test

import (
	"bytes"
	"context"
	"encoding/json"
	asyncworker "github.com/agentharness/harness/functions/async-worker/wire"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/agentharness/harness/infra/faketavily"
	"github.com/agentharness/harness/infra/localrunner"
	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/edge/worker"
	"github.com/agentharness/harness/shared/lambda/agentdeps"
	"github.com/agentharness/harness/shared/model/modelblock"
	"github.com/agentharness/harness/shared/tool/builtintools"
)

const adminSecret = "hadm_test-admin-secret"

// runner serves every function of template.yaml as make dev does, on its own tables, queues and
// bucket, with its pollers and schedules running and Tavily pointed at a local fake.
func runner(t *testing.T, tavily http.Handler) *httptest.Server {
	t.Helper()
	stack := testenv.Stack(t)
	tavilySrv := httptest.NewServer(tavily)
	t.Cleanup(tavilySrv.Close)
	return serve(t, stack, map[string]string{"TAVILY_BASE_URL": tavilySrv.URL})
}

// serve serves every function of template.yaml on stack, with the admin secret and env set.
func serve(t *testing.T, stack *testenv.Resources, env map[string]string) *httptest.Server {
	t.Helper()
	vars := map[string]string{"ADMIN_SECRET": adminSecret}
	for k, v := range env {
		vars[k] = v
	}
	_, srv := testenv.Serve(t, stack.Options(func(k string) string { return vars[k] }))
	return srv
}

// createAgent stores config as an agent of the account secret opens and returns its id.
func createAgent(t *testing.T, srv *httptest.Server, secret, config string) string {
	t.Helper()
	res := call(t, srv, http.MethodPost, "/accounts/me/agents", secret, config)
	if res.status != http.StatusCreated {
		t.Fatalf("creating the agent = %d %s", res.status, res.body)
	}
	return res.json(t)["agentId"].(string)
}

type response struct {
	status int
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("answer %d is not a JSON object: %s", r.status, r.body)
	}
	return m
}

func call(t *testing.T, srv *httptest.Server, method, path, secret, body string) response {
	t.Helper()
	res, _ := request(t, srv, method, path, secret, "application/json", []byte(body))
	return res
}

// request is call with a body of any content type (none when empty); it also returns the
// answer's headers.
func request(t *testing.T, srv *httptest.Server, method, path, secret, contentType string, body []byte) (response, http.Header) {
	t.Helper()
	header := http.Header{}
	if contentType != "" {
		header.Set("Content-Type", contentType)
	}
	return requestWith(t, srv, method, path, secret, header, body)
}

// requestWith is request with the given headers.
func requestWith(t *testing.T, srv *httptest.Server, method, path, secret string, header http.Header, body []byte) (response, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: res.StatusCode, body: b}, res.Header
}

func createAccount(t *testing.T, srv *httptest.Server, username string) (id, secret string) {
	t.Helper()
	res := call(t, srv, http.MethodPost, "/accounts", adminSecret, `{"username":"`+username+`"}`)
	if res.status != http.StatusCreated {
		t.Fatalf("POST /accounts = %d %s, want 201", res.status, res.body)
	}
	m := res.json(t)
	id, _ = m["accountId"].(string)
	secret, _ = m["secret"].(string)
	if id == "" || !strings.HasPrefix(secret, "hsk_") {
		t.Fatalf("POST /accounts answered %s, want an accountId and a secret", res.body)
	}
	return id, secret
}

// researcher searches with tavilySearch through the scripted model, then answers with what
// the tool returned.
const researcher = `{
  "name": "researcher",
  "model": {"provider": "scripted", "script": [
    {"toolCalls": [{"name": "tavilySearch", "input": {"query": "gopher"}}]},
    {"text": "Found: {{toolResults}}"}
  ]},
  "tools": {"tavilySearch": {"apiKey": "tvly-account-key", "maxResults": 2}}
}`

// TestNewUserFlow is the acceptance path, over real HTTP on the local runner: create an
// account, configure an agent with tavilySearch, run a turn and see the tool's round trip; a
// bad config is refused naming its field; another account sees none of it.
func TestNewUserFlow(t *testing.T) {
	tavily := faketavily.New(&faketavily.Options{APIKey: "tvly-account-key", Documents: []faketavily.Document{
		{URL: "https://go.dev/blog/gopher", Title: "The Go gopher", Content: "The gopher is the Go mascot."},
		{URL: "https://example.com/garden", Title: "Garden pests", Content: "Moles and voles dig lawns."},
	}})
	srv := runner(t, tavily)
	_, secret := createAccount(t, srv, "ada")

	res := call(t, srv, http.MethodPost, "/accounts/me/agents", secret, researcher)
	if res.status != http.StatusCreated {
		t.Fatalf("creating the agent = %d %s, want 201", res.status, res.body)
	}
	agentID, _ := res.json(t)["agentId"].(string)
	if agentID == "" {
		t.Fatalf("the answer carries no agentId: %s", res.body)
	}
	if strings.Contains(string(res.body), "tvly-account-key") {
		t.Errorf("the answer shows the API key: %s", res.body)
	}

	turn := call(t, srv, http.MethodPost, "/", secret, `{"agentId":"`+agentID+`","message":"Tell me about gophers"}`)
	if turn.status != http.StatusOK {
		t.Fatalf("turn = %d %s, want 200", turn.status, turn.body)
	}
	cs := testenv.Chunks(t, bytes.NewReader(turn.body))
	var output, finish map[string]any
	for _, c := range cs {
		switch c["type"] {
		case "tool-output-available":
			output = c
		case "finish":
			finish = c
		case "error":
			t.Fatalf("the turn streamed an error: %v", c)
		}
	}
	if output == nil || finish == nil {
		t.Fatalf("the turn has no tool output or no finish: %s", turn.body)
	}
	out, _ := json.Marshal(output["output"])
	if !strings.Contains(string(out), "https://go.dev/blog/gopher") || strings.Contains(string(out), "example.com/garden") {
		t.Errorf("tool output = %s, want the fake's gopher page only", out)
	}
	reqs := tavily.Requests()
	if len(reqs) != 1 || reqs[0].Path != "/search" || reqs[0].APIKey != "tvly-account-key" {
		t.Fatalf("Tavily received %+v, want one /search with the agent's key", reqs)
	}
	var sent struct {
		Query      string `json:"query"`
		MaxResults int    `json:"max_results"`
	}
	if err := json.Unmarshal(reqs[0].Body, &sent); err != nil || sent.Query != "gopher" || sent.MaxResults != 2 {
		t.Errorf("Tavily request body = %s, want query gopher and max_results 2", reqs[0].Body)
	}

	// A bad config is refused with the field it is about, and nothing is stored.
	bad := call(t, srv, http.MethodPost, "/accounts/me/agents", secret, `{"name":"x","model":{"provider":"scripted","script":[{"text":"hi"}]},"tools":{"tavilySearch":{"maxResultz":3}}}`)
	if bad.status != http.StatusBadRequest || bad.json(t)["field"] != "tools.tavilySearch.maxResultz" {
		t.Errorf("bad config = %d %s, want 400 naming tools.tavilySearch.maxResultz", bad.status, bad.body)
	}
	list := call(t, srv, http.MethodGet, "/accounts/me/agents", secret, "")
	if n := len(list.json(t)["agents"].([]any)); n != 1 {
		t.Errorf("after a refused config the account has %d agents, want 1", n)
	}

	// Another account gets 404 on everything of the first.
	_, other := createAccount(t, srv, "eve")
	for _, tt := range []struct{ method, path, body string }{
		{http.MethodGet, "/accounts/me/agents/" + agentID, ""},
		{http.MethodPatch, "/accounts/me/agents/" + agentID, `{"maxSteps":2}`},
		{http.MethodDelete, "/accounts/me/agents/" + agentID, ""},
		{http.MethodPost, "/", `{"agentId":"` + agentID + `","message":"hi"}`},
	} {
		if got := call(t, srv, tt.method, tt.path, other, tt.body); got.status != http.StatusNotFound {
			t.Errorf("%s %s with another account's secret = %d %s, want 404", tt.method, tt.path, got.status, got.body)
		}
	}
	if got := call(t, srv, http.MethodGet, "/accounts/me/agents/"+agentID, secret, ""); got.status != http.StatusOK {
		t.Errorf("the owner's agent after the other account's attempts = %d %s, want 200", got.status, got.body)
	}
}

// A tool whose required variable resolves neither from the config nor the environment stops
// the turn before the model is called, naming the variable.
func TestMissingVariableStopsTheTurn(t *testing.T) {
	tavily := faketavily.New(&faketavily.Options{})
	srv := runner(t, tavily)
	_, secret := createAccount(t, srv, "ada")
	cfg := strings.Replace(researcher, `"apiKey": "tvly-account-key", `, "", 1)
	res := call(t, srv, http.MethodPost, "/accounts/me/agents", secret, cfg)
	if res.status != http.StatusCreated {
		t.Fatalf("creating the agent = %d %s", res.status, res.body)
	}
	agentID := res.json(t)["agentId"].(string)
	turn := call(t, srv, http.MethodPost, "/", secret, `{"agentId":"`+agentID+`","message":"hi"}`)
	if turn.status != http.StatusBadRequest || !strings.Contains(string(turn.body), "TAVILY_API_KEY") || !strings.Contains(string(turn.body), "config.tools.tavilySearch.apiKey") {
		t.Errorf("turn = %d %s, want 400 naming TAVILY_API_KEY and config.tools.tavilySearch.apiKey", turn.status, turn.body)
	}
	if n := len(tavily.Requests()); n != 0 {
		t.Errorf("Tavily got %d requests, want none", n)
	}
}

// The example config covers every tool and every provider, and each agent passes the checks
// account-manage runs.
func TestExampleConfig(t *testing.T) {
	seed, err := localrunner.ReadSeed(filepath.Join(testenv.Root(t), "examples", "account.config.example.json"))
	if err != nil {
		t.Fatal(err)
	}
	usedTools, usedProviders := map[string]bool{}, map[string]bool{}
	for _, a := range seed.Agents {
		v, err := agentconfig.Validate(a.Config, builtintools.ConfigChecks())
		if err != nil {
			t.Errorf("agent %s: %v", a.AgentID, err)
			continue
		}
		for name := range v.Config.Tools {
			usedTools[name] = true
		}
		var head struct{ Provider string }
		_ = json.Unmarshal(v.Config.Model, &head)
		usedProviders[head.Provider] = true
	}
	for _, name := range builtintools.Names() {
		if !usedTools[name] {
			t.Errorf("the example enables no agent with tool %s", name)
		}
	}
	for _, p := range modelblock.Names {
		if !usedProviders[p] {
			t.Errorf("the example has no agent on provider %s", p)
		}
	}
	if seed.Agents[0].AgentID != "demo" || !slices.Contains(builtintools.Names(), "current_time") {
		t.Errorf("the first agent is %s, want the scripted demo that make dev prints a curl for", seed.Agents[0].AgentID)
	}
}

// Every HttpApi route of the template reaches its function: none answers the runner's own
// "no route" 404.
func TestEveryRouteIsServed(t *testing.T) {
	srv := runner(t, faketavily.New(nil))
	for _, fn := range testenv.Template(t).Functions() {
		for _, e := range fn.Events {
			if e.Type != "HttpApi" {
				continue
			}
			method := e.Method
			if method == "ANY" {
				method = http.MethodGet
			}
			path := strings.NewReplacer("{accountId}", "acc_x", "{agentId}", "agt_x", "{eventId}", "evt_x", "{resultId}", "res_x", "{conversationId}", "conv_x", "{parentThreadId}", "conv_x", "{requestId}", "vrq_x", "{name}", "release-notes", "{bindingId}", "chb_x", "{provider}", "openai",
				"{workspace}", "notes", "{path+}", "a/b.txt").Replace(e.Path)
			if strings.Contains(path, "{") {
				t.Fatalf("route %s %s has a parameter this test does not fill", e.Method, e.Path)
			}
			res := call(t, srv, method, path, "", "{}")
			if strings.Contains(string(res.body), "no route for") {
				t.Errorf("%s %s (%s of %s) = %d %s, want its function's answer", method, path, e.Name, fn.LogicalID, res.status, res.body)
			}
		}
	}
}

// serveHoldingTurns serves the stack like runner, but keeps the worker's turn messages on the
// returned channel for the test to hand to the worker (returned too) when it chooses; other
// work runs as it comes.
func serveHoldingTurns(t *testing.T, stack *testenv.Resources) (*httptest.Server, *worker.Worker, chan events.SQSMessage) {
	t.Helper()
	env := map[string]string{"ADMIN_SECRET": adminSecret}
	opts := stack.Options(func(k string) string { return env[k] })
	workers := make(chan *worker.Worker, 1)
	held := make(chan events.SQSMessage, 10)
	opts.Functions = map[string]localrunner.Constructor{
		"AsyncWorkerFunction": func(d agentdeps.Deps) (localrunner.Handlers, error) {
			w, err := asyncworker.Worker(d)
			if err != nil {
				return localrunner.Handlers{}, err
			}
			workers <- w
			return localrunner.Handlers{SQS: func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
				var rest []events.SQSMessage
				for _, rec := range ev.Records {
					var m struct{ Type string }
					if json.Unmarshal([]byte(rec.Body), &m) == nil && m.Type == "turn" {
						held <- rec
						continue
					}
					rest = append(rest, rec)
				}
				return w.Handle(ctx, events.SQSEvent{Records: rest})
			}}, nil
		},
	}
	_, srv := testenv.Serve(t, opts)
	return srv, <-workers, held
}
