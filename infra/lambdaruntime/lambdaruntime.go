// Package lambdaruntime is a local stand-in of the AWS Lambda Runtime API (version 2018-06-01),
// one execution environment's worth: a loopback HTTP server a function's real bootstrap, or any
// custom runtime, polls for invocations and answers to, so the function can be started, invoked
// and timed outside AWS. It serves
//
//   - GET  /2018-06-01/runtime/invocation/next: blocks until an invocation is queued, answers its
//     event with Lambda-Runtime-Aws-Request-Id, -Deadline-Ms, -Invoked-Function-Arn and -Trace-Id;
//   - POST /2018-06-01/runtime/invocation/{id}/response: buffered (at most 6 MiB, handed over
//     whole) or streamed (handed over as it comes): streamed when the request says
//     Lambda-Runtime-Function-Response-Mode: streaming or its type is
//     application/vnd.awslambda.http-integration-response, a Function URL's streamed response
//     (a JSON prelude of statusCode, headers and cookies, 8 NUL bytes, then the HTTP body), which
//     is all aws-lambda-go's lambdaurl says. Either ends in error when its chunked body carries the
//     Lambda-Runtime-Function-Error-Type and -Body trailers;
//   - POST /2018-06-01/runtime/invocation/{id}/error and POST /2018-06-01/runtime/init/error.
//
// Refusals answer as the Runtime API does, JSON {"errorMessage", "errorType"}: 400
// InvalidRequestID for an id no runtime was given, 403 InvalidStateTransition for a second answer
// to an invocation or an init error after init, 413 RequestEntityTooLarge for a buffered response
// past 6 MiB. Deadlines are reported but not enforced.
package lambdaruntime

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The Runtime API's headers, trailers and content types.
const (
	HeaderRequestID    = "Lambda-Runtime-Aws-Request-Id"
	HeaderDeadlineMs   = "Lambda-Runtime-Deadline-Ms"
	HeaderFunctionArn  = "Lambda-Runtime-Invoked-Function-Arn"
	HeaderTraceID      = "Lambda-Runtime-Trace-Id"
	HeaderResponseMode = "Lambda-Runtime-Function-Response-Mode"
	// HeaderErrorType names a function error, on /error and /init/error requests and as a
	// trailer of a streamed response.
	HeaderErrorType = "Lambda-Runtime-Function-Error-Type"
	// TrailerErrorBody is a streamed response's error, base64 of {"errorMessage", "errorType"}.
	TrailerErrorBody = "Lambda-Runtime-Function-Error-Body"
	// HTTPIntegrationContentType is the content type of a Function URL's streamed response.
	HTTPIntegrationContentType = "application/vnd.awslambda.http-integration-response"
	// MaxBufferedResponse is the most a buffered response may carry (Lambda's 6 MB payload).
	MaxBufferedResponse = 6 << 20
)

const (
	apiPrefix = "/2018-06-01/runtime"
	// maxPrelude bounds a Function URL prelude, which Lambda wants within its first 16 KiB.
	maxPrelude = 16 << 10
	// maxErrorBody bounds what /error and /init/error bodies are read.
	maxErrorBody = 1 << 20
)

// preludeEnd separates a Function URL response's prelude from its body.
var preludeEnd = make([]byte, 8)

// Options configure a Server.
type Options struct {
	// FunctionName goes into the invoked function's ARN (default "function").
	FunctionName string
	// Region goes into the ARN (default us-east-1).
	Region string
	// Timeout sets each invocation's deadline from the moment the runtime takes it; zero is
	// Lambda's default, 3 seconds.
	Timeout time.Duration
}

// Server is a Runtime API stand-in for one execution environment. Its zero value is not usable:
// make one with New.
type Server struct {
	opts Options
	ln   net.Listener
	http *http.Server

	initDone  chan struct{} // closed at the first /next
	initAt    time.Time     // set before initDone closes
	failed    chan struct{} // closed by fail
	failErr   error         // set before failed closes
	closeOnce sync.Once
	procMu    sync.Mutex
	proc      *Process
	initOnce  sync.Once
	failOnce  sync.Once

	mu    sync.Mutex
	queue []*Invocation
	wake  chan struct{} // closed and replaced when an invocation is queued
	// byID holds the invocations the runtime took and has not answered yet; answered keeps
	// only the ids of the others, so a long run holds no old responses.
	byID     map[string]*Invocation
	answered map[string]bool
	initErr  *FunctionError
}

