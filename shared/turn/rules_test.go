package turn_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/approval"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/provider"
	"github.com/agentharness/harness/shared/state/agentstore"
	"github.com/agentharness/harness/shared/state/secrets"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/builtintools"
	"github.com/agentharness/harness/shared/turn"
)

// The approval and override rules, through the engine alone: no HTTP, no queue, DynamoDB Local
// for the state. Each transport maps these refusals to its wire (chathttp's and appserver's tests
// check that mapping).

// deployer calls test_async, which needs approval, then answers with its result.
const deployer = `{"name":"deployer","model":{"provider":"scripted","script":[
	{"toolCalls":[{"name":"test_async","input":{"delayMs":0,"echo":"deployed"}}]},
	{"text":"Result: {{toolResults}}"}]},
	"tools":{"test_async":{"needsApproval":true},"current_time":{}}}`

type rules struct {
	eng     *turn.Engine
	store   *store.Store
	account string
	now     time.Time
}

func newRules(t *testing.T) *rules {
	t.Helper()
	db := testenv.DynamoDB(t)
	st := store.New(db, testenv.Tables(t, db))
	ctx := context.Background()
	acc, _, err := st.CreateAccount(ctx, "rules", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	svc := agentstore.New(st, secrets.New(secrets.NewRandomLocal()), builtintools.ConfigChecks(), nil)
	if _, err := svc.Create(ctx, acc.ID, "deployer", []byte(deployer)); err != nil {
		t.Fatal(err)
	}
	r := &rules{store: st, account: acc.ID, now: time.Now()}
	r.eng = turn.New(turn.Options{
		Store: st, Agents: svc, Now: func() time.Time { return r.now },
		Tools: func(_ context.Context, c map[string]json.RawMessage, _ tool.Vars) (*tool.Set, error) {
			return builtintools.Build(c, tool.Env{Getenv: os.Getenv})
		},
		Model: func(_ context.Context, _ string, block json.RawMessage) (agent.Model, error) {
			return provider.New(block, provider.Config{})
		},
	})
	return r
}

// begin runs Begin with the request and input on the deployer's conversation conv.
func (r *rules) begin(t *testing.T, conv string, req turn.Request, in turn.Input) (*turn.Run, error) {
	t.Helper()
	req.ConversationID, req.AgentID = conv, "deployer"
	cfg, err := r.eng.Agent(context.Background(), r.account, req, false)
	if err != nil {
		return nil, err
	}
	return r.eng.Begin(context.Background(), turn.Start{AccountID: r.account, Request: req, Input: in, Config: cfg})
}

// run begins and runs a turn to its end, which it concludes.
func (r *rules) run(t *testing.T, conv string, req turn.Request, in turn.Input) turn.Outcome {
	t.Helper()
	run, err := r.begin(t, conv, req, in)
	if err != nil {
		t.Fatalf("Begin: %v", err)
	}
	o := run.Execute(context.Background())
	if err := run.Finish(context.Background(), o, nil); err != nil {
		t.Fatal(err)
	}
	return o
}

func message(text string) turn.Input {
	return turn.Input{Message: &model.Message{ID: turn.NewMessageID(), Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: text}}}}
}

func decide(approvalID string, approved bool, toolCallID string) turn.Input {
	return turn.Input{Decisions: []turn.Decision{{ApprovalID: approvalID, Approved: &approved, ToolCallID: toolCallID}}}
}

// held runs a turn that stops for approval and returns the approval.
func (r *rules) held(t *testing.T, conv string) turn.PendingApproval {
	t.Helper()
	o := r.run(t, conv, turn.Request{}, message("deploy"))
	if o.Status != turn.StatusWaiting || len(o.PendingApprovals) != 1 {
		t.Fatalf("the turn ended %s with %v, want it waiting for one approval", o.Status, o.PendingApprovals)
	}
	return o.PendingApprovals[0]
}

// wantRefusal fails unless err is a refusal of kind with detail[key] == value (when key is set).
func wantRefusal(t *testing.T, what string, err error, kind turn.RefusalKind, key string, value any) *turn.Refusal {
	t.Helper()
	var ref *turn.Refusal
	if !errors.As(err, &ref) || ref.Kind != kind {
		t.Fatalf("%s: got %v (%T), want a refusal of kind %d", what, err, err, kind)
	}
	if key != "" && ref.Detail[key] != value {
		t.Fatalf("%s: refusal detail %v, want %s = %v", what, ref.Detail, key, value)
	}
	return ref
}

func TestANewMessageWhileApprovalsWait(t *testing.T) {
	r := newRules(t)
	a := r.held(t, "c1")

	_, err := r.begin(t, "c1", turn.Request{}, message("something else"))
	ref := wantRefusal(t, "a new message", err, turn.Conflict, "", nil)
	if ps, _ := ref.Detail["pendingApprovals"].([]turn.PendingApproval); len(ps) != 1 || ps[0].ApprovalID != a.ApprovalID {
		t.Fatalf("the refusal lists %v, want approval %s", ref.Detail["pendingApprovals"], a.ApprovalID)
	}
	// Precheck, which /async and the App Server run before queueing, refuses it the same way.
	err = r.eng.Precheck(context.Background(), r.account, turn.Request{ConversationID: "c1", AgentID: "deployer"}, message("something else"))
	wantRefusal(t, "Precheck of a new message", err, turn.Conflict, "", nil)

	// With onPendingApprovals deny, the held call is denied and the message runs.
	o := r.run(t, "c1", turn.Request{OnPendingApprovals: "deny"}, message("something else"))
	if o.Status == turn.StatusFailed {
		t.Fatalf("the message after denying ended %s: %s", o.Status, o.Error)
	}
	got, err := r.store.Approval(context.Background(), r.account, a.ApprovalID)
	if err != nil || got.Status != store.ApprovalDenied {
		t.Fatalf("approval %s is %s (%v), want denied", a.ApprovalID, got.Status, err)
	}
}

