package turn

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/state/threadvars"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/tool/subagenttools"
	"github.com/agentharness/harness/shared/turn/subagent"
	"github.com/agentharness/harness/shared/wire/workqueue"
)

// A subagent call runs another agent of the account as a turn of its own, in a conversation
// linked to the caller's (store.Parent). A blocking call runs that turn inside the caller's
// tool call and returns its answer. A non-blocking call is an external-dispatch async call
// whose outside worker is async-worker: the child turn runs there as an /async turn, and its
// end settles the caller's row (settleParent), which re-drives the caller like any completion.

// CallSubagent runs or dispatches the child turn of a call of a subagent tool (subagenttools).
func (d *invocation) CallSubagent(ctx context.Context, c subagenttools.Call) (any, error) {
	return d.e.call(ctx, d, c)
}

// Instances are the resumable instances the invocation's conversation made, by name.
func (d *invocation) Instances(ctx context.Context) (map[string]store.Instance, error) {
	return d.e.opts.Store.Instances(ctx, d.accountID, d.conversationID)
}

// call checks the call c, made in the invocation d, against the limits, creates the child's
// conversation and runs or dispatches its turn: a plain call (no instance), or a message to a
// resumable instance, which a creating call makes (it must not exist yet). Its errors are tool
// errors the caller's model sees.
func (e *Engine) call(ctx context.Context, d *invocation, c subagenttools.Call) (any, error) {
	s, t, message, instance, create := c.Config, c.Agent, c.Message, c.Instance, c.Create
	depth := d.lease.Parent().Depth + 1
	if depth > s.Depth() {
		return nil, fmt.Errorf("cannot call %s: this conversation is already %d subagent call(s) deep, and subagent.maxDepth is %d", t.Name, depth-1, s.Depth())
	}
	callID, resultID := tool.CallIDFrom(ctx), ""
	ticket, dispatched := asynctools.TicketFrom(ctx)
	if dispatched {
		callID, resultID = ticket.ToolCallID, ticket.ResultID
	}
	if callID == "" {
		// The child's conversation is named after the call: without its id, calls would share one.
		return nil, errors.New("a subagent call needs the model's call id")
	}
	if n := d.childCalls(callID, s); n > s.Children() {
		return nil, fmt.Errorf("cannot call %s: this turn has called %d subagents, and subagent.maxChildrenPerTurn is %d", t.Name, n-1, s.Children())
	}
	// The child's thread starts with the caller's variables, less those it declares scoped,
	// and with those its immediate entry gives each instance.
	stored, err := e.opts.Agents.Load(ctx, d.accountID, t.AgentID)
	var vars store.Vars
	label, task := cmp.Or(c.Named, t.Name), message
	if err == nil {
		vars = threadvars.ForChild(d.lease.Vars(), stored.Variables)
		vars, label, task, err = e.instanceEnv(ctx, d, t, vars, label, message)
	}
	callKey := subagent.ConversationID(d.accountID, d.conversationID, d.delivery.TurnKey, callID)
	child := callKey
	if instance != "" {
		child = subagent.NamedConversationID(d.accountID, d.conversationID, instance)
	}
	// The child's conversation is its caller's end user's.
	cfg, err := e.buildAgent(ctx, d.accountID, t.AgentID, builtFor{child, d.lease.EndUser()}, stored, err, e.storedThread(ctx, d.accountID, vars))
	var missing *MissingVariablesError
	var needs interface{ Needed() agentconfig.Variable }
	if create && !errors.As(err, &missing) && errors.As(err, &needs) {
		// A tool's own variable is asked for as the agent's would be.
		missing = &MissingVariablesError{AgentID: t.AgentID, Missing: []agentconfig.Variable{needs.Needed()}}
		err = missing
	}
	var refused *Refusal
	switch {
	case errors.As(err, &missing) && create:
		return nil, e.deferInstance(ctx, d, t, instance, message, depth, missing)
	case errors.As(err, &missing):
		return nil, fmt.Errorf("cannot call %s: %s, which this conversation does not give it (a subagent gets its caller's variables, less those it declares scoped)", t.Name, missing)
	case errors.As(err, &refused):
		return nil, fmt.Errorf("cannot call %s: %s", t.Name, refused.Message)
	case err != nil:
		return nil, err
	}
	link := store.Parent{ConversationID: d.conversationID, TurnKey: d.delivery.TurnKey, Tool: t.Name, EventID: d.turnID, Depth: depth, EndUser: d.lease.EndUser()}
	if instance != "" {
		label = instance
		link.Tool, link.Explicit = instance, t.Resumable.Explicit()
	}
	// The child's turn counts in its caller's tree, once per call however often it is retried.
	tree := d.position().Below()
	if err := e.joinTree(ctx, tree, store.TreeMember{AccountID: d.accountID, ConversationID: child, Key: callKey}); errors.As(err, &refused) {
		return nil, fmt.Errorf("cannot call %s: %s", t.Name, refused.Message)
	} else if err != nil {
		return nil, err
	}
	if create {
		in := store.Instance{Name: instance, Agent: t.Name, AgentID: t.AgentID, ThreadID: child}
		switch err := e.opts.Store.AddInstance(ctx, d.accountID, d.conversationID, in, t.Resumable.Instances()); {
		case errors.Is(err, store.ErrInstanceExists):
			return nil, fmt.Errorf("an instance named %q exists: send it a message with subagent_message", instance)
		case errors.Is(err, store.ErrInstanceLimit):
			return nil, fmt.Errorf("cannot create %q: this conversation has %d instances of %s, its resumable.maxInstances", instance, t.Resumable.Instances(), t.Name)
		case err != nil:
			return nil, err
		}
	}
	if err := e.opts.Store.CreateChild(ctx, d.accountID, child, t.AgentID, link, vars); err != nil {
		return nil, err
	}
	files, err := subagent.GiveFiles(ctx, e.opts.Attachments, d.accountID, d.conversationID, child, c.Files, func(id string) (string, string) {
		return d.fileInfo(id, "application/octet-stream")
	})
	if err != nil {
		return nil, err
	}
	// A message id of the call's own: an instance takes many.
	msg := model.Message{ID: "msg_" + strings.TrimPrefix(callKey, "conv_"), Role: model.RoleUser, Parts: append([]model.Part{{Type: model.PartText, Text: task}}, files...)}
	progress := subagenttools.Progress{ToolCallID: callID, Agent: label, ThreadID: child}
	switch {
	case dispatched:
		progress.EventID = subagent.EventID(resultID)
	case d.pass != nil:
		// A blocking call's child turn has the event its call would have were it handed over
		// (runChild), so its end, whenever it comes, settles that call.
		progress.EventID = subagent.EventID(asynctools.ResultID(d.pass.GroupID(), callID))
		err := e.opts.Store.ClaimEvent(ctx, d.accountID, progress.EventID, child, d.lease.EndUser(), e.opts.Now(), e.opts.EventTTL)
		var dup *store.DuplicateEventError
		if err != nil && !errors.As(err, &dup) {
			return nil, err
		}
	}
	if d.turnID != "" {
		c := store.Child{ToolCallID: callID, Agent: label, ThreadID: child, EventID: progress.EventID}
		if err := e.opts.Store.AddChild(ctx, d.accountID, d.turnID, c); err != nil {
			return nil, err
		}
	}
	if dispatched {
		answer, err := e.dispatchChild(ctx, d.accountID, t, child, resultID, msg, tree)
		if err == nil {
			progress.State, progress.Text = subagenttools.Started, task
			d.emit(Event{Kind: Subagent, Subagent: &progress})
		}
		return answer, err
	}
	return e.runChild(ctx, d, t, c.Tool, cfg, msg, progress, tree)
}

