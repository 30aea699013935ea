package appserver

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/turn"
)

// Turns is the App Server's part of the turns async-worker takes up for it: a WebSocket turn's
// tools, its output to the runtime's connections, its run record and abort_message.
type Turns struct {
	s *server
}

// NewTurns returns the App Server's part of async-worker, on the worker's engine.
func NewTurns(eng *turn.Engine, opts Options) (*Turns, error) {
	s, err := newServer(eng, opts)
	if err != nil {
		return nil, err
	}
	return &Turns{s: s}, nil
}

// Edge is the name the App Server's turns are queued and continued under (worker.Edge).
const Edge = "ws"

// state decodes the App Server's state of a queued turn (work.Route).
func state(work turn.Work) (*wsTurn, error) {
	t := &wsTurn{}
	if err := json.Unmarshal(work.Route, t); err != nil {
		return nil, fmt.Errorf("the turn's WebSocket state: %w", err)
	}
	return t, nil
}

// Prepare gives a WebSocket turn what it runs with besides the agent: the controller-owned
// tools it could see when it was accepted, the allowlist, and waiting for those tools within
// the invocation. Its error is the client-safe reason the turn cannot run. The run it returns
// records the run, sends its output to the runtime's connections, stops it on abort_message,
// and finishes it with the runtime's stop_reason.
func (t *Turns) Prepare(ctx context.Context, work turn.Work, start *turn.Start) (func(context.Context, *turn.Run) error, error) {
	ws, err := state(work)
	if err != nil {
		return nil, err
	}
	start.Config.WaitOnAsync = true
	if start.Config.Tools, err = t.s.wsToolSet(start.Config.Tools, work.AccountID, ws); err != nil {
		return nil, err
	}
	return func(ctx context.Context, run *turn.Run) error {
		r := t.s.newWSRun(work.AccountID, work.EventID, ws, run.From())
		r.start(ctx)
		res, aborted := r.run(ctx, run, func(ctx context.Context) turn.Outcome {
			for ev := range run.Events(ctx) {
				r.out.event(ctx, ev)
			}
			return run.Outcome()
		})
		return run.Finish(ctx, res, func(done context.Context) { r.finish(done, res, aborted) })
	}, nil
}

// Refused tells the runtime that the worker refused (or dropped) its queued turn: the input
// leaves the queue as cancelled, the run record no longer says queued (so sync and
// abort_message see no turn to wait for or stop), and the turn ends with o.
func (t *Turns) Refused(ctx context.Context, work turn.Work, o turn.Outcome) {
	ws, err := state(work)
	if err != nil {
		t.s.opts.Logger.ErrorContext(ctx, "telling the runtime of a refused turn", "eventId", work.EventID, "err", err)
		return
	}
	conv := ws.Runtime.ConversationID
	if run, ok, err := t.s.opts.Connections.Run(ctx, work.AccountID, conv); err == nil && ok && run.EventID == work.EventID {
		run.Status, run.UpdatedAt = store.EventFailed, t.s.opts.Now()
		if err := t.s.opts.Connections.SetRun(ctx, work.AccountID, conv, run); err != nil {
			t.s.opts.Logger.ErrorContext(ctx, "recording the refused websocket run", "eventId", work.EventID, "err", err)
		}
	}
	out := t.s.newOut(work.AccountID, ws.Runtime, work.EventID)
	t.s.dequeue(ctx, out, work.EventID, "cancelled")
	out.end(ctx, o, false)
}

// Continue continues a WebSocket turn whose controller-owned (or other external) calls have
// settled.
func (t *Turns) Continue(ctx context.Context, c *turn.Continuation) error {
	return t.s.continueWS(ctx, c)
}
