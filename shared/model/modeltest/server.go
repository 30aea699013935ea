package modeltest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/agentharness/harness/infra/wirefixture"
)

// Server stands in for a provider's API: a server on the loopback interface that keeps every
// request it gets, then lets its handler answer.
type Server struct {
	URL      string
	mu       sync.Mutex
	requests []wirefixture.Captured
}

// NewServer starts a Server whose handler is h, closed when the test ends. h reads the
// request's body as sent.
func NewServer(t testing.TB, h http.Handler) *Server {
	t.Helper()
	s := &Server{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.requests = append(s.requests, wirefixture.Captured{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
		s.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Requests returns the requests received so far.
func (s *Server) Requests() []wirefixture.Captured {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]wirefixture.Captured(nil), s.requests...)
}

// SSE is a 200 answer of body as an event stream.
func SSE(body string) wirefixture.Response {
	return wirefixture.Response{Status: http.StatusOK, Headers: map[string]string{"Content-Type": "text/event-stream"}, Body: body}
}

// Unexpected answers 418 to any request: the server of a call that must not be made.
var Unexpected = wirefixture.Response{Status: http.StatusTeapot, Headers: map[string]string{"Content-Type": "text/plain"}, Body: "unexpected request"}