// runChild runs a blocking call's child turn inside the call, telling the caller's client as
// it starts, as each of its messages ends and as it finishes, and returns its answer. A child
// that stops to wait (for approval of a call, or for its own async calls) is handed over: the
// call becomes a dispatched async call of the caller's pass (handOver), which the child's end
// settles like a non-blocking call's, and the caller's client is shown the child's held calls,
// whose decisions it sends to the caller (follow.ToChild).
func (e *Engine) runChild(ctx context.Context, d *invocation, t agentconfig.SubagentTool, toolName string, cfg agent.Config, msg model.Message, progress subagenttools.Progress, tree TreePosition) (any, error) {
	run, err := e.Begin(ctx, Start{
		AccountID: d.accountID, Request: Request{ConversationID: progress.ThreadID, AgentID: t.AgentID, EventID: progress.EventID},
		Input: Input{Message: &msg}, Config: cfg, Tree: tree,
	})
	var refused *Refusal
	if errors.As(err, &refused) {
		return nil, fmt.Errorf("cannot call %s: %s", t.Name, refused.Message)
	}
	if err != nil {
		return nil, err
	}
	tell := func(state, text, status string) {
		p := progress
		p.State, p.Text, p.Status = state, text, status
		d.emit(Event{Kind: Subagent, Subagent: &p})
	}
	tell(subagenttools.Started, msg.Text(), "")
	run.d.callerWaits = true
	texts := map[string]string{}
	view := NewCallerView(progress.ThreadID)
	var held []Event
	childCtx := ctx
	if d.pass != nil {
		// A child that would outlive the caller's wait stops there and is handed over.
		var cancel context.CancelFunc
		childCtx, cancel = context.WithDeadlineCause(ctx, d.pass.WaitUntil(), errHandOver)
		defer cancel()
	}
	for ev := range run.Events(childCtx) {
		held = append(held, view.See(ev)...)
		if ev.Kind != Loop {
			continue
		}
		switch le := ev.Loop; le.Type {
		case agent.TextDelta:
			texts[le.ID] += le.Text
		case agent.TextEnd:
			tell(subagenttools.Message, texts[le.ID], "")
		}
	}
	o := run.Outcome()
	waits := o.Continues()
	var placeholder json.RawMessage
	if waits {
		// Taken over before the child's lease is given back, so no decision can end the
		// child before its call is there to settle.
		placeholder, err = d.handOver(ctx, progress.ToolCallID, toolName)
	}
	if err := run.Finish(ctx, o, nil); err != nil {
		d.log.ErrorContext(ctx, "ending a subagent's turn", "subagent", t.Name, "threadId", progress.ThreadID, "err", err)
	}
	if err == nil && o.HandedOver {
		if cerr := e.continueChild(ctx, d.accountID, t, progress, msg, tree); cerr != nil {
			// Nobody will go on with the child: its call fails now, as a failed dispatch does.
			d.log.ErrorContext(ctx, "queueing a handed-over subagent", "subagent", t.Name, "err", cerr)
			id := asynctools.ResultID(d.pass.GroupID(), progress.ToolCallID)
			if _, _, serr := e.opts.Async.Settle(context.WithoutCancel(ctx), id, asynctools.Outcome{Status: asynctools.Failed, Error: "handing the subagent over failed: " + cerr.Error()}, e.opts.Now()); serr != nil {
				d.log.ErrorContext(ctx, "failing a handed-over subagent's call; the sweeper times it out", "resultId", id, "err", serr)
			}
		}
	}
	if waits {
		if err != nil {
			return nil, fmt.Errorf("%s stopped to wait (%s) and could not be handed over: %w", t.Name, o.Status, err)
		}
		for _, ev := range held {
			d.emit(ev)
		}
		tell(subagenttools.Waiting, "", string(o.Status))
		return nil, &tool.Deferred{Output: placeholder}
	}
	answer := subagent.Answer{Agent: t.Name, ThreadID: progress.ThreadID, Status: string(o.Status), Text: subagent.LastText(run.d.history)}
	answer.Attachments = e.returnFiles(ctx, d.accountID, progress.ThreadID, d.conversationID, answer.Text)
	tell(subagenttools.Finished, answer.Text, answer.Status)
	switch o.Status {
	case StatusFailed:
		return nil, fmt.Errorf("%s failed: %s", t.Name, cmp.Or(o.Error, "its turn failed"))
	case StatusCancelled:
		return nil, fmt.Errorf("%s was cancelled before it answered", t.Name)
	}
	return answer, nil
}

