package appserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/connections"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/tool/subagenttools"
	"github.com/agentharness/harness/shared/turn"
	"github.com/agentharness/harness/shared/turn/follow"
	"github.com/agentharness/harness/shared/wire/httpjson"
	"github.com/agentharness/harness/shared/wire/wsconn"
)

// Poster delivers one frame to a WebSocket connection, and closes one (a revoked one).
type Poster = connections.Poster

// runtimeScope is the App Server's name for a runtime: an agent and a conversation.
type runtimeScope struct {
	AgentID        string `json:"agent_id"`
	ConversationID string `json:"conversation_id"`
}

// check refuses a runtime whose ids are missing or break the id grammar; at prefixes the
// fields it names ("runtime.").
func (rt runtimeScope) check(at string) error {
	if err := httpjson.CheckID(at+"agent_id", rt.AgentID); err != nil {
		return err
	}
	return httpjson.CheckID(at+"conversation_id", rt.ConversationID)
}

// subscriberTTL is how long a runtime's subscriber list is reused before it is read again, so
// a controller that reconnects mid-turn gets the rest of it.
const subscriberTTL = time.Second

// Text deltas are coalesced: in AWS every frame is an @connections request, and a model streams
// a token or two per delta. Text waits at most textWindow, or until textLimit bytes or any other
// event, so the output keeps its order and stays live.
const (
	textWindow = 100 * time.Millisecond
	textLimit  = 16 << 10
)

// wsOut sends a runtime's events to the connections subscribed to it, each on the channel it
// belongs to: stream_delta and runtime updates on the stream channel, requests for the
// controller on the control channel. It turns the UI chunks a turn produces into the App
// Server's stream deltas.
type wsOut struct {
	reg     *connections.Registry
	poster  Poster
	log     *slog.Logger
	now     func() time.Time
	account string
	rt      runtimeScope
	runID   string
	// only, when set, narrows the output to one connection (and the account's stream-channel
	// connections): a replay is for the connection that asked.
	only string
	// follow reads the runtime's latest turn from its stream log; nil without a log.
	follow func(ctx context.Context, after int64) (iter.Seq2[turn.Logged, error], bool, error)

	// turnMu keeps a replay (serveReplays) from landing in the middle of an event's frames.
	turnMu sync.Mutex
	// logged is the stream log's sequence number of the last event sent, -1 before the first.
	logged int64

	mu sync.Mutex
	// subs are the connections the output goes to; pinned keeps them from being read again.
	subs    []connections.Subscriber
	pinned  bool
	fetched time.Time
	// reached: the last frame reached a subscriber of the runtime (an observer does not count).
	reached bool
	// seq is the last event_seq sent.
	seq int64
	// calls remembers each tool call's name and input, which an approval request repeats.
	calls map[string]toolCallView
	// executing are the async calls started so far.
	executing []string
	// text is assistant text or reasoning not sent yet; window is how long it may wait (0 sends
	// each delta).
	text   *pendingText
	window time.Duration
	// failed: the run's loop_error went out.
	failed bool
	// subagents are the run's subagent calls, in the order they started (update_subagent_state).
	subagents []subagentSnapshot
}

// subagentSnapshot is one subagent call as update_subagent_state shows it.
type subagentSnapshot struct {
	SubagentID           string `json:"subagent_id"`
	SubagentType         string `json:"subagent_type"`
	Status               string `json:"status"`
	Description          string `json:"description"`
	ToolCallID           string `json:"tool_call_id"`
	ConversationID       string `json:"conversation_id"`
	ParentAgentID        string `json:"parent_agent_id"`
	ParentConversationID string `json:"parent_conversation_id"`
	StartTime            int64  `json:"start_time"`
	DurationMS           int64  `json:"duration_ms,omitempty"`
	Error                string `json:"error,omitempty"`
}

