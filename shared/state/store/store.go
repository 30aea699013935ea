// Package store keeps accounts, agents, conversations and turn events in DynamoDB.
//
// Conversations are fenced: a turn holds a lease on the conversation's head item, and every
// append is a transaction conditioned on that lease, so two turns never interleave messages.
package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/ddb"
	"github.com/agentharness/harness/shared/state/lru"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Tables names the DynamoDB tables the store uses.
type Tables struct {
	Accounts      string
	Agents        string
	Conversations string
	Events        string
	Approvals     string
}

// Sentinel errors callers branch on.
var (
	ErrNotFound = errors.New("not found")
	// ErrBusy: another turn holds the conversation.
	ErrBusy = errors.New("conversation is busy with another turn")
	// ErrAgentMismatch: the conversation belongs to another agent.
	ErrAgentMismatch = errors.New("conversation belongs to another agent")
	// ErrLeaseLost: the turn's lease expired and another turn took the conversation.
	ErrLeaseLost = errors.New("conversation lease lost")
	// ErrAccountGone: the account was deleted (or never existed) when a write needed it live.
	ErrAccountGone = errors.New("the account is deleted")
	// ErrMessageTooLarge: a message is larger than MaxMessageBytes.
	ErrMessageTooLarge = errors.New("message is too large to store")
)

// MaxMessageBytes bounds one message as stored (its JSON): a message is one item, DynamoDB
// holds at most 400 KB in an item, and the rest is left for the item's keys.
const MaxMessageBytes = 384 << 10

// MessageBytes is the size of m as stored, which MaxMessageBytes bounds.
func MessageBytes(m model.Message) int {
	b, err := json.Marshal(m)
	if err != nil {
		return 0 // a message always encodes: its fields are strings, numbers and raw JSON
	}
	return len(b)
}

// DuplicateEventError reports an event id that was already used.
type DuplicateEventError struct {
	EventID string
	Status  string
}

func (e *DuplicateEventError) Error() string {
	return fmt.Sprintf("event %s was already received (status %s)", e.EventID, e.Status)
}

// Store reads and writes the harness's tables.
type Store struct {
	db             *dynamodb.Client
	tables         Tables
	secretAccounts secretAccounts
	// messages keeps the conversations' messages read and written (messagecache.go); nil: none.
	messages *lru.Cache[[]byte]
}

// New returns a store over db.
func New(db *dynamodb.Client, tables Tables) *Store {
	return &Store{db: db, tables: tables, messages: newMessageCache()}
}

// NoCache returns s reading every message from the table, as a function that never served the
// conversation does: for measuring what such a turn reads.
func (s *Store) NoCache() *Store {
	return &Store{db: s.db, tables: s.tables}
}

// HashSecret is how account secrets are stored and looked up: they are 256-bit random tokens,
// so a plain SHA-256 is enough and lets the lookup go through an index.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// NewID returns a random identifier with the given prefix.
func NewID(prefix string) string {
	return prefix + randomToken(16)
}

func randomToken(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("reading random bytes: %v", err)) // crypto/rand never fails on Linux
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// Event statuses.
const (
	EventProcessing = "processing"
	EventCompleted  = "completed"
	EventFailed     = "failed"
	// EventCancelled: the turn stopped because its client went away (an SSE disconnect) or
	// aborted it (a WebSocket abort_message); the conversation keeps what was saved before.
	EventCancelled = "cancelled"
	// EventWaiting: the turn paused until the user decides on its held tool calls.
	EventWaiting = "waiting_for_approval"
	// EventWaitingAsync: the turn waits for async tool calls that outside workers complete.
	EventWaitingAsync = "waiting_for_async_tools"
)

// Final reports whether an event status is an outcome no later update changes.
func Final(status string) bool {
	return status == EventCompleted || status == EventFailed || status == EventCancelled
}

