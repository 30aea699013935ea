package store

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agentharness/harness/shared/state/ddb"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Account is an account owner. Its secret is never stored, only its hash.
type Account struct {
	ID        string `json:"accountId"`
	Username  string `json:"username"`
	CreatedAt string `json:"createdAt"`
	UpdatedAt string `json:"updatedAt,omitempty"`
}

func accountFrom(it map[string]types.AttributeValue) Account {
	return Account{ID: ddb.String(it, "accountId"), Username: ddb.String(it, "username"), CreatedAt: ddb.String(it, "createdAt"), UpdatedAt: ddb.String(it, "updatedAt")}
}

// newSecret makes an account's secret: "hsk_<accountId>.<32 random bytes>". The account id
// tells a function where to confirm the secret without a lookup (secretAccount); it is no
// secret itself, and the random part keeps the whole 256 bits.
func newSecret(accountID string) string { return "hsk_" + accountID + "." + randomToken(32) }

// secretAccount is the account id a secret made by newSecret carries; ok is false for a secret
// of another shape, such as those made before secrets carried it, which the index finds.
func secretAccount(secret string) (id string, ok bool) {
	rest, ok := strings.CutPrefix(secret, "hsk_")
	id, _, found := strings.Cut(rest, ".")
	if !ok || !found || !strings.HasPrefix(id, "acc_") || len(id) > 64 || strings.ContainsFunc(id, notIDRune) {
		return "", false
	}
	return id, true
}

// notIDRune reports a rune newSecret's account ids ("acc_" and base64url) never hold.
func notIDRune(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
}

// CreateAccount stores a new account and returns it with its secret, which is not stored and
// cannot be shown again.
func (s *Store) CreateAccount(ctx context.Context, username string, now time.Time) (Account, string, error) {
	ts := now.UTC().Format(time.RFC3339)
	acc := Account{ID: NewID("acc_"), Username: username, CreatedAt: ts, UpdatedAt: ts}
	secret := newSecret(acc.ID)
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.tables.Accounts,
		Item: map[string]types.AttributeValue{
			"accountId":  ddb.S(acc.ID),
			"username":   ddb.S(acc.Username),
			"createdAt":  ddb.S(acc.CreatedAt),
			"updatedAt":  ddb.S(acc.UpdatedAt),
			"secretHash": ddb.S(HashSecret(secret)),
		},
		ConditionExpression: aws.String("attribute_not_exists(accountId)"),
	})
	if err != nil {
		return Account{}, "", fmt.Errorf("creating account: %w", err)
	}
	return acc, secret, nil
}

// AccountBySecret finds the account whose secret is secret, or ErrNotFound. The secret names
// its account, or the index or the store's memory finds it (accountOf); either way the hash is
// confirmed on a strongly consistent read of the account, so a rotated or deleted secret stops
// working at once.
func (s *Store) AccountBySecret(ctx context.Context, secret string) (Account, error) {
	hash := HashSecret(secret)
	id, _, err := s.accountOf(ctx, secret, hash)
	if err != nil {
		return Account{}, err
	}
	item, err := s.rawAccountItem(ctx, id)
	if err != nil {
		return Account{}, err
	}
	return s.confirmSecret(item, hash)
}

// confirmSecret returns the account of a live account item whose secret hashes to hash, and
// remembers the hash's account; or ErrNotFound, and forgets it.
func (s *Store) confirmSecret(item map[string]types.AttributeValue, hash string) (Account, error) {
	if item == nil || tombstone(item) || subtle.ConstantTimeCompare([]byte(ddb.String(item, "secretHash")), []byte(hash)) != 1 {
		s.secretAccounts.forget(hash)
		return Account{}, ErrNotFound
	}
	acc := accountFrom(item)
	s.secretAccounts.put(hash, acc.ID)
	return acc, nil
}

