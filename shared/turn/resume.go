package turn

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"maps"
	"slices"
	"time"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/approval"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/asynctools"
)

// pause holds a step of pass p for approval, recording what its resume needs: the turn's
// approval overrides, and the pass's async calls, whose results go back to the model once the
// held calls are decided. Their group is sealed only then, maybe much later and elsewhere, so
// the calls outside workers complete are first kept from being sealed as orphans until the
// approvals' deadline.
func (d *invocation) pause(p *asynctools.Pass) agent.PauseFunc {
	return d.e.pauseWithHandover(d.lease, d.agentID, func(ctx context.Context, deadline time.Time) (store.Handover, error) {
		c := store.Handover{ToolApproval: d.recordedOverrides(), PausedEvent: d.pauseEvent()}
		if p == nil || !p.HasWork() {
			return c, nil
		}
		for _, id := range p.External() {
			if err := d.e.opts.Async.HoldParent(ctx, id, deadline); err != nil {
				return c, err
			}
		}
		g := p.Group()
		c.PausedGroup, c.PausedAsync = g.ID, g.Expected
		return c, nil
	})
}

// pauseEvent is the event a pause of this invocation is reported under: its own, else, for a
// request without event id that resumed a step paused under one, that event, which stays the
// turn's event (settleResumed reports this pause on it).
func (d *invocation) pauseEvent() string {
	if d.turnID != "" {
		return d.turnID
	}
	return d.resumes
}

// settleResumed reports how a resumed step went on the event it paused under (X), when this
// invocation runs under another event id (Y) or none.
//
// Design, kept to one conditional write: the pause records X on the conversation with the
// pending approvals (store.Handover.PausedEvent). When the invocation that answered them ends
// (completed, failed, paused again, or waiting for async tools), X takes its status and detail
// with "resumedBy": Y and its messages' end, only while X is still waiting for approval, so a
// settled X (or one reopened by an answer under X itself) is never rewritten. Where the turn
// goes on later under Y (an async continuation, or a second pause answered under Z), X is not
// written again: GET /status/X follows resumedBy while X is not final (see followResumed), so
// X shows the turn's outcome once Y has one.
func (d *invocation) settleResumed(ctx context.Context, plan *turnPlan, res Outcome, from, to int64) {
	if plan.decisions == nil || d.resumes == "" || d.resumes == d.turnID {
		return
	}
	if (res.Status == StatusFailed || res.Status == StatusCancelled) && len(d.lease.Pending()) > 0 {
		return // the step never resumed: its approvals may still be answered, and X with them
	}
	detail := eventDetail(res)
	if d.turnID != "" {
		detail["resumedBy"] = d.turnID
	}
	b, err := json.Marshal(detail)
	if err == nil {
		_, err = d.e.opts.Store.SettleResumedEvent(ctx, d.accountID, d.resumes, d.conversationID, store.StatusUpdate{
			Status: string(res.Status), FromSeq: from, ToSeq: to, Detail: b, At: d.e.opts.Now(),
		})
	}
	if err != nil {
		d.log.ErrorContext(ctx, "settling the event the step paused under", "pausedEvent", d.resumes, "err", err)
	}
}

// resumeStep goes on with the step the conversation paused for approval. The decided calls run,
// and the results of the async calls the paused pass made go back to the model after theirs and
// before its next step: in the same write, when they have all landed; otherwise the pass ends
// there and the turn waits for them, as a pass that dispatched outside work does.
func (d *invocation) resumeStep(ctx context.Context, plan *turnPlan, history []model.Message) Outcome {
	if plan.message == nil {
		// The same turn goes on; a new message starts another, with its own overrides.
		d.cfg.Tools = d.withRecordedOverrides(ctx, d.cfg.Tools)
	}
	w, err := d.pausedWork(ctx, history)
	if err != nil {
		return d.fail(ctx, err, "internal error: the results of the paused step's async tools could not be loaded", model.Usage{})
	}
	var next []model.Message
	if plan.message != nil {
		next = append(next, *plan.message)
	}
	if w != nil && w.outside && plan.cancel {
		if err := d.cancelOutside(ctx, w); err != nil {
			return d.fail(ctx, err, "internal error: the paused step's async tools could not be cancelled", model.Usage{})
		}
	}
	if w != nil && w.outside {
		return d.decideThenWait(ctx, plan.decisions, history, next, w)
	}
	if w != nil {
		for _, r := range w.results {
			if r.Mode == asynctools.ExternalDispatch {
				// It landed after the pausing invocation had ended: no client has seen it yet.
				d.landed(r)
			}
		}
		next = append([]model.Message{asynctools.ResultsMessage(resultsMessageID(w.group), w.results)}, next...)
	}
	if plan.cancel {
		res := d.passes(ctx, 0, func(cfg agent.Config) iter.Seq2[agent.Event, error] {
			return agent.Decide(ctx, cfg, history, plan.decisions, next...)
		})
		if res.Status == StatusCompleted {
			res.Status, res.Reason, res.Error = StatusCancelled, "", AbortedTurnText
		}
		return res
	}
	return d.passes(ctx, 0, func(cfg agent.Config) iter.Seq2[agent.Event, error] {
		return agent.Resume(ctx, cfg, history, plan.decisions, next...)
	})
}

// AbortedTurnText is the outcome of an aborted turn.
const AbortedTurnText = "the turn was aborted; the conversation keeps every step finished before it"

