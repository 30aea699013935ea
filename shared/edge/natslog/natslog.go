// Package natslog copies turn streams to NATS JetStream, as a streamlog.Mirror: each entry of a
// stream, once stored, is published to the stream's subject with its sequence number, so clients
// read turns straight from NATS (any number of them, replayed from any point) on the messaging
// system they already run.
//
// One JetStream stream (HARNESS_TURNS) holds every turn; an entry is one message on
// natsturns.Subject(account, conversation, turn), carrying its sequence number in the
// Harness-Seq header and deduplicated by its message id (subject and sequence number), so a
// retried invocation that publishes an entry again adds nothing. A stream's entries are
// published one after the other in the background, each acknowledged before the next, so they
// keep their order when a JetStream leader changes; the writer waits for the acknowledgements
// before its turn pauses, waits or ends.
package natslog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/agentharness/harness/shared/state/streamlog"
	"github.com/agentharness/harness/shared/wire/natsturns"
)

// SeqHeader carries an entry's sequence number in its turn's stream.
const SeqHeader = "Harness-Seq"

// Defaults.
const (
	// publishTimeout bounds one publish's wait for its acknowledgement.
	publishTimeout = 2 * time.Second
	// GiveUp is how long a copier keeps retrying an entry (a JetStream leader election, a
	// reconnect) before it drops what it holds.
	GiveUp = 30 * time.Second
	// dedupWindow is the stream's window of message ids (JetStream's default).
	dedupWindow = 2 * time.Minute
)

// Options configure a Mirror.
type Options struct {
	// URL is the server (or comma-separated servers) to connect to; Auth the connection's
	// credentials (CredsAuth, SeedAuth; nil: none).
	URL  string
	Auth nats.Option
	// Stream is the JetStream stream (natsturns.DefaultStream). Created when missing, with
	// subjects harness.>, MaxAge Retention and Replicas; an existing one is used as it is.
	Stream    string
	Retention time.Duration
	Replicas  int
	// Subject names a stream log's subject.
	Subject func(stream string) string
	// Encode gives an entry's message data (nil: its payload as stored).
	Encode func(stream string, e streamlog.Entry) ([]byte, error)
	// GiveUp overrides GiveUp.
	GiveUp time.Duration
	Logger *slog.Logger
}

// Mirror publishes turn streams to JetStream. It connects in the background as it is made, so
// a turn never waits on the connection: entries wait in their copier.
type Mirror struct {
	opts  Options
	ready chan struct{} // closed once connected, or failed
	js    jetstream.JetStream
	nc    *nats.Conn
	err   error

	streamMu    sync.Mutex
	streamReady bool // the JetStream stream was found or made
}

