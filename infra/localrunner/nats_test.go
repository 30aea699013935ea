package localrunner_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentharness/harness/infra/localrunner"
	"github.com/agentharness/harness/infra/natsserver"
	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/edge/natslog"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/state/streamlog"
	turnpkg "github.com/agentharness/harness/shared/turn"
	"github.com/agentharness/harness/shared/wire/natsturns"
)

// natsEnv is an asyncEnv whose turns are published to a real NATS server (or cluster) too.
type natsEnv struct {
	*asyncEnv
	nats *natsserver.Server
}

func newNATSEnv(t *testing.T, nodes int) *natsEnv {
	t.Helper()
	ns, err := natsserver.Start(natsserver.Options{Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	vars := map[string]string{
		"NATS_URL": strings.Join(ns.URLs, ","), "NATS_CREDS": ns.HarnessCreds, "NATS_REPLICAS": strconv.Itoa(nodes),
		"NATS_ACCOUNT_SIGNING_SEED": ns.ClientSigningSeed, "NATS_ACCOUNT": ns.ClientAccount,
	}
	e := newAsyncEnvOn(t, testenv.Stack(t), func(o *localrunner.Options) {
		base := o.Getenv
		o.Getenv = func(k string) string {
			if v, ok := vars[k]; ok {
				return v
			}
			return base(k)
		}
	})
	return &natsEnv{asyncEnv: e, nats: ns}
}

// natsCredentials is the answer of POST /accounts/me/nats-credentials.
type natsCredentials struct {
	JWT, Seed, Stream, Subjects, InboxPrefix, APIPrefix string
	Consumers, Servers                                  []string
}

func (e *natsEnv) credentials(t *testing.T, secret string) natsCredentials {
	t.Helper()
	res := call(t, e.srv, http.MethodPost, "/accounts/me/nats-credentials", secret, "")
	var c natsCredentials
	if res.status/100 != 2 || json.Unmarshal(res.body, &c) != nil || c.JWT == "" || c.Seed == "" {
		t.Fatalf("POST /accounts/me/nats-credentials = %d %s, want credentials with a generated seed", res.status, res.body)
	}
	return c
}

// start starts a turn with POST /async and returns it with the subject its answer names.
func (e *natsEnv) start(t *testing.T, body string) (started, string) {
	t.Helper()
	res := call(t, e.srv, http.MethodPost, "/async", e.secret, body)
	var s started
	var subject struct {
		NATSSubject string `json:"natsSubject"`
	}
	if res.status != http.StatusAccepted || json.Unmarshal(res.body, &s) != nil || json.Unmarshal(res.body, &subject) != nil {
		t.Fatalf("POST /async = %d %s, want 202", res.status, res.body)
	}
	if want := natsturns.Subject(e.accountID, s.ConversationID, s.EventID); subject.NATSSubject != want {
		t.Fatalf("POST /async answered natsSubject %q, want %q", subject.NATSSubject, want)
	}
	return s, subject.NATSSubject
}

// natsLine is a line of infra/node/nats-follow.mjs's output.
type natsLine struct {
	StreamSeq uint64          `json:"streamSeq"`
	Seq       int64           `json:"seq"`
	Data      json.RawMessage `json:"data"`
	Stopped   *string         `json:"stopped"`
	Denied    map[string]*string
}

// jsReader runs the official NATS JavaScript client (infra/node/nats-follow.mjs) with creds and
// the rest of its config; wait returns what it printed.
func jsReader(t *testing.T, creds natsCredentials, servers []string, cfg map[string]any) (wait func() []natsLine) {
	t.Helper()
	cfg["servers"], cfg["jwt"], cfg["seed"], cfg["inboxPrefix"], cfg["apiPrefix"], cfg["stream"] = servers, creds.JWT, creds.Seed, creds.InboxPrefix, creds.APIPrefix, creds.Stream
	cfg["subjects"], cfg["consumers"] = creds.Subjects, creds.Consumers
	arg, _ := json.Marshal(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := exec.CommandContext(ctx, testenv.Node(t), filepath.Join(testenv.Root(t), "infra", "node", "nats-follow.mjs"), string(arg))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	return func() []natsLine {
		t.Helper()
		defer cancel()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("the NATS JavaScript client failed: %v\nstderr:\n%s\nstdout:\n%s", err, stderr.String(), stdout.String())
		}
		var out []natsLine
		sc := bufio.NewScanner(&stdout)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			var l natsLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatalf("client output %q: %v", sc.Text(), err)
			}
			out = append(out, l)
		}
		return out
	}
}

