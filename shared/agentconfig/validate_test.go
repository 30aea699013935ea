package agentconfig_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/google/go-cmp/cmp"
)

func decode(t *testing.T, raw []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s is not JSON: %v", raw, err)
	}
	return v
}

func TestSplitJoin(t *testing.T) {
	raw := []byte(`{"name":"a","model":{"provider":"openai","model":"m","apiKey":"sk-1","fallbacks":[{"provider":"anthropic","model":"c","apiKey":"sk-3"}]},"tools":{"tavilySearch":{"apiKey":"tvly-2","maxResults":5}}}`)
	paths := []string{"model.apiKey", "tools.tavilySearch.apiKey", "tools.gone.apiKey", "model.fallbacks.0.apiKey", "model.fallbacks.1.apiKey", "model.fallbacks.x.apiKey"}
	redacted, secrets, err := agentconfig.Split(raw, paths)
	if err != nil {
		t.Fatal(err)
	}
	wantRedacted := `{"name":"a","model":{"provider":"openai","model":"m","apiKey":"[redacted]","fallbacks":[{"provider":"anthropic","model":"c","apiKey":"[redacted]"}]},"tools":{"tavilySearch":{"apiKey":"[redacted]","maxResults":5}}}`
	if diff := cmp.Diff(decode(t, []byte(wantRedacted)), decode(t, redacted)); diff != "" {
		t.Errorf("redacted (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"model.apiKey": "sk-1", "tools.tavilySearch.apiKey": "tvly-2", "model.fallbacks.0.apiKey": "sk-3"}, secrets); diff != "" {
		t.Errorf("secrets (-want +got):\n%s", diff)
	}
	joined, err := agentconfig.Join(redacted, secrets)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(decode(t, raw), decode(t, joined)); diff != "" {
		t.Errorf("Join(Split(x)) (-want +got):\n%s", diff)
	}

	_, _, err = agentconfig.Split([]byte(`{"model":{"apiKey":42}}`), []string{"model.apiKey"})
	var fe *agentconfig.FieldError
	if !errors.As(err, &fe) || fe.Field != "model.apiKey" {
		t.Errorf("Split of a non-string secret = %v, want a FieldError at model.apiKey", err)
	}
}

func TestMergePatchKeepsRedactedSecrets(t *testing.T) {
	stored := map[string]string{"model.apiKey": "sk-1"}
	plain := []byte(`{"name":"a","maxSteps":3,"model":{"provider":"openai","model":"m","apiKey":"sk-1"},"tools":{"current_time":{},"test_async":{}}}`)
	tests := []struct {
		name  string
		patch string
		want  string
	}{
		{
			name:  "change a field, remove a tool",
			patch: `{"maxSteps":5,"tools":{"test_async":null}}`,
			want:  `{"name":"a","maxSteps":5,"model":{"provider":"openai","model":"m","apiKey":"sk-1"},"tools":{"current_time":{}}}`,
		},
		{
			name:  "echoing the redacted value keeps the secret",
			patch: `{"model":{"provider":"openai","model":"m2","apiKey":"[redacted]"}}`,
			want:  `{"name":"a","maxSteps":3,"model":{"provider":"openai","model":"m2","apiKey":"sk-1"},"tools":{"current_time":{},"test_async":{}}}`,
		},
		{
			name:  "a new secret replaces it",
			patch: `{"model":{"apiKey":"sk-new"}}`,
			want:  `{"name":"a","maxSteps":3,"model":{"provider":"openai","model":"m","apiKey":"sk-new"},"tools":{"current_time":{},"test_async":{}}}`,
		},
		{
			name:  "null removes the secret",
			patch: `{"model":{"apiKey":null}}`,
			want:  `{"name":"a","maxSteps":3,"model":{"provider":"openai","model":"m"},"tools":{"current_time":{},"test_async":{}}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next, err := agentconfig.MergePatch(plain, []byte(tt.patch))
			if err != nil {
				t.Fatal(err)
			}
			next, err = agentconfig.KeepRedacted(next, stored)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(decode(t, []byte(tt.want)), decode(t, next)); diff != "" {
				t.Errorf("patched (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := agentconfig.MergePatch(plain, []byte(`[1]`)); err == nil {
		t.Error("MergePatch with an array patch succeeded, want an error")
	}
}

func TestValidateRunsEveryCheck(t *testing.T) {
	checks := agentconfig.Checks{
		Model: func(block json.RawMessage) (agentconfig.Model, error) {
			return agentconfig.Model{Provider: "p", Secrets: []string{"apiKey"}}, nil
		},
		Tool: func(name string, _ json.RawMessage, m agentconfig.Model) (agentconfig.Tool, error) {
			if name == "bad" {
				return agentconfig.Tool{}, errors.New("not a tool")
			}
			return agentconfig.Tool{Warnings: []string{name + " warned"}, Secrets: []string{"apiKey"}}, nil
		},
	}
	v, err := agentconfig.Validate([]byte(`{"name":"a","model":{"provider":"p","apiKey":"k"},"tools":{"b":{},"a":{}}}`), checks)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"model.apiKey", "tools.a.apiKey", "tools.b.apiKey"}, v.Secrets); diff != "" {
		t.Errorf("Secrets (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a warned", "b warned"}, v.Warnings); diff != "" {
		t.Errorf("Warnings (-want +got):\n%s", diff)
	}
	for _, tt := range []struct{ raw, field string }{
		{`{"name":"a","model":{},"tools":{"bad":{}}}`, "tools.bad"},
		{`{"model":{}}`, "name"},
		{`{"name":"a","model":{},"maxSteps":101}`, "maxSteps"},
	} {
		_, err := agentconfig.Validate([]byte(tt.raw), checks)
		var fe *agentconfig.FieldError
		if !errors.As(err, &fe) || fe.Field != tt.field {
			t.Errorf("Validate(%s) = %v, want a FieldError at %s", tt.raw, err, tt.field)
		}
	}
}