// New connects to NATS in the background and returns the mirror.
func New(opts Options) *Mirror {
	if opts.Stream == "" {
		opts.Stream = natsturns.DefaultStream
	}
	if opts.Retention <= 0 {
		opts.Retention = streamlog.Retention
	}
	if opts.Replicas <= 0 {
		opts.Replicas = 1
	}
	if opts.GiveUp <= 0 {
		opts.GiveUp = GiveUp
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Mirror{opts: opts, ready: make(chan struct{})}
	go func() {
		defer close(m.ready)
		m.nc, m.js, m.err = m.connect(opts.URL)
		if m.err != nil {
			opts.Logger.Error("connecting to NATS; turn streams are not copied there", "url", opts.URL, "err", m.err)
		}
	}()
	go func() {
		// The stream exists before the first turn ends, so clients may create consumers on it
		// as soon as they start a turn. A failure here is tried again by the first copier.
		<-m.ready
		if m.err == nil {
			if err := m.ensureStream(context.Background()); err != nil {
				opts.Logger.Warn("finding or creating the JetStream stream", "stream", opts.Stream, "err", err)
			}
		}
	}()
	return m
}

// connect connects, and keeps reconnecting for as long as the process lives: a server that is
// down when a function starts costs the turns until it is back, not the function's lifetime.
func (m *Mirror) connect(url string) (*nats.Conn, jetstream.JetStream, error) {
	options := []nats.Option{nats.Name("harness"), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond), nats.RetryOnFailedConnect(true)}
	if m.opts.Auth != nil {
		options = append(options, m.opts.Auth)
	}
	nc, err := nats.Connect(url, options...)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// ensureStream finds the stream, or creates it, once; an existing stream's configuration is
// its operator's.
func (m *Mirror) ensureStream(ctx context.Context) error {
	m.streamMu.Lock()
	defer m.streamMu.Unlock()
	if m.streamReady {
		return nil
	}
	// Until connected, or while JetStream elects a leader, requests fail or go unanswered.
	err := m.retry(ctx, func(ctx context.Context) error {
		_, err := m.js.Stream(ctx, m.opts.Stream)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			_, err = m.js.CreateStream(ctx, StreamConfig(m.opts.Stream, m.opts.Retention, m.opts.Replicas))
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				err = nil // another function made it first
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("JetStream stream %s: %w", m.opts.Stream, err)
	}
	m.streamReady = true
	return nil
}

// StreamConfig is the stream the harness makes when it is missing: every turn's subject, kept
// for retention, on replicas servers. A consumer goes at most natsturns.ConsumerInactive after
// its last pull (one that asks for longer is refused, one that asks for nothing, a durable one
// included, gets it), so consumers of expired credentials do not pile up.
func StreamConfig(name string, retention time.Duration, replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name: name, Subjects: []string{"harness.>"}, MaxAge: retention,
		Replicas: replicas, Storage: jetstream.FileStorage, Duplicates: dedupWindow,
		Discard:        jetstream.DiscardOld,
		ConsumerLimits: jetstream.StreamConsumerLimits{InactiveThreshold: natsturns.ConsumerInactive},
	}
}

// Close closes the connection.
func (m *Mirror) Close() {
	<-m.ready
	if m.nc != nil {
		m.nc.Close()
	}
}

// Open returns the copier of stream (streamlog.Mirror).
func (m *Mirror) Open(stream string, next int64, read func(ctx context.Context, after int64) ([]streamlog.Entry, error)) streamlog.Copier {
	c := &copier{m: m, stream: stream, subject: m.opts.Subject(stream)}
	c.idle = sync.NewCond(&c.mu)
	if next > 0 && read != nil {
		c.repair = func(ctx context.Context) error { return c.fill(ctx, next, read) }
		c.mu.Lock()
		c.wake()
		c.mu.Unlock()
	}
	return c
}

// copier publishes one stream's entries in order, from one goroutine that runs while it has
// something to publish.
type copier struct {
	m       *Mirror
	stream  string
	subject string

	mu      sync.Mutex
	idle    *sync.Cond // signalled when the goroutine stops
	queue   []streamlog.Entry
	running bool
	repair  func(ctx context.Context) error // run first, once
	failed  bool                            // gave up: nothing more is copied
}

func (c *copier) Copy(entries []streamlog.Entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failed {
		return
	}
	c.queue = append(c.queue, entries...)
	c.wake()
}

// wake starts the goroutine unless it runs. c.mu is held.
func (c *copier) wake() {
	if !c.running {
		c.running = true
		go c.run()
	}
}

func (c *copier) Sync(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		c.mu.Lock()
		for c.running {
			c.idle.Wait()
		}
		c.mu.Unlock()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		c.mu.Lock()
		left := len(c.queue)
		c.mu.Unlock()
		c.m.opts.Logger.ErrorContext(ctx, "the turn ends before its stream is all on NATS", "subject", c.subject, "waiting", left, "err", ctx.Err())
	}
}

