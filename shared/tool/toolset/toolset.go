// Package toolset is what the engine (turn.Toolset) tells a toolset of the agent it builds, and
// what a toolset offers it: a toolset adds to the agents whose config names its feature
// (config.subagent, config.prompts, config.skills, config.mcpServers), asked whenever an agent
// is built for a turn. It is a package of its own so that what links only tools (the async rows
// of the sweeper and async-tool-complete) links no agent config.
package toolset

import (
	"context"
	"iter"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/tool"
)

// Build is an agent as the engine builds it for a turn, as a toolset is told of it.
type Build struct {
	AccountID, AgentID string
	// ConversationID is the conversation the agent is built for, and EndUser the end user it
	// belongs to (empty: the account's own); both empty for an agent built outside any
	// conversation (to list its tools).
	ConversationID, EndUser string
	// Config is the agent's stored config; a toolset reads its own part of it.
	Config *agentconfig.Config
	// Model is the agent's model, an agent.Model (declared by the loop, which sits above this
	// package).
	Model interface {
		Stream(ctx context.Context, req *model.Request) iter.Seq2[model.Event, error]
	}
	// Vars are the variables of the thread the agent is built for.
	Vars tool.Vars
}

// Offer is what a toolset adds to an agent.
type Offer struct {
	Tools []tool.Tool
	// System is added to the agent's system prompt.
	System string
	// Warnings say what the toolset could not offer this turn, which goes on without it (an
	// MCP server that could not be reached); the turn's client is told.
	Warnings []string
	// Immediate gives the calls a turn begins with (agent.Config.Immediate); nil: none.
	Immediate func(m model.Message) []model.Part
}

// ConfigError is a toolset's refusal of an agent: its config asks for what the toolset cannot
// give (a feature this deployment lacks, a policy that does not parse), so the agent cannot run.
// Any other error of a toolset is a failure to build the agent (a store that could not be read).
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }
