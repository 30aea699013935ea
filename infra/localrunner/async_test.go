package localrunner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/tool/asynctools"
)

// sameInvocation calls test_async with async: true (same-invocation by default), long enough
// for a status poll to see the turn processing, then answers with what the tool returned.
const sameInvocation = `{
  "name": "same-invocation",
  "model": {"provider": "scripted", "script": [
    {"text": "Starting. ", "toolCalls": [{"name": "test_async", "input": {"echo": "gamma", "delayMs": 600}}]},
    {"text": "The job said {{toolResults}}"}
  ]},
  "tools": {"test_async": {"async": true}}
}`

// dispatcher hands two jobs to the outside worker in one step, then answers with the results.
const dispatcher = `{
  "name": "dispatcher",
  "model": {"provider": "scripted", "script": [
    {"text": "Handing out two jobs. ", "toolCalls": [
      {"name": "test_external_async", "input": {"echo": "alpha"}},
      {"name": "test_external_async", "input": {"echo": "beta"}}
    ]},
    {"text": "The worker answered {{toolResults}}"}
  ]},
  "tools": {"test_external_async": {"async": true, "execution": "external-dispatch"}}
}`

// asyncApprover calls test_async, which needs the user's approval, then answers with what the
// tool returned.
const asyncApprover = `{
  "name": "async-approver",
  "model": {"provider": "scripted", "script": [
    {"toolCalls": [{"name": "test_async", "input": {"echo": "deployed", "delayMs": 300}}]},
    {"text": "Result: {{toolResults}}"}
  ]},
  "tools": {"test_async": {"needsApproval": true}}
}`

