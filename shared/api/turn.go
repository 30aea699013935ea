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
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/store"
	"github.com/agentharness/harness/shared/stream"
)

// turnRequest is the AI SDK chat request (id, messages, trigger, messageId) plus agentId and
// eventId; {"agentId":…,"message":"text"} is the curl shorthand.
type turnRequest struct {
	ID        string      `json:"id"`
	Messages  []uiMessage `json:"messages"`
	Trigger   string      `json:"trigger"`
	MessageID string      `json:"messageId"`
	AgentID   string      `json:"agentId"`
	EventID   string      `json:"eventId"`
	Message   *string     `json:"message"`
}

type uiMessage struct {
	ID    string `json:"id"`
	Role  string `json:"role"`
	Parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"parts"`
}

const maxIDLength = 256

// userMessage returns the one new user message of the request. History is held by the server,
// so only the client's latest message is taken.
func (req *turnRequest) userMessage(newID func() string) (model.Message, error) {
	if req.Message != nil {
		if strings.TrimSpace(*req.Message) == "" {
			return model.Message{}, errors.New("message is empty")
		}
		return model.Message{ID: newID(), Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: *req.Message}}}, nil
	}
	if len(req.Messages) == 0 {
		return model.Message{}, errors.New(`the request has no user message: send "messages" (AI SDK chat request) or "message" (text)`)
	}
	last := req.Messages[len(req.Messages)-1]
	if last.Role != "user" {
		return model.Message{}, fmt.Errorf("the last message must have role user, got %q", last.Role)
	}
	var text strings.Builder
	for _, p := range last.Parts {
		if p.Type == "text" {
			text.WriteString(p.Text)
		}
	}
	if strings.TrimSpace(text.String()) == "" {
		return model.Message{}, errors.New("the last user message has no text part")
	}
	id := last.ID
	if id == "" {
		id = newID()
	}
	return model.Message{ID: id, Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: text.String()}}}, nil
}

func (req *turnRequest) validate() error {
	switch {
	case req.AgentID == "":
		return errors.New("agentId is required")
	case req.Trigger != "" && req.Trigger != "submit-message":
		return fmt.Errorf("trigger %q is not supported (only submit-message)", req.Trigger)
	case len(req.ID) > maxIDLength, len(req.EventID) > maxIDLength, len(req.AgentID) > maxIDLength:
		return fmt.Errorf("id, eventId and agentId must be at most %d characters", maxIDLength)
	}
	return nil
}

func newMessageID() string { return store.NewID("msg_") }

// readTurn decodes and checks the request body.
func (h *Handler) readTurn(w http.ResponseWriter, r *http.Request) (*turnRequest, model.Message, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, model.Message{}, &Error{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("request body is larger than %d bytes", h.opts.MaxBodyBytes)}
	}
	if err != nil {
		return nil, model.Message{}, &Error{Status: http.StatusBadRequest, Message: "reading the request body: " + err.Error()}
	}
	var req turnRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, model.Message{}, &Error{Status: http.StatusBadRequest, Message: "malformed JSON body: " + err.Error()}
	}
	if err := req.validate(); err != nil {
		return nil, model.Message{}, &Error{Status: http.StatusBadRequest, Message: err.Error()}
	}
	msg, err := req.userMessage(newMessageID)
	if err != nil {
		return nil, model.Message{}, &Error{Status: http.StatusBadRequest, Message: err.Error()}
	}
	if req.ID == "" {
		req.ID = store.NewID("conv_")
	}
	return &req, msg, nil
}

// turn runs POST /. Everything that can be refused is checked before the stream opens, so a
// refused request gets a JSON error and writes nothing.
func (h *Handler) turn(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	acc, err := authenticate(r, h.opts.Store)
	if err != nil {
		h.errs.fail(w, r, err)
		return
	}
	req, userMsg, err := h.readTurn(w, r)
	if err != nil {
		h.errs.fail(w, r, err)
		return
	}
	cfg, err := h.loadAgent(ctx, acc.ID, req.AgentID)
	if err != nil {
		h.errs.fail(w, r, err)
		return
	}
	now := h.opts.Now()
	if req.EventID != "" {
		err := h.opts.Store.ClaimEvent(ctx, acc.ID, req.EventID, req.ID, now, h.opts.EventTTL)
		var dup *store.DuplicateEventError
		if errors.As(err, &dup) {
			h.errs.fail(w, r, &Error{Status: http.StatusConflict, Message: dup.Error(), Extra: map[string]any{"eventId": dup.EventID, "status": dup.Status}})
			return
		}
		if err != nil {
			h.errs.fail(w, r, err)
			return
		}
	}
	turn, err := h.opts.Store.BeginTurn(ctx, acc.ID, req.ID, req.AgentID, now, now.Add(h.opts.Lease))
	if err != nil {
		if req.EventID != "" {
			if rerr := h.opts.Store.ReleaseEvent(context.WithoutCancel(ctx), acc.ID, req.EventID); rerr != nil {
				h.opts.Logger.ErrorContext(ctx, "releasing event", "eventId", req.EventID, "err", rerr)
			}
		}
		switch {
		case errors.Is(err, store.ErrBusy):
			err = &Error{Status: http.StatusConflict, Message: "conversation " + req.ID + " is busy with another turn; retry when it ends"}
		case errors.Is(err, store.ErrAgentMismatch):
			err = &Error{Status: http.StatusConflict, Message: "conversation " + req.ID + " belongs to another agent"}
		}
		h.errs.fail(w, r, err)
		return
	}
	status, usage := h.stream(w, r, acc, req, cfg, turn, userMsg)

	// The turn's bookkeeping must land even when the client has gone.
	done, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if req.EventID != "" {
		if err := h.opts.Store.FinishEvent(done, acc.ID, req.EventID, status, usage); err != nil {
			h.opts.Logger.ErrorContext(ctx, "finishing event", "eventId", req.EventID, "err", err)
		}
	}
	if err := turn.End(done, usage); err != nil {
		h.opts.Logger.ErrorContext(ctx, "ending turn", "conversationId", req.ID, "err", err)
	}
}

// loadAgent loads the agent and builds its model and tools, before anything is written. A
// tool whose required variable does not resolve stops the turn here, before any model call.
func (h *Handler) loadAgent(ctx context.Context, accountID, agentID string) (agent.Config, error) {
	cfg, err := h.opts.Agents.Load(ctx, accountID, agentID)
	if errors.Is(err, store.ErrNotFound) {
		return agent.Config{}, &Error{Status: http.StatusNotFound, Message: "agent " + agentID + " not found"}
	}
	invalid := func(err error) error {
		return &Error{Status: http.StatusBadRequest, Message: "agent " + agentID + " cannot run: " + err.Error()}
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

// stream opens the SSE response and runs the turn through it, returning the event status and
// the tokens the turn used.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, acc store.Account, req *turnRequest, run agent.Config, turn *store.Turn, userMsg model.Message) (status string, usage model.Usage) {
	ctx := r.Context()
	log := h.opts.Logger.With("accountId", acc.ID, "agentId", req.AgentID, "conversationId", req.ID)
	out := stream.Open(w, http.Header{"X-Conversation-Id": {req.ID}})
	send := func(chunk any) {
		if err := out.Send(chunk); err != nil {
			log.DebugContext(ctx, "client gone", "err", err)
		}
	}
	defer func() { _ = out.Done() }()
	send(stream.Start(newMessageID()))

	failTurn := func(err error, public string) (string, model.Usage) {
		log.ErrorContext(ctx, "turn failed", "err", err)
		send(stream.Error(public))
		send(stream.Finish(string(model.FinishError), nil))
		return store.EventFailed, usage
	}
	history, err := turn.History(ctx)
	if err != nil {
		return failTurn(err, "internal error: the conversation could not be loaded")
	}
	if err := turn.Append(ctx, userMsg); err != nil {
		return failTurn(err, "internal error: the message could not be saved")
	}
	run.Save = func(ctx context.Context, msgs []model.Message) error { return turn.Append(ctx, msgs...) }

	started := time.Now()
	tools := toolLog{log: log, started: map[string]toolStart{}}
	for ev, err := range agent.Run(ctx, run, append(history, userMsg)) {
		if err != nil {
			if ctx.Err() != nil {
				log.InfoContext(ctx, "turn canceled by the client", "err", err)
				return store.EventFailed, usage
			}
			if errors.Is(err, store.ErrLeaseLost) {
				return failTurn(err, "the conversation was taken over by another turn")
			}
			var pe *model.ProviderError
			if errors.As(err, &pe) {
				return failTurn(err, pe.Public()+"; the turn was stopped and the conversation keeps every step finished before it")
			}
			return failTurn(err, "the model failed to answer; the turn was stopped and the conversation keeps every step finished before it")
		}
		tools.observe(ctx, ev)
		switch ev.Type {
		case agent.StepFinish:
			usage = ev.Usage
		case agent.Finish:
			usage = ev.Usage
			log.InfoContext(ctx, "turn finished", "finishReason", ev.Finish, "inputTokens", ev.Usage.InputTokens,
				"outputTokens", ev.Usage.OutputTokens, "ms", time.Since(started).Milliseconds())
			send(stream.Finish(string(ev.Finish), map[string]any{"conversationId": req.ID, "usage": ev.Usage}))
			return store.EventCompleted, usage
		}
		if c := chunkFor(ev); c != nil {
			send(c)
		}
	}
	return store.EventCompleted, usage
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
	case agent.ToolOutput, agent.ToolOutputError:
		s := l.started[ev.ToolCallID]
		delete(l.started, ev.ToolCallID)
		ms := time.Since(s.at).Milliseconds()
		if ev.Type == agent.ToolOutput {
			l.log.InfoContext(ctx, "tool finished", "tool", s.name, "toolCallId", ev.ToolCallID, "ms", ms, "outputBytes", len(ev.Output))
		} else {
			l.log.WarnContext(ctx, "tool failed", "tool", s.name, "toolCallId", ev.ToolCallID, "ms", ms, "err", ev.ErrorText)
		}
	}
}

// chunkFor maps a loop event to its UI message chunk.
func chunkFor(ev agent.Event) any {
	switch ev.Type {
	case agent.StepStart:
		return stream.StartStep()
	case agent.StepFinish:
		return stream.FinishStep()
	case agent.TextStart:
		return stream.TextStart(ev.ID)
	case agent.TextDelta:
		return stream.TextDelta(ev.ID, ev.Text)
	case agent.TextEnd:
		return stream.TextEnd(ev.ID)
	case agent.ToolInputStart:
		return stream.ToolInputStart(ev.ToolCallID, ev.ToolName)
	case agent.ToolInputDelta:
		return stream.ToolInputDelta(ev.ToolCallID, ev.Text)
	case agent.ToolInputAvailable:
		return stream.ToolInputAvailable(ev.ToolCallID, ev.ToolName, ev.Input)
	case agent.ToolInputError:
		return stream.ToolInputError(ev.ToolCallID, ev.ToolName, ev.Input, ev.ErrorText)
	case agent.ToolOutput:
		return stream.ToolOutput(ev.ToolCallID, ev.Output)
	case agent.ToolOutputError:
		return stream.ToolOutputError(ev.ToolCallID, ev.ErrorText)
	case agent.Source:
		return stream.SourceURL(ev.Source.ID, ev.Source.URL, ev.Source.Title)
	}
	return nil
}
