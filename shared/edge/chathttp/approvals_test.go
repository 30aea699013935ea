package chathttp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/edge/chathttp"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/provider"
	"github.com/agentharness/harness/shared/state/agentstore"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/builtintools"
	"github.com/agentharness/harness/shared/turn"
	"github.com/google/go-cmp/cmp"
)

// deployer calls test_async, which needs approval, then reports what its tools returned.
const deployer = `{
  "name": "deployer",
  "model": {"provider":"scripted","script":[
    {"toolCalls":[{"name":"test_async","input":{"delayMs":0,"echo":"deployed"}}]},
    {"text":"Result: {{toolResults}}"}
  ]},
  "tools": {"test_async": {"needsApproval": true}}
}`

// parallel makes three calls in one step: two that need approval around one that does not.
const parallel = `{
  "name": "parallel",
  "model": {"provider":"scripted","script":[
    {"toolCalls":[
      {"name":"test_async","input":{"delayMs":0,"echo":"first"}},
      {"name":"current_time","input":{}},
      {"name":"test_async","input":{"delayMs":0,"echo":"second"}}
    ]},
    {"text":"Results: {{toolResults}}"}
  ]},
  "tools": {"test_async": {"needsApproval": true}, "current_time": {}}
}`

// guarded approves short waits itself, denies long ones, and asks about the rest.
const guarded = `{
  "name": "guarded",
  "model": {"provider":"scripted","script":[
    {"toolCalls":[
      {"name":"test_async","input":{"delayMs":0,"echo":"quick"}},
      {"name":"test_async","input":{"delayMs":60000,"echo":"slow"}}
    ]},
    {"text":"Results: {{toolResults}}"}
  ]},
  "tools": {"test_async": {"maxDelayMs": 120000, "needsApproval": {
    "rules": [
      {"if": {"properties": {"delayMs": {"maximum": 1000}}}, "then": "approved"},
      {"if": {"properties": {"delayMs": {"minimum": 30000}}}, "then": "denied", "reason": "waits longer than 30 s are not allowed"}
    ]
  }}}
}`

// clock is a fake clock the tests move by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type approvalFixture struct {
	*fixture
	clock  *clock
	agents *agentstore.Service
}

// history returns a conversation's stored messages.
func (f *approvalFixture) history(t *testing.T, conversation string) []model.Message {
	t.Helper()
	return f.conversation(t, agentOf(conversation), conversation)
}

// otherAccount creates a second account, with its own deployer agent, on the same tables.
func (f *approvalFixture) otherAccount(t *testing.T) (secret string) {
	t.Helper()
	ctx := context.Background()
	acc, secret, err := f.store.CreateAccount(ctx, "other", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.agents.Create(ctx, acc.ID, "deployer", []byte(deployer)); err != nil {
		t.Fatal(err)
	}
	return secret
}

// newApprovalFixture serves the harness on DynamoDB Local with a fake clock and one account
// holding the deployer, parallel and guarded agentstore.
func newApprovalFixture(t *testing.T) *approvalFixture {
	t.Helper()
	db := testenv.DynamoDB(t)
	st := store.New(db, testenv.Tables(t, db))
	ctx := context.Background()
	acc, secret, err := st.CreateAccount(ctx, "approver", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	svc := agentstore.New(st, testBox(t), builtintools.ConfigChecks(), nil)
	for id, cfg := range map[string]string{"deployer": deployer, "parallel": parallel, "guarded": guarded} {
		if _, err := svc.Create(ctx, acc.ID, id, []byte(cfg)); err != nil {
			t.Fatalf("creating %s: %v", id, err)
		}
	}
	c := &clock{now: time.Now()}
	h := chathttp.New(chathttp.Options{Options: turn.Options{
		Store: st, Agents: svc, Now: c.Now,
		Tools: func(_ context.Context, cfg map[string]json.RawMessage, _ tool.Vars) (*tool.Set, error) {
			return builtintools.Build(cfg, tool.Env{Getenv: os.Getenv})
		},
		Model: func(_ context.Context, _ string, block json.RawMessage) (agent.Model, error) {
			return provider.New(block, provider.Config{})
		},
	}})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &approvalFixture{fixture: &fixture{srv: srv, store: st, acc: acc, secret: secret}, clock: c, agents: svc}
}

// turn posts body and returns the stream's chunks; it fails unless the answer is a 200 stream.
func (f *approvalFixture) turn(t *testing.T, body string) []map[string]any {
	t.Helper()
	res := f.post(t, f.secret, body)
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("POST / %s = %d %s, want 200", body, res.StatusCode, b)
	}
	return chunks(t, res)
}

// refused posts body and returns the JSON error; it fails unless the status is want.
func (f *approvalFixture) refused(t *testing.T, secret, body string, want int) map[string]any {
	t.Helper()
	res := f.post(t, secret, body)
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		t.Fatalf("POST / %s = %d %s, want %d", body, res.StatusCode, b, want)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("answer %s is not JSON: %v", b, err)
	}
	return m
}

