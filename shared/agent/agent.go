// Package agent runs the model loop: a model step, then the step's tool calls in the order the
// model returned them, the step's messages persisted, and the next step, until the model stops
// calling tools or the step limit is reached. It yields what happens as a stream of Events.
package agent

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/agentharness/harness/shared/approval"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/tool"
	"github.com/xeipuuv/gojsonschema"
)

// DefaultMaxSteps bounds a turn whose config names no limit.
const DefaultMaxSteps = 20

// Model streams one model call.
type Model interface {
	Stream(ctx context.Context, req *model.Request) iter.Seq2[model.Event, error]
}

// SaveFunc persists the messages a step produced; the loop calls it before the next step.
type SaveFunc func(ctx context.Context, msgs []model.Message) error

// PauseFunc persists a step that stopped for approval: its messages (the assistant's calls and
// the results of the calls that ran) and the calls awaiting a decision, in one write. The pass
// ends after it; Resume continues it.
type PauseFunc func(ctx context.Context, msgs []model.Message, pending []Pending) error

// Pending is a call held for the user's approval.
type Pending struct {
	ApprovalID string
	ToolCallID string
	ToolName   string
	Input      json.RawMessage
	// Reason is the policy's reason for asking, shown to the user; often empty.
	Reason string
}

// Decision answers a held call.
type Decision struct {
	Approved bool
	// Denial is what the model is told for a call that was not approved: who refused it and
	// why, so it can answer without the tool.
	Denial string
	// Approval, when set, is kept on the call's result (model.Part.Approval).
	Approval *model.Approval
}

// Config is what one turn runs with.
type Config struct {
	Model    Model
	Tools    *tool.Set
	System   string
	MaxSteps int // 0 means DefaultMaxSteps
	Save     SaveFunc
	// Pause holds calls that need the user's approval. Without it such calls are denied,
	// with a result that says approval cannot be asked here.
	Pause PauseFunc
	// NewID returns a fresh message id; nil leaves assistant and tool messages without one.
	NewID func() string
	// Async runs calls of tools wrapped as async (tool.Call.Async not empty): it starts or
	// dispatches the work and returns the placeholder result the model sees now. Without it
	// such calls run inline like any other.
	Async AsyncFunc
	// WaitOnAsync ends the pass after a step that started async calls, so the model next
	// answers with their results rather than over placeholders (controller-owned tools behave
	// like ordinary tools to the model).
	WaitOnAsync bool
	// Immediate, when set, gives the calls to make before the first model step of a turn that
	// the user message m begins, as a step of their own, as if the model had made them (001's
	// immediate subagents); none when it returns nil.
	Immediate func(m model.Message) []model.Part
	// Warnings are what went wrong building the agent without stopping its turn (an MCP server
	// that could not be reached), for its client.
	Warnings []string
	// KeepResult, when set, keeps the whole of a tool result that was cut to fit the
	// conversation's record (MaxResultBytes) and returns where, for the result's OutputKey; ""
	// when it could not. Without it such a result is only cut.
	KeepResult func(ctx context.Context, whole json.RawMessage) string
	// Output, when set, makes the final answer a JSON object valid against its schema.
	Output *Output
	// CacheKey names the agent for its provider's prompt cache (model.Request.CacheKey).
	CacheKey string
	// Context keeps each request within the agent's input budget (context.go); nil: requests
	// send the whole history, and a provider's refusal of one as too long ends the turn.
	Context *Context
}

// Output is a structured output: the agent config's "output".
type Output struct {
	// Schema is the JSON schema the model is asked to follow.
	Schema json.RawMessage
	// Compiled is Schema compiled (shared/wire/jsonschema), which answers are checked against.
	Compiled *gojsonschema.Schema
}

// OutputError is a final answer that is not valid against the output schema, on the model's
// second try: it ends the turn.
type OutputError struct {
	Problems []string
}

func (e *OutputError) Error() string {
	return "the answer is not valid against the agent's output schema: " + strings.Join(e.Problems, "; ")
}