// instanceEnv applies t's immediate per-instance variables (001 section 5) to a call. Each names
// a variable of the caller's thread, and only of it: the process environment holds the
// deployment's own secrets, which no name an account writes may reach. The child's thread gets
// the caller's values of scopedEnv, sealed as they are, for its tools (no model sees them); the
// child is named by the value of nameEnv and its message follows the value of descriptionEnv,
// the only values a model may see.
func (e *Engine) instanceEnv(ctx context.Context, d *invocation, t agentconfig.SubagentTool, vars store.Vars, label, message string) (store.Vars, string, string, error) {
	im := t.Immediate
	if im == nil {
		return vars, label, message, nil
	}
	caller := d.lease.Vars()
	if len(im.ScopedEnv) > 0 {
		vars = maps.Clone(vars)
		if vars == nil {
			vars = store.Vars{}
		}
	}
	for _, name := range im.ScopedEnv {
		if sealed, ok := caller[name]; ok {
			vars[name] = sealed
		}
	}
	shown := e.storedThread(ctx, d.accountID, caller)
	if im.NameEnv != "" {
		label = cmp.Or(shown.Get(im.NameEnv), label)
	}
	if im.DescriptionEnv != "" {
		if desc := shown.Get(im.DescriptionEnv); desc != "" {
			message = desc + "\n\n" + message
		}
	}
	return vars, label, message, shown.Err()
}

