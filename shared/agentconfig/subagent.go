package agentconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/agentharness/harness/shared/wire/ids"
)

// Subagent is config.subagent: the account's other agents this agent may call, each as a tool
// (001 section 5, SubagentToolConfig). A call runs the agent's turn in a conversation of its
// own, linked to the caller's.
type Subagent struct {
	Agents []SubagentTool `json:"agents"`
	// RunSubagent also offers run_subagent, one tool that takes the name of one of Agents.
	RunSubagent bool `json:"runSubagent,omitempty"`
	// MaxDepth bounds how deep calls nest: a conversation started by a call is one level below
	// its caller's; 0 means DefaultMaxDepth.
	MaxDepth int `json:"maxDepth,omitempty"`
	// MaxChildrenPerTurn bounds the calls one turn makes; 0 means DefaultMaxChildren.
	MaxChildrenPerTurn int `json:"maxChildrenPerTurn,omitempty"`
}

// SubagentTool is one agent this agent may call.
type SubagentTool struct {
	// Name is the model-facing tool name.
	Name    string `json:"name"`
	AgentID string `json:"agentId"`
	// Description tells the model what the agent is for.
	Description string `json:"description,omitempty"`
	// Blocking (the default) waits for the agent's answer; false starts it in the background
	// and its answer comes back to the caller as an async tool result.
	Blocking *bool `json:"blocking,omitempty"`
	// InitUserMessageProperty is the tool input property whose value is the agent's first
	// user message; "message" when empty.
	InitUserMessageProperty string `json:"initUserMessageProperty,omitempty"`
	// InitAgentNameProperty, when set, is an optional tool input property whose value names the
	// child: its thread's display name, shown to the caller's client.
	InitAgentNameProperty string `json:"initAgentNameProperty,omitempty"`
	// InitAttachmentsProperty, when set, is an optional tool input property listing files of
	// the caller's thread (attachment ids) the child gets with its first message.
	InitAttachmentsProperty string `json:"initAttachmentsProperty,omitempty"`
	// Optional names a variable of the caller's thread, a flag: the tool exists only while it
	// is true, 1 or yes (any case). Never the process environment's: an account names it.
	Optional string `json:"optional,omitempty"`
	// Immediate calls the agent with the caller's user message at the start of each of the
	// caller's turns, before its first model step (001's immediate); nil: it does not.
	Immediate *Immediate `json:"immediate,omitempty"`
	// Resumable makes the agent a set of named instances that persist across the caller's
	// turns, created with subagent_create and sent messages with subagent_message, instead of a
	// tool of its own.
	Resumable *Resumable `json:"resumable,omitempty"`
}

// Immediate is 001 section 5's immediate: true (the zero value), or the per-instance variables
// of the agent's calls. NameEnv and DescriptionEnv name the caller's variables whose values
// name the child (its thread's display name) and describe its task (put before its first
// message): the only ones a model may see. ScopedEnv names the caller's variables copied into
// the child's thread for its tools, whatever the child declares scoped; no model ever sees them.
type Immediate struct {
	NameEnv        string   `json:"nameEnv,omitempty"`
	DescriptionEnv string   `json:"descriptionEnv,omitempty"`
	ScopedEnv      []string `json:"scopedEnv,omitempty"`
}

// MaxScopedEnv bounds immediate.scopedEnv.
const MaxScopedEnv = 20

// MarshalJSON writes true for the plain form.
func (im *Immediate) MarshalJSON() ([]byte, error) {
	if im.NameEnv == "" && im.DescriptionEnv == "" && len(im.ScopedEnv) == 0 {
		return []byte("true"), nil
	}
	type plain Immediate
	return json.Marshal((*plain)(im))
}

