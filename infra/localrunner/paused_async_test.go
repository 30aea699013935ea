package localrunner_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/store"
)

// pausedAsync makes, in one step, an async call that runs in the invocation and a call that
// needs the user's approval, then answers with every result it was given.
const pausedAsync = `{
  "name": "paused-async",
  "model": {"provider": "scripted", "script": [
    {"toolCalls": [
      {"name": "test_async", "input": {"echo": "gamma", "delayMs": 50}},
      {"name": "current_time", "input": {}}
    ]},
    {"text": "Done: {{toolResults}}"}
  ]},
  "tools": {"test_async": {"async": true}, "current_time": {"needsApproval": true}}
}`

// pausedDispatch is pausedAsync with the async call handed to an outside worker.
const pausedDispatch = `{
  "name": "paused-dispatch",
  "model": {"provider": "scripted", "script": [
    {"toolCalls": [
      {"name": "test_external_async", "input": {"echo": "alpha"}},
      {"name": "current_time", "input": {}}
    ]},
    {"text": "Done: {{toolResults}}"}
  ]},
  "tools": {
    "test_external_async": {"async": true, "execution": "external-dispatch"},
    "current_time": {"needsApproval": true}
  }
}`

// stream posts body to POST / and returns the stream's chunks; it fails unless the answer is a
// 200 stream.
func (e *asyncEnv) stream(t *testing.T, body string) []map[string]any {
	t.Helper()
	res := call(t, e.srv, http.MethodPost, "/", e.secret, body)
	if res.status != http.StatusOK {
		t.Fatalf("POST / %s = %d %s, want 200", body, res.status, res.body)
	}
	return testenv.Chunks(t, bytes.NewReader(res.body))
}

// chunksOf returns the chunks of a type.
func chunksOf(cs []map[string]any, typ string) []map[string]any {
	var out []map[string]any
	for _, c := range cs {
		if c["type"] == typ {
			out = append(out, c)
		}
	}
	return out
}

// streamText is the text a stream's deltas spell.
func streamText(cs []map[string]any) string {
	var b strings.Builder
	for _, c := range chunksOf(cs, "text-delta") {
		b.WriteString(c["delta"].(string))
	}
	return b.String()
}

// checkTranscript fails unless msgs is a transcript every provider takes as stored: the results
// of each assistant message's calls follow it in the run of tool messages after it, exactly one
// per call; no tool message stands anywhere else; and each async call's result comes back in
// exactly one async-results message, after its call's results.
func checkTranscript(t *testing.T, msgs []model.Message) {
	t.Helper()
	inRun := map[int]bool{}
	seen := map[string]bool{}
	for i, m := range msgs {
		var calls []string
		for _, p := range m.Parts {
			switch {
			case p.Type == model.PartToolCall:
				calls = append(calls, p.ToolCallID)
			case p.Type == model.PartToolResult && m.Role != model.RoleTool:
				t.Errorf("message %d (%s) holds a tool result outside a tool message", i, m.Role)
			}
		}
		if len(calls) == 0 {
			continue
		}
		results := map[string]int{}
		for j := i + 1; j < len(msgs) && msgs[j].Role == model.RoleTool; j++ {
			inRun[j] = true
			for _, p := range msgs[j].Parts {
				results[p.ToolCallID]++
			}
		}
		for _, id := range calls {
			if seen[id] {
				t.Errorf("message %d: call id %s is used twice", i, id)
			}
			seen[id] = true
			if results[id] != 1 {
				t.Errorf("message %d: call %s has %d results in the tool messages after it, want 1", i, id, results[id])
			}
			delete(results, id)
		}
		for id := range results {
			t.Errorf("the tool messages after message %d answer %s, which it did not call", i, id)
		}
	}
	returned := map[string]int{}
	for i, m := range msgs {
		if m.Role == model.RoleTool && !inRun[i] {
			t.Errorf("message %d: a tool message that does not follow the calls it answers", i)
		}
		if m.Kind != model.KindAsyncResults {
			continue
		}
		if i > 0 && msgs[i-1].Role == model.RoleAssistant && slices.ContainsFunc(msgs[i-1].Parts, func(p model.Part) bool { return p.Type == model.PartToolCall }) {
			t.Errorf("message %d: async results right after a step's calls, before their results", i)
		}
		for _, r := range asyncResults(t, m) {
			returned[r.ResultID]++
		}
	}
	for id, n := range returned {
		if n != 1 {
			t.Errorf("async call %s came back in %d async-results messages, want 1", id, n)
		}
	}
}

