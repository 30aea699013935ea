package localrunner_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/faketavily"
	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/store"
)

// factFinder answers every message with one fact.
const factFinder = `{
  "name": "fact-finder",
  "model": {"provider": "scripted", "script": [{"text": "The answer is 42."}]}
}`

// planner calls the agent tools named in calls in one step, then answers with their results.
func planner(subagent string, calls ...string) string {
	return `{
  "name": "planner",
  "model": {"provider": "scripted", "script": [
    {"text": "Asking. ", "toolCalls": [` + strings.Join(calls, ",") + `]},
    {"text": "Planner heard: {{toolResults}}"}
  ]},
  "subagent": ` + subagent + `
}`
}

// ask is one scripted call of the agent tool name with message.
func ask(name, message string) string {
	return `{"name": "` + name + `", "input": {"message": "` + message + `"}}`
}

// answered matches a completed subagent answer in a tool result or an async results message.
var answered = regexp.MustCompile(`"threadId":"(conv_sub_[0-9a-f]+)","status":"completed"`)

// threadIDs are the conversations of the completed subagent answers a turn's messages carry,
// inline (blocking calls) or in async results (non-blocking ones), each once.
func threadIDs(t *testing.T, msgs []model.Message) []string {
	t.Helper()
	seen := map[string]bool{}
	var out []string
	for _, m := range msgs {
		texts := []string{m.Text()}
		for _, p := range m.Parts {
			if p.Type == model.PartToolResult && !p.IsError {
				texts = append(texts, string(p.Output))
			}
		}
		for _, text := range texts {
			for _, sub := range answered.FindAllStringSubmatch(text, -1) {
				if !seen[sub[1]] {
					seen[sub[1]] = true
					out = append(out, sub[1])
				}
			}
		}
	}
	return out
}

// wantUsageRollsUp requires the caller's turn to report its own model usage plus every
// subagent's.
func (e *asyncEnv) wantUsageRollsUp(t *testing.T, final status, threads []string) {
	t.Helper()
	var want model.Usage
	add := func(msgs []model.Message) {
		for _, m := range msgs {
			if m.Usage != nil {
				want = want.Add(*m.Usage)
			}
		}
	}
	add(final.Messages)
	own := want
	for _, id := range threads {
		add(e.conversation(t, id))
	}
	if final.Usage != want || want == own {
		t.Errorf("the turn reports usage %+v, want its own %+v plus its subagents', %+v", final.Usage, own, want)
	}
}

// A blocking agent tool runs the other agent's turn inside the call, in a conversation of its
// own, and gives its answer to the caller's model.
func TestBlockingSubagent(t *testing.T) {
	e := newAsyncEnv(t)
	finder := e.agent(t, factFinder)
	caller := e.agent(t, planner(`{"agents": [{"name": "finder", "agentId": "`+finder+`", "description": "Finds facts."}]}`, ask("finder", "what is the answer")))
	ev := e.async(t, `{"agentId":"`+caller+`","message":"plan it"}`)
	final, _ := e.waitStatus(t, ev.EventID, store.EventCompleted)
	if final.Text == nil || !strings.Contains(*final.Text, "The answer is 42.") {
		t.Fatalf("the caller's answer %v does not carry the subagent's: %s", final.Text, final.raw)
	}
	threads := threadIDs(t, final.Messages)
	if len(threads) != 1 || threads[0] == ev.ConversationID {
		t.Fatalf("threads %v, want the subagent's own conversation: %s", threads, final.raw)
	}
	child := e.conversation(t, threads[0])
	if len(child) != 2 || child[0].Role != model.RoleUser || child[0].Text() != "what is the answer" ||
		child[1].Role != model.RoleAssistant || child[1].Text() != "The answer is 42." {
		t.Errorf("the subagent's conversation holds %+v, want the caller's message and its answer", child)
	}
	e.wantUsageRollsUp(t, final, threads)
	if len(final.Children) != 1 || final.Children[0].ThreadID != threads[0] || final.Children[0].Agent != "finder" || final.Children[0].EventID == "" {
		t.Fatalf("the status lists children %+v, want the one blocking call to finder, with its event", final.Children)
	}
	if child := e.status(t, final.Children[0].EventID); child.Status != store.EventCompleted || child.ConversationID != threads[0] {
		t.Errorf("the child's event is %s in %s, want completed in %s", child.Status, child.ConversationID, threads[0])
	}
}

// Three non-blocking calls of one step run as turns on async-worker; each one's end settles
// its call, and the caller is re-driven once, when the last has settled.
func TestNonBlockingSubagentsFanIn(t *testing.T) {
	e := newAsyncEnv(t)
	finder := e.agent(t, factFinder)
	caller := e.agent(t, planner(`{"agents": [{"name": "finder", "agentId": "`+finder+`", "blocking": false}]}`,
		ask("finder", "topic one"), ask("finder", "topic two"), ask("finder", "topic three")))
	ev := e.async(t, `{"agentId":"`+caller+`","message":"plan it"}`)
	final, seen := e.waitStatus(t, ev.EventID, store.EventCompleted)
	if !strings.Contains(strings.Join(seen, " "), store.EventWaitingAsync) {
		t.Errorf("statuses %v, want the caller waiting for its calls before it completed", seen)
	}
	if final.Text == nil || strings.Count(*final.Text, "The answer is 42.") != 3 {
		t.Fatalf("the caller's answer %v does not carry three answers: %s", final.Text, final.raw)
	}
	if n := e.logs.count("continuation started", map[string]string{"conversationId": ev.ConversationID}); n != 1 {
		t.Errorf("the caller was continued %d times, want once", n)
	}
	threads := threadIDs(t, final.Messages)
	if len(threads) != 3 {
		t.Fatalf("threads %v, want three: %s", threads, final.raw)
	}
	topics := map[string]bool{}
	for _, id := range threads {
		child := e.conversation(t, id)
		if len(child) != 2 || child[1].Text() != "The answer is 42." {
			t.Errorf("subagent conversation %s holds %+v, want its message and answer", id, child)
			continue
		}
		topics[child[0].Text()] = true
	}
	if !topics["topic one"] || !topics["topic two"] || !topics["topic three"] {
		t.Errorf("the subagents were asked %v, want each topic once", topics)
	}
	e.wantUsageRollsUp(t, final, threads)
	listed := map[string]bool{}
	for _, c := range final.Children {
		if c.EventID == "" || e.status(t, c.EventID).Status != store.EventCompleted {
			t.Errorf("child %+v: want its own completed event", c)
		}
		listed[c.ThreadID] = true
	}
	for _, id := range threads {
		if !listed[id] {
			t.Errorf("thread %s is not among the status's children %+v", id, final.Children)
		}
	}
}

