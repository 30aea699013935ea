package localrunner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/faketavily"
	"github.com/agentharness/harness/infra/mockopenai"
	"github.com/agentharness/harness/infra/testenv"
)

// The agents of the conformance suite, by the names infra/node/appserver-conformance.mjs knows
// them by. Each scripted model plays its script from every new user message.
var conformanceAgents = map[string]string{
	// o: reasons before it answers.
	"thinker": `{"name":"thinker","model":{"provider":"scripted","script":[{"reasoning":"Greet them briefly.","text":"Hello."}]}}`,
	// m: the subagent the delegator calls (the delegator is created after, naming its id).
	"delegatee": `{"name":"delegatee","model":{"provider":"scripted","script":[{"text":"All systems normal."}]}}`,
	// b: calls the controller's lookup_ticket, then answers with what it returned.
	"tickets": `{"name":"tickets","model":{"provider":"scripted","script":[
		{"toolCalls":[{"name":"lookup_ticket","input":{"id":"LET-123"}}]},
		{"text":"Ticket says: {{toolResults}}"}]}}`,
	// c: the same for a ticket the controller reports as missing (is_error).
	"missing": `{"name":"missing","model":{"provider":"scripted","script":[
		{"toolCalls":[{"name":"lookup_ticket","input":{"id":"LET-404"}}]},
		{"text":"Lookup said: {{toolResults}}"}]}}`,
	// d: the same for a call the controller cannot run at all.
	"outage": `{"name":"outage","model":{"provider":"scripted","script":[
		{"toolCalls":[{"name":"lookup_ticket","input":{"id":"LET-500"}}]},
		{"text":"Lookup said: {{toolResults}}"}]}}`,
	// e: calls dispatch_task, which the controller registers under scope "dispatch".
	"dispatcher": `{"name":"dispatcher","model":{"provider":"scripted","script":[
		{"toolCalls":[{"name":"dispatch_task","input":{"task":"restart api"}}]},
		{"text":"Dispatch said: {{toolResults}}"}]}}`,
	// f: calls test_async, which needs approval.
	"approver": `{"name":"approver","model":{"provider":"scripted","script":[
		{"toolCalls":[{"name":"test_async","input":{"delayMs":0,"echo":"deployed"}}]},
		{"text":"Result: {{toolResults}}"}]},
		"tools":{"test_async":{"needsApproval":true}}}`,
	// g: thinks for 20 s, far longer than an abort takes.
	"slow": `{"name":"slow","model":{"provider":"scripted","script":[{"text":"too late","delayMs":20000}]}}`,
	// k: thinks for 3 s, long enough to send another message meanwhile.
	"sluggish": `{"name":"sluggish","model":{"provider":"scripted","script":[{"text":"slow answer","delayMs":3000}]}}`,
	// h: says something and calls a tool that takes 3 s, long enough to reconnect and sync while
	// it runs (and the turn sends nothing).
	"stepper": `{"name":"stepper","model":{"provider":"scripted","script":[
		{"text":"Checking first.","toolCalls":[{"name":"test_async","input":{"delayMs":3000,"echo":"first"}}]},
		{"text":"slow answer"}]},
		"tools":{"test_async":{}}}`,
	// l: the same, ending about a second after its first step.
	"brief": `{"name":"brief","model":{"provider":"scripted","script":[
		{"text":"Checking.","toolCalls":[{"name":"test_async","input":{"delayMs":0,"echo":"away"}}]},
		{"text":"done while away","delayMs":1000}]},
		"tools":{"test_async":{}}}`,
}

type asFrame = map[string]any

// asTurn is a turn as the script reports it: the input_accepted frame and the runtime's
// frames up to its stop_reason and the loop status that goes with it.
type asTurn struct {
	Accepted asFrame
	Frames   []asFrame
}

type asStart struct {
	Response asFrame
	Replay   []asFrame
}

type asToolRequest struct {
	RequestID  string `json:"request_id"`
	ToolName   string `json:"tool_name"`
	Input      map[string]any
	ToolCallID string  `json:"tool_call_id"`
	ScopeID    *string `json:"scope_id"`
	Runtime    map[string]any
}

type asToolTurn struct {
	Start asStart
	asTurn
	Requests []asToolRequest
}

type asApproval struct {
	Requested      asTurn
	ControlRequest asFrame
	Answered       asFrame
	After          []asFrame
}

type conformanceSummary struct {
	Auth struct {
		Connected bool
		Error     string
		Frames    []asFrame
	}
	Info                         asFrame
	Tool, IsError, ProtocolError asToolTurn
	Scoped                       struct {
		Start           asStart
		Plain, Selected struct {
			asTurn
			Requests []asToolRequest
		}
	}
	Approve, Deny asApproval
	ApprovalStart asStart
	Abort         struct {
		Accepted, LoopStatus, Response, Again asFrame
		ElapsedMs                             float64
		Frames                                []asFrame
	}
	Sync struct {
		Accepted, ALoopStatus, Response asFrame
		ASeen, Replay, After            []asFrame
	}
	AbortApproval struct {
		Asked, Next asTurn
		Response    asFrame
		Frames      []asFrame
	}
	AbortTool struct {
		Accepted, Response, Late asFrame
		ElapsedMs                float64
		Frames                   []asFrame
		Requests                 []asToolRequest
	}
	Queue struct {
		First, Second asFrame
		Frames        []asFrame
	}
	SyncEnded struct {
		Ended, Response, Again     asFrame
		ASeen, Replay, ReplayAgain []asFrame
	}
	Subagent     asTurn
	Reregistered struct {
		Start    asFrame
		Accepted asFrame
		Frames   []asFrame
		Requests []asToolRequest
	}
	Files struct {
		Conversation  string
		Sent, Dropped asTurn
		Refused       asFrame
	}
	Providers struct {
		Before, Connected, Listed, NoKey, Bedrock, Disconnected, Again asFrame
	}
	Memory struct {
		First, Second, List, Read, History, Diff, AtRef, Escape, Deleted, DeletedAgain asFrame
	}
	Allowlist struct {
		Start asStart
		asTurn
	}
	Tokens struct {
		Protocol                                  string
		CreateAgent, OtherAgent, BobsConversation asFrame
		Alice, Bob                                asUser
		All, UpdateModel                          asFrame
	}
	Models struct {
		List, Update, Toolset, ToolsetRefused asFrame
		Before, After, Thought                asTurn
	}
}

// asUser is an end user's socket in the tokens scenario: its runtime, its turn's frames and
// what its conversationList() resolved with.
type asUser struct {
	Runtime map[string]any
	Frames  []asFrame
	List    asFrame
}

// asListed is what a conversationList() resolved with, each conversation as "id agent_id
// created_by_id summary"; ok is false unless it succeeded.
func asListed(f asFrame) (list []string, ok bool) {
	convs, _ := f["conversations"].([]any)
	for _, c := range convs {
		list = append(list, strings.Join([]string{asStr(c, "id"), asStr(c, "agent_id"), asStr(c, "created_by_id"), asStr(c, "summary")}, " "))
	}
	return list, f["type"] == "conversation_list_response" && f["success"] == true && asStr(f, "request_id") != ""
}

