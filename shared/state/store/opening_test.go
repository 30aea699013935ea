package store_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/store"
)

// StartTurn begins a turn in one write only on the conversation as its opening read it: new, or
// free and waiting for nothing, of the same agent, without the message. Anything else, or a
// conversation that changed since, writes nothing and leaves the turn to TakeLease.
func TestStartTurnBeginsOnlyOnTheConversationItRead(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	acc, secret, err := s.CreateAccount(ctx, "ada", t0)
	if err != nil {
		t.Fatal(err)
	}
	open := func() *store.Opening {
		t.Helper()
		o, err := s.OpenTurn(ctx, secret, "agent", "c", false)
		if err != nil {
			t.Fatal(err)
		}
		if o.Account.ID != acc.ID {
			t.Fatalf("OpenTurn found account %s, want %s", o.Account.ID, acc.ID)
		}
		return o
	}
	msg := func(id, s string) model.Message {
		m := text(model.RoleUser, s)
		m.ID = id
		return m
	}
	texts := func(lease *store.Lease) []string {
		t.Helper()
		msgs, err := lease.History(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range msgs {
			out = append(out, m.Text())
		}
		return out
	}

	// A secret is confirmed whole: the account it names is not enough.
	forged := strings.Replace(secret, ".", ".x", 1)
	if _, err := s.OpenTurn(ctx, forged, "agent", "c", false); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("OpenTurn with a forged secret naming the account = %v, want ErrNotFound", err)
	}
	if _, err := open().Agent(); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Agent of an account without agents = %v, want ErrNotFound", err)
	}
	first, err := s.StartTurn(ctx, open(), "agent", msg("m1", "one"), "", t0, t0.Add(time.Minute))
	if err != nil {
		t.Fatalf("StartTurn on a new conversation: %v", err)
	}
	if got := texts(first); !slices.Equal(got, []string{"one"}) {
		t.Fatalf("history after StartTurn = %q, want [one]", got)
	}
	if err := first.Append(ctx, text(model.RoleAssistant, "answer")); err != nil {
		t.Fatal(err)
	}

	// Read while the first turn holds the lease: not free.
	busy := open()
	if _, err := s.StartTurn(ctx, busy, "agent", msg("m2", "two"), "", t0.Add(time.Second), t0.Add(time.Minute)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("StartTurn while another turn holds the lease = %v, want ErrConflict", err)
	}
	if err := first.End(ctx, model.Usage{}); err != nil {
		t.Fatal(err)
	}

	// Two openings of the same free conversation: the first to write wins.
	a, b := open(), open()
	for _, tt := range []struct {
		name  string
		o     *store.Opening
		agent string
		m     model.Message
	}{
		{"another agent", a, "other", msg("m2", "two")},
		{"a message id already stored", a, "agent", msg("m1", "again")},
	} {
		if _, err := s.StartTurn(ctx, tt.o, tt.agent, tt.m, "", t0.Add(2*time.Second), t0.Add(time.Minute)); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("StartTurn with %s = %v, want ErrConflict", tt.name, err)
		}
	}
	second, err := s.StartTurn(ctx, a, "agent", msg("m2", "two"), "stream-2", t0.Add(2*time.Second), t0.Add(time.Minute))
	if err != nil {
		t.Fatalf("StartTurn on a free conversation: %v", err)
	}
	if got := texts(second); !slices.Equal(got, []string{"one", "answer", "two"}) {
		t.Fatalf("history = %q, want [one answer two]", got)
	}
	if err := second.End(ctx, model.Usage{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartTurn(ctx, b, "agent", msg("m3", "three"), "", t0.Add(3*time.Second), t0.Add(time.Minute)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("StartTurn on a conversation that changed since it was read = %v, want ErrConflict", err)
	}
	head, err := s.ConversationHead(ctx, acc.ID, "c")
	if err != nil {
		t.Fatal(err)
	}
	if head.Stream != "stream-2" || !head.LeaseUntil.IsZero() {
		t.Fatalf("head = %+v, want the second turn's stream and no lease", head)
	}
	lease, err := s.TakeLease(ctx, acc.ID, "c", "agent", t0.Add(4*time.Second), t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if got := texts(lease); !slices.Equal(got, []string{"one", "answer", "two"}) {
		t.Fatalf("stored history = %q, want [one answer two]: the refused StartTurn wrote nothing", got)
	}
}
