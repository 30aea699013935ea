package turn

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/approval"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/attachments"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/asynctools"
)

// A prompt tool (config.prompts) runs a model loop of its own inside the call: the prompt's
// system prompt, the call's input as its first user message, its own model and tools. Its
// messages are kept in the conversation marked nested (model.KindNested), between the call and
// its result, so /status and the stored history show them while the calling model sees only
// the result the SubpromptConfig flags shape. Its tokens count toward the turn's usage, and a
// failure of the nested loop is the call's error, never the turn's.

// Prompt tool progress states.
const (
	PromptRunning   = "running"
	PromptCompleted = "completed"
	PromptFailed    = "failed"
)

// PromptProgress is the state of a prompt tool's call, for the caller's client: sent as the call
// starts, after each of its nested steps and as it ends.
type PromptProgress struct {
	ToolCallID string `json:"toolCallId"`
	Prompt     string `json:"prompt"`
	State      string `json:"state"`
	// Step is the number of nested steps finished.
	Step int `json:"step"`
	// Text is the nested loop's latest text.
	Text string `json:"text,omitempty"`
	// ToolCalls are the nested loop's calls so far.
	ToolCalls []NestedCallState `json:"toolCalls,omitempty"`
	Usage     *model.Usage      `json:"usage,omitempty"`
	Error     string            `json:"error,omitempty"`
}

// NestedCallState is one tool call of a nested loop, as its progress shows it.
type NestedCallState struct {
	ToolCallID string `json:"toolCallId"`
	ToolName   string `json:"toolName"`
	// State is PromptRunning, PromptCompleted or PromptFailed.
	State string `json:"state"`
}

// promptTools are the model-facing tools of config.prompts; base is the agent's model, which a
// prompt without a model block of its own runs on, and vars the thread's variables, which its
// tools resolve theirs from.
func (e *Engine) promptTools(prompts agentconfig.Prompts, base agent.Model, vars tool.Vars) ([]tool.Tool, error) {
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
				return e.runPrompt(ctx, name, p, base, vars, input)
			},
		}
		if len(p.NeedsApproval) > 0 {
			policy, err := approval.Parse(p.NeedsApproval)
			if err != nil {
				return nil, fmt.Errorf("prompts.%s.needsApproval: %w", name, err)
			}
			t.Approval = policy
		}
		if p.Async {
			t.Async = asynctools.SameInvocation
		}
		out = append(out, t)
	}
	return out, nil
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

