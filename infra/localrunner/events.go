package localrunner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/agentharness/harness/infra/template"
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// pollWait is how long one ReceiveMessage waits for messages, SQS's longest long poll; Stop
// cancels it at once.
const pollWait = 20

// sqsSource is one SQS event of a function: its queue and the handler batches go to.
type sqsSource struct {
	function string
	event    template.Event
	url, arn string
	handle   func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)
	timeout  time.Duration // the function's
	logger   *slog.Logger
}

// poll does what Lambda's event source mapping does for one poller: it long-polls the queue for
// up to BatchSize messages, invokes the handler with them, and deletes the ones that succeeded.
// A handler error (or panic, or timeout) fails the whole batch; with ReportBatchItemFailures the
// handler may fail single messages instead. Failed messages are left in the queue, to come back
// once their visibility timeout ends (and to go to the dead-letter queue after maxReceiveCount).
func (r *Runner) poll(ctx context.Context, s *sqsSource) {
	for ctx.Err() == nil {
		out, err := r.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    &s.url,
			MaxNumberOfMessages:         int32(min(s.event.BatchSize, 10)),
			WaitTimeSeconds:             pollWait,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.logger.Error("receiving messages", "queue", s.url, "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		if len(out.Messages) > 0 {
			r.deliver(ctx, s, out.Messages)
		}
	}
}

// deliver invokes the handler with one batch and deletes what succeeded.
func (r *Runner) deliver(ctx context.Context, s *sqsSource, msgs []types.Message) {
	ev := events.SQSEvent{Records: make([]events.SQSMessage, 0, len(msgs))}
	handles := map[string]string{} // message id → receipt handle
	for _, m := range msgs {
		ev.Records = append(ev.Records, s.record(m, r.sqs.Options().Region))
		handles[aws.ToString(m.MessageId)] = aws.ToString(m.ReceiptHandle)
	}
	invocation, cancel := context.WithTimeout(ctx, s.timeout)
	res, err := invokeSQS(invocation, s.handle, ev)
	cancel()
	if err != nil {
		s.logger.Error("batch failed; its messages come back after their visibility timeout", "messages", len(msgs), "err", err)
		return
	}
	if s.event.ReportsBatchItemFailures() {
		for _, f := range res.BatchItemFailures {
			if _, ok := handles[f.ItemIdentifier]; !ok {
				// Lambda treats a failure it cannot match to a message as a failed batch.
				s.logger.Error("batch failed: a reported item failure names no message of the batch",
					"itemIdentifier", f.ItemIdentifier, "messages", len(msgs))
				return
			}
			delete(handles, f.ItemIdentifier)
		}
		if failed := len(res.BatchItemFailures); failed > 0 {
			s.logger.Warn("messages failed; they come back after their visibility timeout", "failed", failed, "messages", len(msgs))
		}
	}
	// Deleting what succeeded must not be cut short by Stop, or it would run again.
	del, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var entries []types.DeleteMessageBatchRequestEntry
	for _, receipt := range handles {
		entries = append(entries, types.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(len(entries))), ReceiptHandle: aws.String(receipt)})
	}
	for len(entries) > 0 {
		n := min(len(entries), 10)
		out, err := r.sqs.DeleteMessageBatch(del, &sqs.DeleteMessageBatchInput{QueueUrl: &s.url, Entries: entries[:n]})
		if err != nil {
			s.logger.Error("deleting handled messages; they will run again", "messages", n, "err", err)
		} else {
			for _, f := range out.Failed {
				s.logger.Error("deleting a handled message; it will run again", "code", aws.ToString(f.Code), "err", aws.ToString(f.Message))
			}
		}
		entries = entries[n:]
	}
}

// record is a message as Lambda passes it to an SQS handler.
func (s *sqsSource) record(m types.Message, region string) events.SQSMessage {
	rec := events.SQSMessage{
		MessageId:              aws.ToString(m.MessageId),
		ReceiptHandle:          aws.ToString(m.ReceiptHandle),
		Body:                   aws.ToString(m.Body),
		Md5OfBody:              aws.ToString(m.MD5OfBody),
		Md5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
		Attributes:             m.Attributes,
		EventSourceARN:         s.arn,
		EventSource:            "aws:sqs",
		AWSRegion:              region,
	}
	if len(m.MessageAttributes) > 0 {
		rec.MessageAttributes = map[string]events.SQSMessageAttribute{}
		for k, v := range m.MessageAttributes {
			rec.MessageAttributes[k] = events.SQSMessageAttribute{
				DataType: aws.ToString(v.DataType), StringValue: v.StringValue, BinaryValue: v.BinaryValue,
				StringListValues: v.StringListValues, BinaryListValues: v.BinaryListValues,
			}
		}
	}
	return rec
}

// invokeSQS calls a batch handler, turning a panic into an error as a crashed invocation.
func invokeSQS(ctx context.Context, h func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), ev events.SQSEvent) (res events.SQSEventResponse, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("handler panicked: %v\n%s", p, debug.Stack())
		}
	}()
	res, err = h(ctx, ev)
	if err == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// Lambda discards what a function returns after its timeout.
		err = errors.New("the invocation timed out")
	}
	return res, err
}

// schedule is one Schedule event of a function.
type schedule struct {
	function string
	every    time.Duration
	run      func(context.Context) error
	timeout  time.Duration
	logger   *slog.Logger
}

// loop runs the function once per period, the first time one period after the start, as
// EventBridge does; a run that outlasts the period delays the next.
func (s *schedule) loop(ctx context.Context) {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		run, cancel := context.WithTimeout(ctx, s.timeout)
		err := s.invoke(run)
		cancel()
		if err != nil && ctx.Err() == nil {
			s.logger.Error("scheduled run failed", "err", err)
		}
	}
}

func (s *schedule) invoke(ctx context.Context) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("handler panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return s.run(ctx)
}
