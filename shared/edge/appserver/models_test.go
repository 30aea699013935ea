package appserver_test

import (
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/edge/appserver"
)

// update_model takes a catalogue id or a handle of a provider a block names, one of them.
func TestResolveModel(t *testing.T) {
	s := func(v string) *string { return &v }
	tests := []struct {
		name             string
		id, handle       *string
		provider, model  string
		wantErrSubstring string
	}{
		{name: "catalogue id", id: s("claude-haiku-4-5"), provider: "anthropic", model: "claude-haiku-4-5"},
		{name: "handle outside the catalogue", handle: s("openai/gpt-5-nano"), provider: "openai", model: "gpt-5-nano"},
		{name: "bedrock handle keeps the id's colon", handle: s("bedrock/us.amazon.nova-lite-v1:0"), provider: "bedrock", model: "us.amazon.nova-lite-v1:0"},
		{name: "neither", wantErrSubstring: "exactly one of payload.model_id and payload.model_handle"},
		{name: "both", id: s("gpt-4.1"), handle: s("openai/gpt-4.1"), wantErrSubstring: "exactly one"},
		{name: "unknown id", id: s("gpt-9"), wantErrSubstring: `payload.model_id "gpt-9" is not a model of the catalogue`},
		{name: "handle without a model", handle: s("openai/"), wantErrSubstring: `is not "provider/model"`},
		{name: "unknown provider", handle: s("mistral/large"), wantErrSubstring: `provider "mistral" is not one of`},
		{name: "scripted", id: s("scripted"), wantErrSubstring: "plays a script"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			provider, model, err := appserver.ResolveModel(tt.id, tt.handle)
			got := ""
			if err != nil {
				got = err.Error()
			}
			switch {
			case tt.wantErrSubstring == "" && (err != nil || provider != tt.provider || model != tt.model):
				t.Errorf("= %q, %q, %v; want %q, %q", provider, model, err, tt.provider, tt.model)
			case tt.wantErrSubstring != "" && !strings.Contains(got, tt.wantErrSubstring):
				t.Errorf("error %q, want one containing %q", got, tt.wantErrSubstring)
			}
		})
	}
}
