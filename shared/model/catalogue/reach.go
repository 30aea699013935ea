package catalogue

import (
	"context"
	"slices"
)

// Source is how a caller reaches a provider.
type Source string

const (
	// Account is the account's own key for the provider.
	Account Source = "account"
	// Operator is the deployment's fallback key (OPENAI_API_KEY, ANTHROPIC_API_KEY,
	// GOOGLE_API_KEY or GEMINI_API_KEY).
	Operator Source = "operator"
	// IAM is the function's AWS role: Bedrock, when the deployment runs on Lambda.
	IAM Source = "iam"
	// Builtin needs no key: the scripted provider.
	Builtin Source = "builtin"
)

// Deployment is what the deployment reaches by itself.
type Deployment struct {
	// Keyed are the providers the operator set a fallback key for.
	Keyed []string
	// IAM says Bedrock is called with the function's role: the deployment runs on Lambda.
	// Whether the AWS account was granted each Bedrock model is not known here.
	IAM bool
}

// AccountKeys reports the providers an account has its own key for. A nil AccountKeys is an
// account with none: the accounts' provider keys are not wired yet.
type AccountKeys func(ctx context.Context, accountID string) ([]string, error)

// Reach is the source through which a caller reaches each provider; a provider it cannot
// reach is absent.
type Reach map[string]Source

// Reach is what a caller with its own keys for the providers own reaches: its own key first
// (a block without apiKey falls back to the operator's, so its own is what is billed), then
// the operator's, then IAM for Bedrock; the scripted provider always.
func (d Deployment) Reach(own []string) Reach {
	r := Reach{"scripted": Builtin}
	if d.IAM {
		r["bedrock"] = IAM
	}
	for _, p := range d.Keyed {
		r[p] = Operator
	}
	for _, p := range own {
		r[p] = Account
	}
	return r
}

// Entry is a model with whether the caller can reach it, and through which key.
type Entry struct {
	Model
	Available bool   `json:"available"`
	KeySource Source `json:"keySource,omitempty"`
}

// ProviderEntry is a provider with whether the caller can reach it, and through which key.
type ProviderEntry struct {
	Provider  string `json:"provider"`
	Available bool   `json:"available"`
	KeySource Source `json:"keySource,omitempty"`
}

// Models is every model of the catalogue as r reaches it.
func (r Reach) Models() []Entry {
	out := make([]Entry, 0, len(models))
	for _, m := range models {
		src, ok := r[m.Provider]
		out = append(out, Entry{Model: m, Available: ok, KeySource: src})
	}
	return out
}

// Providers is every provider of the catalogue, in its order, as r reaches it.
func (r Reach) Providers() []ProviderEntry {
	var out []ProviderEntry
	for _, m := range models {
		if slices.ContainsFunc(out, func(p ProviderEntry) bool { return p.Provider == m.Provider }) {
			continue
		}
		src, ok := r[m.Provider]
		out = append(out, ProviderEntry{Provider: m.Provider, Available: ok, KeySource: src})
	}
	return out
}

// Of is the reach of an account: d's, with the account's own keys from keys (nil: none).
func Of(ctx context.Context, d Deployment, keys AccountKeys, accountID string) (Reach, error) {
	if keys == nil {
		return d.Reach(nil), nil
	}
	own, err := keys(ctx, accountID)
	if err != nil {
		return nil, err
	}
	return d.Reach(own), nil
}
