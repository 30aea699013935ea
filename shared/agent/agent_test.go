package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/scriptedmodel"
	"github.com/agentharness/harness/shared/tool"
	"github.com/google/go-cmp/cmp"
)

const fixedTime = "2026-01-01T00:00:00Z"

// modelFunc adapts a function to agent.Model.
type modelFunc func(ctx context.Context, req *model.Request) iter.Seq2[model.Event, error]

func (f modelFunc) Stream(ctx context.Context, req *model.Request) iter.Seq2[model.Event, error] {
	return f(ctx, req)
}

// item is one streamed pair of a fake model's answer.
type item struct {
	ev  model.Event
	err error
}

// playback is a fake model that answers its n-th call with calls[n].
func playback(calls ...[]item) agent.Model {
	n := 0
	return modelFunc(func(_ context.Context, _ *model.Request) iter.Seq2[model.Event, error] {
		call := n
		n++
		return func(yield func(model.Event, error) bool) {
			if call >= len(calls) {
				yield(model.Event{}, fmt.Errorf("fake model called %d times, scripted for %d", call+1, len(calls)))
				return
			}
			for _, it := range calls[call] {
				if !yield(it.ev, it.err) {
					return
				}
			}
		}
	})
}

// recorder logs model calls and saves in one sequence, so tests can check their order, and
// keeps copies of what each received.
type recorder struct {
	log      []string
	requests []model.Request
	saved    [][]model.Message
	saveErr  error
}

func (r *recorder) wrap(m agent.Model) agent.Model {
	return modelFunc(func(ctx context.Context, req *model.Request) iter.Seq2[model.Event, error] {
		r.log = append(r.log, "model")
		cp := *req
		cp.Messages = append([]model.Message(nil), req.Messages...)
		r.requests = append(r.requests, cp)
		return m.Stream(ctx, req)
	})
}

func (r *recorder) save(_ context.Context, msgs []model.Message) error {
	r.log = append(r.log, "save")
	r.saved = append(r.saved, append([]model.Message(nil), msgs...))
	return r.saveErr
}

func (r *recorder) modelCalls() int {
	n := 0
	for _, e := range r.log {
		if e == "model" {
			n++
		}
	}
	return n
}

func scripted(t *testing.T, script string) agent.Model {
	t.Helper()
	var steps []scriptedmodel.Step
	if err := json.Unmarshal([]byte(script), &steps); err != nil {
		t.Fatalf("decoding script: %v", err)
	}
	m, err := scriptedmodel.New(steps)
	if err != nil {
		t.Fatalf("scriptedmodel.New: %v", err)
	}
	return m
}

func sequentialIDs() func() string {
	n := 0
	return func() string {
		n++
		return fmt.Sprintf("m%d", n)
	}
}

func currentTime() tool.Tool {
	return tool.Tool{
		Name:        "current_time",
		Description: "Returns the time.",
		Execute:     func(context.Context, json.RawMessage) (any, error) { return fixedTime, nil },
	}
}

func weather() tool.Tool {
	return tool.Tool{
		Name:        "weather",
		Description: "Returns the weather of a city.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
		Execute:     func(context.Context, json.RawMessage) (any, error) { return "sunny", nil },
	}
}

func newSet(t *testing.T, tools ...tool.Tool) *tool.Set {
	t.Helper()
	set, err := tool.NewSet(tools...)
	if err != nil {
		t.Fatalf("tool.NewSet: %v", err)
	}
	return set
}

func userMsg(text string) model.Message {
	return model.Message{ID: "u1", Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: text}}}
}

// run ranges over the whole turn, without breaking on an error, so a test sees whatever the
// iterator yields after one.
func run(cfg agent.Config, history ...model.Message) (events []agent.Event, errs []error, errAt int) {
	errAt = -1
	for ev, err := range agent.Run(context.Background(), cfg, history) {
		if err != nil {
			if errAt < 0 {
				errAt = len(events)
			}
			errs = append(errs, err)
			continue
		}
		events = append(events, ev)
	}
	return events, errs, errAt
}

