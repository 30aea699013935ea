// Package accounts is account-manage: accounts (a one-time secret, stored hashed), their
// agents with sealed secrets, their skills, their workspaces, their channel bindings, secret
// rotation (which closes the WebSocket connections of the old secret), the NATS credentials their clients read
// turns with, their own model provider keys, and the deletion that closes the account's connections and queues a purge.
package accounts

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/state/agentstore"
	"github.com/agentharness/harness/shared/state/callers"
	"github.com/agentharness/harness/shared/state/channels"
	"github.com/agentharness/harness/shared/state/connections"
	"github.com/agentharness/harness/shared/state/providerkeys"
	"github.com/agentharness/harness/shared/state/skills"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/state/tokenkeys"
	"github.com/agentharness/harness/shared/state/workspaces"
	"github.com/agentharness/harness/shared/wire/httpjson"
	"github.com/agentharness/harness/shared/wire/natsturns"
	"github.com/agentharness/harness/shared/wire/workqueue"
)

// Options wires the account-manage handler.
type Options struct {
	Store  *store.Store
	Agents *agentstore.Service
	// Skills keeps the accounts' skills; nil where the deployment keeps none.
	Skills *skills.Store
	// Workspaces keeps the accounts' workspaces; nil where the deployment keeps none.
	Workspaces *workspaces.Store
	// Channels keeps the accounts' channel bindings; nil where the deployment keeps none.
	Channels *channels.Store
	// Connections are the accounts' WebSocket connections, which Poster closes when their
	// secret is rotated or their account deleted; nil where the deployment has no WebSocket API.
	Connections *connections.Registry
	Poster      connections.Poster
	// Identify asks the platform whose bot a token is (Slack's auth.test, Telegram's getMe)
	// whenever a binding gets a token; a *channels.TokenRefusedError refuses the token. nil
	// skips it, and bindings carry no bot identity.
	Identify func(ctx context.Context, typ, botToken string) (channels.Identity, error)
	// SetWebhook registers url as a Telegram bot's webhook, with secret as its secret_token;
	// nil where the deployment cannot (set-webhook answers 501).
	SetWebhook func(ctx context.Context, botToken, url, secret string) error
	// NATS issues the credentials an account's clients read their turns from NATS with; nil
	// where the deployment hands out none (nats-credentials answers 501).
	NATS *natsturns.Issuer
	// ServiceURL is the deployment's public base URL (AGENT_SERVICE_URL), which webhook URLs
	// start with; empty where it is unknown.
	ServiceURL string
	// ProviderKeys keeps the accounts' own model provider keys; nil where the deployment keeps
	// none (the provider routes answer 501).
	ProviderKeys *providerkeys.Keys
	// Keys mints the accounts' end-user tokens; nil where the deployment mints none.
	Keys *tokenkeys.Keys
	// PrivateEndpoints is MCP_PRIVATE_ENDPOINTS: "allow" lets a registered JWKS URL be
	// http:// (a local server); otherwise it must be https://.
	PrivateEndpoints string
	// AdminSecret guards the admin routes; empty disables them.
	AdminSecret string
	// OpenSignup lets anyone create an account with POST /accounts; otherwise it needs the
	// admin secret.
	OpenSignup bool
	// Enqueue sends a work message to async-worker: the purge of a deleted account's data.
	// nil leaves every purge to the sweeper.
	Enqueue func(ctx context.Context, body string) error
	Now     func() time.Time
	Logger  *slog.Logger
}

// Handler serves account-manage: accounts, their secrets and their agentstore.
type Handler struct {
	opts Options
	mux  *http.ServeMux
	errs httpjson.ErrorWriter
}

// maxConfigBytes bounds an agent config, well under DynamoDB's 400 KB item limit.
const maxConfigBytes = 256 << 10

