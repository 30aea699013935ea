package natsserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/natsserver"
	"github.com/agentharness/harness/shared/edge/natslog"
	"github.com/agentharness/harness/shared/wire/natsturns"
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
	cfg := natslog.StreamConfig(stream, time.Hour, replicas)
	cfg.Storage = jetstream.MemoryStorage
	if _, err := js.CreateStream(ctx, cfg); err != nil {
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
	js    jetstream.JetStream
	creds natsturns.Credentials
	mu    sync.Mutex
	errs  []error
}

// connect connects to url with c, using inbox as its inbox prefix ("" for the default).
func connect(t *testing.T, url string, c natsturns.Credentials, inbox string) *client {
	t.Helper()
	cl := &client{creds: c}
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

// read reads the messages of filter with an ordered consumer named with the credentials'
// consumer names, and deletes the consumer after.
func (cl *client) read(ctx context.Context, filter string, n int) ([]jetstream.Msg, error) {
	oc, err := cl.js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}, NamePrefix: cl.creds.ConsumerPrefix})
	if err != nil {
		return nil, err
	}
	defer func() {
		if info := oc.CachedInfo(); info != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = cl.js.DeleteConsumer(ctx, stream, info.Name)
		}
	}()
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
	unused := credsA.Consumers[len(credsA.Consumers)-1]
	info := strings.ReplaceAll(natsturns.ConsumerAPI(stream)[2].Local, "*", unused)
	if res, err := a.Request(info, nil, 2*time.Second); err != nil || !strings.Contains(string(res.Data), "consumer not found") {
		t.Fatalf("A's own request %s = %v, %v; want JetStream's answer that there is no such consumer", info, res, err)
	}
	for _, api := range natsturns.ConsumerAPI(stream)[1:] {
		if err := a.PublishRequest(strings.ReplaceAll(api.Local, "*", unused), subjectB, []byte(`{"batch":1}`)); err != nil {
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

// issue issues credentials for each account with a fresh issuer of s's clients account.
func issue(t *testing.T, s *natsserver.Server, ttl time.Duration, accounts ...string) []natsturns.Credentials {
	t.Helper()
	iss, err := natsturns.NewIssuer(s.ClientSigningSeed, s.ClientAccount, "", ttl, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []natsturns.Credentials
	for _, acc := range accounts {
		c, err := iss.Issue(acc, "")
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

// call makes a JetStream API request as cl and returns the answer's JSON error (nil: none), or
// err when no answer came, as for a request the server refused to pass on.
func (cl *client) call(subject, body string) (answer []byte, apiErr *jetstream.APIError, err error) {
	m, err := cl.Request(subject, []byte(body), 500*time.Millisecond)
	if err != nil {
		return nil, nil, err
	}
	var res struct {
		Error *jetstream.APIError `json:"error"`
	}
	if len(m.Data) > 0 && m.Data[0] == '{' {
		if err := json.Unmarshal(m.Data, &res); err != nil {
			return nil, nil, err
		}
	}
	return m.Data, res.Error, nil
}

// TestConsumersBelongToTheirCredentials: a consumer made under one of A's consumer names is
// A's alone. B's credentials are refused by the server on every consumer API call against it:
// re-creating it with B's filter (or A's), pulling from it, reading its info, deleting it; the
// consumer comes out unchanged, and A's credentials make each same call. Neither may make a
// consumer under a name its credentials do not hold.
func TestConsumersBelongToTheirCredentials(t *testing.T) {
	s := start(t, natsserver.Options{})
	_, hjs := harness(t, s, 1)
	publish(t, hjs, subjectA, "a-1", "for A")
	publish(t, hjs, subjectB, "b-1", "for B")
	creds := issue(t, s, time.Minute, "acctA", "acctB")
	a := connect(t, s.URL, creds[0], creds[0].InboxPrefix)
	b := connect(t, s.URL, creds[1], creds[1].InboxPrefix)
	for _, name := range creds[1].Consumers {
		if slices.Contains(creds[0].Consumers, name) {
			t.Fatalf("A's and B's credentials both hold the consumer name %s", name)
		}
	}

	durable := creds[0].Consumers[0]
	api := func(verb string) string {
		return natsturns.APIPrefix + ".CONSUMER." + verb + "." + stream + "." + durable
	}
	create := func(filter string) (string, string) {
		return api("CREATE") + "." + filter, fmt.Sprintf(`{"stream_name":%q,"action":"","config":{"durable_name":%q,"name":%q,"filter_subject":%q,"ack_policy":"none","deliver_policy":"all"}}`, stream, durable, durable, filter)
	}
	aFilter, bFilter := natsturns.AccountSubjects("acctA"), natsturns.AccountSubjects("acctB")
	// filter is the consumer's filter as the harness sees it; "" when there is no consumer.
	filter := func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := hjs.Consumer(ctx, stream, durable)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			return ""
		}
		if err != nil {
			t.Fatal(err)
		}
		return c.CachedInfo().Config.FilterSubject
	}
	// refused fails unless the server refused B's request and sent B a permissions violation.
	refused := func(what, subject, body string) {
		t.Helper()
		if answer, apiErr, err := b.call(subject, body); err == nil {
			t.Errorf("B's %s was answered (%s, error %v), want the server's refusal", what, answer, apiErr)
			return
		}
		b.refused(t, "B's "+what, func(s string) bool { return s == subject })
	}
	// allowed fails unless A's same request was answered without an error, and returns the answer.
	allowed := func(what, subject, body string) []byte {
		t.Helper()
		answer, apiErr, err := a.call(subject, body)
		if err != nil || apiErr != nil {
			t.Errorf("A's %s = %s, %v, %v; want an answer", what, answer, apiErr, err)
		}
		return answer
	}

	subject, body := create(aFilter)
	allowed("CREATE of its durable consumer", subject, body)
	if got := filter(); got != aFilter {
		t.Fatalf("A's consumer filters %q, want %q", got, aFilter)
	}

	subject, body = create(bFilter)
	refused("CREATE with A's consumer name and B's subjects", subject, body)
	subject, body = create(aFilter)
	refused("CREATE with A's consumer name and A's subjects", subject, body)
	if got := filter(); got != aFilter {
		t.Errorf("after B's CREATEs, A's consumer filters %q, want %q", got, aFilter)
	}
	allowed("CREATE again (an update that changes nothing)", subject, body)

	next := `{"batch":1,"expires":2000000000}`
	refused("MSG.NEXT", api("MSG.NEXT"), next)
	// A reads its first message: B's pull took nothing.
	if got := string(allowed("MSG.NEXT", api("MSG.NEXT"), next)); got != "for A" {
		t.Errorf("A pulled %q from its consumer, want %q", got, "for A")
	}

	refused("INFO", api("INFO"), "")
	var info jetstream.ConsumerInfo
	if err := json.Unmarshal(allowed("INFO", api("INFO"), ""), &info); err != nil || info.Name != durable || info.Delivered.Consumer != 1 {
		t.Errorf("A's INFO = %+v, %v; want its consumer, one message delivered", info, err)
	}

	refused("DELETE", api("DELETE"), "")
	if got := filter(); got != aFilter {
		t.Errorf("after B's DELETE, A's consumer filters %q, want it there, filtering %q", got, aFilter)
	}
	allowed("DELETE", api("DELETE"), "")
	if got := filter(); got != "" {
		t.Errorf("A's DELETE left its consumer, filtering %q", got)
	}

	// A name the credentials do not hold is refused even on the account's own subjects.
	for _, cl := range []*client{a, b} {
		own := cl.creds.Subjects
		subject := natsturns.APIPrefix + ".CONSUMER.CREATE." + stream + ".durable." + own
		if _, _, err := cl.call(subject, fmt.Sprintf(`{"stream_name":%q,"config":{"durable_name":"durable","name":"durable","filter_subject":%q}}`, stream, own)); err == nil {
			t.Errorf("a consumer named durable on %s was made", own)
		}
		cl.refused(t, "a consumer named durable on "+own, func(s string) bool { return s == subject })
	}
}

// TestCredentialsExpire: the server closes a connection within a second of its credentials'
// expiry and takes them no more, which bounds how long credentials issued before a secret's
// rotation or an account's deletion work.
func TestCredentialsExpire(t *testing.T) {
	s := start(t, natsserver.Options{})
	c := issue(t, s, 2*time.Second, "acctA")[0]
	closed := make(chan time.Time, 1)
	var expired atomic.Bool
	nc, err := nats.Connect(s.URL, nats.UserJWTAndSeed(c.JWT, c.Seed), nats.CustomInboxPrefix(c.InboxPrefix), nats.NoReconnect(),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrAuthExpired) {
				expired.Store(true)
			}
		}),
		nats.ClosedHandler(func(*nats.Conn) { closed <- time.Now() }))
	if err != nil {
		t.Fatalf("connecting before the credentials expire: %v", err)
	}
	defer nc.Close()
	select {
	case at := <-closed:
		if at.Before(c.ExpiresAt) || at.After(c.ExpiresAt.Add(time.Second)) || !expired.Load() {
			t.Errorf("the connection closed at %s (authentication expired: %v), want within a second after the credentials' expiry %s", at, expired.Load(), c.ExpiresAt)
		}
	case <-time.After(time.Until(c.ExpiresAt) + 5*time.Second):
		t.Fatalf("the connection was still open 5s after the credentials expired at %s", c.ExpiresAt)
	}
	time.Sleep(time.Until(c.ExpiresAt.Add(time.Second)))
	if nc, err := nats.Connect(s.URL, nats.UserJWTAndSeed(c.JWT, c.Seed)); err == nil {
		nc.Close()
		t.Error("expired credentials connected")
	}
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
