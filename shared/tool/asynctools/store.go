package asynctools

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentharness/harness/shared/state/ddb"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Blobs stores results too large for an item.
type Blobs interface {
	Put(ctx context.Context, key string, body []byte) error
	Get(ctx context.Context, key string) ([]byte, error)
}

const (
	// DefaultInlineLimit: larger completed responses go to Blobs, so rows stay small (cheap to
	// write and to read back with the whole group) and far from DynamoDB's 400 KB item limit.
	DefaultInlineLimit = 32 << 10
	// PreviewBytes bounds the preview kept in the row and shown to the model in place of an
	// offloaded response.
	PreviewBytes = 2048
)

// ErrNotDue: a timeout settle came before the row's deadline.
var ErrNotDue = errors.New("async tool call is not past its deadline")

const (
	groupSK = "#group"
	// dueShards spreads the sparse Due index over several partitions, so the sweeper's index
	// never has one hot key.
	dueShards = 8
	// retention keeps settled rows and groups readable (for late or repeated completions, and
	// for a continuation that runs late) well after they matter; TTL removes them after that.
	retention = 30 * 24 * time.Hour
	dueIndex  = "Due"
)

// Store reads and writes async tool rows and dispatch groups.
type Store struct {
	db          *dynamodb.Client
	table       string
	blobs       Blobs
	inlineLimit int
	meter       *Meter
}

// NewStore returns a store over table. blobs may be nil: then a completed response larger than
// DefaultInlineLimit is an error.
func NewStore(db *dynamodb.Client, table string, blobs Blobs) *Store {
	return &Store{db: db, table: table, blobs: blobs, inlineLimit: DefaultInlineLimit}
}

// Meter, when set on a store, makes every write request return its consumed capacity and adds
// up the write units on the table and on its indexes. It is safe for concurrent use. A write
// refused by its condition also costs a unit in AWS, but DynamoDB does not report it, so it is
// not counted.
type Meter struct {
	mu           sync.Mutex
	table, index float64
}

// Writes returns the write units counted so far on the table and on its indexes.
func (m *Meter) Writes() (table, index float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.table, m.index
}

