package streamlog_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/state/blobstore"
	"github.com/agentharness/harness/shared/state/streamlog"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func newLog(t *testing.T, opts streamlog.Options) (*streamlog.Log, *dynamodb.Client, string) {
	t.Helper()
	st := testenv.Stack(t)
	table := st.Name("StreamsTable")
	return streamlog.New(st.DB, table, opts), st.DB, table
}

func payload(i int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"i":%d,"text":%q}`, i, strings.Repeat("x", i%50)))
}

func seqs(es []streamlog.Entry) []int64 {
	out := make([]int64, len(es))
	for i, e := range es {
		out[i] = e.Seq
	}
	return out
}

// A reader that attaches at any point of a turn (before it starts, in the middle, while it
// waits, after its end) and follows it reassembles exactly what a reader there throughout saw:
// the payloads in order, numbered without a gap, ending with the turn's final state.
func TestAReaderAttachedAnywhereReassemblesTheStream(t *testing.T) {
	clock := time.Now()
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	tick := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	log, _, _ := newLog(t, streamlog.Options{Now: now})
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 15))

	for round := range 8 {
		stream := fmt.Sprintf("acc#conv#turn-%d", round)
		total := 20 + rng.IntN(80)
		waitAt := rng.IntN(total)
		attach := make([]int, 4)
		for i := range attach {
			attach[i] = rng.IntN(total + 1)
		}
		w, err := log.Open(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		got := make([][]streamlog.Entry, len(attach))
		started := make([]chan struct{}, len(attach))
		for i := range started {
			started[i] = make(chan struct{})
		}
		follow := func(i int) {
			defer wg.Done()
			for e, err := range log.Follow(ctx, stream, -1, 5*time.Millisecond, nil) {
				if err != nil {
					t.Errorf("reader %d: %v", i, err)
					return
				}
				got[i] = append(got[i], e)
			}
		}
		for i := 0; i <= total; i++ {
			for r, at := range attach {
				if at == i {
					wg.Add(1)
					go follow(r)
				}
			}
			if i == total {
				break
			}
			if i == waitAt {
				// The turn waits for outside work, then a continuation (another writer) goes on.
				if err := w.Flush(ctx, streamlog.Waiting); err != nil {
					t.Fatal(err)
				}
				if w, err = log.Open(ctx, stream); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Append(ctx, payload(i)); err != nil {
				t.Fatal(err)
			}
			tick(time.Duration(rng.IntN(60)) * time.Millisecond)
		}
		if err := w.End(ctx, "completed"); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		// Readers that attached before the wait stop there (the turn waits); follow again.
		for i := range got {
			after := int64(-1)
			if n := len(got[i]); n > 0 {
				after = got[i][n-1].Seq
			}
			rest, state, err := log.Read(ctx, stream, after)
			if err != nil || state != "completed" {
				t.Fatalf("round %d reader %d: state %q, %v", round, i, state, err)
			}
			got[i] = append(got[i], rest...)
			if len(got[i]) != total {
				t.Fatalf("round %d reader %d (attached at %d of %d): %d payloads %v", round, i, attach[i], total, len(got[i]), seqs(got[i]))
			}
			for j, e := range got[i] {
				if e.Seq != int64(j) || string(e.Payload) != string(payload(j)) {
					t.Fatalf("round %d reader %d: entry %d is seq %d %s, want %d %s", round, i, j, e.Seq, e.Payload, j, payload(j))
				}
			}
		}
	}
}

// Batching: text that trickles in is written at most once per FlushEvery, a burst once per
// FlushBytes, and a pause writes what is buffered before it returns. (FlushEvery is an hour of
// the test's clock here, so the timer that writes a quiet buffer stays out of the count.)
func TestBatching(t *testing.T) {
	clock := time.Now()
	const every = time.Hour
	log, db, table := newLog(t, streamlog.Options{Now: func() time.Time { return clock }, FlushEvery: every})
	ctx := context.Background()
	w, err := log.Open(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	batches := func() int {
		out, err := db.Query(ctx, &dynamodb.QueryInput{
			TableName: &table, KeyConditionExpression: aws.String("streamKey = :k AND seq >= :z"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":k": &types.AttributeValueMemberS{Value: "s"}, ":z": &types.AttributeValueMemberN{Value: "0"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.Items)
	}
	for i := range 10 {
		if err := w.Append(ctx, payload(i)); err != nil {
			t.Fatal(err)
		}
		clock = clock.Add(every / 10) // FlushEvery of deltas in all
	}
	if n := batches(); n != 0 {
		t.Fatalf("%d batches written before FlushEvery passed, want 0", n)
	}
	if err := w.Append(ctx, payload(10)); err != nil {
		t.Fatal(err)
	}
	if n := batches(); n != 1 {
		t.Fatalf("%d batches after FlushEvery, want 1", n)
	}
	big := json.RawMessage(`"` + strings.Repeat("y", streamlog.FlushBytes) + `"`)
	if err := w.Append(ctx, big); err != nil {
		t.Fatal(err)
	}
	if n := batches(); n != 2 {
		t.Fatalf("%d batches after FlushBytes, want 2", n)
	}
	if err := w.Append(ctx, payload(12)); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx, streamlog.Waiting); err != nil {
		t.Fatal(err)
	}
	es, state, err := log.Read(ctx, "s", -1)
	if err != nil || state != streamlog.Waiting || len(es) != 13 {
		t.Fatalf("after the pause: %d entries, state %q, %v; want 13 and waiting", len(es), state, err)
	}
	if err := w.Append(ctx, json.RawMessage(`"`+strings.Repeat("z", 400<<10)+`"`)); !errors.Is(err, streamlog.ErrTooLarge) {
		t.Fatalf("a 400 KiB payload: %v, want ErrTooLarge", err)
	}
}

// Every item expires through TTL after the retention; a reader never depends on it.
func TestItemsExpireAfterTheRetention(t *testing.T) {
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	st := testenv.Stack(t)
	table := st.Name("StreamsTable")
	log := streamlog.New(st.DB, table, streamlog.Options{Retention: 2 * time.Hour, Now: func() time.Time { return at }})
	ctx := context.Background()
	w, err := log.Open(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append(ctx, payload(1)); err != nil {
		t.Fatal(err)
	}
	if err := w.End(ctx, "completed"); err != nil {
		t.Fatal(err)
	}
	out, err := st.DB.Scan(ctx, &dynamodb.ScanInput{TableName: &table})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Items) != 1 || out.Items[0]["state"] == nil {
		t.Fatalf("%d items, want one batch that records the end: a short turn costs one write", len(out.Items))
	}
	want := fmt.Sprint(at.Add(2 * time.Hour).Unix())
	for _, it := range out.Items {
		if v, ok := it["expiresAt"].(*types.AttributeValueMemberN); !ok || v.Value != want {
			t.Fatalf("item %v expires at %v, want %s", it["seq"], it["expiresAt"], want)
		}
	}
}

// A payload that waits in a quiet buffer (a model thinking between two events) is written by
// the writer's timer, so a reader that resumes meanwhile sees it.
func TestAQuietBufferIsWrittenByItsTimer(t *testing.T) {
	log, _, _ := newLog(t, streamlog.Options{FlushEvery: 20 * time.Millisecond})
	ctx := context.Background()
	w, err := log.Open(ctx, "s-quiet")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append(ctx, payload(1)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		es, _, err := log.Read(ctx, "s-quiet", -1)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the buffered payload was never written")
		}
	}
	if err := w.End(ctx, "completed"); err != nil {
		t.Fatal(err)
	}
}

// A reader that resumes while a continuation goes on with a waiting turn follows it live to its
// end, rather than stopping at the wait.
func TestAContinuationIsFollowedLive(t *testing.T) {
	log, _, _ := newLog(t, streamlog.Options{FlushEvery: 10 * time.Millisecond})
	ctx := context.Background()
	w, err := log.Open(ctx, "s-c")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append(ctx, payload(0)); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx, streamlog.Waiting); err != nil {
		t.Fatal(err)
	}
	// The continuation takes the turn up, says one thing, and later ends it.
	c, err := log.Open(ctx, "s-c")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Append(ctx, payload(1)); err != nil {
		t.Fatal(err)
	}
	done := make(chan []int64)
	go func() {
		var got []int64
		for e, err := range log.Follow(ctx, "s-c", -1, 5*time.Millisecond, nil) {
			if err != nil {
				t.Error(err)
				break
			}
			got = append(got, e.Seq)
		}
		done <- got
	}()
	time.Sleep(50 * time.Millisecond) // the reader is following before the turn ends
	if err := c.Append(ctx, payload(2)); err != nil {
		t.Fatal(err)
	}
	if err := c.End(ctx, "completed"); err != nil {
		t.Fatal(err)
	}
	if got := <-done; len(got) != 3 || got[2] != 2 {
		t.Fatalf("the reader followed %v, want 0, 1 and 2: the whole turn", got)
	}
}

// A turn that waits more than once is written by one writer per part: each opens the stream
// after the batches of the parts before it, even those written after its state item.
func TestEachContinuationAppendsAfterTheLast(t *testing.T) {
	log, _, _ := newLog(t, streamlog.Options{FlushEvery: time.Hour})
	ctx := context.Background()
	for part := range 3 {
		w, err := log.Open(ctx, "s-parts")
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if err := w.Append(ctx, payload(2*part+i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Last(streamlog.Waiting)(ctx); err != nil {
			t.Fatalf("part %d: %v", part, err)
		}
	}
	entries, state, err := log.Read(ctx, "s-parts", -1)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 6 || entries[5].Seq != 5 || state != streamlog.Waiting {
		t.Fatalf("read %d entries (last %v) in state %q, want six, 0 to 5, waiting", len(entries), entries[len(entries)-1], state)
	}
}

// A payload larger than a batch holds goes to the blob store, and readers get it back whole.
func TestALargePayloadGoesToTheBlobStore(t *testing.T) {
	st := testenv.Stack(t)
	log := streamlog.New(st.DB, st.Name("StreamsTable"), streamlog.Options{Blobs: blobstore.NewS3(st.S3, st.Bucket)})
	ctx := context.Background()
	w, err := log.Open(ctx, "s-big")
	if err != nil {
		t.Fatal(err)
	}
	big := json.RawMessage(`{"output":"` + strings.Repeat("o", 500<<10) + `"}`)
	for _, p := range []json.RawMessage{payload(0), big, payload(2)} {
		if err := w.Append(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.End(ctx, "completed"); err != nil {
		t.Fatal(err)
	}
	es, state, err := log.Read(ctx, "s-big", -1)
	if err != nil || state != "completed" || len(es) != 3 {
		t.Fatalf("read %d entries, state %q, %v", len(es), state, err)
	}
	if string(es[1].Payload) != string(big) || string(es[2].Payload) != string(payload(2)) {
		t.Fatalf("the large payload came back as %d bytes, want %d", len(es[1].Payload), len(big))
	}
}

// The writer sends its last batch as it lets go, so a reader may find it gone a moment before
// that batch lands: the reader reads once more, LastReadDelay later, and gets the end. A writer
// that let go and never wrote its end is gone.
func TestAReaderWaitsForTheBatchSentAsTheWriterLetGo(t *testing.T) {
	log, _, _ := newLog(t, streamlog.Options{})
	ctx := context.Background()
	w := log.Start("s-end")
	if err := w.Append(ctx, payload(0)); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx, streamlog.Open); err != nil {
		t.Fatal(err)
	}
	asked := make(chan struct{}, 1)
	gone := func(context.Context) (bool, error) {
		select {
		case asked <- struct{}{}:
		default:
		}
		return true, nil // the lease is free from the start
	}
	done := make(chan error, 1)
	var got []int64
	go func() {
		var ferr error
		for e, err := range log.Follow(ctx, "s-end", -1, 5*time.Millisecond, gone) {
			if err != nil {
				ferr = err
				break
			}
			got = append(got, e.Seq)
		}
		done <- ferr
	}()
	<-asked
	time.Sleep(200 * time.Millisecond) // the last batch lands after the lease was freed
	if err := w.Append(ctx, payload(1)); err != nil {
		t.Fatal(err)
	}
	if err := w.End(ctx, "completed"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || len(got) != 2 {
		t.Fatalf("the reader got %v, %v; want 0 and 1 and the end", got, err)
	}

	// A writer that let go and never ends its stream.
	dead := log.Start("s-dead")
	if err := dead.Append(ctx, payload(0)); err != nil {
		t.Fatal(err)
	}
	if err := dead.Flush(ctx, streamlog.Open); err != nil {
		t.Fatal(err)
	}
	var last error
	for _, err := range log.Follow(ctx, "s-dead", -1, 5*time.Millisecond, gone) {
		last = err
	}
	if !errors.Is(last, streamlog.ErrWriterGone) {
		t.Fatalf("following a writer that let go without an end ended with %v, want ErrWriterGone", last)
	}
}

// Last encodes the final batch when it is called and sends it when asked: the same one write
// End makes, read back whole with the state it records; with nothing buffered, the state alone.
func TestLastSendsTheBatchItEncoded(t *testing.T) {
	st := testenv.Stack(t)
	log := streamlog.New(st.DB, st.Name("StreamsTable"), streamlog.Options{})
	ctx := context.Background()
	w := log.Start("last")
	for i := range 3 {
		if err := w.Append(ctx, payload(i)); err != nil {
			t.Fatal(err)
		}
	}
	send := w.Last("completed")
	if entries, state, err := log.Read(ctx, "last", -1); err != nil || len(entries) != 0 || state != "" {
		t.Fatalf("before the send: %d entries, state %q, err %v; want nothing written yet", len(entries), state, err)
	}
	if err := send(ctx); err != nil {
		t.Fatal(err)
	}
	entries, state, err := log.Read(ctx, "last", -1)
	if err != nil || len(entries) != 3 || state != "completed" || entries[2].Seq != 2 {
		t.Fatalf("after the send: %d entries, state %q, err %v; want the three payloads and completed", len(entries), state, err)
	}
	if w.Next() != 3 {
		t.Errorf("Next = %d after the send, want 3", w.Next())
	}

	empty := log.Start("last-empty")
	if err := empty.Last("failed")(ctx); err != nil {
		t.Fatal(err)
	}
	if _, state, err := log.Read(ctx, "last-empty", -1); err != nil || state != "failed" {
		t.Errorf("a writer with nothing buffered recorded state %q (err %v), want failed", state, err)
	}
}
