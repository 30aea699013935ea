package agent_test

// Approval gating: calls held for the user's decision (Config.Pause), calls a policy denies or
// that cannot be asked about, and Resume over the decisions. Helpers (playback, recorder,
// newSet, callItem, message…) live in agent_test.go and conformance_test.go.

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/approval"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/tool"
	"github.com/google/go-cmp/cmp"
)

// anyObject accepts any object as a tool's arguments.
var anyObject = json.RawMessage(`{"type":"object"}`)

// countingTool returns a tool that records every input it runs with and answers "<name> done".
func countingTool(name string, policy *approval.Policy, ran map[string][]string) tool.Tool {
	return tool.Tool{
		Name:        name,
		InputSchema: anyObject,
		Approval:    policy,
		Execute: func(_ context.Context, input json.RawMessage) (any, error) {
			ran[name] = append(ran[name], string(input))
			return name + " done", nil
		},
	}
}

func parsePolicy(t *testing.T, raw string) *approval.Policy {
	t.Helper()
	p, err := approval.Parse(json.RawMessage(raw))
	if err != nil {
		t.Fatalf("approval.Parse(%s): %v", raw, err)
	}
	return p
}

// pauseRecorder is a PauseFunc that keeps what it was given and logs its call in rec.log.
type pauseRecorder struct {
	rec     *recorder
	calls   int
	msgs    []model.Message
	pending []agent.Pending
	err     error
}

func (p *pauseRecorder) pause(_ context.Context, msgs []model.Message, pending []agent.Pending) error {
	p.rec.log = append(p.rec.log, "pause")
	p.calls++
	p.msgs = append([]model.Message(nil), msgs...)
	p.pending = append([]agent.Pending(nil), pending...)
	return p.err
}

// eventLog names the events that matter to approval, so they can be interleaved with the
// model calls, saves and pauses in rec.log.
func eventLog(ev agent.Event) string {
	switch ev.Type {
	case agent.StepStart:
		return "StepStart"
	case agent.ToolInputAvailable:
		return "available " + ev.ToolCallID
	case agent.ToolOutput:
		return "output " + ev.ToolCallID
	case agent.ToolOutputError:
		return "output-error " + ev.ToolCallID
	case agent.ToolOutputDenied:
		return "denied " + ev.ToolCallID
	case agent.ToolApprovalRequest:
		return "approval-request " + ev.ToolCallID
	case agent.StepFinish:
		return "StepFinish"
	case agent.Finish:
		return "Finish"
	}
	return ""
}

// collect ranges over a turn, logging events into rec.log, and returns the events and errors.
func collect(rec *recorder, seq func(func(agent.Event, error) bool)) (events []agent.Event, errs []error) {
	for ev, err := range seq {
		if err != nil {
			rec.log = append(rec.log, "error")
			errs = append(errs, err)
			continue
		}
		if s := eventLog(ev); s != "" {
			rec.log = append(rec.log, s)
		}
		events = append(events, ev)
	}
	return events, errs
}

