// Package follow reads a conversation's turn from outside the invocation that runs it, for the
// clients that come back to it: its output from its stream log, from where a client had read it
// and then live until the turn waits or ends; whether it goes on by itself; the calls its
// subagents hold for approval, as its client is shown them; and where that client's decisions
// on them go. It needs of the engine only what the engine offers every transport.
package follow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/state/streamlog"
	"github.com/agentharness/harness/shared/turn"
	"github.com/agentharness/harness/shared/turn/subagent"
)

// poll is how often Turn looks for more of a running turn's output.
const poll = 100 * time.Millisecond

// Turn reads the output of the conversation's latest turn from its stream log, from its start
// (after = -1) or after a sequence number, and then follows it live until the turn waits or
// ends. found is false when the conversation wrote no turn within the log's retention, or when
// no log is configured.
func Turn(ctx context.Context, eng *turn.Engine, accountID, conversationID string, after int64) (entries iter.Seq2[turn.Logged, error], found bool, err error) {
	opts := eng.Options()
	if opts.Streams == nil {
		return nil, false, nil
	}
	head, err := opts.Store.ConversationHead(ctx, accountID, conversationID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil || head.Stream == "" {
		return nil, false, err
	}
	stream := head.Stream
	// A turn whose invocation died leaves its stream open; its writer says how the turn ended
	// before it gives the lease back, so a free lease means it never will.
	gone := func(ctx context.Context) (bool, error) {
		head, err := opts.Store.ConversationHead(ctx, accountID, conversationID)
		if err != nil {
			return false, err
		}
		return head.Stream != stream || !head.LeaseUntil.After(opts.Now()), nil
	}
	return func(yield func(turn.Logged, error) bool) {
		for entry, err := range opts.Streams.Follow(ctx, stream, after, poll, gone) {
			if errors.Is(err, streamlog.ErrWriterGone) {
				if yield(turn.Logged{Seq: after + 1, Event: &turn.Event{Kind: turn.Failed, Error: writerGoneText}}, nil) {
					yield(turn.Logged{Seq: after + 2, Outcome: &turn.Outcome{Status: store.EventFailed, Reason: model.FinishError, Error: writerGoneText}}, nil)
				}
				return
			}
			if err != nil {
				yield(turn.Logged{}, err)
				return
			}
			logged, err := turn.DecodeLogged(entry.Seq, entry.Payload)
			if err != nil {
				yield(turn.Logged{}, fmt.Errorf("stream %s: %w", stream, err))
				return
			}
			if !yield(logged, nil) {
				return
			}
			after = entry.Seq
		}
	}, true, nil
}

// writerGoneText is how a followed turn ends when its invocation stopped before it finished.
const writerGoneText = "the turn's invocation stopped before it finished; the conversation keeps every step finished before it"

// Next is the place the next entry of the conversation's latest turn's stream log takes,
// so a reader may follow only what is written from now on; found is false when the
// conversation has no turn in the log, or no log is configured.
func Next(ctx context.Context, eng *turn.Engine, accountID, conversationID string) (next int64, found bool, err error) {
	opts := eng.Options()
	if opts.Streams == nil {
		return 0, false, nil
	}
	head, err := opts.Store.ConversationHead(ctx, accountID, conversationID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && head.Stream == "") {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	next, err = opts.Streams.Next(ctx, head.Stream)
	return next, err == nil, err
}

// GoesOn reports whether the conversation's turn goes on by itself: it waits for no decision,
// and for no async call that has not settled (a settled group's continuation is on its way).
func GoesOn(ctx context.Context, eng *turn.Engine, accountID, conversationID string) (bool, error) {
	opts := eng.Options()
	head, err := opts.Store.ConversationHead(ctx, accountID, conversationID)
	if err != nil {
		return false, err
	}
	if len(head.PendingApprovals) > 0 {
		return false, nil
	}
	if head.AsyncGroup == "" || opts.Async == nil {
		return true, nil
	}
	st, err := opts.Async.Load(ctx, head.AsyncGroup)
	return err == nil && st.Settled(), err
}

// Held are the calls held for approval in the subagents whose async calls the conversation's
// turn waits for, as its client is shown them (turn.CallerView's events: each call's input, then
// its approval request): a client that follows the waiting turn sees them, and its decisions,
// sent to the conversation, go to the child (ToChild). Calls already shown (their approvals in
// shown) are left out.
func Held(ctx context.Context, eng *turn.Engine, accountID, conversationID string, shown map[string]bool) ([]turn.Event, error) {
	opts := eng.Options()
	head, err := opts.Store.ConversationHead(ctx, accountID, conversationID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && head.AsyncGroup == "") {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []turn.Event
	now := opts.Now()
	for _, resultID := range head.PendingAsync {
		ev, err := opts.Store.Event(ctx, accountID, subagent.EventID(resultID))
		if errors.Is(err, store.ErrNotFound) {
			continue // not a subagent's call
		}
		if err != nil {
			return nil, err
		}
		var detail struct {
			PendingApprovals []turn.PendingApproval `json:"pendingApprovals"`
		}
		if ev.Status != store.EventWaiting || json.Unmarshal(ev.Detail, &detail) != nil {
			continue
		}
		ids := make([]string, 0, len(detail.PendingApprovals))
		for _, p := range detail.PendingApprovals {
			if !shown[p.ApprovalID] {
				ids = append(ids, p.ApprovalID)
			}
		}
		if len(ids) == 0 {
			continue
		}
		rows, err := opts.Store.Approvals(ctx, accountID, ids)
		if err != nil {
			return nil, err
		}
		view := turn.NewCallerView(ev.ConversationID)
		for _, id := range ids {
			a, ok := rows[id]
			if !ok || a.Status != store.ApprovalPending || a.Expired(now) {
				continue
			}
			out = append(out, view.See(turn.Event{Kind: turn.Loop, Loop: agent.Event{Type: agent.ToolInputAvailable, ToolCallID: a.ToolCallID, ToolName: a.ToolName, Input: a.Input}})...)
			out = append(out, view.See(turn.Event{Kind: turn.Loop, Loop: agent.Event{Type: agent.ToolApprovalRequest, ToolCallID: a.ToolCallID, ToolName: a.ToolName, ApprovalID: a.ID, Text: a.RequestReason}})...)
		}
	}
	return out, nil
}

// Route is where ToChild sent decisions: the caller's conversation they were sent to, and the
// subagent's calls they decide.
type Route struct {
	Caller string
	Calls  []string
}

// ToChild routes decisions sent to a conversation that waits for its subagents: when
// every approval they decide belongs to one subagent conversation below req's, req is turned to
// that conversation (its agent, and the event its held step was reported under) and in's
// decisions to the ids the child knows its calls by, so they resume the child, whose end then
// goes on with its caller as always. The route is nil, and req and in untouched, when the
// decisions are the conversation's own or name approvals it does not know.
func ToChild(ctx context.Context, eng *turn.Engine, accountID string, req *turn.Request, in *turn.Input) (*Route, error) {
	opts := eng.Options()
	if len(in.Decisions) == 0 || in.Message != nil || req.ConversationID == "" {
		return nil, nil
	}
	ids := make([]string, 0, len(in.Decisions))
	for _, dec := range in.Decisions {
		ids = append(ids, dec.ApprovalID)
	}
	rows, err := opts.Store.Approvals(ctx, accountID, ids)
	if err != nil {
		return nil, err
	}
	child := ""
	route := &Route{Caller: req.ConversationID}
	for _, id := range ids {
		a, found := rows[id]
		if !found || a.ConversationID == req.ConversationID || (child != "" && a.ConversationID != child) {
			return nil, nil
		}
		child = a.ConversationID
		route.Calls = append(route.Calls, a.ToolCallID)
	}
	var head store.Head
	for conv, hop := child, 0; hop <= agentconfig.MaxDepthLimit; hop++ {
		h, err := opts.Store.ConversationHead(ctx, accountID, conv)
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if conv == child {
			head = h
		}
		switch h.Parent.ConversationID {
		case "":
			return nil, nil
		case req.ConversationID:
			// The variables a request sets are its conversation's: none go to the child.
			req.ConversationID, req.AgentID, req.Variables, req.Sealed = child, head.AgentID, nil, nil
			decisions := slices.Clone(in.Decisions)
			for i := range decisions {
				decisions[i].ToolCallID = strings.TrimPrefix(decisions[i].ToolCallID, turn.ShownCallID(child, ""))
			}
			in.Decisions = decisions
			if head.PausedEvent != "" {
				// The event the child's held step was reported under: a non-blocking call's,
				// whose end settles the call.
				req.EventID = head.PausedEvent
			}
			return route, nil
		}
		conv = h.Parent.ConversationID
	}
	return nil, nil
}