// Calls past subagent.maxDepth and subagent.maxChildrenPerTurn are tool errors the caller's
// model sees; the turn goes on.
func TestSubagentLimits(t *testing.T) {
	e := newAsyncEnv(t)
	t.Run("depth", func(t *testing.T) {
		// An agent that calls itself once per turn: its child may, with maxDepth 1, not.
		self := e.agent(t, `{"name": "recursive", "model": {"provider": "scripted", "script": [
			{"toolCalls": [{"name": "again", "input": {"message": "go deeper"}}]},
			{"text": "Level done: {{toolResults}}"}]}}`)
		res := call(t, e.srv, http.MethodPatch, "/accounts/me/agents/"+self, e.secret,
			`{"subagent": {"agents": [{"name": "again", "agentId": "`+self+`"}], "maxDepth": 1}}`)
		if res.status != http.StatusOK {
			t.Fatalf("PATCH = %d %s", res.status, res.body)
		}
		ev := e.async(t, `{"agentId":"`+self+`","message":"start"}`)
		final, _ := e.waitStatus(t, ev.EventID, store.EventCompleted)
		if final.Text == nil || !strings.Contains(*final.Text, "subagent.maxDepth is 1") || len(threadIDs(t, final.Messages)) != 1 {
			t.Errorf("want one level run and the next refused for maxDepth 1: %s", final.raw)
		}
	})
	t.Run("children per turn, across the wait for them", func(t *testing.T) {
		// Two calls, the wait for them, then a third in the continuation: the turn's third.
		finder := e.agent(t, factFinder)
		caller := e.agent(t, `{"name": "planner", "model": {"provider": "scripted", "script": [
			{"toolCalls": [`+ask("finder", "one")+`, `+ask("finder", "two")+`]},
			{"text": "Waiting."},
			{"toolCalls": [`+ask("finder", "three")+`]},
			{"text": "Results: {{toolResults}}"}]},
			"subagent": {"agents": [{"name": "finder", "agentId": "`+finder+`", "blocking": false}], "maxChildrenPerTurn": 2}}`)
		ev := e.async(t, `{"agentId":"`+caller+`","message":"plan it"}`)
		final, _ := e.waitStatus(t, ev.EventID, store.EventCompleted)
		if final.Text == nil || !strings.Contains(*final.Text, "subagent.maxChildrenPerTurn is 2") {
			t.Errorf("want the third call of the turn refused: %s", final.raw)
		}
	})
	t.Run("children per turn", func(t *testing.T) {
		finder := e.agent(t, factFinder)
		caller := e.agent(t, planner(`{"agents": [{"name": "finder", "agentId": "`+finder+`"}], "maxChildrenPerTurn": 2}`,
			ask("finder", "one"), ask("finder", "two"), ask("finder", "three")))
		ev := e.async(t, `{"agentId":"`+caller+`","message":"plan it"}`)
		final, _ := e.waitStatus(t, ev.EventID, store.EventCompleted)
		if final.Text == nil || strings.Count(*final.Text, "The answer is 42.") != 2 || !strings.Contains(*final.Text, "subagent.maxChildrenPerTurn is 2") {
			t.Errorf("want two answers and the third call refused: %s", final.raw)
		}
	})
}

// A subagent runs only the caller's account's agents: another account's agent id is refused
// when the config is written, and an agent deleted since fails the call, not the turn.
func TestSubagentOfAnotherAccountOrDeleted(t *testing.T) {
	e := newAsyncEnv(t)
	otherID, otherSecret := createAccount(t, e.srv, "other-"+e.accountID)
	res := call(t, e.srv, http.MethodPost, "/accounts/me/agents", otherSecret, factFinder)
	foreign, _ := res.json(t)["agentId"].(string)
	if res.status != http.StatusCreated || foreign == "" {
		t.Fatalf("creating the other account's agent = %d %s", res.status, res.body)
	}
	res = call(t, e.srv, http.MethodPost, "/accounts/me/agents", e.secret, planner(`{"agents": [{"name": "finder", "agentId": "`+foreign+`"}]}`, ask("finder", "x")))
	testenv.WantFieldError(t, res.status, res.body, "subagent.agents[0].agentId")

	finder := e.agent(t, factFinder)
	caller := e.agent(t, planner(`{"agents": [{"name": "finder", "agentId": "`+finder+`"}]}`, ask("finder", "what is the answer")))
	if res := call(t, e.srv, http.MethodDelete, "/accounts/me/agents/"+finder, e.secret, ""); res.status/100 != 2 {
		t.Fatalf("deleting the finder = %d %s", res.status, res.body)
	}
	ev := e.async(t, `{"agentId":"`+caller+`","message":"plan it"}`)
	final, _ := e.waitStatus(t, ev.EventID, store.EventCompleted)
	if final.Text == nil || strings.Contains(*final.Text, "The answer is 42.") || !strings.Contains(*final.Text, "agent "+finder+" not found") {
		t.Errorf("want the call to the deleted agent refused as not found: %s", final.raw)
	}
	if got := testenv.ConversationItems(t, e.stack.DB, e.stack.Tables.Conversations, otherID); len(got) != 0 {
		t.Errorf("the other account has conversation items %v, want none", got)
	}
}

