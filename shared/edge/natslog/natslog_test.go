package natslog_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentharness/harness/infra/natsserver"
	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/edge/natslog"
	"github.com/agentharness/harness/shared/state/streamlog"
	"github.com/agentharness/harness/shared/wire/natsturns"
)

// startServer runs a real NATS server with JetStream on a free loopback port.
func startServer(t *testing.T, maxPayload int32) string {
	t.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), MaxPayload: maxPayload, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("the NATS server did not start")
	}
	return srv.ClientURL()
}

// subject is turn.StreamOf's key mapped the way the turn engine maps it.
func subject(stream string) string {
	parts := strings.SplitN(stream, "#", 3)
	return natsturns.Subject(parts[0], parts[1], parts[2])
}

func newMirror(t *testing.T, url string) *natslog.Mirror {
	t.Helper()
	m := natslog.New(natslog.Options{URL: url, Subject: subject, GiveUp: 10 * time.Second})
	t.Cleanup(m.Close)
	return m
}

type copied struct {
	seq     int64
	payload string
}

// jetStream connects to url for the rest of the test.
func jetStream(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// read returns every message on subj, in stream order, with its Harness-Seq.
func read(t *testing.T, url, subj string) []copied {
	t.Helper()
	js := jetStream(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := js.OrderedConsumer(ctx, natsturns.DefaultStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj}})
	if err != nil {
		t.Fatal(err)
	}
	var out []copied
	for {
		batch, err := c.FetchNoWait(100)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			seq, err := strconv.ParseInt(msg.Headers().Get(natslog.SeqHeader), 10, 64)
			if err != nil {
				t.Fatalf("message without %s: %v", natslog.SeqHeader, msg.Headers())
			}
			out = append(out, copied{seq, string(msg.Data())})
		}
		if n == 0 {
			return out
		}
	}
}

// appendAll appends the payloads from to to-1.
func appendAll(t *testing.T, w *streamlog.Writer, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := w.Append(context.Background(), payload(i)); err != nil {
			t.Fatal(err)
		}
	}
}

func payload(i int) json.RawMessage { return json.RawMessage(fmt.Sprintf(`{"event":{"i":%d}}`, i)) }

func wantCopies(t *testing.T, got []copied, from, to int) {
	t.Helper()
	if len(got) != to-from {
		t.Fatalf("NATS holds %d entries %v, want %d (%d to %d)", len(got), got, to-from, from, to-1)
	}
	for i, c := range got {
		if c.seq != int64(from+i) || c.payload != string(payload(from+i)) {
			t.Fatalf("entry %d on NATS = %d %s, want %d %s", i, c.seq, c.payload, from+i, payload(from+i))
		}
	}
}

// What a writer stores is on NATS, in order and numbered as stored, by the time its turn ends:
// End returns after JetStream acknowledged the last entry.
func TestAStreamIsOnNATSWhenItsTurnEnds(t *testing.T) {
	url := startServer(t, 0)
	st := testenv.Stack(t)
	log := streamlog.New(st.DB, st.Name("StreamsTable"), streamlog.Options{Mirror: newMirror(t, url)})
	ctx := context.Background()
	stream := "acc.1#conv.1#evt_1"
	w := log.Start(stream)
	appendAll(t, w, 0, 250)
	if err := w.End(ctx, "completed"); err != nil {
		t.Fatal(err)
	}
	wantCopies(t, read(t, url, subject(stream)), 0, 250)
	if got := subject(stream); got != "harness.acc%2E1.conv%2E1.evt_1" {
		t.Errorf("subject = %s, want the ids' dots escaped", got)
	}
}