// subagent sends update_subagent_state: every subagent call of the run so far, one changed.
func (o *wsOut) subagent(ctx context.Context, p subagenttools.Progress) {
	now := o.now().UnixMilli()
	o.mu.Lock()
	i := slices.IndexFunc(o.subagents, func(s subagentSnapshot) bool { return s.ToolCallID == p.ToolCallID })
	if i < 0 {
		o.subagents = append(o.subagents, subagentSnapshot{
			SubagentID: p.ThreadID, SubagentType: p.Agent, ToolCallID: p.ToolCallID, ConversationID: p.ThreadID,
			ParentAgentID: o.rt.AgentID, ParentConversationID: o.rt.ConversationID, StartTime: now, Description: p.Agent,
		})
		i = len(o.subagents) - 1
	}
	snap := &o.subagents[i]
	switch {
	case p.State == subagenttools.Started && p.Text != "":
		snap.Description, snap.Status = p.Text, "running"
	case p.State != subagenttools.Finished:
		snap.Status = "running"
	case p.Status == store.EventCompleted:
		snap.Status, snap.DurationMS = "completed", now-snap.StartTime
	default:
		snap.Status, snap.DurationMS, snap.Error = "error", now-snap.StartTime, p.Text
	}
	list := slices.Clone(o.subagents)
	o.mu.Unlock()
	o.send(ctx, connections.Stream, map[string]any{"type": "update_subagent_state", "subagents": list}, true)
}

// pendingText is one text or reasoning part's deltas waiting to go out as one.
type pendingText struct {
	id string
	// reasoning: the part is the model's reasoning, sent as a reasoning_message.
	reasoning bool
	content   strings.Builder
	timer     *time.Timer
}

type toolCallView struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	ID        string `json:"tool_call_id"`
}

func (h *server) newOut(accountID string, rt runtimeScope, runID string) *wsOut {
	return &wsOut{
		reg: h.opts.Connections, poster: h.opts.Poster, log: h.opts.Logger.With("conversationId", rt.ConversationID),
		now: h.opts.Now, account: accountID, rt: rt, runID: runID, calls: map[string]toolCallView{},
		window: textWindow, logged: -1,
		follow: func(ctx context.Context, after int64) (iter.Seq2[turn.Logged, error], bool, error) {
			return follow.Turn(ctx, h.eng, accountID, rt.ConversationID, after)
		},
	}
}

// send posts msg to every subscriber of the runtime that listens on channel. Runtime events
// get the envelope (runtime, event_seq, emitted_at, idempotency_key). A connection found gone
// is forgotten.
func (o *wsOut) send(ctx context.Context, channel string, msg map[string]any, envelope bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.flushText(ctx)
	o.post(ctx, channel, msg, envelope)
}

// addText queues a text delta (or a reasoning one), sending what is queued first when it
// belongs to another part.
func (o *wsOut) addText(ctx context.Context, id, delta string, reasoning bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.text != nil && o.text.id != id {
		o.flushText(ctx)
	}
	if o.text == nil {
		t := &pendingText{id: id, reasoning: reasoning}
		o.text = t
		// The turn's context may be cut (an abort) before the timer fires; the text still goes.
		ctx := context.WithoutCancel(ctx)
		t.timer = time.AfterFunc(o.window, func() {
			o.mu.Lock()
			defer o.mu.Unlock()
			if o.text == t {
				o.flushText(ctx)
			}
		})
	}
	o.text.content.WriteString(delta)
	if o.window <= 0 || o.text.content.Len() >= textLimit {
		o.flushText(ctx)
	}
}

// flushText sends the queued text as one assistant_message delta, or reasoning as one
// reasoning_message delta. o.mu is held.
func (o *wsOut) flushText(ctx context.Context) {
	t := o.text
	if t == nil {
		return
	}
	o.text = nil
	t.timer.Stop()
	d := message("assistant_message", map[string]any{"id": t.id, "content": t.content.String()})
	if t.reasoning {
		d = reasoningMessage(t.id, t.content.String())
	}
	d = o.stamp(d)
	o.post(ctx, connections.Stream, map[string]any{"type": "stream_delta", "delta": d}, true)
}