// A subagent config is checked when it is written, each refusal naming its field.
func TestSubagentConfigRefusals(t *testing.T) {
	e := newAsyncEnv(t)
	for body, field := range map[string]string{
		planner(`{"agents": [{"name": "finder", "agentId": "agt_x", "initAttachmentsProperty": "message"}]}`): "subagent.agents[0].initAttachmentsProperty",
		planner(`{"agents": [{"name": "finder", "agentId": "agt_x", "initAgentNameProperty": "message"}]}`):   "subagent.agents[0].initAgentNameProperty",
		planner(`{"agents": [{"name": "finder"}]}`):                                                           "subagent.agents[0].agentId",
		planner(`{"agents": []}`): "subagent.agents",
	} {
		res := call(t, e.srv, http.MethodPost, "/accounts/me/agents", e.secret, body)
		testenv.WantFieldError(t, res.status, res.body, field)
	}
}

// initAgentNameProperty gives the model a property to name the child by: the name the client is
// shown for it, live and on /status.
func TestSubagentNamedByTheModel(t *testing.T) {
	e := newAsyncEnv(t)
	finder := e.agent(t, factFinder)
	caller := e.agent(t, planner(`{"agents": [{"name": "finder", "agentId": "`+finder+`", "initAgentNameProperty": "title"}]}`,
		`{"name": "finder", "input": {"message": "what is the answer", "title": "Fact check"}}`))
	cs := e.stream(t, `{"agentId":"`+caller+`","id":"named-1","message":"plan it","eventId":"evt_named_1"}`)
	subs := chunksOf(cs, "data-subagent")
	if len(subs) == 0 {
		t.Fatal("no data-subagent part")
	}
	for _, c := range subs {
		if data, _ := c["data"].(map[string]any); data["agent"] != "Fact check" {
			t.Errorf("data-subagent %v, want the child named Fact check", c)
		}
	}
	if st := e.status(t, "evt_named_1"); len(st.Children) != 1 || st.Children[0].Agent != "Fact check" {
		t.Errorf("the status lists children %+v, want Fact check", st.Children)
	}
	if text := streamText(cs); !strings.Contains(text, "The answer is 42.") {
		t.Errorf("the caller answered %q, want the child's answer", text)
	}
}

// Over SSE, the response ends waiting for the non-blocking children; the rest of the turn,
// their answers included, is read at the resume route, and the AI SDK reads it as one message.
func TestNonBlockingSubagentsOverSSE(t *testing.T) {
	e := newAsyncEnv(t)
	finder := e.agent(t, factFinder)
	caller := e.agent(t, planner(`{"agents": [{"name": "finder", "agentId": "`+finder+`", "blocking": false}]}`,
		ask("finder", "topic one"), ask("finder", "topic two")))
	cs := e.stream(t, `{"agentId":"`+caller+`","id":"sse-subagents","message":"plan it"}`)
	if fin := cs[len(cs)-1]; fin["type"] != "finish" || fin["finishReason"] != "tool-calls" {
		t.Fatalf("the SSE response ended with %v, want a tool-calls finish while the children run", fin)
	}
	started := chunksOf(cs, "data-subagent")
	for _, c := range started {
		if data, _ := c["data"].(map[string]any); data["state"] != "started" || data["eventId"] == nil {
			t.Errorf("data-subagent %v, want a started call with its child's event", c)
		}
	}
	if len(started) != 2 {
		t.Errorf("the response has %d data-subagent parts, want one per call", len(started))
	}
	var body []byte
	for deadline := time.Now().Add(asyncWait); ; time.Sleep(pollEvery) {
		res := call(t, e.srv, http.MethodGet, "/chat/sse-subagents/stream", e.secret, "")
		if res.status != http.StatusOK {
			t.Fatalf("resume = %d %s, want 200", res.status, res.body)
		}
		resumed := testenv.Chunks(t, bytes.NewReader(res.body))
		if last := resumed[len(resumed)-1]; last["type"] == "finish" && last["finishReason"] == "stop" {
			if got := streamText(resumed); strings.Count(got, "The answer is 42.") != 2 {
				t.Fatalf("the resumed turn's text %q lacks the two children's answers", got)
			}
			finished := 0
			for _, c := range chunksOf(resumed, "data-subagent") {
				if data, _ := c["data"].(map[string]any); data["state"] == "finished" && data["status"] == store.EventCompleted && data["text"] == "The answer is 42." {
					finished++
				}
			}
			if finished != 2 {
				t.Errorf("the resumed turn says %d children finished, want 2: %v", finished, chunksOf(resumed, "data-subagent"))
			}
			body = res.body
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the resumed turn never reached its final answer; last resume: %v", resumed)
		}
	}
	if _, stderr, err := testenv.CheckUIStream(t, body); err != nil {
		t.Fatalf("the AI SDK refused the resumed stream: %v\n%s", err, stderr)
	}
}

