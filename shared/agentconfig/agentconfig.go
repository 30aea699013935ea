// Package agentconfig reads the config an account owner stores for an agent: its model, its
// system prompt, its step limit and the tools enabled for it.
package agentconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Config is one agent's configuration.
type Config struct {
	Name   string          `json:"name"`
	System string          `json:"system,omitempty"`
	Model  json.RawMessage `json:"model"`
	// MaxSteps bounds the model steps of one turn; 0 means the loop's default.
	MaxSteps int `json:"maxSteps,omitempty"`
	// Tools maps a model-facing tool name to its options, as in config.tools.<name>.
	Tools map[string]json.RawMessage `json:"tools,omitempty"`
}

// Parse decodes and checks a stored config. Unknown fields are rejected so a typo fails loudly.
func Parse(raw []byte) (*Config, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("agent config: %w", err)
	}
	if dec.More() {
		return nil, errors.New("agent config: unexpected data after the JSON object")
	}
	if len(c.Model) == 0 || string(c.Model) == "null" {
		return nil, errors.New("agent config: model is required")
	}
	if c.MaxSteps < 0 {
		return nil, fmt.Errorf("agent config: maxSteps must be positive, got %d", c.MaxSteps)
	}
	return &c, nil
}
