package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/approval"
	"github.com/agentharness/harness/shared/asynctools"
	"github.com/agentharness/harness/shared/httpjson"
	"github.com/agentharness/harness/shared/ids"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/store"
	"github.com/agentharness/harness/shared/stream"
	"github.com/agentharness/harness/shared/turn"
)

// turnRequest is the AI SDK chat request (id, messages, trigger, messageId) plus agentId and
// eventId; {"agentId":…,"message":"text"} is the curl shorthand. A request either brings a new
// user message or answers held tool calls: in its messages (the AI SDK's approval-responded
// tool parts) or in the compact "approvals" list.
type turnRequest struct {
	ID        string      `json:"id"`
	Messages  []uiMessage `json:"messages"`
	Trigger   string      `json:"trigger"`
	MessageID string      `json:"messageId"`
	AgentID   string      `json:"agentId"`
	EventID   string      `json:"eventId"`
	Message   *string     `json:"message"`
	Approvals []decision  `json:"approvals"`
	// OnPendingApprovals says what a new message does to calls still awaiting approval:
	// "reject" (the default: 409) or "deny" (they are denied first, then the message runs).
	OnPendingApprovals string `json:"onPendingApprovals"`
	// ToolApproval overrides tools' approval policies for this request.
	ToolApproval map[string]approval.Status `json:"toolApproval"`
}

type uiMessage struct {
	ID    string   `json:"id"`
	Role  string   `json:"role"`
	Parts []uiPart `json:"parts"`
}

// uiPart holds the fields of a UI message part the harness reads: text, and the approval
// response of a tool part.
type uiPart struct {
	Type       string          `json:"type"`
	Text       string          `json:"text"`
	ToolCallID string          `json:"toolCallId"`
	State      string          `json:"state"`
	Input      json.RawMessage `json:"input"`
	Approval   *struct {
		ID       string `json:"id"`
		Approved *bool  `json:"approved"`
		Reason   string `json:"reason"`
	} `json:"approval"`
}

// decision is the user's answer to one held call. ToolCallID and Input, when given (the AI SDK
// sends both), must match the call the approval was asked for.
type decision struct {
	ApprovalID string          `json:"approvalId"`
	Approved   *bool           `json:"approved"`
	Reason     string          `json:"reason"`
	ToolCallID string          `json:"toolCallId"`
	Input      json.RawMessage `json:"input,omitempty"`
	// from is where an AI SDK tool part carried the decision ("messages[1].parts[2].approval"),
	// so a refusal names the field the client sent; empty for the compact "approvals" list.
	from string
}

// field names a decision's key in the request: approvals[i].<compact> or <from>.<ui>.
func (d decision) field(i int, compact, ui string) string {
	if d.from != "" {
		return d.from + "." + ui
	}
	return fmt.Sprintf("approvals[%d].%s", i, compact)
}

// turnInput is what a request brings: a new user message, or decisions on held calls.
type turnInput struct {
	message   *model.Message
	decisions []decision
	// respondsTo is the client's id of the assistant message the decisions answer, so the
	// resumed stream continues that message.
	respondsTo string
	// cancel ends the turn with its decisions, all denials: the model is not called again.
	cancel bool
}