// asField walks nested objects: asField(f, "delta", "tool_call", "name").
func asField(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func asStr(v any, path ...string) string {
	s, _ := asField(v, path...).(string)
	return s
}

// asDeltas returns the stream_delta deltas of one message_type.
func asDeltas(fs []asFrame, kind string) []asFrame {
	var out []asFrame
	for _, f := range fs {
		if d, ok := f["delta"].(map[string]any); ok && f["type"] == "stream_delta" && d["message_type"] == kind {
			out = append(out, d)
		}
	}
	return out
}

func asFrames(fs []asFrame, typ string) []asFrame {
	var out []asFrame
	for _, f := range fs {
		if f["type"] == typ {
			out = append(out, f)
		}
	}
	return out
}

// asText joins the assistant_message chunks.
func asText(fs []asFrame) string {
	var b strings.Builder
	for _, d := range asDeltas(fs, "assistant_message") {
		b.WriteString(asStr(d, "content"))
	}
	return b.String()
}

func asStopReasons(fs []asFrame) []string {
	out := []string{}
	for _, d := range asDeltas(fs, "stop_reason") {
		out = append(out, asStr(d, "stop_reason"))
	}
	return out
}

// asBrief lists frames as type or stream_delta/message_type, for failure messages.
func asBrief(fs []asFrame) string {
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		if f["type"] == "stream_delta" {
			out = append(out, "stream_delta/"+asStr(f, "delta", "message_type"))
		} else {
			out = append(out, asStr(f, "type"))
		}
	}
	return strings.Join(out, ", ")
}

func asRuntime(f asFrame) string {
	return asStr(f, "runtime", "agent_id") + "/" + asStr(f, "runtime", "conversation_id")
}

// asCheckEnvelopes checks what every runtime event carries: its runtime, a numeric event_seq, an
// RFC 3339 emitted_at and an idempotency_key no other event repeats.
func asCheckEnvelopes(t *testing.T, what, runtime string, fs []asFrame, keys map[string]bool) {
	t.Helper()
	for _, f := range fs {
		switch f["type"] {
		case "stream_delta", "update_loop_status", "update_queue":
		default:
			continue
		}
		if got := asRuntime(f); got != runtime {
			t.Errorf("%s: %s carries runtime %s, want %s", what, f["type"], got, runtime)
		}
		if seq, ok := f["event_seq"].(float64); !ok || seq <= 0 || seq > 1<<53 {
			t.Errorf("%s: %s has event_seq %v, want a positive number a JavaScript client reads exactly (at most 2^53)", what, f["type"], f["event_seq"])
		}
		if _, err := time.Parse(time.RFC3339Nano, asStr(f, "emitted_at")); err != nil {
			t.Errorf("%s: %s has emitted_at %q: %v", what, f["type"], f["emitted_at"], err)
		}
		key := asStr(f, "idempotency_key")
		if key == "" || keys[key] {
			t.Errorf("%s: %s has idempotency_key %q, empty or seen before", what, f["type"], key)
		}
		keys[key] = true
	}
}

// asCheckStart checks a runtime_start_response for agentID in a created conversation, and the
// replay after it: the loop waiting for input, then the queue.
func asCheckStart(t *testing.T, what, agentID string, s asStart) string {
	t.Helper()
	r := s.Response
	conv := asStr(r, "runtime", "conversation_id")
	if r["type"] != "runtime_start_response" || r["success"] != true || asStr(r, "runtime", "agent_id") != agentID || conv == "" {
		t.Fatalf("%s: runtime_start answered %v, want success for agent %s in a conversation", what, r, agentID)
	}
	if asField(r, "created", "agent") != false || asField(r, "created", "conversation") != true {
		t.Errorf("%s: created %v, want the conversation created and the agent not", what, r["created"])
	}
	if asStr(r, "agent", "id") != agentID || asStr(r, "agent", "name") == "" {
		t.Errorf("%s: agent %v, want %s with its name", what, r["agent"], agentID)
	}
	if asStr(r, "conversation", "id") != conv || asStr(r, "conversation", "agent_id") != agentID {
		t.Errorf("%s: conversation %v, want %s of %s", what, r["conversation"], conv, agentID)
	}
	if got := asBrief(s.Replay); got != "update_loop_status, update_queue" {
		t.Errorf("%s: replay after runtime_start_response is [%s], want update_loop_status, update_queue", what, got)
	} else if st := s.Replay[0]["loop_status"]; asStr(st, "status") != "WAITING_ON_INPUT" || len(asRunIDs(s.Replay[0])) != 0 {
		t.Errorf("%s: a new conversation's loop status %v, want WAITING_ON_INPUT with no active run", what, st)
	}
	asCheckEnvelopes(t, what+" replay", agentID+"/"+conv, s.Replay, map[string]bool{})
	return conv
}

// asCheckCallsAnnounced checks that every tool_return_message answers a call that a
// tool_call_message (or, for a held call, an approval_request_message) announced before it.
func asCheckCallsAnnounced(t *testing.T, what string, fs []asFrame) {
	t.Helper()
	announced := map[string]bool{}
	for _, f := range fs {
		if f["type"] != "stream_delta" {
			continue
		}
		switch asStr(f, "delta", "message_type") {
		case "tool_call_message", "approval_request_message":
			announced[asStr(f, "delta", "tool_call", "tool_call_id")] = true
		case "tool_return_message":
			if id := asStr(f, "delta", "tool_call_id"); !announced[id] {
				t.Errorf("%s: tool_return_message %v answers call %q, which no tool_call_message announced; frames %s", what, f["delta"], id, asBrief(fs))
			}
		}
	}
}

// asCheckAccepted checks an input_accepted frame.
func asCheckAccepted(t *testing.T, what, runtime string, f asFrame) {
	t.Helper()
	if f["type"] != "input_accepted" || f["accepted"] != true || asStr(f, "request_id") == "" || asRuntime(f) != runtime {
		t.Errorf("%s: input answered %v, want input_accepted for %s with its request_id", what, f, runtime)
	}
	if d := asStr(f, "disposition"); d != "started" && d != "queued" {
		t.Errorf("%s: disposition %q, want started or queued", what, d)
	}
}

