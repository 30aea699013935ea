package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/tool"
)

// A call of an async tool goes to Config.Async, whose placeholder is the result the model sees;
// the tool's own execute is left to the coordinator. Inline tools still run themselves.
func TestAsyncCallsGoToTheCoordinator(t *testing.T) {
	ran := 0
	slow := tool.Tool{Name: "slow", Async: "same-invocation", Execute: func(context.Context, json.RawMessage) (any, error) {
		ran++
		return "done", nil
	}}
	var got []string
	cfg := agent.Config{
		Model: scripted(t, `[{"toolCalls":[{"name":"slow"},{"name":"current_time"}]},{"text":"ok {{toolResults}}"}]`),
		Tools: newSet(t, slow, currentTime()),
		Async: func(ctx context.Context, toolCallID string, call *tool.Call) (json.RawMessage, error) {
			got = append(got, toolCallID+"/"+call.Name()+"/"+call.Async())
			return json.RawMessage(`{"resultId":"r1","status":"running"}`), nil
		},
	}
	events := runOK(t, cfg, userMsg("go"))
	if len(got) != 1 || !strings.HasSuffix(got[0], "/slow/same-invocation") {
		t.Fatalf("Async saw %v, want one call of slow", got)
	}
	if ran != 0 {
		t.Errorf("the async tool's execute ran %d times in the loop, want 0 (the coordinator runs it)", ran)
	}
	var outputs []string
	for _, ev := range events {
		if ev.Type == agent.ToolOutput {
			outputs = append(outputs, string(ev.Output))
		}
	}
	if len(outputs) != 2 || outputs[0] != `{"resultId":"r1","status":"running"}` {
		t.Errorf("tool outputs = %v, want the placeholder first, then current_time's result", outputs)
	}
}

// Without a coordinator an async tool runs inline like any other.
func TestAsyncToolWithoutCoordinatorRunsInline(t *testing.T) {
	slow := tool.Tool{Name: "slow", Async: "same-invocation", Execute: func(context.Context, json.RawMessage) (any, error) { return "inline", nil }}
	cfg := agent.Config{Model: scripted(t, `[{"toolCalls":[{"name":"slow"}]},{"text":"{{toolResults}}"}]`), Tools: newSet(t, slow)}
	events := runOK(t, cfg, userMsg("go"))
	last := events[len(events)-1]
	if last.Type != agent.Finish {
		t.Fatalf("last event %v, want Finish", last.Type)
	}
	found := false
	for _, ev := range events {
		if ev.Type == agent.ToolOutput && string(ev.Output) == `"inline"` {
			found = true
		}
	}
	if !found {
		t.Error("no inline result of the async tool")
	}
}

// Continue goes on numbering the turn's steps after async results were brought back, so text
// part ids stay unique in the client's message, and MaxSteps bounds the whole turn.
func TestContinueNumbersStepsAcrossAsyncResults(t *testing.T) {
	history := []model.Message{
		userMsg("go"),
		{Role: model.RoleAssistant, Parts: []model.Part{{Type: model.PartToolCall, ToolCallID: "c1", ToolName: "slow", Input: json.RawMessage(`{}`)}}},
		{Role: model.RoleTool, Parts: []model.Part{{Type: model.PartToolResult, ToolCallID: "c1", ToolName: "slow", Output: json.RawMessage(`{"resultId":"r1","status":"running"}`)}}},
		{Role: model.RoleAssistant, Parts: []model.Part{{Type: model.PartText, Text: "Started."}}},
		{Role: model.RoleUser, Kind: model.KindAsyncResults, Parts: []model.Part{{Type: model.PartText, Text: `{"asyncToolResults":[{"resultId":"r1","toolCallId":"c1","toolName":"slow","status":"completed","response":{"echo":"hi"}}]}`}}},
	}
	cfg := agent.Config{Model: scripted(t, `[{"toolCalls":[{"name":"slow"}]},{"text":"Started."},{"text":"Got {{toolResults}}"}]`)}
	var texts []string
	var ids []string
	for ev, err := range agent.Continue(context.Background(), cfg, history) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case agent.TextStart:
			ids = append(ids, ev.ID)
		case agent.TextDelta:
			texts = append(texts, ev.Text)
		}
	}
	if len(ids) != 1 || ids[0] != "text-3-1" {
		t.Errorf("text part ids = %v, want [text-3-1] (the turn's third step)", ids)
	}
	if got := strings.Join(texts, ""); got != `Got [{"echo":"hi"}]` {
		t.Errorf("text = %q, want the scripted third step with the async result in its placeholder's place", got)
	}

	cfg.MaxSteps = 2
	steps := 0
	for ev, err := range agent.Continue(context.Background(), cfg, history) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == agent.StepStart {
			steps++
		}
	}
	if steps != 1 {
		t.Errorf("with maxSteps 2 already used, Continue ran %d steps, want 1 (it always answers once)", steps)
	}
}

