// Command fn is the tests' aws-lambda-go function; FN_MODE picks its behaviour:
//
//	echo        answers its event and what the runtime told it, buffered
//	url         a Function URL handler (lambdaurl): 201, headers and a cookie, then "one\n", a
//	            GET of the event's x-gate header URL, then "two\n"
//	error       fails every invocation with "boom"
//	url-broken  a Function URL stream that breaks after "partial"
//	init-error  reports an init error by hand, as a runtime whose init failed does, and exits 1
//	exit        exits 3 before asking for an invocation
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-lambda-go/lambdaurl"
)

func main() {
	switch mode := os.Getenv("FN_MODE"); mode {
	case "echo":
		lambda.Start(func(ctx context.Context, ev json.RawMessage) (map[string]any, error) {
			lc, _ := lambdacontext.FromContext(ctx)
			deadline, _ := ctx.Deadline()
			return map[string]any{
				"event":       ev,
				"requestId":   lc.AwsRequestID,
				"arn":         lc.InvokedFunctionArn,
				"deadlineInS": math.Round(time.Until(deadline).Seconds()),
				"traced":      strings.HasPrefix(os.Getenv("_X_AMZN_TRACE_ID"), "Root=1-"),
			}, nil
		})
	case "url":
		lambdaurl.Start(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Add("X-Test", "a")
			w.Header().Add("X-Test", "b")
			w.Header().Set("Set-Cookie", "c=1")
			w.WriteHeader(http.StatusCreated)
			body, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "one %s %s\n", r.Method, body)
			// The test answers the gate only once it has read "one": the stream is live.
			if resp, err := http.Get(r.Header.Get("x-gate")); err == nil {
				resp.Body.Close()
			}
			fmt.Fprint(w, "two\n")
		}))
	case "error":
		lambda.Start(func(context.Context, json.RawMessage) (any, error) { return nil, errors.New("boom") })
	case "url-broken":
		lambda.Start(func(context.Context, json.RawMessage) (*brokenStream, error) {
			return &brokenStream{r: io.MultiReader(strings.NewReader(`{"statusCode":200}`+"\x00\x00\x00\x00\x00\x00\x00\x00"), strings.NewReader("partial"))}, nil
		})
	case "init-error":
		fmt.Fprintln(os.Stderr, "no config")
		req, _ := http.NewRequest(http.MethodPost, "http://"+os.Getenv("AWS_LAMBDA_RUNTIME_API")+"/2018-06-01/runtime/init/error",
			bytes.NewReader([]byte(`{"errorMessage":"no config","errorType":"Runtime.ConfigError"}`)))
		req.Header.Set("Lambda-Runtime-Function-Error-Type", "Runtime.ConfigError")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
		os.Exit(1)
	case "exit":
		fmt.Fprintln(os.Stderr, "dying")
		os.Exit(3)
	default:
		fmt.Fprintf(os.Stderr, "unknown FN_MODE %q\n", mode)
		os.Exit(2)
	}
}

// brokenStream is a Function URL response whose body fails after its first bytes.
type brokenStream struct{ r io.Reader }

func (b *brokenStream) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		return n, errors.New("stream broke")
	}
	return n, err
}

func (b *brokenStream) ContentType() string {
	return "application/vnd.awslambda.http-integration-response"
}
