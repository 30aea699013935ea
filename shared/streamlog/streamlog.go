// Package streamlog keeps each turn's output as a durable, sequence-numbered log in DynamoDB, so
// a client that reconnects can read what it missed and follow the rest. It stores opaque
// payloads (the turn engine's encoded events) in the order they were appended.
//
// One table (StreamsTable), keys streamKey and seq:
//
//	<stream>   seq = n    a batch: the payloads numbered n, n+1, …, n+count-1, in order
//	<stream>   seq = -1   the stream's state: "open", "waiting" (for approvals or outside
//	                      work; more may follow) or how it ended, and the next seq
//
// A writer batches what it is given and writes at most once per FlushEvery or FlushBytes of
// payload; it always writes before the turn pauses, waits or ends (Flush, End), so a reader
// never sees a gap: every batch is written under attribute_not_exists, numbered after the
// last one the writer wrote. Items expire through TTL after Retention; no reader depends on it.
package streamlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Batching and retention defaults.
const (
	FlushEvery = 100 * time.Millisecond
	FlushBytes = 16 << 10
	Retention  = 24 * time.Hour
	// maxItemPayload keeps a batch well inside DynamoDB's 400 KB item limit; a single payload
	// larger than this is refused (the engine bounds what it appends).
	maxItemPayload = 350 << 10
	stateSeq       = -1
)

// Stream states.
const (
	Open    = "open"
	Waiting = "waiting"
)

// ErrTooLarge: one payload larger than a stored batch may hold.
var ErrTooLarge = errors.New("stream payload too large")

// Log reads and writes the streams table.
type Log struct {
	db        *dynamodb.Client
	table     string
	retention time.Duration
	now       func() time.Time
}

// New returns a log on table; retention 0 means Retention, now nil means time.Now.
func New(db *dynamodb.Client, table string, retention time.Duration, now func() time.Time) *Log {
	if retention <= 0 {
		retention = Retention
	}
	if now == nil {
		now = time.Now
	}
	return &Log{db: db, table: table, retention: retention, now: now}
}

// Entry is one payload of a stream and its sequence number.
type Entry struct {
	Seq     int64
	Payload json.RawMessage
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

func key(stream string, seq int64) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"streamKey": s(stream), "seq": n(seq)}
}

func getS(item map[string]types.AttributeValue, k string) string {
	if v, ok := item[k].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func getN(item map[string]types.AttributeValue, k string) int64 {
	if v, ok := item[k].(*types.AttributeValueMemberN); ok {
		i, _ := strconv.ParseInt(v.Value, 10, 64)
		return i
	}
	return 0
}

// Writer appends to one stream. It is safe for one goroutine at a time; Append, Flush and End
// take a lock so a transport's timer may flush too.
type Writer struct {
	log    *Log
	stream string

	mu      sync.Mutex
	next    int64 // seq of the first buffered payload
	buf     []json.RawMessage
	size    int
	since   time.Time // when the oldest buffered payload came
	written bool      // the state item says open
}

// Open returns a writer for stream, numbered after what the stream already holds (a
// continuation of the turn appends to the same stream).
func (l *Log) Open(ctx context.Context, stream string) (*Writer, error) {
	out, err := l.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &l.table, Key: key(stream, stateSeq), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("opening stream %s: %w", stream, err)
	}
	return &Writer{log: l, stream: stream, next: getN(out.Item, "next")}, nil
}

// Append buffers one payload, writing the buffer when it is FlushBytes large or its oldest
// payload waited FlushEvery.
func (w *Writer) Append(ctx context.Context, payload json.RawMessage) error {
	if len(payload) > maxItemPayload {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(payload), maxItemPayload)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.log.now()
	if w.size+len(payload) > maxItemPayload {
		if err := w.flush(ctx, Open); err != nil {
			return err
		}
	}
	if len(w.buf) == 0 {
		w.since = now
	}
	w.buf = append(w.buf, payload)
	w.size += len(payload)
	if w.size >= FlushBytes || now.Sub(w.since) >= FlushEvery {
		return w.flush(ctx, Open)
	}
	return nil
}

// Flush writes what is buffered and records state (Open, or Waiting before the turn pauses or
// waits for outside work).
func (w *Writer) Flush(ctx context.Context, state string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flush(ctx, state)
}

// End writes what is buffered and records how the turn ended (its final status).
func (w *Writer) End(ctx context.Context, status string) error { return w.Flush(ctx, status) }