// refresh reads the runtime's connections again when the list is older than subscriberTTL (or
// force). o.mu is held.
func (o *wsOut) refresh(ctx context.Context, force bool) {
	now := o.now()
	if o.pinned || (!force && o.subs != nil && now.Sub(o.fetched) <= subscriberTTL) {
		return
	}
	subs, err := o.reg.Subscribers(ctx, o.account, o.rt.ConversationID)
	if err != nil {
		o.log.ErrorContext(ctx, "listing the runtime's connections", "err", err)
		return
	}
	o.subs, o.fetched = subs, now
}

// post is send without the queued text. A broadcast skips the connections waiting for their
// replay: they get the turn from its log first (serveReplays). o.mu is held.
func (o *wsOut) post(ctx context.Context, channel string, msg map[string]any, envelope bool) {
	now := o.now()
	o.refresh(ctx, false)
	if envelope {
		// Sequence numbers grow across invocations too (a continuation runs elsewhere), so they
		// come from the clock: microseconds, which stay exact in a JavaScript number (below
		// 2^53), and one more than the last when two frames share a microsecond.
		o.seq = max(o.seq+1, now.UnixMicro())
		msg["runtime"], msg["event_seq"] = o.rt, o.seq
		msg["emitted_at"] = now.UTC().Format(time.RFC3339Nano)
		msg["idempotency_key"] = fmt.Sprintf("%s:%d", o.runID, o.seq)
	}
	b, err := json.Marshal(msg)
	if err != nil {
		o.log.ErrorContext(ctx, "encoding a websocket event", "err", err)
		return
	}
	o.reached = false
	kept := o.subs[:0]
	for _, s := range o.subs {
		if (s.Channel != connections.Both && s.Channel != channel) || (o.only != "" && s.ConnectionID != o.only && s.Channel != connections.Stream) ||
			(o.only == "" && s.Replay) {
			kept = append(kept, s)
			continue
		}
		if !s.Until.IsZero() && !now.Before(s.Until) {
			// Its token expired: it gets nothing more, and is closed now rather than at its next frame.
			if err := o.reg.End(ctx, o.poster, s.ConnectionID, expired(s.Until)); err != nil {
				o.log.WarnContext(ctx, "ending an expired connection", "connectionId", s.ConnectionID, "err", err)
			}
			continue
		}
		err := o.poster.Post(ctx, s.ConnectionID, b)
		if errors.Is(err, wsconn.ErrGone) {
			if derr := o.reg.Disconnect(context.WithoutCancel(ctx), s.ConnectionID); derr != nil {
				o.log.WarnContext(ctx, "forgetting a closed connection", "connectionId", s.ConnectionID, "err", derr)
			}
			continue
		}
		if err != nil {
			o.log.WarnContext(ctx, "posting to a connection", "connectionId", s.ConnectionID, "err", err)
		} else if !s.Observer {
			o.reached = true
		}
		kept = append(kept, s)
	}
	o.subs = kept
}

// replayWait bounds how long a replay waits for the log to hold the output it replays.
const replayWait = 5 * time.Second

// serveReplays gives each connection that subscribed asking for a replay (sync, runtime_start)
// the turn's output so far from its stream log, and then the live output after it, so the
// connection sees every frame of the turn once and in order. The turn's invocation calls it
// between events: force reads the connections now rather than when the list goes stale. Before
// the first event it does nothing; that event serves them.
func (o *wsOut) serveReplays(ctx context.Context, force bool) {
	o.turnMu.Lock()
	defer o.turnMu.Unlock()
	if o.logged >= 0 {
		o.serve(ctx, o.logged, force)
	}
}

// serve is serveReplays through log entry through (none when through < 0). o.turnMu is held.
func (o *wsOut) serve(ctx context.Context, through int64, force bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.refresh(ctx, force)
	if !slices.ContainsFunc(o.subs, func(s connections.Subscriber) bool { return s.Replay }) {
		return
	}
	o.flushText(ctx) // the replay covers the text held back; it must not reach the connection twice
	for i := range o.subs {
		s := &o.subs[i]
		if !s.Replay {
			continue
		}
		claimed, err := o.reg.ClaimReplay(ctx, o.account, o.rt.ConversationID, s.ConnectionID)
		if err != nil {
			o.log.WarnContext(ctx, "claiming a connection's replay", "connectionId", s.ConnectionID, "err", err)
			continue // asked again at the next event
		}
		if claimed && through >= 0 {
			to := o.replica(*s)
			if _, err := to.fromLog(ctx, through); err != nil {
				o.log.WarnContext(ctx, "replaying the turn to a connection; it gets the live output from here", "connectionId", s.ConnectionID, "err", err)
			}
		}
		s.Replay = false
	}
}