// accountOf names the account a secret (of this hash) may belong to: the one remembered for
// its hash (proven: an earlier request confirmed it), else the one it carries, else, for a
// secret made before secrets carried their account, the one the index finds, which is
// eventually consistent. Only a strongly consistent read of the account confirms it.
func (s *Store) accountOf(ctx context.Context, secret, hash string) (id string, proven bool, err error) {
	if id, ok := s.secretAccounts.get(hash); ok {
		return id, true, nil
	}
	if id, ok := secretAccount(secret); ok {
		return id, false, nil
	}
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName:                 &s.tables.Accounts,
		IndexName:                 aws.String("BySecretHash"),
		KeyConditionExpression:    aws.String("secretHash = :h"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":h": ddb.S(hash)},
		Limit:                     aws.Int32(1),
	})
	if err != nil {
		return "", false, fmt.Errorf("looking up account: %w", err)
	}
	if len(out.Items) == 0 {
		return "", false, ErrNotFound
	}
	return ddb.String(out.Items[0], "accountId"), false, nil
}

// secretAccounts remembers the account of each secret hash confirmed lately, so a warm function
// knows it is the secret's own before it confirms it again (OpenTurn then reads beside the
// confirmation), and finds a secret of the older shape without the index. It is safe to keep:
// a secret is 256 random bits made for one account, so its hash never names another one, and
// the memory only says where to look; every request still confirms the hash on the account
// read strongly consistent, and a hash that no longer matches is forgotten.
type secretAccounts struct {
	mu  sync.Mutex
	ids map[string]string
}

// maxSecretAccounts bounds the memory; past it an entry is dropped to make room.
const maxSecretAccounts = 4096

func (c *secretAccounts) get(hash string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.ids[hash]
	return id, ok
}

func (c *secretAccounts) put(hash, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ids == nil {
		c.ids = map[string]string{}
	}
	if len(c.ids) >= maxSecretAccounts {
		for k := range c.ids {
			delete(c.ids, k)
			break
		}
	}
	c.ids[hash] = id
}

func (c *secretAccounts) forget(hash string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.ids, hash)
}

// CheckSecretHash returns ErrNotFound unless accountID is live and its secret still hashes to
// hash: what a connection authenticated once must still hold on each command.
func (s *Store) CheckSecretHash(ctx context.Context, accountID, hash string) error {
	item, err := s.accountItem(ctx, accountID)
	if err != nil {
		return err
	}
	if hash == "" || subtle.ConstantTimeCompare([]byte(ddb.String(item, "secretHash")), []byte(hash)) != 1 {
		return ErrNotFound
	}
	return nil
}

// accountItem loads a live account's item; a tombstone is not found, like an absent item.
func (s *Store) accountItem(ctx context.Context, id string) (map[string]types.AttributeValue, error) {
	item, err := s.rawAccountItem(ctx, id)
	if err != nil {
		return nil, err
	}
	if item == nil || tombstone(item) {
		return nil, ErrNotFound
	}
	return item, nil
}

// rawAccountItem loads an account's item, tombstone or not; nil when there is none.
func (s *Store) rawAccountItem(ctx context.Context, id string) (map[string]types.AttributeValue, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &s.tables.Accounts,
		Key:            map[string]types.AttributeValue{"accountId": ddb.S(id)},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("loading account %s: %w", id, err)
	}
	return out.Item, nil
}

// tombstone reports whether an account item is what DeleteAccount left of a deleted account.
func tombstone(item map[string]types.AttributeValue) bool {
	_, ok := item["deletedAt"]
	return ok
}

// liveAccount is the condition of every write to an existing account: a tombstone is gone.
const liveAccount = "attribute_exists(accountId) AND attribute_not_exists(deletedAt)"

// Account loads an account by id, or ErrNotFound.
func (s *Store) Account(ctx context.Context, id string) (Account, error) {
	item, err := s.accountItem(ctx, id)
	if err != nil {
		return Account{}, err
	}
	return accountFrom(item), nil
}

// ListAccounts returns up to limit accounts after the cursor a previous call returned, and
// the cursor of the next page ("" when there is none). Tombstones are left out after the
// limit applies, so a page may be shorter than limit (even empty) with a cursor to go on.
func (s *Store) ListAccounts(ctx context.Context, limit int32, cursor string) ([]Account, string, error) {
	in := &dynamodb.ScanInput{
		TableName:            &s.tables.Accounts,
		Limit:                aws.Int32(limit),
		ProjectionExpression: aws.String("accountId, username, createdAt, updatedAt"),
		FilterExpression:     aws.String("attribute_not_exists(deletedAt)"),
	}
	if cursor != "" {
		in.ExclusiveStartKey = map[string]types.AttributeValue{"accountId": ddb.S(cursor)}
	}
	out, err := s.db.Scan(ctx, in)
	if err != nil {
		return nil, "", fmt.Errorf("listing accounts: %w", err)
	}
	accs := make([]Account, 0, len(out.Items))
	for _, it := range out.Items {
		accs = append(accs, accountFrom(it))
	}
	return accs, ddb.String(out.LastEvaluatedKey, "accountId"), nil
}

