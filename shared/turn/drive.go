package turn

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/approval"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/tool/asynctools"
)

// invocation is one function invocation's part of a turn: a model pass, then the async work the pass
// started, whose results go back to the model for another pass, until the turn ends or waits
// for outside workers.
type invocation struct {
	e              *Engine
	log            *slog.Logger
	accountID      string
	agentID        string
	conversationID string
	// turnID names the turn on its async rows (its event id, when it has one).
	turnID string
	// resumes is the event the conversation's paused step was reported under when this
	// invocation began (store.Handover.PausedEvent); see settleResumed.
	resumes string
	// groupSeed is the turn's secret seed of group ids: the same for a retried invocation.
	groupSeed string
	delivery  asynctools.Delivery
	cfg       agent.Config
	// overrides are the turn's toolApproval overrides, recorded whenever it stops to wait, so
	// the invocation that goes on with it applies them too.
	overrides map[string]approval.Status
	lease     *store.Lease
	// emit tells the transport what the turn says, in order; heartbeat keeps a quiet stream
	// alive. Both may be no-ops.
	emit      func(Event)
	heartbeat func()
	// ended: the lease was already given back (a turn that waits for outside work).
	ended bool
	// output writes the turn's stream log; nil until the run starts or where none is kept.
	// newStream: its key was just made, so the log has nothing under it to read.
	output    *streamLog
	newStream bool
	// history is the conversation as stored, kept up to date by every save, so a pass after
	// async results needs no reload.
	history []model.Message
	// children are the subagent calls this invocation made (childCalls).
	childMu  sync.Mutex
	children map[string]bool
	// pass coordinates the async calls of the pass running now, for a blocking subagent call
	// that hands its child over to the durable path (runChild); nil between passes.
	pass *asynctools.Pass
	// callerWaits: this is a blocking subagent call's child turn, run inside the call, which
	// returns its end itself: there is no async call of the caller's to settle.
	callerWaits bool
	// watch looks at the edge's own signals at each stop poll (Run.Watch); nil: none.
	watch func(context.Context) bool
	// treeTok is the turn's tree sealed for the MCP servers it calls (Tree), made once.
	treeOnce sync.Once
	treeTok  string
}

// run carries out the plan of a request.
func (d *invocation) run(ctx context.Context, plan *turnPlan) Outcome {
	if plan.waiting != nil {
		// Some held calls still wait: report the decisions taken and what is left.
		for _, dec := range plan.taken {
			d.emit(Event{Kind: ApprovalDecided, Decision: dec})
		}
		return Outcome{Status: StatusWaiting, PendingApprovals: pendingView(plan.waiting), Reason: model.FinishToolCalls}
	}
	history, err := d.lease.History(ctx)
	if err != nil {
		return d.fail(ctx, err, "internal error: the conversation could not be loaded", model.Usage{})
	}
	d.history = slices.Clone(history)
	if plan.message != nil && plan.decisions == nil {
		if stored, ok := findMessage(history, plan.message.ID); ok {
			// The same message again is a retried invocation picking up its turn; another
			// message under a stored id would be silently dropped, so it is refused.
			if !sameText(stored, *plan.message) {
				return d.fail(ctx, fmt.Errorf("message id %s reused for another message", stored.ID),
					fmt.Sprintf("message id %s is already used in this conversation by another message: give the new message its own id", stored.ID), model.Usage{})
			}
			plan.resume = true
		}
	}
	if plan.decisions != nil {
		return d.resumeStep(ctx, plan, history)
	}
	var first func(agent.Config) iter.Seq2[agent.Event, error]
	switch {
	case plan.resume:
		// A retried invocation whose message is already in the conversation picks it up.
		first = func(cfg agent.Config) iter.Seq2[agent.Event, error] { return agent.Continue(ctx, cfg, history) }
	default:
		if err := d.lease.Append(ctx, *plan.message); err != nil {
			return d.fail(ctx, err, "internal error: the message could not be saved", model.Usage{})
		}
		d.history = append(d.history, *plan.message)
		msgs := slices.Clone(d.history)
		first = func(cfg agent.Config) iter.Seq2[agent.Event, error] { return agent.Run(ctx, cfg, msgs) }
	}
	return d.passes(ctx, 0, first)
}

