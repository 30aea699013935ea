// Package streamlog keeps each turn's output as a durable, sequence-numbered log in DynamoDB, so
// a client that reconnects can read what it missed and follow the rest. It stores opaque
// payloads (the turn engine's encoded events) in the order they were appended.
//
// One table (StreamsTable), keys streamKey and seq:
//
//	<stream>   seq = n    a batch: the payloads numbered n, n+1, …, n+count-1, in order; the
//	                      batch a writer wrote as the turn paused, waits or ended also records
//	                      that state
//	<stream>   seq = -1   a state written on its own: a continuation taking the stream up again
//	                      ("open"), or a pause or end with nothing left to write; with the seq
//	                      after the stream's last payload
//
// Where a conversation's latest stream is, the conversation records (store.Head.Stream). A
// writer batches what it is given and writes at most once per FlushEvery or FlushBytes of
// payload; it always writes before the turn pauses, waits or ends (Flush, End), so a short
// turn costs one write. Batches are written one after the other, each under
// attribute_not_exists and numbered after the last, so a consistent read never sees a gap. A
// payload larger than InlineLimit goes to Blobs (the async results bucket, under streams/) and
// the batch refers to it. Items expire through TTL after Retention; no reader depends on it.
//
// A Mirror, when set, gets each batch once it is stored, to copy to a log clients read
// directly (NATS JetStream): the table stays the record, so the copy never holds an entry the
// stream does not, and a writer that died between storing and copying is made good by the next
// writer of its stream.
package streamlog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"sync"
	"time"

	"github.com/agentharness/harness/shared/state/ddb"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Batching and retention defaults.
const (
	FlushEvery = 100 * time.Millisecond
	FlushBytes = 16 << 10
	Retention  = 24 * time.Hour
	// maxItemPayload keeps a batch well inside DynamoDB's 400 KB item limit.
	maxItemPayload = 350 << 10
	// InlineLimit is the largest payload a batch holds itself; a larger one goes to Blobs.
	InlineLimit = 64 << 10
	stateSeq    = -1
)

// States a writer flushes with besides a final status: Open (more comes at once) and Waiting
// (the turn paused for approval or waits for outside work; a continuation may append more).
const (
	Open    = "open"
	Waiting = "waiting"
)

// LastReadDelay is how long Follow waits, once the writer has let go without saying how its
// turn ended, before the read that settles it: the writer sends its last batch as it lets go
// (turn's end), and that write may land a moment after.
const LastReadDelay = time.Second

// ErrTooLarge: one payload larger than a stored batch may hold.
var ErrTooLarge = errors.New("stream payload too large")

// Log reads and writes the streams table.
type Log struct {
	db    *dynamodb.Client
	table string
	opts  Options
}

// Blobs holds payloads too large for a batch item (S3 in AWS).
type Blobs interface {
	Put(ctx context.Context, key string, body []byte) error
	Get(ctx context.Context, key string) ([]byte, error)
}

// Options tune a Log; zero fields take the defaults.
type Options struct {
	// Blobs, when set, keeps payloads larger than InlineLimit, which the batch then refers to;
	// without it such a payload is refused with ErrTooLarge.
	Blobs Blobs
	// Retention is how long items are kept (Retention).
	Retention time.Duration
	// FlushEvery is the longest a payload waits in a writer's buffer (FlushEvery).
	FlushEvery time.Duration
	// Now is the clock (time.Now).
	Now func() time.Time
	// Mirror, when set, copies every stored entry to a second log.
	Mirror Mirror
	// Group, when set, names the group a stream belongs to (the harness's: its conversation),
	// which its items carry so that DeleteGroup finds them (delete.go).
	Group func(stream string) string
}

// Mirror copies streams, entry by entry once each is stored, to a second log. It never holds
// a turn back: what it fails to copy it reports itself.
type Mirror interface {
	// Open returns the copier of stream, whose stored entries end before next. When an earlier
	// writer stored entries it did not copy (it died between the two), the copier copies them
	// first, reading them with read (entries after a seq, blobs resolved).
	Open(stream string, next int64, read func(ctx context.Context, after int64) ([]Entry, error)) Copier
}

