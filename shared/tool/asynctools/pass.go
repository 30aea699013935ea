package asynctools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/tool"
)

// PassConfig describes the model pass whose async calls a Pass coordinates.
type PassConfig struct {
	Store          *Store
	GroupID        string
	AccountID      string
	AgentID        string
	ConversationID string
	TurnID         string
	Delivery       Delivery
	// WaitUntil is when the parent stops waiting for same-invocation work (a margin before the
	// invocation's deadline): work still running then is settled as failed. It is also those
	// rows' deadline and every row's ParentUntil.
	WaitUntil time.Time
	// ExternalTimeout is how long an outside worker has to complete a dispatched call.
	ExternalTimeout time.Duration
	Now             func() time.Time
}

// Pass coordinates the async calls of one model pass: it registers each call's row before the
// work starts, runs same-invocation work in goroutines that persist their results as they land,
// dispatches external work with a per-call ticket, and gives the model a placeholder at once.
type Pass struct {
	cfg PassConfig

	mu       sync.Mutex
	ids      []string          // the group's calls, in the order the model made them
	calls    map[string]Call   // by resultId
	external map[string]bool   // dispatched to an outside worker
	done     map[string]Result // settled same-invocation results
	running  map[string]bool   // same-invocation work started and not landed yet
	landing  map[string]bool   // its outcome is being recorded
	changed  chan struct{}     // signalled when a same-invocation call lands
	// nested holds what same-invocation calls' own model loops produced (tool.Transcript).
	nested map[string]*tool.Transcript

	workCtx context.Context
	stop    context.CancelFunc
}

// NewPass starts coordinating a pass.
func NewPass(cfg PassConfig) *Pass {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	// Same-invocation work outlives the request that started it only until WaitUntil.
	ctx, stop := context.WithDeadline(context.Background(), cfg.WaitUntil)
	return &Pass{
		cfg: cfg, external: map[string]bool{}, done: map[string]Result{}, calls: map[string]Call{}, running: map[string]bool{}, landing: map[string]bool{},
		nested: map[string]*tool.Transcript{}, changed: make(chan struct{}, 1), workCtx: ctx, stop: stop,
	}
}

// GroupID is the pass's dispatch group.
func (p *Pass) GroupID() string { return p.cfg.GroupID }

// WaitUntil is when the pass stops waiting for work that runs inside the invocation.
func (p *Pass) WaitUntil() time.Time { return p.cfg.WaitUntil }

// placeholder is the result the model gets at once for an async call.
func placeholder(id string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"resultId": id, "status": Running})
	return b
}

// IsPlaceholder reports whether a tool output is an async call's placeholder: the call was
// started and its result comes later.
func IsPlaceholder(out json.RawMessage) bool {
	var p struct {
		ResultID string `json:"resultId"`
		Status   string `json:"status"`
	}
	return json.Unmarshal(out, &p) == nil && p.ResultID != "" && p.Status == Running
}

// Run starts one async call and returns its placeholder; it is the loop's agent.AsyncFunc.
// The row is written before any work starts. A call a retried pass already registered is not
// dispatched again; same-invocation work that died with an earlier invocation runs again.
func (p *Pass) Run(ctx context.Context, toolCallID string, call *tool.Call) (json.RawMessage, error) {
	id := ResultID(p.cfg.GroupID, toolCallID)
	mode := call.Async()
	now := p.cfg.Now()
	row := Result{
		ID: id, AccountID: p.cfg.AccountID, AgentID: p.cfg.AgentID, ConversationID: p.cfg.ConversationID,
		TurnID: p.cfg.TurnID, ToolCallID: toolCallID, ToolName: call.Name(), Mode: mode, Status: Running,
		Deadline: p.cfg.WaitUntil, ParentUntil: p.cfg.WaitUntil, Delivery: p.cfg.Delivery, CreatedAt: now,
	}
	var token string
	if mode == ExternalDispatch {
		token, row.TokenHash = NewToken()
		row.Deadline = now.Add(p.cfg.ExternalTimeout)
	}
	existing, created, err := p.cfg.Store.Register(ctx, row)
	if err != nil {
		return nil, fmt.Errorf("registering the async call: %w", err)
	}
	p.mu.Lock()
	p.calls[id] = Call{ResultID: id, ToolCallID: toolCallID, ToolName: call.Name()}
	p.mu.Unlock()
	if !created {
		p.resume(ctx, existing, call)
		return placeholder(id), nil
	}
	if mode == ExternalDispatch {
		if _, err := call.Run(WithTicket(ctx, Ticket{ResultID: id, ToolCallID: toolCallID, CompletePath: CompletePath(id), Token: token})); err != nil {
			// Nobody was asked to do the work, so nobody will complete it: settle it now.
			if _, _, serr := p.cfg.Store.Settle(context.WithoutCancel(ctx), id, Outcome{Status: Failed, Error: "dispatch failed: " + err.Error()}, p.cfg.Now()); serr != nil {
				return nil, errors.Join(err, serr)
			}
			return nil, err
		}
		p.mu.Lock()
		p.ids = append(p.ids, id)
		p.external[id] = true
		p.mu.Unlock()
		return placeholder(id), nil
	}
	p.start(ctx, id, call)
	return placeholder(id), nil
}