// New starts a Server on a free loopback port.
func New(opts Options) (*Server, error) {
	if opts.FunctionName == "" {
		opts.FunctionName = "function"
	}
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 3 * time.Second
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("lambdaruntime: listening on loopback: %w", err)
	}
	s := &Server{
		opts: opts, ln: ln,
		initDone: make(chan struct{}), failed: make(chan struct{}),
		wake: make(chan struct{}), byID: map[string]*Invocation{}, answered: map[string]bool{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+apiPrefix+"/invocation/next", s.next)
	mux.HandleFunc("POST "+apiPrefix+"/invocation/{id}/response", s.response)
	mux.HandleFunc("POST "+apiPrefix+"/invocation/{id}/error", s.invocationError)
	mux.HandleFunc("POST "+apiPrefix+"/init/error", s.initError)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		refuse(w, http.StatusNotFound, "InvalidRequest", "the Runtime API has no "+r.Method+" "+r.URL.Path)
	})
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.http.Serve(ln) }()
	return s, nil
}

// Addr is the host:port AWS_LAMBDA_RUNTIME_API names.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server, failing the invocations not yet answered; it does not stop a
// process Start started (Process.Stop does).
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.fail(errors.New("lambdaruntime: the server is closed"))
		err = s.http.Close()
	})
	return err
}

// InitDone is closed when the runtime first asks for an invocation, that is when its init is
// over.
func (s *Server) InitDone() <-chan struct{} { return s.initDone }

// WaitInit waits until the runtime first asks for an invocation and returns when it did. It
// fails with the runtime's *FunctionError when it reported an init error, with an *ExitError
// when its process exited first, or with ctx's error.
func (s *Server) WaitInit(ctx context.Context) (time.Time, error) {
	select {
	case <-s.initDone:
		return s.initAt, nil
	default:
	}
	select {
	case <-s.initDone:
		return s.initAt, nil
	case <-s.failed:
		return time.Time{}, s.failErr
	case <-ctx.Done():
		return time.Time{}, fmt.Errorf("lambdaruntime: waiting for the runtime's first /next: %w", context.Cause(ctx))
	}
}

// fail ends every invocation not yet answered with err, and every later one. The first
// failure is kept.
func (s *Server) fail(err error) {
	s.failOnce.Do(func() {
		s.failErr = err
		close(s.failed)
		s.mu.Lock()
		pending := make([]*Invocation, 0, len(s.byID)+len(s.queue))
		pending = append(pending, s.queue...)
		for _, inv := range s.byID {
			pending = append(pending, inv)
		}
		s.queue = nil
		s.mu.Unlock()
		for _, inv := range pending {
			inv.finish(nil, err)
		}
	})
}

// Invocation is one queued invocation of the runtime.
type Invocation struct {
	// ID is the request id the runtime is given.
	ID      string
	payload []byte
	s       *Server

	// Guarded by s.mu.
	state     state
	abandoned bool // its waiter gave up: a response is read and dropped
	takenAt   time.Time

	done chan struct{} // closed by finish
	resp *Response
	err  error
}

type state int

const (
	queued     state = iota
	running          // the runtime took it with /next
	responding       // its response or error is being received
	settled
)

// Enqueue queues an invocation with payload as its event, for the runtime's next /next; it can
// be called before the runtime starts, as Lambda holds the event that starts an environment.
func (s *Server) Enqueue(payload []byte) *Invocation {
	inv := &Invocation{ID: newRequestID(), payload: payload, s: s, done: make(chan struct{})}
	// Checked under the lock: fail closes failed before it takes the queue, so an invocation
	// is either refused here or failed there.
	s.mu.Lock()
	select {
	case <-s.failed:
		s.mu.Unlock()
		inv.finish(nil, s.failErr)
		return inv
	default:
	}
	s.queue = append(s.queue, inv)
	close(s.wake)
	s.wake = make(chan struct{})
	s.mu.Unlock()
	return inv
}

// Invoke queues an invocation and waits for its response, as Invocation.Wait.
func (s *Server) Invoke(ctx context.Context, payload []byte) (*Response, error) {
	return s.Enqueue(payload).Wait(ctx)
}

