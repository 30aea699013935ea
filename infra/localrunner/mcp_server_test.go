package localrunner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentharness/harness/shared/state/store"
)

// mcpServerAgents are the agents TestMCPServer's account serves as MCP tools. team_lead_1's tool
// name is team.lead:1's once '.' and ':' are replaced: only the first by id is served.
var mcpServerAgents = []string{
	`{"agentId": "greeter", "name": "Greeter", "system": "You greet people.\nNever shout.",
	  "model": {"provider": "scripted", "script": [{"text": "Hello from the greeter."}]}}`,
	`{"agentId": "team.lead:1", "name": "Lead", "model": {"provider": "scripted", "script": [{"text": "Lead here."}]}}`,
	`{"agentId": "team_lead_1", "name": "Shadowed", "model": {"provider": "scripted", "script": [{"text": "Never served."}]}}`,
	`{"agentId": "failing", "name": "Failing", "model": {"provider": "scripted", "script": [{"error": "the provider is down"}]}}`,
	strings.Replace(asyncApprover, "{", `{"agentId": "approver",`, 1),
	strings.Replace(dispatcher, "{", `{"agentId": "dispatcher",`, 1),
}

// mcpBearer is an MCP host's HTTP client: every request carries the account secret.
type mcpBearer struct {
	secret string
	base   http.RoundTripper
}

func (b mcpBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.secret)
	return b.base.RoundTrip(r)
}

// mcpHostSession connects an MCP client to the runner's /mcp as the account of secret.
func (e *asyncEnv) mcpHostSession(t *testing.T, secret string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1.0.0"}, nil)
	transport := &mcp.StreamableClientTransport{
		Endpoint:             e.srv.URL + "/mcp",
		HTTPClient:           &http.Client{Transport: mcpBearer{secret: secret, base: e.srv.Client().Transport}},
		DisableStandaloneSSE: true,
		MaxRetries:           -1,
	}
	ctx, cancel := context.WithTimeout(context.Background(), asyncWait)
	defer cancel()
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		t.Fatalf("connecting to /mcp: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// mcpPost posts body to /mcp as a Streamable HTTP client does, with the MCP-Protocol-Version
// header when version is set.
func mcpPost(t *testing.T, srv *httptest.Server, secret, version, body string) response {
	t.Helper()
	header := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}
	if version != "" {
		header.Set("MCP-Protocol-Version", version)
	}
	res, _ := requestWith(t, srv, http.MethodPost, "/mcp", secret, header, []byte(body))
	return res
}

// mcpAnswer is a tool call's answer: its text, its structured content, whether it is an error.
type mcpAnswer struct {
	text       string
	structured map[string]any
	isError    bool
}

// mcpCallAgent calls an agent's tool with args and requires an answer (a tool error included).
func mcpCallAgent(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) mcpAnswer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), asyncWait)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("calling %s %v: %v", tool, args, err)
	}
	out := mcpAnswer{isError: res.IsError}
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out.text += tc.Text
		}
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out.structured); err != nil {
		t.Fatalf("%s answered structured content %s, want an object", tool, b)
	}
	return out
}

// str is the string at key of a structured result.
func (r mcpAnswer) str(key string) string {
	s, _ := r.structured[key].(string)
	return s
}