// Over SSE, a blocking child's progress streams as one data-subagent part per call, updated in
// place: started, each of the child's messages, finished; the AI SDK keeps the last.
func TestSubagentProgressOverSSE(t *testing.T) {
	e := newAsyncEnv(t)
	finder := e.agent(t, factFinder)
	caller := e.agent(t, planner(`{"agents": [{"name": "finder", "agentId": "`+finder+`"}]}`, ask("finder", "what is the answer")))
	res := call(t, e.srv, http.MethodPost, "/", e.secret, `{"agentId":"`+caller+`","message":"plan it"}`)
	if res.status != http.StatusOK {
		t.Fatalf("POST / = %d %s", res.status, res.body)
	}
	cs := testenv.Chunks(t, bytes.NewReader(res.body))
	var states []string
	for _, c := range chunksOf(cs, "data-subagent") {
		data, _ := c["data"].(map[string]any)
		if c["id"] != data["toolCallId"] || data["agent"] != "finder" || data["threadId"] == "" {
			t.Errorf("data-subagent %v: want the call's id, the agent and its thread", c)
		}
		state, _ := data["state"].(string)
		if state == "message" && data["text"] != "The answer is 42." {
			t.Errorf("the child's message part %v, want its text", c)
		}
		if state == "finished" && (data["status"] != store.EventCompleted || data["text"] != "The answer is 42.") {
			t.Errorf("the finished part %v, want completed with the answer", c)
		}
		states = append(states, state)
	}
	if strings.Join(states, ",") != "started,message,finished" {
		t.Fatalf("data-subagent states %v, want started, message, finished", states)
	}
	out, stderr, err := testenv.CheckUIStream(t, res.body)
	if err != nil {
		t.Fatalf("the AI SDK refused the stream: %v\n%s", err, stderr)
	}
	var checked struct {
		Message struct {
			Parts []map[string]any
		}
	}
	if err := json.Unmarshal(out, &checked); err != nil {
		t.Fatal(err)
	}
	var parts []map[string]any
	for _, p := range checked.Message.Parts {
		if p["type"] == "data-subagent" {
			parts = append(parts, p)
		}
	}
	if len(parts) != 1 || parts[0]["data"].(map[string]any)["state"] != "finished" {
		t.Errorf("the AI SDK built data-subagent parts %v, want one, finished", parts)
	}
}

// wsPlanner starts an App Server runtime of a planner that calls the agent childConfig as the
// blocking tool name with message, and sends it a message.
func wsPlanner(t *testing.T, name, childConfig, message string) (*wsClient, any) {
	t.Helper()
	srv := runner(t, faketavily.New(nil))
	_, secret := createAccount(t, srv, "ws-"+name)
	child := createAgent(t, srv, secret, childConfig)
	c, rt := startRuntime(t, srv, secret, planner(`{"agents": [{"name": "`+name+`", "agentId": "`+child+`"}]}`, ask(name, message)))
	c.send(map[string]any{"type": "input", "request_id": "in-1", "runtime": rt, "payload": map[string]any{
		"kind": "create_message", "messages": []any{map[string]any{"role": "user", "content": "plan it"}},
	}})
	return c, rt
}

// Over the App Server WebSocket, a run's subagent calls go out as update_subagent_state
// snapshots: running, then completed, each naming the child's thread and its caller.
func TestSubagentStateOverWebSocket(t *testing.T) {
	c, rt := wsPlanner(t, "finder", factFinder, "what is the answer")
	_, seen := c.await("stop_reason", 30*time.Second, deltaIs("stop_reason"))
	var statuses []string
	var last map[string]any
	for _, f := range seen {
		if f["type"] != "update_subagent_state" {
			continue
		}
		list, _ := f["subagents"].([]any)
		if len(list) != 1 {
			t.Fatalf("update_subagent_state %v, want the one call", f)
		}
		last, _ = list[0].(map[string]any)
		statuses = append(statuses, fmt.Sprint(last["status"]))
	}
	if len(statuses) == 0 || statuses[0] != "running" || statuses[len(statuses)-1] != "completed" {
		t.Fatalf("subagent statuses %v, want running first and completed last", statuses)
	}
	runtime, _ := rt.(map[string]any)
	thread, _ := last["conversation_id"].(string)
	if !strings.HasPrefix(thread, "conv_sub_") || last["subagent_id"] != thread || last["subagent_type"] != "finder" ||
		last["parent_conversation_id"] != runtime["conversation_id"] || last["description"] != "what is the answer" {
		t.Errorf("the completed snapshot %v: want the child's thread, the tool, the task and the caller's conversation", last)
	}
}

// A non-blocking child that asks for approval: the waiting caller's status shows the held call
// with its subagent, and the decision, sent to the caller's conversation, resumes the child,
// whose answer then lets the caller finish.
func TestSubagentApprovalAnsweredThroughTheCaller(t *testing.T) {
	for _, blocking := range []bool{false, true} {
		t.Run(fmt.Sprintf("blocking=%v", blocking), func(t *testing.T) { subagentApprovalThroughTheCaller(t, blocking) })
	}
}

// cautiousAgent asks for the time, which needs approval, then answers with what it got.
const cautiousAgent = `{"name": "cautious", "model": {"provider": "scripted", "script": [
	{"toolCalls": [{"name": "current_time", "input": {}}]},
	{"text": "Checked the clock: {{toolResults}}"}]},
	"tools": {"current_time": {"needsApproval": true}}}`

