package testenv

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentharness/harness/shared/tool"
)

// RunTool runs one call of set's tool name with input in ctx, as the loop would, and decodes
// its result, a JSON object; a tool error is returned as the model would be told it.
func RunTool(t testing.TB, ctx context.Context, set *tool.Set, name, input string) (map[string]any, error) {
	t.Helper()
	c, err := set.Prepare(name, json.RawMessage(input))
	if err != nil {
		t.Fatalf("%s %s: %v", name, input, err)
	}
	raw, err := c.Run(ctx)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out, nil
}
