// Package aisdk speaks the Vercel AI SDK UI message stream (protocol v1): its chunks, the
// encoding of turn events as chunks, and the server-sent events that carry them, so a useChat
// front end works against the harness unchanged. SSE clients get the chunks (chathttp) and NATS
// subscribers too (natslog).
package aisdk

import "encoding/json"

// The chunk types of the UI message stream, one struct per type so that no required key is
// dropped by omitempty. The constructors below set Type.

type StartChunk struct {
	Type      string `json:"type"`
	MessageID string `json:"messageId"`
}

type StepChunk struct {
	Type string `json:"type"` // start-step or finish-step
}

type TextChunk struct {
	Type string `json:"type"` // text-start or text-end
	ID   string `json:"id"`
}

type TextDeltaChunk struct {
	Type  string `json:"type"`
	ID    string `json:"id"`
	Delta string `json:"delta"`
}

type ToolInputStartChunk struct {
	Type       string `json:"type"`
	ToolCallID string `json:"toolCallId"`
	ToolName   string `json:"toolName"`
}

type ToolInputDeltaChunk struct {
	Type           string `json:"type"`
	ToolCallID     string `json:"toolCallId"`
	InputTextDelta string `json:"inputTextDelta"`
}

type ToolInputAvailableChunk struct {
	Type       string          `json:"type"`
	ToolCallID string          `json:"toolCallId"`
	ToolName   string          `json:"toolName"`
	Input      json.RawMessage `json:"input"`
}

type ToolInputErrorChunk struct {
	Type       string          `json:"type"`
	ToolCallID string          `json:"toolCallId"`
	ToolName   string          `json:"toolName"`
	Input      json.RawMessage `json:"input"`
	ErrorText  string          `json:"errorText"`
}

type ToolOutputAvailableChunk struct {
	Type       string          `json:"type"`
	ToolCallID string          `json:"toolCallId"`
	Output     json.RawMessage `json:"output"`
}

type ToolOutputErrorChunk struct {
	Type       string `json:"type"`
	ToolCallID string `json:"toolCallId"`
	ErrorText  string `json:"errorText"`
}

type SourceURLChunk struct {
	Type     string `json:"type"`
	SourceID string `json:"sourceId"`
	URL      string `json:"url"`
	Title    string `json:"title,omitempty"`
}

type ErrorChunk struct {
	Type      string `json:"type"`
	ErrorText string `json:"errorText"`
}

type FinishChunk struct {
	Type            string `json:"type"`
	FinishReason    string `json:"finishReason"`
	MessageMetadata any    `json:"messageMetadata,omitempty"`
}

// AbortChunk ends the stream of a turn that was stopped.
type AbortChunk struct {
	Type   string `json:"type"`
	Reason string `json:"reason,omitempty"`
}

// ToolApprovalRequestChunk asks the user to approve a held call (isAutomatic when a policy
// decided instead).
type ToolApprovalRequestChunk struct {
	Type        string `json:"type"`
	ApprovalID  string `json:"approvalId"`
	ToolCallID  string `json:"toolCallId"`
	Reason      string `json:"reason,omitempty"`
	IsAutomatic bool   `json:"isAutomatic,omitempty"`
}

type ToolApprovalResponseChunk struct {
	Type       string `json:"type"`
	ApprovalID string `json:"approvalId"`
	Approved   bool   `json:"approved"`
	Reason     string `json:"reason,omitempty"`
}

type ToolOutputDeniedChunk struct {
	Type       string `json:"type"`
	ToolCallID string `json:"toolCallId"`
}

// DataChunk is a custom data-* part, the one place for harness-specific payloads.
type DataChunk struct {
	Type string `json:"type"`
	// ID, when set, makes a later chunk of the same type and id replace this one's part in the
	// client's message (the AI SDK's data part reconciliation).
	ID        string `json:"id,omitempty"`
	Data      any    `json:"data"`
	Transient bool   `json:"transient,omitempty"`
}

