package api

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/agentharness/harness/shared/asynctools"
	"github.com/agentharness/harness/shared/connections"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/store"
	"github.com/agentharness/harness/shared/turn"
)

// runQueued is the status of a WebSocket run accepted but not yet picked up by a worker.
const runQueued = "queued"

// wsRun is the part of a WebSocket turn one worker invocation runs: its output goes to the
// runtime's connections, and the runtime's run record says what it is doing, for sync and
// abort_message.
type wsRun struct {
	w    *Worker
	d    *drive
	turn *wsTurn
	out  *wsOut
	from int64
}

// wsStart records the run and tells the runtime it is processing.
func (w *Worker) wsStart(ctx context.Context, d *drive, t *wsTurn, from int64) *wsRun {
	r := &wsRun{w: w, d: d, turn: t, from: from, out: w.h.newOut(d.accountID, t.Runtime, d.turnID)}
	d.emit = func(ev turn.Event) { r.out.event(ctx, ev) }
	r.record(ctx, store.EventProcessing)
	r.out.loopStatus(ctx, "PROCESSING_API_RESPONSE", []string{d.turnID}, nil)
	w.h.dequeue(ctx, r.out, d.turnID, "dequeued")
	return r
}

// dequeue takes run eventID's input off the runtime's queue, when it waited there, and tells the
// runtime with disposition.
func (h *Handler) dequeue(ctx context.Context, out *wsOut, eventID, disposition string) {
	q, err := h.opts.Connections.Dequeue(ctx, out.account, out.rt.ConversationID, eventID)
	if err != nil {
		out.log.ErrorContext(ctx, "dequeueing the websocket input", "eventId", eventID, "err", err)
		return
	}
	if q != nil {
		out.queue(ctx, queueRemoval{ClientMessageID: q.ClientMessageID, Disposition: disposition})
	}
}

// record writes the runtime's run record.
func (r *wsRun) record(ctx context.Context, status string) {
	b, _ := json.Marshal(r.turn)
	err := r.w.h.opts.Connections.SetRun(ctx, r.d.accountID, r.d.conversationID, connections.Run{
		EventID: r.d.turnID, FromSeq: r.from, Status: status, Turn: b, UpdatedAt: r.w.h.opts.Now(),
	})
	if err != nil {
		r.d.log.ErrorContext(ctx, "recording the websocket run", "err", err)
	}
}

// run runs the turn under a context that an abort_message cancels; aborted says whether one
// did.
func (r *wsRun) run(ctx context.Context, turn func(context.Context) runResult) (runResult, bool) {
	// An abort that came while the turn was queued, or while it waited for tool calls (which
	// the abort cancelled), stops it before the model is called.
	if ok, err := r.w.h.opts.Connections.Aborted(ctx, r.d.accountID, r.d.conversationID, r.d.turnID); err == nil && ok {
		r.d.log.InfoContext(ctx, "turn aborted by the controller before this invocation called the model")
		return runResult{status: store.EventCancelled, errText: abortedTurnText}, true
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	aborted := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(r.w.h.opts.AbortPoll)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				ok, err := r.w.h.opts.Connections.Aborted(ctx, r.d.accountID, r.d.conversationID, r.d.turnID)
				if err == nil && ok {
					close(aborted)
					cancel()
					return
				}
			}
		}
	}()
	res := turn(ctx)
	close(stop)
	select {
	case <-aborted:
		r.d.log.InfoContext(ctx, "turn aborted by the controller")
		res.errText = "the turn was aborted"
		return res, true
	default:
		return res, false
	}
}

// finish records how the run ended and tells the runtime. A run waiting for its external calls
// stays recorded as processing: its group may already have re-driven, and the continuation's own
// record must not be overwritten.
func (r *wsRun) finish(ctx context.Context, res runResult, aborted bool) {
	if res.status != store.EventWaitingAsync {
		r.record(ctx, res.status)
	}
	r.out.end(ctx, res, aborted)
}

// continueWS continues a WebSocket turn whose controller-owned (or other external) calls have
// settled: their results go to the runtime as tool returns, then the model runs again with the
// turn's tools.
func (w *Worker) continueWS(ctx context.Context, d *drive, st asynctools.GroupState, history []model.Message) error {
	t := &wsTurn{}
	run, ok, err := w.h.opts.Connections.Run(ctx, d.accountID, d.conversationID)
	if err == nil && ok && run.EventID == d.turnID && len(run.Turn) > 0 {
		_ = json.Unmarshal(run.Turn, t)
	}
	from := run.FromSeq
	if t.Runtime.ConversationID == "" {
		t.Runtime = runtimeScope{AgentID: d.agentID, ConversationID: d.conversationID}
	}
	r := w.wsStart(ctx, d, t, from)
	results := make([]asynctools.Result, 0, len(st.Group.Expected))
	for _, id := range st.Group.Expected {
		if row, ok := st.Row(id); ok {
			results = append(results, row)
		}
	}
	r.out.results(ctx, results)
	res, aborted := r.run(ctx, func(ctx context.Context) runResult {
		return w.resume(ctx, d, slices.Clone(history), t)
	})
	done := context.WithoutCancel(ctx)
	return d.conclude(done, &turnPlan{}, res, 0, func() { r.finish(done, res, aborted) })
}

// wsRefused records a WebSocket turn the worker refused as failed, so the runtime's run record
// no longer says queued: sync and abort_message then see no turn to wait for or stop.
func (w *Worker) wsRefused(ctx context.Context, msg workMessage) {
	run, ok, err := w.h.opts.Connections.Run(ctx, msg.AccountID, msg.WS.Runtime.ConversationID)
	if err != nil || !ok || run.EventID != msg.EventID {
		return // the record names another run (or cannot be read): leave it
	}
	run.Status, run.UpdatedAt = store.EventFailed, w.h.opts.Now()
	if err := w.h.opts.Connections.SetRun(ctx, msg.AccountID, msg.WS.Runtime.ConversationID, run); err != nil {
		w.h.opts.Logger.ErrorContext(ctx, "recording the refused websocket run", "eventId", msg.EventID, "err", err)
	}
}
