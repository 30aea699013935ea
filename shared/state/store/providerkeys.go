package store

import (
	"context"
	"strings"
	"time"

	"github.com/agentharness/harness/shared/state/ddb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ProviderKey is an account's own key of a model provider, on the account's item (one attribute
// per provider, which DeleteAccount removes with the rest). The key is sealed.
type ProviderKey struct {
	Sealed    []byte
	BaseURL   string
	UpdatedAt string
}

// KeyedProviders are the model providers whose keys an account may store: those called with an
// API key (bedrock is called with the function's IAM role).
var KeyedProviders = []string{"anthropic", "google", "openai"}

// providerKeyAttrs lists the attributes of every provider's key, for DeleteAccount's REMOVE.
func providerKeyAttrs() string {
	names := make([]string, len(KeyedProviders))
	for i, p := range KeyedProviders {
		names[i] = providerKeyAttr(p)
	}
	return strings.Join(names, ", ")
}

// providerKeyAttr is the account item's attribute of the provider's key.
func providerKeyAttr(provider string) string { return "providerKey_" + provider }

// ProviderKeys are the account's provider keys by provider, or ErrNotFound for no account: as
// the read that opened the turn ctx belongs to found them (Opening.WithProviderKeys), else read.
func (s *Store) ProviderKeys(ctx context.Context, accountID string) (map[string]ProviderKey, error) {
	if opened, ok := ctx.Value(providerKeysKey{}).(openedKeys); ok && opened.accountID == accountID {
		return opened.keys, nil
	}
	item, err := s.accountItem(ctx, accountID)
	if err != nil {
		return nil, err
	}
	return providerKeysFrom(item), nil
}

// providerKeysFrom are the provider keys on an account's item.
func providerKeysFrom(item map[string]types.AttributeValue) map[string]ProviderKey {
	keys := map[string]ProviderKey{}
	for name, v := range item {
		provider, ok := strings.CutPrefix(name, "providerKey_")
		m, isMap := v.(*types.AttributeValueMemberM)
		if !ok || !isMap {
			continue
		}
		k := ProviderKey{BaseURL: ddb.String(m.Value, "baseURL"), UpdatedAt: ddb.String(m.Value, "updatedAt")}
		if b, ok := m.Value["key"].(*types.AttributeValueMemberB); ok {
			k.Sealed = b.Value
		}
		keys[provider] = k
	}
	return keys
}

// providerKeysKey carries the provider keys a turn's opening read (openedKeys).
type providerKeysKey struct{}

type openedKeys struct {
	accountID string
	keys      map[string]ProviderKey
}

// WithProviderKeys returns ctx carrying the provider keys of the account the opening read, so
// that building the turn's models reads them from no other round trip; ctx itself when the
// opening read no account item.
func (o *Opening) WithProviderKeys(ctx context.Context) context.Context {
	if o.providerKeys == nil {
		return ctx
	}
	return context.WithValue(ctx, providerKeysKey{}, openedKeys{accountID: o.Account.ID, keys: o.providerKeys})
}

// SetProviderKey stores the account's key of provider (a name of the caller's fixed list, never
// one a request spells freely), replacing the one it had; nil removes it. ErrNotFound: no account.
func (s *Store) SetProviderKey(ctx context.Context, accountID, provider string, k *ProviderKey, now time.Time) error {
	var v types.AttributeValue
	if k != nil {
		m := map[string]types.AttributeValue{"key": &types.AttributeValueMemberB{Value: k.Sealed}, "updatedAt": ddb.S(now.UTC().Format(time.RFC3339))}
		if k.BaseURL != "" {
			m["baseURL"] = ddb.S(k.BaseURL)
		}
		v = &types.AttributeValueMemberM{Value: m}
	}
	return s.setAccess(ctx, accountID, map[string]types.AttributeValue{providerKeyAttr(provider): v}, now)
}
