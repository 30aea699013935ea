// Package api serves harness-processing over HTTP: GET / (health) and POST / (an agent turn
// streamed as a Vercel AI SDK UI message stream). Lambda adapts the handler in main; the local
// runner serves it directly.
package api

import (
	"context"
	"encoding/json"
	"github.com/agentharness/harness/shared/connections"
	"github.com/agentharness/harness/shared/httpjson"
	"log/slog"
	"net/http"
	"time"

	"github.com/agentharness/harness/shared/agent"
	"github.com/agentharness/harness/shared/agents"
	"github.com/agentharness/harness/shared/asynctools"
	"github.com/agentharness/harness/shared/store"
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
	errs httpjson.ErrorWriter
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
	h := &Handler{opts: opts, mux: http.NewServeMux(), errs: httpjson.ErrorWriter{Logger: opts.Logger}}
	h.mux.HandleFunc("/{$}", h.root)
	h.mux.HandleFunc("GET /readyz", probe)
	h.mux.HandleFunc("GET /healthz", probe)
	h.mux.HandleFunc("POST /async", h.asyncTurn)
	h.mux.HandleFunc("GET /status/{eventId}", h.status)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		httpjson.WriteError(w, &httpjson.Error{Status: http.StatusNotFound, Message: "no route for " + r.Method + " " + r.URL.Path})
	})
	return h
}

// probe answers the App Server's health probes: the listener is up.
func probe(w http.ResponseWriter, _ *http.Request) {
	httpjson.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

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