// check returns the answer text as the JSON object it must be, or why it is not one.
func (o *Output) check(text string) (json.RawMessage, *OutputError) {
	raw := json.RawMessage(strings.TrimSpace(text))
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, &OutputError{Problems: []string{"the answer is not a JSON object"}}
	}
	res, err := o.Compiled.Validate(gojsonschema.NewBytesLoader(raw))
	if err != nil {
		return nil, &OutputError{Problems: []string{err.Error()}}
	}
	if !res.Valid() {
		var problems []string
		for _, e := range res.Errors() {
			problems = append(problems, e.String())
		}
		return nil, &OutputError{Problems: problems}
	}
	return raw, nil
}

// retryNote is the note that asks the model once more for a valid answer.
func retryNote(id string, why *OutputError) model.Message {
	text := "Your answer is not valid against the output schema (" + strings.Join(why.Problems, "; ") +
		"). Answer again with only a JSON object valid against the schema."
	return model.Message{ID: id, Role: model.RoleUser, Kind: model.KindOutputRetry, Parts: []model.Part{{Type: model.PartText, Text: text}}}
}

// AsyncFunc starts an async call; toolCallID is the model's id for it.
type AsyncFunc func(ctx context.Context, toolCallID string, call *tool.Call) (json.RawMessage, error)

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
	// ToolApprovalRequest: the call is held for the user's decision (ApprovalID, Text = the
	// policy's reason); sent once the pending approval is persisted.
	ToolApprovalRequest
	// ToolOutputDenied: the call was refused and never ran (ErrorText says by whom and why;
	// Automatic when a policy refused it rather than the user).
	ToolOutputDenied
	StepFinish
	// OutputAvailable is the turn's structured output (Output is the JSON object), sent once
	// after the final answer's step and before Finish.
	OutputAvailable
	// Finish ends the pass; Finish and Usage are set, and Pending lists the calls awaiting
	// approval when the pass paused for them. StepFinish carries the usage so far.
	Finish
	// ModelAnswered: a fallback model, not the agent's own, answers this step (Text names it,
	// "provider/model").
	ModelAnswered
	// ReasoningStart, ReasoningDelta and ReasoningEnd stream a piece of the model's reasoning
	// (ID, and Text for a delta), as TextStart, TextDelta and TextEnd stream its answer.
	ReasoningStart
	ReasoningDelta
	ReasoningEnd
	// Compacted: the turns before this one were summarized to keep the request within the
	// budget (ID is the stored summary's id, Text the summary, Compaction what it covers).
	Compacted
)

// Event is one thing that happened in a turn.
type Event struct {
	Type       EventType
	ID         string // text or reasoning part id
	Text       string // text delta or tool input delta
	ToolCallID string
	ToolName   string
	Input      json.RawMessage
	Output     json.RawMessage
	ErrorText  string
	Finish     model.FinishReason
	Usage      model.Usage
	Source     *model.Source
	Compaction *model.Compaction
	ApprovalID string
	Automatic  bool
	Pending    []Pending
}

// Run runs a turn over history, which ends with the user's new message. A non-nil error ends
// the stream: it comes from the model or from Save or Pause, never from a tool. Here as in
// Continue, Resume and Decide, history's nested messages (a prompt tool's own loop) are left
// out: the model never sees them.
func Run(ctx context.Context, cfg Config, history []model.Message) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		history = model.WithoutNested(history)
		loopFrom(ctx, cfg, validTranscript(history), 1, immediate(cfg, history), model.Usage{}, yield)
	}
}

// immediate is the calls a turn begins with (Config.Immediate) when nothing of the turn has run
// yet: history ends with the message that starts it.
func immediate(cfg Config, history []model.Message) []model.Part {
	if n := len(history); cfg.Immediate != nil && n > 0 && history[n-1].StartsTurn() {
		return cfg.Immediate(history[n-1])
	}
	return nil
}

