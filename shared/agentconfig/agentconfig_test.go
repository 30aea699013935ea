package agentconfig_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want *agentconfig.Config
	}{
		{
			name: "every field",
			raw: `{"name":"clock","system":"Answer briefly.","maxSteps":4,
				"model":{"provider":"scripted","script":[{"text":"hi"}]},
				"tools":{"current_time":{},"weather":{"enabled":false}}}`,
			want: &agentconfig.Config{
				Name:     "clock",
				System:   "Answer briefly.",
				MaxSteps: 4,
				Model:    json.RawMessage(`{"provider":"scripted","script":[{"text":"hi"}]}`),
				Tools: map[string]json.RawMessage{
					"current_time": json.RawMessage(`{}`),
					"weather":      json.RawMessage(`{"enabled":false}`),
				},
			},
		},
		{
			name: "model only",
			raw:  `{"model":{"provider":"openai","model":"gpt-4o-mini"}}`,
			want: &agentconfig.Config{Model: json.RawMessage(`{"provider":"openai","model":"gpt-4o-mini"}`)},
		},
		{
			name: "zero maxSteps means the default",
			raw:  `{"model":{"provider":"scripted"},"maxSteps":0}`,
			want: &agentconfig.Config{Model: json.RawMessage(`{"provider":"scripted"}`)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := agentconfig.Parse([]byte(tt.raw))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want string // a substring of the error
	}{
		{name: "unknown field", raw: `{"model":{"provider":"scripted"},"maxStep":3}`, want: `unknown field "maxStep"`},
		{name: "unknown field at the top", raw: `{"prompt":"hi","model":{}}`, want: `unknown field "prompt"`},
		{name: "missing model", raw: `{"name":"clock","system":"hi"}`, want: "model is required"},
		{name: "empty object", raw: `{}`, want: "model is required"},
		{name: "negative maxSteps", raw: `{"model":{"provider":"scripted"},"maxSteps":-1}`, want: "maxSteps must be positive, got -1"},
		{name: "maxSteps not a number", raw: `{"model":{"provider":"scripted"},"maxSteps":"3"}`, want: "maxSteps"},
		{name: "tools not an object", raw: `{"model":{"provider":"scripted"},"tools":["current_time"]}`, want: "tools"},
		{name: "not JSON", raw: `{"model":`, want: "agent config"},
		{name: "empty input", raw: ``, want: "agent config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := agentconfig.Parse([]byte(tt.raw))
			if err == nil {
				t.Fatalf("Parse() = %+v, nil; want an error containing %q", got, tt.want)
			}
			if got != nil {
				t.Errorf("Parse() config = %+v, want nil on error", got)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse() error = %q, want it to contain %q", err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "agent config: ") {
				t.Errorf("Parse() error = %q, want it to start with %q", err, "agent config: ")
			}
		})
	}
}