// passes runs model passes from pass number n, starting with events over d.history, for as long
// as each pass leaves same-invocation results to bring back to the model.
func (d *invocation) passes(ctx context.Context, n int, events func(agent.Config) iter.Seq2[agent.Event, error]) Outcome {
	d.cfg.Save = func(ctx context.Context, msgs []model.Message) error {
		if err := d.lease.Append(ctx, msgs...); err != nil {
			return err
		}
		d.history = append(d.history, model.WithoutNested(msgs)...)
		return nil
	}
	d.cfg.KeepResult = d.KeepResult
	if d.cfg.Context != nil {
		budget := *d.cfg.Context
		budget.Save = d.compacted
		d.cfg.Context = &budget
	}
	if n == 0 {
		for _, w := range d.cfg.Warnings {
			d.emit(Event{Kind: Warning, Warning: w})
		}
	}
	var total model.Usage
	for ; ; n++ {
		cfg := d.cfg
		p := d.newPass(ctx, n)
		if p != nil {
			cfg.Async, d.pass = p.Run, p
		}
		if cfg.Pause != nil {
			cfg.Pause = d.pause(p)
		}
		res, fin := d.relay(ctx, events(cfg), total)
		total = res.Usage
		if p == nil {
			return res
		}
		if !p.HasWork() {
			p.Close()
			return res
		}
		if fin == nil {
			p.Abort()
			return res
		}
		// The work finishes and its results are kept even if the client has gone.
		landed := p.Wait(context.WithoutCancel(ctx), d.e.opts.Heartbeat, d.landed, d.heartbeat)
		// What the calls' own loops (async prompt tools) produced is kept with their results
		// when this pass brings them back; when it stops to wait instead, only the results are.
		nested, used := p.Nested()
		total = total.Add(used)
		res.Usage = total
		if len(fin.Pending) > 0 {
			// The pass also paused for approval: the pause recorded its group, and the resume
			// brings the results back from their rows.
			return res
		}
		if len(p.External()) > 0 {
			return d.waitForGroup(context.WithoutCancel(ctx), p, total)
		}
		msg := asynctools.ResultsMessage(resultsMessageID(p.GroupID()), landed)
		if err := d.lease.Append(context.WithoutCancel(ctx), append(nested, msg)...); err != nil {
			return d.fail(ctx, err, "internal error: the async tool results could not be saved", total)
		}
		d.history = append(d.history, msg)
		if ctx.Err() != nil {
			return stopped(ctx, total)
		}
		history := slices.Clone(d.history)
		events = func(cfg agent.Config) iter.Seq2[agent.Event, error] { return agent.Continue(ctx, cfg, history) }
	}
}

// compacted stores a compaction's summary, and makes the invocation's history the view it
// starts: the summary, then the messages from the one it keeps from.
func (d *invocation) compacted(ctx context.Context, summary model.Message) error {
	if err := d.lease.Compact(ctx, summary); err != nil {
		return err
	}
	from := slices.IndexFunc(d.history, func(m model.Message) bool { return m.ID == summary.Compaction.KeptFrom })
	if from < 0 {
		return fmt.Errorf("message %s, where the summary keeps from, is not in the conversation", summary.Compaction.KeptFrom)
	}
	d.history = append([]model.Message{summary}, d.history[from:]...)
	return nil
}

// hasMessage reports whether history holds a message with this id.
func hasMessage(history []model.Message, id string) bool {
	_, ok := findMessage(history, id)
	return ok
}

func findMessage(history []model.Message, id string) (model.Message, bool) {
	for _, m := range history {
		if m.ID == id && id != "" {
			return m, true
		}
	}
	return model.Message{}, false
}

// sameText says whether two messages have the same role and text.
func sameText(a, b model.Message) bool {
	text := func(m model.Message) string {
		var s strings.Builder
		for _, p := range m.Parts {
			if p.Type == model.PartText {
				s.WriteString(p.Text)
			}
		}
		return s.String()
	}
	return a.Role == b.Role && text(a) == text(b)
}

// resultsMessageID is the id of the message that brings a group's results to the model, so a
// retried continuation can tell whether it was already written.
func resultsMessageID(groupID string) string { return "msg_" + groupID }

// newPass returns the coordinator of pass n's async calls; nil where async tools are not wired.
func (d *invocation) newPass(ctx context.Context, n int) *asynctools.Pass {
	return d.passIn(ctx, asynctools.NewGroupID(d.groupSeed, n))
}

// passIn returns a coordinator of async calls in the dispatch group groupID; nil where async
// tools are not wired.
func (d *invocation) passIn(ctx context.Context, groupID string) *asynctools.Pass {
	if d.e.opts.Async == nil {
		return nil
	}
	now := d.e.opts.Now()
	until := now.Add(d.e.opts.Lease)
	if dl, ok := ctx.Deadline(); ok && dl.Before(until) {
		until = dl
	}
	return asynctools.NewPass(asynctools.PassConfig{
		Store: d.e.opts.Async, GroupID: groupID,
		AccountID: d.accountID, AgentID: d.agentID, ConversationID: d.conversationID, TurnID: d.turnID,
		Delivery: d.delivery, WaitUntil: until.Add(-d.e.opts.WaitMargin),
		ExternalTimeout: d.e.opts.AsyncToolTimeout, Now: d.e.opts.Now,
	})
}

