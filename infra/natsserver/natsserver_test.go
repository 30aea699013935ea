package natsserver_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/natsserver"
	"github.com/agentharness/harness/shared/natsturns"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const stream = natsturns.DefaultStream

var (
	subjectA = natsturns.Subject("acctA", "c1", "e1")
	subjectB = natsturns.Subject("acctB", "c1", "e1")
)

func start(t *testing.T, opts natsserver.Options) *natsserver.Server {
	t.Helper()
	s, err := natsserver.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// harness connects as the harness's publisher and makes the turns' stream.
func harness(t *testing.T, s *natsserver.Server, replicas int) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := s.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{"harness.>"}, Storage: jetstream.MemoryStorage, Replicas: replicas})
	if err != nil {
		t.Fatalf("creating the stream: %v", err)
	}
	return nc, js
}

func publish(t *testing.T, js jetstream.JetStream, subject, id, data string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.Publish(ctx, subject, []byte(data), jetstream.WithMsgID(id)); err != nil {
		t.Fatalf("publishing %s: %v", id, err)
	}
}

// client is a connection with an account's credentials, keeping the errors the server sent it.
type client struct {
	*nats.Conn
	js   jetstream.JetStream
	mu   sync.Mutex
	errs []error
}

// connect connects to url with c, using inbox as its inbox prefix ("" for the default).
func connect(t *testing.T, url string, c natsturns.Credentials, inbox string) *client {
	t.Helper()
	cl := &client{}
	opts := []nats.Option{
		nats.UserJWTAndSeed(c.JWT, c.Seed),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			cl.mu.Lock()
			defer cl.mu.Unlock()
			cl.errs = append(cl.errs, err)
		}),
	}
	if inbox != "" {
		opts = append(opts, nats.CustomInboxPrefix(inbox))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("connecting to %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	cl.Conn = nc
	if cl.js, err = jetstream.NewWithAPIPrefix(nc, c.APIPrefix); err != nil {
		t.Fatal(err)
	}
	return cl
}

// refused waits for the server's permissions violation for a subject that match accepts.
func (cl *client) refused(t *testing.T, what string, match func(subject string) bool) {
	t.Helper()
	seen := func() bool {
		cl.mu.Lock()
		defer cl.mu.Unlock()
		for _, err := range cl.errs {
			msg := err.Error()
			first, last := strings.Index(msg, `"`), strings.LastIndex(msg, `"`)
			if errors.Is(err, nats.ErrPermissionViolation) && first < last && match(msg[first+1:last]) {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(3 * time.Second); !seen(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			cl.mu.Lock()
			defer cl.mu.Unlock()
			t.Errorf("%s: the server sent no permissions violation for it; errors: %v", what, cl.errs)
			return
		}
	}
}

// read reads the messages of filter with an ordered consumer.
func (cl *client) read(ctx context.Context, filter string, n int) ([]jetstream.Msg, error) {
	oc, err := cl.js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		return nil, err
	}
	// Messages, not Next: an ordered consumer's Next makes a consumer per message.
	it, err := oc.Messages()
	if err != nil {
		return nil, err
	}
	defer it.Stop()
	var msgs []jetstream.Msg
	for len(msgs) < n {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return msgs, err
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

func readOne(t *testing.T, cl *client, filter, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	msgs, err := cl.read(ctx, filter, 1)
	if err != nil {
		t.Fatalf("reading %s: %v", filter, err)
	}
	if got := string(msgs[0].Data()); got != want {
		t.Errorf("read %q from %s, want %q", got, filter, want)
	}
}

// TestAccountIsolation: credentials issued for account A read A's turns over TCP and WebSocket
// and nothing of B's: no consumer on B's subjects or on wildcards over accounts, no core
// subscription to them or to other clients' inboxes, and no reading without A's inbox prefix.
func TestAccountIsolation(t *testing.T) {
	s := start(t, natsserver.Options{WebSocket: true})
	_, hjs := harness(t, s, 1)
	publish(t, hjs, subjectA, "a-1", "for A")
	publish(t, hjs, subjectB, "b-1", "for B")

	iss, err := natsturns.NewIssuer(s.ClientSigningSeed, s.ClientAccount, "", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	credsA, err := iss.Issue("acctA", "")
	if err != nil {
		t.Fatal(err)
	}
	credsB, err := iss.Issue("acctB", "")
	if err != nil {
		t.Fatal(err)
	}

	a := connect(t, s.URL, credsA, credsA.InboxPrefix)
	readOne(t, a, subjectA, "for A")
	readOne(t, a, natsturns.ConversationSubjects("acctA", "c1"), "for A")
	readOne(t, connect(t, s.WebSocketURL, credsA, credsA.InboxPrefix), credsA.Subjects, "for A")
	readOne(t, connect(t, s.URL, credsB, credsB.InboxPrefix), subjectB, "for B")

	for _, filter := range []string{subjectB, natsturns.AccountSubjects("acctB"), "harness.>", "harness.*.c1.e1"} {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		msgs, err := a.read(ctx, filter, 1)
		cancel()
		if err == nil || len(msgs) > 0 {
			t.Errorf("A read %d messages of %s (err %v), want a refusal", len(msgs), filter, err)
		}
		a.refused(t, "a consumer on "+filter, func(subject string) bool {
			return strings.HasPrefix(subject, natsturns.APIPrefix+".CONSUMER.CREATE."+stream+".") && strings.HasSuffix(subject, "."+filter)
		})
	}

	// Core subscriptions: the server refuses every subject but A's inboxes (turns are read
	// through JetStream only), B's inbox and the shared ones included.
	spy := connect(t, s.URL, credsA, credsA.InboxPrefix)
	var stolen []*nats.Subscription
	for _, subject := range []string{credsA.Subjects, natsturns.AccountSubjects("acctB"), "_INBOX.>", credsB.InboxPrefix + ".>", "harness.>", ">"} {
		sub, err := spy.SubscribeSync(subject)
		if err != nil {
			t.Fatal(err)
		}
		stolen = append(stolen, sub)
		spy.refused(t, "subscribing to "+subject, func(s string) bool { return s == subject })
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	hnc, err := s.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer hnc.Close()
	for _, subject := range []string{subjectB, "_INBOX.x", credsB.InboxPrefix + ".x", subjectA} {
		if err := hnc.Publish(subject, []byte("live")); err != nil {
			t.Fatal(err)
		}
	}
	for i, sub := range stolen {
		if m, err := sub.NextMsg(100 * time.Millisecond); err == nil {
			t.Errorf("subscription %d (%s) received %s", i, sub.Subject, m.Subject)
		}
	}

	// Without its inbox prefix, or with another account's, a client cannot get JetStream's answers.
	for name, inbox := range map[string]string{"the default inbox": "", "B's inbox": credsB.InboxPrefix} {
		cl := connect(t, s.URL, credsA, inbox)
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		msgs, err := cl.read(ctx, subjectA, 1)
		cancel()
		if err == nil || len(msgs) > 0 {
			t.Errorf("A with %s read %d messages (err %v), want none", name, len(msgs), err)
		}
	}

	// A request whose reply names B's turn subject is answered in the clients' account, where no
	// stream listens: B's turn on the stream is untouched.
	before := lastSeq(t, hjs, subjectB)
	info := strings.ReplaceAll(natsturns.ConsumerAPI(stream)[2].Local, "*", "nope")
	if res, err := a.Request(info, nil, 2*time.Second); err != nil || !strings.Contains(string(res.Data), "consumer not found") {
		t.Fatalf("A's own request %s = %v, %v; want JetStream's answer that there is no such consumer", info, res, err)
	}
	for _, api := range natsturns.ConsumerAPI(stream)[1:] {
		if err := a.PublishRequest(strings.ReplaceAll(api.Local, "*", "nope"), subjectB, []byte(`{"batch":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if after := lastSeq(t, hjs, subjectB); after != before {
		t.Errorf("B's subject went from stream sequence %d to %d after A's requests replying to it", before, after)
	}

	// Credentials for a client's own key: the seed stays with the client.
	uc, err := jwt.DecodeUserClaims(credsA.JWT)
	if err != nil {
		t.Fatal(err)
	}
	c, err := iss.Issue("acctA", uc.Subject)
	if err != nil || c.Seed != "" {
		t.Fatalf("issuing for a public key = %+v, %v; want no seed", c, err)
	}
	c.Seed = credsA.Seed
	readOne(t, connect(t, s.URL, c, c.InboxPrefix), subjectA, "for A")
}

// TestClusterFailover stops the stream's leader in a three-node cluster mid-stream: publishing
// goes on, and a reader gets every message exactly once, in order.
func TestClusterFailover(t *testing.T) {
	s := start(t, natsserver.Options{Nodes: 3})
	_, hjs := harness(t, s, 3)
	const n = 40
	send := func(i int) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		for {
			attempt, stop := context.WithTimeout(ctx, time.Second)
			_, err := hjs.Publish(attempt, subjectA, []byte(fmt.Sprint(i)), jetstream.WithMsgID(fmt.Sprint("e1-", i)))
			stop()
			if err == nil {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("publishing %d: %v", i, err)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	for i := range n / 2 {
		send(i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	str, err := hjs.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := str.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	leader := -1
	for i, name := range s.Names {
		if info.Cluster != nil && name == info.Cluster.Leader {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatalf("the stream's leader %+v is none of %v", info.Cluster, s.Names)
	}
	s.StopNode(leader)
	for i := n / 2; i < n; i++ {
		send(i)
	}

	iss, err := natsturns.NewIssuer(s.ClientSigningSeed, s.ClientAccount, "", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := iss.Issue("acctA", "")
	if err != nil {
		t.Fatal(err)
	}
	var live []string
	for i, u := range s.URLs {
		if i != leader {
			live = append(live, u)
		}
	}
	a := connect(t, strings.Join(live, ","), creds, creds.InboxPrefix)
	msgs, err := a.read(ctx, subjectA, n)
	if err != nil {
		t.Fatalf("read %d of %d messages: %v", len(msgs), n, err)
	}
	for i, m := range msgs {
		if string(m.Data()) != fmt.Sprint(i) {
			t.Fatalf("message %d is %q, want %d", i, m.Data(), i)
		}
	}
	if info, err = str.Info(ctx); err != nil || info.State.Msgs != n {
		t.Errorf("the stream holds %d messages (%v), want %d", info.State.Msgs, err, n)
	}
}

// lastSeq is the stream sequence of the last message on subject.
func lastSeq(t *testing.T, js jetstream.JetStream, subject string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	str, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := str.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		t.Fatal(err)
	}
	return m.Sequence
}
