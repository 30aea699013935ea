package chathttp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/edge/aisdk"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/attachments"
	"github.com/agentharness/harness/shared/state/callers"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/turn"
	"github.com/agentharness/harness/shared/wire/httpjson"
	"github.com/agentharness/harness/shared/wire/ids"
)

// turnRequest is the AI SDK chat request (id, messages, trigger, messageId) plus agentId and
// eventId; {"agentId":…,"message":"text"} is the curl shorthand. A request either brings a new
// user message or answers held tool calls: in its messages (the AI SDK's approval-responded
// tool parts) or in the compact "approvals" list.
type turnRequest struct {
	turn.Request
	Messages  []uiMessage     `json:"messages"`
	Trigger   string          `json:"trigger"`
	MessageID string          `json:"messageId"`
	Message   *string         `json:"message"`
	Approvals []turn.Decision `json:"approvals"`
	// Variables set variables of the conversation (turn.Request.Variables).
	Variables map[string]string `json:"variables"`
	// madeID: the request named no conversation, so readTurn made up the id of a new one.
	madeID bool
}

type uiMessage struct {
	ID    string   `json:"id"`
	Role  string   `json:"role"`
	Parts []uiPart `json:"parts"`
}

// uiPart holds the fields of a UI message part the harness reads: text, a file, and the
// approval response of a tool part.
type uiPart struct {
	Type       string          `json:"type"`
	Text       string          `json:"text"`
	MediaType  string          `json:"mediaType"`
	Filename   string          `json:"filename"`
	URL        string          `json:"url"`
	ToolCallID string          `json:"toolCallId"`
	State      string          `json:"state"`
	Input      json.RawMessage `json:"input"`
	Approval   *struct {
		ID       string `json:"id"`
		Approved *bool  `json:"approved"`
		Reason   string `json:"reason"`
	} `json:"approval"`
}

// input returns the request's new user message or its decisions. History is held by the
// server, so only the client's latest message is read.
func (req *turnRequest) input(newID func() string) (turn.Input, error) {
	if len(req.Approvals) > 0 {
		if req.Message != nil {
			return turn.Input{}, httpjson.FieldError("approvals", `send either "message" or "approvals", not both`)
		}
		return turn.Input{Decisions: req.Approvals, RespondsTo: req.MessageID}, nil
	}
	if req.Message != nil {
		if strings.TrimSpace(*req.Message) == "" {
			return turn.Input{}, httpjson.FieldError("message", "is empty")
		}
		return turn.Input{Message: &model.Message{ID: newID(), Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: *req.Message}}}}, nil
	}
	if len(req.Messages) == 0 {
		return turn.Input{}, httpjson.FieldError("messages", `the request has no user message: send "messages" (AI SDK chat request), "message" (text) or "approvals"`)
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
		var ds []turn.Decision
		for i, p := range last.Parts {
			if p.State == "approval-responded" && p.Approval != nil {
				ds = append(ds, turn.Decision{ApprovalID: p.Approval.ID, Approved: p.Approval.Approved, Reason: p.Approval.Reason, ToolCallID: p.ToolCallID, Input: p.Input,
					From: fmt.Sprintf("messages[%d].parts[%d].approval", at, i)})
			}
		}
		if len(ds) == 0 {
			return turn.Input{}, httpjson.FieldError(fmt.Sprintf("messages[%d]", at), "the last message is the assistant's and answers no approval request: end the messages with a user message, or with tool parts in state approval-responded")
		}
		return turn.Input{Decisions: ds, RespondsTo: last.ID}, nil
	}
	if last.Role != "user" {
		return turn.Input{}, httpjson.FieldError(fmt.Sprintf("messages[%d].role", at), fmt.Sprintf("the last message must have role user, got %q", last.Role))
	}
	// The parts are kept in the client's order (useChat puts files before the text), so the
	// conversation reads back as the client sent it (GET /conversations/{id}/messages).
	var parts []model.Part
	for j, p := range last.Parts {
		switch p.Type {
		case "text":
			if strings.TrimSpace(p.Text) != "" {
				parts = append(parts, model.Part{Type: model.PartText, Text: p.Text})
			}
		case "file":
			f, err := filePart(fmt.Sprintf("messages[%d].parts[%d]", at, j), p)
			if err != nil {
				return turn.Input{}, err
			}
			parts = append(parts, f)
		}
	}
	if len(parts) == 0 {
		return turn.Input{}, httpjson.FieldError(fmt.Sprintf("messages[%d].parts", at), "the last user message has no text or file part")
	}
	id := last.ID
	if id == "" {
		id = newID()
	}
	return turn.Input{Message: &model.Message{ID: id, Role: model.RoleUser, Parts: parts}}, nil
}