// Continue runs the model again over history within the same turn, as after async results
// were added to it: the steps go on being numbered from those the turn already took, and
// MaxSteps bounds the whole turn. A turn of which nothing has run yet (history ends with its
// message, stored already) begins with its Immediate calls, as under Run.
func Continue(ctx context.Context, cfg Config, history []model.Message) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		history = model.WithoutNested(history)
		loopFrom(ctx, cfg, validTranscript(history), stepsSinceUser(history)+1, immediate(cfg, history), model.Usage{}, yield)
	}
}

// Resume continues a pass that paused for approval. history ends with the paused step: the
// assistant's calls and the results of those that ran. Every held call must have a decision,
// keyed by tool call id: approved calls run, in the order the model made them, and the others
// get their Denial as an error result. The results and then next are saved in one write, and the
// loop goes on as Run does. next may hold what else the paused step brought back (the results of
// its async calls) and a new user message, which starts a new turn.
func Resume(ctx context.Context, cfg Config, history []model.Message, decisions map[string]Decision, next ...model.Message) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		history = model.WithoutNested(history)
		produced, used, ok := decide(ctx, cfg, history, decisions, next, yield)
		if !ok {
			return
		}
		// The resumed pass goes on numbering the turn's steps, so text part ids stay unique in
		// the client's message and maxSteps bounds the whole turn; a new message starts a turn.
		first := stepsSinceUser(history) + 1
		if slices.ContainsFunc(next, model.Message.StartsTurn) {
			first = 1
		}
		loopFrom(ctx, cfg, validTranscript(append(history, model.WithoutNested(produced)...)), first, nil, used, yield)
	}
}

// Decide ends a paused step as Resume does (the decided calls run, and their results and then
// next are saved in one write) but calls the model no more: the pass finishes there, for a step
// whose async calls still run elsewhere, so that the model goes on once their results are back.
func Decide(ctx context.Context, cfg Config, history []model.Message, decisions map[string]Decision, next ...model.Message) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		if _, used, ok := decide(ctx, cfg, model.WithoutNested(history), decisions, next, yield); ok {
			yield(Event{Type: Finish, Finish: model.FinishToolCalls, Usage: used}, nil)
		}
	}
}

// decide runs the held calls of history's paused step by their decisions and saves their results
// and then next; it returns what it saved, the tokens the calls' own loops used, and false when
// the stream ended.
func decide(ctx context.Context, cfg Config, history []model.Message, decisions map[string]Decision, next []model.Message, yield func(Event, error) bool) ([]model.Message, model.Usage, bool) {
	held, err := HeldCalls(history)
	if err != nil {
		yield(Event{}, err)
		return nil, model.Usage{}, false
	}
	// Every held call needs its decision before any of them runs.
	for _, c := range held {
		if _, ok := decisions[c.ToolCallID]; !ok {
			yield(Event{}, fmt.Errorf("resuming: call %s has no decision", c.ToolCallID))
			return nil, model.Usage{}, false
		}
	}
	nested := &tool.Transcript{}
	ctx = tool.WithTranscript(ctx, nested)
	results := make([]model.Part, 0, len(held))
	step := newStepResults(cfg, len(held))
	for _, c := range held {
		d := decisions[c.ToolCallID]
		if !d.Approved {
			result, denial := step.failure(ctx, c, d.Denial)
			if !yield(Event{Type: ToolOutputDenied, ToolCallID: c.ToolCallID, ToolName: c.ToolName, ErrorText: denial}, nil) {
				return nil, model.Usage{}, false
			}
			result.Approval = d.Approval
			results = append(results, result)
			continue
		}
		call, err := prepare(cfg.Tools, c.ToolName, c.Input)
		r, _, ok := runCall(ctx, step, call, err, c, false, yield)
		if !ok {
			return nil, model.Usage{}, false
		}
		r.Approval = d.Approval
		results = append(results, r)
	}
	produced := append(boundNested(nested.Messages()), model.Message{ID: newID(cfg.NewID), Role: model.RoleTool, Parts: results})
	produced = append(produced, next...)
	if cfg.Save != nil {
		if err := cfg.Save(ctx, produced); err != nil {
			yield(Event{}, fmt.Errorf("saving the decided calls: %w", err))
			return nil, model.Usage{}, false
		}
	}
	return produced, nested.Usage(), true
}

