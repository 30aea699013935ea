package asynctools_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentharness/harness/shared/tool/asynctools"
)

const (
	stressGroups  = 1000
	stressWorkers = 32
)

// stressCall is one external-dispatch call of a stress group: its outcome, and how many times
// its worker sends it.
type stressCall struct {
	row     asynctools.Result
	outcome asynctools.Outcome
	copies  int
}

type stressGroup struct {
	id      string
	account string
	calls   []stressCall
	// settled counts calls whose first settle has returned, for classifying the seal's moment.
	settled atomic.Int32
}

func (g *stressGroup) group() asynctools.Group {
	ids := make([]string, len(g.calls))
	for i, c := range g.calls {
		ids[i] = c.row.ID
	}
	return asynctools.Group{
		ID: g.id, AccountID: g.account, AgentID: "agent_1", ConversationID: "conv_" + g.id,
		Expected: ids, Delivery: asynctools.Delivery{EventID: "evt_" + g.id}, SealedBy: "parent",
	}
}

// newStressGroups makes n groups of 1–5 calls, each with its own outcome (completed with a
// response naming its resultId, or failed with an error naming it) sent 1–3 times.
func newStressGroups(rng *rand.Rand, n int, deadline time.Time) []*stressGroup {
	groups := make([]*stressGroup, n)
	for i := range groups {
		g := &stressGroup{id: newGroup(), account: fmt.Sprintf("acc_%d", i%7)}
		for j := range 1 + rng.IntN(5) {
			r := call(g.id, fmt.Sprintf("toolu_%d_%d", i, j), deadline)
			r.AccountID = g.account
			o := completed(fmt.Sprintf(`{"resultId":%q,"n":%d}`, r.ID, rng.IntN(1000)))
			if rng.IntN(4) == 0 {
				o = asynctools.Outcome{Status: asynctools.Failed, Error: "worker failed on " + r.ID}
			}
			g.calls = append(g.calls, stressCall{row: r, outcome: o, copies: 1 + rng.IntN(3)})
		}
		groups[i] = g
	}
	return groups
}

