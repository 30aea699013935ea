package turn_test

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/state/streamlog"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/tool/builtintools"
	"github.com/agentharness/harness/shared/turn"
)

// The agents of an engineEnv, all on scripted models.
const (
	// plainAgent answers at once.
	plainAgent = `{"name":"plain","model":{"provider":"scripted","script":[{"text":"Hello."}]}}`
	// askerAgent calls test_async, which needs approval, then answers with its result.
	askerAgent = `{"name":"asker","model":{"provider":"scripted","script":[
		{"toolCalls":[{"name":"test_async","input":{"echo":"done"}}]},
		{"text":"Result: {{toolResults}}"}]},
		"tools":{"test_async":{"needsApproval":true}}}`
	// dispatcherAgent calls dispatch, whose answer comes from outside, then answers with it.
	dispatcherAgent = `{"name":"dispatcher","model":{"provider":"scripted","script":[
		{"toolCalls":[{"name":"dispatch","input":{}}]},
		{"text":"Got {{toolResults}}"}]}}`
	// talkerAgent says part of an answer, then stalls for a minute before it ends.
	talkerAgent = `{"name":"talker","model":{"provider":"scripted","script":[{"text":"Part of an answer","stallMs":60000}]}}`
)

// engineEnv is the engine of one account over the test stack's tables, async rows and stream
// log, with the agents above. Every agent also has dispatch, an external-dispatch tool whose
// calls wait for an answer from outside; the continuations the redriver sends are kept, and the
// model calls counted.
type engineEnv struct {
	*turn.Engine
	turns   *testenv.Turns
	t       *testing.T
	ctx     context.Context
	store   *store.Store
	async   *asynctools.Store
	redrive *asynctools.Redriver
	account string

	mu         sync.Mutex
	sent       []string // the groups whose continuation was sent, in order
	modelCalls int
}

func newEngineEnv(t *testing.T) *engineEnv {
	t.Helper()
	e := &engineEnv{t: t, ctx: context.Background()}
	dispatch := tool.Tool{Name: "dispatch", Description: "Hands the work to an outside worker.", Async: asynctools.ExternalDispatch,
		Execute: func(context.Context, json.RawMessage) (any, error) { return map[string]bool{"queued": true}, nil }}
	turns := testenv.NewTurns(t, func(ts *testenv.Turns, o *turn.Options) {
		e.async = o.Async
		e.redrive = &asynctools.Redriver{Store: o.Async, Send: func(_ context.Context, c asynctools.Continuation) error {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.sent = append(e.sent, c.GroupID)
			return nil
		}}
		o.Redriver, o.StopPoll, o.Logger = e.redrive, 50*time.Millisecond, slog.New(slog.DiscardHandler)
		o.Streams = streamlog.New(ts.Stack.DB, ts.Stack.Name("StreamsTable"), streamlog.Options{})
		o.Tools = func(_ context.Context, c map[string]json.RawMessage, vars tool.Vars) (*tool.Set, error) {
			set, err := builtintools.Build(c, tool.Env{Getenv: func(string) string { return "" }, Vars: vars})
			if err != nil {
				return nil, err
			}
			return set.With(dispatch)
		}
		build := o.Model
		o.Model = func(ctx context.Context, accountID string, block json.RawMessage) (agent.Model, error) {
			m, err := build(ctx, accountID, block)
			return countedModel{Model: m, e: e}, err
		}
	})
	e.turns, e.Engine, e.store, e.account = turns, turns.Engine, turns.Store, turns.Account
	for id, cfg := range map[string]string{"plain": plainAgent, "asker": askerAgent, "dispatcher": dispatcherAgent, "talker": talkerAgent} {
		turns.Agent(id, cfg)
	}
	return e
}

// countedModel counts the calls of the model it wraps.
type countedModel struct {
	agent.Model
	e *engineEnv
}

func (m countedModel) Stream(ctx context.Context, req *model.Request) iter.Seq2[model.Event, error] {
	m.e.mu.Lock()
	m.e.modelCalls++
	m.e.mu.Unlock()
	return m.Model.Stream(ctx, req)
}

// calls returns how many model calls the agents made so far.
func (e *engineEnv) calls() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.modelCalls
}

// sentGroups returns the groups whose continuation the redriver sent so far.
func (e *engineEnv) sentGroups() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.sent)
}