// replica is an output to connection s alone that sends each text part whole, for a replay.
func (o *wsOut) replica(s connections.Subscriber) *wsOut {
	s.Replay = false
	return &wsOut{
		reg: o.reg, poster: o.poster, log: o.log, now: o.now, account: o.account, rt: o.rt, runID: o.runID,
		calls: map[string]toolCallView{}, window: time.Hour, logged: -1, follow: o.follow,
		subs: []connections.Subscriber{s}, pinned: true,
	}
}

// fromLog sends the runtime's latest turn from its stream log, as its events were sent live, up
// to entry through (to where the turn waits or ends when through < 0). It returns how the turn
// ended when the log says so last; the caller decides whether to send that.
func (o *wsOut) fromLog(ctx context.Context, through int64) (*turn.Outcome, error) {
	if o.follow == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, replayWait)
	defer cancel()
	entries, found, err := o.follow(ctx, -1)
	if err != nil || !found {
		return nil, err
	}
	var last *turn.Outcome
	for e, err := range entries {
		if err != nil {
			o.flush(ctx)
			return nil, err
		}
		last = e.Outcome
		if e.Event != nil {
			o.event(ctx, *e.Event)
		}
		if through >= 0 && e.Seq >= through {
			break
		}
	}
	o.flush(ctx)
	return last, nil
}

// flush sends the text held back.
func (o *wsOut) flush(ctx context.Context) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.flushText(ctx)
}

// delta sends one stream_delta. Letta message deltas carry type "message"; lifecycle deltas
// (loop_error, status) do not.
func (o *wsOut) delta(ctx context.Context, d map[string]any) {
	o.send(ctx, connections.Stream, map[string]any{"type": "stream_delta", "delta": o.stamp(d)}, true)
}

// stamp gives a delta its id (when it has none), date and run.
func (o *wsOut) stamp(d map[string]any) map[string]any {
	if d["id"] == nil {
		d["id"] = store.NewID("msg_")
	}
	d["date"], d["run_id"] = o.now().UTC().Format(time.RFC3339Nano), o.runID
	return d
}

// summaryMessage is a compaction's summary_message: the turns before the running one were
// summarized so the model's requests stay within the agent's context budget (docs/agents.md).
func summaryMessage(id, summary string, c *model.Compaction) map[string]any {
	fields := map[string]any{"id": id, "summary": summary}
	if c != nil {
		fields["compacted_messages"], fields["tokens_before"], fields["tokens_after"] = c.Messages, c.TokensBefore, c.TokensAfter
	}
	return message("summary_message", fields)
}

// reasoningMessage is Letta's reasoning_message: the model's thinking, from a reasoning model.
// Its signature stays with the harness, which sends it back to the model.
func reasoningMessage(id, reasoning string) map[string]any {
	return message("reasoning_message", map[string]any{"id": id, "reasoning": reasoning, "source": "reasoner_model"})
}

func message(kind string, fields map[string]any) map[string]any {
	fields["type"], fields["message_type"] = "message", kind
	return fields
}

// loopStatus sends update_loop_status.
func (o *wsOut) loopStatus(ctx context.Context, status string, runs []string, executing []string) {
	if runs == nil {
		runs = []string{}
	}
	if executing == nil {
		executing = []string{}
	}
	o.send(ctx, connections.Stream, map[string]any{"type": "update_loop_status", "loop_status": map[string]any{
		"status": status, "active_run_ids": runs, "executing_tool_call_ids": executing,
	}}, true)
}

// queueRemoval is an input that left the runtime's queue: "dequeued" when its run started,
// "cancelled" when it was dropped.
type queueRemoval struct {
	ClientMessageID string `json:"client_message_id"`
	Disposition     string `json:"disposition"`
}