// UnmarshalJSON reads true or the object form, strictly; false is left to the caller (nil).
func (im *Immediate) UnmarshalJSON(raw []byte) error {
	if string(bytes.TrimSpace(raw)) == "true" {
		*im = Immediate{}
		return nil
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil || keys == nil {
		return &FieldError{Field: "immediate", Problem: "must be true, false or {nameEnv, descriptionEnv, scopedEnv}"}
	}
	for k := range keys {
		if !slices.Contains([]string{"nameEnv", "descriptionEnv", "scopedEnv"}, k) {
			return &FieldError{Field: "immediate." + k, Problem: "is not an immediate field (fields: nameEnv, descriptionEnv, scopedEnv)"}
		}
	}
	type plain Immediate
	var out plain
	if err := json.Unmarshal(raw, &out); err != nil {
		return &FieldError{Field: "immediate", Problem: "must be {nameEnv: string, descriptionEnv: string, scopedEnv: [string]}"}
	}
	for _, f := range []struct{ field, name string }{{"nameEnv", out.NameEnv}, {"descriptionEnv", out.DescriptionEnv}} {
		if f.name != "" && !VariableName.MatchString(f.name) {
			return &FieldError{Field: "immediate." + f.field, Problem: fmt.Sprintf("%q is not a variable name", f.name)}
		}
	}
	if len(out.ScopedEnv) > MaxScopedEnv {
		return &FieldError{Field: "immediate.scopedEnv", Problem: fmt.Sprintf("names %d variables, more than %d", len(out.ScopedEnv), MaxScopedEnv)}
	}
	for i, name := range out.ScopedEnv {
		if !VariableName.MatchString(name) || slices.Index(out.ScopedEnv, name) != i {
			return &FieldError{Field: fmt.Sprintf("immediate.scopedEnv[%d]", i), Problem: fmt.Sprintf("%q is not a variable name, or is named twice", name)}
		}
	}
	*im = Immediate(out)
	return nil
}

// Resumable is 001 section 5's resumable: persistent instances of a subagent.
type Resumable struct {
	// ReceivesMessages is 001's receives_messages, "side_a" or "side_b": which side of a
	// two-sided agent takes the messages. The harness's agents have one side, which takes them
	// either way.
	ReceivesMessages string `json:"receives_messages"`
	// MaxInstances bounds the instances one calling conversation may create; 0 means
	// DefaultMaxInstances.
	MaxInstances int `json:"maxInstances,omitempty"`
	// ParentCommunication is "implicit" (the default: each of an instance's turns answers the
	// call that started it) or "explicit" (it answers only through its notify_parent tool).
	ParentCommunication string `json:"parentCommunication,omitempty"`
}

// Instances is MaxInstances with its default.
func (r *Resumable) Instances() int {
	if r.MaxInstances == 0 {
		return DefaultMaxInstances
	}
	return r.MaxInstances
}

// Explicit reports whether instances answer only through notify_parent.
func (r *Resumable) Explicit() bool { return r.ParentCommunication == "explicit" }

// Limits of config.subagent.
const (
	DefaultMaxDepth    = 3
	MaxDepthLimit      = 10
	DefaultMaxChildren = 8
	MaxChildrenLimit   = 50
	// DefaultMessageProperty is the input property of a subagent tool that carries its message.
	DefaultMessageProperty = "message"
	// RunSubagent is the name of the one tool that takes the agent's name.
	RunSubagent = "run_subagent"
	// The tools of resumable subagents: create an instance, send one a message, and (the
	// instance's, with explicit parentCommunication) answer the caller.
	SubagentCreate  = "subagent_create"
	SubagentMessage = "subagent_message"
	NotifyParent    = "notify_parent"
	// DefaultMaxInstances and MaxInstancesLimit bound resumable.maxInstances.
	DefaultMaxInstances = 5
	MaxInstancesLimit   = 50
)

// reserved are the tool names the harness gives subagents itself.
var reserved = []string{RunSubagent, SubagentCreate, SubagentMessage, NotifyParent}

// IsBlocking reports whether calls wait for the agent's answer; a resumable agent's never do.
func (t SubagentTool) IsBlocking() bool {
	return t.Resumable == nil && (t.Blocking == nil || *t.Blocking)
}

// MessageProperty is the input property that carries the agent's first message.
func (t SubagentTool) MessageProperty() string {
	if t.InitUserMessageProperty == "" {
		return DefaultMessageProperty
	}
	return t.InitUserMessageProperty
}

// Depth is MaxDepth with its default.
func (s *Subagent) Depth() int {
	if s.MaxDepth == 0 {
		return DefaultMaxDepth
	}
	return s.MaxDepth
}

// Children is MaxChildrenPerTurn with its default.
func (s *Subagent) Children() int {
	if s.MaxChildrenPerTurn == 0 {
		return DefaultMaxChildren
	}
	return s.MaxChildrenPerTurn
}

// subagentFields are the keys of a config.subagent.agents entry.
var (
	subagentFields = []string{"name", "agentId", "description", "blocking", "initUserMessageProperty", "initAgentNameProperty", "initAttachmentsProperty", "optional", "resumable", "immediate"}
	toolNameRe     = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)
	propertyRe     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
	flagRe         = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

// UnmarshalJSON decodes config.subagent strictly and checks it, its refusals a *FieldError at
// the exact field ("subagent.agents[1].name").
func (s *Subagent) UnmarshalJSON(raw []byte) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil || top == nil {
		return &FieldError{Field: "subagent", Problem: "must be an object"}
	}
	for k := range top {
		if !slices.Contains([]string{"agents", "runSubagent", "maxDepth", "maxChildrenPerTurn"}, k) {
			return &FieldError{Field: "subagent." + k, Problem: "is not a subagent field (fields: agents, runSubagent, maxDepth, maxChildrenPerTurn)"}
		}
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(top["agents"], &entries); err != nil || len(entries) == 0 {
		return &FieldError{Field: "subagent.agents", Problem: "must be a non-empty array of the agents this agent may call"}
	}
	type plain Subagent
	var out plain
	for _, k := range []string{"runSubagent", "maxDepth", "maxChildrenPerTurn"} {
		if v, ok := top[k]; ok {
			var err error
			switch k {
			case "runSubagent":
				err = json.Unmarshal(v, &out.RunSubagent)
			case "maxDepth":
				err = json.Unmarshal(v, &out.MaxDepth)
			default:
				err = json.Unmarshal(v, &out.MaxChildrenPerTurn)
			}
			if err != nil {
				kind := "an integer"
				if k == "runSubagent" {
					kind = "true or false"
				}
				return &FieldError{Field: "subagent." + k, Problem: "must be " + kind}
			}
		}
	}
	if out.MaxDepth < 0 || out.MaxDepth > MaxDepthLimit {
		return &FieldError{Field: "subagent.maxDepth", Problem: fmt.Sprintf("must be between 1 and %d (0 or absent: %d)", MaxDepthLimit, DefaultMaxDepth)}
	}
	if out.MaxChildrenPerTurn < 0 || out.MaxChildrenPerTurn > MaxChildrenLimit {
		return &FieldError{Field: "subagent.maxChildrenPerTurn", Problem: fmt.Sprintf("must be between 1 and %d (0 or absent: %d)", MaxChildrenLimit, DefaultMaxChildren)}
	}
	for i, e := range entries {
		t, err := subagentTool(fmt.Sprintf("subagent.agents[%d]", i), e)
		if err != nil {
			return err
		}
		for _, prev := range out.Agents {
			if prev.Name == t.Name {
				return &FieldError{Field: fmt.Sprintf("subagent.agents[%d].name", i), Problem: fmt.Sprintf("%q names another entry too", t.Name)}
			}
		}
		if slices.Contains(reserved, t.Name) {
			return &FieldError{Field: fmt.Sprintf("subagent.agents[%d].name", i), Problem: t.Name + " is the name of a tool the harness gives subagents (" + strings.Join(reserved, ", ") + ")"}
		}
		out.Agents = append(out.Agents, t)
	}
	if out.RunSubagent {
		// run_subagent runs the agents that are not resumable.
		var first *SubagentTool
		for i, t := range out.Agents {
			if t.Resumable != nil {
				continue
			}
			if first == nil {
				first = &out.Agents[i]
			} else if t.IsBlocking() != first.IsBlocking() {
				return &FieldError{Field: "subagent.runSubagent", Problem: "the agents run_subagent runs must all be blocking or all non-blocking"}
			}
		}
		if first == nil {
			return &FieldError{Field: "subagent.runSubagent", Problem: "has no agent to run: every agent is resumable"}
		}
	}
	*s = Subagent(out)
	return nil
}

func subagentTool(at string, raw json.RawMessage) (SubagentTool, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return SubagentTool{}, &FieldError{Field: at, Problem: "must be an object"}
	}
	for k := range m {
		if !slices.Contains(subagentFields, k) {
			return SubagentTool{}, &FieldError{Field: at + "." + k, Problem: "is not a subagent tool field (fields: " + strings.Join(subagentFields, ", ") + ")"}
		}
	}
	for _, k := range []string{"resumable", "immediate"} {
		if v, ok := m[k]; ok && string(bytes.TrimSpace(v)) == "false" {
			delete(m, k) // 001's false, the default
			raw, _ = json.Marshal(m)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	var t SubagentTool
	if err := dec.Decode(&t); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return SubagentTool{}, &FieldError{Field: at + "." + typeErr.Field, Problem: "must be " + jsonKind(typeErr.Type.Kind().String())}
		}
		var fe *FieldError
		if errors.As(err, &fe) {
			return SubagentTool{}, &FieldError{Field: at + "." + fe.Field, Problem: fe.Problem}
		}
		return SubagentTool{}, &FieldError{Field: at, Problem: err.Error()}
	}
	switch {
	case !toolNameRe.MatchString(t.Name):
		return t, &FieldError{Field: at + ".name", Problem: "must be a tool name: a letter, then up to 63 letters, digits, _ or -"}
	case t.AgentID == "":
		return t, &FieldError{Field: at + ".agentId", Problem: "is required: the id of the account's agent to call"}
	case !ids.Valid(t.AgentID):
		return t, &FieldError{Field: at + ".agentId", Problem: ids.Problem(t.AgentID)}
	case len(t.Description) > 1024:
		return t, &FieldError{Field: at + ".description", Problem: "must be at most 1024 characters"}
	case t.InitUserMessageProperty != "" && !propertyRe.MatchString(t.InitUserMessageProperty):
		return t, &FieldError{Field: at + ".initUserMessageProperty", Problem: "must be a property name: a letter or _, then up to 63 letters, digits or _"}
	case t.InitAgentNameProperty != "" && !propertyRe.MatchString(t.InitAgentNameProperty):
		return t, &FieldError{Field: at + ".initAgentNameProperty", Problem: "must be a property name: a letter or _, then up to 63 letters, digits or _"}
	case t.InitAgentNameProperty != "" && t.InitAgentNameProperty == t.MessageProperty():
		return t, &FieldError{Field: at + ".initAgentNameProperty", Problem: "must differ from the message's property " + t.MessageProperty()}
	case t.InitAgentNameProperty != "" && t.Resumable != nil:
		return t, &FieldError{Field: at + ".initAgentNameProperty", Problem: "does not apply to a resumable agent: subagent_create names its instances"}
	case t.InitAttachmentsProperty != "" && !propertyRe.MatchString(t.InitAttachmentsProperty):
		return t, &FieldError{Field: at + ".initAttachmentsProperty", Problem: "must be a property name: a letter or _, then up to 63 letters, digits or _"}
	case t.InitAttachmentsProperty != "" && (t.InitAttachmentsProperty == t.MessageProperty() || t.InitAttachmentsProperty == t.InitAgentNameProperty):
		return t, &FieldError{Field: at + ".initAttachmentsProperty", Problem: "must differ from the tool's other properties"}
	case t.InitAttachmentsProperty != "" && t.Resumable != nil:
		return t, &FieldError{Field: at + ".initAttachmentsProperty", Problem: "does not apply to a resumable agent yet: its instances get text messages"}
	case t.Optional != "" && !flagRe.MatchString(t.Optional):
		return t, &FieldError{Field: at + ".optional", Problem: "must name a variable, the flag: a letter or _, then letters, digits or _"}
	}
	if t.Immediate != nil && m["resumable"] != nil {
		return t, &FieldError{Field: at + ".immediate", Problem: "cannot start a resumable agent: its instances are created by name with subagent_create"}
	}
	return t, checkResumable(at, m["resumable"], &t)
}

