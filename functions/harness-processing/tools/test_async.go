package tools

// test_async: a local execute tool that sleeps and returns, to exercise async wrapping
// (config.tools.test_async.async: true) without an outside service. Its maxSeconds option caps
// how long a model may make it sleep.

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentharness/harness/shared/tool"
)

var testAsyncSpec = Spec{
	New:     testAsync,
	Options: json.RawMessage(`{"type":"object","properties":{"maxSeconds":{"type":"number","exclusiveMinimum":0,"maximum":900}},"additionalProperties":false}`),
}

func testAsync(c Context) ([]tool.Tool, error) {
	var opts struct {
		MaxSeconds float64 `json:"maxSeconds"`
	}
	if err := c.Options.Decode(&opts); err != nil {
		return nil, err
	}
	if opts.MaxSeconds == 0 {
		opts.MaxSeconds = 30
	}
	return []tool.Tool{{
		Name:        "test_async",
		Description: "Waits the given number of seconds, then returns the label it was given. For testing slow tools.",
		InputSchema: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"seconds":{"type":"number","minimum":0,"maximum":%g},"label":{"type":"string","maxLength":200}},"required":["seconds"],"additionalProperties":false}`, opts.MaxSeconds)),
		Execute: func(ctx context.Context, input json.RawMessage) (any, error) {
			var args struct {
				Seconds float64 `json:"seconds"`
				Label   string  `json:"label"`
			}
			if err := json.Unmarshal(input, &args); err != nil {
				return nil, err
			}
			d := time.Duration(args.Seconds * float64(time.Second))
			timer := time.NewTimer(d)
			defer timer.Stop()
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("stopped before %s had passed: %w", d, ctx.Err())
			case <-timer.C:
			}
			return map[string]any{"label": args.Label, "sleptMs": d.Milliseconds()}, nil
		},
	}}, nil
}
