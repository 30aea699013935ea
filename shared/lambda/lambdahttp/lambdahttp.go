// Package lambdahttp runs an http.Handler on Lambda for both ways the SAM template reaches a
// function: a Function URL in RESPONSE_STREAM mode (streamed) and HttpApi events, which is how
// `sam local start-api` and API Gateway call it (buffered).
package lambdahttp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdaurl"
)

// Start serves h until the Lambda runtime stops.
func Start(h http.Handler) {
	lambda.Start(Handler(h))
}

// Handler returns a Lambda handler for h. API Gateway HTTP API events carry a route key such as
// "POST /"; Function URL events carry "$default" and get a streamed response.
func Handler(h http.Handler) func(context.Context, json.RawMessage) (any, error) {
	stream := lambdaurl.Wrap(h)
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		var probe struct {
			RouteKey string `json:"routeKey"`
		}
		if err := json.Unmarshal(raw, &probe); err != nil {
			return nil, fmt.Errorf("decoding event: %w", err)
		}
		if probe.RouteKey != "" && probe.RouteKey != "$default" {
			var ev events.APIGatewayV2HTTPRequest
			if err := json.Unmarshal(raw, &ev); err != nil {
				return nil, fmt.Errorf("decoding HTTP API event: %w", err)
			}
			return buffered(ctx, h, &ev)
		}
		var ev events.LambdaFunctionURLRequest
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, fmt.Errorf("decoding Function URL event: %w", err)
		}
		return stream(ctx, &ev)
	}
}

func buffered(ctx context.Context, h http.Handler, ev *events.APIGatewayV2HTTPRequest) (*events.APIGatewayV2HTTPResponse, error) {
	body := ev.Body
	if ev.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(body)
		if err != nil {
			return nil, fmt.Errorf("decoding base64 body: %w", err)
		}
		body = string(b)
	}
	url := ev.RawPath
	if ev.RawQueryString != "" {
		url += "?" + ev.RawQueryString
	}
	req, err := http.NewRequestWithContext(ctx, ev.RequestContext.HTTP.Method, url, strings.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building request: %w", err)
	}
	for k, v := range ev.Headers {
		req.Header.Set(k, v)
	}
	req.RemoteAddr = ev.RequestContext.HTTP.SourceIP
	// The host the request was sent to, as a server's request has it (and lambdaurl's does):
	// a page's Origin is compared with it (callers.Resolver.Origin).
	req.Host = ev.RequestContext.DomainName
	rec := &recorder{header: http.Header{}, code: http.StatusOK}
	h.ServeHTTP(rec, req)
	res := &events.APIGatewayV2HTTPResponse{StatusCode: rec.code, Headers: map[string]string{}}
	for k, v := range rec.header {
		res.Headers[k] = strings.Join(v, ",")
	}
	if b := rec.body.Bytes(); utf8.Valid(b) {
		res.Body = string(b)
	} else {
		res.Body, res.IsBase64Encoded = base64.StdEncoding.EncodeToString(b), true
	}
	return res, nil
}

// recorder buffers a whole response, for invocations that cannot stream.
type recorder struct {
	header      http.Header
	code        int
	wroteHeader bool
	body        bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if !r.wroteHeader {
		r.code, r.wroteHeader = code, true
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(p)
}