// queue sends update_queue: the inputs accepted while another run was busy and not started
// yet, read from the connections table, with the transitions that just removed some.
func (o *wsOut) queue(ctx context.Context, removed ...queueRemoval) {
	items, err := o.reg.Queue(ctx, o.account, o.rt.ConversationID)
	if err != nil {
		o.log.ErrorContext(ctx, "listing the runtime's queue", "err", err)
		return
	}
	if items == nil {
		items = []connections.Queued{}
	}
	if removed == nil {
		removed = []queueRemoval{}
	}
	o.send(ctx, connections.Stream, map[string]any{"type": "update_queue", "queue": items, "removed": removed}, true)
}

// event encodes one turn event as the App Server's frames. Connections that asked for a replay
// get the turn so far first.
func (o *wsOut) event(ctx context.Context, ev turn.Event) {
	o.turnMu.Lock()
	defer o.turnMu.Unlock()
	through := int64(-1) // an event the log lacks leaves nothing to replay
	if ev.InLog {
		through = ev.Seq - 1
		defer func() { o.logged = ev.Seq }()
	}
	o.serve(ctx, through, false)
	switch ev.Kind {
	case turn.AsyncStarted:
		// The async call's result comes later. Say so now, before the group is sealed and its
		// continuation may start elsewhere.
		o.mu.Lock()
		o.executing = append(o.executing, ev.Loop.ToolCallID)
		ids := slices.Clone(o.executing)
		o.mu.Unlock()
		o.loopStatus(ctx, "EXECUTING_CLIENT_SIDE_TOOL", []string{o.runID}, ids)
	case turn.AsyncLanded:
		o.results(ctx, []asynctools.Result{ev.Result})
	case turn.Failed:
		o.failure(ctx, ev.Error)
	case turn.Subagent:
		o.subagent(ctx, *ev.Subagent)
	case turn.ToolProgress:
		p := ev.ToolProgress
		o.delta(ctx, message("tool_progress_message", map[string]any{"tool_call_id": p.ToolCallID, "progress": *p}))
	case turn.PromptTool:
		// Tool progress: the prompt tool's nested loop, under the call it belongs to.
		p := ev.PromptTool
		o.delta(ctx, message("tool_progress_message", map[string]any{"tool_call_id": p.ToolCallID, "progress": *p}))
	case turn.Loop:
		le := ev.Loop
		switch le.Type {
		case agent.TextDelta:
			o.addText(ctx, le.ID, le.Text, false)
		case agent.ReasoningDelta:
			o.addText(ctx, le.ID, le.Text, true)
		case agent.ToolInputAvailable:
			o.toolCall(ctx, le.ToolCallID, le.ToolName, le.Input)
		case agent.ToolInputError:
			// A call the harness could not run (unknown tool, bad arguments) is still a call.
			o.toolCall(ctx, le.ToolCallID, le.ToolName, le.Input)
			o.toolReturn(ctx, le.ToolCallID, le.ErrorText, false)
		case agent.ToolOutput:
			o.toolReturn(ctx, le.ToolCallID, outputText(le.Output), true)
		case agent.ToolOutputError:
			o.toolReturn(ctx, le.ToolCallID, le.ErrorText, false)
		case agent.ToolOutputDenied:
			o.toolReturn(ctx, le.ToolCallID, "the tool call was denied", false)
		case agent.Compacted:
			o.delta(ctx, summaryMessage(le.ID, le.Text, le.Compaction))
		case agent.ToolApprovalRequest:
			if ev.Child != "" {
				// A subagent's held call, put to the controller now: the run's own are put
				// when it stops for them (end).
				o.mu.Lock()
				call, ok := o.calls[le.ToolCallID]
				o.mu.Unlock()
				if !ok {
					call = toolCallView{Name: le.ToolName, Arguments: "{}", ID: le.ToolCallID}
				}
				o.approvals(ctx, []approvalAsk{{approvalID: le.ApprovalID, call: call}})
			}
		}
	}
}

