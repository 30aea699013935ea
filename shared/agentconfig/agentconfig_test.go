package agentconfig_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/google/go-cmp/cmp"
	"github.com/xeipuuv/gojsonschema"
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
		name    string
		raw     string
		field   string
		problem string // a substring of the problem
	}{
		{name: "unknown field", raw: `{"model":{"provider":"scripted"},"maxStep":3}`, field: "maxStep", problem: "is not an agent config field"},
		{name: "unknown field at the top", raw: `{"prompt":"hi","model":{}}`, field: "prompt", problem: "is not an agent config field"},
		{name: "a field spelled in another case", raw: `{"Model":{"provider":"openai","apiKey":"sk"}}`, field: "Model", problem: "is not an agent config field"},
		{name: "missing model", raw: `{"name":"clock","system":"hi"}`, field: "model", problem: "is required"},
		{name: "empty object", raw: `{}`, field: "model", problem: "is required"},
		{name: "negative maxSteps", raw: `{"model":{"provider":"scripted"},"maxSteps":-1}`, field: "maxSteps", problem: "must be positive, got -1"},
		{name: "maxSteps not a number", raw: `{"model":{"provider":"scripted"},"maxSteps":"3"}`, field: "maxSteps", problem: "must be an integer"},
		{name: "tools not an object", raw: `{"model":{"provider":"scripted"},"tools":["current_time"]}`, field: "tools", problem: "must be an object"},
		{name: "output schema of a string", raw: `{"model":{"provider":"scripted"},"output":{"schema":{"type":"string"}}}`, field: "output.schema", problem: `"type": "object"`},
		{name: "output without a schema", raw: `{"model":{"provider":"scripted"},"output":{}}`, field: "output.schema", problem: `"type": "object"`},
		{name: "output schema that reads a file", raw: `{"model":{"provider":"scripted"},"output":{"schema":{"type":"object","properties":{"a":{"$ref":"file:///etc/passwd"}}}}}`, field: "output.schema", problem: "properties.a.$ref"},
		{name: "output schema that does not compile", raw: `{"model":{"provider":"scripted"},"output":{"schema":{"type":"object","required":"a"}}}`, field: "output.schema", problem: "required"},
		{name: "unknown output key", raw: `{"model":{"provider":"scripted"},"output":{"schema":{"type":"object"},"strict":true}}`, field: "output", problem: "must be an object"},
		{name: "not JSON", raw: `{"model":`, field: "config", problem: "unexpected EOF"},
		{name: "empty input", raw: ``, field: "config", problem: "EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := agentconfig.Parse([]byte(tt.raw))
			if err == nil {
				t.Fatalf("Parse() = %+v, nil; want an error at %s", got, tt.field)
			}
			if got != nil {
				t.Errorf("Parse() config = %+v, want nil on error", got)
			}
			var fe *agentconfig.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Parse() error = %T %v, want *agentconfig.FieldError", err, err)
			}
			if fe.Field != tt.field || !strings.Contains(fe.Problem, tt.problem) {
				t.Errorf("Parse() error at %q: %q; want %q containing %q", fe.Field, fe.Problem, tt.field, tt.problem)
			}
		})
	}
}

func TestParseOutput(t *testing.T) {
	schema := `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`
	got, err := agentconfig.Parse([]byte(`{"model":{"provider":"scripted"},"output":{"schema":` + schema + `}}`))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if string(got.Output.Schema) != schema {
		t.Errorf("output.schema = %s, want %s", got.Output.Schema, schema)
	}
	for doc, want := range map[string]bool{`{"city":"Oslo"}`: true, `{"town":"Oslo"}`: false} {
		res, err := got.Output.Compiled().Validate(gojsonschema.NewStringLoader(doc))
		if err != nil || res.Valid() != want {
			t.Errorf("compiled schema on %s: valid %v (%v), want %v", doc, res.Valid(), err, want)
		}
	}
}
