package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/ddb"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Opening is what a turn request reads before it begins: the account its secret opens, the
// agent it names and its conversation as stored. OpenTurn reads them together and StartTurn
// begins the turn from them, so a turn on a conversation that waits for nothing reaches its
// model after two round trips (three the first time a function sees the secret).
type Opening struct {
	Account Account
	// endUser is the end user whose token opened the turn; empty for the account secret.
	endUser string
	agent   Agent
	agentOK bool
	// providerKeys are the account's, from its item; nil when the opening did not read it.
	providerKeys   map[string]ProviderKey
	conversationID string
	conversation   *snapshot
}

// snapshot is a conversation as readConversation read it: its head (nil when it has none) and
// its view, complete when the messages read are exactly those from the view's first to the
// head's nextSeq-1.
type snapshot struct {
	head map[string]types.AttributeValue
	// history is the conversation's view (Lease.History); msgs and seqs are the messages read
	// for it, in seq order.
	history  []model.Message
	msgs     []model.Message
	seqs     []int64
	complete bool
}

// Agent is the record of the agent the request names, or ErrNotFound.
func (o *Opening) Agent() (Agent, error) {
	if !o.agentOK {
		return Agent{}, ErrNotFound
	}
	return o.agent, nil
}

// Conversation is the end user the conversation belongs to (empty: the account's own) and
// whether it exists; a conversation the opening did not read (a made-up id) does not.
func (o *Opening) Conversation() (endUser string, exists bool) {
	if o.conversation.head == nil {
		return "", false
	}
	return ddb.String(o.conversation.head, "endUser"), true
}

// OpenTurnFor is OpenTurn for a request whose account is proven already by a, the account as
// a consistent read found it (an end-user token's verification), by endUser: the agent and the
// conversation in one round trip; the account's provider keys are a's.
func (s *Store) OpenTurnFor(ctx context.Context, a Access, endUser, agentID, conversationID string, fresh bool) (*Opening, error) {
	accountID := a.Account.ID
	o := &Opening{Account: a.Account, endUser: endUser, conversationID: conversationID, conversation: &snapshot{complete: true}, providerKeys: a.providerKeys}
	var wg sync.WaitGroup
	var convErr error
	if !fresh {
		wg.Go(func() { o.conversation, convErr = s.readConversation(ctx, accountID+"#"+conversationID) })
	}
	ag, err := s.Agent(ctx, accountID, agentID)
	wg.Wait()
	switch {
	case err == nil:
		o.agent, o.agentOK = ag, true
	case !errors.Is(err, ErrNotFound):
		return nil, fmt.Errorf("opening the turn: %w", err)
	}
	if convErr != nil {
		return nil, convErr
	}
	return o, nil
}

// OpenTurn confirms secret and reads the agent agentID and the conversation conversationID,
// unless fresh says the request made its id up (nothing can be stored under it yet): the
// account and the agent in one strongly consistent batch, and the conversation in a consistent
// query. When an earlier request proved the secret's account (accountOf), the query goes
// beside the batch, one round trip in all; otherwise it waits for the batch to confirm the
// secret, so a request with a forged secret learns nothing of another account's conversations,
// not even from how long it takes. ErrNotFound: the secret opens no account.
func (s *Store) OpenTurn(ctx context.Context, secret, agentID, conversationID string, fresh bool) (*Opening, error) {
	hash := HashSecret(secret)
	accountID, proven, err := s.accountOf(ctx, secret, hash)
	if err != nil {
		return nil, err
	}
	o := &Opening{conversationID: conversationID, conversation: &snapshot{complete: true}}
	var wg sync.WaitGroup
	var convErr error
	readConversation := func() { o.conversation, convErr = s.readConversation(ctx, accountID+"#"+conversationID) }
	if !fresh && proven {
		wg.Go(readConversation)
	}
	items, err := s.getBatch(ctx, map[string]types.KeysAndAttributes{
		s.tables.Accounts: {Keys: []map[string]types.AttributeValue{{"accountId": ddb.S(accountID)}}, ConsistentRead: aws.Bool(true)},
		s.tables.Agents:   {Keys: []map[string]types.AttributeValue{{"accountId": ddb.S(accountID), "agentId": ddb.S(agentID)}}, ConsistentRead: aws.Bool(true)},
	})
	wg.Wait()
	if err != nil {
		return nil, fmt.Errorf("opening the turn: %w", err)
	}
	var accountItem map[string]types.AttributeValue
	if acc := items[s.tables.Accounts]; len(acc) > 0 {
		accountItem = acc[0]
	}
	if o.Account, err = s.confirmSecret(accountItem, hash); err != nil {
		return nil, err
	}
	o.providerKeys = providerKeysFrom(accountItem)
	if !fresh && !proven {
		readConversation()
	}
	if convErr != nil {
		return nil, convErr
	}
	if ag := items[s.tables.Agents]; len(ag) > 0 {
		if o.agent, err = agentFrom(ag[0]); err != nil {
			return nil, err
		}
		o.agentOK = true
	}
	return o, nil
}

