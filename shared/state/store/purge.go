package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentharness/harness/shared/state/ddb"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ErrAccountLive: a purge was asked for an account that is not deleted. Purge messages are only
// sent once the account is a tombstone, so this one was forged or misrouted.
var ErrAccountLive = errors.New("account is not deleted")

// purgeSettle is how old a tombstone must be before a purge that found nothing more to delete
// removes it: the ByAccount index is eventually consistent, so a conversation started just
// before the deletion may show up in it a moment later. The sweeper's later pass finishes.
const purgeSettle = time.Minute

// conversationsByAccount is the sparse index of conversation heads by account.
const conversationsByAccount = "ByAccount"

// Purge bounds one pass of PurgeAccount.
type Purge struct {
	Now time.Time
	// Until is when the pass stops starting new conversations (it always purges at least
	// one); zero for no limit.
	Until time.Time
	// PageSize is how many conversation heads one index query reads (default 100).
	PageSize int32
	// Elsewhere deletes what the account keeps outside these tables (its skills, its channel
	// bindings, its kept tool results); every pass runs it, before the tombstone that keeps the purge owed is removed.
	// nil for nothing.
	Elsewhere func(ctx context.Context) error
}

// PurgeResult says what a pass did.
type PurgeResult struct {
	Conversations int
	// Items counts the conversation items deleted, heads included.
	Items int
	// More: the pass ran out of time; another pass goes on where it stopped.
	More bool
	// Finished: nothing of the account is left, not even its tombstone.
	Finished bool
}

// PurgeAccount deletes what a deleted account leaves behind that no TTL removes: its agents,
// what Purge.Elsewhere deletes, and its conversations, found through ByAccount, each deleted
// messages first and head last, so an interrupted pass leaves the head in the index for the
// next one. The tombstone goes last, once nothing is left. It is idempotent, and refuses a
// live account with ErrAccountLive.
func (s *Store) PurgeAccount(ctx context.Context, accountID string, p Purge) (PurgeResult, error) {
	var res PurgeResult
	item, err := s.rawAccountItem(ctx, accountID)
	if err != nil {
		return res, err
	}
	if item != nil && !tombstone(item) {
		return res, ErrAccountLive
	}
	if item != nil {
		// This pass has the purge now: the sweeper need not queue it again before purgeRetry.
		if err := s.deferPurge(ctx, accountID, "", p.Now.Add(purgeRetry)); err != nil && !errors.Is(err, ErrNotFound) {
			return res, err
		}
	}
	if err := s.DeleteAgents(ctx, accountID); err != nil {
		return res, err
	}
	if p.Elsewhere != nil {
		if err := p.Elsewhere(ctx); err != nil {
			return res, err
		}
	}
	if err := s.purgeConversations(ctx, accountID, p, &res); err != nil || res.More {
		return res, err
	}
	if item != nil {
		deletedAt, _ := ddb.Int(item, "deletedAt")
		if p.Now.Before(time.UnixMilli(deletedAt).Add(purgeSettle)) {
			return res, nil
		}
		if err := s.removeTombstone(ctx, accountID); err != nil {
			return res, err
		}
	}
	res.Finished = true
	return res, nil
}

// purgeConversations deletes the account's conversations page by page through ByAccount.
func (s *Store) purgeConversations(ctx context.Context, accountID string, p Purge, res *PurgeResult) error {
	size := p.PageSize
	if size <= 0 {
		size = 100
	}
	var start map[string]types.AttributeValue
	for {
		page, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName:                 &s.tables.Conversations,
			IndexName:                 aws.String(conversationsByAccount),
			KeyConditionExpression:    aws.String("accountId = :a"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":a": ddb.S(accountID)},
			Limit:                     aws.Int32(size),
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return fmt.Errorf("listing the conversations of account %s: %w", accountID, err)
		}
		for _, head := range page.Items {
			if res.Conversations > 0 && !p.Until.IsZero() && !time.Now().Before(p.Until) {
				res.More = true
				return nil
			}
			n, err := s.purgeConversation(ctx, ddb.String(head, "conversationKey"))
			if err != nil {
				return err
			}
			res.Conversations++
			res.Items += n
		}
		if start = page.LastEvaluatedKey; start == nil {
			return nil
		}
	}
}

// purgeLease is the lease owner a purge writes on a head it is deleting.
const purgeLease = "purge"