// asyncResult is one entry of an async-results message.
type asyncResult struct {
	ResultID   string          `json:"resultId"`
	ToolCallID string          `json:"toolCallId"`
	Status     string          `json:"status"`
	Response   json.RawMessage `json:"response"`
}

func asyncResults(t *testing.T, m model.Message) []asyncResult {
	t.Helper()
	var v struct {
		AsyncToolResults []asyncResult `json:"asyncToolResults"`
	}
	if err := json.Unmarshal([]byte(m.Text()), &v); err != nil {
		t.Fatalf("async-results message %s: %v", m.Text(), err)
	}
	return v.AsyncToolResults
}

// resultsMessages returns the indexes of the async-results messages of msgs.
func resultsMessages(msgs []model.Message) []int {
	var at []int
	for i, m := range msgs {
		if m.Kind == model.KindAsyncResults {
			at = append(at, i)
		}
	}
	return at
}

// A step that makes a same-invocation async call and a call held for approval: the async result
// lands on its row while the step waits, and once the user decides it goes back to the model,
// after the decided call's result and before the model's next step, once.
func TestAsyncResultsOfAStepPausedForApproval(t *testing.T) {
	e := newAsyncEnv(t)
	agentID := e.agent(t, pausedAsync)
	ask := func(t *testing.T, conversation string) string {
		t.Helper()
		cs := e.stream(t, `{"agentId":"`+agentID+`","id":"`+conversation+`","message":"go"}`)
		reqs := chunksOf(cs, "tool-approval-request")
		if len(reqs) != 1 {
			t.Fatalf("approval requests %v, want one for current_time", reqs)
		}
		landed := chunksOf(cs, "data-async-result")
		if b, _ := json.Marshal(landed); len(landed) != 1 || !strings.Contains(string(b), "gamma") {
			t.Errorf("async results streamed %v, want test_async's with its echo gamma", landed)
		}
		return reqs[0]["approvalId"].(string)
	}
	// check requires the answer to carry both results, and the stored turn to bring the async
	// result back once, after the decided call's result and before the answer.
	check := func(t *testing.T, conversation string, cs []map[string]any, decided string) {
		t.Helper()
		answer := streamText(cs)
		if !strings.Contains(answer, `{"echo":"gamma"}`) || !strings.Contains(answer, decided) {
			t.Errorf("answer %q, want test_async's result {\"echo\":\"gamma\"} and current_time's %s", answer, decided)
		}
		if strings.Contains(answer, `"running"`) {
			t.Errorf("answer %q still shows the async call's placeholder", answer)
		}
		msgs := e.conversation(t, conversation)
		checkTranscript(t, msgs)
		at := resultsMessages(msgs)
		if len(at) != 1 {
			t.Fatalf("the conversation has %d async-results messages, want 1: %v", len(at), roles(msgs))
		}
		if want := []string{"user/", "assistant/", "tool/", "tool/", "user/async-results", "assistant/"}; !slices.Equal(roles(msgs), want) {
			t.Errorf("stored messages %v, want %v", roles(msgs), want)
		}
		if rs := asyncResults(t, msgs[at[0]]); len(rs) != 1 || rs[0].Status != "completed" || string(rs[0].Response) != `{"echo":"gamma"}` {
			t.Errorf("async results %+v, want test_async's completed result", rs)
		}
	}

	t.Run("approved", func(t *testing.T) {
		id := ask(t, "paused-async-1")
		cs := e.stream(t, `{"agentId":"`+agentID+`","id":"paused-async-1","approvals":[{"approvalId":"`+id+`","approved":true}]}`)
		if outs := chunksOf(cs, "tool-output-available"); len(outs) != 1 {
			t.Errorf("tool outputs %v, want current_time's", outs)
		}
		check(t, "paused-async-1", cs, `"20`)
		// Deciding again is refused and brings nothing back a second time.
		res := call(t, e.srv, http.MethodPost, "/", e.secret, `{"agentId":"`+agentID+`","id":"paused-async-1","approvals":[{"approvalId":"`+id+`","approved":true}]}`)
		if res.status != http.StatusConflict {
			t.Errorf("deciding again = %d %s, want 409", res.status, res.body)
		}
		checkTranscript(t, e.conversation(t, "paused-async-1"))
	})

	t.Run("denied", func(t *testing.T) {
		id := ask(t, "paused-async-2")
		cs := e.stream(t, `{"agentId":"`+agentID+`","id":"paused-async-2","approvals":[{"approvalId":"`+id+`","approved":false,"reason":"not now"}]}`)
		check(t, "paused-async-2", cs, "denied by the user: not now")
	})

	t.Run("denied by a new message", func(t *testing.T) {
		ask(t, "paused-async-3")
		// The new message starts the script over: its step pauses again, and is denied.
		cs := e.stream(t, `{"agentId":"`+agentID+`","id":"paused-async-3","message":"never mind","onPendingApprovals":"deny"}`)
		reqs := chunksOf(cs, "tool-approval-request")
		if len(reqs) != 1 {
			t.Fatalf("approval requests of the new message %v, want one", reqs)
		}
		e.stream(t, `{"agentId":"`+agentID+`","id":"paused-async-3","approvals":[{"approvalId":"`+reqs[0]["approvalId"].(string)+`","approved":false}]}`)
		msgs := e.conversation(t, "paused-async-3")
		checkTranscript(t, msgs)
		want := []string{"user/", "assistant/", "tool/", "tool/", "user/async-results", "user/", "assistant/", "tool/", "tool/", "user/async-results", "assistant/"}
		if !slices.Equal(roles(msgs), want) {
			t.Errorf("stored messages %v, want %v: the async result comes back before the new message", roles(msgs), want)
		}
	})
}

