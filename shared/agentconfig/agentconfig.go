// Package agentconfig reads the config an account owner stores for an agent: its model, its
// system prompt, its step limit and the tools enabled for it.
package agentconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Config is one agent's configuration.
type Config struct {
	Name string `json:"name"`
	// Description tells an application's users what the agent is for (GET /agents shows it).
	Description string          `json:"description,omitempty"`
	System      string          `json:"system,omitempty"`
	Model       json.RawMessage `json:"model"`
	// MaxSteps bounds the model steps of one turn; 0 means the loop's default.
	MaxSteps int `json:"maxSteps,omitempty"`
	// Tools maps a model-facing tool name to its options, as in config.tools.<name>.
	Tools map[string]json.RawMessage `json:"tools,omitempty"`
	// Subagent names the account's other agents this agent may call (subagent.go).
	Subagent *Subagent `json:"subagent,omitempty"`
	// Variables declares the values its turns need from the thread they run in (variables.go).
	Variables Variables `json:"variables,omitempty"`
	// Skills names the account's skills the agent may load (skills.go).
	Skills Skills `json:"skills,omitempty"`
	// Prompts are prompts the agent calls as tools, by model-facing name (prompts.go).
	Prompts Prompts `json:"prompts,omitempty"`
	// MCPServers are remote MCP servers whose tools the agent calls (mcp.go).
	MCPServers MCPServers `json:"mcpServers,omitempty"`
	// Sandbox runs the agent's shell commands, and Workspaces are the account's workspaces it
	// works in (workspaces.go).
	Sandbox    *Sandbox   `json:"sandbox,omitempty"`
	Workspaces Workspaces `json:"workspaces,omitempty"`
	// Memory is the agent's memory, files of a workspace that outlive a conversation (memory.go).
	Memory *Memory `json:"memory,omitempty"`
	// Output makes the final answer a JSON object valid against its schema (output.go).
	Output *Output `json:"output,omitempty"`
	// Context bounds each model request's input, compacting the history (context.go).
	Context *Context `json:"context,omitempty"`
}

// fields are the config's top-level keys, spelled exactly: encoding/json matches keys without
// regard to case, and a "Model" that decoded as "model" would escape secret redaction, which
// looks for "model.apiKey".
var fields = []string{"name", "description", "system", "model", "maxSteps", "tools", "subagent", "variables", "skills", "prompts", "mcpServers", "sandbox", "workspaces", "memory", "output", "context"}

// checkKeys refuses top-level keys that are not spelled exactly as a config field.
func checkKeys(raw []byte) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil // the decoder reports it with more detail
	}
	for k := range top {
		if !slices.Contains(fields, k) {
			if k == "" {
				k = `""` // so that an empty key is named too
			}
			return &FieldError{Field: k, Problem: "is not an agent config field (fields: " + strings.Join(fields, ", ") + ")"}
		}
	}
	return nil
}

// decodeError names the field a decoding error is about.
func decodeError(err error) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		return &FieldError{Field: typeErr.Field, Problem: "must be " + jsonKind(typeErr.Type.Kind().String())}
	}
	if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		f := strings.TrimSuffix(strings.TrimPrefix(field, `"`), `"`)
		if f == "" {
			f = `""` // so that an empty key is named too
		}
		return &FieldError{Field: f, Problem: "is not an agent config field (fields: " + strings.Join(fields, ", ") + ")"}
	}
	return &FieldError{Field: "config", Problem: err.Error()}
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "int", "int64":
		return "an integer"
	case "map", "struct":
		return "an object"
	default:
		return "a " + goKind
	}
}

// Parse decodes and checks a stored config. Unknown fields are rejected so a typo fails loudly.
func Parse(raw []byte) (*Config, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var c Config
	if err := checkKeys(raw); err != nil {
		return nil, err
	}
	if err := dec.Decode(&c); err != nil {
		return nil, decodeError(err)
	}
	if dec.More() {
		return nil, &FieldError{Field: "config", Problem: "unexpected data after the JSON object"}
	}
	if len(c.Model) == 0 || string(c.Model) == "null" {
		return nil, &FieldError{Field: "model", Problem: "is required"}
	}
	if c.MaxSteps < 0 {
		return nil, &FieldError{Field: "maxSteps", Problem: fmt.Sprintf("must be positive, got %d", c.MaxSteps)}
	}
	return &c, nil
}