// Copier copies one stream's entries in the order it is given them.
type Copier interface {
	// Copy queues stored entries; it does not wait for them to be copied.
	Copy(entries []Entry)
	// Sync waits until everything queued is copied (or given up on), or ctx ends.
	Sync(ctx context.Context)
}

// New returns a log on table.
func New(db *dynamodb.Client, table string, opts Options) *Log {
	if opts.Retention <= 0 {
		opts.Retention = Retention
	}
	if opts.FlushEvery <= 0 {
		opts.FlushEvery = FlushEvery
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Log{db: db, table: table, opts: opts}
}

// WithMirror returns a log on the same table whose writers copy what they store to m.
func (l *Log) WithMirror(m Mirror) *Log {
	c := *l
	c.opts.Mirror = m
	return &c
}

// Retention is how long the log keeps items.
func (l *Log) Retention() time.Duration { return l.opts.Retention }

// blobRef stands in a batch for a payload kept in Blobs.
type blobRef struct {
	Blob string `json:"$streamlogBlob"`
}

// Entry is one payload of a stream and its sequence number.
type Entry struct {
	Seq     int64
	Payload json.RawMessage
}

func key(stream string, seq int64) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"streamKey": ddb.S(stream), "seq": ddb.N(seq)}
}

// Writer appends to one stream. Append, Flush and End take a lock, so the writer's own timer
// may flush too.
type Writer struct {
	log    *Log
	stream string

	mu   sync.Mutex
	next int64 // seq of the first buffered payload
	buf  []json.RawMessage
	size int
	// mirror copies what is stored; whole holds the buffered payloads as appended (buf holds
	// a blob's reference), for it. Both nil without a Mirror.
	mirror Copier
	whole  []json.RawMessage
	since  time.Time // when the oldest buffered payload came
	// timer writes the buffer FlushEvery after its oldest payload came, when nothing else
	// did; lateErr is what that write failed with, returned by the next call.
	timer   *time.Timer
	lateErr error
}

// Open returns a writer for stream numbered after what it already holds: a continuation of the
// turn appends to the same stream, and says at once that the turn runs again, so readers follow
// it live.
func (l *Log) Open(ctx context.Context, stream string) (*Writer, error) {
	next, err := l.Next(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("opening stream %s: %w", stream, err)
	}
	w := &Writer{log: l, stream: stream, next: next}
	if l.opts.Mirror != nil {
		w.mirror = l.opts.Mirror.Open(stream, next, func(ctx context.Context, after int64) ([]Entry, error) {
			entries, _, err := l.Read(ctx, stream, after)
			return entries, err
		})
	}
	if next == 0 {
		return w, nil // nothing to follow yet: its first batch says the turn runs
	}
	if err := w.writeState(ctx, Open); err != nil {
		return nil, err
	}
	return w, nil
}

// Next is the sequence number the next payload appended to stream gets: after its last batch.
// The state item's count is not enough: a writer's last batch records its state itself, so
// batches may have come after the state item was written.
func (l *Log) Next(ctx context.Context, stream string) (int64, error) {
	last, err := l.db.Query(ctx, &dynamodb.QueryInput{
		TableName: &l.table, ConsistentRead: aws.Bool(true), ScanIndexForward: aws.Bool(false), Limit: aws.Int32(1),
		KeyConditionExpression:    aws.String("streamKey = :k AND seq >= :zero"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":k": ddb.S(stream), ":zero": ddb.N(0)},
		ProjectionExpression:      aws.String("seq, #c"),
		ExpressionAttributeNames:  map[string]string{"#c": "count"},
	})
	if err != nil || len(last.Items) == 0 {
		return 0, err
	}
	seq, _ := ddb.Int(last.Items[0], "seq")
	count, _ := ddb.Int(last.Items[0], "count")
	return seq + count, nil
}

