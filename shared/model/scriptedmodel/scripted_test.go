package scriptedmodel_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/modeltest"
	"github.com/agentharness/harness/shared/model/scriptedmodel"
	"github.com/google/go-cmp/cmp"
)

func assistantText(text string) model.Message {
	return model.Message{Role: model.RoleAssistant, Parts: []model.Part{{Type: model.PartText, Text: text}}}
}

func assistantCall(id, name string) model.Message {
	return model.Message{Role: model.RoleAssistant, Parts: []model.Part{{Type: model.PartToolCall, ToolCallID: id, ToolName: name, Input: json.RawMessage(`{}`)}}}
}

func toolResults(outputs ...string) model.Message {
	m := model.Message{Role: model.RoleTool}
	for i, out := range outputs {
		m.Parts = append(m.Parts, model.Part{Type: model.PartToolResult, ToolCallID: "call_" + string(rune('a'+i)), ToolName: "t", Output: json.RawMessage(out)})
	}
	return m
}

func mustNew(t *testing.T, script string) *scriptedmodel.Model {
	t.Helper()
	var steps []scriptedmodel.Step
	if err := json.Unmarshal([]byte(script), &steps); err != nil {
		t.Fatalf("decoding script: %v", err)
	}
	m, err := scriptedmodel.New(steps)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

func textEvents(pieces ...string) []model.Event {
	var evs []model.Event
	for _, p := range pieces {
		evs = append(evs, model.Event{Type: model.EventTextDelta, Text: p})
	}
	return evs
}

func callEvents(id, name, input string) []model.Event {
	return []model.Event{
		{Type: model.EventToolInputStart, ToolCallID: id, ToolName: name},
		{Type: model.EventToolInputDelta, ToolCallID: id, Text: input},
		{Type: model.EventToolCall, ToolCallID: id, ToolName: name, Input: json.RawMessage(input)},
	}
}

func finish(reason model.FinishReason, in, out int) model.Event {
	return model.Event{Type: model.EventFinish, Finish: reason, Usage: model.Usage{InputTokens: in, OutputTokens: out}}
}

func concat(parts ...[]model.Event) []model.Event {
	var out []model.Event
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

const timeScript = `[{"toolCalls":[{"name":"current_time","input":{}}]},{"text":"It is {{toolResults}}"}]`

func TestStream(t *testing.T) {
	tests := []struct {
		name   string
		script string
		msgs   []model.Message
		want   []model.Event
	}{
		{
			name:   "first call answers step 0",
			script: timeScript,
			msgs:   []model.Message{modeltest.User("What time is it?")},
			want:   concat(callEvents("call_1_1", "current_time", `{}`), []model.Event{finish(model.FinishToolCalls, 1, 0)}),
		},
		{
			name:   "second call answers step 1 with the tool results",
			script: timeScript,
			msgs:   []model.Message{modeltest.User("What time is it?"), assistantCall("call_1_1", "current_time"), toolResults(`"2026-01-01T00:00:00Z"`)},
			want:   concat(textEvents("It", " is", ` ["2026-01-01T00:00:00Z"]`), []model.Event{finish(model.FinishStop, 3, 3)}),
		},
		{
			name:   "past the end answers the last step's text",
			script: timeScript,
			msgs: []model.Message{
				modeltest.User("What time is it?"), assistantCall("call_1_1", "current_time"), toolResults(`"2026-01-01T00:00:00Z"`),
				assistantText(`It is ["2026-01-01T00:00:00Z"]`),
			},
			want: concat(textEvents("It", " is", ` ["2026-01-01T00:00:00Z"]`), []model.Event{finish(model.FinishStop, 4, 3)}),
		},
		{
			name:   "past the end drops the last step's tool calls",
			script: `[{"text":"Checking.","toolCalls":[{"name":"current_time"}]}]`,
			msgs:   []model.Message{modeltest.User("Time?"), assistantCall("call_1_1", "current_time"), toolResults(`"noon"`)},
			want:   concat(textEvents("Checking."), []model.Event{finish(model.FinishStop, 3, 1)}),
		},
		{
			name:   "a new user message restarts at step 0",
			script: timeScript,
			msgs: []model.Message{
				modeltest.User("What time is it?"), assistantCall("call_1_1", "current_time"), toolResults(`"2026-01-01T00:00:00Z"`),
				assistantText(`It is ["2026-01-01T00:00:00Z"]`), modeltest.User("And now?"),
			},
			want: concat(callEvents("call_5_1", "current_time", `{}`), []model.Event{finish(model.FinishToolCalls, 5, 0)}),
		},
		{
			name:   "toolResults is [] without results",
			script: `[{"text":"Results: {{toolResults}}"}]`,
			msgs:   []model.Message{modeltest.User("hi")},
			want:   concat(textEvents("Results:", " []"), []model.Event{finish(model.FinishStop, 1, 2)}),
		},
		{
			name:   "toolResults ignores results before the latest user message",
			script: `[{"toolCalls":[{"name":"t"}]},{"text":"{{toolResults}}"}]`,
			msgs: []model.Message{
				modeltest.User("one"), assistantCall("call_1_1", "t"), toolResults(`"old"`), assistantText("done"),
				modeltest.User("two"), assistantCall("call_5_1", "t"), toolResults(`"new"`),
			},
			want: concat(textEvents(`["new"]`), []model.Event{finish(model.FinishStop, 7, 1)}),
		},
		{
			name:   "toolResults collects every result since the latest user message",
			script: `[{"toolCalls":[{"name":"t"},{"name":"t"}]},{"toolCalls":[{"name":"t"}]},{"text":"{{toolResults}}"}]`,
			msgs: []model.Message{
				modeltest.User("go"), assistantCall("call_1_1", "t"), toolResults(`{"n":1}`, `{"n":2}`),
				assistantCall("call_3_1", "t"), toolResults(`3`),
			},
			want: concat(textEvents(`[{"n":1},{"n":2},3]`), []model.Event{finish(model.FinishStop, 5, 1)}),
		},
		{
			name:   "text then several tool calls with their inputs",
			script: `[{"text":"Let me look.","toolCalls":[{"name":"weather","input":{"city":"Oslo"}},{"name":"current_time"}]}]`,
			msgs:   []model.Message{modeltest.User("hi")},
			want: concat(
				textEvents("Let", " me", " look."),
				callEvents("call_1_1", "weather", `{"city":"Oslo"}`),
				callEvents("call_1_2", "current_time", `{}`),
				[]model.Event{finish(model.FinishToolCalls, 1, 3)},
			),
		},
		{
			name:   "an empty history answers step 0",
			script: `[{"text":"hello"}]`,
			msgs:   nil,
			want:   concat(textEvents("hello"), []model.Event{finish(model.FinishStop, 0, 1)}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := mustNew(t, tt.script)
			got, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: tt.msgs})
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStreamError(t *testing.T) {
	tests := []struct {
		name   string
		script string
		msgs   []model.Message
		want   string
	}{
		{
			name:   "error at step 0",
			script: `[{"error":"provider overloaded"}]`,
			msgs:   []model.Message{modeltest.User("hi")},
			want:   "provider overloaded",
		},
		{
			name:   "error after a tool step",
			script: `[{"toolCalls":[{"name":"t"}]},{"error":"rate limited"}]`,
			msgs:   []model.Message{modeltest.User("hi"), assistantCall("call_1_1", "t"), toolResults(`1`)},
			want:   "rate limited",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := mustNew(t, tt.script)
			events, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: tt.msgs})
			if err == nil || err.Error() != tt.want {
				t.Fatalf("Stream error = %v, want %q", err, tt.want)
			}
			if errors.Is(err, model.ErrContextLength) {
				t.Errorf("errors.Is(%v, model.ErrContextLength) = true, want false", err)
			}
			if len(events) != 0 {
				t.Errorf("events before the error = %v, want none", events)
			}
		})
	}
}

// {"error":"context_length"} fails the call as a provider refuses a conversation longer than its
// model's context window, so the harness's answer to that can be scripted.
func TestStreamContextLengthError(t *testing.T) {
	m := mustNew(t, `[{"toolCalls":[{"name":"t"}]},{"error":"context_length"}]`)

	events, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: []model.Message{modeltest.User("hi"), assistantCall("call_1_1", "t"), toolResults(`1`)}})

	if len(events) != 0 {
		t.Errorf("events before the error = %v, want none", events)
	}
	modeltest.ContextLengthError(t, err, "scripted")
}

