package localrunner_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/agentharness/harness/infra/mcpeverything"
	"github.com/agentharness/harness/infra/testenv"
)

// mcpAgent calls the reference server's get-sum, then echo (which needs approval), then
// answers with what they returned; its second server is at an address nothing listens on.
func mcpAgent(url, deadURL string) string {
	return `{"name":"mcp","model":{"provider":"scripted","script":[
		{"text":"Adding. ","toolCalls":[{"name":"everything__get-sum","input":{"a":2,"b":3}}]},
		{"text":"Echoing. ","toolCalls":[{"name":"everything__echo","input":{"message":"hi there"}}]},
		{"text":"They said {{toolResults}}"}]},
		"mcpServers":{
		  "everything":{"url":"` + url + `","allowedTools":["get-sum","echo"],"needsApproval":{"echo":true}},
		  "gone":{"url":"` + deadURL + `","timeoutMs":2000}}}`
}

// A turn over SSE calls an MCP server's tools as <server>__<tool>: their results stream like any
// tool's, a call that needs approval waits for it, and a server that cannot be reached offers
// no tools that turn and says so in a data-warning part, without failing the turn.
func TestMCPServerToolsInATurn(t *testing.T) {
	srv, err := mcpeverything.Start(testenv.Node(t), testenv.Root(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	dead, _ := testenv.Listener(t) // takes connections and closes them unanswered
	stack := testenv.Stack(t)
	runner := serve(t, stack, map[string]string{"MCP_PRIVATE_ENDPOINTS": "allow"})
	_, secret := createAccount(t, runner, "mcp-user")
	agentID := createAgent(t, runner, secret, mcpAgent(srv.URL, "http://"+dead+"/mcp"))

	res, header := request(t, runner, http.MethodPost, "/", secret, "application/json", []byte(`{"agentId":"`+agentID+`","message":"go"}`))
	if res.status != http.StatusOK {
		t.Fatalf("the turn = %d %s", res.status, res.body)
	}
	chunks := testenv.Chunks(t, bytes.NewReader(res.body))
	var warning, sum string
	var approvalID string
	for _, c := range chunks {
		switch c["type"] {
		case "data-warning":
			warning, _ = c["data"].(map[string]any)["message"].(string)
		case "tool-output-available":
			sum, _ = c["output"].(string)
		case "tool-approval-request":
			approvalID, _ = c["approvalId"].(string)
		}
	}
	if !strings.Contains(warning, "gone") {
		t.Errorf("warning %q, want one naming the server that cannot be reached", warning)
	}
	if sum != "The sum of 2 and 3 is 5." {
		t.Errorf("get-sum's output %q, want the reference server's answer", sum)
	}
	if approvalID == "" {
		t.Fatalf("echo asked for no approval: %v", chunks)
	}
	conv := header.Get("X-Conversation-Id")
	res = call(t, runner, http.MethodPost, "/", secret, `{"agentId":"`+agentID+`","id":"`+conv+`","approvals":[{"approvalId":"`+approvalID+`","approved":true}]}`)
	if res.status != http.StatusOK {
		t.Fatalf("after the approval: %d %s", res.status, res.body)
	}
	var echo string
	var text strings.Builder
	for _, c := range testenv.Chunks(t, bytes.NewReader(res.body)) {
		switch c["type"] {
		case "tool-output-available":
			echo, _ = c["output"].(string)
		case "text-delta":
			text.WriteString(c["delta"].(string))
		case "error":
			t.Errorf("after the approval, an error: %v", c)
		}
	}
	if echo != "Echo: hi there" || !strings.HasPrefix(text.String(), "They said") || !strings.Contains(text.String(), "Echo: hi there") {
		t.Errorf("after the approval: echo %q, text %q; want echo's output and the final text carrying it", echo, text.String())
	}
}

// An MCP tool's progress notifications reach the SSE client as it runs: one data-tool-progress
// part per call (its id the call's), replaced as the server reports each step.
func TestMCPToolProgressStreams(t *testing.T) {
	srv, err := mcpeverything.Start(testenv.Node(t), testenv.Root(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	runner := serve(t, testenv.Stack(t), map[string]string{"MCP_PRIVATE_ENDPOINTS": "allow"})
	_, secret := createAccount(t, runner, "mcp-progress")
	agentID := createAgent(t, runner, secret, `{"name":"slow","model":{"provider":"scripted","script":[
		{"toolCalls":[{"name":"everything__trigger-long-running-operation","input":{"duration":0.6,"steps":3}}]},
		{"text":"Done."}]},
		"mcpServers":{"everything":{"url":"`+srv.URL+`"}}}`)
	res := call(t, runner, http.MethodPost, "/", secret, `{"agentId":"`+agentID+`","message":"go"}`)
	if res.status != http.StatusOK {
		t.Fatalf("the turn = %d %s", res.status, res.body)
	}
	var callID string
	var steps []float64
	for _, c := range testenv.Chunks(t, bytes.NewReader(res.body)) {
		switch c["type"] {
		case "tool-input-available":
			callID, _ = c["toolCallId"].(string)
		case "data-tool-progress":
			data, _ := c["data"].(map[string]any)
			if c["id"] != callID || data["toolCallId"] != callID || data["toolName"] != "everything__trigger-long-running-operation" {
				t.Errorf("progress part %v, want one for call %s", c, callID)
			}
			p, _ := data["progress"].(float64)
			total, _ := data["total"].(float64)
			if total != 3 {
				t.Errorf("progress part %v, want a total of 3 steps", c)
			}
			steps = append(steps, p)
		}
	}
	if len(steps) == 0 || steps[len(steps)-1] != 3 {
		t.Errorf("progress seen %v, want the steps up to 3", steps)
	}
}