// Adopt makes a call that began inline (a blocking subagent call) one of the pass's dispatched
// calls, for work that must outlive the invocation: its row is registered as external-dispatch
// with the deadline given, and the model gets the placeholder. Whoever ends the work settles the
// row like a completion; no token is handed out, so no outside worker can.
func (p *Pass) Adopt(ctx context.Context, toolCallID, toolName string, deadline time.Time) (json.RawMessage, error) {
	id := ResultID(p.cfg.GroupID, toolCallID)
	_, hash := NewToken()
	row := Result{
		ID: id, AccountID: p.cfg.AccountID, AgentID: p.cfg.AgentID, ConversationID: p.cfg.ConversationID,
		TurnID: p.cfg.TurnID, ToolCallID: toolCallID, ToolName: toolName, Mode: ExternalDispatch, Status: Running, TokenHash: hash,
		Deadline: deadline, ParentUntil: p.cfg.WaitUntil, Delivery: p.cfg.Delivery, CreatedAt: p.cfg.Now(),
	}
	if _, _, err := p.cfg.Store.Register(ctx, row); err != nil {
		return nil, fmt.Errorf("registering the call: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, known := p.calls[id]; !known {
		p.ids = append(p.ids, id)
	}
	p.calls[id] = Call{ResultID: id, ToolCallID: toolCallID, ToolName: toolName}
	p.external[id] = true
	return placeholder(id), nil
}

// resume takes over a call an earlier attempt of this pass registered.
func (p *Pass) resume(ctx context.Context, r Result, call *tool.Call) {
	if r.Mode == SameInvocation && r.Status == Running {
		p.start(ctx, r.ID, call) // its work died with the earlier invocation
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ids = append(p.ids, r.ID)
	if r.Mode == ExternalDispatch {
		p.external[r.ID] = true
	} else {
		p.done[r.ID] = r
	}
}

// start runs same-invocation work in a goroutine that settles its row when it lands. The work
// keeps the values of callCtx (the call's id) but ends with the pass's work, and records its
// own model loop, if it has one, apart from the step that started it (Nested).
func (p *Pass) start(callCtx context.Context, id string, call *tool.Call) {
	nested := &tool.Transcript{}
	p.mu.Lock()
	p.ids = append(p.ids, id)
	p.running[id] = true
	p.nested[id] = nested
	p.mu.Unlock()
	go func() {
		ctx, cancel := context.WithDeadline(context.WithoutCancel(callCtx), p.cfg.WaitUntil)
		defer cancel()
		defer context.AfterFunc(p.workCtx, cancel)()
		ctx = tool.WithTranscript(context.WithValue(ctx, backgroundKey{}, true), nested)
		out, err := call.Run(ctx)
		o := Outcome{Status: Completed, Response: out}
		if err != nil {
			o = Outcome{Status: Failed, Error: err.Error()}
		}
		if p.workCtx.Err() != nil {
			o = p.stopped()
		}
		p.land(id, o)
	}()
}

type backgroundKey struct{}

// InBackground reports whether ctx runs same-invocation work, beside the loop that started it
// rather than inside its call.
func InBackground(ctx context.Context) bool {
	b, _ := ctx.Value(backgroundKey{}).(bool)
	return b
}

// Nested is what the landed same-invocation calls' own model loops produced, in call order:
// their messages, kept before the results message, and the tokens they used.
func (p *Pass) Nested() ([]model.Message, model.Usage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var msgs []model.Message
	var usage model.Usage
	for _, id := range p.ids {
		if t, ok := p.nested[id]; ok && !p.running[id] {
			msgs = append(msgs, t.Messages()...)
			usage = usage.Add(t.Usage())
		}
	}
	return msgs, usage
}

// stopped is the outcome of work the pass stopped waiting for.
func (p *Pass) stopped() Outcome {
	if errors.Is(p.workCtx.Err(), context.DeadlineExceeded) {
		return Outcome{Status: Failed, Error: "the tool did not finish before the invocation had to stop waiting for it", Timeout: true}
	}
	return Outcome{Status: Failed, Error: "the turn was stopped before the tool finished"}
}

// halt stops the work still running and settles it as stopped, without waiting for tools
// that ignore cancellation (their late results lose to the recorded outcome).
func (p *Pass) halt() {
	p.stop()
	p.mu.Lock()
	var ids []string
	for id := range p.running {
		ids = append(ids, id)
	}
	p.mu.Unlock()
	for _, id := range ids {
		p.land(id, p.stopped())
	}
}

// land persists an outcome once per call; the first settle wins, so a result that lost the
// race to a timeout is reported as the recorded timeout. The call counts as running until its
// result is recorded here, so Wait never returns before it.
func (p *Pass) land(id string, o Outcome) {
	p.mu.Lock()
	if !p.running[id] || p.landing[id] {
		p.mu.Unlock()
		return // landed already, or landing: the pass stopped waiting for it
	}
	p.landing[id] = true
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, _, err := p.cfg.Store.Settle(ctx, id, o, p.cfg.Now())
	var conflict *ConflictError
	switch {
	case errors.As(err, &conflict):
		r = conflict.Recorded
	case err != nil:
		// The row stays running; the sweeper will time it out. The model still gets the outcome.
		r = Result{ID: id, Status: o.Status, Response: o.Response, Error: o.Error}
	}
	p.mu.Lock()
	p.done[id] = r
	delete(p.running, id)
	p.mu.Unlock()
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// Close releases the pass's timer; for a pass that made no async call (Wait and Abort release
// it themselves).
func (p *Pass) Close() { p.stop() }

// HasWork reports whether the pass made any async call.
func (p *Pass) HasWork() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ids) > 0
}

// External lists the calls handed to outside workers.
func (p *Pass) External() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, id := range p.ids {
		if p.external[id] {
			out = append(out, id)
		}
	}
	return out
}

