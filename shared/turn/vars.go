package turn

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/state/store"
)

// Thread variables (001 section 3). A conversation (a thread) holds variables, sealed at rest
// (store.Vars): a request sets them ("variables"), and a subagent's thread starts with a copy of
// its caller's, less those its agent declares scoped (childVars). A variable resolves from the
// request, then the thread. Every name an account writes (an agent's variables, immediate's
// nameEnv, descriptionEnv and scopedEnv, a subagent's optional flag) is a thread variable's
// only: the process environment holds the deployment's own secrets. Only a builtin tool falls
// back to the environment, by its own fixed name (builtintools), to authenticate its calls. No
// value is ever written to a message, a stream, a log or a response: only tools read them.

// MaxRequestVariables bounds the variables one request sets, and MaxVariableBytes one value.
const (
	MaxRequestVariables = 50
	MaxVariableBytes    = 4096
)

// CheckVariables refuses, naming the field, variables a request sets that are not well formed.
func CheckVariables(field string, vars map[string]string) error {
	if len(vars) > MaxRequestVariables {
		return &Refusal{Kind: Invalid, Detail: map[string]any{"field": field}, Message: fmt.Sprintf("%s: sets %d variables, more than %d", field, len(vars), MaxRequestVariables)}
	}
	for name, v := range vars {
		at := field + "." + name
		switch {
		case !agentconfig.VariableName.MatchString(name):
			return &Refusal{Kind: Invalid, Detail: map[string]any{"field": at}, Message: fmt.Sprintf("%s: %q is not a variable name (a letter or _, then up to 63 letters, digits or _)", field, name)}
		case v == "":
			return &Refusal{Kind: Invalid, Detail: map[string]any{"field": at}, Message: at + " is empty"}
		case len(v) > MaxVariableBytes:
			return &Refusal{Kind: TooLarge, Detail: map[string]any{"field": at}, Message: fmt.Sprintf("%s is longer than %d bytes", at, MaxVariableBytes)}
		}
	}
	return nil
}

// varAAD binds a sealed value to its account and name, so it opens only where it was sealed
// for: any thread of that account may hold a copy.
func varAAD(accountID, name string) []byte {
	return []byte("thread-var\x00" + accountID + "\x00" + name)
}

// sealVars seals values for a thread's store.
func (e *Engine) sealVars(ctx context.Context, accountID string, vars map[string]string) (store.Vars, error) {
	if len(vars) == 0 {
		return nil, nil
	}
	if e.opts.Sealer == nil {
		return nil, errors.New("thread variables are not configured here (no sealer)")
	}
	out := make(store.Vars, len(vars))
	for name, v := range vars {
		sealed, err := e.opts.Sealer.Seal(ctx, []byte(v), varAAD(accountID, name))
		if err != nil {
			return nil, fmt.Errorf("sealing variable %s: %w", name, err)
		}
		out[name] = sealed
	}
	return out, nil
}

// Thread is the thread an agent is built for, as its variables go: those the request sets, and
// the thread's stored ones, read when first needed. A nil *Thread is none (a check that runs no
// turn): no variables, and none required.
type Thread struct {
	e         *Engine
	ctx       context.Context
	accountID string
	request   map[string]string
	load      func() (store.Vars, error)

	mu     sync.Mutex
	stored store.Vars
	loaded bool
	err    error
}

// threadOf is the thread of a request, whose stored variables load reads.
func (e *Engine) threadOf(ctx context.Context, accountID string, request map[string]string, load func() (store.Vars, error)) *Thread {
	return &Thread{e: e, ctx: ctx, accountID: accountID, request: request, load: load}
}

// storedThread is a thread whose stored variables are known.
func (e *Engine) storedThread(ctx context.Context, accountID string, vars store.Vars) *Thread {
	return e.threadOf(ctx, accountID, nil, func() (store.Vars, error) { return vars, nil })
}

