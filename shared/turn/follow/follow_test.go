package follow_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/state/streamlog"
	"github.com/agentharness/harness/shared/turn"
	"github.com/agentharness/harness/shared/turn/follow"
)

// A reader that follows a turn whose invocation died mid-turn (its stream never says how it
// ended) is not left waiting: once the conversation's lease is free, the turn ends for it as
// failed, after everything the turn said.
func TestFollowEndsATurnWhoseInvocationDied(t *testing.T) {
	st := testenv.Stack(t)
	ctx := context.Background()
	s := store.New(st.DB, st.Tables)
	acc, _, err := s.CreateAccount(ctx, "follower", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	streams := streamlog.New(st.DB, st.Name("StreamsTable"), streamlog.Options{})
	eng := turn.New(turn.Options{Store: s, Streams: streams})

	// The dead invocation: it took the lease, recorded its stream with its user message, said
	// one thing, and stopped without ending its stream.
	now := time.Now()
	lease, err := s.TakeLease(ctx, acc.ID, "conv-dead", "agent-1", now, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	stream := acc.ID + "#conv-dead#trn_dead"
	lease.RecordStream(stream)
	if err := lease.Append(ctx, model.Message{ID: "m1", Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	w := streams.Start(stream)
	said, _ := json.Marshal(map[string]any{"event": turn.Event{Kind: turn.Failed, Error: "half a thought"}})
	if err := w.Append(ctx, said); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx, streamlog.Open); err != nil {
		t.Fatal(err)
	}
	entries, found, err := follow.Turn(ctx, eng, acc.ID, "conv-dead", -1)
	if err != nil || !found {
		t.Fatalf("follow.Turn: found %v, %v", found, err)
	}
	got := make(chan []turn.Logged, 1)
	go func() {
		var all []turn.Logged
		for e, err := range entries {
			if err != nil {
				t.Error(err)
				break
			}
			all = append(all, e)
		}
		got <- all
	}()
	time.Sleep(300 * time.Millisecond) // the reader waits while the lease is held
	select {
	case all := <-got:
		t.Fatalf("the reader stopped while the turn still held the conversation: %+v", all)
	default:
	}
	if err := lease.Release(ctx); err != nil { // the invocation's lease lapses
		t.Fatal(err)
	}
	select {
	case all := <-got:
		if len(all) != 3 || all[0].Event == nil || all[0].Event.Error != "half a thought" ||
			all[1].Event == nil || all[1].Event.Kind != turn.Failed || all[2].Outcome == nil || all[2].Outcome.Status != store.EventFailed {
			t.Fatalf("the reader got %+v, want the turn's event, then the failure and a failed end", all)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the reader still waits on a turn whose invocation is gone")
	}
}
