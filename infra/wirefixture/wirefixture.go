// Package wirefixture pins a provider adapter to the provider's wire format: a test replays
// recorded HTTP exchanges from testdata through httptest, so no test needs the internet.
// Running the test with -record (and the provider's real credentials) proxies the same calls to
// the real API instead and rewrites the fixture from what it answered.
package wirefixture

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

var record = flag.Bool("record", false, "call the real provider APIs and rewrite the wire fixtures in testdata")

// Recording reports whether the test binary runs with -record.
func Recording() bool { return *record }

// Exchange is one recorded request and the response it got.
type Exchange struct {
	Request  Request  `json:"request"`
	Response Response `json:"response"`
}

// Request is the recorded side of a call. Body, when set, must equal the replayed request's
// JSON body, so the fixture pins what the adapter sends as well as what it reads.
type Request struct {
	Method string          `json:"method"`
	Path   string          `json:"path"`
	Body   json.RawMessage `json:"body,omitempty"`
}

// Response is what the provider answered. Body holds text (JSON, SSE); BodyBase64 holds binary
// streams such as AWS event streams.
type Response struct {
	Status     int               `json:"status"`
	Headers    map[string]string `json:"headers,omitempty"`
	Body       string            `json:"body,omitempty"`
	BodyBase64 string            `json:"bodyBase64,omitempty"`
}

// Captured is a request a server received.
type Captured struct {
	Method string
	Path   string
	Query  string
	Header http.Header
	Body   []byte
}

// Load reads the exchanges of testdata file name (a path relative to the test's package).
func Load(tb testing.TB, name string) []Exchange {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatalf("reading wire fixture: %v", err)
	}
	var exchanges []Exchange
	if err := json.Unmarshal(raw, &exchanges); err != nil {
		tb.Fatalf("decoding wire fixture %s: %v", name, err)
	}
	return exchanges
}

// Bytes is the response's body, decoded when it is stored in base64.
func (r Response) Bytes() ([]byte, error) {
	if r.BodyBase64 == "" {
		return []byte(r.Body), nil
	}
	b, err := base64.StdEncoding.DecodeString(r.BodyBase64)
	if err != nil {
		return nil, fmt.Errorf("bodyBase64: %w", err)
	}
	return b, nil
}

// ServeHTTP answers any request with the response, so a recorded answer can be served again.
func (r Response) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	body, err := r.Bytes()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	for k, v := range r.Headers {
		w.Header().Set(k, v)
	}
	w.WriteHeader(r.Status)
	_, _ = w.Write(body)
}

// Server replays (or records) one fixture file.
type Server struct {
	URL string

	t         *testing.T
	file      string
	upstream  string
	recording bool
	mu        sync.Mutex
	exchanges []Exchange
	next      int
	captured  []Captured
}

// recordedHeaders are the response headers worth keeping: the ones adapters read.
var recordedHeaders = []string{"Content-Type", "Request-Id", "X-Request-Id", "X-Amzn-Requestid", "Retry-After"}

// Serve starts a server for testdata file name (a path relative to the test's package). It
// replays the file's exchanges in order; with -record it forwards each request to upstream (the
// real API's base URL) and writes the file when the test ends. The test fails if a replayed
// request differs from the recorded one or if recorded exchanges are left unused.
func Serve(t *testing.T, name, upstream string) *Server {
	t.Helper()
	return serve(t, name, upstream, *record)
}

// Replay serves testdata file name like Serve, but replays it even under -record: for
// synthetic fixtures (a rate limit, a stream cut by an error) that no API produces on demand.
func Replay(t *testing.T, name string) *Server {
	t.Helper()
	return serve(t, name, "", false)
}

func serve(t *testing.T, name, upstream string, recording bool) *Server {
	t.Helper()
	s := &Server{t: t, file: filepath.Join("testdata", name), upstream: strings.TrimSuffix(upstream, "/"), recording: recording}
	if !recording {
		s.exchanges = Load(t, name)
	}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = srv.URL
	t.Cleanup(func() {
		srv.Close()
		s.finish()
	})
	return s
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Captured {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Captured(nil), s.captured...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.captured = append(s.captured, Captured{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
	s.mu.Unlock()
	if s.recording {
		s.forward(w, r, body)
		return
	}
	s.mu.Lock()
	if s.next >= len(s.exchanges) {
		s.mu.Unlock()
		s.t.Errorf("%s: unexpected request %d, %s %s: the fixture has only %d", s.file, s.next+1, r.Method, r.URL.Path, len(s.exchanges))
		http.Error(w, "no recorded exchange left", http.StatusTeapot)
		return
	}
	ex := s.exchanges[s.next]
	s.next++
	s.mu.Unlock()
	s.check(ex.Request, r, body)
	if _, err := ex.Response.Bytes(); err != nil {
		s.t.Errorf("%s: %v", s.file, err)
	}
	ex.Response.ServeHTTP(w, r)
}

// check compares a replayed request with the recorded one.
func (s *Server) check(want Request, r *http.Request, body []byte) {
	if want.Method != r.Method || want.Path != r.URL.Path {
		s.t.Errorf("%s: request %s %s, recorded %s %s", s.file, r.Method, r.URL.Path, want.Method, want.Path)
	}
	if len(want.Body) == 0 {
		return
	}
	var got, exp any
	if err := json.Unmarshal(body, &got); err != nil {
		s.t.Errorf("%s: request body is not JSON: %v", s.file, err)
		return
	}
	if err := json.Unmarshal(want.Body, &exp); err != nil {
		s.t.Errorf("%s: recorded request body is not JSON: %v", s.file, err)
		return
	}
	if diff := cmp.Diff(exp, got); diff != "" {
		s.t.Errorf("%s: request body differs from the recording (-recorded +sent):\n%s", s.file, diff)
	}
}

// forward proxies one request to the real API and keeps the exchange.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, body []byte) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, s.upstream+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		s.t.Errorf("recording: %v", err)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Errorf("recording %s %s: %v", r.Method, r.URL.Path, err)
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Errorf("recording %s %s: reading the answer: %v", r.Method, r.URL.Path, err)
	}
	ex := Exchange{Request: Request{Method: r.Method, Path: r.URL.Path}, Response: Response{Status: resp.StatusCode, Headers: map[string]string{}}}
	if json.Valid(body) {
		ex.Request.Body = body
	}
	for _, k := range recordedHeaders {
		if v := resp.Header.Get(k); v != "" {
			ex.Response.Headers[k] = v
		}
	}
	if utf8.Valid(out) {
		ex.Response.Body = string(out)
	} else {
		ex.Response.BodyBase64 = base64.StdEncoding.EncodeToString(out)
	}
	s.mu.Lock()
	s.exchanges = append(s.exchanges, ex)
	s.mu.Unlock()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(out)
}

func (s *Server) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recording {
		out, err := json.MarshalIndent(s.exchanges, "", "  ")
		if err == nil {
			err = os.WriteFile(s.file, append(out, '\n'), 0o644)
		}
		if err != nil {
			s.t.Errorf("writing wire fixture: %v", err)
		}
		return
	}
	if s.next < len(s.exchanges) && !s.t.Failed() {
		s.t.Errorf("%s: %d recorded exchanges were never requested", s.file, len(s.exchanges)-s.next)
	}
}
