package chathttp_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/agentharness/harness/shared/edge/sweeper"
)

// A purge account-manage could not queue is not lost: the account is deleted all the same (204,
// the secret stops working), and the sweeper queues its purge once it is due, once per retry
// period, again after a failed send.
func TestUnqueuedPurgeIsQueuedBySweeper(t *testing.T) {
	f := newManageFixture(t, testAdminSecret, false)
	acc := f.createAccount(t, "ada")
	f.mu.Lock()
	f.enqueueErr = errors.New("queue unavailable")
	f.mu.Unlock()
	f.must(t, http.StatusNoContent, "DELETE", "/accounts/me", acc.Secret, "")
	if status, body := f.do(t, "GET", "/accounts/me", acc.Secret, ""); status != http.StatusUnauthorized {
		t.Errorf("the deleted account's secret = %d %s, want 401", status, body)
	}
	if f.purgeQueued(acc.AccountID) {
		t.Fatal("the purge was queued although the queue failed")
	}

	ctx := context.Background()
	var sent []string
	var sendErr error
	send := func(_ context.Context, body string) error {
		if sendErr != nil {
			return sendErr
		}
		sent = append(sent, body)
		return nil
	}
	want := `{"type":"purge","accountId":"` + acc.AccountID + `"}`
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
		err := sweeper.NewFrom(nil, f.store, send, func() time.Time { return testNow.Add(tt.at) }, slog.New(slog.DiscardHandler)).QueuePurges(ctx)
		if tt.failing != (err != nil) {
			t.Errorf("sweep at +%s = %v, want an error: %v", tt.at, err, tt.failing)
		}
		if !slices.Equal(sent, tt.want) {
			t.Errorf("sweep at +%s queued %v, want %v", tt.at, sent, tt.want)
		}
	}
}
