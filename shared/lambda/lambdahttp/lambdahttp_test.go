package lambdahttp_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/agentharness/harness/shared/lambda/lambdahttp"
	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"
)

// echo describes the request it got in headers and the body, so one handler serves every case.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("X-Method", r.Method)
	w.Header().Set("X-Path", r.URL.Path)
	w.Header().Set("X-Query", r.URL.RawQuery)
	w.Header().Set("X-Api-Key", r.Header.Get("X-Api-Key"))
	w.Header().Set("X-Remote", r.RemoteAddr)
	w.Header().Set("X-Host", r.Host)
	w.Header().Add("X-Multi", "a")
	w.Header().Add("X-Multi", "b")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, "got %s", body)
})

func marshal(t *testing.T, ev any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatalf("encoding the event: %v", err)
	}
	return b
}

func httpAPIEvent(body string, base64Body bool) events.APIGatewayV2HTTPRequest {
	ev := events.APIGatewayV2HTTPRequest{
		Version:         "2.0",
		RouteKey:        "POST /",
		RawPath:         "/agents/a1/turns",
		RawQueryString:  "stream=false&x=1",
		Headers:         map[string]string{"content-type": "application/json", "x-api-key": "secret"},
		Body:            body,
		IsBase64Encoded: base64Body,
	}
	ev.RequestContext.HTTP.Method = http.MethodPost
	ev.RequestContext.HTTP.Path = "/agents/a1/turns"
	ev.RequestContext.HTTP.SourceIP = "203.0.113.7"
	ev.RequestContext.DomainName = "api.example.com"
	return ev
}

func TestHTTPAPIEvent(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		base64Body bool
		wantBody   string
	}{
		{name: "plain body", body: `{"message":"hi"}`, wantBody: `got {"message":"hi"}`},
		{name: "base64 body", body: base64.StdEncoding.EncodeToString([]byte(`{"message":"hé"}`)), base64Body: true, wantBody: `got {"message":"hé"}`},
		{name: "empty body", body: "", wantBody: "got "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := lambdahttp.Handler(echo)(context.Background(), marshal(t, httpAPIEvent(tt.body, tt.base64Body)))
			if err != nil {
				t.Fatalf("handler: %v", err)
			}
			res, ok := out.(*events.APIGatewayV2HTTPResponse)
			if !ok {
				t.Fatalf("response is %T, want *events.APIGatewayV2HTTPResponse", out)
			}
			want := &events.APIGatewayV2HTTPResponse{
				StatusCode: http.StatusCreated,
				Headers: map[string]string{
					"Content-Type": "text/plain",
					"X-Method":     "POST",
					"X-Path":       "/agents/a1/turns",
					"X-Query":      "stream=false&x=1",
					"X-Api-Key":    "secret",
					"X-Remote":     "203.0.113.7",
					"X-Host":       "api.example.com",
					"X-Multi":      "a,b",
				},
				Body: tt.wantBody,
			}
			if diff := cmp.Diff(want, res); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHTTPAPIBinaryResponse(t *testing.T) {
	binary := []byte{0xff, 0xfe, 0x00, 0x01}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(binary)
	})
	out, err := lambdahttp.Handler(h)(context.Background(), marshal(t, httpAPIEvent("", false)))
	if err != nil {
		t.Fatalf("handler: %v", err)
	}
	res, ok := out.(*events.APIGatewayV2HTTPResponse)
	if !ok {
		t.Fatalf("response is %T, want *events.APIGatewayV2HTTPResponse", out)
	}
	want := &events.APIGatewayV2HTTPResponse{
		StatusCode:      http.StatusOK,
		Headers:         map[string]string{"Content-Type": "application/octet-stream"},
		Body:            base64.StdEncoding.EncodeToString(binary),
		IsBase64Encoded: true,
	}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
}

