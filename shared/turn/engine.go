package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"time"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/approval"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/modelblock"
	"github.com/agentharness/harness/shared/state/agentstore"
	"github.com/agentharness/harness/shared/state/attachments"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/state/streamlog"
	"github.com/agentharness/harness/shared/state/threadvars"
	"github.com/agentharness/harness/shared/state/toolresults"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/tool/subagenttools"
	"github.com/agentharness/harness/shared/tool/toolset"
)

// Defaults for Options left zero.
const (
	// DefaultLease matches Lambda's longest invocation: a crashed turn frees its conversation
	// after at most this long.
	DefaultLease    = 15 * time.Minute
	DefaultEventTTL = 7 * 24 * time.Hour
	// DefaultApprovalTimeout is how long a held call waits for the user's decision.
	DefaultApprovalTimeout = 24 * time.Hour
	// DefaultAsyncToolTimeout is how long an outside worker has to complete a call.
	DefaultAsyncToolTimeout = time.Hour
	DefaultHeartbeat        = 10 * time.Second
	DefaultWaitMargin       = 30 * time.Second
	// DefaultStopPoll is how often a running turn looks whether it was asked to stop.
	DefaultStopPoll = 500 * time.Millisecond
)

// Options wires the engine's dependencies.
type Options struct {
	Store *store.Store
	// Agents loads agent configs with their secrets.
	Agents *agentstore.Service
	// Tools builds an agent's ToolSet from its config.tools, for a thread with vars; ctx is the
	// turn's (a deployment key read when first needed is read with it).
	Tools func(ctx context.Context, config map[string]json.RawMessage, vars tool.Vars) (*tool.Set, error)
	// Sealer seals and opens thread variables (threadvars) and the tree MCP calls carry
	// (tree.go); nil: requests cannot set variables.
	Sealer agentstore.Sealer
	// Attachments keeps threads' files (files.go), which models read through its Model; nil:
	// messages carry none.
	Attachments *attachments.Store
	// Results keeps the whole of tool results cut to fit the conversation's record (results.go);
	// nil: such results are only cut.
	Results *toolresults.Store
	// Model builds the model block of an agent of the account accountID (a block that names no key
	// takes the account's own key of its provider, else the deployment's); ctx is the turn's.
	Model func(ctx context.Context, accountID string, block json.RawMessage) (agent.Model, error)
	// Now is the clock; nil means time.Now.
	Now      func() time.Time
	Logger   *slog.Logger
	Lease    time.Duration
	EventTTL time.Duration
	// ApprovalTimeout: a held call not decided within it is denied as expired.
	ApprovalTimeout time.Duration

	// Async keeps async tool rows and dispatch groups; nil runs async tools inline.
	Async *asynctools.Store
	// Redriver seals groups and re-drives settled ones.
	Redriver *asynctools.Redriver
	// AsyncToolTimeout is an external-dispatch call's deadline.
	AsyncToolTimeout time.Duration
	// Heartbeat is how often a stream waiting for async work sends a keep-alive comment.
	Heartbeat time.Duration
	// WaitMargin is how long before the invocation's deadline the parent stops waiting for
	// same-invocation work, leaving time to record the outcome.
	WaitMargin time.Duration
	// Streams keeps every turn's output for clients that reconnect; nil keeps none.
	Streams *streamlog.Log
	// Toolsets add to agents what their configs name besides config.tools and config.subagent
	// (prompttools, skilltools, mcptools), in order; what no toolset offers, an agent does not
	// get.
	Toolsets []Toolset
	// Subject names the NATS subject a turn's stream is copied to (natslog.Attach); nil where
	// it is not.
	Subject func(accountID, conversationID, turnKey string) string
	// StopPoll is how often a running turn looks whether it was asked to stop (RequestStop).
	StopPoll time.Duration
	// Enqueue puts work on async-worker's queue (the turns of non-blocking subagent calls);
	// nil where the function has none.
	Enqueue func(ctx context.Context, body string) error
	// TreeMaxDepth and TreeMaxTurns bound every turn tree (tree.go): how many levels below its
	// root a turn may start, and how many turns it may hold, its root included.
	TreeMaxDepth, TreeMaxTurns int
}

// Engine runs turns for every transport: it takes a conversation's lease, plans a request
// against what the conversation waits for, runs the model loop, and ends each invocation's part
// of a turn in one order (Run.Finish). Transports range over its events.
type Engine struct {
	opts Options
	// toolsets are the options' after the engine's own, config.subagent's, whose calls it runs.
	toolsets []Toolset
}

// New returns an engine, with defaults for the options left zero.
func New(opts Options) *Engine {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&opts.Lease, DefaultLease}, {&opts.EventTTL, DefaultEventTTL}, {&opts.ApprovalTimeout, DefaultApprovalTimeout},
		{&opts.AsyncToolTimeout, DefaultAsyncToolTimeout}, {&opts.Heartbeat, DefaultHeartbeat}, {&opts.WaitMargin, DefaultWaitMargin},
		{&opts.StopPoll, DefaultStopPoll},
	} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if opts.TreeMaxDepth <= 0 {
		opts.TreeMaxDepth = DefaultTreeMaxDepth
	}
	if opts.TreeMaxTurns <= 0 {
		opts.TreeMaxTurns = DefaultTreeMaxTurns
	}
	return &Engine{opts: opts, toolsets: append([]Toolset{subagenttools.Toolset{}}, opts.Toolsets...)}
}

// Options returns the options the engine runs with, defaults filled in.
func (e *Engine) Options() Options { return e.opts }