// errHandOver is the cause of a blocking child's context ended at its caller's margin.
var errHandOver = errors.New("the caller stops waiting: the subagent goes on on async-worker")

// continueChild queues the turn of a blocking child handed over at its caller's margin for
// async-worker, which takes it up where it stopped (its message is stored: the turn goes on from
// its last finished step) under the same event, whose end settles the call.
func (e *Engine) continueChild(ctx context.Context, accountID string, t agentconfig.SubagentTool, progress subagenttools.Progress, msg model.Message, tree TreePosition) error {
	if e.opts.Enqueue == nil {
		return errors.New("this function has no queue to async-worker")
	}
	body, err := encode(Work{
		Type: workqueue.Turn, AccountID: accountID, EventID: progress.EventID, GroupSeed: store.NewID(""),
		Request: &Request{ConversationID: progress.ThreadID, AgentID: t.AgentID, EventID: progress.EventID}, Message: &msg, Tree: &tree,
	})
	if err != nil {
		return err
	}
	return e.opts.Enqueue(context.WithoutCancel(ctx), body)
}

// returnFiles returns to the caller the files of the child's thread its answer names
// (subagent.ReturnFiles); a failed copy is logged, and the answer goes without that file.
func (e *Engine) returnFiles(ctx context.Context, accountID, child, caller, answer string) []string {
	ids, err := subagent.ReturnFiles(ctx, e.opts.Attachments, accountID, child, caller, answer)
	if err != nil {
		e.opts.Logger.ErrorContext(ctx, "returning a subagent's files to its caller", "threadId", child, "err", err)
	}
	return ids
}

// handOver makes the blocking call callID, whose child stopped to wait, an async call of the
// pass: the caller waits for it like a dispatched call, for as long as the child may take to be
// decided or to finish its own async calls.
func (d *invocation) handOver(ctx context.Context, callID, toolName string) (json.RawMessage, error) {
	if d.pass == nil {
		return nil, errors.New("this function runs no async calls")
	}
	deadline := d.e.opts.Now().Add(max(d.e.opts.AsyncToolTimeout, d.e.opts.ApprovalTimeout))
	return d.pass.Adopt(context.WithoutCancel(ctx), callID, toolName, deadline)
}

// CallerView picks out of a subagent's turn events what its caller's client is shown: each call
// held for approval (its input, then the request), the decisions on those calls and their
// outputs, so that client shows them like the caller's own, and the user decides from it. The
// calls are shown under ids of the caller's (ShownCallID), as the child's own may be the same
// as the caller's.
type CallerView struct {
	thread string
	inputs map[string]Event
	held   map[string]bool
}

