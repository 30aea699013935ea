package localrunner_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/store"
)

// resumedBy is the resumedBy field of a status answer.
func resumedBy(t *testing.T, s status) string {
	t.Helper()
	var v struct {
		ResumedBy string `json:"resumedBy"`
	}
	if err := json.Unmarshal([]byte(s.raw), &v); err != nil {
		t.Fatalf("decoding %s: %v", s.raw, err)
	}
	return v.ResumedBy
}

// askApproval starts an /async turn and waits until it pauses for one approval.
func (e *asyncEnv) askApproval(t *testing.T, body string) (started, pendingApproval) {
	t.Helper()
	ev := e.async(t, body)
	waiting, _ := e.waitStatus(t, ev.EventID, store.EventWaiting)
	if len(waiting.PendingApprovals) != 1 {
		t.Fatalf("pendingApprovals = %+v, want one: %s", waiting.PendingApprovals, waiting.raw)
	}
	return ev, waiting.PendingApprovals[0]
}

// checkTurnOf checks that the status of the event that paused covers the whole turn: from the
// user's message that started it to the answer, which carries want.
func checkTurnOf(t *testing.T, st status, want string) {
	t.Helper()
	if st.Text == nil || !strings.Contains(*st.Text, want) {
		t.Errorf("text of %s = %v, want the turn's answer with %q: %s", st.EventID, st.Text, want, st.raw)
	}
	if len(st.Messages) < 3 || st.Messages[0].Role != model.RoleUser || st.Messages[len(st.Messages)-1].Role != model.RoleAssistant {
		t.Errorf("messages of %s = %v, want the turn from its user message to the answer: %s", st.EventID, roles(st.Messages), st.raw)
	}
}

