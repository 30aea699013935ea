package channels

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentharness/harness/shared/state/agentstore"
	"github.com/agentharness/harness/shared/state/ddb"
	"github.com/agentharness/harness/shared/wire/ids"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Store keeps bindings in one table of pk/sk items (template.yaml's ChannelsTable):
//
//	binding#<id>         binding        the binding, its secrets sealed
//	account#<accountId>  binding#<id>   the account's index of its bindings
//
// A binding and its index item are written and deleted in one transaction, so List reads the
// account's bindings consistently, with no secondary index.
type Store struct {
	db     *dynamodb.Client
	table  string
	sealer agentstore.Sealer
}

// New returns a store over table; sealer seals and opens the bindings' secrets.
func New(db *dynamodb.Client, table string, sealer agentstore.Sealer) *Store {
	return &Store{db: db, table: table, sealer: sealer}
}

// FromConfig is the store over table, as CHANNELS_TABLE names it; nil when it is empty (the
// deployment keeps no channel bindings).
func FromConfig(db *dynamodb.Client, sealer agentstore.Sealer, table string) (*Store, error) {
	switch {
	case table == "":
		return nil, nil
	case db == nil:
		return nil, errors.New("channel bindings need a DynamoDB client")
	}
	return New(db, table, sealer), nil
}

func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": ddb.S(pk), "sk": ddb.S(sk)}
}

func bindingKey(id string) map[string]types.AttributeValue { return key("binding#"+id, "binding") }

func indexKey(accountID, id string) map[string]types.AttributeValue {
	return key("account#"+accountID, "binding#"+id)
}

// Create stores b as a new binding of b.AccountID, under a fresh id, at version 1.
func (s *Store) Create(ctx context.Context, b Binding, now time.Time) (Binding, error) {
	if p := ids.Problem(b.AccountID); p != "" {
		return Binding{}, errors.New("channels: account id " + p)
	}
	b.ID, b.Version = NewID(), 1
	b.CreatedAt, b.UpdatedAt = now.UTC(), now.UTC()
	item, err := s.item(ctx, b)
	if err != nil {
		return Binding{}, err
	}
	index := indexKey(b.AccountID, b.ID)
	index["bindingId"] = ddb.S(b.ID)
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: &s.table, Item: item, ConditionExpression: aws.String("attribute_not_exists(pk)")}},
		{Put: &types.Put{TableName: &s.table, Item: index}},
	}})
	if err != nil {
		return Binding{}, fmt.Errorf("storing channel binding %s: %w", b.ID, err)
	}
	return b, nil
}

// Get returns a binding with its secrets opened.
func (s *Store) Get(ctx context.Context, bindingID string) (Binding, error) {
	b, sealed, err := s.read(ctx, bindingID)
	if err != nil {
		return Binding{}, err
	}
	return s.open(ctx, b, sealed)
}

// Owned is Get of a binding of accountID: another account's binding is ErrNotFound.
func (s *Store) Owned(ctx context.Context, accountID, bindingID string) (Binding, error) {
	b, sealed, err := s.read(ctx, bindingID)
	if err == nil && b.AccountID != accountID {
		err = ErrNotFound
	}
	if err != nil {
		return Binding{}, err
	}
	return s.open(ctx, b, sealed)
}

// read loads a binding and its sealed secrets; an id NewID could not have made is not looked up.
func (s *Store) read(ctx context.Context, bindingID string) (Binding, []byte, error) {
	if !ValidID(bindingID) {
		return Binding{}, nil, ErrNotFound
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: bindingKey(bindingID), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Binding{}, nil, fmt.Errorf("loading channel binding %s: %w", bindingID, err)
	}
	if out.Item == nil {
		return Binding{}, nil, ErrNotFound
	}
	return from(out.Item)
}

// List returns the account's bindings, oldest first, their secrets not opened.
func (s *Store) List(ctx context.Context, accountID string) ([]Binding, error) {
	out := []Binding{}
	var keys []map[string]types.AttributeValue
	err := s.eachIndexed(ctx, accountID, func(id string) error {
		keys = append(keys, bindingKey(id))
		return nil
	})
	if err != nil {
		return nil, err
	}
	items, err := s.batchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		b, _, err := from(it)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b Binding) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// eachIndexed calls fn with the id of each binding in the account's index.
