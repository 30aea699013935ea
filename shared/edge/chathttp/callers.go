package chathttp

import (
	"errors"
	"net/http"
	"strings"

	"github.com/agentharness/harness/shared/state/callers"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/turn"
	"github.com/agentharness/harness/shared/wire/httpjson"
)

// caller authenticates a request to a turn route, by the account secret or an end-user token,
// and checks its Origin against the account's (callers.Resolver.Origin); ok is false when it
// answered a refusal.
func (h *Handler) caller(w http.ResponseWriter, r *http.Request) (callers.Caller, bool) {
	c, err := h.opts.Callers.Resolve(r)
	if err == nil {
		err = h.opts.Callers.Origin(w, r, &c)
	}
	if err != nil {
		h.fail(w, r, err)
		return c, false
	}
	return c, true
}

// agentRefused is the refusal of an agent a token may not use: the 404 of an unknown agent,
// so a token learns nothing of the account's other agents.
func agentRefused(c callers.Caller, agentID string) error {
	if c.Allows(agentID) {
		return nil
	}
	return &turn.Refusal{Kind: turn.NotFound, Message: "agent " + agentID + " not found"}
}

// tokenFields refuses what an end-user token may not send: toolApproval overrides, which
// would lift the approval rules the account owner set.
func tokenFields(c callers.Caller, req *turnRequest) error {
	if c.Token() && len(req.ToolApproval) > 0 {
		return &httpjson.Error{Status: http.StatusForbidden, Message: "toolApproval: an end-user token may not override tools' approval rules (only the account secret may)", Extra: map[string]any{"field": "toolApproval"}}
	}
	req.EndUser = c.EndUser
	return nil
}

// seeConversation refuses a token a conversation that is not its end user's with the 404 of
// one that does not exist, which is refused too unless the request may start it (starts: a
// turn's). The account secret sees every conversation, unread.
func (h *Handler) seeConversation(r *http.Request, c callers.Caller, conversationID string, starts bool) error {
	if !c.Token() {
		return nil
	}
	info, err := h.opts.Store.Conversation(r.Context(), c.AccountID, conversationID)
	switch {
	case errors.Is(err, store.ErrNotFound) && starts:
		return nil
	case errors.Is(err, store.ErrNotFound), err == nil && !c.Sees(info.EndUser):
		return turn.ConversationNotFound(conversationID)
	}
	return err
}

// preflighted lists the routes a page of another origin may call (with an end-user token, or
// the account secret): each answers CORS preflights. /mcp and the channels' webhooks are
// called by servers, never by a page.
func preflighted(path string) bool {
	if path == "/" || path == "/chat" || path == "/async" || path == "/agents" || path == "/models" || path == "/conversations" {
		return true
	}
	for _, prefix := range []string{"/chat/", "/status/", "/threads/", "/conversations/"} {
		if strings.HasPrefix(path, prefix) {
			return true
		}
	}
	return false
}
