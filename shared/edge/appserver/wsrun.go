package appserver

import (
	"context"
	"encoding/json"
	"sync/atomic"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/state/connections"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/turn"
)

// runQueued is the status of a WebSocket run accepted but not yet picked up by a worker.
const runQueued = "queued"

// wsRun is the part of a WebSocket turn one worker invocation runs: its output goes to the
// runtime's connections, and the runtime's run record says what it is doing, for sync and
// abort_message.
type wsRun struct {
	h         *server
	accountID string
	eventID   string
	turn      *wsTurn
	out       *wsOut
	from      int64
}

// newWSRun is the output side of a WebSocket turn's invocation; start records it.
func (h *server) newWSRun(accountID, eventID string, t *wsTurn, from int64) *wsRun {
	return &wsRun{h: h, accountID: accountID, eventID: eventID, turn: t, from: from, out: h.newOut(accountID, t.Runtime, eventID)}
}

// start records the run and tells the runtime it is processing.
func (r *wsRun) start(ctx context.Context) {
	r.record(ctx, store.EventProcessing)
	r.out.loopStatus(ctx, "PROCESSING_API_RESPONSE", []string{r.eventID}, nil)
	r.h.dequeue(ctx, r.out, r.eventID, "dequeued")
}

// dequeue takes run eventID's input off the runtime's queue, when it waited there, and tells the
// runtime with disposition.
func (h *server) dequeue(ctx context.Context, out *wsOut, eventID, disposition string) {
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
	err := r.h.opts.Connections.SetRun(ctx, r.accountID, r.turn.Runtime.ConversationID, connections.Run{
		EventID: r.eventID, FromSeq: r.from, Status: status, Turn: b, UpdatedAt: r.h.opts.Now(),
	})
	if err != nil {
		r.out.log.ErrorContext(ctx, "recording the websocket run", "err", err)
	}
}

// run runs the turn; an abort_message stops it through the engine's stop (turn.Run.Watch),
// and aborted says whether one did. The same poll serves the replays connections ask for.
func (r *wsRun) run(ctx context.Context, run *turn.Run, execute func(context.Context) turn.Outcome) (turn.Outcome, bool) {
	// An abort that came while the turn was queued, or while it waited for tool calls (which
	// the abort cancelled), stops it before the model is called.
	first, err := r.h.opts.Connections.Signals(ctx, r.accountID, r.turn.Runtime.ConversationID, r.eventID)
	if err == nil && first.Aborted {
		r.out.log.InfoContext(ctx, "turn aborted by the controller before this invocation called the model")
		return turn.Outcome{Status: turn.StatusCancelled, Error: turn.AbortedTurnText}, true
	}
	// Replays asked before now are served at the first event, which reads the subscribers.
	replayAsked := first.ReplayAsked
	var abortSeen atomic.Bool
	run.Watch(func(ctx context.Context) bool {
		sig, err := r.h.opts.Connections.Signals(ctx, r.accountID, r.turn.Runtime.ConversationID, r.eventID)
		if err != nil {
			return false
		}
		if !sig.Aborted && sig.ReplayAsked != replayAsked {
			// A connection subscribed for a replay: serve it now, not at the next output,
			// which a slow tool may hold back for long.
			replayAsked = sig.ReplayAsked
			r.out.serveReplays(ctx, true)
		}
		abortSeen.Store(sig.Aborted)
		return sig.Aborted
	})
	res := execute(ctx)
	wasAborted := abortSeen.Load() && res.Stopped
	if res.Status == turn.StatusWaitingAsync {
		// The wait is recorded now. An abort that came while the pass dispatched its calls may
		// have found no wait to cancel at the gateway, and the polls here may have missed it:
		// look once more. The gateway records the abort before it looks for a wait, so one of
		// the two sees the other. Cancelled calls re-drive the turn, and its continuation
		// finds the abort and ends it with stop_reason cancelled.
		if !wasAborted {
			sig, err := r.h.opts.Connections.Signals(context.WithoutCancel(ctx), r.accountID, r.turn.Runtime.ConversationID, r.eventID)
			wasAborted = err == nil && sig.Aborted
		}
		if wasAborted {
			r.out.log.InfoContext(ctx, "turn aborted by the controller while it dispatched its calls")
			if err := r.h.eng.CancelGroup(context.WithoutCancel(ctx), r.accountID, res.AsyncGroup, r.eventID); err != nil {
				r.out.log.ErrorContext(ctx, "cancelling the calls of an aborted turn", "groupId", res.AsyncGroup, "err", err)
			}
		}
		return res, false
	}
	if wasAborted {
		r.out.log.InfoContext(ctx, "turn aborted by the controller")
		res.Error = "the turn was aborted"
	}
	return res, wasAborted
}

// finish records how the run ended and tells the runtime. A run waiting for its external calls
// stays recorded as processing: its group may already have re-driven, and the continuation's own
// record must not be overwritten.
func (r *wsRun) finish(ctx context.Context, res turn.Outcome, aborted bool) {
	// Connections that asked for a replay get it before the record says the run stopped: a sync
	// that finds it stopped with its replay not taken up replays the turn itself.
	r.out.serveReplays(ctx, false)
	if res.Status == turn.StatusWaitingAsync {
		r.out.end(ctx, res, aborted)
		return
	}
	unseen := func() {
		// Nobody got the end: the runtime's next sync replays the turn.
		if err := r.h.opts.Connections.Unseen(ctx, r.accountID, r.turn.Runtime.ConversationID, r.eventID); err != nil {
			r.out.log.ErrorContext(ctx, "recording that no connection got the run's end", "err", err)
		}
	}
	// With nobody to hear it, the mark goes before the record says the run stopped: a sync
	// that finds the run stopped then always finds the mark too.
	early := !r.out.heard(ctx)
	if early {
		unseen()
	}
	r.record(ctx, string(res.Status))
	if !r.out.end(ctx, res, aborted) && !early {
		unseen()
	}
}

// continueWS continues a WebSocket turn whose controller-owned (or other external) calls have
// settled: their results go to the runtime as tool returns, then the model runs again with the
// turn's tools.
func (h *server) continueWS(ctx context.Context, c *turn.Continuation) error {
	g := c.Group.Group
	t := &wsTurn{}
	run, ok, err := h.opts.Connections.Run(ctx, g.AccountID, g.ConversationID)
	if err == nil && ok && run.EventID == g.Delivery.EventID && len(run.Turn) > 0 {
		_ = json.Unmarshal(run.Turn, t)
	}
	if t.Runtime.ConversationID == "" {
		t.Runtime = runtimeScope{AgentID: g.AgentID, ConversationID: g.ConversationID}
	}
	r := h.newWSRun(g.AccountID, g.Delivery.EventID, t, run.FromSeq)
	r.start(ctx)
	ran := false
	res, aborted := r.run(ctx, c.Run, func(ctx context.Context) turn.Outcome {
		ran = true
		adapt := func(cfg *agent.Config) (err error) {
			cfg.WaitOnAsync = true
			cfg.Tools, err = h.wsToolSet(cfg.Tools, g.AccountID, t)
			return err
		}
		for ev := range c.Events(ctx, adapt) {
			r.out.event(ctx, ev)
		}
		return c.Outcome()
	})
	if !ran {
		// Aborted before the continuation ran: the runtime still learns how its calls ended.
		r.out.results(ctx, c.Group.Results())
	}
	return c.Finish(ctx, res, func(done context.Context) { r.finish(done, res, aborted) })
}
