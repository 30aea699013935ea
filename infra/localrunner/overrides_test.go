package localrunner_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/state/store"
)

// dispatchThenTime hands a job to the outside worker and ends its pass; then, in the
// continuation that brings the job's result back, it calls current_time, whose approval policy
// (%s) the tests set.
const dispatchThenTime = `{
  "name": "dispatch-then-time",
  "model": {"provider": "scripted", "script": [
    {"toolCalls": [{"name": "test_external_async", "input": {"echo": "alpha"}}]},
    {"text": "Waiting for the worker."},
    {"toolCalls": [{"name": "current_time", "input": {}}]},
    {"text": "Done: {{toolResults}}"}
  ]},
  "tools": {
    "test_external_async": {"async": true, "execution": "external-dispatch"},
    "current_time": %s
  }
}`

// The toolApproval of the request that started a turn holds in the continuation that async-worker
// runs once the turn's outside work has completed: a loosening the policy allows, and a
// tightening.
func TestToolApprovalHoldsInTheContinuation(t *testing.T) {
	e := newAsyncEnv(t)
	// run starts a turn with override, completes its job through the completion route, and
	// returns the event once the continuation has run to want.
	run := func(t *testing.T, policy, override, want string) (agentID string, ev started, st status) {
		t.Helper()
		agentID = e.agent(t, strings.Replace(dispatchThenTime, "%s", policy, 1))
		ev = e.async(t, `{"agentId":"`+agentID+`","message":"go","toolApproval":`+override+`}`)
		e.waitStatus(t, ev.EventID, store.EventWaitingAsync)
		if res := e.complete(t, e.jobs(t, 1)[0]); res.status != http.StatusOK {
			t.Fatalf("completing the job = %d %s, want 200", res.status, res.body)
		}
		st, _ = e.waitStatus(t, ev.EventID, want)
		return agentID, ev, st
	}

	t.Run("loosened", func(t *testing.T) {
		_, _, final := run(t, `{"needsApproval": {"allowRequestOverride": true}}`, `{"current_time":"approved"}`, store.EventCompleted)
		if !strings.Contains(text(final), "ALPHA") || !strings.Contains(text(final), `"20`) {
			t.Errorf("final text %q, want the worker's ALPHA and current_time's result", text(final))
		}
	})

	t.Run("tightened", func(t *testing.T) {
		agentID, ev, waiting := run(t, `{}`, `{"current_time":"user-approval"}`, store.EventWaiting)
		if len(waiting.PendingApprovals) != 1 || waiting.PendingApprovals[0].ToolName != "current_time" {
			t.Fatalf("pendingApprovals %+v, want current_time's", waiting.PendingApprovals)
		}
		e.async(t, `{"agentId":"`+agentID+`","id":"`+ev.ConversationID+`","eventId":"`+ev.EventID+`","approvals":[{"approvalId":"`+waiting.PendingApprovals[0].ApprovalID+`","approved":true}]}`)
		final, _ := e.waitStatus(t, ev.EventID, store.EventCompleted)
		if !strings.Contains(text(final), "ALPHA") || !strings.Contains(text(final), `"20`) {
			t.Errorf("final text %q, want the worker's ALPHA and current_time's result", text(final))
		}
	})
}
