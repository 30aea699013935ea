package tool

import "context"

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