// ClaimEvent records that a turn request of endUser (empty: the account's) with this event id
// is being handled. A second claim of the same id returns *DuplicateEventError. Rows expire
// after ttl.
func (s *Store) ClaimEvent(ctx context.Context, accountID, eventID, conversationID, endUser string, now time.Time, ttl time.Duration) error {
	item := map[string]types.AttributeValue{
		"eventKey":       ddb.S(accountID + "#" + eventID),
		"conversationId": ddb.S(conversationID),
		"status":         ddb.S(EventProcessing),
		"createdAt":      ddb.S(now.UTC().Format(time.RFC3339)),
		"expiresAt":      ddb.N(now.Add(ttl).Unix()),
		// It puts the event in ByConversation, where deleting its conversation finds it.
		"conversationKey": ddb.S(accountID + "#" + conversationID),
	}
	if endUser != "" {
		item["endUser"] = ddb.S(endUser)
	}
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           &s.tables.Events,
		Item:                                item,
		ConditionExpression:                 aws.String("attribute_not_exists(eventKey)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		return &DuplicateEventError{EventID: eventID, Status: ddb.String(failed.Item, "status")}
	}
	if err != nil {
		return fmt.Errorf("claiming event %s: %w", eventID, err)
	}
	return nil
}

// ReleaseEvent forgets a claim whose turn never started, so the client may retry with it.
func (s *Store) ReleaseEvent(ctx context.Context, accountID, eventID string) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: &s.tables.Events,
		Key:       map[string]types.AttributeValue{"eventKey": ddb.S(accountID + "#" + eventID)},
	})
	if err != nil {
		return fmt.Errorf("releasing event %s: %w", eventID, err)
	}
	return nil
}

// Turn is a held lease on a conversation: the only way to append to it.
type Lease struct {
	s              *Store
	accountID      string
	conversationID string
	key            string
	owner          string
	nextSeq        int64
	// pending are the approvals the conversation's last step waits for; the first append
	// after them clears them (it carries their results).
	pending []string
	// asyncGroup is the dispatch group the conversation waits for, and asyncPending its calls;
	// the first append after them (the continuation's results) clears the wait.
	asyncGroup   string
	asyncPending []string
	// carry is what the turn that stopped to wait left for the invocation that goes on with it.
	carry Handover
	// stream, once set, is recorded on the head by its next write (streamRecorded then).
	stream         string
	streamRecorded bool
	// known is the conversation's view (History) through nextSeq-1 when StartTurn began the
	// turn: History returns it without a read until the lease appends again (knownNext is the
	// nextSeq it goes with).
	known     []model.Message
	knownNext int64
	// keptFrom and summarySeq place the conversation's latest compaction (Compact): its summary
	// is message summarySeq, and the messages before keptFrom are what it covers; 0: none.
	keptFrom, summarySeq int64
	// seqs are the seqs of the messages the lease read or wrote, by id.
	seqs map[string]int64
	// epoch tells this life of the conversation from an earlier one under its id (newEpoch).
	epoch string
	// parent links a subagent's conversation to the turn that started it.
	parent Parent
	// vars are the conversation's variables (vars.go).
	vars Vars
	// endUser is the end user the conversation belongs to; empty for the account's own.
	endUser string
}

// EndUser is the end user the conversation belongs to (empty: the account's own), whose its
// subagents' conversations are too.
func (t *Lease) EndUser() string { return t.endUser }

// RecordStream makes the lease's next write of the conversation record stream as the stream
// log of its latest turn (Head.Stream), at no cost of its own: a turn's first write (its user
// message, its decided calls' results) comes before it says anything a reader could miss.
func (t *Lease) RecordStream(stream string) { t.stream = stream }

// Handover is what a turn that stops to wait (for approvals or async tools) leaves on its
// conversation for the invocation that goes on with it.
type Handover struct {
	// ToolApproval is the turn's per-request approval overrides (tool name to status): they hold
	// until the turn ends.
	ToolApproval map[string]string
	// PausedGroup and PausedAsync, for a step paused for approval, are the dispatch group of the
	// async calls its pass made and their resultIds: their results go back to the model when
	// the step resumes. The first append after the pause (which carries them) clears them.
	PausedGroup string
	PausedAsync []string
	// PausedEvent, for a step paused for approval, is the event id the pause was reported
	// under (empty for a request without one). The request that answers the approvals may run
	// under another event id: it then reports the turn's outcome on this event too (see
	// turn's invocation.resumes). The first append after the pause clears it.
	PausedEvent string
}

// TakeLease takes the lease on a conversation (creating it for agentID if new) until
// leaseUntil. It fails with ErrBusy while another live turn holds it and with
// ErrAgentMismatch if the conversation belongs to another agent. An expired lease is taken
// over, so a crashed turn never locks a conversation for good.
func (s *Store) TakeLease(ctx context.Context, accountID, conversationID, agentID string, now, leaseUntil time.Time) (*Lease, error) {
	return s.takeLease(ctx, "", false, accountID, conversationID, agentID, now, leaseUntil)
}

// TakeLeaseOf is TakeLease for a turn of endUser (empty: of the account, which may take any of
// its conversations): a new conversation becomes endUser's, and one of another end user, or of
// the account alone, is ErrNotFound, as an unknown one would be to a reader of that end user.
func (s *Store) TakeLeaseOf(ctx context.Context, endUser, accountID, conversationID, agentID string, now, leaseUntil time.Time) (*Lease, error) {
	return s.takeLease(ctx, endUser, false, accountID, conversationID, agentID, now, leaseUntil)
}

// ResumeLease is TakeLease for a turn that goes on with a conversation it already has (a
// continuation, a cancel): one that is gone (deleted) is ErrNotFound, never made anew.
func (s *Store) ResumeLease(ctx context.Context, accountID, conversationID, agentID string, now, leaseUntil time.Time) (*Lease, error) {
	return s.takeLease(ctx, "", true, accountID, conversationID, agentID, now, leaseUntil)
}

func (s *Store) takeLease(ctx context.Context, endUser string, existing bool, accountID, conversationID, agentID string, now, leaseUntil time.Time) (*Lease, error) {
	key := accountID + "#" + conversationID
	owner := NewID("turn_")
	// accountId puts the head (only the head) in the sparse index ByAccount, through which
	// PurgeAccount finds a deleted account's conversations.
	update := "SET agentId = if_not_exists(agentId, :agent), nextSeq = if_not_exists(nextSeq, :one), accountId = :account, leaseOwner = :owner, leaseUntil = :until, " + epochUpdate
	cond := "(attribute_not_exists(leaseOwner) OR leaseUntil < :now) AND (attribute_not_exists(agentId) OR agentId = :agent)"
	vals := map[string]types.AttributeValue{
		":agent": ddb.S(agentID), ":one": ddb.N(1), ":account": ddb.S(accountID), ":owner": ddb.S(owner),
		":until": ddb.N(leaseUntil.UnixMilli()), ":now": ddb.N(now.UnixMilli()), ":epoch": ddb.S(newEpoch()),
	}
	if existing {
		cond += " AND attribute_exists(nextSeq)"
	}
	if endUser != "" {
		update += ", endUser = :endUser"
		cond += " AND (attribute_not_exists(nextSeq) OR endUser = :endUser)"
		vals[":endUser"] = ddb.S(endUser)
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           &s.tables.Conversations,
		Key:                                 map[string]types.AttributeValue{"conversationKey": ddb.S(key), "seq": ddb.N(0)},
		UpdateExpression:                    aws.String(update),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeValues:           vals,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		_, exists := failed.Item["nextSeq"]
		switch {
		case existing && !exists:
			return nil, ErrNotFound
		case endUser != "" && exists && ddb.String(failed.Item, "endUser") != endUser:
			return nil, ErrNotFound
		case ddb.String(failed.Item, "agentId") != agentID:
			return nil, ErrAgentMismatch
		}
		return nil, ErrBusy
	}
	if err != nil {
		return nil, fmt.Errorf("starting a turn on conversation %s: %w", conversationID, err)
	}
	next, err := ddb.Int(out.Attributes, "nextSeq")
	if err != nil {
		return nil, err
	}
	t := &Lease{s: s, accountID: accountID, conversationID: conversationID, key: key, owner: owner, nextSeq: next}
	t.waitsFrom(out.Attributes)
	return t, nil
}

// waitsFrom takes what the conversation waits for, and what the turn that stopped to wait left
// for this one, from its head as the lease was taken.
func (t *Lease) waitsFrom(head map[string]types.AttributeValue) {
	t.pending = ddb.Strings(head, "pendingApprovals")
	t.asyncGroup = ddb.String(head, "asyncGroup")
	t.asyncPending = ddb.Strings(head, "pendingAsync")
	t.carry = Handover{
		ToolApproval: getStringMap(head, "toolApproval"),
		PausedGroup:  ddb.String(head, "pausedGroup"), PausedAsync: ddb.Strings(head, "pausedAsync"),
		PausedEvent: ddb.String(head, "pausedEvent"),
	}
	t.parent = parentOf(head)
	t.vars = varsOf(head)
	t.endUser = ddb.String(head, "endUser")
	t.keptFrom, t.summarySeq = compactionOf(head)
	t.epoch = ddb.String(head, "epoch")
}

