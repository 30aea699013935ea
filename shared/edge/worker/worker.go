package worker

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/state/channels"
	"github.com/agentharness/harness/shared/state/skills"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/turn"
	"github.com/agentharness/harness/shared/wire/workqueue"
	"github.com/aws/aws-lambda-go/events"
)

// Worker is async-worker: it runs queued turns (/async and the App Server's), continues parents
// whose async tools have settled, and purges deleted accounts. Each message is idempotent: a
// turn is keyed by its event, a continuation fenced on the conversation, so a duplicate delivery
// does nothing.
type Worker struct {
	eng  *turn.Engine
	opts Options
}

// Options wires the worker's dependencies besides the engine.
type Options struct {
	// WebSocket runs the App Server's part of its turns; nil where no WebSocket API is wired
	// (its turns are then refused).
	WebSocket WebSocketTurns
	// Channels answers the turns that came from chat channels in their chats; nil where no
	// channel is wired (their turns are then refused).
	Channels ChannelTurns
	// Enqueue puts work back on the queue (the next pass of a purge).
	Enqueue func(ctx context.Context, body string) error
	// Skills and Bindings are deleted with the rest of a purged account's data; nil where the
	// deployment keeps none.
	Skills   *skills.Store
	Bindings *channels.Store
	// RetrySoon shortens the wait before a message that found its conversation busy comes
	// back; nil leaves the queue's visibility timeout.
	RetrySoon func(ctx context.Context, receiptHandle string)
}

// WebSocketTurns is the App Server's part of the turns it queued (appserver.Turns).
type WebSocketTurns interface {
	Adapt(work turn.Work, cfg *agent.Config) error
	Refused(ctx context.Context, work turn.Work, o turn.Outcome)
	Run(ctx context.Context, work turn.Work, run *turn.Run) error
	Continue(ctx context.Context, c *turn.Continuation) error
}

// ChannelTurns is the chat channels' part of the turns their webhooks queued
// (channelturn.Turns): how a turn starts (Start.NoApprovals, Delivery.Route), and the run that
// posts its output to the chat, which Prepare returns with the chat it read.
type ChannelTurns interface {
	Prepare(ctx context.Context, work turn.Work, start *turn.Start) (func(context.Context, *turn.Run) error, error)
	Refused(ctx context.Context, work turn.Work, o turn.Outcome)
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
			if msg.WS != nil && w.opts.WebSocket != nil {
				// The runtime that queued it is told, not left waiting for a stop_reason.
				w.opts.WebSocket.Refused(ctx, msg, turn.Outcome{Status: store.EventFailed, Error: "the turn was dropped: the account was deleted"})
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
	ws, ch := msg.WS != nil, msg.Channel != nil
	if ws && w.opts.WebSocket == nil {
		o.Logger.ErrorContext(ctx, "dropping a WebSocket turn: no WebSocket API is wired here", "eventId", msg.EventID)
		return w.eng.Report(ctx, msg.AccountID, msg.EventID, turn.Outcome{Status: store.EventFailed, Error: "this deployment has no WebSocket API to run the turn for"}, 0, 0)
	}
	if ch && w.opts.Channels == nil {
		o.Logger.ErrorContext(ctx, "dropping a channel turn: no channel is wired here", "eventId", msg.EventID)
		return w.eng.Report(ctx, msg.AccountID, msg.EventID, turn.Outcome{Status: store.EventFailed, Error: "this deployment keeps no channels to answer the turn in"}, 0, 0)
	}
	refuse := func(res turn.Outcome) error {
		switch {
		case ws:
			w.opts.WebSocket.Refused(ctx, msg, res)
		case ch:
			w.opts.Channels.Refused(ctx, msg, res)
		}
		return w.eng.Report(ctx, msg.AccountID, msg.EventID, res, 0, 0)
	}
	cfg, err := w.eng.Agent(ctx, msg.AccountID, *req, false)
	if err == nil && ws {
		if err = w.opts.WebSocket.Adapt(msg, &cfg); err != nil {
			err = &turn.Refusal{Kind: turn.Invalid, Message: err.Error()}
		}
	}
	var refused *turn.Refusal
	if errors.As(err, &refused) {
		return refuse(turn.Outcome{Status: store.EventFailed, Error: refused.Message})
	}
	if err != nil {
		return err
	}
	start := turn.Start{
		AccountID: msg.AccountID, Request: *req, Config: cfg, GroupSeed: msg.GroupSeed,
		Input:    turn.Input{Message: msg.Message, Decisions: msg.Decisions, RespondsTo: msg.RespondsTo},
		Delivery: asynctools.Delivery{Kind: asynctools.DeliverAsync, EventID: msg.EventID, GroupSeed: msg.GroupSeed},
	}
	if msg.Tree != nil {
		start.Tree = *msg.Tree
	}
	if ws {
		start.Delivery.Kind = asynctools.DeliverWebSocket
	}
	var inChat func(context.Context, *turn.Run) error
	if ch {
		if inChat, err = w.opts.Channels.Prepare(ctx, msg, &start); err != nil {
			return refuse(turn.Outcome{Status: store.EventFailed, Error: err.Error()})
		}
	}
	run, err := w.eng.Begin(ctx, start)
	if errors.As(err, &refused) {
		if refused.Kind == turn.Busy {
			return errBusy
		}
		return refuse(turn.Outcome{Status: store.EventFailed, Error: refused.Message, ErrExtra: refused.Detail})
	}
	if err != nil {
		return err
	}
	switch {
	case ws:
		return w.opts.WebSocket.Run(ctx, msg, run)
	case ch:
		return inChat(ctx, run)
	}
	return run.Finish(ctx, run.Execute(ctx), nil)
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
	switch kind := c.Group.Group.Delivery.Kind; {
	case kind == asynctools.DeliverWebSocket && w.opts.WebSocket != nil:
		err = w.opts.WebSocket.Continue(ctx, c)
	case kind == asynctools.DeliverChannel && w.opts.Channels != nil:
		err = w.opts.Channels.Continue(ctx, c)
	default:
		err = c.Finish(ctx, c.Execute(ctx), nil)
	}
	if err != nil {
		return err
	}
	return c.Consume(context.WithoutCancel(ctx))
}
