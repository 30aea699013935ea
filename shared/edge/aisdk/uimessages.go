// A conversation read back as the UIMessage list an AI SDK chat client (useChat) built from
// its turns' streams, so that a page that reloads shows what it showed before.

package aisdk

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/tool/prompttools"
	"github.com/agentharness/harness/shared/turn"
)

// UIMessage is the AI SDK's UIMessage: what useChat({ messages }) takes.
type UIMessage struct {
	ID       string    `json:"id"`
	Role     string    `json:"role"`
	Metadata *Metadata `json:"metadata,omitempty"`
	Parts    []UIPart  `json:"parts"`
	// From is the seq of the first stored message it was read from: a page that begins with
	// it reads from there. Not sent.
	From int64 `json:"-"`
}

// Metadata is an assistant message's metadata as the client merged it from its turn's finish
// chunks (TurnFinish): the conversation, the usage of the turn's last request, and the calls
// its latest pause asked about (the AI SDK keeps them once a later finish has none).
type Metadata struct {
	ConversationID   string                 `json:"conversationId"`
	Usage            model.Usage            `json:"usage"`
	PendingApprovals []turn.PendingApproval `json:"pendingApprovals,omitempty"`
}

// UIPart is one part of a UIMessage: *TextUIPart (text and reasoning), *FileUIPart,
// *StepStartUIPart, *ToolUIPart or *DataUIPart.
type UIPart interface{ uiPart() }

// TextUIPart is text, or reasoning (Type "reasoning", with the ID its stream gave it); State is
// "done" in an assistant's message and empty in a user's.
type TextUIPart struct {
	Type  string `json:"type"`
	ID    string `json:"id,omitempty"`
	Text  string `json:"text"`
	State string `json:"state,omitempty"`
}

// FileUIPart is a file a user message carried.
type FileUIPart struct {
	Type      string `json:"type"`
	MediaType string `json:"mediaType"`
	Filename  string `json:"filename,omitempty"`
	URL       string `json:"url"`
}

// StepStartUIPart marks the start of a model step.
type StepStartUIPart struct {
	Type string `json:"type"`
}

// ToolUIPart is a tool call: its Type is "tool-<name>", its State one of the AI SDK's
// (input-available, approval-requested, approval-responded, output-available, output-error,
// output-denied).
type ToolUIPart struct {
	Type       string          `json:"type"`
	ToolCallID string          `json:"toolCallId"`
	State      string          `json:"state"`
	Input      json.RawMessage `json:"input"`
	Output     json.RawMessage `json:"-"`
	ErrorText  string          `json:"-"`
	Approval   *UIApproval     `json:"approval,omitempty"`
}

// MarshalJSON writes output in state output-available and errorText in output-error, where
// the AI SDK requires them, whatever their value.
func (p *ToolUIPart) MarshalJSON() ([]byte, error) {
	type fields ToolUIPart
	out := struct {
		*fields
		Output    json.RawMessage `json:"output,omitempty"`
		ErrorText *string         `json:"errorText,omitempty"`
	}{fields: (*fields)(p)}
	switch p.State {
	case "output-available":
		out.Output = p.Output
	case "output-error":
		out.ErrorText = &p.ErrorText
	}
	return json.Marshal(out)
}

// UIApproval is a tool part's approval as the client holds it.
type UIApproval struct {
	ID            string `json:"id"`
	Approved      *bool  `json:"approved,omitempty"`
	Reason        string `json:"reason,omitempty"`
	RequestReason string `json:"requestReason,omitempty"`
	IsAutomatic   bool   `json:"isAutomatic,omitempty"`
}

// DataUIPart is a data-<name> part.
type DataUIPart struct {
	Type string `json:"type"`
	ID   string `json:"id,omitempty"`
	Data any    `json:"data"`
}

func (*TextUIPart) uiPart()      {}
func (*FileUIPart) uiPart()      {}
func (*StepStartUIPart) uiPart() {}
func (*ToolUIPart) uiPart()      {}
func (*DataUIPart) uiPart()      {}

// AssistantMessageID is the id of the assistant message a turn begun by the user message
// userMessageID announces in its start chunk: derived, so that the conversation read back
// names the message as the stream did without storing it. A user message's id is unique in
// its conversation.
func AssistantMessageID(conversationID, userMessageID string) string {
	sum := sha256.Sum256([]byte(conversationID + "\x00" + userMessageID))
	return "msg_" + base64.RawURLEncoding.EncodeToString(sum[:16])
}

// History is a run of a conversation's stored messages, what UIMessages reads.
type History struct {
	ConversationID string
	// First is the seq of Messages[0]; the others follow it one by one, as stored.
	First    int64
	Messages []model.Message
	// Pending are the approvals the conversation waits for (its last step's held calls).
	Pending []store.Approval
}

