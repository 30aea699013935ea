package accounts_test

import (
	"errors"
	"net/http"
	"testing"
)

// A purge account-manage could not queue does not stop the deletion: the account is deleted all
// the same (204, the secret stops working) and the purge stays owed for the sweeper, which
// finds it through the tombstone (the sweeper's TestUnqueuedPurgeIsQueuedBySweeper).
func TestDeletionWithTheQueueDown(t *testing.T) {
	f := newFixture(t, testAdminSecret, false)
	acc := f.createAccount(t, "ada")
	f.mu.Lock()
	f.enqueueErr = errors.New("queue unavailable")
	f.mu.Unlock()
	f.must(t, http.StatusNoContent, "DELETE", "/accounts/me", acc.Secret, "")
	if status, body := f.do(t, "GET", "/accounts/me", acc.Secret, ""); status != http.StatusUnauthorized {
		t.Errorf("the deleted account's secret = %d %s, want 401", status, body)
	}
	if f.purgeQueued(acc.AccountID) {
		t.Error("the purge was queued although the queue failed")
	}
}