// approvalRequests returns the approval requests a stream sent, in order.
func approvalRequests(cs []map[string]any) []map[string]any {
	var out []map[string]any
	for _, c := range cs {
		if c["type"] == "tool-approval-request" {
			out = append(out, c)
		}
	}
	return out
}

func text(cs []map[string]any) string {
	var b strings.Builder
	for _, c := range cs {
		if c["type"] == "text-delta" {
			b.WriteString(c["delta"].(string))
		}
	}
	return b.String()
}

func last(cs []map[string]any) map[string]any { return cs[len(cs)-1] }

func decide(conversation string, decisions ...string) string {
	return `{"agentId":"` + agentOf(conversation) + `","id":"` + conversation + `","approvals":[` + strings.Join(decisions, ",") + `]}`
}

// agentOf: conversations in these tests are named after their agent ("deployer-1").
func agentOf(conversation string) string { return strings.Split(conversation, "-")[0] }

func approve(id string) string { return `{"approvalId":"` + id + `","approved":true}` }
func deny(id, reason string) string {
	return `{"approvalId":"` + id + `","approved":false,"reason":"` + reason + `"}`
}

func ask(conversation, message string) string {
	return `{"agentId":"` + agentOf(conversation) + `","id":"` + conversation + `","message":"` + message + `"}`
}

func TestApproveThenContinue(t *testing.T) {
	f := newApprovalFixture(t)
	cs := f.turn(t, ask("deployer-1", "deploy it"))
	want := []string{"start", "start-step", "tool-input-start", "tool-input-delta", "tool-input-available", "tool-approval-request", "finish-step", "finish"}
	if diff := cmp.Diff(want, types(cs)); diff != "" {
		t.Fatalf("first pass chunks (-want +got):\n%s", diff)
	}
	req := approvalRequests(cs)[0]
	if req["toolCallId"] != cs[4]["toolCallId"] {
		t.Errorf("approval request for %v, want the call %v", req["toolCallId"], cs[4]["toolCallId"])
	}
	fin := last(cs)
	if fin["finishReason"] != "tool-calls" {
		t.Errorf("finishReason = %v, want tool-calls", fin["finishReason"])
	}
	pending := fin["messageMetadata"].(map[string]any)["pendingApprovals"].([]any)
	if len(pending) != 1 || pending[0].(map[string]any)["approvalId"] != req["approvalId"] {
		t.Errorf("finish metadata pendingApprovals = %v, want the one request %v", pending, req["approvalId"])
	}
	if diff := cmp.Diff([]model.Role{model.RoleUser, model.RoleAssistant}, roles(f.history(t, "deployer-1"))); diff != "" {
		t.Errorf("history while held (-want +got):\n%s", diff)
	}

	cs = f.turn(t, decide("deployer-1", approve(req["approvalId"].(string))))
	want = []string{"start", "tool-output-available", "start-step", "text-start"}
	if diff := cmp.Diff(want, types(cs)[:4]); diff != "" {
		t.Fatalf("resumed chunks (-want +got):\n%s", diff)
	}
	if got := cs[3]["id"]; got != "text-2-1" {
		t.Errorf("resumed text part id = %v, want text-2-1: the resumed pass goes on numbering the turn's steps", got)
	}
	if got := cs[1]["output"].(map[string]any)["echo"]; got != "deployed" {
		t.Errorf("tool output echo = %v, want deployed", got)
	}
	if got := text(cs); !strings.Contains(got, `"echo":"deployed"`) {
		t.Errorf("final text %q does not carry the tool's output", got)
	}
	if fin := last(cs); fin["finishReason"] != "stop" {
		t.Errorf("finishReason = %v, want stop", fin["finishReason"])
	}
	msgs := f.history(t, "deployer-1")
	if diff := cmp.Diff([]model.Role{model.RoleUser, model.RoleAssistant, model.RoleTool, model.RoleAssistant}, roles(msgs)); diff != "" {
		t.Errorf("history after approval (-want +got):\n%s", diff)
	}
}