// messages are the lines that are messages, the last line's stop reason checked.
func messages(t *testing.T, lines []natsLine, stopped string) []natsLine {
	t.Helper()
	if len(lines) == 0 || lines[len(lines)-1].Stopped == nil || *lines[len(lines)-1].Stopped != stopped {
		t.Fatalf("the client's output does not end stopped %q: %+v", stopped, lines)
	}
	return lines[:len(lines)-1]
}

// natsMessage is a message's data.
type natsMessage struct {
	Seq     int64            `json:"seq"`
	Chunks  []map[string]any `json:"chunks"`
	Outcome *natslog.Outcome `json:"outcome"`
}

func decode(t *testing.T, l natsLine) natsMessage {
	t.Helper()
	var m natsMessage
	if err := json.Unmarshal(l.Data, &m); err != nil || m.Seq != l.Seq {
		t.Fatalf("message %s (Harness-Seq %d) is not a turn message of that seq: %v", l.Data, l.Seq, err)
	}
	return m
}

// wantStoredStream fails unless lines are the turn's stream log as stored, entry by entry:
// numbered 0, 1, … without a gap or a repeat, each its stored entry's encoding.
func (e *natsEnv) wantStoredStream(t *testing.T, s started, lines []natsLine) {
	t.Helper()
	key := turnpkg.StreamOf(e.accountID, s.ConversationID, s.EventID)
	stored, _, err := streamlog.New(e.stack.DB, e.stack.Name("StreamsTable"), streamlog.Options{}).Read(context.Background(), key, -1)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != len(stored) {
		t.Errorf("read %d messages from NATS, the stream log holds %d entries", len(lines), len(stored))
	}
	for i, l := range lines {
		if l.Seq != int64(i) {
			t.Fatalf("message %d has Harness-Seq %d, want %d: every entry once, in order (seqs %v)", i, l.Seq, i, seqsOf(lines))
		}
		if i < len(stored) {
			want, err := natslog.Encode(key, stored[i])
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(want, l.Data) {
				t.Errorf("message %d = %s, want the stored entry's encoding %s", i, l.Data, want)
			}
		}
	}
}

func seqsOf(lines []natsLine) []int64 {
	out := make([]int64, len(lines))
	for i, l := range lines {
		out[i] = l.Seq
	}
	return out
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ab, _ := json.Marshal(x)
	bb, _ := json.Marshal(y)
	return bytes.Equal(ab, bb)
}

// tcpServers are the credentials' servers a Node client reaches (nats://, not ws://).
func tcpServers(c natsCredentials) []string {
	var out []string
	for _, s := range c.Servers {
		for _, u := range strings.Split(s, ",") {
			if strings.HasPrefix(u, "nats://") {
				out = append(out, u)
			}
		}
	}
	return out
}

// The official NATS JavaScript client follows a turn from its start to its end across an
// approval and an outside worker's job: it reads, on the turn's subject, every entry of the
// turn's stream log once and in order, each the UI message chunks an SSE client gets, with an
// outcome that is not final at each wait and a final one at the end.
func TestNATSClientFollowsATurnThroughAnApprovalAndAnOutsideJob(t *testing.T) {
	e := newNATSEnv(t, 1)
	agentID := e.agent(t, `{"name":"nats-follow","model":{"provider":"scripted","script":[
		{"text":"Asking first. ","toolCalls":[{"name":"test_async","input":{"echo":"approved job"}}]},
		{"text":"Handing a job out. ","toolCalls":[{"name":"test_external_async","input":{"echo":"alpha"}}]},
		{"text":"The worker answered {{toolResults}}"}]},
		"tools":{"test_async":{"needsApproval":true},"test_external_async":{"async":true,"execution":"external-dispatch"}}}`)
	creds := e.credentials(t, e.secret)
	s, subject := e.start(t, `{"agentId":"`+agentID+`","message":"go"}`)
	wait := jsReader(t, creds, tcpServers(creds), map[string]any{"subject": subject, "untilFinal": true})

	held, _ := e.waitStatus(t, s.EventID, store.EventWaiting)
	e.async(t, `{"agentId":"`+agentID+`","id":"`+s.ConversationID+`","eventId":"`+s.EventID+`","approvals":[{"approvalId":"`+held.PendingApprovals[0].ApprovalID+`","approved":true}]}`)
	jobs := e.jobs(t, 1)
	if res := e.complete(t, jobs[0]); res.status/100 != 2 {
		t.Fatalf("completing the job = %d %s", res.status, res.body)
	}
	lines := messages(t, wait(), "final")
	e.wantStoredStream(t, s, lines)

	var outcomes []string
	var types []string
	var text strings.Builder
	for _, l := range lines {
		m := decode(t, l)
		if m.Outcome != nil {
			outcomes = append(outcomes, m.Outcome.Status+"/"+strconv.FormatBool(m.Outcome.Final))
		}
		for _, c := range m.Chunks {
			types = append(types, c["type"].(string))
			if c["type"] == "text-delta" {
				text.WriteString(c["delta"].(string))
			}
		}
	}
	if want := []string{store.EventWaiting + "/false", store.EventWaitingAsync + "/false", store.EventCompleted + "/true"}; !slices.Equal(outcomes, want) {
		t.Errorf("outcomes read %v, want %v", outcomes, want)
	}
	if !containsAll(types, "tool-approval-request", "tool-output-available", "data-async-result", "finish") {
		t.Errorf("chunks read %v, want the approval request, the outputs, the outside job's result and a finish", types)
	}
	if got := text.String(); !strings.HasPrefix(got, "Asking first. Handing a job out. The worker answered") || !strings.Contains(got, "ALPHA") {
		t.Errorf("text read %q, want every step's text and the worker's answer", got)
	}
}