// A blocking child that stops for approval is handed over: its caller waits for it like a
// non-blocking child, and the same decision sent to the caller resumes it.
func subagentApprovalThroughTheCaller(t *testing.T, blocking bool) {
	e := newAsyncEnv(t)
	cautious := e.agent(t, cautiousAgent)
	caller := e.agent(t, planner(fmt.Sprintf(`{"agents": [{"name": "cautious", "agentId": "%s", "blocking": %v}]}`, cautious, blocking), ask("cautious", "what time is it")))
	ev := e.async(t, `{"agentId":"`+caller+`","message":"plan it"}`)
	var held pendingApproval
	var subagent store.Child
	for deadline := time.Now().Add(asyncWait); held.ApprovalID == ""; time.Sleep(pollEvery) {
		res := call(t, e.srv, http.MethodGet, "/status/"+ev.EventID, e.secret, "")
		var st struct {
			Status           string `json:"status"`
			PendingApprovals []struct {
				pendingApproval
				Subagent store.Child `json:"subagent"`
			} `json:"pendingApprovals"`
		}
		if err := json.Unmarshal(res.body, &st); err != nil {
			t.Fatal(err)
		}
		if len(st.PendingApprovals) == 1 {
			held, subagent = st.PendingApprovals[0].pendingApproval, st.PendingApprovals[0].Subagent
		}
		if time.Now().After(deadline) || store.Final(st.Status) {
			t.Fatalf("the caller's status never showed the child's held call: %s", res.body)
		}
	}
	if held.ToolName != "current_time" || subagent.Agent != "cautious" || subagent.EventID == "" {
		t.Fatalf("held %+v of %+v, want current_time held by cautious", held, subagent)
	}
	res := call(t, e.srv, http.MethodPost, "/async", e.secret,
		`{"agentId":"`+caller+`","id":"`+ev.ConversationID+`","approvals":[{"approvalId":"`+held.ApprovalID+`","approved":true}]}`)
	if res.status != http.StatusAccepted {
		t.Fatalf("the decision sent to the caller = %d %s, want 202", res.status, res.body)
	}
	final, _ := e.waitStatus(t, ev.EventID, store.EventCompleted)
	if final.Text == nil || !strings.Contains(*final.Text, "Checked the clock:") {
		t.Errorf("the caller's answer %v lacks the child's: %s", final.Text, final.raw)
	}
	if child := e.status(t, subagent.EventID); child.Status != store.EventCompleted {
		t.Errorf("the child's event is %s, want completed", child.Status)
	}
}

// A blocking child's held call is shown to the caller's AI SDK chat client as a call of the
// caller's message, awaiting approval; the client's decision, sent to the caller as usual,
// resumes the child, and the same answer streams the held call's output, then the caller's
// continuation to its final text. Denied, the child answers with the denial; the caller's
// conversation then takes a new message, whose turn calls a child of its own.
func TestBlockingSubagentApprovalFromTheAISDKClient(t *testing.T) {
	e := newAsyncEnv(t)
	cautious := e.agent(t, cautiousAgent)
	caller := e.agent(t, planner(`{"agents": [{"name": "cautious", "agentId": "`+cautious+`"}]}`, ask("cautious", "what time is it")))
	got := approvalClient(t, e.srv.URL, e.secret, caller)

	for name, p := range map[string]clientPhase{"approve": got.Approve, "deny": got.Deny, "again": got.Again} {
		held := partOf(p.Requested.Parts, "tool-current_time")
		if held.State != "approval-requested" || held.Approval == nil || held.Approval.ID != p.ApprovalID {
			t.Errorf("%s: the child's call %+v, want it awaiting approval %s: parts %v", name, held, p.ApprovalID, shape(p.Requested.Parts))
		}
		if call := partOf(p.Requested.Parts, "tool-cautious"); call.State != "output-available" || !strings.Contains(string(call.Output), `"status":"running"`) {
			t.Errorf("%s: the caller's call %+v, want its placeholder: the call was handed over", name, call)
		}
		if sub := partOf(p.Requested.Parts, "data-subagent"); sub.Type == "" {
			t.Errorf("%s: no data-subagent part in %v", name, shape(p.Requested.Parts))
		}
	}

	a := got.Approve.Final
	if held := partOf(a.Parts, "tool-current_time"); held.State != "output-available" || len(held.Output) == 0 {
		t.Errorf("approve: the child's call %+v, want its output: parts %v", held, shape(a.Parts))
	}
	if text := lastText(a.Parts); !strings.HasPrefix(text, "Planner heard:") || !strings.Contains(text, "Checked the clock:") {
		t.Errorf("approve: the caller's final text %q, want its answer carrying the child's", text)
	}
	if a.MessageID != got.Approve.Requested.MessageID || a.Messages != 2 {
		t.Errorf("approve: %d messages, last assistant %s, want 2 with the answer continuing %s", a.Messages, a.MessageID, got.Approve.Requested.MessageID)
	}

	d := got.Deny.Final
	if held := partOf(d.Parts, "tool-current_time"); held.State != "output-denied" {
		t.Errorf("deny: the child's call %+v, want it denied: parts %v", held, shape(d.Parts))
	}
	if text := lastText(d.Parts); !strings.Contains(text, "Checked the clock:") || !strings.Contains(text, "denied by the user") {
		t.Errorf("deny: the caller's final text %q, want the child's answer carrying the denial", text)
	}
	if got.Again.ApprovalID == got.Deny.ApprovalID || got.Again.ConversationID != got.Deny.ConversationID {
		t.Errorf("again: approval %s in %s, want a new one in %s", got.Again.ApprovalID, got.Again.ConversationID, got.Deny.ConversationID)
	}
	for _, r := range got.Requests {
		if r.Status != http.StatusOK {
			t.Errorf("the client's request %+v was answered %d, want 200", r.LastMessage, r.Status)
		}
	}
}