func TestDenyThenContinue(t *testing.T) {
	f := newApprovalFixture(t)
	id := approvalRequests(f.turn(t, ask("deployer-1", "deploy it")))[0]["approvalId"].(string)
	cs := f.turn(t, decide("deployer-1", deny(id, "not today")))
	if diff := cmp.Diff([]string{"start", "tool-output-denied", "start-step"}, types(cs)[:3]); diff != "" {
		t.Fatalf("resumed chunks (-want +got):\n%s", diff)
	}
	if got := text(cs); !strings.Contains(got, "denied by the user: not today; the tool did not run") {
		t.Errorf("final text %q does not show the model was told of the denial", got)
	}
	msgs := f.history(t, "deployer-1")
	result := msgs[2].Parts[0]
	if !result.IsError || !strings.Contains(string(result.Output), "denied by the user: not today") {
		t.Errorf("stored result = %s (error %v), want the denial as an error result", result.Output, result.IsError)
	}
	// The conversation is usable: a new message runs a new pass.
	cs = f.turn(t, ask("deployer-1", "try again"))
	if len(approvalRequests(cs)) != 1 {
		t.Errorf("after a denial, a new message got chunks %v, want a new approval request", types(cs))
	}
}

// Two held calls around one that needs no approval: the free call runs in the first pass, in
// order, and the held ones resume in the model's order however they are answered.
func TestParallelApprovals(t *testing.T) {
	orders := map[string]func(t *testing.T, f *approvalFixture, conv, first, second string) []map[string]any{
		"together": func(t *testing.T, f *approvalFixture, conv, first, second string) []map[string]any {
			return f.turn(t, decide(conv, deny(second, "no"), approve(first)))
		},
		"first then second": func(t *testing.T, f *approvalFixture, conv, first, second string) []map[string]any {
			cs := f.turn(t, decide(conv, approve(first)))
			if diff := cmp.Diff([]string{"start", "tool-approval-response", "finish"}, types(cs)); diff != "" {
				t.Fatalf("partial answer chunks (-want +got):\n%s", diff)
			}
			left := last(cs)["messageMetadata"].(map[string]any)["pendingApprovals"].([]any)
			if len(left) != 1 || left[0].(map[string]any)["approvalId"] != second {
				t.Fatalf("still pending = %v, want only %s", left, second)
			}
			return f.turn(t, decide(conv, deny(second, "no")))
		},
		"second then first": func(t *testing.T, f *approvalFixture, conv, first, second string) []map[string]any {
			f.turn(t, decide(conv, deny(second, "no")))
			return f.turn(t, decide(conv, approve(first)))
		},
	}
	for name, answer := range orders {
		t.Run(name, func(t *testing.T) {
			f := newApprovalFixture(t)
			cs := f.turn(t, ask("parallel-1", "go"))
			var got []string
			for _, c := range cs {
				switch c["type"] {
				case "tool-input-available", "tool-output-available", "tool-approval-request":
					got = append(got, c["type"].(string)+" "+c["toolCallId"].(string))
				}
			}
			want := []string{
				"tool-input-available call_1_1", "tool-input-available call_1_2", "tool-output-available call_1_2",
				"tool-input-available call_1_3", "tool-approval-request call_1_1", "tool-approval-request call_1_3",
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("first pass (-want +got):\n%s", diff)
			}
			reqs := approvalRequests(cs)
			cs = answer(t, f, "parallel-1", reqs[0]["approvalId"].(string), reqs[1]["approvalId"].(string))
			var resumed []string
			for _, c := range cs {
				if c["type"] == "tool-output-available" || c["type"] == "tool-output-denied" {
					resumed = append(resumed, c["type"].(string)+" "+c["toolCallId"].(string))
				}
			}
			if diff := cmp.Diff([]string{"tool-output-available call_1_1", "tool-output-denied call_1_3"}, resumed); diff != "" {
				t.Errorf("resumed calls (-want +got):\n%s", diff)
			}
			// The model gets every result, in call order, the denied one included.
			var results []any
			final := text(cs)
			if err := json.Unmarshal([]byte(strings.TrimPrefix(final, "Results: ")), &results); err != nil {
				t.Fatalf("final text %q: %v", final, err)
			}
			first, _ := results[0].(map[string]any)
			denied, _ := results[len(results)-1].(map[string]any)
			if len(results) != 3 || first["echo"] != "first" || denied["error"] != "denied by the user: no; the tool did not run" {
				t.Errorf("results the model saw = %v, want first's output, the time, then the denial", results)
			}
		})
	}
}

