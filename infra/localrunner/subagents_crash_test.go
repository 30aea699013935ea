package localrunner_test

import (
	"context"
	"encoding/json"
	asyncworker "github.com/agentharness/harness/functions/async-worker/wire"
	"github.com/agentharness/harness/functions/asyncwire"
	sweeperwire "github.com/agentharness/harness/functions/sweeper/wire"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/localrunner"
	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/edge/sweeper"
	"github.com/agentharness/harness/shared/lambda/agentdeps"
	"github.com/agentharness/harness/shared/lambda/lambdadeps"
	"github.com/agentharness/harness/shared/state/attachments"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/turn/subagent"
	"github.com/agentharness/harness/shared/wire/reqbody"
	"github.com/agentharness/harness/shared/wire/workqueue"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// settleFailed is what a child's invocation logs when its settle of its caller's call, or the
// group check after it, failed.
const settleFailed = "settling the caller of a subagent; the sweeper settles it at its deadline"

// Three non-blocking calls of one step fan in while each child's completion path crashes once,
// at a different point: one child's settle of its call never lands; another settles, then dies
// before its claim of the caller's re-drive lands, which leaves the claim to the third; the
// third settles and claims, then dies before the continuation is sent. The sweeper settles the
// lost call from its child's recorded answer and, once the claim is old enough, sends the
// continuation; the caller is re-driven exactly once, with all three answers.
//
// Only a group check that finds every call settled tries to claim, and a sweep settles every
// call due, so the test orders the writes: every child's settle is held until all three turns
// have ended; the call left unsettled is the one with the earliest deadline, which a sweep at
// that deadline recovers alone; then the other two settle, and both of their checks read the
// group only once both have landed, so both find it complete and try to claim.
func TestNonBlockingSubagentsFanInThroughCrashes(t *testing.T) {
	ctx := context.Background()
	stack := testenv.Stack(t)
	c := newCrashes(stack.AsyncResultsTable)
	var sweeperDeps lambdadeps.Deps
	e := newCrashEnv(t, stack, map[string]localrunner.Constructor{
		"AsyncWorkerFunction": func(d agentdeps.Deps) (localrunner.Handlers, error) {
			w, err := asyncworker.Worker(c.wrap(d))
			if err != nil {
				return localrunner.Handlers{}, err
			}
			return localrunner.Handlers{SQS: w.Handle}, nil
		},
		"SweeperFunction": func(d agentdeps.Deps) (localrunner.Handlers, error) {
			sweeperDeps = d.Deps
			s, err := sweeperwire.Sweeper(d.Deps)
			if err != nil {
				return localrunner.Handlers{}, err
			}
			return localrunner.Handlers{Schedule: s.Run}, nil
		},
	})
	// Before the runner stops: a request still held is let go, failed.
	t.Cleanup(c.end)

	// The scheduled sweeper runs on the wall clock, to which nothing here falls due. This one is
	// wired as sweeper.New wires it, from the sweeper's own environment, on a clock the test
	// moves to each deadline.
	async, redriver, err := asyncwire.AsyncTools(sweeperDeps)
	if err != nil {
		t.Fatal(err)
	}
	redriver.Late = sweeper.LateSubagents(async, store.New(sweeperDeps.DB, store.Tables{
		Events: sweeperDeps.Config.Tables.Events, Conversations: sweeperDeps.Config.Tables.Conversations,
	}), attachments.InBucket(sweeperDeps.S3, sweeperDeps.Config.Async.ResultsBucket))
	var clock time.Time
	redriver.Now = func() time.Time { return clock }
	sweep := func(at time.Time) asynctools.SweepStats {
		t.Helper()
		clock = at
		stats, err := redriver.Sweep(ctx, 100)
		if err != nil {
			t.Fatalf("sweep at %s: %v", at.Format(time.RFC3339Nano), err)
		}
		return stats
	}
	load := func(group string) asynctools.GroupState {
		t.Helper()
		st, err := async.Load(ctx, group)
		if err != nil || st.Group == nil || len(st.Rows) != 3 {
			t.Fatalf("loading group %s = %+v, %v; want it sealed with three calls", group, st, err)
		}
		return st
	}

	finder := e.agent(t, factFinder)
	caller := e.agent(t, planner(`{"agents": [{"name": "finder", "agentId": "`+finder+`", "blocking": false}]}`,
		ask("finder", "topic one"), ask("finder", "topic two"), ask("finder", "topic three")))
	ev := e.async(t, `{"agentId":"`+caller+`","message":"plan it"}`)
	waiting, _ := e.waitStatus(t, ev.EventID, store.EventWaitingAsync)
	if len(waiting.PendingAsyncTools) != 3 {
		t.Fatalf("the caller waits for %+v, want three calls", waiting.PendingAsyncTools)
	}
	group := groupOf(t, waiting.PendingAsyncTools[0].ResultID)

	// Each child's turn ends and is recorded before its settle, which waits here.
	held := map[string]heldSettle{}
	for timeout := time.After(asyncWait); len(held) < 3; {
		select {
		case h := <-c.settles:
			held[h.resultID] = h
		case <-timeout:
			t.Fatalf("%d of three children's settles arrived within %s", len(held), asyncWait)
		}
	}
	for id := range held {
		if groupOf(t, id) != group {
			t.Fatalf("a settle of %s, want only the caller's group %s", id, group)
		}
		if s := e.status(t, subagent.EventID(id)); s.Status != store.EventCompleted {
			t.Fatalf("the child of %s is %s as it settles, want its turn completed: %s", id, s.Status, s.raw)
		}
	}
	rows := load(group).Rows
	slices.SortFunc(rows, func(a, b asynctools.Result) int { return a.Deadline.Compare(b.Deadline) })
	if !rows[0].Deadline.Before(rows[1].Deadline) {
		t.Fatalf("the calls' deadlines %s and %s leave no sweep that finds the first alone", rows[0].Deadline, rows[1].Deadline)
	}
	lost, late := rows[0].ID, []string{rows[1].ID, rows[2].ID}

	// Crash 1: the first child's settle never lands, so only the sweeper can settle its call.
	held[lost].fail <- true
	e.waitLog(t, settleFailed, lost)
	if row, _ := load(group).Row(lost); row.Status != asynctools.Running {
		t.Fatalf("the lost settle's call is %s, want still running", row.Status)
	}
	if stats := sweep(rows[0].Deadline); stats != (asynctools.SweepStats{Recovered: 1}) {
		t.Fatalf("the sweep at the first call's deadline = %+v, want that call recovered, nothing else", stats)
	}
	if row, _ := load(group).Row(lost); row.Status != asynctools.Completed || !strings.Contains(string(row.Response), "The answer is 42.") {
		t.Fatalf("the recovered call is %s with %s, want its child's answer", row.Status, row.Response)
	}

	// Crashes 2 and 3: the other two settle; the first claim of the re-drive dies before it
	// lands, so the other check claims it, and dies before sending the continuation.
	c.arm(group, workqueue.ContinueMessage(e.accountID, group), len(late))
	for _, id := range late {
		held[id].fail <- false
	}
	died := map[string]string{}
	for _, id := range late {
		err := e.waitLog(t, settleFailed, id)
		switch {
		case strings.Contains(err, "claiming dispatch group"):
			died[id] = "before its claim"
		case strings.Contains(err, "sending the continuation"):
			died[id] = "before its send"
		default:
			t.Fatalf("the check after %s failed with %q, want its claim or its send crashed", id, err)
		}
	}
	if died[late[0]] == died[late[1]] {
		t.Fatalf("the two late checks died %v, want one before its claim and one before its send", died)
	}
	if claims, sends := c.fired(); claims != 1 || sends != 1 {
		t.Fatalf("crashed %d claims and %d continuation sends, want one each", claims, sends)
	}
	st := load(group)
	if !st.Settled() || st.Group.ClaimedAt.IsZero() || !st.Group.ConsumedAt.IsZero() {
		t.Fatalf("group %+v, want settled and claimed, its continuation never run", st.Group)
	}
	if n := e.logs.count("continuation started", map[string]string{"conversationId": ev.ConversationID}); n != 0 {
		t.Fatalf("the caller was continued %d times before the sweeper sent its continuation", n)
	}
	if stats := sweep(st.Group.ClaimedAt.Add(asynctools.DefaultResendAfter - time.Second)); stats != (asynctools.SweepStats{}) {
		t.Fatalf("a sweep before the claim's resend time = %+v, want nothing", stats)
	}
	if stats := sweep(st.Group.ClaimedAt.Add(asynctools.DefaultResendAfter)); stats != (asynctools.SweepStats{Resent: 1}) {
		t.Fatalf("the sweep at the claim's resend time = %+v, want the continuation sent, nothing else", stats)
	}

	final, _ := e.waitStatus(t, ev.EventID, store.EventCompleted)
	if final.Text == nil || strings.Count(*final.Text, "The answer is 42.") != 3 {
		t.Fatalf("the caller's answer %v does not carry three answers: %s", final.Text, final.raw)
	}
	if threads := threadIDs(t, final.Messages); len(threads) != 3 {
		t.Fatalf("threads %v, want three: %s", threads, final.raw)
	}
	for deadline := time.Now().Add(asyncWait); load(group).Group.ConsumedAt.IsZero(); time.Sleep(pollEvery) {
		if time.Now().After(deadline) {
			t.Fatalf("group %s is not consumed %s after its continuation ran", group, asyncWait)
		}
	}
	if stats := sweep(clock.Add(2 * asynctools.DefaultResendAfter)); stats != (asynctools.SweepStats{}) {
		t.Errorf("a sweep after the continuation = %+v, want nothing left to do", stats)
	}
	if n := e.logs.count("continuation started", map[string]string{"conversationId": ev.ConversationID}); n != 1 {
		t.Errorf("the caller was continued %d times, want once", n)
	}
	if n := e.logs.count("a subagent ended after its caller's call was settled otherwise", nil); n != 0 {
		t.Errorf("%d children found their call settled otherwise, want none", n)
	}
}

// newCrashEnv is newAsyncEnv on stack with functions in place of the template's builtins, and a
// poller per child: a child's invocation may wait for the test with its batch unfinished.
func newCrashEnv(t *testing.T, stack *testenv.Resources, functions map[string]localrunner.Constructor) *asyncEnv {
	t.Helper()
	return newAsyncEnvOn(t, stack, func(o *localrunner.Options) { o.Functions, o.Pollers = functions, 3 })
}

// waitLog waits for a record msg logs about resultID and returns its error.
func (e *asyncEnv) waitLog(t *testing.T, msg, resultID string) string {
	t.Helper()
	for deadline := time.Now().Add(asyncWait); ; time.Sleep(pollEvery) {
		e.logs.mu.Lock()
		for _, rec := range e.logs.records {
			if rec.msg == msg && rec.attrs["resultId"] == resultID {
				e.logs.mu.Unlock()
				return rec.attrs["err"]
			}
		}
		e.logs.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no %q about %s within %s", msg, resultID, asyncWait)
		}
	}
}

