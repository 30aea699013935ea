// Package agent runs the model loop: a model step, then the step's tool calls in the order the
// model returned them, the step's messages persisted, and the next step, until the model stops
// calling tools or the step limit is reached. It yields what happens as a stream of Events.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/tool"
)

// DefaultMaxSteps bounds a turn whose config names no limit.
const DefaultMaxSteps = 20

// Model streams one model call.
type Model interface {
	Stream(ctx context.Context, req *model.Request) iter.Seq2[model.Event, error]
}

// SaveFunc persists the messages a step produced; the loop calls it before the next step.
type SaveFunc func(ctx context.Context, msgs []model.Message) error

// Config is what one turn runs with.
type Config struct {
	Model    Model
	Tools    *tool.Set
	System   string
	MaxSteps int // 0 means DefaultMaxSteps
	Save     SaveFunc
	// NewID returns a fresh message id; nil leaves assistant and tool messages without one.
	NewID func() string
}

// EventType says what an Event reports.
type EventType int

const (
	StepStart EventType = iota + 1
	TextStart
	TextDelta
	TextEnd
	ToolInputStart
	ToolInputDelta
	// ToolInputAvailable: the call's arguments passed its schema and it is about to run.
	ToolInputAvailable
	// ToolInputError: unknown tool or arguments that failed the schema; the tool did not run.
	ToolInputError
	ToolOutput
	ToolOutputError
	// Source cites a page a provider-defined tool consulted (Source is set).
	Source
	StepFinish
	// Finish ends the turn; Finish and Usage are set. StepFinish carries the usage so far.
	Finish
)

// Event is one thing that happened in a turn.
type Event struct {
	Type       EventType
	ID         string // text part id
	Text       string // text delta or tool input delta
	ToolCallID string
	ToolName   string
	Input      json.RawMessage
	Output     json.RawMessage
	ErrorText  string
	Finish     model.FinishReason
	Usage      model.Usage
	Source     *model.Source
}

// Run runs a turn over history, which ends with the user's new message. A non-nil error ends
// the stream: it comes from the model or from Save, never from a tool.
func Run(ctx context.Context, cfg Config, history []model.Message) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		maxSteps := cfg.MaxSteps
		if maxSteps <= 0 {
			maxSteps = DefaultMaxSteps
		}
		var specs []model.ToolSpec
		if cfg.Tools != nil {
			specs = cfg.Tools.Specs()
		}
		msgs := validTranscript(history)
		var usage model.Usage
		for step := 1; ; step++ {
			if !yield(Event{Type: StepStart}, nil) {
				return
			}
			req := &model.Request{System: cfg.System, Messages: msgs, Tools: specs}
			res, ok := runStep(ctx, cfg.Model, req, step, yield)
			if !ok {
				return
			}
			usage = usage.Add(res.usage)
			produced := res.messages(cfg.NewID)
			if len(res.calls) > 0 {
				results, ok := runTools(ctx, cfg.Tools, res.calls, yield)
				if !ok {
					return
				}
				produced = append(produced, model.Message{ID: newID(cfg.NewID), Role: model.RoleTool, Parts: results})
			}
			if len(produced) > 0 && cfg.Save != nil {
				if err := cfg.Save(ctx, produced); err != nil {
					yield(Event{}, fmt.Errorf("saving step %d: %w", step, err))
					return
				}
			}
			msgs = append(msgs, produced...)
			if !yield(Event{Type: StepFinish, Usage: usage}, nil) {
				return
			}
			if len(res.calls) == 0 || step >= maxSteps {
				yield(Event{Type: Finish, Finish: res.finish, Usage: usage}, nil)
				return
			}
		}
	}
}

type stepResult struct {
	text   string
	calls  []model.Part
	finish model.FinishReason
	usage  model.Usage
}

func (r stepResult) messages(ids func() string) []model.Message {
	var parts []model.Part
	if r.text != "" {
		parts = append(parts, model.Part{Type: model.PartText, Text: r.text})
	}
	for _, c := range r.calls {
		// Malformed arguments are kept as a JSON string so the stored message stays valid JSON.
		c.Input = displayInput(c.Input)
		parts = append(parts, c)
	}
	if len(parts) == 0 {
		return nil
	}
	usage := r.usage
	return []model.Message{{ID: newID(ids), Role: model.RoleAssistant, Parts: parts, Usage: &usage}}
}

func newID(f func() string) string {
	if f == nil {
		return ""
	}
	return f()
}