// compactionOf is where a conversation's head places its latest compaction: the first seq its
// summary does not cover, and the summary's seq; zeros for a conversation never compacted.
func compactionOf(head map[string]types.AttributeValue) (keptFrom, summarySeq int64) {
	keptFrom, _ = ddb.Int(head, "keptFrom")
	summarySeq, _ = ddb.Int(head, "summarySeq")
	return keptFrom, summarySeq
}

// storedMessage decodes the message a conversation item holds.
func storedMessage(it map[string]types.AttributeValue) (model.Message, error) {
	var m model.Message
	if err := json.Unmarshal([]byte(ddb.String(it, "message")), &m); err != nil {
		return m, fmt.Errorf("decoding stored message: %w", err)
	}
	return m, nil
}

// Usage is a conversation's token totals over its finished turns.
type Usage struct {
	Turns int64
	model.Usage
}

// ConversationUsage returns the token totals of a conversation, or ErrNotFound.
func (s *Store) ConversationUsage(ctx context.Context, accountID, conversationID string) (Usage, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &s.tables.Conversations,
		Key:            map[string]types.AttributeValue{"conversationKey": ddb.S(accountID + "#" + conversationID), "seq": ddb.N(0)},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return Usage{}, fmt.Errorf("loading conversation %s: %w", conversationID, err)
	}
	if out.Item == nil {
		return Usage{}, ErrNotFound
	}
	u := Usage{Usage: usageOf(out.Item)}
	u.Turns, _ = ddb.Int(out.Item, "turns")
	return u, nil
}

// Head is what a conversation waits for, read without taking its lease.
type Head struct {
	AgentID string
	// Stream is the stream log of the conversation's latest turn (Lease.RecordStream).
	Stream string
	// LeaseUntil is when the lease of the turn that holds the conversation ends; zero when no
	// turn holds it.
	LeaseUntil time.Time
	// AsyncGroup and PendingAsync: the dispatch group it waits for and its calls.
	AsyncGroup   string
	PendingAsync []string
	// PendingApprovals: the approvals its last step waits for.
	PendingApprovals []string
	// Parent links a subagent's conversation to its caller.
	Parent Parent
	// PausedEvent is the event a step held for approval was reported under.
	PausedEvent string
	// Vars are the conversation's variables (vars.go).
	Vars Vars
	// EndUser is the end user the conversation belongs to; empty for the account's own.
	EndUser string
}

// ConversationHead reads a conversation's head (consistent), or ErrNotFound for a new one.
func (s *Store) ConversationHead(ctx context.Context, accountID, conversationID string) (Head, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &s.tables.Conversations,
		Key:            map[string]types.AttributeValue{"conversationKey": ddb.S(accountID + "#" + conversationID), "seq": ddb.N(0)},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return Head{}, fmt.Errorf("loading conversation %s: %w", conversationID, err)
	}
	if out.Item == nil {
		return Head{}, ErrNotFound
	}
	var until time.Time
	if ddb.String(out.Item, "leaseOwner") != "" {
		if ms, err := ddb.Int(out.Item, "leaseUntil"); err == nil {
			until = time.UnixMilli(ms)
		}
	}
	return Head{
		AgentID: ddb.String(out.Item, "agentId"), Stream: ddb.String(out.Item, "activeStream"), LeaseUntil: until, AsyncGroup: ddb.String(out.Item, "asyncGroup"),
		PendingAsync: ddb.Strings(out.Item, "pendingAsync"), PendingApprovals: ddb.Strings(out.Item, "pendingApprovals"),
		Parent: parentOf(out.Item), PausedEvent: ddb.String(out.Item, "pausedEvent"), Vars: varsOf(out.Item),
		EndUser: ddb.String(out.Item, "endUser"),
	}, nil
}

