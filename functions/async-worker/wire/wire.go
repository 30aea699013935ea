// Package wire builds async-worker's handler from the function's dependencies.
package wire

import (
	"context"

	"github.com/agentharness/harness/functions/turnwire"
	wsgateway "github.com/agentharness/harness/functions/ws-gateway/wire"
	"github.com/agentharness/harness/shared/edge/appserver"
	"github.com/agentharness/harness/shared/edge/channelturn"
	"github.com/agentharness/harness/shared/edge/worker"
	"github.com/agentharness/harness/shared/lambda/agentdeps"
	"github.com/agentharness/harness/shared/state/channels"
	"github.com/agentharness/harness/shared/state/skills"
	"github.com/agentharness/harness/shared/state/workspaces"
	"github.com/agentharness/harness/shared/turn"
	"github.com/agentharness/harness/shared/wire/workqueue"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// busyRetrySeconds is how soon a message that found its conversation busy is tried again.
const busyRetrySeconds = 5

// Worker wires async-worker: the turn engine, the App Server's part of its turns where a
// WebSocket API is wired, the chat channels' part where the deployment keeps channels, its own
// queue and the skills and workspaces stores for purges, and a way to bring back soon a message whose
// conversation was busy.
func Worker(d agentdeps.Deps) (*worker.Worker, error) {
	topts, err := turnwire.Options(d)
	if err != nil {
		return nil, err
	}
	eng := turn.New(topts)
	sk, err := skills.FromConfig(d.DB, d.S3, skills.Config(d.Config.Skills))
	if err != nil {
		return nil, err
	}
	ws, err := workspaces.FromConfig(d.DB, d.S3, workspaces.Config(d.Config.Workspaces))
	if err != nil {
		return nil, err
	}
	queue := d.Config.Async.WorkQueue
	send := workqueue.SQS(d.SQS)
	opts := worker.Options{
		Edges:      map[string]worker.Edge{},
		Skills:     sk,
		Workspaces: ws,
		Enqueue:    func(ctx context.Context, body string) error { return send(ctx, queue, body) },
		RetrySoon: func(ctx context.Context, receipt string) {
			_, err := d.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &queue, ReceiptHandle: &receipt, VisibilityTimeout: busyRetrySeconds})
			if err != nil {
				eng.Options().Logger.WarnContext(ctx, "shortening the retry of a busy message", "err", err)
			}
		},
	}
	bindings, err := channels.FromConfig(d.DB, d.Sealer, d.Config.Channels.Table)
	if err != nil {
		return nil, err
	}
	if bindings != nil {
		opts.Edges[channelturn.Edge] = &channelturn.Turns{Bindings: bindings, APIs: channels.APIs(d.Config.Channels.APIs), Logger: eng.Options().Logger}
		opts.Bindings = bindings
	}
	if wsOpts, ok := wsgateway.AppServer(d); ok {
		ws, err := appserver.NewTurns(eng, wsOpts)
		if err != nil {
			return nil, err
		}
		opts.Edges[appserver.Edge] = ws
	}
	return worker.New(eng, opts), nil
}