// Request names the turn a request is about, and how it treats approvals.
type Request struct {
	ConversationID string `json:"id"`
	AgentID        string `json:"agentId"`
	// EventID is the turn's event, whose row /status reads; empty for a turn without one.
	EventID string `json:"eventId"`
	// OnPendingApprovals says what a new message does to calls still awaiting approval:
	// "reject" (the default: 409) or "deny" (they are denied first, then the message runs).
	OnPendingApprovals string `json:"onPendingApprovals"`
	// ToolApproval overrides tools' approval policies for this request.
	ToolApproval map[string]approval.Status `json:"toolApproval"`
	// Variables are values the request sets for the conversation (vars.go), in the clear
	// only while the request is answered: a queued request carries them sealed.
	Variables map[string]string `json:"-"`
	Sealed    store.Vars        `json:"sealedVariables,omitempty"`
	// EndUser is the end user whose token made the request, set by the edge from the
	// credential, never from a body: the turn runs on that end user's conversations only, and
	// a new conversation becomes theirs. Empty for the account secret, which runs on any.
	EndUser string `json:"endUser,omitempty"`
}

// Input is what a request brings: a new user message, or decisions on held calls.
type Input struct {
	Message   *model.Message
	Decisions []Decision
	// RespondsTo is the client's id of the assistant message the decisions answer, so the
	// resumed stream continues that message.
	RespondsTo string
	// Cancel ends the turn with its decisions, all denials: the model is not called again.
	Cancel bool
}

// Decision is the answer to one held call. ToolCallID and Input, when given (the AI SDK sends
// both), must match the call the approval was asked for.
type Decision struct {
	ApprovalID string          `json:"approvalId"`
	Approved   *bool           `json:"approved"`
	Reason     string          `json:"reason"`
	ToolCallID string          `json:"toolCallId"`
	Input      json.RawMessage `json:"input,omitempty"`
	// From is where the client carried the decision ("messages[1].parts[2].approval"), so a
	// refusal names the field it sent; empty for a compact list of decisions.
	From string `json:"-"`
}

// Status is where a turn stands, as its event's /status row shows it (the store keeps the
// string): processing; completed, failed or cancelled (its client went away or asked it to
// stop), each final; or waiting for the user's decisions on held calls, or for async calls.
type Status string

const (
	StatusProcessing   Status = store.EventProcessing
	StatusCompleted    Status = store.EventCompleted
	StatusFailed       Status = store.EventFailed
	StatusCancelled    Status = store.EventCancelled
	StatusWaiting      Status = store.EventWaiting
	StatusWaitingAsync Status = store.EventWaitingAsync
)

// Final reports whether s is an outcome no later report changes.
func (s Status) Final() bool { return store.Final(string(s)) }

// Outcome is how a turn (or the part of it this invocation ran) ended: the event status, the
// tokens it used, the finish reason a client is told, and what it waits for.
type Outcome struct {
	Status Status
	Usage  model.Usage
	// Reason is the finish reason a client is told; empty when the turn ended without one
	// (its context was cancelled).
	Reason model.FinishReason
	// Error is the client-safe reason of a failed turn, ErrExtra the refusal's details.
	Error    string
	ErrExtra map[string]any
	// PendingApprovals and AsyncGroup/PendingAsync say what a waiting turn waits for.
	PendingApprovals []PendingApproval
	AsyncGroup       string
	PendingAsync     []asynctools.Call
	// Stopped: the turn was cancelled because a client asked it to stop (RequestStop).
	Stopped bool `json:",omitempty"`
	// HandedOver: a blocking subagent's turn stopped at its caller's margin, to go on on
	// async-worker (runChild); it is still processing.
	HandedOver bool `json:",omitempty"`
}

// Continues reports whether the turn goes on after this part of it: it waits for approval or for
// async calls, or a blocking subagent's turn was handed over to go on on async-worker.
func (o Outcome) Continues() bool {
	return o.Status == StatusWaiting || o.Status == StatusWaitingAsync || o.HandedOver
}

// Start is what Begin needs to take up a turn.
type Start struct {
	AccountID string
	Request
	Input Input
	// Config is the agent as the transport runs it (Agent's, with its own tool changes).
	Config agent.Config
	// Seed is the turn's secret seed of dispatch group ids: the same for a retried invocation.
	GroupSeed string
	Delivery  asynctools.Delivery
	// Heartbeat keeps a quiet transport alive while the turn waits for same-invocation work;
	// nil when the transport needs none.
	Heartbeat func()
	// Opening, when the transport read the request's account, agent and conversation with
	// store.OpenTurn, lets a new message begin its turn in one write (store.StartTurn).
	Opening *store.Opening
	// newStream: Delivery.TurnKey was just made, so the turn's log has nothing under it yet.
	newStream bool
	// NoApprovals: nobody can be asked (a channel without approvers), so calls that need
	// approval are denied, saying so, instead of held.
	NoApprovals bool
	// Tree is where the turn sits in the turn tree of the turn that started it (a subagent's or
	// an MCP call's), counted there already; zero for a turn a client started, a tree's root.
	Tree TreePosition
}

// Run is one invocation's part of a turn, begun: the lease is held and the request planned.
type Run struct {
	d       *invocation
	plan    *turnPlan
	from    int64
	outcome Outcome
}

