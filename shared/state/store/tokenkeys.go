package store

import (
	"context"
	"fmt"

	"github.com/agentharness/harness/shared/state/ddb"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TokenKey is the key an account's end-user tokens are signed with, sealed, on the account's
// item: rotating the secret or deleting the account removes it, and with it every token it
// signed.
type TokenKey struct {
	ID     string
	Sealed []byte
}

// AccountTokenKey returns the account's token key; a zero TokenKey when it has none yet, and
// ErrNotFound for no account.
func (s *Store) AccountTokenKey(ctx context.Context, accountID string) (TokenKey, error) {
	item, err := s.accountItem(ctx, accountID)
	if err != nil {
		return TokenKey{}, err
	}
	k := TokenKey{ID: ddb.String(item, "tokenKeyId")}
	if b, ok := item["tokenKey"].(*types.AttributeValueMemberB); ok {
		k.Sealed = b.Value
	}
	return k, nil
}

// PutAccountTokenKey gives the account the token key k unless it has one already, and returns
// the one it has then: of two first mints at once, both sign with the key that was written.
func (s *Store) PutAccountTokenKey(ctx context.Context, accountID string, k TokenKey) (TokenKey, error) {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           &s.tables.Accounts,
		Key:                 map[string]types.AttributeValue{"accountId": ddb.S(accountID)},
		UpdateExpression:    aws.String("SET tokenKeyId = :id, tokenKey = :k"),
		ConditionExpression: aws.String(liveAccount + " AND attribute_not_exists(tokenKeyId)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":id": ddb.S(k.ID), ":k": &types.AttributeValueMemberB{Value: k.Sealed},
		},
	})
	if ddb.ConditionFailed(err) {
		return s.AccountTokenKey(ctx, accountID)
	}
	if err != nil {
		return TokenKey{}, fmt.Errorf("storing the token key of account %s: %w", accountID, err)
	}
	return k, nil
}
