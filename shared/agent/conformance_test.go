package agent_test

// Conformance tests: one test per rule of the tools spec's "Conformance Notes" (001, section 8,
// "Implementations MUST:"), and one for the transcript rule every provider adapter relies on.
// They drive agent.Run with fake models and real tool.Sets; the helpers they share with the
// other tests (playback, recorder, newSet, runOK…) live in agent_test.go.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/tool"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func callItem(id, name, input string) item {
	return item{ev: model.Event{Type: model.EventToolCall, ToolCallID: id, ToolName: name, Input: json.RawMessage(input)}}
}

func textItem(s string) item { return item{ev: model.Event{Type: model.EventTextDelta, Text: s}} }

func callPart(id, name, input string) model.Part {
	return model.Part{Type: model.PartToolCall, ToolCallID: id, ToolName: name, Input: json.RawMessage(input)}
}

func resultPart(id, name, output string) model.Part {
	return model.Part{Type: model.PartToolResult, ToolCallID: id, ToolName: name, Output: json.RawMessage(output)}
}

func errorPart(id, name, msg string) model.Part {
	out, _ := json.Marshal(map[string]string{"error": msg})
	return model.Part{Type: model.PartToolResult, ToolCallID: id, ToolName: name, Output: out, IsError: true}
}

func textPart(s string) model.Part { return model.Part{Type: model.PartText, Text: s} }

func message(id string, role model.Role, parts ...model.Part) model.Message {
	return model.Message{ID: id, Role: role, Parts: parts}
}

// errorText returns the message of an error result's {"error": …} output.
func errorText(t *testing.T, p model.Part) string {
	t.Helper()
	var out struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(p.Output, &out); err != nil || out.Error == "" {
		t.Fatalf("result %s output = %s, want {\"error\": <text>}", p.ToolCallID, p.Output)
	}
	return out.Error
}

