package agentconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/agentharness/harness/shared/approval"
	"github.com/agentharness/harness/shared/wire/jsonschema"
)

// Prompt is one entry of config.prompts: a prompt the agent calls as a tool (001 sections 1 and
// 4). A call runs a model loop of its own with System, the call's input as its first user
// message, and its own smaller tool set; the caller's model gets back what the SubpromptConfig
// flags keep of it.
type Prompt struct {
	Description string `json:"description,omitempty"`
	// System is the nested loop's system prompt.
	System string `json:"system"`
	// InputSchema is the tool's input schema; absent: {message: string}.
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	// Model is the nested loop's model block; absent: the agent's own model.
	Model json.RawMessage `json:"model,omitempty"`
	// Tools are the nested loop's tools, in config.tools form; absent: none.
	Tools map[string]json.RawMessage `json:"tools,omitempty"`
	// MaxSteps bounds the nested loop's model steps; 0 means DefaultPromptSteps.
	MaxSteps int `json:"maxSteps,omitempty"`
	// IncludeTextResponse (default true) returns the nested loop's final text; IncludeToolCalls
	// (default false) its tool calls with their results; IncludeErrors (default true) the
	// errors its tool calls met.
	IncludeTextResponse *bool `json:"includeTextResponse,omitempty"`
	IncludeToolCalls    bool  `json:"includeToolCalls,omitempty"`
	IncludeErrors       *bool `json:"includeErrors,omitempty"`
	// InitUserMessageProperty is the input property whose value is the nested loop's first user
	// message. Unset: "message" under the default schema, else the whole input as JSON.
	InitUserMessageProperty string `json:"initUserMessageProperty,omitempty"`
	// InitAttachmentsProperty, when set, is an input property listing files of the caller's
	// thread (attachment ids) the nested loop's first message carries.
	InitAttachmentsProperty string `json:"initAttachmentsProperty,omitempty"`
	// NeedsApproval, Async and Execution are the keys every tool shares (config.tools).
	NeedsApproval json.RawMessage `json:"needsApproval,omitempty"`
	Async         bool            `json:"async,omitempty"`
	Execution     string          `json:"execution,omitempty"`
}

// Limits of config.prompts.
const (
	DefaultPromptSteps = 5
	MaxPrompts         = 20
	// SameInvocation is the one async execution a prompt may use: it runs its loop itself.
	SameInvocation = "same-invocation"
)

var promptFields = []string{"description", "system", "inputSchema", "model", "tools", "maxSteps", "includeTextResponse",
	"includeToolCalls", "includeErrors", "initUserMessageProperty", "initAttachmentsProperty", "needsApproval", "async", "execution"}

// Steps is MaxSteps with its default.
func (p *Prompt) Steps() int {
	if p.MaxSteps == 0 {
		return DefaultPromptSteps
	}
	return p.MaxSteps
}

// Text, Errors: the flags with their defaults.
func (p *Prompt) Text() bool   { return p.IncludeTextResponse == nil || *p.IncludeTextResponse }
func (p *Prompt) Errors() bool { return p.IncludeErrors == nil || *p.IncludeErrors }

// MessageProperty is the input property that carries the first user message; empty when the
// whole input does.
func (p *Prompt) MessageProperty() string {
	if p.InitUserMessageProperty == "" && len(p.InputSchema) == 0 {
		return DefaultMessageProperty
	}
	return p.InitUserMessageProperty
}

// Schema is the tool's input schema: InputSchema, or one with the message property (and the
// attachments property, when set).
func (p *Prompt) Schema() json.RawMessage {
	if len(p.InputSchema) > 0 {
		return p.InputSchema
	}
	props := map[string]any{p.MessageProperty(): map[string]any{"type": "string", "description": "The task for the prompt."}}
	if p.InitAttachmentsProperty != "" {
		props[p.InitAttachmentsProperty] = map[string]any{"type": "array", "items": map[string]any{"type": "string"},
			"description": "Attachment ids of files of this conversation to hand over."}
	}
	b, _ := json.Marshal(map[string]any{"type": "object", "properties": props, "required": []string{p.MessageProperty()}, "additionalProperties": false})
	return b
}

// Prompts is config.prompts, by model-facing tool name.
type Prompts map[string]*Prompt

