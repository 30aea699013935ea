package prompttools_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/tool/prompttools"
	"github.com/agentharness/harness/shared/turn"
)

const (
	callerSystem = "You delegate to prompts."
	promptSystem = "You summarise what you are given."
	// summarizeScript calls a tool that runs and one that does not exist, then answers.
	summarizeScript = `{"provider":"scripted","script":[
		{"text":"Checking. ","toolCalls":[{"name":"current_time"},{"name":"nope"}]},
		{"text":"Summary ready."}]}`
)

// callerConfig is an agent that calls the prompt summarize once with input, then answers with
// what it got back.
func callerConfig(prompt, input string) string {
	return `{"name":"caller","system":"` + callerSystem + `","model":{"provider":"scripted","script":[
		{"toolCalls":[{"name":"summarize","input":` + input + `}]},
		{"text":"Heard: {{toolResults}}"}]},
		"prompts":{"summarize":` + prompt + `}}`
}

// Each SubpromptConfig flag decides its part of the result: the final text, the nested tool
// calls with their results, the errors they met. The nested loop runs on its own system prompt
// with the call's message as its first user message, its messages are kept in the conversation
// marked as the call's, between the call and its result, the caller's model never sees them,
// and its tokens count toward the turn.
func TestPromptToolFlagsShapeItsResult(t *testing.T) {
	e := testenv.NewTurns(t, nil)
	for i, tt := range []struct {
		flags string
		want  []string // the result's keys
	}{
		{``, []string{"errors", "text"}},
		{`"includeErrors":false,`, []string{"text"}},
		{`"includeTextResponse":false,"includeToolCalls":true,"includeErrors":false,`, []string{"toolCalls"}},
		{`"includeToolCalls":true,`, []string{"errors", "text", "toolCalls"}},
	} {
		id := "agent" + string(rune('a'+i))
		conv := "conv_flags_" + id
		e.Agent(id, callerConfig(`{`+tt.flags+`"system":"`+promptSystem+`","model":`+summarizeScript+`,"tools":{"current_time":{}}}`, `{"message":"the week"}`))
		before := len(e.RequestsOf(callerSystem))
		o, events := e.Say(conv, id, "sum up the week")
		if o.Status != turn.StatusCompleted {
			t.Fatalf("%s: the turn ended %+v", tt.flags, o)
		}
		msgs := e.History(conv)
		r := testenv.ResultOf(t, msgs, "summarize")
		var got map[string]json.RawMessage
		if err := json.Unmarshal(r.Output, &got); err != nil || r.IsError {
			t.Fatalf("%s: result %s (error %v)", tt.flags, r.Output, r.IsError)
		}
		keys := make([]string, 0, len(got))
		for k := range got {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, tt.want) {
			t.Errorf("%s: the result holds %v (%s), want %v", tt.flags, keys, r.Output, tt.want)
		}
		if text, ok := got["text"]; ok && string(text) != `"Summary ready."` {
			t.Errorf("%s: text %s, want the nested loop's last answer", tt.flags, text)
		}
		if errs, ok := got["errors"]; ok && (!strings.Contains(string(errs), `"toolName":"nope"`) || !strings.Contains(string(errs), "no tool named")) {
			t.Errorf("%s: errors %s, want the unknown tool's", tt.flags, errs)
		}
		if calls, ok := got["toolCalls"]; ok {
			var cs []map[string]any
			_ = json.Unmarshal(calls, &cs)
			if len(cs) != 2 || cs[0]["toolName"] != "current_time" || cs[0]["output"] == nil || cs[1]["toolName"] != "nope" || cs[1]["error"] == nil {
				t.Errorf("%s: toolCalls %s, want current_time with its output and nope with its error", tt.flags, calls)
			}
		}

		// The record: user, the call, the nested loop (its message, two steps and their
		// results), the call's result, the answer.
		var roles []string
		callID := ""
		for _, m := range msgs {
			role := string(m.Role)
			if m.IsNested() {
				role = "nested-" + role
				if m.Nested == nil || m.Nested.ToolName != "summarize" || (callID != "" && m.Nested.ToolCallID != callID) {
					t.Errorf("%s: nested message %+v is not marked as the call's", tt.flags, m)
				}
			}
			for _, p := range m.Parts {
				if p.Type == model.PartToolCall && p.ToolName == "summarize" {
					callID = p.ToolCallID
				}
			}
			roles = append(roles, role)
		}
		want := []string{"user", "assistant", "nested-user", "nested-assistant", "nested-tool", "nested-assistant", "tool", "assistant"}
		if !slices.Equal(roles, want) {
			t.Errorf("%s: the conversation holds %v, want %v", tt.flags, roles, want)
		}

		// What each model was sent.
		nested := e.RequestsOf(promptSystem)[2*i:]
		if len(nested) < 2 || len(nested[0].Messages) != 1 || nested[0].Messages[0].Text() != "the week" {
			t.Fatalf("%s: the nested loop's first request %+v, want the call's message alone", tt.flags, nested)
		}
		caller := e.RequestsOf(callerSystem)[before:]
		if len(caller) != 2 || len(caller[1].Messages) != 3 {
			t.Fatalf("%s: the caller's requests %d, its second with %d messages; want 2, the second with user, call, result", tt.flags, len(caller), len(caller[1].Messages))
		}
		for _, m := range caller[1].Messages {
			if m.IsNested() || strings.Contains(m.Text(), "Checking.") {
				t.Errorf("%s: the caller's model was sent a nested message %+v", tt.flags, m)
			}
		}
		// Scripted usage counts a request's messages as input tokens: 1 + 3 for the caller,
		// 1 + 3 for the nested loop.
		if o.Usage.InputTokens != 8 {
			t.Errorf("%s: the turn used %d input tokens, want 8 (the caller's 4 and the nested loop's 4)", tt.flags, o.Usage.InputTokens)
		}

		// The caller's client is shown the nested work: started, each step, the end.
		var states []string
		for _, ev := range events {
			if ev.Kind == turn.PromptTool {
				p := ev.PromptTool
				if p.ToolCallID != callID || p.Prompt != "summarize" {
					t.Errorf("%s: progress %+v is not the call's", tt.flags, p)
				}
				states = append(states, p.State)
				if p.State == prompttools.Completed && (p.Step != 2 || p.Usage == nil || p.Usage.InputTokens != 4 || len(p.ToolCalls) != 2) {
					t.Errorf("%s: the last progress %+v, want 2 steps, 2 calls and the nested usage", tt.flags, p)
				}
			}
		}
		if want := []string{"running", "running", "running", "completed"}; !slices.Equal(states, want) {
			t.Errorf("%s: progress states %v, want %v", tt.flags, states, want)
		}
	}
}

