package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/ddb"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Parent links a subagent's conversation to the turn that started it. The zero Parent is a
// conversation a client started.
type Parent struct {
	ConversationID string
	// TurnKey names the calling turn (its stream log's key).
	TurnKey string
	// Explicit: the child answers its caller only through notify_parent (a resumable
	// subagent's parentCommunication "explicit").
	Explicit bool
	// Tool is the tool the caller called it through.
	Tool string
	// EventID is the calling turn's event, whose usage the child's adds to; empty without one.
	EventID string
	// Depth is how many calls down from a client's conversation it is: 1 for a child.
	Depth int
	// EndUser, given to CreateChild, is the end user the caller's conversation belongs to, whose
	// the child is too; parentOf leaves it empty (Head.EndUser has it).
	EndUser string
}

// CreateChild creates a subagent's conversation for agentID, linked to its parent. Creating it
// again with the same id is not an error (a retried call, or a resumable instance's next
// message), so its id must be derived from the call or the instance.
func (s *Store) CreateChild(ctx context.Context, accountID, conversationID, agentID string, p Parent, vars Vars) error {
	item := map[string]types.AttributeValue{
		"conversationKey":    ddb.S(accountID + "#" + conversationID),
		"seq":                ddb.N(0),
		"accountId":          ddb.S(accountID),
		"agentId":            ddb.S(agentID),
		"nextSeq":            ddb.N(1),
		"parentConversation": ddb.S(p.ConversationID),
		// ByOwner finds a conversation's children by the owner key of its own (childOwner).
		"ownerKey":    ddb.S(childOwner(accountID, p.ConversationID)),
		"updatedAt":   ddb.N(time.Now().UnixMilli()),
		"parentTurn":  ddb.S(p.TurnKey),
		"parentTool":  ddb.S(p.Tool),
		"parentEvent": ddb.S(p.EventID),
		"depth":       ddb.N(int64(p.Depth)),
	}
	if p.Explicit {
		item["parentExplicit"] = &types.AttributeValueMemberBOOL{Value: true}
	}
	if len(vars) > 0 {
		item["vars"] = vars.attr()
	}
	if p.EndUser != "" {
		item["endUser"] = ddb.S(p.EndUser)
	}
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           &s.tables.Conversations,
		Item:                item,
		ConditionExpression: aws.String("attribute_not_exists(conversationKey)"),
	})
	if err != nil && !ddb.ConditionFailed(err) {
		return fmt.Errorf("creating subagent conversation %s: %w", conversationID, err)
	}
	return nil
}

// parentOf reads the link a subagent's conversation head carries.
func parentOf(head map[string]types.AttributeValue) Parent {
	depth, _ := ddb.Int(head, "depth")
	return Parent{
		ConversationID: ddb.String(head, "parentConversation"), TurnKey: ddb.String(head, "parentTurn"),
		Tool: ddb.String(head, "parentTool"), EventID: ddb.String(head, "parentEvent"), Depth: int(depth), Explicit: ddb.Bool(head, "parentExplicit"),
	}
}

// Parent is the turn that started the conversation, when a subagent call did.
func (t *Lease) Parent() Parent { return t.parent }

// AddUsage adds a subagent's token usage to its caller's: the calling conversation's totals and,
// when the call has one, the calling turn's event.
func (s *Store) AddUsage(ctx context.Context, accountID string, p Parent, u model.Usage) error {
	values := map[string]types.AttributeValue{}
	add := "ADD " + usageAdd(u, values)
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.tables.Conversations,
		Key:                       map[string]types.AttributeValue{"conversationKey": ddb.S(accountID + "#" + p.ConversationID), "seq": ddb.N(0)},
		UpdateExpression:          aws.String(add),
		ConditionExpression:       aws.String("attribute_exists(conversationKey)"),
		ExpressionAttributeValues: values,
	})
	if err != nil && !ddb.ConditionFailed(err) {
		return fmt.Errorf("adding a subagent's usage to conversation %s: %w", p.ConversationID, err)
	}
	if p.EventID == "" {
		return nil
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.tables.Events,
		Key:                       map[string]types.AttributeValue{"eventKey": ddb.S(accountID + "#" + p.EventID)},
		UpdateExpression:          aws.String(add),
		ConditionExpression:       aws.String("attribute_exists(eventKey)"),
		ExpressionAttributeValues: values,
	})
	if err != nil && !ddb.ConditionFailed(err) {
		return fmt.Errorf("adding a subagent's usage to event %s: %w", p.EventID, err)
	}
	return nil
}

// HasTurns reports whether the store was given the tables of conversations and events.
func (s *Store) HasTurns() bool { return s.tables.Conversations != "" && s.tables.Events != "" }

