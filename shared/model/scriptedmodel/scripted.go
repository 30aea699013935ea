// Package scriptedmodel is a model that plays a script instead of calling a provider. The demo,
// the examples and the tests script agents with it; its config shape is a public contract:
//
//	{"provider":"scripted","script":[{"toolCalls":[{"name":"current_time","input":{}}]},{"text":"It is {{toolResults}}"}]}
//
// The n-th model call after the latest user message answers with step n; past the end of the
// script it answers with the last step's text alone. A summary request, which compacts a
// conversation, is answered with Summary and is no step. In text, {{toolResults}} becomes the JSON
// array of the tool results the model has been given since that user message.
//
// A step's error fails the call: {"error":"context_length"} as a provider refuses a request
// longer than its model's context window (model.ErrContextLength), any other text as a plain
// error.
//
// A step's reasoning streams before its answer, signed as a reasoning provider signs it; like
// such a provider, the model refuses a call whose earlier steps of the turn came back without
// their reasoning or its signature.
package scriptedmodel

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/agentharness/harness/shared/model"
)

// Step is one scripted model answer.
type Step struct {
	// Reasoning is the model's thinking before its answer.
	Reasoning string     `json:"reasoning,omitempty"`
	Text      string     `json:"text,omitempty"`
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	// Error makes the call fail with this message, to script provider failures; ErrorContextLength
	// makes it fail as a provider does for a request longer than its model's context window.
	Error string `json:"error,omitempty"`
	// DelayMs makes the model think this long before it answers, to script slow models.
	DelayMs int `json:"delayMs,omitempty"`
	// StallMs holds the answer this long after its text, before its tool calls and its end, to
	// script a model that stalls mid-answer.
	StallMs int `json:"stallMs,omitempty"`
}

// ToolCall is one scripted tool call.
type ToolCall struct {
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input,omitempty"`
}

// Config is the agent's model block for the scripted provider.
type Config struct {
	Provider string `json:"provider"`
	Script   []Step `json:"script"`
}

// ErrorContextLength is the Step.Error that fails the call with a *model.ProviderError of
// status 400 for which errors.Is(err, model.ErrContextLength) holds.
const ErrorContextLength = "context_length"

// maxDelayMs bounds a step's delay: a scripted model is for tests and demos.
const maxDelayMs = 600_000

// Model plays a script.
type Model struct {
	script []Step
}

// New returns a model that plays script; it must have at least one step.
func New(script []Step) (*Model, error) {
	if len(script) == 0 {
		return nil, errors.New("script must have at least one step")
	}
	for i, s := range script {
		for j, c := range s.ToolCalls {
			if c.Name == "" {
				return nil, fmt.Errorf("script[%d].toolCalls[%d].name is empty", i, j)
			}
			if len(c.Input) > 0 && !json.Valid(c.Input) {
				return nil, fmt.Errorf("script[%d].toolCalls[%d].input is not valid JSON", i, j)
			}
		}
		if s.DelayMs < 0 || s.DelayMs > maxDelayMs {
			return nil, fmt.Errorf("script[%d].delayMs must be between 0 and %d", i, maxDelayMs)
		}
		if s.StallMs < 0 || s.StallMs > maxDelayMs {
			return nil, fmt.Errorf("script[%d].stallMs must be between 0 and %d", i, maxDelayMs)
		}
	}
	return &Model{script: script}, nil
}

// Stream answers with the script step that matches the conversation's position.
func (m *Model) Stream(ctx context.Context, req *model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) {
		if req.Summary {
			// A compaction's summary request is no step of the script.
			if yield(model.Event{Type: model.EventTextDelta, Text: Summary}, nil) {
				yield(model.Event{Type: model.EventFinish, Finish: model.FinishStop, Usage: model.Usage{InputTokens: len(req.Messages), OutputTokens: 1}}, nil)
			}
			return
		}
		n, results := sinceLastUser(req.Messages)
		step := m.script[len(m.script)-1]
		if n < len(m.script) {
			step = m.script[n]
		} else {
			step = Step{Text: step.Text}
		}
		wait(ctx, step.DelayMs)
		if err := ctx.Err(); err != nil {
			yield(model.Event{}, err)
			return
		}
		if step.Error != "" {
			yield(model.Event{}, stepError(step.Error))
			return
		}
		if err := m.checkReasoning(req.Messages); err != nil {
			yield(model.Event{}, err)
			return
		}
		for _, piece := range chunks(step.Reasoning) {
			if !yield(model.Event{Type: model.EventReasoningDelta, Text: piece}, nil) {
				return
			}
		}
		if step.Reasoning != "" && !yield(model.Event{Type: model.EventReasoningEnd, Signature: signature(step.Reasoning), Provider: Name}, nil) {
			return
		}
		text := strings.ReplaceAll(step.Text, "{{toolResults}}", string(results))
		for _, piece := range chunks(text) {
			if !yield(model.Event{Type: model.EventTextDelta, Text: piece}, nil) {
				return
			}
		}
		if wait(ctx, step.StallMs); ctx.Err() != nil {
			yield(model.Event{}, ctx.Err())
			return
		}
		finish := model.FinishStop
		for i, c := range step.ToolCalls {
			finish = model.FinishToolCalls
			// Unique within the conversation while its history only grows: a compacted
			// conversation's requests are shorter, and may repeat an earlier call's id.
			id := fmt.Sprintf("call_%d_%d", len(req.Messages), i+1)
			input := c.Input
			if len(input) == 0 {
				input = json.RawMessage(`{}`)
			}
			for _, ev := range []model.Event{
				{Type: model.EventToolInputStart, ToolCallID: id, ToolName: c.Name},
				{Type: model.EventToolInputDelta, ToolCallID: id, Text: string(input)},
				{Type: model.EventToolCall, ToolCallID: id, ToolName: c.Name, Input: input},
			} {
				if !yield(ev, nil) {
					return
				}
			}
		}
		usage := model.Usage{InputTokens: len(req.Messages), OutputTokens: len(chunks(text)) + len(chunks(step.Reasoning))}
		yield(model.Event{Type: model.EventFinish, Finish: finish, Usage: usage.WithReasoning(len(chunks(step.Reasoning)))}, nil)
	}
}

