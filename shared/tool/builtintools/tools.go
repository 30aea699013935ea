// Package builtintools holds the tools the harness ships and builds an agent's model-facing
// ToolSet from its config.tools. The static specs map below is the only source of tool names: a
// name it does not hold is rejected, both when a config is written (Check) and when a turn runs
// (Build).
package builtintools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/approval"
	"github.com/agentharness/harness/shared/sandbox"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/wire/jsonschema"
	"github.com/xeipuuv/gojsonschema"
)

// Spec is one entry of the static map: how to build a tool and what its config may hold.
type Spec struct {
	// New returns the tools the entry enables; nil for a provider-defined tool.
	New Factory
	// Options is the JSON schema of the tool's own options (apiKey, maxResults…); nil means the
	// tool takes none.
	Options json.RawMessage
	// Variables are the values the tool needs to run (001 section 3).
	Variables []Variable
	// ProviderTool names the provider-defined tool the entry stands for; the model's provider
	// runs it, so it cannot be wrapped (async, approval of its execution) by the harness.
	ProviderTool string
	// Dispatches marks a tool whose execute only enqueues outside work and returns, the only
	// kind that may use execution "external-dispatch".
	Dispatches bool
}

// VarType says how a variable is handled: secrets are encrypted at rest and never shown.
type VarType string

const (
	Text   VarType = "text"
	Secret VarType = "secret"
)

// Variable is a value a tool declares it needs (001 section 3). It resolves from the agent
// config's Option, else from the harness environment variable Name. The harness environment is
// the parent every agent inherits from, so a Scoped variable skips it: only the agent's own
// config supplies it, and from there it reaches every turn and continuation of that agent.
type Variable struct {
	Name     string
	Option   string // config key that supplies it; a Scoped variable must have one
	Type     VarType
	Required bool
	Scoped   bool
	// Deployment: only the harness environment supplies it, never a config or a thread: it
	// says where the harness sends (a queue), which no account or client may choose.
	Deployment  bool
	Description string
}

// Context is what a factory gets: its validated options and its resolved variables.
type Context struct {
	// Options are the tool's own options, without the variables' options.
	Options Options
	// Vars holds each resolved variable by name; a missing optional variable is absent.
	Vars   map[string]string
	Getenv func(string) string
	// Send puts a message on an SQS queue, for tools that dispatch outside work; nil where no
	// queue is wired.
	Send func(ctx context.Context, queueURL, body string) error
	// RunCode is the one way a tool evaluates model- or user-authored code (001's
	// state.runCode): a command in the deployment's sandbox, isolated, bounded and killed at its
	// wall time (docs/sandbox.md); never eval or a child process of the harness. nil where the
	// deployment has no sandbox backend: such a tool then refuses to build.
	RunCode func(ctx context.Context, req sandbox.Request) (sandbox.Result, error)
}

// Options is one tool's config entry without the keys every tool shares.
type Options map[string]json.RawMessage

