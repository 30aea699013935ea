package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"slices"
	"sync"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/asynctools"
	"github.com/agentharness/harness/shared/httpjson"
	"github.com/agentharness/harness/shared/model"
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
				w.h.newOut(msg.AccountID, msg.WS.Runtime, msg.EventID).end(ctx, runResult{status: store.EventFailed, errText: "the turn was dropped: the account was deleted"}, false)
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
	log := h.opts.Logger.With("accountId", msg.AccountID, "agentId", req.AgentID, "conversationId", req.ID, "eventId", msg.EventID)
	refuse := func(res runResult) error {
		if msg.WS != nil {
			// The queued record input wrote must not stand in for the runtime's run (an
			// approval_response continues the run's turn, with its tools).
			w.wsRefused(ctx, msg)
			out := h.newOut(msg.AccountID, msg.WS.Runtime, msg.EventID)
			h.dequeue(ctx, out, msg.EventID, "cancelled")
			out.end(ctx, res, false)
		}
		return w.h.report(ctx, msg.AccountID, msg.EventID, res, 0, 0)
	}
	cfg, err := h.agentFor(ctx, msg.AccountID, req, false)
	if err == nil && msg.WS != nil {
		cfg.WaitOnAsync = true
		if cfg.Tools, err = h.wsToolSet(cfg.Tools, msg.AccountID, msg.WS); err != nil {
			err = &httpjson.Error{Status: http.StatusBadRequest, Message: err.Error()}
		}
	}
	var refused *httpjson.Error
	if errors.As(err, &refused) {
		return refuse(runResult{status: store.EventFailed, errText: refused.Message})
	}
	if err != nil {
		return err
	}
	in := turnInput{message: msg.Message, decisions: msg.Decisions, respondsTo: msg.RespondsTo}
	lease, plan, err := h.begin(ctx, msg.AccountID, req, in, h.opts.Now())
	if errors.As(err, &refused) {
		if errors.Is(err, store.ErrBusy) {
			return errBusy
		}
		return refuse(runResult{status: store.EventFailed, errText: refused.Message, errExtra: refused.Extra})
	}
	if err != nil {
		return err
	}
	cfg.Pause = h.pauseFunc(lease, req.AgentID)
	from := lease.NextSeq()
	d := &drive{
		h: h, log: log, accountID: msg.AccountID, agentID: req.AgentID, conversationID: req.ID,
		turnID: msg.EventID, resumes: lease.Carried().PausedEvent, nonce: msg.Seed, delivery: asynctools.Delivery{Kind: asynctools.DeliverAsync, EventID: msg.EventID, Seed: msg.Seed},
		cfg: cfg, overrides: req.ToolApproval, turn: lease, emit: func(turn.Event) {}, heartbeat: func() {},
	}
	done := context.WithoutCancel(ctx)
	if msg.WS == nil {
		return d.conclude(done, plan, d.run(ctx, plan), from, nil)
	}
	d.delivery.Kind = asynctools.DeliverWebSocket
	ws := w.wsStart(ctx, d, msg.WS, from)
	res, aborted := ws.run(ctx, func(ctx context.Context) runResult { return d.run(ctx, plan) })
	return d.conclude(done, plan, res, from, func() { ws.finish(done, res, aborted) })
}