// NewFrom returns the account-manage handler built from opts.
func NewFrom(opts Options) *Handler {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	opts.ServiceURL = strings.TrimSuffix(opts.ServiceURL, "/")
	h := &Handler{opts: opts, mux: http.NewServeMux(), errs: httpjson.ErrorWriter{Logger: opts.Logger}}
	me := h.account
	admin := h.admin
	routes := map[string]http.HandlerFunc{
		"POST /accounts":                                             h.createAccount,
		"GET /accounts":                                              admin(h.listAccounts),
		"GET /accounts/{accountId}":                                  admin(h.getAccount),
		"PATCH /accounts/{accountId}":                                admin(h.updateAccount),
		"DELETE /accounts/{accountId}":                               admin(h.deleteAccount),
		"POST /accounts/{accountId}/rotate-secret":                   admin(h.rotateSecret),
		"GET /accounts/me":                                           me(h.getAccount),
		"PATCH /accounts/me":                                         me(h.updateAccount),
		"DELETE /accounts/me":                                        me(h.deleteAccount),
		"POST /accounts/me/rotate-secret":                            me(h.rotateSecret),
		"POST /accounts/me/nats-credentials":                         me(h.natsCredentials),
		"POST /accounts/me/tokens":                                   me(h.mintToken),
		"PUT /accounts/me/token-issuer":                              me(h.putIssuer),
		"GET /accounts/me/token-issuer":                              me(h.getIssuer),
		"DELETE /accounts/me/token-issuer":                           me(h.deleteIssuer),
		"POST /accounts/me/agents":                                   me(h.createAgent),
		"GET /accounts/me/agents":                                    me(h.listAgents),
		"GET /accounts/me/agents/{agentId}":                          me(h.getAgent),
		"PATCH /accounts/me/agents/{agentId}":                        me(h.updateAgent),
		"DELETE /accounts/me/agents/{agentId}":                       me(h.deleteAgent),
		"POST /accounts/me/skills":                                   me(h.putSkill),
		"GET /accounts/me/skills":                                    me(h.listSkills),
		"GET /accounts/me/skills/{name}":                             me(h.getSkill),
		"DELETE /accounts/me/skills/{name}":                          me(h.deleteSkill),
		"POST /accounts/me/workspaces":                               me(h.createWorkspace),
		"GET /accounts/me/workspaces":                                me(h.listWorkspaces),
		"GET /accounts/me/workspaces/{workspace}":                    me(h.getWorkspace),
		"DELETE /accounts/me/workspaces/{workspace}":                 me(h.deleteWorkspace),
		"GET /accounts/me/workspaces/{workspace}/files":              me(h.getFile),
		"GET /accounts/me/workspaces/{workspace}/files/{path...}":    me(h.getFile),
		"PUT /accounts/me/workspaces/{workspace}/files/{path...}":    me(h.putFile),
		"DELETE /accounts/me/workspaces/{workspace}/files/{path...}": me(h.deleteFile),
		"GET /accounts/me/workspaces/{workspace}/history":            me(h.workspaceHistory),
		"GET /accounts/me/workspaces/{workspace}/diff":               me(h.workspaceDiff),
		"POST /accounts/me/channels":                                 me(h.createChannel),
		"GET /accounts/me/channels":                                  me(h.listChannels),
		"GET /accounts/me/channels/{bindingId}":                      me(h.getChannel),
		"PATCH /accounts/me/channels/{bindingId}":                    me(h.updateChannel),
		"DELETE /accounts/me/channels/{bindingId}":                   me(h.deleteChannel),
		"POST /accounts/me/channels/{bindingId}/set-webhook":         me(h.setWebhook),
		"GET /accounts/me/providers":                                 me(h.listProviders),
		"PUT /accounts/me/providers/{provider}":                      me(h.putProvider),
		"GET /accounts/me/providers/{provider}":                      me(h.getProvider),
		"DELETE /accounts/me/providers/{provider}":                   me(h.deleteProvider),
	}
	for pattern, fn := range routes {
		h.mux.HandleFunc(pattern, fn)
	}
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		httpjson.WriteError(w, &httpjson.Error{Status: http.StatusNotFound, Message: "no route for " + r.Method + " " + r.URL.Path})
	})
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// accountKey carries the account a route acts on.
type accountKey struct{}

func accountID(r *http.Request) string { return r.Context().Value(accountKey{}).(string) }

// account authenticates the account secret and acts on that account.
func (h *Handler) account(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		err := callers.SecretOnly(r)
		var acc store.Account
		if err == nil {
			acc, err = httpjson.Authenticate(r, h.opts.Store)
		}
		if err == nil {
			err = checkPathID(r, "agentId")
		}
		if err == nil {
			err = checkSkillName(r)
		}
		if err == nil {
			err = checkPathID(r, "workspace")
		}
		if err != nil {
			h.errs.Fail(w, r, err)
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), accountKey{}, acc.ID)))
	}
}

