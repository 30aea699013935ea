// Package prompttools offers an agent's config.prompts as tools. A prompt tool's call runs a
// model loop of its own inside the call: the prompt's system prompt, the call's input as its
// first user message, its own model and tools. Its messages are kept in the conversation marked
// nested (model.KindNested), between the call and its result, so /status and the stored history
// show them while the calling model sees only the result the SubpromptConfig flags shape. Its
// tokens count toward the turn's usage, and a failure of the nested loop is the call's error,
// never the turn's.
package prompttools

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/approval"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/tool/toolset"
)

// Progress states of a call, and of each tool call of its nested loop.
const (
	Running   = "running"
	Completed = "completed"
	Failed    = "failed"
)

// Progress is the state of a prompt tool's call, for the caller's client: sent as the call
// starts, after each of its nested steps and as it ends.
type Progress struct {
	ToolCallID string `json:"toolCallId"`
	Prompt     string `json:"prompt"`
	State      string `json:"state"`
	// Step is the number of nested steps finished.
	Step int `json:"step"`
	// Text is the nested loop's latest text.
	Text string `json:"text,omitempty"`
	// ToolCalls are the nested loop's calls so far.
	ToolCalls []CallState  `json:"toolCalls,omitempty"`
	Usage     *model.Usage `json:"usage,omitempty"`
	Error     string       `json:"error,omitempty"`
}

// CallState is one tool call of a nested loop, as its progress shows it.
type CallState struct {
	ToolCallID string `json:"toolCallId"`
	ToolName   string `json:"toolName"`
	// State is Running, Completed or Failed.
	State string `json:"state"`
}

// Turn is what a prompt's call needs of the turn it runs in (the engine's, tool.TurnFrom).
type Turn interface {
	// ShowPrompt tells the turn's client how a call goes; only on the loop's goroutine.
	ShowPrompt(Progress)
	// File is a file part for the attachment id of the turn's thread.
	File(ctx context.Context, id string) (model.Part, error)
	// KeepResult keeps the whole of a result cut to fit the record (agent.Config.KeepResult).
	KeepResult(ctx context.Context, whole json.RawMessage) string
}

// Options are what prompt tools are built with: the engine's own builders (turn.Options).
type Options struct {
	// Model builds a prompt's own model block; a prompt without one runs on its agent's model.
	Model func(ctx context.Context, accountID string, block json.RawMessage) (agent.Model, error)
	// Tools builds a prompt's config.tools for the thread's variables.
	Tools func(ctx context.Context, config map[string]json.RawMessage, vars tool.Vars) (*tool.Set, error)
	// NewID names the nested loop's messages.
	NewID func() string
}

// Toolset offers config.prompts (turn.Toolset).
type Toolset struct{ opts Options }

// New returns the toolset of config.prompts.
func New(opts Options) *Toolset { return &Toolset{opts: opts} }

// Offer gives the model-facing tools of the agent's prompts: a prompt without a model block of
// its own runs on the agent's model, and its tools resolve their variables from the thread's.
func (s *Toolset) Offer(_ context.Context, b toolset.Build) (toolset.Offer, error) {
	prompts := b.Config.Prompts
	names := make([]string, 0, len(prompts))
	for name := range prompts {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]tool.Tool, 0, len(names))
	for _, name := range names {
		p := prompts[name]
		t := tool.Tool{
			Name:        name,
			Description: cmp.Or(p.Description, "Runs the prompt "+name+" on a task and returns its answer."),
			InputSchema: p.Schema(),
			Execute: func(ctx context.Context, input json.RawMessage) (any, error) {
				return s.run(ctx, name, p, b, input)
			},
		}
		if len(p.NeedsApproval) > 0 {
			policy, err := approval.Parse(p.NeedsApproval)
			if err != nil {
				return toolset.Offer{}, &toolset.ConfigError{Err: fmt.Errorf("prompts.%s.needsApproval: %w", name, err)}
			}
			t.Approval = policy
		}
		if p.Async {
			t.Async = asynctools.SameInvocation
		}
		out = append(out, t)
	}
	return toolset.Offer{Tools: out}, nil
}

