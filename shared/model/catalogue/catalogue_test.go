package catalogue_test

import (
	"context"
	"errors"
	"testing"

	"github.com/agentharness/harness/shared/model/catalogue"
	"github.com/google/go-cmp/cmp"
)

// The checked-in catalogue passes its own check and covers every provider a model block names.
func TestTheCatalogueIsWellFormed(t *testing.T) {
	all := catalogue.All()
	if err := catalogue.Check(all); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, m := range all {
		have[m.Provider] = true
	}
	for _, p := range []string{"anthropic", "bedrock", "google", "openai", "scripted"} {
		if !have[p] {
			t.Errorf("the catalogue lists no model of %s", p)
		}
	}
}

func TestCheck(t *testing.T) {
	price := &catalogue.Pricing{InputPerMTok: 1, OutputPerMTok: 2}
	neg := -0.5
	tests := []struct {
		name string
		list []catalogue.Model
		want string
	}{
		{"fine", []catalogue.Model{{ID: "a", Provider: "p", Label: "A", Pricing: price, PricesAsOf: "2026-11-28"}}, ""},
		{"no label", []catalogue.Model{{ID: "a", Provider: "p"}}, "models[0]: id, provider and label are required"},
		{"twice", []catalogue.Model{{ID: "a", Provider: "p", Label: "A"}, {ID: "a", Provider: "p", Label: "B"}}, "models[1]: p/a is listed twice"},
		{"undated", []catalogue.Model{{ID: "a", Provider: "p", Label: "A", Pricing: price}}, "models[0] (p/a): pricing without pricesAsOf"},
		{"negative", []catalogue.Model{{ID: "a", Provider: "p", Label: "A", PricesAsOf: "2026-11-28", Pricing: &catalogue.Pricing{CacheReadPerMTok: &neg}}}, "models[0] (p/a): a price is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if err := catalogue.Check(tt.list); err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("Check = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLookup(t *testing.T) {
	m, ok := catalogue.Lookup("anthropic", "claude-sonnet-4-5")
	if !ok || m.Pricing == nil || m.Pricing.InputPerMTok != 3 || m.Pricing.OutputPerMTok != 15 || m.PricesAsOf == "" {
		t.Errorf("Lookup(anthropic, claude-sonnet-4-5) = %+v, %v; want it with its prices and their date", m, ok)
	}
	if _, ok := catalogue.Lookup("openai", "claude-sonnet-4-5"); ok {
		t.Error("Lookup found an Anthropic model under openai")
	}
	// All hands out a copy: changing it does not change the catalogue.
	all := catalogue.All()
	all[0].ID = "changed"
	if catalogue.All()[0].ID == "changed" {
		t.Error("All returned the catalogue itself, not a copy")
	}
}

// A provider is reached through the account's own key first, then the operator's, then IAM
// (Bedrock); scripted needs none; the rest are unavailable.
func TestReach(t *testing.T) {
	tests := []struct {
		name string
		d    catalogue.Deployment
		own  []string
		want []catalogue.ProviderEntry
	}{
		{"nothing", catalogue.Deployment{}, nil, []catalogue.ProviderEntry{
			{Provider: "openai"}, {Provider: "anthropic"}, {Provider: "google"}, {Provider: "bedrock"},
			{Provider: "scripted", Available: true, KeySource: catalogue.Builtin},
		}},
		{"operator, IAM and the account's own", catalogue.Deployment{Keyed: []string{"openai", "google"}, IAM: true}, []string{"google", "anthropic"}, []catalogue.ProviderEntry{
			{Provider: "openai", Available: true, KeySource: catalogue.Operator},
			{Provider: "anthropic", Available: true, KeySource: catalogue.Account},
			{Provider: "google", Available: true, KeySource: catalogue.Account},
			{Provider: "bedrock", Available: true, KeySource: catalogue.IAM},
			{Provider: "scripted", Available: true, KeySource: catalogue.Builtin},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.d.Reach(tt.own)
			if diff := cmp.Diff(tt.want, r.Providers()); diff != "" {
				t.Errorf("Providers() (-want +got):\n%s", diff)
			}
			for _, e := range r.Models() {
				if want := r[e.Provider]; e.KeySource != want || e.Available != (want != "") {
					t.Errorf("%s: available %v through %q, want through %q", e.Handle(), e.Available, e.KeySource, want)
				}
			}
		})
	}
}

func TestOf(t *testing.T) {
	d := catalogue.Deployment{Keyed: []string{"openai"}}
	r, err := catalogue.Of(context.Background(), d, nil, "acc_1")
	if err != nil || r["openai"] != catalogue.Operator || r["anthropic"] != "" {
		t.Errorf("Of without account keys = %v, %v; want the operator's openai only", r, err)
	}
	keys := func(_ context.Context, accountID string) ([]string, error) {
		if accountID != "acc_1" {
			return nil, errors.New("asked for another account")
		}
		return []string{"anthropic"}, nil
	}
	if r, err := catalogue.Of(context.Background(), d, keys, "acc_1"); err != nil || r["anthropic"] != catalogue.Account {
		t.Errorf("Of with the account's anthropic key = %v, %v; want anthropic through the account", r, err)
	}
	boom := errors.New("table down")
	if _, err := catalogue.Of(context.Background(), d, func(context.Context, string) ([]string, error) { return nil, boom }, "acc_1"); !errors.Is(err, boom) {
		t.Errorf("Of with a failing AccountKeys = %v, want its error", err)
	}
}
