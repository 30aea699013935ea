// Package tool holds the model-facing ToolSet: tools with a JSON schema compiled once when the
// set is built, and a Call that validates the raw arguments before running a tool.
package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"

	"github.com/agentharness/harness/shared/approval"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/sandbox"
	"github.com/agentharness/harness/shared/wire/jsonschema"
	"github.com/xeipuuv/gojsonschema"
)

// Tool is one callable capability.
type Tool struct {
	Name        string
	Description string
	// InputSchema is the JSON schema of the arguments; nil means an object with no properties.
	InputSchema json.RawMessage
	// Execute runs the tool on arguments that already passed InputSchema. Its error is shown to
	// the model as a failed tool result, never a failed turn.
	Execute func(ctx context.Context, input json.RawMessage) (any, error)
	// ProviderTool marks a provider-defined tool (model.ProviderGoogleSearch…): the model's
	// provider runs it, so it has no Execute and no InputSchema of its own.
	ProviderTool string
	// Approval is the tool's needsApproval policy, enforced by the loop before Execute is ever
	// reached; nil means calls run without approval.
	Approval *approval.Policy
	// Async is the execution mode of a tool wrapped as async ("same-invocation" or
	// "external-dispatch"); empty for a tool that runs inline.
	Async string
	// Subagent marks a tool that runs another agent's turn (config.subagent), whose progress
	// its caller's client is shown.
	Subagent bool
}

// ErrUnknownTool is returned by Prepare for a name the set does not hold.
var ErrUnknownTool = errors.New("unknown tool")

// ErrProviderTool is returned by Prepare for a provider-defined tool, which the harness never
// runs: a model that asks the harness to run one is answered with this error.
var ErrProviderTool = errors.New("is run by the model provider, not the harness")

// InputError reports arguments that do not match the tool's schema.
type InputError struct {
	Tool    string
	Reasons []string
}

func (e *InputError) Error() string {
	return fmt.Sprintf("invalid input for tool %s: %s", e.Tool, strings.Join(e.Reasons, "; "))
}

// ExecError wraps a failure of the tool itself.
type ExecError struct {
	Tool string
	Err  error
}

func (e *ExecError) Error() string { return fmt.Sprintf("tool %s failed: %v", e.Tool, e.Err) }
func (e *ExecError) Unwrap() error { return e.Err }

// Deferred is the error an inline tool's Execute returns when it handed its work over to end
// later (a blocking subagent call whose child stopped to wait): the model gets Output now, as
// it gets an async call's placeholder, and the pass ends after the step, so the model goes on
// once the result is there rather than over the placeholder.
type Deferred struct{ Output json.RawMessage }

func (d *Deferred) Error() string { return "the call was handed over; its result comes later" }

// Vars are the variables of the thread an agent's tools are built for.
type Vars struct {
	// Get returns a variable's value in the thread, "" when it has none; nil: none.
	Get func(name string) string
	// Scoped reports the names the agent declares scoped, which the harness environment must
	// not supply; nil: none.
	Scoped func(name string) bool
}

// Lookup is name's value in the thread, and whether the harness environment may supply it
// instead.
func (v Vars) Lookup(name string) (value string, fallback bool) {
	if v.Get != nil {
		value = v.Get(name)
	}
	return value, v.Scoped == nil || !v.Scoped(name)
}

var emptyObjectSchema = json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)

type entry struct {
	tool   Tool
	schema *gojsonschema.Schema
}

// Set is an immutable collection of tools keyed by their model-facing name.
type Set struct {
	byName map[string]entry
	specs  []model.ToolSpec
}

