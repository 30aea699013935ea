package turn_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/provider"
	"github.com/agentharness/harness/shared/state/agentstore"
	"github.com/agentharness/harness/shared/state/secrets"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/tool/builtintools"
	"github.com/agentharness/harness/shared/turn"
)

// A blocking child still running when its caller's pass stops waiting (the invocation's margin)
// is handed over instead of failed: it stops, the call becomes an async call of the caller, the
// child's turn is queued for async-worker, which takes it up from its stored message, and its end
// settles the call and re-drives the caller once.
func TestABlockingChildPastItsCallersMarginIsHandedOver(t *testing.T) {
	stack := testenv.Stack(t)
	ctx := context.Background()
	st := store.New(stack.DB, stack.Tables)
	async := asynctools.NewStore(stack.DB, stack.AsyncResultsTable, nil)
	var mu sync.Mutex
	var queued []turn.Work
	var continued []string
	redriver := &asynctools.Redriver{Store: async, Send: func(_ context.Context, c asynctools.Continuation) error {
		mu.Lock()
		defer mu.Unlock()
		continued = append(continued, c.GroupID)
		return nil
	}}
	acc, _, err := st.CreateAccount(ctx, "handover", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	svc := agentstore.New(st, secrets.New(secrets.NewRandomLocal()), builtintools.ConfigChecks(), nil)
	for id, cfg := range map[string]string{
		"slow": `{"name":"slow","model":{"provider":"scripted","script":[{"text":"Done slowly.","delayMs":2500}]}}`,
	} {
		if _, err := svc.Create(ctx, acc.ID, id, []byte(cfg)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.Create(ctx, acc.ID, "caller", []byte(`{"name":"caller","model":{"provider":"scripted","script":[
		{"toolCalls":[{"name":"slow","input":{"message":"take your time"}}]},
		{"text":"Heard: {{toolResults}}"}]},
		"subagent":{"agents":[{"name":"slow","agentId":"slow"}]}}`)); err != nil {
		t.Fatal(err)
	}
	// The caller's pass waits a second: a lease of 3 s less a margin of 2 s.
	eng := turn.New(turn.Options{
		Store: st, Agents: svc, Async: async, Redriver: redriver, Lease: 3 * time.Second, WaitMargin: 2 * time.Second,
		Tools: func(_ context.Context, c map[string]json.RawMessage, vars tool.Vars) (*tool.Set, error) {
			return builtintools.Build(c, tool.Env{Getenv: os.Getenv, Vars: vars})
		},
		Model: func(_ context.Context, _ string, block json.RawMessage) (agent.Model, error) {
			return provider.New(block, provider.Config{})
		},
		Enqueue: func(_ context.Context, body string) error {
			var w turn.Work
			if err := json.Unmarshal([]byte(body), &w); err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			queued = append(queued, w)
			return nil
		},
	})
	run := func(req turn.Request, in turn.Input, delivery asynctools.Delivery) turn.Outcome {
		t.Helper()
		cfg, err := eng.Agent(ctx, acc.ID, req, false)
		if err != nil {
			t.Fatal(err)
		}
		r, err := eng.Begin(ctx, turn.Start{AccountID: acc.ID, Request: req, Input: in, Config: cfg, Delivery: delivery})
		if err != nil {
			t.Fatal(err)
		}
		o := r.Execute(ctx)
		if err := r.Finish(ctx, o, nil); err != nil {
			t.Fatal(err)
		}
		return o
	}

	msg := &model.Message{ID: "msg_ask", Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: "ask slow"}}}
	caller := run(turn.Request{ConversationID: "conv_handover", AgentID: "caller"}, turn.Input{Message: msg}, asynctools.Delivery{})
	if caller.Status != turn.StatusWaitingAsync || len(caller.PendingAsync) != 1 || caller.PendingAsync[0].ToolName != "slow" {
		t.Fatalf("the caller ended %+v, want it waiting for its call of slow", caller)
	}
	if len(queued) != 1 || queued[0].Request == nil || queued[0].Message == nil {
		t.Fatalf("queued %+v, want the child's turn once", queued)
	}
	w := queued[0]
	if ev, err := st.Event(ctx, acc.ID, w.EventID); err != nil || ev.Status != store.EventProcessing {
		t.Fatalf("the child's event is %+v (%v), want it still processing", ev, err)
	}

	// async-worker takes the child up where it stopped.
	child := run(*w.Request, turn.Input{Message: w.Message}, asynctools.Delivery{EventID: w.EventID, GroupSeed: w.GroupSeed})
	if child.Status != turn.StatusCompleted {
		t.Fatalf("the child's continuation ended %+v, want completed", child)
	}
	row, err := async.Result(ctx, caller.PendingAsync[0].ResultID)
	if err != nil {
		t.Fatal(err)
	}
	if row.Status != asynctools.Completed || !strings.Contains(string(row.Response), "Done slowly.") {
		t.Errorf("the call is %s %s, want completed with the child's answer", row.Status, row.Response)
	}
	if len(continued) != 1 || continued[0] != caller.AsyncGroup {
		t.Errorf("continuations %v, want the caller's group %s once", continued, caller.AsyncGroup)
	}
	history, err := st.Messages(ctx, acc.ID, w.Request.ConversationID, 1, 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	if len(history) != 2 || history[0].Text() != "take your time" || history[1].Text() != "Done slowly." {
		t.Errorf("the child's conversation holds %+v, want its message once and its answer", history)
	}
}