func runOK(t *testing.T, cfg agent.Config, history ...model.Message) []agent.Event {
	t.Helper()
	events, errs, _ := run(cfg, history...)
	if len(errs) > 0 {
		t.Fatalf("Run yielded errors %v", errs)
	}
	return events
}

func types(events []agent.Event) []agent.EventType {
	out := make([]agent.EventType, len(events))
	for i, ev := range events {
		out[i] = ev.Type
	}
	return out
}

func TestRunToolCallThenText(t *testing.T) {
	rec := &recorder{}
	set := newSet(t, currentTime())
	cfg := agent.Config{
		Model:  rec.wrap(scripted(t, `[{"toolCalls":[{"name":"current_time"}]},{"text":"It is {{toolResults}}"}]`)),
		Tools:  set,
		System: "Be brief.",
		Save:   rec.save,
		NewID:  sequentialIDs(),
	}
	user := userMsg("What time is it?")

	events := runOK(t, cfg, user)

	output := json.RawMessage(`"` + fixedTime + `"`)
	wantEvents := []agent.Event{
		{Type: agent.StepStart},
		{Type: agent.ToolInputStart, ToolCallID: "call_1_1", ToolName: "current_time"},
		{Type: agent.ToolInputDelta, ToolCallID: "call_1_1", Text: `{}`},
		{Type: agent.ToolInputAvailable, ToolCallID: "call_1_1", ToolName: "current_time", Input: json.RawMessage(`{}`)},
		{Type: agent.ToolOutput, ToolCallID: "call_1_1", ToolName: "current_time", Output: output},
		{Type: agent.StepFinish, Usage: model.Usage{InputTokens: 1}},
		{Type: agent.StepStart},
		{Type: agent.TextStart, ID: "text-2-1"},
		{Type: agent.TextDelta, ID: "text-2-1", Text: "It"},
		{Type: agent.TextDelta, ID: "text-2-1", Text: " is"},
		{Type: agent.TextDelta, ID: "text-2-1", Text: ` ["` + fixedTime + `"]`},
		{Type: agent.TextEnd, ID: "text-2-1"},
		{Type: agent.StepFinish, Usage: model.Usage{InputTokens: 1 + 3, OutputTokens: 0 + 3}},
		{Type: agent.Finish, Finish: model.FinishStop, Usage: model.Usage{InputTokens: 1 + 3, OutputTokens: 0 + 3}},
	}
	if diff := cmp.Diff(wantEvents, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	step1 := []model.Message{
		{ID: "m1", Role: model.RoleAssistant, Parts: []model.Part{
			{Type: model.PartToolCall, ToolCallID: "call_1_1", ToolName: "current_time", Input: json.RawMessage(`{}`)},
		}, Usage: &model.Usage{InputTokens: 1}},
		{ID: "m2", Role: model.RoleTool, Parts: []model.Part{
			{Type: model.PartToolResult, ToolCallID: "call_1_1", ToolName: "current_time", Output: output},
		}},
	}
	step2 := []model.Message{
		{ID: "m3", Role: model.RoleAssistant, Parts: []model.Part{{Type: model.PartText, Text: `It is ["` + fixedTime + `"]`}}, Usage: &model.Usage{InputTokens: 3, OutputTokens: 3}},
	}
	if diff := cmp.Diff([][]model.Message{step1, step2}, rec.saved); diff != "" {
		t.Errorf("saved messages per step (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"model", "save", "model", "save"}, rec.log); diff != "" {
		t.Errorf("model calls and saves (-want +got):\n%s", diff)
	}

	wantRequests := []model.Request{
		{System: "Be brief.", Messages: []model.Message{user}, Tools: set.Specs()},
		{System: "Be brief.", Messages: append([]model.Message{user}, step1...), Tools: set.Specs()},
	}
	if diff := cmp.Diff(wantRequests, rec.requests); diff != "" {
		t.Errorf("model requests (-want +got):\n%s", diff)
	}
}

func TestRunWithoutSaveOrIDs(t *testing.T) {
	cfg := agent.Config{
		Model: scripted(t, `[{"toolCalls":[{"name":"current_time"}]},{"text":"done"}]`),
		Tools: newSet(t, currentTime()),
	}
	events := runOK(t, cfg, userMsg("hi"))
	want := []agent.EventType{
		agent.StepStart, agent.ToolInputStart, agent.ToolInputDelta, agent.ToolInputAvailable, agent.ToolOutput, agent.StepFinish,
		agent.StepStart, agent.TextStart, agent.TextDelta, agent.TextEnd, agent.StepFinish, agent.Finish,
	}
	if diff := cmp.Diff(want, types(events)); diff != "" {
		t.Errorf("event types (-want +got):\n%s", diff)
	}
}

// A tool call that cannot run or fails becomes an error result the model sees on the next step.
func TestRunToolProblemsBecomeErrorResults(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name       string
		tools      []tool.Tool // nil means no tool set at all
		call       string      // the scripted tool call
		toolName   string
		wantEvents []agent.Event // the events of the tool phase
		wantError  string        // the error text the model gets
	}{
		{
			name:     "missing required field",
			tools:    []tool.Tool{weather()},
			call:     `{"name":"weather","input":{"town":"Oslo"}}`,
			toolName: "weather",
			wantEvents: []agent.Event{{
				Type: agent.ToolInputError, ToolCallID: "call_1_1", ToolName: "weather", Input: json.RawMessage(`{"town":"Oslo"}`),
				ErrorText: "invalid input for tool weather: (root): city is required",
			}},
			wantError: "invalid input for tool weather: (root): city is required",
		},
		{
			name:     "unknown tool",
			tools:    []tool.Tool{weather()},
			call:     `{"name":"teleport","input":{"to":"Mars"}}`,
			toolName: "teleport",
			wantEvents: []agent.Event{{
				Type: agent.ToolInputError, ToolCallID: "call_1_1", ToolName: "teleport", Input: json.RawMessage(`{"to":"Mars"}`),
				ErrorText: `no tool named "teleport" is available`,
			}},
			wantError: `no tool named "teleport" is available`,
		},
		{
			name:     "no tool set",
			tools:    nil,
			call:     `{"name":"weather","input":{"city":"Oslo"}}`,
			toolName: "weather",
			wantEvents: []agent.Event{{
				Type: agent.ToolInputError, ToolCallID: "call_1_1", ToolName: "weather", Input: json.RawMessage(`{"city":"Oslo"}`),
				ErrorText: `no tool named "weather" is available`,
			}},
			wantError: `no tool named "weather" is available`,
		},
		{
			name: "tool error",
			tools: []tool.Tool{{Name: "flaky", Execute: func(context.Context, json.RawMessage) (any, error) {
				return nil, boom
			}}},
			call:     `{"name":"flaky"}`,
			toolName: "flaky",
			wantEvents: []agent.Event{
				{Type: agent.ToolInputAvailable, ToolCallID: "call_1_1", ToolName: "flaky", Input: json.RawMessage(`{}`)},
				{Type: agent.ToolOutputError, ToolCallID: "call_1_1", ToolName: "flaky", ErrorText: "tool flaky failed: boom"},
			},
			wantError: "tool flaky failed: boom",
		},
		{
			name: "tool panic",
			tools: []tool.Tool{{Name: "crashy", Execute: func(context.Context, json.RawMessage) (any, error) {
				panic("nil map")
			}}},
			call:     `{"name":"crashy"}`,
			toolName: "crashy",
			wantEvents: []agent.Event{
				{Type: agent.ToolInputAvailable, ToolCallID: "call_1_1", ToolName: "crashy", Input: json.RawMessage(`{}`)},
				{Type: agent.ToolOutputError, ToolCallID: "call_1_1", ToolName: "crashy", ErrorText: "tool crashy failed: panic: nil map"},
			},
			wantError: "tool crashy failed: panic: nil map",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			cfg := agent.Config{
				Model: rec.wrap(scripted(t, `[{"toolCalls":[`+tt.call+`]},{"text":"Sorry."}]`)),
				Save:  rec.save,
				NewID: sequentialIDs(),
			}
			if tt.tools != nil {
				cfg.Tools = newSet(t, tt.tools...)
			}

			events := runOK(t, cfg, userMsg("hi"))

			var got []agent.Event
			for _, ev := range events {
				switch ev.Type {
				case agent.ToolInputAvailable, agent.ToolInputError, agent.ToolOutput, agent.ToolOutputError:
					got = append(got, ev)
				}
			}
			if diff := cmp.Diff(tt.wantEvents, got); diff != "" {
				t.Errorf("tool events (-want +got):\n%s", diff)
			}

			if len(rec.saved) != 2 || len(rec.saved[0]) != 2 {
				t.Fatalf("saved = %+v, want two steps, the first with an assistant and a tool message", rec.saved)
			}
			errOut, _ := json.Marshal(map[string]string{"error": tt.wantError})
			wantResult := model.Message{ID: "m2", Role: model.RoleTool, Parts: []model.Part{{
				Type: model.PartToolResult, ToolCallID: "call_1_1", ToolName: tt.toolName, Output: errOut, IsError: true,
			}}}
			if diff := cmp.Diff(wantResult, rec.saved[0][1]); diff != "" {
				t.Errorf("saved tool result (-want +got):\n%s", diff)
			}

			// The loop went on: the model was given the error result and answered.
			if got := rec.modelCalls(); got != 2 {
				t.Fatalf("model calls = %d, want 2", got)
			}
			if diff := cmp.Diff(wantResult, rec.requests[1].Messages[2]); diff != "" {
				t.Errorf("second request's last message (-want +got):\n%s", diff)
			}
			last := events[len(events)-1]
			if last.Type != agent.Finish || last.Finish != model.FinishStop {
				t.Errorf("last event = %+v, want Finish with reason stop", last)
			}
		})
	}
}