func TestHTTPAPIStatus(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    *events.APIGatewayV2HTTPResponse
	}{
		{
			name:    "nothing written is 200 with no body",
			handler: func(http.ResponseWriter, *http.Request) {},
			want:    &events.APIGatewayV2HTTPResponse{StatusCode: http.StatusOK, Headers: map[string]string{}},
		},
		{
			name: "the first WriteHeader wins",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusAccepted)
				w.WriteHeader(http.StatusInternalServerError)
				io.WriteString(w, "accepted")
			},
			want: &events.APIGatewayV2HTTPResponse{StatusCode: http.StatusAccepted, Headers: map[string]string{}, Body: "accepted"},
		},
		{
			name: "a write before WriteHeader means 200",
			handler: func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, "ok")
				w.WriteHeader(http.StatusTeapot)
			},
			want: &events.APIGatewayV2HTTPResponse{StatusCode: http.StatusOK, Headers: map[string]string{}, Body: "ok"},
		},
		{
			// Streaming handlers flush best effort; a buffered invocation must still get every byte.
			name: "flushing handler",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				io.WriteString(w, "data: one\n\n")
				http.NewResponseController(w).Flush()
				io.WriteString(w, "data: [DONE]\n\n")
			},
			want: &events.APIGatewayV2HTTPResponse{
				StatusCode: http.StatusOK,
				Headers:    map[string]string{"Content-Type": "text/event-stream"},
				Body:       "data: one\n\ndata: [DONE]\n\n",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := lambdahttp.Handler(tt.handler)(context.Background(), marshal(t, httpAPIEvent("", false)))
			if err != nil {
				t.Fatalf("handler: %v", err)
			}
			if diff := cmp.Diff(any(tt.want), out); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHTTPAPIRouteKeys(t *testing.T) {
	// Any route key but "$default" is an HttpApi event and gets a buffered response.
	for _, key := range []string{"POST /", "GET /agents/{id}", "ANY /{proxy+}"} {
		ev := httpAPIEvent("", false)
		ev.RouteKey = key
		out, err := lambdahttp.Handler(echo)(context.Background(), marshal(t, ev))
		if err != nil {
			t.Fatalf("route key %q: %v", key, err)
		}
		if _, ok := out.(*events.APIGatewayV2HTTPResponse); !ok {
			t.Errorf("route key %q: response is %T, want *events.APIGatewayV2HTTPResponse", key, out)
		}
	}
}

func functionURLEvent(body string, base64Body bool) events.LambdaFunctionURLRequest {
	ev := events.LambdaFunctionURLRequest{
		Version:         "2.0",
		RawPath:         "/agents/a1/turns",
		RawQueryString:  "stream=true",
		Headers:         map[string]string{"x-api-key": "secret"},
		Body:            body,
		IsBase64Encoded: base64Body,
	}
	ev.RequestContext.DomainName = "abc123.lambda-url.us-east-1.on.aws"
	ev.RequestContext.HTTP.Method = http.MethodPost
	ev.RequestContext.HTTP.SourceIP = "198.51.100.4"
	return ev
}

func TestFunctionURLEvent(t *testing.T) {
	tests := []struct {
		name       string
		routeKey   string // empty: the event has none
		body       string
		base64Body bool
		wantBody   string
	}{
		{name: "default route", routeKey: "$default", body: `{"message":"hi"}`, wantBody: `got {"message":"hi"}`},
		{name: "no route key", body: `{"message":"hi"}`, wantBody: `got {"message":"hi"}`},
		{name: "base64 body", routeKey: "$default", body: base64.StdEncoding.EncodeToString([]byte("ping")), base64Body: true, wantBody: "got ping"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// LambdaFunctionURLRequest has no routeKey field; add it the way AWS sends it.
			ev := functionURLEvent(tt.body, tt.base64Body)
			raw := map[string]any{}
			if err := json.Unmarshal(marshal(t, ev), &raw); err != nil {
				t.Fatal(err)
			}
			if tt.routeKey != "" {
				raw["routeKey"] = tt.routeKey
			}
			out, err := lambdahttp.Handler(echo)(context.Background(), marshal(t, raw))
			if err != nil {
				t.Fatalf("handler: %v", err)
			}
			res, ok := out.(*events.LambdaFunctionURLStreamingResponse)
			if !ok {
				t.Fatalf("response is %T, want *events.LambdaFunctionURLStreamingResponse", out)
			}
			body, err := io.ReadAll(res.Body)
			if err != nil {
				t.Fatalf("reading the streamed body: %v", err)
			}
			if got := string(body); got != tt.wantBody {
				t.Errorf("body = %q, want %q", got, tt.wantBody)
			}
			if res.StatusCode != http.StatusCreated {
				t.Errorf("status = %d, want %d", res.StatusCode, http.StatusCreated)
			}
			wantHeaders := map[string]string{
				"Content-Type": "text/plain",
				"X-Method":     "POST",
				"X-Path":       "/agents/a1/turns",
				"X-Query":      "stream=true",
				"X-Api-Key":    "secret",
				"X-Remote":     "198.51.100.4",
				"X-Host":       "abc123.lambda-url.us-east-1.on.aws",
				"X-Multi":      "a,b",
			}
			if diff := cmp.Diff(wantHeaders, res.Headers); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
		})
	}
}