// With WaitOnAsync the pass ends after the step that started async calls: the model is not
// called again over placeholders. Without it, the loop goes on as before.
func TestWaitOnAsyncEndsThePassAfterTheStep(t *testing.T) {
	for _, wait := range []bool{true, false} {
		slow := tool.Tool{Name: "slow", Async: "external-dispatch", Execute: func(context.Context, json.RawMessage) (any, error) { return nil, nil }}
		cfg := agent.Config{
			Model: scripted(t, `[{"toolCalls":[{"name":"slow"}]},{"text":"answered over {{toolResults}}"}]`),
			Tools: newSet(t, slow),
			Async: func(context.Context, string, *tool.Call) (json.RawMessage, error) {
				return json.RawMessage(`{"resultId":"r1","status":"running"}`), nil
			},
			WaitOnAsync: wait,
		}
		events := runOK(t, cfg, userMsg("go"))
		var texts, steps int
		var fin agent.Event
		for _, ev := range events {
			switch ev.Type {
			case agent.TextDelta:
				texts++
			case agent.StepStart:
				steps++
			case agent.Finish:
				fin = ev
			}
		}
		if wait && (steps != 1 || texts != 0 || fin.Finish != model.FinishToolCalls) {
			t.Errorf("WaitOnAsync: %d steps, %d text deltas, finish %q; want one step, no text, tool-calls", steps, texts, fin.Finish)
		}
		if !wait && (steps != 2 || texts == 0) {
			t.Errorf("without WaitOnAsync: %d steps, %d text deltas; want the model to answer in a second step", steps, texts)
		}
	}
}

// An inline tool that hands its work over (tool.Deferred) gives the model its placeholder as
// the result and ends the pass after the step, as an async call under WaitOnAsync does; the
// step's other calls still run.
func TestADeferredCallEndsThePassAfterTheStep(t *testing.T) {
	placeholder := json.RawMessage(`{"resultId":"r1","status":"running"}`)
	handed := tool.Tool{Name: "handed", Execute: func(context.Context, json.RawMessage) (any, error) {
		return nil, &tool.Deferred{Output: placeholder}
	}}
	ran := false
	other := tool.Tool{Name: "other", Execute: func(context.Context, json.RawMessage) (any, error) { ran = true; return "ok", nil }}
	cfg := agent.Config{
		Model: scripted(t, `[{"toolCalls":[{"name":"handed"},{"name":"other"}]},{"text":"answered over {{toolResults}}"}]`),
		Tools: newSet(t, handed, other),
	}
	var steps int
	var out json.RawMessage
	var fin agent.Event
	for _, ev := range runOK(t, cfg, userMsg("go")) {
		switch {
		case ev.Type == agent.StepStart:
			steps++
		case ev.Type == agent.ToolOutput && ev.ToolName == "handed":
			out = ev.Output
		case ev.Type == agent.ToolOutputError:
			t.Errorf("a deferred call was reported as failed: %s", ev.ErrorText)
		case ev.Type == agent.Finish:
			fin = ev
		}
	}
	if steps != 1 || fin.Finish != model.FinishToolCalls || string(out) != string(placeholder) || !ran {
		t.Errorf("%d steps, finish %q, output %s, other ran %v; want one step ending in tool-calls, the placeholder, the other call run", steps, fin.Finish, out, ran)
	}
}