// TestAsyncExamples is the "Done when": the runnable examples, built and run as a user runs
// them against make dev, against a runner with its pollers, sweeper and sandbox, each with an
// account of its own.
func TestAsyncExamples(t *testing.T) {
	e := newAsyncEnvOn(t, testenv.Stack(t), withBwrap)
	bin := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin+string(filepath.Separator), "./examples/external-async", "./examples/tool-async", "./examples/appserver-controller", "./examples/subagents", "./examples/workspace")
	build.Dir = testenv.Root(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the examples: %v\n%s", err, out)
	}
	run := func(t *testing.T, name string, args []string, env ...string) string {
		t.Helper()
		_, secret := createAccount(t, e.srv, name)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(bin, name), args...)
		cmd.Dir = testenv.Root(t)
		// The test's environment carries the AWS endpoints of the stand-ins.
		cmd.Env = append(os.Environ(), append([]string{"HARNESS_URL=" + e.srv.URL, "HARNESS_SECRET=" + secret}, env...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v after %s\nstderr:\n%s\nstdout:\n%s", name, err, time.Since(start).Round(time.Millisecond), stderr.String(), stdout.String())
		}
		t.Logf("%s ran in %s", name, time.Since(start).Round(time.Millisecond))
		return stdout.String()
	}

	t.Run("external-async", func(t *testing.T) {
		out := run(t, "external-async", nil, "EXTERNAL_JOBS_QUEUE_URL="+e.stack.Queues["ExternalJobsQueue"])
		lines := strings.Split(out, "\n")
		if !slices.Contains(lines, "status: completed") {
			t.Errorf("the output has no line %q:\n%s", "status: completed", out)
		}
		wantWorkersEchoes(t, lines, out)
		if n := strings.Count(out, "completion answered"); n != 2 {
			t.Errorf("the worker completed %d jobs, want 2; output:\n%s", n, out)
		}
	})

	t.Run("external-async over SSE", func(t *testing.T) {
		out := run(t, "external-async", []string{"-sse"}, "EXTERNAL_JOBS_QUEUE_URL="+e.stack.Queues["ExternalJobsQueue"])
		lines := strings.Split(out, "\n")
		if !slices.Contains(lines, "sse response ended: finish tool-calls") || !slices.Contains(lines, "resumed turn ended: finish stop") {
			t.Errorf("the output has no waiting SSE response or no resumed end:\n%s", out)
		}
		wantWorkersEchoes(t, lines, out)
	})

	for _, mode := range []string{"async", "sse"} {
		t.Run("subagents over "+mode, func(t *testing.T) {
			var args []string
			if mode == "sse" {
				args = []string{"-sse"}
			}
			out := run(t, "subagents", args)
			for _, q := range []string{"How large is the market?", "Which technologies lead it?"} {
				if !strings.Contains(out, `was asked "`+q+`" and answered "Three recent sources agree on it."`) {
					t.Errorf("no child was asked %q and answered; output:\n%s", q, out)
				}
			}
			if !strings.Contains(out, "final text: Both researchers answered:") {
				t.Errorf("the planner's final text is missing; output:\n%s", out)
			}
		})
	}

	t.Run("appserver-controller", func(t *testing.T) {
		out := run(t, "appserver-controller", nil)
		lines := strings.Split(out, "\n")
		if !slices.Contains(lines, "stop_reason: end_turn") {
			t.Errorf("the output has no line %q:\n%s", "stop_reason: end_turn", out)
		}
		if !strings.Contains(out, `tool call lookup_ticket({"id":"LET-123"})`) {
			t.Errorf("the controller was not asked to run lookup_ticket:\n%s", out)
		}
		var final string
		for _, l := range lines {
			if strings.HasPrefix(l, "final text: ") {
				final = l
			}
		}
		if !strings.Contains(final, "Customer cannot connect Slack") {
			t.Errorf("final text line %q, want the controller's ticket; output:\n%s", final, out)
		}
	})

	t.Run("workspace", func(t *testing.T) {
		out := run(t, "workspace", nil)
		lines := strings.Split(out, "\n")
		held := false
		for _, l := range lines {
			held = held || strings.HasPrefix(l, "held for approval: ") && strings.Contains(l, ` bash {"command":"echo \"- ship it\" >> todo.md && wc -l todo.md"}`)
		}
		if !held {
			t.Errorf("the output shows no held bash call:\n%s", out)
		}
		if !strings.Contains(out, "todo.md:\n- write the example\n- run it\n- ship it\nhistory:\n") {
			t.Errorf("the output shows no todo.md of three lines:\n%s", out)
		}
		// Version 0 is the empty tree; then the API's PUT and the approved bash call's commit.
		var history []string
		for _, l := range lines {
			if v, ok := strings.CutPrefix(l, "  version "); ok {
				history = append(history, v)
			}
		}
		if len(history) != 3 || !strings.HasPrefix(history[1], "1 by api: added todo.md") ||
			!strings.HasPrefix(history[2], "2 by tool workspace-example call_") || !strings.HasSuffix(history[2], ": modified todo.md") {
			t.Errorf("the history %q, want version 0, the API's commit of todo.md and the tool call's:\n%s", history, out)
		}
		if !strings.Contains(out, "final text: Done: ") || !strings.Contains(out, "3 todo.md") {
			t.Errorf("the final text does not carry bash's line count:\n%s", out)
		}
	})

	t.Run("tool-async", func(t *testing.T) {
		out := run(t, "tool-async", nil)
		// Each chunk prints as "<seconds>s <json>"; the answer's text comes in deltas.
		var result, done bool
		texts := map[string]string{}
		var last string
		for _, l := range strings.Split(out, "\n") {
			done = done || strings.HasSuffix(l, " [DONE]")
			i := strings.Index(l, "{")
			if i < 0 {
				continue
			}
			var c struct {
				Type  string `json:"type"`
				ID    string `json:"id"`
				Delta string `json:"delta"`
				Data  struct {
					Status   string `json:"status"`
					Response struct {
						Echo string `json:"echo"`
					} `json:"response"`
				} `json:"data"`
			}
			if err := json.Unmarshal([]byte(l[i:]), &c); err != nil {
				continue
			}
			switch c.Type {
			case "data-async-result":
				result = result || c.Data.Status == "completed" && c.Data.Response.Echo == "hello"
			case "text-delta":
				texts[c.ID] += c.Delta
				last = c.ID
			}
		}
		if !result || !done {
			t.Errorf("async result with the echo hello: %v, [DONE]: %v; want both in the output:\n%s", result, done, out)
		}
		if final := texts[last]; !strings.HasPrefix(final, "The job said") || !strings.Contains(final, `{"echo":"hello"}`) {
			t.Errorf("the last text is %q, want the answer carrying the async result; output:\n%s", final, out)
		}
	})
}

// An /async turn whose tool runs async in the same invocation: 202, processing, then completed
// with the answer's text and the turn's messages, the async-results message among them.
func TestAsyncSameInvocation(t *testing.T) {
	e := newAsyncEnv(t)
	agentID := e.agent(t, sameInvocation)
	ev := e.async(t, `{"agentId":"`+agentID+`","message":"run the slow job"}`)
	final, seen := e.waitStatus(t, ev.EventID, store.EventCompleted)
	if !slices.Equal(seen, []string{store.EventProcessing, store.EventCompleted}) {
		t.Errorf("statuses seen %v, want processing then completed", seen)
	}
	if final.EventID != ev.EventID || final.ConversationID != ev.ConversationID {
		t.Errorf("status names event %s of %s, want %s of %s", final.EventID, final.ConversationID, ev.EventID, ev.ConversationID)
	}
	if final.Text == nil || !strings.HasPrefix(*final.Text, "The job said") || !strings.Contains(*final.Text, "gamma") {
		t.Errorf("final status text = %v, want the answer with the tool's echo gamma: %s", final.Text, final.raw)
	}
	if final.Messages == nil {
		t.Fatalf("the final status has no messages: %s", final.raw)
	}
	var kinds []string
	results := 0
	for _, m := range final.Messages {
		kinds = append(kinds, string(m.Role)+"/"+m.Kind)
		if m.Kind == model.KindAsyncResults {
			results++
			if m.Role != model.RoleUser || !strings.Contains(m.Text(), `"asyncToolResults"`) || !strings.Contains(m.Text(), "gamma") {
				t.Errorf("async-results message %+v, want a user message with the tool's result", m)
			}
		}
	}
	if results != 1 || final.Messages[0].Role != model.RoleUser || final.Messages[0].Text() != "run the slow job" {
		t.Errorf("messages %v, want the user's message first and one async-results message", kinds)
	}
	if got := e.conversation(t, ev.ConversationID); len(got) != len(final.Messages) {
		t.Errorf("the conversation has %d messages, the status shows %d: the status should show the whole turn", len(got), len(final.Messages))
	}
}