func (m *Meter) add(c *types.ConsumedCapacity) {
	if m == nil || c == nil {
		return
	}
	var index float64
	for _, ix := range c.GlobalSecondaryIndexes {
		index += aws.ToFloat64(ix.CapacityUnits)
	}
	for _, ix := range c.LocalSecondaryIndexes {
		index += aws.ToFloat64(ix.CapacityUnits)
	}
	table := aws.ToFloat64(c.CapacityUnits) - index
	if c.Table != nil {
		table = aws.ToFloat64(c.Table.CapacityUnits)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.table += table
	m.index += index
}

// WithMeter returns a copy of s that counts its writes on m.
func (s *Store) WithMeter(m *Meter) *Store {
	c := *s
	c.meter = m
	return &c
}

func (s *Store) capacity() types.ReturnConsumedCapacity {
	if s.meter == nil {
		return ""
	}
	return types.ReturnConsumedCapacityIndexes
}

// dueShard is the Due index partition of a group's items: all items of a group share it.
func dueShard(pk string) string {
	sum := sha256.Sum256([]byte(pk))
	return "due#" + strconv.Itoa(int(sum[0]%dueShards))
}

func validGroupID(id string) bool { return strings.HasPrefix(id, "ag_") && len(id) == 25 }

// Every conditional write that reports who won carries a fresh writeId: when the SDK retries a
// write whose first attempt landed but whose answer was lost, the retry fails its condition, and
// finding its own writeId on the item tells it that it won after all.
func newWriteID() string { return randomToken(12) }

// Register writes r as a running row. When the row already exists (a retried pass) it returns
// the existing row and created=false; the caller must then not dispatch the call again.
func (s *Store) Register(ctx context.Context, r Result) (existing Result, created bool, err error) {
	groupID, callKey, ok := SplitResultID(r.ID)
	if !ok {
		return Result{}, false, fmt.Errorf("registering async tool result: malformed id %q", r.ID)
	}
	if r.Deadline.IsZero() {
		return Result{}, false, fmt.Errorf("registering async tool result %s: no deadline", r.ID)
	}
	r.Status = Running
	r.Response, r.ResponseKey, r.ResponseBytes, r.Error, r.SettledAt = nil, "", 0, "", time.Time{}
	delivery, err := json.Marshal(r.Delivery)
	if err != nil {
		return Result{}, false, fmt.Errorf("registering async tool result %s: %w", r.ID, err)
	}
	w := newWriteID()
	item := map[string]types.AttributeValue{
		"pk":        ddb.S(groupID),
		"sk":        ddb.S(callKey),
		"status":    ddb.S(Running),
		"deadline":  ms(r.Deadline),
		"delivery":  ddb.S(string(delivery)),
		"dueShard":  ddb.S(dueShard(groupID)),
		"dueAt":     ms(r.Deadline),
		"expiresAt": ddb.N(r.Deadline.Add(retention).Unix()),
		"writeId":   ddb.S(w),
	}
	putS(item, "accountId", r.AccountID)
	putS(item, "agentId", r.AgentID)
	putS(item, "conversationId", r.ConversationID)
	putConversationKey(item, r.AccountID, r.ConversationID)
	putS(item, "turnId", r.TurnID)
	putS(item, "toolCallId", r.ToolCallID)
	putS(item, "toolName", r.ToolName)
	putS(item, "mode", r.Mode)
	putS(item, "tokenHash", r.TokenHash)
	putT(item, "parentUntil", r.ParentUntil)
	putT(item, "createdAt", r.CreatedAt)
	old, created, err := s.putNew(ctx, item, w)
	if err != nil {
		return Result{}, false, fmt.Errorf("registering async tool result %s: %w", r.ID, err)
	}
	if !created {
		rec, err := decodeResult(old)
		if err != nil {
			return Result{}, false, fmt.Errorf("registering async tool result %s: %w", r.ID, err)
		}
		return rec, false, nil
	}
	return normalize(r), true, nil
}

// Settle lands o on row id at now with one conditional write: the row must be running and, for
// a timeout, past its deadline (otherwise ErrNotDue). A completed response larger than the
// inline limit is first put to Blobs, and the row keeps its key, its size and a preview. When
// the row was settled already, an identical outcome returns the recorded row with
// duplicate=true; a different one returns *ConflictError. A missing row is ErrNotFound.
func (s *Store) Settle(ctx context.Context, id string, o Outcome, now time.Time) (r Result, duplicate bool, err error) {
	groupID, callKey, ok := SplitResultID(id)
	if !ok {
		return Result{}, false, ErrNotFound
	}
	switch o.Status {
	case Completed:
		if len(o.Response) == 0 {
			o.Response = json.RawMessage("null")
		}
		if !json.Valid(o.Response) {
			return Result{}, false, fmt.Errorf("settling async tool result %s: the response is not JSON", id)
		}
	case Failed, Cancelled:
	default:
		return Result{}, false, fmt.Errorf("settling async tool result %s: unknown status %q", id, o.Status)
	}
	hash := o.Hash()
	w := newWriteID()
	var offloaded string // the blob this settle put, if any
	update := "SET #s = :s, outcomeHash = :h, settledAt = :now, writeId = :w"
	vals := map[string]types.AttributeValue{
		":s": ddb.S(o.Status), ":h": ddb.S(hash), ":running": ddb.S(Running), ":now": ms(now), ":w": ddb.S(w),
	}
	if o.Status == Completed {
		stored := o.Response
		if len(stored) > s.inlineLimit {
			if s.blobs == nil {
				return Result{}, false, fmt.Errorf("settling async tool result %s: a %d-byte response exceeds the %d-byte inline limit and no blob store is configured", id, len(stored), s.inlineLimit)
			}
			// Keyed by the outcome, so a conflicting duplicate never overwrites the blob the row
			// records (an identical one rewrites the same bytes).
			blobKey := "results/" + id + "/" + hash + ".json"
			if err := s.blobs.Put(ctx, blobKey, o.Response); err != nil {
				return Result{}, false, fmt.Errorf("settling async tool result %s: storing the response: %w", id, err)
			}
			offloaded, stored = blobKey, preview(o.Response)
			update += ", responseKey = :k"
			vals[":k"] = ddb.S(blobKey)
		}
		update += ", #r = :r, responseBytes = :n"
		vals[":r"], vals[":n"] = ddb.S(string(stored)), ddb.N(int64(len(o.Response)))
	} else {
		update += ", #e = :e"
		vals[":e"] = ddb.S(truncate(o.Error, s.inlineLimit))
	}
	cond := "#s = :running"
	if o.Timeout {
		cond += " AND deadline <= :now"
	}
	names := map[string]string{"#s": "status"}
	if o.Status == Completed {
		names["#r"] = "response"
	} else {
		names["#e"] = "error"
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           &s.table,
		Key:                                 key(groupID, callKey),
		UpdateExpression:                    aws.String(update + " REMOVE dueShard, dueAt"),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           vals,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              s.capacity(),
	})
	if failed, ok := errors.AsType[*types.ConditionalCheckFailedException](err); ok {
		old, err := s.oldItem(ctx, failed, groupID, callKey)
		if err != nil {
			return Result{}, false, fmt.Errorf("settling async tool result %s: reading the recorded row: %w", id, err)
		}
		if old == nil {
			if offloaded != "" {
				if err := s.forget(ctx, offloaded); err != nil {
					return Result{}, false, fmt.Errorf("settling async tool result %s: deleting the response of a row that is gone: %w", id, err)
				}
			}
			return Result{}, false, ErrNotFound
		}
		rec, err := decodeResult(old)
		if err != nil {
			return Result{}, false, fmt.Errorf("settling async tool result %s: %w", id, err)
		}
		switch {
		case ddb.String(old, "writeId") == w:
			return rec, false, nil
		case rec.Status == Running:
			return rec, false, ErrNotDue
		case rec.Status == o.Status && ddb.String(old, "outcomeHash") == hash:
			return rec, true, nil
		}
		return rec, false, &ConflictError{Recorded: rec}
	}
	if err != nil {
		return Result{}, false, fmt.Errorf("settling async tool result %s: %w", id, err)
	}
	s.meter.add(out.ConsumedCapacity)
	rec, err := decodeResult(out.Attributes)
	if err != nil {
		return Result{}, false, fmt.Errorf("settling async tool result %s: %w", id, err)
	}
	return rec, false, nil
}