// slowAgent streams three steps, each after a pause, so a reader can drop in the middle.
const slowAgent = `{"name":"slow","model":{"provider":"scripted","script":[
	{"text":"One. ","toolCalls":[{"name":"current_time","input":{}}],"delayMs":300},
	{"text":"Two. ","toolCalls":[{"name":"current_time","input":{}}],"delayMs":300},
	{"text":"Three. ","toolCalls":[{"name":"current_time","input":{}}],"delayMs":300},
	{"text":"Done.","delayMs":300}]},
	"tools":{"current_time":{"enabled":true}}}`

// A client that drops its connection in the middle of a turn and resumes from the stream
// sequence after the last message it read misses nothing and reads nothing twice; a subscriber
// that comes after the turn ended replays it whole, the same.
func TestNATSReaderResumesAfterADropAndALateOneReplays(t *testing.T) {
	e := newNATSEnv(t, 1)
	agentID := e.agent(t, slowAgent)
	creds := e.credentials(t, e.secret)
	servers := tcpServers(creds)
	s, subject := e.start(t, `{"agentId":"`+agentID+`","message":"count"}`)

	first := messages(t, jsReader(t, creds, servers, map[string]any{"subject": subject, "maxMessages": 4})(), "maxMessages")
	if st := e.status(t, s.EventID); st.Status != store.EventProcessing {
		t.Fatalf("the reader dropped after the turn ended (%s): the test needs it to drop mid-turn", st.Status)
	}
	rest := messages(t, jsReader(t, creds, servers, map[string]any{"subject": subject, "untilFinal": true, "startSeq": first[len(first)-1].StreamSeq + 1})(), "final")
	resumed := append(first, rest...)
	e.wantStoredStream(t, s, resumed)

	late := messages(t, jsReader(t, creds, servers, map[string]any{"subject": subject, "untilFinal": true})(), "final")
	e.wantStoredStream(t, s, late)
	for i := range late {
		if late[i].StreamSeq != resumed[i].StreamSeq {
			t.Fatalf("the late subscriber read stream sequence %d at %d, the resumed reader %d", late[i].StreamSeq, i, resumed[i].StreamSeq)
		}
	}
}

