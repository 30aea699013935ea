package agentconfig_test

import (
	"testing"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/tool/builtintools"
)

// config.memory is refused at the exact field.
func TestMemoryIsCheckedAtItsField(t *testing.T) {
	wantRefusals(t, []refusal{
		{`"memory":"notes"`, "memory", "must be an object"},
		{`"memory":{}`, "memory.workspace", "is required"},
		{`"memory":{"workspace":"a/b"}`, "memory.workspace", "not a workspace name"},
		{`"memory":{"workspace":"m","scope":"user"}`, "memory.scope", `"user" is not a memory scope: use agent, endUser, conversation`},
		{`"memory":{"workspace":"m","path":"x"}`, "memory", "unknown field"},
		{`"memory":{"workspace":"m"},"workspaces":[{"name":"w"},{"name":"m"}]`, "memory.workspace", "also workspaces[1].name"},
		{`"memory":{"workspace":"m"},"prompts":{"memory_read":{"system":"s"}}`, "prompts.memory_read", "a tool the agent's memory gives it"},
		{`"Memory":{"workspace":"m"}`, "Memory", "not an agent config field"},
	})
}

// The scope defaults to agent.
func TestMemoryScopeDefault(t *testing.T) {
	for part, want := range map[string]string{
		`{"workspace":"m"}`:                        agentconfig.MemoryAgent,
		`{"workspace":"m","scope":"endUser"}`:      agentconfig.MemoryEndUser,
		`{"workspace":"m","scope":"conversation"}`: agentconfig.MemoryConversation,
	} {
		c, err := agentconfig.Validate([]byte(`{"name":"a","model":{"provider":"scripted","script":[{"text":"ok"}]},"memory":`+part+`}`), builtintools.ConfigChecks())
		if err != nil {
			t.Fatalf("%s: %v", part, err)
		}
		if c.Config.Memory == nil || c.Config.Memory.Workspace != "m" || c.Config.Memory.Scope != want {
			t.Errorf("%s: memory %+v, want workspace m, scope %s", part, c.Config.Memory, want)
		}
	}
}
