// Package fakeapigw is a local stand-in for API Gateway's WebSocket management endpoint,
// POST and DELETE /{stage}/@connections/{id}, for tests. Like the real endpoint it verifies the
// SigV4 signature of every request against the credentials and region it was given (403 with a
// JSON message when it does not verify), answers 410 for connections it does not know or that are
// gone, and 413 for messages over 128 KiB. It records what was posted to each connection. It does
// not check the clock skew of the signing time, so tests may sign at a fixed time.
package fakeapigw

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

const (
	// maxMessage is API Gateway's WebSocket message limit.
	maxMessage = 128 << 10
	service    = "execute-api"
	algorithm  = "AWS4-HMAC-SHA256"
	amzDate    = "20060102T150405Z"
)

// Server is an http.Handler serving the @connections endpoint of any one-segment stage.
type Server struct {
	creds  aws.Credentials
	region string
	mux    *http.ServeMux

	mu    sync.Mutex
	conns map[string]*conn
}

type conn struct {
	gone, deleted bool
	messages      [][]byte
}

// New returns a Server that accepts requests signed with creds for region.
func New(creds aws.Credentials, region string) *Server {
	s := &Server{creds: creds, region: region, mux: http.NewServeMux(), conns: map[string]*conn{}}
	s.mux.HandleFunc("POST /{stage}/@connections/{id}", s.post)
	s.mux.HandleFunc("DELETE /{stage}/@connections/{id}", s.delete)
	// Without a catch-all the mux would answer 405 to other methods on the paths above.
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeMessage(w, http.StatusNotFound, "Not Found")
	})
	return s
}

// Connect registers a live connection.
func (s *Server) Connect(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns[id] = &conn{}
}

// Gone marks a connection as closed by its client: requests to it answer 410 from now on.
func (s *Server) Gone(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conn(id).gone = true
}

// Messages returns copies of the messages posted to a connection, oldest first.
func (s *Server) Messages(id string) [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.conns[id]
	if !ok {
		return nil
	}
	out := make([][]byte, len(c.messages))
	for i, m := range c.messages {
		out[i] = slices.Clone(m)
	}
	return out
}

// Deleted reports whether a connection was disconnected with DELETE.
func (s *Server) Deleted(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.conns[id]
	return ok && c.deleted
}

// conn returns the record of id, creating it; s.mu must be held.
func (s *Server) conn(id string) *conn {
	c, ok := s.conns[id]
	if !ok {
		c = &conn{}
		s.conns[id] = c
	}
	return c
}

// ServeHTTP implements http.Handler: it verifies the signature, then routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxMessage+1))
	if err != nil {
		writeMessage(w, http.StatusBadRequest, fmt.Sprintf("reading the body: %v", err))
		return
	}
	if len(body) > maxMessage {
		writeMessage(w, http.StatusRequestEntityTooLarge, "Message too long")
		return
	}
	if err := s.verify(r, body); err != nil {
		writeMessage(w, http.StatusForbidden, err.Error())
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	s.mux.ServeHTTP(w, r)
}

func (s *Server) post(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body) // already read into memory by ServeHTTP
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.conns[r.PathValue("id")]
	if !ok || c.gone {
		writeMessage(w, http.StatusGone, "connection gone")
		return
	}
	c.messages = append(c.messages, body)
	w.WriteHeader(http.StatusOK)
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.conns[r.PathValue("id")]
	if !ok || c.gone {
		writeMessage(w, http.StatusGone, "connection gone")
		return
	}
	c.gone, c.deleted = true, true
	w.WriteHeader(http.StatusNoContent)
}

// verify checks r's SigV4 Authorization header: the credential scope must name the server's
// access key, region and execute-api, and the signature must equal the one the SDK's signer
// computes for the same method, URL, signed headers, body and time with the server's secret.
func (s *Server) verify(r *http.Request, body []byte) error {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return errors.New("missing authentication token")
	}
	got, err := parseAuthorization(auth)
	if err != nil {
		return err
	}
	scope := strings.Split(got.credential, "/")
	if len(scope) != 5 || scope[4] != "aws4_request" {
		return fmt.Errorf("malformed credential %q", got.credential)
	}
	at, err := time.Parse(amzDate, r.Header.Get("X-Amz-Date"))
	if err != nil {
		return fmt.Errorf("missing or malformed X-Amz-Date %q", r.Header.Get("X-Amz-Date"))
	}
	switch akid, date, region, svc := scope[0], scope[1], scope[2], scope[3]; {
	case akid != s.creds.AccessKeyID:
		return fmt.Errorf("unknown access key id %q", akid)
	case date != at.Format("20060102"):
		return fmt.Errorf("credential date %q does not match X-Amz-Date %q", date, r.Header.Get("X-Amz-Date"))
	case region != s.region:
		return fmt.Errorf("credential should be scoped to region %q, not %q", s.region, region)
	case svc != service:
		return fmt.Errorf("credential should be scoped to service %q, not %q", service, svc)
	}
	if r.Header.Get("X-Amz-Security-Token") != s.creds.SessionToken {
		return errors.New("the security token included in the request is invalid")
	}
	sum := sha256.Sum256(body)
	payloadHash := hex.EncodeToString(sum[:])
	if h := r.Header.Get("X-Amz-Content-Sha256"); h != "" && h != payloadHash {
		return errors.New("the X-Amz-Content-Sha256 header does not match the body")
	}

	// Rebuild the request from what arrived: only the headers the client says it signed, the
	// path as escaped on the wire, and the body received.
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	re := &http.Request{
		Method:        r.Method,
		URL:           &url.URL{Scheme: scheme, Host: r.Host, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery},
		Host:          r.Host,
		Header:        http.Header{},
		ContentLength: int64(len(body)),
	}
	for _, name := range strings.Split(got.signedHeaders, ";") {
		if name == "host" || name == "content-length" { // taken from r.Host and the body
			continue
		}
		values := r.Header.Values(name)
		if len(values) == 0 {
			return fmt.Errorf("signed header %q is missing", name)
		}
		re.Header[http.CanonicalHeaderKey(name)] = values
	}
	if err := v4.NewSigner().SignHTTP(r.Context(), s.creds, re, payloadHash, service, s.region, at); err != nil {
		return fmt.Errorf("signing: %v", err)
	}
	want, err := parseAuthorization(re.Header.Get("Authorization"))
	if err != nil {
		return err
	}
	if want.signedHeaders != got.signedHeaders ||
		subtle.ConstantTimeCompare([]byte(want.signature), []byte(got.signature)) != 1 {
		return errors.New("the request signature we calculated does not match the signature you provided")
	}
	return nil
}

type authorization struct{ credential, signedHeaders, signature string }

// parseAuthorization reads "AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…, Signature=…".
func parseAuthorization(h string) (authorization, error) {
	rest, ok := strings.CutPrefix(h, algorithm+" ")
	if !ok {
		return authorization{}, fmt.Errorf("authorization header is not %s", algorithm)
	}
	var a authorization
	for part := range strings.SplitSeq(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			a.credential = v
		case "SignedHeaders":
			a.signedHeaders = v
		case "Signature":
			a.signature = v
		}
	}
	if a.credential == "" || a.signedHeaders == "" || a.signature == "" {
		return authorization{}, errors.New("authorization header requires Credential, SignedHeaders and Signature")
	}
	return a, nil
}

// writeMessage answers {"message": msg}, API Gateway's error shape.
func writeMessage(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"message": msg})
}
