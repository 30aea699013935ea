package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/ddb"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Approval statuses. A pending approval whose deadline has passed counts as expired.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalDenied   = "denied"
	ApprovalExpired  = "expired"
)

// approvalRetention keeps a settled approval readable (for a late or repeated decision) well
// after its deadline; TTL removes it after that.
const approvalRetention = 30 * 24 * time.Hour

// Approval is a tool call held for the user's decision.
type Approval struct {
	ID             string
	ConversationID string
	AgentID        string
	ToolCallID     string
	ToolName       string
	Input          json.RawMessage
	// ArgsHash binds a decision to the exact arguments it was asked about.
	ArgsHash string
	// RequestReason is why the policy asked; often empty.
	RequestReason string
	Status        string
	// Reason is the decision's reason, or why the approval was denied or expired for the user.
	Reason    string
	CreatedAt time.Time
	Deadline  time.Time
	DecidedAt time.Time
}

// Expired reports whether a pending approval's deadline has passed at now.
func (a Approval) Expired(now time.Time) bool {
	return a.Status == ApprovalPending && !now.Before(a.Deadline)
}

// Settlement is the outcome one approval receives.
type Settlement struct {
	ApprovalID string
	// Status is ApprovalApproved or ApprovalDenied (before the deadline) or ApprovalExpired
	// (after it).
	Status string
	Reason string
}

// ApprovalConflictError reports a settlement refused because the approval was no longer
// pending (or, for a decision, its deadline had passed).
type ApprovalConflictError struct {
	ApprovalID string
	Status     string
	Deadline   time.Time
}

func (e *ApprovalConflictError) Error() string {
	if e.Status == ApprovalPending {
		return fmt.Sprintf("approval %s expired at %s", e.ApprovalID, e.Deadline.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("approval %s is already %s", e.ApprovalID, e.Status)
}

func approvalKey(accountID, id string) string { return accountID + "#" + id }

// Pending returns the approvals the conversation's last step waited for when the turn began.
func (t *Lease) Pending() []string { return t.pending }

// Pause appends a step that stopped for approval and records its held calls, in one
// transaction: the messages, one pending item per approval, and the wait on the conversation
// with what the turn carries to the invocation that resumes it.
func (t *Lease) Pause(ctx context.Context, msgs []model.Message, approvals []Approval, carry Handover) error {
	if len(approvals) == 0 {
		return errors.New("pausing without approvals to wait for")
	}
	items := make([]types.TransactWriteItem, 0, len(approvals))
	ids := make([]types.AttributeValue, 0, len(approvals))
	for _, a := range approvals {
		item := map[string]types.AttributeValue{
			"approvalKey":    ddb.S(approvalKey(t.accountID, a.ID)),
			"conversationId": ddb.S(t.conversationID),
			"agentId":        ddb.S(a.AgentID),
			"toolCallId":     ddb.S(a.ToolCallID),
			"toolName":       ddb.S(a.ToolName),
			"input":          ddb.S(string(a.Input)),
			"argsHash":       ddb.S(a.ArgsHash),
			"status":         ddb.S(ApprovalPending),
			"createdAt":      ddb.N(a.CreatedAt.UnixMilli()),
			"deadline":       ddb.N(a.Deadline.UnixMilli()),
			"expiresAt":      ddb.N(a.Deadline.Add(approvalRetention).Unix()),

			// It puts the approval in ByConversation, where deleting its conversation finds it.
			"conversationKey": ddb.S(t.key),
		}
		if a.RequestReason != "" {
			item["requestReason"] = ddb.S(a.RequestReason)
		}
		items = append(items, types.TransactWriteItem{Put: &types.Put{
			TableName:           &t.s.tables.Approvals,
			Item:                item,
			ConditionExpression: aws.String("attribute_not_exists(approvalKey)"),
		}})
		ids = append(ids, ddb.S(a.ID))
	}
	set, remove := []string{"nextSeq = :next", "pendingApprovals = :pending"}, t.waits()
	vals := map[string]types.AttributeValue{":pending": &types.AttributeValueMemberL{Value: ids}}
	remove = slices.DeleteFunc(remove, func(name string) bool { return name == "pendingApprovals" })
	if carry.PausedGroup != "" {
		set = append(set, "pausedGroup = :pausedGroup", "pausedAsync = :pausedAsync")
		vals[":pausedGroup"], vals[":pausedAsync"] = ddb.S(carry.PausedGroup), ddb.L(carry.PausedAsync)
		remove = slices.DeleteFunc(remove, func(name string) bool { return name == "pausedGroup" || name == "pausedAsync" })
	}
	if carry.PausedEvent != "" {
		set = append(set, "pausedEvent = :pausedEvent")
		vals[":pausedEvent"] = ddb.S(carry.PausedEvent)
		remove = slices.DeleteFunc(remove, func(name string) bool { return name == "pausedEvent" })
	}
	set, remove = withToolApproval(set, remove, vals, carry.ToolApproval)
	if err := t.write(ctx, msgs, items, expression(set, remove), vals); err != nil {
		return err
	}
	t.cleared()
	for _, a := range approvals {
		t.pending = append(t.pending, a.ID)
	}
	t.carry = carry
	return nil
}

// Settle records outcomes for pending approvals of the conversation, all or none, under the
// lease. A decision (approved, denied) must come before the approval's deadline and an expiry
// after it; an approval that is no longer pending fails the whole write with
// *ApprovalConflictError.
func (t *Lease) Settle(ctx context.Context, settlements []Settlement, now time.Time) error {
	if len(settlements) == 0 {
		return nil
	}
	if len(settlements) > maxTransactItems-1 {
		return fmt.Errorf("settling %d approvals at once: at most %d fit one transaction", len(settlements), maxTransactItems-1)
	}
	items := make([]types.TransactWriteItem, 0, len(settlements)+1)
	for _, st := range settlements {
		cond := "#s = :pending AND conversationId = :conv AND deadline > :now"
		if st.Status == ApprovalExpired {
			cond = "#s = :pending AND conversationId = :conv AND deadline <= :now"
		}
		items = append(items, types.TransactWriteItem{Update: &types.Update{
			TableName:                &t.s.tables.Approvals,
			Key:                      map[string]types.AttributeValue{"approvalKey": ddb.S(approvalKey(t.accountID, st.ApprovalID))},
			UpdateExpression:         aws.String("SET #s = :status, reason = :reason, decidedAt = :now"),
			ConditionExpression:      aws.String(cond),
			ExpressionAttributeNames: map[string]string{"#s": "status"},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":pending": ddb.S(ApprovalPending), ":conv": ddb.S(t.conversationID), ":now": ddb.N(now.UnixMilli()),
				":status": ddb.S(st.Status), ":reason": ddb.S(st.Reason),
			},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}})
	}
	items = append(items, types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName:                 &t.s.tables.Conversations,
		Key:                       map[string]types.AttributeValue{"conversationKey": ddb.S(t.key), "seq": ddb.N(0)},
		ConditionExpression:       aws.String("leaseOwner = :owner"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":owner": ddb.S(t.owner)},
	}})
	_, err := t.s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	for i, r := range ddb.Cancellations(err) {
		if !ddb.CheckFailed(r) {
			continue
		}
		if i == len(settlements) {
			return ErrLeaseLost
		}
		st := settlements[i]
		a, derr := decodeApproval(r.Item)
		if derr != nil {
			// No old item came back: read it to say why.
			if a, derr = t.s.Approval(ctx, t.accountID, st.ApprovalID); derr != nil {
				return fmt.Errorf("settling approvals: %w (and reading %s: %v)", err, st.ApprovalID, derr)
			}
		}
		if a.Status == st.Status && a.Reason == st.Reason {
			// An earlier attempt of this same transaction landed (the SDK retried it).
			return nil
		}
		return &ApprovalConflictError{ApprovalID: st.ApprovalID, Status: a.Status, Deadline: a.Deadline}
	}
	if err != nil {
		return fmt.Errorf("settling approvals: %w", err)
	}
	return nil
}