// cancelOutside settles the paused step's async calls still running outside as cancelled,
// through the conditional write an answer takes, so a late answer is refused; a call answered
// meanwhile keeps its answer.
func (d *invocation) cancelOutside(ctx context.Context, w *pausedWork) error {
	for i, r := range w.results {
		if r.Status != asynctools.Running {
			continue
		}
		got, _, err := d.e.opts.Async.Settle(ctx, r.ID, asynctools.Outcome{Status: asynctools.Cancelled, Error: cancelledCallText}, d.e.opts.Now())
		var conflict *asynctools.ConflictError
		if errors.As(err, &conflict) {
			got, err = conflict.Recorded, nil
		}
		if err != nil {
			return err
		}
		w.results[i] = got
	}
	w.outside = false
	return nil
}

// cancelledCallText is what the model is told of an async call whose turn was aborted.
const cancelledCallText = "cancelled: the turn was aborted before the tool answered"

// pausedWork is what the async calls of a paused pass left: their group and, in call order,
// their results, some of them still running outside when outside is set.
type pausedWork struct {
	group   string
	results []asynctools.Result
	outside bool
}

// pausedWork loads the results of the async calls the paused pass made; nil when it made none,
// or when they were brought back already.
func (d *invocation) pausedWork(ctx context.Context, history []model.Message) (*pausedWork, error) {
	c := d.lease.Handover()
	if c.PausedGroup == "" || d.e.opts.Async == nil || hasMessage(history, resultsMessageID(c.PausedGroup)) {
		return nil, nil
	}
	st, err := d.e.opts.Async.Load(ctx, c.PausedGroup)
	if err != nil {
		return nil, err
	}
	w := &pausedWork{group: c.PausedGroup}
	for _, id := range c.PausedAsync {
		r, ok := st.Row(id)
		switch {
		case !ok:
			r = asynctools.Result{ID: id, Status: asynctools.Failed, Error: "the call's record is gone"}
		case r.Status == asynctools.Running && r.Mode == asynctools.SameInvocation:
			if r, err = d.settleAbandoned(ctx, r); err != nil {
				return nil, err
			}
		case r.Status == asynctools.Running:
			w.outside = true
		}
		w.results = append(w.results, r)
	}
	return w, nil
}

// settleAbandoned fails same-invocation work still running when its step resumes: the pass that
// started it waited for it before giving the conversation back, so the invocation running it
// stopped before it landed.
func (d *invocation) settleAbandoned(ctx context.Context, r asynctools.Result) (asynctools.Result, error) {
	got, _, err := d.e.opts.Async.Settle(ctx, r.ID, asynctools.Outcome{Status: asynctools.Failed, Error: "the invocation running the tool stopped before it finished"}, d.e.opts.Now())
	var conflict *asynctools.ConflictError
	if errors.As(err, &conflict) {
		return conflict.Recorded, nil
	}
	return got, err
}

// decideThenWait resumes a paused step whose async calls still run outside: the decided calls
// run, their results (and next) are saved with the wait for the paused pass's group, which the
// async calls of approved tools join, and the group is sealed. Its continuation brings every
// result back to the model at once.
func (d *invocation) decideThenWait(ctx context.Context, decisions map[string]agent.Decision, history, next []model.Message, w *pausedWork) Outcome {
	p := d.passIn(ctx, w.group)
	expected := func() []string {
		ids := make([]string, 0, len(w.results))
		for _, r := range w.results {
			ids = append(ids, r.ID)
		}
		for _, id := range p.Group().Expected {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		return ids
	}
	cfg := d.cfg
	cfg.Async, cfg.KeepResult, d.pass = p.Run, d.KeepResult, p
	cfg.Save = func(ctx context.Context, msgs []model.Message) error {
		if err := d.lease.WaitForAsync(ctx, w.group, expected(), d.recordedOverrides(), msgs...); err != nil {
			return err
		}
		d.history = append(d.history, msgs...)
		return nil
	}
	res, fin := d.relay(ctx, agent.Decide(ctx, cfg, history, decisions, next...), model.Usage{})
	if fin == nil {
		p.Abort()
		return res
	}
	p.Wait(context.WithoutCancel(ctx), d.e.opts.Heartbeat, d.landed, d.heartbeat)
	g := p.Group()
	g.Expected = expected()
	calls := make([]asynctools.Call, 0, len(g.Expected))
	for _, r := range w.results {
		calls = append(calls, asynctools.Call{ResultID: r.ID, ToolCallID: r.ToolCallID, ToolName: r.ToolName})
	}
	calls = append(calls, p.Calls()...)
	return d.sealGroup(context.WithoutCancel(ctx), g, calls, res.Usage)
}

// withRecordedOverrides applies the approval overrides a waiting turn recorded to tools, for the
// invocation that goes on with it, under those of its own request (d.overrides), which win: the
// overrides of the request that started a turn hold for the whole turn. One the agent's policy
// no longer allows is left out, which leaves the tool's own, stricter, policy.
func (d *invocation) withRecordedOverrides(ctx context.Context, tools *tool.Set) *tool.Set {
	carried := d.lease.Handover().ToolApproval
	if len(carried) == 0 {
		return tools
	}
	merged := maps.Clone(d.overrides)
	if merged == nil {
		merged = map[string]approval.Status{}
	}
	for _, name := range slices.Sorted(maps.Keys(carried)) {
		if _, own := merged[name]; own {
			continue
		}
		status := approval.Status(carried[name])
		next, err := withOverrides(tools, map[string]approval.Status{name: status})
		if err != nil {
			d.log.WarnContext(ctx, "a carried toolApproval override no longer applies; the tool's own policy holds", "tool", name, "err", err)
			continue
		}
		tools, merged[name] = next, status
	}
	d.overrides = merged
	return tools
}

// recordedOverrides is the turn's overrides as a waiting conversation records them.
func (d *invocation) recordedOverrides() map[string]string {
	if len(d.overrides) == 0 {
		return nil
	}
	out := make(map[string]string, len(d.overrides))
	for name, s := range d.overrides {
		out[name] = string(s)
	}
	return out
}
