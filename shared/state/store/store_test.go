package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/store"
)

func newStore(t *testing.T) *store.Store {
	t.Helper()
	db := testenv.DynamoDB(t)
	return store.New(db, testenv.Tables(t, db))
}

func text(role model.Role, s string) model.Message {
	return model.Message{Role: role, Parts: []model.Part{{Type: model.PartText, Text: s}}}
}

func TestExpiredLeaseIsTakenOverAndFencesTheOldTurn(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

	old, err := s.TakeLease(ctx, "acc", "c", "agent", t0, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Append(ctx, text(model.RoleUser, "one")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TakeLease(ctx, "acc", "c", "agent", t0.Add(30*time.Second), t0.Add(2*time.Minute)); !errors.Is(err, store.ErrBusy) {
		t.Fatalf("TakeLease while the lease is live = %v, want ErrBusy", err)
	}
	if _, err := s.TakeLease(ctx, "acc", "c", "other-agent", t0.Add(2*time.Minute), t0.Add(3*time.Minute)); !errors.Is(err, store.ErrAgentMismatch) {
		t.Fatalf("TakeLease by another agent = %v, want ErrAgentMismatch", err)
	}

	// The first turn crashed: after its lease runs out, a new turn takes the conversation.
	next, err := s.TakeLease(ctx, "acc", "c", "agent", t0.Add(2*time.Minute), t0.Add(3*time.Minute))
	if err != nil {
		t.Fatalf("TakeLease after the lease expired: %v", err)
	}
	if err := old.Append(ctx, text(model.RoleAssistant, "late")); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("append by the expired turn = %v, want ErrLeaseLost", err)
	}
	if err := next.Append(ctx, text(model.RoleUser, "two"), text(model.RoleAssistant, "answer")); err != nil {
		t.Fatal(err)
	}
	if err := old.End(ctx, model.Usage{}); err != nil {
		t.Fatalf("ending a lost lease: %v", err)
	}
	msgs, err := next.History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range msgs {
		got = append(got, m.Text())
	}
	if want := []string{"one", "two", "answer"}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("history = %q, want %q", got, want)
	}
	if err := next.End(ctx, model.Usage{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TakeLease(ctx, "acc", "c", "agent", t0.Add(2*time.Minute), t0.Add(3*time.Minute)); err != nil {
		t.Fatalf("TakeLease after End: %v", err)
	}
}

func TestAccountsAreFoundOnlyByTheirSecret(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	acc, secret, err := s.CreateAccount(ctx, "ada", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.AccountBySecret(ctx, secret)
	if err != nil || got.ID != acc.ID {
		t.Fatalf("AccountBySecret = %+v, %v; want %s", got, err, acc.ID)
	}
	if _, err := s.AccountBySecret(ctx, secret+"x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("AccountBySecret(wrong) = %v, want ErrNotFound", err)
	}
}

func TestEventClaimsAreSingleUse(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	now := time.Now()
	if err := s.ClaimEvent(ctx, "acc", "ev", "c", "", now, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateEvent(ctx, "acc", "ev", store.StatusUpdate{Status: store.EventCompleted, At: now}); err != nil {
		t.Fatal(err)
	}
	var dup *store.DuplicateEventError
	if err := s.ClaimEvent(ctx, "acc", "ev", "c", "", now, time.Hour); !errors.As(err, &dup) || dup.Status != store.EventCompleted {
		t.Fatalf("second claim = %v, want DuplicateEventError with status completed", err)
	}
	// Event ids are scoped by account.
	if err := s.ClaimEvent(ctx, "other", "ev", "c", "", now, time.Hour); err != nil {
		t.Fatalf("claim by another account: %v", err)
	}
}

// The agents table refuses an agent of a deleted account even when the write races the
// deletion past every earlier check: the purge would never find it.
func TestAgentOfADeletedAccountIsNotStored(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	acc, _, err := st.CreateAccount(ctx, "gone", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteAccount(ctx, acc.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	_, err = st.CreateAgent(ctx, store.Agent{AccountID: acc.ID, ID: "late", Config: []byte(`{}`)}, time.Now())
	if !errors.Is(err, store.ErrAccountGone) {
		t.Errorf("CreateAgent on a deleted account = %v, want ErrAccountGone", err)
	}
	if agents, _ := st.ListAgents(ctx, acc.ID); len(agents) != 0 {
		t.Errorf("stored %v", agents)
	}
}