// admin authenticates the admin secret and acts on the account in the path.
func (h *Handler) admin(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		err := h.checkAdmin(r)
		if err == nil {
			err = checkPathID(r, "accountId")
		}
		if err != nil {
			h.errs.Fail(w, r, err)
			return
		}
		ctx := r.Context()
		if id := r.PathValue("accountId"); id != "" {
			ctx = context.WithValue(ctx, accountKey{}, id)
		}
		next(w, r.WithContext(ctx))
	}
}

func (h *Handler) checkAdmin(r *http.Request) error {
	if h.opts.AdminSecret == "" {
		return &httpjson.Error{Status: http.StatusForbidden, Message: "admin routes are disabled: the deployment sets no admin secret"}
	}
	secret, ok := httpjson.Bearer(r)
	if !ok {
		return &httpjson.Error{Status: http.StatusUnauthorized, Message: "missing bearer token: send Authorization: Bearer <admin secret>"}
	}
	// Comparing fixed-length hashes keeps the comparison constant-time whatever the length.
	got, want := sha256.Sum256([]byte(secret)), sha256.Sum256([]byte(h.opts.AdminSecret))
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		return &httpjson.Error{Status: http.StatusUnauthorized, Message: "invalid admin secret"}
	}
	return nil
}

// readBody reads a capped body that must be JSON.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := readCapped(w, r, maxConfigBytes)
	if err != nil {
		return nil, err
	}
	return body, checkJSON(body)
}

// readCapped reads a body of at most limit bytes; past it, 413.
func readCapped(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, &httpjson.Error{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("request body is larger than %d bytes", limit)}
	}
	if err != nil {
		return nil, &httpjson.Error{Status: http.StatusBadRequest, Message: "reading the request body: " + err.Error()}
	}
	return body, nil
}

// checkJSON refuses a body that is not JSON or names a key twice in one object.
func checkJSON(body []byte) error {
	if !json.Valid(body) {
		return &httpjson.Error{Status: http.StatusBadRequest, Message: "the request body is not valid JSON"}
	}
	return httpjson.CheckKeys(body)
}

type usernameBody struct {
	Username string `json:"username"`
}

func readUsername(w http.ResponseWriter, r *http.Request) (string, error) {
	body, err := readBody(w, r)
	if err != nil {
		return "", err
	}
	var b usernameBody
	if err := httpjson.DecodeStrict(body, &b); err != nil {
		return "", httpjson.BodyError(err)
	}
	return checkUsername(b.Username)
}

// checkUsername is name trimmed, or the 400 of a name an account may not have.
func checkUsername(name string) (string, error) {
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		return "", httpjson.FieldError("username", "is required")
	case len(name) > 64:
		return "", httpjson.FieldError("username", "must be at most 64 characters")
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return "", httpjson.FieldError("username", "must not contain control characters")
	}
	return name, nil
}

// checkPathID checks the route's {name} segment, when the route has one.
func checkPathID(r *http.Request, name string) error {
	return httpjson.CheckOptionalID(name, r.PathValue(name))
}

func (h *Handler) createAccount(w http.ResponseWriter, r *http.Request) {
	if !h.opts.OpenSignup {
		if err := h.checkAdmin(r); err != nil {
			h.errs.Fail(w, r, err)
			return
		}
	}
	name, err := readUsername(w, r)
	if err != nil {
		h.errs.Fail(w, r, err)
		return
	}
	acc, secret, err := h.opts.Store.CreateAccount(r.Context(), name, h.opts.Now())
	if err != nil {
		h.errs.Fail(w, r, err)
		return
	}
	httpjson.WriteJSON(w, http.StatusCreated, struct {
		store.Account
		Secret string `json:"secret"`
	}{acc, secret})
}