// asCheckToolTurn checks a turn in which the model called one controller tool once: the call and
// its request agree, the return is what the controller answered, and the model's next answer
// carries it.
func asCheckToolTurn(t *testing.T, what, runtime string, r asTurn, reqs []asToolRequest, tool string, input map[string]any, scope, status, ret, inText string) {
	t.Helper()
	asCheckAccepted(t, what, runtime, r.Accepted)
	asCheckEnvelopes(t, what, runtime, r.Frames, map[string]bool{})
	asCheckCallsAnnounced(t, what, r.Frames)
	if len(reqs) != 1 {
		t.Fatalf("%s: %d external_tool_call_requests %+v, want 1", what, len(reqs), reqs)
	}
	q := reqs[0]
	inputJSON, _ := json.Marshal(input)
	gotInput, _ := json.Marshal(q.Input)
	gotScope := ""
	if q.ScopeID != nil {
		gotScope = *q.ScopeID
	}
	if q.ToolName != tool || string(gotInput) != string(inputJSON) || q.RequestID == "" || q.ToolCallID == "" || gotScope != scope ||
		asStr(q.Runtime, "agent_id")+"/"+asStr(q.Runtime, "conversation_id") != runtime {
		t.Errorf("%s: request %+v, want %s %s (scope %q) for %s with a request_id and a tool_call_id", what, q, tool, inputJSON, scope, runtime)
	}
	calls := asDeltas(r.Frames, "tool_call_message")
	if len(calls) != 1 {
		t.Fatalf("%s: %d tool_call_messages, want 1; frames %s", what, len(calls), asBrief(r.Frames))
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(asStr(calls[0], "tool_call", "arguments")), &args); err != nil || asStr(calls[0], "tool_call", "name") != tool ||
		asStr(calls[0], "tool_call", "tool_call_id") != q.ToolCallID || fmt.Sprint(args) != fmt.Sprint(input) {
		t.Errorf("%s: tool_call_message %v, want %s %s as call %s", what, calls[0], tool, inputJSON, q.ToolCallID)
	}
	rets := asDeltas(r.Frames, "tool_return_message")
	if len(rets) != 1 || asStr(rets[0], "tool_call_id") != q.ToolCallID || asStr(rets[0], "status") != status || asStr(rets[0], "tool_return") != ret {
		t.Errorf("%s: tool returns %v, want one for %s with status %s and %q", what, rets, q.ToolCallID, status, ret)
	}
	if text := asText(r.Frames); !strings.Contains(text, inText) {
		t.Errorf("%s: the model answered %q, want it to contain %q", what, text, inText)
	}
	asCheckEnded(t, what, r.Frames, "end_turn")
}

// asCheckEnded checks a turn's frames have the one stop_reason want, without a loop_error, and
// that the last update_loop_status says what the runtime waits for now: WAITING_ON_INPUT with
// no active run, or WAITING_ON_APPROVAL after requires_approval.
// asCheckSameStep checks that the test_async call a client saw live is in a replay once, with
// the same id, name and arguments, and so is its return (echo) when the client saw that too.
func asCheckSameStep(t *testing.T, what string, live, replay []asFrame, echo string) {
	t.Helper()
	kinds := []string{"tool_call_message"}
	if ret := asDeltas(live, "tool_return_message"); len(ret) > 0 {
		if len(ret) != 1 || asStr(ret[0], "status") != "success" || !strings.Contains(asStr(ret[0], "tool_return"), echo) {
			t.Errorf("%s: the call returned %v live, want test_async's echo %q", what, ret, echo)
		}
		kinds = append(kinds, "tool_return_message")
	}
	for _, kind := range kinds {
		want, got := asDeltas(live, kind), asDeltas(replay, kind)
		if len(want) != 1 || len(got) != 1 {
			t.Errorf("%s: %d %s live and %d replayed, want one of each; replayed [%s]", what, len(want), kind, len(got), asBrief(replay))
			continue
		}
		for _, field := range [][]string{{"tool_call", "tool_call_id"}, {"tool_call", "name"}, {"tool_call", "arguments"}, {"tool_call_id"}, {"tool_return"}, {"status"}} {
			if w, g := asField(want[0], field...), asField(got[0], field...); w != g {
				t.Errorf("%s: %s %s is %v replayed, %v live", what, kind, strings.Join(field, "."), g, w)
			}
		}
	}
}

func asCheckEnded(t *testing.T, what string, fs []asFrame, want string) {
	t.Helper()
	if got := asStopReasons(fs); !slices.Equal(got, []string{want}) {
		t.Errorf("%s: stop reasons %v, want [%s]; frames %s", what, got, want, asBrief(fs))
	}
	if errs := asDeltas(fs, "loop_error"); len(errs) > 0 {
		t.Errorf("%s: loop errors %v", what, errs)
	}
	status := "WAITING_ON_INPUT"
	if want == "requires_approval" {
		status = "WAITING_ON_APPROVAL"
	}
	st := asFrames(fs, "update_loop_status")
	if len(st) == 0 {
		t.Errorf("%s: no update_loop_status; frames %s", what, asBrief(fs))
		return
	}
	last := st[len(st)-1]
	if asStr(last, "loop_status", "status") != status || (status == "WAITING_ON_INPUT") != (len(asRunIDs(last)) == 0) {
		t.Errorf("%s: the turn's last loop status is %v, want %s", what, last["loop_status"], status)
	}
}

// asCheckApproval checks one approval round: the turn paused with a control_request and an
// approval_request_message for the same held test_async call, the answer was accepted, and the
// turn ended with end_turn after the tool's return.
func asCheckApproval(t *testing.T, what, runtime string, a asApproval, status, inText string) (approvalID string) {
	t.Helper()
	asCheckAccepted(t, what+" ask", runtime, a.Requested.Accepted)
	asCheckEnded(t, what+" ask", a.Requested.Frames, "requires_approval")
	cr := a.ControlRequest
	approvalID = asStr(cr, "request_id")
	callID := asStr(cr, "request", "tool_call_id")
	if cr["type"] != "control_request" || approvalID == "" || callID == "" || asStr(cr, "request", "subtype") != "can_use_tool" ||
		asStr(cr, "request", "tool_name") != "test_async" || asStr(cr, "request", "input", "echo") != "deployed" {
		t.Errorf("%s: control_request %v, want can_use_tool for test_async with echo deployed", what, cr)
	}
	asks := asDeltas(a.Requested.Frames, "approval_request_message")
	if len(asks) != 1 || asStr(asks[0], "id") != approvalID || asStr(asks[0], "tool_call", "name") != "test_async" || asStr(asks[0], "tool_call", "tool_call_id") != callID {
		t.Errorf("%s: approval requests %v, want one with id %s for call %s", what, asks, approvalID, callID)
	}
	if n := len(asDeltas(a.Requested.Frames, "tool_return_message")); n != 0 {
		t.Errorf("%s: %d tool returns before the answer, want none", what, n)
	}
	asCheckAccepted(t, what+" answer", runtime, a.Answered)
	asCheckEnvelopes(t, what, runtime, slices.Concat(a.Requested.Frames, a.After), map[string]bool{})
	asCheckCallsAnnounced(t, what, slices.Concat(a.Requested.Frames, a.After))
	rets := asDeltas(a.After, "tool_return_message")
	if len(rets) != 1 || asStr(rets[0], "tool_call_id") != callID || asStr(rets[0], "status") != status {
		t.Errorf("%s: tool returns after the answer %v, want one for %s with status %s", what, rets, callID, status)
	}
	if text := asText(a.After); !strings.Contains(text, inText) {
		t.Errorf("%s: the model answered %q, want it to contain %q", what, text, inText)
	}
	asCheckEnded(t, what+" answer", a.After, "end_turn")
	return approvalID
}

// asRunIDs is an update_loop_status's active_run_ids.
func asRunIDs(f asFrame) []any {
	runs, _ := asField(f, "loop_status", "active_run_ids").([]any)
	return runs
}

// asActiveRun reports whether f is an update_loop_status of a running turn.
func asActiveRun(f asFrame) bool {
	runs := asRunIDs(f)
	return f["type"] == "update_loop_status" && len(runs) > 0 && asStr(runs[0]) != ""
}