// initUserMessageProperty picks the input property that becomes the nested loop's message; with
// an input schema of its own and none named, the whole input does. The caller's model is
// offered the prompt under its schema.
func TestPromptToolMapsItsInput(t *testing.T) {
	e := testenv.NewTurns(t, nil)
	schema := `{"type":"object","properties":{"topic":{"type":"string"},"depth":{"type":"integer"}},"required":["topic"]}`
	for _, tt := range []struct {
		id, mapping, want string
	}{
		{"topic", `"initUserMessageProperty":"topic",`, "tides"},
		{"whole", ``, `{"depth":2,"topic":"tides"}`}, // as the stored config spells it
	} {
		system := "Prompt " + tt.id
		e.Agent(tt.id, callerConfig(`{`+tt.mapping+`"system":"`+system+`","inputSchema":`+schema+`,"model":{"provider":"scripted","script":[{"text":"ok"}]}}`, `{"topic":"tides","depth":2}`))
		if o, _ := e.Say("conv_map_"+tt.id, tt.id, "go"); o.Status != turn.StatusCompleted {
			t.Fatalf("%s: the turn ended %+v", tt.id, o)
		}
		reqs := e.RequestsOf(system)
		if len(reqs) != 1 || len(reqs[0].Messages) != 1 || reqs[0].Messages[0].Role != model.RoleUser {
			t.Fatalf("%s: nested requests %+v, want one with the call's message", tt.id, reqs)
		}
		if got := reqs[0].Messages[0].Text(); got != tt.want {
			t.Errorf("%s: the nested loop's message is %q, want %q", tt.id, got, tt.want)
		}
	}
	first := e.RequestsOf(callerSystem)[0]
	i := slices.IndexFunc(first.Tools, func(s model.ToolSpec) bool { return s.Name == "summarize" })
	if i < 0 || !strings.Contains(string(first.Tools[i].InputSchema), `"depth"`) {
		t.Errorf("the caller's model is offered %+v, want summarize under its input schema", first.Tools)
	}
}

// A nested loop that fails is the call's error, which the caller's model sees and answers: the
// turn completes, and the nested loop's messages so far are kept.
func TestAFailingNestedPromptIsAToolError(t *testing.T) {
	e := testenv.NewTurns(t, nil)
	e.Agent("caller", callerConfig(`{"system":"`+promptSystem+`","model":{"provider":"scripted","script":[{"error":"upstream exploded"}]}}`, `{"message":"the week"}`))
	o, events := e.Say("conv_fail", "caller", "sum up the week")
	if o.Status != turn.StatusCompleted {
		t.Fatalf("the turn ended %+v, want completed: a nested failure is a tool error", o)
	}
	msgs := e.History("conv_fail")
	r := testenv.ResultOf(t, msgs, "summarize")
	if !r.IsError || !strings.Contains(string(r.Output), "prompt summarize failed: its model failed to answer") {
		t.Errorf("the call's result is %s (error %v), want the prompt's failure", r.Output, r.IsError)
	}
	if final := model.FinalText(msgs); !strings.Contains(final, "prompt summarize failed") {
		t.Errorf("the caller answered %q, want it to have seen the failure", final)
	}
	if !slices.ContainsFunc(msgs, func(m model.Message) bool { return m.IsNested() && m.Text() == "the week" }) {
		t.Errorf("the nested loop's message was not kept: %+v", msgs)
	}
	last := prompttools.Progress{}
	for _, ev := range events {
		if ev.Kind == turn.PromptTool {
			last = *ev.PromptTool
		}
	}
	if last.State != prompttools.Failed || last.Error == "" {
		t.Errorf("the last progress is %+v, want failed with its reason", last)
	}
}

