package googlemodel

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/agentharness/harness/shared/wire/retryafter"
)

const (
	// maxRetries bounds the attempts after the first.
	maxRetries = 2
	// firstBackoff is the wait before the first retry when the answer names none; each retry
	// doubles it.
	firstBackoff = 500 * time.Millisecond
	// maxWait is the longest wait worth taking: a longer one is a spent quota, not a blip.
	maxWait = 30 * time.Second
	// maxErrorBody bounds how much of a retryable error's body is read for its retry delay.
	maxErrorBody = 64 << 10
)

// retryTransport retries a request that Gemini answered 429 or 5xx, waiting as the answer asks
// (Retry-After, or the RetryInfo detail Gemini puts in its error body) or with exponential
// backoff. It decides on the status alone, before anything reads the body, so a stream that has
// begun is never repeated. A wait that would end past the context's deadline is not taken: the
// failed answer comes back at once, leaving the caller its remaining time.
type retryTransport struct {
	base http.RoundTripper
}

func newRetryTransport(base http.RoundTripper) *retryTransport {
	return &retryTransport{base: base}
}

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	for attempt := 0; ; attempt++ {
		r := req
		if attempt > 0 {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			r = req.Clone(ctx)
			r.Body = body
		}
		resp, err := t.base.RoundTrip(r)
		if err != nil {
			return nil, err
		}
		replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
		if attempt == maxRetries || !retryable(resp.StatusCode) || !replayable {
			record(ctx, resp)
			return resp, nil
		}
		wait, ok := retryWait(resp, attempt)
		if !ok || !fitsDeadline(ctx, wait) {
			record(ctx, resp)
			return resp, nil
		}
		resp.Body.Close()
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-timer.C:
		}
	}
}

func retryable(status int) bool {
	return status == http.StatusTooManyRequests || status >= 500
}

// retryWait returns how long to wait before retrying resp, and false when the wait the server
// asks for is too long to be worth it. It reads resp's body and replaces it with a copy.
func retryWait(resp *http.Response, attempt int) (time.Duration, bool) {
	if d, ok := retryafter.Wait(resp.Header); ok {
		return d, d <= maxWait
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if d, ok := retryInfo(body); ok {
		return d, d <= maxWait
	}
	// Half fixed, half random, so clients that failed together do not retry together.
	d := firstBackoff << attempt
	return d/2 + rand.N(d/2), true
}

// retryInfo finds the google.rpc.RetryInfo detail of a Google API error body, which is how
// Gemini says when to retry a 429.
func retryInfo(body []byte) (time.Duration, bool) {
	var e struct {
		Error struct {
			Details []struct {
				Type       string `json:"@type"`
				RetryDelay string `json:"retryDelay"`
			} `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return 0, false
	}
	for _, d := range e.Error.Details {
		if d.Type != "type.googleapis.com/google.rpc.RetryInfo" {
			continue
		}
		// A protobuf Duration in JSON: decimal seconds with an "s" suffix, such as "37s".
		if d, err := time.ParseDuration(d.RetryDelay); err == nil && d >= 0 {
			return d, true
		}
	}
	return 0, false
}

func fitsDeadline(ctx context.Context, wait time.Duration) bool {
	deadline, ok := ctx.Deadline()
	return !ok || time.Until(deadline) > wait
}

// record notes the final response's request id for the error Stream may build from it.
func record(ctx context.Context, resp *http.Response) {
	meta, ok := ctx.Value(metaKey{}).(*responseMeta)
	if !ok {
		return
	}
	for _, h := range requestIDHeaders {
		if v := resp.Header.Get(h); v != "" {
			meta.requestID = v
			return
		}
	}
}
