package turn

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentharness/harness/shared/state/store"
)

// deleteStopWait bounds how long deleting a conversation waits for its running turn to stop
// before it takes the conversation from it (the turn's next write then fails): POST
// /chat/{id}/stop's bound.
const deleteStopWait = 10 * time.Second

// deletePoll is how often a deletion looks whether the turn it stopped has let go.
const deletePoll = 50 * time.Millisecond

// StreamGroup is the group a turn's stream log belongs to (streamlog.Options.Group): its
// conversation, so that deleting the conversation finds its turns' streams.
func StreamGroup(stream string) string {
	accountID, conversationID, _ := StreamParts(stream)
	return accountID + "#" + conversationID
}

// DeleteConversation deletes the conversation and everything hanging from it: the turn running
// on it is stopped first and the conversation held for good (store.HoldForDelete), so nothing
// begins, appends or is taken up again meanwhile; then go its subagents' conversations
// (recursively, each the same way), its turn trees, its turns' stream logs, its async calls'
// rows and groups with their offloaded responses, its files and kept tool results, its events
// and approvals, and last its messages and head. What hangs from it is found from its head, so a
// deletion cut short (a timeout, a crash) is finished by the next. store.ErrNotFound when it has
// no head (never had, or was deleted).
func (e *Engine) DeleteConversation(ctx context.Context, accountID, conversationID string) error {
	if err := e.holdForDelete(ctx, accountID, conversationID); err != nil {
		return err
	}
	children, err := e.opts.Store.Children(ctx, accountID, conversationID)
	if err != nil {
		return err
	}
	for _, child := range children {
		if err := e.DeleteConversation(ctx, accountID, child); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("deleting subagent conversation %s: %w", child, err)
		}
	}
	events, err := e.opts.Store.ConversationEvents(ctx, accountID, conversationID)
	if err != nil {
		return err
	}
	turnKeys := slices.Clone(events)
	group, prefix := accountID+"#"+conversationID, StreamOf(accountID, conversationID, "")
	if e.opts.Streams != nil {
		streams, err := e.opts.Streams.Streams(ctx, group)
		if err != nil {
			return err
		}
		for _, s := range streams {
			_, _, key := StreamParts(s)
			turnKeys = append(turnKeys, key)
		}
	}
	slices.Sort(turnKeys)
	var trees []string
	for _, key := range slices.Compact(turnKeys) {
		trees = append(trees, treeRoot(accountID, conversationID, key))
	}
	// The trees go before the streams and events that name their roots, so a deletion cut short
	// finds them again.
	if err := e.opts.Store.DeleteTrees(ctx, trees); err != nil {
		return err
	}
	// Then what lives outside the store's tables, each where the deployment keeps it.
	var steps []func(context.Context) error
	if s := e.opts.Streams; s != nil {
		steps = append(steps, func(ctx context.Context) error { return s.DeleteGroup(ctx, group, prefix) })
	}
	if a := e.opts.Async; a != nil {
		steps = append(steps, func(ctx context.Context) error { return a.DeleteConversation(ctx, accountID, conversationID) })
	}
	if f := e.opts.Attachments; f != nil {
		steps = append(steps, func(ctx context.Context) error { return f.DeleteThread(ctx, accountID, conversationID) })
	}
	if r := e.opts.Results; r != nil {
		steps = append(steps, func(ctx context.Context) error { return r.DeleteConversation(ctx, accountID, conversationID) })
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return e.opts.Store.DeleteConversation(ctx, accountID, conversationID)
}

// holdForDelete holds the conversation for its deletion: at once when no turn runs on it;
// otherwise once the turn, asked to stop, has let go, or after deleteStopWait regardless.
func (e *Engine) holdForDelete(ctx context.Context, accountID, conversationID string) error {
	err := e.opts.Store.HoldForDelete(ctx, accountID, conversationID, e.opts.Now(), false)
	if !errors.Is(err, store.ErrBusy) {
		return err
	}
	if _, err := e.RequestStop(ctx, accountID, conversationID); err != nil {
		return err
	}
	deadline := time.Now().Add(deleteStopWait)
	for errors.Is(err, store.ErrBusy) && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(deletePoll):
		}
		err = e.opts.Store.HoldForDelete(ctx, accountID, conversationID, e.opts.Now(), false)
	}
	if errors.Is(err, store.ErrBusy) {
		e.opts.Logger.WarnContext(ctx, "deleting a conversation whose turn did not stop in time", "conversationId", conversationID)
		return e.opts.Store.HoldForDelete(ctx, accountID, conversationID, e.opts.Now(), true)
	}
	return err
}
