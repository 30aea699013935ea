package worker

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/agentharness/harness/shared/state/channels"
	"github.com/agentharness/harness/shared/state/skills"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/state/workspaces"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/turn"
	"github.com/agentharness/harness/shared/wire/workqueue"
	"github.com/aws/aws-lambda-go/events"
)

// Worker is async-worker: it runs queued turns (/async and its edges'), continues parents
// whose async tools have settled, and purges deleted accounts. Each message is idempotent: a
// turn is keyed by its event, a continuation fenced on the conversation, so a duplicate delivery
// does nothing.
type Worker struct {
	eng  *turn.Engine
	opts Options
}

// Options wires the worker's dependencies besides the engine.
type Options struct {
	// Edges run the output of the turns their transports queued, by the name the work carries
	// (turn.Work.Edge); a turn of an edge not wired here is refused.
	Edges map[string]Edge
	// Enqueue puts work back on the queue (the next pass of a purge).
	Enqueue func(ctx context.Context, body string) error
	// Skills, Workspaces and Bindings are deleted with the rest of a purged account's data; nil
	// where the deployment keeps none.
	Skills     *skills.Store
	Workspaces *workspaces.Store
	Bindings   *channels.Store
	// RetrySoon shortens the wait before a message that found its conversation busy comes
	// back; nil leaves the queue's visibility timeout.
	RetrySoon func(ctx context.Context, receiptHandle string)
}

// Edge is a transport's part of the turns it queued (the App Server's, a chat channel's), which
// the worker runs: a fifth transport is a package that implements it and a line in
// async-worker's wire.
type Edge interface {
	// Prepare readies a turn about to begin with the agent the worker loaded (start.Config):
	// its route, its own tools, whether approvals can be asked. It returns the run that shows
	// the turn's output and finishes it; its error is the client-safe reason the turn cannot
	// run.
	Prepare(ctx context.Context, work turn.Work, start *turn.Start) (func(context.Context, *turn.Run) error, error)
	// Refused tells the edge's client that its queued turn was refused, or dropped, with o.
	Refused(ctx context.Context, work turn.Work, o turn.Outcome)
	// Continue runs the continuation of one of its turns whose async calls settled.
	Continue(ctx context.Context, c *turn.Continuation) error
}

// New returns a worker on eng.
func New(eng *turn.Engine, opts Options) *Worker { return &Worker{eng: eng, opts: opts} }

// errBusy: the conversation is running another turn; the message comes back later.
var errBusy = errors.New("conversation busy")

// Handle processes one batch, its messages concurrently; those that must be retried come
// back as batch item failures, so SQS redelivers only them.
func (w *Worker) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, rec := range ev.Records {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := w.process(ctx, rec.Body)
			if err == nil {
				return
			}
			log := w.eng.Options().Logger.With("messageId", rec.MessageId)
			if errors.Is(err, errBusy) {
				log.InfoContext(ctx, "conversation busy; the message will be retried")
				if w.opts.RetrySoon != nil {
					w.opts.RetrySoon(ctx, rec.ReceiptHandle)
				}
			} else {
				log.ErrorContext(ctx, "async work failed; the message will be retried", "err", err)
			}
			mu.Lock()
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
			mu.Unlock()
		}()
	}
	wg.Wait()
	return resp, nil
}

// process handles one message. Errors mean "retry"; a message that can never succeed is
// logged and dropped.
func (w *Worker) process(ctx context.Context, body string) error {
	var msg turn.Work
	if err := json.Unmarshal([]byte(body), &msg); err != nil || msg.AccountID == "" {
		w.eng.Options().Logger.ErrorContext(ctx, "dropping a malformed work message", "err", err)
		return nil
	}
	switch msg.Type {
	case workqueue.Turn, workqueue.Continue:
		// A deleted account's work would write conversations its purge has to find again.
		if _, err := w.eng.Options().Store.Account(ctx, msg.AccountID); errors.Is(err, store.ErrNotFound) {
			w.eng.Options().Logger.InfoContext(ctx, "dropping work of a deleted account", "accountId", msg.AccountID, "type", msg.Type)
			if e := w.opts.Edges[msg.Edge]; e != nil {
				// The edge's client is told, not left waiting for the turn's end.
				e.Refused(ctx, msg, turn.Outcome{Status: turn.StatusFailed, Error: "the turn was dropped: the account was deleted"})
			}
			return nil
		} else if err != nil {
			return err
		}
		if msg.Type == workqueue.Turn {
			return w.turn(ctx, msg)
		}
		return w.continueGroup(ctx, msg)
	case workqueue.Purge:
		return w.purge(ctx, msg)
	}
	w.eng.Options().Logger.ErrorContext(ctx, "dropping a work message of unknown type", "type", msg.Type)
	return nil
}