// input returns the request's new user message or its decisions. History is held by the
// server, so only the client's latest message is read.
func (req *turnRequest) input(newID func() string) (turnInput, error) {
	if len(req.Approvals) > 0 {
		if req.Message != nil {
			return turnInput{}, httpjson.FieldError("approvals", `send either "message" or "approvals", not both`)
		}
		return turnInput{decisions: req.Approvals, respondsTo: req.MessageID}, nil
	}
	if req.Message != nil {
		if strings.TrimSpace(*req.Message) == "" {
			return turnInput{}, httpjson.FieldError("message", "is empty")
		}
		return turnInput{message: &model.Message{ID: newID(), Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: *req.Message}}}}, nil
	}
	if len(req.Messages) == 0 {
		return turnInput{}, httpjson.FieldError("messages", `the request has no user message: send "messages" (AI SDK chat request), "message" (text) or "approvals"`)
	}
	at := len(req.Messages) - 1
	if req.MessageID != "" {
		for i, m := range req.Messages {
			if m.ID == req.MessageID && m.Role == "assistant" {
				at = i
			}
		}
	}
	last := req.Messages[at]
	if last.Role == "assistant" {
		var ds []decision
		for i, p := range last.Parts {
			if p.State == "approval-responded" && p.Approval != nil {
				ds = append(ds, decision{ApprovalID: p.Approval.ID, Approved: p.Approval.Approved, Reason: p.Approval.Reason, ToolCallID: p.ToolCallID, Input: p.Input,
					from: fmt.Sprintf("messages[%d].parts[%d].approval", at, i)})
			}
		}
		if len(ds) == 0 {
			return turnInput{}, httpjson.FieldError(fmt.Sprintf("messages[%d]", at), "the last message is the assistant's and answers no approval request: end the messages with a user message, or with tool parts in state approval-responded")
		}
		return turnInput{decisions: ds, respondsTo: last.ID}, nil
	}
	if last.Role != "user" {
		return turnInput{}, httpjson.FieldError(fmt.Sprintf("messages[%d].role", at), fmt.Sprintf("the last message must have role user, got %q", last.Role))
	}
	var text strings.Builder
	for _, p := range last.Parts {
		if p.Type == "text" {
			text.WriteString(p.Text)
		}
	}
	if strings.TrimSpace(text.String()) == "" {
		return turnInput{}, httpjson.FieldError(fmt.Sprintf("messages[%d].parts", at), "the last user message has no text part")
	}
	id := last.ID
	if id == "" {
		id = newID()
	}
	return turnInput{message: &model.Message{ID: id, Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: text.String()}}}}, nil
}

func (req *turnRequest) validate() error {
	switch {
	case req.AgentID == "":
		return httpjson.FieldError("agentId", "is required")
	case req.Trigger != "" && req.Trigger != "submit-message":
		return httpjson.FieldError("trigger", fmt.Sprintf("%q is not supported (only submit-message)", req.Trigger))
	case req.OnPendingApprovals != "" && req.OnPendingApprovals != "reject" && req.OnPendingApprovals != "deny":
		return httpjson.FieldError("onPendingApprovals", fmt.Sprintf(`%q is not supported: use "reject" or "deny"`, req.OnPendingApprovals))
	}
	if err := httpjson.CheckID("agentId", req.AgentID); err != nil {
		return err
	}
	for _, f := range []struct{ name, id string }{{"id", req.ID}, {"eventId", req.EventID}, {"messageId", req.MessageID}} {
		if err := httpjson.CheckOptionalID(f.name, f.id); err != nil {
			return err
		}
	}
	for i, m := range req.Messages {
		if err := httpjson.CheckOptionalID(fmt.Sprintf("messages[%d].id", i), m.ID); err != nil {
			return err
		}
	}
	return nil
}

func checkDecisions(ds []decision, conversationID string) error {
	if conversationID == "" {
		return httpjson.FieldError("id", "the conversation is required with approval responses")
	}
	seen := map[string]bool{}
	for i, d := range ds {
		switch {
		case d.ApprovalID == "":
			return httpjson.FieldError(d.field(i, "approvalId", "id"), "is required")
		case !ids.Valid(d.ApprovalID):
			return httpjson.CheckID(d.field(i, "approvalId", "id"), d.ApprovalID)
		case d.Approved == nil:
			return httpjson.FieldError(d.field(i, "approved", "approved"), "is required (true or false)")
		case seen[d.ApprovalID]:
			return httpjson.FieldError(d.field(i, "approvalId", "id"), fmt.Sprintf("approval %s is answered twice", d.ApprovalID))
		}
		seen[d.ApprovalID] = true
	}
	return nil
}

// checkMessageSize refuses, with 413 naming the field, a user message larger than a stored
// message may be, before anything is written.
func checkMessageSize(field string, m *model.Message) error {
	if n := store.MessageBytes(*m); n > store.MaxMessageBytes {
		return &httpjson.Error{Status: http.StatusRequestEntityTooLarge, Extra: map[string]any{"field": field},
			Message: fmt.Sprintf("%s: the message takes %d bytes stored, more than the %d one message may hold", field, n, store.MaxMessageBytes)}
	}
	return nil
}

func newMessageID() string { return store.NewID("msg_") }