// Begin takes the conversation's lease and plans the request against what the conversation
// waits for. Its refusals are *Refusal, and on any error the lease is given back.
func (e *Engine) Begin(ctx context.Context, s Start) (*Run, error) {
	if s.Tree.Root != "" {
		s.Delivery.Tree, s.Delivery.TreeDepth = s.Tree.Root, s.Tree.Depth
	}
	if err := e.checkTree(ctx, TreePosition{Root: s.Delivery.Tree}); err != nil {
		return nil, err
	}
	if err := e.SealVariables(ctx, s.AccountID, &s.Request); err != nil {
		return nil, err
	}
	now := e.opts.Now()
	nameStream(&s)
	lease, err := e.start(ctx, s, now)
	if err != nil {
		return nil, err
	}
	plan, started := &turnPlan{message: s.Input.Message}, lease != nil
	if !started {
		if lease, plan, err = e.begin(ctx, s.AccountID, s.Request, s.Input, now); err != nil {
			return nil, err
		}
	}
	if err := e.keepVariables(ctx, lease, s.Request); err != nil {
		if rerr := lease.Release(context.WithoutCancel(ctx)); rerr != nil {
			e.opts.Logger.ErrorContext(ctx, "releasing conversation", "conversationId", s.ConversationID, "err", rerr)
		}
		return nil, err
	}
	r := e.newRun(s, lease, plan)
	if started {
		r.from-- // the message start wrote is the run's first
	}
	return r, nil
}

// start begins, in one write, a turn that brings a new message to a conversation its opening
// read new, or free and waiting for nothing (store.StartTurn). A nil lease with a nil error: it
// cannot, and the turn begins the usual way (begin), which refuses what must be refused.
func (e *Engine) start(ctx context.Context, s Start, now time.Time) (*store.Lease, error) {
	in := s.Input
	if s.Opening == nil || in.Message == nil || in.Decisions != nil || in.Cancel {
		return nil, nil
	}
	var stream string
	if e.opts.Streams != nil {
		stream = StreamOf(s.AccountID, s.ConversationID, s.Delivery.TurnKey)
	}
	lease, err := e.opts.Store.StartTurn(ctx, s.Opening, s.AgentID, *in.Message, stream, now, now.Add(e.opts.Lease))
	if errors.Is(err, store.ErrConflict) {
		return nil, nil
	}
	return lease, err
}

// nameStream gives the turn its stream log's key, unless its delivery carries one: its event
// id, or a key of its own that its continuations keep.
func nameStream(s *Start) {
	if s.Delivery.TurnKey == "" {
		s.Delivery.TurnKey = s.EventID
	}
	if s.Delivery.TurnKey == "" {
		s.Delivery.TurnKey, s.newStream = store.NewID("trn_"), true
	}
}

func (e *Engine) newRun(s Start, lease *store.Lease, plan *turnPlan) *Run {
	cfg := s.Config
	cfg.Pause = e.pauseFunc(lease, s.AgentID)
	if s.NoApprovals {
		cfg.Pause = nil
	}
	d := &invocation{
		e: e, log: e.opts.Logger.With("accountId", s.AccountID, "agentId", s.AgentID, "conversationId", s.ConversationID, "eventId", s.EventID),
		accountID: s.AccountID, agentID: s.AgentID, conversationID: s.ConversationID,
		turnID: s.EventID, resumes: lease.Handover().PausedEvent, groupSeed: s.GroupSeed, delivery: s.Delivery,
		cfg: cfg, overrides: s.ToolApproval, lease: lease, emit: func(Event) {}, heartbeat: s.Heartbeat,
	}
	if d.heartbeat == nil {
		d.heartbeat = func() {}
	}
	if d.groupSeed == "" {
		d.groupSeed = store.NewID("")
	}
	nameStream(&s)
	d.delivery, d.newStream = s.Delivery, s.newStream
	if err := d.withNotifyParent(&d.cfg); err != nil {
		d.log.Error("giving a subagent its notify_parent", "err", err)
	}
	return &Run{d: d, plan: plan, from: lease.NextSeq()}
}

// Events runs the turn's part in this invocation and yields what it says, in order; Outcome
// then says how it ended. A consumer that stops early cancels the run, which ends as a cancelled
// turn does. Nothing is reported until Finish.
func (r *Run) Events(ctx context.Context) iter.Seq[Event] {
	return r.events(ctx, func(ctx context.Context) Outcome { return r.d.run(ctx, r.plan) })
}

// events runs execute, yielding what the invocation emits meanwhile. The loop emits on the
// goroutine that runs it, so yield is called from one goroutine, before events returns.
func (r *Run) events(ctx context.Context, execute func(context.Context) Outcome) iter.Seq[Event] {
	return func(yield func(Event) bool) {
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		stopped := false
		ctx = tool.WithTurn(ctx, r.d)
		r.d.openLog(ctx)
		defer r.d.watchStop(ctx, cancel)()
		r.d.emit = func(ev Event) {
			ev.Seq, ev.InLog = r.d.record(ctx, logEntry{Event: &ev})
			if !stopped && !yield(ev) {
				stopped = true
				cancel(nil)
			}
		}
		r.outcome = execute(ctx)
		r.d.emit = func(Event) {}
	}
}

// Outcome is how the run ended, once its Events have been consumed.
func (r *Run) Outcome() Outcome { return r.outcome }

// Execute runs the turn's part in this invocation for a transport that shows no output (an
// /async turn), and returns how it ended.
func (r *Run) Execute(ctx context.Context) Outcome {
	for range r.Events(ctx) {
	}
	return r.outcome
}

// FinishTimeout bounds Finish: long enough for its handful of writes under retries, short of
// holding an invocation that has nothing else to do.
const FinishTimeout = 30 * time.Second

// Finish ends this invocation's part of the turn (invocation.conclude: the log's last batch
// and the lease, the event, the resumed event, the turns below a stopped root, the caller of a
// subagent, then tell) and returns the report's error. It runs whatever became of the client:
// on ctx's values without its cancellation, bounded by FinishTimeout; tell, when set, gets
// that context.
func (r *Run) Finish(ctx context.Context, o Outcome, tell func(context.Context)) error {
	done, cancel := context.WithTimeout(context.WithoutCancel(ctx), FinishTimeout)
	defer cancel()
	var t func()
	if tell != nil {
		t = func() { tell(done) }
	}
	return r.d.conclude(done, r.plan, o, r.from, t)
}

