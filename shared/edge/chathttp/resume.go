package chathttp

import (
	"context"
	"errors"
	"iter"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/edge/aisdk"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/turn"
	"github.com/agentharness/harness/shared/turn/follow"
	"github.com/agentharness/harness/shared/wire/httpjson"
)

// resume runs GET /chat/{conversationId}/stream, where the AI SDK's DefaultChatTransport
// reconnects (useChat({ resume: true }) with the chat API at /chat): the UI message stream of
// the conversation's latest turn from its start (or after the frame a client names, see
// resumeAfter), read from the turn's stream log, then live until the turn ends or waits, as one
// assistant message across the waits it went through. Each frame's id is its event's place in
// the log. 204 when the conversation has no turn within the log's
// retention.
func (h *Handler) resume(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	accountID, conv, ok := h.conversationRoute(w, r)
	if !ok {
		return
	}
	after, err := resumeAfter(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	entries, found, err := follow.Turn(ctx, h.eng, accountID, conv, after)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if !found {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	log := h.opts.Logger.With("accountId", accountID, "conversationId", conv)
	out := aisdk.Open(w, http.Header{"X-Conversation-Id": {conv}})
	send := func(chunk any) bool {
		if err := out.Send(chunk); err != nil {
			log.DebugContext(ctx, "client gone", "err", err)
			return false
		}
		return true
	}
	// The message the turn's own stream announced, derived from the user message that began
	// it, so a client that holds it (read back, or streamed before) has the replay replace it.
	messageID := turn.NewMessageID()
	if user, err := h.opts.Store.LatestUserMessage(ctx, accountID, conv); err == nil && user != "" {
		messageID = aisdk.AssistantMessageID(conv, user)
	} else if err != nil {
		log.WarnContext(ctx, "reading the turn's user message; the replay gets an id of its own", "err", err)
	}
	if !send(aisdk.Start(messageID)) {
		return
	}
	shown := map[string]bool{}
	last, _, ok := relayLog(out, entries, after, shown, log)
	if !ok {
		return
	}
	if last != nil {
		h.sendHeld(ctx, out, accountID, conv, *last, shown, log)
		send(aisdk.TurnFinish(conv, *last))
	}
	_ = out.Done()
}

// sendHeld shows, after the part of a turn that waits for async calls, the calls its subagents
// hold for approval that the client was not shown yet (follow.Held), so it can
// decide them.
func (h *Handler) sendHeld(ctx context.Context, out *aisdk.Writer, accountID, conv string, o turn.Outcome, shown map[string]bool, log *slog.Logger) {
	if o.Status != turn.StatusWaitingAsync {
		return
	}
	held, err := follow.Held(ctx, h.eng, accountID, conv, shown)
	if err != nil {
		log.ErrorContext(ctx, "reading the calls the turn's subagents hold", "err", err)
	}
	for _, ev := range held {
		for _, c := range aisdk.EventChunks(ev) {
			_ = out.Send(c)
		}
	}
}

// relayLog sends a turn's stream log entries as UI message chunks, each frame's id its entry's
// place in the log, noting in shown the approvals it asked for. A part of the turn that waited
// for outside work ended with a finish; when the turn went on (its continuation wrote more),
// that finish is left out, so the client builds one assistant message across the wait. It
// returns how the last part ended, for the caller to end the stream with (nil when no part
// ended), the place of the last entry sent (after, when none was), and false when the client has
// gone.
func relayLog(out *aisdk.Writer, entries iter.Seq2[turn.Logged, error], after int64, shown map[string]bool, log *slog.Logger) (ended *turn.Outcome, last int64, ok bool) {
	last = after
	for e, err := range entries {
		if err != nil {
			log.Error("reading the turn's stream log", "err", err)
			_ = out.Send(aisdk.Error("the turn's output could not be read to its end"))
			return nil, last, true
		}
		last = e.Seq
		if e.Outcome != nil {
			ended = e.Outcome
			continue
		}
		ended = nil
		if ev := e.Event; ev.Kind == turn.Loop && ev.Loop.Type == agent.ToolApprovalRequest {
			shown[ev.Loop.ApprovalID] = true
		}
		for _, c := range aisdk.EventChunks(*e.Event) {
			if !sendEvent(out, e.Seq, true, c, log) {
				return nil, last, false
			}
		}
	}
	return ended, last, true
}

// callerWait bounds how long the answer to decisions a subagent took waits for its caller's
// continuation to begin (it is queued for async-worker as the subagent ends).
const callerWait = time.Minute

// childRun is a request whose decisions went to a subagent (follow.ToChild): the
// caller's conversation they were sent to, the place in its stream log its client has read to,
// and what of the subagent's turn that client is shown.
type childRun struct {
	caller string
	after  int64
	logged bool
	view   *turn.CallerView
	// shown are the approvals the answer asked for.
	shown map[string]bool
}

// childTurn routes the request to the subagent whose held calls its decisions answer; nil when
// they are the conversation's own.
func (h *Handler) childTurn(ctx context.Context, accountID string, req *turnRequest, in *turn.Input) (*childRun, error) {
	route, err := follow.ToChild(ctx, h.eng, accountID, &req.Request, in)
	if err != nil || route == nil {
		return nil, err
	}
	next, found, err := follow.Next(ctx, h.eng, accountID, route.Caller)
	if err != nil {
		return nil, err
	}
	return &childRun{caller: route.Caller, after: next - 1, logged: found, view: turn.NewCallerView(req.ConversationID, route.Calls...), shown: map[string]bool{}}, nil
}

// followCaller ends the answer to decisions a subagent took with its caller going on: when the
// subagent's end let the caller's turn go on, what the caller's continuation writes to its
// stream log, from where the client had read it, until it waits or ends. Otherwise (the caller
// still waits for other calls or decisions) the answer ends at once, and GET
// /chat/{conversationId}/stream follows the caller later.
func (h *Handler) followCaller(ctx context.Context, out *aisdk.Writer, accountID string, c *childRun, log *slog.Logger) {
	waits := turn.Outcome{Status: turn.StatusWaitingAsync, Reason: model.FinishToolCalls}
	waiting := aisdk.TurnFinish(c.caller, waits)
	goesOn, err := follow.GoesOn(ctx, h.eng, accountID, c.caller)
	if err != nil {
		log.ErrorContext(ctx, "reading whether the caller goes on", "err", err)
	}
	if !goesOn || !c.logged {
		h.sendHeld(ctx, out, accountID, c.caller, waits, c.shown, log)
		_ = out.Send(waiting)
		return
	}
	deadline := time.Now().Add(callerWait)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	for after := c.after; ; {
		entries, found, err := follow.Turn(ctx, h.eng, accountID, c.caller, after)
		if err != nil || !found {
			log.ErrorContext(ctx, "following the caller", "found", found, "err", err)
			_ = out.Send(waiting)
			return
		}
		ended, last, ok := relayLog(out, entries, after, c.shown, log)
		switch {
		case !ok:
			return
		case ended != nil:
			h.sendHeld(ctx, out, accountID, c.caller, *ended, c.shown, log)
			_ = out.Send(aisdk.TurnFinish(c.caller, *ended))
			return
		case time.Now().After(deadline):
			_ = out.Send(waiting)
			return
		}
		after = last
		select {
		case <-ctx.Done():
			return
		case <-time.After(stopPoll):
		}
	}
}

// resumeAfter is where a resume starts: after the frame id a client names in Last-Event-ID or
// ?after=N (each frame's id is its event's place in the turn's stream log), or, with neither,
// from the turn's start (-1).
func resumeAfter(r *http.Request) (int64, error) {
	field, v := "after", r.URL.Query().Get("after")
	if id := r.Header.Get("Last-Event-ID"); id != "" && v == "" {
		field, v = "Last-Event-ID", id
	}
	if v == "" {
		return -1, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, httpjson.FieldError(field, "must be the id of a frame of the stream: a number from 0")
	}
	return n, nil
}

// stopWait bounds how long POST /chat/{conversationId}/stop waits for the turn to end.
const stopWait = 10 * time.Second

// stop runs POST /chat/{conversationId}/stop: the conversation's running turn is asked to stop
// and the answer comes once it has (within stopWait): the turn keeps its answer so far and its
// stream, live and resumed, ends with an abort. {"stopped": false} when no turn was running.
func (h *Handler) stop(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	accountID, conv, ok := h.conversationRoute(w, r)
	if !ok {
		return
	}
	stopped, err := h.eng.RequestStop(ctx, accountID, conv)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if stopped {
		deadline := time.Now().Add(stopWait)
		for {
			head, err := h.opts.Store.ConversationHead(ctx, accountID, conv)
			if err != nil {
				h.fail(w, r, err)
				return
			}
			if !head.LeaseUntil.After(h.opts.Now()) || time.Now().After(deadline) {
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(stopPoll):
			}
		}
	}
	httpjson.WriteJSON(w, http.StatusOK, map[string]any{"conversationId": conv, "stopped": stopped})
}

// subagents runs GET /chat/{conversationId}/subagents: the resumable subagent instances the
// conversation created, sorted by name.
func (h *Handler) subagents(w http.ResponseWriter, r *http.Request) {
	accountID, conv, ok := h.conversationRoute(w, r)
	if !ok {
		return
	}
	found, err := h.opts.Store.Instances(r.Context(), accountID, conv)
	if errors.Is(err, store.ErrNotFound) {
		httpjson.WriteError(w, &httpjson.Error{Status: http.StatusNotFound, Message: "conversation " + conv + " not found"})
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	list := make([]store.Instance, 0, len(found))
	for _, in := range found {
		list = append(list, in)
	}
	slices.SortFunc(list, func(a, b store.Instance) int { return strings.Compare(a.Name, b.Name) })
	httpjson.WriteJSON(w, http.StatusOK, map[string]any{"conversationId": conv, "instances": list})
}

// stopPoll is how often the stop route looks whether the turn has ended.
const stopPoll = 50 * time.Millisecond

// conversationRoute authenticates a request to a /chat/{conversationId}/… or
// /conversations/{conversationId}… route and checks the conversation id; an end-user token gets
// 404 for a conversation that is not its end user's. ok is false when it answered a refusal.
func (h *Handler) conversationRoute(w http.ResponseWriter, r *http.Request) (accountID, conversationID string, ok bool) {
	c, ok := h.caller(w, r)
	if !ok {
		return "", "", false
	}
	conversationID = r.PathValue("conversationId")
	err := httpjson.CheckID("conversationId", conversationID)
	if err == nil {
		err = h.seeConversation(r, c, conversationID, false)
	}
	if err != nil {
		h.fail(w, r, err)
		return "", "", false
	}
	return c.AccountID, conversationID, true
}
