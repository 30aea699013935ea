package turn

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/state/threadvars"
)

// Thread variables (001 section 3). A conversation (a thread) holds variables, sealed at rest
// (threadvars): a request sets them ("variables"), and a subagent's thread starts with a copy of
// its caller's, less those its agent declares scoped. A variable resolves from the request, then
// the thread. Every name an account writes (an agent's variables, immediate's
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

// threadOf is the thread of a request, whose stored variables load reads.
func (e *Engine) threadOf(ctx context.Context, accountID string, request map[string]string, load func() (store.Vars, error)) *threadvars.Thread {
	return threadvars.New(ctx, e.opts.Sealer, accountID, request, load)
}

// storedThread is a thread whose stored variables are known.
func (e *Engine) storedThread(ctx context.Context, accountID string, vars store.Vars) *threadvars.Thread {
	return e.threadOf(ctx, accountID, nil, func() (store.Vars, error) { return vars, nil })
}

// requestThread is the thread of req: its variables, then its conversation's, read from its
// head when first needed.
func (e *Engine) requestThread(ctx context.Context, accountID string, req Request) *threadvars.Thread {
	return e.threadOf(ctx, accountID, req.Variables, func() (store.Vars, error) {
		head, err := e.opts.Store.ConversationHead(ctx, accountID, req.ConversationID)
		if errors.Is(err, store.ErrNotFound) || req.ConversationID == "" {
			return req.Sealed, nil
		}
		return threadvars.With(head.Vars, req.Sealed), err
	})
}

// SealVariables seals the variables req sets, for a request that is queued: it carries them
// sealed (Request.Sealed), never in the clear.
func (e *Engine) SealVariables(ctx context.Context, accountID string, req *Request) error {
	sealed, err := threadvars.Seal(ctx, e.opts.Sealer, accountID, req.Variables)
	if err != nil {
		return err
	}
	req.Sealed, req.Variables = threadvars.With(req.Sealed, sealed), nil
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
