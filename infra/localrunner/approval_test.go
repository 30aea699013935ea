package localrunner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentharness/harness/infra/faketavily"
	"github.com/agentharness/harness/infra/testenv"
)

// approver calls test_async, which needs approval, then answers with what the tool returned.
const approver = `{
  "name": "approver",
  "model": {"provider": "scripted", "script": [
    {"toolCalls": [{"name": "test_async", "input": {"delayMs": 0, "echo": "deployed"}}]},
    {"text": "Result: {{toolResults}}"}
  ]},
  "tools": {"test_async": {"needsApproval": true}}
}`

// clientPart is a UI message part as infra/node/approval-client.mjs reports it.
type clientPart struct {
	Type, State, ToolCallID, Text, ErrorText string
	Approval                                 *struct {
		ID       string
		Approved *bool
		Reason   string
	}
	Output json.RawMessage
}

// clientView is the chat after a request: its status, error and last assistant message.
type clientView struct {
	Status    string
	Error     *string
	Messages  int
	MessageID string
	Parts     []clientPart
}

type clientPhase struct {
	ConversationID   string
	ApprovalID       string
	Requested, Final clientView
}

type clientRequest struct {
	ID, AgentID, Trigger string
	MessageID            *string
	LastMessage          struct {
		ID, Role string
		Parts    []clientPart
	}
	Status int
}

type clientSummary struct {
	Approve, Deny, Again clientPhase
	Requests             []clientRequest
}

// shape lists a message's parts as type/state.
func shape(ps []clientPart) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.Type+"/"+p.State)
	}
	return out
}

func partOf(ps []clientPart, typ string) clientPart {
	for _, p := range ps {
		if p.Type == typ {
			return p
		}
	}
	return clientPart{}
}

