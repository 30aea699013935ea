// Package workqueue is what the functions that feed async-worker share: the kinds of message on
// its queue, the two every producer may send (a continuation, a purge), sending on SQS, and the
// async tool store with the redriver that queues continuations. async-worker reads the turn
// message, whose body only the harness writes.
package workqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentharness/harness/shared/lambda/lambdadeps"
	"github.com/agentharness/harness/shared/state/blobstore"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Kind is what a message on the work queue asks async-worker to do.
type Kind string

const (
	// Turn runs a queued turn (POST /async, a WebSocket input).
	Turn Kind = "turn"
	// Continue brings a settled dispatch group's results back to its turn.
	Continue Kind = "continue"
	// Purge removes a deleted account's data.
	Purge Kind = "purge"
)

// message is the part of a work message every kind has, and the fields of the kinds any
// producer sends.
type message struct {
	Type      Kind   `json:"type"`
	AccountID string `json:"accountId"`
	GroupID   string `json:"groupId,omitempty"`
}

// PurgeMessage asks for the purge of a deleted account.
func PurgeMessage(accountID string) string {
	b, _ := json.Marshal(message{Type: Purge, AccountID: accountID}) // strings only: cannot fail
	return string(b)
}

// ContinueMessage asks for the continuation of a settled dispatch group.
func ContinueMessage(accountID, groupID string) string {
	b, _ := json.Marshal(message{Type: Continue, AccountID: accountID, GroupID: groupID})
	return string(b)
}

// Sender sends a message body to a queue.
type Sender func(ctx context.Context, queueURL, body string) error

// SQS sends message bodies with c; nil without a client.
func SQS(c *sqs.Client) Sender {
	if c == nil {
		return nil
	}
	return func(ctx context.Context, queueURL, body string) error {
		_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &queueURL, MessageBody: &body})
		if err != nil {
			return fmt.Errorf("sending to %s: %w", queueURL, err)
		}
		return nil
	}
}

// AsyncTools builds the async tool store (ASYNC_RESULTS_TABLE, with ASYNC_RESULTS_BUCKET for
// large results) and the redriver that queues continuations on ASYNC_WORK_QUEUE_URL.
func AsyncTools(d lambdadeps.Deps) (*asynctools.Store, *asynctools.Redriver, error) {
	table, bucket, queue := d.Getenv("ASYNC_RESULTS_TABLE"), d.Getenv("ASYNC_RESULTS_BUCKET"), d.Getenv("ASYNC_WORK_QUEUE_URL")
	for name, v := range map[string]string{"ASYNC_RESULTS_TABLE": table, "ASYNC_RESULTS_BUCKET": bucket, "ASYNC_WORK_QUEUE_URL": queue} {
		if v == "" {
			return nil, nil, fmt.Errorf("environment variable %s is not set", name)
		}
	}
	if d.SQS == nil || d.S3 == nil {
		return nil, nil, errors.New("async tools need SQS and S3 clients")
	}
	async := asynctools.NewStore(d.DB, table, blobstore.NewS3(d.S3, bucket))
	send := SQS(d.SQS)
	redriver := &asynctools.Redriver{Store: async, Send: func(ctx context.Context, c asynctools.Continuation) error {
		return send(ctx, queue, ContinueMessage(c.AccountID, c.GroupID))
	}}
	return async, redriver, nil
}