// History returns the conversation as its turns see it: since its latest compaction, that
// compaction's summary, then the messages from the first it does not cover (earlier summaries
// left out); before any, every message. Every message stays stored: only what a turn reads
// and sends to the model stops growing with the conversation.
func (t *Lease) History(ctx context.Context) ([]model.Message, error) {
	if t.known != nil && t.knownNext == t.nextSeq {
		return slices.Clone(t.known), nil
	}
	from := max(t.keptFrom, 1)
	if t.nextSeq <= from {
		return nil, nil
	}
	msgs, seqs, err := t.s.readMessages(ctx, t.key, t.epoch, from, t.nextSeq-1)
	if err != nil {
		return nil, err
	}
	t.saw(msgs, seqs)
	return view(msgs, seqs, t.summarySeq), nil
}

// view orders the messages from a compaction's keptFrom on as a turn sees them: the summary at
// summarySeq first, then the others but earlier summaries.
func view(msgs []model.Message, seqs []int64, summarySeq int64) []model.Message {
	if summarySeq == 0 {
		return msgs
	}
	out := make([]model.Message, 0, len(msgs))
	for i, m := range msgs {
		if seqs[i] == summarySeq {
			out = append([]model.Message{m}, out...)
		} else if !m.IsSummary() {
			out = append(out, m)
		}
	}
	return out
}

// saw records the seqs of messages the lease read or wrote.
func (t *Lease) saw(msgs []model.Message, seqs []int64) {
	if t.seqs == nil {
		t.seqs = map[string]int64{}
	}
	for i, m := range msgs {
		if m.ID != "" {
			t.seqs[m.ID] = seqs[i]
		}
	}
}

// queryMessages returns the messages of the conversation key with first <= seq <= last, their
// seqs, and each as stored (JSON), in one consistent query.
func queryMessages(ctx context.Context, s *Store, key string, first, last int64) ([]model.Message, []int64, [][]byte, error) {
	var msgs []model.Message
	var seqs []int64
	var raw [][]byte
	in := &dynamodb.QueryInput{
		TableName:              &s.tables.Conversations,
		KeyConditionExpression: aws.String("conversationKey = :k AND seq BETWEEN :first AND :last"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":k": ddb.S(key), ":first": ddb.N(first), ":last": ddb.N(last),
		},
		ConsistentRead: aws.Bool(true),
	}
	for p := dynamodb.NewQueryPaginator(s.db, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("loading history: %w", err)
		}
		for _, it := range page.Items {
			m, err := storedMessage(it)
			if err != nil {
				return nil, nil, nil, err
			}
			seq, err := ddb.Int(it, "seq")
			if err != nil {
				return nil, nil, nil, err
			}
			msgs = append(msgs, m)
			seqs = append(seqs, seq)
			raw = append(raw, []byte(ddb.String(it, "message")))
		}
	}
	return msgs, seqs, raw, nil
}

// Compact appends summary, a compaction's summary (model.KindSummary), and makes it the head of
// the conversation's view from its next History on: the summary, then the message it keeps
// from (summary.Compaction.KeptFrom, which the lease must have read) and the rest.
func (t *Lease) Compact(ctx context.Context, summary model.Message) error {
	if !summary.IsSummary() || summary.Compaction == nil {
		return fmt.Errorf("compacting: message %s is no summary", summary.ID)
	}
	kept, ok := t.seqs[summary.Compaction.KeptFrom]
	if !ok {
		return fmt.Errorf("compacting: message %s, where the summary keeps from, is not one this turn read", summary.Compaction.KeptFrom)
	}
	at := t.nextSeq
	update := "SET nextSeq = :next, keptFrom = :keptFrom, summarySeq = :summarySeq"
	if remove := t.waits(); len(remove) > 0 {
		update += " REMOVE " + strings.Join(remove, ", ")
	}
	if err := t.write(ctx, []model.Message{summary}, nil, update, map[string]types.AttributeValue{":keptFrom": ddb.N(kept), ":summarySeq": ddb.N(at)}); err != nil {
		return err
	}
	t.cleared()
	t.keptFrom, t.summarySeq = kept, at
	return nil
}

// maxTransactItems is DynamoDB's limit on items in one transaction, the head update included.
const maxTransactItems = 100