// promptCall is one tool call of a nested loop, as includeToolCalls returns it.
type promptCall struct {
	ToolCallID string          `json:"-"`
	ToolName   string          `json:"toolName"`
	Input      json.RawMessage `json:"input"`
	Output     json.RawMessage `json:"output,omitempty"`
	Error      string          `json:"error,omitempty"`
}

// promptError is one error a nested loop met, as includeErrors returns it.
type promptError struct {
	ToolName string `json:"toolName,omitempty"`
	Error    string `json:"error"`
}

// run runs one call of the prompt name: its nested loop, recorded in the call's transcript, and
// the result its flags shape.
func (s *Toolset) run(ctx context.Context, name string, p *agentconfig.Prompt, b toolset.Build, input json.RawMessage) (any, error) {
	t, inTurn := tool.TurnFrom(ctx).(Turn)
	first, err := s.message(ctx, t, p, input)
	if err != nil {
		return nil, err
	}
	cfg := agent.Config{Model: b.Model, System: p.System, MaxSteps: p.Steps(), NewID: s.opts.NewID}
	if len(p.Model) > 0 {
		if cfg.Model, err = s.opts.Model(ctx, b.AccountID, p.Model); err != nil {
			return nil, fmt.Errorf("prompt %s cannot run: %w", name, err)
		}
	}
	if inTurn {
		cfg.KeepResult = t.KeepResult
	}
	if len(p.Tools) > 0 {
		if cfg.Tools, err = s.opts.Tools(ctx, p.Tools, b.Vars); err != nil {
			return nil, fmt.Errorf("prompt %s cannot run: %w", name, err)
		}
	}
	// The nested loop's messages are kept as it saves them, marked as the call's.
	mark := &model.NestedCall{ToolCallID: tool.CallIDFrom(ctx), ToolName: name}
	var kept []model.Message
	keep := func(msgs ...model.Message) {
		for _, m := range msgs {
			m.Kind, m.Nested = model.KindNested, mark
			kept = append(kept, m)
		}
	}
	keep(first)
	cfg.Save = func(_ context.Context, msgs []model.Message) error {
		keep(msgs...)
		return nil
	}
	progress := Progress{ToolCallID: mark.ToolCallID, Prompt: name, State: Running}
	tell := func() {}
	if inTurn && !asynctools.InBackground(ctx) {
		// Inline, the call runs on the loop's goroutine, which alone may emit.
		tell = func() {
			p := progress
			p.ToolCalls = append([]CallState(nil), progress.ToolCalls...)
			t.ShowPrompt(p)
		}
	}
	tell()
	run := nestedRun{}
	for ev, err := range agent.Run(ctx, cfg, []model.Message{first}) {
		if err != nil {
			run.failure = err
			break
		}
		run.observe(ev, &progress)
		if ev.Type == agent.StepFinish {
			tell()
		}
	}
	if t := tool.TranscriptFrom(ctx); t != nil {
		t.Add(run.usage, kept...)
	}
	progress.Usage = &run.usage
	if run.failure != nil {
		progress.State, progress.Error = Failed, failure(run.failure)
		tell()
		return nil, fmt.Errorf("prompt %s failed: %s", name, progress.Error)
	}
	progress.State = Completed
	tell()
	return run.shape(p), nil
}

// message is a call's first user message: its input's message property (or the whole input),
// with the files of the turn t its attachments property names.
func (s *Toolset) message(ctx context.Context, t Turn, p *agentconfig.Prompt, input json.RawMessage) (model.Message, error) {
	var args map[string]json.RawMessage
	if err := json.Unmarshal(input, &args); err != nil {
		return model.Message{}, err
	}
	text := string(input)
	if prop := p.MessageProperty(); prop != "" {
		text = ""
		if raw, ok := args[prop]; ok && json.Unmarshal(raw, &text) != nil {
			text = string(raw) // not a string: the value as JSON
		}
	}
	msg := model.Message{ID: s.opts.NewID(), Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: text}}}
	var ids []string
	if raw, ok := args[p.InitAttachmentsProperty]; ok && p.InitAttachmentsProperty != "" {
		if err := json.Unmarshal(raw, &ids); err != nil {
			return model.Message{}, fmt.Errorf("%s must list attachment ids", p.InitAttachmentsProperty)
		}
	}
	for _, id := range ids {
		if t == nil {
			return model.Message{}, errors.New("this deployment keeps no files")
		}
		part, err := t.File(ctx, id)
		if err != nil {
			return model.Message{}, err
		}
		msg.Parts = append(msg.Parts, part)
	}
	return msg, nil
}