// waitForGroup ends this invocation's part of the turn: the conversation records the group it
// waits for, the lease is given back, and the group is sealed with the exact set of calls. The
// seal runs the group check itself, so results that all arrived already re-invocation at once.
func (d *invocation) waitForGroup(ctx context.Context, p *asynctools.Pass, usage model.Usage) Outcome {
	g := p.Group()
	if err := d.lease.WaitForAsync(ctx, g.ID, g.Expected, d.recordedOverrides()); err != nil {
		return d.fail(ctx, err, "internal error: the turn could not wait for its async tools", usage)
	}
	return d.sealGroup(ctx, g, p.Calls(), usage)
}

// sealGroup ends the part of a turn that waits for the group g, once the conversation records
// the wait: the lease is given back, then the group is sealed.
func (d *invocation) sealGroup(ctx context.Context, g asynctools.Group, calls []asynctools.Call, usage model.Usage) Outcome {
	d.ended = true
	if err := d.lease.End(ctx, usage); err != nil {
		d.log.ErrorContext(ctx, "ending turn", "err", err)
	}
	if _, err := d.e.opts.Redriver.Seal(ctx, g); err != nil {
		// The sweeper seals a group whose parent stopped before sealing it.
		d.log.ErrorContext(ctx, "sealing dispatch group", "groupId", g.ID, "err", err)
	}
	d.log.InfoContext(ctx, "turn waits for async tools", "groupId", g.ID, "calls", len(calls))
	return Outcome{Status: StatusWaitingAsync, Usage: usage, AsyncGroup: g.ID, PendingAsync: calls, Reason: model.FinishToolCalls}
}

// end gives the conversation back after the invocation's part of the turn: counted as a turn,
// or only released when the request just recorded decisions while others still wait. The
// stream log's last batch goes at the same time, not before: one round trip, and a reader that
// finds the lease free reads the log once more a moment later (streamlog.LastReadDelay).
func (d *invocation) end(ctx context.Context, plan *turnPlan, res Outcome) {
	if flush := d.closeLog(ctx, res); flush != nil {
		var wg sync.WaitGroup
		wg.Go(flush)
		defer wg.Wait()
	}
	if d.ended {
		return
	}
	var err error
	if plan.waiting != nil {
		err = d.lease.Release(ctx)
	} else {
		err = d.lease.End(ctx, res.Usage)
	}
	if err != nil {
		d.log.ErrorContext(ctx, "ending turn", "err", err)
	}
}

// conclude ends this invocation's part of a turn, in the one order every transport follows:
//  0. the turn's stream log records the outcome and is written out, so a reader never waits
//     on a part that is over;
//  1. the lease ends (or is given back while approvals are pending), so the conversation is
//     free before anyone can learn the turn is over; 0 and 1 are sent together (end);
//  2. the turn's event, when it has one, reports the outcome and the messages written from
//     from on;
//  3. an event the turn's paused step was answered under takes the same outcome; a subagent's
//     turn adds its usage to its caller's and, once it has ended, settles the async call of the
//     caller that started it;
//  4. tell, when set, tells the client: SSE's finish chunk, the runtime's stop_reason.
//
// It returns the report's error, which the worker retries on. Each step runs even when the one
// before failed: a client that has gone must still leave the conversation free.
func (d *invocation) conclude(ctx context.Context, plan *turnPlan, res Outcome, from int64, tell func()) error {
	d.end(ctx, plan, res)
	var err error
	if d.turnID != "" {
		err = d.e.Report(ctx, d.accountID, d.turnID, res, from, d.lease.NextSeq())
	}
	d.settleResumed(ctx, plan, res, from, d.lease.NextSeq())
	d.stopTree(ctx, res)
	d.addUsageToParent(ctx, res)
	d.settleParent(ctx, res)
	if tell != nil {
		tell()
	}
	return err
}

// fail reports a failed turn to the client.
func (d *invocation) fail(ctx context.Context, err error, public string, usage model.Usage) Outcome {
	d.log.ErrorContext(ctx, "turn failed", "err", err)
	d.emit(Event{Kind: Failed, Error: public})
	return Outcome{Status: StatusFailed, Usage: usage, Error: public, Reason: model.FinishError}
}