// Approval returns one approval of the account, or ErrNotFound.
func (s *Store) Approval(ctx context.Context, accountID, id string) (Approval, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &s.tables.Approvals,
		Key:            map[string]types.AttributeValue{"approvalKey": ddb.S(approvalKey(accountID, id))},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return Approval{}, fmt.Errorf("loading approval %s: %w", id, err)
	}
	if out.Item == nil {
		return Approval{}, ErrNotFound
	}
	return decodeApproval(out.Item)
}

// Approvals returns the account's approvals with the given ids, keyed by id; ids it does not
// hold are absent. Reads are strongly consistent.
func (s *Store) Approvals(ctx context.Context, accountID string, ids []string) (map[string]Approval, error) {
	out := make(map[string]Approval, len(ids))
	const batch = 100 // BatchGetItem's limit
	for start := 0; start < len(ids); start += batch {
		keys := make([]map[string]types.AttributeValue, 0, batch)
		for _, id := range ids[start:min(start+batch, len(ids))] {
			keys = append(keys, map[string]types.AttributeValue{"approvalKey": ddb.S(approvalKey(accountID, id))})
		}
		req := map[string]types.KeysAndAttributes{s.tables.Approvals: {Keys: keys, ConsistentRead: aws.Bool(true)}}
		for len(req) > 0 {
			res, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, fmt.Errorf("loading approvals: %w", err)
			}
			for _, item := range res.Responses[s.tables.Approvals] {
				a, err := decodeApproval(item)
				if err != nil {
					return nil, err
				}
				out[a.ID] = a
			}
			req = res.UnprocessedKeys
		}
	}
	return out, nil
}

func decodeApproval(item map[string]types.AttributeValue) (Approval, error) {
	if item == nil {
		return Approval{}, errors.New("empty approval item")
	}
	a := Approval{
		ConversationID: ddb.String(item, "conversationId"),
		AgentID:        ddb.String(item, "agentId"),
		ToolCallID:     ddb.String(item, "toolCallId"),
		ToolName:       ddb.String(item, "toolName"),
		Input:          json.RawMessage(ddb.String(item, "input")),
		ArgsHash:       ddb.String(item, "argsHash"),
		RequestReason:  ddb.String(item, "requestReason"),
		Status:         ddb.String(item, "status"),
		Reason:         ddb.String(item, "reason"),
	}
	key := ddb.String(item, "approvalKey")
	for i := len(key) - 1; i >= 0; i-- {
		if key[i] == '#' {
			a.ID = key[i+1:]
			break
		}
	}
	for name, dst := range map[string]*time.Time{"createdAt": &a.CreatedAt, "deadline": &a.Deadline, "decidedAt": &a.DecidedAt} {
		ms, err := ddb.Int(item, name)
		if errors.Is(err, ddb.ErrNoNumber) {
			continue
		}
		if err != nil {
			return a, fmt.Errorf("approval %w", err)
		}
		*dst = time.UnixMilli(ms)
	}
	return a, nil
}