// Start returns a writer for a stream its caller knows is new (a key it just made); it reads
// and writes nothing.
func (l *Log) Start(stream string) *Writer {
	w := &Writer{log: l, stream: stream}
	if l.opts.Mirror != nil {
		w.mirror = l.opts.Mirror.Open(stream, 0, nil)
	}
	return w
}

// Append buffers one payload, writing the buffer when it is FlushBytes large or its oldest
// payload waited FlushEvery (a timer writes it then if nothing else comes).
func (w *Writer) Append(ctx context.Context, payload json.RawMessage) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.lateErr; err != nil {
		return err
	}
	whole := payload
	if len(payload) > InlineLimit {
		if w.log.opts.Blobs == nil {
			return fmt.Errorf("%w: %d bytes, at most %d without a blob store", ErrTooLarge, len(payload), InlineLimit)
		}
		// Keyed by its place in the stream: a retried write rewrites the same object.
		key := blobPrefix(w.stream) + "/" + strconv.FormatInt(w.next+int64(len(w.buf)), 10) + ".json"
		if err := w.log.opts.Blobs.Put(ctx, key, payload); err != nil {
			return fmt.Errorf("storing a %d-byte payload of stream %s: %w", len(payload), w.stream, err)
		}
		ref, _ := json.Marshal(blobRef{Blob: key})
		payload = ref
	}
	now := w.log.opts.Now()
	if w.size+len(payload) > maxItemPayload {
		if err := w.flush(ctx, Open); err != nil {
			return err
		}
	}
	if len(w.buf) == 0 {
		w.since = now
		// What waits in the buffer goes out within FlushEvery even if nothing else comes (a
		// model thinking); the turn's context may end first, the write must not.
		bg := context.WithoutCancel(ctx)
		w.timer = time.AfterFunc(w.log.opts.FlushEvery, func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			if len(w.buf) > 0 && w.lateErr == nil {
				w.lateErr = w.flush(bg, Open)
			}
		})
	}
	w.buf = append(w.buf, payload)
	if w.mirror != nil {
		w.whole = append(w.whole, whole)
	}
	w.size += len(payload)
	if w.size >= FlushBytes || now.Sub(w.since) >= w.log.opts.FlushEvery {
		return w.flush(ctx, Open)
	}
	return nil
}

// Flush writes what is buffered and records state (Open, or Waiting before the turn pauses or
// waits for outside work).
func (w *Writer) Flush(ctx context.Context, state string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.lateErr; err != nil {
		return err
	}
	return w.flush(ctx, state)
}

// End writes what is buffered and records how the turn ended (its final status).
func (w *Writer) End(ctx context.Context, status string) error { return w.Flush(ctx, status) }

// Last prepares the write that Flush(ctx, state) would make, encoding what is buffered now,
// and returns its send: a caller that sends it beside another request (the lease's end) puts
// both on the wire at once, not the second after the encoding of the first. Nothing may be
// appended between Last and its send.
func (w *Writer) Last(state string) (send func(context.Context) error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.lateErr; err != nil {
		return func(context.Context) error { return err }
	}
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	if len(w.buf) == 0 {
		if state == Open {
			return func(context.Context) error { return nil }
		}
		st := w.stateItem(state)
		return func(ctx context.Context) error {
			err := w.putState(ctx, st)
			w.sync(ctx, state)
			return err
		}
	}
	item, err := w.batchItem(state)
	if err != nil {
		return func(context.Context) error { return err }
	}
	count := int64(len(w.buf))
	return func(ctx context.Context) error {
		if err := w.putBatch(ctx, item); err != nil {
			return err
		}
		w.mu.Lock()
		w.stored(int(count))
		for _, p := range w.buf {
			w.size += len(p)
		}
		w.mu.Unlock()
		w.sync(ctx, state)
		return nil
	}
}