// crashes sits on the HTTP path between async-worker's AWS clients and the emulators. Every
// settle of an async row waits there for the test to let it through or fail it. Once armed for
// a group, it holds the group checks' reads of it until the settles they wait for have landed,
// and fails the group's first claim and its first continuation send. A failed request never
// reaches the emulator and its caller gets an error the SDK does not retry: the writes a
// crashed invocation would not have made.
type crashes struct {
	results string          // the AsyncToolResults table
	settles chan heldSettle // each settle as it is held
	done    chan struct{}   // closed when the test ends

	mu           sync.Mutex
	group        string        // armed for this group
	continuation string        // the group's continuation message
	unlanded     int           // settles still to land before its checks may read it
	readable     chan struct{} // closed once they have
	claims       int
	sends        int
}

// heldSettle is a settle of a row waiting for the test: true on fail crashes it.
type heldSettle struct {
	resultID string
	fail     chan bool
}

func newCrashes(resultsTable string) *crashes {
	return &crashes{results: resultsTable, settles: make(chan heldSettle, 8), done: make(chan struct{})}
}

// end lets go of every request still held, failing it.
func (c *crashes) end() { close(c.done) }

// arm makes group's checks wait for n more settles of it to land, and fails its first claim
// and its first continuation send.
func (c *crashes) arm(group, continuation string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.group, c.continuation, c.unlanded, c.readable = group, continuation, n, make(chan struct{})
}