// Wait returns the invocation's response once it starts: a streamed one as soon as it begins
// (after its prelude, for a Function URL response), its Body then following the stream; a
// buffered one once whole. A function error is a *FunctionError; an init error is one wrapped;
// a runtime that exited is an *ExitError. When ctx ends first, a queued invocation is
// withdrawn and a running one's response is dropped when it comes.
func (inv *Invocation) Wait(ctx context.Context) (*Response, error) {
	select {
	case <-inv.done:
		return inv.resp, inv.err
	default:
	}
	select {
	case <-inv.done:
		return inv.resp, inv.err
	case <-ctx.Done():
	}
	s := inv.s
	s.mu.Lock()
	select {
	case <-inv.done:
		// Answered meanwhile: the waiter is still here to take it.
		s.mu.Unlock()
		return inv.resp, inv.err
	default:
	}
	inv.abandoned = true
	if inv.state == queued {
		for i, q := range s.queue {
			if q == inv {
				s.queue = append(s.queue[:i], s.queue[i+1:]...)
				break
			}
		}
	}
	s.mu.Unlock()
	return nil, fmt.Errorf("lambdaruntime: invocation %s: %w", inv.ID, context.Cause(ctx))
}

// TakenAt is when the runtime took the invocation with /next (zero before).
func (inv *Invocation) TakenAt() time.Time {
	inv.s.mu.Lock()
	defer inv.s.mu.Unlock()
	return inv.takenAt
}

// finish records the invocation's outcome once; later outcomes are ignored.
func (inv *Invocation) finish(resp *Response, err error) bool {
	return inv.settleOutcome(resp, err, false)
}

// deliver hands resp to the waiter; false when the waiter gave up, and resp is dropped.
func (inv *Invocation) deliver(resp *Response) bool {
	return inv.settleOutcome(resp, nil, true)
}

func (inv *Invocation) settleOutcome(resp *Response, err error, needWaiter bool) bool {
	s := inv.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if needWaiter && inv.abandoned {
		return false
	}
	select {
	case <-inv.done:
		return false
	default:
	}
	inv.resp, inv.err = resp, err
	close(inv.done)
	return true
}

// Response is an invocation's response.
type Response struct {
	RequestID string
	// Streamed is set when the runtime streamed the response (Lambda-Runtime-Function-Response-Mode:
	// streaming, or a Function URL response); Body then yields it as it comes.
	Streamed    bool
	ContentType string
	// StatusCode, Headers and Cookies are a Function URL response's prelude, set when
	// ContentType is HTTPIntegrationContentType; StatusCode is 200 when the prelude has none.
	StatusCode int
	Headers    map[string]string
	Cookies    []string
	// Body is the payload (after the prelude, for a Function URL response). Reading it to its
	// end gives io.EOF, or the runtime's *FunctionError when its stream ended with error
	// trailers, or the error that broke the stream. Close it when done with it.
	Body io.ReadCloser

	firstByte atomic.Int64 // unix ns; set before the body's first byte can be read
}