// Watch has the run look at its edge's own signals each time it looks whether it was asked to
// stop (every StopPoll) while it runs: stop reports whether the edge's client asked for it (an
// App Server abort_message), which stops the turn as RequestStop does, and may serve the edge's
// other signals meanwhile. One poll for every kind of stop. Set it before Events.
func (r *Run) Watch(stop func(ctx context.Context) bool) { r.d.watch = stop }

// ResumedEvent is the event the conversation's paused step was reported under when this run
// began; empty when it resumed none.
func (r *Run) ResumedEvent() string { return r.d.resumes }

// From is the sequence number of the first message this run writes.
func (r *Run) From() int64 { return r.from }

// BeginCancel takes up a turn held for approval to end it: every approval still pending is
// denied as cancelled through the same rules as an answer, and Execute closes the paused step
// without calling the model. A nil Run with a nil error: there is nothing to cancel (another
// request holds the conversation, or nothing is pending any more).
func (e *Engine) BeginCancel(ctx context.Context, s Start) (*Run, error) {
	now := e.opts.Now()
	lease, err := e.opts.Store.ResumeLease(ctx, s.AccountID, s.ConversationID, s.AgentID, now, now.Add(e.opts.Lease))
	if errors.Is(err, store.ErrBusy) || errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	release := func() {
		if rerr := lease.Release(context.WithoutCancel(ctx)); rerr != nil {
			e.opts.Logger.ErrorContext(ctx, "releasing conversation", "conversationId", s.ConversationID, "err", rerr)
		}
	}
	rows, err := e.opts.Store.Approvals(ctx, s.AccountID, lease.Pending())
	if err != nil {
		release()
		return nil, err
	}
	s.Input = Input{Cancel: true}
	for _, id := range lease.Pending() {
		if a, ok := rows[id]; ok && a.Status == store.ApprovalPending && !a.Expired(now) {
			s.Input.Decisions = append(s.Input.Decisions, Decision{ApprovalID: id, Approved: new(false)})
		}
	}
	if len(s.Input.Decisions) == 0 {
		// Expired meanwhile: the next request settles them, as it would without the abort.
		release()
		return nil, nil
	}
	plan, err := e.plan(ctx, s.AccountID, s.Request, s.Input, lease, now)
	if err != nil {
		release()
		var refused *Refusal
		if errors.As(err, &refused) && refused.Kind == Conflict {
			return nil, nil // answered meanwhile
		}
		return nil, err
	}
	return e.newRun(s, lease, plan), nil
}

// Continuation is the turn of a settled dispatch group, taken up again: the lease is held and
// the group's results are in the conversation.
type Continuation struct {
	*Run
	// Group is the settled group, with its rows.
	Group   asynctools.GroupState
	history []model.Message
	// noApprovals: calls that need approval are denied instead of held (Start.NoApprovals).
	noApprovals bool
}

// WithoutApprovals makes the continuation deny calls that need approval, saying nobody can be
// asked, instead of holding them (Start.NoApprovals).
func (c *Continuation) WithoutApprovals() { c.noApprovals = true }

// TakeUp takes up the turn of the settled dispatch group groupID. A nil Continuation with a
// nil error: there is nothing to continue (the group was consumed already, belongs to a step
// paused for approval, or its results were brought back by an earlier attempt that finished);
// such a group is consumed. An error wrapping store.ErrBusy: the conversation runs another turn.
func (e *Engine) TakeUp(ctx context.Context, accountID, groupID string) (*Continuation, error) {
	st, err := e.opts.Async.Load(ctx, groupID)
	if err != nil {
		return nil, err
	}
	g := st.Group
	if g == nil || g.AccountID != accountID || !g.ConsumedAt.IsZero() {
		return nil, nil
	}
	if !st.Settled() {
		e.opts.Logger.ErrorContext(ctx, "continuation of a group that is not settled", "groupId", g.ID)
		return nil, nil
	}
	log := e.opts.Logger.With("accountId", g.AccountID, "agentId", g.AgentID, "conversationId", g.ConversationID, "groupId", g.ID)
	now := e.opts.Now()
	lease, err := e.opts.Store.ResumeLease(ctx, g.AccountID, g.ConversationID, g.AgentID, now, now.Add(e.opts.Lease))
	switch {
	case errors.Is(err, store.ErrAgentMismatch), errors.Is(err, store.ErrNotFound):
		// Another agent's conversation now, or none (deleted): nothing to continue.
		return nil, e.opts.Async.Consume(ctx, g.ID, now)
	case err != nil:
		return nil, err
	}
	skip := func(why string) (*Continuation, error) {
		log.InfoContext(ctx, why)
		if err := lease.Release(ctx); err != nil {
			return nil, err
		}
		return nil, e.opts.Async.Consume(ctx, g.ID, now)
	}
	history, err := lease.History(ctx)
	if err != nil {
		_ = lease.Release(context.WithoutCancel(ctx))
		return nil, err
	}
	waiting, _ := lease.AsyncGroup()
	msgID := resultsMessageID(g.ID)
	switch {
	case lease.Handover().PausedGroup == g.ID:
		// Its pass paused for approval: the step's resume brings the results back.
		return skip("continuation of a step paused for approval ignored")
	case waiting == g.ID:
		m := asynctools.ResultsMessage(msgID, st.Results())
		if err := lease.Append(ctx, m); err != nil {
			_ = lease.Release(context.WithoutCancel(ctx))
			return nil, err
		}
		history = append(history, m)
	case hasMessage(history, msgID) && !continued(history, msgID):
		// An earlier attempt brought the results back and stopped before the model answered.
	default:
		return skip("duplicate continuation ignored")
	}
	log.InfoContext(ctx, "continuation started", "results", len(g.Expected))
	run := e.newRun(Start{
		AccountID: g.AccountID, Request: Request{ConversationID: g.ConversationID, AgentID: g.AgentID, EventID: g.Delivery.EventID},
		GroupSeed: asynctools.NewGroupID(g.Delivery.GroupSeed+"/"+g.ID, 0), Delivery: g.Delivery,
	}, lease, &turnPlan{})
	run.d.log = log
	// The event's first message was reported by the turn's first invocation: from stays.
	run.from = 0
	return &Continuation{Run: run, Group: st, history: history}, nil
}

