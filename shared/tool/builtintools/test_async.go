package builtintools

// test_async: a local execute tool that waits delayMs milliseconds and returns the echo it was
// given, to exercise async wrapping (config.tools.test_async.async: true) without an outside
// service. The wrapping is the harness's: the tool itself only waits. Its maxDelayMs option caps
// how long a model may make it wait.

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentharness/harness/shared/tool"
)

const testAsyncDefaultMaxDelayMs = 30000

var testAsyncSpec = Spec{
	New:     testAsync,
	Options: json.RawMessage(`{"type":"object","properties":{"maxDelayMs":{"type":"integer","minimum":0,"maximum":900000}},"additionalProperties":false}`),
}

func testAsync(c Context) ([]tool.Tool, error) {
	opts := struct {
		MaxDelayMs *int64 `json:"maxDelayMs"`
	}{}
	if err := c.Options.Decode(&opts); err != nil {
		return nil, err
	}
	maxDelay := int64(testAsyncDefaultMaxDelayMs)
	if opts.MaxDelayMs != nil {
		maxDelay = *opts.MaxDelayMs
	}
	return []tool.Tool{{
		Name:        "test_async",
		Description: "Waits delayMs milliseconds, then returns the echo it was given. For testing slow tools.",
		InputSchema: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{
			"echo":{"type":"string","maxLength":1000,"description":"Text to return."},
			"delayMs":{"type":"number","minimum":0,"maximum":%d,"description":"How long to wait first, in milliseconds."}
		},"required":["echo"],"additionalProperties":false}`, maxDelay)),
		Execute: func(ctx context.Context, input json.RawMessage) (any, error) {
			var args struct {
				Echo    string  `json:"echo"`
				DelayMs float64 `json:"delayMs"`
			}
			if err := json.Unmarshal(input, &args); err != nil {
				return nil, err
			}
			d := time.Duration(args.DelayMs * float64(time.Millisecond))
			timer := time.NewTimer(d)
			defer timer.Stop()
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("stopped before its %s delay had passed: %w", d, ctx.Err())
			case <-timer.C:
			}
			return map[string]string{"echo": args.Echo}, nil
		},
	}}, nil
}