// readTurn decodes and checks the request body.
func (h *Handler) readTurn(w http.ResponseWriter, r *http.Request) (*turnRequest, turnInput, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, turnInput{}, &httpjson.Error{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("request body is larger than %d bytes", h.opts.MaxBodyBytes)}
	}
	if err != nil {
		return nil, turnInput{}, &httpjson.Error{Status: http.StatusBadRequest, Message: "reading the request body: " + err.Error()}
	}
	if err := httpjson.CheckKeys(body); err != nil {
		return nil, turnInput{}, err
	}
	var req turnRequest
	if err := json.Unmarshal(body, &req); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return nil, turnInput{}, httpjson.FieldError(typeErr.Field, "must be a JSON "+typeErr.Type.String())
		}
		return nil, turnInput{}, &httpjson.Error{Status: http.StatusBadRequest, Message: "malformed JSON body: " + err.Error()}
	}
	if err := req.validate(); err != nil {
		return nil, turnInput{}, err
	}
	in, err := req.input(newMessageID)
	if err == nil && in.decisions != nil {
		err = checkDecisions(in.decisions, req.ID)
	}
	if err == nil && in.message != nil {
		field := "message"
		if req.Message == nil {
			field = fmt.Sprintf("messages[%d]", len(req.Messages)-1)
		}
		err = checkMessageSize(field, in.message)
	}
	if err != nil {
		return nil, turnInput{}, err
	}
	if req.ID == "" {
		req.ID = store.NewID("conv_")
	}
	return &req, in, nil
}

// turn runs POST /. Everything that can be refused is checked before the stream opens, so a
// refused request gets a JSON error and writes nothing.
func (h *Handler) turn(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	acc, err := httpjson.Authenticate(r, h.opts.Store)
	if err != nil {
		h.errs.Fail(w, r, err)
		return
	}
	req, in, err := h.readTurn(w, r)
	if err != nil {
		h.errs.Fail(w, r, err)
		return
	}
	cfg, err := h.agentFor(ctx, acc.ID, req, true)
	if err != nil {
		h.errs.Fail(w, r, err)
		return
	}
	now := h.opts.Now()
	if req.EventID != "" {
		if err := h.claimEvent(ctx, acc.ID, req, now); err != nil {
			h.errs.Fail(w, r, err)
			return
		}
	}
	releaseEvent := func() {
		if req.EventID == "" {
			return
		}
		if err := h.opts.Store.ReleaseEvent(context.WithoutCancel(ctx), acc.ID, req.EventID); err != nil {
			h.opts.Logger.ErrorContext(ctx, "releasing event", "eventId", req.EventID, "err", err)
		}
	}
	lease, plan, err := h.begin(ctx, acc.ID, req, in, now)
	if err != nil {
		releaseEvent()
		h.errs.Fail(w, r, err)
		return
	}
	cfg.Pause = h.pauseFunc(lease, req.AgentID)

	log := h.opts.Logger.With("accountId", acc.ID, "agentId", req.AgentID, "conversationId", req.ID)
	out := stream.Open(w, http.Header{"X-Conversation-Id": {req.ID}})
	send := func(chunk any) {
		if err := out.Send(chunk); err != nil {
			log.DebugContext(ctx, "client gone", "err", err)
		}
	}
	emit := func(ev turn.Event) {
		for _, c := range uiChunks(ev) {
			send(c)
		}
	}
	messageID := in.respondsTo
	if messageID == "" {
		messageID = newMessageID()
	}
	send(stream.Start(messageID))
	from := lease.NextSeq()
	d := &drive{
		h: h, log: log, accountID: acc.ID, agentID: req.AgentID, conversationID: req.ID,
		turnID: req.EventID, resumes: lease.Carried().PausedEvent, nonce: store.NewID(""), delivery: asynctools.Delivery{Kind: asynctools.DeliverStream},
		cfg: cfg, overrides: req.ToolApproval, turn: lease, emit: emit, heartbeat: func() { _ = out.Comment("keep-alive") },
	}
	res := d.run(ctx, plan)
	if res.status == store.EventCancelled {
		res.errText = "the client disconnected, which cancels an SSE turn; the conversation keeps every step finished before it"
	}

	// The turn's bookkeeping lands before the client sees the end, so its next request finds
	// the conversation free; it must land even when the client has gone.
	done, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err = d.conclude(done, plan, res, from, func() {
		if fin := finishChunk(req.ID, res); fin != nil {
			send(fin)
		}
	})
	if err != nil {
		log.ErrorContext(ctx, "reporting the event", "eventId", req.EventID, "err", err)
	}
	_ = out.Done()
}