// preview is the first PreviewBytes of a response's text as a JSON string, cut on a UTF-8
// boundary and short enough that the JSON string, escapes included, fits PreviewBytes.
func preview(resp []byte) json.RawMessage {
	n := min(len(resp), PreviewBytes)
	for {
		for n > 0 && n < len(resp) && !utf8.RuneStart(resp[n]) {
			n--
		}
		b := quote(resp[:n])
		if len(b) <= PreviewBytes {
			return b
		}
		// Each byte dropped shortens the encoding by at least one byte.
		n -= len(b) - PreviewBytes
	}
}

func quote(b []byte) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)  // "\u003c" would spend six bytes of the preview on a "<"
	_ = enc.Encode(string(b)) // a string always encodes
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// truncate cuts s to at most n bytes on a UTF-8 boundary: an error message needs no more, and
// an unbounded one could exceed the item limit.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Result reads one row, strongly consistent; ErrNotFound when absent or id is malformed.
func (s *Store) Result(ctx context.Context, id string) (Result, error) {
	groupID, callKey, ok := SplitResultID(id)
	if !ok {
		return Result{}, ErrNotFound
	}
	item, err := s.get(ctx, groupID, callKey)
	if err != nil {
		return Result{}, fmt.Errorf("loading async tool result %s: %w", id, err)
	}
	if item == nil {
		return Result{}, ErrNotFound
	}
	r, err := decodeResult(item)
	if err != nil {
		return Result{}, fmt.Errorf("loading async tool result %s: %w", id, err)
	}
	return r, nil
}

// FullResponse returns a completed row's whole response, from Blobs when it was offloaded.
func (s *Store) FullResponse(ctx context.Context, r Result) (json.RawMessage, error) {
	if r.Status != Completed {
		return nil, fmt.Errorf("async tool result %s is %s, not completed", r.ID, r.Status)
	}
	if r.ResponseKey == "" {
		return r.Response, nil
	}
	if s.blobs == nil {
		return nil, fmt.Errorf("loading the response of async tool result %s: no blob store is configured", r.ID)
	}
	b, err := s.blobs.Get(ctx, r.ResponseKey)
	if err != nil {
		return nil, fmt.Errorf("loading the response of async tool result %s: %w", r.ID, err)
	}
	return b, nil
}

