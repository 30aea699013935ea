package worker

import (
	"context"
	"errors"
	"time"

	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/turn"
	"github.com/agentharness/harness/shared/wire/workqueue"
)

// purgeMargin is the time a purge leaves before the invocation's deadline to queue its next
// pass; purgeDefault bounds a pass when there is no deadline.
const (
	purgeMargin  = 30 * time.Second
	purgeDefault = 5 * time.Minute
)

// purge deletes a deleted account's data, its skills, workspaces, channel bindings and kept tool results
// among it, in passes that end before the invocation does: a pass that runs out of time queues
// the next. Purging twice is harmless. A live account is never purged: the message was forged
// or misrouted.
func (w *Worker) purge(ctx context.Context, msg turn.Work) error {
	o := w.eng.Options()
	log := o.Logger.With("accountId", msg.AccountID)
	until := time.Now().Add(purgeDefault)
	if deadline, ok := ctx.Deadline(); ok {
		until = deadline.Add(-purgeMargin)
	}
	skills, spaces, bindings := w.opts.Skills, w.opts.Workspaces, w.opts.Bindings
	p := store.Purge{Now: o.Now(), Until: until, Elsewhere: func(ctx context.Context) error {
		if o.Results != nil {
			if err := o.Results.DeleteAll(ctx, msg.AccountID); err != nil {
				return err
			}
		}
		if skills != nil {
			if err := skills.DeleteAll(ctx, msg.AccountID); err != nil {
				return err
			}
		}
		if spaces != nil {
			if err := spaces.DeleteAll(ctx, msg.AccountID); err != nil {
				return err
			}
		}
		if bindings != nil {
			return bindings.DeleteAll(ctx, msg.AccountID)
		}
		return nil
	}}
	res, err := o.Store.PurgeAccount(ctx, msg.AccountID, p)
	if errors.Is(err, store.ErrAccountLive) {
		log.WarnContext(ctx, "refusing to purge a live account")
		return nil
	}
	if err != nil {
		return err
	}
	log.InfoContext(ctx, "account purge pass", "conversations", res.Conversations, "items", res.Items, "more", res.More, "finished", res.Finished)
	if !res.More {
		return nil
	}
	if w.opts.Enqueue == nil {
		return errors.New("no work queue to continue the purge on")
	}
	return w.opts.Enqueue(ctx, workqueue.PurgeMessage(msg.AccountID))
}