// Rule: "validate tool args against the declared schema."
func TestConformanceValidateToolArgsAgainstTheDeclaredSchema(t *testing.T) {
	schema := json.RawMessage(`{
		"type": "object",
		"properties": {
			"city": {"type": "string", "minLength": 1},
			"days": {"type": "integer", "minimum": 1, "maximum": 7},
			"units": {"enum": ["C", "F"]}
		},
		"required": ["city"],
		"additionalProperties": false
	}`)
	tests := []struct {
		name  string
		tool  string // forecast declares schema; ping declares none, so it takes no arguments
		input string
		// wantProblem is what the error result must say; "" means the arguments are valid and
		// must reach Execute byte for byte.
		wantProblem string
	}{
		{name: "required field only", tool: "forecast", input: `{"city":"Oslo"}`},
		{name: "every field, odd spacing and key order", tool: "forecast", input: "{ \"units\" : \"F\",\n\t\"days\":7 , \"city\":\"Bergen\" }"},
		{name: "escapes kept as sent", tool: "forecast", input: `{"city":"S\u00e3o Paulo \"SP\" \/ BR"}`},
		{name: "no schema, no arguments", tool: "ping", input: `{}`},
		{name: "missing required field", tool: "forecast", input: `{"days":3}`, wantProblem: "city is required"},
		{name: "wrong type", tool: "forecast", input: `{"city":42}`, wantProblem: "city: Invalid type. Expected: string, given: integer"},
		{name: "too short", tool: "forecast", input: `{"city":""}`, wantProblem: "city: String length must be greater than or equal to 1"},
		{name: "above maximum", tool: "forecast", input: `{"city":"Oslo","days":8}`, wantProblem: "days: Must be less than or equal to 7"},
		{name: "not an integer", tool: "forecast", input: `{"city":"Oslo","days":2.5}`, wantProblem: "days: Invalid type. Expected: integer, given: number"},
		{name: "not in enum", tool: "forecast", input: `{"city":"Oslo","units":"K"}`, wantProblem: "units: units must be one of the following"},
		{name: "undeclared property", tool: "forecast", input: `{"city":"Oslo","country":"NO"}`, wantProblem: "Additional property country is not allowed"},
		{name: "array instead of object", tool: "forecast", input: `["Oslo"]`, wantProblem: "Invalid type. Expected: object, given: array"},
		{name: "null", tool: "forecast", input: `null`, wantProblem: "Invalid type. Expected: object, given: null"},
		{name: "arguments to a tool that takes none", tool: "ping", input: `{"verbose":true}`, wantProblem: "Additional property verbose is not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var executed []string
			execute := func(_ context.Context, input json.RawMessage) (any, error) {
				executed = append(executed, string(input))
				return "ok", nil
			}
			set := newSet(t,
				tool.Tool{Name: "forecast", InputSchema: schema, Execute: execute},
				tool.Tool{Name: "ping", Execute: execute},
			)
			rec := &recorder{}
			cfg := agent.Config{
				Model: rec.wrap(playback([]item{callItem("c1", tt.tool, tt.input)}, []item{textItem("ok")})),
				Tools: set,
				Save:  rec.save,
			}

			events := runOK(t, cfg, userMsg("hi"))

			if len(rec.requests) != 2 {
				t.Fatalf("model calls = %d, want 2", len(rec.requests))
			}
			msgs := rec.requests[1].Messages
			last := msgs[len(msgs)-1]
			if last.Role != model.RoleTool || len(last.Parts) != 1 {
				t.Fatalf("second request ends with %+v, want a tool message with one result", last)
			}
			result := last.Parts[0]
			var gotTypes []agent.EventType
			for _, ev := range events {
				if ev.Type == agent.ToolInputAvailable || ev.Type == agent.ToolInputError {
					gotTypes = append(gotTypes, ev.Type)
				}
			}

			if tt.wantProblem != "" {
				if executed != nil {
					t.Errorf("Execute ran with %q, want it never to run on arguments that fail the schema", executed)
				}
				if diff := cmp.Diff([]agent.EventType{agent.ToolInputError}, gotTypes); diff != "" {
					t.Errorf("input events (-want +got):\n%s", diff)
				}
				if !result.IsError {
					t.Errorf("result = %+v, want IsError", result)
				}
				msg := errorText(t, result)
				if !strings.Contains(msg, tt.wantProblem) || !strings.Contains(msg, tt.tool) {
					t.Errorf("the model was told %q, want it to name the tool %q and say %q", msg, tt.tool, tt.wantProblem)
				}
				return
			}
			if diff := cmp.Diff([]string{tt.input}, executed); diff != "" {
				t.Errorf("input Execute got (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]agent.EventType{agent.ToolInputAvailable}, gotTypes); diff != "" {
				t.Errorf("input events (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(resultPart("c1", tt.tool, `"ok"`), result); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

// Rule: "execute local tools sequentially in the order they were returned."
func TestConformanceExecuteLocalToolsSequentiallyInTheOrderTheyWereReturned(t *testing.T) {
	type call struct{ name, input string }
	tests := []struct {
		name  string
		calls []call // the model returns them as c1, c2, c3
		// wantLog interleaves the tools' starts and ends with the events the consumer saw;
		// "start" says how many runs had finished when it began.
		wantLog []string
	}{
		{
			name:  "reverse of the tool list's order",
			calls: []call{{"c", `{"n":1}`}, {"b", `{"n":2}`}, {"a", `{"n":3}`}},
			wantLog: []string{
				"available c1", "start c n=1 after 0", "end c n=1", "output c1",
				"available c2", "start b n=2 after 1", "end b n=2", "output c2",
				"available c3", "start a n=3 after 2", "end a n=3", "output c3",
			},
		},
		{
			name:  "one tool called twice around another",
			calls: []call{{"b", `{"n":1}`}, {"a", `{"n":2}`}, {"b", `{"n":3}`}},
			wantLog: []string{
				"available c1", "start b n=1 after 0", "end b n=1", "output c1",
				"available c2", "start a n=2 after 1", "end a n=2", "output c2",
				"available c3", "start b n=3 after 2", "end b n=3", "output c3",
			},
		},
		{
			name:  "failures keep their place",
			calls: []call{{"a", `{"n":1,"fail":true}`}, {"b", `{"n":"two"}`}, {"c", `{"n":3}`}},
			wantLog: []string{
				"available c1", "start a n=1 after 0", "end a n=1", "output-error c1",
				"input-error c2",
				"available c3", "start c n=3 after 1", "end c n=3", "output c3",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				mu               sync.Mutex
				log              []string
				active, finished int
				overlaps         []string
			)
			logf := func(format string, args ...any) {
				mu.Lock()
				defer mu.Unlock()
				log = append(log, fmt.Sprintf(format, args...))
			}
			counted := func(name string) tool.Tool {
				return tool.Tool{
					Name:        name,
					InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"},"fail":{"type":"boolean"}},"required":["n"],"additionalProperties":false}`),
					Execute: func(_ context.Context, input json.RawMessage) (any, error) {
						var args struct {
							N    int
							Fail bool
						}
						if err := json.Unmarshal(input, &args); err != nil {
							return nil, err
						}
						mu.Lock()
						if active != 0 {
							overlaps = append(overlaps, fmt.Sprintf("%s n=%d started while %d ran", name, args.N, active))
						}
						active++
						log = append(log, fmt.Sprintf("start %s n=%d after %d", name, args.N, finished))
						mu.Unlock()
						// Give a concurrent loop every chance to start the next call now.
						runtime.Gosched()
						mu.Lock()
						active--
						finished++
						log = append(log, fmt.Sprintf("end %s n=%d", name, args.N))
						mu.Unlock()
						if args.Fail {
							return nil, errors.New("asked to fail")
						}
						return args.N, nil
					},
				}
			}
			var step []item
			for i, c := range tt.calls {
				step = append(step, callItem(fmt.Sprintf("c%d", i+1), c.name, c.input))
			}
			rec := &recorder{}
			cfg := agent.Config{
				Model: rec.wrap(playback(step, []item{textItem("done")})),
				Tools: newSet(t, counted("a"), counted("b"), counted("c")),
				Save:  rec.save,
			}

			for ev, err := range agent.Run(context.Background(), cfg, []model.Message{userMsg("hi")}) {
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				switch ev.Type {
				case agent.ToolInputAvailable:
					logf("available %s", ev.ToolCallID)
				case agent.ToolInputError:
					logf("input-error %s", ev.ToolCallID)
				case agent.ToolOutput:
					logf("output %s", ev.ToolCallID)
				case agent.ToolOutputError:
					logf("output-error %s", ev.ToolCallID)
				}
			}

			if overlaps != nil {
				t.Errorf("tool runs overlapped: %v", overlaps)
			}
			if diff := cmp.Diff(tt.wantLog, log); diff != "" {
				t.Errorf("tool runs and events (-want +got):\n%s", diff)
			}
			if len(rec.saved) == 0 || len(rec.saved[0]) != 2 {
				t.Fatalf("saved = %+v, want the first step's assistant and tool messages", rec.saved)
			}
			var calls, results []string
			for _, p := range rec.saved[0][0].Parts {
				calls = append(calls, p.ToolCallID+" "+p.ToolName)
			}
			for _, p := range rec.saved[0][1].Parts {
				results = append(results, p.ToolCallID+" "+p.ToolName)
			}
			if diff := cmp.Diff(calls, results); diff != "" {
				t.Errorf("saved results against the model's calls (-calls +results):\n%s", diff)
			}
		})
	}
}

// Rule: "persist tool results as messages before advancing."
func TestConformancePersistToolResultsAsMessagesBeforeAdvancing(t *testing.T) {
	city := tool.Tool{
		Name:        "weather",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
	}
	tests := []struct {
		name      string
		maxSteps  int
		steps     [][]item
		wantLog   []string // model calls, tool runs, saves and the consumer's step events
		wantSaved [][]model.Message
	}{
		{
			name: "three steps",
			steps: [][]item{
				{textItem("Let me look."), callItem("c1", "weather", `{"city":"Oslo"}`), callItem("c2", "weather", `{"town":"Oslo"}`)},
				{callItem("c3", "current_time", `{}`)},
				{textItem("Sunny, at noon.")},
			},
			wantLog: []string{
				"StepStart", "model", "run weather", "save", "StepFinish",
				"StepStart", "model", "run current_time", "save", "StepFinish",
				"StepStart", "model", "save", "StepFinish",
				"Finish",
			},
			wantSaved: [][]model.Message{
				{
					{ID: "m1", Role: model.RoleAssistant, Parts: []model.Part{
						textPart("Let me look."), callPart("c1", "weather", `{"city":"Oslo"}`), callPart("c2", "weather", `{"town":"Oslo"}`),
					}, Usage: &model.Usage{}},
					message("m2", model.RoleTool,
						resultPart("c1", "weather", `"sunny"`),
						errorPart("c2", "weather", "invalid input for tool weather: (root): city is required"),
					),
				},
				{
					{ID: "m3", Role: model.RoleAssistant, Parts: []model.Part{callPart("c3", "current_time", `{}`)}, Usage: &model.Usage{}},
					message("m4", model.RoleTool, resultPart("c3", "current_time", `"`+fixedTime+`"`)),
				},
				{
					{ID: "m5", Role: model.RoleAssistant, Parts: []model.Part{textPart("Sunny, at noon.")}, Usage: &model.Usage{}},
				},
			},
		},
		{
			name:     "the last step allowed still saves its results",
			maxSteps: 1,
			steps:    [][]item{{callItem("c1", "weather", `{"city":"Oslo"}`)}},
			wantLog:  []string{"StepStart", "model", "run weather", "save", "StepFinish", "Finish"},
			wantSaved: [][]model.Message{{
				{ID: "m1", Role: model.RoleAssistant, Parts: []model.Part{callPart("c1", "weather", `{"city":"Oslo"}`)}, Usage: &model.Usage{}},
				message("m2", model.RoleTool, resultPart("c1", "weather", `"sunny"`)),
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			logged := func(tl tool.Tool, out any) tool.Tool {
				tl.Execute = func(context.Context, json.RawMessage) (any, error) {
					rec.log = append(rec.log, "run "+tl.Name)
					return out, nil
				}
				return tl
			}
			cfg := agent.Config{
				Model:    rec.wrap(playback(tt.steps...)),
				Tools:    newSet(t, logged(city, "sunny"), logged(currentTime(), fixedTime)),
				MaxSteps: tt.maxSteps,
				Save:     rec.save,
				NewID:    sequentialIDs(),
			}
			history := []model.Message{userMsg("Weather and time?")}

			for ev, err := range agent.Run(context.Background(), cfg, history) {
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				switch ev.Type {
				case agent.StepStart:
					rec.log = append(rec.log, "StepStart")
				case agent.StepFinish:
					rec.log = append(rec.log, "StepFinish")
				case agent.Finish:
					rec.log = append(rec.log, "Finish")
				}
			}

			if diff := cmp.Diff(tt.wantLog, rec.log); diff != "" {
				t.Errorf("model calls, tool runs, saves and step events (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantSaved, rec.saved); diff != "" {
				t.Errorf("saved messages per step (-want +got):\n%s", diff)
			}
			// Each request is the history plus everything saved before it, nothing more.
			want := history
			for i, req := range rec.requests {
				if diff := cmp.Diff(want, req.Messages); diff != "" {
					t.Errorf("request %d messages (-want +got):\n%s", i+1, diff)
				}
				if i < len(rec.saved) {
					want = append(append([]model.Message(nil), want...), rec.saved[i]...)
				}
			}
		})
	}
}

// Rule: "persist tool errors as tool result messages rather than halting execution."
func TestConformancePersistToolErrorsAsToolResultMessagesRatherThanHaltingExecution(t *testing.T) {
	failures := []struct {
		name      string
		execute   func(context.Context, json.RawMessage) (any, error)
		wantError string // the text of the saved error result
	}{
		{
			name:      "returns_error",
			execute:   func(context.Context, json.RawMessage) (any, error) { return nil, errors.New("upstream said 503") },
			wantError: "tool returns_error failed: upstream said 503",
		},
		{
			name:      "panics",
			execute:   func(context.Context, json.RawMessage) (any, error) { panic("corrupt cache") },
			wantError: "tool panics failed: panic: corrupt cache",
		},
		{
			name: "panics_with_error",
			execute: func(context.Context, json.RawMessage) (any, error) {
				panic(fmt.Errorf("wrapped: %w", context.DeadlineExceeded))
			},
			wantError: "tool panics_with_error failed: panic: wrapped: context deadline exceeded",
		},
		{
			name:      "returns_unencodable",
			execute:   func(context.Context, json.RawMessage) (any, error) { return make(chan int), nil },
			wantError: "tool returns_unencodable failed: encoding the result: json: unsupported type: chan int",
		},
	}
	var runs []string
	var tools []tool.Tool
	var step1 []item
	var wantStep1 []model.Part
	for i, f := range failures {
		execute := f.execute
		name := f.name
		tools = append(tools, tool.Tool{Name: name, Execute: func(ctx context.Context, input json.RawMessage) (any, error) {
			runs = append(runs, name)
			return execute(ctx, input)
		}})
		id := fmt.Sprintf("c%d", i+1)
		step1 = append(step1, callItem(id, name, `{}`))
		wantStep1 = append(wantStep1, errorPart(id, name, f.wantError))
	}
	// A healthy tool after the failures still runs in the same step.
	tools = append(tools, tool.Tool{Name: "current_time", Execute: func(context.Context, json.RawMessage) (any, error) {
		runs = append(runs, "current_time")
		return fixedTime, nil
	}})
	step1 = append(step1, callItem("ok", "current_time", `{}`))
	wantStep1 = append(wantStep1, resultPart("ok", "current_time", `"`+fixedTime+`"`))

	rec := &recorder{}
	cfg := agent.Config{
		Model: rec.wrap(playback(
			step1,
			[]item{callItem("again", "panics", `{}`)},
			[]item{textItem("The tools are failing; try later.")},
		)),
		Tools: newSet(t, tools...),
		Save:  rec.save,
	}

	events := runOK(t, cfg, userMsg("hi"))

	wantRuns := []string{"returns_error", "panics", "panics_with_error", "returns_unencodable", "current_time", "panics"}
	if diff := cmp.Diff(wantRuns, runs); diff != "" {
		t.Errorf("tool runs (-want +got):\n%s", diff)
	}
	if len(rec.saved) != 3 {
		t.Fatalf("saved %d steps, want 3 (the turn goes on after tool errors)", len(rec.saved))
	}
	wantTools := [][]model.Part{wantStep1, {errorPart("again", "panics", "tool panics failed: panic: corrupt cache")}}
	for i, want := range wantTools {
		step := rec.saved[i]
		if len(step) != 2 || step[1].Role != model.RoleTool {
			t.Errorf("step %d saved %+v, want an assistant and a tool message", i+1, step)
			continue
		}
		if diff := cmp.Diff(want, step[1].Parts); diff != "" {
			t.Errorf("step %d saved tool results (-want +got):\n%s", i+1, diff)
		}
		// The model is given the errors on its next call.
		next := rec.requests[i+1].Messages
		if diff := cmp.Diff(step[1], next[len(next)-1]); diff != "" {
			t.Errorf("request %d's last message (-want +got):\n%s", i+2, diff)
		}
	}
	var outputErrors []string
	for _, ev := range events {
		if ev.Type == agent.ToolOutputError {
			outputErrors = append(outputErrors, ev.ToolCallID)
		}
	}
	if diff := cmp.Diff([]string{"c1", "c2", "c3", "c4", "again"}, outputErrors); diff != "" {
		t.Errorf("ToolOutputError events (-want +got):\n%s", diff)
	}
	last := events[len(events)-1]
	if last.Type != agent.Finish || last.Finish != model.FinishStop {
		t.Errorf("last event = %+v, want Finish with reason stop", last)
	}
}

// assertValidTranscript checks the shape every provider requires: each assistant message with
// tool calls is followed by one tool message holding exactly one result per call, and no tool
// result (or tool message) answers anything else.
func assertValidTranscript(t *testing.T, msgs []model.Message) {
	t.Helper()
	answered := map[int]bool{} // indexes of tool messages that follow a call
	seenCalls := map[string]int{}
	for i, m := range msgs {
		var calls []string
		for _, p := range m.Parts {
			if p.Type == model.PartToolCall {
				calls = append(calls, p.ToolCallID)
				if prev, dup := seenCalls[p.ToolCallID]; dup {
					t.Errorf("message %d: tool call id %q already used in message %d", i, p.ToolCallID, prev)
				}
				seenCalls[p.ToolCallID] = i
			}
		}
		if len(calls) == 0 {
			continue
		}
		if m.Role != model.RoleAssistant {
			t.Errorf("message %d (%s) holds tool calls %v, want them only in assistant messages", i, m.Role, calls)
			continue
		}
		if i+1 >= len(msgs) || msgs[i+1].Role != model.RoleTool {
			t.Errorf("message %d calls %v, but the next message is not a tool message", i, calls)
			continue
		}
		answered[i+1] = true
		results := map[string]int{}
		for _, p := range msgs[i+1].Parts {
			if p.Type != model.PartToolResult {
				t.Errorf("message %d: tool message holds a %s part, want only tool results", i+1, p.Type)
				continue
			}
			results[p.ToolCallID]++
		}
		for _, id := range calls {
			if n := results[id]; n != 1 {
				t.Errorf("message %d: call %q has %d results in message %d, want exactly 1", i, id, n, i+1)
			}
			delete(results, id)
		}
		for id := range results {
			t.Errorf("message %d: result for %q answers no call of message %d", i+1, id, i)
		}
	}
	for i, m := range msgs {
		if m.Role == model.RoleTool && !answered[i] {
			t.Errorf("message %d: tool message does not follow an assistant message with tool calls", i)
		}
		if m.Role != model.RoleTool {
			for _, p := range m.Parts {
				if p.Type == model.PartToolResult {
					t.Errorf("message %d (%s) holds a tool result for %q outside a tool message", i, m.Role, p.ToolCallID)
				}
			}
		}
	}
}

// withoutTool returns the messages that are not tool messages.
func withoutTool(msgs []model.Message) []model.Message {
	var out []model.Message
	for _, m := range msgs {
		if m.Role != model.RoleTool {
			out = append(out, m)
		}
	}
	return out
}

// Rule (from the issue): "the transcript sent to each provider is always valid for it (every
// tool call has exactly one result)."
func TestConformanceTranscriptSentToEachProviderIsAlwaysValid(t *testing.T) {
	const interrupted = "" // in wantResults: a synthetic error result saying the turn was interrupted
	u1 := message("u1", model.RoleUser, textPart("Weather in Oslo and Bergen?"))
	u2 := message("u2", model.RoleUser, textPart("Hello?"))
	tests := []struct {
		name    string
		history []model.Message
		// wantResults maps each call to the output its result must carry in the request.
		wantResults map[string]string
		unchanged   bool // the request must carry history as it is
	}{
		{
			name: "(a) a call with no result: the turn was interrupted",
			history: []model.Message{
				u1,
				message("a1", model.RoleAssistant, textPart("Checking."), callPart("c1", "weather", `{"city":"Oslo"}`)),
				u2,
			},
			wantResults: map[string]string{"c1": interrupted},
		},
		{
			name: "(a) one of two calls has no result",
			history: []model.Message{
				u1,
				message("a1", model.RoleAssistant, callPart("c1", "weather", `{"city":"Oslo"}`), callPart("c2", "weather", `{"city":"Bergen"}`)),
				message("t1", model.RoleTool, resultPart("c1", "weather", `"sunny"`)),
				u2,
			},
			wantResults: map[string]string{"c1": `"sunny"`, "c2": interrupted},
		},
		{
			name: "(b) a result whose call is missing",
			history: []model.Message{
				message("t0", model.RoleTool, resultPart("c0", "weather", `"rain"`)),
				u1,
				message("a1", model.RoleAssistant, textPart("No tools needed.")),
				message("t1", model.RoleTool, resultPart("c9", "weather", `"snow"`)),
				u2,
			},
			wantResults: map[string]string{},
		},
		{
			name: "(b) a stray result beside a real one",
			history: []model.Message{
				u1,
				message("a1", model.RoleAssistant, callPart("c1", "weather", `{"city":"Oslo"}`)),
				message("t1", model.RoleTool, resultPart("c9", "weather", `"snow"`), resultPart("c1", "weather", `"sunny"`)),
				u2,
			},
			wantResults: map[string]string{"c1": `"sunny"`},
		},
		{
			name: "(c) a duplicate result for the same call",
			history: []model.Message{
				u1,
				message("a1", model.RoleAssistant, callPart("c1", "weather", `{"city":"Oslo"}`)),
				message("t1", model.RoleTool, resultPart("c1", "weather", `"sunny"`), resultPart("c1", "weather", `"cloudy"`)),
				u2,
			},
			wantResults: map[string]string{"c1": `"sunny"`},
		},
		{
			name: "(c) a duplicate result in a second tool message",
			history: []model.Message{
				u1,
				message("a1", model.RoleAssistant, callPart("c1", "weather", `{"city":"Oslo"}`)),
				message("t1", model.RoleTool, resultPart("c1", "weather", `"sunny"`)),
				message("t2", model.RoleTool, resultPart("c1", "weather", `"cloudy"`)),
				u2,
			},
			wantResults: map[string]string{"c1": `"sunny"`},
		},
		{
			name: "(d) results split over two tool messages",
			history: []model.Message{
				u1,
				message("a1", model.RoleAssistant, callPart("c1", "weather", `{"city":"Oslo"}`), callPart("c2", "weather", `{"city":"Bergen"}`)),
				message("t1", model.RoleTool, resultPart("c2", "weather", `"rain"`)),
				message("t2", model.RoleTool, resultPart("c1", "weather", `"sunny"`)),
				u2,
			},
			wantResults: map[string]string{"c1": `"sunny"`, "c2": `"rain"`},
		},
		{
			name: "(e) a result after an intervening user message",
			history: []model.Message{
				u1,
				message("a1", model.RoleAssistant, callPart("c1", "weather", `{"city":"Oslo"}`)),
				u2,
				message("t1", model.RoleTool, resultPart("c1", "weather", `"sunny"`)),
				message("u3", model.RoleUser, textPart("Still there?")),
			},
			wantResults: map[string]string{"c1": interrupted},
		},
		{
			name: "a valid history is kept as it is",
			history: []model.Message{
				u1,
				message("a1", model.RoleAssistant, callPart("c1", "weather", `{"city":"Oslo"}`), callPart("c2", "weather", `{"city":"Bergen"}`)),
				message("t1", model.RoleTool, resultPart("c1", "weather", `"sunny"`), errorPart("c2", "weather", "upstream said 503")),
				message("a2", model.RoleAssistant, textPart("Sunny in Oslo.")),
				u2,
			},
			wantResults: map[string]string{"c1": `"sunny"`, "c2": `{"error":"upstream said 503"}`},
			unchanged:   true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Deep copies: the loop must not change the caller's history.
			var before []model.Message
			b, _ := json.Marshal(tt.history)
			if err := json.Unmarshal(b, &before); err != nil {
				t.Fatal(err)
			}
			rec := &recorder{}
			cfg := agent.Config{Model: rec.wrap(playback([]item{textItem("ok")})), Save: rec.save}

			runOK(t, cfg, tt.history...)

			if len(rec.requests) != 1 {
				t.Fatalf("model calls = %d, want 1", len(rec.requests))
			}
			got := rec.requests[0].Messages
			assertValidTranscript(t, got)

			if diff := cmp.Diff(withoutTool(tt.history), withoutTool(got)); diff != "" {
				t.Errorf("non-tool messages (-want +got):\n%s", diff)
			}
			results := map[string]model.Part{}
			for _, m := range got {
				for _, p := range m.Parts {
					if p.Type == model.PartToolResult {
						results[p.ToolCallID] = p
					}
				}
			}
			wantIDs, gotIDs := slices.Sorted(maps.Keys(tt.wantResults)), slices.Sorted(maps.Keys(results))
			if diff := cmp.Diff(wantIDs, gotIDs, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("calls with results (-want +got):\n%s", diff)
			}
			for id, want := range tt.wantResults {
				p, ok := results[id]
				if !ok {
					continue
				}
				if want == interrupted {
					if !p.IsError || !strings.Contains(errorText(t, p), "interrupted") {
						t.Errorf("result for %s = %+v, want an error result saying the turn was interrupted", id, p)
					}
					if p.ToolName != "weather" {
						t.Errorf("result for %s names tool %q, want the call's tool weather", id, p.ToolName)
					}
					continue
				}
				if string(p.Output) != want {
					t.Errorf("result for %s output = %s, want %s", id, p.Output, want)
				}
			}
			if tt.unchanged {
				if diff := cmp.Diff(tt.history, got); diff != "" {
					t.Errorf("request messages (-want +got):\n%s", diff)
				}
			}
			if diff := cmp.Diff(before, tt.history); diff != "" {
				t.Errorf("Run changed the caller's history (-before +after):\n%s", diff)
			}
		})
	}
}

// Every request of a multi-step turn is valid, whether the turn starts afresh or resumes an
// interrupted one, with several calls per step, some of them failing.
func TestConformanceTranscriptValidAcrossATurn(t *testing.T) {
	tests := []struct {
		name    string
		history []model.Message
	}{
		{name: "new conversation", history: []model.Message{userMsg("Weather and time?")}},
		{name: "after an interrupted turn", history: []model.Message{
			message("u0", model.RoleUser, textPart("Weather?")),
			message("a0", model.RoleAssistant, callPart("old", "weather", `{"city":"Oslo"}`)),
			message("t0", model.RoleTool, resultPart("stray", "weather", `"rain"`)),
			message("u1", model.RoleUser, textPart("Again, and the time?")),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			cfg := agent.Config{
				Model: rec.wrap(scripted(t, `[
					{"text":"Both cities.","toolCalls":[{"name":"weather","input":{"city":"Oslo"}},{"name":"weather","input":{"town":"Bergen"}}]},
					{"toolCalls":[{"name":"current_time"},{"name":"teleport"}]},
					{"text":"Done: {{toolResults}}"}
				]`)),
				Tools: newSet(t, weather(), currentTime()),
				Save:  rec.save,
				NewID: sequentialIDs(),
			}

			runOK(t, cfg, tt.history...)

			if len(rec.requests) != 3 {
				t.Fatalf("model calls = %d, want 3", len(rec.requests))
			}
			for i, req := range rec.requests {
				t.Run(fmt.Sprintf("request %d", i+1), func(t *testing.T) {
					assertValidTranscript(t, req.Messages)
				})
			}
			// What the next turn starts from: the first request's messages and every step saved.
			full := rec.requests[0].Messages
			for _, step := range rec.saved {
				full = append(full, step...)
			}
			t.Run("next turn's history", func(t *testing.T) {
				assertValidTranscript(t, full)
			})
		})
	}
}
