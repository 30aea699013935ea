package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/state/threadvars"
	"github.com/agentharness/harness/shared/turn/subagent"
)

// A subagent_create whose agent needs variables the calling thread does not give it (seed 001
// section 6) records a VarRequest on the calling conversation and answers the model with the
// structured error subagent_env_required, naming the request; GET and POST
// /threads/{parentThreadId}/variables/{requestId} show what is needed and, given the values,
// boot the instance at once (BootInstance).

// EnvRequiredError is subagent_create's answer when its instance needs variables.
type EnvRequiredError struct {
	RequestID    string          `json:"requestId"`
	VariablesURL string          `json:"variablesUrl"`
	Agent        string          `json:"agent"`
	Name         string          `json:"name"`
	Missing      []store.VarNeed `json:"missing"`
}

func (e *EnvRequiredError) Error() string {
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
		*EnvRequiredError
	}{"subagent_env_required", e})
	return "subagent_env_required: " + string(b)
}

// VariablesPath is where the variables endpoint shows and answers a request of a thread.
func VariablesPath(threadID, requestID string) string {
	return "/threads/" + threadID + "/variables/" + requestID
}

// deferInstance records the instance subagent_create could not boot and returns its error.
func (e *Engine) deferInstance(ctx context.Context, d *invocation, t agentconfig.SubagentTool, instance, message string, depth int, missing *MissingVariablesError) error {
	r := store.VarRequest{
		ID: store.NewID("vrq_"), Tool: t.Name, AgentID: t.AgentID, Name: instance, Message: message,
		MaxInstances: t.Resumable.Instances(), CreatedAt: e.opts.Now(),
		Parent: store.Parent{ConversationID: d.conversationID, TurnKey: d.delivery.TurnKey, Tool: instance, EventID: d.turnID, Depth: depth, Explicit: t.Resumable.Explicit(), EndUser: d.lease.EndUser()},
	}
	for _, v := range missing.Missing {
		r.Missing = append(r.Missing, store.VarNeed{Name: v.Name, Type: v.Type, Scoped: v.Scoped, Description: v.Description})
	}
	if err := e.opts.Store.AddVarRequest(ctx, d.accountID, d.conversationID, r); err != nil {
		return err
	}
	d.log.InfoContext(ctx, "subagent instance deferred for its variables", "requestId", r.ID, "agent", t.Name)
	return &EnvRequiredError{RequestID: r.ID, VariablesURL: VariablesPath(d.conversationID, r.ID), Agent: t.Name, Name: instance, Missing: r.Missing}
}

// VariablesRequest is a thread's request for variables, as the variables endpoint shows it.
func (e *Engine) VariablesRequest(ctx context.Context, accountID, threadID, requestID string) (store.VarRequest, error) {
	r, _, err := e.opts.Store.VarRequest(ctx, accountID, threadID, requestID)
	if errors.Is(err, store.ErrNotFound) {
		return r, &Refusal{Kind: NotFound, Message: "thread " + threadID + " has no variables request " + requestID}
	}
	return r, err
}

// BootInstance boots the instance of a thread's request for variables with the values given:
// they are stored, sealed, on the instance's new thread, the instance is recorded on the
// calling conversation, and its first message queued for async-worker as a turn of its own.
// Values for names the request does not need, missing values and a request booted already are
// refused; a request boots once.
func (e *Engine) BootInstance(ctx context.Context, accountID, threadID, requestID string, values map[string]string) (store.Booted, error) {
	r, caller, err := e.opts.Store.VarRequest(ctx, accountID, threadID, requestID)
	if errors.Is(err, store.ErrNotFound) {
		return store.Booted{}, &Refusal{Kind: NotFound, Message: "thread " + threadID + " has no variables request " + requestID}
	}
	if err != nil {
		return store.Booted{}, err
	}
	if r.Booted != nil {
		return *r.Booted, &Refusal{Kind: Conflict, Message: "variables request " + requestID + " booted its instance already", Detail: map[string]any{"threadId": r.Booted.ThreadID, "eventId": r.Booted.EventID}}
	}
	for _, name := range slices.Sorted(maps.Keys(values)) {
		if !slices.ContainsFunc(r.Missing, func(v store.VarNeed) bool { return v.Name == name }) {
			return store.Booted{}, &Refusal{Kind: Invalid, Detail: map[string]any{"field": "variables." + name}, Message: fmt.Sprintf("variables.%s: the instance does not need %s", name, name)}
		}
	}
	if e.opts.Enqueue == nil {
		return store.Booted{}, errors.New("subagent instances run on async-worker, and this function has no queue to it")
	}
	sealed, err := threadvars.Seal(ctx, e.opts.Sealer, accountID, values)
	if err != nil {
		return store.Booted{}, err
	}
	stored, err := e.opts.Agents.Load(ctx, accountID, r.AgentID)
	var vars store.Vars
	if err == nil {
		vars = threadvars.With(threadvars.ForChild(caller, stored.Variables), sealed)
	}
	// A check only: the instance's own turn builds it for its conversation.
	_, err = e.buildAgent(ctx, accountID, r.AgentID, builtFor{}, stored, err, e.storedThread(ctx, accountID, vars))
	if err != nil {
		return store.Booted{}, err
	}
	child := subagent.NamedConversationID(accountID, threadID, r.Name)
	b := store.Booted{ThreadID: child, EventID: store.NewID("evt_"), At: e.opts.Now()}
	if err := e.opts.Store.BootVarRequest(ctx, accountID, threadID, r, b); errors.Is(err, store.ErrConflict) {
		return store.Booted{}, &Refusal{Kind: Conflict, Message: "variables request " + requestID + " booted its instance already"}
	} else if err != nil {
		return store.Booted{}, err
	}
	in := store.Instance{Name: r.Name, Agent: r.Tool, AgentID: r.AgentID, ThreadID: child}
	switch err := e.opts.Store.AddInstance(ctx, accountID, threadID, in, r.MaxInstances); {
	case errors.Is(err, store.ErrInstanceExists):
		return store.Booted{}, &Refusal{Kind: Conflict, Message: fmt.Sprintf("thread %s has an instance named %q already", threadID, r.Name)}
	case errors.Is(err, store.ErrInstanceLimit):
		return store.Booted{}, &Refusal{Kind: Conflict, Message: fmt.Sprintf("thread %s has %d instances of %s, its resumable.maxInstances", threadID, r.MaxInstances, r.Tool)}
	case err != nil:
		return store.Booted{}, err
	}
	if err := e.opts.Store.CreateChild(ctx, accountID, child, r.AgentID, r.Parent, vars); err != nil {
		return store.Booted{}, err
	}
	msg := model.Message{ID: "msg_" + requestID, Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: r.Message}}}
	return b, e.Queue(ctx, Queued{
		AccountID: accountID, Request: Request{ConversationID: child, AgentID: r.AgentID, EventID: b.EventID},
		Input: Input{Message: &msg}, CheckLater: true,
	})
}