// requestThread is the thread of req: its variables, then its conversation's, read from its
// head when first needed.
func (e *Engine) requestThread(ctx context.Context, accountID string, req Request) *Thread {
	return e.threadOf(ctx, accountID, req.Variables, func() (store.Vars, error) {
		head, err := e.opts.Store.ConversationHead(ctx, accountID, req.ConversationID)
		if errors.Is(err, store.ErrNotFound) || req.ConversationID == "" {
			return req.Sealed, nil
		}
		return withSealed(head.Vars, req.Sealed), err
	})
}

// withSealed is the variables of a thread with those a request sets, sealed, put over them.
func withSealed(thread, request store.Vars) store.Vars {
	if len(request) == 0 {
		return thread
	}
	out := maps.Clone(thread)
	if out == nil {
		out = store.Vars{}
	}
	maps.Copy(out, request)
	return out
}

// SealVariables seals the variables req sets, for a request that is queued: it carries them
// sealed (Request.Sealed), never in the clear.
func (e *Engine) SealVariables(ctx context.Context, accountID string, req *Request) error {
	sealed, err := e.sealVars(ctx, accountID, req.Variables)
	if err != nil {
		return err
	}
	req.Sealed, req.Variables = withSealed(req.Sealed, sealed), nil
	return nil
}

// keepVariables stores on the conversation, once its lease is held, the variables the request
// sets; sealed first (SealVariables) so that the lease is not held while the sealer works.
func (e *Engine) keepVariables(ctx context.Context, lease *store.Lease, req Request) error {
	if len(req.Sealed) == 0 {
		return nil
	}
	return lease.SetVars(ctx, req.Sealed)
}

// Get resolves name from the thread: the request's value, else the stored one; "" when the
// thread has none (or its variables could not be read: Err says so).
func (t *Thread) Get(name string) string {
	if t == nil {
		return ""
	}
	if v, ok := t.request[name]; ok {
		return v
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.loaded {
		t.stored, t.err = t.load()
		t.loaded = true
	}
	sealed, ok := t.stored[name]
	if !ok || t.err != nil {
		return ""
	}
	if t.e.opts.Sealer == nil {
		t.err = errors.New("thread variables are not configured here (no sealer)")
		return ""
	}
	plain, err := t.e.opts.Sealer.Open(t.ctx, sealed, varAAD(t.accountID, name))
	if err != nil {
		t.err = fmt.Errorf("opening variable %s: %w", name, err)
		return ""
	}
	return string(plain)
}

// Err is what reading or opening the thread's variables failed with.
func (t *Thread) Err() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// missingVariables are the agent's required variables the thread does not have.
func missingVariables(t *Thread, decl agentconfig.Variables) []agentconfig.Variable {
	var out []agentconfig.Variable
	for _, v := range decl {
		if v.Required && t.Get(v.Name) == "" {
			out = append(out, v)
		}
	}
	return out
}

// childVars is the copy of its caller's variables a subagent's thread starts with: all but
// those the subagent's agent declares scoped, which flow only from a thread they were given to.
func childVars(caller store.Vars, decl agentconfig.Variables) store.Vars {
	out := maps.Clone(caller)
	for _, v := range decl {
		if v.Scoped {
			delete(out, v.Name)
		}
	}
	return out
}

// MissingVariablesError is an agent's required variables a thread does not resolve.
type MissingVariablesError struct {
	AgentID string
	Missing []agentconfig.Variable
}

func (e *MissingVariablesError) Error() string {
	text := "agent " + e.AgentID + " needs the variable"
	if len(e.Missing) > 1 {
		text += "s"
	}
	for i, v := range e.Missing {
		sep := " "
		if i > 0 {
			sep = ", "
		}
		text += sep + v.Name
		if v.Description != "" {
			text += " (" + v.Description + ")"
		}
	}
	return text
}

// missingRefusal refuses a request whose thread lacks an agent's required variables.
func missingRefusal(err *MissingVariablesError) *Refusal {
	return &Refusal{Kind: Invalid, Detail: map[string]any{"field": "variables." + err.Missing[0].Name}, Cause: err,
		Message: err.Error() + `, which the conversation does not have: set it in the request's "variables"`}
}