// filePart reads an AI SDK file part, whose bytes it carries as a data: URL: the harness never
// fetches a URL a client names.
func filePart(field string, p uiPart) (model.Part, error) {
	meta, data, ok := strings.Cut(strings.TrimPrefix(p.URL, "data:"), ",")
	if f, problem := attachments.Problem(p.MediaType, p.Filename); f != "" {
		return model.Part{}, httpjson.FieldError(field+"."+f, problem)
	}
	if !strings.HasPrefix(p.URL, "data:") || !ok || !strings.HasSuffix(meta, ";base64") {
		return model.Part{}, httpjson.FieldError(field+".url", "must be a base64 data: URL (data:<media type>;base64,<bytes>): the harness does not fetch URLs")
	}
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return model.Part{}, httpjson.FieldError(field+".url", "holds bytes that are not valid base64")
	}
	if len(b) > attachments.MaxBytes {
		return model.Part{}, &httpjson.Error{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("%s: the file takes %d bytes, more than %d", field, len(b), attachments.MaxBytes), Extra: map[string]any{"field": field}}
	}
	return model.Part{Type: model.PartFile, MediaType: p.MediaType, Filename: p.Filename, Data: b}, nil
}

// keepFiles stores the files a new message carries as attachments of its conversation, so the
// message holds their ids, never their bytes.
func (h *Handler) keepFiles(ctx context.Context, accountID, conversationID string, m *model.Message) error {
	if m == nil {
		return nil
	}
	for i, p := range m.Parts {
		if p.Type != model.PartFile || p.Data == nil {
			continue
		}
		if h.opts.Attachments == nil {
			return httpjson.FieldError("messages", "this deployment keeps no files (no bucket for them)")
		}
		id, err := h.opts.Attachments.Put(ctx, accountID, conversationID, p.Data)
		if err != nil {
			return err
		}
		m.Parts[i].Attachment, m.Parts[i].Data = id, nil
	}
	return nil
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
	for _, f := range []struct{ name, id string }{{"id", req.ConversationID}, {"eventId", req.EventID}, {"messageId", req.MessageID}} {
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

// decisionField names a decision's key in the request: approvals[i].<compact> or <From>.<ui>.
func decisionField(d turn.Decision, i int, compact, ui string) string {
	if d.From != "" {
		return d.From + "." + ui
	}
	return fmt.Sprintf("approvals[%d].%s", i, compact)
}

func checkDecisions(ds []turn.Decision, conversationID string) error {
	if conversationID == "" {
		return httpjson.FieldError("id", "the conversation is required with approval responses")
	}
	seen := map[string]bool{}
	for i, d := range ds {
		switch {
		case d.ApprovalID == "":
			return httpjson.FieldError(decisionField(d, i, "approvalId", "id"), "is required")
		case !ids.Valid(d.ApprovalID):
			return httpjson.CheckID(decisionField(d, i, "approvalId", "id"), d.ApprovalID)
		case d.Approved == nil:
			return httpjson.FieldError(decisionField(d, i, "approved", "approved"), "is required (true or false)")
		case seen[d.ApprovalID]:
			return httpjson.FieldError(decisionField(d, i, "approvalId", "id"), fmt.Sprintf("approval %s is answered twice", d.ApprovalID))
		}
		seen[d.ApprovalID] = true
	}
	return nil
}

// readTurn decodes and checks the request body.
func (h *Handler) readTurn(w http.ResponseWriter, r *http.Request) (*turnRequest, turn.Input, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, turn.Input{}, &httpjson.Error{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("request body is larger than %d bytes", h.opts.MaxBodyBytes)}
	}
	if err != nil {
		return nil, turn.Input{}, &httpjson.Error{Status: http.StatusBadRequest, Message: "reading the request body: " + err.Error()}
	}
	if err := httpjson.CheckKeys(body); err != nil {
		return nil, turn.Input{}, err
	}
	var req turnRequest
	if err := json.Unmarshal(body, &req); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			// encoding/json names a field of the embedded turn.Request by its Go path.
			field := strings.TrimPrefix(typeErr.Field, "Request.")
			return nil, turn.Input{}, httpjson.FieldError(field, "must be a JSON "+typeErr.Type.String())
		}
		return nil, turn.Input{}, &httpjson.Error{Status: http.StatusBadRequest, Message: "malformed JSON body: " + err.Error()}
	}
	if err := req.validate(); err != nil {
		return nil, turn.Input{}, err
	}
	if err := turn.CheckVariables("variables", req.Variables); err != nil {
		return nil, turn.Input{}, httpError(err)
	}
	// Sealed variables are the engine's own, for queued requests: never a client's.
	req.Request.Variables, req.Request.Sealed = req.Variables, nil
	in, err := req.input(turn.NewMessageID)
	if err == nil && in.Decisions != nil {
		err = checkDecisions(in.Decisions, req.ConversationID)
	}
	if err == nil && in.Message != nil {
		field := "message"
		if req.Message == nil {
			field = fmt.Sprintf("messages[%d]", len(req.Messages)-1)
		}
		err = httpError(turn.CheckMessageSize(field, in.Message))
	}
	if err != nil {
		return nil, turn.Input{}, err
	}
	if req.ConversationID == "" {
		req.ConversationID, req.madeID = store.NewID("conv_"), true
	}
	return &req, in, nil
}