// stored moves the first count buffered payloads, just written, out of the buffer and on to
// the mirror. w.mu is held.
func (w *Writer) stored(count int) {
	if w.mirror != nil {
		entries := make([]Entry, count)
		for i, p := range w.whole[:count] {
			entries[i] = Entry{Seq: w.next + int64(i), Payload: p}
		}
		w.mirror.Copy(entries)
		w.whole = w.whole[count:]
	}
	w.next += int64(count)
	w.buf, w.size = w.buf[count:], 0
}

// sync waits for the mirror to copy everything stored before the turn pauses, waits or ends,
// so a reader of the copy has it all by then.
func (w *Writer) sync(ctx context.Context, state string) {
	if w.mirror != nil && state != Open {
		w.mirror.Sync(ctx)
	}
}

// flush writes the buffer as one batch recording state (unless it is Open), or, with nothing
// buffered, the state on its own. w.mu is held.
func (w *Writer) flush(ctx context.Context, state string) error {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	if len(w.buf) == 0 {
		if state == Open {
			return nil
		}
		err := w.writeState(ctx, state)
		w.sync(ctx, state)
		return err
	}
	item, err := w.batchItem(state)
	if err != nil {
		return err
	}
	if err := w.putBatch(ctx, item); err != nil {
		return err
	}
	w.stored(len(w.buf))
	w.sync(ctx, state)
	return nil
}

// putBatch writes a batch item unless another writer wrote that batch.
func (w *Writer) putBatch(ctx context.Context, item map[string]types.AttributeValue) error {
	_, err := w.log.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &w.log.table, Item: item, ConditionExpression: aws.String(batchCondition),
	})
	if ddb.ConditionFailed(err) {
		seq, _ := ddb.Int(item, "seq")
		return fmt.Errorf("stream %s: batch %d was written by another writer", w.stream, seq)
	}
	if err != nil {
		return fmt.Errorf("writing stream %s: %w", w.stream, err)
	}
	return nil
}

// batchCondition keeps a batch from overwriting one another writer wrote.
const batchCondition = "attribute_not_exists(seq)"

// batchItem is the item of the buffered payloads as one batch recording state (unless Open).
// w.mu is held.
func (w *Writer) batchItem(state string) (map[string]types.AttributeValue, error) {
	b, err := json.Marshal(w.buf)
	if err != nil {
		return nil, err
	}
	item := key(w.stream, w.next)
	item["payloads"], item["count"], item["expiresAt"] = ddb.S(string(b)), ddb.N(int64(len(w.buf))), ddb.N(w.log.opts.Now().Add(w.log.opts.Retention).Unix())
	if state != Open {
		item["state"] = ddb.S(state)
	}
	w.log.grouped(w.stream, item)
	return item, nil
}

// writeState writes the stream's state item. w.mu is held, or w is not shared yet.
func (w *Writer) writeState(ctx context.Context, state string) error {
	return w.putState(ctx, w.stateItem(state))
}

// stateItem is the stream's state item recording state. w.mu is held, or w is not shared yet.
func (w *Writer) stateItem(state string) map[string]types.AttributeValue {
	now := w.log.opts.Now()
	st := key(w.stream, stateSeq)
	st["state"], st["next"], st["updatedAt"], st["expiresAt"] = ddb.S(state), ddb.N(w.next), ddb.N(now.UnixMilli()), ddb.N(now.Add(w.log.opts.Retention).Unix())
	w.log.grouped(w.stream, st)
	return st
}

func (w *Writer) putState(ctx context.Context, st map[string]types.AttributeValue) error {
	if _, err := w.log.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &w.log.table, Item: st}); err != nil {
		return fmt.Errorf("writing the state of stream %s: %w", w.stream, err)
	}
	return nil
}

// Next is the sequence number the next appended payload gets.
func (w *Writer) Next() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.next + int64(len(w.buf))
}

