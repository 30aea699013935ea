package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"

	"github.com/agentharness/harness/shared/asynctools"
	"github.com/agentharness/harness/shared/httpjson"
	"github.com/agentharness/harness/shared/store"
	"github.com/agentharness/harness/shared/turn"
	"github.com/agentharness/harness/shared/workqueue"
	"github.com/aws/aws-lambda-go/events"
)

// Worker is async-worker: it runs /async turns and continues parents whose async tools have
// settled. Each message is idempotent: a turn is keyed by its event, a continuation fenced on
// the conversation, so a duplicate delivery does nothing.
type Worker struct {
	h *Handler
	// retrySoon shortens the wait before a message that found its conversation busy comes
	// back; nil leaves the queue's visibility timeout.
	retrySoon func(ctx context.Context, receiptHandle string)
}

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
			log := w.h.opts.Logger.With("messageId", rec.MessageId)
			if errors.Is(err, errBusy) {
				log.InfoContext(ctx, "conversation busy; the message will be retried")
				if w.retrySoon != nil {
					w.retrySoon(ctx, rec.ReceiptHandle)
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
	var msg workMessage
	if err := json.Unmarshal([]byte(body), &msg); err != nil || msg.AccountID == "" {
		w.h.opts.Logger.ErrorContext(ctx, "dropping a malformed work message", "err", err)
		return nil
	}
	switch msg.Type {
	case workqueue.Turn, workqueue.Continue:
		// A deleted account's work would write conversations its purge has to find again.
		if _, err := w.h.opts.Store.Account(ctx, msg.AccountID); errors.Is(err, store.ErrNotFound) {
			w.h.opts.Logger.InfoContext(ctx, "dropping work of a deleted account", "accountId", msg.AccountID, "type", msg.Type)
			if msg.WS != nil {
				// The runtime that queued it is told, not left waiting for a stop_reason.
				w.h.newOut(msg.AccountID, msg.WS.Runtime, msg.EventID).end(ctx, turn.Outcome{Status: store.EventFailed, Error: "the turn was dropped: the account was deleted"}, false)
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
	w.h.opts.Logger.ErrorContext(ctx, "dropping a work message of unknown type", "type", msg.Type)
	return nil
}

// turn runs an /async turn. A turn whose event is no longer processing already ran.
func (w *Worker) turn(ctx context.Context, msg workMessage) error {
	h := w.h
	req := msg.Request
	if req == nil || msg.EventID == "" {
		h.opts.Logger.ErrorContext(ctx, "dropping a turn message without its request")
		return nil
	}
	ev, err := h.opts.Store.Event(ctx, msg.AccountID, msg.EventID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if ev.Status != store.EventProcessing {
		return nil
	}
	refuse := func(res turn.Outcome) error {
		if msg.WS != nil {
			// The queued record input wrote must not stand in for the runtime's run (an
			// approval_response continues the run's turn, with its tools).
			w.wsRefused(ctx, msg)
			out := h.newOut(msg.AccountID, msg.WS.Runtime, msg.EventID)
			h.dequeue(ctx, out, msg.EventID, "cancelled")
			out.end(ctx, res, false)
		}
		return w.h.eng.Report(ctx, msg.AccountID, msg.EventID, res, 0, 0)
	}
	cfg, err := h.eng.Agent(ctx, msg.AccountID, *req, false)
	if err == nil && msg.WS != nil {
		cfg.WaitOnAsync = true
		if cfg.Tools, err = h.wsToolSet(cfg.Tools, msg.AccountID, msg.WS); err != nil {
			err = &httpjson.Error{Status: http.StatusBadRequest, Message: err.Error()}
		}
	}
	var refused *httpjson.Error
	if errors.As(err, &refused) {
		return refuse(turn.Outcome{Status: store.EventFailed, Error: refused.Message})
	}
	if err != nil {
		return err
	}
	in := turn.Input{Message: msg.Message, Decisions: msg.Decisions, RespondsTo: msg.RespondsTo}
	var ws *wsRun
	start := turn.Start{
		AccountID: msg.AccountID, Request: *req, Input: in, Config: cfg, Seed: msg.Seed,
		Delivery: asynctools.Delivery{Kind: asynctools.DeliverAsync, EventID: msg.EventID, Seed: msg.Seed},
	}
	if msg.WS != nil {
		start.Delivery.Kind = asynctools.DeliverWebSocket
		start.Emit = func(ev turn.Event) { ws.out.event(ctx, ev) }
	}
	run, err := h.eng.Begin(ctx, start)
	if errors.As(err, &refused) {
		if errors.Is(err, store.ErrBusy) {
			return errBusy
		}
		return refuse(turn.Outcome{Status: store.EventFailed, Error: refused.Message, ErrExtra: refused.Extra})
	}
	if err != nil {
		return err
	}
	done := context.WithoutCancel(ctx)
	if msg.WS == nil {
		return run.Conclude(done, run.Execute(ctx), nil)
	}
	ws = h.newWSRun(msg.AccountID, msg.EventID, msg.WS, run.From())
	ws.start(ctx)
	res, aborted := ws.run(ctx, run.Execute)
	return run.Conclude(done, res, func() { ws.finish(done, res, aborted) })
}

// continueGroup brings a settled group's results back to its parent turn and runs the model
// again (turn.Engine.TakeUp decides whether there is anything to continue).
func (w *Worker) continueGroup(ctx context.Context, msg workMessage) error {
	c, err := w.h.eng.TakeUp(ctx, msg.AccountID, msg.GroupID)
	if errors.Is(err, store.ErrBusy) {
		return errBusy
	}
	if c == nil || err != nil {
		return err
	}
	done := context.WithoutCancel(ctx)
	if c.Group.Group.Delivery.Kind == asynctools.DeliverWebSocket {
		err = w.h.continueWS(ctx, c)
	} else {
		err = c.Conclude(done, c.Execute(ctx, nil), nil)
	}
	if err != nil {
		return err
	}
	return c.Consume(done)
}