// Child is a subagent call a turn made, as its event lists it.
type Child struct {
	ToolCallID string `json:"toolCallId"`
	Agent      string `json:"agent"`
	ThreadID   string `json:"threadId"`
	// EventID is a non-blocking child's turn; empty for a blocking one.
	EventID string `json:"eventId,omitempty"`
}

// AddChild lists a subagent call on the calling turn's event. A call added twice (a retried
// call) is listed once by Event.
func (s *Store) AddChild(ctx context.Context, accountID, eventID string, c Child) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           &s.tables.Events,
		Key:                 map[string]types.AttributeValue{"eventKey": ddb.S(accountID + "#" + eventID)},
		UpdateExpression:    aws.String("SET children = list_append(if_not_exists(children, :none), :c)"),
		ConditionExpression: aws.String("attribute_exists(eventKey)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":none": &types.AttributeValueMemberL{}, ":c": &types.AttributeValueMemberL{Value: []types.AttributeValue{ddb.S(string(b))}},
		},
	})
	if err != nil && !ddb.ConditionFailed(err) {
		return fmt.Errorf("listing a subagent call on event %s: %w", eventID, err)
	}
	return nil
}

// childrenOf reads an event's children, each listed once.
func childrenOf(item map[string]types.AttributeValue) []Child {
	l, _ := item["children"].(*types.AttributeValueMemberL)
	if l == nil {
		return nil
	}
	var out []Child
	seen := map[string]bool{}
	for _, v := range l.Value {
		sv, ok := v.(*types.AttributeValueMemberS)
		var c Child
		if !ok || json.Unmarshal([]byte(sv.Value), &c) != nil || seen[c.ThreadID] {
			continue
		}
		seen[c.ThreadID] = true
		out = append(out, c)
	}
	return out
}

// Instance is a resumable subagent instance of a conversation: a named child that persists
// across the conversation's turns.
type Instance struct {
	Name string `json:"name"`
	// Agent is the config.subagent entry it was created from, AgentID the agent that entry runs.
	Agent    string `json:"agent"`
	AgentID  string `json:"agentId"`
	ThreadID string `json:"threadId"`
}

// Refusals of AddInstance.
var (
	ErrInstanceExists = errors.New("an instance of that name exists")
	ErrInstanceLimit  = errors.New("the instances of that agent are at their limit")
)

func instanceAttr(name string) string   { return "instance:" + name }
func instancesAttr(agent string) string { return "instances:" + agent }

// AddInstance records a new instance on the calling conversation's head, in one conditional
// write with its agent's count, so at most max instances of one agent exist per conversation.
func (s *Store) AddInstance(ctx context.Context, accountID, conversationID string, in Instance, max int) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           &s.tables.Conversations,
		Key:                 map[string]types.AttributeValue{"conversationKey": ddb.S(accountID + "#" + conversationID), "seq": ddb.N(0)},
		UpdateExpression:    aws.String("SET #i = :v ADD #n :one"),
		ConditionExpression: aws.String("attribute_exists(conversationKey) AND attribute_not_exists(#i) AND (attribute_not_exists(#n) OR #n < :max)"),
		ExpressionAttributeNames: map[string]string{
			"#i": instanceAttr(in.Name), "#n": instancesAttr(in.Agent),
		},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":v": ddb.S(string(b)), ":one": ddb.N(1), ":max": ddb.N(int64(max))},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var failed *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &failed) && failed.Item == nil:
		return ErrNotFound
	case errors.As(err, &failed) && failed.Item[instanceAttr(in.Name)] != nil:
		return ErrInstanceExists
	case errors.As(err, &failed):
		return ErrInstanceLimit
	case err != nil:
		return fmt.Errorf("recording subagent instance %s: %w", in.Name, err)
	}
	return nil
}

// Instances are the resumable subagent instances a conversation created, by name; ErrNotFound
// for a conversation that does not exist.
func (s *Store) Instances(ctx context.Context, accountID, conversationID string) (map[string]Instance, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &s.tables.Conversations,
		Key:            map[string]types.AttributeValue{"conversationKey": ddb.S(accountID + "#" + conversationID), "seq": ddb.N(0)},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("loading the subagent instances of %s: %w", conversationID, err)
	}
	if out.Item == nil {
		return nil, ErrNotFound
	}
	found := map[string]Instance{}
	for k, v := range out.Item {
		sv, ok := v.(*types.AttributeValueMemberS)
		var in Instance
		if !ok || !strings.HasPrefix(k, "instance:") || json.Unmarshal([]byte(sv.Value), &in) != nil {
			continue
		}
		found[in.Name] = in
	}
	return found, nil
}