// fired counts the claims and continuation sends crashed.
func (c *crashes) fired() (claims, sends int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.claims, c.sends
}

// wrap gives a function copies of d's DynamoDB and SQS clients whose requests pass through c.
func (c *crashes) wrap(d agentdeps.Deps) agentdeps.Deps {
	d.DB = dynamodb.New(d.DB.Options(), func(o *dynamodb.Options) { o.HTTPClient = intercept{next: o.HTTPClient, see: c.dynamoDB} })
	d.SQS = sqs.New(d.SQS.Options(), func(o *sqs.Options) { o.HTTPClient = intercept{next: o.HTTPClient, see: c.sqs} })
	return d
}

func (c *crashes) dynamoDB(req *http.Request, body []byte, send func() (*http.Response, error)) (*http.Response, error) {
	var in struct {
		TableName                 string
		Key                       map[string]struct{ S string }
		UpdateExpression          string
		ExpressionAttributeValues map[string]struct{ S string }
		ConsistentRead            bool
	}
	if json.Unmarshal(body, &in) != nil || in.TableName != c.results {
		return send()
	}
	op := req.Header.Get("X-Amz-Target")
	switch {
	case op == "DynamoDB_20120810.UpdateItem" && strings.Contains(in.UpdateExpression, "outcomeHash"):
		return c.settle(req, in.Key["pk"].S, in.Key["pk"].S+"."+in.Key["sk"].S, send)
	case op == "DynamoDB_20120810.UpdateItem" && strings.HasPrefix(in.UpdateExpression, "SET claimedAt"):
		c.mu.Lock()
		crash := in.Key["pk"].S == c.group && c.claims == 0
		if crash {
			c.claims++
		}
		c.mu.Unlock()
		if crash {
			return crashed(req), nil
		}
	case op == "DynamoDB_20120810.Query" && in.ConsistentRead:
		c.mu.Lock()
		wait := c.readable
		if in.ExpressionAttributeValues[":pk"].S != c.group {
			wait = nil
		}
		c.mu.Unlock()
		if wait != nil {
			select {
			case <-wait:
			case <-c.done:
				return crashed(req), nil
			}
		}
	}
	return send()
}

