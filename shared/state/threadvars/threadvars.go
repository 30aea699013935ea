// Package threadvars keeps a thread's variables (001 section 3) sealed at rest (store.Vars):
// each value is bound to its account and name, so it opens only where it was sealed for, and any
// thread of that account may hold a copy. A Thread resolves them for an agent built for it: the
// values a request sets, then the thread's own.
package threadvars

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/state/store"
)

// Sealer seals and opens values, bound to aad (agentstore.Sealer).
type Sealer interface {
	Seal(ctx context.Context, plaintext, aad []byte) ([]byte, error)
	Open(ctx context.Context, sealed, aad []byte) ([]byte, error)
}

var errNoSealer = errors.New("thread variables are not configured here (no sealer)")

// aad binds a sealed value to its account and name.
func aad(accountID, name string) []byte {
	return []byte("thread-var\x00" + accountID + "\x00" + name)
}

// Seal seals values for a thread's store; s may be nil when there are none.
func Seal(ctx context.Context, s Sealer, accountID string, vars map[string]string) (store.Vars, error) {
	if len(vars) == 0 {
		return nil, nil
	}
	if s == nil {
		return nil, errNoSealer
	}
	out := make(store.Vars, len(vars))
	for name, v := range vars {
		sealed, err := s.Seal(ctx, []byte(v), aad(accountID, name))
		if err != nil {
			return nil, fmt.Errorf("sealing variable %s: %w", name, err)
		}
		out[name] = sealed
	}
	return out, nil
}

// With is the variables of a thread with those a request sets, sealed, put over them.
func With(thread, request store.Vars) store.Vars {
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

// ForChild is the copy of its caller's variables a subagent's thread starts with: all but those
// the subagent's agent declares scoped, which flow only from a thread they were given to.
func ForChild(caller store.Vars, decl agentconfig.Variables) store.Vars {
	out := maps.Clone(caller)
	for _, v := range decl {
		if v.Scoped {
			delete(out, v.Name)
		}
	}
	return out
}

// Thread is the thread an agent is built for, as its variables go: those the request sets, and
// the thread's stored ones, read when first needed. A nil *Thread is none (a check that runs no
// turn): no variables, and none required.
type Thread struct {
	ctx       context.Context
	sealer    Sealer
	accountID string
	request   map[string]string
	load      func() (store.Vars, error)

	mu     sync.Mutex
	stored store.Vars
	loaded bool
	err    error
}

// New is the thread of accountID whose request sets the values request and whose stored
// variables load reads, opened with s.
func New(ctx context.Context, s Sealer, accountID string, request map[string]string, load func() (store.Vars, error)) *Thread {
	return &Thread{ctx: ctx, sealer: s, accountID: accountID, request: request, load: load}
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
	if t.sealer == nil {
		t.err = errNoSealer
		return ""
	}
	plain, err := t.sealer.Open(t.ctx, sealed, aad(t.accountID, name))
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

// Missing are the declared required variables the thread does not have; none for no thread.
func (t *Thread) Missing(decl agentconfig.Variables) []agentconfig.Variable {
	if t == nil {
		return nil
	}
	var out []agentconfig.Variable
	for _, v := range decl {
		if v.Required && t.Get(v.Name) == "" {
			out = append(out, v)
		}
	}
	return out
}