// Seal writes the group item with sealedAt=now and the sweeper's next look at dueAt. If it
// exists already (a retried pass, or the sweeper sealed it) it returns the existing group and
// sealed=false.
func (s *Store) Seal(ctx context.Context, g Group, now, dueAt time.Time) (existing Group, sealed bool, err error) {
	if !validGroupID(g.ID) {
		return Group{}, false, fmt.Errorf("sealing dispatch group: malformed id %q", g.ID)
	}
	for _, id := range g.Expected {
		if gid, _, ok := SplitResultID(id); !ok || gid != g.ID {
			return Group{}, false, fmt.Errorf("sealing dispatch group %s: %q is not one of its result ids", g.ID, id)
		}
	}
	delivery, err := json.Marshal(g.Delivery)
	if err != nil {
		return Group{}, false, fmt.Errorf("sealing dispatch group %s: %w", g.ID, err)
	}
	g.SealedAt, g.ClaimedAt, g.ConsumedAt = time.UnixMilli(now.UnixMilli()).UTC(), time.Time{}, time.Time{}
	w := newWriteID()
	item := map[string]types.AttributeValue{
		"pk":        ddb.S(g.ID),
		"sk":        ddb.S(groupSK),
		"expected":  ddb.L(g.Expected),
		"delivery":  ddb.S(string(delivery)),
		"sealedAt":  ms(now),
		"dueShard":  ddb.S(dueShard(g.ID)),
		"dueAt":     ms(dueAt),
		"expiresAt": ddb.N(later(now, dueAt).Add(retention).Unix()),
		"writeId":   ddb.S(w),
	}
	putS(item, "accountId", g.AccountID)
	putS(item, "agentId", g.AgentID)
	putS(item, "conversationId", g.ConversationID)
	putConversationKey(item, g.AccountID, g.ConversationID)
	putS(item, "sealedBy", g.SealedBy)
	old, sealed, err := s.putNew(ctx, item, w)
	if err != nil {
		return Group{}, false, fmt.Errorf("sealing dispatch group %s: %w", g.ID, err)
	}
	if !sealed {
		rec, err := decodeGroup(old)
		if err != nil {
			return Group{}, false, fmt.Errorf("sealing dispatch group %s: %w", g.ID, err)
		}
		return rec, false, nil
	}
	return g, true, nil
}

// putNew writes item unless an item with its key exists. created is true when this write (or an
// SDK retry of it, told by writeID) made the item; otherwise old is the existing item.
func (s *Store) putNew(ctx context.Context, item map[string]types.AttributeValue, writeID string) (old map[string]types.AttributeValue, created bool, err error) {
	out, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           &s.table,
		Item:                                item,
		ConditionExpression:                 aws.String("attribute_not_exists(pk)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              s.capacity(),
	})
	if failed, ok := errors.AsType[*types.ConditionalCheckFailedException](err); ok {
		pk, sk := ddb.String(item, "pk"), ddb.String(item, "sk")
		old, err := s.oldItem(ctx, failed, pk, sk)
		if err != nil {
			return nil, false, fmt.Errorf("reading the existing item: %w", err)
		}
		if old == nil { // it expired between the write and the read
			return nil, false, errors.New("the existing item is gone")
		}
		return old, ddb.String(old, "writeId") == writeID, nil
	}
	if err != nil {
		return nil, false, err
	}
	s.meter.add(out.ConsumedCapacity)
	return nil, true, nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// GroupState is a group item (nil Group when not sealed) and every row of its partition.
type GroupState struct {
	Group *Group
	Rows  []Result
}

// Pending returns the expected resultIds that have no row or a running one. It is nil for an
// unsealed group: callers check Group.
func (st GroupState) Pending() []string {
	if st.Group == nil {
		return nil
	}
	var pending []string
	for _, id := range st.Group.Expected {
		if r, ok := st.Row(id); !ok || r.Status == Running {
			pending = append(pending, id)
		}
	}
	return pending
}

// Settled reports whether the group is sealed and every expected call has a settled row.
func (st GroupState) Settled() bool { return st.Group != nil && len(st.Pending()) == 0 }

// Results returns the rows of the expected calls, in the order the group expects them.
func (st GroupState) Results() []Result {
	if st.Group == nil {
		return nil
	}
	out := make([]Result, 0, len(st.Group.Expected))
	for _, id := range st.Group.Expected {
		if r, ok := st.Row(id); ok {
			out = append(out, r)
		}
	}
	return out
}

// Row returns the group's row with resultId id.
func (st GroupState) Row(id string) (Result, bool) {
	for _, r := range st.Rows {
		if r.ID == id {
			return r, true
		}
	}
	return Result{}, false
}

