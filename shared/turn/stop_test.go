package turn_test

import (
	"testing"
	"time"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/turn"
	"github.com/google/go-cmp/cmp"
)

// RequestStop asks the running turn of a conversation to stop: it stops within a poll, though
// its model is still answering, ends cancelled as stopped, and the conversation keeps the answer
// it had so far. Where no turn runs there is nothing to ask.
func TestRequestStopKeepsTheAnswerSoFar(t *testing.T) {
	e := newEngineEnv(t)
	req := turn.Request{ConversationID: "c-stop", AgentID: "talker", EventID: "ev_stop"}
	if ok, err := e.RequestStop(e.ctx, e.account, "c-stop"); ok || err != nil {
		t.Fatalf("RequestStop before any turn = %v, %v; want false: nothing runs", ok, err)
	}
	if err := e.ClaimEvent(e.ctx, e.account, req); err != nil {
		t.Fatal(err)
	}
	run, err := e.begin(req, says("tell me"))
	if err != nil {
		t.Fatal(err)
	}
	said := make(chan string, 1)
	ended := make(chan turn.Outcome, 1)
	go func() {
		var text string
		for ev := range run.Events(e.ctx) {
			if ev.Kind == turn.Loop && ev.Loop.Type == agent.TextDelta {
				if text += ev.Loop.Text; text == "Part of an answer" {
					said <- text
				}
			}
		}
		ended <- run.Outcome()
	}()
	select {
	case <-said:
	case <-time.After(10 * time.Second):
		t.Fatal("the talker said nothing")
	}
	// The model stalls for a minute after its text: only the stop ends the turn sooner.
	if ok, err := e.RequestStop(e.ctx, e.account, "c-stop"); !ok || err != nil {
		t.Fatalf("RequestStop of the running turn = %v, %v; want true", ok, err)
	}
	var o turn.Outcome
	select {
	case o = <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the turn did not stop")
	}
	if err := run.Finish(e.ctx, o, nil); err != nil {
		t.Fatal(err)
	}
	if o.Status != turn.StatusCancelled || !o.Stopped || o.Error == "" {
		t.Errorf("the stopped turn ended %s (stopped %v, error %q), want cancelled as stopped, saying so", o.Status, o.Stopped, o.Error)
	}
	if diff := cmp.Diff([]string{"user:tell me", "assistant:Part of an answer"}, texts(e.history("c-stop"))); diff != "" {
		t.Errorf("the conversation (-want +got):\n%s", diff)
	}
	if ev, err := e.store.Event(e.ctx, e.account, "ev_stop"); err != nil || ev.Status != store.EventCancelled {
		t.Errorf("the event is %s (%v), want cancelled", ev.Status, err)
	}
	if ok, err := e.RequestStop(e.ctx, e.account, "c-stop"); ok || err != nil {
		t.Errorf("RequestStop after the turn ended = %v, %v; want false", ok, err)
	}
	// The stopped turn left the conversation free.
	if head, err := e.store.ConversationHead(e.ctx, e.account, "c-stop"); err != nil || !head.LeaseUntil.IsZero() {
		t.Errorf("the conversation is leased until %v (%v), want it free", head.LeaseUntil, err)
	}
}