// Summary is the scripted model's answer to every summary request (model.Request.Summary): a
// compaction's summary is not a step of the script.
const Summary = "The conversation so far, summarized by the scripted model."

// stepError is the error a step's Error fails the call with.
func stepError(msg string) error {
	if msg == ErrorContextLength {
		return &model.ProviderError{Provider: Name, Status: http.StatusBadRequest, ContextLength: true,
			Err: errors.New("the script refuses the call as longer than the model's context window")}
	}
	return errors.New(msg)
}

// Name is the provider name of a scripted block, which its reasoning carries.
const Name = "scripted"

// signature is how the scripted model signs its reasoning.
func signature(reasoning string) string {
	sum := sha256.Sum256([]byte(reasoning))
	return "scripted:" + base64.RawURLEncoding.EncodeToString(sum[:12])
}

// checkReasoning refuses msgs when an assistant message since the latest user message lacks
// the reasoning its step scripted, or brings it back with another signature, as a reasoning
// provider refuses thinking blocks it did not sign.
func (m *Model) checkReasoning(msgs []model.Message) error {
	start := turnStart(msgs)
	n := 0
	for _, msg := range msgs[start:] {
		if msg.Role != model.RoleAssistant {
			continue
		}
		want := ""
		if n < len(m.script) {
			want = m.script[n].Reasoning
		}
		n++
		if want == "" || msg.Model != "" {
			continue // no reasoning scripted, or another model (a fallback) wrote the step
		}
		i := slices.IndexFunc(msg.Parts, func(p model.Part) bool { return p.Type == model.PartReasoning })
		if i < 0 || msg.Parts[i].Text != want || msg.Parts[i].Signature != signature(want) || msg.Parts[i].Provider != Name {
			return fmt.Errorf("step %d of the turn came back without its reasoning and the reasoning's signature", n)
		}
	}
	return nil
}

// turnStart is the index of the first message after the latest user message of msgs.
func turnStart(msgs []model.Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].StartsTurn() {
			return i + 1
		}
	}
	return 0
}

// sinceLastUser counts the assistant messages after the latest user message and collects the
// outputs of the tool results given since then, as a JSON array. Async results the harness
// brought back (model.KindAsyncResults) count as tool results, not as a user message, and take
// the place of their call's placeholder.
func sinceLastUser(msgs []model.Message) (int, json.RawMessage) {
	start := turnStart(msgs)
	n := 0
	results := []json.RawMessage{}
	placeholders := map[string]int{} // resultId → index in results
	for _, m := range msgs[start:] {
		switch m.Role {
		case model.RoleAssistant:
			n++
		case model.RoleTool:
			for _, p := range m.Parts {
				if p.Type != model.PartToolResult {
					continue
				}
				var ph struct {
					ResultID string `json:"resultId"`
					Status   string `json:"status"`
				}
				if json.Unmarshal(p.Output, &ph) == nil && ph.ResultID != "" && ph.Status == "running" {
					placeholders[ph.ResultID] = len(results)
				}
				results = append(results, p.Output)
			}
		case model.RoleUser:
			for _, r := range asyncOutputs(m.Text()) {
				if i, ok := placeholders[r.id]; ok {
					results[i] = r.output
					continue
				}
				results = append(results, r.output)
			}
		}
	}
	b, _ := json.Marshal(results)
	return n, b
}

// asyncOutputs reads the outputs out of an async results message: {"asyncToolResults":[{
// "status", "response" or "error", …}]}.
func asyncOutputs(text string) []asyncOutput {
	var msg struct {
		Results []struct {
			ResultID string          `json:"resultId"`
			Status   string          `json:"status"`
			Response json.RawMessage `json:"response"`
			Error    string          `json:"error"`
		} `json:"asyncToolResults"`
	}
	if json.Unmarshal([]byte(text), &msg) != nil {
		return nil
	}
	out := make([]asyncOutput, 0, len(msg.Results))
	for _, r := range msg.Results {
		if r.Status == "completed" {
			out = append(out, asyncOutput{r.ResultID, r.Response})
			continue
		}
		b, _ := json.Marshal(map[string]string{"error": r.Error})
		out = append(out, asyncOutput{r.ResultID, b})
	}
	return out
}

// asyncOutput is one async result as the script sees it.
type asyncOutput struct {
	id     string
	output json.RawMessage
}

// wait sleeps ms milliseconds, or until ctx ends.
func wait(ctx context.Context, ms int) {
	if ms <= 0 {
		return
	}
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// chunks splits text into word-sized pieces so it streams like a real model.
func chunks(text string) []string {
	var out []string
	for len(text) > 0 {
		i := strings.IndexByte(text[1:], ' ')
		if i < 0 {
			out = append(out, text)
			break
		}
		out = append(out, text[:i+1])
		text = text[i+1:]
	}
	return out
}
