package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentharness/harness/shared/state/ddb"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ErrConflict: the record changed since it was read.
var ErrConflict = errors.New("changed by another request")

// ErrExists: a record with that id already exists.
var ErrExists = errors.New("already exists")

// Agent is a stored agent config. Config has its secrets redacted; Secrets holds them sealed.
type Agent struct {
	AccountID string
	ID        string
	Config    json.RawMessage
	Secrets   []byte
	// Version counts writes, for optimistic concurrency.
	Version   int64
	CreatedAt string
	UpdatedAt string
}

func agentFrom(it map[string]types.AttributeValue) (Agent, error) {
	a := Agent{
		AccountID: ddb.String(it, "accountId"),
		ID:        ddb.String(it, "agentId"),
		Config:    json.RawMessage(ddb.String(it, "config")),
		CreatedAt: ddb.String(it, "createdAt"),
		UpdatedAt: ddb.String(it, "updatedAt"),
	}
	if v, ok := it["secrets"].(*types.AttributeValueMemberB); ok {
		a.Secrets = v.Value
	}
	var err error
	if a.Version, err = ddb.Int(it, "version"); err != nil {
		return Agent{}, fmt.Errorf("agent %s: %w", a.ID, err)
	}
	return a, nil
}

func agentItem(a Agent) map[string]types.AttributeValue {
	item := map[string]types.AttributeValue{
		"accountId": ddb.S(a.AccountID),
		"agentId":   ddb.S(a.ID),
		"config":    ddb.S(string(a.Config)),
		"version":   ddb.N(a.Version),
		"createdAt": ddb.S(a.CreatedAt),
		"updatedAt": ddb.S(a.UpdatedAt),
	}
	if len(a.Secrets) > 0 {
		item["secrets"] = &types.AttributeValueMemberB{Value: a.Secrets}
	}
	return item
}

// CreateAgent stores a new agent (version 1), or fails with ErrExists.
func (s *Store) CreateAgent(ctx context.Context, a Agent, now time.Time) (Agent, error) {
	if !json.Valid(a.Config) {
		return Agent{}, errors.New("agent config is not valid JSON")
	}
	a.Version = 1
	a.CreatedAt = now.UTC().Format(time.RFC3339)
	a.UpdatedAt = a.CreatedAt
	// The account must be live as the agent lands: an agent written after the account's purge
	// has run would never be removed.
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{
			TableName:           &s.tables.Agents,
			Item:                agentItem(a),
			ConditionExpression: aws.String("attribute_not_exists(agentId)"),
		}},
		{ConditionCheck: &types.ConditionCheck{
			TableName:           &s.tables.Accounts,
			Key:                 map[string]types.AttributeValue{"accountId": ddb.S(a.AccountID)},
			ConditionExpression: aws.String(liveAccount),
		}},
	}})
	if r := ddb.Cancellations(err); len(r) == 2 {
		switch {
		case ddb.CheckFailed(r[0]):
			return Agent{}, ErrExists
		case ddb.CheckFailed(r[1]):
			return Agent{}, fmt.Errorf("account %s: %w", a.AccountID, ErrAccountGone)
		}
	}
	if err != nil {
		return Agent{}, fmt.Errorf("storing agent %s: %w", a.ID, err)
	}
	return a, nil
}

// UpdateAgent replaces an agent's config if it is still at a.Version, and returns it at the
// next version; ErrConflict if another write came first, ErrNotFound if it is gone.
func (s *Store) UpdateAgent(ctx context.Context, a Agent, now time.Time) (Agent, error) {
	if !json.Valid(a.Config) {
		return Agent{}, errors.New("agent config is not valid JSON")
	}
	prev := a.Version
	a.Version++
	a.UpdatedAt = now.UTC().Format(time.RFC3339)
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           &s.tables.Agents,
		Item:                                agentItem(a),
		ConditionExpression:                 aws.String("version = :v"),
		ExpressionAttributeValues:           map[string]types.AttributeValue{":v": ddb.N(prev)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		if failed.Item == nil {
			return Agent{}, ErrNotFound
		}
		return Agent{}, ErrConflict
	}
	if err != nil {
		return Agent{}, fmt.Errorf("updating agent %s: %w", a.ID, err)
	}
	return a, nil
}

// Agent loads one of an account's agents, or ErrNotFound.
func (s *Store) Agent(ctx context.Context, accountID, agentID string) (Agent, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &s.tables.Agents,
		Key:            map[string]types.AttributeValue{"accountId": ddb.S(accountID), "agentId": ddb.S(agentID)},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return Agent{}, fmt.Errorf("loading agent %s: %w", agentID, err)
	}
	if out.Item == nil {
		return Agent{}, ErrNotFound
	}
	return agentFrom(out.Item)
}

// ListAgents returns all of an account's agents, ordered by id.
func (s *Store) ListAgents(ctx context.Context, accountID string) ([]Agent, error) {
	in := &dynamodb.QueryInput{
		TableName:                 &s.tables.Agents,
		KeyConditionExpression:    aws.String("accountId = :a"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":a": ddb.S(accountID)},
		ConsistentRead:            aws.Bool(true),
	}
	var agents []Agent
	for p := dynamodb.NewQueryPaginator(s.db, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing agents: %w", err)
		}
		for _, it := range page.Items {
			a, err := agentFrom(it)
			if err != nil {
				return nil, err
			}
			agents = append(agents, a)
		}
	}
	return agents, nil
}

// DeleteAgent deletes one of an account's agents, or fails with ErrNotFound.
func (s *Store) DeleteAgent(ctx context.Context, accountID, agentID string) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:           &s.tables.Agents,
		Key:                 map[string]types.AttributeValue{"accountId": ddb.S(accountID), "agentId": ddb.S(agentID)},
		ConditionExpression: aws.String("attribute_exists(agentId)"),
	})
	if ddb.ConditionFailed(err) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("deleting agent %s: %w", agentID, err)
	}
	return nil
}