func (s *Store) eachIndexed(ctx context.Context, accountID string, fn func(id string) error) error {
	if ids.Problem(accountID) != "" {
		return nil
	}
	in := &dynamodb.QueryInput{
		TableName:                 &s.table,
		KeyConditionExpression:    aws.String("pk = :pk AND begins_with(sk, :binding)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": ddb.S("account#" + accountID), ":binding": ddb.S("binding#")},
		ConsistentRead:            aws.Bool(true),
	}
	for p := dynamodb.NewQueryPaginator(s.db, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("listing the channel bindings of account %s: %w", accountID, err)
		}
		for _, it := range page.Items {
			if err := fn(ddb.String(it, "bindingId")); err != nil {
				return err
			}
		}
	}
	return nil
}

// maxBatchGet is BatchGetItem's limit on keys in one call.
const maxBatchGet = 100

// batchGet reads items by key, consistently, retrying what DynamoDB leaves unprocessed with
// backoff until ctx ends. Items that are gone are left out.
func (s *Store) batchGet(ctx context.Context, keys []map[string]types.AttributeValue) ([]map[string]types.AttributeValue, error) {
	var items []map[string]types.AttributeValue
	for start := 0; start < len(keys); start += maxBatchGet {
		pending := map[string]types.KeysAndAttributes{s.table: {Keys: keys[start:min(start+maxBatchGet, len(keys))], ConsistentRead: aws.Bool(true)}}
		for wait := 50 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
			out, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: pending})
			if err != nil {
				return nil, fmt.Errorf("reading channel bindings: %w", err)
			}
			items = append(items, out.Responses[s.table]...)
			if pending = out.UnprocessedKeys; len(pending) == 0 {
				break
			}
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("reading channel bindings: %w", ctx.Err())
			case <-time.After(wait):
			}
		}
	}
	return items, nil
}

// Update stores b over the binding if it is still at b.Version, with its secrets sealed afresh,
// and returns it at the next version: ErrConflict if another write came first, ErrNotFound if
// it is gone or not b.AccountID's. Its type never changes.
func (s *Store) Update(ctx context.Context, b Binding, now time.Time) (Binding, error) {
	if !ValidID(b.ID) {
		return Binding{}, ErrNotFound
	}
	prev := b.Version
	b.Version++
	b.UpdatedAt = now.UTC()
	item, err := s.item(ctx, b)
	if err != nil {
		return Binding{}, err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           &s.table,
		Item:                                item,
		ConditionExpression:                 aws.String("#version = :v AND accountId = :a AND #type = :t"),
		ExpressionAttributeNames:            map[string]string{"#version": "version", "#type": "type"},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":v": ddb.N(prev), ":a": ddb.S(b.AccountID), ":t": ddb.S(b.Type)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		if failed.Item == nil || ddb.String(failed.Item, "accountId") != b.AccountID || ddb.String(failed.Item, "type") != b.Type {
			return Binding{}, ErrNotFound
		}
		return Binding{}, ErrConflict
	}
	if err != nil {
		return Binding{}, fmt.Errorf("updating channel binding %s: %w", b.ID, err)
	}
	return b, nil
}

// Delete deletes one of the account's bindings with its index item, or fails with ErrNotFound.
// The delivery keys it received expire on their own.
func (s *Store) Delete(ctx context.Context, accountID, bindingID string) error {
	if !ValidID(bindingID) {
		return ErrNotFound
	}
	err := s.delete(ctx, accountID, bindingID, &types.Delete{
		ConditionExpression:       aws.String("accountId = :a"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":a": ddb.S(accountID)},
	})
	if r := ddb.Cancellations(err); len(r) > 0 && ddb.CheckFailed(r[0]) {
		return ErrNotFound
	}
	return err
}

// delete deletes a binding (del, whose key it sets, may carry a condition) and its index item in
// one transaction.
func (s *Store) delete(ctx context.Context, accountID, bindingID string, del *types.Delete) error {
	del.TableName, del.Key = &s.table, bindingKey(bindingID)
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Delete: del},
		{Delete: &types.Delete{TableName: &s.table, Key: indexKey(accountID, bindingID)}},
	}})
	if err != nil {
		return fmt.Errorf("deleting channel binding %s: %w", bindingID, err)
	}
	return nil
}

