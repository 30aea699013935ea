package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentharness/harness/shared/state/ddb"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Deleting a conversation (DELETE /conversations/{id}) finds what hangs from it through sparse
// indexes keyed by the conversation (accountId#conversationId): its events and approvals
// (ByConversation), its subagents' conversations (ByOwner, on their heads' ownerKey). Rows
// written before those attributes existed are in no index: their events read as not found once
// the head is gone (ConversationEvent), and their approvals are reached only through a head's
// pending list, which is gone too; TTL removes both.

// Indexes a deletion reads.
const (
	byConversation = "ByConversation"
)

// deleteLease is the lease owner a deletion writes on the head it holds until its last step.
const deleteLease = "delete"

// HoldForDelete takes the conversation's lease for good, so that no turn begins on it, appends
// to it or takes it up again while it is deleted. While a live turn holds it the answer is
// ErrBusy, unless force: then the turn's next append fails with ErrLeaseLost. A deletion that
// held it before (and was cut short) holds it again. ErrNotFound when there is no head.
func (s *Store) HoldForDelete(ctx context.Context, accountID, conversationID string, now time.Time, force bool) error {
	cond := "attribute_exists(conversationKey)"
	vals := map[string]types.AttributeValue{":owner": ddb.S(deleteLease), ":forever": ddb.N(1 << 62)}
	if !force {
		cond += " AND (attribute_not_exists(leaseOwner) OR leaseUntil < :now OR leaseOwner IN (:owner, :purge))"
		vals[":now"], vals[":purge"] = ddb.N(now.UnixMilli()), ddb.S(purgeLease)
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           &s.tables.Conversations,
		Key:                                 headKey(accountID, conversationID),
		UpdateExpression:                    aws.String("SET leaseOwner = :owner, leaseUntil = :forever"),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeValues:           vals,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var failed *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &failed) && failed.Item == nil:
		return ErrNotFound
	case errors.As(err, &failed):
		return ErrBusy
	case err != nil:
		return fmt.Errorf("holding conversation %s to delete it: %w", conversationID, err)
	}
	return nil
}

func headKey(accountID, conversationID string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"conversationKey": ddb.S(accountID + "#" + conversationID), "seq": ddb.N(0)}
}

// Children are the conversations subagent calls of conversationID created, sorted: those on
// ByOwner (childOwner), and those its head records (resumable instances, instances booted by a
// variables request), which finds children made before heads carried an owner key.
func (s *Store) Children(ctx context.Context, accountID, conversationID string) ([]string, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.tables.Conversations, Key: headKey(accountID, conversationID), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("loading conversation %s: %w", conversationID, err)
	}
	var ids []string
	for name, v := range out.Item {
		sv, ok := v.(*types.AttributeValueMemberS)
		if !ok {
			continue
		}
		var in Instance
		var r VarRequest
		switch {
		case strings.HasPrefix(name, "instance:") && json.Unmarshal([]byte(sv.Value), &in) == nil:
			ids = append(ids, in.ThreadID)
		case strings.HasPrefix(name, "varreq:") && json.Unmarshal([]byte(sv.Value), &r) == nil && r.Booted != nil:
			ids = append(ids, r.Booted.ThreadID)
		}
	}
	heads, err := ddb.Indexed(ctx, s.db, s.tables.Conversations, byOwner, "ownerKey", childOwner(accountID, conversationID))
	if err != nil {
		return nil, err
	}
	for _, h := range heads {
		ids = append(ids, strings.TrimPrefix(ddb.String(h, "conversationKey"), accountID+"#"))
	}
	slices.Sort(ids)
	return slices.DeleteFunc(slices.Compact(ids), func(id string) bool { return id == "" || id == conversationID }), nil
}

// ConversationEvents are the ids of the conversation's events (ByConversation).
func (s *Store) ConversationEvents(ctx context.Context, accountID, conversationID string) ([]string, error) {
	keys, err := ddb.Indexed(ctx, s.db, s.tables.Events, byConversation, "conversationKey", accountID+"#"+conversationID)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(keys))
	for _, k := range keys {
		ids = append(ids, strings.TrimPrefix(ddb.String(k, "eventKey"), accountID+"#"))
	}
	return ids, nil
}

// ConversationEvent is Event as a client reads it: an event of a deleted conversation is not
// found. Rows written since events carry conversationKey are deleted with their conversation;
// an older one reads as not found once its conversation's head is gone.
func (s *Store) ConversationEvent(ctx context.Context, accountID, eventID string) (TurnStatus, error) {
	it, err := s.eventItem(ctx, accountID, eventID)
	if err != nil {
		return TurnStatus{}, err
	}
	e := eventOf(eventID, it)
	if _, indexed := it["conversationKey"]; indexed {
		return e, nil
	}
	if _, err := s.ConversationHead(ctx, accountID, e.ConversationID); err != nil {
		return TurnStatus{}, err
	}
	return e, nil
}

// DeleteTrees deletes the items of the turn trees rooted at roots (tree.go); a root with none
// is no error.
func (s *Store) DeleteTrees(ctx context.Context, roots []string) error {
	keys := make([]map[string]types.AttributeValue, 0, len(roots))
	for _, root := range roots {
		keys = append(keys, treeKey(root))
	}
	return ddb.Delete(ctx, s.db, s.tables.Events, keys)
}

// DeleteConversation deletes the conversation held by HoldForDelete: its events and approvals,
// then its messages and, last, its head, so that a deletion cut short is found again by its
// head and finished by the next. Deleting what is gone is no error.
func (s *Store) DeleteConversation(ctx context.Context, accountID, conversationID string) error {
	key := accountID + "#" + conversationID
	events, err := ddb.Indexed(ctx, s.db, s.tables.Events, byConversation, "conversationKey", key)
	if err != nil {
		return err
	}
	if err := ddb.Delete(ctx, s.db, s.tables.Events, ddb.Keys(events, "eventKey")); err != nil {
		return err
	}
	approvals, err := ddb.Indexed(ctx, s.db, s.tables.Approvals, byConversation, "conversationKey", key)
	if err != nil {
		return err
	}
	if err := ddb.Delete(ctx, s.db, s.tables.Approvals, ddb.Keys(approvals, "approvalKey")); err != nil {
		return err
	}
	_, err = s.purgeConversation(ctx, key)
	return err
}
