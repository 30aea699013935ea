package turn_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/turn"
	"github.com/google/go-cmp/cmp"
)

// TakeUp takes up the turn of a settled dispatch group exactly once: not before the group has
// settled, not for another account, not while another turn holds the conversation, and a
// delivery that comes again after the continuation ran is ignored and consumes the group.
func TestTakeUp(t *testing.T) {
	e := newEngineEnv(t)
	group, resultID := e.dispatched("c-take", "")

	consumed := func() bool {
		t.Helper()
		st, err := e.async.Load(e.ctx, group)
		if err != nil || st.Group == nil {
			t.Fatalf("loading group %s: %+v, %v", group, st.Group, err)
		}
		return !st.Group.ConsumedAt.IsZero()
	}
	// declined wants TakeUp to decline: no continuation, no error.
	declined := func(what, accountID string) {
		t.Helper()
		if c, err := e.TakeUp(e.ctx, accountID, group); c != nil || err != nil {
			t.Fatalf("TakeUp %s = %v, %v; want nothing to continue", what, c, err)
		}
	}

	declined("before the call was answered", e.account)
	if consumed() {
		t.Fatal("a group not settled yet was consumed")
	}
	if err := e.answer(resultID, `"the outside answer"`); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{group}, e.sentGroups()); diff != "" {
		t.Fatalf("continuations sent (-want +got):\n%s", diff)
	}

	declined("for another account", e.otherAccount())
	if consumed() {
		t.Fatal("another account's TakeUp consumed the group")
	}

	lease, err := e.store.TakeLease(e.ctx, e.account, "c-take", "dispatcher", time.Now(), time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if c, err := e.TakeUp(e.ctx, e.account, group); c != nil || !errors.Is(err, store.ErrBusy) {
		t.Fatalf("TakeUp while another turn holds the conversation = %v, %v; want store.ErrBusy", c, err)
	}
	if err := lease.Release(e.ctx); err != nil {
		t.Fatal(err)
	}

	c, err := e.TakeUp(e.ctx, e.account, group)
	if err != nil || c == nil {
		t.Fatalf("TakeUp of the settled group = %v, %v; want its continuation", c, err)
	}
	if c.Group.Group.ID != group {
		t.Errorf("the continuation is of group %s, want %s", c.Group.Group.ID, group)
	}
	done := c.Execute(e.ctx)
	if err := c.Finish(e.ctx, done, nil); err != nil {
		t.Fatal(err)
	}
	if done.Status != turn.StatusCompleted {
		t.Fatalf("the continuation ended %s (%s), want completed", done.Status, done.Error)
	}
	history := texts(e.history("c-take"))
	if last := history[len(history)-1]; !strings.HasPrefix(last, "assistant:Got ") || !strings.Contains(last, "the outside answer") {
		t.Fatalf("the conversation ends %q, want the answer with the outside result", last)
	}

	// The same delivery again, as a queue may redeliver it before the group is consumed.
	calls := e.calls()
	declined("of a group whose continuation ran", e.account)
	if !consumed() {
		t.Error("the duplicate continuation did not consume the group")
	}
	if n := e.calls() - calls; n != 0 {
		t.Errorf("the duplicate called the model %d times, want never", n)
	}
	if diff := cmp.Diff(history, texts(e.history("c-take"))); diff != "" {
		t.Errorf("the duplicate changed the conversation (-before +after):\n%s", diff)
	}
}
