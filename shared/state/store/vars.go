package store

import (
	"context"
	"fmt"
	"maps"

	"github.com/agentharness/harness/shared/state/ddb"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Vars are a thread's (conversation's) variables by name, each value sealed: the store never
// holds one in the clear, and only the engine's sealer opens them (turn/vars.go). A subagent's
// thread starts with a copy of its caller's (CreateChild).
type Vars map[string][]byte

// varsOf reads the variables a conversation head holds.
func varsOf(head map[string]types.AttributeValue) Vars {
	m, ok := head["vars"].(*types.AttributeValueMemberM)
	if !ok || len(m.Value) == 0 {
		return nil
	}
	out := make(Vars, len(m.Value))
	for name, v := range m.Value {
		if b, ok := v.(*types.AttributeValueMemberB); ok {
			out[name] = b.Value
		}
	}
	return out
}

// attr is vs as a head attribute.
func (vs Vars) attr() types.AttributeValue {
	m := make(map[string]types.AttributeValue, len(vs))
	for name, sealed := range vs {
		m[name] = &types.AttributeValueMemberB{Value: sealed}
	}
	return &types.AttributeValueMemberM{Value: m}
}

// Vars are the conversation's variables as the lease was taken, with those SetVars added.
func (t *Lease) Vars() Vars { return t.vars }

// SetVars adds vars to the conversation's variables, replacing those of the same names, while
// the lease is held.
func (t *Lease) SetVars(ctx context.Context, vars Vars) error {
	if len(vars) == 0 {
		return nil
	}
	merged := maps.Clone(t.vars)
	if merged == nil {
		merged = Vars{}
	}
	maps.Copy(merged, vars)
	_, err := t.s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &t.s.tables.Conversations,
		Key:                       map[string]types.AttributeValue{"conversationKey": ddb.S(t.key), "seq": ddb.N(0)},
		UpdateExpression:          aws.String("SET vars = :vars"),
		ConditionExpression:       aws.String("leaseOwner = :owner"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":vars": merged.attr(), ":owner": ddb.S(t.owner)},
	})
	if ddb.ConditionFailed(err) {
		return ErrLeaseLost
	}
	if err != nil {
		return fmt.Errorf("setting the variables of conversation %s: %w", t.conversationID, err)
	}
	t.vars = merged
	return nil
}

// Vars are the conversation's variables as its opening read them; none for a new one.
func (o *Opening) Vars() Vars {
	if o.conversation == nil {
		return nil
	}
	return varsOf(o.conversation.head)
}