// A conversation waiting for async tools refuses new messages with 409 naming the calls still
// pending, and takes them again once the calls have completed and the turn has ended.
func TestAsyncWaitingConversationRefusesMessages(t *testing.T) {
	e := newAsyncEnv(t)
	agentID := e.agent(t, dispatcher)
	ev := e.async(t, `{"agentId":"`+agentID+`","message":"go"}`)
	waiting, _ := e.waitStatus(t, ev.EventID, store.EventWaitingAsync)
	if len(waiting.PendingAsyncTools) != 2 {
		t.Fatalf("pendingAsyncTools = %+v, want the two calls", waiting.PendingAsyncTools)
	}
	for _, p := range waiting.PendingAsyncTools {
		if p.ToolName != "test_external_async" || p.ToolCallID == "" || p.ResultID == "" {
			t.Errorf("pending call %+v, want resultId, toolCallId and toolName test_external_async", p)
		}
	}
	jobs := e.jobs(t, 2)

	var pending []string
	for _, p := range waiting.PendingAsyncTools {
		pending = append(pending, p.ResultID)
	}
	refused := func() {
		t.Helper()
		e.refusedWhileWaiting(t, `{"agentId":"`+agentID+`","id":"`+ev.ConversationID+`","message":"are you done?"}`, "pendingAsyncTools", pending)
	}
	refused()

	// One call completed: the other is still pending, and the conversation still refuses.
	first := e.complete(t, jobs[0])
	if first.status != http.StatusAccepted || first.json(t)["status"] != store.EventWaitingAsync || first.json(t)["pending"] != float64(1) {
		t.Fatalf("completing the first job = %d %s, want 202 waiting with 1 pending", first.status, first.body)
	}
	still := e.status(t, ev.EventID)
	if still.Status != store.EventWaitingAsync || len(still.PendingAsyncTools) != 1 || still.PendingAsyncTools[0].ResultID != jobs[1].ResultID {
		t.Errorf("status after the first completion = %s, want waiting with only %s pending", still.raw, jobs[1].ResultID)
	}
	refused() // the conversation's record names the group's calls

	last := e.complete(t, jobs[1])
	if last.status != http.StatusOK || last.json(t)["group"] != "complete" {
		t.Fatalf("completing the last job = %d %s, want 200 with the group complete", last.status, last.body)
	}
	done, _ := e.waitStatus(t, ev.EventID, store.EventCompleted)
	if done.Text == nil || !strings.Contains(*done.Text, "ALPHA") || !strings.Contains(*done.Text, "BETA") {
		t.Errorf("final text %v, want the workers' echoes ALPHA and BETA", done.Text)
	}

	// Usable again: a new message starts a new turn, which hands out new jobs.
	again := e.async(t, `{"agentId":"`+agentID+`","id":"`+ev.ConversationID+`","message":"once more"}`)
	if again.ConversationID != ev.ConversationID {
		t.Errorf("the new turn runs in %s, want %s", again.ConversationID, ev.ConversationID)
	}
	next, _ := e.waitStatus(t, again.EventID, store.EventWaitingAsync)
	if len(next.PendingAsyncTools) != 2 || next.PendingAsyncTools[0].ResultID == jobs[0].ResultID {
		t.Errorf("the new turn waits for %+v, want two new calls", next.PendingAsyncTools)
	}
	for _, j := range e.jobs(t, 2) {
		if res := e.complete(t, j); res.status/100 != 2 {
			t.Fatalf("completing %s = %d %s", j.ResultID, res.status, res.body)
		}
	}
	e.waitStatus(t, again.EventID, store.EventCompleted)
}