func Start(messageID string) StartChunk { return StartChunk{Type: "start", MessageID: messageID} }
func StartStep() StepChunk              { return StepChunk{Type: "start-step"} }
func FinishStep() StepChunk             { return StepChunk{Type: "finish-step"} }
func TextStart(id string) TextChunk     { return TextChunk{Type: "text-start", ID: id} }
func TextEnd(id string) TextChunk       { return TextChunk{Type: "text-end", ID: id} }
func TextDelta(id, delta string) TextDeltaChunk {
	return TextDeltaChunk{Type: "text-delta", ID: id, Delta: delta}
}
func ReasoningStart(id string) TextChunk { return TextChunk{Type: "reasoning-start", ID: id} }
func ReasoningEnd(id string) TextChunk   { return TextChunk{Type: "reasoning-end", ID: id} }
func ReasoningDelta(id, delta string) TextDeltaChunk {
	return TextDeltaChunk{Type: "reasoning-delta", ID: id, Delta: delta}
}
func ToolInputStart(id, name string) ToolInputStartChunk {
	return ToolInputStartChunk{Type: "tool-input-start", ToolCallID: id, ToolName: name}
}
func ToolInputDelta(id, delta string) ToolInputDeltaChunk {
	return ToolInputDeltaChunk{Type: "tool-input-delta", ToolCallID: id, InputTextDelta: delta}
}
func ToolInputAvailable(id, name string, input json.RawMessage) ToolInputAvailableChunk {
	return ToolInputAvailableChunk{Type: "tool-input-available", ToolCallID: id, ToolName: name, Input: input}
}
func ToolInputError(id, name string, input json.RawMessage, text string) ToolInputErrorChunk {
	return ToolInputErrorChunk{Type: "tool-input-error", ToolCallID: id, ToolName: name, Input: input, ErrorText: text}
}
func ToolOutput(id string, output json.RawMessage) ToolOutputAvailableChunk {
	return ToolOutputAvailableChunk{Type: "tool-output-available", ToolCallID: id, Output: output}
}
func ToolOutputError(id, text string) ToolOutputErrorChunk {
	return ToolOutputErrorChunk{Type: "tool-output-error", ToolCallID: id, ErrorText: text}
}
func SourceURL(id, url, title string) SourceURLChunk {
	return SourceURLChunk{Type: "source-url", SourceID: id, URL: url, Title: title}
}
func ToolApprovalRequest(approvalID, toolCallID, reason string, automatic bool) ToolApprovalRequestChunk {
	return ToolApprovalRequestChunk{Type: "tool-approval-request", ApprovalID: approvalID, ToolCallID: toolCallID, Reason: reason, IsAutomatic: automatic}
}
func ToolApprovalResponse(approvalID string, approved bool, reason string) ToolApprovalResponseChunk {
	return ToolApprovalResponseChunk{Type: "tool-approval-response", ApprovalID: approvalID, Approved: approved, Reason: reason}
}
func ToolOutputDenied(toolCallID string) ToolOutputDeniedChunk {
	return ToolOutputDeniedChunk{Type: "tool-output-denied", ToolCallID: toolCallID}
}
func Error(text string) ErrorChunk   { return ErrorChunk{Type: "error", ErrorText: text} }
func Abort(reason string) AbortChunk { return AbortChunk{Type: "abort", Reason: reason} }
func Finish(reason string, metadata any) FinishChunk {
	return FinishChunk{Type: "finish", FinishReason: reason, MessageMetadata: metadata}
}

// Data returns a data-<name> part.
func Data(name string, data any, transient bool) DataChunk {
	return DataChunk{Type: "data-" + name, Data: data, Transient: transient}
}

// DataPart is a data part with an id: each later DataPart of the same name and id replaces it.
func DataPart(name, id string, data any) DataChunk {
	return DataChunk{Type: "data-" + name, ID: id, Data: data}
}
