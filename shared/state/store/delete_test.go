package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// An event row written before events carried conversationKey is not found by deleting its
// conversation: a client reading it (ConversationEvent) is told it is not found once the
// conversation's head is gone, while the row itself stays for TTL. An event of today is read
// as it is, with or without a head (a queued turn's conversation may not have one yet).
func TestAnEventOfADeletedConversationIsNotFound(t *testing.T) {
	ctx := context.Background()
	db := testenv.DynamoDB(t)
	tables := testenv.Tables(t, db)
	s := store.New(db, tables)
	now := time.Now()
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &tables.Events, Item: map[string]types.AttributeValue{
		"eventKey": &types.AttributeValueMemberS{Value: "acc#evt_old"}, "conversationId": &types.AttributeValueMemberS{Value: "conv-old"},
		"status": &types.AttributeValueMemberS{Value: store.EventCompleted},
	}}); err != nil {
		t.Fatal(err)
	}
	if err := s.ClaimEvent(ctx, "acc", "evt_new", "conv-new", "", now, time.Hour); err != nil {
		t.Fatal(err)
	}
	lease, err := s.TakeLease(ctx, "acc", "conv-old", "agent", now, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ConversationEvent(ctx, "acc", "evt_old"); err != nil {
		t.Fatalf("the old event while its conversation lives: %v, want it", err)
	}
	if err := s.HoldForDelete(ctx, "acc", "conv-old", now, false); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteConversation(ctx, "acc", "conv-old"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ConversationEvent(ctx, "acc", "evt_old"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the old event of the deleted conversation: %v, want ErrNotFound", err)
	}
	if _, err := s.Event(ctx, "acc", "evt_old"); err != nil {
		t.Errorf("the old row itself: %v, want it left for TTL", err)
	}
	if e, err := s.ConversationEvent(ctx, "acc", "evt_new"); err != nil || e.ConversationID != "conv-new" {
		t.Errorf("an event of today whose conversation has no head yet: %+v, %v, want it", e, err)
	}
	if err := s.HoldForDelete(ctx, "acc", "conv-old", now, false); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("holding the deleted conversation again: %v, want ErrNotFound", err)
	}
}

// A deletion holds the conversation against turns: a live turn's lease is ErrBusy unless
// forced, and once held no turn takes it (ErrBusy) until it is deleted.
func TestHoldForDeleteFencesTurns(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	now := time.Now()
	lease, err := s.TakeLease(ctx, "acc", "conv", "agent", now, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.HoldForDelete(ctx, "acc", "conv", now, false); !errors.Is(err, store.ErrBusy) {
		t.Fatalf("holding a conversation a live turn holds: %v, want ErrBusy", err)
	}
	if err := s.HoldForDelete(ctx, "acc", "conv", now, true); err != nil {
		t.Fatalf("forcing the hold: %v", err)
	}
	if err := lease.Append(ctx, text("user", "late")); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("the turn's next append: %v, want ErrLeaseLost", err)
	}
	if _, err := s.TakeLease(ctx, "acc", "conv", "agent", now.Add(time.Hour), now.Add(2*time.Hour)); !errors.Is(err, store.ErrBusy) {
		t.Errorf("a new turn on the held conversation: %v, want ErrBusy", err)
	}
	if err := s.HoldForDelete(ctx, "acc", "conv", now, false); err != nil {
		t.Errorf("holding it again (a retried deletion): %v", err)
	}
}
