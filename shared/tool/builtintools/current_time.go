package builtintools

// current_time: the built-in sync tool that proves the tool path. No arguments; returns the
// current time in RFC 3339 (UTC).

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agentharness/harness/shared/tool"
)

func currentTime(Context) ([]tool.Tool, error) {
	return []tool.Tool{{
		Name:        "current_time",
		Description: "Returns the current date and time in RFC 3339 format (UTC).",
		InputSchema: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`),
		Execute: func(context.Context, json.RawMessage) (any, error) {
			return time.Now().UTC().Format(time.RFC3339), nil
		},
	}}, nil
}
