package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentharness/harness/shared/state/ddb"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A turn tree is the turns one client request set off: its root turn, and every turn started
// below it by a subagent call or by a POST /mcp call that came from one of its turns. The tree
// item, kept beside the events (it expires as they do, and holds no content), counts them and
// lists them, so a runaway tree is refused and a stopped root can stop the rest. A tree with no
// turn below its root has no item.

var (
	// ErrTreeFull: the tree holds as many turns as it may.
	ErrTreeFull = errors.New("the turn tree is full")
	// ErrTreeStopped: the tree's root was stopped or failed; nothing more starts in it.
	ErrTreeStopped = errors.New("the turn tree was stopped")
)

// TreeMember is a turn of a tree below its root: the account and conversation it runs in,
// and a key of its own (its event, or its call's key).
type TreeMember struct {
	AccountID, ConversationID, Key string
}

// treeKey is the event table's key of the tree rooted at root; '/' is outside the id grammar,
// so no event is ever named like it.
func treeKey(root string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"eventKey": ddb.S("tree/" + root)}
}

// member encodes m for the tree's set; ids hold no '/', so it splits back.
func (m TreeMember) member() string { return m.AccountID + "/" + m.ConversationID + "/" + m.Key }

// JoinTree counts m as a turn of the tree rooted at root, which may hold maxTurns turns, its
// root included. Joining again as the same member is not counted twice (a retried call). It
// returns ErrTreeFull or ErrTreeStopped when m may not start.
func (s *Store) JoinTree(ctx context.Context, root string, m TreeMember, maxTurns int, now time.Time, ttl time.Duration) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:        &s.tables.Events,
		Key:              treeKey(root),
		UpdateExpression: aws.String("ADD members :m SET expiresAt = :exp"),
		ConditionExpression: aws.String("attribute_not_exists(stopped) AND " +
			"(attribute_not_exists(members) OR contains(members, :one) OR size(members) < :max)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":m": &types.AttributeValueMemberSS{Value: []string{m.member()}}, ":one": ddb.S(m.member()),
			":max": ddb.N(int64(maxTurns - 1)), ":exp": ddb.N(now.Add(ttl).Unix()),
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		if _, stopped := failed.Item["stopped"]; stopped {
			return ErrTreeStopped
		}
		return ErrTreeFull
	}
	if err != nil {
		return fmt.Errorf("counting a turn of tree %s: %w", root, err)
	}
	return nil
}

// TreeStopped reports whether the tree rooted at root was stopped.
func (s *Store) TreeStopped(ctx context.Context, root string) (bool, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.tables.Events, Key: treeKey(root),
		ProjectionExpression: aws.String("stopped"), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return false, fmt.Errorf("reading tree %s: %w", root, err)
	}
	_, stopped := out.Item["stopped"]
	return stopped, nil
}

// StopTree marks the tree rooted at root stopped, so no turn joins it any more (the item is
// made if the tree had none yet, so a join racing the stop is refused too), and returns the
// turns below its root.
func (s *Store) StopTree(ctx context.Context, root string, now time.Time, ttl time.Duration) ([]TreeMember, error) {
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.tables.Events, Key: treeKey(root),
		UpdateExpression: aws.String("SET stopped = :t, expiresAt = if_not_exists(expiresAt, :exp)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":t": &types.AttributeValueMemberBOOL{Value: true}, ":exp": ddb.N(now.Add(ttl).Unix()),
		},
		ReturnValues: types.ReturnValueAllNew,
	})
	if err != nil {
		return nil, fmt.Errorf("stopping tree %s: %w", root, err)
	}
	set, _ := out.Attributes["members"].(*types.AttributeValueMemberSS)
	if set == nil {
		return nil, nil
	}
	members := make([]TreeMember, 0, len(set.Value))
	for _, v := range set.Value {
		if parts := strings.SplitN(v, "/", 3); len(parts) == 3 {
			members = append(members, TreeMember{AccountID: parts[0], ConversationID: parts[1], Key: parts[2]})
		}
	}
	return members, nil
}