// Events yields the settled calls' results (AsyncLanded), then loads the agent, with the
// approval overrides its turn recorded, lets adapt change it (a transport's own tools; nil
// leaves it), runs the model again over the conversation and yields what the turn says, as
// Run.Events does.
func (c *Continuation) Events(ctx context.Context, adapt func(*agent.Config) error) iter.Seq[Event] {
	return c.events(ctx, func(ctx context.Context) Outcome {
		d := c.d
		cfg, err := d.e.loadAgent(ctx, d.accountID, d.agentID, builtFor{d.conversationID, d.lease.EndUser()}, d.e.storedThread(ctx, d.accountID, d.lease.Vars()))
		if err == nil {
			cfg.Tools = d.withRecordedOverrides(ctx, cfg.Tools)
			if adapt != nil {
				err = adapt(&cfg)
			}
		}
		if err == nil {
			err = d.withNotifyParent(&cfg)
			d.cfg.Tools = cfg.Tools // so that a landed subagent call is told as one
		}
		// The calls' results come first, as the model gets them.
		for _, r := range c.Group.Results() {
			d.landed(r)
		}
		if err != nil {
			return d.fail(ctx, err, "the agent could not continue: "+err.Error(), model.Usage{})
		}
		cfg.Pause = d.e.pauseFunc(d.lease, d.agentID)
		if c.noApprovals {
			cfg.Pause = nil
		}
		history := c.history
		d.cfg, d.history = cfg, slices.Clone(history)
		return d.passes(ctx, 0, func(cfg agent.Config) iter.Seq2[agent.Event, error] { return agent.Continue(ctx, cfg, history) })
	})
}

// Execute continues the turn for a transport that shows no output, and returns how it ended.
func (c *Continuation) Execute(ctx context.Context) Outcome {
	for range c.Events(ctx, nil) {
	}
	return c.outcome
}

// Consume marks the group's continuation done, once its outcome is concluded.
func (c *Continuation) Consume(ctx context.Context) error {
	return c.d.e.opts.Async.Consume(ctx, c.Group.Group.ID, c.d.e.opts.Now())
}

// continued reports whether the model already answered after the message with id msgID.
func continued(history []model.Message, msgID string) bool {
	for i, m := range history {
		if m.ID == msgID {
			return i < len(history)-1
		}
	}
	return false
}

// ClaimEvent records a request's event id, refusing one already used with 409.
func (e *Engine) ClaimEvent(ctx context.Context, accountID string, req Request) error {
	err := e.opts.Store.ClaimEvent(ctx, accountID, req.EventID, req.ConversationID, req.EndUser, e.opts.Now(), e.opts.EventTTL)
	var dup *store.DuplicateEventError
	if errors.As(err, &dup) {
		return &Refusal{Kind: Conflict, Message: dup.Error(), Detail: map[string]any{"eventId": dup.EventID, "status": dup.Status}, Cause: dup}
	}
	return err
}

// Agent loads the request's agent with its per-request approval overrides. A stream whose
// client can only hear of the turn while its response lasts (no stream log to resume from)
// cannot wait for an outside worker, so without a log it refuses agents with external-dispatch
// tools.
func (e *Engine) Agent(ctx context.Context, accountID string, req Request, stream bool) (agent.Config, error) {
	stored, err := e.opts.Agents.Load(ctx, accountID, req.AgentID)
	conv := builtFor{req.ConversationID, req.EndUser}
	if err == nil && stored.Memory != nil && conv.endUser == "" && conv.conversationID != "" {
		// The account's secret runs any of its conversations: memory is of the end user the
		// conversation belongs to, as a continuation's lease says.
		head, herr := e.opts.Store.ConversationHead(ctx, accountID, conv.conversationID)
		if herr != nil && !errors.Is(herr, store.ErrNotFound) {
			err = herr
		}
		conv.endUser = head.EndUser
	}
	cfg, err := e.buildAgent(ctx, accountID, req.AgentID, conv, stored, err, e.requestThread(ctx, accountID, req))
	return e.agentFor(cfg, err, req, stream)
}

// OpenedAgent is Agent for a request whose agent its opening read (store.OpenTurn).
func (e *Engine) OpenedAgent(ctx context.Context, o *store.Opening, req Request, stream bool) (agent.Config, error) {
	var stored *agentconfig.Config
	a, err := o.Agent()
	if err == nil {
		stored, err = e.opts.Agents.Config(ctx, a)
	}
	th := e.threadOf(ctx, o.Account.ID, req.Variables, func() (store.Vars, error) { return threadvars.With(o.Vars(), req.Sealed), nil })
	// An existing conversation is its end user's, whoever runs the turn; a new one becomes the
	// request's.
	conv := builtFor{req.ConversationID, req.EndUser}
	if owner, exists := o.Conversation(); exists {
		conv.endUser = owner
	}
	// The account's provider keys, which its models may take, came with the opening's read.
	cfg, err := e.buildAgent(o.WithProviderKeys(ctx), o.Account.ID, req.AgentID, conv, stored, err, th)
	return e.agentFor(cfg, err, req, stream)
}