// Wait waits for the pass's same-invocation work. onLand sees each result as it lands (rows are
// already persisted by then); heartbeat is called every interval while work is running. At
// WaitUntil, work still running is stopped and settled as failed. It returns the settled
// same-invocation results in call order.
func (p *Pass) Wait(ctx context.Context, interval time.Duration, onLand func(Result), heartbeat func()) []Result {
	seen := map[string]bool{}
	report := func() int {
		p.mu.Lock()
		var fresh []Result
		for _, id := range p.ids {
			if r, ok := p.done[id]; ok && !seen[id] {
				seen[id] = true
				fresh = append(fresh, r)
			}
		}
		running := len(p.running)
		p.mu.Unlock()
		for _, r := range fresh {
			if onLand != nil {
				onLand(r)
			}
		}
		return running
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for report() > 0 {
		select {
		case <-p.changed:
		case <-tick.C:
			if heartbeat != nil {
				heartbeat()
			}
		case <-p.workCtx.Done():
			p.halt()
		case <-ctx.Done():
			p.halt()
		}
	}
	p.stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Result
	for _, id := range p.ids {
		if r, ok := p.done[id]; ok {
			out = append(out, r)
		}
	}
	return out
}

// Call names one async call.
type Call struct {
	ResultID   string `json:"resultId"`
	ToolCallID string `json:"toolCallId"`
	ToolName   string `json:"toolName"`
}

// Calls lists the pass's async calls in the order the model made them.
func (p *Pass) Calls() []Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Call, 0, len(p.ids))
	for _, id := range p.ids {
		out = append(out, p.calls[id])
	}
	return out
}

// Abort stops same-invocation work still running and settles it as failed: for a pass that
// ends in an error.
func (p *Pass) Abort() { p.halt() }

// Group returns the dispatch group to seal for this pass: every async call it made.
func (p *Pass) Group() Group {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Group{
		ID: p.cfg.GroupID, AccountID: p.cfg.AccountID, AgentID: p.cfg.AgentID, ConversationID: p.cfg.ConversationID,
		Expected: append([]string(nil), p.ids...), Delivery: p.cfg.Delivery, SealedBy: "parent",
	}
}