// Append adds messages at the end of the conversation in one transaction fenced on the lease.
// If the conversation was waiting for approvals, the messages must carry the held calls'
// results: the append clears the wait.
func (t *Lease) Append(ctx context.Context, msgs ...model.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	update := "SET nextSeq = :next"
	if remove := t.waits(); len(remove) > 0 {
		update += " REMOVE " + strings.Join(remove, ", ")
	}
	if err := t.write(ctx, msgs, nil, update, nil); err != nil {
		return err
	}
	t.cleared()
	return nil
}

// waits names the head attributes of what the conversation waited for when the turn began,
// which the turn's first append clears.
func (t *Lease) waits() []string {
	var names []string
	if len(t.pending) > 0 {
		names = append(names, "pendingApprovals")
	}
	if t.asyncGroup != "" {
		names = append(names, "asyncGroup", "pendingAsync")
	}
	if t.carry.PausedGroup != "" {
		names = append(names, "pausedGroup", "pausedAsync")
	}
	if t.carry.PausedEvent != "" {
		names = append(names, "pausedEvent")
	}
	return names
}

// cleared forgets the waits an append cleared. The carried overrides stay: a continuation
// retried after its first append still needs them.
func (t *Lease) cleared() {
	t.pending, t.asyncGroup, t.asyncPending = nil, "", nil
	t.carry.PausedGroup, t.carry.PausedAsync, t.carry.PausedEvent = "", nil, ""
}

// Carried is what the turn that stopped to wait left for this one.
func (t *Lease) Handover() Handover { return t.carry }

// AsyncGroup is the dispatch group the conversation waited for when the turn began, and the
// resultIds of its calls; empty when it waits for none.
func (t *Lease) AsyncGroup() (string, []string) { return t.asyncGroup, t.asyncPending }

// NextSeq is the sequence number the next appended message gets.
func (t *Lease) NextSeq() int64 { return t.nextSeq }

// WaitForAsync records, under the lease, that the conversation waits for the dispatch group
// groupID, with the turn's approval overrides: until its continuation appends the results, new
// turns are refused. msgs, when given, are appended in the same transaction (the results of a
// resumed step whose async calls still run), and clear what the conversation waited for.
func (t *Lease) WaitForAsync(ctx context.Context, groupID string, resultIDs []string, toolApproval map[string]string, msgs ...model.Message) error {
	set, remove := []string{"asyncGroup = :g", "pendingAsync = :ids"}, []string{}
	vals := map[string]types.AttributeValue{":g": ddb.S(groupID), ":ids": ddb.L(resultIDs)}
	set, remove = withToolApproval(set, remove, vals, toolApproval)
	var err error
	if len(msgs) > 0 {
		for _, name := range t.waits() {
			if name != "asyncGroup" && name != "pendingAsync" {
				remove = append(remove, name)
			}
		}
		err = t.write(ctx, msgs, nil, expression(append([]string{"nextSeq = :next"}, set...), remove), vals)
		if err == nil {
			t.cleared()
		}
	} else {
		err = t.updateHead(ctx, expression(set, remove), vals)
	}
	if err != nil {
		return fmt.Errorf("marking the conversation as waiting for async tools: %w", err)
	}
	t.asyncGroup, t.asyncPending, t.carry.ToolApproval = groupID, resultIDs, toolApproval
	return nil
}

// updateHead applies update to the conversation's head under the lease.
func (t *Lease) updateHead(ctx context.Context, update string, values map[string]types.AttributeValue) error {
	vals := map[string]types.AttributeValue{":owner": ddb.S(t.owner)}
	for k, v := range values {
		vals[k] = v
	}
	_, err := t.s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &t.s.tables.Conversations,
		Key:                       map[string]types.AttributeValue{"conversationKey": ddb.S(t.key), "seq": ddb.N(0)},
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String("leaseOwner = :owner"),
		ExpressionAttributeValues: vals,
	})
	if ddb.ConditionFailed(err) {
		return ErrLeaseLost
	}
	return err
}