// failure is what the caller's model is told of a nested loop that failed.
func failure(err error) string {
	var pe *model.ProviderError
	switch {
	case errors.As(err, &pe):
		return pe.Public()
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "it was stopped before it answered"
	}
	return "its model failed to answer"
}

// nestedRun gathers what a nested loop did, for its progress and its result.
type nestedRun struct {
	step    strings.Builder
	last    string
	calls   []promptCall
	errs    []promptError
	usage   model.Usage
	finish  model.FinishReason
	steps   int
	failure error
}

func (r *nestedRun) observe(ev agent.Event, progress *Progress) {
	call := func(id string) *promptCall {
		for i := range r.calls {
			if r.calls[i].ToolCallID == id {
				return &r.calls[i]
			}
		}
		return nil
	}
	state := func(id, s string) {
		for i := range progress.ToolCalls {
			if progress.ToolCalls[i].ToolCallID == id {
				progress.ToolCalls[i].State = s
			}
		}
	}
	failed := func(id, name, msg string) {
		if c := call(id); c != nil {
			c.Error = msg
		} else {
			r.calls = append(r.calls, promptCall{ToolCallID: id, ToolName: name, Error: msg})
		}
		r.errs = append(r.errs, promptError{ToolName: name, Error: msg})
		state(id, Failed)
	}
	switch ev.Type {
	case agent.TextDelta:
		r.step.WriteString(ev.Text)
	case agent.ToolInputAvailable:
		r.calls = append(r.calls, promptCall{ToolCallID: ev.ToolCallID, ToolName: ev.ToolName, Input: ev.Input})
		progress.ToolCalls = append(progress.ToolCalls, CallState{ToolCallID: ev.ToolCallID, ToolName: ev.ToolName, State: Running})
	case agent.ToolOutput:
		if c := call(ev.ToolCallID); c != nil {
			c.Output = ev.Output
		}
		state(ev.ToolCallID, Completed)
	case agent.ToolInputError:
		r.calls = append(r.calls, promptCall{ToolCallID: ev.ToolCallID, ToolName: ev.ToolName, Input: ev.Input})
		progress.ToolCalls = append(progress.ToolCalls, CallState{ToolCallID: ev.ToolCallID, ToolName: ev.ToolName})
		failed(ev.ToolCallID, ev.ToolName, ev.ErrorText)
	case agent.ToolOutputError, agent.ToolOutputDenied:
		failed(ev.ToolCallID, ev.ToolName, ev.ErrorText)
	case agent.StepFinish:
		// The answer is the text of the last step that has any.
		if t := strings.TrimSpace(r.step.String()); t != "" {
			r.last = t
		}
		r.step.Reset()
		r.steps++
		r.usage = ev.Usage
		progress.Step, progress.Text = r.steps, r.last
	case agent.Finish:
		r.usage, r.finish = ev.Usage, ev.Finish
	}
}

// shape is the call's result as the prompt's flags keep it: the final text (includeTextResponse),
// the tool calls with their results (includeToolCalls) and the errors met (includeErrors).
func (r *nestedRun) shape(p *agentconfig.Prompt) map[string]any {
	out := map[string]any{}
	if p.Text() {
		out["text"] = r.last
	}
	if p.IncludeToolCalls {
		calls := r.calls
		if calls == nil {
			calls = []promptCall{}
		}
		out["toolCalls"] = calls
	}
	errs := r.errs
	if r.finish == model.FinishToolCalls {
		errs = append(errs, promptError{Error: fmt.Sprintf("the prompt reached its step limit (maxSteps %d) before it answered", p.Steps())})
	}
	if p.Errors() && len(errs) > 0 {
		out["errors"] = errs
	}
	return out
}