func (h *Handler) listAccounts(w http.ResponseWriter, r *http.Request) {
	limit := int32(100)
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			h.errs.Fail(w, r, httpjson.FieldError("limit", "must be a number from 1 to 1000"))
			return
		}
		limit = int32(n)
	}
	accs, next, err := h.opts.Store.ListAccounts(r.Context(), limit, r.URL.Query().Get("cursor"))
	if err != nil {
		h.errs.Fail(w, r, err)
		return
	}
	httpjson.WriteJSON(w, http.StatusOK, map[string]any{"accounts": accs, "cursor": next})
}

// accountView is an account as its routes show it: with the origins allowed to call it.
type accountView struct {
	store.Account
	AllowedOrigins []string `json:"allowedOrigins"`
}

func (h *Handler) getAccount(w http.ResponseWriter, r *http.Request) {
	h.showAccount(w, r, http.StatusOK)
}

func (h *Handler) showAccount(w http.ResponseWriter, r *http.Request, status int) {
	a, err := h.opts.Store.AccountAccess(r.Context(), accountID(r))
	if err != nil {
		h.errs.Fail(w, r, notFound(err, "account"))
		return
	}
	httpjson.WriteJSON(w, status, accountView{a.Account, append([]string{}, a.Origins...)})
}

// updateAccount runs PATCH on an account: its username, and the origins whose pages may call
// its agents (allowedOrigins; [] allows none), either or both.
func (h *Handler) updateAccount(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Username       *string   `json:"username"`
		AllowedOrigins *[]string `json:"allowedOrigins"`
	}
	err := h.decode(w, r, &body)
	if err == nil && body.Username == nil && body.AllowedOrigins == nil {
		err = httpjson.FieldError("username", `send "username", "allowedOrigins" or both`)
	}
	var name string
	if err == nil && body.Username != nil {
		name, err = checkUsername(*body.Username)
	}
	if err == nil && body.AllowedOrigins != nil {
		err = checkOrigins(*body.AllowedOrigins)
	}
	ctx, id := r.Context(), accountID(r)
	if err == nil && body.Username != nil {
		_, err = h.opts.Store.RenameAccount(ctx, id, name, h.opts.Now())
	}
	if err == nil && body.AllowedOrigins != nil {
		err = h.opts.Store.SetOrigins(ctx, id, *body.AllowedOrigins, h.opts.Now())
	}
	if err != nil {
		h.errs.Fail(w, r, notFound(err, "account"))
		return
	}
	h.showAccount(w, r, http.StatusOK)
}

// deleteAccount turns the account into a tombstone first: its secret stops working at once, and
// a failure before that deletes nothing and is answered. What follows never fails the request
// (the caller's secret is gone, so it could not retry): the agents are deleted here, the
// conversations (and any agents left) by a purge on async-worker. A purge that cannot be queued
// is not lost: the tombstone keeps it owed and the sweeper queues it once due. It is queued only
// after the tombstone is written because the purge refuses live accounts.
func (h *Handler) deleteAccount(w http.ResponseWriter, r *http.Request) {
	ctx, id := r.Context(), accountID(r)
	if err := h.opts.Store.DeleteAccount(ctx, id, h.opts.Now()); err != nil {
		h.errs.Fail(w, r, notFound(err, "account"))
		return
	}
	ctx = context.WithoutCancel(ctx)
	log := h.opts.Logger.With("accountId", id)
	h.closeConnections(ctx, id, "")
	if err := h.opts.Store.DeleteAgents(ctx, id); err != nil {
		log.ErrorContext(ctx, "deleting a deleted account's agents; its purge will", "err", err)
	}
	if h.opts.Enqueue == nil {
		log.WarnContext(ctx, "no work queue: the sweeper will queue the deleted account's purge")
	} else if err := h.opts.Enqueue(ctx, workqueue.PurgeMessage(id)); err != nil {
		log.ErrorContext(ctx, "queueing a deleted account's purge; the sweeper will", "err", err)
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) rotateSecret(w http.ResponseWriter, r *http.Request) {
	id := accountID(r)
	secret, err := h.opts.Store.RotateSecret(r.Context(), id, h.opts.Now())
	if err != nil {
		h.errs.Fail(w, r, notFound(err, "account"))
		return
	}
	h.closeConnections(r.Context(), id, store.HashSecret(secret))
	httpjson.WriteJSON(w, http.StatusOK, map[string]string{"accountId": id, "secret": secret})
}

// closeConnections closes the account's WebSocket connections opened with a secret other than
// the one whose hash is current ("" closes them all): passive ones too, which send no frame to
// be refused at. It runs before the answer, so whoever rotated a leaked secret knows no socket
// of it still listens; a failure is logged and never answered, as the secret has changed already
// (each socket that escapes is still refused at its next frame).
func (h *Handler) closeConnections(ctx context.Context, accountID, current string) {
	if h.opts.Connections == nil {
		return
	}
	if err := h.opts.Connections.RevokeAccount(context.WithoutCancel(ctx), h.opts.Poster, accountID, current); err != nil {
		h.opts.Logger.ErrorContext(ctx, "closing the account's websocket connections", "accountId", accountID, "err", err)
	}
}

// agentBody is POST /accounts/me/agents: the agent config, with an optional agentId beside it.
func (h *Handler) createAgent(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r)
	if err != nil {
		h.errs.Fail(w, r, err)
		return
	}
	agentID, config, err := splitAgentID(body)
	if err != nil {
		h.errs.Fail(w, r, err)
		return
	}
	v, err := h.opts.Agents.Create(r.Context(), accountID(r), agentID, config)
	if errors.Is(err, store.ErrExists) {
		err = &httpjson.Error{Status: http.StatusConflict, Message: "agent " + agentID + " already exists; PATCH it instead"}
	}
	if err != nil {
		h.errs.Fail(w, r, agentconfig.HTTPError(err))
		return
	}
	if len(v.Warnings) > 0 {
		h.opts.Logger.WarnContext(r.Context(), "agent config accepted with warnings", "accountId", accountID(r), "agentId", v.AgentID, "warnings", v.Warnings)
	}
	httpjson.WriteJSON(w, http.StatusCreated, v)
}