// HeldCalls returns the calls of history's last assistant message that have no result yet: the
// calls a paused step holds for approval, in the model's order.
func HeldCalls(history []model.Message) ([]model.Part, error) {
	history = model.WithoutNested(history)
	last := len(history) - 1
	for last >= 0 && history[last].Role == model.RoleTool {
		last--
	}
	if last < 0 || history[last].Role != model.RoleAssistant {
		return nil, errors.New("the conversation has no paused step to resume")
	}
	answered := map[string]bool{}
	for _, m := range history[last+1:] {
		for _, p := range m.Parts {
			if p.Type == model.PartToolResult {
				answered[p.ToolCallID] = true
			}
		}
	}
	var held []model.Part
	for _, p := range history[last].Parts {
		if p.Type == model.PartToolCall && !answered[p.ToolCallID] {
			held = append(held, p)
		}
	}
	if len(held) == 0 {
		return nil, errors.New("the conversation's last step holds no calls")
	}
	return held, nil
}

// stepsSinceUser counts the model steps (assistant messages) since the turn began.
func stepsSinceUser(history []model.Message) int {
	n := 0
	for i := len(history) - 1; i >= 0 && !history[i].StartsTurn(); i-- {
		if history[i].Role == model.RoleAssistant {
			n++
		}
	}
	return n
}

// loopFrom runs model steps over msgs, a valid transcript, numbering them from first, until the
// model stops calling tools, the step limit is reached or a step pauses for approval. Its first
// step, when calls is not empty, makes those calls instead of calling the model; usage is what
// the pass used before its first step.
func loopFrom(ctx context.Context, cfg Config, msgs []model.Message, first int, calls []model.Part, usage model.Usage, yield func(Event, error) bool) {
	maxSteps := cfg.MaxSteps
	if maxSteps <= 0 {
		maxSteps = DefaultMaxSteps
	}
	var specs []model.ToolSpec
	if cfg.Tools != nil {
		specs = cfg.Tools.Specs()
	}
	var schema json.RawMessage
	if cfg.Output != nil {
		schema = cfg.Output.Schema
	}
	retried := false
	budget := newCompactor(cfg)
	for step := first; ; step++ {
		req := &model.Request{System: cfg.System, Tools: specs, Output: schema, CacheKey: cfg.CacheKey}
		if calls == nil && budget != nil {
			// Compacted before the step begins, as its messages are stored.
			var spent model.Usage
			var ok bool
			msgs, spent, ok = budget.fit(ctx, req, msgs, false, yield)
			usage = usage.Add(spent)
			if !ok {
				return
			}
		}
		if !yield(Event{Type: StepStart}, nil) {
			return
		}
		var res stepResult
		ok := true
		if calls != nil {
			res, calls = stepResult{calls: calls, finish: model.FinishToolCalls}, nil
		} else {
			msgs, res, ok = budget.step(ctx, cfg.Model, req, msgs, step, yield)
			usage = usage.Add(res.compaction)
		}
		if !ok {
			return
		}
		usage = usage.Add(res.usage)
		produced := res.messages(cfg.NewID)
		var pending []Pending
		deferred := false
		if len(res.calls) > 0 {
			// The calls' own loops (prompt tools) are kept between the calls and their results.
			nested := &tool.Transcript{}
			var results []model.Part
			results, pending, deferred, ok = runTools(tool.WithTranscript(ctx, nested), cfg, res.calls, yield)
			if !ok {
				return
			}
			produced = append(produced, boundNested(nested.Messages())...)
			usage = usage.Add(nested.Usage())
			if len(results) > 0 {
				produced = append(produced, model.Message{ID: newID(cfg.NewID), Role: model.RoleTool, Parts: results})
			}
		}
		if len(pending) > 0 {
			if err := cfg.Pause(ctx, produced, pending); err != nil {
				yield(Event{}, fmt.Errorf("holding step %d for approval: %w", step, err))
				return
			}
			for _, p := range pending {
				if !yield(Event{Type: ToolApprovalRequest, ToolCallID: p.ToolCallID, ToolName: p.ToolName, ApprovalID: p.ApprovalID, Text: p.Reason}, nil) {
					return
				}
			}
			if yield(Event{Type: StepFinish, Usage: usage}, nil) {
				yield(Event{Type: Finish, Finish: model.FinishToolCalls, Usage: usage, Pending: pending}, nil)
			}
			return
		}
		var output json.RawMessage
		var invalid *OutputError
		if cfg.Output != nil && len(res.calls) == 0 {
			// The final answer: valid, it is the turn's output; invalid, the model is asked once
			// more, with the note that says why kept in the conversation as it was sent.
			if output, invalid = cfg.Output.check(res.text); invalid == nil {
				produced[0].Output = true
			} else if !retried {
				produced = append(produced, retryNote(newID(cfg.NewID), invalid))
			}
		}
		if len(produced) > 0 && cfg.Save != nil {
			if err := cfg.Save(ctx, produced); err != nil {
				yield(Event{}, fmt.Errorf("saving step %d: %w", step, err))
				return
			}
		}
		msgs = append(msgs, model.WithoutNested(produced)...)
		if !yield(Event{Type: StepFinish, Usage: usage}, nil) {
			return
		}
		if invalid != nil {
			if retried {
				yield(Event{}, invalid)
				return
			}
			retried = true
			continue
		}
		if output != nil && !yield(Event{Type: OutputAvailable, Output: output}, nil) {
			return
		}
		if len(res.calls) == 0 || step >= maxSteps {
			yield(Event{Type: Finish, Finish: res.finish, Usage: usage}, nil)
			return
		}
		if deferred || (cfg.WaitOnAsync && startedAsync(cfg, res.calls)) {
			yield(Event{Type: Finish, Finish: model.FinishToolCalls, Usage: usage}, nil)
			return
		}
	}
}

