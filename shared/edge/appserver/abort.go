package appserver

import (
	"context"
	"errors"

	"github.com/agentharness/harness/shared/state/connections"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/turn"
)

// abort stops the runtime's turn, whatever it is doing (seed 003, "Abort"):
//   - held for approval: the held calls are denied as cancelled and the turn ends with
//     stop_reason cancelled before the answer goes out, so the conversation is usable at once;
//   - running: the worker running it sees the request at the engine's next stop poll
//     (turn.Run.Watch) and stops it as any stop request does: the model call is cancelled, the
//     answer so far is kept, and the turn ends with stop_reason cancelled;
//   - waiting for the controller's (or an outside worker's) tool calls: the calls are settled
//     as cancelled through the conditional write an answer takes, so a late answer is refused;
//     the last one re-drives the turn, whose continuation finds the abort and ends it without
//     calling the model.
//
// aborted is false when there was nothing to stop.
func (c *call) abort(ctx context.Context) error {
	const resp = "abort_message_response"
	rt, _, err := c.runtime(ctx)
	if err != nil {
		return c.fail(ctx, resp, err.Error())
	}
	h, accountID := c.g.h, c.conn.AccountID
	run, hasRun, err := h.opts.Connections.Run(ctx, accountID, rt.ConversationID)
	if err != nil {
		return c.fail(ctx, resp, c.refusal(ctx, err))
	}
	readHead := func() (store.Head, error) {
		head, err := h.opts.Store.ConversationHead(ctx, accountID, rt.ConversationID)
		if errors.Is(err, store.ErrNotFound) {
			return store.Head{}, nil // a new conversation: its first turn is queued
		}
		return head, err
	}
	head, err := readHead()
	if err != nil {
		return c.fail(ctx, resp, c.refusal(ctx, err))
	}
	aborted := false
	switch {
	case len(head.PendingApprovals) > 0:
		aborted, err = h.abortApprovals(ctx, accountID, rt, run)
	case hasRun && (run.Status == store.EventProcessing || run.Status == runQueued):
		// The abort is recorded before the wait is looked for (the worker records the wait
		// before it looks for the abort), so a turn that starts waiting meanwhile is seen by
		// one of the two.
		if err = h.opts.Connections.Abort(ctx, accountID, rt.ConversationID, run.EventID); err == nil {
			head, err = readHead()
		}
		if err == nil && head.AsyncGroup != "" {
			err = h.eng.CancelGroup(ctx, accountID, head.AsyncGroup, run.EventID)
		}
		aborted = err == nil
	}
	if err != nil {
		return c.fail(ctx, resp, c.refusal(ctx, err))
	}
	return c.reply(ctx, map[string]any{"type": resp, "runtime": rt, "aborted": aborted, "success": true})
}

// abortApprovals ends a turn held for approval (turn.Engine.BeginCancel) and tells the runtime
// stop_reason cancelled. aborted is false when another request holds the conversation (an
// answer being applied) or nothing is pending any more.
func (h *server) abortApprovals(ctx context.Context, accountID string, rt runtimeScope, run connections.Run) (aborted bool, err error) {
	req := turn.Request{ConversationID: rt.ConversationID, AgentID: rt.AgentID}
	cfg, err := h.eng.Agent(ctx, accountID, req, false)
	if err != nil {
		return false, err
	}
	r, err := h.eng.BeginCancel(ctx, turn.Start{
		AccountID: accountID, Request: req, Config: cfg, Delivery: asynctools.Delivery{Edge: Edge},
	})
	if r == nil || err != nil {
		return false, err
	}
	runID := run.EventID
	if runID == "" {
		runID = r.ResumedEvent()
	}
	out := h.newOut(accountID, rt, runID)
	for ev := range r.Events(ctx) {
		out.event(ctx, ev)
	}
	res := r.Outcome()
	err = r.Finish(ctx, res, func(done context.Context) {
		if run.EventID != "" {
			run.Status, run.UpdatedAt = string(res.Status), h.opts.Now()
			if err := h.opts.Connections.SetRun(done, accountID, rt.ConversationID, run); err != nil {
				out.log.ErrorContext(done, "recording the aborted websocket run", "err", err)
			}
		}
		out.end(done, res, true)
	})
	return true, err
}
