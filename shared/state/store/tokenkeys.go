package store

import (
	"context"
	"fmt"
	"time"

	"github.com/agentharness/harness/shared/state/ddb"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TokenKey is the key an account's end-user tokens are signed with, on the account's item:
// rotating the secret or deleting the account removes it, and with it every token it signed.
// Its private half is sealed; its public half, which verifies, is not a secret.
type TokenKey struct {
	ID     string
	Sealed []byte
	Public []byte
}

// Access is what decides who may call an account's agents besides its secret: the key of the
// tokens the harness mints for it, the keys it registered to mint its own, and the browser
// origins it lets call it.
type Access struct {
	Account  Account
	TokenKey TokenKey
	// Issuer is the JWKS the account registered inline (JSON), IssuerURL where it publishes
	// one; both empty when it mints no tokens of its own.
	Issuer    string
	IssuerURL string
	// Origins are the origins (scheme://host[:port]) whose pages may call the account's agents.
	Origins []string
	// providerKeys are the account's own provider keys as the same read found them, which a
	// turn opened with this Access takes instead of reading the item again (OpenTurnFor).
	providerKeys map[string]ProviderKey
}

// AccountAccess reads an account's Access in one consistent read, or ErrNotFound.
func (s *Store) AccountAccess(ctx context.Context, accountID string) (Access, error) {
	item, err := s.accountItem(ctx, accountID)
	if err != nil {
		return Access{}, err
	}
	return accessFrom(item), nil
}

func accessFrom(item map[string]types.AttributeValue) Access {
	a := Access{
		Account:  accountFrom(item),
		TokenKey: TokenKey{ID: ddb.String(item, "tokenKeyId")},
		Issuer:   ddb.String(item, "issuerJwks"), IssuerURL: ddb.String(item, "issuerJwksUrl"),
		Origins: ddb.Strings(item, "allowedOrigins"), providerKeys: providerKeysFrom(item),
	}
	if b, ok := item["tokenKey"].(*types.AttributeValueMemberB); ok {
		a.TokenKey.Sealed = b.Value
	}
	if b, ok := item["tokenKeyPub"].(*types.AttributeValueMemberB); ok {
		a.TokenKey.Public = b.Value
	}
	return a
}

// AccountTokenKey returns the account's token key; a zero TokenKey when it has none yet, and
// ErrNotFound for no account.
func (s *Store) AccountTokenKey(ctx context.Context, accountID string) (TokenKey, error) {
	a, err := s.AccountAccess(ctx, accountID)
	return a.TokenKey, err
}

// PutAccountTokenKey gives the account the token key k unless it has one already, and returns
// the one it has then: of two first mints at once, both sign with the key that was written.
func (s *Store) PutAccountTokenKey(ctx context.Context, accountID string, k TokenKey) (TokenKey, error) {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           &s.tables.Accounts,
		Key:                 map[string]types.AttributeValue{"accountId": ddb.S(accountID)},
		UpdateExpression:    aws.String("SET tokenKeyId = :id, tokenKey = :k, tokenKeyPub = :pub"),
		ConditionExpression: aws.String(liveAccount + " AND attribute_not_exists(tokenKeyId)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":id": ddb.S(k.ID), ":k": &types.AttributeValueMemberB{Value: k.Sealed}, ":pub": &types.AttributeValueMemberB{Value: k.Public},
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

// SetIssuer registers the keys the account mints its own tokens with: a JWKS inline (jwks,
// JSON) or at a URL; both empty removes them, which revokes every token they signed.
func (s *Store) SetIssuer(ctx context.Context, accountID, jwks, url string, now time.Time) error {
	return s.setAccess(ctx, accountID, map[string]types.AttributeValue{"issuerJwks": strOrNil(jwks), "issuerJwksUrl": strOrNil(url)}, now)
}

// SetOrigins sets the origins whose pages may call the account's agents; none removes them.
func (s *Store) SetOrigins(ctx context.Context, accountID string, origins []string, now time.Time) error {
	var v types.AttributeValue
	if len(origins) > 0 {
		v = ddb.L(origins)
	}
	return s.setAccess(ctx, accountID, map[string]types.AttributeValue{"allowedOrigins": v}, now)
}

// strOrNil is s as an attribute, nil (removed) when empty.
func strOrNil(s string) types.AttributeValue {
	if s == "" {
		return nil
	}
	return ddb.S(s)
}

// setAccess sets the attributes of attrs on a live account's item, removing those that are nil.
func (s *Store) setAccess(ctx context.Context, accountID string, attrs map[string]types.AttributeValue, now time.Time) error {
	set, remove := "SET updatedAt = :t", ""
	vals := map[string]types.AttributeValue{":t": ddb.S(now.UTC().Format(time.RFC3339))}
	for name, v := range attrs {
		if v == nil {
			remove += ", " + name
			continue
		}
		set += ", " + name + " = :" + name
		vals[":"+name] = v
	}
	update := set
	if remove != "" {
		update += " REMOVE " + remove[2:]
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.tables.Accounts,
		Key:                       map[string]types.AttributeValue{"accountId": ddb.S(accountID)},
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String(liveAccount),
		ExpressionAttributeValues: vals,
	})
	if ddb.ConditionFailed(err) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("updating account %s: %w", accountID, err)
	}
	return nil
}
