package api

import (
	"context"
	"errors"

	"github.com/aws/aws-lambda-go/events"
)

// Worker is async-worker: it runs /async turns and continues parents whose async tools have
// settled, one SQS message at a time, reporting failed messages back to SQS individually.
type Worker struct{}

// NewWorker wires async-worker from d.
func NewWorker(d Deps) (*Worker, error) {
	return nil, errors.New("async-worker is not built yet")
}

// Handle processes one batch; the messages it could not process come back as batch item
// failures, so SQS redelivers only those.
func (w *Worker) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	return events.SQSEventResponse{}, errors.New("not built yet")
}