// Over the App Server WebSocket, a blocking child's held call is put to the controller as a
// control_request (can_use_tool) as the child stops; the controller's approval_response, sent to
// the runtime as for its own calls, resumes the child, and the runtime's turn goes on to its
// answer.
func TestBlockingSubagentApprovalOverWebSocket(t *testing.T) {
	c, rt := wsPlanner(t, "cautious", cautiousAgent, "what time is it")
	cr, _ := c.await("control_request", 30*time.Second, typeIs("control_request"))
	req, _ := cr["request"].(map[string]any)
	approvalID, _ := cr["request_id"].(string)
	if callID, _ := req["tool_call_id"].(string); req["subtype"] != "can_use_tool" || req["tool_name"] != "current_time" || approvalID == "" || !strings.HasPrefix(callID, "conv_sub_") {
		t.Fatalf("control_request %v, want can_use_tool for the child's current_time, under its thread", cr)
	}
	c.send(map[string]any{"type": "input", "request_id": "in-2", "runtime": rt, "payload": map[string]any{
		"kind": "approval_response", "request_id": approvalID, "decision": map[string]any{"behavior": "allow"},
	}})
	accepted, _ := c.await("input_accepted", 30*time.Second, typeIs("input_accepted"))
	if accepted["accepted"] != true {
		t.Fatalf("the approval was answered %v, want accepted", accepted)
	}
	stop, seen := c.await("stop_reason", 30*time.Second, deltaIs("stop_reason"))
	frames, _ := json.Marshal(seen)
	if d, _ := stop["delta"].(map[string]any); d["stop_reason"] != "end_turn" || !strings.Contains(string(frames), "Checked the clock:") {
		t.Errorf("the runtime's turn ended %v after %s, want end_turn with the child's answer", stop, frames)
	}
}

// A non-blocking child that stops for approval runs on async-worker, after the caller's SSE
// response has ended; a client that follows the waiting caller (GET /chat/{id}/stream) is shown
// the held call, and its decision, sent to the caller over SSE, resumes the child and streams the
// caller's continuation to its answer.
func TestNonBlockingChildApprovalOnTheCallersResumedStream(t *testing.T) {
	e := newAsyncEnv(t)
	cautious := e.agent(t, cautiousAgent)
	caller := e.agent(t, planner(`{"agents": [{"name": "cautious", "agentId": "`+cautious+`", "blocking": false}]}`, ask("cautious", "what time is it")))
	if fin := e.stream(t, `{"agentId":"`+caller+`","id":"held-1","message":"plan it"}`); fin[len(fin)-1]["finishReason"] != "tool-calls" {
		t.Fatalf("the SSE response ended %v, want waiting for the child", fin[len(fin)-1])
	}
	var body []byte
	var approvalID, callID string
	for deadline := time.Now().Add(asyncWait); approvalID == ""; time.Sleep(pollEvery) {
		res := call(t, e.srv, http.MethodGet, "/chat/held-1/stream", e.secret, "")
		body = res.body
		for _, c := range chunksOf(testenv.Chunks(t, bytes.NewReader(body)), "tool-approval-request") {
			approvalID, callID = c["approvalId"].(string), c["toolCallId"].(string)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the resumed stream never showed the child's held call: %s", body)
		}
	}
	if !strings.HasPrefix(callID, "conv_sub_") || !strings.Contains(string(body), `"type":"tool-input-available","toolCallId":"`+callID+`","toolName":"current_time"`) {
		t.Errorf("the held call %s is not shown as the child's current_time: %s", callID, body)
	}
	resumed, stderr, err := testenv.CheckUIStream(t, body)
	if err != nil {
		t.Fatalf("the AI SDK refused the resumed stream: %v\n%s", err, stderr)
	}
	// The client answers in the assistant message the resumed stream built.
	var built struct {
		Message struct {
			ID string `json:"id"`
		} `json:"message"`
	}
	if err := json.Unmarshal(resumed, &built); err != nil {
		t.Fatal(err)
	}
	res := call(t, e.srv, http.MethodPost, "/", e.secret, `{"agentId":"`+caller+`","id":"held-1","messages":[{"id":"`+built.Message.ID+`","role":"assistant","parts":[
		{"type":"tool-current_time","toolCallId":"`+callID+`","state":"approval-responded","input":{},"approval":{"id":"`+approvalID+`","approved":true}}]}]}`)
	if res.status != http.StatusOK {
		t.Fatalf("the decision = %d %s, want 200", res.status, res.body)
	}
	cs := testenv.Chunks(t, bytes.NewReader(res.body))
	if out := chunksOf(cs, "tool-output-available"); len(out) == 0 || out[0]["toolCallId"] != callID {
		t.Errorf("the answer's outputs %v, want the held call's first", out)
	}
	if last := cs[len(cs)-1]; last["finishReason"] != "stop" || !strings.Contains(streamText(cs), "Checked the clock:") {
		t.Errorf("the answer ended %v with %q, want the caller's answer carrying the child's", last, streamText(cs))
	}
	// The client's message, as the resumed stream built it, goes on with the answer.
	var message struct{ Message json.RawMessage }
	if err := json.Unmarshal(resumed, &message); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := testenv.CheckUIStreamFrom(t, message.Message, res.body)
	if err != nil {
		t.Fatalf("the AI SDK refused the answer as the resumed message's continuation: %v\n%s", err, stderr)
	}
	if !strings.Contains(string(out), `"state":"output-available"`) || !strings.Contains(string(out), callID) {
		t.Errorf("the message the AI SDK built %s, want the held call's output in it", out)
	}
}

// lastText is the text of a message's last text part.
func lastText(ps []clientPart) string {
	text := ""
	for _, p := range ps {
		if p.Type == "text" {
			text = p.Text
		}
	}
	return text
}

// boss is a caller of resumable scouts whose script is steps: each turn's first step makes
// calls, the second waits, the third answers with the results.
func boss(scoutID, resumable, calls string) string {
	return `{"name": "boss", "model": {"provider": "scripted", "script": [
		{"toolCalls": [` + calls + `]},
		{"text": "Waiting."},
		{"text": "Heard: {{toolResults}}"}]},
		"subagent": {"agents": [{"name": "scout", "agentId": "` + scoutID + `", "resumable": ` + resumable + `}]}}`
}