// begin begins req's turn with in, as /async's worker does: the agent loaded, its event the
// request's.
func (e *engineEnv) begin(req turn.Request, in turn.Input) (*turn.Run, error) {
	e.t.Helper()
	cfg, err := e.Agent(e.ctx, e.account, req, false)
	if err != nil {
		return nil, err
	}
	return e.Begin(e.ctx, turn.Start{AccountID: e.account, Request: req, Input: in, Config: cfg,
		Delivery: asynctools.Delivery{EventID: req.EventID}})
}

// run begins req's turn with in and runs it to its end, which it concludes.
func (e *engineEnv) run(req turn.Request, in turn.Input) turn.Outcome {
	e.t.Helper()
	r, err := e.begin(req, in)
	if err != nil {
		e.t.Fatalf("Begin %s: %v", req.ConversationID, err)
	}
	o := r.Execute(e.ctx)
	if err := r.Finish(e.ctx, o, nil); err != nil {
		e.t.Fatalf("Finish %s: %v", req.ConversationID, err)
	}
	return o
}

// held runs asker on conv until it waits for its call's approval, and returns the approval.
func (e *engineEnv) held(conv string) turn.PendingApproval {
	e.t.Helper()
	o := e.run(turn.Request{ConversationID: conv, AgentID: "asker"}, says("deploy"))
	if o.Status != turn.StatusWaiting || len(o.PendingApprovals) != 1 {
		e.t.Fatalf("asker ended %s (%s) with %v, want it waiting for one approval", o.Status, o.Error, o.PendingApprovals)
	}
	return o.PendingApprovals[0]
}

// dispatched runs dispatcher on conv, under event eventID (none when empty), until it waits for
// its outside call, and returns the dispatch group and the call's result id.
func (e *engineEnv) dispatched(conv, eventID string) (group, resultID string) {
	e.t.Helper()
	o := e.run(turn.Request{ConversationID: conv, AgentID: "dispatcher", EventID: eventID}, says("go"))
	if o.Status != turn.StatusWaitingAsync || o.AsyncGroup == "" || len(o.PendingAsync) != 1 {
		e.t.Fatalf("dispatcher ended %s (%s) waiting for %v, want it waiting for one outside call", o.Status, o.Error, o.PendingAsync)
	}
	return o.AsyncGroup, o.PendingAsync[0].ResultID
}

// row loads the async call resultID.
func (e *engineEnv) row(resultID string) asynctools.Result {
	e.t.Helper()
	row, err := e.async.Result(e.ctx, resultID)
	if err != nil {
		e.t.Fatalf("loading %s: %v", resultID, err)
	}
	return row
}

// otherAccount creates another account and returns its id.
func (e *engineEnv) otherAccount() string {
	e.t.Helper()
	acc, _, err := e.store.CreateAccount(e.ctx, "other", time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	return acc.ID
}

// answer completes an outside call with response as its worker would.
func (e *engineEnv) answer(resultID, response string) error {
	e.t.Helper()
	_, err := asynctools.SettleExternal(e.ctx, e.async, e.redrive, e.row(resultID), asynctools.Outcome{Status: asynctools.Completed, Response: json.RawMessage(response)}, time.Now())
	return err
}

// history returns conv's stored messages.
func (e *engineEnv) history(conv string) []model.Message { return e.turns.History(conv) }

// says is a request's new user message.
func says(text string) turn.Input {
	return turn.Input{Message: &model.Message{ID: turn.NewMessageID(), Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: text}}}}
}

// decides is a request's decision on one held call.
func decides(a turn.PendingApproval, approved bool) turn.Input {
	return turn.Input{Decisions: []turn.Decision{{ApprovalID: a.ApprovalID, Approved: &approved, ToolCallID: a.ToolCallID}}}
}

// refusedAs fails unless err is a refusal of kind, and returns it.
func refusedAs(t *testing.T, what string, err error, kind turn.RefusalKind) *turn.Refusal {
	t.Helper()
	var ref *turn.Refusal
	if !errors.As(err, &ref) || ref.Kind != kind {
		t.Fatalf("%s: %v (%T), want a refusal of kind %d", what, err, err, kind)
	}
	return ref
}

// texts are the messages' roles and texts, "role:text".
func texts(msgs []model.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Role)+":"+m.Text())
	}
	return out
}
