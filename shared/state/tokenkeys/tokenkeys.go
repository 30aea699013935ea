// Package tokenkeys keeps the keys each account's end-user tokens are signed with
// (wire/usertoken): made on an account's first mint, sealed on its item like its other secrets,
// and gone with its secret, so rotating the secret revokes every token the harness signed.
package tokenkeys

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/agentharness/harness/shared/state/store"
)

// Sealer seals and opens the keys (secrets.Box).
type Sealer interface {
	Seal(ctx context.Context, plaintext, aad []byte) ([]byte, error)
	Open(ctx context.Context, sealed, aad []byte) ([]byte, error)
}

// Keys reads and makes accounts' token keys.
type Keys struct {
	store  *store.Store
	sealer Sealer
}

// New returns the token keys kept in st, sealed with sealer.
func New(st *store.Store, sealer Sealer) *Keys { return &Keys{store: st, sealer: sealer} }

// Signing returns the account's signing key and its id, making the key on first use.
func (k *Keys) Signing(ctx context.Context, accountID string) (string, ed25519.PrivateKey, error) {
	tk, err := k.store.AccountTokenKey(ctx, accountID)
	if err != nil {
		return "", nil, err
	}
	if tk.ID == "" {
		if tk, err = k.make(ctx, accountID); err != nil {
			return "", nil, err
		}
	}
	seed, err := k.open(ctx, accountID, tk)
	if err != nil {
		return "", nil, err
	}
	return tk.ID, ed25519.NewKeyFromSeed(seed), nil
}

// Verifying returns the public half of the account's key keyID; nil when the account has no
// such key (another, or none since its secret was rotated).
func (k *Keys) Verifying(ctx context.Context, accountID, keyID string) (ed25519.PublicKey, error) {
	tk, err := k.store.AccountTokenKey(ctx, accountID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (tk.ID == "" || tk.ID != keyID)) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	seed, err := k.open(ctx, accountID, tk)
	if err != nil {
		return nil, err
	}
	return ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey), nil
}

// make stores a new key for the account, or reads the one another mint stored first.
func (k *Keys) make(ctx context.Context, accountID string) (store.TokenKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return store.TokenKey{}, err
	}
	id := store.NewID("key_")
	sealed, err := k.sealer.Seal(ctx, priv.Seed(), aad(accountID, id))
	if err != nil {
		return store.TokenKey{}, fmt.Errorf("sealing a token key: %w", err)
	}
	return k.store.PutAccountTokenKey(ctx, accountID, store.TokenKey{ID: id, Sealed: sealed})
}

func (k *Keys) open(ctx context.Context, accountID string, tk store.TokenKey) ([]byte, error) {
	seed, err := k.sealer.Open(ctx, tk.Sealed, aad(accountID, tk.ID))
	if err != nil {
		return nil, fmt.Errorf("opening the token key of account %s: %w", accountID, err)
	}
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("the token key of account %s is %d bytes, not an Ed25519 seed", accountID, len(seed))
	}
	return seed, nil
}

// aad binds a sealed key to its account and id: copied to another account's item, it does not
// open.
func aad(accountID, keyID string) []byte { return []byte("token-key\x00" + accountID + "\x00" + keyID) }