// refusedWhileWaiting posts body, a new message on a conversation that waits (for async tools
// or for approvals), to POST /async and requires 409 whose field lists the ids want (resultIds
// or approvalIds), as POST / answers and the README promises: POST /async checks a request the
// way POST / does. A 202 is reported as the production bug it is, after its event has ended.
func (e *asyncEnv) refusedWhileWaiting(t *testing.T, body, field string, want []string) {
	t.Helper()
	res := call(t, e.srv, http.MethodPost, "/async", e.secret, body)
	if res.status == http.StatusAccepted {
		var late started
		_ = json.Unmarshal(res.body, &late)
		st := e.status(t, late.EventID)
		for deadline := time.Now().Add(asyncWait); st.Status == store.EventProcessing && time.Now().Before(deadline); st = e.status(t, late.EventID) {
			time.Sleep(pollEvery)
		}
		t.Errorf("PRODUCTION BUG: POST /async %s on a waiting conversation answered 202 %s; its event then went %s (error %q) "+
			"and the client never learns the %s. Want 409 listing %v before anything is queued, as POST / answers: "+
			"the refusal (turn.Engine.Begin, approvals.go plan) only runs in async-worker (shared/edge/worker)",
			body, res.body, st.Status, st.Error, field, want)
		return
	}
	if res.status != http.StatusConflict {
		t.Errorf("POST /async %s on a waiting conversation = %d %s, want 409", body, res.status, res.body)
		return
	}
	refusal := res.json(t)
	listed, _ := refusal[field].([]any)
	var ids []string
	for _, p := range listed {
		switch v := p.(type) {
		case string:
			ids = append(ids, v)
		case map[string]any:
			for _, k := range []string{"resultId", "approvalId"} {
				if id, ok := v[k].(string); ok {
					ids = append(ids, id)
				}
			}
		}
	}
	want = slices.Sorted(slices.Values(want))
	slices.Sort(ids)
	if msg, _ := refusal["error"].(string); !slices.Equal(ids, want) || msg == "" {
		t.Errorf("409 %s lists %s %v, want %v and an error", res.body, field, ids, want)
	}
}

// resultsFor counts the async-results messages that bring back group's results, and the
// assistant messages with text after the first of them (the answers the model gave to them).
func resultsFor(msgs []model.Message, group string) (results, answers int) {
	at := -1
	for i, m := range msgs {
		if m.Kind == model.KindAsyncResults && strings.Contains(m.Text(), group+".") {
			results++
			if at < 0 {
				at = i
			}
		}
	}
	if at >= 0 {
		for _, m := range msgs[at+1:] {
			if m.Role == model.RoleAssistant && strings.TrimSpace(m.Text()) != "" {
				answers++
			}
		}
	}
	return results, answers
}

// A continuation that SQS delivers again does nothing: after the group's continuation ran, and
// when two copies arrive together while the conversation still waits.
func TestAsyncDuplicateContinuation(t *testing.T) {
	e := newAsyncEnv(t)
	agentID := e.agent(t, dispatcher)
	continuation := func(group string) string {
		b, _ := json.Marshal(map[string]string{"type": "continue", "accountId": e.accountID, "groupId": group})
		return string(b)
	}
	// check requires one results message and one answer for group in the conversation, one
	// continuation run, and the event completed as it was.
	check := func(t *testing.T, ev started, group string, was status) {
		t.Helper()
		results, answers := resultsFor(e.conversation(t, ev.ConversationID), group)
		if results != 1 || answers != 1 {
			t.Errorf("conversation %s has %d async-results messages for group %s and %d answers after them, want 1 and 1", ev.ConversationID, results, group, answers)
		}
		if n := e.logs.count("continuation started", map[string]string{"groupId": group}); n != 1 {
			t.Errorf("the continuation of group %s started %d times, want once", group, n)
		}
		now := e.status(t, ev.EventID)
		if now.Status != store.EventCompleted || now.UpdatedAt != was.UpdatedAt || text(now) != text(was) || len(now.Messages) != len(was.Messages) {
			t.Errorf("event after the duplicates: %s\nwant it as it completed: %s", now.raw, was.raw)
		}
		e.drained(t, "AsyncWorkDeadLetterQueue")
	}

	t.Run("after the continuation ran", func(t *testing.T) {
		ev := e.async(t, `{"agentId":"`+agentID+`","message":"go"}`)
		e.waitStatus(t, ev.EventID, store.EventWaitingAsync)
		jobs := e.jobs(t, 2)
		for _, j := range jobs {
			if res := e.complete(t, j); res.status/100 != 2 {
				t.Fatalf("completing %s = %d %s", j.ResultID, res.status, res.body)
			}
		}
		done, _ := e.waitStatus(t, ev.EventID, store.EventCompleted)
		group := groupOf(t, jobs[0].ResultID)
		e.drained(t, "AsyncWorkQueue")
		e.sendWork(t, continuation(group))
		e.drained(t, "AsyncWorkQueue")
		e.sendWork(t, continuation(group), continuation(group))
		e.drained(t, "AsyncWorkQueue")
		check(t, ev, group, done)
	})

	t.Run("two copies while the conversation waits", func(t *testing.T) {
		ev := e.async(t, `{"agentId":"`+agentID+`","message":"go"}`)
		e.waitStatus(t, ev.EventID, store.EventWaitingAsync)
		jobs := e.jobs(t, 2)
		if res := e.complete(t, jobs[0]); res.status != http.StatusAccepted {
			t.Fatalf("completing the first job = %d %s, want 202", res.status, res.body)
		}
		// The last call is settled straight in the table, so no group check runs and nobody
		// claims the group: the continuation is ours to send, twice at once.
		rows := asynctools.NewStore(e.stack.DB, e.stack.AsyncResultsTable, nil)
		if _, _, err := rows.Settle(context.Background(), jobs[1].ResultID, asynctools.Outcome{Status: asynctools.Completed, Response: json.RawMessage(`{"echo":"BETA"}`)}, time.Now()); err != nil {
			t.Fatal(err)
		}
		group := groupOf(t, jobs[0].ResultID)
		if st := e.status(t, ev.EventID); st.Status != store.EventWaitingAsync || len(st.PendingAsyncTools) != 0 {
			t.Fatalf("before the continuation the event is %s, want waiting with no call pending", st.raw)
		}
		e.sendWork(t, continuation(group), continuation(group))
		done, _ := e.waitStatus(t, ev.EventID, store.EventCompleted)
		if done.Text == nil || !strings.Contains(*done.Text, "ALPHA") || !strings.Contains(*done.Text, "BETA") {
			t.Errorf("final text %v, want both results", done.Text)
		}
		// The copy that found the conversation busy comes back a few seconds later.
		e.drained(t, "AsyncWorkQueue")
		check(t, ev, group, done)
		t.Logf("the copies met: %d found the conversation busy, %d were ignored as duplicates",
			e.logs.count("conversation busy; the message will be retried", nil), e.logs.count("duplicate continuation ignored", map[string]string{"groupId": group}))
	})
}

