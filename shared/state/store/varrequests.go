package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentharness/harness/shared/state/ddb"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// VarRequest is a subagent instance subagent_create could not boot: its agent needs variables
// the calling thread does not give it (seed 001 section 6's subagent_env_required). It is kept
// on the calling conversation's head until the variables endpoint boots the instance, once.
type VarRequest struct {
	ID string `json:"id"`
	// Tool is the config.subagent entry the instance was asked of, AgentID the agent it runs.
	Tool    string `json:"tool"`
	AgentID string `json:"agentId"`
	// Name is the instance's name, Message its first message.
	Name    string `json:"name"`
	Message string `json:"message"`
	// Missing are the variables it needs, MaxInstances the entry's resumable.maxInstances.
	Missing      []VarNeed `json:"missing"`
	MaxInstances int       `json:"maxInstances"`
	// Parent is the link to the calling turn the instance's thread takes.
	Parent    Parent    `json:"parent"`
	CreatedAt time.Time `json:"createdAt"`
	// Booted is set once the instance was booted.
	Booted *Booted `json:"booted,omitempty"`
}

// VarNeed is a variable a VarRequest's agent needs, as its agent declares it.
type VarNeed struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Scoped      bool   `json:"scoped,omitempty"`
	Description string `json:"description,omitempty"`
}

// Booted is the instance a VarRequest booted: its thread and its first turn's event.
type Booted struct {
	ThreadID string    `json:"threadId"`
	EventID  string    `json:"eventId"`
	At       time.Time `json:"at"`
}

func varRequestAttr(id string) string { return "varreq:" + id }

// AddVarRequest records r on conversationID's head.
func (s *Store) AddVarRequest(ctx context.Context, accountID, conversationID string, r VarRequest) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.tables.Conversations,
		Key:                       map[string]types.AttributeValue{"conversationKey": ddb.S(accountID + "#" + conversationID), "seq": ddb.N(0)},
		UpdateExpression:          aws.String("SET #r = :v"),
		ConditionExpression:       aws.String("attribute_exists(conversationKey) AND attribute_not_exists(#r)"),
		ExpressionAttributeNames:  map[string]string{"#r": varRequestAttr(r.ID)},
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": ddb.S(string(b))},
	})
	if err != nil {
		return fmt.Errorf("recording variables request %s: %w", r.ID, err)
	}
	return nil
}

// VarRequest reads the request id of conversationID, with the conversation's variables as they
// are now; ErrNotFound when the account's conversation holds no such request.
func (s *Store) VarRequest(ctx context.Context, accountID, conversationID, id string) (VarRequest, Vars, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &s.tables.Conversations,
		Key:            map[string]types.AttributeValue{"conversationKey": ddb.S(accountID + "#" + conversationID), "seq": ddb.N(0)},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return VarRequest{}, nil, fmt.Errorf("loading variables request %s: %w", id, err)
	}
	var r VarRequest
	v, ok := out.Item[varRequestAttr(id)].(*types.AttributeValueMemberS)
	if !ok || json.Unmarshal([]byte(v.Value), &r) != nil {
		return VarRequest{}, nil, ErrNotFound
	}
	return r, varsOf(out.Item), nil
}

// BootVarRequest records that r booted its instance; ErrConflict when it was booted already.
func (s *Store) BootVarRequest(ctx context.Context, accountID, conversationID string, r VarRequest, b Booted) error {
	r.Booted = &b
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.tables.Conversations,
		Key:                       map[string]types.AttributeValue{"conversationKey": ddb.S(accountID + "#" + conversationID), "seq": ddb.N(0)},
		UpdateExpression:          aws.String("SET #r = :v, #b = :at"),
		ConditionExpression:       aws.String("attribute_exists(#r) AND attribute_not_exists(#b)"),
		ExpressionAttributeNames:  map[string]string{"#r": varRequestAttr(r.ID), "#b": varRequestAttr(r.ID) + ":booted"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": ddb.S(string(v)), ":at": ddb.N(b.At.UnixMilli())},
	})
	if ddb.ConditionFailed(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("booting variables request %s: %w", r.ID, err)
	}
	return nil
}
