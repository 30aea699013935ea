package agentconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/agentharness/harness/shared/sandbox"
	"github.com/agentharness/harness/shared/wire/ids"
)

// Sandbox is config.sandbox: the agent runs shell commands (bash) in a sandbox with these
// limits, in each workspace that does not opt out, or in an empty scratch root when it names
// none.
type Sandbox struct {
	// Limits bound each run; a zero field is its default (sandbox.Limits).
	Limits sandbox.Limits `json:"limits,omitzero"`
	// Network is "none", the only mode there is; "" means "none".
	Network string `json:"network,omitempty"`
	// PermissionMode is the approval of the stateless bash (no workspace); "" is standard, which
	// holds every call.
	PermissionMode string `json:"permissionMode,omitempty"`
	// Variables names the agent's variables (config.variables) whose values in the thread are
	// set in each command's environment; no other variable, nor the harness's, reaches it.
	Variables []string `json:"variables,omitempty"`
}

// Workspaces is config.workspaces: the account's workspaces the agent works in.
type Workspaces []Workspace

// Workspace is one of config.workspaces.
type Workspace struct {
	Name string `json:"name"`
	// PermissionMode says which calls of the workspace's tools are held for approval; "" is
	// standard.
	PermissionMode string `json:"permissionMode,omitempty"`
	// NoSandbox is set by "sandbox": null: the workspace has no bash even when the agent has a
	// sandbox.
	NoSandbox bool `json:"-"`
}

// Permission modes of a workspace's tools.
const (
	// Standard holds write, edit and bash.
	Standard = "standard"
	// AcceptEdits holds bash.
	AcceptEdits = "acceptEdits"
	// MemoryMode holds writes and edits outside memory/, and bash (config.memory, the agent's
	// own memory, is Memory).
	MemoryMode = "memory"
	// Unrestricted holds nothing.
	Unrestricted = "unrestricted"
	// Strict holds every call, reads too.
	Strict = "strict"
)

// PermissionModes are the modes, in the order the docs list them.
var PermissionModes = []string{Standard, AcceptEdits, MemoryMode, Unrestricted, Strict}

// MaxWorkspaces bounds config.workspaces.
const MaxWorkspaces = 10

// The tools of a workspace; with several workspaces each is prefixed with the workspace's name
// and WorkspaceToolSep.
const (
	Read  = "read"
	Write = "write"
	Edit  = "edit"
	Glob  = "glob"
	Grep  = "grep"
	Bash  = "bash"

	WorkspaceToolSep = "__"
)

// WorkspaceTools are the names of a workspace's tools.
var WorkspaceTools = []string{Read, Write, Edit, Glob, Grep, Bash}

