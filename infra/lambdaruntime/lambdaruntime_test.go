package lambdaruntime_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/lambdaruntime"
	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"
)

// fnBinary is testdata/fn built once for the package's tests.
var fnBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "lambdaruntime-fn-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fnBinary = filepath.Join(dir, "bootstrap")
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", fnBinary, "./testdata/fn")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building testdata/fn: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// start runs testdata/fn in mode against a new server; both stop when the test ends.
func start(t *testing.T, mode string) *lambdaruntime.Server {
	t.Helper()
	srv, err := lambdaruntime.New(lambdaruntime.Options{FunctionName: "fn", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	cmd := exec.Command(fnBinary)
	cmd.Env = []string{"FN_MODE=" + mode}
	p, err := srv.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop) // before srv.Close
	return srv
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestBufferedInvocations(t *testing.T) {
	srv := start(t, "echo")
	if _, err := srv.WaitInit(ctx(t)); err != nil {
		t.Fatalf("WaitInit() = %v", err)
	}
	for i := range 2 { // the runtime loops: the second invocation reaches the same process
		resp, err := srv.Invoke(ctx(t), []byte(fmt.Sprintf(`{"n":%d}`, i)))
		if err != nil {
			t.Fatalf("Invoke() = %v", err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("reading the body: %v", err)
		}
		want := fmt.Sprintf(`{"arn":"arn:aws:lambda:us-east-1:000000000000:function:fn","deadlineInS":60,"event":{"n":%d},"requestId":%q,"traced":true}`, i, resp.RequestID)
		if string(body) != want {
			t.Errorf("body = %s, want %s", body, want)
		}
		if resp.Streamed || resp.ContentType != "application/json" || resp.StatusCode != 0 || resp.FirstByte().IsZero() {
			t.Errorf("response streamed %v, type %q, status %d, first byte %v; want buffered application/json, no prelude, a first byte",
				resp.Streamed, resp.ContentType, resp.StatusCode, resp.FirstByte())
		}
	}
}

func TestFunctionURLStream(t *testing.T) {
	release := make(chan struct{})
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	t.Cleanup(gate.Close)
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
	})

	srv := start(t, "url")
	ev := events.LambdaFunctionURLRequest{
		Version: "2.0", RawPath: "/x", Body: "hi",
		Headers: map[string]string{"x-gate": gate.URL},
	}
	ev.RequestContext.HTTP.Method = http.MethodPost
	ev.RequestContext.DomainName = "fn.lambda-url.us-east-1.on.aws"
	payload, _ := json.Marshal(ev)
	resp, err := srv.Invoke(ctx(t), payload)
	if err != nil {
		t.Fatalf("Invoke() = %v", err)
	}
	defer resp.Body.Close()
	got := map[string]any{
		"streamed": resp.Streamed, "type": resp.ContentType, "status": resp.StatusCode,
		"headers": resp.Headers, "cookies": resp.Cookies,
	}
	want := map[string]any{
		"streamed": true, "type": lambdaruntime.HTTPIntegrationContentType, "status": http.StatusCreated,
		"headers": map[string]string{"Content-Type": "text/plain", "X-Test": "a,b"}, "cookies": []string{"c=1"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("prelude (-want +got):\n%s", diff)
	}
	// "two" cannot be written before the gate opens, so reading "one" first proves the body
	// streams.
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	if first != "one POST hi\n" || err != nil {
		t.Fatalf("first line = %q, %v; want \"one POST hi\\n\"", first, err)
	}
	if resp.FirstByte().IsZero() {
		t.Error("FirstByte() is zero after the first line was read")
	}
	close(release)
	released = true
	rest, err := io.ReadAll(br)
	if string(rest) != "two\n" || err != nil {
		t.Errorf("rest = %q, %v; want \"two\\n\"", rest, err)
	}
}

func TestFunctionError(t *testing.T) {
	srv := start(t, "error")
	for range 2 { // a failed invocation does not end the runtime
		resp, err := srv.Invoke(ctx(t), []byte(`{}`))
		var fe *lambdaruntime.FunctionError
		if !errors.As(err, &fe) {
			t.Fatalf("Invoke() = %v, %v; want a *FunctionError", resp, err)
		}
		if fe.Phase != "invoke" || fe.Type != "errorString" || fe.Message != "boom" || string(fe.Body) != `{"errorMessage":"boom","errorType":"errorString"}` {
			t.Errorf("error = %+v (body %s), want an invoke errorString boom", fe, fe.Body)
		}
	}
}

func TestStreamErrorTrailers(t *testing.T) {
	srv := start(t, "url-broken")
	resp, err := srv.Invoke(ctx(t), []byte(`{}`))
	if err != nil {
		t.Fatalf("Invoke() = %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	var fe *lambdaruntime.FunctionError
	if string(body) != "partial" || !errors.As(err, &fe) {
		t.Fatalf("body = %q, %v; want \"partial\" then a *FunctionError", body, err)
	}
	if resp.StatusCode != http.StatusOK || fe.Phase != "stream" || fe.Type != "errorString" || fe.Message != "stream broke" {
		t.Errorf("status %d, error %+v; want 200 and a stream errorString \"stream broke\"", resp.StatusCode, fe)
	}
}

func TestInitError(t *testing.T) {
	srv := start(t, "init-error")
	_, err := srv.WaitInit(ctx(t))
	var fe *lambdaruntime.FunctionError
	if !errors.As(err, &fe) {
		t.Fatalf("WaitInit() = %v, want a *FunctionError", err)
	}
	want := &lambdaruntime.FunctionError{Phase: "init", Type: "Runtime.ConfigError", Message: "no config",
		Body: []byte(`{"errorMessage":"no config","errorType":"Runtime.ConfigError"}`)}
	if diff := cmp.Diff(want, fe); diff != "" {
		t.Errorf("init error (-want +got):\n%s", diff)
	}
	// Lambda gives a failed environment no invocation.
	_, err = srv.Invoke(ctx(t), []byte(`{}`))
	if !errors.As(err, &fe) || fe.Phase != "init" || !strings.Contains(err.Error(), "failed to initialize") {
		t.Errorf("Invoke() after an init error = %v, want the init error", err)
	}
}

func TestProcessExit(t *testing.T) {
	srv := start(t, "exit")
	inv := srv.Enqueue([]byte(`{}`))
	_, err := srv.WaitInit(ctx(t))
	var exit *lambdaruntime.ExitError
	var status *exec.ExitError
	if !errors.As(err, &exit) || !errors.As(err, &status) || status.ExitCode() != 3 || strings.TrimSpace(exit.Stderr) != "dying" {
		t.Fatalf("WaitInit() = %v, want an *ExitError of status 3 with stderr \"dying\"", err)
	}
	if _, err := inv.Wait(ctx(t)); !errors.As(err, &exit) {
		t.Errorf("the queued invocation's Wait() = %v, want the *ExitError", err)
	}
}

// rawRuntime speaks the Runtime API by hand, for what aws-lambda-go never sends.
type rawRuntime struct {
	t    *testing.T
	base string
}

func (r rawRuntime) do(method, path, contentType string, body io.Reader, header http.Header) (int, http.Header, string) {
	r.t.Helper()
	req, err := http.NewRequest(method, r.base+path, body)
	if err != nil {
		r.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, strings.TrimSpace(string(b))
}

func (r rawRuntime) next() (string, http.Header) {
	r.t.Helper()
	code, h, body := r.do(http.MethodGet, "/2018-06-01/runtime/invocation/next", "", nil, nil)
	if code != http.StatusOK {
		r.t.Fatalf("next = %d %s", code, body)
	}
	return body, h
}

func newServer(t *testing.T) (*lambdaruntime.Server, rawRuntime) {
	t.Helper()
	srv, err := lambdaruntime.New(lambdaruntime.Options{FunctionName: "raw", Region: "eu-west-1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv, rawRuntime{t: t, base: "http://" + srv.Addr()}
}

func TestProtocol(t *testing.T) {
	srv, rt := newServer(t)
	const path = "/2018-06-01/runtime/invocation/"

	code, _, body := rt.do(http.MethodPost, path+"nope/response", "text/plain", strings.NewReader("x"), nil)
	if want := `{"errorMessage":"no invocation \"nope\" was given to the runtime","errorType":"InvalidRequestID"}`; code != http.StatusBadRequest || body != want {
		t.Errorf("response to an unknown id = %d %s, want 400 %s", code, body, want)
	}
	code, _, body = rt.do(http.MethodGet, "/2018-06-01/runtime/other", "", nil, nil)
	if code != http.StatusNotFound || !strings.Contains(body, `"errorType":"InvalidRequest"`) {
		t.Errorf("unknown route = %d %s, want 404 InvalidRequest", code, body)
	}

	before := time.Now()
	inv := srv.Enqueue([]byte(`{"a":1}`))
	event, h := rt.next()
	deadline, _ := strconv.ParseInt(h.Get(lambdaruntime.HeaderDeadlineMs), 10, 64)
	if event != `{"a":1}` || h.Get(lambdaruntime.HeaderRequestID) != inv.ID ||
		h.Get(lambdaruntime.HeaderFunctionArn) != "arn:aws:lambda:eu-west-1:000000000000:function:raw" ||
		!strings.HasPrefix(h.Get(lambdaruntime.HeaderTraceID), "Root=1-") ||
		time.UnixMilli(deadline).Before(before.Add(3*time.Second-time.Millisecond)) || time.UnixMilli(deadline).After(time.Now().Add(3*time.Second)) {
		t.Errorf("next = %s with %v; want the event, its id %s, the ARN, a trace id and a deadline 3 s out", event, h, inv.ID)
	}
	if inv.TakenAt().IsZero() {
		t.Error("TakenAt() is zero after /next")
	}
	select {
	case <-srv.InitDone():
	default:
		t.Error("InitDone() is not closed after /next")
	}
	code, _, body = rt.do(http.MethodPost, "/2018-06-01/runtime/init/error", "application/json", strings.NewReader(`{}`), nil)
	if code != http.StatusForbidden || !strings.Contains(body, `"errorType":"InvalidStateTransition"`) {
		t.Errorf("init error after init = %d %s, want 403 InvalidStateTransition", code, body)
	}

	code, _, body = rt.do(http.MethodPost, path+inv.ID+"/response", "application/json", strings.NewReader(`{"ok":true}`), nil)
	if code != http.StatusAccepted || body != `{"status":"OK"}` {
		t.Errorf("response = %d %s, want 202", code, body)
	}
	resp, err := inv.Wait(ctx(t))
	if err != nil {
		t.Fatalf("Wait() = %v", err)
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != `{"ok":true}` || resp.Streamed || resp.ContentType != "application/json" {
		t.Errorf("response = %s (streamed %v, %s), want the buffered JSON", b, resp.Streamed, resp.ContentType)
	}
	for _, route := range []string{"/response", "/error"} {
		code, _, body = rt.do(http.MethodPost, path+inv.ID+route, "application/json", strings.NewReader(`{}`), nil)
		want := fmt.Sprintf(`{"errorMessage":"invocation %s was already answered","errorType":"InvalidStateTransition"}`, inv.ID)
		if code != http.StatusForbidden || body != want {
			t.Errorf("a second answer on %s = %d %s, want 403 %s", route, code, body, want)
		}
	}
}

func TestErrorHeaderAndTrailers(t *testing.T) {
	srv, rt := newServer(t)
	const path = "/2018-06-01/runtime/invocation/"

	// The header's type wins over the document's, and a body that is not JSON is the message.
	inv := srv.Enqueue([]byte(`{}`))
	rt.next()
	rt.do(http.MethodPost, path+inv.ID+"/error", "text/plain", strings.NewReader("plain failure\n"),
		http.Header{lambdaruntime.HeaderErrorType: {"Custom.Type"}})
	var fe *lambdaruntime.FunctionError
	if _, err := inv.Wait(ctx(t)); !errors.As(err, &fe) || fe.Type != "Custom.Type" || fe.Message != "plain failure" {
		t.Errorf("Wait() = %v, want Custom.Type: plain failure", err)
	}

	// A streamed body with error trailers, by the documented header rather than a Function URL.
	inv = srv.Enqueue([]byte(`{}`))
	rt.next()
	pr, pw := io.Pipe()
	req, _ := http.NewRequest(http.MethodPost, rt.base+path+inv.ID+"/response", pr)
	req.Header.Set(lambdaruntime.HeaderResponseMode, "streaming")
	req.Trailer = http.Header{lambdaruntime.HeaderErrorType: nil, lambdaruntime.TrailerErrorBody: nil}
	posted := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		posted <- err
	}()
	resp, err := inv.Wait(ctx(t))
	if err != nil || !resp.Streamed {
		t.Fatalf("Wait() = %v, %v; want a streamed response as soon as it starts", resp, err)
	}
	go func() {
		pw.Write([]byte("some"))
		req.Trailer.Set(lambdaruntime.HeaderErrorType, "Sandbox.Timeout")
		req.Trailer.Set(lambdaruntime.TrailerErrorBody, "eyJlcnJvck1lc3NhZ2UiOiJ0b28gc2xvdyJ9") // {"errorMessage":"too slow"}
		pw.Close()
	}()
	body, err := io.ReadAll(resp.Body)
	if string(body) != "some" || !errors.As(err, &fe) || fe.Phase != "stream" || fe.Type != "Sandbox.Timeout" || fe.Message != "too slow" {
		t.Errorf("body = %q, %v; want \"some\" then Sandbox.Timeout: too slow", body, err)
	}
	if err := <-posted; err != nil {
		t.Errorf("posting the stream: %v", err)
	}
}

func TestRefusedResponses(t *testing.T) {
	srv, rt := newServer(t)
	const path = "/2018-06-01/runtime/invocation/"

	inv := srv.Enqueue([]byte(`{}`))
	rt.next()
	code, _, _ := rt.do(http.MethodPost, path+inv.ID+"/response", "application/octet-stream",
		bytes.NewReader(make([]byte, lambdaruntime.MaxBufferedResponse+1)), nil)
	var fe *lambdaruntime.FunctionError
	if _, err := inv.Wait(ctx(t)); code != http.StatusRequestEntityTooLarge || !errors.As(err, &fe) || fe.Type != "Function.ResponseSizeTooLarge" {
		t.Errorf("an oversized buffered response = %d, Wait() %v; want 413 and Function.ResponseSizeTooLarge", code, err)
	}

	inv = srv.Enqueue([]byte(`{}`))
	rt.next()
	rt.do(http.MethodPost, path+inv.ID+"/response", lambdaruntime.HTTPIntegrationContentType, strings.NewReader(`{"statusCode":200}`), nil)
	if _, err := inv.Wait(ctx(t)); err == nil || !strings.Contains(err.Error(), "ended before its prelude's 8 NUL bytes") {
		t.Errorf("a Function URL response without its delimiter: Wait() = %v", err)
	}
}

func TestWithdrawnAndClosed(t *testing.T) {
	srv, rt := newServer(t)
	gone := srv.Enqueue([]byte(`"gone"`))
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := gone.Wait(cancelled); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait() with a cancelled context = %v", err)
	}
	kept := srv.Enqueue([]byte(`"kept"`))
	if event, h := rt.next(); event != `"kept"` || h.Get(lambdaruntime.HeaderRequestID) != kept.ID {
		t.Errorf("next = %s (%s), want the invocation still waited for", event, h.Get(lambdaruntime.HeaderRequestID))
	}

	srv.Close()
	if _, err := kept.Wait(ctx(t)); err == nil || !strings.Contains(err.Error(), "the server is closed") {
		t.Errorf("Wait() on a closed server = %v", err)
	}
	if _, err := srv.Invoke(ctx(t), []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "the server is closed") {
		t.Errorf("Invoke() on a closed server = %v", err)
	}
}