// TestAppServerConformance runs the official Letta App Server client
// (@letta-ai/letta-code/app-server-client) against the local runner's GET /ws through every
// part of the protocol the harness serves: info, runtime_start with external tools, controller
// tools (text, is_error, a thrown error, a scoped tool with and without its scope), approvals
// (allow and deny), abort_message (of a running turn, a turn held for approval and a turn
// waiting for the controller's tool), sync from a second connection mid-turn, and the queue of
// a runtime that gets a message while it runs.
func TestAppServerConformance(t *testing.T) {
	// o: the switcher's model, an OpenAI-compatible server that answers with the model it was
	// asked for; OPENAI_BASE_URL trusts it (the operator's endpoint), as a local address.
	mock := httptest.NewServer(mockopenai.New(&mockopenai.Options{Script: func(r *mockopenai.Request) mockopenai.Reply {
		return mockopenai.Reply{Text: r.Model + " answers"}
	}}))
	t.Cleanup(mock.Close)
	tavily := httptest.NewServer(faketavily.New(nil))
	t.Cleanup(tavily.Close)
	srv := serve(t, testenv.Stack(t), map[string]string{"TAVILY_BASE_URL": tavily.URL, "OPENAI_BASE_URL": mock.URL + "/v1"})
	_, secret := createAccount(t, srv, "conformance")
	ids := map[string]string{}
	for name, cfg := range conformanceAgents {
		res := call(t, srv, http.MethodPost, "/accounts/me/agents", secret, cfg)
		if res.status != http.StatusCreated {
			t.Fatalf("creating agent %s = %d %s, want 201", name, res.status, res.body)
		}
		if ids[name], _ = res.json(t)["agentId"].(string); ids[name] == "" {
			t.Fatalf("creating agent %s answered no agentId: %s", name, res.body)
		}
	}
	// m: the delegator calls the delegatee, whose id its config names.
	res := call(t, srv, http.MethodPost, "/accounts/me/agents", secret, `{"name":"delegator","model":{"provider":"scripted","script":[
		{"toolCalls":[{"name":"helper","input":{"message":"check the status page"}}]},
		{"text":"Helper said: {{toolResults}}"}]},
		"subagent":{"agents":[{"name":"helper","agentId":"`+ids["delegatee"]+`"}]}}`)
	if ids["delegator"], _ = res.json(t)["agentId"].(string); res.status != http.StatusCreated || ids["delegator"] == "" {
		t.Fatalf("creating the delegator = %d %s, want 201", res.status, res.body)
	}
	ids["switcher"] = createAgent(t, srv, secret, `{"name":"switcher","model":{"provider":"openai","model":"mock-a","apiKey":"k","baseURL":"`+mock.URL+`/v1"}}`)
	// q: an agent whose memory is the workspace "memory"'s.
	if res := call(t, srv, http.MethodPost, "/accounts/me/workspaces", secret, `{"name":"memory"}`); res.status != http.StatusCreated {
		t.Fatalf("creating the memory workspace = %d %s", res.status, res.body)
	}
	ids["rememberer"] = createAgent(t, srv, secret, `{"name":"rememberer","model":{"provider":"scripted","script":[{"text":"ok"}]},"memory":{"workspace":"memory"}}`)
	idsJSON, _ := json.Marshal(ids)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	script := filepath.Join(testenv.Root(t), "infra", "node", "appserver-conformance.mjs")
	cmd := exec.CommandContext(ctx, testenv.Node(t), script, srv.URL, secret, string(idsJSON))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	began := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("the official client failed: %v\nstderr:\n%s\nstdout:\n%s", err, stderr.String(), stdout.String())
	}
	t.Logf("the scenarios took %s", time.Since(began).Round(time.Millisecond))
	var got conformanceSummary
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("client output: %v: %s", err, stdout.String())
	}

	// A wrong secret: the upgrade is refused with 401, and no frame arrives.
	if got.Auth.Connected || !strings.Contains(got.Auth.Error, "401") || len(got.Auth.Frames) != 0 {
		t.Errorf("a wrong secret: connected %v, error %q, frames %v; want connect() to fail with 401 and no frames", got.Auth.Connected, got.Auth.Error, got.Auth.Frames)
	}

	// a. info() resolved (the client checks the shape itself) and says what the harness serves.
	if i := got.Info; i["type"] != "app_server_info_response" || i["success"] != true || asStr(i, "request_id") == "" ||
		asField(i, "capabilities", "runtime_start") != true || asField(i, "capabilities", "runtime_external_tools_update") != true {
		t.Errorf("info() resolved with %v, want success with runtime_start and runtime_external_tools_update", i)
	}

	// b. A controller tool answered with text: the text is the tool's return and reaches the model.
	conv := asCheckStart(t, "tool", ids["tickets"], got.Tool.Start)
	asCheckToolTurn(t, "tool", ids["tickets"]+"/"+conv, got.Tool.asTurn, got.Tool.Requests, "lookup_ticket",
		map[string]any{"id": "LET-123"}, "", "success", "LET-123 is assigned to Support.", "Ticket says: [\"LET-123 is assigned to Support.\"]")
	// The loop: processing with the run, executing the controller's call while it runs, and
	// waiting for input at the end. (The parts of the turn run in different invocations, so the
	// statuses in between are not held to an order.)
	var statuses []string
	executing := false
	for _, f := range asFrames(got.Tool.Frames, "update_loop_status") {
		status := asStr(f, "loop_status", "status")
		statuses = append(statuses, status)
		if status != "WAITING_ON_INPUT" && !asActiveRun(f) {
			t.Errorf("tool: loop status %v has no active run", f)
		}
		if calls, _ := asField(f, "loop_status", "executing_tool_call_ids").([]any); status == "EXECUTING_CLIENT_SIDE_TOOL" {
			executing = len(calls) == 1 && calls[0] == got.Tool.Requests[0].ToolCallID
		}
	}
	if len(statuses) < 3 || statuses[0] != "PROCESSING_API_RESPONSE" || statuses[len(statuses)-1] != "WAITING_ON_INPUT" || !executing {
		t.Errorf("tool: loop statuses %v, want PROCESSING_API_RESPONSE first, EXECUTING_CLIENT_SIDE_TOOL with call %s, WAITING_ON_INPUT last",
			statuses, got.Tool.Requests[0].ToolCallID)
	}

	// c. is_error: a failed return with the controller's text, which the model sees.
	conv = asCheckStart(t, "is_error", ids["missing"], got.IsError.Start)
	asCheckToolTurn(t, "is_error", ids["missing"]+"/"+conv, got.IsError.asTurn, got.IsError.Requests, "lookup_ticket",
		map[string]any{"id": "LET-404"}, "", "error", "LET-404 was not found", "LET-404 was not found")

	// d. The handler threw: a failed return naming the controller's error, which the model sees.
	conv = asCheckStart(t, "protocol error", ids["outage"], got.ProtocolError.Start)
	asCheckToolTurn(t, "protocol error", ids["outage"]+"/"+conv, got.ProtocolError.asTurn, got.ProtocolError.Requests, "lookup_ticket",
		map[string]any{"id": "LET-500"}, "", "error", "the controller could not run the tool: ticket system unavailable", "ticket system unavailable")

	// e. A scoped tool: without its scope the controller is never asked and the model gets an
	// unknown-tool error; with it, the request carries the scope and the result reaches the model.
	conv = asCheckStart(t, "scoped", ids["dispatcher"], got.Scoped.Start)
	rt := ids["dispatcher"] + "/" + conv
	plain := got.Scoped.Plain
	asCheckAccepted(t, "scoped, no scope", rt, plain.Accepted)
	if len(plain.Requests) != 0 || len(asFrames(plain.Frames, "external_tool_call_request")) != 0 {
		t.Errorf("scoped, no scope: the controller was asked %+v, want no external_tool_call_request", plain.Requests)
	}
	rets := asDeltas(plain.Frames, "tool_return_message")
	if len(rets) != 1 || asStr(rets[0], "status") != "error" || !strings.Contains(asStr(rets[0], "tool_return"), "dispatch_task") {
		t.Errorf("scoped, no scope: tool returns %v, want one error naming dispatch_task", rets)
	}
	// The model's call is announced like any other, even though no such tool is available to it.
	calls := asDeltas(plain.Frames, "tool_call_message")
	if len(calls) != 1 || asStr(calls[0], "tool_call", "name") != "dispatch_task" || asStr(calls[0], "tool_call", "arguments") != `{"task":"restart api"}` ||
		(len(rets) == 1 && asStr(calls[0], "tool_call", "tool_call_id") != asStr(rets[0], "tool_call_id")) {
		t.Errorf("scoped, no scope: tool_call_messages %v, want one announcing the model's dispatch_task call {\"task\":\"restart api\"}", calls)
	}
	if text := asText(plain.Frames); !strings.Contains(text, "dispatch_task") || !strings.Contains(text, "error") || strings.Contains(text, "T-9") {
		t.Errorf("scoped, no scope: the model answered %q, want the unknown-tool error naming dispatch_task", text)
	}
	asCheckEnded(t, "scoped, no scope", plain.Frames, "end_turn")
	asCheckToolTurn(t, "scoped, with scope", rt, got.Scoped.Selected.asTurn, got.Scoped.Selected.Requests, "dispatch_task",
		map[string]any{"task": "restart api"}, "dispatch", "success", "queued restart api as T-9", "queued restart api as T-9")

	// f. Approvals: allowed, the tool runs and the model gets its output; denied with a message,
	// the tool does not run, the model is told why, and the turn ends normally.
	conv = asCheckStart(t, "approval", ids["approver"], got.ApprovalStart)
	rt = ids["approver"] + "/" + conv
	allowed := asCheckApproval(t, "allow", rt, got.Approve, "success", "deployed")
	if ret := asDeltas(got.Approve.After, "tool_return_message"); len(ret) == 1 && !strings.Contains(asStr(ret[0], "tool_return"), "deployed") {
		t.Errorf("allow: the tool returned %q, want its echo deployed", asStr(ret[0], "tool_return"))
	}
	denied := asCheckApproval(t, "deny", rt, got.Deny, "error", "not today")
	if allowed == denied {
		t.Errorf("the second turn's approval request reuses id %s", allowed)
	}
	if text := asText(got.Deny.After); strings.Contains(text, `"echo"`) {
		t.Errorf("deny: the model answered %q, want no tool output", text)
	}

	// g. Abort: the running turn stops with cancelled long before the model's 20 s; with nothing
	// running, abort answers aborted false.
	ab := got.Abort
	if !asActiveRun(ab.LoopStatus) || asStr(ab.LoopStatus, "loop_status", "status") != "PROCESSING_API_RESPONSE" {
		t.Errorf("abort: loop status %v, want PROCESSING_API_RESPONSE with the running turn", ab.LoopStatus)
	}
	if r := ab.Response; r["type"] != "abort_message_response" || r["aborted"] != true || r["success"] != true || asStr(r, "request_id") == "" {
		t.Errorf("abort: abort() resolved with %v, want aborted and success", r)
	}
	asCheckEnded(t, "abort", ab.Frames, "cancelled")
	asCheckEnvelopes(t, "abort", asRuntime(ab.Accepted), ab.Frames, map[string]bool{})
	if !strings.HasPrefix(asRuntime(ab.Accepted), ids["slow"]+"/") {
		t.Errorf("abort: input_accepted %v, want it for agent %s", ab.Accepted, ids["slow"])
	}
	if text := asText(ab.Frames); text != "" {
		t.Errorf("abort: the model still answered %q", text)
	}
	if ab.ElapsedMs > 10000 {
		t.Errorf("abort: stop_reason cancelled came %.0f ms after abort(), want it well before the model's 20 s", ab.ElapsedMs)
	}
	if r := ab.Again; r["type"] != "abort_message_response" || r["aborted"] != false || r["success"] != true {
		t.Errorf("abort with nothing running resolved with %v, want success with aborted false", r)
	}

	// h. Sync from a new connection while the turn's tool runs: the connection gets the loop
	// status and the turn so far as client A saw it (replayed from the turn's log, though the
	// turn sends nothing meanwhile), then the rest live: every frame once, in order.
	sy := got.Sync
	rt = asRuntime(sy.ALoopStatus)
	if !asActiveRun(sy.ALoopStatus) || !strings.HasPrefix(rt, ids["stepper"]+"/") {
		t.Errorf("sync: client A saw loop status %v, want the running turn of %s", sy.ALoopStatus, ids["stepper"])
	}
	if text := asText(sy.ASeen); text != "Checking first." {
		t.Errorf("sync: client A saw %q before it closed, want the first step's text alone", text)
	}
	if r := sy.Response; r["type"] != "sync_response" || r["success"] != true || asStr(r, "request_id") == "" {
		t.Errorf("sync: sync() resolved with %v, want success", r)
	}
	replayed := asFrames(sy.Replay, "update_loop_status")
	if len(replayed) == 0 || !asActiveRun(replayed[0]) || asStr(replayed[0], "loop_status", "status") != "PROCESSING_API_RESPONSE" ||
		!slices.Equal(asRunIDs(replayed[0]), asRunIDs(sy.ALoopStatus)) {
		t.Errorf("sync: replay [%s] with loop statuses %v, want PROCESSING_API_RESPONSE with client A's run %v", asBrief(sy.Replay), replayed, asRunIDs(sy.ALoopStatus))
	}
	whole := slices.Concat(sy.Replay, sy.After)
	asCheckEnvelopes(t, "sync", rt, whole, map[string]bool{})
	if text := asText(whole); text != "Checking first.slow answer" {
		t.Errorf("sync: client B got the answer %q, want %q (the first step once, then the rest)", text, "Checking first.slow answer")
	}
	asCheckSameStep(t, "sync", sy.ASeen, whole, "first")
	if ret := asDeltas(sy.After, "tool_return_message"); len(ret) != 1 || !strings.Contains(asStr(ret[0], "tool_return"), "first") {
		t.Errorf("sync: client B got the tool's returns %v live, want test_async's echo once", ret)
	}
	asCheckEnded(t, "sync", sy.After, "end_turn")

	// l. A turn that ended while nobody was connected: the next sync replays it whole, ending
	// with its stop_reason, before it answers; a second sync replays nothing.
	se := got.SyncEnded
	if asStr(se.Ended, "status") != "completed" {
		t.Errorf("syncEnded: the turn ended %v, want completed", se.Ended)
	}
	if r := se.Response; r["type"] != "sync_response" || r["success"] != true {
		t.Errorf("syncEnded: sync() resolved with %v, want success", r)
	}
	if text := asText(se.Replay); text != "Checking.done while away" {
		t.Errorf("syncEnded: the replay says %q, want %q; frames %s", text, "Checking.done while away", asBrief(se.Replay))
	}
	asCheckSameStep(t, "syncEnded", se.ASeen, se.Replay, "away")
	asCheckEnded(t, "syncEnded", se.Replay, "end_turn")
	if r := se.Again; r["type"] != "sync_response" || r["success"] != true {
		t.Errorf("syncEnded: the second sync() resolved with %v, want success", r)
	}
	if deltas := asFrames(se.ReplayAgain, "stream_delta"); len(deltas) != 0 {
		t.Errorf("syncEnded: the second sync replayed [%s], want no stream_delta (the turn was seen)", asBrief(deltas))
	}
	if st := asFrames(se.ReplayAgain, "update_loop_status"); len(st) != 1 || asStr(st[0], "loop_status", "status") != "WAITING_ON_INPUT" {
		t.Errorf("syncEnded: the second sync sent loop statuses %v, want WAITING_ON_INPUT", st)
	}

	// t. Tools registered twice for one runtime (a reconnected controller) make no clash: the
	// turn runs, and its call is asked of a controller and answered.
	rr := got.Reregistered
	if rr.Start["success"] != true || rr.Accepted["accepted"] != true || len(rr.Requests) != 1 || rr.Requests[0].ToolName != "lookup_ticket" {
		t.Errorf("reregistered: start %v, accepted %v, requests %+v, want the turn to run and ask for lookup_ticket once", rr.Start, rr.Accepted, rr.Requests)
	}
	asCheckEnded(t, "reregistered", rr.Frames, "end_turn")
	if text := asText(rr.Frames); !strings.Contains(text, "LET-7 is closed.") {
		t.Errorf("reregistered: the model answered %q, want the tool's answer", text)
	}

	// s. Files in create_message: the base64 image is the conversation's file, read back as
	// the HTTP routes' are; an image by URL is refused, or left out under "drop".
	asCheckEnded(t, "files", got.Files.Sent.Frames, "end_turn")
	asCheckEnded(t, "files, dropped", got.Files.Dropped.Frames, "end_turn")
	if got.Files.Refused["accepted"] != false || !strings.Contains(asStr(got.Files.Refused, "error"), "does not fetch URLs") {
		t.Errorf("files, an image by URL: %v, want refused, saying the harness fetches no URL", got.Files.Refused)
	}
	res = call(t, srv, http.MethodGet, "/conversations/"+got.Files.Conversation+"/messages", secret, "")
	var read struct{ Messages []map[string]any }
	if err := json.Unmarshal(res.body, &read); err != nil || res.status != http.StatusOK {
		t.Fatalf("GET the files conversation's messages = %d %s", res.status, res.body)
	}
	var users [][]string
	for _, m := range read.Messages {
		if m["role"] == "user" {
			users = append(users, partTypes(m))
		}
	}
	if want := [][]string{{"text", "file"}, {"text"}}; !slices.EqualFunc(users, want, slices.Equal) {
		t.Errorf("files: the user messages read back have parts %v, want %v (the image kept, the dropped one left out)", users, want)
	}

	// r. Providers: the account's own keys, listed, connected, refused and disconnected.
	asCheckProviders(t, got.Providers.Before, got.Providers.Connected, got.Providers.Listed, got.Providers.NoKey,
		got.Providers.Bedrock, got.Providers.Disconnected, got.Providers.Again)

	// q. Memory: the agent's memory files, their history, a commit's diff and a file at a
	// commit, through the official client's request().
	asCheckMemory(t, ids["rememberer"], got.Memory.First, got.Memory.Second, got.Memory.List, got.Memory.Read,
		got.Memory.History, got.Memory.Diff, got.Memory.AtRef, got.Memory.Escape, got.Memory.Deleted, got.Memory.DeletedAgain)

	// p. client_tool_allowlist narrows the agent's tools for the turn: the approval-gated
	// test_async left out, the model's call of it is an unknown tool's error and nothing is held.
	conv = asCheckStart(t, "allowlist", ids["approver"], got.Allowlist.Start)
	asCheckAccepted(t, "allowlist", ids["approver"]+"/"+conv, got.Allowlist.Accepted)
	if held := asFrames(got.Allowlist.Frames, "control_request"); len(held) != 0 {
		t.Errorf("allowlist: the turn asked for approval %v, want the call refused as an unknown tool", held)
	}
	if rets := asDeltas(got.Allowlist.Frames, "tool_return_message"); len(rets) != 1 || asStr(rets[0], "status") != "error" || !strings.Contains(asStr(rets[0], "tool_return"), "test_async") {
		t.Errorf("allowlist: tool returns %v, want one error naming test_async", rets)
	}
	asCheckEnded(t, "allowlist", got.Allowlist.Frames, "end_turn")

	// m. A subagent call: update_subagent_state snapshots reach the client, the child running
	// then completed, naming its thread and its caller's conversation; the answer carries the
	// child's.
	sub := got.Subagent
	asCheckEnded(t, "subagent", sub.Frames, "end_turn")
	var states []string
	var last map[string]any
	for _, f := range asFrames(sub.Frames, "update_subagent_state") {
		list, _ := f["subagents"].([]any)
		if len(list) != 1 {
			t.Fatalf("subagent: update_subagent_state %v, want the one call", f)
		}
		last, _ = list[0].(map[string]any)
		states = append(states, asStr(last, "status"))
	}
	if len(states) < 2 || states[0] != "running" || states[len(states)-1] != "completed" {
		t.Errorf("subagent: states %v, want running first and completed last", states)
	}
	if !strings.HasPrefix(asStr(last, "conversation_id"), "conv_sub_") || asStr(last, "parent_conversation_id") != asStr(sub.Accepted, "runtime", "conversation_id") ||
		asStr(last, "subagent_type") != "helper" || asStr(last, "description") != "check the status page" {
		t.Errorf("subagent: the last snapshot %v, want the child's thread, the caller's conversation, the tool and the task", last)
	}
	if text := asText(sub.Frames); !strings.Contains(text, "All systems normal.") {
		t.Errorf("subagent: the model answered %q, want the child's answer in it", text)
	}

	// i. Abort while the turn is held for approval: the held call is denied as cancelled and
	// the turn ends with stop_reason cancelled before abort() resolves; a new message is then
	// accepted and runs (it is not refused for pending approvals).
	aa := got.AbortApproval
	asCheckEnded(t, "abort approval: ask", aa.Asked.Frames, "requires_approval")
	if r := aa.Response; r["type"] != "abort_message_response" || r["aborted"] != true || r["success"] != true {
		t.Errorf("abort approval: abort() resolved with %v, want aborted and success", r)
	}
	asCheckEnded(t, "abort approval", aa.Frames, "cancelled")
	held := asDeltas(aa.Asked.Frames, "tool_call_message")
	returns := asDeltas(aa.Frames, "tool_return_message")
	if len(held) != 1 || len(returns) != 1 || asStr(returns[0], "tool_call_id") != asStr(held[0], "tool_call", "tool_call_id") || asStr(returns[0], "status") != "error" {
		t.Errorf("abort approval: tool returns %v after the call %v, want the held call returned as an error", returns, held)
	}
	if text := asText(aa.Frames); text != "" {
		t.Errorf("abort approval: the model answered %q after the abort, want no model call", text)
	}
	asCheckAccepted(t, "abort approval: next message", asRuntime(aa.Asked.Accepted), aa.Next.Accepted)
	asCheckEnded(t, "abort approval: next message", aa.Next.Frames, "requires_approval")

	// j. Abort while the turn waits for the controller's tool: it ends with cancelled well
	// before any answer, the model is not called again, and the late answer is refused.
	at := got.AbortTool
	if r := at.Response; r["type"] != "abort_message_response" || r["aborted"] != true || r["success"] != true {
		t.Errorf("abort tool: abort() resolved with %v, want aborted and success", r)
	}
	asCheckEnded(t, "abort tool", at.Frames, "cancelled")
	if text := asText(at.Frames); text != "" {
		t.Errorf("abort tool: the model answered %q after the abort, want no model call", text)
	}
	if len(at.Requests) != 1 {
		t.Fatalf("abort tool: the handler was asked %d times, want once", len(at.Requests))
	}
	var cancelled bool
	for _, d := range asDeltas(at.Frames, "tool_return_message") {
		cancelled = cancelled || (asStr(d, "tool_call_id") == at.Requests[0].ToolCallID && asStr(d, "status") == "error" && strings.Contains(asStr(d, "tool_return"), "aborted"))
	}
	if !cancelled {
		t.Errorf("abort tool: frames [%s], want the waiting call %s returned as cancelled", asBrief(at.Frames), at.Requests[0].ToolCallID)
	}
	if at.ElapsedMs > 10000 {
		t.Errorf("abort tool: stop_reason cancelled came %.0f ms after abort(), want it at once", at.ElapsedMs)
	}
	if l := at.Late; l["success"] != false || !strings.Contains(asStr(l, "error"), "already cancelled") {
		t.Errorf("abort tool: the late answer got %v, want it refused as already cancelled", l)
	}

	// k. The queue: the second message is queued while the first runs, update_queue shows it
	// with its client_message_id, and the next update_queue says it was dequeued when it
	// started; both turns end.
	q := got.Queue
	if q.First["disposition"] != "started" || q.Second["disposition"] != "queued" || q.Second["accepted"] != true {
		t.Errorf("queue: dispositions %v and %v, want started then queued", q.First["disposition"], q.Second)
	}
	updates := asFrames(q.Frames, "update_queue")
	listed, dequeued := -1, -1
	for i, f := range updates {
		items, _ := f["queue"].([]any)
		removed, _ := f["removed"].([]any)
		if len(items) == 1 && asStr(items[0], "client_message_id") == "cm-second" && asStr(items[0], "kind") == "message" &&
			asStr(items[0], "content") == "Then answer again" && asStr(items[0], "id") == asStr(q.Second, "run_id") && listed < 0 {
			listed = i
		}
		if len(items) == 0 && len(removed) == 1 && asStr(removed[0], "client_message_id") == "cm-second" && asStr(removed[0], "disposition") == "dequeued" {
			dequeued = i
		}
	}
	if listed < 0 || dequeued < listed {
		t.Errorf("queue: update_queue frames %v, want the queued message listed, then dequeued", updates)
	}
	if got := asStopReasons(q.Frames); !slices.Equal(got, []string{"end_turn", "end_turn"}) {
		t.Errorf("queue: stop reasons %v, want both turns to end", got)
	}

	// n. End-user tokens on browser sockets: the upgrade answered the harness's subprotocol;
	// create_agent, another agent and another end user's conversation are refused; each end
	// user's conversationList() lists its own conversation alone, the secret's both, newest
	// first, each with the end user that made it.
	tk := got.Tokens
	if tk.Protocol != "harness" {
		t.Errorf("tokens: the socket's subprotocol is %q, want harness", tk.Protocol)
	}
	if r := tk.CreateAgent; r["success"] != false || !strings.Contains(asStr(r, "error"), "create_agent") {
		t.Errorf("tokens: create_agent answered %v, want it refused", r)
	}
	if r, want := tk.OtherAgent, "agent "+ids["tickets"]+" not found"; r["success"] != false || asStr(r, "error") != want {
		t.Errorf("tokens: another agent answered %v, want %q", r, want)
	}
	aliceConv, bobConv := asStr(tk.Alice.Runtime, "conversation_id"), asStr(tk.Bob.Runtime, "conversation_id")
	if r, want := tk.BobsConversation, "conversation "+bobConv+" not found"; r["success"] != false || asStr(r, "error") != want {
		t.Errorf("tokens: Bob's conversation answered Alice %v, want %q", r, want)
	}
	asCheckEnded(t, "tokens: alice", tk.Alice.Frames, "end_turn")
	asCheckEnded(t, "tokens: bob", tk.Bob.Frames, "end_turn")
	aliceLine := aliceConv + " " + ids["delegatee"] + " alice Hi, I am alice"
	bobLine := bobConv + " " + ids["delegatee"] + " bob Hi, I am bob"
	for _, c := range []struct {
		who  string
		got  asFrame
		want []string
	}{
		{"alice", tk.Alice.List, []string{aliceLine}},
		{"bob", tk.Bob.List, []string{bobLine}},
		{"the secret", tk.All, []string{bobLine, aliceLine}},
	} {
		if list, ok := asListed(c.got); !ok || !slices.Equal(list, c.want) {
			t.Errorf("tokens: %s's conversationList() resolved with %v, want %q", c.who, c.got, c.want)
		}
	}
	if r := tk.UpdateModel; r["type"] != "update_model_response" || r["success"] != false || !strings.Contains(asStr(r, "error"), "end-user token may not change the agent's model") {
		t.Errorf("tokens: alice's update_model answered %v, want it refused", r)
	}

	// o. The models: list_models lists the catalogue, the scripted model available without a
	// key; update_model switches the runtime's agent to gpt-4.1-mini with high reasoning effort,
	// keeping its endpoint and key, and the next turn runs on it; update_toolset takes auto and refuses codex.
	m := got.Models
	handles := map[string]asFrame{}
	entries, _ := m.List["entries"].([]any)
	for _, e := range entries {
		handles[asStr(e, "handle")] = e.(asFrame)
	}
	if m.List["success"] != true || asStr(m.List, "request_id") == "" || len(handles) < 10 ||
		asField(handles["openai/gpt-4.1-mini"], "model", "contextWindow") != float64(1047576) ||
		asField(handles["openai/gpt-4.1-mini"], "model", "pricing", "inputPerMTok") != 0.4 ||
		!slices.Contains(asStrings(m.List["available_handles"]), "scripted/scripted") {
		t.Errorf("models: list_models answered %v, want the catalogue with gpt-4.1-mini's window and price, and scripted available", m.List)
	}
	if text := asText(m.Before.Frames); text != "mock-a answers" {
		t.Errorf("models: the turn before update_model said %q, want the first model's answer", text)
	}
	if r := m.Update; r["success"] != true || r["applied_to"] != "agent" || r["model_handle"] != "openai/gpt-4.1-mini" || r["model_id"] != "gpt-4.1-mini" || asStr(r, "runtime", "agent_id") != ids["switcher"] {
		t.Errorf("models: update_model answered %v, want it applied to the agent", r)
	}
	if text := asText(m.After.Frames); text != "gpt-4.1-mini answers" {
		t.Errorf("models: the turn after update_model said %q, want gpt-4.1-mini's answer", text)
	}
	res = call(t, srv, http.MethodGet, "/accounts/me/agents/"+ids["switcher"], secret, "")
	if model, _ := res.json(t)["config"].(map[string]any)["model"].(map[string]any); model["model"] != "gpt-4.1-mini" || model["baseURL"] != mock.URL+"/v1" ||
		asStr(model, "reasoning", "effort") != "high" {
		t.Errorf("models: the switcher's stored model block is %v, want gpt-4.1-mini on the same endpoint, reasoning with high effort", model)
	}
	reasoning, answers := asDeltas(m.Thought.Frames, "reasoning_message"), asDeltas(m.Thought.Frames, "assistant_message")
	if len(reasoning) != 1 || asStr(reasoning[0], "reasoning") != "Greet them briefly." || asStr(reasoning[0], "source") != "reasoner_model" || asText(m.Thought.Frames) != "Hello." ||
		len(answers) == 0 || slices.IndexFunc(m.Thought.Frames, func(f asFrame) bool { return asStr(f, "delta", "message_type") == "reasoning_message" }) >
		slices.IndexFunc(m.Thought.Frames, func(f asFrame) bool { return asStr(f, "delta", "message_type") == "assistant_message" }) {
		t.Errorf("models: the thinker's turn streamed reasoning %v and text %q, want one reasoning_message before the answer", reasoning, asText(m.Thought.Frames))
	}
	if r := m.Toolset; r["success"] != true || r["current_toolset"] != "default" || r["current_toolset_preference"] != "auto" {
		t.Errorf("models: update_toolset auto answered %v, want the default toolset", r)
	}
	if r := m.ToolsetRefused; r["success"] != false || !strings.Contains(asStr(r, "error"), "config.tools") {
		t.Errorf("models: update_toolset codex answered %v, want it refused naming config.tools", r)
	}
}

