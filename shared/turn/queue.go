package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/wire/workqueue"
)

// Queued is a turn a transport accepts now and async-worker runs later.
type Queued struct {
	AccountID string
	// Request names the turn; its EventID must be set: the event is claimed here.
	Request Request
	Input   Input
	// Edge names the transport that runs the turn's output (worker.Edge), and Route is that
	// edge's own state of the turn, opaque here; both empty for an /async turn.
	Edge  string
	Route json.RawMessage
	// Tree is where the turn sits in a turn tree; nil for a tree's root.
	Tree *TreePosition
	// Reopen lets decisions answer under the event id of the turn that waits for them: that
	// event goes back to processing instead of being claimed anew.
	Reopen bool
	// CheckLater skips the precheck: the worker checks the turn when it runs and tells the
	// edge's client itself (a chat hears of a refusal in the chat, not as the webhook's answer).
	CheckLater bool
	// Accepted runs once the event is claimed and before the work is queued (the App Server
	// records the run it queued, so an abort that comes first reaches it); the undo it returns
	// runs if queueing fails. Nil: nothing to do.
	Accepted func(ctx context.Context) (undo func(context.Context), err error)
}

// Queues reports whether this function can queue turns (Options.Enqueue).
func (e *Engine) Queues() bool { return e.opts.Enqueue != nil }

// Queue accepts a turn and puts it on async-worker's queue, in the one order every transport
// follows: the work is encoded and its size checked, what the worker would refuse is refused
// (Precheck), the event is claimed (or reopened), then the work is queued; a failure to queue
// gives the event back, so a retry can take it. Its refusals are *Refusal; a Conflict over an
// event id taken already wraps *store.DuplicateEventError.
func (e *Engine) Queue(ctx context.Context, q Queued) error {
	if e.opts.Enqueue == nil {
		return errors.New("this function has no work queue")
	}
	req := q.Request
	if req.EventID == "" {
		return errors.New("a queued turn needs its event id")
	}
	body, err := encode(Work{
		Type: workqueue.Turn, AccountID: q.AccountID, EventID: req.EventID, GroupSeed: store.NewID(""),
		Request: &req, Message: q.Input.Message, Decisions: q.Input.Decisions, RespondsTo: q.Input.RespondsTo,
		Edge: q.Edge, Route: q.Route, Tree: q.Tree,
	})
	if err != nil {
		return err
	}
	if !q.CheckLater {
		if err := e.Precheck(ctx, q.AccountID, req, q.Input); err != nil {
			return err
		}
	}
	giveBack, err := e.claim(ctx, q.AccountID, req, q.Reopen && q.Input.Decisions != nil)
	if err != nil {
		return err
	}
	undo := func(context.Context) {}
	if q.Accepted != nil {
		u, err := q.Accepted(ctx)
		if err != nil {
			giveBack(context.WithoutCancel(ctx))
			return err
		}
		if u != nil {
			undo = u
		}
	}
	if err := e.opts.Enqueue(ctx, body); err != nil {
		undo(context.WithoutCancel(ctx))
		giveBack(context.WithoutCancel(ctx))
		return fmt.Errorf("queueing the turn: %w", err)
	}
	return nil
}

// encode is w as a queue message, refused when the queue could not carry it.
func encode(w Work) (string, error) {
	b, err := json.Marshal(w)
	if err != nil {
		return "", err
	}
	if len(b) > MaxWorkBytes {
		return "", &Refusal{Kind: TooLarge, Message: fmt.Sprintf("the turn must encode to at most %d bytes to be queued; send only the new message", MaxWorkBytes)}
	}
	return string(b), nil
}

// claim records the request's event, or reopens it when reopen and the event waits for the
// decisions the request brings. giveBack undoes it for a turn that is not queued after all: a
// claimed event is released, so a retry can take it; a reopened one waits again as it did.
func (e *Engine) claim(ctx context.Context, accountID string, req Request, reopen bool) (giveBack func(context.Context), err error) {
	logged := func(ctx context.Context, err error) {
		if err != nil {
			e.opts.Logger.ErrorContext(ctx, "giving back the event of a turn not queued", "eventId", req.EventID, "err", err)
		}
	}
	if reopen {
		detail, err := e.opts.Store.ReopenEvent(ctx, accountID, req.EventID, req.ConversationID, e.opts.Now())
		var dup *store.DuplicateEventError
		switch {
		case err == nil:
			return func(ctx context.Context) {
				logged(ctx, e.opts.Store.UpdateEvent(ctx, accountID, req.EventID, store.StatusUpdate{Status: store.EventWaiting, Detail: detail, At: e.opts.Now()}))
			}, nil
		case errors.As(err, &dup):
			return nil, &Refusal{Kind: Conflict, Message: fmt.Sprintf("event %s is %s, not waiting for approval", dup.EventID, dup.Status),
				Detail: map[string]any{"eventId": dup.EventID, "status": dup.Status}, Cause: dup}
		case !errors.Is(err, store.ErrNotFound):
			return nil, err
		}
	}
	if err := e.ClaimEvent(ctx, accountID, req); err != nil {
		return nil, err
	}
	return func(ctx context.Context) { logged(ctx, e.opts.Store.ReleaseEvent(ctx, accountID, req.EventID)) }, nil
}