// toolCall sends a tool call, and remembers it for the approval request that may repeat it.
func (o *wsOut) toolCall(ctx context.Context, id, name string, input json.RawMessage) {
	call := toolCallView{Name: name, Arguments: string(input), ID: id}
	o.mu.Lock()
	o.calls[id] = call
	o.mu.Unlock()
	o.delta(ctx, message("tool_call_message", map[string]any{"tool_call": call, "tool_calls": []toolCallView{call}}))
}

// failure sends a terminal loop_error, once per run.
func (o *wsOut) failure(ctx context.Context, text string) {
	o.mu.Lock()
	sent := o.failed
	o.failed = true
	o.mu.Unlock()
	if !sent {
		o.delta(ctx, message("loop_error", map[string]any{"message": text, "stop_reason": "error", "is_terminal": true}))
	}
}

// toolReturnBytes bounds a tool's result in a tool_return_message, which carries it twice and
// must fit MaxFrameBytes with its ids and envelope.
const toolReturnBytes = (MaxFrameBytes - 8<<10) / 2

// toolReturn sends a tool's result as the model got it, cut where a frame cannot hold it whole
// (an escape-heavy result near agent.MaxResultBytes), with a note of what was left out.
func (o *wsOut) toolReturn(ctx context.Context, toolCallID, text string, ok bool) {
	text = agent.Truncate(text, toolReturnBytes)
	status := "success"
	if !ok {
		status = "error"
	}
	o.delta(ctx, message("tool_return_message", map[string]any{
		"tool_call_id": toolCallID, "tool_return": text, "status": status,
		"tool_returns": []map[string]any{{"tool_call_id": toolCallID, "tool_return": text, "status": status}},
	}))
}

// results sends the results of a settled group as they go back to the model.
func (o *wsOut) results(ctx context.Context, rs []asynctools.Result) {
	for _, r := range rs {
		if r.Status == asynctools.Completed {
			o.toolReturn(ctx, r.ToolCallID, outputText(r.Response), true)
		} else {
			o.toolReturn(ctx, r.ToolCallID, r.Error, false)
		}
	}
}

// approvals asks the controller about held calls: a control_request per call, which
// approval_response answers by its request_id, and the approval request as a stream delta.
func (o *wsOut) approvals(ctx context.Context, as []approvalAsk) {
	for _, a := range as {
		var input map[string]any
		_ = json.Unmarshal([]byte(a.call.Arguments), &input)
		if input == nil {
			input = map[string]any{}
		}
		o.send(ctx, connections.Control, map[string]any{
			"type": "control_request", "request_id": a.approvalID,
			"request": map[string]any{
				"subtype": "can_use_tool", "tool_name": a.call.Name, "input": input, "tool_call_id": a.call.ID,
				"permission_suggestions": []any{}, "blocked_path": nil,
			},
			"agent_id": o.rt.AgentID, "conversation_id": o.rt.ConversationID,
		}, false)
		o.delta(ctx, message("approval_request_message", map[string]any{
			"id": a.approvalID, "tool_call": a.call, "tool_calls": []toolCallView{a.call},
		}))
	}
}

// approvalAsk is one held call to put to the controller.
type approvalAsk struct {
	approvalID string
	call       toolCallView
}

// end reports how this invocation's part of the turn ended: a stop_reason when the turn is
// over or waits for approval, the executing calls when it waits for the controller's tools.
// heard reports whether a subscriber of the runtime (an observer does not count, nor a
// connection waiting for its replay) could get the turn's end, from the registry as it is now.
func (o *wsOut) heard(ctx context.Context) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.refresh(ctx, true)
	for _, s := range o.subs {
		if !s.Observer && !s.Replay && s.Channel != connections.Control {
			return true
		}
	}
	return false
}

