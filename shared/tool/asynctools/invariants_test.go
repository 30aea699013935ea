package asynctools_test

// One test per scenario of "Async tools: the invariants", against DynamoDB Local, with a clock
// the test moves by hand and a Redriver whose Send counts the continuations of each group.

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/google/go-cmp/cmp"
)

const (
	invRecheck     = 5 * time.Minute
	invResendAfter = 20 * time.Minute
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set moves the clock to at, which must not be before the time it shows.
func (c *fakeClock) Set(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if at.Before(c.now) {
		panic("fakeClock moved backwards")
	}
	c.now = at
}

// continuations records the continuations a Redriver sends, per group.
type continuations struct {
	mu   sync.Mutex
	sent map[string]int
	msgs []asynctools.Continuation
	// failNext makes the next Send fail (a lost message or an SQS outage), once.
	failNext bool
}

func (c *continuations) Send(_ context.Context, m asynctools.Continuation) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failNext {
		c.failNext = false
		return errors.New("sqs: simulated outage")
	}
	if c.sent == nil {
		c.sent = map[string]int{}
	}
	c.sent[m.GroupID]++
	c.msgs = append(c.msgs, m)
	return nil
}

func (c *continuations) count(groupID string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sent[groupID]
}

func (c *continuations) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.msgs)
}

func (c *continuations) failOnce() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failNext = true
}

// invEnv is one test's table, clock, continuation recorder and Redriver.
type invEnv struct {
	store *asynctools.Store
	clock *fakeClock
	sent  *continuations
	rd    *asynctools.Redriver
}

func newInvEnv(t *testing.T) *invEnv {
	t.Helper()
	e := &invEnv{store: newStore(t, nil), clock: &fakeClock{now: t0}, sent: &continuations{}}
	e.rd = &asynctools.Redriver{
		Store: e.store, Send: e.sent.Send, Now: e.clock.Now,
		ResendAfter: invResendAfter, Recheck: invRecheck,
	}
	return e
}

// wantSent fails unless groupID got exactly n continuations, each naming its account.
func (e *invEnv) wantSent(t *testing.T, groupID string, n int) {
	t.Helper()
	if got := e.sent.count(groupID); got != n {
		t.Fatalf("group %s got %d continuations, want %d", groupID, got, n)
	}
	e.sent.mu.Lock()
	defer e.sent.mu.Unlock()
	for _, m := range e.sent.msgs {
		if m.GroupID == groupID && m.AccountID != "acc_1" {
			t.Fatalf("continuation %+v names account %q, want acc_1", m, m.AccountID)
		}
	}
}

// check runs the bare group check (Redriver.Check), as the sealer's and the sweeper's do.
func (e *invEnv) check(t *testing.T, groupID string) asynctools.CheckResult {
	t.Helper()
	res, err := e.rd.Check(context.Background(), groupID)
	if err != nil {
		t.Fatalf("Check(%s): %v", groupID, err)
	}
	return res
}

// settled runs the group check a settler runs after its own write of id (Redriver.Settled, as
// the completion route does).
func (e *invEnv) settled(t *testing.T, id string) asynctools.CheckResult {
	t.Helper()
	res, err := e.rd.Settled(context.Background(), id, false)
	if err != nil {
		t.Fatalf("Settled(%s): %v", id, err)
	}
	return res
}

// complete settles id with o at the clock's time and runs the settler's group check, as the
// completion route does; it fails unless the settle is a first one.
func (e *invEnv) complete(t *testing.T, id string, o asynctools.Outcome) asynctools.CheckResult {
	t.Helper()
	settle(t, e.store, id, o, e.clock.Now())
	return e.settled(t, id)
}

func (e *invEnv) seal(t *testing.T, g asynctools.Group) asynctools.CheckResult {
	t.Helper()
	res, err := e.rd.Seal(context.Background(), g)
	if err != nil {
		t.Fatalf("Redriver.Seal(%s): %v", g.ID, err)
	}
	return res
}

func (e *invEnv) sweep(t *testing.T) asynctools.SweepStats {
	t.Helper()
	stats, err := e.rd.Sweep(context.Background(), 0)
	if err != nil {
		t.Fatalf("Sweep at %v: %v", e.clock.Now().Sub(t0), err)
	}
	return stats
}