// TestApprovalWithAISDKClient is the "Done when", with the AI SDK v7's own chat client
// over real HTTP: ask, see the approval request, approve, see the tool's output and the final
// text; deny, and get a normal answer that carries the denial; the conversation takes new
// messages afterwards.
func TestApprovalWithAISDKClient(t *testing.T) {
	srv := runner(t, faketavily.New(nil))
	_, secret := createAccount(t, srv, "ada")
	res := call(t, srv, http.MethodPost, "/accounts/me/agents", secret, approver)
	if res.status != http.StatusCreated {
		t.Fatalf("creating the agent = %d %s, want 201", res.status, res.body)
	}
	agentID, _ := res.json(t)["agentId"].(string)
	if agentID == "" {
		t.Fatalf("the answer carries no agentId: %s", res.body)
	}

	got := approvalClient(t, srv.URL, secret, agentID)

	requested := []string{"step-start/", "tool-test_async/approval-requested"}
	for name, p := range map[string]clientPhase{"approve": got.Approve, "deny": got.Deny, "again": got.Again} {
		if diff := cmp.Diff(requested, shape(p.Requested.Parts)); diff != "" {
			t.Errorf("%s: parts after asking (-want +got):\n%s", name, diff)
		}
		if tp := partOf(p.Requested.Parts, "tool-test_async"); p.ApprovalID == "" || tp.Approval == nil || tp.Approval.ID != p.ApprovalID {
			t.Errorf("%s: tool part %+v, want the approval request %q", name, tp, p.ApprovalID)
		}
	}

	// Approved: the tool ran and the model's answer carries its output, in the same message.
	a := got.Approve.Final
	if diff := cmp.Diff([]string{"step-start/", "tool-test_async/output-available", "step-start/", "text/done"}, shape(a.Parts)); diff != "" {
		t.Errorf("approve: parts after the approval (-want +got):\n%s", diff)
	}
	tool := partOf(a.Parts, "tool-test_async")
	var output struct{ Echo string }
	if err := json.Unmarshal(tool.Output, &output); err != nil || output.Echo != "deployed" {
		t.Errorf("approve: tool output %s, want the echo deployed", tool.Output)
	}
	if tool.Approval == nil || tool.Approval.Approved == nil || !*tool.Approval.Approved || tool.Approval.ID != got.Approve.ApprovalID {
		t.Errorf("approve: tool part approval %+v, want %s approved", tool.Approval, got.Approve.ApprovalID)
	}
	if text := partOf(a.Parts, "text").Text; !strings.HasPrefix(text, "Result: ") || !strings.Contains(text, "deployed") {
		t.Errorf("approve: final text %q, want Result: with the tool's output", text)
	}
	if a.MessageID != got.Approve.Requested.MessageID || a.Messages != 2 {
		t.Errorf("approve: %d messages, last assistant %s, want 2 with the answer continuing %s", a.Messages, a.MessageID, got.Approve.Requested.MessageID)
	}

	// Denied: the tool did not run, and the model was told why.
	d := got.Deny.Final
	if diff := cmp.Diff([]string{"step-start/", "tool-test_async/output-denied", "step-start/", "text/done"}, shape(d.Parts)); diff != "" {
		t.Errorf("deny: parts after the denial (-want +got):\n%s", diff)
	}
	if tool := partOf(d.Parts, "tool-test_async"); tool.Output != nil || tool.Approval == nil || tool.Approval.Approved == nil || *tool.Approval.Approved || tool.Approval.Reason != "not today" {
		t.Errorf("deny: tool part %+v, want no output and a denial for not today", tool)
	}
	if text := partOf(d.Parts, "text").Text; !strings.Contains(text, "denied by the user: not today") {
		t.Errorf("deny: final text %q, want the denial", text)
	}

	// Usable afterwards: a new message in the denied conversation starts a new turn.
	again := got.Again.Requested
	if again.Messages != 4 || again.MessageID == d.MessageID || got.Again.ApprovalID == got.Deny.ApprovalID || got.Again.ConversationID != got.Deny.ConversationID {
		t.Errorf("again: %d messages, assistant %s, approval %s in %s; want 4, a new assistant message and a new approval than %s, %s in %s",
			again.Messages, again.MessageID, got.Again.ApprovalID, got.Again.ConversationID, d.MessageID, got.Deny.ApprovalID, got.Deny.ConversationID)
	}

	// What the AI SDK sent: a user message, then by itself the assistant message answered.
	type sent struct {
		Conversation, Trigger, MessageID, LastRole, LastTool string
		Status                                               int
	}
	var sends []sent
	for _, r := range got.Requests {
		if r.AgentID != agentID {
			t.Errorf("request %+v carries agentId %q, want %q", r, r.AgentID, agentID)
		}
		s := sent{Conversation: r.ID, Trigger: r.Trigger, LastRole: r.LastMessage.Role, Status: r.Status}
		if r.MessageID != nil {
			s.MessageID = *r.MessageID
		}
		if tp := partOf(r.LastMessage.Parts, "tool-test_async"); tp.Type != "" {
			s.LastTool = tp.State
		}
		sends = append(sends, s)
	}
	ac, dc := got.Approve.ConversationID, got.Deny.ConversationID
	want := []sent{
		{ac, "submit-message", "", "user", "", http.StatusOK},
		{ac, "submit-message", got.Approve.Requested.MessageID, "assistant", "approval-responded", http.StatusOK},
		{dc, "submit-message", "", "user", "", http.StatusOK},
		{dc, "submit-message", got.Deny.Requested.MessageID, "assistant", "approval-responded", http.StatusOK},
		{dc, "submit-message", "", "user", "", http.StatusOK},
	}
	if diff := cmp.Diff(want, sends); diff != "" {
		t.Errorf("requests the AI SDK client sent (-want +got):\n%s", diff)
	}

	// The approved conversation takes a plain message too.
	turn := call(t, srv, http.MethodPost, "/", secret, `{"agentId":"`+agentID+`","id":"`+ac+`","message":"thanks"}`)
	if turn.status != http.StatusOK {
		t.Fatalf("a new message after the approval = %d %s, want 200", turn.status, turn.body)
	}
	var types []string
	for _, c := range testenv.Chunks(t, bytes.NewReader(turn.body)) {
		types = append(types, c["type"].(string))
	}
	if !containsAll(types, "tool-approval-request", "finish") || containsAll(types, "error") {
		t.Errorf("a new message after the approval streamed %v, want a new approval request and a finish, no error", types)
	}
}

// approvalClient runs infra/node/approval-client.mjs (approve, deny, again) against the agent
// and returns what the AI SDK's chat saw, every view of it a chat at rest without error.
func approvalClient(t *testing.T, url, secret, agentID string) clientSummary {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	script := filepath.Join(testenv.Root(t), "infra", "node", "approval-client.mjs")
	cmd := exec.CommandContext(ctx, testenv.Node(t), script, url, secret, agentID)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the AI SDK client failed: %v\nstderr:\n%s\nstdout:\n%s", err, stderr.String(), stdout.String())
	}
	var got clientSummary
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("client output: %v: %s", err, stdout.String())
	}
	for name, v := range map[string]clientView{
		"approve requested": got.Approve.Requested, "approve final": got.Approve.Final,
		"deny requested": got.Deny.Requested, "deny final": got.Deny.Final, "again requested": got.Again.Requested,
	} {
		if v.Status != "ready" || v.Error != nil {
			t.Errorf("%s: chat status %q error %v, want ready without error", name, v.Status, v.Error)
		}
	}
	return got
}

func containsAll(types []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, t := range types {
			found = found || t == w
		}
		if !found {
			return false
		}
	}
	return true
}
