package sandbox

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
)

// MaxLambdaPayload bounds the JSON of a request and of a result in AWS: Lambda's limit of a
// synchronous invocation's payload, each way, is 6 MB.
const MaxLambdaPayload = 6 << 20

// LambdaClient is the call of the AWS SDK's Lambda client that Lambda makes.
type LambdaClient interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, opts ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// Lambda runs commands in the sandbox function (functions/sandbox, Direct in a Lambda
// execution environment of its own), which takes a Request as its event and returns a Result.
type Lambda struct {
	Client LambdaClient
	// Function is the sandbox function's name or ARN.
	Function string
}

var _ Runner = (*Lambda)(nil)

// Run invokes the function with req, refusing it first when req.Check does or when its JSON
// is larger than Lambda takes. The function's error (a request it refused, a crash) is an
// error, as is a result that is not one.
func (l *Lambda) Run(ctx context.Context, req Request) (Result, error) {
	if err := req.Check(); err != nil {
		return Result{}, err
	}
	payload, err := json.Marshal(req)
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: %w", err)
	}
	if len(payload) > MaxLambdaPayload {
		return Result{}, fmt.Errorf("sandbox: the request is %d bytes of JSON, more than the %d the sandbox function takes: give it fewer or smaller files", len(payload), MaxLambdaPayload)
	}
	out, err := l.Client.Invoke(ctx, &lambda.InvokeInput{
		FunctionName: &l.Function, InvocationType: types.InvocationTypeRequestResponse, Payload: payload,
	})
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: invoking the sandbox function: %w", err)
	}
	if out.FunctionError != nil {
		var e struct {
			Message string `json:"errorMessage"`
			Type    string `json:"errorType"`
		}
		json.Unmarshal(out.Payload, &e)
		if e.Message == "" {
			e.Message = string(truncate(out.Payload, 500))
		}
		return Result{}, fmt.Errorf("sandbox: the sandbox function failed (%s %s): %s", *out.FunctionError, e.Type, e.Message)
	}
	if len(out.Payload) > MaxLambdaPayload {
		return Result{}, fmt.Errorf("sandbox: the sandbox function's result is %d bytes, more than Lambda's limit of %d", len(out.Payload), MaxLambdaPayload)
	}
	var res Result
	if err := json.Unmarshal(out.Payload, &res); err != nil {
		return Result{}, fmt.Errorf("sandbox: the sandbox function's result: %w", err)
	}
	// The command runs as the function's own user and might answer for it: what it hands back
	// is held to what a result may be.
	if err := res.check(req); err != nil {
		return Result{}, fmt.Errorf("sandbox: the sandbox function's result: %w", err)
	}
	return res, nil
}

// check refuses a result no run of req can give: files the walk would not hand back, or more
// than req's limits let through.
func (r *Result) check(req Request) error {
	lim := req.Limits.WithDefaults()
	if len(r.Changed) > lim.MaxFiles {
		return fmt.Errorf("%d changed files, more than limits.maxFiles (%d)", len(r.Changed), lim.MaxFiles)
	}
	var total int64
	for i, f := range r.Changed {
		if err := CheckPath(f.Path); err != nil {
			return fmt.Errorf("changed[%d].path: %w", i, err)
		}
		if f.Mode&^0o777 != 0 {
			return fmt.Errorf("changed[%d].mode: %#o has bits beyond 0777", i, f.Mode)
		}
		total += int64(len(f.Content))
	}
	if total > lim.MaxBytes {
		return fmt.Errorf("changed files of %d bytes, more than limits.maxBytes (%d)", total, lim.MaxBytes)
	}
	for i, p := range r.Deleted {
		if err := CheckPath(p); err != nil {
			return fmt.Errorf("deleted[%d]: %w", i, err)
		}
	}
	return nil
}

// Fit leaves out of r's Changed, last first, the files that would make its JSON larger than
// max, naming them in Skipped: the sandbox function's result must fit in Lambda's response.
func (r *Result) Fit(max int) error {
	for {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		size := len(b)
		if size <= max || len(r.Changed) == 0 {
			return nil
		}
		for size > max && len(r.Changed) > 0 {
			last := r.Changed[len(r.Changed)-1]
			f, _ := json.Marshal(last)
			size -= len(f) + 1
			r.Changed = r.Changed[:len(r.Changed)-1]
			r.ChangedTruncated = true
			if len(r.Skipped) < MaxSkipped {
				r.Skipped = append(r.Skipped, Skipped{Path: last.Path, Reason: fmt.Sprintf("past the %d bytes of a result in AWS (Lambda's limit)", max)})
			}
		}
	}
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}