// getBatch reads keys with BatchGetItem, asking again for the keys DynamoDB leaves unprocessed
// (it may, under load), and returns the items by table.
func (s *Store) getBatch(ctx context.Context, keys map[string]types.KeysAndAttributes) (map[string][]map[string]types.AttributeValue, error) {
	items := map[string][]map[string]types.AttributeValue{}
	backoff := 10 * time.Millisecond
	for len(keys) > 0 {
		out, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: keys})
		if err != nil {
			return nil, err
		}
		for table, its := range out.Responses {
			items[table] = append(items[table], its...)
		}
		keys = out.UnprocessedKeys
		if len(keys) > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
		}
	}
	return items, nil
}

// readConversation reads a conversation's head, then its view (Lease.History) in one
// consistent query: the messages from its latest compaction's keptFrom on, so what it reads
// stops growing with the conversation once that compacts.
func (s *Store) readConversation(ctx context.Context, key string) (*snapshot, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &s.tables.Conversations,
		Key:            map[string]types.AttributeValue{"conversationKey": ddb.S(key), "seq": ddb.N(0)},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("loading the conversation: %w", err)
	}
	snap := &snapshot{head: out.Item, complete: true}
	if snap.head == nil {
		return snap, nil
	}
	next, err := ddb.Int(snap.head, "nextSeq")
	if err != nil {
		return nil, err
	}
	keptFrom, summarySeq := compactionOf(snap.head)
	from := max(keptFrom, 1)
	if next <= from {
		return snap, nil
	}
	msgs, seqs, err := s.readMessages(ctx, key, ddb.String(snap.head, "epoch"), from, next-1)
	if err != nil {
		return nil, err
	}
	// A conversation deleted between the two reads shows in part: such a snapshot is not used.
	snap.complete = int64(len(seqs)) == next-from
	snap.history, snap.seqs = view(msgs, seqs, summarySeq), seqs
	snap.msgs = msgs
	return snap, nil
}