// agentFor applies Agent's checks and the request's overrides to the agent cfg (loaded with err).
func (e *Engine) agentFor(cfg agent.Config, err error, req Request, stream bool) (agent.Config, error) {
	if err != nil {
		return cfg, err
	}
	if stream && e.opts.Streams == nil && cfg.Tools != nil {
		for _, name := range cfg.Tools.Names() {
			if cfg.Tools.AsyncMode(name) == asynctools.ExternalDispatch {
				return cfg, &Refusal{Kind: Invalid, Message: fmt.Sprintf(
					"agent %s cannot run over SSE: its tool %s uses execution %q, whose results arrive after this response has ended; use POST /async",
					req.AgentID, name, asynctools.ExternalDispatch)}
			}
		}
	}
	if cfg.Tools, err = withOverrides(cfg.Tools, req.ToolApproval); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// begin takes the conversation's lease and plans the request against what the conversation
// waits for. Its refusals are *Refusal, and on any error the lease is given back.
func (e *Engine) begin(ctx context.Context, accountID string, req Request, in Input, now time.Time) (*store.Lease, *turnPlan, error) {
	lease, err := e.opts.Store.TakeLeaseOf(ctx, req.EndUser, accountID, req.ConversationID, req.AgentID, now, now.Add(e.opts.Lease))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil, ConversationNotFound(req.ConversationID)
	case errors.Is(err, store.ErrBusy):
		return nil, nil, &Refusal{Kind: Busy, Message: "conversation " + req.ConversationID + " is busy with another turn; retry when it ends", Cause: err}
	case errors.Is(err, store.ErrAgentMismatch):
		return nil, nil, &Refusal{Kind: Conflict, Message: "conversation " + req.ConversationID + " belongs to another agent"}
	case err != nil:
		return nil, nil, err
	}
	plan, err := e.planTurn(ctx, accountID, req, in, lease, now)
	if err != nil {
		if rerr := lease.Release(context.WithoutCancel(ctx)); rerr != nil {
			e.opts.Logger.ErrorContext(ctx, "releasing conversation", "conversationId", req.ConversationID, "err", rerr)
		}
		return nil, nil, err
	}
	return lease, plan, nil
}

// planTurn refuses a request on a conversation that waits for async tools, then plans it
// against pending approvals.
func (e *Engine) planTurn(ctx context.Context, accountID string, req Request, in Input, lease *store.Lease, now time.Time) (*turnPlan, error) {
	if group, ids := lease.AsyncGroup(); group != "" {
		return nil, waitingForAsyncError(req.ConversationID, ids)
	}
	return e.plan(ctx, accountID, req, in, lease, now)
}

// waitingForAsyncError refuses a request on a conversation that waits for async tool calls.
func waitingForAsyncError(conversationID string, resultIDs []string) error {
	return &Refusal{Kind: Conflict, Message: fmt.Sprintf(
		"conversation %s is waiting for %d async tool call(s) to complete; it continues by itself when they do",
		conversationID, len(resultIDs)), Detail: map[string]any{"pendingAsyncTools": resultIDs}}
}

// LoadAgent loads the agent and builds its model and tools for the thread th, before anything
// is written, outside any conversation. A required variable (the agent's, or a tool's) that
// does not resolve stops the turn here, before any model call.
func (e *Engine) LoadAgent(ctx context.Context, accountID, agentID string, th *threadvars.Thread) (agent.Config, error) {
	return e.loadAgent(ctx, accountID, agentID, builtFor{}, th)
}

// builtFor is the conversation an agent is built for and the end user it belongs to (empty:
// the account's own), as toolsets are told (toolset.Build); zero outside any conversation.
type builtFor struct{ conversationID, endUser string }

// loadAgent is LoadAgent for the conversation conv.
func (e *Engine) loadAgent(ctx context.Context, accountID, agentID string, conv builtFor, th *threadvars.Thread) (agent.Config, error) {
	stored, err := e.opts.Agents.Load(ctx, accountID, agentID)
	return e.buildAgent(ctx, accountID, agentID, conv, stored, err, th)
}