// A step whose calls need approval runs the ones that do not, holds the others through Pause in
// one write, and only then tells the client what waits.
func TestRunPausesForApproval(t *testing.T) {
	ran := map[string][]string{}
	rec := &recorder{}
	pause := &pauseRecorder{rec: rec}
	set := newSet(t,
		countingTool("a", approval.Always(), ran),
		countingTool("b", nil, ran),
		countingTool("c", parsePolicy(t, `{"rules":[{"if":{"required":["to"]},"then":"user-approval","reason":"sends mail"}]}`), ran),
	)
	cfg := agent.Config{
		Model: rec.wrap(playback([]item{
			callItem("A", "a", `{"x":1}`),
			callItem("B", "b", `{}`),
			callItem("C", "c", `{"to":"bob@example.com"}`),
		})),
		Tools: set,
		Save:  rec.save,
		Pause: pause.pause,
		NewID: sequentialIDs(),
	}

	events, errs := collect(rec, agent.Run(context.Background(), cfg, []model.Message{userMsg("hi")}))

	if len(errs) > 0 {
		t.Fatalf("Run yielded errors %v", errs)
	}
	wantLog := []string{
		"StepStart", "model",
		"available A",
		"available B", "output B",
		"available C",
		"pause",
		"approval-request A", "approval-request C",
		"StepFinish", "Finish",
	}
	if diff := cmp.Diff(wantLog, rec.log); diff != "" {
		t.Errorf("model calls, pauses, saves and events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string][]string{"b": {`{}`}}, ran); diff != "" {
		t.Errorf("tool runs (-want +got):\n%s", diff)
	}
	if got := rec.modelCalls(); got != 1 {
		t.Errorf("model calls = %d, want 1", got)
	}
	if len(rec.saved) != 0 {
		t.Errorf("Save got %+v, want no call: Pause persists a held step", rec.saved)
	}

	if pause.calls != 1 {
		t.Fatalf("Pause calls = %d, want 1", pause.calls)
	}
	wantMsgs := []model.Message{
		{ID: "m1", Role: model.RoleAssistant, Parts: []model.Part{
			callPart("A", "a", `{"x":1}`), callPart("B", "b", `{}`), callPart("C", "c", `{"to":"bob@example.com"}`),
		}, Usage: &model.Usage{}},
		message("m2", model.RoleTool, resultPart("B", "b", `"b done"`)),
	}
	if diff := cmp.Diff(wantMsgs, pause.msgs); diff != "" {
		t.Errorf("messages given to Pause (-want +got):\n%s", diff)
	}
	if len(pause.pending) != 2 {
		t.Fatalf("Pause got pending %+v, want 2 calls", pause.pending)
	}
	idA, idC := pause.pending[0].ApprovalID, pause.pending[1].ApprovalID
	if idA == "" || idC == "" || idA == idC {
		t.Errorf("approval ids = %q, %q; want two distinct non-empty ids", idA, idC)
	}
	wantPending := []agent.Pending{
		{ApprovalID: idA, ToolCallID: "A", ToolName: "a", Input: json.RawMessage(`{"x":1}`)},
		{ApprovalID: idC, ToolCallID: "C", ToolName: "c", Input: json.RawMessage(`{"to":"bob@example.com"}`), Reason: "sends mail"},
	}
	if diff := cmp.Diff(wantPending, pause.pending); diff != "" {
		t.Errorf("pending given to Pause (-want +got):\n%s", diff)
	}

	wantEvents := []agent.Event{
		{Type: agent.StepStart},
		{Type: agent.ToolInputAvailable, ToolCallID: "A", ToolName: "a", Input: json.RawMessage(`{"x":1}`)},
		{Type: agent.ToolInputAvailable, ToolCallID: "B", ToolName: "b", Input: json.RawMessage(`{}`)},
		{Type: agent.ToolOutput, ToolCallID: "B", ToolName: "b", Output: json.RawMessage(`"b done"`)},
		{Type: agent.ToolInputAvailable, ToolCallID: "C", ToolName: "c", Input: json.RawMessage(`{"to":"bob@example.com"}`)},
		{Type: agent.ToolApprovalRequest, ToolCallID: "A", ToolName: "a", ApprovalID: idA},
		{Type: agent.ToolApprovalRequest, ToolCallID: "C", ToolName: "c", ApprovalID: idC, Text: "sends mail"},
		{Type: agent.StepFinish},
		{Type: agent.Finish, Finish: model.FinishToolCalls, Pending: wantPending},
	}
	if diff := cmp.Diff(wantEvents, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// Approval ids are fresh for every held call, also across turns.
func TestRunApprovalIDsAreUnique(t *testing.T) {
	seen := map[string]bool{}
	for turn := range 3 {
		pause := &pauseRecorder{rec: &recorder{}}
		cfg := agent.Config{
			Model: playback([]item{callItem("A", "a", `{}`), callItem("B", "a", `{}`)}),
			Tools: newSet(t, countingTool("a", approval.Always(), map[string][]string{})),
			Pause: pause.pause,
		}
		runOK(t, cfg, userMsg("hi"))
		if len(pause.pending) != 2 {
			t.Fatalf("turn %d: pending = %+v, want 2", turn, pause.pending)
		}
		for _, p := range pause.pending {
			if p.ApprovalID == "" || seen[p.ApprovalID] {
				t.Errorf("turn %d: approval id %q is empty or reused", turn, p.ApprovalID)
			}
			seen[p.ApprovalID] = true
		}
	}
}

func TestRunPauseError(t *testing.T) {
	errStore := errors.New("transaction cancelled")
	ran := map[string][]string{}
	rec := &recorder{}
	pause := &pauseRecorder{rec: rec, err: errStore}
	cfg := agent.Config{
		Model: rec.wrap(playback([]item{callItem("A", "a", `{}`), callItem("B", "b", `{}`)})),
		Tools: newSet(t, countingTool("a", approval.Always(), ran), countingTool("b", nil, ran)),
		Save:  rec.save,
		Pause: pause.pause,
	}

	events, errs := collect(rec, agent.Run(context.Background(), cfg, []model.Message{userMsg("hi")}))

	if len(errs) != 1 || !errors.Is(errs[0], errStore) {
		t.Fatalf("errors = %v, want exactly one wrapping %v", errs, errStore)
	}
	wantLog := []string{"StepStart", "model", "available A", "available B", "output B", "pause", "error"}
	if diff := cmp.Diff(wantLog, rec.log); diff != "" {
		t.Errorf("model calls, pauses, saves and events (-want +got):\n%s", diff)
	}
	for _, ev := range events {
		if ev.Type == agent.ToolApprovalRequest || ev.Type == agent.Finish {
			t.Errorf("event %+v after a failed Pause, want none: nothing is held", ev)
		}
	}
}

// Calls that cannot wait for the user are refused: they never run, the model is told why, and
// the turn goes on.
func TestRunDeniesWithoutAsking(t *testing.T) {
	const denyEtc = `{"rules":[{"if":{"properties":{"path":{"pattern":"^/etc/"}},"required":["path"]},"then":"denied"REASON}],"otherwise":"not-applicable"}`
	tests := []struct {
		name      string
		policy    func(t *testing.T) *approval.Policy
		withPause bool
		// The model calls A with {"path":"/etc/passwd"}, then B with {"path":"/tmp/x"}.
		wantDenied string   // A's ErrorText
		wantRan    []string // inputs the tool ran with
		// wantDeniedCalls are the calls with a ToolOutputDenied event, in order.
		wantDeniedCalls []string
	}{
		{
			name:            "user approval, no Pause",
			policy:          func(*testing.T) *approval.Policy { return approval.Always() },
			wantDenied:      "needs the user's approval, which cannot be asked for here; the tool did not run",
			wantDeniedCalls: []string{"A", "B"},
		},
		{
			name: "user approval with a reason, no Pause",
			policy: func(t *testing.T) *approval.Policy {
				return parsePolicy(t, strings.Replace(denyEtc, `"denied"REASON`, `"user-approval","reason":"reads system files"`, 1))
			},
			wantDenied:      "needs the user's approval, which cannot be asked for here: reads system files; the tool did not run",
			wantRan:         []string{`{"path":"/tmp/x"}`},
			wantDeniedCalls: []string{"A"},
		},
		{
			name: "policy denies with a reason",
			policy: func(t *testing.T) *approval.Policy {
				return parsePolicy(t, strings.Replace(denyEtc, "REASON", `,"reason":"system files are off limits"`, 1))
			},
			withPause:       true,
			wantDenied:      "denied by policy: system files are off limits; the tool did not run",
			wantRan:         []string{`{"path":"/tmp/x"}`},
			wantDeniedCalls: []string{"A"},
		},
		{
			name:            "policy denies without a reason",
			policy:          func(t *testing.T) *approval.Policy { return parsePolicy(t, strings.Replace(denyEtc, "REASON", "", 1)) },
			withPause:       true,
			wantDenied:      "denied by policy; the tool did not run",
			wantRan:         []string{`{"path":"/tmp/x"}`},
			wantDeniedCalls: []string{"A"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ran := map[string][]string{}
			rec := &recorder{}
			cfg := agent.Config{
				Model: rec.wrap(playback(
					[]item{callItem("A", "files", `{"path":"/etc/passwd"}`), callItem("B", "files", `{"path":"/tmp/x"}`)},
					[]item{textItem("I may not read that.")},
				)),
				Tools: newSet(t, countingTool("files", tt.policy(t), ran)),
				Save:  rec.save,
				NewID: sequentialIDs(),
			}
			pause := &pauseRecorder{rec: rec}
			if tt.withPause {
				cfg.Pause = pause.pause
			}

			events, errs := collect(rec, agent.Run(context.Background(), cfg, []model.Message{userMsg("hi")}))

			if len(errs) > 0 {
				t.Fatalf("Run yielded errors %v", errs)
			}
			if pause.calls != 0 {
				t.Errorf("Pause calls = %d, want 0", pause.calls)
			}
			if diff := cmp.Diff(tt.wantRan, ran["files"]); diff != "" {
				t.Errorf("tool runs (-want +got):\n%s", diff)
			}

			var denied []agent.Event
			for _, ev := range events {
				if ev.Type == agent.ToolOutputDenied {
					denied = append(denied, ev)
				}
			}
			if len(denied) == 0 {
				t.Fatalf("events %v, want a ToolOutputDenied", rec.log)
			}
			if denied[0].ApprovalID == "" {
				t.Errorf("ToolOutputDenied has no approval id")
			}
			wantDenied := agent.Event{Type: agent.ToolOutputDenied, ToolCallID: "A", ToolName: "files", ApprovalID: denied[0].ApprovalID, Automatic: true, ErrorText: tt.wantDenied}
			if diff := cmp.Diff(wantDenied, denied[0]); diff != "" {
				t.Errorf("ToolOutputDenied for A (-want +got):\n%s", diff)
			}
			var deniedIDs []string
			for _, ev := range denied {
				deniedIDs = append(deniedIDs, ev.ToolCallID)
			}
			if diff := cmp.Diff(tt.wantDeniedCalls, deniedIDs); diff != "" {
				t.Errorf("calls denied (-want +got):\n%s", diff)
			}

			// The loop goes on: the step is saved and the model is told why A did not run.
			if got := rec.modelCalls(); got != 2 {
				t.Fatalf("model calls = %d, want 2", got)
			}
			if len(rec.saved) != 2 || len(rec.saved[0]) != 2 {
				t.Fatalf("saved = %+v, want two steps, the first with an assistant and a tool message", rec.saved)
			}
			results := rec.saved[0][1]
			if len(results.Parts) != 2 {
				t.Fatalf("step 1 results = %+v, want 2", results.Parts)
			}
			// The result keeps the denial the client was shown, under the event's approval id.
			wantResult := errorPart("A", "files", tt.wantDenied)
			wantResult.Approval = &model.Approval{ID: denied[0].ApprovalID, Reason: tt.wantDenied, Automatic: true}
			if diff := cmp.Diff(wantResult, results.Parts[0]); diff != "" {
				t.Errorf("A's result (-want +got):\n%s", diff)
			}
			next := rec.requests[1].Messages
			if diff := cmp.Diff(results, next[len(next)-1]); diff != "" {
				t.Errorf("second request's last message (-want +got):\n%s", diff)
			}
			last := events[len(events)-1]
			if last.Type != agent.Finish || last.Finish != model.FinishStop || last.Pending != nil {
				t.Errorf("last event = %+v, want Finish with reason stop and nothing pending", last)
			}
		})
	}
}

// pausedHistory is a conversation whose last step holds A and C: B ran, and its result is stored.
func pausedHistory() []model.Message {
	return []model.Message{
		message("u1", model.RoleUser, textPart("Do the three things.")),
		message("a1", model.RoleAssistant, textPart("On it."),
			callPart("A", "a", `{"x":1}`), callPart("B", "b", `{}`), callPart("C", "c", `{"y":2}`)),
		message("t1", model.RoleTool, resultPart("B", "b", `"b done"`)),
	}
}

func TestResume(t *testing.T) {
	const denial = "denied by the user: no; the tool did not run"
	next := message("u2", model.RoleUser, textPart("And then?"))
	tests := []struct {
		name string
		next []model.Message
	}{
		{name: "decisions only"},
		{name: "decisions and a new message", next: []model.Message{next}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ran := map[string][]string{}
			rec := &recorder{}
			pause := &pauseRecorder{rec: rec}
			cfg := agent.Config{
				Model: rec.wrap(playback([]item{textItem("A is done; C was refused.")})),
				Tools: newSet(t,
					countingTool("a", approval.Always(), ran),
					countingTool("b", nil, ran),
					countingTool("c", approval.Always(), ran),
				),
				Save:  rec.save,
				Pause: pause.pause,
				NewID: sequentialIDs(),
			}
			history := pausedHistory()
			decisions := map[string]agent.Decision{
				"A": {Approved: true},
				"C": {Denial: denial},
			}

			events, errs := collect(rec, agent.Resume(context.Background(), cfg, history, decisions, tt.next...))

			if len(errs) > 0 {
				t.Fatalf("Resume yielded errors %v", errs)
			}
			if diff := cmp.Diff(map[string][]string{"a": {`{"x":1}`}}, ran); diff != "" {
				t.Errorf("tool runs (-want +got):\n%s", diff)
			}
			if pause.calls != 0 {
				t.Errorf("Pause calls = %d, want 0", pause.calls)
			}
			wantLog := []string{"output A", "denied C", "save", "StepStart", "model", "save", "StepFinish", "Finish"}
			if diff := cmp.Diff(wantLog, rec.log); diff != "" {
				t.Errorf("events, saves and model calls (-want +got):\n%s", diff)
			}
			if len(events) < 2 {
				t.Fatalf("events = %+v, want the decided calls first", events)
			}
			wantDecided := []agent.Event{
				{Type: agent.ToolOutput, ToolCallID: "A", ToolName: "a", Output: json.RawMessage(`"a done"`)},
				{Type: agent.ToolOutputDenied, ToolCallID: "C", ToolName: "c", ErrorText: denial},
			}
			if diff := cmp.Diff(wantDecided, events[:2]); diff != "" {
				t.Errorf("events of the decided calls (-want +got):\n%s", diff)
			}

			results := message("m1", model.RoleTool, resultPart("A", "a", `"a done"`), errorPart("C", "c", denial))
			if len(rec.saved) != 2 {
				t.Fatalf("saves = %d (%+v), want 2: the decided calls, then the model's answer", len(rec.saved), rec.saved)
			}
			if diff := cmp.Diff(append([]model.Message{results}, tt.next...), rec.saved[0]); diff != "" {
				t.Errorf("first save (-want +got):\n%s", diff)
			}

			if len(rec.requests) != 1 {
				t.Fatalf("model calls = %d, want 1", len(rec.requests))
			}
			got := rec.requests[0].Messages
			assertValidTranscript(t, got)
			wantReq := []model.Message{
				history[0],
				history[1],
				// The stored and the new results, merged into one message in the calls' order.
				message("t1", model.RoleTool, resultPart("A", "a", `"a done"`), resultPart("B", "b", `"b done"`), errorPart("C", "c", denial)),
			}
			wantReq = append(wantReq, tt.next...)
			if diff := cmp.Diff(wantReq, got); diff != "" {
				t.Errorf("model request messages (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(pausedHistory(), history); diff != "" {
				t.Errorf("Resume changed the caller's history (-before +after):\n%s", diff)
			}
		})
	}
}

// A held call whose decision is missing stops Resume before anything runs or is saved: a
// decided call must not run when its result cannot be kept.
func TestResumeMissingDecision(t *testing.T) {
	tests := []struct {
		name      string
		decisions map[string]agent.Decision
		missing   string
	}{
		{name: "no decisions", decisions: nil, missing: "A"},
		{name: "first held call undecided", decisions: map[string]agent.Decision{"C": {Approved: true}}, missing: "A"},
		{name: "last held call undecided", decisions: map[string]agent.Decision{"A": {Approved: true}}, missing: "C"},
		{name: "decision for another call only", decisions: map[string]agent.Decision{"B": {Approved: true}, "A": {Denial: "no"}}, missing: "C"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ran := map[string][]string{}
			rec := &recorder{}
			cfg := agent.Config{
				Model: rec.wrap(playback([]item{textItem("ok")})),
				Tools: newSet(t, countingTool("a", nil, ran), countingTool("b", nil, ran), countingTool("c", nil, ran)),
				Save:  rec.save,
			}

			_, errs := collect(rec, agent.Resume(context.Background(), cfg, pausedHistory(), tt.decisions))

			if len(errs) != 1 {
				t.Fatalf("errors = %v, want exactly one", errs)
			}
			if !strings.Contains(errs[0].Error(), tt.missing) {
				t.Errorf("error = %q, want it to name the undecided call %s", errs[0], tt.missing)
			}
			if len(ran) != 0 {
				t.Errorf("tools ran %v, want none before every held call has a decision", ran)
			}
			if len(rec.saved) != 0 || rec.modelCalls() != 0 {
				t.Errorf("log %v, want no save and no model call", rec.log)
			}
		})
	}
}

func TestHeldCalls(t *testing.T) {
	u1 := message("u1", model.RoleUser, textPart("hi"))
	calls := message("a1", model.RoleAssistant, callPart("A", "a", `{"x":1}`), callPart("B", "b", `{}`), callPart("C", "c", `{"y":2}`))
	tests := []struct {
		name    string
		history []model.Message
		want    []model.Part
		wantErr string
	}{
		{name: "paused step", history: pausedHistory(), want: []model.Part{callPart("A", "a", `{"x":1}`), callPart("C", "c", `{"y":2}`)}},
		{name: "nothing answered yet", history: []model.Message{u1, calls}, want: calls.Parts},
		{
			name: "results over two tool messages",
			history: []model.Message{u1, calls,
				message("t1", model.RoleTool, resultPart("C", "c", `1`)),
				message("t2", model.RoleTool, resultPart("A", "a", `2`)),
			},
			want: []model.Part{callPart("B", "b", `{}`)},
		},
		{
			name:    "every call answered",
			history: []model.Message{u1, calls, message("t1", model.RoleTool, resultPart("A", "a", `1`), resultPart("B", "b", `2`), resultPart("C", "c", `3`))},
			wantErr: "holds no calls",
		},
		{
			name: "only an earlier step holds calls",
			history: []model.Message{u1, calls,
				message("a2", model.RoleAssistant, textPart("Done.")),
			},
			wantErr: "holds no calls",
		},
		{name: "no assistant message", history: []model.Message{u1}, wantErr: "no paused step"},
		{name: "empty history", history: nil, wantErr: "no paused step"},
		{name: "a user message after the calls", history: []model.Message{u1, calls, message("u2", model.RoleUser, textPart("?"))}, wantErr: "no paused step"},
		{name: "only tool messages", history: []model.Message{message("t1", model.RoleTool, resultPart("A", "a", `1`))}, wantErr: "no paused step"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := agent.HeldCalls(tt.history)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("HeldCalls = %+v, %v; want an error containing %q", got, err, tt.wantErr)
				}
				if got != nil {
					t.Errorf("HeldCalls returned %+v with its error, want nil", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("HeldCalls: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("held calls (-want +got):\n%s", diff)
			}
		})
	}
}

// Resume on a history that holds nothing fails before any tool runs, any save or model call.
func TestResumeWithoutHeldCalls(t *testing.T) {
	u1 := message("u1", model.RoleUser, textPart("hi"))
	tests := []struct {
		name    string
		history []model.Message
	}{
		{name: "every call answered", history: []model.Message{u1,
			message("a1", model.RoleAssistant, callPart("A", "a", `{}`)),
			message("t1", model.RoleTool, resultPart("A", "a", `1`)),
		}},
		{name: "no assistant message", history: []model.Message{u1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ran := map[string][]string{}
			rec := &recorder{}
			cfg := agent.Config{
				Model: rec.wrap(playback([]item{textItem("ok")})),
				Tools: newSet(t, countingTool("a", nil, ran)),
				Save:  rec.save,
			}
			events, errs := collect(rec, agent.Resume(context.Background(), cfg, tt.history, map[string]agent.Decision{"A": {Approved: true}}))
			if len(errs) != 1 || len(events) != 0 {
				t.Fatalf("Resume yielded events %+v and errors %v, want exactly one error", events, errs)
			}
			if len(ran) != 0 || len(rec.log) != 1 {
				t.Errorf("tool runs %v, log %v; want nothing but the error", ran, rec.log)
			}
		})
	}
}

// A Resume whose Save fails ends with that error before the model is called.
func TestResumeSaveError(t *testing.T) {
	errStore := errors.New("conditional check failed")
	rec := &recorder{saveErr: errStore}
	cfg := agent.Config{
		Model: rec.wrap(playback([]item{textItem("ok")})),
		Tools: newSet(t, countingTool("a", nil, map[string][]string{}), countingTool("c", nil, map[string][]string{})),
		Save:  rec.save,
	}
	_, errs := collect(rec, agent.Resume(context.Background(), cfg, pausedHistory(), map[string]agent.Decision{"A": {Approved: true}, "C": {Approved: true}}))
	if len(errs) != 1 || !errors.Is(errs[0], errStore) {
		t.Fatalf("errors = %v, want exactly one wrapping %v", errs, errStore)
	}
	if diff := cmp.Diff([]string{"output A", "output C", "save", "error"}, rec.log); diff != "" {
		t.Errorf("events, saves and model calls (-want +got):\n%s", diff)
	}
}

// What else the paused step brought back (its async calls' results) is saved with the decided
// calls' results, after them, in one write, and the model's next step goes on numbering the
// turn's steps; only a new user message starts a turn over.
func TestResumeWithTheStepsAsyncResults(t *testing.T) {
	results := model.Message{ID: "r1", Role: model.RoleUser, Kind: model.KindAsyncResults, Parts: []model.Part{textPart(`{"asyncToolResults":[]}`)}}
	tests := []struct {
		name   string
		next   []model.Message
		textID string
	}{
		{name: "async results", next: []model.Message{results}, textID: "text-2-1"},
		{name: "async results and a new message", next: []model.Message{results, message("u2", model.RoleUser, textPart("And then?"))}, textID: "text-1-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ran := map[string][]string{}
			rec := &recorder{}
			cfg := agent.Config{
				Model: rec.wrap(playback([]item{textItem("ok")})),
				Tools: newSet(t, countingTool("a", approval.Always(), ran), countingTool("b", nil, ran), countingTool("c", approval.Always(), ran)),
				Save:  rec.save,
				NewID: sequentialIDs(),
			}
			events, errs := collect(rec, agent.Resume(context.Background(), cfg, pausedHistory(), map[string]agent.Decision{"A": {Approved: true}, "C": {Denial: "no"}}, tt.next...))
			if len(errs) > 0 {
				t.Fatalf("Resume yielded errors %v", errs)
			}
			if len(rec.saved) == 0 || len(rec.saved[0]) != 1+len(tt.next) || rec.saved[0][0].Role != model.RoleTool {
				t.Fatalf("first save %+v, want the decided calls' results, then next", rec.saved)
			}
			if diff := cmp.Diff(tt.next, rec.saved[0][1:]); diff != "" {
				t.Errorf("first save after the results (-want +got):\n%s", diff)
			}
			for _, ev := range events {
				if ev.Type == agent.TextStart && ev.ID != tt.textID {
					t.Errorf("text part id %s, want %s", ev.ID, tt.textID)
				}
			}
			assertValidTranscript(t, rec.requests[0].Messages)
		})
	}
}

// Decide settles a paused step as Resume does and ends the pass without calling the model.
func TestDecideEndsWithoutTheModel(t *testing.T) {
	ran := map[string][]string{}
	rec := &recorder{}
	cfg := agent.Config{
		Model: rec.wrap(playback([]item{textItem("ok")})),
		Tools: newSet(t, countingTool("a", approval.Always(), ran), countingTool("b", nil, ran), countingTool("c", approval.Always(), ran)),
		Save:  rec.save,
		NewID: sequentialIDs(),
	}
	events, errs := collect(rec, agent.Decide(context.Background(), cfg, pausedHistory(), map[string]agent.Decision{"A": {Approved: true}, "C": {Denial: "no"}}))
	if len(errs) > 0 {
		t.Fatalf("Decide yielded errors %v", errs)
	}
	if diff := cmp.Diff([]string{"output A", "denied C", "save", "Finish"}, rec.log); diff != "" {
		t.Errorf("events, saves and model calls (-want +got):\n%s", diff)
	}
	if last := events[len(events)-1]; last.Type != agent.Finish || last.Finish != model.FinishToolCalls {
		t.Errorf("last event %+v, want Finish with reason tool-calls", last)
	}
	if diff := cmp.Diff(map[string][]string{"a": {`{"x":1}`}}, ran); diff != "" {
		t.Errorf("tool runs (-want +got):\n%s", diff)
	}
}
