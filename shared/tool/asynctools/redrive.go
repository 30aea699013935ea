package asynctools

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Defaults for a Redriver's intervals.
const (
	// DefaultResendAfter outlasts a continuation's longest run (a 15-minute invocation), so a
	// claimed group is sent again only when its message was most likely lost.
	DefaultResendAfter = 20 * time.Minute
	// DefaultRecheck is how often the sweeper looks again at a sealed group still waiting.
	DefaultRecheck = 5 * time.Minute
)

// Redriver runs the group check: after its own write, every actor loads the group with a
// strongly consistent read, and if the group is sealed and settled, tries to claim its single
// re-drive; the actor whose conditional claim lands sends the continuation.
type Redriver struct {
	Store *Store
	Send  func(ctx context.Context, c Continuation) error
	Now   func() time.Time
	// ResendAfter: a claimed group whose continuation has not run by then is sent again.
	ResendAfter time.Duration
	// Recheck: how long the sweeper leaves a sealed, unsettled group before looking again.
	Recheck time.Duration
	// Late, when set, is asked before the sweeper times out a call: an outcome it gives (ok)
	// was recorded elsewhere and is settled instead (a subagent's turn that ended, whose own
	// settle was lost).
	Late func(ctx context.Context, resultID string) (o Outcome, ok bool, err error)
}

func (r *Redriver) now() time.Time {
	if r.Now == nil {
		return time.Now()
	}
	return r.Now()
}

func (r *Redriver) resendAfter() time.Duration {
	if r.ResendAfter <= 0 {
		return DefaultResendAfter
	}
	return r.ResendAfter
}

func (r *Redriver) recheck() time.Duration {
	if r.Recheck <= 0 {
		return DefaultRecheck
	}
	return r.Recheck
}

// CheckResult is what a group check found.
type CheckResult struct {
	State GroupState
	// Redriven: this check claimed the group and sent its continuation.
	Redriven bool
}

// Check runs the group check for groupID.
func (r *Redriver) Check(ctx context.Context, groupID string) (CheckResult, error) {
	st, err := r.Store.Load(ctx, groupID)
	if err != nil {
		return CheckResult{}, err
	}
	if st.Group == nil || !st.Group.ClaimedAt.IsZero() || !st.Settled() {
		return CheckResult{State: st}, nil
	}
	now := r.now()
	claimed, err := r.Store.Claim(ctx, groupID, now, now.Add(r.resendAfter()))
	if err != nil || !claimed {
		return CheckResult{State: st}, err
	}
	st.Group.ClaimedAt = now
	if err := r.Send(ctx, Continuation{AccountID: st.Group.AccountID, GroupID: groupID}); err != nil {
		// Claimed but not sent: the sweeper sends it once ResendAfter has passed.
		return CheckResult{State: st}, fmt.Errorf("sending the continuation of group %s: %w", groupID, err)
	}
	return CheckResult{State: st, Redriven: true}, nil
}

// Settled runs the group check after resultID was settled. When the last running row of a group
// not yet sealed settles, it goes back on the Due index until its parent's invocation is over, so
// that if the parent dies before sealing, the sweeper still finds the group and seals it: one
// marker per group (running rows are on the index by their deadline), none for a duplicate (its
// first attempt placed it).
func (r *Redriver) Settled(ctx context.Context, resultID string, duplicate bool) (CheckResult, error) {
	groupID, _, ok := SplitResultID(resultID)
	if !ok {
		return CheckResult{}, ErrNotFound
	}
	res, err := r.Check(ctx, groupID)
	if err != nil || res.State.Group != nil || duplicate {
		return res, err
	}
	row, ok := res.State.Row(resultID)
	if !ok {
		return res, nil
	}
	for _, other := range res.State.Rows {
		if other.ID == resultID {
			continue
		}
		if other.Status == Running || other.SettledAt.After(row.SettledAt) {
			return res, nil // a running row keeps the group findable, or a later result marks it
		}
	}
	return res, r.Store.ScheduleRow(ctx, resultID, later(row.ParentUntil, r.now()))
}

// Seal seals a pass's group and runs the group check, which re-drives at once when every call
// was settled before the seal.
func (r *Redriver) Seal(ctx context.Context, g Group) (CheckResult, error) {
	now := r.now()
	if _, _, err := r.Store.Seal(ctx, g, now, now.Add(r.recheck())); err != nil {
		return CheckResult{}, err
	}
	return r.Check(ctx, g.ID)
}

// SweepStats counts what one sweep did.
type SweepStats struct {
	TimedOut, Sealed, Redriven, Resent int
	// Recovered counts calls settled with an outcome Late found instead of timing out.
	Recovered int
}

// TimeoutError is the failure recorded for a call whose outside worker never answered.
const TimeoutError = "timed out: no result arrived before the call's deadline"