// TestMCPServer calls an account's agents as an MCP host does, over the Streamable HTTP
// transport at POST /mcp of a runner, with the go-sdk client.
func TestMCPServer(t *testing.T) {
	e := newAsyncEnv(t)
	for _, config := range mcpServerAgents {
		e.agent(t, config)
	}
	cs := e.mcpHostSession(t, e.secret)

	t.Run("lists the account's agents", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), asyncWait)
		defer cancel()
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		byName := map[string]*mcp.Tool{}
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
			byName[tool.Name] = tool
		}
		slices.Sort(names)
		want := []string{"run_agent_approver", "run_agent_dispatcher", "run_agent_failing", "run_agent_greeter", "run_agent_team_lead_1"}
		if diff := cmp.Diff(want, names); diff != "" {
			t.Fatalf("tools (-want +got):\n%s", diff)
		}
		if res.CacheScope != "private" {
			t.Errorf("tools/list cacheScope = %q, want private: the list is the account's own", res.CacheScope)
		}
		greeter := byName["run_agent_greeter"]
		if d := greeter.Description; !strings.Contains(d, `"Greeter"`) || !strings.Contains(d, "You greet people.") || strings.Contains(d, "Never shout") {
			t.Errorf("run_agent_greeter's description = %q, want the agent's name and the first line of its system prompt only", d)
		}
		if d := byName["run_agent_team_lead_1"].Description; !strings.Contains(d, `"Lead"`) {
			t.Errorf("run_agent_team_lead_1's description = %q, want team.lead:1's (the first by id)", d)
		}
		var schema, wantSchema any
		b, _ := json.Marshal(greeter.InputSchema)
		_ = json.Unmarshal(b, &schema)
		_ = json.Unmarshal([]byte(`{"type":"object","properties":{"message":{"type":"string"},"conversationId":{"type":"string"}},"required":["message"],"additionalProperties":false}`), &wantSchema)
		if diff := cmp.Diff(wantSchema, schema); diff != "" {
			t.Errorf("input schema (-want +got):\n%s", diff)
		}
	})

	t.Run("a call runs a turn, conversationId continues it", func(t *testing.T) {
		first := mcpCallAgent(t, cs, "run_agent_greeter", map[string]any{"message": "hi"})
		if first.isError || first.text != "Hello from the greeter." {
			t.Fatalf("first call = %+v, want the greeter's answer", first)
		}
		conv, evt := first.str("conversationId"), first.str("eventId")
		want := map[string]any{"conversationId": conv, "eventId": evt, "status": store.EventCompleted, "text": "Hello from the greeter."}
		if diff := cmp.Diff(want, first.structured); diff != "" || conv == "" || evt == "" {
			t.Fatalf("structured content (-want +got):\n%s", diff)
		}
		if st := e.status(t, evt); st.Status != store.EventCompleted || st.Text == nil || *st.Text != first.text {
			t.Errorf("GET /status/%s = %s, want the call's turn, completed with its text", evt, st.raw)
		}

		second := mcpCallAgent(t, cs, "run_agent_greeter", map[string]any{"message": "again", "conversationId": conv})
		if second.isError || second.str("conversationId") != conv || second.str("eventId") == evt {
			t.Fatalf("second call = %+v, want a new turn of conversation %s", second, conv)
		}
		var said []string
		for _, m := range e.conversation(t, conv) {
			said = append(said, string(m.Role)+": "+m.Text())
		}
		wantSaid := []string{"user: hi", "assistant: Hello from the greeter.", "user: again", "assistant: Hello from the greeter."}
		if diff := cmp.Diff(wantSaid, said); diff != "" {
			t.Errorf("conversation %s (-want +got):\n%s", conv, diff)
		}
	})

	t.Run("colliding names serve the first agent by id", func(t *testing.T) {
		if got := mcpCallAgent(t, cs, "run_agent_team_lead_1", map[string]any{"message": "who?"}); got.isError || got.text != "Lead here." {
			t.Errorf("run_agent_team_lead_1 = %+v, want team.lead:1's answer", got)
		}
	})

	t.Run("approval: waits, refuses a new message, POST /async decides it", func(t *testing.T) {
		got := mcpCallAgent(t, cs, "run_agent_approver", map[string]any{"message": "deploy"})
		conv, evt := got.str("conversationId"), got.str("eventId")
		pending, _ := got.structured["pendingApprovals"].([]any)
		if got.isError || got.str("status") != store.EventWaiting || len(pending) != 1 {
			t.Fatalf("call = %+v, want waiting_for_approval with one pending approval", got)
		}
		p, _ := pending[0].(map[string]any)
		approvalID, _ := p["approvalId"].(string)
		if approvalID == "" || p["toolName"] != "test_async" || p["toolCallId"] == "" {
			t.Fatalf("pending approval = %v, want its approvalId, toolCallId and toolName test_async", p)
		}
		if !strings.Contains(got.text, approvalID) || !strings.Contains(got.text, "POST /async") || !strings.Contains(got.text, evt) {
			t.Errorf("text = %q, want it to name approval %s and how to decide it under event %s", got.text, approvalID, evt)
		}
		if st := e.status(t, evt); st.Status != store.EventWaiting || len(st.PendingApprovals) != 1 || st.PendingApprovals[0].ApprovalID != approvalID {
			t.Errorf("GET /status/%s = %s, want waiting_for_approval on %s", evt, st.raw, approvalID)
		}

		refused := mcpCallAgent(t, cs, "run_agent_approver", map[string]any{"message": "and another", "conversationId": conv})
		if !refused.isError || !strings.Contains(refused.text, "approval") || refused.structured["pendingApprovals"] == nil {
			t.Errorf("a new message on the waiting conversation = %+v, want a tool error naming the pending approvals", refused)
		}

		e.async(t, fmt.Sprintf(`{"agentId":"approver","id":%q,"eventId":%q,"approvals":[{"approvalId":%q,"approved":true}]}`, conv, evt, approvalID))
		st, _ := e.waitStatus(t, evt, store.EventCompleted)
		if st.Text == nil || !strings.Contains(*st.Text, "deployed") {
			t.Errorf("the decided turn ended %s, want the tool's result in its text", st.raw)
		}
	})

	t.Run("async tools: the turn goes on by itself", func(t *testing.T) {
		got := mcpCallAgent(t, cs, "run_agent_dispatcher", map[string]any{"message": "hand out the jobs"})
		evt := got.str("eventId")
		calls, _ := got.structured["pendingAsyncTools"].([]any)
		if got.isError || got.str("status") != store.EventWaitingAsync || got.str("statusUrl") != "/status/"+evt || len(calls) != 2 || !strings.Contains(got.text, "by itself") {
			t.Fatalf("call = %+v, want waiting_for_async_tools on two calls, with its statusUrl", got)
		}
		for _, j := range e.jobs(t, 2) {
			if res := e.complete(t, j); res.status != http.StatusOK && res.status != http.StatusAccepted {
				t.Fatalf("completing job %s = %d %s", j.ResultID, res.status, res.body)
			}
		}
		st, _ := e.waitStatus(t, evt, store.EventCompleted)
		if st.Text == nil || !strings.Contains(*st.Text, "ALPHA") || !strings.Contains(*st.Text, "BETA") {
			t.Errorf("the continued turn ended %s, want both jobs' results in its text", st.raw)
		}
	})

	t.Run("failed turns and bad arguments are tool errors", func(t *testing.T) {
		failed := mcpCallAgent(t, cs, "run_agent_failing", map[string]any{"message": "try"})
		if !failed.isError || failed.str("status") != store.EventFailed || failed.text == "" || failed.str("error") != failed.text {
			t.Errorf("a failed turn = %+v, want a tool error with status failed and its reason", failed)
		}
		for _, c := range []struct {
			args  map[string]any
			field string
		}{
			{map[string]any{}, "message"},
			{map[string]any{"message": "  "}, "message"},
			{map[string]any{"message": "hi", "extra": true}, "extra"},
			{map[string]any{"message": "hi", "conversationId": "a#b"}, "conversationId"},
		} {
			got := mcpCallAgent(t, cs, "run_agent_greeter", c.args)
			if !got.isError || got.str("field") != c.field {
				t.Errorf("arguments %v = %+v, want a tool error naming field %s", c.args, got, c.field)
			}
		}
	})

	t.Run("another account sees only its own agents", func(t *testing.T) {
		_, other := createAccount(t, e.srv, e.accountID+"-other")
		res := call(t, e.srv, http.MethodPost, "/accounts/me/agents", other,
			`{"agentId": "helper", "name": "Helper", "model": {"provider": "scripted", "script": [{"text": "Helping."}]}}`)
		if res.status != http.StatusCreated {
			t.Fatalf("creating the other account's agent = %d %s", res.status, res.body)
		}
		ocs := e.mcpHostSession(t, other)
		ctx, cancel := context.WithTimeout(context.Background(), asyncWait)
		defer cancel()
		list, err := ocs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range list.Tools {
			names = append(names, tool.Name)
		}
		if diff := cmp.Diff([]string{"run_agent_helper"}, names); diff != "" {
			t.Errorf("the other account's tools (-want +got):\n%s", diff)
		}
		if _, err := ocs.CallTool(ctx, &mcp.CallToolParams{Name: "run_agent_greeter", Arguments: map[string]any{"message": "hi"}}); err == nil || !strings.Contains(err.Error(), "run_agent_greeter") {
			t.Errorf("calling the first account's agent from the other = %v, want an MCP error naming the unknown tool", err)
		}
	})

	t.Run("a JSON-RPC batch is refused whole and runs nothing", func(t *testing.T) {
		// Each protocol version a host may send, none included (the SDK then takes 2025-03-26,
		// whose batches it would run).
		for i, version := range []string{"", "2025-03-26", "2025-06-18"} {
			var calls, convs []string
			for j := range 3 {
				conv := fmt.Sprintf("batched-%d-%d", i, j)
				convs = append(convs, conv)
				calls = append(calls, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"run_agent_greeter","arguments":{"message":"hi","conversationId":%q}}}`, j+1, conv))
			}
			res := mcpPost(t, e.srv, e.secret, version, " \n["+strings.Join(calls, ",")+"]")
			var got struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(res.body, &got); err != nil || res.status != http.StatusBadRequest || got.JSONRPC != "2.0" || string(got.ID) != "null" ||
				got.Error.Code != -32600 || !strings.Contains(got.Error.Message, "batches are not supported") {
				t.Errorf("a batch of tools/call (protocol version %q) = %d %s, want 400 with JSON-RPC error -32600 saying batches are not supported", version, res.status, res.body)
			}
			for _, conv := range convs {
				if msgs := e.conversation(t, conv); len(msgs) != 0 {
					t.Errorf("the refused batch (protocol version %q) ran a turn: conversation %s holds %d messages", version, conv, len(msgs))
				}
			}
		}
	})

	t.Run("GET and DELETE are 405 with Allow: POST, 401 without a secret", func(t *testing.T) {
		for _, method := range []string{http.MethodGet, http.MethodDelete} {
			res, header := request(t, e.srv, method, "/mcp", e.secret, "", nil)
			if res.status != http.StatusMethodNotAllowed || header.Get("Allow") != "POST" || res.json(t)["error"] == nil {
				t.Errorf("%s /mcp = %d (Allow %q) %s, want 405 with Allow: POST and an error", method, res.status, header.Get("Allow"), res.body)
			}
			if res, _ := request(t, e.srv, method, "/mcp", "", "", nil); res.status != http.StatusUnauthorized {
				t.Errorf("%s /mcp without a secret = %d %s, want 401 as POST", method, res.status, res.body)
			}
		}
	})

	t.Run("no or a bad bearer secret is 401", func(t *testing.T) {
		initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
		for _, secret := range []string{"", "hsk_not-a-secret"} {
			res := call(t, e.srv, http.MethodPost, "/mcp", secret, initialize)
			if res.status != http.StatusUnauthorized || res.json(t)["error"] == nil {
				t.Errorf("POST /mcp with secret %q = %d %s, want 401 with an error", secret, res.status, res.body)
			}
		}
	})
}
