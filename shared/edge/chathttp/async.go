package chathttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/turn"
	"github.com/agentharness/harness/shared/turn/follow"
	"github.com/agentharness/harness/shared/wire/httpjson"
)

// asyncTurn runs POST /async: the request is checked as POST / checks it, recorded under its
// event id, and queued for async-worker; the answer is 202 with the event id to poll.
func (h *Handler) asyncTurn(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if !h.eng.Queues() {
		httpjson.WriteError(w, &httpjson.Error{Status: http.StatusServiceUnavailable, Message: "async turns are not configured here (no work queue)"})
		return
	}
	// The account and the agent in one read; the conversation is async-worker's to read.
	req, in, opening, ok := h.openTurn(w, r, true)
	if !ok {
		return
	}
	acc := opening.Account
	if _, err := h.eng.OpenedAgent(ctx, opening, req.Request, false); err != nil {
		h.fail(w, r, err)
		return
	}
	// Decisions on a subagent's held calls, sent to its caller, go to the subagent.
	route, err := follow.ToChild(ctx, h.eng, acc.ID, &req.Request, &in)
	if err == nil && route != nil {
		_, err = h.eng.Agent(ctx, acc.ID, req.Request, false)
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if req.EventID == "" {
		req.EventID = store.NewID("evt_")
	}
	// The queued request carries its variables sealed, and its files by id.
	if err := h.keepFiles(ctx, acc.ID, req.ConversationID, in.Message); err != nil {
		h.fail(w, r, err)
		return
	}
	if err := h.eng.SealVariables(ctx, acc.ID, &req.Request); err != nil {
		h.fail(w, r, err)
		return
	}
	if err := h.eng.Queue(ctx, turn.Queued{AccountID: acc.ID, Request: req.Request, Input: in, Reopen: true}); err != nil {
		h.fail(w, r, err)
		return
	}
	out := map[string]string{
		"eventId": req.EventID, "conversationId": req.ConversationID, "status": store.EventProcessing, "statusUrl": "/status/" + req.EventID,
	}
	// The turn's stream is named by its event id (a decision under the waiting turn's event id
	// continues that turn's stream).
	if subject := h.eng.Subject(acc.ID, req.ConversationID, req.EventID); subject != "" {
		out["natsSubject"] = subject
	}
	httpjson.WriteJSON(w, http.StatusAccepted, out)
}

// signFiles gives each file part of msgs, a conversation's, a signed address of its bytes that
// lasts attachments.URLTTL.
func (h *Handler) signFiles(ctx context.Context, accountID, conversationID string, msgs []model.Message) error {
	for i := range msgs {
		for j, p := range msgs[i].Parts {
			if p.Type != model.PartFile || h.opts.Attachments == nil {
				continue
			}
			url, err := h.opts.Attachments.URL(ctx, accountID, conversationID, p.Attachment)
			if err != nil {
				return err
			}
			msgs[i].Parts[j].URL = url
		}
	}
	return nil
}

// childApprovals adds to a waiting turn's status the approvals its non-blocking subagents wait
// for, each naming its subagent; a decision sent to the turn's conversation reaches the child
// (follow.ToChild).
func (h *Handler) childApprovals(ctx context.Context, accountID string, children []store.Child, out map[string]any) error {
	var pending []map[string]any
	for _, c := range children {
		if c.EventID == "" {
			continue
		}
		ev, err := h.opts.Store.Event(ctx, accountID, c.EventID)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		var detail struct {
			PendingApprovals []map[string]any `json:"pendingApprovals"`
		}
		if ev.Status != store.EventWaiting || json.Unmarshal(ev.Detail, &detail) != nil {
			continue
		}
		for _, p := range detail.PendingApprovals {
			p["subagent"] = c
			pending = append(pending, p)
		}
	}
	if pending != nil {
		out["pendingApprovals"] = pending
	}
	return nil
}

// status runs GET /status/{eventId}: where an /async turn is, what it waits for, and once it
// has ended its answer's text and messages.
func (h *Handler) status(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	acc, ok := h.caller(w, r)
	if !ok {
		return
	}
	id := r.PathValue("eventId")
	if err := httpjson.CheckID("eventId", id); err != nil {
		h.fail(w, r, err)
		return
	}
	ev, err := h.opts.Store.ConversationEvent(ctx, acc.AccountID, id)
	// A token sees the turns of its end user's requests only: another's is not found either.
	if errors.Is(err, store.ErrNotFound) || (err == nil && !acc.Sees(ev.EndUser)) {
		httpjson.WriteError(w, &httpjson.Error{Status: http.StatusNotFound, Message: "event " + id + " not found"})
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	cur, resumedBy, err := h.followResumed(ctx, acc.AccountID, ev)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := map[string]any{}
	if len(cur.Detail) > 0 {
		_ = json.Unmarshal(cur.Detail, &out)
	}
	delete(out, "resumedBy")
	if resumedBy != "" {
		out["resumedBy"] = resumedBy
	}
	out["eventId"], out["conversationId"], out["status"] = ev.ID, ev.ConversationID, cur.Status
	out["usage"] = ev.Usage
	if len(ev.Children) > 0 {
		out["children"] = ev.Children
	}
	if cur.Status == store.EventWaitingAsync {
		if err := h.childApprovals(ctx, acc.AccountID, ev.Children, out); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	if !cur.UpdatedAt.IsZero() {
		out["updatedAt"] = cur.UpdatedAt
	}
	ev.Status, ev.ToSeq = cur.Status, max(ev.ToSeq, cur.ToSeq)
	if ev.Status == store.EventWaitingAsync {
		if err := h.livePending(ctx, out); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	if store.Final(ev.Status) {
		msgs, err := h.opts.Store.Messages(ctx, acc.AccountID, ev.ConversationID, ev.FromSeq, ev.ToSeq)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		if msgs == nil {
			msgs = []model.Message{}
		}
		if err := h.signFiles(ctx, acc.AccountID, ev.ConversationID, msgs); err != nil {
			h.fail(w, r, err)
			return
		}
		out["messages"] = msgs
		out["text"] = model.FinalText(msgs)
		if o := model.FinalOutput(msgs); o != nil {
			out["output"] = o
		}
	}
	delete(out, "groupId")
	httpjson.WriteJSON(w, http.StatusOK, out)
}

// maxResumeHops bounds how far the status route follows resumedBy.
const maxResumeHops = 8

// followResumed returns where the turn of ev stands, and the event that resumed it
// (resumedBy, empty when none). A turn whose paused step was answered under another event Y
// goes on there: ev took Y's status when Y's invocation ended (the engine's settleResumed), and while
// ev is not final it shows Y's current state, following resumedBy again when Y paused in turn
// and was answered under a third event, so ev reaches the turn's outcome even when Y finishes
// later (its async continuation, another answer). Its messages run from ev's first to the end of
// the event followed.
func (h *Handler) followResumed(ctx context.Context, accountID string, ev store.TurnStatus) (store.TurnStatus, string, error) {
	resumedBy := func(e store.TurnStatus) string {
		var d struct {
			ResumedBy string `json:"resumedBy"`
		}
		_ = json.Unmarshal(e.Detail, &d)
		return d.ResumedBy
	}
	first := resumedBy(ev)
	cur := ev
	for range maxResumeHops {
		next := resumedBy(cur)
		if store.Final(cur.Status) || next == "" || next == cur.ID {
			break
		}
		e, err := h.opts.Store.Event(ctx, accountID, next)
		if errors.Is(err, store.ErrNotFound) || (err == nil && e.ConversationID != ev.ConversationID) {
			break
		}
		if err != nil {
			return cur, first, err
		}
		if e.Status == cur.Status {
			// Y has not moved on: cur already shows it (an SSE event's row has no detail).
			break
		}
		cur = e
	}
	return cur, first, nil
}

// livePending narrows a waiting turn's pendingAsyncTools to the calls still running now.
func (h *Handler) livePending(ctx context.Context, out map[string]any) error {
	groupID, _ := out["groupId"].(string)
	if groupID == "" || h.opts.Async == nil {
		return nil
	}
	st, err := h.opts.Async.Load(ctx, groupID)
	if err != nil || st.Group == nil {
		return err // not sealed yet: every call is still pending
	}
	running := map[string]bool{}
	for _, id := range st.Pending() {
		running[id] = true
	}
	calls, _ := out["pendingAsyncTools"].([]any)
	pending := []any{}
	for _, c := range calls {
		if m, ok := c.(map[string]any); ok && running[fmt.Sprint(m["resultId"])] {
			pending = append(pending, c)
		}
	}
	out["pendingAsyncTools"] = pending
	return nil
}
