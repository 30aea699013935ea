package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/store"
)

// A turn's event and its conversation count the prompt cache's reads and writes beside the
// input, across its model calls, and read them back in the AI SDK's usage shape; a call that
// reported no cache use counts as input the cache did not serve.
func TestUsageCountsTheCache(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	now := time.Now()
	if err := s.ClaimEvent(ctx, "acc", "ev", "c", "", now, time.Hour); err != nil {
		t.Fatal(err)
	}
	calls := []model.Usage{
		model.Cached(1200, 40, 0, 1000), // the first turn writes the cache
		model.Cached(1300, 30, 1000, 0), // the second reads it
		{InputTokens: 50, OutputTokens: 5},
	}
	for _, u := range calls {
		if err := s.UpdateEvent(ctx, "acc", "ev", store.StatusUpdate{Status: store.EventProcessing, Usage: u, At: now}); err != nil {
			t.Fatal(err)
		}
	}
	ev, err := s.Event(ctx, "acc", "ev")
	if err != nil {
		t.Fatal(err)
	}
	want := model.Usage{InputTokens: 2550, OutputTokens: 75, InputTokenDetails: model.InputTokenDetails{NoCacheTokens: 550, CacheReadTokens: 1000, CacheWriteTokens: 1000}}
	if ev.Usage != want || calls[0].Add(calls[1]).Add(calls[2]) != want {
		t.Errorf("event usage %+v (summed in memory %+v), want %+v", ev.Usage, calls[0].Add(calls[1]).Add(calls[2]), want)
	}

	l, err := s.TakeLease(ctx, "acc", "c", "agent", now, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.End(ctx, want); err != nil {
		t.Fatal(err)
	}
	conv, err := s.ConversationUsage(ctx, "acc", "c")
	if err != nil || conv.Usage != want || conv.Turns != 1 {
		t.Errorf("conversation usage %+v %v, want %+v over one turn", conv, err, want)
	}
}