// reached says whether the stop_reason reached a subscriber of the runtime.
func (o *wsOut) end(ctx context.Context, res turn.Outcome, aborted bool) (reached bool) {
	o.turnMu.Lock()
	defer o.turnMu.Unlock()
	defer func() {
		o.mu.Lock()
		reached = o.reached
		o.mu.Unlock()
	}()
	// Queued text goes now: the invocation may end (and freeze) before its timer fires.
	o.flush(ctx)
	switch res.Status {
	case turn.StatusWaitingAsync:
		return // said as each call started; the continuation carries the turn on
	case turn.StatusWaiting:
		asks := make([]approvalAsk, 0, len(res.PendingApprovals))
		o.mu.Lock()
		for _, p := range res.PendingApprovals {
			call, ok := o.calls[p.ToolCallID]
			if !ok {
				call = toolCallView{Name: p.ToolName, Arguments: "{}", ID: p.ToolCallID}
			}
			asks = append(asks, approvalAsk{approvalID: p.ApprovalID, call: call})
		}
		o.mu.Unlock()
		o.approvals(ctx, asks)
		o.usage(ctx, res.Usage)
		o.loopStatus(ctx, "WAITING_ON_APPROVAL", []string{o.runID}, nil)
		o.stop(ctx, "requires_approval")
		return
	}
	reason := "end_turn"
	switch {
	case aborted || res.Status == turn.StatusCancelled:
		reason = "cancelled"
	case res.Status == turn.StatusFailed:
		if res.Error != "" {
			o.failure(ctx, res.Error)
		}
		reason = "error"
	case res.Reason == model.FinishLength:
		reason = "max_tokens_exceeded"
	case res.Reason == model.FinishToolCalls:
		reason = "max_steps"
	}
	// The status goes first: a client that stops reading at stop_reason has seen it.
	o.usage(ctx, res.Usage)
	o.loopStatus(ctx, "WAITING_ON_INPUT", nil, nil)
	o.stop(ctx, reason)
	return
}

func (o *wsOut) usage(ctx context.Context, u model.Usage) {
	stats := map[string]any{
		"prompt_tokens": u.InputTokens, "completion_tokens": u.OutputTokens, "total_tokens": u.InputTokens + u.OutputTokens,
	}
	// Letta's usage statistics count the prompt cache's reads and writes among prompt_tokens.
	if d := u.InputTokenDetails; d != (model.InputTokenDetails{}) {
		stats["cached_input_tokens"], stats["cache_write_tokens"] = d.CacheReadTokens, d.CacheWriteTokens
	}
	// And its reasoning tokens among completion_tokens.
	if d := u.OutputTokenDetails; d != (model.OutputTokenDetails{}) {
		stats["reasoning_tokens"] = d.ReasoningTokens
	}
	o.delta(ctx, message("usage_statistics", stats))
}

func (o *wsOut) stop(ctx context.Context, reason string) {
	o.delta(ctx, message("stop_reason", map[string]any{"stop_reason": reason}))
}

// replay sends stored messages as the deltas they were streamed as, for sync.
func (o *wsOut) replay(ctx context.Context, msgs []model.Message) {
	for _, m := range model.WithoutNested(msgs) {
		if m.IsSummary() {
			o.delta(ctx, summaryMessage(m.ID, m.Text(), m.Compaction))
			continue
		}
		for _, p := range m.Parts {
			switch {
			case m.Role == model.RoleAssistant && p.Type == model.PartReasoning && p.Text != "":
				o.delta(ctx, reasoningMessage(m.ID+"-reasoning", p.Text)) // its own id: the text has the message's
			case m.Role == model.RoleAssistant && p.Type == model.PartText && p.Text != "":
				o.delta(ctx, message("assistant_message", map[string]any{"id": m.ID, "content": p.Text}))
			case p.Type == model.PartToolCall:
				o.toolCall(ctx, p.ToolCallID, p.ToolName, p.Input)
			case p.Type == model.PartToolResult && !asynctools.IsPlaceholder(p.Output):
				o.toolReturn(ctx, p.ToolCallID, outputText(p.Output), !p.IsError)
			}
		}
	}
}

// outputText is a tool output as text: a JSON string unquoted, anything else as JSON.
func outputText(out json.RawMessage) string {
	var s string
	if json.Unmarshal(out, &s) == nil {
		return s
	}
	return strings.TrimSpace(string(out))
}