func TestStreamCanceledContext(t *testing.T) {
	m := mustNew(t, `[{"text":"hello"}]`)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var events []model.Event
	var gotErr error
	for ev, err := range m.Stream(ctx, &model.Request{Messages: []model.Message{modeltest.User("hi")}}) {
		if err != nil {
			gotErr = err
			break
		}
		events = append(events, ev)
	}
	if gotErr != context.Canceled {
		t.Errorf("Stream error = %v, want %v", gotErr, context.Canceled)
	}
	if len(events) != 0 {
		t.Errorf("events = %v, want none", events)
	}
}

func TestStreamStopsWhenTheConsumerBreaks(t *testing.T) {
	m := mustNew(t, `[{"text":"one two three","toolCalls":[{"name":"a"},{"name":"b"}]}]`)
	modeltest.CheckBreaks(t, m, &model.Request{Messages: []model.Message{modeltest.User("hi")}}, 9)
}

func TestNewRejects(t *testing.T) {
	tests := []struct {
		name   string
		script []scriptedmodel.Step
		want   string
	}{
		{name: "nil script", script: nil, want: "at least one step"},
		{name: "empty script", script: []scriptedmodel.Step{}, want: "at least one step"},
		{
			name:   "empty tool name",
			script: []scriptedmodel.Step{{Text: "ok"}, {ToolCalls: []scriptedmodel.ToolCall{{Name: "a"}, {Name: ""}}}},
			want:   "script[1].toolCalls[1].name is empty",
		},
		{
			name:   "invalid JSON input",
			script: []scriptedmodel.Step{{ToolCalls: []scriptedmodel.ToolCall{{Name: "a", Input: json.RawMessage(`{"x":`)}}}},
			want:   "script[0].toolCalls[0].input is not valid JSON",
		},
		{name: "negative delay", script: []scriptedmodel.Step{{Text: "ok"}, {DelayMs: -1}}, want: "script[1].delayMs must be between 0 and"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := scriptedmodel.New(tt.script)
			if err == nil {
				t.Fatalf("New() = %v, nil; want an error containing %q", m, tt.want)
			}
			if m != nil {
				t.Errorf("New() model = %v, want nil on error", m)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New() error = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

// The config shape in the package doc is a public contract: it must decode and play.
func TestConfigContract(t *testing.T) {
	const raw = `{"provider":"scripted","script":[{"toolCalls":[{"name":"current_time","input":{}}]},{"text":"It is {{toolResults}}"}]}`
	var cfg scriptedmodel.Config
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("decoding config: %v", err)
	}
	want := scriptedmodel.Config{
		Provider: "scripted",
		Script: []scriptedmodel.Step{
			{ToolCalls: []scriptedmodel.ToolCall{{Name: "current_time", Input: json.RawMessage(`{}`)}}},
			{Text: "It is {{toolResults}}"},
		},
	}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	if _, err := scriptedmodel.New(cfg.Script); err != nil {
		t.Errorf("New(config script): %v", err)
	}
}

// A step's delayMs holds the answer back, and a canceled context cuts the wait short.
func TestStreamDelay(t *testing.T) {
	m := mustNew(t, `[{"text":"late","delayMs":60000}]`)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	done := make(chan error, 1)
	go func() {
		var gotErr error
		for _, err := range m.Stream(ctx, &model.Request{Messages: []model.Message{modeltest.User("hi")}}) {
			if err != nil {
				gotErr = err
				break
			}
			t.Error("an event arrived before the delay ended")
		}
		done <- gotErr
	}()
	select {
	case err := <-done:
		if err != context.Canceled {
			t.Errorf("Stream error = %v, want %v", err, context.Canceled)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a canceled context did not cut the delay short")
	}

	fast := mustNew(t, `[{"text":"soon","delayMs":30}]`)
	events, err := modeltest.Collect(t.Context(), fast, &model.Request{Messages: []model.Message{modeltest.User("hi")}})
	if err != nil || len(events) == 0 || events[0].Text != "soon" {
		t.Errorf("after the delay: events %v, err %v; want the text", events, err)
	}
}

// A step's stallMs holds the answer after its text: the text streams at once, and a canceled
// context then ends the call with its error instead of a finish.
func TestStreamStall(t *testing.T) {
	m := mustNew(t, `[{"text":"so far","stallMs":60000}]`)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var text string
	go func() {
		var gotErr error
		for ev, err := range m.Stream(ctx, &model.Request{Messages: []model.Message{modeltest.User("hi")}}) {
			if err != nil {
				gotErr = err
				break
			}
			switch ev.Type {
			case model.EventTextDelta:
				text += ev.Text
				if text == "so far" {
					cancel()
				}
			case model.EventFinish:
				t.Error("the call finished though its context was canceled during the stall")
			}
		}
		done <- gotErr
	}()
	select {
	case err := <-done:
		if err != context.Canceled || text != "so far" {
			t.Errorf("Stream: text %q, error %v; want the text, then %v", text, err, context.Canceled)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a canceled context did not cut the stall short")
	}
	if _, err := scriptedmodel.New([]scriptedmodel.Step{{Text: "x", StallMs: -1}}); err == nil || !strings.Contains(err.Error(), "script[0].stallMs must be between 0 and") {
		t.Errorf("New with a negative stallMs = %v, want it refused naming script[0].stallMs", err)
	}
}

// A step's reasoning streams before its answer, signed; the next step's call goes through only
// when the first step's reasoning comes back as it was signed.
func TestStreamReasoning(t *testing.T) {
	m := mustNew(t, `[{"reasoning":"Look it up first.","toolCalls":[{"name":"t"}]},{"text":"Done."}]`)
	events, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: []model.Message{modeltest.User("go")}})
	if err != nil {
		t.Fatal(err)
	}
	var reasoning string
	var end model.Event
	for _, ev := range events {
		switch ev.Type {
		case model.EventReasoningDelta:
			reasoning += ev.Text
		case model.EventReasoningEnd:
			end = ev
		}
	}
	if reasoning != "Look it up first." || end.Signature == "" || end.Provider != scriptedmodel.Name {
		t.Fatalf("reasoning %q ended by %+v, want the step's reasoning signed by the scripted provider", reasoning, end)
	}
	if last := events[len(events)-1]; last.Usage.OutputTokenDetails.ReasoningTokens != 4 {
		t.Errorf("usage %+v, want the reasoning's four chunks counted as reasoning tokens", last.Usage)
	}

	kept := model.Part{Type: model.PartReasoning, Text: reasoning, Signature: end.Signature, Provider: end.Provider}
	step := func(r model.Part) []model.Message {
		call := assistantCall("call_a", "t")
		call.Parts = append([]model.Part{r}, call.Parts...)
		return []model.Message{modeltest.User("go"), call, toolResults(`"ok"`)}
	}
	if _, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: step(kept)}); err != nil {
		t.Errorf("the next step with the reasoning kept: %v", err)
	}
	for name, r := range map[string]model.Part{
		"without a signature":   {Type: model.PartReasoning, Text: reasoning, Provider: end.Provider},
		"with another's":        {Type: model.PartReasoning, Text: reasoning, Signature: "forged", Provider: end.Provider},
		"with its text changed": {Type: model.PartReasoning, Text: "Something else.", Signature: end.Signature, Provider: end.Provider},
		"dropped":               {Type: model.PartText, Text: ""},
	} {
		if _, err := modeltest.Collect(t.Context(), m, &model.Request{Messages: step(r)}); err == nil || !strings.Contains(err.Error(), "without its reasoning") {
			t.Errorf("the next step with the reasoning %s: err %v, want the refusal", name, err)
		}
	}
}
