// Package asyncwire builds the async tool rows and the redriver of continuations from a
// function's dependencies: what every function that settles or starts async calls shares, with
// no turn engine linked.
package asyncwire

import (
	"context"
	"errors"

	"github.com/agentharness/harness/shared/lambda/lambdadeps"
	"github.com/agentharness/harness/shared/state/blobstore"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/wire/workqueue"
)

// AsyncTools builds the async tool store (ASYNC_RESULTS_TABLE, with ASYNC_RESULTS_BUCKET for
// large results) and the redriver that queues continuations on ASYNC_WORK_QUEUE_URL.
func AsyncTools(d lambdadeps.Deps) (*asynctools.Store, *asynctools.Redriver, error) {
	if err := d.Config.Require("ASYNC_RESULTS_TABLE", "ASYNC_RESULTS_BUCKET", "ASYNC_WORK_QUEUE_URL"); err != nil {
		return nil, nil, err
	}
	table, bucket, queue := d.Config.Async.ResultsTable, d.Config.Async.ResultsBucket, d.Config.Async.WorkQueue
	if d.SQS == nil || d.S3 == nil {
		return nil, nil, errors.New("async tools need SQS and S3 clients")
	}
	async := asynctools.NewStore(d.DB, table, blobstore.NewS3(d.S3, bucket))
	send := workqueue.SQS(d.SQS)
	redriver := &asynctools.Redriver{Store: async, Send: func(ctx context.Context, c asynctools.Continuation) error {
		return send(ctx, queue, workqueue.ContinueMessage(c.AccountID, c.GroupID))
	}}
	return async, redriver, nil
}