// openTurn authenticates and reads a turn request, and opens its turn: the account, the agent
// and the conversation in one round trip (a token's account was read as it was verified), so
// a new message then begins its turn in one write (turn.Start.Opening). An end-user token gets
// 404 for an agent it may not use or a conversation of another; ok is false when it answered
// a refusal.
//
// A queued turn (queued) reads no conversation here, async-worker does: a token's ownership of
// it is read from its head alone.
func (h *Handler) openTurn(w http.ResponseWriter, r *http.Request, queued bool) (*turnRequest, turn.Input, *store.Opening, bool) {
	bearer, err := httpjson.Secret(r)
	var c callers.Caller
	if err == nil && callers.IsToken(bearer) {
		c, err = h.opts.Callers.Resolve(r)
	}
	var req *turnRequest
	var in turn.Input
	if err == nil {
		req, in, err = h.readTurn(w, r)
	}
	if err == nil {
		err = tokenFields(c, req)
	}
	if err == nil {
		err = agentRefused(c, req.AgentID)
	}
	var opening *store.Opening
	switch {
	case err != nil:
	case c.Token():
		access, _ := c.Access()
		opening, err = h.opts.Store.OpenTurnFor(r.Context(), access, c.EndUser, req.AgentID, req.ConversationID, req.madeID || queued)
		if err == nil && queued && !req.madeID {
			err = h.seeConversation(r, c, req.ConversationID, true)
		}
	default:
		// The secret is confirmed beside the agent's read, in one round trip.
		opening, err = h.opts.Store.OpenTurn(r.Context(), bearer, req.AgentID, req.ConversationID, req.madeID || queued)
		err = httpjson.SecretRefused(err)
		if err == nil {
			c.AccountID = opening.Account.ID
		}
	}
	if err == nil {
		err = h.opts.Callers.Origin(w, r, &c)
	}
	if err == nil {
		if owner, exists := opening.Conversation(); exists && !c.Sees(owner) {
			err = turn.ConversationNotFound(req.ConversationID)
		}
	}
	if err != nil {
		h.fail(w, r, err)
		return nil, turn.Input{}, nil, false
	}
	return req, in, opening, true
}

