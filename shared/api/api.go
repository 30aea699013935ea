// Package api serves harness-processing over HTTP: GET / (health) and POST / (an agent turn
// streamed as a Vercel AI SDK UI message stream). Lambda adapts the handler in main; the local
// runner serves it directly.
package api

import (
	"context"
	"net/http"
	"time"

	"github.com/agentharness/harness/shared/connections"
	"github.com/agentharness/harness/shared/httpjson"
	"github.com/agentharness/harness/shared/turn"
)

// Defaults for Options left zero; the engine's are turn's.
const (
	DefaultMaxBodyBytes = 1 << 20
	// DefaultAbortPoll: an aborted WebSocket turn stops within about this long.
	DefaultAbortPoll = 250 * time.Millisecond
)

// Options wires the handler's dependencies: the turn engine's, and the transports' own.
type Options struct {
	turn.Options
	MaxBodyBytes int64
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
	eng  *turn.Engine
	opts Options
	mux  *http.ServeMux
	errs httpjson.ErrorWriter
}

// New returns the harness-processing handler.
func New(opts Options) *Handler {
	eng := turn.New(opts.Options)
	opts.Options = eng.Options()
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.AbortPoll <= 0 {
		opts.AbortPoll = DefaultAbortPoll
	}
	h := &Handler{eng: eng, opts: opts, mux: http.NewServeMux(), errs: httpjson.ErrorWriter{Logger: opts.Logger}}
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