// NewSet compiles every tool's schema and rejects empty or duplicate names and bad schemas.
func NewSet(tools ...Tool) (*Set, error) {
	s := &Set{byName: make(map[string]entry, len(tools))}
	for _, t := range tools {
		if t.Name == "" {
			return nil, errors.New("tool with an empty name")
		}
		if _, dup := s.byName[t.Name]; dup {
			return nil, fmt.Errorf("duplicate tool name %q", t.Name)
		}
		if t.ProviderTool != "" {
			if t.Execute != nil {
				return nil, fmt.Errorf("provider-defined tool %q cannot have an Execute", t.Name)
			}
			if t.Approval != nil {
				return nil, fmt.Errorf("provider-defined tool %q cannot need approval: its provider runs it", t.Name)
			}
			s.byName[t.Name] = entry{tool: t}
			s.specs = append(s.specs, model.ToolSpec{Name: t.Name, Description: t.Description, ProviderTool: t.ProviderTool})
			continue
		}
		if t.Execute == nil {
			return nil, fmt.Errorf("tool %q has no Execute", t.Name)
		}
		if len(t.InputSchema) == 0 {
			t.InputSchema = emptyObjectSchema
		}
		schema, err := jsonschema.Compile(t.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("compiling the input schema of tool %q: %w", t.Name, err)
		}
		s.byName[t.Name] = entry{tool: t, schema: schema}
		s.specs = append(s.specs, model.ToolSpec{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
	}
	sort.Slice(s.specs, func(i, j int) bool { return s.specs[i].Name < s.specs[j].Name })
	return s, nil
}

// Specs returns the model-facing descriptions, sorted by name so prompts are stable.
func (s *Set) Specs() []model.ToolSpec { return s.specs }

// OverrideError names the tool whose requested approval status was refused.
type OverrideError struct {
	Tool string
	Err  error
}

func (e *OverrideError) Error() string { return fmt.Sprintf("tool %q: %v", e.Tool, e.Err) }
func (e *OverrideError) Unwrap() error { return e.Err }

// WithApprovals returns a copy of the set whose named tools follow the requested approval
// statuses instead of their own policies (a per-request override). Every name must be a tool of
// the set the harness runs, and a status may loosen a policy only where the policy allows it;
// the first refused name, in name order, comes back as *OverrideError.
func (s *Set) WithApprovals(overrides map[string]approval.Status) (*Set, error) {
	if len(overrides) == 0 {
		return s, nil
	}
	out := &Set{byName: make(map[string]entry, len(s.byName)), specs: s.specs}
	for k, v := range s.byName {
		out.byName[k] = v
	}
	names := make([]string, 0, len(overrides))
	for n := range overrides {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		e, ok := out.byName[name]
		if !ok {
			return nil, &OverrideError{Tool: name, Err: ErrUnknownTool}
		}
		if e.tool.ProviderTool != "" {
			return nil, &OverrideError{Tool: name, Err: fmt.Errorf("%w, so its approval cannot be set", ErrProviderTool)}
		}
		p, err := e.tool.Approval.Override(overrides[name], "set by the request's toolApproval")
		if err != nil {
			return nil, &OverrideError{Tool: name, Err: err}
		}
		e.tool.Approval = p
		out.byName[name] = e
	}
	return out, nil
}

// Names lists the set's tool names, sorted.
func (s *Set) Names() []string {
	names := make([]string, 0, len(s.byName))
	for n := range s.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// IsSubagent reports whether the named tool runs another agent's turn.
func (s *Set) IsSubagent(name string) bool { return s != nil && s.byName[name].tool.Subagent }

// AsyncMode is the async execution mode of the named tool, empty when it runs inline.
func (s *Set) AsyncMode(name string) string { return s.byName[name].tool.Async }

// Only returns the set narrowed to the named tools that it holds (a per-turn allowlist); a
// name it does not hold is ignored.
func (s *Set) Only(names []string) *Set {
	out := &Set{byName: make(map[string]entry, len(names))}
	for _, n := range names {
		if e, ok := s.byName[n]; ok {
			out.byName[n] = e
		}
	}
	for _, sp := range s.specs {
		if _, ok := out.byName[sp.Name]; ok {
			out.specs = append(out.specs, sp)
		}
	}
	return out
}

// With returns a set holding s's tools and more, with the checks of NewSet; a nil s is empty.
func (s *Set) With(more ...Tool) (*Set, error) {
	extra, err := NewSet(more...)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return extra, nil
	}
	out := &Set{byName: make(map[string]entry, len(s.byName)+len(extra.byName))}
	for k, v := range s.byName {
		out.byName[k] = v
	}
	for k, v := range extra.byName {
		if _, dup := out.byName[k]; dup {
			return nil, fmt.Errorf("duplicate tool name %q", k)
		}
		out.byName[k] = v
	}
	out.specs = append(slices.Clone(s.specs), extra.specs...)
	sort.Slice(out.specs, func(i, j int) bool { return out.specs[i].Name < out.specs[j].Name })
	return out, nil
}

// Len reports how many tools the set holds.
func (s *Set) Len() int { return len(s.byName) }

// Call is a tool call whose arguments passed the tool's schema, ready to run.
type Call struct {
	tool  Tool
	input json.RawMessage
}

// Prepare looks up name and validates input against its schema. Its errors, ErrUnknownTool and
// *InputError, are meant for the model.
func (s *Set) Prepare(name string, input json.RawMessage) (*Call, error) {
	e, ok := s.byName[name]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownTool, name)
	}
	if e.tool.ProviderTool != "" {
		return nil, fmt.Errorf("tool %q %w", name, ErrProviderTool)
	}
	if len(input) == 0 {
		input = json.RawMessage(`{}`)
	}
	res, err := e.schema.Validate(gojsonschema.NewBytesLoader(input))
	if err != nil {
		return nil, &InputError{Tool: name, Reasons: []string{"arguments are not valid JSON"}}
	}
	if !res.Valid() {
		reasons := make([]string, 0, len(res.Errors()))
		for _, re := range res.Errors() {
			reasons = append(reasons, re.String())
		}
		return nil, &InputError{Tool: name, Reasons: reasons}
	}
	return &Call{tool: e.tool, input: input}, nil
}

