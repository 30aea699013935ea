// Package wire builds the sweeper from the function's dependencies.
package wire

import (
	"context"
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
	c := d.Config
	if err := c.Require("ACCOUNTS_TABLE"); err != nil {
		return nil, err
	}
	logger := d.Logger
	if logger == nil {
		logger = slog.Default()
	}
	queue, send := c.Async.WorkQueue, workqueue.SQS(d.SQS)
	enqueue := func(ctx context.Context, body string) error { return send(ctx, queue, body) }
	st := store.New(d.DB, store.Tables{Accounts: c.Tables.Accounts, Events: c.Tables.Events, Conversations: c.Tables.Conversations})
	if st.HasTurns() {
		redriver.Late = sweeper.LateSubagents(redriver.Store, st, attachments.InBucket(d.S3, c.Async.ResultsBucket))
	}
	return sweeper.NewFrom(redriver, st, enqueue, time.Now, logger), nil
}