// Arguments that are not JSON never reach a tool: it does not run, and the model is told its
// arguments were not valid JSON. The stored conversation keeps them as a JSON string.
func TestRunMalformedArguments(t *testing.T) {
	tests := []struct {
		name   string
		schema string
	}{
		{name: "object schema", schema: `{"type":"object","properties":{"city":{"type":"string"}}}`},
		{name: "schema accepting any JSON", schema: `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ran json.RawMessage
			set := newSet(t, tool.Tool{
				Name:        "weather",
				InputSchema: json.RawMessage(tt.schema),
				Execute: func(_ context.Context, input json.RawMessage) (any, error) {
					ran = input
					return "sunny", nil
				},
			})
			rec := &recorder{}
			cfg := agent.Config{
				Model: rec.wrap(playback(
					[]item{
						{ev: model.Event{Type: model.EventToolInputStart, ToolCallID: "c1", ToolName: "weather"}},
						{ev: model.Event{Type: model.EventToolInputDelta, ToolCallID: "c1", Text: `{"city":`}},
						{ev: model.Event{Type: model.EventToolCall, ToolCallID: "c1", ToolName: "weather", Input: json.RawMessage(`{"city":`)}},
					},
					[]item{{ev: model.Event{Type: model.EventTextDelta, Text: "Sorry."}}},
				)),
				Tools: set,
				Save:  rec.save,
			}

			events := runOK(t, cfg, userMsg("hi"))

			if ran != nil {
				t.Errorf("the tool ran with input %s, want it not to run on malformed arguments", ran)
			}
			var inputErr *agent.Event
			for i := range events {
				if events[i].Type == agent.ToolInputError {
					inputErr = &events[i]
				}
			}
			if inputErr == nil {
				t.Fatalf("events = %+v, want a ToolInputError", types(events))
			}
			if !strings.Contains(inputErr.ErrorText, "not valid JSON") {
				t.Errorf("ToolInputError.ErrorText = %q, want it to say the arguments are not valid JSON", inputErr.ErrorText)
			}
			if want := `"{\"city\":"`; string(inputErr.Input) != want {
				t.Errorf("ToolInputError.Input = %s, want the raw arguments as a JSON string %s", inputErr.Input, want)
			}
			for i, step := range rec.saved {
				for _, m := range step {
					for _, p := range m.Parts {
						if len(p.Input) > 0 && !json.Valid(p.Input) || len(p.Output) > 0 && !json.Valid(p.Output) {
							t.Errorf("step %d saved a part with invalid JSON: %+v", i+1, p)
						}
					}
				}
			}
		})
	}
}

func TestRunMaxSteps(t *testing.T) {
	alwaysCalls := modelFunc(func(_ context.Context, req *model.Request) iter.Seq2[model.Event, error] {
		return func(yield func(model.Event, error) bool) {
			id := fmt.Sprintf("c%d", len(req.Messages))
			_ = yield(model.Event{Type: model.EventToolCall, ToolCallID: id, ToolName: "current_time", Input: json.RawMessage(`{}`)}, nil) &&
				yield(model.Event{Type: model.EventFinish, Finish: model.FinishToolCalls, Usage: model.Usage{InputTokens: 2, OutputTokens: 1}}, nil)
		}
	})
	tests := []struct {
		name      string
		model     func(t *testing.T) agent.Model
		maxSteps  int
		wantCalls int
	}{
		{name: "scripted, three steps", model: func(t *testing.T) agent.Model {
			return scripted(t, `[`+strings.Repeat(`{"toolCalls":[{"name":"current_time"}]},`, 9)+`{"toolCalls":[{"name":"current_time"}]}]`)
		}, maxSteps: 3, wantCalls: 3},
		{name: "one step", model: func(*testing.T) agent.Model { return alwaysCalls }, maxSteps: 1, wantCalls: 1},
		{name: "zero means the default of 20", model: func(*testing.T) agent.Model { return alwaysCalls }, maxSteps: 0, wantCalls: 20},
		{name: "negative means the default", model: func(*testing.T) agent.Model { return alwaysCalls }, maxSteps: -1, wantCalls: 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			cfg := agent.Config{Model: rec.wrap(tt.model(t)), Tools: newSet(t, currentTime()), MaxSteps: tt.maxSteps, Save: rec.save}
			events := runOK(t, cfg, userMsg("hi"))
			if got := rec.modelCalls(); got != tt.wantCalls {
				t.Errorf("model calls = %d, want %d", got, tt.wantCalls)
			}
			if got := len(rec.saved); got != tt.wantCalls {
				t.Errorf("saves = %d, want %d", got, tt.wantCalls)
			}
			counts := map[agent.EventType]int{}
			for _, ev := range events {
				counts[ev.Type]++
			}
			if counts[agent.StepStart] != tt.wantCalls || counts[agent.StepFinish] != tt.wantCalls || counts[agent.ToolOutput] != tt.wantCalls {
				t.Errorf("StepStart, StepFinish, ToolOutput counts = %d, %d, %d; want %d each",
					counts[agent.StepStart], counts[agent.StepFinish], counts[agent.ToolOutput], tt.wantCalls)
			}
			last := events[len(events)-1]
			if last.Type != agent.Finish || last.Finish != model.FinishToolCalls || counts[agent.Finish] != 1 {
				t.Errorf("last event = %+v (%d Finish events), want one Finish with reason tool-calls", last, counts[agent.Finish])
			}
		})
	}
}

func TestRunModelError(t *testing.T) {
	errProvider := errors.New("provider reset the connection")
	rec := &recorder{}
	cfg := agent.Config{
		Model: rec.wrap(playback(
			[]item{
				{ev: model.Event{Type: model.EventToolCall, ToolCallID: "c1", ToolName: "current_time", Input: json.RawMessage(`{}`)}},
				{ev: model.Event{Type: model.EventFinish, Finish: model.FinishToolCalls}},
			},
			[]item{
				{ev: model.Event{Type: model.EventTextDelta, Text: "It is "}},
				{err: errProvider},
				{ev: model.Event{Type: model.EventTextDelta, Text: "never seen"}},
			},
		)),
		Tools: newSet(t, currentTime()),
		Save:  rec.save,
	}

	events, errs, errAt := run(cfg, userMsg("hi"))

	if len(errs) != 1 || !errors.Is(errs[0], errProvider) {
		t.Fatalf("errors = %v, want exactly one wrapping %v", errs, errProvider)
	}
	if errAt != len(events) {
		t.Errorf("error came after event %d of %d, want it last", errAt, len(events))
	}
	want := []agent.EventType{
		agent.StepStart, agent.ToolInputAvailable, agent.ToolOutput, agent.StepFinish,
		agent.StepStart, agent.TextStart, agent.TextDelta,
	}
	if diff := cmp.Diff(want, types(events)); diff != "" {
		t.Errorf("event types (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"model", "save", "model"}, rec.log); diff != "" {
		t.Errorf("model calls and saves (-want +got):\n%s", diff)
	}
}

func TestRunModelErrorFirstStep(t *testing.T) {
	rec := &recorder{}
	cfg := agent.Config{Model: rec.wrap(scripted(t, `[{"error":"model overloaded"}]`)), Save: rec.save}
	events, errs, _ := run(cfg, userMsg("hi"))
	if len(errs) != 1 || errs[0].Error() != "model overloaded" {
		t.Fatalf("errors = %v, want exactly one: model overloaded", errs)
	}
	if diff := cmp.Diff([]agent.EventType{agent.StepStart}, types(events)); diff != "" {
		t.Errorf("event types (-want +got):\n%s", diff)
	}
	if len(rec.saved) != 0 {
		t.Errorf("saved %v, want nothing", rec.saved)
	}
}

func TestRunSaveError(t *testing.T) {
	errStore := errors.New("conditional check failed")
	rec := &recorder{saveErr: errStore}
	cfg := agent.Config{
		Model: rec.wrap(scripted(t, `[{"toolCalls":[{"name":"current_time"}]},{"text":"done"}]`)),
		Tools: newSet(t, currentTime()),
		Save:  rec.save,
	}

	events, errs, errAt := run(cfg, userMsg("hi"))

	if len(errs) != 1 || !errors.Is(errs[0], errStore) {
		t.Fatalf("errors = %v, want exactly one wrapping %v", errs, errStore)
	}
	if !strings.Contains(errs[0].Error(), "step 1") {
		t.Errorf("error = %q, want it to name step 1", errs[0])
	}
	if errAt != len(events) {
		t.Errorf("error came after event %d of %d, want it last", errAt, len(events))
	}
	want := []agent.EventType{agent.StepStart, agent.ToolInputStart, agent.ToolInputDelta, agent.ToolInputAvailable, agent.ToolOutput}
	if diff := cmp.Diff(want, types(events)); diff != "" {
		t.Errorf("event types (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"model", "save"}, rec.log); diff != "" {
		t.Errorf("model calls and saves (-want +got):\n%s", diff)
	}
}

func TestRunToolsRunInOrder(t *testing.T) {
	var log []string
	logging := func(name string) tool.Tool {
		return tool.Tool{Name: name, Execute: func(context.Context, json.RawMessage) (any, error) {
			log = append(log, name+" start")
			defer func() { log = append(log, name+" end") }()
			return name + " done", nil
		}}
	}
	rec := &recorder{}
	cfg := agent.Config{
		Model: rec.wrap(scripted(t, `[{"toolCalls":[{"name":"c"},{"name":"a"},{"name":"b"}]},{"text":"ok"}]`)),
		Tools: newSet(t, logging("a"), logging("b"), logging("c")),
		Save:  rec.save,
	}

	events := runOK(t, cfg, userMsg("hi"))

	if diff := cmp.Diff([]string{"c start", "c end", "a start", "a end", "b start", "b end"}, log); diff != "" {
		t.Errorf("tool runs (-want +got):\n%s", diff)
	}
	var got []string
	for _, ev := range events {
		switch ev.Type {
		case agent.ToolInputStart:
			got = append(got, "input-start "+ev.ToolCallID)
		case agent.ToolInputAvailable:
			got = append(got, "available "+ev.ToolCallID)
		case agent.ToolOutput:
			got = append(got, "output "+ev.ToolCallID+" "+string(ev.Output))
		}
	}
	want := []string{
		"input-start call_1_1", "input-start call_1_2", "input-start call_1_3",
		`available call_1_1`, `output call_1_1 "c done"`,
		`available call_1_2`, `output call_1_2 "a done"`,
		`available call_1_3`, `output call_1_3 "b done"`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tool events (-want +got):\n%s", diff)
	}
	wantSaved := []model.Message{
		{Role: model.RoleAssistant, Parts: []model.Part{
			{Type: model.PartToolCall, ToolCallID: "call_1_1", ToolName: "c", Input: json.RawMessage(`{}`)},
			{Type: model.PartToolCall, ToolCallID: "call_1_2", ToolName: "a", Input: json.RawMessage(`{}`)},
			{Type: model.PartToolCall, ToolCallID: "call_1_3", ToolName: "b", Input: json.RawMessage(`{}`)},
		}, Usage: &model.Usage{InputTokens: 1}},
		{Role: model.RoleTool, Parts: []model.Part{
			{Type: model.PartToolResult, ToolCallID: "call_1_1", ToolName: "c", Output: json.RawMessage(`"c done"`)},
			{Type: model.PartToolResult, ToolCallID: "call_1_2", ToolName: "a", Output: json.RawMessage(`"a done"`)},
			{Type: model.PartToolResult, ToolCallID: "call_1_3", ToolName: "b", Output: json.RawMessage(`"b done"`)},
		}},
	}
	if len(rec.saved) == 0 {
		t.Fatal("nothing saved")
	}
	if diff := cmp.Diff(wantSaved, rec.saved[0]); diff != "" {
		t.Errorf("step 1 saved (-want +got):\n%s", diff)
	}
}

// Text parts get ids unique in the turn and close before a tool call starts streaming.
func TestRunTextParts(t *testing.T) {
	text := func(s string) item { return item{ev: model.Event{Type: model.EventTextDelta, Text: s}} }
	cfg := agent.Config{
		Model: playback(
			[]item{
				text("Let me "), text(""), text("check."),
				{ev: model.Event{Type: model.EventToolInputStart, ToolCallID: "c1", ToolName: "current_time"}},
				{ev: model.Event{Type: model.EventToolInputDelta, ToolCallID: "c1", Text: "{}"}},
				text("And the weather."),
				{ev: model.Event{Type: model.EventToolInputStart, ToolCallID: "c2", ToolName: "weather"}},
				{ev: model.Event{Type: model.EventToolInputDelta, ToolCallID: "c2", Text: `{"city":"Oslo"}`}},
				{ev: model.Event{Type: model.EventToolCall, ToolCallID: "c1", ToolName: "current_time", Input: json.RawMessage(`{}`)}},
				{ev: model.Event{Type: model.EventToolCall, ToolCallID: "c2", ToolName: "weather", Input: json.RawMessage(`{"city":"Oslo"}`)}},
				text("Done."),
			},
			[]item{text("It is "), text("noon.")},
		),
		Tools: newSet(t, currentTime(), weather()),
	}

	events := runOK(t, cfg, userMsg("hi"))

	var got []string
	for _, ev := range events {
		switch ev.Type {
		case agent.TextStart:
			got = append(got, "text-start "+ev.ID)
		case agent.TextDelta:
			got = append(got, "text-delta "+ev.ID+" "+ev.Text)
		case agent.TextEnd:
			got = append(got, "text-end "+ev.ID)
		case agent.ToolInputStart:
			got = append(got, "tool-input-start "+ev.ToolCallID)
		case agent.ToolInputDelta:
			got = append(got, "tool-input-delta "+ev.ToolCallID)
		}
	}
	want := []string{
		"text-start text-1-1", "text-delta text-1-1 Let me ", "text-delta text-1-1 check.", "text-end text-1-1",
		"tool-input-start c1", "tool-input-delta c1",
		"text-start text-1-2", "text-delta text-1-2 And the weather.", "text-end text-1-2",
		"tool-input-start c2", "tool-input-delta c2",
		"text-start text-1-3", "text-delta text-1-3 Done.", "text-end text-1-3",
		"text-start text-2-1", "text-delta text-2-1 It is ", "text-delta text-2-1 noon.", "text-end text-2-1",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("text and tool input events (-want +got):\n%s", diff)
	}

	// The same properties, checked independently of the exact sequence.
	seen := map[string]bool{}
	open := ""
	for i, ev := range events {
		switch ev.Type {
		case agent.TextStart:
			if seen[ev.ID] {
				t.Errorf("event %d: text id %q reused", i, ev.ID)
			}
			seen[ev.ID], open = true, ev.ID
		case agent.TextEnd:
			open = ""
		case agent.ToolInputStart, agent.StepFinish:
			if open != "" {
				t.Errorf("event %d (%v) while text %q is open", i, ev.Type, open)
			}
		}
	}
}

// Breaking out of the range at any event stops the loop: no panic from a yield after the
// consumer left, no further model calls, tool runs or saves.
func TestRunConsumerBreaks(t *testing.T) {
	total := len(runOK(t, breakConfig(t, &recorder{}, new(int)), userMsg("hi")))
	for stop := 1; stop <= total; stop++ {
		t.Run(fmt.Sprintf("after %d of %d events", stop, total), func(t *testing.T) {
			rec, runs := &recorder{}, new(int)
			var seen []agent.Event
			for ev, err := range agent.Run(context.Background(), breakConfig(t, rec, runs), []model.Message{userMsg("hi")}) {
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				seen = append(seen, ev)
				if len(seen) == stop {
					break
				}
			}
			if len(seen) != stop {
				t.Fatalf("saw %d events, want %d", len(seen), stop)
			}
			counts := map[agent.EventType]int{}
			for _, ev := range seen {
				counts[ev.Type]++
			}
			// A model call follows its StepStart; a tool run follows its ToolInputAvailable.
			wantCalls := counts[agent.StepStart]
			if seen[stop-1].Type == agent.StepStart {
				wantCalls--
			}
			if got := rec.modelCalls(); got != wantCalls {
				t.Errorf("model calls = %d, want %d", got, wantCalls)
			}
			wantRuns := counts[agent.ToolInputAvailable]
			if seen[stop-1].Type == agent.ToolInputAvailable {
				wantRuns--
			}
			if *runs != wantRuns {
				t.Errorf("tool runs = %d, want %d", *runs, wantRuns)
			}
			if got, want := len(rec.saved), counts[agent.StepFinish]; got != want {
				t.Errorf("saves = %d, want %d (one per finished step)", got, want)
			}
		})
	}
}

func breakConfig(t *testing.T, rec *recorder, runs *int) agent.Config {
	counted := tool.Tool{Name: "current_time", Execute: func(context.Context, json.RawMessage) (any, error) {
		*runs++
		return fixedTime, nil
	}}
	return agent.Config{
		Model: rec.wrap(scripted(t, `[{"text":"Checking the time.","toolCalls":[{"name":"current_time"},{"name":"current_time"}]},{"text":"It is {{toolResults}}"}]`)),
		Tools: newSet(t, counted),
		Save:  rec.save,
	}
}

func TestRunPassesContextToModelAndTools(t *testing.T) {
	type key struct{}
	var modelSaw, toolSaw, saveSaw any
	set := newSet(t, tool.Tool{Name: "t", Execute: func(ctx context.Context, _ json.RawMessage) (any, error) {
		toolSaw = ctx.Value(key{})
		return nil, nil
	}})
	inner := scripted(t, `[{"toolCalls":[{"name":"t"}]},{"text":"ok"}]`)
	cfg := agent.Config{
		Model: modelFunc(func(ctx context.Context, req *model.Request) iter.Seq2[model.Event, error] {
			modelSaw = ctx.Value(key{})
			return inner.Stream(ctx, req)
		}),
		Tools: set,
		Save: func(ctx context.Context, _ []model.Message) error {
			saveSaw = ctx.Value(key{})
			return nil
		},
	}
	ctx := context.WithValue(context.Background(), key{}, "turn-7")
	for _, err := range agent.Run(ctx, cfg, []model.Message{userMsg("hi")}) {
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	}
	if diff := cmp.Diff([]any{"turn-7", "turn-7", "turn-7"}, []any{modelSaw, toolSaw, saveSaw}); diff != "" {
		t.Errorf("context values seen by model, tool, save (-want +got):\n%s", diff)
	}
}