// Sweep finishes what crashed functions and silent workers left behind, for up to limit due
// items: rows past their deadline are settled as failed through the same conditional write a
// completion uses; groups never sealed because their parent died are sealed with the rows they
// have; settled groups nobody claimed are re-driven; claimed groups whose continuation has not
// run after ResendAfter are sent again (the continuation fences, so a duplicate is a no-op).
func (r *Redriver) Sweep(ctx context.Context, limit int) (SweepStats, error) {
	var stats SweepStats
	now := r.now()
	due, err := r.Store.Due(ctx, now, limit)
	if err != nil {
		return stats, err
	}
	var groups, settledEarly []string
	seen := map[string]bool{}
	var errs []error
	for _, it := range due {
		if it.ResultID != "" {
			o, recovered := Outcome{Status: Failed, Error: TimeoutError, Timeout: true}, false
			if r.Late != nil {
				late, ok, err := r.Late(ctx, it.ResultID)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				if ok {
					o, recovered = late, true
				}
			}
			_, dup, err := r.Store.Settle(ctx, it.ResultID, o, now)
			var conflict *ConflictError
			switch {
			case err == nil && !dup && recovered:
				stats.Recovered++
			case err == nil && !dup:
				stats.TimedOut++
			case err == nil, errors.Is(err, ErrNotDue), errors.Is(err, ErrNotFound):
			case errors.As(err, &conflict):
				// Settled before its group was sealed: off the index once the group is.
				settledEarly = append(settledEarly, it.ResultID)
			default:
				errs = append(errs, err)
			}
		}
		if !seen[it.GroupID] {
			seen[it.GroupID] = true
			groups = append(groups, it.GroupID)
		}
	}
	for _, id := range groups {
		if err := r.sweepGroup(ctx, id, now, &stats); err != nil {
			errs = append(errs, err)
		}
	}
	for _, id := range settledEarly {
		groupID, _, _ := SplitResultID(id)
		st, err := r.Store.Load(ctx, groupID)
		if err == nil && st.Group != nil {
			err = r.Store.UnscheduleRow(ctx, id)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return stats, errors.Join(errs...)
}

func (r *Redriver) sweepGroup(ctx context.Context, id string, now time.Time, stats *SweepStats) error {
	st, err := r.Store.Load(ctx, id)
	if err != nil {
		return err
	}
	g := st.Group
	switch {
	case g == nil:
		// Never sealed. Once the parent's invocation is over, seal with the rows it registered.
		if len(st.Rows) == 0 {
			return nil
		}
		first := st.Rows[0]
		var parentUntil time.Time
		running := false
		for _, row := range st.Rows {
			parentUntil = later(parentUntil, row.ParentUntil)
			running = running || row.Status == Running
		}
		if now.Before(parentUntil) {
			// The parent may still seal it. Keep the group findable: a running row is on the
			// index by its deadline; otherwise put one settled row back until the parent is over.
			if running {
				return nil
			}
			return r.Store.ScheduleRow(ctx, first.ID, parentUntil)
		}
		orphan := Group{
			ID: id, AccountID: first.AccountID, AgentID: first.AgentID, ConversationID: first.ConversationID,
			Delivery: first.Delivery, SealedBy: "sweeper",
		}
		for _, row := range st.Rows {
			orphan.Expected = append(orphan.Expected, row.ID)
		}
		if _, sealed, err := r.Store.Seal(ctx, orphan, now, now.Add(r.recheck())); err != nil || !sealed {
			return err
		}
		stats.Sealed++
		res, err := r.Check(ctx, id)
		if res.Redriven {
			stats.Redriven++
		}
		return err
	case !g.ConsumedAt.IsZero():
		return nil
	case !g.ClaimedAt.IsZero():
		if now.Before(g.ClaimedAt.Add(r.resendAfter())) {
			return nil
		}
		if err := r.Send(ctx, Continuation{AccountID: g.AccountID, GroupID: id}); err != nil {
			return fmt.Errorf("resending the continuation of group %s: %w", id, err)
		}
		stats.Resent++
		return r.Store.Reschedule(ctx, id, now.Add(r.resendAfter()))
	}
	res, err := r.Check(ctx, id)
	if err != nil {
		return err
	}
	if res.Redriven {
		stats.Redriven++
		return nil
	}
	if res.State.Group != nil && res.State.Group.ClaimedAt.IsZero() {
		// Still waiting: look again at the earliest pending deadline, or after Recheck.
		next := now.Add(r.recheck())
		for _, pid := range res.State.Pending() {
			if row, ok := res.State.Row(pid); ok && row.Deadline.Before(next) && row.Deadline.After(now) {
				next = row.Deadline
			}
		}
		return r.Store.Reschedule(ctx, id, next)
	}
	return nil
}