// runStep streams one model call through yield and collects its text and tool calls. A text
// part is closed as soon as something else streams, so parts never overlap.
func runStep(ctx context.Context, m Model, req *model.Request, step int, yield func(Event, error) bool) (stepResult, bool) {
	var res stepResult
	var text strings.Builder
	textID, parts := "", 0
	closeText := func() bool {
		if textID == "" {
			return true
		}
		id := textID
		textID = ""
		return yield(Event{Type: TextEnd, ID: id}, nil)
	}
	for ev, err := range m.Stream(ctx, req) {
		if err != nil {
			yield(Event{}, err)
			return res, false
		}
		var out Event
		switch ev.Type {
		case model.EventTextDelta:
			if ev.Text == "" {
				continue
			}
			if textID == "" {
				parts++
				textID = fmt.Sprintf("text-%d-%d", step, parts)
				if !yield(Event{Type: TextStart, ID: textID}, nil) {
					return res, false
				}
			}
			text.WriteString(ev.Text)
			out = Event{Type: TextDelta, ID: textID, Text: ev.Text}
		case model.EventToolInputStart:
			out = Event{Type: ToolInputStart, ToolCallID: ev.ToolCallID, ToolName: ev.ToolName}
		case model.EventToolInputDelta:
			out = Event{Type: ToolInputDelta, ToolCallID: ev.ToolCallID, Text: ev.Text}
		case model.EventToolCall:
			res.calls = append(res.calls, model.Part{Type: model.PartToolCall, ToolCallID: ev.ToolCallID, ToolName: ev.ToolName, Input: ev.Input})
			continue
		case model.EventFinish:
			res.finish, res.usage = ev.Finish, ev.Usage
			continue
		case model.EventSource:
			if ev.Source == nil {
				continue
			}
			out = Event{Type: Source, Source: ev.Source}
		default:
			continue
		}
		if out.Type != TextDelta && !closeText() {
			return res, false
		}
		if !yield(out, nil) {
			return res, false
		}
	}
	if !closeText() {
		return res, false
	}
	if res.finish == "" {
		res.finish = model.FinishStop
		if len(res.calls) > 0 {
			res.finish = model.FinishToolCalls
		}
	}
	res.text = text.String()
	return res, true
}

// runTools runs calls one after another, in order, and returns their results. Unknown tools,
// bad arguments and tool failures become error results the model sees.
func runTools(ctx context.Context, tools *tool.Set, calls []model.Part, yield func(Event, error) bool) ([]model.Part, bool) {
	results := make([]model.Part, 0, len(calls))
	for _, c := range calls {
		result := model.Part{Type: model.PartToolResult, ToolCallID: c.ToolCallID, ToolName: c.ToolName}
		input := c.Input
		if len(input) == 0 {
			input = json.RawMessage(`{}`)
		}
		var call *tool.Call
		err := tool.ErrUnknownTool
		if tools != nil {
			call, err = tools.Prepare(c.ToolName, input)
		}
		if err != nil {
			msg := inputErrorText(c.ToolName, err)
			if !yield(Event{Type: ToolInputError, ToolCallID: c.ToolCallID, ToolName: c.ToolName, Input: displayInput(input), ErrorText: msg}, nil) {
				return nil, false
			}
			result.Output, result.IsError = errorOutput(msg), true
			results = append(results, result)
			continue
		}
		if !yield(Event{Type: ToolInputAvailable, ToolCallID: c.ToolCallID, ToolName: c.ToolName, Input: input}, nil) {
			return nil, false
		}
		out, err := call.Run(ctx)
		if err != nil {
			if !yield(Event{Type: ToolOutputError, ToolCallID: c.ToolCallID, ErrorText: err.Error()}, nil) {
				return nil, false
			}
			result.Output, result.IsError = errorOutput(err.Error()), true
		} else {
			if !yield(Event{Type: ToolOutput, ToolCallID: c.ToolCallID, Output: out}, nil) {
				return nil, false
			}
			result.Output = out
		}
		results = append(results, result)
	}
	return results, true
}

func inputErrorText(name string, err error) string {
	if errors.Is(err, tool.ErrUnknownTool) {
		return fmt.Sprintf("no tool named %q is available", name)
	}
	return err.Error()
}

// displayInput keeps malformed arguments visible as a JSON string instead of dropping them.
func displayInput(input json.RawMessage) json.RawMessage {
	if json.Valid(input) {
		return input
	}
	b, _ := json.Marshal(string(input))
	return b
}

func errorOutput(msg string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"error": msg})
	return b
}

// interruptedOutput is the result given to a tool call that has none in the stored history.
var interruptedOutput = errorOutput("no result was recorded for this call: the turn that made it was interrupted")

// validTranscript returns history in a shape every provider accepts: each assistant tool call
// is followed, in the next message, by exactly one result. A call without a result gets an
// error result, and results that answer no call (or answer one twice) are dropped.
func validTranscript(history []model.Message) []model.Message {
	out := make([]model.Message, 0, len(history))
	for i := 0; i < len(history); i++ {
		msg := history[i]
		if msg.Role == model.RoleTool {
			continue // a result with no call right before it
		}
		out = append(out, msg)
		var calls []model.Part
		for _, p := range msg.Parts {
			if p.Type == model.PartToolCall {
				calls = append(calls, p)
			}
		}
		if msg.Role != model.RoleAssistant || len(calls) == 0 {
			continue
		}
		results := map[string]model.Part{}
		id := ""
		for i+1 < len(history) && history[i+1].Role == model.RoleTool {
			i++
			if id == "" {
				id = history[i].ID
			}
			for _, p := range history[i].Parts {
				if _, dup := results[p.ToolCallID]; p.Type == model.PartToolResult && !dup {
					results[p.ToolCallID] = p
				}
			}
		}
		parts := make([]model.Part, 0, len(calls))
		for _, c := range calls {
			r, ok := results[c.ToolCallID]
			if !ok {
				r = model.Part{Type: model.PartToolResult, ToolCallID: c.ToolCallID, ToolName: c.ToolName, Output: interruptedOutput, IsError: true}
			}
			parts = append(parts, r)
		}
		out = append(out, model.Message{ID: id, Role: model.RoleTool, Parts: parts})
	}
	return out
}
