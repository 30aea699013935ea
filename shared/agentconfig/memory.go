package agentconfig

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agentharness/harness/shared/wire/ids"
)

// Memory is config.memory: the agent keeps notes that outlive a conversation as files of one
// of the account's workspaces, in a folder per agent, end user or conversation (Scope).
type Memory struct {
	Workspace string `json:"workspace"`
	// Scope is who shares the memory: MemoryAgent, MemoryEndUser or MemoryConversation.
	Scope string `json:"scope"`
}

// Scopes of config.memory.
const (
	// MemoryAgent is one memory for all the agent's conversations.
	MemoryAgent = "agent"
	// MemoryEndUser is one memory per end user (the account's own turns share one).
	MemoryEndUser = "endUser"
	// MemoryConversation is one memory per conversation.
	MemoryConversation = "conversation"
)

// MemoryScopes are the scopes, in the order the docs list them.
var MemoryScopes = []string{MemoryAgent, MemoryEndUser, MemoryConversation}

// The memory tools' model-facing names.
const (
	MemoryRead    = "memory_read"
	MemoryList    = "memory_list"
	MemoryInsert  = "memory_insert"
	MemoryReplace = "memory_replace"
	MemoryRewrite = "memory_rewrite"
)

// MemoryTools are the names of the tools config.memory gives.
var MemoryTools = []string{MemoryRead, MemoryList, MemoryInsert, MemoryReplace, MemoryRewrite}

// UnmarshalJSON decodes config.memory, its refusals a *FieldError at the exact field; the
// scope defaults to MemoryAgent.
func (m *Memory) UnmarshalJSON(raw []byte) error {
	var out struct {
		Workspace *string `json:"workspace"`
		Scope     string  `json:"scope"`
	}
	if err := strictObject(raw, &out); err != nil {
		return &FieldError{Field: "memory", Problem: `must be an object with workspace and scope, such as {"workspace": "memory", "scope": "endUser"}: ` + err.Error()}
	}
	switch {
	case out.Workspace == nil:
		return &FieldError{Field: "memory.workspace", Problem: "is required: the name of a workspace of the account"}
	case ids.Problem(*out.Workspace) != "":
		return &FieldError{Field: "memory.workspace", Problem: "is not a workspace name: " + ids.Grammar}
	case out.Scope != "" && !slices.Contains(MemoryScopes, out.Scope):
		return &FieldError{Field: "memory.scope", Problem: fmt.Sprintf("%q is not a memory scope: use %s", out.Scope, strings.Join(MemoryScopes, ", "))}
	}
	m.Workspace, m.Scope = *out.Workspace, out.Scope
	if m.Scope == "" {
		m.Scope = MemoryAgent
	}
	return nil
}

// checkMemory refuses a memory workspace the agent also names in config.workspaces, whose file
// tools would reach every end user's and conversation's memory, and a tool of config.tools or
// config.prompts named like a memory tool.
func checkMemory(cfg *Config) error {
	if cfg.Memory == nil {
		return nil
	}
	if i := slices.IndexFunc(cfg.Workspaces, func(w Workspace) bool { return w.Name == cfg.Memory.Workspace }); i >= 0 {
		return &FieldError{Field: "memory.workspace", Problem: fmt.Sprintf("%q is also workspaces[%d].name: a memory workspace cannot be one the agent works in, whose tools would reach every end user's and conversation's memory", cfg.Memory.Workspace, i)}
	}
	for _, n := range MemoryTools {
		if cfg.Tools[n] != nil {
			return &FieldError{Field: "tools." + n, Problem: "is the name of a tool the agent's memory gives it"}
		}
		if _, ok := cfg.Prompts[n]; ok {
			return &FieldError{Field: "prompts." + n, Problem: "is the name of a tool the agent's memory gives it"}
		}
	}
	return nil
}
