package bedrockmodel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentharness/harness/shared/wire/retryafter"
	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// withinDeadline wraps the client's retryer for one call to ctx. It keeps the retryer's
// decisions and backoff, but waits at least as long as a failed answer asks (Retry-After, or
// AWS's x-amz-retry-after), which the standard retryer ignores; and when that wait would end
// past ctx's deadline it does not retry: the failed answer comes back at once, with its status
// and request id, leaving the caller its remaining time. The standard retryer alone would sleep
// into the deadline and return only a canceled request, or retry sooner than the server allows.
func withinDeadline(ctx context.Context, r aws.Retryer) aws.RetryerV2 {
	v2, ok := r.(aws.RetryerV2)
	if !ok {
		v2 = retryerV2{r}
	}
	return &deadlineRetryer{RetryerV2: v2, ctx: ctx}
}

type deadlineRetryer struct {
	aws.RetryerV2
	ctx context.Context
}

func (r *deadlineRetryer) RetryDelay(attempt int, err error) (time.Duration, error) {
	wait, derr := r.RetryerV2.RetryDelay(attempt, err)
	if derr != nil {
		return wait, derr
	}
	if d, ok := serverWait(err); ok && d > wait {
		wait = d
	}
	if deadline, ok := r.ctx.Deadline(); ok && time.Until(deadline) <= wait {
		// The retry middleware returns this error as the call's: it keeps the answer's.
		return 0, &deadlineError{err: err, wait: wait}
	}
	return wait, nil
}

// deadlineError is a failed attempt not retried because the wait before the retry would
// outlast the deadline. It unwraps to the attempt's error, so its status and request id stay.
type deadlineError struct {
	err  error
	wait time.Duration
}

func (e *deadlineError) Error() string {
	return fmt.Sprintf("%v (not retried: waiting %v would pass the deadline)", e.err, e.wait.Round(time.Millisecond))
}

func (e *deadlineError) Unwrap() error { return e.err }

// retryerV2 adapts a retryer without GetAttemptToken, as the SDK itself does.
type retryerV2 struct{ aws.Retryer }

func (r retryerV2) GetAttemptToken(context.Context) (func(error) error, error) {
	return r.GetInitialToken(), nil
}

// serverWait reads the wait a failed answer asks for (x-amz-retry-after or Retry-After).
func serverWait(err error) (time.Duration, bool) {
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.Response == nil || re.Response.Response == nil {
		return 0, false
	}
	return retryafter.Wait(re.Response.Header)
}
