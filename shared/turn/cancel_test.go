package turn_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/turn"
	"github.com/google/go-cmp/cmp"
)

// BeginCancel ends a turn held for approval: its pending call is denied as cancelled, the paused
// step closes without another model call, and the turn ends aborted. With nothing pending, or
// with the conversation busy, there is nothing to cancel.
func TestBeginCancel(t *testing.T) {
	e := newEngineEnv(t)
	start := func(conv, agentID string) turn.Start {
		t.Helper()
		req := turn.Request{ConversationID: conv, AgentID: agentID}
		cfg, err := e.Agent(e.ctx, e.account, req, false)
		if err != nil {
			t.Fatal(err)
		}
		return turn.Start{AccountID: e.account, Request: req, Config: cfg}
	}
	nothing := func(what string, s turn.Start) {
		t.Helper()
		if r, err := e.BeginCancel(e.ctx, s); r != nil || err != nil {
			t.Fatalf("BeginCancel %s = %v, %v; want nothing to cancel", what, r, err)
		}
	}

	e.run(turn.Request{ConversationID: "c-done", AgentID: "plain"}, says("hi"))
	nothing("of a finished turn", start("c-done", "plain"))

	held := e.held("c-cancel")
	lease, err := e.store.TakeLease(e.ctx, e.account, "c-cancel", "asker", time.Now(), time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	nothing("while another request holds the conversation", start("c-cancel", "asker"))
	if err := lease.Release(e.ctx); err != nil {
		t.Fatal(err)
	}

	before, calls := e.history("c-cancel"), e.calls()
	r, err := e.BeginCancel(e.ctx, start("c-cancel", "asker"))
	if err != nil || r == nil {
		t.Fatalf("BeginCancel of the held turn = %v, %v; want a run", r, err)
	}
	o := r.Execute(e.ctx)
	if err := r.Finish(e.ctx, o, nil); err != nil {
		t.Fatal(err)
	}
	if o.Status != turn.StatusCancelled || o.Error != turn.AbortedTurnText {
		t.Errorf("the cancelled turn ended %s (%q), want cancelled, aborted", o.Status, o.Error)
	}
	if n := e.calls() - calls; n != 0 {
		t.Errorf("cancelling called the model %d times, want never", n)
	}
	a, err := e.store.Approval(e.ctx, e.account, held.ApprovalID)
	if err != nil || a.Status != store.ApprovalDenied || !strings.Contains(a.Reason, "aborted") {
		t.Errorf("approval %s is %s (%q, %v), want denied as aborted", held.ApprovalID, a.Status, a.Reason, err)
	}
	// The paused call gets its result, a denial: the conversation holds no call without one,
	// and nothing the model said after.
	after := e.history("c-cancel")
	if len(after) != len(before)+1 {
		t.Fatalf("cancelling added %d messages, want the call's result only: %v", len(after)-len(before), texts(after))
	}
	last := after[len(after)-1]
	if last.Role != model.RoleTool || len(last.Parts) != 1 || last.Parts[0].ToolCallID != held.ToolCallID || !last.Parts[0].IsError {
		t.Errorf("the last message is %+v, want the held call's result as an error", last)
	}
	nothing("once it was cancelled", start("c-cancel", "asker"))
}

// CancelGroup settles the running calls of a turn's dispatch group as cancelled, so a late
// answer is refused, and the last settlement re-drives the turn once. A group of another turn,
// or of another account, is left alone.
func TestCancelGroup(t *testing.T) {
	e := newEngineEnv(t)
	group, resultID := e.dispatched("c-group", "ev_group")
	for _, tt := range []struct{ what, accountID, eventID string }{
		{"of another turn", e.account, "ev_other"},
		{"of another account", e.otherAccount(), "ev_group"},
	} {
		if err := e.CancelGroup(e.ctx, tt.accountID, group, tt.eventID); err != nil {
			t.Fatalf("CancelGroup %s: %v", tt.what, err)
		}
		if s := e.row(resultID).Status; s != asynctools.Running {
			t.Fatalf("after CancelGroup %s the call is %s, want still running", tt.what, s)
		}
	}
	if sent := e.sentGroups(); len(sent) != 0 {
		t.Fatalf("continuations %v sent before the cancel, want none", sent)
	}

	if err := e.CancelGroup(e.ctx, e.account, group, "ev_group"); err != nil {
		t.Fatalf("CancelGroup: %v", err)
	}
	if row := e.row(resultID); row.Status != asynctools.Cancelled || !strings.Contains(row.Error, "aborted") {
		t.Errorf("the call is %s (%q), want cancelled as aborted", row.Status, row.Error)
	}
	if diff := cmp.Diff([]string{group}, e.sentGroups()); diff != "" {
		t.Errorf("continuations sent (-want +got):\n%s", diff)
	}

	if err := e.answer(resultID, `"too late"`); err == nil || !strings.Contains(err.Error(), "aborted") {
		t.Errorf("a late answer = %v, want it refused as aborted", err)
	}
	// Cancelling again finds nothing running: no second re-drive.
	if err := e.CancelGroup(e.ctx, e.account, group, "ev_group"); err != nil {
		t.Fatalf("CancelGroup again: %v", err)
	}
	if s := e.row(resultID).Status; s != asynctools.Cancelled {
		t.Errorf("after the late answer and a second cancel the call is %s, want cancelled", s)
	}
	if diff := cmp.Diff([]string{group}, e.sentGroups()); diff != "" {
		t.Errorf("continuations sent after cancelling again (-want +got):\n%s", diff)
	}
}