// settle holds a settle of row resultID, of group, until the test rules on it.
func (c *crashes) settle(req *http.Request, group, resultID string, send func() (*http.Response, error)) (*http.Response, error) {
	h := heldSettle{resultID: resultID, fail: make(chan bool, 1)}
	c.settles <- h
	select {
	case fail := <-h.fail:
		if fail {
			return crashed(req), nil
		}
	case <-c.done:
		return crashed(req), nil
	}
	res, err := send()
	if err != nil || res.StatusCode != http.StatusOK {
		return res, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if group == c.group && c.unlanded > 0 {
		if c.unlanded--; c.unlanded == 0 {
			close(c.readable)
		}
	}
	return res, nil
}

func (c *crashes) sqs(req *http.Request, body []byte, send func() (*http.Response, error)) (*http.Response, error) {
	var in struct{ MessageBody string }
	if req.Header.Get("X-Amz-Target") != "AmazonSQS.SendMessage" || json.Unmarshal(body, &in) != nil {
		return send()
	}
	c.mu.Lock()
	crash := c.continuation != "" && in.MessageBody == c.continuation && c.sends == 0
	if crash {
		c.sends++
	}
	c.mu.Unlock()
	if crash {
		return crashed(req), nil
	}
	return send()
}

// crashed answers a request that never left: a client error, which the SDK does not retry.
func crashed(req *http.Request) *http.Response {
	const body = `{"__type":"InjectedCrash","message":"the invocation died before this request"}`
	return &http.Response{
		Status: "400 Bad Request", StatusCode: http.StatusBadRequest, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// intercept is an AWS SDK HTTP client that shows each request, with its body, to see, which
// sends it on through send or answers it itself.
type intercept struct {
	next aws.HTTPClient
	see  func(req *http.Request, body []byte, send func() (*http.Response, error)) (*http.Response, error)
}

func (i intercept) Do(req *http.Request) (*http.Response, error) {
	if err := reqbody.Buffer(req); err != nil {
		return nil, err
	}
	var body []byte
	if req.GetBody != nil {
		r, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		if body, err = io.ReadAll(r); err != nil {
			return nil, err
		}
	}
	return i.see(req, body, func() (*http.Response, error) { return i.next.Do(req) })
}