// Decisions that do not match a pending approval are refused, and change nothing.
func TestBadDecisionsAreRefused(t *testing.T) {
	f := newApprovalFixture(t)
	req := approvalRequests(f.turn(t, ask("deployer-1", "deploy it")))[0]
	id, call := req["approvalId"].(string), req["toolCallId"].(string)

	otherSecret := f.otherAccount(t)
	res := f.post(t, otherSecret, ask("deployer-9", "deploy it"))
	otherID := approvalRequests(chunks(t, res))[0]["approvalId"].(string)

	unknown := f.refused(t, f.secret, decide("deployer-1", approve("apr_unknown")), http.StatusNotFound)
	foreign := f.refused(t, f.secret, decide("deployer-1", approve(otherID)), http.StatusNotFound)
	if strings.Replace(foreign["error"].(string), otherID, "ID", 1) != strings.Replace(unknown["error"].(string), "apr_unknown", "ID", 1) {
		t.Errorf("another account's approval answered %v, an unknown one %v: want the same answer", foreign, unknown)
	}
	// The other account cannot decide this account's approval either.
	f.refused(t, otherSecret, decide("deployer-9", approve(id)), http.StatusNotFound)

	uiDecision := func(callID, input string) string {
		return `{"agentId":"deployer","id":"deployer-1","messageId":"m1","trigger":"submit-message","messages":[
		  {"id":"u1","role":"user","parts":[{"type":"text","text":"deploy it"}]},
		  {"id":"m1","role":"assistant","parts":[{"type":"step-start"},{"type":"tool-test_async","toolCallId":"` + callID + `",
		    "state":"approval-responded","input":` + input + `,"approval":{"id":"` + id + `","approved":true}}]}]}`
	}
	wrongArgs := f.refused(t, f.secret, uiDecision(call, `{"delayMs":0,"echo":"something else"}`), http.StatusConflict)
	if !strings.Contains(wrongArgs["error"].(string), "other arguments") {
		t.Errorf("wrong arguments answered %v, want it to say the arguments differ", wrongArgs)
	}
	f.refused(t, f.secret, uiDecision("call_other", `{"delayMs":0,"echo":"deployed"}`), http.StatusConflict)

	// Still pending after all that: the right decision, with the arguments spelled another
	// way, goes through once.
	cs := f.turn(t, uiDecision(call, `{"echo":"deployed","delayMs":0.0}`))
	if got := cs[1]["type"]; got != "tool-output-available" {
		t.Fatalf("the matching decision got %v, want the tool to run", types(cs))
	}
	reused := f.refused(t, f.secret, decide("deployer-1", approve(id)), http.StatusConflict)
	if reused["status"] != "approved" {
		t.Errorf("reused decision answered %v, want 409 with status approved", reused)
	}
}