// UnmarshalJSON decodes config.prompts strictly, its refusals a *FieldError at the exact field
// ("prompts.summarize.maxSteps"); Validate checks the prompts further.
func (ps *Prompts) UnmarshalJSON(raw []byte) error {
	entries, err := decodeEntries[Prompt](raw, "prompts", "must be an object of prompts by tool name", "a prompt field", promptFields)
	if err == nil {
		*ps = entries
	}
	return err
}

// decodeEntries decodes an object of named entries strictly (config.prompts, config.mcpServers):
// each an object whose keys are in fields, decoded into a T; a refusal is a *FieldError at the
// exact field. shape says what field must be; kind what a key must be.
func decodeEntries[T any](raw []byte, field, shape, kind string, fields []string) (map[string]*T, error) {
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil || entries == nil {
		return nil, &FieldError{Field: field, Problem: shape}
	}
	out := map[string]*T{}
	for name, e := range entries {
		at := field + "." + name
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(e, &keys); err != nil || keys == nil {
			return nil, &FieldError{Field: at, Problem: "must be an object"}
		}
		for k := range keys {
			if !slices.Contains(fields, k) {
				return nil, &FieldError{Field: at + "." + k, Problem: "is not " + kind + " (fields: " + strings.Join(fields, ", ") + ")"}
			}
		}
		var v T
		if err := json.Unmarshal(e, &v); err != nil {
			var typeErr *json.UnmarshalTypeError
			if errors.As(err, &typeErr) && typeErr.Field != "" {
				return nil, &FieldError{Field: at + "." + typeErr.Field, Problem: "must be " + jsonKind(typeErr.Type.Kind().String())}
			}
			return nil, &FieldError{Field: at, Problem: err.Error()}
		}
		out[name] = &v
	}
	return out, nil
}

// checkPrompts checks config.prompts beyond their shape: names, fields, the nested model block
// and tools (through c), and that no name is another tool's. It adds the prompts' secrets and
// warnings to v.
func checkPrompts(cfg *Config, c Checks, agentModel Model, v *Validated) error {
	if len(cfg.Prompts) > MaxPrompts {
		return &FieldError{Field: "prompts", Problem: fmt.Sprintf("defines %d prompts, more than %d", len(cfg.Prompts), MaxPrompts)}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Prompts)) {
		at := "prompts." + name
		p := cfg.Prompts[name]
		if p == nil {
			return &FieldError{Field: at, Problem: "must be an object"}
		}
		if err := checkPromptName(cfg, name); err != nil {
			return &FieldError{Field: at, Problem: err.Error()}
		}
		if err := checkPrompt(at, p); err != nil {
			return err
		}
		m := agentModel
		if len(p.Model) > 0 {
			var err error
			if m, err = c.Model(p.Model); err != nil {
				// The model check names its fields as the agent's ("model.provider").
				var fe *FieldError
				if errors.As(err, &fe) {
					return &FieldError{Field: at + "." + fe.Field, Problem: fe.Problem}
				}
				return &FieldError{Field: at + ".model", Problem: err.Error()}
			}
			for _, s := range m.Secrets {
				v.Secrets = append(v.Secrets, at+".model."+s)
			}
		}
		tools := make([]string, 0, len(p.Tools))
		for t := range p.Tools {
			tools = append(tools, t)
		}
		sort.Strings(tools)
		for _, t := range tools {
			field := at + ".tools." + t
			if err := insideOnly(field, p.Tools[t]); err != nil {
				return err
			}
			r, err := c.Tool(t, p.Tools[t], m)
			if err != nil {
				var fe *FieldError
				if errors.As(err, &fe) {
					return &FieldError{Field: at + "." + fe.Field, Problem: fe.Problem}
				}
				return &FieldError{Field: field, Problem: err.Error()}
			}
			v.Warnings = append(v.Warnings, r.Warnings...)
			for _, s := range r.Secrets {
				v.Secrets = append(v.Secrets, field+"."+s)
			}
		}
	}
	return nil
}

// checkPromptName refuses a prompt named like another of the agent's tools.
func checkPromptName(cfg *Config, name string) error {
	switch {
	case !toolNameRe.MatchString(name):
		return errors.New("must be a tool name: a letter, then up to 63 letters, digits, _ or -")
	case cfg.Tools[name] != nil:
		return fmt.Errorf("%s is a tool of config.tools too", name)
	case slices.Contains(reserved, name) || slices.Contains(SkillTools, name):
		return fmt.Errorf("%s is the name of a tool the harness gives agents", name)
	}
	if cfg.Subagent != nil {
		for _, a := range cfg.Subagent.Agents {
			if a.Name == name {
				return fmt.Errorf("%s names a subagent too", name)
			}
		}
	}
	return nil
}

