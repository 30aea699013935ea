package accounts

import (
	"errors"
	"net/http"
	"time"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/state/providerkeys"
	"github.com/agentharness/harness/shared/wire/httpjson"
)

// providerView is a provider key as the routes answer it: the key itself never, only that
// there is one.
type providerView struct {
	Provider  string `json:"provider"`
	APIKey    string `json:"apiKey"`
	BaseURL   string `json:"baseURL,omitempty"`
	UpdatedAt string `json:"updatedAt,omitempty"`
}

func viewOf(k providerkeys.Key) providerView {
	return providerView{Provider: k.Provider, APIKey: agentconfig.Redacted, BaseURL: k.BaseURL, UpdatedAt: k.UpdatedAt}
}

// providerKeys are the deployment's keeper of provider keys, or a 501 where it has none.
func (h *Handler) providerKeys(r *http.Request) (*providerkeys.Keys, error) {
	if h.opts.ProviderKeys == nil {
		return nil, &httpjson.Error{Status: http.StatusNotImplemented, Message: "this deployment keeps no provider keys"}
	}
	if err := providerkeys.CheckProvider(r.PathValue("provider")); r.PathValue("provider") != "" && err != nil {
		return nil, &httpjson.Error{Status: http.StatusBadRequest, Message: err.Error()}
	}
	return h.opts.ProviderKeys, nil
}

// putProvider runs PUT /accounts/me/providers/{provider}: {"apiKey": "…", "baseURL"?: "…"},
// the account's own key of a model provider, which its agents whose model block names no key
// use before the deployment's. It replaces the key the account had.
func (h *Handler) putProvider(w http.ResponseWriter, r *http.Request) {
	keys, err := h.providerKeys(r)
	var body struct {
		APIKey  string `json:"apiKey"`
		BaseURL string `json:"baseURL"`
	}
	if err == nil {
		err = h.decode(w, r, &body)
	}
	key := providerkeys.Key{Provider: r.PathValue("provider"), APIKey: body.APIKey, BaseURL: body.BaseURL}
	if field, problem := key.Problem(); err == nil && field != "" {
		err = httpjson.FieldError(field, problem)
	}
	if err == nil {
		err = notFound(keys.Put(r.Context(), accountID(r), key, h.opts.Now()), "account")
	}
	if err != nil {
		h.errs.Fail(w, r, err)
		return
	}
	key.UpdatedAt = h.opts.Now().UTC().Format(time.RFC3339)
	httpjson.WriteJSON(w, http.StatusOK, viewOf(key))
}

// listProviders runs GET /accounts/me/providers: the providers the account keeps a key of.
func (h *Handler) listProviders(w http.ResponseWriter, r *http.Request) {
	list, ok := h.listKeys(w, r)
	if !ok {
		return
	}
	views := make([]providerView, len(list))
	for i, k := range list {
		views[i] = viewOf(k)
	}
	httpjson.WriteJSON(w, http.StatusOK, map[string]any{"providers": views})
}

// getProvider runs GET /accounts/me/providers/{provider}: the key, redacted, or 404.
func (h *Handler) getProvider(w http.ResponseWriter, r *http.Request) {
	list, ok := h.listKeys(w, r)
	if !ok {
		return
	}
	for _, k := range list {
		if k.Provider == r.PathValue("provider") {
			httpjson.WriteJSON(w, http.StatusOK, viewOf(k))
			return
		}
	}
	h.errs.Fail(w, r, &httpjson.Error{Status: http.StatusNotFound, Message: "the account keeps no " + r.PathValue("provider") + " key"})
}

// listKeys are the account's keys, unopened; ok is false when it answered the failure.
func (h *Handler) listKeys(w http.ResponseWriter, r *http.Request) (list []providerkeys.Key, ok bool) {
	keys, err := h.providerKeys(r)
	if err == nil {
		list, err = keys.List(r.Context(), accountID(r))
	}
	if err != nil {
		h.errs.Fail(w, r, notFound(err, "account"))
		return nil, false
	}
	return list, true
}

// deleteProvider runs DELETE /accounts/me/providers/{provider}: the account's agents fall back
// to the deployment's key again.
func (h *Handler) deleteProvider(w http.ResponseWriter, r *http.Request) {
	keys, err := h.providerKeys(r)
	if err == nil {
		err = keys.Delete(r.Context(), accountID(r), r.PathValue("provider"), h.opts.Now())
	}
	if errors.Is(err, providerkeys.ErrNoKey) {
		err = &httpjson.Error{Status: http.StatusNotFound, Message: "the account keeps no " + r.PathValue("provider") + " key"}
	}
	if err != nil {
		h.errs.Fail(w, r, notFound(err, "account"))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
