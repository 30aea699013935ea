package chathttp

import (
	"context"

	"github.com/agentharness/harness/shared/edge/channelturn"
	"github.com/agentharness/harness/shared/edge/natslog"
	"github.com/agentharness/harness/shared/lambda/lambdadeps"
	"github.com/agentharness/harness/shared/turn"
	"github.com/agentharness/harness/shared/wire/workqueue"
)

// NewHarness wires harness-processing from the function's dependencies: the turn engine, and
// async-worker's queue for POST /async.
func NewHarness(d lambdadeps.Deps) (*Handler, error) {
	opts, err := turn.OptionsFrom(d)
	if err == nil {
		err = natslog.Attach(&opts, d) // turn streams to NATS too, where NATS_URL says so
	}
	if err != nil {
		return nil, err
	}
	send := workqueue.SQS(d.SQS)
	queue := d.Getenv("ASYNC_WORK_QUEUE_URL")
	enqueue := func(ctx context.Context, body string) error { return send(ctx, queue, body) }
	h := New(Options{Options: opts, Enqueue: enqueue})
	// Chat platforms post to the channel webhook, whose turns run on async-worker.
	hook, err := channelturn.HookFrom(d, h.eng, enqueue)
	if err != nil {
		return nil, err
	}
	if hook != nil {
		h.mux.Handle("POST /channels/{bindingId}", hook)
	}
	return h, nil
}