// continueGroup brings a settled group's results back to its parent turn and runs the model
// again. The conversation records the group it waits for, under its lease: a continuation for
// any other group is a duplicate and does nothing.
func (w *Worker) continueGroup(ctx context.Context, msg workMessage) error {
	h := w.h
	st, err := h.opts.Async.Load(ctx, msg.GroupID)
	if err != nil {
		return err
	}
	g := st.Group
	if g == nil || g.AccountID != msg.AccountID || !g.ConsumedAt.IsZero() {
		return nil
	}
	if !st.Settled() {
		h.opts.Logger.ErrorContext(ctx, "continuation of a group that is not settled", "groupId", g.ID)
		return nil
	}
	log := h.opts.Logger.With("accountId", g.AccountID, "agentId", g.AgentID, "conversationId", g.ConversationID, "groupId", g.ID)
	now := h.opts.Now()
	lease, err := h.opts.Store.BeginTurn(ctx, g.AccountID, g.ConversationID, g.AgentID, now, now.Add(h.opts.Lease))
	switch {
	case errors.Is(err, store.ErrBusy):
		return errBusy
	case errors.Is(err, store.ErrAgentMismatch):
		return h.opts.Async.Consume(ctx, g.ID, now)
	case err != nil:
		return err
	}
	history, err := lease.History(ctx)
	if err != nil {
		_ = lease.Release(context.WithoutCancel(ctx))
		return err
	}
	waiting, _ := lease.AsyncGroup()
	msgID := resultsMessageID(g.ID)
	switch {
	case lease.Carried().PausedGroup == g.ID:
		// Its pass paused for approval: the step's resume brings the results back.
		log.InfoContext(ctx, "continuation of a step paused for approval ignored")
		if err := lease.Release(ctx); err != nil {
			return err
		}
		return h.opts.Async.Consume(ctx, g.ID, now)
	case waiting == g.ID:
		results := make([]asynctools.Result, 0, len(g.Expected))
		for _, id := range g.Expected {
			if r, ok := st.Row(id); ok {
				results = append(results, r)
			}
		}
		m := asynctools.ResultsMessage(msgID, results)
		if err := lease.Append(ctx, m); err != nil {
			_ = lease.Release(context.WithoutCancel(ctx))
			return err
		}
		history = append(history, m)
	case hasMessage(history, msgID) && !continued(history, msgID):
		// An earlier attempt brought the results back and stopped before the model answered.
	default:
		log.InfoContext(ctx, "duplicate continuation ignored")
		if err := lease.Release(ctx); err != nil {
			return err
		}
		return h.opts.Async.Consume(ctx, g.ID, now)
	}
	log.InfoContext(ctx, "continuation started", "results", len(g.Expected))
	d := &drive{
		h: h, log: log, accountID: g.AccountID, agentID: g.AgentID, conversationID: g.ConversationID,
		turnID: g.Delivery.EventID, nonce: asynctools.NewGroupID(g.Delivery.Seed+"/"+g.ID, 0), delivery: g.Delivery,
		turn: lease, emit: func(turn.Event) {}, heartbeat: func() {},
	}
	done := context.WithoutCancel(ctx)
	if g.Delivery.Kind == asynctools.DeliverWebSocket {
		err = w.continueWS(ctx, d, st, history)
	} else {
		// The event's first message was reported by the turn's first invocation: from stays.
		err = d.conclude(done, &turnPlan{}, w.resume(ctx, d, history, nil), 0, nil)
	}
	if err != nil {
		return err
	}
	return h.opts.Async.Consume(done, g.ID, h.opts.Now())
}

// resume loads the agent, with the approval overrides its turn carries, and runs the model again
// over history; ws, when set, gives a WebSocket turn its tools back.
func (w *Worker) resume(ctx context.Context, d *drive, history []model.Message, ws *wsTurn) runResult {
	cfg, err := w.h.loadAgent(ctx, d.accountID, d.agentID)
	if err == nil {
		cfg.Tools = d.withCarried(ctx, cfg.Tools)
	}
	if err == nil && ws != nil {
		cfg.WaitOnAsync = true
		cfg.Tools, err = w.h.wsToolSet(cfg.Tools, d.accountID, ws)
	}
	if err != nil {
		return d.fail(ctx, err, "the agent could not continue: "+err.Error(), model.Usage{})
	}
	cfg.Pause = w.h.pauseFunc(d.turn, d.agentID)
	d.cfg, d.history = cfg, slices.Clone(history)
	return d.passes(ctx, 0, func(cfg agent.Config) iter.Seq2[agent.Event, error] { return agent.Continue(ctx, cfg, history) })
}

// continued reports whether the model already answered after the message with id msgID.
func continued(history []model.Message, msgID string) bool {
	for i, m := range history {
		if m.ID == msgID {
			return i < len(history)-1
		}
	}
	return false
}

// report records a turn's progress on its status row: its status, usage, error or what it
// waits for, and the span of messages it wrote (from <= seq < to).
func (h *Handler) report(ctx context.Context, accountID, eventID string, res runResult, from, to int64) error {
	b, err := json.Marshal(eventDetail(res))
	if err != nil {
		return err
	}
	err = h.opts.Store.UpdateEvent(ctx, accountID, eventID, store.EventUpdate{
		Status: res.status, Usage: res.usage, FromSeq: from, ToSeq: to, Detail: b, At: h.opts.Now(),
	})
	if errors.Is(err, store.ErrEventFinal) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reporting event %s: %w", eventID, err)
	}
	return nil
}

// eventDetail is what an event's status shows besides its status: the error, or what the turn
// waits for.
func eventDetail(res runResult) map[string]any {
	detail := map[string]any{}
	for k, v := range res.errExtra {
		detail[k] = v
	}
	switch {
	case res.errText != "":
		detail["error"] = res.errText
	case res.status == store.EventWaitingAsync:
		detail["pendingAsyncTools"], detail["groupId"] = res.pendingAsync, res.asyncGroup
	case res.status == store.EventWaiting:
		detail["pendingApprovals"] = res.pendingApprovals
	}
	if res.status == store.EventFailed && res.errText == "" {
		detail["error"] = "the turn failed"
	}
	return detail
}
