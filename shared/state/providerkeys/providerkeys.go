// Package providerkeys keeps the model provider keys an account stores for its own agents
// (PUT /accounts/me/providers/{provider}): sealed on the account's item like its other secrets,
// each bound to its account and provider, and gone with the account. An agent whose model
// block names no key uses its account's key for the block's provider before the deployment's.
package providerkeys

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/state/agentstore"
	"github.com/agentharness/harness/shared/state/store"
)

// Keys reads and writes accounts' provider keys.
type Keys struct {
	store  *store.Store
	sealer agentstore.Sealer
}

// New returns the provider keys kept in st, sealed with sealer (the one of agents' secrets).
func New(st *store.Store, sealer agentstore.Sealer) *Keys { return &Keys{store: st, sealer: sealer} }

// Key is one provider key of an account, opened.
type Key struct {
	Provider string
	APIKey   string
	// BaseURL is where calls with the key go when the block names no base URL of its own;
	// empty: the provider's own API.
	BaseURL   string
	UpdatedAt string
}

// Problem says what keeps key from being stored, and in which of its fields (as the API names
// them: apiKey, baseURL); "" when nothing does. A provider is checked by Put.
func (k Key) Problem() (field, problem string) {
	switch {
	case strings.TrimSpace(k.APIKey) == "" || k.APIKey == agentconfig.Redacted:
		return "apiKey", "is required: the provider's API key"
	case k.BaseURL != "" && !strings.HasPrefix(k.BaseURL, "https://") && !strings.HasPrefix(k.BaseURL, "http://"):
		return "baseURL", "must be an http(s) URL"
	}
	return "", ""
}

// ErrUnknownProvider refuses a provider an account cannot store a key of (the error says which
// it can).
var ErrUnknownProvider = errors.New("unknown provider")

// CheckProvider refuses a provider that takes no key an account may store: bedrock, which is
// called with the function's IAM role, and any provider the harness does not know.
func CheckProvider(provider string) error {
	switch {
	case slices.Contains(store.KeyedProviders, provider):
		return nil
	case provider == "bedrock":
		return fmt.Errorf("%w: bedrock is called with the deployment's IAM role and takes no API key", ErrUnknownProvider)
	}
	return fmt.Errorf("%w %q: an account stores keys of %s", ErrUnknownProvider, provider, strings.Join(store.KeyedProviders, ", "))
}

// Put stores the account's key of provider, replacing the one it had.
func (k *Keys) Put(ctx context.Context, accountID string, key Key, now time.Time) error {
	if err := CheckProvider(key.Provider); err != nil {
		return err
	}
	sealed, err := k.sealer.Seal(ctx, []byte(key.APIKey), aad(accountID, key.Provider))
	if err != nil {
		return fmt.Errorf("sealing the %s key of account %s: %w", key.Provider, accountID, err)
	}
	return k.store.SetProviderKey(ctx, accountID, key.Provider, &store.ProviderKey{Sealed: sealed, BaseURL: key.BaseURL}, now)
}

// ErrNoKey: the account keeps no key of the provider.
var ErrNoKey = errors.New("no key of the provider")

// Delete removes the account's key of provider; ErrNoKey when it has none, store.ErrNotFound
// for no account.
func (k *Keys) Delete(ctx context.Context, accountID, provider string, now time.Time) error {
	keys, err := k.store.ProviderKeys(ctx, accountID)
	if err != nil {
		return err
	}
	if _, ok := keys[provider]; !ok {
		return ErrNoKey
	}
	return k.store.SetProviderKey(ctx, accountID, provider, nil, now)
}

// List is the account's keys, by provider, unopened: APIKey is empty.
func (k *Keys) List(ctx context.Context, accountID string) ([]Key, error) {
	stored, err := k.store.ProviderKeys(ctx, accountID)
	if err != nil {
		return nil, err
	}
	out := []Key{}
	for _, p := range store.KeyedProviders {
		if s, ok := stored[p]; ok {
			out = append(out, Key{Provider: p, BaseURL: s.BaseURL, UpdatedAt: s.UpdatedAt})
		}
	}
	return out, nil
}

// Open is the account's key of provider, opened; ok is false when it stores none (or there is
// no such account).
func (k *Keys) Open(ctx context.Context, accountID, provider string) (key Key, ok bool, err error) {
	if !slices.Contains(store.KeyedProviders, provider) {
		return Key{}, false, nil
	}
	stored, err := k.store.ProviderKeys(ctx, accountID)
	if errors.Is(err, store.ErrNotFound) {
		return Key{}, false, nil // a deleted account's turns are stopped elsewhere
	}
	if err != nil {
		return Key{}, false, err
	}
	s, ok := stored[provider]
	if !ok {
		return Key{}, false, nil
	}
	plain, err := k.sealer.Open(ctx, s.Sealed, aad(accountID, provider))
	if err != nil {
		return Key{}, false, fmt.Errorf("opening the %s key of account %s: %w", provider, accountID, err)
	}
	return Key{Provider: provider, APIKey: string(plain), BaseURL: s.BaseURL, UpdatedAt: s.UpdatedAt}, true, nil
}

// Fill is the model block of an agent of the account: a block that names no key of its own
// gets the account's key of its provider (and the key's base URL, when the block names none);
// any other block, or one of a provider the account keeps no key of, is returned as it is. Each
// of the block's fallbacks (model.fallbacks) is filled the same way.
func (k *Keys) Fill(ctx context.Context, accountID string, block json.RawMessage) (json.RawMessage, error) {
	block, err := k.fillOne(ctx, accountID, block)
	var fields map[string]json.RawMessage
	if err != nil || json.Unmarshal(block, &fields) != nil {
		return block, err
	}
	var fallbacks []json.RawMessage
	if json.Unmarshal(fields["fallbacks"], &fallbacks) != nil || len(fallbacks) == 0 {
		return block, nil
	}
	for i, fb := range fallbacks {
		if fallbacks[i], err = k.fillOne(ctx, accountID, fb); err != nil {
			return block, err
		}
	}
	fields["fallbacks"], _ = json.Marshal(fallbacks)
	return json.Marshal(fields)
}

// fillOne is Fill of one block, its fallbacks left as they are.
func (k *Keys) fillOne(ctx context.Context, accountID string, block json.RawMessage) (json.RawMessage, error) {
	var own struct {
		Provider string `json:"provider"`
		APIKey   string `json:"apiKey"`
		BaseURL  string `json:"baseURL"`
	}
	if json.Unmarshal(block, &own) != nil || own.APIKey != "" {
		return block, nil // the provider says what is wrong with a block
	}
	key, ok, err := k.Open(ctx, accountID, own.Provider)
	if err != nil || !ok {
		return block, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(block, &fields); err != nil {
		return block, nil
	}
	fields["apiKey"], _ = json.Marshal(key.APIKey)
	if own.BaseURL == "" && key.BaseURL != "" {
		fields["baseURL"], _ = json.Marshal(key.BaseURL)
	}
	return json.Marshal(fields)
}

// aad binds a sealed key to its account and provider: copied to another account's item, or to
// another provider's attribute, it does not open.
func aad(accountID, provider string) []byte {
	return []byte("provider-key\x00" + accountID + "\x00" + provider)
}
