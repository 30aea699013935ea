// Package workqueue is what the functions that feed async-worker share: the kinds of message on
// its queue, the two every producer may send (a continuation, a purge), sending on SQS, and the
// async tool store with the redriver that queues continuations. async-worker reads the turn
// message, whose body only the harness writes.
package workqueue

import (
	"context"
	"encoding/json"
	"fmt"

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