// DeleteAll deletes every binding of the account, for the purge of a deleted account. Deleting
// twice is harmless.
func (s *Store) DeleteAll(ctx context.Context, accountID string) error {
	if p := ids.Problem(accountID); p != "" {
		return errors.New("channels: account id " + p)
	}
	var all []string
	if err := s.eachIndexed(ctx, accountID, func(id string) error { all = append(all, id); return nil }); err != nil {
		return err
	}
	for _, id := range all {
		if err := s.delete(ctx, accountID, id, &types.Delete{}); err != nil {
			return err
		}
	}
	return nil
}

// item is b as stored, its secrets sealed afresh; b must pass Check.
func (s *Store) item(ctx context.Context, b Binding) (map[string]types.AttributeValue, error) {
	if err := Check(b); err != nil {
		return nil, err
	}
	sealed, err := s.seal(ctx, b)
	if err != nil {
		return nil, err
	}
	it := bindingKey(b.ID)
	for k, v := range map[string]types.AttributeValue{
		"bindingId": ddb.S(b.ID), "accountId": ddb.S(b.AccountID), "type": ddb.S(b.Type), "agentId": ddb.S(b.AgentID),
		"approvers": ddb.L(b.Approvers), "mentionsOnly": &types.AttributeValueMemberBOOL{Value: b.MentionsOnly},
		"version": ddb.N(b.Version), "createdAt": ddb.S(b.CreatedAt.Format(time.RFC3339Nano)), "updatedAt": ddb.S(b.UpdatedAt.Format(time.RFC3339Nano)),
		"secrets": &types.AttributeValueMemberB{Value: sealed},
	} {
		it[k] = v
	}
	for k, v := range map[string]string{"botUserId": b.BotUserID, "botId": b.BotID, "botUsername": b.BotUsername} {
		if v != "" {
			it[k] = ddb.S(v)
		}
	}
	return it, nil
}

// from is the binding an item holds, and its sealed secrets.
func from(it map[string]types.AttributeValue) (Binding, []byte, error) {
	b := Binding{
		ID: ddb.String(it, "bindingId"), AccountID: ddb.String(it, "accountId"), Type: ddb.String(it, "type"), AgentID: ddb.String(it, "agentId"),
		Approvers: append([]string{}, ddb.Strings(it, "approvers")...), MentionsOnly: ddb.Bool(it, "mentionsOnly"),
		BotUserID: ddb.String(it, "botUserId"), BotID: ddb.String(it, "botId"), BotUsername: ddb.String(it, "botUsername"),
	}
	var sealed []byte
	if v, ok := it["secrets"].(*types.AttributeValueMemberB); ok {
		sealed = v.Value
	}
	var err error
	if b.Version, err = ddb.Int(it, "version"); err == nil {
		if b.CreatedAt, err = time.Parse(time.RFC3339Nano, ddb.String(it, "createdAt")); err == nil {
			b.UpdatedAt, err = time.Parse(time.RFC3339Nano, ddb.String(it, "updatedAt"))
		}
	}
	if err != nil {
		return Binding{}, nil, fmt.Errorf("channel binding %s: %w", b.ID, err)
	}
	return b, sealed, nil
}

// aad binds sealed secrets to their binding, so they cannot be replayed onto another record (an
// agent's among them: the prefix keeps the two apart whatever the ids).
func aad(b Binding) []byte { return []byte("channel-binding/" + b.AccountID + "/" + b.ID) }

func (s *Store) seal(ctx context.Context, b Binding) ([]byte, error) {
	sealed, err := agentstore.SealJSON(ctx, s.sealer, b.Secrets, aad(b))
	if err != nil {
		return nil, fmt.Errorf("sealing the secrets of channel binding %s: %w", b.ID, err)
	}
	return sealed, nil
}

func (s *Store) open(ctx context.Context, b Binding, sealed []byte) (Binding, error) {
	if err := agentstore.OpenJSON(ctx, s.sealer, sealed, aad(b), &b.Secrets); err != nil {
		return Binding{}, fmt.Errorf("opening the secrets of channel binding %s: %w", b.ID, err)
	}
	return b, nil
}
