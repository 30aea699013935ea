package sweeper_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/edge/sweeper"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/attachments"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/turn/subagent"
)

// sent records the continuations a Redriver sends.
type sent struct {
	mu     sync.Mutex
	groups []string
}

func (s *sent) Send(_ context.Context, c asynctools.Continuation) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groups = append(s.groups, c.GroupID)
	return nil
}

// The crash this recovers from: a subagent's turn ended and was recorded, and the invocation
// died before it settled its caller's call. At the call's deadline the sweeper settles it with
// the child's answer, as the child would have, instead of timing it out, and the caller's group
// is re-driven once. A call whose child is still running times out as before.
func TestSweeperSettlesACallerWithItsFinishedChild(t *testing.T) {
	stack := testenv.Stack(t)
	ctx := context.Background()
	st := store.New(stack.DB, stack.Tables)
	async := asynctools.NewStore(stack.DB, stack.AsyncResultsTable, nil)
	now := time.Now().UTC().Truncate(time.Millisecond)
	clock := now
	var continued sent
	redriver := &asynctools.Redriver{Store: async, Send: continued.Send, Now: func() time.Time { return clock }}
	files := attachments.InBucket(stack.S3, stack.Bucket)
	redriver.Late = sweeper.LateSubagents(async, st, files)

	const account, caller = "acc_sweep", "conv_caller"
	group := asynctools.NewGroupID(store.NewID(""), 0)
	rows := map[string]string{"call_done": "", "call_running": ""}
	for call := range rows {
		id := asynctools.ResultID(group, call)
		rows[call] = id
		if _, _, err := async.Register(ctx, asynctools.Result{
			ID: id, AccountID: account, AgentID: "agt_planner", ConversationID: caller, TurnID: "evt_caller",
			ToolCallID: call, ToolName: "finder", Mode: asynctools.ExternalDispatch, Status: asynctools.Running,
			Deadline: now.Add(time.Minute), ParentUntil: now.Add(time.Second), CreatedAt: now,
			Delivery: asynctools.Delivery{EventID: "evt_caller"},
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := redriver.Seal(ctx, asynctools.Group{ID: group, AccountID: account, AgentID: "agt_planner", ConversationID: caller,
		Expected: []string{rows["call_done"], rows["call_running"]}, Delivery: asynctools.Delivery{EventID: "evt_caller"}}); err != nil {
		t.Fatal(err)
	}

	// Each call's child, as callSubagent makes it; the first child's turn ends and is recorded.
	for call, id := range rows {
		child := subagent.ConversationID(account, caller, "evt_caller", call)
		if err := st.CreateChild(ctx, account, child, "agt_finder", store.Parent{ConversationID: caller, Tool: "finder", Depth: 1}, nil); err != nil {
			t.Fatal(err)
		}
		if err := st.ClaimEvent(ctx, account, subagent.EventID(id), child, "", now, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	done := subagent.ConversationID(account, caller, "evt_caller", "call_done")
	lease, err := st.TakeLease(ctx, account, done, "agt_finder", now, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if lease.Parent().ConversationID != caller || lease.Parent().Tool != "finder" || lease.Parent().Depth != 1 {
		t.Fatalf("the child's lease reads the link %+v, want its caller at depth 1", lease.Parent())
	}
	// The child holds a file its answer names: the caller gets it back with the answer.
	file, err := files.Put(ctx, account, done, []byte("the child's chart"))
	if err != nil {
		t.Fatal(err)
	}
	msgs := []model.Message{
		{ID: "msg_q", Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: "topic"}}},
		{ID: "msg_a", Role: model.RoleAssistant, Parts: []model.Part{{Type: model.PartText, Text: "The answer is 42. See " + file + "."}}},
	}
	if err := lease.Append(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	if err := lease.End(ctx, model.Usage{}); err != nil {
		t.Fatal(err)
	}
	doneEvent := subagent.EventID(rows["call_done"])
	if err := st.UpdateEvent(ctx, account, doneEvent, store.StatusUpdate{Status: store.EventCompleted, FromSeq: 1, ToSeq: 3, Detail: json.RawMessage(`{}`), At: now}); err != nil {
		t.Fatal(err)
	}

	clock = now.Add(2 * time.Minute) // both calls are past their deadline
	stats, err := redriver.Sweep(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Recovered != 1 || stats.TimedOut != 1 {
		t.Errorf("sweep %+v, want one call recovered from its child and one timed out", stats)
	}
	got, err := async.Result(ctx, rows["call_done"])
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(subagent.Answer{Agent: "finder", ThreadID: done, Status: store.EventCompleted, Text: "The answer is 42. See " + file + ".", EventID: doneEvent, Attachments: []string{file}})
	if got.Status != asynctools.Completed || string(got.Response) != string(want) {
		t.Errorf("the finished child's call is %s %s, want completed with %s", got.Status, got.Response, want)
	}
	if _, err := files.Get(ctx, account, caller, file); err != nil {
		t.Errorf("the caller's thread did not get the child's file back: %v", err)
	}
	if got, _ := async.Result(ctx, rows["call_running"]); got.Status != asynctools.Failed || got.Error != asynctools.TimeoutError {
		t.Errorf("the running child's call is %s %q, want timed out", got.Status, got.Error)
	}
	if len(continued.groups) != 1 || continued.groups[0] != group {
		t.Errorf("continuations sent %v, want the caller's group once", continued.groups)
	}

	// The child's own settle, arriving late, is the same outcome (it returns the same files): a
	// duplicate, not a conflict.
	o, err := subagent.Outcome("finder", done, doneEvent, subagent.Ended{Status: store.EventCompleted, Messages: msgs, Attachments: []string{file}})
	if err != nil {
		t.Fatal(err)
	}
	if otherwise, err := subagent.Settle(ctx, async, redriver, rows["call_done"], o, clock); err != nil || otherwise != "" {
		t.Errorf("the child's late settle: settled otherwise %q, err %v; want an idempotent duplicate", otherwise, err)
	}
}
