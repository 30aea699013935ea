// Package chathttp serves harness-processing over HTTP: POST / (an agent turn streamed as a
// Vercel AI SDK UI message stream), POST /async (a turn queued for async-worker), GET /status
// (where an /async turn is) and the health checks. It is an edge of the turn engine: it reads
// requests, ranges over the engine's events as UI message chunks and maps the engine's refusals
// to HTTP. Lambda adapts the handler in main; the local runner serves it directly.
package chathttp

import (
	"errors"
	"net/http"

	"github.com/agentharness/harness/shared/model/catalogue"
	"github.com/agentharness/harness/shared/state/callers"
	"github.com/agentharness/harness/shared/turn"
	"github.com/agentharness/harness/shared/wire/httpjson"
)

// DefaultMaxBodyBytes bounds a request body when Options leaves it zero.
const DefaultMaxBodyBytes = 1 << 20

// Options wires the handler's dependencies: the turn engine's, and the HTTP edge's own.
type Options struct {
	turn.Options
	MaxBodyBytes int64
	// Callers authenticates the account secret and end-user tokens; nil: the secret alone,
	// against the engine's store.
	Callers *callers.Resolver
	// Deployment is what the deployment reaches by itself, and AccountKeys the providers an
	// account has its own key for (nil: none), for GET /models.
	Deployment  catalogue.Deployment
	AccountKeys catalogue.AccountKeys
}

// Handler serves harness-processing's routes.
type Handler struct {
	eng  *turn.Engine
	opts Options
	mux  *http.ServeMux
	errs httpjson.ErrorWriter
}

// Engine is the engine the handler runs turns on, for the routes its function adds (Handle).
func (h *Handler) Engine() *turn.Engine { return h.eng }

// Handle serves another route of the function (the chat platforms' webhook) beside the
// handler's own.
func (h *Handler) Handle(pattern string, handler http.Handler) { h.mux.Handle(pattern, handler) }

// New returns the harness-processing handler.
func New(opts Options) *Handler {
	eng := turn.New(opts.Options)
	opts.Options = eng.Options()
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Callers == nil {
		opts.Callers = &callers.Resolver{Store: opts.Store}
	}
	h := &Handler{eng: eng, opts: opts, mux: http.NewServeMux(), errs: httpjson.ErrorWriter{Logger: opts.Logger}}
	h.mux.HandleFunc("/{$}", h.root)
	h.mux.HandleFunc("GET /readyz", probe)
	h.mux.HandleFunc("GET /healthz", probe)
	// The AI SDK's DefaultChatTransport posts to its api and resumes at {api}/{chatId}/stream;
	// with the api at / that path would start with //, so the chat API is served at /chat too.
	h.mux.HandleFunc("POST /chat", h.turn)
	h.mux.HandleFunc("GET /chat/{conversationId}/stream", h.resume)
	h.mux.HandleFunc("POST /chat/{conversationId}/stop", h.stop)
	h.mux.HandleFunc("GET /chat/{conversationId}/subagents", h.subagents)
	h.mux.HandleFunc("GET /conversations/{conversationId}/messages", h.messages)
	h.mux.HandleFunc("POST /async", h.asyncTurn)
	h.mux.HandleFunc("GET /status/{eventId}", h.status)
	h.mux.HandleFunc("/mcp", h.serveMCP)
	h.mux.HandleFunc("GET /agents", h.agents)
	h.mux.HandleFunc("GET /models", h.models)
	h.mux.HandleFunc("GET /conversations", h.listConversations)
	h.mux.HandleFunc("PATCH /conversations/{conversationId}", h.patchConversation)
	h.mux.HandleFunc("GET /threads/{parentThreadId}/variables/{requestId}", h.variables)
	h.mux.HandleFunc("POST /threads/{parentThreadId}/variables/{requestId}", h.provideVariables)
	h.mux.HandleFunc("DELETE /conversations/{conversationId}", h.deleteConversation)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		httpjson.WriteError(w, &httpjson.Error{Status: http.StatusNotFound, Message: "no route for " + r.Method + " " + r.URL.Path})
	})
	return h
}

// probe answers the App Server's health probes: the listener is up.
func probe(w http.ResponseWriter, _ *http.Request) {
	httpjson.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodOptions && preflighted(r.URL.Path) {
		callers.Preflight(w, r)
		return
	}
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) root(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		httpjson.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	case http.MethodPost:
		h.turn(w, r)
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		httpjson.WriteError(w, &httpjson.Error{Status: http.StatusMethodNotAllowed, Message: "method " + r.Method + " is not allowed on /"})
	}
}

// statusOf is the HTTP status of each kind of the engine's refusals.
var statusOf = map[turn.RefusalKind]int{
	turn.Invalid:  http.StatusBadRequest,
	turn.NotFound: http.StatusNotFound,
	turn.Busy:     http.StatusConflict,
	turn.Conflict: http.StatusConflict,
	turn.TooLarge: http.StatusRequestEntityTooLarge,
}

// fail answers a refused or failed request: an engine refusal with its status, message and
// detail, an *httpjson.Error as it is, anything else as a bare 500 (logged in full). It is the
// one place the HTTP edge maps the engine's refusals.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	h.errs.Fail(w, r, httpError(err))
}

// httpError is err as the HTTP edge answers it: an engine refusal becomes an *httpjson.Error.
func httpError(err error) error {
	var ref *turn.Refusal
	if errors.As(err, &ref) {
		return &httpjson.Error{Status: statusOf[ref.Kind], Message: ref.Message, Extra: ref.Detail, Cause: ref.Cause}
	}
	return err
}
