package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/google/go-cmp/cmp"
)

func held(id string, now time.Time) store.Approval {
	return store.Approval{ID: id, AgentID: "agent", ToolCallID: "call-" + id, ToolName: "t", Input: []byte(`{}`),
		ArgsHash: "h", CreatedAt: now, Deadline: now.Add(time.Hour)}
}

// A pause writes the step, the approvals and the wait together or not at all; settlements are
// single use, bounded by the deadline, and fenced on the lease; the next append clears the wait.
func TestPauseSettleAndResolve(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	// Now, not a fixed date: DynamoDB Local deletes items whose TTL has passed.
	t0 := time.Now().UTC().Truncate(time.Second)

	turn, err := s.TakeLease(ctx, "acc", "c", "agent", t0, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	step := text(model.RoleAssistant, "calls")
	if err := turn.Pause(ctx, []model.Message{step}, []store.Approval{held("a1", t0), held("a2", t0)}, store.Handover{}); err != nil {
		t.Fatal(err)
	}
	if err := turn.End(ctx, model.Usage{}); err != nil {
		t.Fatal(err)
	}

	// A second pause reusing an approval id writes nothing, not even its message.
	turn, err = s.TakeLease(ctx, "acc", "c", "agent", t0, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a1", "a2"}, turn.Pending()); diff != "" {
		t.Fatalf("Pending (-want +got):\n%s", diff)
	}
	if err := turn.Pause(ctx, []model.Message{text(model.RoleAssistant, "dup")}, []store.Approval{held("a1", t0)}, store.Handover{}); err == nil {
		t.Fatal("a pause reusing approval a1 succeeded")
	}
	if msgs, _ := turn.History(ctx); len(msgs) != 1 {
		t.Fatalf("history after the refused pause has %d messages, want 1", len(msgs))
	}

	// Expiring before the deadline, or deciding after it, is refused, all or none.
	err = turn.Settle(ctx, []store.Settlement{{ApprovalID: "a1", Status: store.ApprovalApproved}, {ApprovalID: "a2", Status: store.ApprovalExpired}}, t0.Add(time.Minute))
	var conflict *store.ApprovalConflictError
	if !errors.As(err, &conflict) || conflict.ApprovalID != "a2" {
		t.Fatalf("expiring a2 before its deadline = %v, want a conflict on a2", err)
	}
	if a, _ := s.Approval(ctx, "acc", "a1"); a.Status != store.ApprovalPending {
		t.Fatalf("a1 is %s after a refused transaction, want pending", a.Status)
	}
	if err := turn.Settle(ctx, []store.Settlement{{ApprovalID: "a1", Status: store.ApprovalApproved}}, t0.Add(2*time.Hour)); !errors.As(err, &conflict) {
		t.Fatalf("approving after the deadline = %v, want a conflict", err)
	}
	if err := turn.Settle(ctx, []store.Settlement{{ApprovalID: "a1", Status: store.ApprovalApproved, Reason: "ok"}}, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	err = turn.Settle(ctx, []store.Settlement{{ApprovalID: "a1", Status: store.ApprovalDenied}}, t0.Add(time.Minute))
	if !errors.As(err, &conflict) || conflict.Status != store.ApprovalApproved {
		t.Fatalf("deciding a1 twice = %v, want a conflict reporting approved", err)
	}
	if err := turn.Settle(ctx, []store.Settlement{{ApprovalID: "a2", Status: store.ApprovalExpired}}, t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	got, err := s.Approvals(ctx, "acc", []string{"a1", "a2", "missing"})
	if err != nil {
		t.Fatal(err)
	}
	if got["a1"].Status != store.ApprovalApproved || got["a1"].Reason != "ok" || got["a2"].Status != store.ApprovalExpired || len(got) != 2 {
		t.Fatalf("Approvals = %+v, want a1 approved (ok), a2 expired, nothing for missing", got)
	}
	if _, err := s.Approval(ctx, "other-account", "a1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another account reading a1 = %v, want ErrNotFound", err)
	}

	// Appending the results clears the wait.
	if err := turn.Append(ctx, text(model.RoleTool, "results")); err != nil {
		t.Fatal(err)
	}
	if err := turn.End(ctx, model.Usage{}); err != nil {
		t.Fatal(err)
	}
	turn, err = s.TakeLease(ctx, "acc", "c", "agent", t0, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if p := turn.Pending(); len(p) != 0 {
		t.Errorf("Pending after the results were appended = %v, want none", p)
	}

	// A settlement by a turn that lost its lease is refused.
	late, err := s.TakeLease(ctx, "acc", "c2", "agent", t0, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := late.Pause(ctx, []model.Message{step}, []store.Approval{held("b1", t0)}, store.Handover{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TakeLease(ctx, "acc", "c2", "agent", t0.Add(2*time.Minute), t0.Add(3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := late.Settle(ctx, []store.Settlement{{ApprovalID: "b1", Status: store.ApprovalApproved}}, t0.Add(2*time.Minute)); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("settling with a lost lease = %v, want ErrLeaseLost", err)
	}
}

// A pause carries the turn's overrides and its pass's async calls to the turn that resumes it.
// The resume's first append clears the calls (it carries their results) and keeps the overrides;
// a resume that must wait for the calls appends and waits in one write, which clears the pause.
func TestPauseCarriesToTheResume(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	t0 := time.Now().UTC().Truncate(time.Second)
	carry := store.Handover{ToolApproval: map[string]string{"t": "user-approval"}, PausedGroup: "ag_g", PausedAsync: []string{"ag_g.1", "ag_g.2"}}
	pause := func(t *testing.T, conv, approvalID string) *store.Lease {
		t.Helper()
		turn, err := s.TakeLease(ctx, "acc", conv, "agent", t0, t0.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if err := turn.Pause(ctx, []model.Message{text(model.RoleAssistant, "calls")}, []store.Approval{held(approvalID, t0)}, carry); err != nil {
			t.Fatal(err)
		}
		if err := turn.End(ctx, model.Usage{}); err != nil {
			t.Fatal(err)
		}
		turn, err = s.TakeLease(ctx, "acc", conv, "agent", t0, t0.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(carry, turn.Handover()); diff != "" {
			t.Fatalf("carried to the resume (-want +got):\n%s", diff)
		}
		return turn
	}
	reopen := func(t *testing.T, turn *store.Lease, conv string) *store.Lease {
		t.Helper()
		if err := turn.End(ctx, model.Usage{}); err != nil {
			t.Fatal(err)
		}
		turn, err := s.TakeLease(ctx, "acc", conv, "agent", t0, t0.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		return turn
	}

	t.Run("append", func(t *testing.T) {
		turn := pause(t, "carry-1", "c1")
		if err := turn.Append(ctx, text(model.RoleTool, "results"), text(model.RoleUser, "async results")); err != nil {
			t.Fatal(err)
		}
		turn = reopen(t, turn, "carry-1")
		if diff := cmp.Diff(store.Handover{ToolApproval: carry.ToolApproval}, turn.Handover()); diff != "" {
			t.Errorf("carried after the resume's append (-want +got):\n%s", diff)
		}
		if len(turn.Pending()) != 0 {
			t.Errorf("Pending after the resume's append = %v, want none", turn.Pending())
		}
	})

	t.Run("append and wait", func(t *testing.T) {
		turn := pause(t, "carry-2", "c2")
		if err := turn.WaitForAsync(ctx, "ag_g", []string{"ag_g.1", "ag_g.2", "ag_g.3"}, nil, text(model.RoleTool, "results")); err != nil {
			t.Fatal(err)
		}
		turn = reopen(t, turn, "carry-2")
		if diff := cmp.Diff(store.Handover{}, turn.Handover()); diff != "" {
			t.Errorf("carried after waiting without overrides (-want +got):\n%s", diff)
		}
		group, ids := turn.AsyncGroup()
		if group != "ag_g" || len(ids) != 3 || len(turn.Pending()) != 0 {
			t.Errorf("waits for %s %v with approvals %v pending, want ag_g's three calls and no approval", group, ids, turn.Pending())
		}
		if msgs, _ := turn.History(ctx); len(msgs) != 2 {
			t.Errorf("history has %d messages, want the step and its results", len(msgs))
		}
	})
}

// A pause carries the event it was reported under to the turn that resumes it, and the first
// append after it clears it; the event is then settled only while it still waits for approval.
func TestPausedEventIsCarriedAndSettledOnce(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	t0 := time.Now().UTC().Truncate(time.Second)
	for _, id := range []string{"evt_x", "evt_done"} {
		if err := s.ClaimEvent(ctx, "acc", id, "c", "", t0, time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := s.UpdateEvent(ctx, "acc", id, store.StatusUpdate{Status: store.EventWaiting, FromSeq: 1, ToSeq: 2, At: t0}); err != nil {
			t.Fatal(err)
		}
	}

	turn, err := s.TakeLease(ctx, "acc", "c", "agent", t0, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := turn.Pause(ctx, []model.Message{text(model.RoleAssistant, "calls")}, []store.Approval{held("p1", t0)}, store.Handover{PausedEvent: "evt_x"}); err != nil {
		t.Fatal(err)
	}
	if err := turn.End(ctx, model.Usage{}); err != nil {
		t.Fatal(err)
	}
	turn, err = s.TakeLease(ctx, "acc", "c", "agent", t0, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if got := turn.Handover().PausedEvent; got != "evt_x" {
		t.Fatalf("the resuming turn carries paused event %q, want evt_x", got)
	}
	if err := turn.Append(ctx, text(model.RoleTool, "result"), text(model.RoleAssistant, "answer")); err != nil {
		t.Fatal(err)
	}
	if err := turn.End(ctx, model.Usage{}); err != nil {
		t.Fatal(err)
	}
	turn, err = s.TakeLease(ctx, "acc", "c", "agent", t0, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if got := turn.Handover().PausedEvent; got != "" {
		t.Fatalf("after the resume's append the conversation still carries paused event %q", got)
	}
	_ = turn.Release(ctx)

	u := store.StatusUpdate{Status: store.EventCompleted, FromSeq: 9, ToSeq: 4, Detail: []byte(`{"resumedBy":"evt_y"}`), At: t0}
	if ok, err := s.SettleResumedEvent(ctx, "acc", "evt_x", "other-conversation", u); ok || err != nil {
		t.Fatalf("settling evt_x for another conversation = %v, %v; want no change", ok, err)
	}
	if ok, err := s.SettleResumedEvent(ctx, "acc", "evt_x", "c", u); !ok || err != nil {
		t.Fatalf("settling the waiting evt_x = %v, %v; want it changed", ok, err)
	}
	x, err := s.Event(ctx, "acc", "evt_x")
	if err != nil {
		t.Fatal(err)
	}
	if x.Status != store.EventCompleted || x.FromSeq != 1 || x.ToSeq != 4 || string(x.Detail) != `{"resumedBy":"evt_y"}` {
		t.Fatalf("evt_x = %+v, want completed over [1, 4) with resumedBy evt_y", x)
	}
	// Settled: never rewritten, nor is an event settled by other means, nor a missing one.
	u.Status, u.Detail = store.EventFailed, []byte(`{"error":"late"}`)
	if ok, err := s.SettleResumedEvent(ctx, "acc", "evt_x", "c", u); ok || err != nil {
		t.Fatalf("settling evt_x again = %v, %v; want no change", ok, err)
	}
	if err := s.UpdateEvent(ctx, "acc", "evt_done", store.StatusUpdate{Status: store.EventFailed, Detail: []byte(`{"error":"first"}`), At: t0}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"evt_done", "evt_missing"} {
		if ok, err := s.SettleResumedEvent(ctx, "acc", id, "c", u); ok || err != nil {
			t.Fatalf("settling %s = %v, %v; want no change", id, ok, err)
		}
	}
	if x, _ := s.Event(ctx, "acc", "evt_x"); x.Status != store.EventCompleted {
		t.Fatalf("evt_x was rewritten to %s", x.Status)
	}
	if d, _ := s.Event(ctx, "acc", "evt_done"); d.Status != store.EventFailed || string(d.Detail) != `{"error":"first"}` {
		t.Fatalf("evt_done was rewritten: %+v", d)
	}
}