// runPrompt runs one call of the prompt name: its nested loop, recorded in the call's
// transcript, and the result its flags shape.
func (e *Engine) runPrompt(ctx context.Context, name string, p *agentconfig.Prompt, base agent.Model, vars tool.Vars, input json.RawMessage) (any, error) {
	d, inTurn := callerFrom(ctx)
	first, err := e.promptMessage(ctx, d, p, input)
	if err != nil {
		return nil, err
	}
	cfg := agent.Config{Model: base, System: p.System, MaxSteps: p.Steps(), NewID: NewMessageID}
	if len(p.Model) > 0 {
		if cfg.Model, err = e.opts.Model(p.Model); err != nil {
			return nil, fmt.Errorf("prompt %s cannot run: %w", name, err)
		}
	}
	if inTurn {
		cfg.Model, cfg.KeepResult = d.withFiles(cfg.Model), d.keepResult
	}
	if len(p.Tools) > 0 {
		if cfg.Tools, err = e.opts.Tools(p.Tools, vars); err != nil {
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
	progress := PromptProgress{ToolCallID: mark.ToolCallID, Prompt: name, State: PromptRunning}
	tell := func() {}
	if inTurn && !asynctools.InBackground(ctx) {
		// Inline, the call runs on the loop's goroutine, which alone may emit.
		tell = func() {
			p := progress
			p.ToolCalls = append([]NestedCallState(nil), progress.ToolCalls...)
			d.emit(Event{Kind: PromptTool, PromptTool: &p})
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
		progress.State, progress.Error = PromptFailed, promptFailure(run.failure)
		tell()
		return nil, fmt.Errorf("prompt %s failed: %s", name, progress.Error)
	}
	progress.State = PromptCompleted
	tell()
	return run.shape(p), nil
}

// promptMessage is a call's first user message: its input's message property (or the whole
// input), with the files its attachments property names.
func (e *Engine) promptMessage(ctx context.Context, d *invocation, p *agentconfig.Prompt, input json.RawMessage) (model.Message, error) {
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
	msg := model.Message{ID: NewMessageID(), Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: text}}}
	var ids []string
	if raw, ok := args[p.InitAttachmentsProperty]; ok && p.InitAttachmentsProperty != "" {
		if err := json.Unmarshal(raw, &ids); err != nil {
			return model.Message{}, fmt.Errorf("%s must list attachment ids", p.InitAttachmentsProperty)
		}
	}
	for _, id := range ids {
		if d == nil || e.opts.Attachments == nil {
			return model.Message{}, errors.New("this deployment keeps no files")
		}
		part, err := e.threadFile(ctx, d, id)
		if err != nil {
			return model.Message{}, err
		}
		msg.Parts = append(msg.Parts, part)
	}
	return msg, nil
}

// threadFile is a file part for the attachment id of the invocation's own thread, as the
// thread's messages show it (its media type and name). Beside the loop (an async call), whose
// history it cannot read, the type is told from the bytes.
func (e *Engine) threadFile(ctx context.Context, d *invocation, id string) (model.Part, error) {
	data, err := e.opts.Attachments.Get(ctx, d.accountID, d.conversationID, id)
	if errors.Is(err, attachments.ErrNotFound) || !attachments.ValidID(id) {
		return model.Part{}, fmt.Errorf("this conversation has no attachment %q", id)
	}
	if err != nil {
		return model.Part{}, err
	}
	p := model.Part{Type: model.PartFile, Attachment: id, Data: data, MediaType: http.DetectContentType(data)}
	if !asynctools.InBackground(ctx) {
		p.MediaType, p.Filename = d.fileInfo(id, p.MediaType)
	}
	return p, nil
}

// fileInfo is the media type and name the thread's messages give the attachment id; fallback
// and no name when none does.
func (d *invocation) fileInfo(id, fallback string) (mediaType, filename string) {
	mediaType = fallback
	for _, m := range d.history {
		for _, q := range m.Parts {
			if q.Type == model.PartFile && q.Attachment == id {
				mediaType, filename = q.MediaType, q.Filename
			}
		}
	}
	return mediaType, filename
}

// promptFailure is what the caller's model is told of a nested loop that failed.
func promptFailure(err error) string {
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

func (r *nestedRun) observe(ev agent.Event, progress *PromptProgress) {
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
		state(id, PromptFailed)
	}
	switch ev.Type {
	case agent.TextDelta:
		r.step.WriteString(ev.Text)
	case agent.ToolInputAvailable:
		r.calls = append(r.calls, promptCall{ToolCallID: ev.ToolCallID, ToolName: ev.ToolName, Input: ev.Input})
		progress.ToolCalls = append(progress.ToolCalls, NestedCallState{ToolCallID: ev.ToolCallID, ToolName: ev.ToolName, State: PromptRunning})
	case agent.ToolOutput:
		if c := call(ev.ToolCallID); c != nil {
			c.Output = ev.Output
		}
		state(ev.ToolCallID, PromptCompleted)
	case agent.ToolInputError:
		r.calls = append(r.calls, promptCall{ToolCallID: ev.ToolCallID, ToolName: ev.ToolName, Input: ev.Input})
		progress.ToolCalls = append(progress.ToolCalls, NestedCallState{ToolCallID: ev.ToolCallID, ToolName: ev.ToolName})
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