// The same over /async with the async call handed to an outside worker: whichever comes first,
// the decision or the worker's result, the model answers once both are in, with both results.
func TestAsyncDispatchOfAStepPausedForApproval(t *testing.T) {
	e := newAsyncEnv(t)
	agentID := e.agent(t, pausedDispatch)
	ask := func(t *testing.T) (started, pendingApproval, job) {
		t.Helper()
		ev := e.async(t, `{"agentId":"`+agentID+`","message":"go"}`)
		waiting, _ := e.waitStatus(t, ev.EventID, store.EventWaiting)
		if len(waiting.PendingApprovals) != 1 || waiting.PendingApprovals[0].ToolName != "current_time" {
			t.Fatalf("pendingApprovals %+v, want current_time's", waiting.PendingApprovals)
		}
		return ev, waiting.PendingApprovals[0], e.jobs(t, 1)[0]
	}
	approve := func(t *testing.T, ev started, p pendingApproval) {
		t.Helper()
		e.async(t, `{"agentId":"`+agentID+`","id":"`+ev.ConversationID+`","eventId":"`+ev.EventID+`","approvals":[{"approvalId":"`+p.ApprovalID+`","approved":true}]}`)
	}
	check := func(t *testing.T, ev started, final status, j job) {
		t.Helper()
		if !strings.Contains(text(final), `{"echo":"ALPHA"}`) || !strings.Contains(text(final), `"20`) {
			t.Errorf("final text %q, want the worker's ALPHA and current_time's result", text(final))
		}
		msgs := e.conversation(t, ev.ConversationID)
		checkTranscript(t, msgs)
		if results, answers := resultsFor(msgs, groupOf(t, j.ResultID)); results != 1 || answers != 1 {
			t.Errorf("%d async-results messages for the worker's call and %d answers after them, want 1 and 1: %v", results, answers, roles(msgs))
		}
		if want := []string{"user/", "assistant/", "tool/", "tool/", "user/async-results", "assistant/"}; !slices.Equal(roles(msgs), want) {
			t.Errorf("stored messages %v, want %v", roles(msgs), want)
		}
	}

	t.Run("approved, then completed", func(t *testing.T) {
		ev, p, j := ask(t)
		approve(t, ev, p)
		waiting, _ := e.waitStatus(t, ev.EventID, store.EventWaitingAsync)
		if len(waiting.PendingAsyncTools) != 1 || waiting.PendingAsyncTools[0].ResultID != j.ResultID {
			t.Errorf("after the decision the turn waits for %+v, want the worker's call %s", waiting.PendingAsyncTools, j.ResultID)
		}
		if res := e.complete(t, j); res.status != http.StatusOK {
			t.Fatalf("completing the job = %d %s, want 200 (its group complete)", res.status, res.body)
		}
		final, _ := e.waitStatus(t, ev.EventID, store.EventCompleted)
		check(t, ev, final, j)
	})

	t.Run("completed, then approved", func(t *testing.T) {
		ev, p, j := ask(t)
		if res := e.complete(t, j); res.status/100 != 2 {
			t.Fatalf("completing the job = %d %s", res.status, res.body)
		}
		if st := e.status(t, ev.EventID); st.Status != store.EventWaiting {
			t.Errorf("after the worker's result the turn is %s, want still waiting for the approval", st.raw)
		}
		approve(t, ev, p)
		final, _ := e.waitStatus(t, ev.EventID, store.EventCompleted)
		check(t, ev, final, j)
	})
}

// roles lists messages as role/kind.
func roles(msgs []model.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Role)+"/"+m.Kind)
	}
	return out
}
