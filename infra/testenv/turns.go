package testenv

import (
	"context"
	"encoding/json"
	"iter"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentharness/harness/functions/turnwire"
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

// Turns runs turns of scripted agents of one account on a turn engine over its own Stack,
// recording every model request by the system prompt it carries.
type Turns struct {
	T       testing.TB
	Ctx     context.Context
	Stack   *Resources
	Store   *store.Store
	Agents  *agentstore.Service
	Engine  *turn.Engine
	Account string

	mu       sync.Mutex
	requests map[string][]*model.Request
}

// recording is a model that records its requests before it answers them.
type recording struct {
	agent.Model
	e *Turns
}

func (r recording) Stream(ctx context.Context, req *model.Request) iter.Seq2[model.Event, error] {
	r.e.mu.Lock()
	r.e.requests[req.System] = append(r.e.requests[req.System], req)
	r.e.mu.Unlock()
	return r.Model.Stream(ctx, req)
}

// NewTurns makes the stack, an account and an engine with async tools and the builtin tools, its
// options changed by adjust (when set), and then, unless adjust set some, the toolsets the
// functions have (turnwire.Toolsets) on its models and tools, without MCP servers, skills or workspaces.
func NewTurns(t testing.TB, adjust func(*Turns, *turn.Options)) *Turns {
	t.Helper()
	stack := Stack(t)
	e := &Turns{T: t, Ctx: context.Background(), Stack: stack, Store: store.New(stack.DB, stack.Tables), requests: map[string][]*model.Request{}}
	async := asynctools.NewStore(stack.DB, stack.AsyncResultsTable, nil)
	acc, _, err := e.Store.CreateAccount(e.Ctx, "turns", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	e.Account = acc.ID
	e.Agents = agentstore.New(e.Store, secrets.New(secrets.NewRandomLocal()), builtintools.ConfigChecks(), nil)
	opts := turn.Options{
		Store: e.Store, Agents: e.Agents, Async: async,
		Redriver: &asynctools.Redriver{Store: async, Send: func(context.Context, asynctools.Continuation) error { return nil }},
		Tools: func(_ context.Context, c map[string]json.RawMessage, vars tool.Vars) (*tool.Set, error) {
			return builtintools.Build(c, tool.Env{Getenv: os.Getenv, Vars: vars})
		},
		Model: func(_ context.Context, _ string, block json.RawMessage) (agent.Model, error) {
			m, err := provider.New(block, provider.Config{})
			return recording{Model: m, e: e}, err
		},
	}
	if adjust != nil {
		adjust(e, &opts)
	}
	if opts.Toolsets == nil {
		opts.Toolsets = turnwire.Toolsets(opts.Model, opts.Tools, nil, nil, nil, nil)
	}
	e.Engine = turn.New(opts)
	return e
}

// Agent stores the agent id with the config cfg.
func (e *Turns) Agent(id, cfg string) {
	e.T.Helper()
	if _, err := e.Agents.Create(e.Ctx, e.Account, id, []byte(cfg)); err != nil {
		e.T.Fatal(err)
	}
}

// Run runs one request of a turn and returns how it ended and what it said.
func (e *Turns) Run(conv, agentID string, in turn.Input) (turn.Outcome, []turn.Event) {
	e.T.Helper()
	req := turn.Request{ConversationID: conv, AgentID: agentID}
	cfg, err := e.Engine.Agent(e.Ctx, e.Account, req, false)
	if err != nil {
		e.T.Fatal(err)
	}
	r, err := e.Engine.Begin(e.Ctx, turn.Start{AccountID: e.Account, Request: req, Input: in, Config: cfg})
	if err != nil {
		e.T.Fatal(err)
	}
	var events []turn.Event
	for ev := range r.Events(e.Ctx) {
		events = append(events, ev)
	}
	o := r.Outcome()
	if err := r.Finish(e.Ctx, o, nil); err != nil {
		e.T.Fatal(err)
	}
	return o, events
}

// Say runs a turn of a user message with text.
func (e *Turns) Say(conv, agentID, text string) (turn.Outcome, []turn.Event) {
	e.T.Helper()
	return e.Run(conv, agentID, turn.Input{Message: &model.Message{ID: "msg_" + conv, Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: text}}}})
}

// History is the conversation's stored messages.
func (e *Turns) History(conv string) []model.Message {
	e.T.Helper()
	msgs, err := e.Store.Messages(e.Ctx, e.Account, conv, 1, 1<<40)
	if err != nil {
		e.T.Fatal(err)
	}
	return msgs
}

// RequestsOf are the model requests whose system prompt is system.
func (e *Turns) RequestsOf(system string) []*model.Request {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.requests[system]
}

// RequestsWith are the model requests whose system prompt contains part.
func (e *Turns) RequestsWith(part string) []*model.Request {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []*model.Request
	for s, reqs := range e.requests {
		if strings.Contains(s, part) {
			out = append(out, reqs...)
		}
	}
	return out
}

// ResultOf is the result of the call of toolName among msgs, outside nested loops.
func ResultOf(t testing.TB, msgs []model.Message, toolName string) model.Part {
	t.Helper()
	for _, m := range msgs {
		for _, p := range m.Parts {
			if p.Type == model.PartToolResult && p.ToolName == toolName && !m.IsNested() {
				return p
			}
		}
	}
	t.Fatalf("no result of %s in %+v", toolName, msgs)
	return model.Part{}
}