// Approval is the tool's approval decision for this call's input.
func (c *Call) Approval() approval.Decision { return c.tool.Approval.Decide(c.input) }

// Async is the call's async execution mode, empty when it runs inline.
func (c *Call) Async() string { return c.tool.Async }

// Name is the called tool's name.
func (c *Call) Name() string { return c.tool.Name }

// Input is the call's arguments as validated.
func (c *Call) Input() json.RawMessage { return c.input }

// Run executes the call and returns its result as JSON. A failure, a panic included, comes back
// as *ExecError, which the model sees as a failed tool result.
func (c *Call) Run(ctx context.Context) (out json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, &ExecError{Tool: c.tool.Name, Err: fmt.Errorf("panic: %v", p)}
		}
	}()
	v, err := c.tool.Execute(ctx, c.input)
	if err != nil {
		return nil, &ExecError{Tool: c.tool.Name, Err: err}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, &ExecError{Tool: c.tool.Name, Err: fmt.Errorf("encoding the result: %w", err)}
	}
	return b, nil
}

type callIDKey struct{}

// WithCallID returns ctx carrying the model's id of the tool call it runs.
func WithCallID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, callIDKey{}, id)
}

// CallIDFrom is the model's id of the tool call ctx runs; empty outside one.
func CallIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(callIDKey{}).(string)
	return id
}

// Env is what tool factories may use from the harness: its environment, for fallback
// credentials, a queue to hand outside work to, and a logger for what a build leaves out.
type Env struct {
	// Getenv is the deployment's value of a tool's variable, by its name: the function's config
	// read at start, never the process environment itself.
	Getenv func(string) string
	// Vars are the variables of the thread the tools run in; a variable resolves from them
	// before Getenv, and a scoped one from them only.
	Vars Vars
	// Send puts one message on an SQS queue; nil where no queue is wired.
	Send func(ctx context.Context, queueURL, body string) error
	// RunCode runs a command in the deployment's sandbox (sandbox.Runner's Run); nil where it
	// has none. A tool that evaluates model- or user-authored code runs it here, never in the
	// harness's process (001's state.runCode).
	RunCode func(ctx context.Context, req sandbox.Request) (sandbox.Result, error)
	// Logger receives the warnings of a build; nil discards them.
	Logger *slog.Logger
}
