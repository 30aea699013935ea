// Package callers says who a request's bearer credential speaks for: the account secret (the
// account owner, who sees everything of the account) or an end-user token (one end user of the
// account's application, on some of its agents, who sees only their own conversations), and
// which browser origins the account lets call it.
package callers

import (
	"context"
	"errors"
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

// Caller is who a request speaks for.
type Caller struct {
	AccountID string
	// EndUser is the end user a token acts for; empty for the account secret.
	EndUser string
	// Agents are the agents a token may use; empty: all of the account's.
	Agents []string
	// Expires is when a token stops working; zero for the account secret.
	Expires time.Time
	// KeyID names the key that signed a token (tokenkeys.Keys.Holds says whether the account
	// still has it).
	KeyID string
	// access is the account's item as the credential's check read it; nil when it read none
	// (the secret's check reads no more than its hash).
	access *store.Access
}

// Access is the account as the token's verification read it, for the request to go on from
// without reading it again; ok is false for the account secret.
func (c Caller) Access() (a store.Access, ok bool) {
	if c.access == nil {
		return store.Access{}, false
	}
	return *c.access, true
}

// Token reports whether the caller holds an end-user token.
func (c Caller) Token() bool { return c.EndUser != "" }

// Allows reports whether the caller may use agentID.
func (c Caller) Allows(agentID string) bool {
	return len(c.Agents) == 0 || slices.Contains(c.Agents, agentID)
}

// Sees reports whether the caller may see a conversation of owner (its end user; empty for
// the account's own): the account secret sees all, a token its end user's only.
func (c Caller) Sees(owner string) bool { return c.EndUser == "" || c.EndUser == owner }

// Resolver authenticates credentials against the store and the accounts' token keys.
type Resolver struct {
	Store *store.Store
	Keys  *tokenkeys.Keys
}

// IsToken reports whether a bearer credential is an end-user token (a JWS compact JWT, whose
// header is base64url JSON, so it starts with "eyJ") rather than an account secret.
func IsToken(bearer string) bool {
	return strings.HasPrefix(bearer, "eyJ") && strings.Count(bearer, ".") == 2
}

// Resolve authenticates the request's bearer credential, secret or token. Its refusals are
// *httpjson.Error: 401 for a missing, unknown or expired credential (saying which), 503 when
// the account's JWKS URL cannot be read.
func (v *Resolver) Resolve(r *http.Request) (Caller, error) {
	bearer, ok := httpjson.Bearer(r)
	if !ok {
		return Caller{}, &httpjson.Error{Status: http.StatusUnauthorized, Message: "missing bearer token: send Authorization: Bearer <account secret or end-user token>"}
	}
	return v.ResolveBearer(r.Context(), bearer)
}

// ResolveBearer is Resolve for a credential carried another way (a WebSocket's).
func (v *Resolver) ResolveBearer(ctx context.Context, bearer string) (Caller, error) {
	if !IsToken(bearer) {
		acc, err := v.Store.AccountBySecret(ctx, bearer)
		if err != nil {
			return Caller{}, httpjson.SecretRefused(err)
		}
		return Caller{AccountID: acc.ID}, nil
	}
	if v.Keys == nil {
		return Caller{}, &httpjson.Error{Status: http.StatusUnauthorized, Message: "this route takes the account secret, not an end-user token"}
	}
	claims, access, err := v.Keys.Verify(ctx, bearer)
	if err != nil {
		return Caller{}, Refused(err)
	}
	return Caller{
		AccountID: claims.Account, EndUser: claims.EndUser, Agents: claims.Agents, Expires: time.Unix(claims.Expires, 0),
		KeyID: usertoken.KeyID(bearer), access: &access,
	}, nil
}

// Refused is the answer to a token Verify refused: 401 naming why (with "reason": "expired"
// for an expired token, so a client knows to mint another), 503 for a JWKS URL that cannot be
// read; other errors pass through.
func Refused(err error) error {
	switch {
	case errors.Is(err, usertoken.ErrExpired):
		return &httpjson.Error{Status: http.StatusUnauthorized, Message: "end-user token: " + err.Error(), Extra: map[string]any{"reason": "expired"}}
	case errors.Is(err, tokenkeys.ErrJWKSUnavailable):
		return &httpjson.Error{Status: http.StatusServiceUnavailable, Message: "end-user token: " + err.Error(), Cause: err}
	case errors.Is(err, usertoken.ErrMalformed), errors.Is(err, usertoken.ErrAlgorithm), errors.Is(err, usertoken.ErrUnknownKey), errors.Is(err, usertoken.ErrSignature):
		return &httpjson.Error{Status: http.StatusUnauthorized, Message: "end-user token: " + err.Error(), Extra: map[string]any{"reason": "invalid"}}
	}
	return err
}

// SecretOnly refuses an end-user token on a route of the account owner's: 401, as a token
// opens nothing there.
func SecretOnly(r *http.Request) error {
	if bearer, ok := httpjson.Bearer(r); ok && IsToken(bearer) {
		return &httpjson.Error{Status: http.StatusUnauthorized, Message: "an end-user token cannot be used here: this route takes the account secret"}
	}
	return nil
}

// Origin checks a browser request's Origin against the caller's account and, for another
// origin that the account allows, sets the CORS headers of the answer. A request without an
// Origin (a server's, curl's) or from the harness's own origin needs none; any other origin
// the account does not list is refused with 403 before anything is done, so a page of
// another site learns nothing and changes nothing.
func (v *Resolver) Origin(w http.ResponseWriter, r *http.Request, c *Caller) error {
	origin := r.Header.Get("Origin")
	if origin == "" || sameOrigin(origin, r.Host) {
		return nil
	}
	if err := v.CheckOrigin(r.Context(), c, origin, r.Host); err != nil {
		return err
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Add("Vary", "Origin")
	h.Set("Access-Control-Expose-Headers", ExposedHeaders)
	return nil
}

// CheckOrigin refuses a request from a page of origin, sent to host, unless origin is host or
// one the caller's account allows (403).
func (v *Resolver) CheckOrigin(ctx context.Context, c *Caller, origin, host string) error {
	if origin == "" || sameOrigin(origin, host) {
		return nil
	}
	if c.access == nil {
		a, err := v.Store.AccountAccess(ctx, c.AccountID)
		if err != nil {
			return httpjson.SecretRefused(err)
		}
		c.access = &a
	}
	if !slices.Contains(c.access.Origins, origin) {
		return &httpjson.Error{Status: http.StatusForbidden, Message: "origin " + origin + " is not among the account's allowed origins (PATCH /accounts/me with allowedOrigins)"}
	}
	return nil
}

// ExposedHeaders are the answer headers a page of an allowed origin may read.
const ExposedHeaders = "X-Conversation-Id, X-Vercel-Ai-Ui-Message-Stream, Retry-After"

// sameOrigin reports whether origin is host, the one the request was sent to.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, host)
}

// Preflight answers a CORS preflight (an OPTIONS request) of a route a page may call. A preflight
// carries no credential, so it cannot know the account and answers every origin; the request
// that follows is checked against the account's list (Origin) before it does anything.
func Preflight(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	if origin := r.Header.Get("Origin"); origin != "" {
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
	}
	h.Set("Access-Control-Allow-Methods", "GET, POST, PATCH, DELETE, OPTIONS")
	h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Last-Event-ID")
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
}
