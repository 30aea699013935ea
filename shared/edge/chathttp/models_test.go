package chathttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/model/catalogue"
	"github.com/google/go-cmp/cmp"
)

// GET /models lists the catalogue as the caller's account reaches it: the operator's keys, the
// account's own (which come first), IAM and the scripted provider; without a credential it is
// refused, and a failing look-up of the account's keys is a bare 500.
func TestModelsListsTheCatalogueAsTheAccountReachesIt(t *testing.T) {
	keys := func(_ context.Context, accountID string) ([]string, error) {
		if accountID == "" {
			return nil, errors.New("no account")
		}
		return []string{"anthropic"}, nil
	}
	f := newFixtureWith(t, fixtureOptions{deployment: catalogue.Deployment{Keyed: []string{"openai", "anthropic"}}, accountKeys: keys})
	status, body := testenv.Call(t, http.MethodGet, f.srv.URL+"/models", "Bearer "+f.secret, "")
	if status != http.StatusOK {
		t.Fatalf("GET /models = %d %s, want 200", status, body)
	}
	var got struct {
		Providers []catalogue.ProviderEntry `json:"providers"`
		Models    []catalogue.Entry         `json:"models"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	want := []catalogue.ProviderEntry{
		{Provider: "openai", Available: true, KeySource: catalogue.Operator},
		{Provider: "anthropic", Available: true, KeySource: catalogue.Account},
		{Provider: "google"},
		{Provider: "bedrock"},
		{Provider: "scripted", Available: true, KeySource: catalogue.Builtin},
	}
	if diff := cmp.Diff(want, got.Providers); diff != "" {
		t.Errorf("providers (-want +got):\n%s", diff)
	}
	if len(got.Models) != len(catalogue.All()) {
		t.Fatalf("%d models, want the catalogue's %d", len(got.Models), len(catalogue.All()))
	}
	sonnet, _ := catalogue.Lookup("anthropic", "claude-sonnet-4-5")
	for _, m := range got.Models {
		if m.Handle() == sonnet.Handle() {
			if diff := cmp.Diff(catalogue.Entry{Model: sonnet, Available: true, KeySource: catalogue.Account}, m); diff != "" {
				t.Errorf("%s (-want +got):\n%s", m.Handle(), diff)
			}
		}
		if m.Provider == "google" && (m.Available || m.KeySource != "") {
			t.Errorf("%s is available through %q, but no google key is set", m.Handle(), m.KeySource)
		}
	}

	if status, body := testenv.Call(t, http.MethodGet, f.srv.URL+"/models", "Bearer wrong", ""); status != http.StatusUnauthorized {
		t.Errorf("GET /models with a wrong secret = %d %s, want 401", status, body)
	}
}

func TestModelsFailsWhenTheAccountKeysCannotBeRead(t *testing.T) {
	f := newFixtureWith(t, fixtureOptions{accountKeys: func(context.Context, string) ([]string, error) { return nil, errors.New("table down") }})
	status, body := testenv.Call(t, http.MethodGet, f.srv.URL+"/models", "Bearer "+f.secret, "")
	if status != http.StatusInternalServerError || strings.Contains(string(body), "table down") {
		t.Errorf("GET /models with failing account keys = %d %s, want a bare 500", status, body)
	}
}
