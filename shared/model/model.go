// Package model defines the provider-neutral conversation and streaming types that the agent
// loop speaks. Provider adapters (scriptedmodel, openaimodel) translate to and from them, so no
// provider SDK type reaches the loop or the tools.
package model

import "encoding/json"

// Role says who wrote a message.
type Role string

const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	// RoleTool carries the results of the assistant's tool calls.
	RoleTool Role = "tool"
)

// PartType says what a Part holds.
type PartType string

const (
	PartText       PartType = "text"
	PartToolCall   PartType = "tool-call"
	PartToolResult PartType = "tool-result"
)

// Message is one entry of a conversation, as stored and as sent to a model.
type Message struct {
	ID    string `json:"id,omitempty"`
	Role  Role   `json:"role"`
	Parts []Part `json:"parts"`
}

// Part is one piece of a message: text, a tool call (assistant) or a tool result (tool).
type Part struct {
	Type       PartType        `json:"type"`
	Text       string          `json:"text,omitempty"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	ToolName   string          `json:"toolName,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	Output     json.RawMessage `json:"output,omitempty"`
	// IsError marks a tool result that reports a failure to the model.
	IsError bool `json:"isError,omitempty"`
}

// Text returns the concatenated text parts of m.
func (m Message) Text() string {
	var s string
	for _, p := range m.Parts {
		if p.Type == PartText {
			s += p.Text
		}
	}
	return s
}

// ToolSpec is the model-facing description of a tool.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// Request is one model call.
type Request struct {
	System   string
	Messages []Message
	Tools    []ToolSpec
}

// EventType says what an Event reports.
type EventType int

const (
	// EventTextDelta carries a piece of the answer's text.
	EventTextDelta EventType = iota + 1
	// EventToolInputStart announces a tool call whose input is about to stream.
	EventToolInputStart
	// EventToolInputDelta carries a piece of a tool call's JSON input.
	EventToolInputDelta
	// EventToolCall carries a complete tool call.
	EventToolCall
	// EventFinish ends the call with a reason and the token usage.
	EventFinish
)

// Event is one streamed piece of a model's answer.
type Event struct {
	Type       EventType
	Text       string // EventTextDelta, EventToolInputDelta
	ToolCallID string // tool events
	ToolName   string // tool events
	Input      json.RawMessage
	Finish     FinishReason
	Usage      Usage
}

// FinishReason says why a model call ended, in the AI SDK's vocabulary.
type FinishReason string

const (
	FinishStop      FinishReason = "stop"
	FinishLength    FinishReason = "length"
	FinishToolCalls FinishReason = "tool-calls"
	FinishFilter    FinishReason = "content-filter"
	FinishError     FinishReason = "error"
	FinishOther     FinishReason = "other"
)

// Usage counts tokens.
type Usage struct {
	InputTokens  int `json:"inputTokens"`
	OutputTokens int `json:"outputTokens"`
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens}
}
