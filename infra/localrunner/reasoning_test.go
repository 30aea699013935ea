package localrunner_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/google/go-cmp/cmp"
)

// thinker reasons before each step: a call a person must approve, a call an outside worker
// answers, and a structured answer. The scripted model, like a reasoning provider, refuses a
// step whose earlier steps come back without their reasoning and its signature, so the turn
// only ends when every step's reasoning was kept across the approval and the async wait.
const thinker = `{"name":"thinker","model":{"provider":"scripted","script":[
  {"reasoning":"A deploy needs a person's yes first.","toolCalls":[{"name":"test_async","input":{"echo":"deployed","delayMs":0}}]},
  {"reasoning":"Deployed; now the worker checks it.","toolCalls":[{"name":"test_external_async","input":{"echo":"checked"}}]},
  {"reasoning":"Both done: answer as the schema asks.","text":"{\"status\":\"done\"}"}]},
 "tools":{"test_async":{"needsApproval":true},"test_external_async":{"async":true,"execution":"external-dispatch"}},
 "output":{"schema":{"type":"object","properties":{"status":{"type":"string"}},"required":["status"]}}}`

// reasonings are the texts of a UIMessage's reasoning parts, in order.
func reasonings(msg map[string]any) []string {
	var out []string
	for _, p := range msg["parts"].([]any) {
		if part := p.(map[string]any); part["type"] == "reasoning" {
			out = append(out, part["text"].(string))
		}
	}
	return out
}

// Reasoning over SSE: the AI SDK's own stream reader builds a reasoning part before each step's
// answer and the data-output part after it, the conversation read back is that same list, the
// signatures stay with the harness, and the finish reports the reasoning tokens.
func TestReasoningReachesTheChatClient(t *testing.T) {
	e := newAsyncEnv(t)
	agentID := e.agent(t, `{"name":"pondering","model":{"provider":"scripted","script":[
	  {"reasoning":"The user wants the time.","toolCalls":[{"name":"current_time","input":{}}]},
	  {"reasoning":"I have it; answer in the schema's shape.","text":"{\"status\":\"told\"}"}]},
	 "tools":{"current_time":{}},
	 "output":{"schema":{"type":"object","properties":{"status":{"type":"string"}},"required":["status"]}}}`)
	c := &chatClient{e: e, agentID: agentID, id: "reasoning-chat"}
	user := map[string]any{"id": "u-reasoning", "role": "user", "parts": []any{map[string]any{"type": "text", "text": "what time is it?"}}}
	body := c.post(t, map[string]any{"id": c.id, "agentId": agentID, "trigger": "submit-message", "messages": []any{user}})
	msg := read(t, nil, body)
	c.list = append(c.list, user, msg)

	if diff := cmp.Diff([]string{"The user wants the time.", "I have it; answer in the schema's shape."}, reasonings(msg)); diff != "" {
		t.Fatalf("reasoning parts of the streamed message (-want +got):\n%s\n%v", diff, msg)
	}
	want := []string{"step-start", "reasoning", "tool-current_time", "step-start", "reasoning", "text", "data-output"}
	if diff := cmp.Diff(want, partTypes(msg)); diff != "" {
		t.Errorf("parts of the streamed message (-want +got):\n%s", diff)
	}
	if bytes.Contains(body, []byte("scripted:")) {
		t.Errorf("the stream carries a reasoning signature, which is the model's only:\n%s", body)
	}
	meta, _ := msg["metadata"].(map[string]any)
	usage, _ := meta["usage"].(map[string]any)
	details, _ := usage["outputTokenDetails"].(map[string]any)
	if n, _ := details["reasoningTokens"].(float64); n <= 0 {
		t.Errorf("the finish's usage reports no reasoning tokens: %v", usage)
	}

	c.checkReadBack(t)
}

// Reasoning across waits: a turn whose steps reason goes on after a wait for approval and a
// wait for an outside worker, each continued by another request from the stored conversation,
// and its /status counts the reasoning tokens of all of its steps.
func TestReasoningKeptAcrossWaits(t *testing.T) {
	e := newAsyncEnv(t)
	agentID := e.agent(t, thinker)
	x, p := e.askApproval(t, `{"agentId":"`+agentID+`","message":"deploy and check"}`)
	y := e.async(t, `{"agentId":"`+agentID+`","id":"`+x.ConversationID+`","eventId":"`+x.EventID+`-yes","approvals":[{"approvalId":"`+p.ApprovalID+`","approved":true}]}`)
	e.waitStatus(t, y.EventID, store.EventWaitingAsync)
	jobs := e.jobs(t, 1)
	if res := e.complete(t, jobs[0]); res.status != http.StatusOK && res.status != http.StatusAccepted {
		t.Fatalf("completing the job = %d %s", res.status, res.body)
	}
	final, _ := e.waitStatus(t, y.EventID, store.EventCompleted)
	var s struct {
		Output json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal([]byte(final.raw), &s); err != nil || string(s.Output) != `{"status":"done"}` {
		t.Errorf("the status's output = %s, want the structured answer: %s", s.Output, final.raw)
	}
	var kept []string
	for _, m := range e.conversation(t, x.ConversationID) {
		for _, part := range m.Parts {
			if part.Type == model.PartReasoning {
				if part.Signature == "" || part.Provider != "scripted" {
					t.Errorf("reasoning %q was stored without its signature or provider: %+v", part.Text, part)
				}
				kept = append(kept, part.Text)
			}
		}
	}
	if len(kept) != 3 {
		t.Errorf("the conversation keeps reasoning %q, want the three steps'", kept)
	}
	if final.Usage.OutputTokenDetails.ReasoningTokens <= 0 {
		t.Errorf("the status's usage reports no reasoning tokens: %s", final.raw)
	}
}