// NewCallerView is a view of the turn of the subagent conversation thread that resumes the held
// calls given (decided now).
func NewCallerView(thread string, held ...string) *CallerView {
	v := &CallerView{thread: thread, inputs: map[string]Event{}, held: map[string]bool{}}
	for _, id := range held {
		v.held[id] = true
	}
	return v
}

// ShownCallID is the id a call of the subagent conversation thread is shown under to its
// caller's client; follow.ToChild reads it back.
func ShownCallID(thread, callID string) string { return thread + ":" + callID }

// See returns what the caller's client is shown of ev, in order: nothing for most events.
func (v *CallerView) See(ev Event) []Event {
	ev.Child = v.thread
	switch {
	case ev.Kind == ApprovalDecided:
		ev.Decision.ToolCallID = ShownCallID(v.thread, ev.Decision.ToolCallID)
		return []Event{ev}
	case ev.Kind != Loop && ev.Kind != AsyncStarted:
		return nil
	}
	le := ev.Loop
	id := le.ToolCallID
	ev.Loop.ToolCallID = ShownCallID(v.thread, id)
	switch le.Type {
	case agent.ToolInputAvailable:
		v.inputs[id] = ev
	case agent.ToolApprovalRequest:
		v.held[id] = true
		if in, ok := v.inputs[id]; ok {
			return []Event{in, ev}
		}
		return []Event{ev}
	case agent.ToolOutput, agent.ToolOutputError, agent.ToolOutputDenied:
		if v.held[id] {
			return []Event{ev}
		}
	}
	return nil
}

// childCalls is how many subagent calls the turn has made, counting callID: those in the turn's
// stored messages since its user message, and those this invocation made.
func (d *invocation) childCalls(callID string, s *agentconfig.Subagent) int {
	names := map[string]bool{agentconfig.RunSubagent: true, agentconfig.SubagentCreate: true, agentconfig.SubagentMessage: true}
	for _, t := range s.Agents {
		names[t.Name] = true
	}
	seen := map[string]bool{callID: true}
	for i := len(d.history) - 1; i >= 0 && !d.history[i].StartsTurn(); i-- {
		for _, p := range d.history[i].Parts {
			if p.Type == model.PartToolCall && names[p.ToolName] {
				seen[p.ToolCallID] = true
			}
		}
	}
	d.childMu.Lock()
	defer d.childMu.Unlock()
	if d.children == nil {
		d.children = map[string]bool{}
	}
	d.children[callID] = true
	for id := range d.children {
		seen[id] = true
	}
	return len(seen)
}

// dispatchChild queues the child's turn for async-worker under the event of the call
// (subagent.EventID), so a call dispatched twice runs once.
func (e *Engine) dispatchChild(ctx context.Context, accountID string, t agentconfig.SubagentTool, child, resultID string, msg model.Message, tree TreePosition) (any, error) {
	if !e.Queues() {
		return nil, errors.New("subagents that do not block run on async-worker, and this function has no queue to it")
	}
	eventID := subagent.EventID(resultID)
	err := e.Queue(ctx, Queued{
		AccountID: accountID, Request: Request{ConversationID: child, AgentID: t.AgentID, EventID: eventID},
		Input: Input{Message: &msg}, Tree: &tree, CheckLater: true,
	})
	var dup *store.DuplicateEventError
	if err != nil && !errors.As(err, &dup) { // a duplicate: queued by an earlier attempt of the call
		return nil, fmt.Errorf("queueing %s: %w", t.Name, err)
	}
	return subagent.Answer{Agent: t.Name, ThreadID: child, Status: store.EventProcessing, EventID: eventID}, nil
}

// landed tells the client an async call settled and, for a non-blocking subagent call, that
// its child finished.
func (d *invocation) landed(r asynctools.Result) {
	d.emit(Event{Kind: AsyncLanded, Result: r})
	if !d.cfg.Tools.IsSubagent(r.ToolName) {
		return
	}
	p := subagenttools.Progress{ToolCallID: r.ToolCallID, Agent: r.ToolName, EventID: subagent.EventID(r.ID), State: subagenttools.Finished, Status: store.EventFailed, Text: r.Error}
	var a subagent.Answer
	if r.Status == asynctools.Completed && json.Unmarshal(r.Response, &a) == nil {
		p.Agent, p.ThreadID, p.Status, p.Text = a.Agent, a.ThreadID, a.Status, a.Text
	}
	d.emit(Event{Kind: Subagent, Subagent: &p})
}