// FirstByte is when the first byte of Body reached the server (zero while none has): a caller
// that read one can use it as the time to first byte.
func (r *Response) FirstByte() time.Time {
	if ns := r.firstByte.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// FunctionError is an error the runtime reported: through /invocation/{id}/error, the trailers
// of a streamed response, or /init/error.
type FunctionError struct {
	// Phase is "init", "invoke" or "stream".
	Phase   string
	Type    string
	Message string
	// Body is the error document as the runtime sent it (decoded from base64 for a trailer).
	Body []byte
}

func (e *FunctionError) Error() string {
	return fmt.Sprintf("lambdaruntime: the function reported a %s error %s: %s", e.Phase, e.Type, e.Message)
}

// newFunctionError reads a Runtime API error document, {"errorMessage", "errorType", ...}; the
// header's type, when set, wins, as in Lambda.
func newFunctionError(phase, headerType string, body []byte) *FunctionError {
	e := &FunctionError{Phase: phase, Type: headerType, Body: body}
	var doc struct {
		ErrorMessage string `json:"errorMessage"`
		ErrorType    string `json:"errorType"`
	}
	if json.Unmarshal(body, &doc) == nil {
		e.Message = doc.ErrorMessage
		if e.Type == "" {
			e.Type = doc.ErrorType
		}
	} else {
		e.Message = string(bytes.TrimSpace(body))
	}
	if e.Type == "" {
		e.Type = "Unknown"
	}
	return e
}

// next hands the runtime the oldest queued invocation, waiting for one.
func (s *Server) next(w http.ResponseWriter, r *http.Request) {
	s.initOnce.Do(func() {
		s.initAt = time.Now()
		close(s.initDone)
	})
	for {
		s.mu.Lock()
		if s.initErr != nil {
			s.mu.Unlock()
			refuse(w, http.StatusForbidden, "InvalidStateTransition", "the runtime reported an init error: it gets no invocation")
			return
		}
		if len(s.queue) > 0 {
			inv := s.queue[0]
			s.queue = s.queue[1:]
			inv.state, inv.takenAt = running, time.Now()
			payload := inv.payload
			inv.payload = nil
			s.byID[inv.ID] = inv
			s.mu.Unlock()
			h := w.Header()
			h.Set(HeaderRequestID, inv.ID)
			h.Set(HeaderDeadlineMs, strconv.FormatInt(inv.takenAt.Add(s.opts.Timeout).UnixMilli(), 10))
			h.Set(HeaderFunctionArn, fmt.Sprintf("arn:aws:lambda:%s:000000000000:function:%s", s.opts.Region, s.opts.FunctionName))
			h.Set(HeaderTraceID, traceID(inv.takenAt))
			h.Set("Content-Type", "application/json")
			h.Set("Content-Length", strconv.Itoa(len(payload)))
			_, _ = w.Write(payload)
			return
		}
		wake := s.wake
		s.mu.Unlock()
		select {
		case <-wake:
		case <-s.failed:
			refuse(w, http.StatusInternalServerError, "ServiceUnavailable", s.failErr.Error())
			return
		case <-r.Context().Done():
			return
		}
	}
}

// claim moves a running invocation to responding, or refuses the request as the API does.
func (s *Server) claim(w http.ResponseWriter, r *http.Request) (*Invocation, bool) {
	id := r.PathValue("id")
	s.mu.Lock()
	defer s.mu.Unlock()
	inv, ok := s.byID[id]
	switch {
	case !ok && !s.answered[id]:
		refuse(w, http.StatusBadRequest, "InvalidRequestID", fmt.Sprintf("no invocation %q was given to the runtime", id))
		return nil, false
	case !ok || inv.state != running:
		refuse(w, http.StatusForbidden, "InvalidStateTransition", fmt.Sprintf("invocation %s was already answered", id))
		return nil, false
	}
	inv.state = responding
	return inv, true
}

// settle marks an invocation answered once its response or error has been read.
func (s *Server) settle(inv *Invocation) {
	s.mu.Lock()
	inv.state = settled
	delete(s.byID, inv.ID)
	s.answered[inv.ID] = true
	s.mu.Unlock()
}

func (s *Server) invocationError(w http.ResponseWriter, r *http.Request) {
	inv, ok := s.claim(w, r)
	if !ok {
		return
	}
	defer s.settle(inv)
	body, err := io.ReadAll(io.LimitReader(r.Body, maxErrorBody))
	if err != nil {
		inv.finish(nil, fmt.Errorf("lambdaruntime: invocation %s: reading the runtime's error: %w", inv.ID, err))
		return
	}
	inv.finish(nil, newFunctionError("invoke", r.Header.Get(HeaderErrorType), body))
	accepted(w)
}

func (s *Server) initError(w http.ResponseWriter, r *http.Request) {
	select {
	case <-s.initDone:
		refuse(w, http.StatusForbidden, "InvalidStateTransition", "init is over: the runtime already asked for an invocation")
		return
	default:
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxErrorBody))
	if err != nil {
		refuse(w, http.StatusBadRequest, "InvalidRequest", "reading the error: "+err.Error())
		return
	}
	ferr := newFunctionError("init", r.Header.Get(HeaderErrorType), body)
	s.mu.Lock()
	if s.initErr != nil {
		s.mu.Unlock()
		refuse(w, http.StatusForbidden, "InvalidStateTransition", "the runtime already reported an init error")
		return
	}
	s.initErr = ferr
	s.mu.Unlock()
	s.fail(fmt.Errorf("lambdaruntime: the runtime failed to initialize: %w", ferr))
	accepted(w)
}