// run publishes what is queued until nothing is.
func (c *copier) run() {
	ctx := context.Background()
	<-c.m.ready
	err := c.m.err
	if err == nil {
		err = c.m.ensureStream(ctx)
	}
	if err == nil {
		c.mu.Lock()
		repair := c.repair
		c.repair = nil
		c.mu.Unlock()
		if repair != nil {
			err = repair(ctx)
		}
	}
	for err == nil {
		c.mu.Lock()
		if len(c.queue) == 0 {
			c.running = false
			c.idle.Broadcast()
			c.mu.Unlock()
			return
		}
		e := c.queue[0]
		c.mu.Unlock()
		if err = c.publish(ctx, e); err == nil {
			c.mu.Lock()
			c.queue = c.queue[1:]
			c.mu.Unlock()
		}
	}
	c.mu.Lock()
	dropped := len(c.queue)
	c.failed, c.running, c.queue = true, false, nil
	c.idle.Broadcast()
	c.mu.Unlock()
	if c.m.err == nil { // a refused connection was reported once, as it was refused
		c.m.opts.Logger.Error("copying a turn stream to NATS; the rest of it is not copied", "subject", c.subject, "dropped", dropped, "err", err)
	}
}

// fill publishes the entries an earlier writer stored but did not copy: those after the last
// one on the subject and before next.
func (c *copier) fill(ctx context.Context, next int64, read func(ctx context.Context, after int64) ([]streamlog.Entry, error)) error {
	last, err := c.lastCopied(ctx)
	if err != nil || last+1 >= next {
		return err
	}
	entries, err := read(ctx, last)
	if err != nil {
		return fmt.Errorf("reading stream %s after %d: %w", c.stream, last, err)
	}
	for _, e := range entries {
		if e.Seq >= next {
			break // stored since; it is queued
		}
		if err := c.publish(ctx, e); err != nil {
			return err
		}
	}
	return nil
}