// RenameAccount changes an account's username.
func (s *Store) RenameAccount(ctx context.Context, id, username string, now time.Time) (Account, error) {
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.tables.Accounts,
		Key:                       map[string]types.AttributeValue{"accountId": ddb.S(id)},
		UpdateExpression:          aws.String("SET username = :u, updatedAt = :t"),
		ConditionExpression:       aws.String(liveAccount),
		ExpressionAttributeValues: map[string]types.AttributeValue{":u": ddb.S(username), ":t": ddb.S(now.UTC().Format(time.RFC3339))},
		ReturnValues:              types.ReturnValueAllNew,
	})
	if ddb.ConditionFailed(err) {
		return Account{}, ErrNotFound
	}
	if err != nil {
		return Account{}, fmt.Errorf("renaming account %s: %w", id, err)
	}
	return accountFrom(out.Attributes), nil
}

// RotateSecret gives an account a new secret and returns it; the old one stops working at once,
// and so does every end-user token signed with the account's token key, which goes with it.
func (s *Store) RotateSecret(ctx context.Context, id string, now time.Time) (string, error) {
	secret := newSecret(id)
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.tables.Accounts,
		Key:                       map[string]types.AttributeValue{"accountId": ddb.S(id)},
		UpdateExpression:          aws.String("SET secretHash = :h, updatedAt = :t REMOVE tokenKeyId, tokenKey, tokenKeyPub"),
		ConditionExpression:       aws.String(liveAccount),
		ExpressionAttributeValues: map[string]types.AttributeValue{":h": ddb.S(HashSecret(secret)), ":t": ddb.S(now.UTC().Format(time.RFC3339))},
	})
	if ddb.ConditionFailed(err) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("rotating the secret of account %s: %w", id, err)
	}
	return secret, nil
}

// Deleted accounts leave a tombstone until their data is purged (PurgeAccount). It keeps only
// the account's id, when it was deleted and purgeShard/purgeDue, the keys of the sparse index
// PurgeDue through which the sweeper finds purges that were never queued or never finished.
// Every account read treats a tombstone as absent.
const (
	purgeIndex = "PurgeDue"
	purgeShard = "purge"
	// purgeRetry is how long a purge is given before the sweeper queues it again: a purge
	// message lost on the way, or a worker that died mid-purge, costs this much delay.
	purgeRetry = 10 * time.Minute
)

// DeleteAccount turns an account into a tombstone, so its secret stops working at once and its
// provider keys are gone, or fails with ErrNotFound. Its agents and conversations stay until DeleteAgents and
// PurgeAccount remove them; the tombstone keeps the purge owed until then.
func (s *Store) DeleteAccount(ctx context.Context, id string, now time.Time) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           &s.tables.Accounts,
		Key:                 map[string]types.AttributeValue{"accountId": ddb.S(id)},
		UpdateExpression:    aws.String("SET deletedAt = :now, purgeShard = :shard, purgeDue = :due REMOVE secretHash, username, createdAt, updatedAt, tokenKeyId, tokenKey, tokenKeyPub, issuerJwks, issuerJwksUrl, allowedOrigins, " + providerKeyAttrs()),
		ConditionExpression: aws.String(liveAccount),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":now": ddb.N(now.UnixMilli()), ":shard": ddb.S(purgeShard), ":due": ddb.N(now.Add(purgeRetry).UnixMilli()),
		},
	})
	if ddb.ConditionFailed(err) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("deleting account %s: %w", id, err)
	}
	return nil
}

// DeleteAgents deletes all of an account's agents.
func (s *Store) DeleteAgents(ctx context.Context, accountID string) error {
	agents, err := s.ListAgents(ctx, accountID)
	if err != nil {
		return err
	}
	for _, a := range agents {
		if err := s.DeleteAgent(ctx, accountID, a.ID); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	return nil
}
