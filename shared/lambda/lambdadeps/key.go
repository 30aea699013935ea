package lambdadeps

import (
	"context"
	"fmt"
	"strings"
	"sync"
)

// Key is one of the deployment's own credentials (a fallback provider key): in AWS a Secrets
// Manager secret its *_SECRET variable names, read when a turn first needs it and kept for the
// life of the process; for local use only (make dev), the plain variable's value.
type Key struct {
	variable, plain, secret string
	read                    func(ctx context.Context, id string) (string, error)

	mu    sync.Mutex
	value string
	done  bool
}

// Key is the credential whose plain value is plain and whose secret is the id secret names,
// variable being the *_SECRET variable that names it (for errors).
func (d Deps) Key(variable, plain, secret string) *Key {
	return &Key{variable: variable, plain: plain, secret: secret, read: d.Secret}
}

// Value is the credential: the secret's value when one is named (read once; a failed read is
// tried again by the next turn), else the plain one; "" when neither is set.
func (k *Key) Value(ctx context.Context) (string, error) {
	if k == nil {
		return "", nil
	}
	if k.secret == "" {
		return k.plain, nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.done {
		return k.value, nil
	}
	if k.read == nil {
		return "", fmt.Errorf("%s is set but no Secrets Manager client is", k.variable)
	}
	v, err := k.read(ctx, k.secret)
	if err != nil {
		return "", fmt.Errorf("%s: %w", k.variable, err)
	}
	k.value, k.done = strings.TrimSpace(v), true
	return k.value, nil
}