// claimEvent records a request's event id, refusing one already used with 409.
func (h *Handler) claimEvent(ctx context.Context, accountID string, req *turnRequest, now time.Time) error {
	err := h.opts.Store.ClaimEvent(ctx, accountID, req.EventID, req.ID, now, h.opts.EventTTL)
	var dup *store.DuplicateEventError
	if errors.As(err, &dup) {
		return &httpjson.Error{Status: http.StatusConflict, Message: dup.Error(), Extra: map[string]any{"eventId": dup.EventID, "status": dup.Status}}
	}
	return err
}

// agentFor loads the request's agent with its per-request approval overrides. A stream
// cannot wait for an outside worker, so it refuses agents with external-dispatch tools.
func (h *Handler) agentFor(ctx context.Context, accountID string, req *turnRequest, stream bool) (agent.Config, error) {
	cfg, err := h.loadAgent(ctx, accountID, req.AgentID)
	if err != nil {
		return cfg, err
	}
	if stream && cfg.Tools != nil {
		for _, name := range cfg.Tools.Names() {
			if cfg.Tools.AsyncMode(name) == asynctools.ExternalDispatch {
				return cfg, &httpjson.Error{Status: http.StatusBadRequest, Message: fmt.Sprintf(
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
// waits for. Its refusals are *httpjson.Error, and on any error the lease is given back.
func (h *Handler) begin(ctx context.Context, accountID string, req *turnRequest, in turnInput, now time.Time) (*store.Turn, *turnPlan, error) {
	lease, err := h.opts.Store.BeginTurn(ctx, accountID, req.ID, req.AgentID, now, now.Add(h.opts.Lease))
	switch {
	case errors.Is(err, store.ErrBusy):
		return nil, nil, &httpjson.Error{Status: http.StatusConflict, Message: "conversation " + req.ID + " is busy with another turn; retry when it ends", Cause: err}
	case errors.Is(err, store.ErrAgentMismatch):
		return nil, nil, &httpjson.Error{Status: http.StatusConflict, Message: "conversation " + req.ID + " belongs to another agent"}
	case err != nil:
		return nil, nil, err
	}
	plan, err := h.planTurn(ctx, accountID, req, in, lease, now)
	if err != nil {
		if rerr := lease.Release(context.WithoutCancel(ctx)); rerr != nil {
			h.opts.Logger.ErrorContext(ctx, "releasing conversation", "conversationId", req.ID, "err", rerr)
		}
		return nil, nil, err
	}
	return lease, plan, nil
}

// planTurn refuses a request on a conversation that waits for async tools, then plans it
// against pending approvals.
func (h *Handler) planTurn(ctx context.Context, accountID string, req *turnRequest, in turnInput, lease *store.Turn, now time.Time) (*turnPlan, error) {
	if group, ids := lease.AsyncGroup(); group != "" {
		return nil, waitingForAsyncError(req.ID, ids)
	}
	return h.plan(ctx, accountID, req, in, lease, now)
}

// waitingForAsyncError refuses a request on a conversation that waits for async tool calls.
func waitingForAsyncError(conversationID string, resultIDs []string) error {
	return &httpjson.Error{Status: http.StatusConflict, Message: fmt.Sprintf(
		"conversation %s is waiting for %d async tool call(s) to complete; it continues by itself when they do",
		conversationID, len(resultIDs)), Extra: map[string]any{"pendingAsyncTools": resultIDs}}
}

// loadAgent loads the agent and builds its model and tools, before anything is written. A
// tool whose required variable does not resolve stops the turn here, before any model call.
func (h *Handler) loadAgent(ctx context.Context, accountID, agentID string) (agent.Config, error) {
	cfg, err := h.opts.Agents.Load(ctx, accountID, agentID)
	if errors.Is(err, store.ErrNotFound) {
		return agent.Config{}, &httpjson.Error{Status: http.StatusNotFound, Message: "agent " + agentID + " not found"}
	}
	invalid := func(err error) error {
		return &httpjson.Error{Status: http.StatusBadRequest, Message: "agent " + agentID + " cannot run: " + err.Error()}
	}
	var fe *agentconfig.FieldError
	if errors.As(err, &fe) {
		return agent.Config{}, invalid(err)
	}
	if err != nil {
		return agent.Config{}, err
	}
	m, err := h.opts.Model(cfg.Model)
	if err != nil {
		return agent.Config{}, invalid(err)
	}
	tools, err := h.opts.Tools(cfg.Tools)
	if err != nil {
		return agent.Config{}, invalid(err)
	}
	return agent.Config{Model: m, Tools: tools, System: cfg.System, MaxSteps: cfg.MaxSteps, NewID: newMessageID}, nil
}

// runResult is how a turn (or the part of it this invocation ran) ended: the event status, the
// tokens it used, the finish chunk to send once the bookkeeping has landed, and what it waits
// for.
type runResult struct {
	status string
	usage  model.Usage
	// reason is the finish reason a client is told; empty when the turn ended without one
	// (its context was cancelled).
	reason model.FinishReason
	// errText is the client-safe reason of a failed turn, errExtra the refusal's details.
	errText  string
	errExtra map[string]any
	// pendingApprovals and asyncGroup/pendingAsync say what a waiting turn waits for.
	pendingApprovals []pendingApproval
	asyncGroup       string
	pendingAsync     []asyncView
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

// uiChunks encodes one turn event as the UI message chunks of the AI SDK stream.
func uiChunks(ev turn.Event) []any {
	switch ev.Kind {
	case turn.ApprovalDecided:
		return []any{stream.ToolApprovalResponse(ev.Decision.ApprovalID, ev.Decision.Approved, ev.Decision.Reason)}
	case turn.AsyncLanded:
		r := ev.Result
		v := map[string]any{"resultId": r.ID, "toolCallId": r.ToolCallID, "toolName": r.ToolName, "status": r.Status}
		if r.Status == asynctools.Completed {
			v["response"] = r.Response
		} else {
			v["error"] = r.Error
		}
		return []any{stream.Data("async-result", v, false)}
	case turn.Failed:
		return []any{stream.Error(ev.Error)}
	}
	le := ev.Loop
	switch le.Type {
	case agent.StepStart:
		return []any{stream.StartStep()}
	case agent.StepFinish:
		return []any{stream.FinishStep()}
	case agent.TextStart:
		return []any{stream.TextStart(le.ID)}
	case agent.TextDelta:
		return []any{stream.TextDelta(le.ID, le.Text)}
	case agent.TextEnd:
		return []any{stream.TextEnd(le.ID)}
	case agent.ToolInputStart:
		return []any{stream.ToolInputStart(le.ToolCallID, le.ToolName)}
	case agent.ToolInputDelta:
		return []any{stream.ToolInputDelta(le.ToolCallID, le.Text)}
	case agent.ToolInputAvailable:
		return []any{stream.ToolInputAvailable(le.ToolCallID, le.ToolName, le.Input)}
	case agent.ToolInputError:
		return []any{stream.ToolInputError(le.ToolCallID, le.ToolName, le.Input, le.ErrorText)}
	case agent.ToolOutput:
		return []any{stream.ToolOutput(le.ToolCallID, le.Output)}
	case agent.ToolOutputError:
		return []any{stream.ToolOutputError(le.ToolCallID, le.ErrorText)}
	case agent.Source:
		return []any{stream.SourceURL(le.Source.ID, le.Source.URL, le.Source.Title)}
	case agent.ToolApprovalRequest:
		return []any{stream.ToolApprovalRequest(le.ApprovalID, le.ToolCallID, le.Text, false)}
	case agent.ToolOutputDenied:
		if le.Automatic {
			// A policy refused the call: say so the way the AI SDK does, as an automatic
			// request and its denial, so the client's part has its approval.
			return []any{
				stream.ToolApprovalRequest(le.ApprovalID, le.ToolCallID, "", true),
				stream.ToolApprovalResponse(le.ApprovalID, false, le.ErrorText),
				stream.ToolOutputDenied(le.ToolCallID),
			}
		}
		return []any{stream.ToolOutputDenied(le.ToolCallID)}
	}
	return nil
}

// finishChunk is the finish chunk that ends a turn's stream, with what the turn waits for in
// its metadata; nil when the turn ended without a finish reason.
func finishChunk(conversationID string, res runResult) any {
	switch res.reason {
	case "":
		return nil
	case model.FinishError:
		return stream.Finish(string(model.FinishError), nil)
	}
	meta := map[string]any{"conversationId": conversationID, "usage": res.usage}
	if len(res.pendingApprovals) > 0 {
		meta["pendingApprovals"] = res.pendingApprovals
	}
	if res.status == store.EventWaitingAsync {
		meta["pendingAsyncTools"] = res.pendingAsync
	}
	return stream.Finish(string(res.reason), meta)
}