// Credentials the harness gives one account's client reach none of another account's turns:
// an ordered consumer on them, a subscription to them and one to every inbox are refused by
// the server, and so is every call on a durable consumer the first account's client made
// (re-creating it on the other account's subjects, pulling from it, reading its info, deleting
// it), which that client then finds as it left it and deletes. The first account's own client
// reads them.
func TestNATSCredentialsReachOnlyTheirAccount(t *testing.T) {
	e := newNATSEnv(t, 1)
	_, otherSecret := createAccount(t, e.srv, "other-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	agentID := e.agent(t, slowAgent)
	s, subject := e.start(t, `{"agentId":"`+agentID+`","message":"count"}`)
	e.waitStatus(t, s.EventID, store.EventCompleted)

	mine := e.credentials(t, e.secret)
	lines := messages(t, jsReader(t, mine, tcpServers(mine), map[string]any{"subject": subject, "untilFinal": true})(), "final")
	e.wantStoredStream(t, s, lines)

	js := natsClient(t, strings.Join(tcpServers(mine), ","), mine.JWT, mine.Seed, mine.InboxPrefix, mine.APIPrefix)
	ctx, cancel := context.WithTimeout(context.Background(), asyncWait)
	defer cancel()
	durable := mine.Consumers[len(mine.Consumers)-1]
	if _, err := js.CreateOrUpdateConsumer(ctx, mine.Stream, jetstream.ConsumerConfig{Durable: durable, FilterSubject: subject, AckPolicy: jetstream.AckNonePolicy}); err != nil {
		t.Fatalf("making a durable consumer with the account's credentials: %v", err)
	}

	other := e.credentials(t, otherSecret)
	got := jsReader(t, other, tcpServers(other), map[string]any{"deny": subject, "denyConsumer": durable})()
	if len(got) != 1 || got[0].Denied == nil {
		t.Fatalf("the other account's client printed %+v, want its refusals", got)
	}
	for _, k := range []string{"consumer", "subscribe", "inbox", "create", "next", "info", "delete"} {
		if msg := got[0].Denied[k]; msg == nil {
			t.Errorf("the other account's %s on %s was not refused, want a permissions violation", k, subject)
		} else if !strings.Contains(strings.ToLower(*msg), "permission") {
			t.Errorf("the other account's %s on %s: %s, want a permissions violation", k, subject, *msg)
		}
	}
	if _, read := got[0].Denied["consumerRead"]; read {
		t.Errorf("the other account's client read a message of %s", subject)
	}
	c, err := js.Consumer(ctx, mine.Stream, durable)
	if err != nil {
		t.Fatalf("the account's durable consumer after the other's calls: %v", err)
	}
	if info := c.CachedInfo(); info.Config.FilterSubject != subject || info.Delivered.Stream != 0 {
		t.Errorf("the account's durable consumer filters %s and delivered up to %d, want %s and nothing", info.Config.FilterSubject, info.Delivered.Stream, subject)
	}
	if err := js.DeleteConsumer(ctx, mine.Stream, durable); err != nil {
		t.Errorf("deleting the account's durable consumer: %v", err)
	}
}

// A three-node JetStream cluster keeps the turn's stream on every node; when the stream's
// leader stops in the middle of a turn, the harness goes on publishing through the others and a
// reader connected to the cluster reads every entry once, in order.
func TestNATSClusterLosesANodeMidTurn(t *testing.T) {
	e := newNATSEnv(t, 3)
	agentID := e.agent(t, slowAgent)
	creds := e.credentials(t, e.secret)
	s, subject := e.start(t, `{"agentId":"`+agentID+`","message":"count"}`)

	// The reader connects to the whole cluster, as a client of a cluster does.
	wait := jsReader(t, creds, e.nats.URLs, map[string]any{"subject": subject, "untilFinal": true})
	leader := e.streamLeader(t, creds.Stream)
	until(t, "the turn's first entries on NATS", func() bool { return e.storedEntries(t, s) >= 3 })
	if st := e.status(t, s.EventID); st.Status != store.EventProcessing {
		t.Fatalf("the turn ended (%s) before the node stopped: the test needs it to stop mid-turn", st.Status)
	}
	e.nats.StopNode(leader)
	lines := messages(t, wait(), "final")
	e.wantStoredStream(t, s, lines)
	if st := e.status(t, s.EventID); st.Status != store.EventCompleted {
		t.Errorf("the turn ended %s, want completed", st.Status)
	}
}

// streamLeader is the index of the node that leads the stream.
func (e *natsEnv) streamLeader(t *testing.T, stream string) int {
	t.Helper()
	js := jetStream(t, e.nats)
	ctx, cancel := context.WithTimeout(context.Background(), asyncWait)
	defer cancel()
	for {
		st, err := js.Stream(ctx, stream)
		if err == nil {
			info, err := st.Info(ctx)
			if err == nil && info.Cluster != nil && info.Cluster.Leader != "" {
				if i := slices.Index(e.nats.Names, info.Cluster.Leader); i >= 0 {
					return i
				}
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("no leader of stream %s: %v", stream, err)
		}
		time.Sleep(pollEvery)
	}
}

// jetStream is ns's JetStream as the harness's publisher sees it, until the test ends.
func jetStream(t *testing.T, ns *natsserver.Server) jetstream.JetStream {
	t.Helper()
	nc, err := ns.Connect()
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

// storedEntries is how many entries the turn's stream log holds.
func (e *natsEnv) storedEntries(t *testing.T, s started) int {
	t.Helper()
	entries, _, err := streamlog.New(e.stack.DB, e.stack.Name("StreamsTable"), streamlog.Options{}).Read(context.Background(), turnpkg.StreamOf(e.accountID, s.ConversationID, s.EventID), -1)
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}