// A prompt tool that needs approval is held like any tool: its nested loop runs only once the
// call is approved, within the request that approves it, and its tokens count there.
func TestAPromptToolNeedsApproval(t *testing.T) {
	e := testenv.NewTurns(t, nil)
	e.Agent("caller", callerConfig(`{"needsApproval":true,"system":"`+promptSystem+`","model":`+summarizeScript+`,"tools":{"current_time":{}}}`, `{"message":"the week"}`))
	for _, approved := range []bool{false, true} {
		conv := "conv_approve_" + map[bool]string{false: "deny", true: "allow"}[approved]
		before := len(e.RequestsOf(promptSystem))
		held, _ := e.Say(conv, "caller", "sum up the week")
		if held.Status != turn.StatusWaiting || len(held.PendingApprovals) != 1 || held.PendingApprovals[0].ToolName != "summarize" {
			t.Fatalf("the turn ended %+v, want it waiting for approval of summarize", held)
		}
		if n := len(e.RequestsOf(promptSystem)); n != before {
			t.Fatalf("the nested loop ran %d times before the call was decided", n-before)
		}
		o, _ := e.Run(conv, "caller", turn.Input{Decisions: []turn.Decision{{ApprovalID: held.PendingApprovals[0].ApprovalID, Approved: &approved}}})
		if o.Status != turn.StatusCompleted {
			t.Fatalf("approved=%v: the resumed turn ended %+v", approved, o)
		}
		r := testenv.ResultOf(t, e.History(conv), "summarize")
		ran := len(e.RequestsOf(promptSystem)) - before
		switch {
		case approved && (ran != 2 || r.IsError || !strings.Contains(string(r.Output), "Summary ready.")):
			t.Errorf("approved: the nested loop made %d requests and the result is %s, want 2 and its answer", ran, r.Output)
		case approved && o.Usage.InputTokens != 3+4:
			t.Errorf("approved: the resumed part used %d input tokens, want 7 (the caller's 3, the nested loop's 4)", o.Usage.InputTokens)
		case !approved && (ran != 0 || !r.IsError):
			t.Errorf("denied: the nested loop made %d requests and the result is %s, want none and a denial", ran, r.Output)
		}
	}
}

// An async prompt tool runs beside the caller's loop: the model gets the placeholder, the
// result comes back in the results message, the nested loop's messages are kept before it, and
// its tokens count toward the turn.
func TestAnAsyncPromptToolRunsBesideTheLoop(t *testing.T) {
	e := testenv.NewTurns(t, nil)
	e.Agent("caller", callerConfig(`{"async":true,"system":"`+promptSystem+`","model":`+summarizeScript+`,"tools":{"current_time":{}}}`, `{"message":"the week"}`))
	o, events := e.Say("conv_async", "caller", "sum up the week")
	if o.Status != turn.StatusCompleted {
		t.Fatalf("the turn ended %+v", o)
	}
	var started, landed bool
	for _, ev := range events {
		switch ev.Kind {
		case turn.AsyncStarted:
			started = ev.Loop.ToolName == "summarize"
		case turn.AsyncLanded:
			landed = ev.Result.Status == asynctools.Completed && strings.Contains(string(ev.Result.Response), "Summary ready.")
		case turn.PromptTool:
			t.Errorf("an async call's nested loop emitted progress %+v from beside the loop", ev.PromptTool)
		}
	}
	if !started || !landed {
		t.Errorf("async started %v, landed with the answer %v; want both", started, landed)
	}
	msgs := e.History("conv_async")
	var kinds []string
	for _, m := range msgs {
		kinds = append(kinds, string(m.Role)+"/"+m.Kind)
	}
	// The caller's model answers over the placeholder first, then over the result.
	want := []string{"user/", "assistant/", "tool/", "assistant/", "user/nested", "assistant/nested", "tool/nested", "assistant/nested", "user/" + model.KindAsyncResults, "assistant/"}
	if !slices.Equal(kinds, want) {
		t.Errorf("the conversation holds %v, want %v", kinds, want)
	}
	if o.Usage.InputTokens < 4+4 {
		t.Errorf("the turn used %d input tokens, want the nested loop's 4 counted too", o.Usage.InputTokens)
	}
}