// Resumable instances persist across the caller's turns: created by name (within
// maxInstances), then sent messages by name in a later turn, each answer coming back to the
// call that asked.
func TestResumableSubagentAcrossTurns(t *testing.T) {
	e := newAsyncEnv(t)
	scout := e.agent(t, `{"name": "scout", "model": {"provider": "scripted", "script": [{"text": "Scouted."}]}}`)
	const one = `{"receives_messages": "side_a", "maxInstances": 1}`
	caller := e.agent(t, boss(scout, one,
		`{"name": "subagent_create", "input": {"agent": "scout", "name": "alpha", "message": "look north"}},
		 {"name": "subagent_create", "input": {"agent": "scout", "name": "beta", "message": "look south"}}`))
	ev := e.async(t, `{"agentId":"`+caller+`","message":"first"}`)
	first, _ := e.waitStatus(t, ev.EventID, store.EventCompleted)
	if first.Text == nil || strings.Count(*first.Text, "Scouted.") != 1 || !strings.Contains(*first.Text, "its resumable.maxInstances") {
		t.Fatalf("turn one: want alpha's answer and beta refused past maxInstances: %s", first.raw)
	}

	// The caller's conversation lists its instance.
	listed := call(t, e.srv, http.MethodGet, "/chat/"+ev.ConversationID+"/subagents", e.secret, "")
	var list struct {
		Instances []store.Instance `json:"instances"`
	}
	if err := json.Unmarshal(listed.body, &list); err != nil || listed.status != http.StatusOK || len(list.Instances) != 1 ||
		list.Instances[0].Name != "alpha" || list.Instances[0].Agent != "scout" || list.Instances[0].AgentID != scout || !strings.HasPrefix(list.Instances[0].ThreadID, "conv_sub_") {
		t.Errorf("GET /chat/{id}/subagents = %d %s, want alpha, of scout, with its thread", listed.status, listed.body)
	}
	_, otherSecret := createAccount(t, e.srv, "peer-"+e.accountID)
	for _, secret := range []string{otherSecret, e.secret} {
		conv := ev.ConversationID
		if secret == e.secret {
			conv = "conv_missing"
		}
		if res := call(t, e.srv, http.MethodGet, "/chat/"+conv+"/subagents", secret, ""); res.status != http.StatusNotFound {
			t.Errorf("GET /chat/%s/subagents = %d %s, want 404 (another account's, or no such conversation)", conv, res.status, res.body)
		}
	}

	// The next turn sends alpha a message by name, and one to an instance that does not exist.
	res := call(t, e.srv, http.MethodPatch, "/accounts/me/agents/"+caller, e.secret, boss(scout, one,
		`{"name": "subagent_message", "input": {"name": "alpha", "message": "look east"}},
		 {"name": "subagent_message", "input": {"name": "gamma", "message": "anyone?"}}`))
	if res.status != http.StatusOK {
		t.Fatalf("PATCH = %d %s", res.status, res.body)
	}
	ev2 := e.async(t, `{"agentId":"`+caller+`","id":"`+ev.ConversationID+`","message":"second"}`)
	second, _ := e.waitStatus(t, ev2.EventID, store.EventCompleted)
	if second.Text == nil || strings.Count(*second.Text, "Scouted.") != 1 || !strings.Contains(*second.Text, `no subagent instance is named \"gamma\"`) {
		t.Fatalf("turn two: want alpha's second answer and gamma unknown: %s", second.raw)
	}
	threads := append(threadIDs(t, first.Messages), threadIDs(t, second.Messages)...)
	if len(threads) != 2 || threads[0] != threads[1] {
		t.Fatalf("alpha's answers came from threads %v, want one thread twice", threads)
	}
	var said []string
	for _, m := range e.conversation(t, threads[0]) {
		said = append(said, string(m.Role)+":"+m.Text())
	}
	if strings.Join(said, "|") != "user:look north|assistant:Scouted.|user:look east|assistant:Scouted." {
		t.Errorf("alpha's conversation %v, want both messages and both answers", said)
	}
}

// An instance with explicit parentCommunication answers only through notify_parent: what it
// sends is the answer, and a turn that ends without it answers with an error.
func TestResumableSubagentNotifiesExplicitly(t *testing.T) {
	e := newAsyncEnv(t)
	const explicit = `{"receives_messages": "side_a", "parentCommunication": "explicit"}`
	notifier := e.agent(t, `{"name": "notifier", "model": {"provider": "scripted", "script": [
		{"toolCalls": [{"name": "notify_parent", "input": {"message": "Found it"}}]},
		{"text": "Done here."}]}}`)
	silent := e.agent(t, `{"name": "silent", "model": {"provider": "scripted", "script": [{"text": "Forgot to tell."}]}}`)
	for _, tt := range []struct{ agent, want, not string }{
		{notifier, "Found it", "Done here."},
		{silent, "ended its turn without calling notify_parent", "Forgot to tell."},
	} {
		caller := e.agent(t, boss(tt.agent, explicit, `{"name": "subagent_create", "input": {"agent": "scout", "name": "one", "message": "go"}}`))
		ev := e.async(t, `{"agentId":"`+caller+`","message":"start"}`)
		final, _ := e.waitStatus(t, ev.EventID, store.EventCompleted)
		if final.Text == nil || !strings.Contains(*final.Text, tt.want) || strings.Contains(*final.Text, tt.not) {
			t.Errorf("want %q and not %q in the caller's answer: %s", tt.want, tt.not, final.raw)
		}
	}
}

