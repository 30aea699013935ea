package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/agentharness/harness/shared/asynctools"
	"github.com/agentharness/harness/shared/completion"
	"github.com/agentharness/harness/shared/connections"
	"github.com/agentharness/harness/shared/httpjson"
	"github.com/agentharness/harness/shared/store"
	"github.com/agentharness/harness/shared/turn"
)

// abort stops the runtime's turn, whatever it is doing (seed 003, "Abort"):
//   - held for approval: the held calls are denied as cancelled and the turn ends with
//     stop_reason cancelled before the answer goes out, so the conversation is usable at once;
//   - running: the worker running it sees the request within a moment, cancels the model call,
//     and the turn ends with stop_reason cancelled;
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
	head, err := h.opts.Store.ConversationHead(ctx, accountID, rt.ConversationID)
	if errors.Is(err, store.ErrNotFound) {
		err = nil
	}
	if err != nil {
		return c.fail(ctx, resp, c.refusal(ctx, err))
	}
	aborted := false
	switch {
	case len(head.PendingApprovals) > 0:
		aborted, err = h.abortApprovals(ctx, accountID, rt, run)
	case hasRun && (run.Status == store.EventProcessing || run.Status == runQueued):
		if err = h.opts.Connections.Abort(ctx, accountID, rt.ConversationID, run.EventID); err == nil && head.AsyncGroup != "" {
			err = h.cancelGroup(ctx, accountID, head.AsyncGroup, run.EventID)
		}
		aborted = err == nil
	}
	if err != nil {
		return c.fail(ctx, resp, c.refusal(ctx, err))
	}
	return c.reply(ctx, map[string]any{"type": resp, "runtime": rt, "aborted": aborted, "success": true})
}

// abortApprovals ends a turn held for approval: every pending approval is denied as cancelled
// through the same rules as an answer (plan), the paused step is closed with those denials
// without calling the model, and the runtime is told stop_reason cancelled. aborted is false
// when another request holds the conversation (an answer being applied) or nothing is pending
// any more.
func (h *Handler) abortApprovals(ctx context.Context, accountID string, rt runtimeScope, run connections.Run) (aborted bool, err error) {
	req := &turnRequest{ID: rt.ConversationID, AgentID: rt.AgentID}
	cfg, err := h.agentFor(ctx, accountID, req, false)
	if err != nil {
		return false, err
	}
	now := h.opts.Now()
	lease, err := h.opts.Store.BeginTurn(ctx, accountID, req.ID, req.AgentID, now, now.Add(h.opts.Lease))
	if errors.Is(err, store.ErrBusy) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	in := turnInput{cancel: true}
	rows, err := h.opts.Store.Approvals(ctx, accountID, lease.Pending())
	if err != nil {
		_ = lease.Release(context.WithoutCancel(ctx))
		return false, err
	}
	for _, id := range lease.Pending() {
		if a, ok := rows[id]; ok && a.Status == store.ApprovalPending && !a.Expired(now) {
			in.decisions = append(in.decisions, decision{ApprovalID: id, Approved: new(false)})
		}
	}
	if len(in.decisions) == 0 {
		// Expired meanwhile: the next request settles them, as it would without the abort.
		return false, lease.Release(ctx)
	}
	plan, err := h.plan(ctx, accountID, req, in, lease, now)
	if err != nil {
		_ = lease.Release(context.WithoutCancel(ctx))
		var refused *httpjson.Error
		if errors.As(err, &refused) && refused.Status == http.StatusConflict {
			return false, nil // answered meanwhile
		}
		return false, err
	}
	cfg.Pause = h.pauseFunc(lease, req.AgentID)
	runID := run.EventID
	if runID == "" {
		runID = lease.Carried().PausedEvent
	}
	out := h.newOut(accountID, rt, runID)
	d := &drive{
		h: h, log: h.opts.Logger.With("accountId", accountID, "agentId", req.AgentID, "conversationId", req.ID),
		accountID: accountID, agentID: req.AgentID, conversationID: req.ID,
		resumes: lease.Carried().PausedEvent, nonce: store.NewID(""), delivery: asynctools.Delivery{Kind: asynctools.DeliverWebSocket},
		cfg: cfg, turn: lease, emit: func(ev turn.Event) { out.event(ctx, ev) }, heartbeat: func() {},
	}
	from := lease.NextSeq()
	res := d.run(ctx, plan)
	done := context.WithoutCancel(ctx)
	err = d.conclude(done, plan, res, from, func() {
		if run.EventID != "" {
			run.Status, run.UpdatedAt = res.status, h.opts.Now()
			if err := h.opts.Connections.SetRun(done, accountID, rt.ConversationID, run); err != nil {
				d.log.ErrorContext(done, "recording the aborted websocket run", "err", err)
			}
		}
		out.end(done, res, true)
	})
	return true, err
}

// cancelGroup settles the running calls of the dispatch group a WebSocket run waits for as
// cancelled. A call answered meanwhile keeps its answer; a group that belongs to another turn
// (an /async turn on the same conversation) is left alone.
func (h *Handler) cancelGroup(ctx context.Context, accountID, groupID, runID string) error {
	st, err := h.opts.Async.Load(ctx, groupID)
	if err != nil {
		return err
	}
	if st.Group == nil || st.Group.AccountID != accountID || st.Group.Delivery.EventID != runID {
		return nil
	}
	for _, id := range st.Pending() {
		row, ok := st.Row(id)
		if !ok {
			continue
		}
		_, err := completion.Settle(ctx, h.opts.Async, h.opts.Redriver, row, asynctools.Outcome{Status: asynctools.Cancelled, Error: cancelledCallText}, h.opts.Now())
		var refused *httpjson.Error
		if errors.As(err, &refused) && refused.Status == http.StatusConflict {
			continue // answered, or timed out, meanwhile
		}
		if err != nil {
			return err
		}
	}
	return nil
}