// Load reads the group item and all rows of its partition with one strongly consistent Query.
// An unknown group is an empty state, not an error.
func (s *Store) Load(ctx context.Context, groupID string) (GroupState, error) {
	var st GroupState
	if !validGroupID(groupID) {
		return st, nil
	}
	in := &dynamodb.QueryInput{
		TableName:                 &s.table,
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": ddb.S(groupID)},
		ConsistentRead:            aws.Bool(true),
	}
	for p := dynamodb.NewQueryPaginator(s.db, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return GroupState{}, fmt.Errorf("loading dispatch group %s: %w", groupID, err)
		}
		for _, item := range page.Items {
			if ddb.String(item, "sk") == groupSK {
				g, err := decodeGroup(item)
				if err != nil {
					return GroupState{}, fmt.Errorf("loading dispatch group %s: %w", groupID, err)
				}
				st.Group = &g
				continue
			}
			r, err := decodeResult(item)
			if err != nil {
				return GroupState{}, fmt.Errorf("loading dispatch group %s: %w", groupID, err)
			}
			st.Rows = append(st.Rows, r)
		}
	}
	return st, nil
}

// Claim takes the group's single re-drive: it sets claimedAt=now and moves the sweeper's next
// look to resendAt (when the continuation should have consumed the group). It returns false,
// and no error, when the group was claimed already or its continuation already ran, and
// ErrNotFound when the group is not sealed.
func (s *Store) Claim(ctx context.Context, groupID string, now, resendAt time.Time) (bool, error) {
	if !validGroupID(groupID) {
		return false, ErrNotFound
	}
	w := newWriteID()
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:        &s.table,
		Key:              key(groupID, groupSK),
		UpdateExpression: aws.String("SET claimedAt = :now, dueAt = :resend, writeId = :w"),
		ConditionExpression: aws.String("attribute_exists(pk) AND attribute_not_exists(claimedAt) AND " +
			"attribute_not_exists(consumedAt)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":now": ms(now), ":resend": ms(resendAt), ":w": ddb.S(w),
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              s.capacity(),
	})
	if failed, ok := errors.AsType[*types.ConditionalCheckFailedException](err); ok {
		old, err := s.oldItem(ctx, failed, groupID, groupSK)
		if err != nil {
			return false, fmt.Errorf("claiming dispatch group %s: reading it: %w", groupID, err)
		}
		if old == nil {
			return false, ErrNotFound
		}
		return ddb.String(old, "writeId") == w, nil
	}
	if err != nil {
		return false, fmt.Errorf("claiming dispatch group %s: %w", groupID, err)
	}
	s.meter.add(out.ConsumedCapacity)
	return true, nil
}

// Consume records that the group's continuation ran, which takes the group off the sweeper's
// index. Consuming twice keeps the first time. ErrNotFound when the group is not sealed.
func (s *Store) Consume(ctx context.Context, groupID string, now time.Time) error {
	if !validGroupID(groupID) {
		return ErrNotFound
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       key(groupID, groupSK),
		UpdateExpression:          aws.String("SET consumedAt = if_not_exists(consumedAt, :now) REMOVE dueShard, dueAt"),
		ConditionExpression:       aws.String("attribute_exists(pk)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": ms(now)},
		ReturnConsumedCapacity:    s.capacity(),
	})
	if ddb.ConditionFailed(err) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("consuming dispatch group %s: %w", groupID, err)
	}
	s.meter.add(out.ConsumedCapacity)
	return nil
}