// addUsageToParent adds what this part of a subagent's turn used to its caller's totals.
func (d *invocation) addUsageToParent(ctx context.Context, res Outcome) {
	p := d.lease.Parent()
	if p.ConversationID == "" || res.Usage == (model.Usage{}) {
		return
	}
	if err := d.e.opts.Store.AddUsage(ctx, d.accountID, p, res.Usage); err != nil {
		d.log.ErrorContext(ctx, "adding a subagent's usage to its caller's", "err", err)
	}
}

// settleParent settles, once a subagent's turn has ended, the async call of the caller that
// started it (a non-blocking call); the last settlement of the caller's group re-drives the
// caller. Should it fail, or this invocation die first, the sweeper settles the call the same
// way at its deadline (subagent.Recover).
func (d *invocation) settleParent(ctx context.Context, res Outcome) {
	resultID, ok := subagent.CallOf(d.turnID)
	p := d.lease.Parent()
	if !ok || d.callerWaits || p.ConversationID == "" || !res.Status.Final() || d.e.opts.Async == nil {
		return
	}
	ended := subagent.Ended{Status: string(res.Status), Error: res.Error, Messages: d.history, Explicit: p.Explicit}
	ended.Attachments = d.e.returnFiles(ctx, d.accountID, d.conversationID, p.ConversationID, subagent.LastText(d.history))
	o, err := subagent.Outcome(p.Tool, d.conversationID, d.turnID, ended)
	if err == nil {
		var otherwise string
		otherwise, err = subagent.Settle(ctx, d.e.opts.Async, d.e.opts.Redriver, resultID, o, d.e.opts.Now())
		// An explicit child's call was settled by its notify_parent.
		if otherwise != "" && !p.Explicit {
			d.log.WarnContext(ctx, "a subagent ended after its caller's call was settled otherwise", "resultId", resultID, "status", otherwise)
		}
	}
	if err != nil {
		d.log.ErrorContext(ctx, "settling the caller of a subagent; the sweeper settles it at its deadline", "resultId", resultID, "err", err)
	}
}

// withNotifyParent adds notify_parent to cfg's tools where the turn is an explicit resumable
// instance's, run for its caller's call, which the tool answers once.
func (d *invocation) withNotifyParent(cfg *agent.Config) error {
	resultID, isCall := subagent.CallOf(d.turnID)
	p := d.lease.Parent()
	if !isCall || !p.Explicit || d.e.opts.Async == nil {
		return nil
	}
	tools, err := cfg.Tools.With(subagenttools.NotifyParent(func(ctx context.Context, message string) (string, error) {
		o, err := subagent.Notified(p.Tool, d.conversationID, d.turnID, message, d.e.returnFiles(ctx, d.accountID, d.conversationID, p.ConversationID, message))
		if err != nil {
			return "", err
		}
		return subagent.Settle(ctx, d.e.opts.Async, d.e.opts.Redriver, resultID, o, d.e.opts.Now())
	}))
	if err != nil {
		return err
	}
	cfg.Tools = tools
	return nil
}

// stopChild asks the child turn of the non-blocking call resultID, if it is one and still runs,
// to stop. It is best effort: a child that finishes anyway settles nothing (its call is).
func (e *Engine) stopChild(ctx context.Context, accountID, resultID string) {
	ev, err := e.opts.Store.Event(ctx, accountID, subagent.EventID(resultID))
	if errors.Is(err, store.ErrNotFound) || (err == nil && store.Final(ev.Status)) {
		return
	}
	if err == nil {
		_, err = e.RequestStop(ctx, accountID, ev.ConversationID)
	}
	if err != nil {
		e.opts.Logger.WarnContext(ctx, "asking a cancelled call's subagent to stop", "resultId", resultID, "err", err)
	}
}