// flush writes the buffer as one batch and then the state item. w.mu is held.
func (w *Writer) flush(ctx context.Context, state string) error {
	now := w.log.now()
	exp := n(now.Add(w.log.retention).Unix())
	if len(w.buf) > 0 {
		b, err := json.Marshal(w.buf)
		if err != nil {
			return err
		}
		item := key(w.stream, w.next)
		item["payloads"], item["count"], item["expiresAt"] = s(string(b)), n(int64(len(w.buf))), exp
		_, err = w.log.db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: &w.log.table, Item: item, ConditionExpression: aws.String("attribute_not_exists(seq)"),
		})
		var taken *types.ConditionalCheckFailedException
		if errors.As(err, &taken) {
			return fmt.Errorf("stream %s: batch %d was written by another writer", w.stream, w.next)
		}
		if err != nil {
			return fmt.Errorf("writing stream %s: %w", w.stream, err)
		}
		w.next += int64(len(w.buf))
		w.buf, w.size = nil, 0
	} else if w.written && state == Open {
		return nil // nothing new to say
	}
	st := key(w.stream, stateSeq)
	st["state"], st["next"], st["updatedAt"], st["expiresAt"] = s(state), n(w.next), n(now.UnixMilli()), exp
	if _, err := w.log.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &w.log.table, Item: st}); err != nil {
		return fmt.Errorf("writing the state of stream %s: %w", w.stream, err)
	}
	w.written = true
	return nil
}

// Next is the sequence number the next appended payload gets.
func (w *Writer) Next() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.next + int64(len(w.buf))
}

// Read returns the stream's payloads numbered after `after` (-1 for all), in order, and the
// state recorded with the last of them: Open or Waiting while the turn goes on, its final
// status once it ended, "" for a stream never written. A state is read before the batches, so
// what it says covers at least the entries returned.
func (l *Log) Read(ctx context.Context, stream string, after int64) ([]Entry, string, error) {
	st, err := l.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &l.table, Key: key(stream, stateSeq), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, "", fmt.Errorf("reading stream %s: %w", stream, err)
	}
	state, next := getS(st.Item, "state"), getN(st.Item, "next")
	var out []Entry
	var start map[string]types.AttributeValue
	for {
		res, err := l.db.Query(ctx, &dynamodb.QueryInput{
			TableName: &l.table, ConsistentRead: aws.Bool(true), ExclusiveStartKey: start,
			KeyConditionExpression:    aws.String("streamKey = :k AND seq >= :zero"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":k": s(stream), ":zero": n(0)},
		})
		if err != nil {
			return nil, "", fmt.Errorf("reading stream %s: %w", stream, err)
		}
		for _, it := range res.Items {
			first := getN(it, "seq")
			var payloads []json.RawMessage
			if err := json.Unmarshal([]byte(getS(it, "payloads")), &payloads); err != nil {
				return nil, "", fmt.Errorf("stream %s batch %d: %w", stream, first, err)
			}
			for i, p := range payloads {
				if seq := first + int64(i); seq > after && seq < next {
					out = append(out, Entry{Seq: seq, Payload: p})
				}
			}
		}
		if start = res.LastEvaluatedKey; start == nil {
			break
		}
	}
	return out, state, nil
}

// Follow yields the stream's payloads after `after`, then those appended later, polling every
// poll, until the stream records a state other than Open (the turn waits or ended) and every
// payload before it was yielded. The last error, if any, ends the sequence.
func (l *Log) Follow(ctx context.Context, stream string, after int64, poll time.Duration) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		for {
			entries, state, err := l.Read(ctx, stream, after)
			if err != nil {
				yield(Entry{}, err)
				return
			}
			for _, e := range entries {
				if !yield(e, nil) {
					return
				}
				after = e.Seq
			}
			if state != Open && state != "" {
				return
			}
			select {
			case <-ctx.Done():
				yield(Entry{}, ctx.Err())
				return
			case <-time.After(poll):
			}
		}
	}
}

// State is a stream's recorded state ("" when it was never written).
func (l *Log) State(ctx context.Context, stream string) (string, error) {
	st, err := l.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &l.table, Key: key(stream, stateSeq), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return "", fmt.Errorf("reading stream %s: %w", stream, err)
	}
	return getS(st.Item, "state"), nil
}