// Reschedule moves an unconsumed group's next sweep to dueAt. A consumed group is left alone
// without error; ErrNotFound when the group is not sealed.
func (s *Store) Reschedule(ctx context.Context, groupID string, dueAt time.Time) error {
	if !validGroupID(groupID) {
		return ErrNotFound
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           &s.table,
		Key:                                 key(groupID, groupSK),
		UpdateExpression:                    aws.String("SET dueAt = :due"),
		ConditionExpression:                 aws.String("attribute_exists(pk) AND attribute_not_exists(consumedAt)"),
		ExpressionAttributeValues:           map[string]types.AttributeValue{":due": ms(dueAt)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              s.capacity(),
	})
	if failed, ok := errors.AsType[*types.ConditionalCheckFailedException](err); ok {
		old, err := s.oldItem(ctx, failed, groupID, groupSK)
		if err != nil {
			return fmt.Errorf("rescheduling dispatch group %s: reading it: %w", groupID, err)
		}
		if old == nil {
			return ErrNotFound
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("rescheduling dispatch group %s: %w", groupID, err)
	}
	s.meter.add(out.ConsumedCapacity)
	return nil
}

// DueItem is an item the sweeper must look at: a row (ResultID set) or a group (ResultID
// empty).
type DueItem struct {
	GroupID, ResultID string
	DueAt             time.Time
}

// Due returns up to limit items (all of them when limit <= 0) whose dueAt is at or before now,
// earliest first, across all shards of the Due index. The index is eventually consistent: an
// item settled a moment ago may still be listed, so the sweeper's writes stay conditional.
func (s *Store) Due(ctx context.Context, now time.Time, limit int) ([]DueItem, error) {
	shards := make([][]DueItem, dueShards)
	errs := make([]error, dueShards)
	var wg sync.WaitGroup
	for i := range dueShards {
		wg.Go(func() { shards[i], errs[i] = s.dueIn(ctx, "due#"+strconv.Itoa(i), now, limit) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("listing due async tool items: %w", err)
	}
	items := slices.Concat(shards...)
	slices.SortStableFunc(items, func(a, b DueItem) int { return a.DueAt.Compare(b.DueAt) })
	if limit > 0 && len(items) > limit {
		items = items[:limit]
	}
	return items, nil
}

func (s *Store) dueIn(ctx context.Context, shard string, now time.Time, limit int) ([]DueItem, error) {
	in := &dynamodb.QueryInput{
		TableName:              &s.table,
		IndexName:              aws.String(dueIndex),
		KeyConditionExpression: aws.String("dueShard = :shard AND dueAt <= :now"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":shard": ddb.S(shard), ":now": ms(now),
		},
	}
	if limit > 0 {
		in.Limit = aws.Int32(int32(min(limit, 1000)))
	}
	var items []DueItem
	for p := dynamodb.NewQueryPaginator(s.db, in); p.HasMorePages() && (limit <= 0 || len(items) < limit); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("querying %s: %w", shard, err)
		}
		for _, item := range page.Items {
			d := &decoder{item: item}
			it := DueItem{GroupID: ddb.String(item, "pk"), DueAt: d.time("dueAt")}
			if sk := ddb.String(item, "sk"); sk != groupSK {
				it.ResultID = it.GroupID + "." + sk
			}
			if d.err != nil {
				return nil, d.err
			}
			items = append(items, it)
		}
	}
	return items, nil
}

func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": ddb.S(pk), "sk": ddb.S(sk)}
}

func (s *Store) get(ctx context.Context, pk, sk string) (map[string]types.AttributeValue, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: key(pk, sk), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, err
	}
	return out.Item, nil
}

// oldItem is the item a conditional write failed on, or nil when there is none. The failure
// carries it; it is read only when it does not (an item that does not exist, or an endpoint
// that does not return it).
func (s *Store) oldItem(ctx context.Context, failed *types.ConditionalCheckFailedException, pk, sk string) (map[string]types.AttributeValue, error) {
	if failed.Item != nil {
		return failed.Item, nil
	}
	return s.get(ctx, pk, sk)
}

func decodeResult(item map[string]types.AttributeValue) (Result, error) {
	d := &decoder{item: item}
	r := Result{
		ID:             ddb.String(item, "pk") + "." + ddb.String(item, "sk"),
		AccountID:      ddb.String(item, "accountId"),
		AgentID:        ddb.String(item, "agentId"),
		ConversationID: ddb.String(item, "conversationId"),
		TurnID:         ddb.String(item, "turnId"),
		ToolCallID:     ddb.String(item, "toolCallId"),
		ToolName:       ddb.String(item, "toolName"),
		Mode:           ddb.String(item, "mode"),
		Status:         ddb.String(item, "status"),
		ResponseKey:    ddb.String(item, "responseKey"),
		ResponseBytes:  int(d.int("responseBytes")),
		Error:          ddb.String(item, "error"),
		TokenHash:      ddb.String(item, "tokenHash"),
		Deadline:       d.time("deadline"),
		ParentUntil:    d.time("parentUntil"),
		Delivery:       d.delivery(),
		CreatedAt:      d.time("createdAt"),
		SettledAt:      d.time("settledAt"),
	}
	if v, ok := item["response"].(*types.AttributeValueMemberS); ok {
		r.Response = json.RawMessage(v.Value)
	}
	if d.err != nil {
		return Result{}, fmt.Errorf("decoding async tool result %s: %w", r.ID, d.err)
	}
	return r, nil
}

