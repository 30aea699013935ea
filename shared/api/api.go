// Package api serves harness-processing over HTTP: GET / (health) and POST / (an agent turn
// streamed as a Vercel AI SDK UI message stream). Lambda adapts the handler in main; the local
// runner serves it directly.
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentharness/harness/shared/connections"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/agents"
	"github.com/agentharness/harness/shared/asynctools"
	"github.com/agentharness/harness/shared/store"
	"github.com/agentharness/harness/shared/strictjson"
	"github.com/agentharness/harness/shared/tool"
)

// Defaults for Options left zero.
const (
	DefaultMaxBodyBytes = 1 << 20
	// DefaultLease matches Lambda's longest invocation: a crashed turn frees its conversation
	// after at most this long.
	DefaultLease    = 15 * time.Minute
	DefaultEventTTL = 7 * 24 * time.Hour
	// DefaultApprovalTimeout is how long a held call waits for the user's decision.
	DefaultApprovalTimeout = 24 * time.Hour
	// DefaultAsyncToolTimeout is how long an outside worker has to complete a call.
	DefaultAsyncToolTimeout = time.Hour
	DefaultHeartbeat        = 10 * time.Second
	DefaultWaitMargin       = 30 * time.Second
	// DefaultAbortPoll: an aborted WebSocket turn stops within about this long.
	DefaultAbortPoll = 250 * time.Millisecond
)

// Options wires the handler's dependencies.
type Options struct {
	Store *store.Store
	// Agents loads agent configs with their secrets.
	Agents *agents.Service
	// Tools builds an agent's ToolSet from its config.tools.
	Tools func(config map[string]json.RawMessage) (*tool.Set, error)
	// Model builds an agent's model from its model block.
	Model func(block json.RawMessage) (agent.Model, error)
	// Now is the clock; nil means time.Now.
	Now          func() time.Time
	Logger       *slog.Logger
	MaxBodyBytes int64
	Lease        time.Duration
	EventTTL     time.Duration
	// ApprovalTimeout: a held call not decided within it is denied as expired.
	ApprovalTimeout time.Duration

	// Async keeps async tool rows and dispatch groups; nil runs async tools inline.
	Async *asynctools.Store
	// Redriver seals groups and re-drives settled ones.
	Redriver *asynctools.Redriver
	// AsyncToolTimeout is an external-dispatch call's deadline.
	AsyncToolTimeout time.Duration
	// Heartbeat is how often a stream waiting for async work sends a keep-alive comment.
	Heartbeat time.Duration
	// WaitMargin is how long before the invocation's deadline the parent stops waiting for
	// same-invocation work, leaving time to record the outcome.
	WaitMargin time.Duration
	// Enqueue puts work for async-worker on its queue (/async turns); nil disables /async.
	Enqueue func(ctx context.Context, body string) error

	// Connections and Poster are the WebSocket side: the registry of connections and runtimes,
	// and the way to send them frames. Both nil where no WebSocket API is wired.
	Connections *connections.Registry
	Poster      Poster
	// AbortPoll is how often a WebSocket turn looks for an abort_message.
	AbortPoll time.Duration
}

// Handler serves harness-processing's routes.
type Handler struct {
	opts Options
	mux  *http.ServeMux
	errs errorWriter
}

// New returns the harness-processing handler.
func New(opts Options) *Handler {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Lease <= 0 {
		opts.Lease = DefaultLease
	}
	if opts.EventTTL <= 0 {
		opts.EventTTL = DefaultEventTTL
	}
	if opts.ApprovalTimeout <= 0 {
		opts.ApprovalTimeout = DefaultApprovalTimeout
	}
	if opts.AsyncToolTimeout <= 0 {
		opts.AsyncToolTimeout = DefaultAsyncToolTimeout
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.AbortPoll <= 0 {
		opts.AbortPoll = DefaultAbortPoll
	}
	if opts.WaitMargin <= 0 {
		opts.WaitMargin = DefaultWaitMargin
	}
	h := &Handler{opts: opts, mux: http.NewServeMux(), errs: errorWriter{opts.Logger}}
	h.mux.HandleFunc("/{$}", h.root)
	h.mux.HandleFunc("GET /readyz", probe)
	h.mux.HandleFunc("GET /healthz", probe)
	h.mux.HandleFunc("POST /async", h.asyncTurn)
	h.mux.HandleFunc("GET /status/{eventId}", h.status)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &Error{Status: http.StatusNotFound, Message: "no route for " + r.Method + " " + r.URL.Path})
	})
	return h
}

// probe answers the App Server's health probes: the listener is up.
func probe(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

func (h *Handler) root(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	case http.MethodPost:
		h.turn(w, r)
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		writeError(w, &Error{Status: http.StatusMethodNotAllowed, Message: "method " + r.Method + " is not allowed on /"})
	}
}

// Error is an HTTP error whose Message is safe to show to the client.
type Error struct {
	Status  int
	Message string
	// Extra fields merged into the JSON body.
	Extra map[string]any
	// cause is the condition behind the refusal, for callers that branch on it.
	cause error
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.cause }

func writeError(w http.ResponseWriter, e *Error) {
	body := map[string]any{"error": e.Message}
	for k, v := range e.Extra {
		body[k] = v
	}
	writeJSON(w, e.Status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// bearer returns the request's bearer token. Every route reads Authorization through it. The
// scheme is case-insensitive (RFC 7235 §2.1): "bearer x" and "BEARER x" work like "Bearer x".
func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// authenticate resolves the bearer secret to an account.
func authenticate(r *http.Request, st *store.Store) (store.Account, error) {
	secret, ok := bearer(r)
	if !ok {
		return store.Account{}, &Error{Status: http.StatusUnauthorized, Message: "missing bearer token: send Authorization: Bearer <account secret>"}
	}
	acc, err := st.AccountBySecret(r.Context(), secret)
	if errors.Is(err, store.ErrNotFound) {
		return store.Account{}, &Error{Status: http.StatusUnauthorized, Message: "invalid account secret"}
	}
	return acc, err
}

// errorWriter answers failed requests.
type errorWriter struct{ logger *slog.Logger }

// fail answers with e if it is an *Error and with a bare 500 otherwise, logging the cause.
func (ew errorWriter) fail(w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	if errors.As(err, &e) {
		writeError(w, e)
		return
	}
	ew.logger.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	writeError(w, &Error{Status: http.StatusInternalServerError, Message: "internal error"})
}

// checkKeys refuses a body that names a key twice in one object, with 400 naming the field.
func checkKeys(body []byte) error {
	var dup *strictjson.DuplicateKeyError
	if errors.As(strictjson.CheckKeys(body), &dup) {
		return &Error{Status: http.StatusBadRequest, Message: dup.Error(), Extra: map[string]any{"field": dup.Field}}
	}
	return nil
}

// decodeStrict decodes one JSON value into v, refusing unknown fields.
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("malformed JSON body: %w", err)
	}
	if dec.More() {
		return errors.New("malformed JSON body: unexpected data after the JSON value")
	}
	return nil
}