// turn runs a queued turn. A turn whose event is no longer processing already ran.
func (w *Worker) turn(ctx context.Context, msg turn.Work) error {
	o := w.eng.Options()
	req := msg.Request
	if req == nil || msg.EventID == "" {
		o.Logger.ErrorContext(ctx, "dropping a turn message without its request")
		return nil
	}
	ev, err := o.Store.Event(ctx, msg.AccountID, msg.EventID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if ev.Status != store.EventProcessing {
		return nil
	}
	edge := w.opts.Edges[msg.Edge]
	if msg.Edge != "" && edge == nil {
		o.Logger.ErrorContext(ctx, "dropping a turn of an edge not wired here", "edge", msg.Edge, "eventId", msg.EventID)
		return w.eng.Report(ctx, msg.AccountID, msg.EventID, turn.Outcome{Status: turn.StatusFailed, Error: "this deployment cannot run turns that came through " + msg.Edge}, 0, 0)
	}
	refuse := func(res turn.Outcome) error {
		if edge != nil {
			edge.Refused(ctx, msg, res)
		}
		return w.eng.Report(ctx, msg.AccountID, msg.EventID, res, 0, 0)
	}
	cfg, err := w.eng.Agent(ctx, msg.AccountID, *req, false)
	var refused *turn.Refusal
	if errors.As(err, &refused) {
		return refuse(turn.Outcome{Status: turn.StatusFailed, Error: refused.Message})
	}
	if err != nil {
		return err
	}
	start := turn.Start{
		AccountID: msg.AccountID, Request: *req, Config: cfg, GroupSeed: msg.GroupSeed,
		Input:    turn.Input{Message: msg.Message, Decisions: msg.Decisions, RespondsTo: msg.RespondsTo},
		Delivery: asynctools.Delivery{Edge: msg.Edge, EventID: msg.EventID, GroupSeed: msg.GroupSeed},
	}
	if msg.Tree != nil {
		start.Tree = *msg.Tree
	}
	show := func(ctx context.Context, run *turn.Run) error { return run.Finish(ctx, run.Execute(ctx), nil) }
	if edge != nil {
		if show, err = edge.Prepare(ctx, msg, &start); err != nil {
			return refuse(turn.Outcome{Status: turn.StatusFailed, Error: err.Error()})
		}
	}
	run, err := w.eng.Begin(ctx, start)
	if errors.As(err, &refused) {
		if refused.Kind == turn.Busy {
			return errBusy
		}
		return refuse(turn.Outcome{Status: turn.StatusFailed, Error: refused.Message, ErrExtra: refused.Detail})
	}
	if err != nil {
		return err
	}
	return show(ctx, run)
}

// continueGroup brings a settled group's results back to its parent turn and runs the model
// again (turn.Engine.TakeUp decides whether there is anything to continue).
func (w *Worker) continueGroup(ctx context.Context, msg turn.Work) error {
	c, err := w.eng.TakeUp(ctx, msg.AccountID, msg.GroupID)
	if errors.Is(err, store.ErrBusy) {
		return errBusy
	}
	if c == nil || err != nil {
		return err
	}
	if e := w.opts.Edges[c.Group.Group.Delivery.Edge]; e != nil {
		err = e.Continue(ctx, c)
	} else {
		// An SSE or /async turn: its stream log and status row take the output.
		err = c.Finish(ctx, c.Execute(ctx), nil)
	}
	if err != nil {
		return err
	}
	return c.Consume(context.WithoutCancel(ctx))
}