// UIMessages builds the UIMessage list a chat client built from the streams of h's turns:
// each user message as it was sent, then one assistant message per turn, across the
// requests that answered its approvals. A file part's URL is the message part's (a signed
// address the caller sets): the client had the data: URL it sent. What the stream showed only
// live is not kept, so not shown: warnings, sources, tool and subagent progress, async results
// (their calls show the placeholder output), the text of a step a failure or a stop cut short,
// and the finish of a failed or stopped turn.
//
// Messages stored before results kept their approval (model.Part.Approval) show a held or
// refused call as the output it got: approved calls' outputs, denials as output errors.
func UIMessages(h History) []UIMessage {
	decided := map[string]bool{} // calls held for the user and decided
	for _, m := range h.Messages {
		for _, p := range m.Parts {
			if p.Type == model.PartToolResult && p.Approval != nil && !p.Approval.Automatic {
				decided[p.ToolCallID] = true
			}
		}
	}
	pending := map[string]store.Approval{}
	for _, a := range h.Pending {
		pending[a.ToolCallID] = a
	}
	var out []UIMessage
	var cur *assistant
	userID := ""
	flush := func() {
		if cur != nil {
			out = append(out, cur.message(h.ConversationID, pending))
			cur = nil
		}
	}
	for i, m := range h.Messages {
		seq := h.First + int64(i)
		if m.StartsTurn() {
			flush()
			out = append(out, userMessage(m, seq))
			userID = m.ID
			continue
		}
		if cur == nil {
			if userID == "" {
				// A run that does not begin with its turn's user message: a page's reader
				// leaves this message out (it read from before its start).
				userID = m.ID
			}
			cur = &assistant{msg: UIMessage{ID: AssistantMessageID(h.ConversationID, userID), Role: "assistant", From: seq},
				tools: map[string]*ToolUIPart{}, nested: map[string][]model.Message{}, decided: decided}
		}
		cur.add(m)
	}
	flush()
	return out
}

// userMessage is a user message as its client sent it.
func userMessage(m model.Message, seq int64) UIMessage {
	msg := UIMessage{ID: m.ID, Role: "user", From: seq, Parts: []UIPart{}}
	for _, p := range m.Parts {
		switch p.Type {
		case model.PartText:
			msg.Parts = append(msg.Parts, &TextUIPart{Type: "text", Text: p.Text})
		case model.PartFile:
			msg.Parts = append(msg.Parts, &FileUIPart{Type: "file", MediaType: p.MediaType, Filename: p.Filename, URL: p.URL})
		}
	}
	return msg
}

// assistant builds a turn's assistant message as the client's stream reader did, one stored
// message after another.
type assistant struct {
	msg   UIMessage
	tools map[string]*ToolUIPart
	// order are the calls in the order their parts were made.
	order []model.Part
	// nested are the prompt tools' own messages, by call.
	nested  map[string][]model.Message
	decided map[string]bool
	// usage is that of the turn's latest request, which its last finish reported; paused is
	// set from a step held for the user until the request that answered it.
	usage  model.Usage
	paused bool
	held   []turn.PendingApproval
}

func (a *assistant) add(m model.Message) {
	if a.resumes(m) {
		a.paused, a.usage = false, model.Usage{}
	}
	if m.Usage != nil {
		a.usage = a.usage.Add(*m.Usage)
	}
	switch {
	case m.IsSummary():
		a.msg.Parts = append(a.msg.Parts, &DataUIPart{Type: "data-compaction", ID: m.ID, Data: Compaction(m.Text(), m.Compaction)})
	case m.IsNested():
		if m.Nested != nil {
			a.nested[m.Nested.ToolCallID] = append(a.nested[m.Nested.ToolCallID], m)
		}
	case m.Role == model.RoleAssistant:
		a.step(m)
	case m.Role == model.RoleTool:
		for _, p := range m.Parts {
			if p.Type == model.PartToolResult {
				a.result(p)
			}
		}
	}
}

// resumes reports whether m is the first message a request that answered the held calls wrote.
func (a *assistant) resumes(m model.Message) bool {
	if !a.paused {
		return false
	}
	if m.IsNested() {
		return m.Nested != nil && a.decided[m.Nested.ToolCallID]
	}
	for _, p := range m.Parts {
		if p.Type == model.PartToolResult && a.decided[p.ToolCallID] {
			return true
		}
	}
	return false
}

// step adds a model step: its reasoning and text, then its calls, each a part from the
// moment its input began to stream, before any of them ran. Reasoning shows its text only: its
// signature is for the model.
func (a *assistant) step(m model.Message) {
	a.msg.Parts = append(a.msg.Parts, &StepStartUIPart{Type: "step-start"})
	for _, p := range m.Parts {
		switch p.Type {
		case model.PartReasoning:
			a.msg.Parts = append(a.msg.Parts, &TextUIPart{Type: "reasoning", ID: p.ID, Text: p.Text, State: "done"})
		case model.PartText:
			a.msg.Parts = append(a.msg.Parts, &TextUIPart{Type: "text", Text: p.Text, State: "done"})
		}
	}
	if m.Output {
		// The turn's structured output, which its stream sent after this step.
		a.msg.Parts = append(a.msg.Parts, &DataUIPart{Type: "data-output", Data: json.RawMessage(strings.TrimSpace(m.Text()))})
	}
	var held []turn.PendingApproval
	for _, p := range m.Parts {
		if p.Type != model.PartToolCall {
			continue
		}
		input := p.Input
		if string(input) == `""` || len(input) == 0 {
			input = json.RawMessage(`{}`) // the loop ran a call without arguments on {}
		}
		part := &ToolUIPart{Type: "tool-" + p.ToolName, ToolCallID: p.ToolCallID, State: "input-available", Input: input}
		a.tools[p.ToolCallID] = part
		a.order = append(a.order, p)
		a.msg.Parts = append(a.msg.Parts, part)
		if a.decided[p.ToolCallID] {
			held = append(held, turn.PendingApproval{ToolCallID: p.ToolCallID, ToolName: p.ToolName})
		}
	}
	if len(held) > 0 {
		a.held, a.paused = held, true
	}
}