// The stream the mirror makes lets no consumer idle longer than natsturns.ConsumerInactive: one
// that asks for no inactive threshold, a durable one included, gets it, and one that asks for
// longer is refused, so the consumers of clients that went away go.
func TestTheStreamItMakesRemovesIdleConsumers(t *testing.T) {
	url := startServer(t, 0)
	newMirror(t, url)
	js := jetStream(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, err := js.Stream(ctx, natsturns.DefaultStream); err != nil; _, err = js.Stream(ctx, natsturns.DefaultStream) {
		if ctx.Err() != nil {
			t.Fatalf("the mirror made no stream: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c, err := js.CreateOrUpdateConsumer(ctx, natsturns.DefaultStream, jetstream.ConsumerConfig{Durable: "durable", AckPolicy: jetstream.AckNonePolicy})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.CachedInfo().Config.InactiveThreshold; got != natsturns.ConsumerInactive {
		t.Errorf("a durable consumer that asks for no inactive threshold got %s, want %s", got, natsturns.ConsumerInactive)
	}
	longer := jetstream.ConsumerConfig{Name: "longer", AckPolicy: jetstream.AckNonePolicy, InactiveThreshold: natsturns.ConsumerInactive + time.Second}
	if _, err := js.CreateOrUpdateConsumer(ctx, natsturns.DefaultStream, longer); err == nil {
		t.Errorf("a consumer with the inactive threshold %s was made, want it refused", longer.InactiveThreshold)
	}
}

// A writer that stored entries and died before copying them (its Lambda timed out between the
// two) leaves them to the next writer of its stream, which copies them first: the stream on
// NATS has no gap, and nothing twice.
func TestTheNextWriterCopiesWhatADeadWriterStored(t *testing.T) {
	url := startServer(t, 0)
	st := testenv.Stack(t)
	table := st.Name("StreamsTable")
	mirror := newMirror(t, url)
	ctx := context.Background()
	stream := "acc#conv#evt_2"

	// The first invocation copies 0-2, then stores 3-5 but dies before they are copied.
	first := streamlog.New(st.DB, table, streamlog.Options{Mirror: mirror}).Start(stream)
	appendAll(t, first, 0, 3)
	if err := first.Flush(ctx, streamlog.Waiting); err != nil {
		t.Fatal(err)
	}
	dying, err := streamlog.New(st.DB, table, streamlog.Options{}).Open(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, dying, 3, 6)
	if err := dying.Flush(ctx, streamlog.Open); err != nil {
		t.Fatal(err)
	}
	wantCopies(t, read(t, url, subject(stream)), 0, 3)

	// The retry opens the stream at 6 and goes on.
	retry, err := streamlog.New(st.DB, table, streamlog.Options{Mirror: mirror}).Open(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, retry, 6, 9)
	if err := retry.End(ctx, "completed"); err != nil {
		t.Fatal(err)
	}
	wantCopies(t, read(t, url, subject(stream)), 0, 9)
}

// A retried invocation that publishes entries again (its first attempt's acknowledgements were
// lost) adds nothing: JetStream drops them by message id.
func TestARepublishedEntryIsDroppedByItsMessageID(t *testing.T) {
	url := startServer(t, 0)
	mirror := newMirror(t, url)
	ctx := context.Background()
	stream := "acc#conv#evt_3"
	entries := []streamlog.Entry{{Seq: 0, Payload: payload(0)}, {Seq: 1, Payload: payload(1)}, {Seq: 2, Payload: payload(2)}}
	for range 2 {
		c := mirror.Open(stream, 0, nil)
		c.Copy(entries)
		c.Sync(ctx)
	}
	wantCopies(t, read(t, url, subject(stream)), 0, 3)
}

// An entry larger than the server's max_payload cannot go on NATS: its place says so, with its
// size, and the entries after it follow.
func TestAnEntryTooLargeForNATSLeavesANote(t *testing.T) {
	url := startServer(t, 4096)
	mirror := newMirror(t, url)
	ctx := context.Background()
	stream := "acc#conv#evt_4"
	big := json.RawMessage(`{"event":{"text":"` + strings.Repeat("x", 8000) + `"}}`)
	c := mirror.Open(stream, 0, nil)
	c.Copy([]streamlog.Entry{{Seq: 0, Payload: payload(0)}, {Seq: 1, Payload: big}, {Seq: 2, Payload: payload(2)}})
	c.Sync(ctx)
	got := read(t, url, subject(stream))
	if len(got) != 3 || got[1].seq != 1 || !strings.Contains(got[1].payload, fmt.Sprintf(`"bytes":%d`, len(big))) || got[2].payload != string(payload(2)) {
		t.Fatalf("NATS holds %v, want entry 1 replaced by a note of its %d bytes", got, len(big))
	}
}

// The publisher's credentials come from a creds file's text or path, an NKey seed, or a Secrets
// Manager secret holding either; each connects to a server that checks them.
func TestAuthConnectsWithEachFormOfCredentials(t *testing.T) {
	ns, err := natsserver.Start(natsserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	path := filepath.Join(t.TempDir(), "harness.creds")
	if err := os.WriteFile(path, []byte(ns.HarnessCreds), 0o600); err != nil {
		t.Fatal(err)
	}
	secretOf := map[string]string{"arn:creds": ns.HarnessCreds}
	secret := func(_ context.Context, id string) (string, error) {
		if v, ok := secretOf[id]; ok {
			return v, nil
		}
		return "", fmt.Errorf("no secret %s", id)
	}
	for name, c := range map[string]natslog.Config{
		"creds text": {Creds: ns.HarnessCreds},
		"creds file": {Creds: path},
		"secret":     {CredsSecret: "arn:creds"},
	} {
		auth, err := natslog.Auth(context.Background(), c, secret)
		if err != nil || auth == nil {
			t.Fatalf("%s: Auth = %v, %v", name, auth, err)
		}
		nc, err := nats.Connect(ns.URL, auth)
		if err != nil {
			t.Errorf("%s: connecting: %v", name, err)
			continue
		}
		nc.Close()
	}
	// Without credentials, the operator-mode server refuses the connection.
	if nc, err := nats.Connect(ns.URL); err == nil {
		nc.Close()
		t.Error("connected with no credentials, want a refusal (the check above proves nothing otherwise)")
	}
	for name, c := range map[string]natslog.Config{
		"secret without a client": {CredsSecret: "arn:creds"},
		"missing file":            {Creds: filepath.Join(t.TempDir(), "none")},
		"bad seed":                {NKeySeed: "SUNOTASEED"},
	} {
		sec := secret
		if name == "secret without a client" {
			sec = nil
		}
		if _, err := natslog.Auth(context.Background(), c, sec); err == nil {
			t.Errorf("%s: Auth succeeded, want an error", name)
		}
	}
	if auth, err := natslog.Auth(context.Background(), natslog.Config{}, nil); auth != nil || err != nil {
		t.Errorf("no credentials configured: Auth = %v, %v; want none", auth, err)
	}
}