// An /async turn that needs the user's approval waits for it under its event; approvals posted
// to /async under the same event id answer it, approved or denied, and the event settles with
// the answer; the conversation is usable afterwards.
func TestAsyncApprovals(t *testing.T) {
	e := newAsyncEnv(t)
	agentID := e.agent(t, asyncApprover)
	ask := func(t *testing.T, body string) (started, pendingApproval) {
		t.Helper()
		ev := e.async(t, body)
		waiting, seen := e.waitStatus(t, ev.EventID, store.EventWaiting)
		if seen[0] != store.EventProcessing && seen[0] != store.EventWaiting {
			t.Errorf("statuses seen %v, want processing then waiting_for_approval", seen)
		}
		if len(waiting.PendingApprovals) != 1 {
			t.Fatalf("pendingApprovals = %+v, want one: %s", waiting.PendingApprovals, waiting.raw)
		}
		p := waiting.PendingApprovals[0]
		if !strings.HasPrefix(p.ApprovalID, "apr_") || p.ToolCallID == "" || p.ToolName != "test_async" {
			t.Errorf("pending approval %+v, want approvalId, toolCallId and toolName test_async", p)
		}
		return ev, p
	}
	answer := func(t *testing.T, ev started, p pendingApproval, decision string) status {
		t.Helper()
		again := e.async(t, `{"agentId":"`+agentID+`","id":"`+ev.ConversationID+`","eventId":"`+ev.EventID+`","approvals":[{"approvalId":"`+p.ApprovalID+`",`+decision+`}]}`)
		if again.EventID != ev.EventID || again.ConversationID != ev.ConversationID {
			t.Errorf("the answer runs as event %s of %s, want %s of %s", again.EventID, again.ConversationID, ev.EventID, ev.ConversationID)
		}
		final, seen := e.waitStatus(t, ev.EventID, store.EventCompleted)
		if seen[0] != store.EventProcessing && seen[0] != store.EventCompleted {
			t.Errorf("statuses seen after the answer %v, want processing then completed", seen)
		}
		if final.Text == nil || final.Messages == nil {
			t.Fatalf("the completed status has no text or no messages: %s", final.raw)
		}
		if final.Messages[0].Role != model.RoleUser {
			t.Errorf("the event's messages start with %s, want the user's message that started the turn", final.Messages[0].Role)
		}
		return final
	}
	// toolResult is the result the model was given for the call.
	toolResult := func(msgs []model.Message, callID string) (model.Part, bool) {
		for _, m := range msgs {
			for _, p := range m.Parts {
				if p.Type == model.PartToolResult && p.ToolCallID == callID {
					return p, true
				}
			}
		}
		return model.Part{}, false
	}

	t.Run("approved", func(t *testing.T) {
		ev, p := ask(t, `{"agentId":"`+agentID+`","message":"deploy"}`)
		// While the approval is pending, a new message is refused naming it.
		e.refusedWhileWaiting(t, `{"agentId":"`+agentID+`","id":"`+ev.ConversationID+`","message":"something else"}`, "pendingApprovals", []string{p.ApprovalID})
		final := answer(t, ev, p, `"approved":true`)
		out, ok := toolResult(final.Messages, p.ToolCallID)
		if !ok || out.IsError || !strings.Contains(string(out.Output), `"deployed"`) {
			t.Errorf("tool result %+v (found %v), want the tool's output with its echo", out, ok)
		}
		if !strings.HasPrefix(*final.Text, "Result: ") || !strings.Contains(*final.Text, "deployed") {
			t.Errorf("final text %q, want the answer with the tool's output", *final.Text)
		}
		// The decision counted once: the same approval under the event again is refused.
		res := call(t, e.srv, http.MethodPost, "/async", e.secret, `{"agentId":"`+agentID+`","id":"`+ev.ConversationID+`","eventId":"`+ev.EventID+`","approvals":[{"approvalId":"`+p.ApprovalID+`","approved":true}]}`)
		if res.status != http.StatusConflict || res.json(t)["status"] != store.ApprovalApproved {
			t.Errorf("answering again under the completed event = %d %s, want 409 saying the approval is already approved", res.status, res.body)
		}
		// Usable afterwards.
		next := e.async(t, `{"agentId":"`+agentID+`","id":"`+ev.ConversationID+`","message":"and again"}`)
		st, _ := e.waitStatus(t, next.EventID, store.EventWaiting)
		if len(st.PendingApprovals) != 1 || st.PendingApprovals[0].ApprovalID == p.ApprovalID {
			t.Errorf("a new message after the approval waits for %+v, want one new approval", st.PendingApprovals)
		}
	})

	t.Run("unknown approval", func(t *testing.T) {
		ev, p := ask(t, `{"agentId":"`+agentID+`","message":"deploy"}`)
		// POST / answers a decision on an approval the account does not hold with 404.
		body := `{"agentId":"` + agentID + `","id":"` + ev.ConversationID + `","eventId":"` + ev.EventID + `","approvals":[{"approvalId":"apr_doesnotexist","approved":true}]}`
		res := call(t, e.srv, http.MethodPost, "/async", e.secret, body)
		if res.status == http.StatusAccepted {
			st := e.status(t, ev.EventID)
			for deadline := time.Now().Add(asyncWait); st.Status == store.EventProcessing && time.Now().Before(deadline); st = e.status(t, ev.EventID) {
				time.Sleep(pollEvery)
			}
			// The real approval is still pending in the conversation; can it still answer the event?
			retry := call(t, e.srv, http.MethodPost, "/async", e.secret, strings.Replace(body, "apr_doesnotexist", p.ApprovalID, 1))
			t.Errorf("PRODUCTION BUG: POST /async answering an unknown approval under event %s answered 202 %s and the event went %s (error %q), "+
				"its real approval %s no longer listed; answering that one under the same event then = %d %s. "+
				"Want 404 before anything is queued, as POST / answers, and the event still waiting",
				ev.EventID, res.body, st.Status, st.Error, p.ApprovalID, retry.status, retry.body)
			return
		}
		if res.status != http.StatusNotFound {
			t.Errorf("POST /async answering an unknown approval = %d %s, want 404", res.status, res.body)
		}
		if st := e.status(t, ev.EventID); st.Status != store.EventWaiting || len(st.PendingApprovals) != 1 {
			t.Errorf("after the refused answer the event is %s, want it still waiting for %s", st.raw, p.ApprovalID)
		}
	})

	t.Run("denied", func(t *testing.T) {
		ev, p := ask(t, `{"agentId":"`+agentID+`","message":"deploy"}`)
		final := answer(t, ev, p, `"approved":false,"reason":"not today"`)
		out, ok := toolResult(final.Messages, p.ToolCallID)
		if !ok || strings.Contains(string(out.Output), `"deployed"`) {
			t.Errorf("tool result %+v (found %v), want the denial, not the tool's output", out, ok)
		}
		if !strings.Contains(*final.Text, "denied by the user: not today") {
			t.Errorf("final text %q, want a normal answer carrying the denial", *final.Text)
		}
		// Usable afterwards: a new message runs and is answered by approval again.
		next, q := ask(t, `{"agentId":"`+agentID+`","id":"`+ev.ConversationID+`","message":"please reconsider"}`)
		if next.ConversationID != ev.ConversationID || q.ApprovalID == p.ApprovalID {
			t.Errorf("the new message waits for %s in %s, want a new approval in %s", q.ApprovalID, next.ConversationID, ev.ConversationID)
		}
		final = answer(t, next, q, `"approved":true`)
		if !strings.Contains(*final.Text, "deployed") {
			t.Errorf("final text after approving the new call %q, want the tool's output", *final.Text)
		}
	})
}