// A pending approval expires after the timeout: a late decision gets 409, the model is told
// the tool never ran, and the conversation is usable again.
func TestApprovalExpires(t *testing.T) {
	f := newApprovalFixture(t)
	id := approvalRequests(f.turn(t, ask("deployer-1", "deploy it")))[0]["approvalId"].(string)
	f.clock.Advance(turn.DefaultApprovalTimeout + time.Second)

	late := f.refused(t, f.secret, decide("deployer-1", approve(id)), http.StatusConflict)
	if late["status"] != "expired" || !strings.Contains(late["error"].(string), "never ran") {
		t.Errorf("late decision answered %v, want 409 expired", late)
	}
	cs := f.turn(t, ask("deployer-1", "anything new?"))
	if len(approvalRequests(cs)) != 1 {
		t.Errorf("a new message after expiry got %v, want a fresh pass", types(cs))
	}
	msgs := f.history(t, "deployer-1")
	if diff := cmp.Diff([]model.Role{model.RoleUser, model.RoleAssistant, model.RoleTool, model.RoleUser, model.RoleAssistant}, roles(msgs)); diff != "" {
		t.Fatalf("history (-want +got):\n%s", diff)
	}
	if got := string(msgs[2].Parts[0].Output); !strings.Contains(got, "expired after 24h0m0s without an answer; the tool never ran") {
		t.Errorf("expired call's result = %s, want it to say the tool never ran", got)
	}
}

// A new message never skips a pending approval: it is refused naming the approvals, unless it
// asks for them to be denied first.
func TestNewMessageWhilePending(t *testing.T) {
	f := newApprovalFixture(t)
	id := approvalRequests(f.turn(t, ask("deployer-1", "deploy it")))[0]["approvalId"].(string)
	refused := f.refused(t, f.secret, ask("deployer-1", "never mind"), http.StatusConflict)
	if !strings.Contains(refused["error"].(string), id) {
		t.Errorf("409 %v does not name the pending approval %s", refused, id)
	}
	if diff := cmp.Diff([]model.Role{model.RoleUser, model.RoleAssistant}, roles(f.history(t, "deployer-1"))); diff != "" {
		t.Errorf("the refused message was written (-want +got):\n%s", diff)
	}
	f.turn(t, `{"agentId":"deployer","id":"deployer-1","message":"never mind","onPendingApprovals":"deny"}`)
	msgs := f.history(t, "deployer-1")
	if diff := cmp.Diff([]model.Role{model.RoleUser, model.RoleAssistant, model.RoleTool, model.RoleUser, model.RoleAssistant}, roles(msgs)); diff != "" {
		t.Fatalf("history (-want +got):\n%s", diff)
	}
	if got := string(msgs[2].Parts[0].Output); !strings.Contains(got, "the user sent a new message instead of answering") {
		t.Errorf("denied call's result = %s, want it to say why", got)
	}
	f.refused(t, f.secret, decide("deployer-1", approve(id)), http.StatusConflict)
}

// A policy decides on the input: approved calls run, denied ones are refused with the reason,
// shown the way the AI SDK shows automatic decisions.
func TestApprovalRules(t *testing.T) {
	f := newApprovalFixture(t)
	cs := f.turn(t, ask("guarded-1", "go"))
	var got []string
	for _, c := range cs {
		switch c["type"] {
		case "tool-output-available", "tool-approval-request", "tool-approval-response", "tool-output-denied":
			got = append(got, strings.TrimSpace(c["type"].(string)+" "+fmtBool(c["isAutomatic"])+fmtBool(c["approved"])))
		}
	}
	want := []string{"tool-output-available", "tool-approval-request automatic", "tool-approval-response refused", "tool-output-denied"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("chunks (-want +got):\n%s", diff)
	}
	if got := text(cs); !strings.Contains(got, "denied by policy: waits longer than 30 s are not allowed; the tool did not run") {
		t.Errorf("final text %q does not carry the policy's reason", got)
	}
}