// The streamed body carries each write as the handler makes it: the handler below cannot
// finish before the test has read its first frame.
func TestFunctionURLStreams(t *testing.T) {
	firstRead := make(chan struct{})
	release := sync.OnceFunc(func() { close(firstRead) })
	defer release() // never leave the handler blocked, even when the test fails early
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: one\n\n")
		<-firstRead
		io.WriteString(w, "data: two\n\n")
	})
	out, err := lambdahttp.Handler(h)(context.Background(), marshal(t, map[string]any{
		"routeKey":       "$default",
		"rawPath":        "/",
		"requestContext": map[string]any{"http": map[string]any{"method": "POST"}},
	}))
	if err != nil {
		t.Fatalf("handler: %v", err)
	}
	res, ok := out.(*events.LambdaFunctionURLStreamingResponse)
	if !ok {
		t.Fatalf("response is %T, want *events.LambdaFunctionURLStreamingResponse", out)
	}
	first := make([]byte, len("data: one\n\n"))
	if _, err := io.ReadFull(res.Body, first); err != nil {
		t.Fatalf("reading the first frame: %v", err)
	}
	release()
	rest, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("reading the rest: %v", err)
	}
	if diff := cmp.Diff([]string{"data: one\n\n", "data: two\n\n"}, []string{string(first), string(rest)}); diff != "" {
		t.Errorf("streamed frames (-want +got):\n%s", diff)
	}
	if got := res.Headers["Content-Type"]; got != "text/event-stream" {
		t.Errorf("Content-Type = %q, want text/event-stream", got)
	}
}

func TestBadEvents(t *testing.T) {
	tests := []struct {
		name  string
		event string
		want  string
	}{
		{name: "not JSON", event: `{"routeKey":`, want: "decoding event"},
		{name: "not an object", event: `["POST /"]`, want: "decoding event"},
		{
			name:  "HttpApi event with a body that is not base64",
			event: `{"routeKey":"POST /","rawPath":"/","requestContext":{"http":{"method":"POST"}},"body":"%%%","isBase64Encoded":true}`,
			want:  "decoding base64 body",
		},
		{
			name:  "HttpApi event with a bad method",
			event: `{"routeKey":"POST /","rawPath":"/","requestContext":{"http":{"method":"BAD METHOD"}}}`,
			want:  "building request",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := lambdahttp.Handler(echo)(context.Background(), json.RawMessage(tt.event))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("handler() = %v, %v; want an error containing %q", out, err, tt.want)
			}
		})
	}
}
