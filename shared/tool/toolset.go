package tool

import (
	"context"
	"iter"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/model"
)

// A toolset adds to the agents whose config names its feature (config.subagent, config.prompts,
// config.skills, config.mcpServers): the engine (turn.Toolset) asks each, whenever it builds an
// agent for a turn, with a Build, and gets an Offer.

// Build is an agent as the engine builds it for a turn, as a toolset is told of it.
type Build struct {
	AccountID, AgentID string
	// Config is the agent's stored config; a toolset reads its own part of it.
	Config *agentconfig.Config
	// Model is the agent's model, an agent.Model (declared by the loop, which sits above this
	// package).
	Model interface {
		Stream(ctx context.Context, req *model.Request) iter.Seq2[model.Event, error]
	}
	// Vars are the variables of the thread the agent is built for.
	Vars Vars
}

// Offer is what a toolset adds to an agent.
type Offer struct {
	Tools []Tool
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

type turnKey struct{}

// WithTurn returns ctx carrying the turn its tools run in, the engine's own value: a tool that
// needs something of it (to show its client how a call goes, a file of its thread) asserts it to
// a small interface of its own.
func WithTurn(ctx context.Context, t any) context.Context {
	return context.WithValue(ctx, turnKey{}, t)
}

// TurnFrom is the turn ctx runs in; nil outside one.
func TurnFrom(ctx context.Context) any { return ctx.Value(turnKey{}) }

// Progress is what a running call said of its progress (an MCP server's progress
// notifications), for the turn's client.
type Progress struct {
	ToolCallID string  `json:"toolCallId"`
	ToolName   string  `json:"toolName"`
	Progress   float64 `json:"progress"`
	// Total is 0 when the tool does not know it.
	Total   float64 `json:"total,omitempty"`
	Message string  `json:"message,omitempty"`
}
