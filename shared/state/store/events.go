package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/ddb"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TurnStatus is the status row of a turn request received with an event id: what /status reads.
type TurnStatus struct {
	ID             string
	ConversationID string
	// EndUser is the end user whose request the turn is; empty for the account's.
	EndUser   string
	Status    string
	CreatedAt time.Time
	UpdatedAt time.Time
	Usage     model.Usage
	// FromSeq and ToSeq bound the turn's messages in the conversation ([FromSeq, ToSeq)).
	FromSeq, ToSeq int64
	// Detail is what the status route shows besides: the answer's text, the error, or what
	// the turn waits for.
	Detail json.RawMessage
	// Children are the subagent calls the turn made.
	Children []Child
}

// StatusUpdate is one step of a turn's progress, recorded on its status row.
type StatusUpdate struct {
	Status string
	// Usage is added to the event's totals (a continuation adds its own).
	Usage model.Usage
	// FromSeq is kept from the first update that sets it; ToSeq is replaced.
	FromSeq, ToSeq int64
	Detail         json.RawMessage
	At             time.Time
}

// UpdateEvent records an event's progress. While the event is final (completed, failed), a
// late update is refused with ErrEventFinal, so a stray duplicate never reopens it.
func (s *Store) UpdateEvent(ctx context.Context, accountID, eventID string, u StatusUpdate) error {
	values := map[string]types.AttributeValue{
		":done": ddb.S(EventCompleted), ":failed": ddb.S(EventFailed), ":cancelled": ddb.S(EventCancelled),
	}
	update := "SET " + u.set(values) + " ADD " + usageAdd(u.Usage, values)
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.tables.Events,
		Key:                       map[string]types.AttributeValue{"eventKey": ddb.S(accountID + "#" + eventID)},
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String("attribute_exists(eventKey) AND #s <> :done AND #s <> :failed AND #s <> :cancelled"),
		ExpressionAttributeNames:  map[string]string{"#s": "status"},
		ExpressionAttributeValues: values,
	})
	if ddb.ConditionFailed(err) {
		return ErrEventFinal
	}
	if err != nil {
		return fmt.Errorf("updating event %s: %w", eventID, err)
	}
	return nil
}

// set is the SET clause that records u (status, time, the message range, detail), with its
// values added to values.
func (u StatusUpdate) set(values map[string]types.AttributeValue) string {
	values[":s"], values[":at"] = ddb.S(u.Status), ddb.N(u.At.UnixMilli())
	set := "#s = :s, updatedAt = :at"
	if u.FromSeq > 0 {
		set += ", fromSeq = if_not_exists(fromSeq, :from)"
		values[":from"] = ddb.N(u.FromSeq)
	}
	if u.ToSeq > 0 {
		set += ", toSeq = :to"
		values[":to"] = ddb.N(u.ToSeq)
	}
	if len(u.Detail) > 0 {
		set += ", detail = :d"
		values[":d"] = ddb.S(string(u.Detail))
	}
	return set
}

// ErrEventFinal: the event already completed or failed.
var ErrEventFinal = errors.New("event already finished")

// Event reads an event's TurnStatus (consistent), or ErrNotFound.
func (s *Store) Event(ctx context.Context, accountID, eventID string) (TurnStatus, error) {
	it, err := s.eventItem(ctx, accountID, eventID)
	if err != nil {
		return TurnStatus{}, err
	}
	return eventOf(eventID, it), nil
}

// eventItem reads an event's item (consistent), or ErrNotFound.
func (s *Store) eventItem(ctx context.Context, accountID, eventID string) (map[string]types.AttributeValue, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &s.tables.Events,
		Key:            map[string]types.AttributeValue{"eventKey": ddb.S(accountID + "#" + eventID)},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("loading event %s: %w", eventID, err)
	}
	if out.Item == nil {
		return nil, ErrNotFound
	}
	return out.Item, nil
}

// eventOf is the TurnStatus an event's item records.
func eventOf(eventID string, it map[string]types.AttributeValue) TurnStatus {
	e := TurnStatus{ID: eventID, ConversationID: ddb.String(it, "conversationId"), EndUser: ddb.String(it, "endUser"), Status: ddb.String(it, "status")}
	if t, err := time.Parse(time.RFC3339, ddb.String(it, "createdAt")); err == nil {
		e.CreatedAt = t
	}
	if ms, err := ddb.Int(it, "updatedAt"); err == nil {
		e.UpdatedAt = time.UnixMilli(ms).UTC()
	}
	e.Usage = usageOf(it)
	e.FromSeq, _ = ddb.Int(it, "fromSeq")
	e.ToSeq, _ = ddb.Int(it, "toSeq")
	if d := ddb.String(it, "detail"); d != "" {
		e.Detail = json.RawMessage(d)
	}
	e.Children = childrenOf(it)
	return e
}

// Messages returns the messages of a conversation with from <= seq < to, in order.
func (s *Store) Messages(ctx context.Context, accountID, conversationID string, from, to int64) ([]model.Message, error) {
	if to <= from {
		return nil, nil
	}
	msgs, _, _, err := queryMessages(ctx, s, accountID+"#"+conversationID, from, to-1)
	return msgs, err
}

// ReopenEvent moves an event that waits for approvals back to processing, for the request
// that answers them under the same event id, and returns the detail it had (what it waited
// for), for a request that fails to go on to put back (UpdateEvent). It returns
// *DuplicateEventError when the event is in any other state, and ErrNotFound when there is none.
func (s *Store) ReopenEvent(ctx context.Context, accountID, eventID, conversationID string, now time.Time) (json.RawMessage, error) {
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           &s.tables.Events,
		Key:                                 map[string]types.AttributeValue{"eventKey": ddb.S(accountID + "#" + eventID)},
		UpdateExpression:                    aws.String("SET #s = :processing, updatedAt = :at REMOVE detail"),
		ConditionExpression:                 aws.String("#s = :waiting AND conversationId = :conv"),
		ExpressionAttributeNames:            map[string]string{"#s": "status"},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":processing": ddb.S(EventProcessing), ":waiting": ddb.S(EventWaiting), ":conv": ddb.S(conversationID), ":at": ddb.N(now.UnixMilli())},
		ReturnValues:                        types.ReturnValueUpdatedOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		if failed.Item == nil {
			return nil, ErrNotFound
		}
		return nil, &DuplicateEventError{EventID: eventID, Status: ddb.String(failed.Item, "status")}
	}
	if err != nil {
		return nil, fmt.Errorf("reopening event %s: %w", eventID, err)
	}
	return json.RawMessage(ddb.String(out.Attributes, "detail")), nil
}

// SettleResumedEvent reports on eventID, the event a turn's step paused for approval under,
// how the turn went on once a request under another event id (or none) answered the approvals:
// u's status, detail and ToSeq replace the event's, FromSeq is kept if it has one, and its usage
// stays its own. It changes the event only while it is still waiting for approval in
// conversationID, so a settled event (or one reopened by its own answer) is never rewritten; it
// reports whether it changed it.
func (s *Store) SettleResumedEvent(ctx context.Context, accountID, eventID, conversationID string, u StatusUpdate) (bool, error) {
	values := map[string]types.AttributeValue{":waiting": ddb.S(EventWaiting), ":conv": ddb.S(conversationID)}
	if len(u.Detail) == 0 {
		u.Detail = []byte("{}") // the waiting event's detail (its pending approvals) must go
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.tables.Events,
		Key:                       map[string]types.AttributeValue{"eventKey": ddb.S(accountID + "#" + eventID)},
		UpdateExpression:          aws.String("SET " + u.set(values)),
		ConditionExpression:       aws.String("#s = :waiting AND conversationId = :conv"),
		ExpressionAttributeNames:  map[string]string{"#s": "status"},
		ExpressionAttributeValues: values,
	})
	if ddb.ConditionFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("settling resumed event %s: %w", eventID, err)
	}
	return true, nil
}

// LatestUserMessage is the id of the conversation's latest message of its user (a nested
// loop's aside), the one its latest turn began with; "" when it has none.
func (s *Store) LatestUserMessage(ctx context.Context, accountID, conversationID string) (string, error) {
	in := &dynamodb.QueryInput{
		TableName:                 &s.tables.Conversations,
		KeyConditionExpression:    aws.String("conversationKey = :k AND seq > :head"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":k": ddb.S(accountID + "#" + conversationID), ":head": ddb.N(0)},
		ScanIndexForward:          aws.Bool(false),
		Limit:                     aws.Int32(16),
		ConsistentRead:            aws.Bool(true),
	}
	for p := dynamodb.NewQueryPaginator(s.db, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return "", fmt.Errorf("reading conversation %s: %w", conversationID, err)
		}
		for _, it := range page.Items {
			m, err := storedMessage(it)
			if err != nil {
				return "", err
			}
			if m.Role == model.RoleUser && !m.IsNested() {
				return m.ID, nil
			}
		}
	}
	return "", nil
}