// Read returns the stream's payloads numbered after `after` (-1 for all), in order, and its
// state: "" or Open while the turn runs, Waiting while it waits, its final status once it
// ended. The state is the one written last: the state item's, or that of the last batch when
// the batch came after it.
func (l *Log) Read(ctx context.Context, stream string, after int64) ([]Entry, string, error) {
	st, err := l.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &l.table, Key: key(stream, stateSeq), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, "", fmt.Errorf("reading stream %s: %w", stream, err)
	}
	state := ddb.String(st.Item, "state")
	stateNext, _ := ddb.Int(st.Item, "next")
	var out []Entry
	var start map[string]types.AttributeValue
	for {
		res, err := l.db.Query(ctx, &dynamodb.QueryInput{
			TableName: &l.table, ConsistentRead: aws.Bool(true), ExclusiveStartKey: start,
			KeyConditionExpression:    aws.String("streamKey = :k AND seq >= :zero"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":k": ddb.S(stream), ":zero": ddb.N(0)},
		})
		if err != nil {
			return nil, "", fmt.Errorf("reading stream %s: %w", stream, err)
		}
		for _, it := range res.Items {
			first, _ := ddb.Int(it, "seq")
			if st.Item == nil || first >= stateNext {
				state = ddb.String(it, "state") // written after the state item
			}
			var payloads []json.RawMessage
			if err := json.Unmarshal([]byte(ddb.String(it, "payloads")), &payloads); err != nil {
				return nil, "", fmt.Errorf("stream %s batch %d: %w", stream, first, err)
			}
			for i, p := range payloads {
				seq := first + int64(i)
				if seq <= after {
					continue
				}
				if p, err = l.resolve(ctx, p); err != nil {
					return nil, "", fmt.Errorf("stream %s entry %d: %w", stream, seq, err)
				}
				out = append(out, Entry{Seq: seq, Payload: p})
			}
		}
		if start = res.LastEvaluatedKey; start == nil {
			break
		}
	}
	return out, state, nil
}

// resolve returns a payload kept in Blobs in place of its reference.
func (l *Log) resolve(ctx context.Context, p json.RawMessage) (json.RawMessage, error) {
	if len(p) > 200 || !bytes.Contains(p, []byte(`"$streamlogBlob"`)) {
		return p, nil
	}
	var ref blobRef
	if json.Unmarshal(p, &ref) != nil || ref.Blob == "" || l.opts.Blobs == nil {
		return p, nil
	}
	return l.opts.Blobs.Get(ctx, ref.Blob)
}

// ErrWriterGone ends a Follow whose stream's writer stopped before it said how the turn ended.
var ErrWriterGone = errors.New("the stream's writer stopped before the turn ended")

// Follow yields the stream's payloads after `after`, then those appended later, polling every
// poll, until the stream records that the turn waits or ended and every payload before that
// was yielded. gone, when set, is asked after a poll that found nothing new whether the writer
// has stopped for good; when it has and one more read finds nothing new either, the sequence
// ends with ErrWriterGone. Any other error ends it too.
func (l *Log) Follow(ctx context.Context, stream string, after int64, poll time.Duration, gone func(context.Context) (bool, error)) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		suspect := false // the writer was found gone: this read is the last chance
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
			if state != "" && state != Open {
				return // it waits or ended: everything before that is read
			}
			switch {
			case len(entries) > 0 || gone == nil:
				suspect = false
			case suspect:
				yield(Entry{}, ErrWriterGone)
				return
			default:
				// The writer writes how the turn ended as it lets go, both at once: once it
				// has let go, one more read, LastReadDelay later, settles it.
				if suspect, err = gone(ctx); err != nil {
					yield(Entry{}, err)
					return
				}
			}
			wait := poll
			if suspect {
				wait = max(poll, LastReadDelay)
			}
			select {
			case <-ctx.Done():
				yield(Entry{}, ctx.Err())
				return
			case <-time.After(wait):
			}
		}
	}
}