// TestAsyncApprovalAnsweredUnderAnotherEvent: a turn paused for approval under event X and
// answered under another event Y ends under Y, and X reports that end too, with resumedBy Y,
// instead of waiting for approval for ever.
func TestAsyncApprovalAnsweredUnderAnotherEvent(t *testing.T) {
	e := newAsyncEnv(t)
	agentID := e.agent(t, asyncApprover)

	t.Run("approved via POST /async under a new event", func(t *testing.T) {
		x, p := e.askApproval(t, `{"agentId":"`+agentID+`","message":"deploy"}`)
		yID := x.EventID + "-answer"
		y := e.async(t, `{"agentId":"`+agentID+`","id":"`+x.ConversationID+`","eventId":"`+yID+`","approvals":[{"approvalId":"`+p.ApprovalID+`","approved":true}]}`)
		if y.EventID != yID {
			t.Fatalf("the answer runs as %s, want %s", y.EventID, yID)
		}
		ys, _ := e.waitStatus(t, yID, store.EventCompleted)
		if ys.Text == nil || !strings.Contains(*ys.Text, "deployed") {
			t.Errorf("Y's text %v, want the answer with the tool's output: %s", ys.Text, ys.raw)
		}
		xs := e.status(t, x.EventID)
		if xs.Status != store.EventCompleted {
			t.Fatalf("X after the turn ended under Y is %s, want completed: %s", xs.Status, xs.raw)
		}
		if got := resumedBy(t, xs); got != yID {
			t.Errorf("X's resumedBy = %q, want %q", got, yID)
		}
		checkTurnOf(t, xs, "deployed")
		if len(xs.PendingApprovals) != 0 {
			t.Errorf("X still lists pendingApprovals: %s", xs.raw)
		}
		// X is settled: answering under it again is refused naming its status.
		res := call(t, e.srv, http.MethodPost, "/async", e.secret, `{"agentId":"`+agentID+`","id":"`+x.ConversationID+`","eventId":"`+x.EventID+`","approvals":[{"approvalId":"`+p.ApprovalID+`","approved":true}]}`)
		if res.status != http.StatusConflict {
			t.Errorf("answering again under X = %d %s, want 409", res.status, res.body)
		}
	})

	t.Run("denied via POST / without an event id", func(t *testing.T) {
		x, p := e.askApproval(t, `{"agentId":"`+agentID+`","message":"deploy"}`)
		chunks := e.stream(t, `{"agentId":"`+agentID+`","id":"`+x.ConversationID+`","approvals":[{"approvalId":"`+p.ApprovalID+`","approved":false,"reason":"not today"}]}`)
		if len(chunksOf(chunks, "finish")) != 1 {
			t.Fatalf("the answer's stream has no finish: %v", chunks)
		}
		xs := e.status(t, x.EventID)
		if xs.Status != store.EventCompleted {
			t.Fatalf("X after the turn ended over POST / is %s, want completed: %s", xs.Status, xs.raw)
		}
		if got := resumedBy(t, xs); got != "" {
			t.Errorf("X's resumedBy = %q, want none (the answer had no event id)", got)
		}
		checkTurnOf(t, xs, "denied by the user: not today")
	})

	t.Run("only a waiting event is settled", func(t *testing.T) {
		// Two turns pause; the first's event is settled meanwhile (here as failed, by hand),
		// then both are answered under new events. Only the one still waiting takes the end.
		settled, p1 := e.askApproval(t, `{"agentId":"`+agentID+`","message":"deploy"}`)
		waiting, p2 := e.askApproval(t, `{"agentId":"`+agentID+`","message":"deploy"}`)
		detail := json.RawMessage(`{"error":"settled elsewhere"}`)
		if err := e.store.UpdateEvent(context.Background(), e.accountID, settled.EventID, store.StatusUpdate{Status: store.EventFailed, Detail: detail, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		y1 := e.async(t, `{"agentId":"`+agentID+`","id":"`+settled.ConversationID+`","approvals":[{"approvalId":"`+p1.ApprovalID+`","approved":true}]}`)
		y2 := e.async(t, `{"agentId":"`+agentID+`","id":"`+waiting.ConversationID+`","approvals":[{"approvalId":"`+p2.ApprovalID+`","approved":true}]}`)
		e.waitStatus(t, y1.EventID, store.EventCompleted)
		e.waitStatus(t, y2.EventID, store.EventCompleted)

		xs := e.status(t, settled.EventID)
		if xs.Status != store.EventFailed || xs.Error != "settled elsewhere" || resumedBy(t, xs) != "" {
			t.Errorf("the settled event was rewritten: %s", xs.raw)
		}
		ws := e.status(t, waiting.EventID)
		if ws.Status != store.EventCompleted || resumedBy(t, ws) != y2.EventID {
			t.Errorf("the waiting event is %s, want completed with resumedBy %s", ws.raw, y2.EventID)
		}
	})
}

// TestAsyncApprovalAnsweredUnderAnotherEventThenContinued: the step answered under Y goes on to
// wait for an outside worker; X shows the wait (resumedBy Y), then, once async-worker's
// continuation has completed Y, the turn's answer.
func TestAsyncApprovalAnsweredUnderAnotherEventThenContinued(t *testing.T) {
	e := newAsyncEnv(t)
	agentID := e.agent(t, pausedDispatch)
	x, p := e.askApproval(t, `{"agentId":"`+agentID+`","message":"go"}`)
	j := e.jobs(t, 1)[0]
	y := e.async(t, `{"agentId":"`+agentID+`","id":"`+x.ConversationID+`","approvals":[{"approvalId":"`+p.ApprovalID+`","approved":true}]}`)
	if y.EventID == x.EventID {
		t.Fatalf("the answer runs under X %s, want an event of its own", x.EventID)
	}
	e.waitStatus(t, y.EventID, store.EventWaitingAsync)
	xs := e.status(t, x.EventID)
	if xs.Status != store.EventWaitingAsync || resumedBy(t, xs) != y.EventID {
		t.Errorf("X while Y waits for the worker = %s, want waiting_for_async_tools with resumedBy %s", xs.raw, y.EventID)
	}
	if len(xs.PendingAsyncTools) != 1 || xs.PendingAsyncTools[0].ResultID != j.ResultID {
		t.Errorf("X's pendingAsyncTools %+v, want the worker's call %s", xs.PendingAsyncTools, j.ResultID)
	}
	if res := e.complete(t, j); res.status != http.StatusOK {
		t.Fatalf("completing the job = %d %s, want 200 (its group complete)", res.status, res.body)
	}
	e.waitStatus(t, y.EventID, store.EventCompleted)
	xs = e.status(t, x.EventID)
	if xs.Status != store.EventCompleted || resumedBy(t, xs) != y.EventID {
		t.Fatalf("X after Y's continuation = %s, want completed with resumedBy %s", xs.raw, y.EventID)
	}
	checkTurnOf(t, xs, `{"echo":"ALPHA"}`)
	if want := []string{"user/", "assistant/", "tool/", "tool/", "user/async-results", "assistant/"}; !slices.Equal(roles(xs.Messages), want) {
		t.Errorf("X's messages %v, want the whole turn %v", roles(xs.Messages), want)
	}
}