// prefixRe is a workspace name that can prefix tool names (toolNameRe, leaving room for the
// separator and the longest tool name).
var prefixRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,56}$`)

// HasSandbox reports whether w has a sandbox, and so all its tools (without one, read and glob
// alone): the agent has a sandbox and w does not opt out.
func (c *Config) HasSandbox(w Workspace) bool { return c.Sandbox != nil && !w.NoSandbox }

// ToolName is the model-facing name of tool of workspace w: tool alone when the agent has one
// workspace.
func (c *Config) ToolName(w Workspace, tool string) string {
	if len(c.Workspaces) <= 1 {
		return tool
	}
	return w.Name + WorkspaceToolSep + tool
}

// UnmarshalJSON decodes config.sandbox, its refusals a *FieldError at the exact field.
func (s *Sandbox) UnmarshalJSON(raw []byte) error {
	var out struct {
		Limits         json.RawMessage `json:"limits"`
		Network        string          `json:"network"`
		PermissionMode string          `json:"permissionMode"`
		Variables      []string        `json:"variables"`
	}
	if err := strictObject(raw, &out); err != nil {
		return &FieldError{Field: "sandbox", Problem: "must be an object with limits, network, permissionMode and variables: " + err.Error()}
	}
	if len(out.Limits) > 0 && string(out.Limits) != "null" {
		if err := strictObject(out.Limits, &s.Limits); err != nil {
			return &FieldError{Field: "sandbox.limits", Problem: "must be an object of cpuSeconds, memoryBytes, wallSeconds, outputBytes, maxFiles and maxBytes: " + err.Error()}
		}
		if err := s.Limits.Check(); err != nil {
			// Check names the limit first ("limits.cpuSeconds: …").
			field, problem, _ := strings.Cut(err.Error(), ": ")
			return &FieldError{Field: "sandbox." + field, Problem: problem}
		}
	}
	if out.Network != "" && out.Network != "none" {
		return &FieldError{Field: "sandbox.network", Problem: fmt.Sprintf("%q is not a network mode: the only one is \"none\"", out.Network)}
	}
	if p := modeProblem(out.PermissionMode); p != "" {
		return &FieldError{Field: "sandbox.permissionMode", Problem: p}
	}
	if len(out.Variables) > sandbox.MaxEnv {
		return &FieldError{Field: "sandbox.variables", Problem: fmt.Sprintf("names %d variables, more than %d", len(out.Variables), sandbox.MaxEnv)}
	}
	for i, name := range out.Variables {
		if p := sandbox.EnvProblem(name); p != "" {
			return &FieldError{Field: fmt.Sprintf("sandbox.variables[%d]", i), Problem: fmt.Sprintf("%q %s", name, p)}
		}
		if slices.Contains(out.Variables[:i], name) {
			return &FieldError{Field: fmt.Sprintf("sandbox.variables[%d]", i), Problem: fmt.Sprintf("%q is named twice", name)}
		}
	}
	s.Network, s.PermissionMode, s.Variables = out.Network, out.PermissionMode, out.Variables
	return nil
}

// UnmarshalJSON decodes config.workspaces, its refusals a *FieldError at the exact field.
func (ws *Workspaces) UnmarshalJSON(raw []byte) error {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return &FieldError{Field: "workspaces", Problem: "must be an array of objects such as {\"name\": \"notes\"}"}
	}
	if len(items) > MaxWorkspaces {
		return &FieldError{Field: "workspaces", Problem: fmt.Sprintf("names %d workspaces, more than %d", len(items), MaxWorkspaces)}
	}
	out := make(Workspaces, 0, len(items))
	for i, item := range items {
		at := fmt.Sprintf("workspaces[%d]", i)
		var w struct {
			Name           *string         `json:"name"`
			PermissionMode string          `json:"permissionMode"`
			Sandbox        json.RawMessage `json:"sandbox"`
		}
		if err := strictObject(item, &w); err != nil {
			return &FieldError{Field: at, Problem: "must be an object with name, permissionMode and sandbox: " + err.Error()}
		}
		switch {
		case w.Name == nil:
			return &FieldError{Field: at + ".name", Problem: "is required: the name of a workspace of the account"}
		case ids.Problem(*w.Name) != "":
			return &FieldError{Field: at + ".name", Problem: "is not a workspace name: " + ids.Grammar}
		case slices.ContainsFunc(out, func(o Workspace) bool { return o.Name == *w.Name }):
			return &FieldError{Field: at + ".name", Problem: fmt.Sprintf("%q is named twice", *w.Name)}
		case len(items) > 1 && !prefixRe.MatchString(*w.Name):
			return &FieldError{Field: at + ".name", Problem: "with several workspaces a name prefixes its tools' names (" + *w.Name + WorkspaceToolSep + Read + "), so it must be a letter, then up to 56 letters, digits, _ or -"}
		case modeProblem(w.PermissionMode) != "":
			return &FieldError{Field: at + ".permissionMode", Problem: modeProblem(w.PermissionMode)}
		case len(w.Sandbox) > 0 && string(w.Sandbox) != "null":
			return &FieldError{Field: at + ".sandbox", Problem: "may only be null, which leaves the workspace without bash; the sandbox's settings are config.sandbox"}
		}
		out = append(out, Workspace{Name: *w.Name, PermissionMode: w.PermissionMode, NoSandbox: len(w.Sandbox) > 0})
	}
	*ws = out
	return nil
}

// MarshalJSON writes a workspace as it was given, "sandbox": null included.
func (w Workspace) MarshalJSON() ([]byte, error) {
	type plain Workspace
	b, err := json.Marshal(plain(w))
	if err != nil || !w.NoSandbox {
		return b, err
	}
	return append(b[:len(b)-1], `,"sandbox":null}`...), nil
}

// modeProblem says what is wrong with a permission mode; empty when nothing is ("" is standard).
func modeProblem(mode string) string {
	if mode == "" || slices.Contains(PermissionModes, mode) {
		return ""
	}
	return fmt.Sprintf("%q is not a permission mode: use %s", mode, strings.Join(PermissionModes, ", "))
}

// strictObject decodes the JSON object raw into v, refusing fields v lacks.
func strictObject(raw []byte, v any) error {
	if !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
		return errors.New("not an object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// checkSandboxVariables refuses a sandbox variable the agent does not declare: the sandbox gets
// only values the agent's threads are asked for.
func checkSandboxVariables(cfg *Config) error {
	if cfg.Sandbox == nil {
		return nil
	}
	for i, name := range cfg.Sandbox.Variables {
		if !slices.ContainsFunc(cfg.Variables, func(v Variable) bool { return v.Name == name }) {
			return &FieldError{Field: fmt.Sprintf("sandbox.variables[%d]", i), Problem: fmt.Sprintf("%q is not one of the agent's variables (declare it in variables)", name)}
		}
	}
	return nil
}

// checkWorkspaceTools refuses a config whose config.tools or config.prompts name a tool its
// workspaces (or its sandbox's stateless bash) give it.
func checkWorkspaceTools(cfg *Config) error {
	var names []string
	for _, w := range cfg.Workspaces {
		for _, t := range WorkspaceTools {
			if t == Read || t == Glob || cfg.HasSandbox(w) {
				names = append(names, cfg.ToolName(w, t))
			}
		}
	}
	if cfg.Sandbox != nil && len(cfg.Workspaces) == 0 {
		names = append(names, Bash)
	}
	for _, n := range names {
		if cfg.Tools[n] != nil {
			return &FieldError{Field: "tools." + n, Problem: "is the name of a tool the agent's workspaces or sandbox give it"}
		}
		if _, ok := cfg.Prompts[n]; ok {
			return &FieldError{Field: "prompts." + n, Problem: "is the name of a tool the agent's workspaces or sandbox give it"}
		}
	}
	return nil
}