// pool runs tasks on workers goroutines and returns every error they reported.
func pool(workers int, tasks []func() error) []error {
	ch := make(chan func() error)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for range workers {
		wg.Go(func() {
			for task := range ch {
				if err := task(); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, task := range tasks {
		ch <- task
	}
	close(ch)
	wg.Wait()
	return errs
}

func firstErrors(errs []error, n int) error {
	return errors.Join(errs[:min(n, len(errs))]...)
}

// sameOutcome reports whether row records exactly o.
func sameOutcome(row asynctools.Result, o asynctools.Outcome) bool {
	if row.Status != o.Status {
		return false
	}
	if o.Status == asynctools.Completed {
		return string(row.Response) == string(o.Response) && row.Error == ""
	}
	return row.Error == o.Error && len(row.Response) == 0
}

// Invariants under load: ≥1,000 groups of 1–5 external-dispatch calls; each group sealed at a
// random moment (before, during or after its completions); every completion sent 1–3 times with
// the same outcome; all of it concurrently in random order, each completion settled
// (Store.Settle) and then checked (Redriver.Settled) exactly as the completion route does. Every
// group gets exactly one continuation, and every row records its own outcome.
func TestStressGroupsRedriveOnce(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed>>7))
	s := newStore(t, nil)
	ctx := context.Background()
	sent := &continuations{}
	rd := &asynctools.Redriver{Store: s, Send: sent.Send, Now: time.Now}
	groups := newStressGroups(rng, stressGroups, time.Now().Add(time.Hour))
	byID := map[string]*stressGroup{}
	calls := 0
	for _, g := range groups {
		byID[g.id] = g
		calls += len(g.calls)
	}

	// Register before dispatch: every row exists before any of its completions is sent.
	start := time.Now()
	var registers []func() error
	for _, g := range groups {
		for _, c := range g.calls {
			registers = append(registers, func() error {
				if _, created, err := s.Register(ctx, c.row); err != nil || !created {
					return fmt.Errorf("Register(%s) = created %v, %v", c.row.ID, created, err)
				}
				return nil
			})
		}
	}
	if errs := pool(stressWorkers, registers); len(errs) > 0 {
		t.Fatalf("%d registers failed: %v", len(errs), firstErrors(errs, 5))
	}
	registered := time.Since(start)

	// One seal per group and every copy of every completion, shuffled together.
	var (
		mu                          sync.Mutex
		firsts                      = map[string]int{}
		dups                        = map[string]int{}
		sealBefore, sealDuring, all int
	)
	var tasks []func() error
	for _, g := range groups {
		tasks = append(tasks, func() error {
			before := int(g.settled.Load())
			res, err := rd.Seal(ctx, g.group())
			if err != nil {
				return fmt.Errorf("Seal(%s): %w", g.id, err)
			}
			mu.Lock()
			switch before {
			case 0:
				sealBefore++
			case len(g.calls):
				all++
			default:
				sealDuring++
			}
			mu.Unlock()
			if res.State.Group == nil {
				return fmt.Errorf("Seal(%s): the check found no group", g.id)
			}
			return nil
		})
		for _, c := range g.calls {
			for range c.copies {
				tasks = append(tasks, func() error {
					row, dup, err := s.Settle(ctx, c.row.ID, c.outcome, time.Now())
					var conflict *asynctools.ConflictError
					if errors.As(err, &conflict) {
						return fmt.Errorf("identical completion of %s conflicted with %+v", c.row.ID, conflict.Recorded)
					}
					if err != nil {
						return fmt.Errorf("Settle(%s): %w", c.row.ID, err)
					}
					// The answer echoes this call's own result, never another's.
					if row.ID != c.row.ID || !sameOutcome(row, c.outcome) {
						return fmt.Errorf("Settle(%s) answered row %s %s %s %q, want its own outcome %+v",
							c.row.ID, row.ID, row.Status, row.Response, row.Error, c.outcome)
					}
					mu.Lock()
					if dup {
						dups[c.row.ID]++
					} else {
						firsts[c.row.ID]++
					}
					mu.Unlock()
					if !dup {
						g.settled.Add(1)
					}
					// The group check, which a duplicate runs too.
					if _, err := rd.Settled(ctx, c.row.ID, dup); err != nil {
						return fmt.Errorf("Settled(%s): %w", c.row.ID, err)
					}
					return nil
				})
			}
		}
	}
	rng.Shuffle(len(tasks), func(i, j int) { tasks[i], tasks[j] = tasks[j], tasks[i] })
	start = time.Now()
	if errs := pool(stressWorkers, tasks); len(errs) > 0 {
		t.Fatalf("%d of %d tasks failed: %v", len(errs), len(tasks), firstErrors(errs, 5))
	}
	ran := time.Since(start)
	t.Logf("%d groups, %d calls, %d tasks; registered in %v, settled and sealed in %v (%.0f tasks/s)",
		len(groups), calls, len(tasks), registered.Round(time.Millisecond), ran.Round(time.Millisecond), float64(len(tasks))/ran.Seconds())
	t.Logf("sealed before any completion: %d, during: %d, after all: %d", sealBefore, sealDuring, all)
	if sealBefore == 0 || sealDuring == 0 || all == 0 {
		t.Errorf("the shuffle did not seal groups at every moment: before %d, during %d, after %d", sealBefore, sealDuring, all)
	}

	// Exactly one continuation per group, for its own account; no group missing, none extra.
	sent.mu.Lock()
	for _, m := range sent.msgs {
		g, ok := byID[m.GroupID]
		if !ok {
			t.Errorf("continuation for unknown group %s", m.GroupID)
			continue
		}
		if m.AccountID != g.account {
			t.Errorf("continuation of %s names account %s, want %s", m.GroupID, m.AccountID, g.account)
		}
	}
	missing, extra := 0, 0
	for _, g := range groups {
		switch n := sent.sent[g.id]; {
		case n == 0:
			missing++
		case n > 1:
			extra++
			t.Errorf("group %s got %d continuations", g.id, n)
		}
	}
	total := len(sent.msgs)
	sent.mu.Unlock()
	if missing > 0 || extra > 0 || total != len(groups) {
		t.Fatalf("%d continuations for %d groups: %d groups got none, %d more than one", total, len(groups), missing, extra)
	}

	// Every row settled once, with its own outcome; every group sealed, settled and claimed.
	checks := make([]func() error, 0, len(groups))
	for _, g := range groups {
		checks = append(checks, func() error {
			st, err := s.Load(ctx, g.id)
			if err != nil {
				return err
			}
			if st.Group == nil || !st.Settled() || st.Group.ClaimedAt.IsZero() || len(st.Rows) != len(g.calls) {
				return fmt.Errorf("group %s: sealed %v, settled %v, claimed %v, %d rows of %d",
					g.id, st.Group != nil, st.Settled(), st.Group != nil && !st.Group.ClaimedAt.IsZero(), len(st.Rows), len(g.calls))
			}
			for _, c := range g.calls {
				row, ok := st.Row(c.row.ID)
				if !ok || !sameOutcome(row, c.outcome) {
					return fmt.Errorf("row %s = %s %s %q, want %+v", c.row.ID, row.Status, row.Response, row.Error, c.outcome)
				}
				mu.Lock()
				f, d := firsts[c.row.ID], dups[c.row.ID]
				mu.Unlock()
				if f != 1 || d != c.copies-1 {
					return fmt.Errorf("row %s: %d first settles and %d duplicates for %d copies", c.row.ID, f, d, c.copies)
				}
			}
			return nil
		})
	}
	if errs := pool(stressWorkers, checks); len(errs) > 0 {
		t.Fatalf("%d groups are wrong: %v", len(errs), firstErrors(errs, 5))
	}

	// Nothing is left for the sweeper before the resend time: no row running, no group unclaimed.
	rd.Now = func() time.Time { return time.Now().Add(time.Minute) }
	if stats, err := rd.Sweep(ctx, 0); err != nil || stats != (asynctools.SweepStats{}) {
		t.Fatalf("sweep after the load = %+v, %v; want nothing to do", stats, err)
	}
	if n := sent.total(); n != len(groups) {
		t.Fatalf("the sweep sent %d more continuations", n-len(groups))
	}
}

// Write units for small rows: register + settle per call, seal + claim + consume per group, on
// the table, must stay within 2 per call + 3 per group, whatever the order of the seal and the
// completions (identical duplicates included). Duplicates and losing claims are refused by
// their condition and DynamoDB reports no unit for them.
func TestStressWriteUnits(t *testing.T) {
	base := newStore(t, nil)
	for _, c := range []struct {
		name      string
		sealFirst bool
	}{
		{"sealed before its completions", true},
		{"sealed at a random moment", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			seed := uint64(time.Now().UnixNano())
			rng := rand.New(rand.NewPCG(seed, seed>>7))
			var meter asynctools.Meter
			s := base.WithMeter(&meter)
			ctx := context.Background()
			sent := &continuations{}
			rd := &asynctools.Redriver{Store: s, Send: sent.Send, Now: time.Now}
			groups := newStressGroups(rng, 100, time.Now().Add(time.Hour))
			calls := 0
			var settles, early atomic.Int32
			var earlyGroups sync.Map
			var tasks []func() error
			for _, g := range groups {
				calls += len(g.calls)
				order := rng.Perm(len(g.calls) + 1) // k == len(g.calls) is the seal
				if c.sealFirst {
					order = append([]int{len(g.calls)}, rng.Perm(len(g.calls))...)
				}
				tasks = append(tasks, func() error {
					for _, c := range g.calls {
						if _, created, err := s.Register(ctx, c.row); err != nil || !created {
							return fmt.Errorf("Register(%s) = %v, %v", c.row.ID, created, err)
						}
					}
					for _, k := range order {
						if k == len(g.calls) {
							if _, err := rd.Seal(ctx, g.group()); err != nil {
								return err
							}
							continue
						}
						c := g.calls[k]
						for range c.copies {
							_, dup, err := s.Settle(ctx, c.row.ID, c.outcome, time.Now())
							if err != nil {
								return err
							}
							res, err := rd.Settled(ctx, c.row.ID, dup)
							if err != nil {
								return err
							}
							settles.Add(1)
							if res.State.Group == nil {
								early.Add(1)
								earlyGroups.Store(g.id, true)
							}
						}
					}
					// The continuation ran.
					return s.Consume(ctx, g.id, time.Now())
				})
			}
			if errs := pool(8, tasks); len(errs) > 0 {
				t.Fatal(firstErrors(errs, 5))
			}
			if n := sent.total(); n != len(groups) {
				t.Fatalf("%d continuations for %d groups", n, len(groups))
			}
			table, index := meter.Writes()
			// A group whose results all came before its seal also writes one marker that keeps it
			// findable by the sweeper should its parent die before sealing.
			marked := 0
			earlyGroups.Range(func(any, any) bool { marked++; return true })
			budget := float64(2*calls + 3*len(groups) + marked)
			t.Logf("%d groups, %d calls, %d settles (%d before the seal, in %d groups): %.0f table write units (budget 2 per call + 3 per group + 1 per group settled before its seal = %.0f), %.0f index write units (%.2f per call with its group's share)",
				len(groups), calls, settles.Load(), early.Load(), marked, table, budget, index, index/float64(calls))
			if table <= 0 || table > budget {
				t.Fatalf("%.0f table write units for %d calls in %d groups, want at most 2 per call + 3 per group + 1 per group with results before its seal = %.0f; "+
					"%d of the %d settles (first or duplicate) found their group unsealed", table, calls, len(groups), budget, early.Load(), settles.Load())
			}
		})
	}
}
