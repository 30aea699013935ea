package accounts

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/state/tokenkeys"
	"github.com/agentharness/harness/shared/wire/httpjson"
	"github.com/agentharness/harness/shared/wire/usertoken"
)

// MaxTokenTTL is the longest life a minted end-user token may ask for (usertoken.MaxTTL).
var MaxTokenTTL = usertoken.MaxTTL

// mintToken runs POST /accounts/me/tokens: a signed end-user token for endUser, on agents
// (none: all of the account's), that lives ttlSeconds (default an hour, at most a day).
func (h *Handler) mintToken(w http.ResponseWriter, r *http.Request) {
	if h.opts.Keys == nil {
		h.errs.Fail(w, r, &httpjson.Error{Status: http.StatusNotImplemented, Message: "this deployment mints no end-user tokens"})
		return
	}
	var body struct {
		EndUser    string   `json:"endUser"`
		Agents     []string `json:"agents"`
		TTLSeconds *int64   `json:"ttlSeconds"`
	}
	if err := h.decode(w, r, &body); err != nil {
		h.errs.Fail(w, r, err)
		return
	}
	ttl := tokenkeys.DefaultTTL
	if body.TTLSeconds != nil {
		ttl = time.Duration(*body.TTLSeconds) * time.Second
		if *body.TTLSeconds < 1 || ttl > MaxTokenTTL {
			h.errs.Fail(w, r, httpjson.FieldError("ttlSeconds", fmt.Sprintf("must be from 1 to %d (a day)", int64(MaxTokenTTL/time.Second))))
			return
		}
	}
	if err := usertoken.CheckEndUser(body.EndUser); err != nil {
		h.errs.Fail(w, r, httpjson.FieldError("endUser", err.Error()))
		return
	}
	ctx, id := r.Context(), accountID(r)
	if err := h.checkTokenAgents(r, id, body.Agents); err != nil {
		h.errs.Fail(w, r, err)
		return
	}
	tok, exp, err := h.opts.Keys.Mint(ctx, id, body.EndUser, body.Agents, ttl)
	if err != nil {
		h.errs.Fail(w, r, notFound(err, "account"))
		return
	}
	httpjson.WriteJSON(w, http.StatusCreated, map[string]any{"token": tok, "expiresAt": exp.UTC()})
}

// checkTokenAgents refuses a token's agents list that names an agent the account does not
// have, or one twice.
func (h *Handler) checkTokenAgents(r *http.Request, accountID string, agents []string) error {
	if agents == nil {
		return nil
	}
	if len(agents) == 0 {
		return httpjson.FieldError("agents", "is empty: leave it out for a token of every agent")
	}
	have, err := h.opts.Store.ListAgents(r.Context(), accountID)
	if err != nil {
		return err
	}
	for i, a := range agents {
		field := fmt.Sprintf("agents[%d]", i)
		if err := httpjson.CheckID(field, a); err != nil {
			return err
		}
		if slices.Index(agents, a) != i {
			return httpjson.FieldError(field, "names agent "+a+" twice")
		}
		if !slices.ContainsFunc(have, func(x store.Agent) bool { return x.ID == a }) {
			return httpjson.FieldError(field, "agent "+a+" not found")
		}
	}
	return nil
}

// issuerView is the keys an account mints its own end-user tokens with, as registered.
type issuerView struct {
	JWKS    json.RawMessage `json:"jwks,omitempty"`
	JWKSURL string          `json:"jwksUrl,omitempty"`
}

// putIssuer runs PUT /accounts/me/token-issuer: {"jwks": {"keys": […]}} or {"jwksUrl": "…"},
// the public keys the account's backend signs its own end-user tokens with. It replaces what
// was registered: tokens of a key it drops stop working at once (a URL's, within the 5 minutes
// its keys are kept).
func (h *Handler) putIssuer(w http.ResponseWriter, r *http.Request) {
	var body issuerView
	if err := h.decode(w, r, &body); err != nil {
		h.errs.Fail(w, r, err)
		return
	}
	var err error
	switch {
	case (len(body.JWKS) == 0) == (body.JWKSURL == ""):
		err = httpjson.FieldError("jwks", `send either "jwks" (a JWKS of Ed25519 public keys) or "jwksUrl", not both`)
	case body.JWKSURL != "":
		if p := tokenkeys.CheckIssuerURL(body.JWKSURL, h.opts.PrivateEndpoints); p != nil {
			err = httpjson.FieldError("jwksUrl", p.Error())
		}
	default:
		if _, p := tokenkeys.ParseJWKS(body.JWKS); p != nil {
			err = httpjson.FieldError("jwks", p.Error())
		}
	}
	if err == nil {
		err = notFound(h.opts.Store.SetIssuer(r.Context(), accountID(r), string(body.JWKS), body.JWKSURL, h.opts.Now()), "account")
	}
	if err != nil {
		h.errs.Fail(w, r, err)
		return
	}
	httpjson.WriteJSON(w, http.StatusOK, body)
}

// getIssuer runs GET /accounts/me/token-issuer: the keys registered, or 404 for none.
func (h *Handler) getIssuer(w http.ResponseWriter, r *http.Request) {
	a, err := h.opts.Store.AccountAccess(r.Context(), accountID(r))
	if err == nil && a.Issuer == "" && a.IssuerURL == "" {
		err = &httpjson.Error{Status: http.StatusNotFound, Message: "the account has registered no token issuer keys"}
	}
	if err != nil {
		h.errs.Fail(w, r, notFound(err, "account"))
		return
	}
	httpjson.WriteJSON(w, http.StatusOK, issuerView{JWKS: json.RawMessage(a.Issuer), JWKSURL: a.IssuerURL})
}

// deleteIssuer runs DELETE /accounts/me/token-issuer: every token the registered keys signed
// stops working.
func (h *Handler) deleteIssuer(w http.ResponseWriter, r *http.Request) {
	if err := h.opts.Store.SetIssuer(r.Context(), accountID(r), "", "", h.opts.Now()); err != nil {
		h.errs.Fail(w, r, notFound(err, "account"))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// MaxOrigins bounds an account's allowed origins.
const MaxOrigins = 50

// checkOrigins refuses an allowed origin that is not exactly scheme://host[:port].
func checkOrigins(origins []string) error {
	if len(origins) > MaxOrigins {
		return httpjson.FieldError("allowedOrigins", fmt.Sprintf("lists %d origins, more than %d", len(origins), MaxOrigins))
	}
	for i, o := range origins {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(o, "/") || o != strings.ToLower(u.Scheme)+"://"+u.Host {
			return httpjson.FieldError(fmt.Sprintf("allowedOrigins[%d]", i), fmt.Sprintf("%q is not an origin: write it as the browser sends it, scheme://host[:port] (such as https://app.example.com), with no path or trailing slash", o))
		}
	}
	return nil
}

// decode reads a JSON body strictly into v.
func (h *Handler) decode(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	if err := httpjson.DecodeStrict(body, v); err != nil {
		return httpjson.BodyError(err)
	}
	return nil
}
