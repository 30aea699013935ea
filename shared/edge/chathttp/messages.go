package chathttp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/agentharness/harness/shared/edge/aisdk"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/wire/httpjson"
)

// Page sizes of GET /conversations/{conversationId}/messages, in UI messages.
const (
	defaultMessagesLimit = 100
	maxMessagesLimit     = 500
)

// messages runs GET /conversations/{conversationId}/messages: the conversation as the AI SDK
// UIMessage list its chat client built from the turns' streams (aisdk.UIMessages), oldest
// first, limit UI messages a page; nextCursor, when there are more, opens the next page.
func (h *Handler) messages(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	accountID, conv, ok := h.conversationRoute(w, r)
	if !ok {
		return
	}
	limit, from, err := pageQuery(r, conv)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	head, err := h.opts.Store.ConversationHead(ctx, accountID, conv)
	if errors.Is(err, store.ErrNotFound) {
		err = &httpjson.Error{Status: http.StatusNotFound, Message: "conversation " + conv + " not found"}
	}
	var rows map[string]store.Approval
	if err == nil {
		rows, err = h.opts.Store.Approvals(ctx, accountID, head.PendingApprovals)
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	hist := aisdk.History{ConversationID: conv, First: max(1, from-1)}
	for _, a := range rows {
		if a.Status == store.ApprovalPending {
			hist.Pending = append(hist.Pending, a)
		}
	}
	page, next, err := h.readPage(ctx, accountID, hist, from, limit)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := map[string]any{"messages": page}
	if next > 0 {
		out["nextCursor"] = encodeCursor(conv, next)
	}
	httpjson.WriteJSON(w, http.StatusOK, out)
}

// readPage reads the limit UI messages that begin at seq from or after, and the seq the next
// page begins at (0 when this one is the last). It reads from the message before from, the
// turn's user message when from begins an assistant message (whose id it names), in growing
// windows until the message after the page has begun, so that no message of the page is cut.
func (h *Handler) readPage(ctx context.Context, accountID string, hist aisdk.History, from int64, limit int) ([]aisdk.UIMessage, int64, error) {
	window := int64(2*limit + 2)
	for next := hist.First; ; {
		batch, err := h.opts.Store.Messages(ctx, accountID, hist.ConversationID, next, next+window)
		if err != nil {
			return nil, 0, err
		}
		if err := h.signFiles(ctx, accountID, hist.ConversationID, batch); err != nil {
			return nil, 0, err
		}
		hist.Messages = append(hist.Messages, batch...)
		next += int64(len(batch))
		page := []aisdk.UIMessage{}
		for _, m := range aisdk.UIMessages(hist) {
			if m.From >= from {
				page = append(page, m)
			}
		}
		switch {
		case len(page) > limit:
			return page[:limit], page[limit].From, nil
		case int64(len(batch)) < window:
			return page, 0, nil
		}
		window = min(2*window, 1000)
	}
}

// cursor is what a page's nextCursor holds: the conversation, so that it opens no other, and
// the seq of the stored message the page begins at.
type cursor struct {
	Conversation string `json:"c"`
	Seq          int64  `json:"s"`
}

func encodeCursor(conversationID string, seq int64) string {
	b, _ := json.Marshal(cursor{Conversation: conversationID, Seq: seq}) // strings and a number
	return base64.RawURLEncoding.EncodeToString(b)
}

// pageQuery reads ?limit= and ?cursor=: the page size and the seq the page begins at (1, the
// conversation's first message, without a cursor).
func pageQuery(r *http.Request, conversationID string) (limit int, from int64, err error) {
	q := r.URL.Query()
	limit = defaultMessagesLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxMessagesLimit {
			return 0, 0, httpjson.FieldError("limit", "must be a whole number from 1 to "+strconv.Itoa(maxMessagesLimit))
		}
		limit = n
	}
	from = 1
	if v := q.Get("cursor"); v != "" {
		var c cursor
		b, err := base64.RawURLEncoding.DecodeString(v)
		if err != nil || json.Unmarshal(b, &c) != nil || c.Conversation != conversationID || c.Seq < 1 {
			return 0, 0, httpjson.FieldError("cursor", "is not a nextCursor of this conversation's messages")
		}
		from = c.Seq
	}
	return limit, from, nil
}