func fmtBool(v any) string {
	switch v {
	case true:
		return "automatic"
	case false:
		return "refused"
	}
	return ""
}

// A request may make a policy stricter, and loosen it only where the policy allows.
func TestRequestOverrides(t *testing.T) {
	f := newApprovalFixture(t)
	cs := f.turn(t, `{"agentId":"parallel","id":"parallel-1","message":"go","toolApproval":{"current_time":"user-approval"}}`)
	if n := len(approvalRequests(cs)); n != 3 {
		t.Errorf("with current_time held by the request, %d approval requests, want 3", n)
	}
	res := f.refused(t, f.secret, `{"agentId":"parallel","id":"parallel-2","message":"go","toolApproval":{"test_async":"approved"}}`, http.StatusBadRequest)
	if res["field"] != "toolApproval.test_async" {
		t.Errorf("loosening answered %v, want a 400 naming toolApproval.test_async", res)
	}
	f.refused(t, f.secret, `{"agentId":"parallel","id":"parallel-3","message":"go","toolApproval":{"nope":"denied"}}`, http.StatusBadRequest)
}

// stepper holds test_async for approval, then, in the resumed pass, calls current_time, whose
// policy lets a request loosen it.
const stepper = `{
  "name": "stepper",
  "model": {"provider":"scripted","script":[
    {"toolCalls":[{"name":"test_async","input":{"delayMs":0,"echo":"deployed"}}]},
    {"toolCalls":[{"name":"current_time","input":{}}]},
    {"text":"Results: {{toolResults}}"}
  ]},
  "tools": {"test_async": {"needsApproval": true}, "current_time": {"needsApproval": {"allowRequestOverride": true}}}
}`

// The toolApproval of the request that started a turn holds for the rest of the turn: in the
// pass the answer to its approval resumes, which carries no toolApproval of its own.
func TestRequestOverridesHoldAcrossTheResume(t *testing.T) {
	f := newApprovalFixture(t)
	if _, err := f.agents.Create(context.Background(), f.acc.ID, "stepper", []byte(stepper)); err != nil {
		t.Fatal(err)
	}
	resume := func(t *testing.T, conversation, override string) []map[string]any {
		t.Helper()
		cs := f.turn(t, `{"agentId":"stepper","id":"`+conversation+`","message":"go","toolApproval":`+override+`}`)
		reqs := approvalRequests(cs)
		if len(reqs) != 1 {
			t.Fatalf("approval requests %v, want test_async's", reqs)
		}
		return f.turn(t, decide(conversation, approve(reqs[0]["approvalId"].(string))))
	}

	t.Run("loosened", func(t *testing.T) {
		cs := resume(t, "stepper-1", `{"current_time":"approved"}`)
		if reqs := approvalRequests(cs); len(reqs) != 0 {
			t.Errorf("the resumed pass asked for approval %v, want current_time to run as the request said", reqs)
		}
		if got := text(cs); !strings.Contains(got, `"deployed"`) || !strings.Contains(got, `"20`) {
			t.Errorf("final text %q, want test_async's and current_time's results", got)
		}
	})

	t.Run("tightened", func(t *testing.T) {
		cs := resume(t, "stepper-2", `{"current_time":"denied"}`)
		if reqs := approvalRequests(cs); len(reqs) != 1 || reqs[0]["isAutomatic"] != true {
			t.Errorf("the resumed pass asked for approval %v, want current_time denied automatically, as the request said", reqs)
		}
		if got := text(cs); !strings.Contains(got, "denied by policy") {
			t.Errorf("final text %q, want current_time denied by the request's policy", got)
		}
	})
}
