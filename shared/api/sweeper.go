package api

import (
	"context"
	"log/slog"

	"github.com/agentharness/harness/shared/asynctools"
)

// sweepBatch bounds how many due items one pass of a sweep reads.
const sweepBatch = 100

// Sweeper is the scheduled recovery of async tool calls and dispatch groups.
type Sweeper struct {
	redriver *asynctools.Redriver
	logger   *slog.Logger
}

// Run sweeps until no due item is left or ctx ends.
func (s *Sweeper) Run(ctx context.Context) error {
	var total asynctools.SweepStats
	defer func() {
		if total != (asynctools.SweepStats{}) {
			s.logger.InfoContext(ctx, "sweep", "timedOut", total.TimedOut, "sealed", total.Sealed, "redriven", total.Redriven, "resent", total.Resent)
		}
	}()
	for ctx.Err() == nil {
		stats, err := s.redriver.Sweep(ctx, sweepBatch)
		total.TimedOut += stats.TimedOut
		total.Sealed += stats.Sealed
		total.Redriven += stats.Redriven
		total.Resent += stats.Resent
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