// lastCopied is the sequence number of the last entry on the subject, -1 for none.
func (c *copier) lastCopied(ctx context.Context) (int64, error) {
	var last int64 = -1
	err := c.m.retry(ctx, func(ctx context.Context) error {
		s, err := c.m.js.Stream(ctx, c.m.opts.Stream)
		if err != nil {
			return err
		}
		msg, err := s.GetLastMsgForSubject(ctx, c.subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		last, err = strconv.ParseInt(msg.Header.Get(SeqHeader), 10, 64)
		if err != nil {
			return fmt.Errorf("message %d on %s has no %s header", msg.Sequence, c.subject, SeqHeader)
		}
		return nil
	})
	return last, err
}

// publish publishes one entry, retried until it is acknowledged (a duplicate's acknowledgement
// included) or GiveUp passes.
func (c *copier) publish(ctx context.Context, e streamlog.Entry) error {
	seq := strconv.FormatInt(e.Seq, 10)
	data := []byte(e.Payload)
	if c.m.opts.Encode != nil {
		var err error
		if data, err = c.m.opts.Encode(c.stream, e); err != nil {
			return fmt.Errorf("encoding entry %d of stream %s: %w", e.Seq, c.stream, err)
		}
	}
	msg := &nats.Msg{Subject: c.subject, Header: nats.Header{SeqHeader: []string{seq}}, Data: data}
	if max := c.m.nc.MaxPayload() - 1024; int64(len(data)) > max {
		// The server's max_payload refuses it: readers get its place and size, and read it over
		// HTTP (GET /chat/{conversationId}/stream).
		msg.Data, _ = json.Marshal(map[string]any{"seq": e.Seq, "omitted": map[string]any{"bytes": len(data), "reason": "larger than the NATS server's max_payload"}})
	}
	return c.m.retry(ctx, func(ctx context.Context) error {
		_, err := c.m.js.PublishMsg(ctx, msg, jetstream.WithMsgID(c.subject+":"+seq), jetstream.WithExpectStream(c.m.opts.Stream))
		return err
	})
}

// retry calls f until it succeeds or GiveUp passes, each call bounded by publishTimeout.
func (m *Mirror) retry(ctx context.Context, f func(context.Context) error) error {
	deadline := time.Now().Add(m.opts.GiveUp)
	wait := 50 * time.Millisecond
	for {
		callCtx, cancel := context.WithTimeout(ctx, publishTimeout)
		err := f(callCtx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().Add(wait).After(deadline) {
			return err
		}
		time.Sleep(wait)
		wait = min(2*wait, time.Second)
	}
}

// Config is how a function reaches NATS, as the NATS_* variables set it.
type Config struct {
	// URL is the servers, comma-separated (NATS_URL); empty: no mirror.
	URL string
	// Creds is a creds file's text or path (NATS_CREDS), NKeySeed an NKey user seed
	// (NATS_NKEY_SEED), CredsSecret a Secrets Manager secret holding either (NATS_CREDS_SECRET).
	Creds, NKeySeed, CredsSecret string
	// Stream names the JetStream stream (NATS_STREAM), Replicas its replicas when the harness
	// creates it (NATS_REPLICAS, 1 to 5; default 1).
	Stream, Replicas string
}

// Auth is the connection's credentials c names, a secret's read through secret. nil: none.
func Auth(ctx context.Context, c Config, secret func(ctx context.Context, id string) (string, error)) (nats.Option, error) {
	value := c.Creds
	if id := c.CredsSecret; id != "" {
		if secret == nil {
			return nil, errors.New("NATS_CREDS_SECRET is set but no Secrets Manager client is")
		}
		v, err := secret(ctx, id)
		if err != nil {
			return nil, err
		}
		value = v
	}
	if seed := c.NKeySeed; seed != "" && value == "" {
		value = seed
	}
	value = strings.TrimSpace(value)
	switch {
	case value == "":
		return nil, nil
	case strings.HasPrefix(value, "SU"):
		kp, err := nkeys.FromSeed([]byte(value))
		if err != nil {
			return nil, fmt.Errorf("the NATS NKey seed: %w", err)
		}
		pub, _ := kp.PublicKey()
		return nats.Nkey(pub, kp.Sign), nil
	case strings.Contains(value, "-----BEGIN"):
		return CredsAuth(value)
	default:
		text, err := os.ReadFile(value)
		if err != nil {
			return nil, fmt.Errorf("NATS_CREDS is neither a creds file's text, an NKey seed nor a readable file: %w", err)
		}
		return CredsAuth(string(text))
	}
}

// CredsAuth authenticates with a creds file's text (a user JWT and its seed).
func CredsAuth(creds string) (nats.Option, error) {
	userJWT, err := nkeys.ParseDecoratedJWT([]byte(creds))
	if err != nil {
		return nil, fmt.Errorf("NATS creds: %w", err)
	}
	kp, err := nkeys.ParseDecoratedNKey([]byte(creds))
	if err != nil {
		return nil, fmt.Errorf("NATS creds: %w", err)
	}
	seed, err := kp.Seed()
	if err != nil {
		return nil, fmt.Errorf("NATS creds: %w", err)
	}
	return nats.UserJWTAndSeed(userJWT, string(seed)), nil
}

// FromConfig returns the mirror c configures, nil without a URL: then nothing of NATS is
// loaded. retention is the stream's MaxAge.
func FromConfig(ctx context.Context, c Config, secret func(ctx context.Context, id string) (string, error), retention time.Duration, subject func(stream string) string, encode func(stream string, e streamlog.Entry) ([]byte, error), logger *slog.Logger) (*Mirror, error) {
	if c.URL == "" {
		return nil, nil
	}
	auth, err := Auth(ctx, c, secret)
	if err != nil {
		return nil, err
	}
	replicas := 1
	if v := c.Replicas; v != "" {
		if replicas, err = strconv.Atoi(v); err != nil || replicas < 1 || replicas > 5 {
			return nil, fmt.Errorf("NATS_REPLICAS is %q, want 1 to 5", v)
		}
	}
	return New(Options{URL: c.URL, Auth: auth, Stream: c.Stream, Retention: retention, Replicas: replicas, Subject: subject, Encode: encode, Logger: logger}), nil
}