// buildAgent builds the model and tools of the stored agent config cfg (loaded with err) for
// the conversation conv and the thread th (nil: none, which requires no variable).
func (e *Engine) buildAgent(ctx context.Context, accountID, agentID string, conv builtFor, cfg *agentconfig.Config, err error, th *threadvars.Thread) (agent.Config, error) {
	if errors.Is(err, store.ErrNotFound) {
		return agent.Config{}, &Refusal{Kind: NotFound, Message: "agent " + agentID + " not found"}
	}
	invalid := func(err error) error {
		return &Refusal{Kind: Invalid, Message: "agent " + agentID + " cannot run: " + err.Error(), Cause: err}
	}
	var fe *agentconfig.FieldError
	if errors.As(err, &fe) {
		return agent.Config{}, invalid(err)
	}
	if err != nil {
		return agent.Config{}, err
	}
	m, err := e.opts.Model(ctx, accountID, cfg.Model)
	if errors.Is(err, model.ErrCredentials) {
		return agent.Config{}, err
	}
	if err != nil {
		return agent.Config{}, invalid(err)
	}
	vars := tool.Vars{Get: th.Get, Scoped: func(name string) bool {
		v, ok := cfg.Variables.Find(name)
		return ok && v.Scoped
	}}
	tools, err := e.opts.Tools(ctx, cfg.Tools, vars)
	system, warnings := cfg.System, []string(nil)
	var immediate func(model.Message) []model.Part
	for _, ts := range e.toolsets {
		if err != nil {
			break
		}
		o, oerr := ts.Offer(ctx, toolset.Build{AccountID: accountID, AgentID: agentID,
			ConversationID: conv.conversationID, EndUser: conv.endUser, Config: cfg, Model: m, Vars: vars})
		var refused *toolset.ConfigError
		if errors.As(oerr, &refused) {
			err = refused.Err
			break
		}
		if oerr != nil {
			return agent.Config{}, oerr
		}
		for _, w := range o.Warnings {
			e.opts.Logger.WarnContext(ctx, "tools not offered this turn", "accountId", accountID, "agentId", agentID, "warning", w)
		}
		system, warnings = system+o.System, append(warnings, o.Warnings...)
		if o.Immediate != nil {
			immediate = o.Immediate
		}
		if len(o.Tools) > 0 {
			tools, err = tools.With(o.Tools...)
		}
	}
	missing := th.Missing(cfg.Variables)
	if terr := th.Err(); terr != nil {
		return agent.Config{}, terr
	}
	// The agent's own declarations first: they say more than a tool's.
	if len(missing) > 0 {
		return agent.Config{}, missingRefusal(&MissingVariablesError{AgentID: agentID, Missing: missing})
	}
	if errors.Is(err, model.ErrCredentials) {
		return agent.Config{}, err
	}
	if err != nil {
		return agent.Config{}, invalid(err)
	}
	var output *agent.Output
	if cfg.Output != nil {
		output = &agent.Output{Schema: cfg.Output.Schema, Compiled: cfg.Output.Compiled()}
	}
	budget := &agent.Context{MaxInputTokens: cfg.Context.Budget(modelblock.ContextWindow(cfg.Model))}
	if cfg.Context != nil && len(cfg.Context.SummaryModel) > 0 {
		if budget.Summarizer, err = e.opts.Model(ctx, accountID, cfg.Context.SummaryModel); err != nil {
			if errors.Is(err, model.ErrCredentials) {
				return agent.Config{}, err
			}
			return agent.Config{}, invalid(fmt.Errorf("context.summaryModel: %w", err))
		}
	}
	return agent.Config{Model: m, Tools: tools, System: system, MaxSteps: cfg.MaxSteps, NewID: NewMessageID, Immediate: immediate, Warnings: warnings, Output: output,
		CacheKey: accountID + "/" + agentID, Context: budget}, nil
}

// NewMessageID names a message the harness creates.
func NewMessageID() string { return store.NewID("msg_") }

// CheckMessageSize refuses, with 413 naming the field, a user message larger than a stored
// message may be, before anything is written.
func CheckMessageSize(field string, m *model.Message) error {
	if n := store.MessageBytes(*m); n > store.MaxMessageBytes {
		return &Refusal{Kind: TooLarge, Detail: map[string]any{"field": field},
			Message: fmt.Sprintf("%s: the message takes %d bytes stored, more than the %d one message may hold", field, n, store.MaxMessageBytes)}
	}
	return nil
}

// Report records a turn's progress on its status row: its status, usage, error or what it
// waits for, and the span of messages it wrote (from <= seq < to).
func (e *Engine) Report(ctx context.Context, accountID, eventID string, o Outcome, from, to int64) error {
	b, err := json.Marshal(eventDetail(o))
	if err != nil {
		return err
	}
	err = e.opts.Store.UpdateEvent(ctx, accountID, eventID, store.StatusUpdate{
		Status: string(o.Status), Usage: o.Usage, FromSeq: from, ToSeq: to, Detail: b, At: e.opts.Now(),
	})
	if errors.Is(err, store.ErrEventFinal) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reporting event %s: %w", eventID, err)
	}
	return nil
}

// CancelGroup settles the running calls of a turn's dispatch group as cancelled, through the
// conditional write an answer takes, so a late answer is refused; the last one re-drives the
// turn, whose continuation finds the abort. A call answered meanwhile keeps its answer; a group
// of another turn than eventID is left alone. A cancelled subagent call's child is asked to
// stop: nobody waits for its answer any more.
func (e *Engine) CancelGroup(ctx context.Context, accountID, groupID, eventID string) error {
	st, err := e.opts.Async.Load(ctx, groupID)
	if err != nil {
		return err
	}
	if st.Group == nil || st.Group.AccountID != accountID || st.Group.Delivery.EventID != eventID {
		return nil
	}
	for _, id := range st.Pending() {
		_, duplicate, err := e.opts.Async.Settle(ctx, id, asynctools.Outcome{Status: asynctools.Cancelled, Error: cancelledCallText}, e.opts.Now())
		var conflict *asynctools.ConflictError
		if errors.As(err, &conflict) || errors.Is(err, asynctools.ErrNotFound) {
			continue // answered, or timed out, meanwhile
		}
		if err != nil {
			return err
		}
		e.stopChild(ctx, accountID, id)
		// The last settlement of a sealed group re-drives it, as an answer's would.
		if _, err := e.opts.Redriver.Settled(ctx, id, duplicate); err != nil {
			return err
		}
	}
	return nil
}

// eventDetail is what an event's status shows besides its status: the error, or what the turn
// waits for.
func eventDetail(res Outcome) map[string]any {
	detail := map[string]any{}
	for k, v := range res.ErrExtra {
		detail[k] = v
	}
	switch {
	case res.Error != "":
		detail["error"] = res.Error
	case res.Status == StatusWaitingAsync:
		detail["pendingAsyncTools"], detail["groupId"] = res.PendingAsync, res.AsyncGroup
	case res.Status == StatusWaiting:
		detail["pendingApprovals"] = res.PendingApprovals
	}
	if res.Status == StatusFailed && res.Error == "" {
		detail["error"] = "the turn failed"
	}
	return detail
}

// toolLog writes the structured tool start, finish and failure logs, with durations.
type toolLog struct {
	log     *slog.Logger
	started map[string]toolStart
}

type toolStart struct {
	name string
	at   time.Time
}