// wantWorkersEchoes fails unless the example's last "final text: " line carries both workers'
// answers.
func wantWorkersEchoes(t *testing.T, lines []string, out string) {
	t.Helper()
	var final string
	for _, l := range lines {
		if strings.HasPrefix(l, "final text: ") {
			final = l
		}
	}
	if !strings.Contains(final, "ALPHA") || !strings.Contains(final, "BETA") {
		t.Errorf("final text line %q, want the workers' echoes ALPHA and BETA; output:\n%s", final, out)
	}
}

// Refusals of the async routes: unknown and foreign events are 404, bad /async bodies 400.
func TestAsyncRefusals(t *testing.T) {
	e := newAsyncEnv(t)
	agentID := e.agent(t, dispatcher)
	ev := e.async(t, `{"agentId":"`+agentID+`","message":"go"}`)
	e.waitStatus(t, ev.EventID, store.EventWaitingAsync)

	_, other := createAccount(t, e.srv, "eve")
	for _, tt := range []struct {
		name, secret, path string
		want               int
	}{
		{"unknown event", e.secret, "/status/evt_doesnotexist", http.StatusNotFound},
		{"another account's event", other, "/status/" + ev.EventID, http.StatusNotFound},
		{"no secret", "", "/status/" + ev.EventID, http.StatusUnauthorized},
		{"a 2022-character event id", e.secret, "/status/" + strings.Repeat("e", 2022), http.StatusBadRequest},
	} {
		res := call(t, e.srv, http.MethodGet, tt.path, tt.secret, "")
		if res.status != tt.want {
			t.Errorf("%s: GET %s = %d %s, want %d", tt.name, tt.path, res.status, res.body, tt.want)
		}
		if tt.want == http.StatusNotFound && strings.Contains(string(res.body), ev.ConversationID) {
			t.Errorf("%s: the 404 shows the conversation: %s", tt.name, res.body)
		}
	}

	conversations := testenv.ConversationItems(t, e.stack.DB, e.stack.Tables.Conversations, e.accountID)
	events := testenv.EventKeys(t, e.stack.DB, e.stack.Tables.Events, e.accountID)
	for _, tt := range []struct {
		name, secret, body string
		want               int
		mention, field     string
	}{
		{"malformed JSON", e.secret, `{"agentId":`, http.StatusBadRequest, "JSON", ""},
		{"no agentId", e.secret, `{"message":"hi"}`, http.StatusBadRequest, "agentId", "agentId"},
		{"no message", e.secret, `{"agentId":"` + agentID + `"}`, http.StatusBadRequest, "message", "messages"},
		{"empty message", e.secret, `{"agentId":"` + agentID + `","message":"  "}`, http.StatusBadRequest, "empty", "message"},
		{"message and approvals", e.secret, `{"agentId":"` + agentID + `","id":"c","message":"hi","approvals":[{"approvalId":"apr_x","approved":true}]}`, http.StatusBadRequest, "approvals", "approvals"},
		{"approvals without a conversation", e.secret, `{"agentId":"` + agentID + `","approvals":[{"approvalId":"apr_x","approved":true}]}`, http.StatusBadRequest, "id", "id"},
		{"a key twice", e.secret, `{"agentId":"` + agentID + `","message":"hi","eventId":"e1","eventId":"e2"}`, http.StatusBadRequest, "more than once", "eventId"},
		{"wrong type", e.secret, `{"agentId":"` + agentID + `","message":["hi"]}`, http.StatusBadRequest, "must be a JSON string", "message"},
		{"unknown agent", e.secret, `{"agentId":"nobody","message":"hi"}`, http.StatusNotFound, "nobody", ""},
		{"another account's agent", other, `{"agentId":"` + agentID + `","message":"hi"}`, http.StatusNotFound, "", ""},
		{"no secret", "", `{"agentId":"` + agentID + `","message":"hi"}`, http.StatusUnauthorized, "", ""},
		{"a 450 KiB message", e.secret, `{"agentId":"` + agentID + `","message":"` + strings.Repeat("x", 450<<10) + `"}`, http.StatusRequestEntityTooLarge, "bytes", "message"},
		{"a malformed event id", e.secret, `{"agentId":"` + agentID + `","eventId":"e\n1","message":"hi"}`, http.StatusBadRequest, "eventId", "eventId"},
		{"used event id", e.secret, `{"agentId":"` + agentID + `","eventId":"` + ev.EventID + `","message":"hi"}`, http.StatusConflict, ev.EventID, ""},
	} {
		res := call(t, e.srv, http.MethodPost, "/async", tt.secret, tt.body)
		if res.status != tt.want || !strings.Contains(string(res.body), tt.mention) || res.json(t)["error"] == nil {
			t.Errorf("%s: POST /async = %d %s, want %d with an error mentioning %q", tt.name, res.status, res.body, tt.want, tt.mention)
		}
		if field, _ := res.json(t)["field"].(string); field != tt.field {
			t.Errorf("%s: POST /async named field %q (%s), want %q", tt.name, field, res.body, tt.field)
		}
	}
	if got := testenv.ConversationItems(t, e.stack.DB, e.stack.Tables.Conversations, e.accountID); !slices.Equal(got, conversations) {
		t.Errorf("refused requests changed the conversations: %v, then %v", conversations, got)
	}
	if got := testenv.EventKeys(t, e.stack.DB, e.stack.Tables.Events, e.accountID); !slices.Equal(got, events) {
		t.Errorf("refused requests wrote events: %v, then %v", events, got)
	}

	if n := e.logs.count("turn waits for async tools", nil); n != 1 {
		t.Errorf("%d turns dispatched work, want only the first /async one", n)
	}
}