// Decode decodes the options into v (a struct with json tags).
func (o Options) Decode(v any) error {
	b, err := json.Marshal(o)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// Factory returns the tools a config entry enables. It reads its options and credentials and
// does no orchestration.
type Factory func(c Context) ([]tool.Tool, error)

// specs maps exact model-facing names to their specs.
var specs = map[string]Spec{
	"current_time":        {New: currentTime},
	"googleSearch":        googleSearchSpec,
	"tavilyExtract":       tavilyExtractSpec,
	"tavilySearch":        tavilySearchSpec,
	"test_async":          testAsyncSpec,
	"test_external_async": testExternalAsyncSpec,
}

// Names lists the tool names an agent may enable.
func Names() []string {
	names := make([]string, 0, len(specs))
	for n := range specs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Execution modes of an async tool.
const (
	SameInvocation   = "same-invocation"
	ExternalDispatch = "external-dispatch"
)

// Entry is one config.tools.<name> entry: the keys every tool shares and the tool's options.
type Entry struct {
	Enabled bool
	// Approval is the needsApproval policy; nil when calls need none.
	Approval *approval.Policy
	Async    bool
	// Execution is SameInvocation or ExternalDispatch; empty when Async is false.
	Execution string
	Options   Options
}

// FieldError is a config problem at a field path such as "tools.tavilySearch.maxResults".
type FieldError = agentconfig.FieldError

// MissingVariableError stops a turn whose tool lacks a required variable.
type MissingVariableError struct {
	Tool     string
	Variable Variable
}

func (e *MissingVariableError) Error() string {
	v := e.Variable
	where := "config.tools." + e.Tool + "." + v.Option + ", "
	if v.Option == "" {
		where = ""
	}
	where += "the conversation's variable " + v.Name
	switch {
	case v.Deployment:
		return fmt.Sprintf("tool %s needs the %s variable %s (%s), which only the deployment sets: set the harness environment variable %s", e.Tool, v.Type, v.Name, v.Description, v.Name)
	case v.Scoped:
		where += " (it is scoped: the harness environment variable " + v.Name + " is not used)"
	default:
		where += " or the harness environment variable " + v.Name
	}
	return fmt.Sprintf("tool %s needs the %s variable %s (%s): set %s", e.Tool, v.Type, v.Name, v.Description, where)
}

// Needed is the missing variable as an agent would declare it, so a caller can ask for it.
func (e *MissingVariableError) Needed() agentconfig.Variable {
	v := e.Variable
	return agentconfig.Variable{Name: v.Name, Type: string(v.Type), Required: true, Scoped: v.Scoped, Description: v.Description}
}

// ParseEntry splits an entry into the shared keys and the tool's options. A null entry enables
// the tool with no options.
func ParseEntry(name string, raw json.RawMessage) (Entry, error) {
	field := "tools." + name
	e := Entry{Enabled: true, Options: Options{}}
	if len(bytes.TrimSpace(raw)) > 0 && string(bytes.TrimSpace(raw)) != "null" {
		if bytes.TrimSpace(raw)[0] != '{' {
			return e, &FieldError{Field: field, Problem: "must be an object"}
		}
		if err := json.Unmarshal(raw, &e.Options); err != nil {
			return e, &FieldError{Field: field, Problem: err.Error()}
		}
	}
	if v, ok := e.Options["needsApproval"]; ok {
		delete(e.Options, "needsApproval")
		p, err := approval.Parse(v)
		var pe *approval.FieldError
		if errors.As(err, &pe) {
			f := field + ".needsApproval"
			if pe.Field != "" {
				f += "." + pe.Field
			}
			return e, &FieldError{Field: f, Problem: pe.Problem}
		}
		if err != nil {
			return e, &FieldError{Field: field + ".needsApproval", Problem: err.Error()}
		}
		e.Approval = p
	}
	for key, dst := range map[string]*bool{"enabled": &e.Enabled, "async": &e.Async} {
		if v, ok := e.Options[key]; ok {
			if err := json.Unmarshal(v, dst); err != nil || string(v) == "null" {
				return e, &FieldError{Field: field + "." + key, Problem: "must be true or false"}
			}
			delete(e.Options, key)
		}
	}
	if v, ok := e.Options["execution"]; ok {
		delete(e.Options, "execution")
		if err := json.Unmarshal(v, &e.Execution); err != nil || (e.Execution != SameInvocation && e.Execution != ExternalDispatch) {
			return e, &FieldError{Field: field + ".execution", Problem: fmt.Sprintf("must be %q or %q", SameInvocation, ExternalDispatch)}
		}
		if !e.Async {
			return e, &FieldError{Field: field + ".execution", Problem: "applies only to async tools: set async: true as well"}
		}
	}
	if e.Async && e.Execution == "" {
		e.Execution = SameInvocation
	}
	return e, nil
}

// Check validates one config.tools entry when a config is written. Its errors are *FieldError.
func Check(name string, raw json.RawMessage, m agentconfig.Model) (agentconfig.Tool, error) {
	var out agentconfig.Tool
	spec, ok := specs[name]
	if !ok {
		return out, &FieldError{Field: "tools." + name, Problem: "unknown tool (known: " + strings.Join(Names(), ", ") + ")"}
	}
	e, err := ParseEntry(name, raw)
	if err != nil {
		return out, err
	}
	if err := checkOptions(name, spec, e.Options); err != nil {
		return out, err
	}
	if spec.ProviderTool != "" {
		if e.Approval != nil {
			return out, &FieldError{Field: "tools." + name + ".needsApproval", Problem: fmt.Sprintf("%s is run by the model provider, so the harness cannot hold its calls for approval; remove needsApproval or the tool", name)}
		}
		if e.Async {
			out.Warnings = append(out.Warnings, fmt.Sprintf("tools.%s.async is ignored: %s is run by the model provider, so it keeps its normal provider-defined behaviour", name, name))
		}
		if m.RunsProviderTool == nil || !m.RunsProviderTool(spec.ProviderTool) {
			return out, &FieldError{Field: "tools." + name, Problem: fmt.Sprintf("%s is run by the model provider and model.provider %q cannot run it", name, m.Provider)}
		}
	}
	if e.Execution == ExternalDispatch && !spec.Dispatches {
		return out, &FieldError{Field: "tools." + name + ".execution", Problem: fmt.Sprintf("%s cannot use %q: its execute does the work itself instead of dispatching it; use %q", name, ExternalDispatch, SameInvocation)}
	}
	for _, v := range spec.Variables {
		if v.Type == Secret && v.Option != "" {
			if _, set := e.Options[v.Option]; set {
				out.Secrets = append(out.Secrets, v.Option)
			}
		}
	}
	return out, nil
}

// Build returns the ToolSet for an agent's config.tools. Omitting a tool or setting
// "enabled": false disables it. A required variable that does not resolve fails the build with
// *MissingVariableError, so the turn stops before its first model call.
func Build(config map[string]json.RawMessage, env tool.Env) (*tool.Set, error) {
	getenv := env.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	var all []tool.Tool
	for _, name := range sortedKeys(config) {
		spec, ok := specs[name]
		if !ok {
			return nil, &FieldError{Field: "tools." + name, Problem: "unknown tool (known: " + strings.Join(Names(), ", ") + ")"}
		}
		e, err := ParseEntry(name, config[name])
		if err != nil {
			return nil, err
		}
		if !e.Enabled {
			continue
		}
		if err := checkOptions(name, spec, e.Options); err != nil {
			return nil, err
		}
		if spec.ProviderTool != "" {
			if e.Async && env.Logger != nil {
				// 002: the tool keeps its provider-defined behaviour, and the runtime says so.
				env.Logger.Warn("async is ignored on a provider-defined tool: its provider runs it", "tool", name)
			}
			all = append(all, tool.Tool{Name: name, ProviderTool: spec.ProviderTool})
			continue
		}
		c, err := spec.context(name, e.Options, getenv, env.Vars)
		if err != nil {
			return nil, err
		}
		c.Send, c.RunCode = env.Send, env.RunCode
		ts, err := spec.New(c)
		if err != nil {
			return nil, fmt.Errorf("config.tools.%s: %w", name, err)
		}
		for i := range ts {
			ts[i].Approval = e.Approval
			ts[i].Async = e.Execution // empty unless async: true
		}
		all = append(all, ts...)
	}
	return tool.NewSet(all...)
}

// context resolves the spec's variables for one config entry: a variable's option in the
// config, else the thread's variable of its name, else (unless the variable is scoped, by the
// tool or by the agent) the harness environment variable of its name; a Deployment variable
// from that environment variable alone. The variables' options are taken out of the options
// the factory sees.
func (s Spec) context(name string, opts Options, getenv func(string) string, thread tool.Vars) (Context, error) {
	c := Context{Options: Options{}, Vars: map[string]string{}, Getenv: getenv}
	for k, v := range opts {
		c.Options[k] = v
	}
	for _, v := range s.Variables {
		value := ""
		if v.Option != "" {
			if raw, ok := c.Options[v.Option]; ok {
				_ = json.Unmarshal(raw, &value)
				delete(c.Options, v.Option)
			}
		}
		switch {
		case v.Deployment:
			value = getenv(v.Name)
		case value == "":
			var fallback bool
			value, fallback = thread.Lookup(v.Name)
			if value == "" && fallback && !v.Scoped {
				value = getenv(v.Name)
			}
		}
		if value == "" {
			if v.Required {
				return c, &MissingVariableError{Tool: name, Variable: v}
			}
			continue
		}
		c.Vars[v.Name] = value
	}
	return c, nil
}

// checkSpec refuses a spec whose variables could never resolve or be kept secret.
func checkSpec(name string, s Spec) error {
	for _, v := range s.Variables {
		switch {
		case v.Name == "":
			return fmt.Errorf("tools: %s declares a variable without a name", name)
		case v.Type != Text && v.Type != Secret:
			return fmt.Errorf("tools: variable %s of %s has type %q, want %q or %q", v.Name, name, v.Type, Text, Secret)
		case v.Scoped && v.Option == "":
			return fmt.Errorf("tools: variable %s of %s is scoped but has no config option, so nothing could ever supply it", v.Name, name)
		case v.Deployment && (v.Scoped || v.Option != ""):
			return fmt.Errorf("tools: variable %s of %s comes from the deployment only, so it can be neither scoped nor a config option", v.Name, name)
		}
	}
	return nil
}

// optionSchemas holds each spec's compiled options schema.
var optionSchemas = func() map[string]*gojsonschema.Schema {
	out := map[string]*gojsonschema.Schema{}
	for name, spec := range specs {
		if err := checkSpec(name, spec); err != nil {
			panic(err)
		}
		raw := spec.Options
		if len(raw) == 0 {
			raw = json.RawMessage(`{"type":"object","additionalProperties":false}`)
		}
		s, err := jsonschema.Compile(raw)
		if err != nil {
			panic(fmt.Sprintf("tools: options schema of %s: %v", name, err))
		}
		out[name] = s
	}
	return out
}()

// checkOptions validates a tool's own options against its schema and names the first bad field.
func checkOptions(name string, spec Spec, opts Options) error {
	raw, err := json.Marshal(opts)
	if err != nil {
		return &FieldError{Field: "tools." + name, Problem: err.Error()}
	}
	res, err := optionSchemas[name].Validate(gojsonschema.NewBytesLoader(raw))
	if err != nil {
		return &FieldError{Field: "tools." + name, Problem: err.Error()}
	}
	if res.Valid() {
		return nil
	}
	errs := res.Errors()
	sort.Slice(errs, func(i, j int) bool { return errs[i].String() < errs[j].String() })
	re := errs[0]
	field := "tools." + name
	if f := re.Field(); f != "(root)" && f != "" {
		field += "." + f
	}
	if re.Type() == "additional_property_not_allowed" {
		field += "." + fmt.Sprint(re.Details()["property"])
		return &FieldError{Field: field, Problem: fmt.Sprintf("is not an option of %s (%s)", name, optionList(spec))}
	}
	return &FieldError{Field: field, Problem: re.Description()}
}

// optionList names the options a spec accepts, for error messages.
func optionList(spec Spec) string {
	var schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(spec.Options, &schema)
	if len(schema.Properties) == 0 {
		return "it takes no options"
	}
	names := make([]string, 0, len(schema.Properties))
	for k := range schema.Properties {
		names = append(names, k)
	}
	sort.Strings(names)
	return "options: " + strings.Join(names, ", ")
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
