package agentconfig

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Variable declares a value the agent's turns need (001 section 3): each thread (conversation)
// the agent runs in resolves it from the thread's variables, never from the process
// environment, which holds the deployment's own secrets.
// Required: a turn does not start without it. Secret: its values are sealed at rest and never
// shown. Scoped: a thread of this agent does not inherit it from the thread that called it; it
// must be provided for the thread itself, and flows from there to the threads it calls.
type Variable struct {
	Name        string `json:"name"`
	Type        string `json:"type,omitempty"`
	Required    bool   `json:"required,omitempty"`
	Scoped      bool   `json:"scoped,omitempty"`
	Description string `json:"description,omitempty"`
}

// Variable types.
const (
	TextVariable   = "text"
	SecretVariable = "secret"
)

// MaxVariables bounds the variables one agent declares.
const MaxVariables = 50

// VariableName is the grammar of a variable's name: an environment variable's.
var VariableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// Secret reports whether v's values are sealed at rest.
func (v Variable) Secret() bool { return v.Type == SecretVariable }

// Variables is config.variables, decoded strictly.
type Variables []Variable

var variableFields = []string{"name", "type", "required", "scoped", "description"}

// UnmarshalJSON decodes config.variables, its refusals a *FieldError at the exact field.
func (vs *Variables) UnmarshalJSON(raw []byte) error {
	var entries []json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return &FieldError{Field: "variables", Problem: "must be an array of {name, type, required, scoped, description}"}
	}
	if len(entries) > MaxVariables {
		return &FieldError{Field: "variables", Problem: fmt.Sprintf("declares %d variables, more than %d", len(entries), MaxVariables)}
	}
	out := make(Variables, 0, len(entries))
	for i, e := range entries {
		at := fmt.Sprintf("variables[%d]", i)
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(e, &keys); err != nil || keys == nil {
			return &FieldError{Field: at, Problem: "must be an object"}
		}
		for k := range keys {
			if !slices.Contains(variableFields, k) {
				return &FieldError{Field: at + "." + k, Problem: "is not a variable field (fields: " + strings.Join(variableFields, ", ") + ")"}
			}
		}
		var v Variable
		if err := json.Unmarshal(e, &v); err != nil {
			return &FieldError{Field: at, Problem: "must be {name: string, type: text|secret, required: bool, scoped: bool, description: string}"}
		}
		switch {
		case !VariableName.MatchString(v.Name):
			return &FieldError{Field: at + ".name", Problem: fmt.Sprintf("%q is not a variable name (a letter or _, then up to 63 letters, digits or _)", v.Name)}
		case v.Type != "" && v.Type != TextVariable && v.Type != SecretVariable:
			return &FieldError{Field: at + ".type", Problem: fmt.Sprintf("%q is not %q or %q", v.Type, TextVariable, SecretVariable)}
		case len(v.Description) > 1000:
			return &FieldError{Field: at + ".description", Problem: "is longer than 1000 characters"}
		}
		if v.Type == "" {
			v.Type = TextVariable
		}
		for _, prev := range out {
			if prev.Name == v.Name {
				return &FieldError{Field: at + ".name", Problem: fmt.Sprintf("%q is declared twice", v.Name)}
			}
		}
		out = append(out, v)
	}
	*vs = out
	return nil
}

// Find returns the declaration of name, if there is one.
func (vs Variables) Find(name string) (Variable, bool) {
	for _, v := range vs {
		if v.Name == name {
			return v, true
		}
	}
	return Variable{}, false
}