// StartTurn begins a turn that brings msg to the conversation o read, in one transaction: it
// takes the lease (as TakeLease does, until leaseUntil), appends msg, and records stream as
// the turn's stream log (RecordStream; "" for none). It does so only when o read the
// conversation whole, new or free and waiting for nothing, of agentID, without a message of
// msg's id; otherwise, or when the conversation changed since, it writes nothing and returns
// ErrConflict, and the turn takes its lease the usual way (TakeLease), which tells why.
func (s *Store) StartTurn(ctx context.Context, o *Opening, agentID string, msg model.Message, stream string, now, leaseUntil time.Time) (*Lease, error) {
	snap := o.conversation
	if !snap.complete || slices.ContainsFunc(snap.history, func(m model.Message) bool { return m.ID == msg.ID }) {
		return nil, ErrConflict
	}
	head, cur := snap.head, int64(1)
	cond := "attribute_not_exists(nextSeq)"
	if head != nil {
		var err error
		if cur, err = ddb.Int(head, "nextSeq"); err != nil {
			return nil, err
		}
		until, _ := ddb.Int(head, "leaseUntil")
		_, leased := head["leaseOwner"]
		if ddb.String(head, "agentId") != agentID || (leased && until >= now.UnixMilli()) ||
			(o.endUser != "" && ddb.String(head, "endUser") != o.endUser) {
			return nil, ErrConflict
		}
		for _, wait := range []string{"pendingApprovals", "asyncGroup", "pausedGroup", "pausedEvent"} {
			if _, ok := head[wait]; ok {
				return nil, ErrConflict
			}
		}
		cond = "nextSeq = :cur AND agentId = :agent AND (attribute_not_exists(leaseOwner) OR leaseUntil < :now) AND " +
			"attribute_not_exists(pendingApprovals) AND attribute_not_exists(asyncGroup) AND " +
			"attribute_not_exists(pausedGroup) AND attribute_not_exists(pausedEvent)"
	}
	key := o.Account.ID + "#" + o.conversationID
	put, err := messagePut(s.tables.Conversations, key, cur, msg)
	if err != nil {
		return nil, err
	}
	owner := NewID("turn_")
	update := "SET agentId = :agent, nextSeq = :next, accountId = :account, leaseOwner = :owner, leaseUntil = :until, " + epochUpdate
	vals := map[string]types.AttributeValue{
		":agent": ddb.S(agentID), ":next": ddb.N(cur + 1), ":account": ddb.S(o.Account.ID), ":owner": ddb.S(owner),
		":until": ddb.N(leaseUntil.UnixMilli()),
	}
	// A head without one gets its epoch now; the condition holds it as read, so this is it.
	epoch := ddb.String(head, "epoch")
	if epoch == "" {
		epoch = newEpoch()
	}
	vals[":epoch"] = ddb.S(epoch)
	if head != nil {
		vals[":cur"], vals[":now"] = ddb.N(cur), ddb.N(now.UnixMilli())
	}
	if stream != "" {
		update += ", activeStream = :activeStream"
		vals[":activeStream"] = ddb.S(stream)
	}
	endUser := ddb.String(head, "endUser")
	if head == nil && o.endUser != "" {
		update += ", endUser = :endUser"
		vals[":endUser"], endUser = ddb.S(o.endUser), o.endUser
	}
	if _, child := head["parentConversation"]; !child {
		clause, lv := listing(o.Account.ID, endUser, []model.Message{msg}, now)
		update += ", " + clause
		maps.Copy(vals, lv)
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{put, {Update: &types.Update{
		TableName:                 &s.tables.Conversations,
		Key:                       map[string]types.AttributeValue{"conversationKey": ddb.S(key), "seq": ddb.N(0)},
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeValues: vals,
	}}}})
	var canceled *types.TransactionCanceledException
	if errors.As(err, &canceled) {
		return nil, ErrConflict
	}
	if err != nil {
		return nil, fmt.Errorf("starting a turn on conversation %s: %w", o.conversationID, err)
	}
	t := &Lease{
		s: s, accountID: o.Account.ID, conversationID: o.conversationID, key: key, owner: owner, nextSeq: cur + 1,
		stream: stream, streamRecorded: true,
		known: append(slices.Clone(snap.history), msg), knownNext: cur + 1,
	}
	t.waitsFrom(head) // it waits for nothing; what a turn left on it before still carries over
	t.saw(append(slices.Clone(snap.msgs), msg), append(slices.Clone(snap.seqs), cur))
	t.epoch = epoch
	s.keepWritten(key, epoch, cur, []types.TransactWriteItem{put}, 1)
	if head == nil {
		t.endUser = o.endUser
	}
	return t, nil
}