// withToolApproval adds the turn's approval overrides to a head update: set when there are
// any, removed otherwise, so a wait never carries another turn's.
func withToolApproval(set, remove []string, vals map[string]types.AttributeValue, overrides map[string]string) ([]string, []string) {
	if len(overrides) == 0 {
		return set, append(remove, "toolApproval")
	}
	m := make(map[string]types.AttributeValue, len(overrides))
	for k, v := range overrides {
		m[k] = ddb.S(v)
	}
	vals[":toolApproval"] = &types.AttributeValueMemberM{Value: m}
	return append(set, "toolApproval = :toolApproval"), remove
}

// expression is an update expression that sets and removes attributes.
func expression(set, remove []string) string {
	var parts []string
	if len(set) > 0 {
		parts = append(parts, "SET "+strings.Join(set, ", "))
	}
	if len(remove) > 0 {
		parts = append(parts, "REMOVE "+strings.Join(remove, ", "))
	}
	return strings.Join(parts, " ")
}

// write appends msgs and puts extra items in one transaction, with update applied to the head
// under the lease.
func (t *Lease) write(ctx context.Context, msgs []model.Message, extra []types.TransactWriteItem, update string, values map[string]types.AttributeValue) error {
	if len(msgs)+len(extra) > maxTransactItems-1 {
		return fmt.Errorf("writing %d items at once: at most %d fit one transaction", len(msgs)+len(extra), maxTransactItems-1)
	}
	items := make([]types.TransactWriteItem, 0, len(msgs)+len(extra)+1)
	for i, m := range msgs {
		put, err := messagePut(t.s.tables.Conversations, t.key, t.nextSeq+int64(i), m)
		if err != nil {
			return err
		}
		items = append(items, put)
	}
	items = append(items, extra...)
	next := t.nextSeq + int64(len(msgs))
	vals := map[string]types.AttributeValue{":next": ddb.N(next), ":owner": ddb.S(t.owner), ":cur": ddb.N(t.nextSeq)}
	for k, v := range values {
		vals[k] = v
	}
	if t.parent.ConversationID == "" && len(msgs) > 0 {
		// A client's conversation: its list shows this append (listing). The lease's clock is
		// the store's host's, as the ending's is DynamoDB's.
		clause, lv := listing(t.accountID, t.endUser, msgs, time.Now())
		update = strings.Replace(update, "SET ", "SET "+clause+", ", 1)
		maps.Copy(vals, lv)
	}
	recording := t.stream != "" && !t.streamRecorded
	if recording {
		// Every head update sets nextSeq, so it has a SET clause to join.
		update = strings.Replace(update, "SET ", "SET activeStream = :activeStream, ", 1)
		vals[":activeStream"] = ddb.S(t.stream)
	}
	items = append(items, types.TransactWriteItem{Update: &types.Update{
		TableName:                 &t.s.tables.Conversations,
		Key:                       map[string]types.AttributeValue{"conversationKey": ddb.S(t.key), "seq": ddb.N(0)},
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String("leaseOwner = :owner AND nextSeq = :cur"),
		ExpressionAttributeValues: vals,
	}})
	_, err := t.s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	for i, r := range ddb.Cancellations(err) {
		if ddb.CheckFailed(r) {
			if i == len(items)-1 || i < len(msgs) {
				return ErrLeaseLost
			}
			return fmt.Errorf("writing %s: %w", describe(items[i]), errConflict)
		}
	}
	if err != nil {
		return fmt.Errorf("appending messages: %w", err)
	}
	seqs := make([]int64, len(msgs))
	for i := range msgs {
		seqs[i] = t.nextSeq + int64(i)
	}
	t.saw(msgs, seqs)
	t.s.keepWritten(t.key, t.epoch, t.nextSeq, items, len(msgs))
	t.nextSeq = next
	t.streamRecorded = t.streamRecorded || recording
	return nil
}

// messagePut is the write of message m at seq in the conversation key: only where none is.
func messagePut(table, key string, seq int64, m model.Message) (types.TransactWriteItem, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return types.TransactWriteItem{}, fmt.Errorf("encoding message: %w", err)
	}
	if len(b) > MaxMessageBytes {
		return types.TransactWriteItem{}, fmt.Errorf("%w: message %s is %d bytes, more than %d", ErrMessageTooLarge, m.ID, len(b), MaxMessageBytes)
	}
	return types.TransactWriteItem{Put: &types.Put{
		TableName: &table,
		Item: map[string]types.AttributeValue{
			"conversationKey": ddb.S(key),
			"seq":             ddb.N(seq),
			"role":            ddb.S(string(m.Role)),
			"message":         ddb.S(string(b)),
		},
		ConditionExpression: aws.String("attribute_not_exists(seq)"),
	}}, nil
}

