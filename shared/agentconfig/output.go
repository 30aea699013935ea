package agentconfig

import (
	"bytes"
	"encoding/json"

	"github.com/agentharness/harness/shared/wire/jsonschema"
	"github.com/xeipuuv/gojsonschema"
)

// Output is config.output: the JSON schema the agent's final answer must be valid against, which
// makes that answer a JSON object (docs/agents.md, "Structured output").
type Output struct {
	Schema json.RawMessage `json:"schema"`
	// compiled is Schema compiled once, with no I/O (a $ref may only point inside it).
	compiled *gojsonschema.Schema
}

// Compiled is the output schema compiled, which answers are checked against.
func (o *Output) Compiled() *gojsonschema.Schema { return o.compiled }

// UnmarshalJSON decodes config.output strictly and compiles its schema, its refusals a
// *FieldError at the exact field.
func (o *Output) UnmarshalJSON(raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var v struct {
		Schema json.RawMessage `json:"schema"`
	}
	if err := dec.Decode(&v); err != nil {
		return &FieldError{Field: "output", Problem: `must be an object {"schema": {...}}`}
	}
	var s struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(v.Schema, &s); err != nil || s.Type != "object" {
		return &FieldError{Field: "output.schema", Problem: `must be a JSON schema of "type": "object"`}
	}
	compiled, err := jsonschema.Compile(v.Schema)
	if err != nil {
		return &FieldError{Field: "output.schema", Problem: err.Error()}
	}
	*o = Output{Schema: v.Schema, compiled: compiled}
	return nil
}
