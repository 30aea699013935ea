package chathttp

import (
	"errors"
	"net/http"

	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/wire/httpjson"
)

// deleteConversation runs DELETE /conversations/{conversationId}: the conversation and
// everything hanging from it are deleted (turn.Engine.DeleteConversation), its running turn
// stopped first. 204 once nothing is left; 404 for a conversation the account does not have,
// a deleted one included. A deletion cut short is finished by the next DELETE.
func (h *Handler) deleteConversation(w http.ResponseWriter, r *http.Request) {
	accountID, conv, ok := h.conversationRoute(w, r)
	if !ok {
		return
	}
	err := h.eng.DeleteConversation(r.Context(), accountID, conv)
	if errors.Is(err, store.ErrNotFound) {
		err = &httpjson.Error{Status: http.StatusNotFound, Message: "conversation " + conv + " not found"}
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