// checkResumable checks a resumable entry's resumable block (raw, which decoded into t).
func checkResumable(at string, raw json.RawMessage, t *SubagentTool) error {
	if raw == nil {
		return nil
	}
	at += ".resumable"
	var keys map[string]json.RawMessage
	if json.Unmarshal(raw, &keys) != nil || keys == nil || t.Resumable == nil {
		return &FieldError{Field: at, Problem: "must be an object (false or absent: not resumable)"}
	}
	for k := range keys {
		if !slices.Contains([]string{"receives_messages", "maxInstances", "parentCommunication"}, k) {
			return &FieldError{Field: at + "." + k, Problem: "is not a resumable field (fields: receives_messages, maxInstances, parentCommunication)"}
		}
	}
	r := t.Resumable
	switch {
	case r.ReceivesMessages != "side_a" && r.ReceivesMessages != "side_b":
		return &FieldError{Field: at + ".receives_messages", Problem: `must be "side_a" or "side_b"`}
	case r.MaxInstances < 0 || r.MaxInstances > MaxInstancesLimit:
		return &FieldError{Field: at + ".maxInstances", Problem: fmt.Sprintf("must be between 1 and %d (0 or absent: %d)", MaxInstancesLimit, DefaultMaxInstances)}
	case r.ParentCommunication != "" && r.ParentCommunication != "implicit" && r.ParentCommunication != "explicit":
		return &FieldError{Field: at + ".parentCommunication", Problem: `must be "implicit" or "explicit"`}
	case t.Blocking != nil && *t.Blocking:
		return &FieldError{Field: at, Problem: "a resumable agent's calls do not block: leave blocking out or false"}
	}
	return nil
}

// FlagOn reports whether an optional tool's flag value turns it on: true, 1 or yes, in any case.
func FlagOn(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "1", "yes":
		return true
	}
	return false
}
