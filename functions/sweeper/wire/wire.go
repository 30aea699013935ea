// Package wire builds the sweeper from the function's dependencies.
package wire

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/agentharness/harness/functions/asyncwire"
	"github.com/agentharness/harness/shared/edge/sweeper"
	"github.com/agentharness/harness/shared/lambda/lambdadeps"
	"github.com/agentharness/harness/shared/state/attachments"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/wire/workqueue"
)

// Sweeper wires the sweeper: the async tool store, and ACCOUNTS_TABLE for the purges of
// deleted accounts it queues again on ASYNC_WORK_QUEUE_URL.
func Sweeper(d lambdadeps.Deps) (*sweeper.Sweeper, error) {
	_, redriver, err := asyncwire.AsyncTools(d)
	if err != nil {
		return nil, err
	}
	accounts := d.Getenv("ACCOUNTS_TABLE")
	if accounts == "" {
		return nil, errors.New("environment variable ACCOUNTS_TABLE is not set")
	}
	logger := d.Logger
	if logger == nil {
		logger = slog.Default()
	}
	queue, send := d.Getenv("ASYNC_WORK_QUEUE_URL"), workqueue.SQS(d.SQS)
	enqueue := func(ctx context.Context, body string) error { return send(ctx, queue, body) }
	st := store.New(d.DB, store.Tables{Accounts: accounts, Events: d.Getenv("EVENTS_TABLE"), Conversations: d.Getenv("CONVERSATIONS_TABLE")})
	if st.HasTurns() {
		redriver.Late = sweeper.LateSubagents(redriver.Store, st, attachments.InBucket(d.S3, d.Getenv("ASYNC_RESULTS_BUCKET")))
	}
	return sweeper.NewFrom(redriver, st, enqueue, time.Now, logger), nil
}