func decodeGroup(item map[string]types.AttributeValue) (Group, error) {
	d := &decoder{item: item}
	g := Group{
		ID:             ddb.String(item, "pk"),
		AccountID:      ddb.String(item, "accountId"),
		AgentID:        ddb.String(item, "agentId"),
		ConversationID: ddb.String(item, "conversationId"),
		Delivery:       d.delivery(),
		SealedBy:       ddb.String(item, "sealedBy"),
		SealedAt:       d.time("sealedAt"),
		ClaimedAt:      d.time("claimedAt"),
		ConsumedAt:     d.time("consumedAt"),
		Expected:       ddb.Strings(item, "expected"),
	}
	if d.err != nil {
		return Group{}, fmt.Errorf("decoding dispatch group %s: %w", g.ID, d.err)
	}
	return g, nil
}

// decoder reads optional attributes and keeps the first malformed one as its error.
type decoder struct {
	item map[string]types.AttributeValue
	err  error
}

func (d *decoder) int(k string) int64 {
	n, err := ddb.Int(d.item, k)
	if err != nil && !errors.Is(err, ddb.ErrNoNumber) && d.err == nil {
		d.err = err
	}
	return n
}

// time decodes unix milliseconds; an absent attribute is the zero time.
func (d *decoder) time(k string) time.Time {
	if _, ok := d.item[k]; !ok {
		return time.Time{}
	}
	return time.UnixMilli(d.int(k)).UTC()
}

func (d *decoder) delivery() Delivery {
	var v Delivery
	if s := ddb.String(d.item, "delivery"); s != "" {
		if err := json.Unmarshal([]byte(s), &v); err != nil && d.err == nil {
			d.err = fmt.Errorf("attribute delivery: %w", err)
		}
	}
	return v
}

// normalize makes a row's times what reading it back gives: UTC at millisecond precision.
func normalize(r Result) Result {
	for _, t := range []*time.Time{&r.Deadline, &r.ParentUntil, &r.CreatedAt, &r.SettledAt} {
		if !t.IsZero() {
			*t = time.UnixMilli(t.UnixMilli()).UTC()
		}
	}
	return r
}

func ms(t time.Time) types.AttributeValue { return ddb.N(t.UnixMilli()) }

// putS and putT leave empty values out: smaller items, and absent reads back as empty.
func putS(item map[string]types.AttributeValue, k, v string) {
	if v != "" {
		item[k] = ddb.S(v)
	}
}

func putT(item map[string]types.AttributeValue, k string, t time.Time) {
	if !t.IsZero() {
		item[k] = ms(t)
	}
}

// ScheduleRow puts a row back on the Due index at dueAt (nil-op for a missing row): a result that
// arrived before its group was sealed stays findable, so a parent that dies before sealing still
// has its group sealed by the sweeper.
func (s *Store) ScheduleRow(ctx context.Context, resultID string, dueAt time.Time) error {
	return s.rowDue(ctx, resultID, "SET dueShard = :shard, dueAt = :due", map[string]types.AttributeValue{
		":shard": ddb.S(dueShard(strings.SplitN(resultID, ".", 2)[0])), ":due": ms(dueAt),
	})
}

// UnscheduleRow takes a settled row off the Due index.
func (s *Store) UnscheduleRow(ctx context.Context, resultID string) error {
	return s.rowDue(ctx, resultID, "REMOVE dueShard, dueAt", nil)
}

// HoldParent moves the end of a row's parent invocation to until, for a call whose pass paused
// for approval: the pass's group is sealed when the step resumes, in another invocation that may
// come much later, so the sweeper must not seal it as an orphan before until.
func (s *Store) HoldParent(ctx context.Context, resultID string, until time.Time) error {
	return s.rowDue(ctx, resultID, "SET parentUntil = :until", map[string]types.AttributeValue{":until": ms(until)})
}

func (s *Store) rowDue(ctx context.Context, resultID, update string, values map[string]types.AttributeValue) error {
	groupID, callKey, ok := SplitResultID(resultID)
	if !ok {
		return ErrNotFound
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       key(groupID, callKey),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String("attribute_exists(pk)"),
		ExpressionAttributeValues: values,
		ReturnConsumedCapacity:    s.capacity(),
	})
	if ddb.ConditionFailed(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("scheduling async tool result %s: %w", resultID, err)
	}
	s.meter.add(out.ConsumedCapacity)
	return nil
}
