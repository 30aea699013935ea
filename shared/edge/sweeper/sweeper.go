// Package sweeper is the scheduled function that recovers what nothing else will finish: async
// tool calls past their deadline, dispatch groups whose re-drive was lost, and the purges of
// deleted accounts.
package sweeper

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/agentharness/harness/shared/state/attachments"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/turn/subagent"
	"github.com/agentharness/harness/shared/wire/workqueue"
)

// sweepBatch bounds how many due items one pass of a sweep reads.
const sweepBatch = 100

// Sweeper is the scheduled recovery of async tool calls and dispatch groups, and of the purges
// of deleted accounts.
type Sweeper struct {
	redriver *asynctools.Redriver
	accounts *store.Store
	enqueue  func(ctx context.Context, body string) error
	now      func() time.Time
	logger   *slog.Logger
}

// Run sweeps until no due item is left or ctx ends. Neither recovery waits on the other's
// failure.
func (s *Sweeper) Run(ctx context.Context) error {
	return errors.Join(s.QueuePurges(ctx), s.asyncTools(ctx))
}

// asyncTools times out async calls past their deadline and finishes dispatch groups.
func (s *Sweeper) asyncTools(ctx context.Context) error {
	var total asynctools.SweepStats
	defer func() {
		if total != (asynctools.SweepStats{}) {
			s.logger.InfoContext(ctx, "sweep", "timedOut", total.TimedOut, "recovered", total.Recovered, "sealed", total.Sealed, "redriven", total.Redriven, "resent", total.Resent)
		}
	}()
	for ctx.Err() == nil {
		stats, err := s.redriver.Sweep(ctx, sweepBatch)
		total.TimedOut += stats.TimedOut
		total.Sealed += stats.Sealed
		total.Redriven += stats.Redriven
		total.Resent += stats.Resent
		total.Recovered += stats.Recovered
		if err != nil {
			return err
		}
		// Items a sweep did not change (a group rescheduled) leave the index's due range, so a
		// sweep that acted on nothing has nothing more to do.
		if stats == (asynctools.SweepStats{}) {
			return nil
		}
	}
	return ctx.Err()
}

// QueuePurges queues again the purges of deleted accounts that are due: never queued (account-manage
// could not), or not finished in time (the worker died, or the message was lost). Each is
// claimed before it is queued, so a failed send is retried by a later sweep, not lost.
func (s *Sweeper) QueuePurges(ctx context.Context) error {
	queued := 0
	defer func() {
		if queued > 0 {
			s.logger.InfoContext(ctx, "purges queued again", "accounts", queued)
		}
	}()
	for ctx.Err() == nil {
		ids, err := s.accounts.ClaimDuePurges(ctx, s.now(), sweepBatch)
		for _, id := range ids {
			if err := s.enqueue(ctx, workqueue.PurgeMessage(id)); err != nil {
				return err
			}
			queued++
		}
		if err != nil || len(ids) < sweepBatch {
			return err
		}
	}
	return ctx.Err()
}

// LateSubagents is the Redriver's Late for subagent calls: a call whose child's turn ended takes
// the child's outcome, the files it returns included, instead of timing out (subagent.Recover).
func LateSubagents(async *asynctools.Store, st *store.Store, files *attachments.Store) func(ctx context.Context, resultID string) (asynctools.Outcome, bool, error) {
	return func(ctx context.Context, resultID string) (asynctools.Outcome, bool, error) {
		row, err := async.Result(ctx, resultID)
		if errors.Is(err, asynctools.ErrNotFound) {
			return asynctools.Outcome{}, false, nil
		}
		if err != nil || row.Status != asynctools.Running {
			return asynctools.Outcome{}, false, err
		}
		return subagent.Recover(ctx, st, files, row)
	}
}

// NewFrom builds a sweeper from its parts: the redriver of async calls, the accounts store, how
// a purge is queued, and the clock.
func NewFrom(redriver *asynctools.Redriver, accounts *store.Store, enqueue func(ctx context.Context, body string) error, now func() time.Time, logger *slog.Logger) *Sweeper {
	return &Sweeper{redriver: redriver, accounts: accounts, enqueue: enqueue, now: now, logger: logger}
}