// purgeConversation deletes one conversation and returns how many items it deleted. It first
// takes the head's lease for good, so a turn still running fails its next append instead of
// adding messages behind the purge; then the messages go, and the head last.
func (s *Store) purgeConversation(ctx context.Context, key string) (int, error) {
	head := map[string]types.AttributeValue{"conversationKey": ddb.S(key), "seq": ddb.N(0)}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.tables.Conversations,
		Key:                       head,
		UpdateExpression:          aws.String("SET leaseOwner = :purge, leaseUntil = :forever"),
		ConditionExpression:       aws.String("attribute_exists(conversationKey)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":purge": ddb.S(purgeLease), ":forever": ddb.N(1 << 62)},
	})
	if ddb.ConditionFailed(err) {
		return 0, nil // another pass deleted it (an update would have created it again)
	}
	if err != nil {
		return 0, fmt.Errorf("taking conversation %s to purge it: %w", key, err)
	}
	var keys []map[string]types.AttributeValue
	in := &dynamodb.QueryInput{
		TableName:                 &s.tables.Conversations,
		KeyConditionExpression:    aws.String("conversationKey = :k AND seq > :head"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":k": ddb.S(key), ":head": ddb.N(0)},
		ProjectionExpression:      aws.String("conversationKey, seq"),
		ConsistentRead:            aws.Bool(true),
	}
	for p := dynamodb.NewQueryPaginator(s.db, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return 0, fmt.Errorf("listing conversation %s to purge it: %w", key, err)
		}
		keys = append(keys, page.Items...)
	}
	if err := ddb.Delete(ctx, s.db, s.tables.Conversations, keys); err != nil {
		return 0, err
	}
	if _, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.tables.Conversations, Key: head}); err != nil {
		return 0, fmt.Errorf("deleting conversation %s: %w", key, err)
	}
	return len(keys) + 1, nil
}

// removeTombstone deletes a tombstone, never a live account.
func (s *Store) removeTombstone(ctx context.Context, accountID string) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:           &s.tables.Accounts,
		Key:                 map[string]types.AttributeValue{"accountId": ddb.S(accountID)},
		ConditionExpression: aws.String("attribute_exists(deletedAt)"),
	})
	if err != nil && !ddb.ConditionFailed(err) {
		return fmt.Errorf("removing the tombstone of account %s: %w", accountID, err)
	}
	return nil
}

// deferPurge moves a tombstone's purge due time to due; with was set, only if it is still
// was (so of two sweepers only one claims it). ErrNotFound when that did not hold.
func (s *Store) deferPurge(ctx context.Context, accountID string, was string, due time.Time) error {
	cond := "attribute_exists(deletedAt)"
	vals := map[string]types.AttributeValue{":due": ddb.N(due.UnixMilli())}
	if was != "" {
		cond += " AND purgeDue = :was"
		vals[":was"] = &types.AttributeValueMemberN{Value: was}
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.tables.Accounts,
		Key:                       map[string]types.AttributeValue{"accountId": ddb.S(accountID)},
		UpdateExpression:          aws.String("SET purgeDue = :due"),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeValues: vals,
	})
	if ddb.ConditionFailed(err) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("scheduling the purge of account %s: %w", accountID, err)
	}
	return nil
}

// ClaimDuePurges returns up to limit deleted accounts whose purge is due at now (queued but
// not begun, or not finished, within purgeRetry), each claimed for another purgeRetry: the
// caller queues their purges.
func (s *Store) ClaimDuePurges(ctx context.Context, now time.Time, limit int32) ([]string, error) {
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName:              &s.tables.Accounts,
		IndexName:              aws.String(purgeIndex),
		KeyConditionExpression: aws.String("purgeShard = :shard AND purgeDue <= :now"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":shard": ddb.S(purgeShard), ":now": ddb.N(now.UnixMilli()),
		},
		Limit: aws.Int32(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("listing due purges: %w", err)
	}
	var ids []string
	for _, it := range out.Items {
		id := ddb.String(it, "accountId")
		was, _ := it["purgeDue"].(*types.AttributeValueMemberN)
		if was == nil {
			continue
		}
		err := s.deferPurge(ctx, id, was.Value, now.Add(purgeRetry))
		if errors.Is(err, ErrNotFound) {
			continue // claimed by another sweep, or purged meanwhile
		}
		if err != nil {
			return ids, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}
