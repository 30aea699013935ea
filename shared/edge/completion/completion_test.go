package completion_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	asynctoolcomplete "github.com/agentharness/harness/functions/async-tool-complete/wire"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/edge/completion"
	"github.com/agentharness/harness/shared/lambda/lambdadeps"
	"github.com/agentharness/harness/shared/state/blobstore"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// completeFixture serves async-tool-complete, built by completion.New from the environment
// the template gives it, over real HTTP, on a stack of its own (DynamoDB Local, SQS and S3
// emulators), with one account that owns the calls.
type completeFixture struct {
	srv      *httptest.Server
	async    *asynctools.Store
	accounts *store.Store
	sqs      *sqs.Client
	queue    string
	acc      store.Account
	secret   string
}

func newCompleteFixture(t *testing.T) *completeFixture {
	t.Helper()
	res := testenv.Stack(t)
	env := map[string]string{
		"ACCOUNTS_TABLE":       res.Tables.Accounts,
		"ASYNC_RESULTS_TABLE":  res.AsyncResultsTable,
		"ASYNC_RESULTS_BUCKET": res.Bucket,
		"ASYNC_WORK_QUEUE_URL": res.Queues["AsyncWorkQueue"],
	}
	for k, v := range env {
		if v == "" {
			t.Fatalf("the stack has no value for %s", k)
		}
	}
	h, err := asynctoolcomplete.Handler(lambdadeps.Deps{
		DB: res.DB, SQS: res.SQS, S3: res.S3,
		Config: lambdadeps.ConfigFrom(func(k string) string { return env[k] }),
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	accounts := store.New(res.DB, res.Tables)
	acc, secret, err := accounts.CreateAccount(context.Background(), "worker-owner", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return &completeFixture{
		srv: srv, accounts: accounts, sqs: res.SQS, queue: env["ASYNC_WORK_QUEUE_URL"], acc: acc, secret: secret,
		async: asynctools.NewStore(res.DB, res.AsyncResultsTable, blobstore.NewS3(res.S3, res.Bucket)),
	}
}

// asyncCall is a registered call and its completion token.
type asyncCall struct {
	id, token string
}

// register writes a running row of the fixture's account in group g, as a pass does before
// dispatching it; deadline is from now.
func (f *completeFixture) register(t *testing.T, g, toolCallID, mode string, deadline time.Duration) asyncCall {
	t.Helper()
	now := time.Now()
	token, hash := asynctools.NewToken()
	r := asynctools.Result{
		ID: asynctools.ResultID(g, toolCallID), AccountID: f.acc.ID, AgentID: "researcher", ConversationID: "conv-1",
		TurnID: "evt_1", ToolCallID: toolCallID, ToolName: "research", Mode: mode, TokenHash: hash,
		Deadline: now.Add(deadline), ParentUntil: now.Add(15 * time.Minute),
		Delivery: asynctools.Delivery{EventID: "evt_1"}, CreatedAt: now,
	}
	if mode != asynctools.ExternalDispatch {
		token, r.TokenHash = "", ""
	}
	if _, created, err := f.async.Register(context.Background(), r); err != nil || !created {
		t.Fatalf("Register = %v, %v", created, err)
	}
	return asyncCall{id: r.ID, token: token}
}

// seal seals group g with the calls, as the parent does when its pass ends.
func (f *completeFixture) seal(t *testing.T, g string, calls ...asyncCall) {
	t.Helper()
	ids := make([]string, len(calls))
	for i, c := range calls {
		ids[i] = c.id
	}
	now := time.Now()
	_, sealed, err := f.async.Seal(context.Background(), asynctools.Group{
		ID: g, AccountID: f.acc.ID, AgentID: "researcher", ConversationID: "conv-1", Expected: ids,
		Delivery: asynctools.Delivery{EventID: "evt_1"}, SealedBy: "parent",
	}, now, now.Add(5*time.Minute))
	if err != nil || !sealed {
		t.Fatalf("Seal = %v, %v", sealed, err)
	}
}

func newAsyncGroup() string { return asynctools.NewGroupID(store.NewID(""), 1) }

// complete POSTs body to the completion route of resultID with Authorization: Bearer bearer
// (none when bearer is empty), and returns the status and the body.
func (f *completeFixture) complete(t *testing.T, resultID, bearer, body string) (int, []byte) {
	t.Helper()
	return f.completeRaw(t, asynctools.CompletePath(resultID), bearer, strings.NewReader(body))
}

func (f *completeFixture) completeRaw(t *testing.T, path, bearer string, body io.Reader) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type = %q, body %s", ct, b)
	}
	return res.StatusCode, b
}

// mustComplete fails unless the completion is answered with want, and returns the JSON body.
func (f *completeFixture) mustComplete(t *testing.T, want int, resultID, bearer, body string) map[string]any {
	t.Helper()
	status, b := f.complete(t, resultID, bearer, body)
	if status != want {
		t.Fatalf("POST %s with %s = %d %s, want %d", asynctools.CompletePath(resultID), body, status, b, want)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("body %s is not a JSON object: %v", b, err)
	}
	return v
}

// drain receives every message on the work queue until it stays empty for a long poll, deletes
// them, and returns their bodies.
func (f *completeFixture) drain(t *testing.T) []string {
	t.Helper()
	ctx := context.Background()
	var bodies []string
	for {
		out, err := f.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: &f.queue, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 60,
		})
		if err != nil {
			t.Fatalf("receiving from the work queue: %v", err)
		}
		if len(out.Messages) == 0 {
			return bodies
		}
		for _, m := range out.Messages {
			bodies = append(bodies, aws.ToString(m.Body))
			if _, err := f.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &f.queue, ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// wantContinuations fails unless the work queue holds exactly the continuations of groups.
func (f *completeFixture) wantContinuations(t *testing.T, groups ...string) {
	t.Helper()
	bodies := f.drain(t)
	var got []map[string]any
	for _, b := range bodies {
		var v map[string]any
		if err := json.Unmarshal([]byte(b), &v); err != nil {
			t.Fatalf("queue message %s is not JSON: %v", b, err)
		}
		got = append(got, v)
	}
	var want []map[string]any
	for _, g := range groups {
		want = append(want, map[string]any{"type": "continue", "accountId": f.acc.ID, "groupId": g})
	}
	if !cmp.Equal(want, got, cmpopts.EquateEmpty()) {
		t.Fatalf("work queue messages (-want +got):\n%s", cmp.Diff(want, got, cmpopts.EquateEmpty()))
	}
}

func (f *completeFixture) row(t *testing.T, id string) asynctools.Result {
	t.Helper()
	r, err := f.async.Result(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The last call of a sealed group completed with its per-call token: 200, and exactly one
// continuation on the work queue. While a sibling is pending the answer is 202; an identical
// duplicate gets the identical answer and sends nothing more.
func TestCompleteRedrivesSealedGroupOnce(t *testing.T) {
	f := newCompleteFixture(t)
	g := newAsyncGroup()
	a := f.register(t, g, "toolu_a", asynctools.ExternalDispatch, time.Hour)
	b := f.register(t, g, "toolu_b", asynctools.ExternalDispatch, time.Hour)
	f.seal(t, g, a, b)

	bodyA := `{"status":"completed","response":{"summary":"a","sources":[1,2]}}`
	statusA, firstA := f.complete(t, a.id, a.token, bodyA)
	if statusA != http.StatusAccepted {
		t.Fatalf("completing a while b is pending = %d %s, want 202", statusA, firstA)
	}
	var waiting map[string]any
	_ = json.Unmarshal(firstA, &waiting)
	if want := map[string]any{"resultId": a.id, "status": store.EventWaitingAsync, "result": "completed", "group": "sealed", "pending": 1.0}; !cmp.Equal(want, waiting) {
		t.Fatalf("202 body (-want +got):\n%s", cmp.Diff(want, waiting))
	}
	if waiting["status"] != "waiting_for_async_tools" {
		t.Fatalf("status = %v", waiting["status"])
	}
	// An identical duplicate while b is pending: the identical answer.
	if status, again := f.complete(t, a.id, a.token, bodyA); status != statusA || !bytes.Equal(again, firstA) {
		t.Fatalf("identical duplicate = %d %s, want %d %s", status, again, statusA, firstA)
	}
	f.wantContinuations(t)

	bodyB := `{"status":"failed","error":"the source was unreachable"}`
	statusB, firstB := f.complete(t, b.id, b.token, bodyB)
	if statusB != http.StatusOK {
		t.Fatalf("completing the last call = %d %s, want 200", statusB, firstB)
	}
	var done map[string]any
	_ = json.Unmarshal(firstB, &done)
	if want := map[string]any{"resultId": b.id, "status": "failed", "group": "complete"}; !cmp.Equal(want, done) {
		t.Fatalf("200 body (-want +got):\n%s", cmp.Diff(want, done))
	}
	f.wantContinuations(t, g)

	// Retries of the last completion (a worker that lost the answer): identical answers, no
	// second continuation.
	for range 3 {
		if status, again := f.complete(t, b.id, b.token, bodyB); status != statusB || !bytes.Equal(again, firstB) {
			t.Fatalf("identical duplicate = %d %s, want %d %s", status, again, statusB, firstB)
		}
	}
	f.wantContinuations(t)

	if r := f.row(t, a.id); r.Status != asynctools.Completed || string(r.Response) != `{"summary":"a","sources":[1,2]}` {
		t.Fatalf("row a = %s %s", r.Status, r.Response)
	}
	if r := f.row(t, b.id); r.Status != asynctools.Failed || r.Error != "the source was unreachable" {
		t.Fatalf("row b = %s %q", r.Status, r.Error)
	}
	st, err := f.async.Load(context.Background(), g)
	if err != nil || st.Group == nil || st.Group.ClaimedAt.IsZero() {
		t.Fatalf("group after the re-drive = %+v, %v; want it claimed", st.Group, err)
	}
}

// A completion that arrives before its group is sealed is stored (202) and sends nothing: the
// parent's seal re-drives. The owner's account secret completes a call too.
func TestCompleteBeforeSealAndWithAccountSecret(t *testing.T) {
	f := newCompleteFixture(t)
	g := newAsyncGroup()
	a := f.register(t, g, "toolu_a", asynctools.ExternalDispatch, time.Hour)
	v := f.mustComplete(t, http.StatusAccepted, a.id, f.secret, `{"status":"completed","response":"early"}`)
	if v["status"] != store.EventWaitingAsync || v["result"] != "completed" {
		t.Fatalf("completion before the seal = %v", v)
	}
	if r := f.row(t, a.id); r.Status != asynctools.Completed || string(r.Response) != `"early"` {
		t.Fatalf("row = %s %s, want the early completion stored", r.Status, r.Response)
	}
	f.wantContinuations(t)

	// The owner's secret completes a sealed group's last call.
	g2 := newAsyncGroup()
	b := f.register(t, g2, "toolu_b", asynctools.ExternalDispatch, time.Hour)
	f.seal(t, g2, b)
	v = f.mustComplete(t, http.StatusOK, b.id, f.secret, `{"status":"completed","response":null}`)
	if v["group"] != "complete" || v["status"] != "completed" {
		t.Fatalf("completion with the account secret = %v", v)
	}
	f.wantContinuations(t, g2)
}

// Only the first settle counts: a different outcome for a settled call is 409 with the recorded
// status, and the row keeps the first outcome.
func TestCompleteConflict(t *testing.T) {
	f := newCompleteFixture(t)
	g := newAsyncGroup()
	a := f.register(t, g, "toolu_a", asynctools.ExternalDispatch, time.Hour)
	b := f.register(t, g, "toolu_b", asynctools.ExternalDispatch, time.Hour)
	f.seal(t, g, a, b)
	f.mustComplete(t, http.StatusAccepted, a.id, a.token, `{"status":"completed","response":{"v":1}}`)
	f.mustComplete(t, http.StatusOK, b.id, b.token, `{"status":"failed","error":"boom"}`)
	f.wantContinuations(t, g)

	for _, c := range []struct {
		call       asyncCall
		body, want string
	}{
		{a, `{"status":"completed","response":{"v":2}}`, "completed"},
		{a, `{"status":"failed","error":"changed my mind"}`, "completed"},
		{b, `{"status":"completed","response":"after all"}`, "failed"},
		{b, `{"status":"failed","error":"another reason"}`, "failed"},
	} {
		v := f.mustComplete(t, http.StatusConflict, c.call.id, c.call.token, c.body)
		if v["status"] != c.want || v["resultId"] != c.call.id {
			t.Fatalf("conflicting %s = %v, want status %q", c.body, v, c.want)
		}
	}
	if r := f.row(t, a.id); string(r.Response) != `{"v":1}` {
		t.Fatalf("row a = %s, want the first outcome", r.Response)
	}
	if r := f.row(t, b.id); r.Error != "boom" {
		t.Fatalf("row b = %q, want the first outcome", r.Error)
	}
	f.wantContinuations(t)
}

// The timeout settles through the same conditional path: a success that arrives after the
// call timed out is 409, and says so.
func TestCompleteAfterTimeout(t *testing.T) {
	f := newCompleteFixture(t)
	g := newAsyncGroup()
	a := f.register(t, g, "toolu_a", asynctools.ExternalDispatch, -time.Second)
	f.seal(t, g, a)
	if _, _, err := f.async.Settle(context.Background(), a.id, asynctools.Outcome{Status: asynctools.Failed, Error: asynctools.TimeoutError, Timeout: true}, time.Now()); err != nil {
		t.Fatal(err)
	}
	v := f.mustComplete(t, http.StatusConflict, a.id, a.token, `{"status":"completed","response":"finally"}`)
	if v["status"] != "failed" || !strings.Contains(v["error"].(string), "timed out") {
		t.Fatalf("late success = %v, want 409 naming the timeout", v)
	}
	if r := f.row(t, a.id); r.Status != asynctools.Failed || r.Error != asynctools.TimeoutError {
		t.Fatalf("row = %s %q, want the timeout kept", r.Status, r.Error)
	}
}

// A call whose turn was aborted is settled cancelled through the same conditional write: the
// outside worker's late answer is 409 and says why, and the row keeps the cancellation.
func TestCompleteAfterAbort(t *testing.T) {
	f := newCompleteFixture(t)
	g := newAsyncGroup()
	a := f.register(t, g, "toolu_a", asynctools.ExternalDispatch, time.Hour)
	f.seal(t, g, a)
	if _, _, err := f.async.Settle(context.Background(), a.id, asynctools.Outcome{Status: asynctools.Cancelled, Error: "cancelled: the turn was aborted"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	v := f.mustComplete(t, http.StatusConflict, a.id, a.token, `{"status":"completed","response":"finally"}`)
	if v["status"] != asynctools.Cancelled || !strings.Contains(v["error"].(string), "already cancelled: its turn was aborted") {
		t.Fatalf("late success = %v, want 409 naming the abort", v)
	}
	if r := f.row(t, a.id); r.Status != asynctools.Cancelled {
		t.Fatalf("row = %s %q, want the cancellation kept", r.Status, r.Error)
	}
}

// Unknown ids, malformed ids, another account's secret, an unknown secret and a token that does
// not open the call all get the same 404, so none tells that an id exists; the row stays
// running.
func TestCompleteNotFoundIsUniform(t *testing.T) {
	f := newCompleteFixture(t)
	g := newAsyncGroup()
	a := f.register(t, g, "toolu_a", asynctools.ExternalDispatch, time.Hour)
	b := f.register(t, g, "toolu_b", asynctools.ExternalDispatch, time.Hour)
	_, foreign, err := f.accounts.CreateAccount(context.Background(), "someone-else", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// The foreign account has a call of its own, which a's token must not open either.
	other := newAsyncGroup()
	token, hash := asynctools.NewToken()
	theirs := asynctools.Result{ID: asynctools.ResultID(other, "toolu_x"), AccountID: "acc_someone_else", ToolCallID: "toolu_x",
		Mode: asynctools.ExternalDispatch, TokenHash: hash, Deadline: time.Now().Add(time.Hour)}
	if _, _, err := f.async.Register(context.Background(), theirs); err != nil {
		t.Fatal(err)
	}
	wrongToken, _ := asynctools.NewToken()
	body := `{"status":"completed","response":"x"}`

	cases := []struct{ name, id, bearer string }{
		{"unknown id in a known group", asynctools.ResultID(g, "toolu_nope"), a.token},
		{"unknown group", asynctools.ResultID(newAsyncGroup(), "toolu_a"), f.secret},
		{"malformed id", "not-a-result-id", f.secret},
		{"malformed id with the group's prefix", g + ".short", f.secret},
		{"foreign account's secret", a.id, foreign},
		{"unknown account secret", a.id, "hsk_" + strings.Repeat("x", 43)},
		{"wrong token", a.id, wrongToken},
		{"a sibling's token", a.id, b.token},
		{"another account's call with our token", theirs.ID, a.token},
		{"our secret on another account's call", theirs.ID, f.secret},
		{"another account's token on our call", a.id, token},
	}
	var first []byte
	for _, c := range cases {
		status, got := f.complete(t, c.id, c.bearer, body)
		if status != http.StatusNotFound {
			t.Fatalf("%s: %d %s, want 404", c.name, status, got)
		}
		if first == nil {
			first = got
			var v map[string]any
			if err := json.Unmarshal(got, &v); err != nil || len(v) != 1 || v["error"] == "" {
				t.Fatalf("404 body = %s, want only an error message", got)
			}
		}
		if !bytes.Equal(got, first) {
			t.Fatalf("%s: 404 body %s differs from %s", c.name, got, first)
		}
	}
	for _, id := range []string{a.id, b.id, theirs.ID} {
		if r := f.row(t, id); r.Status != asynctools.Running {
			t.Fatalf("row %s is %s after refused completions, want running", id, r.Status)
		}
	}
	f.wantContinuations(t)
}

// A request without a bearer token is 401.
func TestCompleteNeedsAuthorization(t *testing.T) {
	f := newCompleteFixture(t)
	a := f.register(t, newAsyncGroup(), "toolu_a", asynctools.ExternalDispatch, time.Hour)
	body := `{"status":"completed","response":1}`
	if status, got := f.complete(t, a.id, "", body); status != http.StatusUnauthorized {
		t.Fatalf("no Authorization = %d %s, want 401", status, got)
	}
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+asynctools.CompletePath(a.id), strings.NewReader(body))
	req.Header.Set("Authorization", "Basic "+a.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("Authorization: Basic = %d, want 401", res.StatusCode)
	}
	if r := f.row(t, a.id); r.Status != asynctools.Running {
		t.Fatalf("row is %s, want running", r.Status)
	}
}

// Bodies that are not a completion are 400, naming the problem, and settle nothing; a body past
// the limit is 413.
func TestCompleteBadBodies(t *testing.T) {
	f := newCompleteFixture(t)
	a := f.register(t, newAsyncGroup(), "toolu_a", asynctools.ExternalDispatch, time.Hour)
	for _, c := range []struct{ name, body, mention, field string }{
		{"unknown field", `{"status":"completed","response":1,"result":1}`, "is not a field", "result"},
		{"missing status", `{"response":1}`, "is required", "status"},
		{"unknown status", `{"status":"done","response":1}`, `is "done"`, "status"},
		{"completed without response", `{"status":"completed"}`, "needs it", "response"},
		{"completed with an error", `{"status":"completed","response":1,"error":"x"}`, "has none", "error"},
		{"failed without error", `{"status":"failed"}`, "needs it", "error"},
		{"failed with a blank error", `{"status":"failed","error":"  "}`, "needs it", "error"},
		{"failed with a response", `{"status":"failed","error":"x","response":1}`, "has none", "response"},
		{"wrong type", `{"status":"failed","error":7}`, "must be a JSON string", "error"},
		{"not JSON", `status=completed`, "malformed JSON", ""},
		{"empty body", ``, "malformed JSON", ""},
		{"two values", `{"status":"failed","error":"x"} {}`, "unexpected data", ""},
	} {
		v := f.mustComplete(t, http.StatusBadRequest, a.id, a.token, c.body)
		if msg, _ := v["error"].(string); !strings.Contains(msg, c.mention) {
			t.Errorf("%s: error %q does not mention %q", c.name, msg, c.mention)
		}
		if field, _ := v["field"].(string); field != c.field {
			t.Errorf("%s: field %q, want %q", c.name, field, c.field)
		}
	}

	big := `{"status":"completed","response":"` + strings.Repeat("x", completion.DefaultMaxBytes) + `"}`
	status, got := f.complete(t, a.id, a.token, big)
	if status != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized body = %d %.200s, want 413", status, got)
	}
	if r := f.row(t, a.id); r.Status != asynctools.Running {
		t.Fatalf("row is %s after refused bodies, want running", r.Status)
	}
	f.wantContinuations(t)
}

// A same-invocation call runs inside the harness and is never completed from outside: 409,
// even with the owner's secret.
func TestCompleteSameInvocationRow(t *testing.T) {
	f := newCompleteFixture(t)
	g := newAsyncGroup()
	a := f.register(t, g, "toolu_a", asynctools.SameInvocation, time.Minute)
	v := f.mustComplete(t, http.StatusConflict, a.id, f.secret, `{"status":"completed","response":"spoofed"}`)
	if v["status"] != asynctools.Running || v["resultId"] != a.id {
		t.Fatalf("same-invocation completion = %v", v)
	}
	if r := f.row(t, a.id); r.Status != asynctools.Running {
		t.Fatalf("row is %s, want running", r.Status)
	}
}

// A large response (100 KiB) is accepted: the row keeps a bounded preview and the key of the
// full response in the bucket, and the continuation goes out.
func TestCompleteLargeResponse(t *testing.T) {
	f := newCompleteFixture(t)
	g := newAsyncGroup()
	a := f.register(t, g, "toolu_a", asynctools.ExternalDispatch, time.Hour)
	f.seal(t, g, a)
	var items []string
	for i := 0; len(strings.Join(items, ",")) < 100<<10; i++ {
		items = append(items, `{"i":`+strings.Repeat("1", 1+i%5)+`,"text":"Grüße aus dem Speicher <ok>"}`)
	}
	response := `{"items":[` + strings.Join(items, ",") + `]}`
	body := `{"status":"completed","response":` + response + `}`
	v := f.mustComplete(t, http.StatusOK, a.id, a.token, body)
	if v["group"] != "complete" {
		t.Fatalf("large completion = %v", v)
	}
	f.wantContinuations(t, g)

	r := f.row(t, a.id)
	if r.Status != asynctools.Completed || r.ResponseKey == "" || r.ResponseBytes != len(response) {
		t.Fatalf("row = %s, key %q, %d bytes; want completed with the response offloaded (%d bytes)", r.Status, r.ResponseKey, r.ResponseBytes, len(response))
	}
	if len(r.Response) == 0 || len(r.Response) > asynctools.PreviewBytes || !json.Valid(r.Response) {
		t.Fatalf("preview is %d bytes (valid JSON %v), want a JSON preview of at most %d", len(r.Response), json.Valid(r.Response), asynctools.PreviewBytes)
	}
	full, err := f.async.FullResponse(context.Background(), r)
	if err != nil || string(full) != response {
		t.Fatalf("FullResponse = %d bytes, %v; want the %d bytes sent", len(full), err, len(response))
	}
	// The identical duplicate of a large completion is still the identical answer.
	if status, _ := f.complete(t, a.id, a.token, body); status != http.StatusOK {
		t.Fatalf("duplicate large completion = %d, want 200", status)
	}
	f.wantContinuations(t)
}

// Exactly one re-drive per group when every call of a sealed group is completed several times
// at once over HTTP: every request is answered 200 or 202, never an error, and one continuation
// reaches the queue.
func TestCompleteConcurrentCompletionsRedriveOnce(t *testing.T) {
	f := newCompleteFixture(t)
	g := newAsyncGroup()
	var calls []asyncCall
	for _, k := range []string{"toolu_a", "toolu_b", "toolu_c"} {
		calls = append(calls, f.register(t, g, k, asynctools.ExternalDispatch, time.Hour))
	}
	f.seal(t, g, calls...)

	type answer struct {
		status int
		body   []byte
	}
	answers := make(chan answer, 4*len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		for range 4 {
			wg.Go(func() {
				body := fmt.Sprintf(`{"status":"completed","response":{"n":%d}}`, i)
				req, _ := http.NewRequest(http.MethodPost, f.srv.URL+asynctools.CompletePath(c.id), strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+c.token)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					answers <- answer{0, []byte(err.Error())}
					return
				}
				defer res.Body.Close()
				b, _ := io.ReadAll(res.Body)
				answers <- answer{res.StatusCode, b}
			})
		}
	}
	wg.Wait()
	close(answers)
	ok := 0
	for a := range answers {
		switch a.status {
		case http.StatusOK:
			ok++
		case http.StatusAccepted:
		default:
			t.Errorf("concurrent completion answered %d %s", a.status, a.body)
		}
	}
	if ok == 0 {
		t.Error("no completion saw the group complete")
	}
	f.wantContinuations(t, g)
}

// The completion route reads its token like every other route: the scheme in any case.
func TestCompleteBearerSchemeIsCaseInsensitive(t *testing.T) {
	f := newCompleteFixture(t)
	for i, scheme := range []string{"bearer", "BEARER"} {
		a := f.register(t, newAsyncGroup(), "toolu_"+scheme, asynctools.ExternalDispatch, time.Hour)
		req, _ := http.NewRequest(http.MethodPost, f.srv.URL+asynctools.CompletePath(a.id), strings.NewReader(`{"status":"completed","response":`+fmt.Sprint(i)+`}`))
		req.Header.Set("Authorization", scheme+" "+a.token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusAccepted {
			t.Errorf("completion with %q = %d %s, want 202", scheme+" <token>", res.StatusCode, b)
		}
		if r := f.row(t, a.id); r.Status != asynctools.Completed {
			t.Errorf("row after a completion with %q is %s, want completed", scheme, r.Status)
		}
	}
}

func TestDuplicateKeysInACompletionAreRefused(t *testing.T) {
	f := newCompleteFixture(t)
	g := newAsyncGroup()
	c := f.register(t, g, "call_1", asynctools.ExternalDispatch, time.Hour)
	status, body := f.complete(t, c.id, c.token, `{"status":"failed","error":"x","status":"completed","response":1}`)
	testenv.WantFieldError(t, status, body, "status")
	if row := f.row(t, c.id); row.Status != asynctools.Running {
		t.Errorf("the refused completion settled the row: %s", row.Status)
	}
}

func TestMalformedResultIDIsRefused(t *testing.T) {
	f := newCompleteFixture(t)
	for name, id := range testenv.BadIDs {
		if strings.Contains(id, "/") {
			continue
		}
		t.Run(name, func(t *testing.T) {
			status, body := f.completeRaw(t, "/async-tools/"+url.PathEscape(id)+"/complete", "hsk_any", strings.NewReader(`{"status":"completed","response":1}`))
			testenv.WantFieldError(t, status, body, "resultId")
		})
	}
}