// An SSE turn may dispatch outside work: its response ends with a finish that says it waits,
// with the pending calls; once the worker completes them the continuation appends to the same
// turn's stream, and the resume route gives the whole turn, up to the final answer.
func TestExternalDispatchOverSSE(t *testing.T) {
	e := newAsyncEnv(t)
	agentID := e.agent(t, dispatcher)
	cs := e.stream(t, `{"agentId":"`+agentID+`","id":"sse-dispatch","message":"go"}`)
	fin := cs[len(cs)-1]
	meta, _ := fin["messageMetadata"].(map[string]any)
	pending, _ := meta["pendingAsyncTools"].([]any)
	if fin["type"] != "finish" || fin["finishReason"] != "tool-calls" || len(pending) != 2 {
		t.Fatalf("the SSE response ended with %v, want a tool-calls finish listing the two dispatched calls", fin)
	}
	for _, j := range e.jobs(t, 2) {
		if res := e.complete(t, j); res.status != http.StatusOK && res.status != http.StatusAccepted {
			t.Fatalf("completing %s = %d %s", j.ResultID, res.status, res.body)
		}
	}
	var resumed []map[string]any
	var resumedBody []byte
	for deadline := time.Now().Add(asyncWait); ; time.Sleep(pollEvery) {
		res := call(t, e.srv, http.MethodGet, "/chat/sse-dispatch/stream", e.secret, "")
		if res.status != http.StatusOK {
			t.Fatalf("resume = %d %s, want 200", res.status, res.body)
		}
		resumed, resumedBody = testenv.Chunks(t, bytes.NewReader(res.body)), res.body
		if last := resumed[len(resumed)-1]; last["type"] == "finish" && last["finishReason"] == "stop" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the resumed turn never reached its final answer; last resume: %v", resumed)
		}
	}
	if got := streamText(resumed); !strings.Contains(got, "ALPHA") || !strings.Contains(got, "BETA") {
		t.Fatalf("the resumed turn's text %q lacks the workers' answers", got)
	}
	// One assistant message across the wait: the waiting part's finish is left out, the
	// continuation's steps follow its tool calls, and the message ends with the final finish.
	if finishes := chunksOf(resumed, "finish"); len(finishes) != 1 || chunksOf(resumed, "start")[0] == nil || len(chunksOf(resumed, "start")) != 1 {
		t.Fatalf("the resumed turn has %d finish and %d start chunks, want one of each", len(finishes), len(chunksOf(resumed, "start")))
	}
	// The AI SDK reads it as one assistant message: both calls with the workers' answers, then
	// the final text.
	out, stderr, err := testenv.CheckUIStream(t, resumedBody)
	if err != nil {
		t.Fatalf("the AI SDK refused the resumed stream: %v\n%s", err, stderr)
	}
	var checked struct {
		Message struct {
			Role  string
			Parts []map[string]any
		}
	}
	if err := json.Unmarshal(out, &checked); err != nil {
		t.Fatal(err)
	}
	var calls int
	var final string
	for _, p := range checked.Message.Parts {
		if p["type"] == "tool-test_external_async" {
			calls++
		}
		if p["type"] == "text" {
			final, _ = p["text"].(string)
		}
	}
	if checked.Message.Role != "assistant" || calls != 2 || !strings.Contains(final, "ALPHA") {
		t.Fatalf("the AI SDK built %+v, want one assistant message with both calls and the final answer", checked.Message)
	}
}

// text is a status's text, empty when it has none.
func text(s status) string {
	if s.Text == nil {
		return ""
	}
	return *s.Text
}
