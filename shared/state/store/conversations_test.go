package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/store"
)

// turn runs one turn of endUser on conversation id: the user's message, then the answer.
func turn(t *testing.T, s *store.Store, endUser, conv, user, answer string) error {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	l, err := s.TakeLeaseOf(ctx, endUser, "acc", conv, "agent", now, now.Add(time.Minute))
	if err != nil {
		return err
	}
	if err := l.Append(ctx, text(model.RoleUser, user)); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(ctx, text(model.RoleAssistant, answer)); err != nil {
		t.Fatal(err)
	}
	return l.End(ctx, model.Usage{})
}

// A conversation an end user starts is theirs: another end user's turn on it is not found, as
// an unknown conversation is to a reader, and the account's turns run on it still; each end
// user lists their own, newest first, titled by the first message, with the last message's
// preview, and the account lists them all.
func TestConversationsBelongToTheirEndUser(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	if err := turn(t, s, "alice", "c-alice", "  Plan my\ntrip to   Lisbon please  ", "Sure: day one…"); err != nil {
		t.Fatal(err)
	}
	if err := turn(t, s, "bob", "c-alice", "let me in", "no"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("bob's turn on alice's conversation = %v, want ErrNotFound", err)
	}
	if err := turn(t, s, "", "c-alice", "from the account", "ok"); err != nil {
		t.Errorf("the account's turn on alice's conversation = %v", err)
	}
	if err := turn(t, s, "bob", "c-bob", strings.Repeat("long ", 40), "ok"); err != nil {
		t.Fatal(err)
	}
	if err := turn(t, s, "", "c-own", "the account's own", "ok"); err != nil {
		t.Fatal(err)
	}
	if err := turn(t, s, "bob", "c-own", "let me in", "no"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("bob's turn on the account's own conversation = %v, want ErrNotFound", err)
	}
	head, err := s.ConversationHead(ctx, "acc", "c-alice")
	if err != nil || head.EndUser != "alice" {
		t.Fatalf("alice's head = %+v %v", head, err)
	}

	list := func(q store.ConversationQuery) []store.ConversationInfo {
		t.Helper()
		q.Limit = 10
		got, next, err := s.ListConversations(ctx, "acc", q)
		if err != nil || next != "" {
			t.Fatalf("ListConversations(%+v) = %v, %q, %v", q, got, next, err)
		}
		return got
	}
	alice := list(store.ConversationQuery{EndUser: "alice"})
	if len(alice) != 1 || alice[0].ID != "c-alice" || alice[0].EndUser != "alice" || alice[0].Title != "Plan my trip to Lisbon please" ||
		alice[0].Preview != "ok" || alice[0].CreatedAt.IsZero() || alice[0].UpdatedAt.Before(alice[0].CreatedAt) {
		t.Errorf("alice's list = %+v", alice)
	}
	if bob := list(store.ConversationQuery{EndUser: "bob"}); len(bob) != 1 || len([]rune(bob[0].Title)) != store.TitleRunes || !strings.HasSuffix(bob[0].Title, "…") {
		t.Errorf("bob's list = %+v, want one conversation, its title cut to %d", bob, store.TitleRunes)
	}
	if own := list(store.ConversationQuery{}); len(own) != 1 || own[0].ID != "c-own" || own[0].EndUser != "" {
		t.Errorf("the account's own = %+v", own)
	}
	var ids []string
	for _, c := range list(store.ConversationQuery{All: true}) {
		ids = append(ids, c.ID)
	}
	if strings.Join(ids, " ") != "c-own c-bob c-alice" {
		t.Errorf("all of the account's, newest first = %v", ids)
	}
	if got := list(store.ConversationQuery{All: true, AgentID: "other"}); len(got) != 0 {
		t.Errorf("another agent's = %+v", got)
	}
	if _, _, err := s.ListConversations(ctx, "acc", store.ConversationQuery{Limit: 1, Cursor: "eyJrIjoib3RoZXIjYyIsInUiOjF9"}); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("another account's cursor = %v, want ErrBadCursor", err)
	}

	if c, err := s.SetTitle(ctx, "acc", "c-alice", "Lisbon"); err != nil || c.Title != "Lisbon" || c.EndUser != "alice" {
		t.Errorf("SetTitle = %+v %v", c, err)
	}
	if err := turn(t, s, "alice", "c-alice", "and Porto?", "Porto too."); err != nil {
		t.Fatal(err)
	}
	if got := list(store.ConversationQuery{EndUser: "alice"}); got[0].Title != "Lisbon" || got[0].Preview != "Porto too." {
		t.Errorf("after a title was set and another turn: %+v", got)
	}
	if _, err := s.SetTitle(ctx, "acc", "c-nobody", "x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SetTitle of no conversation = %v", err)
	}
}

// A continuation or a cancel goes on with the conversation it has: one that is gone is not
// found, never made anew.
func TestResumeLeaseNeverCreates(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	now := time.Now()
	if _, err := s.ResumeLease(ctx, "acc", "c-gone", "agent", now, now.Add(time.Minute)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ResumeLease of no conversation = %v, want ErrNotFound", err)
	}
	if _, err := s.ConversationHead(ctx, "acc", "c-gone"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ResumeLease made the conversation: %v", err)
	}
	if err := turn(t, s, "", "c-here", "hi", "hello"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ResumeLease(ctx, "acc", "c-here", "agent", now, now.Add(time.Minute)); err != nil {
		t.Errorf("ResumeLease of a conversation = %v", err)
	}
}