func TestDecisionRules(t *testing.T) {
	r := newRules(t)
	a := r.held(t, "c1")

	_, err := r.begin(t, "c1", turn.Request{}, decide("apr_unknown", true, ""))
	wantRefusal(t, "an unknown approval", err, turn.NotFound, "", nil)

	_, err = r.begin(t, "c1", turn.Request{}, decide(a.ApprovalID, true, "call_other"))
	wantRefusal(t, "a decision for another call", err, turn.Conflict, "approvalId", a.ApprovalID)

	// A request that records its decision and stops before the step resumes leaves the same
	// decision acceptable again, at Precheck and under the lease alike; another is refused.
	ctx := context.Background()
	lease, err := r.store.TakeLease(ctx, r.account, "c1", "deployer", r.now, r.now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Settle(ctx, []store.Settlement{{ApprovalID: a.ApprovalID, Status: store.ApprovalApproved}}, r.now); err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	req := turn.Request{ConversationID: "c1", AgentID: "deployer"}
	if err := r.eng.Precheck(context.Background(), r.account, req, decide(a.ApprovalID, true, a.ToolCallID)); err != nil {
		t.Fatalf("Precheck of the recorded decision again: %v", err)
	}
	err = r.eng.Precheck(context.Background(), r.account, req, decide(a.ApprovalID, false, a.ToolCallID))
	wantRefusal(t, "Precheck of the opposite decision", err, turn.Conflict, "status", store.ApprovalApproved)
	_, err = r.begin(t, "c1", turn.Request{}, decide(a.ApprovalID, false, a.ToolCallID))
	wantRefusal(t, "Begin with the opposite decision", err, turn.Conflict, "status", store.ApprovalApproved)
	if o := r.run(t, "c1", turn.Request{}, decide(a.ApprovalID, true, a.ToolCallID)); o.Status != turn.StatusCompleted {
		t.Fatalf("the recorded decision again ended %s (%s), want the step to resume and complete", o.Status, o.Error)
	}
}

func TestAnExpiredApprovalIsRefusedAtPrecheckAndBegin(t *testing.T) {
	r := newRules(t)
	a := r.held(t, "c1")
	r.now = r.now.Add(turn.DefaultApprovalTimeout + time.Minute)
	req := turn.Request{ConversationID: "c1", AgentID: "deployer"}
	err := r.eng.Precheck(context.Background(), r.account, req, decide(a.ApprovalID, true, a.ToolCallID))
	wantRefusal(t, "Precheck after the deadline", err, turn.Conflict, "status", store.ApprovalExpired)
	_, err = r.begin(t, "c1", turn.Request{}, decide(a.ApprovalID, true, a.ToolCallID))
	wantRefusal(t, "Begin after the deadline", err, turn.Conflict, "status", store.ApprovalExpired)
}

func TestBusyConversation(t *testing.T) {
	r := newRules(t)
	run, err := r.begin(t, "c1", turn.Request{}, message("first"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.begin(t, "c1", turn.Request{}, message("second"))
	ref := wantRefusal(t, "a second turn", err, turn.Busy, "", nil)
	if !errors.Is(ref, turn.ErrBusy) {
		t.Fatalf("the busy refusal %v does not wrap ErrBusy", ref)
	}
	if err := run.Finish(context.Background(), run.Execute(context.Background()), nil); err != nil {
		t.Fatal(err)
	}
}

func TestToolApprovalOverrides(t *testing.T) {
	r := newRules(t)
	// An override naming a tool the agent does not have is refused, naming the field.
	_, err := r.eng.Agent(context.Background(), r.account, turn.Request{AgentID: "deployer", ToolApproval: map[string]approval.Status{"rm_rf": approval.Approved}}, false)
	wantRefusal(t, "an override of an unknown tool", err, turn.Invalid, "field", "toolApproval.rm_rf")

	// A request may not loosen a tool's needsApproval unless the agent allows it.
	_, err = r.eng.Agent(context.Background(), r.account, turn.Request{AgentID: "deployer", ToolApproval: map[string]approval.Status{"test_async": approval.Approved}}, false)
	wantRefusal(t, "loosening test_async", err, turn.Invalid, "field", "toolApproval.test_async")

	// A denied override refuses it without asking.
	o := r.run(t, "c2", turn.Request{ToolApproval: map[string]approval.Status{"test_async": approval.Denied}}, message("deploy"))
	if o.Status != turn.StatusCompleted || len(o.PendingApprovals) != 0 {
		t.Fatalf("with test_async denied by override the turn ended %s with %v, want completed without asking", o.Status, o.PendingApprovals)
	}
}

// A transport ranges over a run's events; one that stops early (its client went away) cancels
// the run, which ends cancelled and leaves the conversation free once concluded.
func TestStoppingTheEventsCancelsTheRun(t *testing.T) {
	r := newRules(t)
	ctx := context.Background()
	run, err := r.begin(t, "c1", turn.Request{}, message("deploy"))
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for range run.Events(ctx) {
		seen++
		break
	}
	o := run.Outcome()
	if seen != 1 || o.Status != turn.StatusCancelled {
		t.Fatalf("after one event the run ended %s (%d events), want cancelled", o.Status, seen)
	}
	if err := run.Finish(ctx, o, nil); err != nil {
		t.Fatal(err)
	}
	if o := r.run(t, "c1", turn.Request{}, message("deploy")); o.Status != turn.StatusWaiting {
		t.Fatalf("the next turn ended %s (%s), want it to run and wait for approval", o.Status, o.Error)
	}
}