// stopped is how a turn whose context ended went: cancelled when its client went away or
// aborted it (each transport words errText for its own case), failed when the invocation ran
// out of time.
func stopped(ctx context.Context, usage model.Usage) Outcome {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errStopRequested):
		return Outcome{Status: StatusCancelled, Usage: usage, Error: stoppedTurnText, Stopped: true}
	case errors.Is(cause, errHandOver):
		// It goes on elsewhere (runChild): the step it was in runs again there.
		return Outcome{Status: StatusProcessing, Usage: usage, HandedOver: true}
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return Outcome{Status: StatusFailed, Usage: usage, Error: "the turn ran out of time; the conversation keeps every step finished before it"}
	}
	return Outcome{Status: StatusCancelled, Usage: usage, Error: "the turn was cancelled; the conversation keeps every step finished before it"}
}

// partialAnswer gathers the text of the step in progress: a turn stopped mid-step keeps it as
// the conversation's last assistant message (the step's unfinished tool calls are dropped, as
// they have no results).
type partialAnswer struct {
	order []string
	text  map[string]*strings.Builder
}

func (p *partialAnswer) observe(ev agent.Event) {
	switch ev.Type {
	case agent.StepStart, agent.StepFinish:
		*p = partialAnswer{}
	case agent.TextDelta:
		if p.text == nil {
			p.text = map[string]*strings.Builder{}
		}
		b, ok := p.text[ev.ID]
		if !ok {
			b = &strings.Builder{}
			p.text[ev.ID], p.order = b, append(p.order, ev.ID)
		}
		b.WriteString(ev.Text)
	}
}

// message is the step's text so far as an assistant message; ok is false when it has none.
func (p *partialAnswer) message() (msg model.Message, ok bool) {
	for _, id := range p.order {
		if t := p.text[id].String(); t != "" {
			msg.Parts = append(msg.Parts, model.Part{Type: model.PartText, Text: t})
		}
	}
	if len(msg.Parts) == 0 {
		return msg, false
	}
	msg.ID, msg.Role = store.NewID("msg_"), model.RoleAssistant
	return msg, true
}

// keep saves the answer a stopped turn had so far.
func (d *invocation) keep(ctx context.Context, msg model.Message) {
	if err := d.lease.Append(context.WithoutCancel(ctx), msg); err != nil {
		d.log.ErrorContext(ctx, "saving the answer of a stopped turn", "err", err)
		return
	}
	d.history = append(d.history, msg)
}

// relay streams one pass's events through emit and returns how the pass ended, with its
// Finish event (nil when it ended otherwise). prior is the turn's usage before the pass.
func (d *invocation) relay(ctx context.Context, events iter.Seq2[agent.Event, error], prior model.Usage) (Outcome, *agent.Event) {
	usage := prior
	started := time.Now()
	tools := toolLog{log: d.log, started: map[string]toolStart{}}
	var partial partialAnswer
	for ev, err := range events {
		if err != nil {
			if ctx.Err() != nil {
				d.log.InfoContext(ctx, "turn stopped: its context ended", "err", err)
				res := stopped(ctx, usage)
				if msg, ok := partial.message(); ok && res.Stopped {
					d.keep(ctx, msg)
				}
				return res, nil
			}
			if errors.Is(err, store.ErrLeaseLost) {
				return d.fail(ctx, err, "the conversation was taken over by another turn", usage), nil
			}
			var ce *agent.ContextError
			if errors.As(err, &ce) {
				return d.fail(ctx, err, ce.Error(), usage), nil
			}
			var oe *agent.OutputError
			if errors.As(err, &oe) {
				return d.fail(ctx, err, oe.Error()+"; the turn was stopped after one retry", usage), nil
			}
			var pe *model.ProviderError
			if errors.As(err, &pe) {
				return d.fail(ctx, err, pe.Public()+"; the turn was stopped and the conversation keeps every step finished before it", usage), nil
			}
			return d.fail(ctx, err, "the model failed to answer; the turn was stopped and the conversation keeps every step finished before it", usage), nil
		}
		tools.observe(ctx, ev)
		partial.observe(ev)
		switch ev.Type {
		case agent.StepFinish:
			usage = prior.Add(ev.Usage)
		case agent.Finish:
			usage = prior.Add(ev.Usage)
			d.log.InfoContext(ctx, "pass finished", "finishReason", ev.Finish, "inputTokens", usage.InputTokens,
				"outputTokens", usage.OutputTokens, "pendingApprovals", len(ev.Pending), "ms", time.Since(started).Milliseconds())
			res := Outcome{Status: StatusCompleted, Usage: usage, Reason: ev.Finish}
			if len(ev.Pending) > 0 {
				res.PendingApprovals = pendingFromLoop(ev.Pending)
				res.Status = StatusWaiting
			}
			return res, &ev
		}
		kind := Loop
		if ev.Type == agent.ToolOutput && asynctools.IsPlaceholder(ev.Output) {
			kind = AsyncStarted
		}
		d.emit(Event{Kind: kind, Loop: ev})
	}
	return Outcome{Status: StatusCompleted, Usage: usage}, nil
}