func (e *invEnv) load(t *testing.T, groupID string) asynctools.GroupState {
	t.Helper()
	st, err := e.store.Load(context.Background(), groupID)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// parentGroup is the group a parent seals for the calls ids.
func parentGroup(groupID string, ids ...string) asynctools.Group {
	return asynctools.Group{
		ID: groupID, AccountID: "acc_1", AgentID: "agent_1", ConversationID: "conv_1",
		Expected: ids, Delivery: asynctools.Delivery{EventID: "evt_1"}, SealedBy: "parent",
	}
}

func failed(reason string) asynctools.Outcome {
	return asynctools.Outcome{Status: asynctools.Failed, Error: reason}
}

// Invariant: exactly one re-drive per group. One call, sealed while it runs, then completed:
// the completion's group check sends the single continuation; checking again sends nothing.
func TestInvariantOneCompletionOneContinuation(t *testing.T) {
	e := newInvEnv(t)
	g := newGroup()
	a := call(g, "call_a", t0.Add(time.Hour))
	register(t, e.store, a)

	if res := e.seal(t, parentGroup(g, a.ID)); res.Redriven || res.State.Settled() {
		t.Fatalf("sealing with the call running = %+v, want no re-drive", res)
	}
	e.wantSent(t, g, 0)

	e.clock.Advance(time.Minute)
	res := e.complete(t, a.ID, completed(`{"answer":42}`))
	if !res.Redriven || !res.State.Settled() {
		t.Fatalf("the completion's check = redriven %v, settled %v; want the re-drive", res.Redriven, res.State.Settled())
	}
	e.wantSent(t, g, 1)

	if res := e.check(t, g); res.Redriven {
		t.Fatal("a second check re-drove the group again")
	}
	e.wantSent(t, g, 1)
	st := e.load(t, g)
	if st.Group.ClaimedAt.IsZero() || !st.Group.ClaimedAt.Equal(e.clock.Now()) {
		t.Fatalf("group claimedAt = %v, want %v", st.Group.ClaimedAt, e.clock.Now())
	}
}

// Invariant: a completion may arrive before the seal; it is stored, never dropped, and the
// sealer's own group check re-drives.
func TestInvariantCompletionBeforeSeal(t *testing.T) {
	e := newInvEnv(t)
	g := newGroup()
	a := call(g, "call_a", t0.Add(time.Hour))
	register(t, e.store, a)

	res := e.complete(t, a.ID, completed(`"early"`))
	if res.Redriven || res.State.Group != nil || res.State.Settled() {
		t.Fatalf("check before the seal = redriven %v, group %v; want not sealed", res.Redriven, res.State.Group)
	}
	if row, ok := res.State.Row(a.ID); !ok || row.Status != asynctools.Completed || string(row.Response) != `"early"` {
		t.Fatalf("the early completion was not stored: %+v, %v", row, ok)
	}
	if res := e.check(t, g); res.State.Group != nil || res.Redriven {
		t.Fatalf("Check before the seal = %+v, want not sealed", res)
	}
	e.wantSent(t, g, 0)

	e.clock.Advance(time.Second)
	res = e.seal(t, parentGroup(g, a.ID))
	if !res.Redriven {
		t.Fatalf("Redriver.Seal of a settled group = %+v, want the re-drive", res)
	}
	e.wantSent(t, g, 1)
}

// Invariant: a completion may arrive before the seal, and so may all of them: the sealer
// re-drives, exactly once; a retried parent sealing again re-drives nothing.
func TestInvariantAllCompletionsBeforeSeal(t *testing.T) {
	e := newInvEnv(t)
	g := newGroup()
	var ids []string
	for i, k := range []string{"call_a", "call_b", "call_c"} {
		r := call(g, k, t0.Add(time.Hour))
		register(t, e.store, r)
		ids = append(ids, r.ID)
		o := completed(`{"n":` + string(rune('0'+i)) + `}`)
		if i == 2 {
			o = failed("the worker gave up")
		}
		if res := e.complete(t, r.ID, o); res.Redriven || res.State.Group != nil {
			t.Fatalf("check after completing %s before the seal = %+v", k, res)
		}
	}
	e.wantSent(t, g, 0)

	res := e.seal(t, parentGroup(g, ids...))
	if !res.Redriven || !res.State.Settled() {
		t.Fatalf("Redriver.Seal = %+v, want the re-drive", res)
	}
	e.wantSent(t, g, 1)

	// A retried parent seals the same group again.
	if res := e.seal(t, parentGroup(g, ids...)); res.Redriven {
		t.Fatal("sealing again re-drove the group a second time")
	}
	e.wantSent(t, g, 1)
}

// Invariant: only the first settle counts; an identical duplicate is answered idempotently and
// still runs the group check. Here the first completion of the last call stopped after its
// write (no check): the duplicate's check is the one that re-drives, and further duplicates do
// not re-drive again.
func TestInvariantDuplicateCompletion(t *testing.T) {
	e := newInvEnv(t)
	ctx := context.Background()
	g := newGroup()
	a, b := call(g, "call_a", t0.Add(time.Hour)), call(g, "call_b", t0.Add(time.Hour))
	register(t, e.store, a)
	register(t, e.store, b)
	e.seal(t, parentGroup(g, a.ID, b.ID))

	e.complete(t, a.ID, completed(`"a"`))
	// A duplicate while b is pending: idempotent, checks, nothing to re-drive yet.
	rec, dup, err := e.store.Settle(ctx, a.ID, completed(`"a"`), e.clock.Now())
	if err != nil || !dup || string(rec.Response) != `"a"` {
		t.Fatalf("duplicate of a = %+v, duplicate %v, %v", rec, dup, err)
	}
	if res := e.settled(t, a.ID); res.Redriven || res.State.Settled() {
		t.Fatalf("check after a's duplicate = %+v", res)
	}

	// b's first completion lands and its function dies before the check.
	first := settle(t, e.store, b.ID, completed(`{"v": [1, 2]}`), e.clock.Now())
	e.wantSent(t, g, 0)

	e.clock.Advance(time.Second)
	rec, dup, err = e.store.Settle(ctx, b.ID, completed(`{"v":[1,2]}`), e.clock.Now())
	if err != nil || !dup {
		t.Fatalf("identical duplicate of b = duplicate %v, %v; want duplicate=true", dup, err)
	}
	if !cmp.Equal(first, rec) {
		t.Fatalf("duplicate returned a different record (-first +dup):\n%s", cmp.Diff(first, rec))
	}
	if res := e.settled(t, b.ID); !res.Redriven {
		t.Fatalf("the duplicate's check = %+v, want the re-drive the first attempt never ran", res)
	}
	e.wantSent(t, g, 1)

	for range 3 {
		if _, dup, err := e.store.Settle(ctx, b.ID, completed(`{"v":[1,2]}`), e.clock.Now()); err != nil || !dup {
			t.Fatalf("another duplicate = %v, %v", dup, err)
		}
		if res := e.settled(t, b.ID); res.Redriven {
			t.Fatal("a later duplicate re-drove the group again")
		}
	}
	e.wantSent(t, g, 1)
}

// Invariant: only the first settle counts; a conflicting completion is refused with the
// recorded result (the route answers 409), and the row keeps the first outcome.
func TestInvariantConflictingCompletion(t *testing.T) {
	e := newInvEnv(t)
	ctx := context.Background()
	g := newGroup()
	a, b := call(g, "call_a", t0.Add(time.Hour)), call(g, "call_b", t0.Add(time.Hour))
	register(t, e.store, a)
	register(t, e.store, b)
	e.seal(t, parentGroup(g, a.ID, b.ID))
	e.complete(t, a.ID, completed(`{"winner":true}`))
	e.complete(t, b.ID, failed("quota exceeded"))
	e.wantSent(t, g, 1)

	cases := []struct {
		id         string
		o          asynctools.Outcome
		wantStatus string
	}{
		{a.ID, completed(`{"winner":false}`), asynctools.Completed},
		{a.ID, failed("late failure"), asynctools.Completed},
		{b.ID, completed(`"late success"`), asynctools.Failed},
		{b.ID, failed("another reason"), asynctools.Failed},
	}
	for _, c := range cases {
		_, dup, err := e.store.Settle(ctx, c.id, c.o, e.clock.Now())
		var conflict *asynctools.ConflictError
		if !errors.As(err, &conflict) || dup {
			t.Fatalf("conflicting settle of %s with %+v = duplicate %v, %v; want *ConflictError", c.id, c.o, dup, err)
		}
		if conflict.Recorded.ID != c.id || conflict.Recorded.Status != c.wantStatus {
			t.Fatalf("conflict records %s %s, want %s %s", conflict.Recorded.ID, conflict.Recorded.Status, c.id, c.wantStatus)
		}
	}
	st := e.load(t, g)
	if row, _ := st.Row(a.ID); row.Status != asynctools.Completed || string(row.Response) != `{"winner":true}` {
		t.Fatalf("row a after conflicts = %+v", row)
	}
	if row, _ := st.Row(b.ID); row.Status != asynctools.Failed || row.Error != "quota exceeded" {
		t.Fatalf("row b after conflicts = %+v", row)
	}
	e.check(t, g)
	e.wantSent(t, g, 1)
}

// Invariant: every async call has a deadline, and the timeout settles through the same
// conditional path. Before the deadline the sweeper leaves the row alone; after it, the row is
// failed with TimeoutError, a late success conflicts with that record, and the group re-drives
// once.
func TestInvariantTimeoutThenLateSuccess(t *testing.T) {
	e := newInvEnv(t)
	ctx := context.Background()
	g := newGroup()
	deadline := t0.Add(10 * time.Minute)
	a, b := call(g, "call_a", deadline), call(g, "call_b", deadline)
	register(t, e.store, a)
	register(t, e.store, b)
	e.seal(t, parentGroup(g, a.ID, b.ID))
	e.complete(t, a.ID, completed(`"a in time"`))

	// A timeout settle before the deadline does not land.
	if _, _, err := e.store.Settle(ctx, b.ID, asynctools.Outcome{Status: asynctools.Failed, Error: asynctools.TimeoutError, Timeout: true}, deadline.Add(-time.Millisecond)); !errors.Is(err, asynctools.ErrNotDue) {
		t.Fatalf("timeout settle before the deadline = %v, want ErrNotDue", err)
	}
	e.clock.Set(deadline.Add(-time.Second))
	if stats := e.sweep(t); stats.TimedOut != 0 || stats.Redriven != 0 {
		t.Fatalf("sweep before the deadline = %+v", stats)
	}

	e.clock.Set(deadline.Add(time.Second))
	if stats := e.sweep(t); stats.TimedOut != 1 || stats.Redriven != 1 {
		t.Fatalf("sweep after the deadline = %+v, want 1 timed out and 1 re-driven", stats)
	}
	e.wantSent(t, g, 1)

	e.clock.Advance(time.Second)
	_, _, err := e.store.Settle(ctx, b.ID, completed(`"b, too late"`), e.clock.Now())
	var conflict *asynctools.ConflictError
	if !errors.As(err, &conflict) {
		t.Fatalf("late success = %v, want *ConflictError", err)
	}
	if conflict.Recorded.Status != asynctools.Failed || conflict.Recorded.Error != asynctools.TimeoutError {
		t.Fatalf("late success conflicts with %s %q, want failed %q", conflict.Recorded.Status, conflict.Recorded.Error, asynctools.TimeoutError)
	}
	e.check(t, g)
	if stats := e.sweep(t); stats != (asynctools.SweepStats{}) {
		t.Fatalf("sweep after the re-drive = %+v, want nothing", stats)
	}
	e.wantSent(t, g, 1)
}

// Invariant: the timeout races fairly with a late success. Many calls past their deadline are
// completed while sweepers time them out: each row has exactly one outcome, whoever lost is told
// the winner's, and the group re-drives once.
func TestInvariantTimeoutRacesLateSuccess(t *testing.T) {
	e := newInvEnv(t)
	ctx := context.Background()
	g := newGroup()
	deadline := t0.Add(time.Minute)
	const n = 24
	var ids []string
	for i := range n {
		r := call(g, "call_"+string(rune('a'+i)), deadline)
		register(t, e.store, r)
		ids = append(ids, r.ID)
	}
	e.seal(t, parentGroup(g, ids...))
	e.clock.Set(deadline.Add(time.Second))

	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		won      = map[string]bool{} // the completion landed
		timedOut int
		errs     []error
	)
	for range 2 {
		wg.Go(func() {
			stats, err := e.rd.Sweep(ctx, 0)
			mu.Lock()
			defer mu.Unlock()
			timedOut += stats.TimedOut
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	for _, id := range ids {
		wg.Go(func() {
			// Spread the completions over the time the sweepers take to list and time out rows.
			time.Sleep(time.Duration(rand.IntN(250)) * time.Millisecond)
			_, dup, err := e.store.Settle(ctx, id, completed(`"late"`), e.clock.Now())
			var conflict *asynctools.ConflictError
			switch {
			case errors.As(err, &conflict):
				if conflict.Recorded.Error != asynctools.TimeoutError {
					err = errors.New("conflict with " + conflict.Recorded.Error)
				} else {
					err = nil
				}
			case err == nil && !dup:
				mu.Lock()
				won[id] = true
				mu.Unlock()
				_, err = e.rd.Settled(ctx, id, false)
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	st := e.load(t, g)
	failedRows := 0
	for _, id := range ids {
		row, _ := st.Row(id)
		switch {
		case won[id] && row.Status == asynctools.Completed:
		case !won[id] && row.Status == asynctools.Failed && row.Error == asynctools.TimeoutError:
			failedRows++
		default:
			t.Errorf("row %s is %s %q, completion won: %v", id, row.Status, row.Error, won[id])
		}
	}
	// Every timeout that landed is counted (TestSweepStatsCountLandedTimeoutsOnly checks that
	// nothing else is).
	if timedOut < failedRows {
		t.Errorf("sweepers counted %d timeouts, %d rows timed out", timedOut, failedRows)
	}
	t.Logf("%d of %d late completions won, %d timed out", len(won), n, failedRows)
	if !st.Settled() {
		t.Fatal("group not settled")
	}
	e.sweep(t)
	e.wantSent(t, g, 1)
}

// SweepStats.TimedOut counts the timeouts a sweep landed. Several sweeps running at once (the
// schedule overlapping a slow sweep, or the Due index listing a row a moment after it was
// settled) list the same rows; a row another sweep timed out first must not be counted again.
func TestSweepStatsCountLandedTimeoutsOnly(t *testing.T) {
	e := newInvEnv(t)
	ctx := context.Background()
	g := newGroup()
	deadline := t0.Add(time.Minute)
	const n, sweepers = 20, 4
	var ids []string
	for i := range n {
		r := call(g, "call_"+string(rune('a'+i)), deadline)
		register(t, e.store, r)
		ids = append(ids, r.ID)
	}
	e.seal(t, parentGroup(g, ids...))
	e.clock.Set(deadline.Add(time.Second))

	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		timedOut int
		errs     []error
	)
	start := make(chan struct{})
	for range sweepers {
		wg.Go(func() {
			<-start
			stats, err := e.rd.Sweep(ctx, 0)
			mu.Lock()
			defer mu.Unlock()
			timedOut += stats.TimedOut
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	st := e.load(t, g)
	for _, id := range ids {
		if row, _ := st.Row(id); row.Status != asynctools.Failed || row.Error != asynctools.TimeoutError {
			t.Fatalf("row %s = %s %q, want timed out", id, row.Status, row.Error)
		}
	}
	e.wantSent(t, g, 1)
	if timedOut != n {
		t.Fatalf("%d concurrent sweeps reported %d timeouts for %d rows timed out: redrive.go Sweep counts "+
			"`err == nil` from Store.Settle as a timeout, but a sweep that lost the race gets the winner's "+
			"identical timeout back as duplicate=true with a nil error, and counts it too", sweepers, timedOut, n)
	}
}

// countingTool is an external-dispatch tool whose execute counts its dispatches and checks that
// the call's row exists, running, before the work is handed out (register before dispatch).
type countingTool struct {
	store      *asynctools.Store
	dispatches atomic.Int32
	mu         sync.Mutex
	tickets    []asynctools.Ticket
	errs       []error
}

func (c *countingTool) execute(ctx context.Context, _ json.RawMessage) (any, error) {
	tk, ok := asynctools.TicketFrom(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !ok {
		c.errs = append(c.errs, errors.New("execute ran without a ticket"))
		return nil, errors.New("no ticket")
	}
	row, err := c.store.Result(ctx, tk.ResultID)
	switch {
	case err != nil:
		c.errs = append(c.errs, errors.New("dispatched before its row was registered: "+err.Error()))
	case row.Status != asynctools.Running || !asynctools.TokenMatches(tk.Token, row.TokenHash):
		c.errs = append(c.errs, errors.New("the row at dispatch is "+row.Status+" or does not hold the ticket's token"))
	}
	c.dispatches.Add(1)
	c.tickets = append(c.tickets, tk)
	return map[string]string{"queued": tk.ResultID}, nil
}

func prepare(t *testing.T, tools ...tool.Tool) func(name string, input string) *tool.Call {
	t.Helper()
	set, err := tool.NewSet(tools...)
	if err != nil {
		t.Fatal(err)
	}
	return func(name, input string) *tool.Call {
		t.Helper()
		c, err := set.Prepare(name, json.RawMessage(input))
		if err != nil {
			t.Fatalf("Prepare(%s, %s): %v", name, input, err)
		}
		return c
	}
}

func wantPlaceholder(t *testing.T, got json.RawMessage, id string) {
	t.Helper()
	var v map[string]string
	if err := json.Unmarshal(got, &v); err != nil || !cmp.Equal(v, map[string]string{"resultId": id, "status": "running"}) {
		t.Fatalf("placeholder = %s (%v), want {\"resultId\":%q,\"status\":\"running\"}", got, err, id)
	}
}

// Invariant: register before dispatch; a retried pass reuses the same resultId (derived from
// turn + tool call) and does not dispatch twice. Two Passes with the same PassConfig run the
// same tool call of an external-dispatch tool: one dispatch, the same resultId, and the second
// Pass still lists the call as external (and seals it in its group).
func TestInvariantRetriedPassDispatchesOnce(t *testing.T) {
	e := newInvEnv(t)
	ctx := context.Background()
	ct := &countingTool{store: e.store}
	prep := prepare(t, tool.Tool{Name: "research", Async: asynctools.ExternalDispatch, Execute: ct.execute})
	g := asynctools.NewGroupID("turn-nonce-"+random(8), 1)
	cfg := asynctools.PassConfig{
		Store: e.store, GroupID: g, AccountID: "acc_1", AgentID: "agent_1", ConversationID: "conv_1",
		TurnID: "evt_1", Delivery: asynctools.Delivery{EventID: "evt_1"},
		WaitUntil: time.Now().Add(10 * time.Minute), ExternalTimeout: time.Hour, Now: e.clock.Now,
	}
	id := asynctools.ResultID(g, "toolu_1")

	first := asynctools.NewPass(cfg)
	t.Cleanup(first.Abort)
	out1, err := first.Run(ctx, "toolu_1", prep("research", `{}`))
	if err != nil {
		t.Fatal(err)
	}
	wantPlaceholder(t, out1, id)

	// The invocation dies after the dispatch; the pass is retried with the same config.
	e.clock.Advance(time.Minute)
	second := asynctools.NewPass(cfg)
	t.Cleanup(second.Abort)
	out2, err := second.Run(ctx, "toolu_1", prep("research", `{}`))
	if err != nil {
		t.Fatal(err)
	}
	wantPlaceholder(t, out2, id)

	if n := ct.dispatches.Load(); n != 1 {
		t.Fatalf("the call was dispatched %d times, want once", n)
	}
	if len(ct.errs) > 0 {
		t.Fatalf("dispatch: %v", ct.errs)
	}
	if tk := ct.tickets[0]; tk.ResultID != id || tk.CompletePath != asynctools.CompletePath(id) || !strings.HasPrefix(tk.Token, "act_") {
		t.Fatalf("ticket = %+v", tk)
	}
	for name, p := range map[string]*asynctools.Pass{"first": first, "second": second} {
		if got := p.External(); !cmp.Equal(got, []string{id}) {
			t.Fatalf("%s pass External() = %v, want [%s]", name, got, id)
		}
		if got := p.Group(); !cmp.Equal(got.Expected, []string{id}) || got.ID != g {
			t.Fatalf("%s pass Group() = %+v", name, got)
		}
	}
	// The row is the first pass's: its token (the one the worker holds) still opens it.
	row, err := e.store.Result(ctx, id)
	if err != nil || !row.CreatedAt.Equal(t0) || !asynctools.TokenMatches(ct.tickets[0].Token, row.TokenHash) {
		t.Fatalf("row after the retry = %+v, %v; want the first pass's row", row, err)
	}

	// The retried pass seals; the worker's completion re-drives once.
	e.seal(t, second.Group())
	e.complete(t, id, completed(`{"report":"done"}`))
	e.wantSent(t, g, 1)
}

// Invariant: register before dispatch, for same-invocation work: Run writes the row and returns
// the placeholder at once, the work runs in the background, and Wait returns what landed, with
// the rows already settled.
func TestInvariantSameInvocationPass(t *testing.T) {
	e := newInvEnv(t)
	ctx := context.Background()
	release := make(chan struct{})
	var started atomic.Int32
	prep := prepare(t, tool.Tool{
		Name: "crunch", Async: asynctools.SameInvocation,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`),
		Execute: func(ctx context.Context, in json.RawMessage) (any, error) {
			started.Add(1)
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			var v struct{ N int }
			_ = json.Unmarshal(in, &v)
			if v.N < 0 {
				return nil, errors.New("negative")
			}
			return map[string]int{"square": v.N * v.N}, nil
		},
	})
	g := newGroup()
	p := asynctools.NewPass(asynctools.PassConfig{
		Store: e.store, GroupID: g, AccountID: "acc_1", AgentID: "agent_1", ConversationID: "conv_1",
		TurnID: "evt_1", Delivery: asynctools.Delivery{},
		WaitUntil: time.Now().Add(time.Minute), ExternalTimeout: time.Hour, Now: time.Now,
	})
	t.Cleanup(p.Abort)

	inputs := map[string]string{"toolu_a": `{"n":3}`, "toolu_b": `{"n":-1}`, "toolu_c": `{"n":5}`}
	order := []string{"toolu_a", "toolu_b", "toolu_c"}
	var ids []string
	for _, tc := range order {
		out, err := p.Run(ctx, tc, prep("crunch", inputs[tc]))
		if err != nil {
			t.Fatal(err)
		}
		id := asynctools.ResultID(g, tc)
		ids = append(ids, id)
		wantPlaceholder(t, out, id)
		// The placeholder came back while the work is still blocked, and the row is there.
		if row, err := e.store.Result(ctx, id); err != nil || row.Status != asynctools.Running || row.Mode != asynctools.SameInvocation {
			t.Fatalf("row %s after Run = %+v, %v; want a running same-invocation row", tc, row, err)
		}
	}
	if !p.HasWork() || len(p.External()) != 0 {
		t.Fatalf("HasWork %v, External %v", p.HasWork(), p.External())
	}

	close(release)
	var seen []string
	var mu sync.Mutex
	landed := p.Wait(ctx, 10*time.Millisecond, func(r asynctools.Result) {
		mu.Lock()
		seen = append(seen, r.ID)
		mu.Unlock()
	}, nil)
	if started.Load() != 3 {
		t.Fatalf("%d calls started, want 3", started.Load())
	}
	var got []string
	for _, r := range landed {
		got = append(got, r.ID)
	}
	if !cmp.Equal(got, ids) {
		t.Fatalf("Wait returned %v, want the calls in order %v", got, ids)
	}
	slices.Sort(seen)
	want := slices.Clone(ids)
	slices.Sort(want)
	if !cmp.Equal(seen, want) {
		t.Fatalf("onLand saw %v, want every call once", seen)
	}
	wantOut := map[string]string{ids[0]: `{"square":9}`, ids[2]: `{"square":25}`}
	st := e.load(t, g)
	for i, r := range landed {
		row, ok := st.Row(r.ID)
		if !ok || row.Status != r.Status || string(row.Response) != string(r.Response) || row.Error != r.Error || row.SettledAt.IsZero() {
			t.Fatalf("row %s = %+v, Wait returned %+v", r.ID, row, r)
		}
		if i == 1 {
			if r.Status != asynctools.Failed || !strings.Contains(r.Error, "negative") {
				t.Fatalf("call b = %s %q, want failed with its error", r.Status, r.Error)
			}
			continue
		}
		if r.Status != asynctools.Completed || string(r.Response) != wantOut[r.ID] {
			t.Fatalf("call %s = %s %s, want completed %s", r.ID, r.Status, r.Response, wantOut[r.ID])
		}
	}
}

// Invariant: every async call has a deadline. Same-invocation work still running at WaitUntil
// (its row's deadline) is stopped and its row settled failed through the timeout path; work
// that finished in time keeps its result.
func TestInvariantSameInvocationOutlivesWaitUntil(t *testing.T) {
	e := newInvEnv(t)
	ctx := context.Background()
	prep := prepare(t,
		tool.Tool{Name: "slow", Async: asynctools.SameInvocation, Execute: func(ctx context.Context, _ json.RawMessage) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}},
		tool.Tool{Name: "quick", Async: asynctools.SameInvocation, Execute: func(context.Context, json.RawMessage) (any, error) {
			return "fast", nil
		}},
	)
	g := newGroup()
	until := time.Now().Add(700 * time.Millisecond)
	p := asynctools.NewPass(asynctools.PassConfig{
		Store: e.store, GroupID: g, AccountID: "acc_1", TurnID: "evt_1", Delivery: asynctools.Delivery{},
		WaitUntil: until, ExternalTimeout: time.Hour, Now: time.Now,
	})
	t.Cleanup(p.Abort)
	slowID, quickID := asynctools.ResultID(g, "toolu_slow"), asynctools.ResultID(g, "toolu_quick")
	if _, err := p.Run(ctx, "toolu_slow", prep("slow", `{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Run(ctx, "toolu_quick", prep("quick", `{}`)); err != nil {
		t.Fatal(err)
	}
	landed := p.Wait(ctx, 50*time.Millisecond, nil, nil)
	if late := time.Since(until); late > 2*time.Second {
		t.Fatalf("Wait returned %v after WaitUntil", late)
	}
	if len(landed) != 2 || landed[0].ID != slowID || landed[1].ID != quickID {
		t.Fatalf("Wait returned %+v", landed)
	}
	if r := landed[0]; r.Status != asynctools.Failed || r.Error == "" {
		t.Fatalf("the slow call = %s %q, want failed", r.Status, r.Error)
	}
	if r := landed[1]; r.Status != asynctools.Completed || string(r.Response) != `"fast"` {
		t.Fatalf("the quick call = %s %s, want completed", r.Status, r.Response)
	}
	row, err := e.store.Result(ctx, slowID)
	if err != nil || row.Status != asynctools.Failed || row.Error != landed[0].Error {
		t.Fatalf("the slow call's row = %+v, %v; want it settled failed like Wait reported", row, err)
	}
	// It timed out through the conditional path: a result arriving now conflicts.
	var conflict *asynctools.ConflictError
	if _, _, err := e.store.Settle(ctx, slowID, completed(`"finally"`), time.Now()); !errors.As(err, &conflict) {
		t.Fatalf("a late result for the timed-out call = %v, want *ConflictError", err)
	}
}

// Invariant: every async call has a deadline, for same-invocation work that ignores its
// context too: at WaitUntil the parent must stop waiting and the row must be settled failed,
// rather than the parent staying blocked until the tool returns (in Lambda, until the
// invocation is killed, before the parent could record or seal anything).
func TestInvariantSameInvocationIgnoringCancellationDoesNotHoldWait(t *testing.T) {
	e := newInvEnv(t)
	ctx := context.Background()
	const overrun = 3 * time.Second
	prep := prepare(t, tool.Tool{Name: "stubborn", Async: asynctools.SameInvocation, Execute: func(context.Context, json.RawMessage) (any, error) {
		time.Sleep(overrun + 500*time.Millisecond) // a blocking library call that takes no context
		return "too late", nil
	}})
	g := newGroup()
	until := time.Now().Add(500 * time.Millisecond)
	p := asynctools.NewPass(asynctools.PassConfig{
		Store: e.store, GroupID: g, AccountID: "acc_1", TurnID: "evt_1", Delivery: asynctools.Delivery{},
		WaitUntil: until, ExternalTimeout: time.Hour, Now: time.Now,
	})
	t.Cleanup(p.Abort)
	id := asynctools.ResultID(g, "toolu_1")
	if _, err := p.Run(ctx, "toolu_1", prep("stubborn", `{}`)); err != nil {
		t.Fatal(err)
	}
	landed := p.Wait(ctx, 50*time.Millisecond, nil, nil)
	late := time.Since(until)
	row, err := e.store.Result(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Wait returned %v after WaitUntil with %+v; row is %s", late.Round(time.Millisecond), landed, row.Status)
	if late > time.Second {
		t.Errorf("Wait returned %v after WaitUntil: it waited for a tool that ignores cancellation "+
			"(pass.go Wait: `case <-p.workCtx.Done(): p.wg.Wait()`), so the parent overruns its invocation", late.Round(time.Millisecond))
	}
	if row.Status != asynctools.Failed {
		t.Errorf("the overrunning call's row is %s, want failed", row.Status)
	}
}

// Invariant: nothing is lost if a function dies between two writes: settled but unclaimed. The
// last settler died before its group check; the sweeper finds the group once its due time (the
// seal time + Recheck) has passed and re-drives it, once.
func TestInvariantCrashBetweenSettleAndClaim(t *testing.T) {
	e := newInvEnv(t)
	g := newGroup()
	a, b := call(g, "call_a", t0.Add(time.Hour)), call(g, "call_b", t0.Add(time.Hour))
	register(t, e.store, a)
	register(t, e.store, b)
	sealedAt := e.clock.Now()
	e.seal(t, parentGroup(g, a.ID, b.ID))
	e.clock.Advance(time.Second)
	e.complete(t, a.ID, completed(`"a"`))
	settle(t, e.store, b.ID, completed(`"b"`), e.clock.Now()) // and the function dies: no Check

	e.clock.Set(sealedAt.Add(invRecheck - time.Second))
	if stats := e.sweep(t); stats != (asynctools.SweepStats{}) {
		t.Fatalf("sweep before the group is due = %+v, want nothing", stats)
	}
	e.wantSent(t, g, 0)

	e.clock.Set(sealedAt.Add(invRecheck))
	if stats := e.sweep(t); stats.Redriven != 1 || stats.TimedOut != 0 || stats.Sealed != 0 || stats.Resent != 0 {
		t.Fatalf("sweep once the group is due = %+v, want exactly 1 re-driven", stats)
	}
	e.wantSent(t, g, 1)
	e.clock.Advance(time.Minute)
	if stats := e.sweep(t); stats != (asynctools.SweepStats{}) {
		t.Fatalf("sweep after the re-drive = %+v, want nothing", stats)
	}
	e.wantSent(t, g, 1)
}

// Invariant: nothing is lost if a function dies between two writes: claimed but unsent. The
// claimer died (or SQS refused the message) after its claim; the sweeper leaves the group alone
// until ResendAfter has passed, then sends the continuation.
func TestInvariantCrashBetweenClaimAndSend(t *testing.T) {
	ctx := context.Background()
	t.Run("claim only", func(t *testing.T) {
		e := newInvEnv(t)
		g := newGroup()
		a := call(g, "call_a", t0.Add(time.Hour))
		register(t, e.store, a)
		e.seal(t, parentGroup(g, a.ID))
		settle(t, e.store, a.ID, completed(`"a"`), e.clock.Now())
		claimedAt := e.clock.Now()
		if ok, err := e.store.Claim(ctx, g, claimedAt, claimedAt.Add(invResendAfter)); err != nil || !ok {
			t.Fatalf("Claim = %v, %v", ok, err) // and the function dies before Send
		}

		e.clock.Set(claimedAt.Add(invResendAfter - time.Second))
		if stats := e.sweep(t); stats != (asynctools.SweepStats{}) {
			t.Fatalf("sweep before ResendAfter = %+v, want nothing", stats)
		}
		e.wantSent(t, g, 0)

		e.clock.Set(claimedAt.Add(invResendAfter))
		if stats := e.sweep(t); stats.Resent != 1 || stats.Redriven != 0 {
			t.Fatalf("sweep after ResendAfter = %+v, want Resent 1", stats)
		}
		e.wantSent(t, g, 1)
		// Sent again only after another ResendAfter without the continuation consuming it.
		e.clock.Advance(time.Minute)
		if stats := e.sweep(t); stats != (asynctools.SweepStats{}) {
			t.Fatalf("sweep right after the resend = %+v, want nothing", stats)
		}
		if err := e.store.Consume(ctx, g, e.clock.Now()); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(2 * invResendAfter)
		if stats := e.sweep(t); stats != (asynctools.SweepStats{}) {
			t.Fatalf("sweep after the continuation consumed the group = %+v, want nothing", stats)
		}
		e.wantSent(t, g, 1)
	})
	t.Run("send fails", func(t *testing.T) {
		e := newInvEnv(t)
		g := newGroup()
		a := call(g, "call_a", t0.Add(time.Hour))
		register(t, e.store, a)
		e.seal(t, parentGroup(g, a.ID))
		settle(t, e.store, a.ID, completed(`"a"`), e.clock.Now())
		e.sent.failOnce()
		claimedAt := e.clock.Now()
		if res, err := e.rd.Check(ctx, g); err == nil || res.Redriven {
			t.Fatalf("Check with SQS down = %+v, %v; want the send error", res, err)
		}
		if res := e.check(t, g); res.Redriven {
			t.Fatal("a later check re-drove a claimed group")
		}
		e.wantSent(t, g, 0)
		e.clock.Set(claimedAt.Add(invResendAfter))
		if stats := e.sweep(t); stats.Resent != 1 {
			t.Fatalf("sweep after ResendAfter = %+v, want Resent 1", stats)
		}
		e.wantSent(t, g, 1)
	})
}

// Invariant: nothing is lost if a function dies between two writes: never sealed. The parent
// registered its calls and died before sealing; one call was completed, the other never is.
// After the rows' deadline the sweeper times the running one out, seals the group as "sweeper"
// with every row, and re-drives it once.
func TestInvariantNeverSealedGroup(t *testing.T) {
	e := newInvEnv(t)
	g := newGroup()
	parentUntil := t0.Add(5 * time.Minute)
	deadline := t0.Add(10 * time.Minute)
	a, b := call(g, "call_a", deadline), call(g, "call_b", deadline)
	a.ParentUntil, b.ParentUntil = parentUntil, parentUntil
	register(t, e.store, a)
	register(t, e.store, b)
	e.clock.Advance(time.Minute)
	if res := e.complete(t, a.ID, completed(`"a"`)); res.State.Group != nil || res.Redriven {
		t.Fatalf("check on the unsealed group = %+v", res)
	}

	// Before the parent's end the sweeper leaves the group to its parent.
	e.clock.Set(parentUntil.Add(-time.Second))
	if stats := e.sweep(t); stats != (asynctools.SweepStats{}) {
		t.Fatalf("sweep before ParentUntil = %+v, want nothing", stats)
	}
	// After it and before the deadline, it may seal the orphan (a's early completion brings the
	// group to it), but b is running: nothing times out, nothing re-drives.
	e.clock.Set(parentUntil.Add(time.Minute))
	early := e.sweep(t)
	if early.TimedOut != 0 || early.Redriven != 0 || early.Resent != 0 {
		t.Fatalf("sweep before the deadline = %+v, want no timeout and no re-drive", early)
	}
	e.wantSent(t, g, 0)
	e.clock.Set(deadline.Add(time.Second))
	stats := e.sweep(t)
	if stats.TimedOut != 1 || early.Sealed+stats.Sealed != 1 || stats.Redriven != 1 {
		t.Fatalf("sweeps = %+v before and %+v after the deadline, want 1 timed out, 1 sealed, 1 re-driven", early, stats)
	}
	e.wantSent(t, g, 1)
	st := e.load(t, g)
	if st.Group == nil || st.Group.SealedBy != "sweeper" || st.Group.AccountID != "acc_1" || st.Group.Delivery != a.Delivery {
		t.Fatalf("group = %+v, want sealed by the sweeper with the rows' account and delivery", st.Group)
	}
	got := slices.Clone(st.Group.Expected)
	slices.Sort(got)
	want := []string{a.ID, b.ID}
	slices.Sort(want)
	if !cmp.Equal(got, want) {
		t.Fatalf("sweeper sealed %v, want every row %v", got, want)
	}
	if row, _ := st.Row(b.ID); row.Status != asynctools.Failed || row.Error != asynctools.TimeoutError {
		t.Fatalf("row b = %s %q, want timed out", row.Status, row.Error)
	}
	if row, _ := st.Row(a.ID); row.Status != asynctools.Completed {
		t.Fatalf("row a = %s, want its completion kept", row.Status)
	}
	e.clock.Advance(time.Minute)
	if stats := e.sweep(t); stats != (asynctools.SweepStats{}) {
		t.Fatalf("sweep after the re-drive = %+v, want nothing", stats)
	}
	e.wantSent(t, g, 1)
}

// sweepAt runs the sweeper at each time, in order, and returns what all the sweeps did. Once
// a continuation of a group was sent, its continuation runs (consumes the group) before the
// next sweep, so a later sweep has no reason to send it again.
func (e *invEnv) sweepAt(t *testing.T, times ...time.Time) asynctools.SweepStats {
	t.Helper()
	var total asynctools.SweepStats
	for _, at := range times {
		e.clock.Set(at)
		s := e.sweep(t)
		total.TimedOut += s.TimedOut
		total.Sealed += s.Sealed
		total.Redriven += s.Redriven
		total.Resent += s.Resent
		e.sent.mu.Lock()
		groups := make([]string, 0, len(e.sent.sent))
		for g := range e.sent.sent {
			groups = append(groups, g)
		}
		e.sent.mu.Unlock()
		for _, g := range groups {
			if err := e.store.Consume(context.Background(), g, at); err != nil {
				t.Fatalf("Consume(%s): %v", g, err)
			}
		}
	}
	return total
}

// Invariant: nothing is lost if a function dies between two writes: never sealed, every call
// completed. The parent (ParentUntil 5m) died before sealing; the outside worker completed both
// calls well before their 1h deadline (ASYNC_TOOL_TIMEOUT's default). Each completion's check
// finds the group unsealed, so only the sweeper can finish it: after ParentUntil it must seal
// the group and re-drive it once.
func TestInvariantNeverSealedGroupAllCompletedBeforeDeadline(t *testing.T) {
	e := newInvEnv(t)
	g := newGroup()
	parentUntil := t0.Add(5 * time.Minute)
	deadline := t0.Add(time.Hour)
	a, b := call(g, "call_a", deadline), call(g, "call_b", deadline)
	a.ParentUntil, b.ParentUntil = parentUntil, parentUntil
	register(t, e.store, a)
	register(t, e.store, b)
	e.clock.Advance(time.Minute)
	e.complete(t, a.ID, completed(`"a"`))
	e.complete(t, b.ID, completed(`"b"`))
	e.wantSent(t, g, 0)

	// Sweep regularly, past ParentUntil and past the rows' deadline.
	stats := e.sweepAt(t, parentUntil.Add(time.Minute), parentUntil.Add(invRecheck+time.Minute),
		deadline.Add(time.Minute), deadline.Add(invRecheck+time.Minute), deadline.Add(3*time.Hour))
	st := e.load(t, g)
	if st.Group == nil || e.sent.count(g) != 1 {
		t.Fatalf("orphaned group whose calls all completed before their deadline: after sweeping past "+
			"ParentUntil and the deadline it is sealed=%v with %d continuations (sweeps did %+v); want it sealed "+
			"by the sweeper and re-driven once. Store.Settle removes the row's dueShard/dueAt, and an "+
			"unsealed group has no item of its own on the Due index, so nothing brings it to the sweeper",
			st.Group != nil, e.sent.count(g), stats)
	}
	if st.Group.SealedBy != "sweeper" || stats.Sealed != 1 || stats.Redriven != 1 {
		t.Fatalf("group sealed by %q, sweeps %+v; want sealed by the sweeper and re-driven once", st.Group.SealedBy, stats)
	}
}

// Invariant: nothing is lost if a function dies between two writes: never sealed, calls timed
// out before the parent's end. With an external timeout shorter than the invocation
// (ASYNC_TOOL_TIMEOUT=2m, ParentUntil 10m) the sweeper times the rows out while the parent may
// still seal, so it must come back to the group after ParentUntil and seal and re-drive it.
func TestInvariantNeverSealedGroupTimedOutBeforeParentUntil(t *testing.T) {
	e := newInvEnv(t)
	g := newGroup()
	parentUntil := t0.Add(10 * time.Minute)
	deadline := t0.Add(2 * time.Minute)
	a := call(g, "call_a", deadline)
	a.ParentUntil = parentUntil
	register(t, e.store, a)

	first := e.sweepAt(t, deadline.Add(time.Second))
	if first.TimedOut != 1 || first.Sealed != 0 {
		t.Fatalf("sweep after the deadline, before ParentUntil = %+v, want the row timed out and the group left unsealed", first)
	}
	stats := e.sweepAt(t, parentUntil.Add(time.Second), parentUntil.Add(invRecheck+time.Second), parentUntil.Add(3*time.Hour))
	st := e.load(t, g)
	if st.Group == nil || e.sent.count(g) != 1 {
		t.Fatalf("orphaned group timed out before ParentUntil: after sweeping past ParentUntil it is sealed=%v "+
			"with %d continuations (sweeps did %+v); want it sealed by the sweeper and re-driven once. "+
			"sweepGroup returns without rescheduling when now < ParentUntil, and the settled row left the Due index",
			st.Group != nil, e.sent.count(g), stats)
	}
}

// A pass that paused for approval holds its group's parent until the approvals' deadline: the
// resume seals the group, maybe long after the pausing invocation ended, so the sweeper leaves
// it unsealed until then, whether its calls complete or time out meanwhile; past the hold, a
// group nobody resumed is sealed as an orphan as before.
func TestInvariantHeldParentIsNotSealedAsAnOrphan(t *testing.T) {
	e := newInvEnv(t)
	g := newGroup()
	parentUntil, held := t0.Add(5*time.Minute), t0.Add(24*time.Hour)
	a, b := call(g, "call_a", t0.Add(time.Hour)), call(g, "call_b", t0.Add(time.Hour))
	a.ParentUntil, b.ParentUntil = parentUntil, parentUntil
	register(t, e.store, a)
	register(t, e.store, b)
	for _, id := range []string{a.ID, b.ID} {
		if err := e.store.HoldParent(context.Background(), id, held); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Advance(time.Minute)
	e.complete(t, a.ID, completed(`"a"`))

	stats := e.sweepAt(t, parentUntil.Add(time.Minute), t0.Add(time.Hour+time.Minute), t0.Add(2*time.Hour))
	if st := e.load(t, g); st.Group != nil || stats.Sealed != 0 || stats.TimedOut != 1 {
		t.Fatalf("before the hold ends: group %+v, sweeps %+v; want b timed out and the group left to its resume", st.Group, stats)
	}
	// The resume seals it: one continuation.
	if res := e.seal(t, parentGroup(g, a.ID, b.ID)); !res.Redriven {
		t.Fatalf("sealing the held group = %+v, want it re-driven (both calls settled)", res)
	}
	e.wantSent(t, g, 1)

	// Without a resume, the sweeper seals it once the hold is over.
	o := newGroup()
	c := call(o, "call_c", t0.Add(time.Hour))
	c.ParentUntil = parentUntil
	register(t, e.store, c)
	if err := e.store.HoldParent(context.Background(), c.ID, held); err != nil {
		t.Fatal(err)
	}
	settle(t, e.store, c.ID, completed(`"c"`), e.clock.Now())
	e.settled(t, c.ID)
	if stats := e.sweepAt(t, held.Add(-time.Minute)); stats.Sealed != 0 {
		t.Fatalf("sweep before the hold ends = %+v, want nothing sealed", stats)
	}
	if stats := e.sweepAt(t, held.Add(time.Minute)); stats.Sealed != 1 || stats.Redriven != 1 {
		t.Fatalf("sweep after the hold = %+v, want the orphan sealed and re-driven", stats)
	}
}