// splitAgentID takes an optional top-level agentId out of an agent config body.
func splitAgentID(body []byte) (string, []byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return "", nil, &httpjson.Error{Status: http.StatusBadRequest, Message: "the request body must be an agent config object"}
	}
	raw, ok := fields["agentId"]
	if !ok {
		return "", body, nil
	}
	var id string
	if err := json.Unmarshal(raw, &id); err != nil {
		return "", nil, httpjson.FieldError("agentId", "must be a string")
	}
	delete(fields, "agentId")
	config, err := json.Marshal(fields)
	return id, config, err
}

func (h *Handler) listAgents(w http.ResponseWriter, r *http.Request) {
	all, err := h.opts.Agents.List(r.Context(), accountID(r))
	if err != nil {
		h.errs.Fail(w, r, err)
		return
	}
	httpjson.WriteJSON(w, http.StatusOK, map[string]any{"agents": all})
}

func (h *Handler) getAgent(w http.ResponseWriter, r *http.Request) {
	v, err := h.opts.Agents.Get(r.Context(), accountID(r), r.PathValue("agentId"))
	if err != nil {
		h.errs.Fail(w, r, notFound(err, "agent "+r.PathValue("agentId")))
		return
	}
	httpjson.WriteJSON(w, http.StatusOK, v)
}

func (h *Handler) updateAgent(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r)
	if err != nil {
		h.errs.Fail(w, r, err)
		return
	}
	id := r.PathValue("agentId")
	v, err := h.opts.Agents.Update(r.Context(), accountID(r), id, body)
	if errors.Is(err, store.ErrConflict) {
		err = &httpjson.Error{Status: http.StatusConflict, Message: "agent " + id + " was changed by another request; read it again and retry"}
	}
	if err != nil {
		h.errs.Fail(w, r, agentconfig.HTTPError(notFound(err, "agent "+id)))
		return
	}
	httpjson.WriteJSON(w, http.StatusOK, v)
}

func (h *Handler) deleteAgent(w http.ResponseWriter, r *http.Request) {
	if err := h.opts.Agents.Delete(r.Context(), accountID(r), r.PathValue("agentId")); err != nil {
		h.errs.Fail(w, r, notFound(err, "agent "+r.PathValue("agentId")))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// notFound turns store.ErrNotFound into a 404; another account's records are just as absent.
func notFound(err error, what string) error {
	if errors.Is(err, store.ErrNotFound) {
		return &httpjson.Error{Status: http.StatusNotFound, Message: what + " not found"}
	}
	return err
}