// Aborting a caller that waits for a non-blocking child cancels the call and stops the child:
// nobody waits for its answer any more.
func TestAbortStopsTheWaitingCallersChild(t *testing.T) {
	srv := runner(t, faketavily.New(nil))
	_, secret := createAccount(t, srv, "ws-abort-subagent")
	slow := createAgent(t, srv, secret, `{"name": "slow", "model": {"provider": "scripted", "script": [{"text": "Late answer.", "delayMs": 20000}]}}`)
	c, rt := startRuntime(t, srv, secret, planner(`{"agents": [{"name": "slow", "agentId": "`+slow+`", "blocking": false}]}`, ask("slow", "take your time")))
	c.send(map[string]any{"type": "input", "request_id": "in-1", "runtime": rt, "payload": map[string]any{
		"kind": "create_message", "messages": []any{map[string]any{"role": "user", "content": "plan it"}},
	}})
	accepted, _ := c.await("input_accepted", 10*time.Second, typeIs("input_accepted"))
	runID, _ := accepted["run_id"].(string)
	// The caller waits for its call once its status lists the child.
	var child store.Child
	for deadline := time.Now().Add(asyncWait); child.EventID == ""; time.Sleep(pollEvery) {
		var st status
		res := call(t, srv, http.MethodGet, "/status/"+runID, secret, "")
		if err := json.Unmarshal(res.body, &st); err != nil {
			t.Fatal(err)
		}
		if st.Status == store.EventWaitingAsync && len(st.Children) == 1 {
			child = st.Children[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("the caller never waited for its child: %s", res.body)
		}
	}
	c.send(map[string]any{"type": "abort_message", "request_id": "ab-1", "runtime": rt})
	if m, _ := c.await("abort_message_response", 10*time.Second, typeIs("abort_message_response")); m["aborted"] != true {
		t.Fatalf("abort answered %v", m)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(pollEvery) {
		res := call(t, srv, http.MethodGet, "/status/"+child.EventID, secret, "")
		var st status
		if err := json.Unmarshal(res.body, &st); err != nil {
			t.Fatal(err)
		}
		if st.Status == store.EventCancelled {
			break
		}
		if store.Final(st.Status) || time.Now().After(deadline) {
			t.Fatalf("the child's turn is %s after the abort, want it cancelled: %s", st.Status, res.body)
		}
	}
}

// An immediate agent is called with the user's message at the start of each turn, before the
// first model step: the model's first call already has its answer.
func TestImmediateSubagent(t *testing.T) {
	e := newAsyncEnv(t)
	finder := e.agent(t, factFinder)
	caller := e.agent(t, `{"name": "briefed", "model": {"provider": "scripted", "script": [{"text": "With the brief: {{toolResults}}"}]},
		"subagent": {"agents": [{"name": "brief", "agentId": "`+finder+`", "immediate": true}]}}`)
	res := call(t, e.srv, http.MethodPost, "/", e.secret, `{"agentId":"`+caller+`","id":"briefed-1","message":"what is the answer"}`)
	if res.status != http.StatusOK {
		t.Fatalf("POST / = %d %s", res.status, res.body)
	}
	cs := testenv.Chunks(t, bytes.NewReader(res.body))
	if got := streamText(cs); !strings.Contains(got, "With the brief:") || !strings.Contains(got, "The answer is 42.") {
		t.Fatalf("the first model step's text %q lacks the immediate agent's answer", got)
	}
	calls := chunksOf(cs, "tool-input-available")
	if len(calls) != 1 || calls[0]["toolName"] != "brief" {
		t.Fatalf("tool calls %v, want the one immediate call of brief", calls)
	}
	if in, _ := calls[0]["input"].(map[string]any); in["message"] != "what is the answer" {
		t.Errorf("the immediate call's input %v, want the user's message", calls[0]["input"])
	}
	if _, stderr, err := testenv.CheckUIStream(t, res.body); err != nil {
		t.Fatalf("the AI SDK refused the stream: %v\n%s", err, stderr)
	}
	// A second turn calls it again, in a conversation of its own.
	again := call(t, e.srv, http.MethodPost, "/", e.secret, `{"agentId":"`+caller+`","id":"briefed-1","message":"and again"}`)
	cs2 := testenv.Chunks(t, bytes.NewReader(again.body))
	first, second := chunksOf(cs, "data-subagent"), chunksOf(cs2, "data-subagent")
	if len(first) == 0 || len(second) == 0 {
		t.Fatalf("data-subagent parts: %d, then %d; want the immediate call in both turns", len(first), len(second))
	}
	t1, _ := first[0]["data"].(map[string]any)
	t2, _ := second[0]["data"].(map[string]any)
	if t1["threadId"] == t2["threadId"] || t2["text"] != "and again" {
		t.Errorf("the turns' immediate calls ran in %v and %v (the second told %v), want a thread each with its message", t1["threadId"], t2["threadId"], t2["text"])
	}
}

// A model may give calls of different turns the same id (the scripted one does): each turn's
// call still runs a child of its own, with its own message.
func TestEachTurnsCallHasItsOwnChild(t *testing.T) {
	e := newAsyncEnv(t)
	finder := e.agent(t, factFinder)
	caller := e.agent(t, planner(`{"agents": [{"name": "finder", "agentId": "`+finder+`"}]}`, ask("finder", "what is the answer")))
	var threads []string
	conv := ""
	for _, msg := range []string{"first", "second"} {
		body := `{"agentId":"` + caller + `","message":"` + msg + `"}`
		if conv != "" {
			body = `{"agentId":"` + caller + `","id":"` + conv + `","message":"` + msg + `"}`
		}
		ev := e.async(t, body)
		conv = ev.ConversationID
		final, _ := e.waitStatus(t, ev.EventID, store.EventCompleted)
		got := threadIDs(t, final.Messages)
		if len(got) != 1 {
			t.Fatalf("turn %s: threads %v, want one: %s", msg, got, final.raw)
		}
		threads = append(threads, got[0])
	}
	if threads[0] == threads[1] {
		t.Fatalf("both turns' calls ran in %s, want a child each", threads[0])
	}
	for _, id := range threads {
		if child := e.conversation(t, id); len(child) != 2 {
			t.Errorf("child %s holds %d messages, want its own message and answer", id, len(child))
		}
	}
}