// response receives an invocation's response, handing it to the waiter as it comes.
func (s *Server) response(w http.ResponseWriter, r *http.Request) {
	inv, ok := s.claim(w, r)
	if !ok {
		return
	}
	defer s.settle(inv)
	resp := &Response{
		RequestID:   inv.ID,
		ContentType: r.Header.Get("Content-Type"),
	}
	integration := resp.ContentType == HTTPIntegrationContentType
	// aws-lambda-go sends every response chunked and marks a Function URL stream by its content
	// type alone, so chunking says nothing about the mode.
	resp.Streamed = integration || r.Header.Get(HeaderResponseMode) == "streaming"
	if !resp.Streamed {
		body, err := io.ReadAll(io.LimitReader(r.Body, MaxBufferedResponse+1))
		switch {
		case err != nil:
			inv.finish(nil, fmt.Errorf("lambdaruntime: invocation %s: reading the response: %w", inv.ID, err))
			return
		case len(body) > MaxBufferedResponse:
			inv.finish(nil, &FunctionError{Phase: "invoke", Type: "Function.ResponseSizeTooLarge",
				Message: fmt.Sprintf("the buffered response is over %d bytes", MaxBufferedResponse)})
			refuse(w, http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", fmt.Sprintf("a buffered response is at most %d bytes", MaxBufferedResponse))
			return
		case r.Trailer.Get(HeaderErrorType) != "":
			inv.finish(nil, trailerError(r.Trailer))
			accepted(w)
			return
		}
		if integration {
			i := bytes.Index(body, preludeEnd)
			if i < 0 {
				inv.finish(nil, fmt.Errorf("lambdaruntime: invocation %s: the Function URL response has no prelude ending in 8 NUL bytes", inv.ID))
				accepted(w)
				return
			}
			if err := resp.parsePrelude(body[:i]); err != nil {
				inv.finish(nil, fmt.Errorf("lambdaruntime: invocation %s: %w", inv.ID, err))
				accepted(w)
				return
			}
			body = body[i+len(preludeEnd):]
		}
		if len(body) > 0 {
			resp.firstByte.Store(time.Now().UnixNano())
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		inv.deliver(resp)
		accepted(w)
		return
	}

	pr, pw := io.Pipe()
	resp.Body = pr
	delivered := false
	deliver := func() {
		delivered = true
		if !inv.deliver(resp) {
			pr.CloseWithError(errors.New("lambdaruntime: nobody waits for this response"))
		}
	}
	if !integration {
		deliver()
	}
	var prelude []byte
	write := func(p []byte) {
		if len(p) == 0 {
			return
		}
		resp.firstByte.CompareAndSwap(0, time.Now().UnixNano())
		// A reader that went away makes the write fail: the rest is read and dropped.
		_, _ = pw.Write(p)
	}
	buf := make([]byte, 32<<10)
	var readErr error
	for {
		n, err := r.Body.Read(buf)
		chunk := buf[:n]
		if !delivered && n > 0 {
			prelude = append(prelude, chunk...)
			i := bytes.Index(prelude, preludeEnd)
			if i < 0 {
				if len(prelude) > maxPrelude {
					readErr = fmt.Errorf("the Function URL prelude is over %d bytes without its 8 NUL bytes", maxPrelude)
					break
				}
				chunk = nil
			} else {
				if perr := resp.parsePrelude(prelude[:i]); perr != nil {
					readErr = perr
					break
				}
				chunk = prelude[i+len(preludeEnd):]
				deliver()
			}
		}
		if delivered {
			write(chunk)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			readErr = fmt.Errorf("the response stream broke: %w", err)
			break
		}
	}
	var streamErr error
	switch {
	case readErr != nil:
		streamErr = fmt.Errorf("lambdaruntime: invocation %s: %w", inv.ID, readErr)
	case r.Trailer.Get(HeaderErrorType) != "":
		streamErr = trailerError(r.Trailer)
	case !delivered:
		streamErr = fmt.Errorf("lambdaruntime: invocation %s: the Function URL response ended before its prelude's 8 NUL bytes", inv.ID)
	}
	if !delivered {
		inv.finish(nil, streamErr)
	}
	pw.CloseWithError(streamErr) // nil: io.EOF
	if readErr != nil {
		refuse(w, http.StatusBadRequest, "InvalidRequest", readErr.Error())
		return
	}
	accepted(w)
}

// trailerError is the error a response's trailers report.
func trailerError(t http.Header) *FunctionError {
	body, err := base64.StdEncoding.DecodeString(t.Get(TrailerErrorBody))
	if err != nil {
		body = []byte(t.Get(TrailerErrorBody))
	}
	return newFunctionError("stream", t.Get(HeaderErrorType), body)
}

func (r *Response) parsePrelude(b []byte) error {
	var p struct {
		StatusCode int               `json:"statusCode"`
		Headers    map[string]string `json:"headers"`
		Cookies    []string          `json:"cookies"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return fmt.Errorf("decoding the Function URL prelude %q: %w", b, err)
	}
	if p.StatusCode == 0 {
		p.StatusCode = http.StatusOK
	}
	r.StatusCode, r.Headers, r.Cookies = p.StatusCode, p.Headers, p.Cookies
	return nil
}

func accepted(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_, _ = io.WriteString(w, `{"status":"OK"}`+"\n")
}

func refuse(w http.ResponseWriter, code int, errorType, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"errorMessage": message, "errorType": errorType})
}

// newRequestID returns a random UUID, the shape of Lambda's request ids.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// traceID returns an X-Ray trace header, not sampled.
func traceID(t time.Time) string {
	var b [20]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return fmt.Sprintf("Root=1-%08x-%s;Parent=%s;Sampled=0", t.Unix(), h[:24], h[24:])
}