// result settles a call's part with its result, and shows a prompt tool's nested loop.
func (a *assistant) result(r model.Part) {
	part := a.tools[r.ToolCallID]
	if part == nil {
		return // its call is before the run read
	}
	if ap := r.Approval; ap != nil {
		approved := ap.Approved
		part.Approval = &UIApproval{ID: ap.ID, Approved: &approved, Reason: ap.Reason, RequestReason: ap.RequestReason, IsAutomatic: ap.Automatic}
		for i := range a.held {
			if a.held[i].ToolCallID == r.ToolCallID {
				a.held[i].ApprovalID = ap.ID
			}
		}
		if !approved {
			part.State = "output-denied"
			return
		}
	}
	if r.IsError {
		part.State, part.ErrorText = "output-error", errorText(r.Output)
	} else {
		part.State, part.Output = "output-available", r.Output
	}
	if nested := a.nested[r.ToolCallID]; len(nested) > 0 && !asynctools.IsPlaceholder(r.Output) {
		a.msg.Parts = append(a.msg.Parts, &DataUIPart{Type: "data-prompt-tool", ID: r.ToolCallID, Data: promptProgress(r, nested, part.ErrorText)})
	}
}

// message is the assistant message built, with the calls still held for approval shown as
// asking and the metadata the client merged.
func (a *assistant) message(conversationID string, pending map[string]store.Approval) UIMessage {
	var asking []turn.PendingApproval
	for _, c := range a.order {
		part := a.tools[c.ToolCallID]
		p, ok := pending[c.ToolCallID]
		if !ok || part.State != "input-available" {
			continue
		}
		part.State = "approval-requested"
		part.Approval = &UIApproval{ID: p.ID, RequestReason: p.RequestReason}
		asking = append(asking, turn.PendingApproval{ApprovalID: p.ID, ToolCallID: c.ToolCallID, ToolName: c.ToolName})
	}
	if asking != nil {
		a.held = asking
	}
	if a.msg.Parts == nil {
		a.msg.Parts = []UIPart{}
	}
	a.msg.Metadata = &Metadata{ConversationID: conversationID, Usage: a.usage, PendingApprovals: a.held}
	return a.msg
}

// errorText is the message of a failed call's result, {"error": …}.
func errorText(output json.RawMessage) string {
	var e struct {
		Error *string `json:"error"`
	}
	if json.Unmarshal(output, &e) == nil && e.Error != nil {
		return *e.Error
	}
	return string(output)
}

// promptProgress is the last progress a prompt tool's call showed (prompttools.Progress), read
// from the messages its nested loop kept and its result.
func promptProgress(r model.Part, nested []model.Message, failure string) prompttools.Progress {
	p := prompttools.Progress{ToolCallID: r.ToolCallID, Prompt: r.ToolName, State: prompttools.Completed}
	failed := map[string]bool{}
	for _, m := range nested {
		for _, q := range m.Parts {
			if q.Type == model.PartToolResult {
				failed[q.ToolCallID] = q.IsError
			}
		}
	}
	var usage model.Usage
	for _, m := range nested {
		if m.Role != model.RoleAssistant {
			continue
		}
		p.Step++
		if m.Usage != nil {
			usage = usage.Add(*m.Usage)
		}
		if t := strings.TrimSpace(m.Text()); t != "" {
			p.Text = t
		}
		for _, q := range m.Parts {
			if q.Type != model.PartToolCall {
				continue
			}
			state := prompttools.Completed
			if isErr, ok := failed[q.ToolCallID]; !ok {
				state = prompttools.Running
			} else if isErr {
				state = prompttools.Failed
			}
			p.ToolCalls = append(p.ToolCalls, prompttools.CallState{ToolCallID: q.ToolCallID, ToolName: q.ToolName, State: state})
		}
	}
	p.Usage = &usage
	if r.IsError {
		// The call's error is the loop's failure behind what the call and its tool say of it:
		// "tool <name> failed: prompt <name> failed: <failure>".
		p.State, p.Error = prompttools.Failed, failure
		if _, why, ok := strings.Cut(failure, "prompt "+r.ToolName+" failed: "); ok {
			p.Error = why
		}
	}
	return p
}
