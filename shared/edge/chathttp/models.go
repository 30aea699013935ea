package chathttp

import (
	"net/http"

	"github.com/agentharness/harness/shared/model/catalogue"
	"github.com/agentharness/harness/shared/wire/httpjson"
)

// models runs GET /models: the catalogue's providers and models, each with whether the caller's
// account reaches it and through which key. The account secret and an end-user token see the
// same list: it shows no key, only where one is.
func (h *Handler) models(w http.ResponseWriter, r *http.Request) {
	c, ok := h.caller(w, r)
	if !ok {
		return
	}
	reach, err := catalogue.Of(r.Context(), h.opts.Deployment, h.opts.AccountKeys, c.AccountID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	httpjson.WriteJSON(w, http.StatusOK, map[string]any{"providers": reach.Providers(), "models": reach.Models()})
}