func (l toolLog) observe(ctx context.Context, ev agent.Event) {
	switch ev.Type {
	case agent.ToolInputAvailable:
		l.started[ev.ToolCallID] = toolStart{name: ev.ToolName, at: time.Now()}
		l.log.InfoContext(ctx, "tool started", "tool", ev.ToolName, "toolCallId", ev.ToolCallID)
	case agent.ToolInputError:
		l.log.WarnContext(ctx, "tool call rejected", "tool", ev.ToolName, "toolCallId", ev.ToolCallID, "err", ev.ErrorText)
	case agent.ToolApprovalRequest:
		delete(l.started, ev.ToolCallID)
		l.log.InfoContext(ctx, "tool held for approval", "tool", ev.ToolName, "toolCallId", ev.ToolCallID, "approvalId", ev.ApprovalID)
	case agent.ToolOutputDenied:
		delete(l.started, ev.ToolCallID)
		l.log.InfoContext(ctx, "tool denied", "tool", ev.ToolName, "toolCallId", ev.ToolCallID, "automatic", ev.Automatic, "reason", ev.ErrorText)
	case agent.ToolOutput, agent.ToolOutputError:
		attrs := []any{"tool", ev.ToolName, "toolCallId", ev.ToolCallID}
		if s, ok := l.started[ev.ToolCallID]; ok {
			attrs = append(attrs, "ms", time.Since(s.at).Milliseconds())
		}
		delete(l.started, ev.ToolCallID)
		if ev.Type == agent.ToolOutput {
			l.log.InfoContext(ctx, "tool finished", append(attrs, "outputBytes", len(ev.Output))...)
		} else {
			l.log.WarnContext(ctx, "tool failed", append(attrs, "err", ev.ErrorText)...)
		}
	}
}

// Precheck refuses, before anything is queued, what the worker would refuse: a conversation of
// another agent, one waiting for async tools, a new message while approvals are pending, and
// decisions for approvals it does not wait for. It only reads; the worker checks again under
// the conversation's lease.
func (e *Engine) Precheck(ctx context.Context, accountID string, req Request, in Input) error {
	head, err := e.opts.Store.ConversationHead(ctx, accountID, req.ConversationID)
	if errors.Is(err, store.ErrNotFound) {
		if in.Decisions != nil {
			return e.staleDecision(ctx, accountID, req.ConversationID, in.Decisions[0].ApprovalID)
		}
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case head.AgentID != "" && head.AgentID != req.AgentID:
		return &Refusal{Kind: Conflict, Message: "conversation " + req.ConversationID + " belongs to another agent"}
	case head.AsyncGroup != "":
		return waitingForAsyncError(req.ConversationID, head.PendingAsync)
	}
	if in.Decisions == nil && (len(head.PendingApprovals) == 0 || req.OnPendingApprovals == "deny") {
		return nil
	}
	rows, err := e.opts.Store.Approvals(ctx, accountID, head.PendingApprovals)
	if err != nil {
		return err
	}
	now := e.opts.Now()
	for _, d := range in.Decisions {
		a, ok := rows[d.ApprovalID]
		if !ok {
			return e.staleDecision(ctx, accountID, req.ConversationID, d.ApprovalID)
		}
		if a.Status == store.ApprovalPending && a.Expired(now) {
			a.Status = store.ApprovalExpired
		}
		if err := decisionRefusal(d, a); err != nil {
			return err
		}
	}
	if in.Message != nil {
		var waiting []store.Approval
		for _, id := range head.PendingApprovals {
			if a, ok := rows[id]; ok && a.Status == store.ApprovalPending && !a.Expired(now) {
				waiting = append(waiting, a)
			}
		}
		if len(waiting) > 0 {
			return pendingApprovalsError(req.ConversationID, waiting)
		}
	}
	return nil
}

// stoppedTurnText is the outcome of a turn a client asked to stop.
const stoppedTurnText = "the turn was stopped; the conversation keeps every step finished before it and the answer so far"

// errStopRequested is the cause of a run's context cancelled by RequestStop.
var errStopRequested = errors.New("the turn was asked to stop")

// RequestStop asks the running turn of a conversation to stop; it stops within about StopPoll,
// keeps the answer it had so far, and its stream ends with an abort. ok is false when no turn
// runs in the conversation (one paused for approval or waiting for outside work does not run).
func (e *Engine) RequestStop(ctx context.Context, accountID, conversationID string) (ok bool, err error) {
	head, err := e.opts.Store.ConversationHead(ctx, accountID, conversationID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && head.Stream == "") {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return e.opts.Store.RequestStop(ctx, accountID, conversationID, head.Stream, e.opts.Now())
}

// watchStop cancels the run's context with errStopRequested once the turn is asked to stop,
// looking every StopPoll; the returned func ends the watch.
func (d *invocation) watchStop(ctx context.Context, cancel context.CancelCauseFunc) (end func()) {
	stream := StreamOf(d.accountID, d.conversationID, d.delivery.TurnKey)
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(d.e.opts.StopPoll)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if d.watch != nil && d.watch(ctx) {
					d.log.InfoContext(ctx, "turn asked to stop by its edge's client")
					cancel(errStopRequested)
					return
				}
				asked, err := d.e.opts.Store.StopRequested(ctx, d.accountID, d.conversationID)
				if err == nil && asked == stream {
					d.log.InfoContext(ctx, "turn asked to stop")
					cancel(errStopRequested)
					return
				}
			}
		}
	}()
	return func() { close(done); <-ended }
}

// Toolset adds to the agents whose config names its feature: each is asked whenever an agent is
// built for a turn. Its toolset.ConfigError refuses the agent; any other error fails the build.
type Toolset interface {
	Offer(ctx context.Context, b toolset.Build) (toolset.Offer, error)
}