func describe(it types.TransactWriteItem) string {
	switch {
	case it.Put != nil:
		return "an item of " + aws.ToString(it.Put.TableName)
	case it.Update != nil:
		return "an item of " + aws.ToString(it.Update.TableName)
	}
	return "an item"
}

var errConflict = errors.New("the item changed under the write")

// Release gives the conversation back without counting a turn: for requests refused after the
// lease was taken.
func (t *Lease) Release(ctx context.Context) error {
	_, err := t.s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &t.s.tables.Conversations,
		Key:                       map[string]types.AttributeValue{"conversationKey": ddb.S(t.key), "seq": ddb.N(0)},
		UpdateExpression:          aws.String("REMOVE leaseOwner, leaseUntil"),
		ConditionExpression:       aws.String("leaseOwner = :owner"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":owner": ddb.S(t.owner)},
	})
	if err != nil && !ddb.ConditionFailed(err) {
		return fmt.Errorf("releasing the conversation: %w", err)
	}
	return nil
}

// End releases the lease and adds the turn's token usage to the conversation's totals.
// Ending a lease already lost is not an error.
func (t *Lease) End(ctx context.Context, usage model.Usage) error {
	_, err := t.s.db.UpdateItem(ctx, t.ending(usage))
	if err != nil && !ddb.ConditionFailed(err) {
		return fmt.Errorf("ending turn: %w", err)
	}
	return nil
}

// ending is End's update of the head.
func (t *Lease) ending(usage model.Usage) *dynamodb.UpdateItemInput {
	values := map[string]types.AttributeValue{":owner": ddb.S(t.owner), ":one": ddb.N(1)}
	return &dynamodb.UpdateItemInput{
		TableName:                 &t.s.tables.Conversations,
		Key:                       map[string]types.AttributeValue{"conversationKey": ddb.S(t.key), "seq": ddb.N(0)},
		UpdateExpression:          aws.String("REMOVE leaseOwner, leaseUntil ADD turns :one, " + usageAdd(usage, values)),
		ConditionExpression:       aws.String("leaseOwner = :owner"),
		ExpressionAttributeValues: values,
	}
}

func getStringMap(item map[string]types.AttributeValue, k string) map[string]string {
	m, ok := item[k].(*types.AttributeValueMemberM)
	if !ok {
		return nil
	}
	out := make(map[string]string, len(m.Value))
	for name, v := range m.Value {
		if s, ok := v.(*types.AttributeValueMemberS); ok {
			out[name] = s.Value
		}
	}
	return out
}

// RequestStop asks the turn that holds the conversation and writes stream to stop; the turn looks
// for it while it runs (StopRequested). ok is false when no live turn of that stream holds the
// conversation.
func (s *Store) RequestStop(ctx context.Context, accountID, conversationID, stream string, now time.Time) (ok bool, err error) {
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.tables.Conversations,
		Key:                       map[string]types.AttributeValue{"conversationKey": ddb.S(accountID + "#" + conversationID), "seq": ddb.N(0)},
		UpdateExpression:          aws.String("SET stopStream = :s"),
		ConditionExpression:       aws.String("activeStream = :s AND attribute_exists(leaseOwner) AND leaseUntil > :now"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": ddb.S(stream), ":now": ddb.N(now.UnixMilli())},
	})
	if ddb.ConditionFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("asking the turn of conversation %s to stop: %w", conversationID, err)
	}
	return true, nil
}

// StopRequested returns the stream whose turn was last asked to stop in the conversation; empty
// when none was.
func (s *Store) StopRequested(ctx context.Context, accountID, conversationID string) (string, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:            &s.tables.Conversations,
		Key:                  map[string]types.AttributeValue{"conversationKey": ddb.S(accountID + "#" + conversationID), "seq": ddb.N(0)},
		ProjectionExpression: aws.String("stopStream"), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return "", fmt.Errorf("loading conversation %s: %w", conversationID, err)
	}
	return ddb.String(out.Item, "stopStream"), nil
}
