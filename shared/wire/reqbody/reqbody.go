// Package reqbody has net/http send a small request's headers and body in one write.
//
// net/http writes the headers of a request whose body it cannot see to be in memory (only
// *bytes.Reader, *bytes.Buffer and *strings.Reader, bare or in io.NopCloser) in a write of their
// own before the body: two syscalls, two TCP segments and, over TLS, two records per request.
// The AWS SDK and openai-go both hand it wrapped readers, so every DynamoDB call and model
// request paid twice. Reading the body into memory first costs one copy of a few kilobytes.
package reqbody

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
)

// Limit is the largest body read into memory; larger and unknown-length bodies stream as before.
const Limit = 1 << 20

// Buffer replaces req's body, when it has a known length of at most Limit bytes, with an
// in-memory copy (and sets GetBody, so the transport can resend it on a reused connection that
// turned out closed).
func Buffer(req *http.Request) error {
	if !small(req) {
		return nil
	}
	b := make([]byte, req.ContentLength)
	_, err := io.ReadFull(req.Body, b)
	req.Body.Close()
	if err != nil {
		return fmt.Errorf("reading the request body: %w", err)
	}
	req.Body = io.NopCloser(bytes.NewReader(b))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	return nil
}

// small reports whether req has a body of known length of at most Limit bytes.
func small(req *http.Request) bool {
	return req.Body != nil && req.Body != http.NoBody && req.ContentLength > 0 && req.ContentLength <= Limit
}

// Doer is the AWS SDK's HTTP client interface (aws.HTTPClient).
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

// Client buffers each request's body before Doer sends it. The SDK builds a new request for
// every attempt, so changing it in place is safe.
type Client struct{ Doer Doer }

// Do buffers req's body and sends it.
func (c Client) Do(req *http.Request) (*http.Response, error) {
	if err := Buffer(req); err != nil {
		return nil, err
	}
	return c.Doer.Do(req)
}

// Transport buffers each request's body before Base sends it. A RoundTripper must not change
// its caller's request, so it sends a shallow copy with the new body.
type Transport struct{ Base http.RoundTripper }

// RoundTrip buffers req's body into a copy of req and sends the copy.
func (t Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !small(req) {
		return t.Base.RoundTrip(req)
	}
	r := new(http.Request)
	*r = *req
	if err := Buffer(r); err != nil {
		return nil, err
	}
	return t.Base.RoundTrip(r)
}