// startedAsync reports whether any of a step's calls ran as async.
func startedAsync(cfg Config, calls []model.Part) bool {
	if cfg.Async == nil || cfg.Tools == nil {
		return false
	}
	for _, c := range calls {
		if cfg.Tools.AsyncMode(c.ToolName) != "" {
			return true
		}
	}
	return false
}

type stepResult struct {
	// reasoning are the step's pieces of reasoning, which its message begins with.
	reasoning []model.Part
	text      string
	calls     []model.Part
	finish    model.FinishReason
	usage     model.Usage
	// model names the fallback that answered; empty for the agent's own model.
	model string
	// tooLong is the provider's refusal of the request as longer than its context window,
	// before anything streamed; compaction is what the summaries of the step's request cost.
	tooLong    error
	compaction model.Usage
}

func (r stepResult) messages(ids func() string) []model.Message {
	parts := slices.Clone(r.reasoning)
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
	return []model.Message{{ID: newID(ids), Role: model.RoleAssistant, Parts: parts, Usage: &usage, Model: r.model}}
}

func newID(f func() string) string {
	if f == nil {
		return ""
	}
	return f()
}

// runStep streams one model call through yield and collects its reasoning, text and tool
// calls. A text or reasoning part is closed as soon as something else streams, so parts never
// overlap.
func runStep(ctx context.Context, m Model, req *model.Request, step int, yield func(Event, error) bool) (stepResult, bool) {
	var res stepResult
	var text strings.Builder
	textID, reasoningID, parts := "", "", 0
	closeText := func() bool {
		if textID == "" {
			return true
		}
		id := textID
		textID = ""
		return yield(Event{Type: TextEnd, ID: id}, nil)
	}
	openReasoning := func() bool {
		if reasoningID != "" {
			return true
		}
		parts++
		reasoningID = fmt.Sprintf("reasoning-%d-%d", step, parts)
		res.reasoning = append(res.reasoning, model.Part{Type: model.PartReasoning, ID: reasoningID})
		return yield(Event{Type: ReasoningStart, ID: reasoningID}, nil)
	}
	closeReasoning := func() bool {
		if reasoningID == "" {
			return true
		}
		id := reasoningID
		reasoningID = ""
		return yield(Event{Type: ReasoningEnd, ID: id}, nil)
	}
	streamed := false
	for ev, err := range m.Stream(ctx, req) {
		if err != nil {
			if !streamed && errors.Is(err, model.ErrContextLength) {
				// Nothing of the step reached the client: the loop may compact and try again.
				res.tooLong = err
				return res, false
			}
			yield(Event{}, err)
			return res, false
		}
		streamed = true
		if ev.Type != model.EventReasoningDelta && ev.Type != model.EventReasoningEnd && !closeReasoning() {
			return res, false
		}
		var out Event
		switch ev.Type {
		case model.EventReasoningDelta:
			if ev.Text == "" {
				continue
			}
			if !closeText() || !openReasoning() {
				return res, false
			}
			res.reasoning[len(res.reasoning)-1].Text += ev.Text
			if !yield(Event{Type: ReasoningDelta, ID: reasoningID, Text: ev.Text}, nil) {
				return res, false
			}
			continue
		case model.EventReasoningEnd:
			if ev.Signature == "" && ev.Redacted == "" && reasoningID == "" {
				continue
			}
			if !closeText() || !openReasoning() {
				return res, false
			}
			r := &res.reasoning[len(res.reasoning)-1]
			r.Signature, r.Redacted, r.Provider = ev.Signature, ev.Redacted, ev.Provider
			if !closeReasoning() {
				return res, false
			}
			continue
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
			res.calls = append(res.calls, model.Part{Type: model.PartToolCall, ToolCallID: ev.ToolCallID, ToolName: ev.ToolName, Input: ev.Input, Signature: ev.Signature, Provider: ev.Provider})
			continue
		case model.EventFinish:
			res.finish, res.usage = ev.Finish, ev.Usage
			continue
		case model.EventSource:
			if ev.Source == nil {
				continue
			}
			out = Event{Type: Source, Source: ev.Source}
		case model.EventModel:
			res.model = ev.Text
			out = Event{Type: ModelAnswered, Text: ev.Text}
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
	if !closeText() || !closeReasoning() {
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

// runTools runs calls one after another, in order, and returns their results and the calls
// held for approval. Unknown tools, bad arguments, refusals and tool failures become error
// results the model sees.
func runTools(ctx context.Context, cfg Config, calls []model.Part, yield func(Event, error) bool) (results []model.Part, pending []Pending, deferred, ok bool) {
	results = make([]model.Part, 0, len(calls))
	step := newStepResults(cfg, len(calls))
	for _, c := range calls {
		call, err := prepare(cfg.Tools, c.ToolName, c.Input)
		if err != nil {
			r, _, ok := runCall(ctx, step, nil, err, c, true, yield)
			if !ok {
				return nil, nil, false, false
			}
			results = append(results, r)
			continue
		}
		d := call.Approval()
		if d.Status != approval.UserApproval && d.Status != approval.Denied {
			r, later, ok := runCall(ctx, step, call, nil, c, true, yield)
			if !ok {
				return nil, nil, false, false
			}
			results, deferred = append(results, r), deferred || later
			continue
		}
		if !yield(Event{Type: ToolInputAvailable, ToolCallID: c.ToolCallID, ToolName: c.ToolName, Input: call.Input()}, nil) {
			return nil, nil, false, false
		}
		if d.Status == approval.UserApproval && cfg.Pause != nil {
			pending = append(pending, Pending{ApprovalID: newApprovalID(), ToolCallID: c.ToolCallID, ToolName: c.ToolName, Input: call.Input(), Reason: d.Reason})
			continue
		}
		denial := "denied by policy"
		if d.Status == approval.UserApproval {
			denial = "needs the user's approval, which cannot be asked for here"
		}
		if d.Reason != "" {
			denial += ": " + d.Reason
		}
		result, denial := step.failure(ctx, c, denial+"; the tool did not run")
		result.Approval = &model.Approval{ID: newApprovalID(), Reason: denial, Automatic: true}
		if !yield(Event{Type: ToolOutputDenied, ToolCallID: c.ToolCallID, ToolName: c.ToolName, ApprovalID: result.Approval.ID, Automatic: true, ErrorText: denial}, nil) {
			return nil, nil, false, false
		}
		results = append(results, result)
	}
	return results, pending, deferred, true
}

// prepare validates a call's arguments against its tool.
func prepare(tools *tool.Set, name string, input json.RawMessage) (*tool.Call, error) {
	if tools == nil {
		return nil, tool.ErrUnknownTool
	}
	if len(input) == 0 {
		input = json.RawMessage(`{}`)
	}
	return tools.Prepare(name, input)
}

// runCall runs one prepared call of step, or reports why it could not be prepared, and returns
// its result, bounded as the step's results are. announce sends the tool-input-available event
// first (a resumed call was announced when it was held).
func runCall(ctx context.Context, step stepResults, call *tool.Call, prepErr error, c model.Part, announce bool, yield func(Event, error) bool) (r model.Part, deferred, ok bool) {
	input := c.Input
	if len(input) == 0 {
		input = json.RawMessage(`{}`)
	}
	if prepErr != nil {
		result, msg := step.failure(ctx, c, inputErrorText(c.ToolName, prepErr))
		if !yield(Event{Type: ToolInputError, ToolCallID: c.ToolCallID, ToolName: c.ToolName, Input: displayInput(input), ErrorText: msg}, nil) {
			return result, false, false
		}
		return result, false, true
	}
	if announce && !yield(Event{Type: ToolInputAvailable, ToolCallID: c.ToolCallID, ToolName: c.ToolName, Input: input}, nil) {
		return model.Part{}, false, false
	}
	var out json.RawMessage
	var err error
	ctx = tool.WithCallID(ctx, c.ToolCallID)
	if call.Async() != "" && step.cfg.Async != nil {
		out, err = step.cfg.Async(ctx, c.ToolCallID, call)
	} else {
		out, err = call.Run(ctx)
	}
	var handed *tool.Deferred
	if errors.As(err, &handed) {
		out, err, deferred = handed.Output, nil, true
	}
	if err != nil {
		result, msg := step.failure(ctx, c, err.Error())
		if !yield(Event{Type: ToolOutputError, ToolCallID: c.ToolCallID, ToolName: c.ToolName, ErrorText: msg}, nil) {
			return result, false, false
		}
		return result, false, true
	}
	result := step.output(ctx, c, out)
	if !yield(Event{Type: ToolOutput, ToolCallID: c.ToolCallID, ToolName: c.ToolName, Output: result.Output}, nil) {
		return result, false, false
	}
	return result, deferred, true
}

// newApprovalID returns an unguessable approval id.
func newApprovalID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand never fails on Linux
	return "apr_" + base64.RawURLEncoding.EncodeToString(b)
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

// Bounds of the nested messages one step keeps: the step is saved in one write, which holds at
// most 100 items and 4 MB, and one message is at most 384 KiB as stored.
const (
	maxNestedMessages = 60
	maxNestedBytes    = 1 << 20
	maxNestedMessage  = 256 << 10
)

// boundNested keeps what of a step's nested messages fits its bounds, in order; a message too
// large, and whatever is past the bounds, is replaced by one note saying so.
func boundNested(msgs []model.Message) []model.Message {
	var out []model.Message
	total, left := 0, 0
	for _, m := range msgs {
		b, _ := json.Marshal(m)
		if len(out) >= maxNestedMessages-1 || total+len(b) > maxNestedBytes || len(b) > maxNestedMessage {
			left++
			continue
		}
		total += len(b)
		out = append(out, m)
	}
	if left > 0 {
		last := msgs[len(msgs)-1]
		out = append(out, model.Message{ID: last.ID + "_left", Role: model.RoleAssistant, Kind: model.KindNested, Nested: last.Nested,
			Parts: []model.Part{{Type: model.PartText, Text: fmt.Sprintf("[%d more message(s) of this step's nested loops were not kept: the record of one step is bounded]", left)}}})
	}
	return out
}