// asStrings is a JSON array of strings.
func asStrings(v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, s := range list {
		if s, ok := s.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// asCheckMemory checks the memory scenario's answers.
func asCheckMemory(t *testing.T, agentID string, first, second, list, read, history, diff, atRef, escape, deleted, deletedAgain asFrame) {
	t.Helper()
	for name, f := range map[string]asFrame{"first write": first, "second write": second, "list": list, "read": read, "history": history, "diff": diff, "at ref": atRef, "delete": deleted, "second delete": deletedAgain} {
		if f["success"] != true {
			t.Errorf("memory, %s: %v, want success", name, f)
		}
	}
	if first["committed"] != true || asStr(first, "commit_sha") == "" || asStr(second, "commit_sha") == asStr(first, "commit_sha") {
		t.Errorf("memory writes %v and %v, want two commits", first, second)
	}
	entries, _ := list["entries"].([]any)
	if len(entries) != 1 || asStr(entries[0], "relative_path") != "system/persona.md" || asField(entries[0], "is_system") != true ||
		asStr(entries[0], "content") != "I am terse.\nI like coffee.\n" {
		t.Errorf("memory, list: %v, want the pinned persona with its latest content", list)
	}
	if asStr(read, "content") != "I am terse.\nI like coffee.\n" || asStr(read, "encoding") != "utf8" || asStr(read, "agent_id") != agentID {
		t.Errorf("memory, read: %v", read)
	}
	commits, _ := history["commits"].([]any)
	if len(commits) != 2 || asStr(commits[0], "sha") != asStr(second, "commit_sha") || asStr(commits[1], "sha") != asStr(first, "commit_sha") {
		t.Errorf("memory, history: %v, want the two writes, newest first", history)
	}
	want := "diff --git a/system/persona.md b/system/persona.md\n--- a/system/persona.md\n+++ b/system/persona.md\n@@ -1,2 +1,2 @@\n I am terse.\n-I like tea.\n+I like coffee.\n"
	if asStr(diff, "diff") != want {
		t.Errorf("memory, diff:\n%s\nwant:\n%s", asStr(diff, "diff"), want)
	}
	if asStr(atRef, "content") != "I am terse.\nI like tea.\n" {
		t.Errorf("memory, the file at the first commit: %v", atRef)
	}
	if escape["success"] != false || !strings.Contains(asStr(escape, "error"), "path") {
		t.Errorf("memory, a path out of the folder: %v, want refused naming path", escape)
	}
	if deleted["committed"] != true || deletedAgain["committed"] != false {
		t.Errorf("memory, deletes: %v then %v, want a commit then none", deleted, deletedAgain)
	}
}

// asCheckProviders checks the providers scenario's answers.
func asCheckProviders(t *testing.T, before, connected, listed, noKey, bedrock, disconnected, again asFrame) {
	t.Helper()
	openai := func(f asFrame) map[string]any {
		list, _ := f["providers"].([]any)
		for _, p := range list {
			if e, _ := p.(map[string]any); e["id"] == "openai" {
				c, _ := e["connected"].(map[string]any)
				return c
			}
		}
		t.Errorf("providers: no openai entry in %v", f)
		return nil
	}
	for name, f := range map[string]asFrame{"list": before, "connect": connected, "list after": listed, "disconnect": disconnected, "disconnect again": again} {
		if f["success"] != true {
			t.Errorf("providers, %s: %v, want success", name, f)
		}
	}
	if c := openai(before); c["is_connected"] != false {
		t.Errorf("providers, before: openai %v, want not connected", c)
	}
	if c := openai(listed); c["is_connected"] != true || c["base_url"] != "https://proxy.example/v1" || connected["models_may_have_changed"] != true {
		t.Errorf("providers, after connecting: openai %v (connect %v), want connected with its base URL", c, connected)
	}
	if noKey["success"] != false || !strings.Contains(asStr(noKey, "error"), "fields.apiKey") {
		t.Errorf("providers, no key: %v, want refused naming fields.apiKey", noKey)
	}
	if bedrock["success"] != false || !strings.Contains(asStr(bedrock, "error"), "bedrock") {
		t.Errorf("providers, bedrock: %v, want refused", bedrock)
	}
	if c := openai(disconnected); c["is_connected"] != false || disconnected["models_may_have_changed"] != true || again["models_may_have_changed"] != false {
		t.Errorf("providers, disconnects: %v then %v, want openai gone, then nothing to change", disconnected, again)
	}
}
