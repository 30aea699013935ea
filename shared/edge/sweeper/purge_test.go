package sweeper_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/edge/sweeper"
	"github.com/agentharness/harness/shared/state/store"
)

// An account deleted without its purge queued (account-manage's send failed, or the process
// died before it) is not lost: the sweeper queues its purge once it is due, once per retry
// period, again after a failed send.
func TestUnqueuedPurgeIsQueuedBySweeper(t *testing.T) {
	ctx := context.Background()
	db := testenv.DynamoDB(t)
	st := store.New(db, testenv.Tables(t, db))
	deleted := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	acc, _, err := st.CreateAccount(ctx, "ada", deleted)
	if err != nil {
		t.Fatal(err)
	}
	// What account-manage's DELETE writes before it sends the purge.
	if err := st.DeleteAccount(ctx, acc.ID, deleted); err != nil {
		t.Fatal(err)
	}

	var sent []string
	var sendErr error
	send := func(_ context.Context, body string) error {
		if sendErr != nil {
			return sendErr
		}
		sent = append(sent, body)
		return nil
	}
	want := `{"type":"purge","accountId":"` + acc.ID + `"}`
	for _, tt := range []struct {
		at      time.Duration
		failing bool
		want    []string
	}{
		{at: time.Minute},
		{at: 11 * time.Minute, want: []string{want}},
		{at: 12 * time.Minute},
		{at: 22 * time.Minute, failing: true},
		{at: 23 * time.Minute},
		{at: 33 * time.Minute, want: []string{want}},
	} {
		sent, sendErr = nil, nil
		if tt.failing {
			sendErr = errors.New("queue unavailable")
		}
		err := sweeper.NewFrom(nil, st, send, func() time.Time { return deleted.Add(tt.at) }, slog.New(slog.DiscardHandler)).QueuePurges(ctx)
		if tt.failing != (err != nil) {
			t.Errorf("sweep at +%s = %v, want an error: %v", tt.at, err, tt.failing)
		}
		if !slices.Equal(sent, tt.want) {
			t.Errorf("sweep at +%s queued %v, want %v", tt.at, sent, tt.want)
		}
	}
}