// turn runs POST /. Everything that can be refused is checked before the stream opens, so a
// refused request gets a JSON error and writes nothing.
func (h *Handler) turn(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	req, in, opening, ok := h.openTurn(w, r, false)
	if !ok {
		return
	}
	acc := opening.Account
	cfg, err := h.eng.OpenedAgent(ctx, opening, req.Request, true)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	// Decisions on a subagent's held calls, sent to its caller, go to the subagent; the answer
	// streams what the caller's client is shown of it, then the caller going on (childTurn).
	child, err := h.childTurn(ctx, acc.ID, req, &in)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if child != nil {
		opening = nil // it read the caller's conversation
		if cfg, err = h.eng.Agent(ctx, acc.ID, req.Request, true); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	if err := h.keepFiles(ctx, acc.ID, req.ConversationID, in.Message); err != nil {
		h.fail(w, r, err)
		return
	}
	if req.EventID != "" && child == nil {
		if err := h.eng.ClaimEvent(ctx, acc.ID, req.Request); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	releaseEvent := func() {
		if req.EventID == "" || child != nil {
			return
		}
		if err := h.opts.Store.ReleaseEvent(context.WithoutCancel(ctx), acc.ID, req.EventID); err != nil {
			h.opts.Logger.ErrorContext(ctx, "releasing event", "eventId", req.EventID, "err", err)
		}
	}
	log := h.opts.Logger.With("accountId", acc.ID, "agentId", req.AgentID, "conversationId", req.ConversationID)
	var out *aisdk.Writer
	send := func(chunk any) {
		if err := out.Send(chunk); err != nil {
			log.DebugContext(ctx, "client gone", "err", err)
		}
	}
	run, err := h.eng.Begin(ctx, turn.Start{
		AccountID: acc.ID, Request: req.Request, Input: in, Config: cfg, Opening: opening,
		Heartbeat: func() { _ = out.Comment("keep-alive") },
	})
	if err != nil {
		releaseEvent()
		h.fail(w, r, err)
		return
	}
	// Everything that can be refused was: the stream opens.
	conversation := req.ConversationID
	if child != nil {
		conversation = child.caller // the client's, whose held calls it answered
	}
	out = aisdk.Open(w, http.Header{"X-Conversation-Id": {conversation}})
	messageID := in.RespondsTo
	switch {
	case messageID == "" && in.Message != nil:
		// Derived from the user message, so that the conversation read back names the
		// assistant's message as this stream did.
		messageID = aisdk.AssistantMessageID(req.ConversationID, in.Message.ID)
	case messageID == "":
		messageID = turn.NewMessageID()
	}
	send(aisdk.Start(messageID))
	// A client that disconnects does not stop its turn: the turn runs to its end and its
	// output stays readable at GET /chat/{conversationId}/stream. The invocation's deadline
	// still holds.
	runCtx, stop := detached(ctx)
	defer stop()
	for ev := range run.Events(runCtx) {
		if child != nil {
			// Not the caller's log: these frames carry no ids to resume after.
			for _, shown := range child.view.See(ev) {
				if shown.Kind == turn.Loop && shown.Loop.Type == agent.ToolApprovalRequest {
					child.shown[shown.Loop.ApprovalID] = true
				}
				for _, c := range aisdk.EventChunks(shown) {
					send(c)
				}
			}
			continue
		}
		for _, c := range aisdk.EventChunks(ev) {
			sendEvent(out, ev.Seq, ev.InLog, c, log)
		}
	}
	res := run.Outcome()
	if child != nil {
		if err := run.Finish(ctx, res, nil); err != nil {
			log.ErrorContext(ctx, "reporting the subagent's event", "eventId", req.EventID, "err", err)
		}
		h.followCaller(runCtx, out, acc.ID, child, log)
		_ = out.Done()
		return
	}

	// The turn's bookkeeping lands before the client sees the end, so its next request finds
	// the conversation free; it must land even when the client has gone.
	err = run.Finish(ctx, res, func(context.Context) {
		if fin := aisdk.TurnFinish(req.ConversationID, res); fin != nil {
			send(fin)
		}
	})
	if err != nil {
		log.ErrorContext(ctx, "reporting the event", "eventId", req.EventID, "err", err)
	}
	_ = out.Done()
}

// detached is ctx without its cancellation (a client going away) but with its deadline (the
// invocation's).
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	d := context.WithoutCancel(ctx)
	if dl, ok := ctx.Deadline(); ok {
		return context.WithDeadline(d, dl)
	}
	return context.WithCancel(d)
}

// sendEvent sends one chunk of an event, with the event's place in the turn's stream log as the
// frame's id when it has one, so a client can resume after it.
func sendEvent(out *aisdk.Writer, seq int64, inLog bool, chunk any, log *slog.Logger) bool {
	id := ""
	if inLog {
		id = strconv.FormatInt(seq, 10)
	}
	if err := out.SendID(id, chunk); err != nil {
		log.Debug("client gone", "err", err)
		return false
	}
	return true
}