// checkPrompt checks one prompt's own fields.
func checkPrompt(at string, p *Prompt) error {
	switch {
	case strings.TrimSpace(p.System) == "":
		return &FieldError{Field: at + ".system", Problem: "is required: the prompt the nested model loop runs with"}
	case len(p.Description) > 1024:
		return &FieldError{Field: at + ".description", Problem: "must be at most 1024 characters"}
	case p.MaxSteps < 0 || p.MaxSteps > MaxSteps:
		return &FieldError{Field: at + ".maxSteps", Problem: fmt.Sprintf("must be between 1 and %d (0 or absent: %d)", MaxSteps, DefaultPromptSteps)}
	case p.InitUserMessageProperty != "" && !propertyRe.MatchString(p.InitUserMessageProperty):
		return &FieldError{Field: at + ".initUserMessageProperty", Problem: "must be a property name: a letter or _, then up to 63 letters, digits or _"}
	case p.InitAttachmentsProperty != "" && !propertyRe.MatchString(p.InitAttachmentsProperty):
		return &FieldError{Field: at + ".initAttachmentsProperty", Problem: "must be a property name: a letter or _, then up to 63 letters, digits or _"}
	case p.InitAttachmentsProperty != "" && p.InitAttachmentsProperty == p.MessageProperty():
		return &FieldError{Field: at + ".initAttachmentsProperty", Problem: "must differ from the message's property " + p.MessageProperty()}
	case p.Execution != "" && !p.Async:
		return &FieldError{Field: at + ".execution", Problem: "applies only to async prompts: set async: true as well"}
	case p.Execution != "" && p.Execution != SameInvocation:
		return &FieldError{Field: at + ".execution", Problem: fmt.Sprintf("must be %q: a prompt runs its model loop itself, so no outside worker completes it", SameInvocation)}
	}
	if len(p.NeedsApproval) > 0 {
		if _, err := approval.Parse(p.NeedsApproval); err != nil {
			var pe *approval.FieldError
			if errors.As(err, &pe) {
				f := at + ".needsApproval"
				if pe.Field != "" {
					f += "." + pe.Field
				}
				return &FieldError{Field: f, Problem: pe.Problem}
			}
			return &FieldError{Field: at + ".needsApproval", Problem: err.Error()}
		}
	}
	if len(p.InputSchema) > 0 {
		return checkPromptSchema(at, p)
	}
	return nil
}

// checkPromptSchema compiles an inputSchema (with no I/O: a $ref may only point inside it) and
// checks that the properties the prompt maps are declared in it.
func checkPromptSchema(at string, p *Prompt) error {
	var s struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(p.InputSchema, &s); err != nil || s.Type != "object" {
		return &FieldError{Field: at + ".inputSchema", Problem: `must be a JSON schema of "type": "object"`}
	}
	if _, err := jsonschema.Compile(p.InputSchema); err != nil {
		return &FieldError{Field: at + ".inputSchema", Problem: err.Error()}
	}
	for _, f := range []struct{ field, prop string }{{"initUserMessageProperty", p.InitUserMessageProperty}, {"initAttachmentsProperty", p.InitAttachmentsProperty}} {
		if _, ok := s.Properties[f.prop]; f.prop != "" && !ok {
			return &FieldError{Field: at + "." + f.field, Problem: fmt.Sprintf("names %q, which inputSchema does not declare", f.prop)}
		}
	}
	return nil
}

// insideOnly refuses what a tool cannot do inside a prompt's loop, which runs within one call:
// ask for approval (put needsApproval on the prompt) or run async.
func insideOnly(field string, entry json.RawMessage) error {
	var keys map[string]json.RawMessage
	if json.Unmarshal(entry, &keys) != nil {
		return nil // the tool check names the problem
	}
	if v, ok := keys["needsApproval"]; ok && string(bytes.TrimSpace(v)) != "false" {
		return &FieldError{Field: field + ".needsApproval", Problem: "a prompt's tools run inside its call, where no approval can be asked: set needsApproval on the prompt itself"}
	}
	if v, ok := keys["async"]; ok && string(bytes.TrimSpace(v)) == "true" {
		return &FieldError{Field: field + ".async", Problem: "a prompt's tools run inside its call, one after another: make the prompt itself async"}
	}
	return nil
}
