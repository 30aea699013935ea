package worker

import (
	"context"

	"github.com/agentharness/harness/shared/edge/appserver"
	"github.com/agentharness/harness/shared/edge/channelturn"
	"github.com/agentharness/harness/shared/edge/natslog"
	"github.com/agentharness/harness/shared/lambda/lambdadeps"
	"github.com/agentharness/harness/shared/state/skills"
	"github.com/agentharness/harness/shared/turn"
	"github.com/agentharness/harness/shared/wire/workqueue"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// busyRetrySeconds is how soon a message that found its conversation busy is tried again.
const busyRetrySeconds = 5

// FromDeps wires async-worker: the turn engine, the App Server's part of its turns where a
// WebSocket API is wired, its own queue and the skills store for purges, and a way to bring back
// soon a message whose conversation was busy.
func FromDeps(d lambdadeps.Deps) (*Worker, error) {
	topts, err := turn.OptionsFrom(d)
	if err == nil {
		err = natslog.Attach(&topts, d) // turn streams to NATS too, where NATS_URL says so
	}
	if err != nil {
		return nil, err
	}
	eng := turn.New(topts)
	sk, err := skills.FromEnv(d.DB, d.S3, d.Getenv)
	if err != nil {
		return nil, err
	}
	queue := d.Getenv("ASYNC_WORK_QUEUE_URL")
	send := workqueue.SQS(d.SQS)
	opts := Options{
		Skills:  sk,
		Enqueue: func(ctx context.Context, body string) error { return send(ctx, queue, body) },
		RetrySoon: func(ctx context.Context, receipt string) {
			_, err := d.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &queue, ReceiptHandle: &receipt, VisibilityTimeout: busyRetrySeconds})
			if err != nil {
				eng.Options().Logger.WarnContext(ctx, "shortening the retry of a busy message", "err", err)
			}
		},
	}
	channelTurns, err := channelturn.TurnsFrom(d, eng)
	if err != nil {
		return nil, err
	}
	if channelTurns != nil {
		opts.Channels, opts.Bindings = channelTurns, channelTurns.Bindings
	}
	if wsOpts, ok := appserver.OptionsFrom(d); ok {
		if opts.WebSocket, err = appserver.NewTurns(eng, wsOpts); err != nil {
			return nil, err
		}
	}
	return New(eng, opts), nil
}
