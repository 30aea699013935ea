package store_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// staleIndex sits between a DynamoDB client and DynamoDB Local. While recording it remembers
// the answer of each index Query; once frozen it answers the same Query with that remembered
// answer, as a global secondary index that has not caught up yet would. Every other request
// reaches the real table. DynamoDB Local updates its indexes at once, so staleness has to be
// replayed to be seen.
type staleIndex struct {
	base   dynamodb.HTTPClient
	mu     sync.Mutex
	frozen bool
	seen   map[string][]byte // request body → response body
}

func (s *staleIndex) Do(req *http.Request) (*http.Response, error) {
	if req.Header.Get("X-Amz-Target") != "DynamoDB_20120810.Query" {
		return s.base.Do(req)
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	s.mu.Lock()
	old, ok := s.seen[string(body)]
	frozen := s.frozen
	s.mu.Unlock()
	if frozen && ok {
		return &http.Response{
			StatusCode: http.StatusOK, Request: req, ContentLength: int64(len(old)),
			Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
			Body:   io.NopCloser(bytes.NewReader(old)),
		}, nil
	}
	res, err := s.base.Do(req)
	if err != nil || res.StatusCode != http.StatusOK {
		return res, err
	}
	got, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return nil, err
	}
	res.Body = io.NopCloser(bytes.NewReader(got))
	s.mu.Lock()
	s.seen[string(body)] = got
	s.mu.Unlock()
	return res, nil
}

// A rotated or deleted secret stops working at once even while the secret-hash index still
// points at the account: the lookup confirms the hash on a consistent read of the account.
// Secrets now carry their account, so only a secret of the older shape (no account in it) is
// looked up through the index: the test gives the account one.
func TestOldSecretFailsWhileTheIndexIsStale(t *testing.T) {
	ctx := context.Background()
	db := testenv.DynamoDB(t)
	tables := testenv.Tables(t, db)
	s := store.New(db, tables)
	stale := &staleIndex{seen: map[string][]byte{}}
	laggingDB := dynamodb.New(db.Options(), func(o *dynamodb.Options) {
		stale.base = o.HTTPClient
		o.HTTPClient = stale
	})
	lagging := store.New(laggingDB, tables)

	for _, tt := range []struct {
		name   string
		revoke func(id string) error
	}{
		{"rotated", func(id string) error { _, err := s.RotateSecret(ctx, id, time.Now()); return err }},
		{"deleted", func(id string) error { return s.DeleteAccount(ctx, id, time.Now()) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			acc, _, err := s.CreateAccount(ctx, "ada", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			secret := "hsk_" + strings.Repeat("k", 38) + tt.name // the older shape
			_, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName:                 &tables.Accounts,
				Key:                       map[string]types.AttributeValue{"accountId": &types.AttributeValueMemberS{Value: acc.ID}},
				UpdateExpression:          aws.String("SET secretHash = :h"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":h": &types.AttributeValueMemberS{Value: store.HashSecret(secret)}},
			})
			if err != nil {
				t.Fatal(err)
			}
			stale.mu.Lock()
			stale.frozen = false
			stale.mu.Unlock()
			if got, err := lagging.AccountBySecret(ctx, secret); err != nil || got.ID != acc.ID {
				t.Fatalf("before revoking: AccountBySecret = %+v, %v; want %s", got, err, acc.ID)
			}
			if o, err := lagging.OpenTurn(ctx, secret, "agent", "c", false); err != nil || o.Account.ID != acc.ID {
				t.Fatalf("before revoking: OpenTurn = %+v, %v; want %s", o, err, acc.ID)
			}
			if err := tt.revoke(acc.ID); err != nil {
				t.Fatal(err)
			}
			stale.mu.Lock()
			stale.frozen = true
			stale.mu.Unlock()
			// One function that remembers the secret's account, one that asks the stale index.
			for _, st := range []*store.Store{lagging, store.New(laggingDB, tables)} {
				if got, err := st.AccountBySecret(ctx, secret); !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("%s secret through a stale index: AccountBySecret = %+v, %v; want ErrNotFound", tt.name, got, err)
				}
				if o, err := st.OpenTurn(ctx, secret, "agent", "c", false); !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("%s secret: OpenTurn = %+v, %v; want ErrNotFound", tt.name, o, err)
				}
			}
		})
	}
}
